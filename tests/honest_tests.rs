//! A run that tested nothing must never be green: no test may skip itself and pass when
//! a precondition (root, a tool, a kernel feature) is missing. This scans every test
//! source for the shapes such skips take and fails, naming the file and line.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::source_scan;

use source_scan::{rust_files, workspace_sources};
use std::path::Path;

/// The lines of `text` that skip a test: a `SKIP` message, or a check of a precondition
/// whose body only returns (or continues) — the test then passes having done nothing.
fn skips(text: &str) -> Vec<(usize, String)> {
    // Built from pieces so that this file does not find itself.
    let skip_word = ["SK", "IP"].concat();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        let precondition = t.starts_with("if !")
            && ["root()", "exists()", "on_path(", "is_ok()", "available"]
                .iter()
                .any(|p| t.contains(p))
            && t.ends_with('{');
        let body_only_leaves = lines
            .get(i + 1)
            .map(|l| l.trim())
            .is_some_and(|next| next == "return;" || next == "continue;")
            || lines
                .get(i + 2)
                .map(|l| l.trim())
                .is_some_and(|next| next == "return;" || next == "continue;")
                && lines[i + 1].trim_start().starts_with("eprintln!");
        if (precondition && body_only_leaves) || t.contains(&format!("\"{skip_word}")) {
            found.push((i + 1, t.to_string()));
        }
    }
    found
}

#[test]
fn no_test_skips_itself_and_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = rust_files(&root.join("tests"));
    files.extend(workspace_sources(root));
    let me = root.join("tests/honest_tests.rs");
    let mut offenders = Vec::new();
    for file in files.iter().filter(|f| **f != me) {
        let text = std::fs::read_to_string(file).unwrap();
        // Only test code: the integration tests and the unit-test modules.
        let is_test_code = file.starts_with(root.join("tests"))
            || file.file_name().is_some_and(|n| n == "tests.rs")
            || text.contains("#[cfg(test)]");
        if !is_test_code {
            continue;
        }
        for (line, what) in skips(&text) {
            offenders.push(format!(
                "{}:{line}: {what}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "these tests pass without testing when a precondition is missing; make them fail \
         with a message that says what is missing (assert!/expect) instead:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_scan_finds_the_skips_it_looks_for() {
    let root_skip = "fn t() {\n    if !require_root() {\n        return;\n    }\n}\n";
    assert_eq!(skips(root_skip).len(), 1);
    let tool_skip =
        "    if !on_path(\"x\") {\n        eprintln!(\"no x\");\n        return;\n    }\n";
    assert_eq!(skips(tool_skip).len(), 1);
    let said = format!("eprintln!(\"{}: no tool\");", ["SK", "IP"].concat());
    assert_eq!(skips(&said).len(), 1);
    let honest = "    assert!(is_root(), \"needs root\");\n    if !dir.exists() {\n        create(dir);\n    }\n";
    assert!(skips(honest).is_empty());
}
