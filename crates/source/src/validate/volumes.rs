//! `spec.volumes` (names, exactly one source, each source's own rules) and every
//! container's `volumeMounts` (a declared volume, an absolute unique mountPath, a
//! subPath that stays below the volume, propagation rules).

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, KeyToPath, PodSpec, Volume};

use super::Errs;
use super::container::{Ctx, one_source, required_name};
use super::downward::{self, Use};
use super::names::{descending_path, dns1123_label};
use crate::error::ValueError;
use podhost_model::quantity::Quantity;

const COMMON_SOURCES: &[&str] = &[
    "emptyDir",
    "hostPath",
    "configMap",
    "secret",
    "downwardAPI",
    "projected",
    "(or another volume type)",
];

const PROJECTIONS: &[&str] = &[
    "secret",
    "configMap",
    "downwardAPI",
    "serviceAccountToken",
    "clusterTrustBundle",
    "podCertificate",
];

/// Validates the volumes; returns their names for the mounts' checks.
pub(super) fn validate(spec: &PodSpec, errs: &mut Errs) -> HashSet<String> {
    let mut first: HashMap<&str, String> = HashMap::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let at = format!("spec.volumes[{i}]");
        if v.name.is_empty() {
            errs.bare(
                format!("{at}.name"),
                ValueError::Required {
                    hint: "give the volume a name its volumeMounts use",
                },
            );
        } else {
            errs.check(format!("{at}.name"), &v.name, dns1123_label(&v.name));
            if let Some(f) = first.get(v.name.as_str()) {
                errs.bare(
                    format!("{at}.name"),
                    ValueError::Duplicate {
                        what: "volume",
                        name: v.name.clone(),
                        first: f.clone(),
                    },
                );
            } else {
                first.insert(&v.name, at.clone());
            }
        }
        source(&at, v, errs);
    }
    first.keys().map(|k| (*k).to_string()).collect()
}

