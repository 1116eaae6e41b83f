//! The crate's layering (src/lib.rs), checked: every `crate::<module>` path in `src/`
//! names a module its own top-level module may use. No root needed.
//!
//! The scan reads source text, not the compiler's view: comments are dropped, then every
//! `crate::x` and every item of a `crate::{x, y::z}` group counts as an edge from the
//! file's top-level module to `x`. A path into the module's own subtree is never an edge.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::source_scan;

use source_scan::rust_files;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What each top-level module may use, bottom layer first (src/lib.rs explains why).
/// A module missing from this table is an error too: a new module states its place.
const ALLOWED: &[(&str, &[&str])] = &[
    ("model", &[]),
    ("rooted", &[]),
    ("metrics", &["model"]),
    ("disk", &["model"]),
    ("logs", &["model", "disk"]),
    ("image", &["model", "metrics", "disk"]),
    ("source", &["model", "metrics", "disk"]),
    ("status", &["model", "metrics", "disk"]),
    ("configdir", &["model", "disk"]),
    ("runtime", &["model", "rooted", "disk", "logs"]),
    ("oom", &["model", "disk", "runtime"]),
    ("shim", &["model", "rooted", "disk", "logs", "runtime"]),
    ("volume", &["model", "rooted", "disk", "runtime"]),
    ("probe", &["model", "metrics", "disk", "runtime"]),
    ("network", &["model", "disk", "runtime"]),
    (
        "worker",
        &[
            "model",
            "rooted",
            "metrics",
            "disk",
            "logs",
            "oom",
            "image",
            "source",
            "configdir",
            "volume",
            "status",
            "runtime",
            "probe",
            "network",
        ],
    ),
    (
        "gc",
        &[
            "model", "rooted", "metrics", "disk", "logs", "image", "status", "runtime",
        ],
    ),
    ("stats", &["model", "disk", "runtime", "status", "volume"]),
    (
        "api",
        &[
            "model", "metrics", "disk", "logs", "image", "status", "runtime", "stats",
        ],
    ),
    (
        "eviction",
        &[
            "model", "metrics", "disk", "status", "runtime", "volume", "gc",
        ],
    ),
    ("cluster", &["model"]),
    (
        "daemon",
        &[
            "model",
            "metrics",
            "disk",
            "logs",
            "oom",
            "image",
            "source",
            "configdir",
            "volume",
            "status",
            "runtime",
            "worker",
            "gc",
            "api",
            "network",
            "stats",
            "eviction",
            "cluster",
        ],
    ),
    (
        "cli",
        &[
            "model", "disk", "logs", "image", "source", "status", "runtime", "api", "daemon",
        ],
    ),
];

/// One use of another top-level module.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    file: PathBuf,
}

/// Source text without `//` and `/* */` comments (doc comments name modules freely).
/// A `//` inside a string literal cuts the rest of that line: it only loses text.
fn without_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |nl| &after[nl..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn leading_ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of each item of a `{a::b, c, d::{e, f}}` group (`s` starts
/// after the opening brace).
fn group_heads(s: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut at_item_start = true;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if c.is_whitespace() => {}
            _ if at_item_start && depth == 0 => {
                at_item_start = false;
                let head = leading_ident(&s[i..]);
                if !head.is_empty() && head != "self" {
                    heads.push(head.to_string());
                }
            }
            _ => {}
        }
    }
    heads
}

/// The top-level modules a file of module `from` refers to through `crate::`.
fn crate_uses(src: &str) -> BTreeSet<String> {
    let code = without_comments(src);
    let mut used = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        // `$crate::` (macros) and `pub(crate)`-like tokens are not paths into this crate.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c == '$' || c == '_' || c.is_ascii_alphanumeric()) {
            continue;
        }
        let after = &code[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            used.extend(group_heads(group));
        } else {
            let head = leading_ident(after);
            if !head.is_empty() {
                used.insert(head.to_string());
            }
        }
    }
    used
}

/// The top-level module a file under `src/` belongs to; `None` for lib.rs and main.rs.
fn top_module(src_dir: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src_dir).ok()?;
    let mut parts = rel.components();
    let first = parts.next()?.as_os_str().to_str()?;
    if parts.next().is_some() {
        Some(first.to_string())
    } else {
        let stem = first.strip_suffix(".rs")?;
        (stem != "lib" && stem != "main").then(|| stem.to_string())
    }
}

fn edges(src_dir: &Path) -> Vec<Edge> {
    let files = rust_files(src_dir);
    let mut out = Vec::new();
    for file in files {
        let Some(from) = top_module(src_dir, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        for to in crate_uses(&text) {
            if to != from {
                out.push(Edge {
                    from: from.clone(),
                    to,
                    file: file.clone(),
                });
            }
        }
    }
    out
}

/// Every edge the table does not allow, as a line that says what to do.
fn violations(edges: &[Edge]) -> Vec<String> {
    let mut out = Vec::new();
    for e in edges {
        match ALLOWED.iter().find(|(m, _)| *m == e.from) {
            None => out.push(format!(
                "{}: module `{}` has no row in tests/layering.rs ALLOWED; add it where \
                 src/lib.rs places it",
                e.file.display(),
                e.from
            )),
            Some((_, allowed)) if !allowed.contains(&e.to.as_str()) => out.push(format!(
                "{}: `{}` may not use `crate::{}` (it may use: {}); move the shared piece \
                 down a layer or pass it in",
                e.file.display(),
                e.from,
                e.to,
                allowed.join(", ")
            )),
            Some(_) => {}
        }
    }
    out
}

#[test]
fn no_module_uses_one_its_layer_may_not() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = edges(&src);
    // The scan must see the crate: an empty result would pass for the wrong reason.
    assert!(
        all.iter().any(|e| e.from == "worker" && e.to == "runtime"),
        "the scan found no worker → runtime use; is it reading {}?",
        src.display()
    );
    let bad = violations(&all);
    assert!(bad.is_empty(), "layering broken:\n{}", bad.join("\n"));
}

#[test]
fn every_top_level_module_has_a_row_and_lib_rs_declares_each_row() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("src/lib.rs");
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .collect();
    let rows: BTreeSet<&str> = ALLOWED.iter().map(|(m, _)| *m).collect();
    assert_eq!(
        declared, rows,
        "src/lib.rs modules vs tests/layering.rs rows"
    );
}

#[test]
fn the_scan_reports_a_forbidden_use_in_every_path_form() {
    let src = "//! mentions crate::worker in a doc comment\n\
               use crate::{disk::Layout, worker::Ctx};\n\
               use crate::gc::runner;\n\
               fn f() { crate::api::serve(); let _ = $crate::daemon::x; }\n\
               /* crate::cli in a block comment */\n";
    let used = crate_uses(src);
    let expected: BTreeSet<String> = ["api", "disk", "gc", "worker"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(used, expected);
    let as_edges: Vec<Edge> = used
        .into_iter()
        .map(|to| Edge {
            from: "status".into(),
            to,
            file: PathBuf::from("src/status/x.rs"),
        })
        .collect();
    let bad = violations(&as_edges);
    assert_eq!(bad.len(), 3, "{bad:#?}");
    assert!(bad.iter().all(|l| l.contains("`status` may not use")));
}

#[test]
fn nested_groups_count_only_their_first_segment() {
    let used = crate_uses("use crate::{image::{gc::X, ImageStore}, model::qos::{a, b}, self};");
    let expected: BTreeSet<String> = ["image", "model"].iter().map(|s| s.to_string()).collect();
    assert_eq!(used, expected);
}
