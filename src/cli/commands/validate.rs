//! `podhost validate FILE|DIR… [-o json] [--node-name N]`: checks manifests without a
//! daemon, through the same code the daemon admits pods with
//! ([`crate::source::check_manifest`]). For each manifest: its errors (field path and
//! message), then every field it sets and whether podhost honours, ignores (why) or
//! rejects (why) it — so nothing a manifest asks for is dropped silently — and notes on
//! how podhost applies what the fields alone do not show (a content volume mounted
//! read-only whatever its mount says, the size of each memory-backed volume). Run on a
//! host whose cgroups cannot apply a resource field (cgroup v1), that field is "not
//! enforced on this host", never "honoured".

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::daemon::resolve_node_name;
use crate::model::cgroup_enforcement::HostEnforcement;
use crate::model::volume_confinement::{forced_read_only_mounts, memory_volumes};
use crate::source::{ManifestCheck, check_manifest, mark_host_enforcement};

/// One manifest's verdict: the `-o json` element (field names are a stable interface).
#[derive(Debug, Serialize)]
pub struct Verdict {
    /// The manifest file, as given (or as found in a given directory).
    pub file: String,
    /// `metadata.name` as written, `null` when the file has none.
    pub pod: Option<String>,
    /// What stops the pod from running; empty when it is valid.
    pub errors: Vec<Finding>,
    /// Every field the manifest sets, at the level podhost decides it.
    pub fields: Vec<FieldLine>,
    /// How podhost applies what the fields alone do not show (a valid pod only).
    pub notes: Vec<Finding>,
}

/// One error, or one note.
#[derive(Debug, Serialize)]
pub struct Finding {
    /// The JSON path (`spec.containers[1].livenessProbe.httpGet.port`); empty when
    /// the error is about the whole file.
    pub field: String,
    /// What is wrong and what to do; for a note, what podhost does.
    pub message: String,
}

/// One field and what podhost does with it.
#[derive(Debug, Serialize)]
pub struct FieldLine {
    /// The JSON path.
    pub path: String,
    /// `honoured`, `ignored`, `rejected` or `not-enforced` (on this host).
    pub status: &'static str,
    /// Why it is ignored or rejected; empty when honoured.
    pub reason: &'static str,
}

/// Checks every manifest; prints the verdicts; 1 when any has an error.
pub fn run(paths: &[PathBuf], output: Option<&str>, node_name: Option<&str>) -> Result<i32> {
    let json = match output {
        None => false,
        Some("json") => true,
        Some(other) => bail!("unknown output format {other:?}; use -o json, or no -o for text"),
    };
    let node = resolve_node_name(node_name)?;
    let files = manifests(paths)?;
    let host = crate::runtime::node_cgroups::probe_host();
    let verdicts = verdicts(&files, &node, host);
    if json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        print!("{}", render_text(&verdicts));
    }
    Ok(i32::from(verdicts.iter().any(|v| !v.errors.is_empty())))
}

/// The files to check: each FILE, and each DIR's non-dot entries in name order (as the
/// daemon reads its manifest directory; a subdirectory is reported, not entered).
fn manifests(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("{}: cannot list the directory", path.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .collect();
        entries.sort();
        out.extend(entries);
    }
    Ok(out)
}

/// One verdict per file, for a host that enforces `host`; a second file defining the
/// same pod is an error, as in the daemon's scan.
pub fn verdicts(files: &[PathBuf], node: &str, host: HostEnforcement) -> Vec<Verdict> {
    let mut defined: HashMap<(String, String), String> = HashMap::new();
    files
        .iter()
        .map(|file| {
            let mut check = check_manifest(file, node);
            mark_host_enforcement(&mut check.fields, host);
            let mut v = verdict(file, &check);
            if let Ok(pod) = &check.pod {
                let key = (pod.namespace.clone(), pod.name.clone());
                match defined.get(&key) {
                    Some(first) => v.errors.push(Finding {
                        field: "metadata.name".into(),
                        message: format!(
                            "pod {}/{} is already defined by {first}; the daemon ignores this file, rename the pod or remove one of the files",
                            key.0, key.1
                        ),
                    }),
                    None => {
                        defined.insert(key, v.file.clone());
                    }
                }
            }
            v
        })
        .collect()
}

fn verdict(file: &Path, check: &ManifestCheck) -> Verdict {
    let errors = match &check.pod {
        Ok(_) => Vec::new(),
        Err(e) => e
            .findings()
            .into_iter()
            .map(|(field, message)| Finding { field, message })
            .collect(),
    };
    // One line per problem: a field with an error line gets no field line besides it
    // (an unknown field would also be listed as "ignored: not honoured yet").
    let with_error: std::collections::HashSet<String> =
        errors.iter().map(|e| e.field.clone()).collect();
    Verdict {
        file: file.display().to_string(),
        pod: check.name.clone(),
        errors,
        notes: check
            .pod
            .as_ref()
            .map(|p| notes(&p.pod))
            .unwrap_or_default(),
        fields: check
            .fields
            .iter()
            .filter(|f| !with_error.contains(&f.path))
            .map(|f| FieldLine {
                path: f.path.clone(),
                status: f.status.as_str(),
                reason: f.status.reason(),
            })
            .collect(),
    }
}

/// The notes on a valid pod: each mount forced read-only, and each memory-backed
/// volume's tmpfs size (the node's allocatable memory is not known here: the notes say
/// where it decides), sorted by field.
fn notes(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<Finding> {
    let mounts = forced_read_only_mounts(pod).into_iter().map(|m| Finding {
        message: m.note(),
        field: m.field,
    });
    let volumes = memory_volumes(pod, 0).into_iter().map(|v| Finding {
        message: v.note(),
        field: v.field,
    });
    let mut out: Vec<Finding> = mounts.chain(volumes).collect();
    out.sort_by(|a, b| a.field.cmp(&b.field));
    out
}

/// For people: per file a heading, then one line per finding (errors first, notes
/// last), then a summary.
pub fn render_text(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    for v in verdicts {
        let pod = v
            .pod
            .as_deref()
            .map(|p| format!(" (pod {p})"))
            .unwrap_or_default();
        let state = if v.errors.is_empty() {
            "valid"
        } else {
            "INVALID"
        };
        out.push_str(&format!("{}{pod}: {state}\n", v.file));
        for e in &v.errors {
            let at = if e.field.is_empty() {
                String::new()
            } else {
                format!("{}: ", e.field)
            };
            out.push_str(&format!("  error     {at}{}\n", e.message));
        }
        for f in &v.fields {
            let why = if f.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", f.reason)
            };
            out.push_str(&format!("  {:<9} {}{why}\n", f.status, f.path));
        }
        for n in &v.notes {
            out.push_str(&format!("  note      {}: {}\n", n.field, n.message));
        }
    }
    let bad = verdicts.iter().filter(|v| !v.errors.is_empty()).count();
    let count = |status: &str| {
        verdicts
            .iter()
            .flat_map(|v| &v.fields)
            .filter(|f| f.status == status)
            .count()
    };
    let ignored = count("ignored");
    out.push_str(&format!(
        "{} manifest{}, {bad} with errors, {ignored} ignored field{}",
        verdicts.len(),
        if verdicts.len() == 1 { "" } else { "s" },
        if ignored == 1 { "" } else { "s" },
    ));
    match count("not-enforced") {
        0 => out.push('\n'),
        n => out.push_str(&format!(
            ", {n} field{} not enforced on this host\n",
            if n == 1 { "" } else { "s" }
        )),
    }
    out
}
