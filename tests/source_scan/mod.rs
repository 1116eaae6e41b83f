//! Shared by the tests that read podhost's own sources (no root needed): the file walk.

use std::path::{Path, PathBuf};

/// The workspace's own Rust sources: the root package's `src/` and every member crate's
/// `src/` under `crates/`, in a stable order.
pub fn workspace_sources(root: &Path) -> Vec<PathBuf> {
    let mut out = rust_files(&root.join("src"));
    let crates = root.join("crates");
    let entries =
        std::fs::read_dir(&crates).unwrap_or_else(|e| panic!("{}: {e}", crates.display()));
    let mut members: Vec<PathBuf> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", crates.display()))
                .path()
        })
        .collect();
    members.sort();
    for member in members {
        out.extend(rust_files(&member.join("src")));
    }
    out
}

/// Rust sources under `dir`, recursively, in a stable order.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
