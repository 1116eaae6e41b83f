//! Fuzzes `podhost::image::unpack_layer` with arbitrary bytes (plain or gzipped
//! tar, or neither). Besides "no panic", it checks the unpacker's invariant:
//! nothing changes outside the snapshot root — the canary directory next to it
//! keeps its one file, and no other entry appears beside the two.
//!
//! Seed corpus: `PODHOST_WRITE_CORPUS=fuzz/corpus/unpack_layer cargo test --test
//! unpack_hostile hostile_corpus` writes the hostile corpus as tars.

#![no_main]

use std::fs;
use std::os::unix::fs::PermissionsExt;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let canary = tmp.path().join("canary");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&canary).unwrap();
    fs::write(canary.join("secret"), b"secret").unwrap();

    let _ = podhost::image::unpack_layer(data, &root, "fuzz");

    let beside: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(
        beside.len(),
        2,
        "something was created beside the snapshot root"
    );
    let in_canary: Vec<_> = fs::read_dir(&canary).unwrap().collect();
    assert_eq!(
        in_canary.len(),
        1,
        "something was created in the canary directory"
    );
    assert_eq!(fs::read(canary.join("secret")).unwrap(), b"secret");
    // Layers may leave modes such as 0000 on directories: give them back so
    // that the temp dir can be removed without root.
    let _ = fs::set_permissions(&root, fs::Permissions::from_mode(0o700));
    make_removable(&root);
});

fn make_removable(dir: &std::path::Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = fs::set_permissions(e.path(), fs::Permissions::from_mode(0o700));
            make_removable(&e.path());
        }
    }
}