fn source(at: &str, v: &Volume, errs: &mut Errs) {
    // Every volume type is one optional key next to `name`: count the ones set.
    let json = serde_json::to_value(v).unwrap_or_default();
    let set: Vec<String> = json
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, value)| k.as_str() != "name" && !value.is_null())
        .map(|(k, _)| k.clone())
        .collect();
    match set.len() {
        0 => errs.bare(
            at,
            ValueError::NoneOf {
                choices: COMMON_SOURCES,
            },
        ),
        1 => {}
        _ => errs.bare(at, ValueError::SeveralOf { found: set }),
    }
    if let Some(h) = &v.host_path {
        let field = format!("{at}.hostPath.path");
        if h.path.is_empty() {
            errs.bare(
                field,
                ValueError::Required {
                    hint: "give the host path to mount",
                },
            );
        } else if !h.path.starts_with('/') {
            errs.invalid(field, &h.path, ValueError::NotAbsolute);
        } else if h.path.split('/').any(|p| p == "..") {
            errs.invalid(field, &h.path, ValueError::NotDescending);
        }
        if let Some(t) = h.type_.as_deref() {
            errs.one_of(
                format!("{at}.hostPath.type"),
                t,
                &[
                    "",
                    "DirectoryOrCreate",
                    "Directory",
                    "FileOrCreate",
                    "File",
                    "Socket",
                    "CharDevice",
                    "BlockDevice",
                ],
            );
        }
    }
    if let Some(e) = &v.empty_dir {
        if let Some(m) = e.medium.as_deref()
            && !(m.is_empty() || m == "Memory" || m == "HugePages" || m.starts_with("HugePages-"))
        {
            errs.invalid(
                format!("{at}.emptyDir.medium"),
                m,
                ValueError::NotOneOf {
                    allowed: &["\"\" (disk)", "Memory", "HugePages", "HugePages-<size>"],
                },
            );
        }
        if let Some(limit) = &e.size_limit {
            let field = format!("{at}.emptyDir.sizeLimit");
            match Quantity::parse(&limit.0).and_then(|q| q.value().map(|_| q)) {
                Err(err) => errs.invalid(field, &limit.0, ValueError::Quantity(err)),
                Ok(q) if q.is_negative() => errs.invalid(field, &limit.0, ValueError::Negative),
                Ok(_) => {}
            }
        }
    }
    if let Some(c) = &v.config_map {
        required_name(&format!("{at}.configMap.name"), &c.name, errs);
        mode(&format!("{at}.configMap.defaultMode"), c.default_mode, errs);
        items(&format!("{at}.configMap"), c.items.as_deref(), errs);
    }
    if let Some(s) = &v.secret {
        required_name(
            &format!("{at}.secret.secretName"),
            s.secret_name.as_deref().unwrap_or_default(),
            errs,
        );
        mode(&format!("{at}.secret.defaultMode"), s.default_mode, errs);
        items(&format!("{at}.secret"), s.items.as_deref(), errs);
    }
    if let Some(d) = &v.downward_api {
        mode(
            &format!("{at}.downwardAPI.defaultMode"),
            d.default_mode,
            errs,
        );
        downward_items(&format!("{at}.downwardAPI"), d.items.as_deref(), errs);
    }
    if let Some(p) = &v.projected {
        mode(&format!("{at}.projected.defaultMode"), p.default_mode, errs);
        let mut paths: HashMap<String, String> = HashMap::new();
        for (i, s) in p.sources.iter().flatten().enumerate() {
            let src = format!("{at}.projected.sources[{i}]");
            let set = [
                ("secret", s.secret.is_some()),
                ("configMap", s.config_map.is_some()),
                ("downwardAPI", s.downward_api.is_some()),
                ("serviceAccountToken", s.service_account_token.is_some()),
                ("clusterTrustBundle", s.cluster_trust_bundle.is_some()),
                ("podCertificate", s.pod_certificate.is_some()),
            ];
            one_source(&src, &set, PROJECTIONS, errs);
            let mut written: Vec<(String, &str)> = Vec::new();
            if let Some(c) = &s.config_map {
                required_name(&format!("{src}.configMap.name"), &c.name, errs);
                items(&format!("{src}.configMap"), c.items.as_deref(), errs);
                for (j, item) in c.items.iter().flatten().enumerate() {
                    written.push((format!("{src}.configMap.items[{j}].path"), &item.path));
                }
            }
            if let Some(c) = &s.secret {
                required_name(&format!("{src}.secret.name"), &c.name, errs);
                items(&format!("{src}.secret"), c.items.as_deref(), errs);
                for (j, item) in c.items.iter().flatten().enumerate() {
                    written.push((format!("{src}.secret.items[{j}].path"), &item.path));
                }
            }
            if let Some(d) = &s.downward_api {
                downward_items(&format!("{src}.downwardAPI"), d.items.as_deref(), errs);
                for (j, item) in d.items.iter().flatten().enumerate() {
                    written.push((format!("{src}.downwardAPI.items[{j}].path"), &item.path));
                }
            }
            for (field, path) in written {
                if let Some(first) = paths.get(path) {
                    errs.invalid(
                        field,
                        path,
                        ValueError::NotUnique {
                            first: first.clone(),
                        },
                    );
                } else {
                    paths.insert(path.to_string(), field);
                }
            }
        }
    }
}

/// A file mode: 0…0777.
fn mode(field: &str, mode: Option<i32>, errs: &mut Errs) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        errs.invalid(field, m, ValueError::FileMode);
    }
}

/// A file's path inside a volume: required, relative, not climbing out.
fn item_path(field: &str, path: &str, errs: &mut Errs) {
    if path.is_empty() {
        errs.bare(
            field,
            ValueError::Required {
                hint: "give the file's path inside the volume",
            },
        );
    } else if path.starts_with("..") {
        errs.invalid(field, path, ValueError::NotDescending);
    } else {
        errs.check(field, path, descending_path(path));
    }
}

fn items(at: &str, items: Option<&[KeyToPath]>, errs: &mut Errs) {
    for (i, item) in items.unwrap_or_default().iter().enumerate() {
        let it = format!("{at}.items[{i}]");
        if item.key.is_empty() {
            errs.bare(
                format!("{it}.key"),
                ValueError::Required {
                    hint: "name the key to write",
                },
            );
        }
        item_path(&format!("{it}.path"), &item.path, errs);
        mode(&format!("{it}.mode"), item.mode, errs);
    }
}

