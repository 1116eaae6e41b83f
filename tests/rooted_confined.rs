//! Root never follows a container's path: the modules that work in directories a
//! container can write or replace (emptyDir and content volumes, subPath sources, the
//! files bind-mounted into containers) reach them only through `podhost::rooted`. This
//! scans their non-test code (no root needed) and fails naming each file and line that
//! makes a path-based filesystem call instead. A call on a path that is podhost's own
//! (a parent no container can write) is allowed when the line, or the line above it,
//! says so with a `// not a container's path:` comment giving the reason.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// The modules (files or dirs of the workspace) that touch container-reachable places.
const SCOPE: &[&str] = &[
    "crates/volume/src/content",
    "crates/volume/src/ownership.rs",
    "crates/volume/src/setup.rs",
    "crates/volume/src/subpath.rs",
    "crates/volume/src/usage.rs",
    "crates/volume/src/teardown.rs",
    "crates/volume/src/hostpath.rs",
    "crates/daemon/src/worker/dns_files.rs",
    "crates/daemon/src/worker/termination_message.rs",
];

/// Path-based calls: std::fs and its unix extensions, and Path's own stat calls.
const PATH_CALLS: &[&str] = &[
    "std::fs::",
    " fs::",
    "(fs::",
    "File::open",
    "File::create",
    "OpenOptions",
    "lchown",
    "unix::fs::symlink",
    "unix::fs::chown",
    ".is_dir()",
    ".is_file()",
    ".exists()",
    ".metadata()",
    ".symlink_metadata()",
    ".read_dir()",
    ".canonicalize()",
    ".read_link()",
];

const JUSTIFIED: &str = "// not a container's path:";

fn files_in_scope(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in SCOPE {
        let path = root.join(entry);
        if path.is_dir() {
            let mut stack = vec![path];
            while let Some(dir) = stack.pop() {
                for e in std::fs::read_dir(&dir).unwrap() {
                    let p = e.unwrap().path();
                    if p.is_dir() {
                        stack.push(p);
                    } else if p.extension().is_some_and(|x| x == "rs") {
                        out.push(p);
                    }
                }
            }
        } else {
            assert!(path.is_file(), "{entry} is in the scope but does not exist");
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The 1-based lines of `text`'s non-test code that make a path call without saying why
/// the path is podhost's own.
fn unjustified_path_calls(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    // Whether the comment block right above the current line justifies it.
    let mut comment_above_justifies = false;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        // Test code (a file's `#[cfg(test)]` module, or a whole test file) is not run
        // by the daemon.
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            comment_above_justifies |= trimmed.contains(JUSTIFIED);
            continue;
        }
        let code = trimmed.split("//").next().unwrap_or("");
        let justified = line.contains(JUSTIFIED) || comment_above_justifies;
        if !trimmed.starts_with("use ")
            && !justified
            && PATH_CALLS.iter().any(|call| code.contains(call))
        {
            found.push((n + 1, line.trim().to_string()));
        }
        comment_above_justifies = false;
    }
    found
}

#[test]
fn container_reachable_places_are_touched_only_through_the_rooted_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut violations = Vec::new();
    for file in files_in_scope(root) {
        // Files that are a module's tests only.
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, code) in unjustified_path_calls(&text) {
            violations.push(format!(
                "{}:{line}: {code}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        violations.is_empty(),
        "path-based filesystem calls where a container can write (use podhost::rooted, or \
         say `{JUSTIFIED} <why>` when the path is podhost's own):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scan_finds_a_path_call_and_honours_a_justification() {
    let bad = "fn f(p: &Path) {\n    std::fs::set_permissions(p, m);\n}\n";
    assert_eq!(unjustified_path_calls(bad).len(), 1);
    let is_dir = "fn f(p: &Path) -> bool {\n    p.is_dir()\n}\n";
    assert_eq!(
        unjustified_path_calls(is_dir),
        [(2, "p.is_dir()".to_string())]
    );
    let ok = "    // not a container's path: the pod dir\n    std::fs::create_dir_all(p)?;\n";
    assert!(unjustified_path_calls(ok).is_empty());
    let tests_only = "#[cfg(test)]\nmod tests {\n    std::fs::write(p, b)?;\n}\n";
    assert!(unjustified_path_calls(tests_only).is_empty());
}