fn downward_items(at: &str, items: Option<&[DownwardAPIVolumeFile]>, errs: &mut Errs) {
    for (i, item) in items.unwrap_or_default().iter().enumerate() {
        let it = format!("{at}.items[{i}]");
        item_path(&format!("{it}.path"), &item.path, errs);
        mode(&format!("{it}.mode"), item.mode, errs);
        let set = [
            ("fieldRef", item.field_ref.is_some()),
            ("resourceFieldRef", item.resource_field_ref.is_some()),
        ];
        one_source(&it, &set, &["fieldRef", "resourceFieldRef"], errs);
        if let Some(f) = &item.field_ref {
            downward::field_ref(&format!("{it}.fieldRef"), f, Use::Volume, errs);
        }
        if let Some(r) = &item.resource_field_ref {
            downward::resource_field_ref(&format!("{it}.resourceFieldRef"), r, Use::Volume, errs);
        }
    }
}

/// A container's `volumeMounts`.
pub(super) fn validate_mounts(ctx: &Ctx<'_>, c: &Container, errs: &mut Errs) {
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    let mut paths: HashMap<&str, String> = HashMap::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let at = ctx.field(&format!("volumeMounts[{i}]"));
        if m.name.is_empty() {
            errs.bare(
                format!("{at}.name"),
                ValueError::Required {
                    hint: "name one of spec.volumes",
                },
            );
        } else if !ctx.volumes.contains(&m.name) {
            errs.invalid(format!("{at}.name"), &m.name, ValueError::VolumeNotFound);
        }
        let field = format!("{at}.mountPath");
        if m.mount_path.is_empty() {
            errs.bare(
                field,
                ValueError::Required {
                    hint: "give the path inside the container",
                },
            );
        } else if !m.mount_path.starts_with('/') {
            errs.invalid(field, &m.mount_path, ValueError::NotAbsolute);
        } else if let Some(first) = paths.get(m.mount_path.as_str()) {
            errs.invalid(
                field,
                &m.mount_path,
                ValueError::NotUnique {
                    first: first.clone(),
                },
            );
        } else {
            paths.insert(&m.mount_path, field);
        }
        let sub_path = m.sub_path.as_deref().unwrap_or_default();
        let sub_path_expr = m.sub_path_expr.as_deref().unwrap_or_default();
        if !sub_path.is_empty() {
            errs.check(format!("{at}.subPath"), sub_path, descending_path(sub_path));
        }
        if !sub_path_expr.is_empty() {
            if !sub_path.is_empty() {
                errs.bare(
                    format!("{at}.subPathExpr"),
                    ValueError::Forbidden {
                        why: "together with subPath; keep one of them",
                    },
                );
            }
            errs.check(
                format!("{at}.subPathExpr"),
                sub_path_expr,
                descending_path(sub_path_expr),
            );
        }
        let propagation = m.mount_propagation.as_deref().unwrap_or("None");
        errs.one_of(
            format!("{at}.mountPropagation"),
            propagation,
            &["None", "HostToContainer", "Bidirectional"],
        );
        if propagation == "Bidirectional" && !privileged {
            errs.invalid(
                format!("{at}.mountPropagation"),
                propagation,
                ValueError::Forbidden {
                    why: "unless the container is privileged (securityContext.privileged: true); use HostToContainer",
                },
            );
        }
        if let Some(rro) = m.recursive_read_only.as_deref() {
            errs.one_of(
                format!("{at}.recursiveReadOnly"),
                rro,
                &["Disabled", "IfPossible", "Enabled"],
            );
            if rro != "Disabled" && m.read_only != Some(true) {
                errs.invalid(
                    format!("{at}.recursiveReadOnly"),
                    rro,
                    ValueError::Forbidden {
                        why: "unless readOnly is true",
                    },
                );
            }
        }
    }
}
