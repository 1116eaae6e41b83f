use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

use tar::{EntryType, Header};

use super::*;

/// A tar of `(path, type, link target or data)`, names written raw.
fn tar_of(entries: &[(&str, EntryType, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, kind, extra) in entries {
        let mut h = Header::new_gnu();
        let g = h.as_gnu_mut().unwrap();
        g.name[..path.len()].copy_from_slice(path.as_bytes());
        let data: &[u8] = match kind {
            EntryType::Symlink | EntryType::Link => {
                g.linkname[..extra.len()].copy_from_slice(extra.as_bytes());
                b""
            }
            _ => extra.as_bytes(),
        };
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(if kind.is_dir() { 0o750 } else { 0o640 });
        h.set_mtime(1_000_000);
        h.set_uid(nix::unistd::geteuid().as_raw().into());
        h.set_gid(nix::unistd::getegid().as_raw().into());
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

fn unpack(data: &[u8]) -> (tempfile::TempDir, Result<UnpackStats, ImageError>) {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("snap");
    fs::create_dir(&dest).unwrap();
    let r = unpack_layer(data, &dest, "sha256:test");
    (tmp, r)
}

#[test]
fn files_dirs_links_and_metadata() {
    let data = tar_of(&[
        ("d/", EntryType::Directory, ""),
        ("d/f", EntryType::Regular, "hello"),
        ("d/l", EntryType::Symlink, "/d/f"),
        ("d/h", EntryType::Link, "d/f"),
        ("implicit/parent/f", EntryType::Regular, "x"),
    ]);
    let (tmp, r) = unpack(&data);
    let stats = r.unwrap();
    assert_eq!(stats.entries, 5);
    assert_eq!(stats.bytes, 6);
    assert_eq!(stats.diff_id, super::super::digest::sha256_of(&data));
    let snap = tmp.path().join("snap");
    assert_eq!(fs::read(snap.join("d/f")).unwrap(), b"hello");
    let f = fs::metadata(snap.join("d/f")).unwrap();
    assert_eq!((f.mode() & 0o7777, f.mtime()), (0o640, 1_000_000));
    assert_eq!(fs::metadata(snap.join("d/h")).unwrap().ino(), f.ino());
    assert_eq!(fs::read_link(snap.join("d/l")).unwrap(), Path::new("/d/f"));
    let d = fs::metadata(snap.join("d")).unwrap();
    assert_eq!((d.mode() & 0o7777, d.mtime()), (0o750, 1_000_000));
    let implicit = fs::metadata(snap.join("implicit/parent")).unwrap();
    assert_eq!(implicit.permissions().mode() & 0o7777, 0o755);
}

#[test]
fn later_entries_replace_earlier_ones() {
    let data = tar_of(&[
        ("a/", EntryType::Directory, ""),
        ("a/x", EntryType::Regular, "x"),
        ("a", EntryType::Regular, "now a file"),
        ("b", EntryType::Symlink, "a"),
        ("b", EntryType::Regular, "not through the symlink"),
        // Each kind replacing another (the create is tried first, and the old
        // entry removed only when it is in the way).
        ("c", EntryType::Regular, "a file first"),
        ("c", EntryType::Symlink, "then a link"),
        ("d", EntryType::Symlink, "first/target"),
        ("d", EntryType::Symlink, "second/target"),
        ("e", EntryType::Symlink, "/dangling"),
        (
            "e",
            EntryType::Regular,
            "not into the dangling link's target",
        ),
        ("f", EntryType::Regular, "a file"),
        ("f", EntryType::Fifo, ""),
        ("g", EntryType::Regular, "old"),
        ("g", EntryType::Regular, "new"),
    ]);
    let (tmp, r) = unpack(&data);
    r.unwrap();
    let snap = tmp.path().join("snap");
    assert_eq!(fs::read(snap.join("a")).unwrap(), b"now a file");
    assert_eq!(
        fs::read(snap.join("b")).unwrap(),
        b"not through the symlink"
    );
    assert_eq!(
        fs::read_link(snap.join("c")).unwrap(),
        Path::new("then a link")
    );
    assert_eq!(
        fs::read_link(snap.join("d")).unwrap(),
        Path::new("second/target")
    );
    assert_eq!(
        fs::read(snap.join("e")).unwrap(),
        b"not into the dangling link's target"
    );
    assert!(fs::symlink_metadata(snap.join("e")).unwrap().is_file());
    assert!(
        fs::symlink_metadata(snap.join("f"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(fs::read(snap.join("g")).unwrap(), b"new");
}

#[test]
fn truncated_stream_is_an_error_naming_the_entry() {
    let data = tar_of(&[
        ("a", EntryType::Regular, "aaaa"),
        ("big", EntryType::Regular, &"z".repeat(4096)),
    ]);
    let (_tmp, r) = unpack(&data[..512 * 4]);
    let err = r.unwrap_err();
    assert!(matches!(err, ImageError::Unpack { .. }), "{err}");
    assert!(err.to_string().contains("big"), "{err}");
}

#[test]
fn huge_long_names_are_refused_without_reading_them_whole() {
    // A GNU long-name header announcing 64 MiB.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
    h.set_entry_type(EntryType::GNULongName);
    h.set_size(64 << 20);
    h.set_cksum();
    let name = vec![b'a'; 64 << 20];
    b.append(&h, &name[..]).unwrap();
    let data = b.into_inner().unwrap();
    let (_tmp, r) = unpack(&data);
    let err = r.unwrap_err();
    assert!(matches!(err, ImageError::UnsafeEntry { .. }), "{err}");
    assert!(err.to_string().contains("larger than"), "{err}");
}

#[test]
fn zstd_is_refused() {
    let (_tmp, r) = unpack(&[0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]);
    assert!(matches!(
        r.unwrap_err(),
        ImageError::UnsupportedCompression { .. }
    ));
}

#[test]
fn a_directory_replaced_midway_is_resolved_again() {
    // "a/x" leaves "a" as the remembered directory; "a" then becomes a symlink
    // to "b", so "a/y" must land in "b", not in the removed old "a".
    let data = tar_of(&[
        ("b/", EntryType::Directory, ""),
        ("a/", EntryType::Directory, ""),
        ("a/x", EntryType::Regular, "old"),
        ("a", EntryType::Symlink, "b"),
        ("a/y", EntryType::Regular, "new"),
        // And back: "b" replaced by a file, so "b/z" has no directory to go in.
        ("b", EntryType::Regular, "file"),
    ]);
    let (tmp, r) = unpack(&data);
    r.unwrap();
    let snap = tmp.path().join("snap");
    assert_eq!(fs::read_link(snap.join("a")).unwrap(), Path::new("b"));
    assert_eq!(fs::read(snap.join("b")).unwrap(), b"file");
    assert!(!snap.join("a/x").exists());

    let data = tar_of(&[
        ("b/", EntryType::Directory, ""),
        ("b/w", EntryType::Regular, "w"),
        ("a/x", EntryType::Regular, "old"),
        ("a", EntryType::Symlink, "b"),
        ("a/y", EntryType::Regular, "new"),
    ]);
    let (tmp, r) = unpack(&data);
    r.unwrap();
    let snap = tmp.path().join("snap");
    assert_eq!(fs::read(snap.join("b/y")).unwrap(), b"new");
    assert_eq!(fs::read(snap.join("b/w")).unwrap(), b"w");
}

#[test]
fn owners_other_than_the_creator_are_applied() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (chown): run it as root"
    );
    let mut b = tar::Builder::new(Vec::new());
    for (path, kind, uid) in [
        ("f", EntryType::Regular, 1234),
        ("l", EntryType::Symlink, 2345),
        ("r", EntryType::Regular, 0),
    ] {
        let mut h = Header::new_gnu();
        h.set_path(path).unwrap();
        if kind == EntryType::Symlink {
            h.set_link_name("f").unwrap();
        }
        h.set_entry_type(kind);
        h.set_size(0);
        h.set_mode(0o644);
        h.set_uid(uid);
        h.set_gid(uid + 1);
        h.set_cksum();
        b.append(&h, &b""[..]).unwrap();
    }
    let (tmp, r) = unpack(&b.into_inner().unwrap());
    r.unwrap();
    let snap = tmp.path().join("snap");
    let owner = |p: &str| {
        let m = fs::symlink_metadata(snap.join(p)).unwrap();
        (m.uid(), m.gid())
    };
    assert_eq!(owner("f"), (1234, 1235));
    assert_eq!(owner("l"), (2345, 2346));
    assert_eq!(owner("r"), (0, 1));
}

/// Unpacks `upper_entries` as a layer over a lower snapshot made by `lower`
/// (a function writing into the lower dir), then resolves its made-up dirs.
fn over_lower(
    lower: impl FnOnce(&Path),
    upper_entries: &[(&str, EntryType, &str)],
) -> (tempfile::TempDir, lower::ImplicitFixes) {
    let tmp = tempfile::tempdir().unwrap();
    let low = tmp.path().join("lower");
    fs::create_dir(&low).unwrap();
    lower(&low);
    let up = tmp.path().join("snap");
    fs::create_dir(&up).unwrap();
    let stats = unpack_layer(&tar_of(upper_entries)[..], &up, "sha256:up").unwrap();
    let fixes = resolve_implicit_dirs(&up, &stats.implicit_dirs, &[low]).unwrap();
    (tmp, fixes)
}

#[test]
fn entries_under_a_lower_symlink_go_where_it_points() {
    use std::os::unix::fs::symlink;
    let (tmp, fixes) = over_lower(
        |l| {
            fs::create_dir_all(l.join("usr/lib")).unwrap();
            fs::write(l.join("usr/lib/old"), "old").unwrap();
            symlink("usr/lib", l.join("lib")).unwrap();
            symlink("/usr/lib", l.join("lib_abs")).unwrap();
            symlink("../../../../usr/lib", l.join("lib_up")).unwrap();
            symlink("usr/lib64", l.join("lib64link")).unwrap();
            symlink("lib", l.join("usr/lib64")).unwrap();
        },
        &[
            ("lib/x", EntryType::Regular, "x"),
            ("lib/sub/y", EntryType::Regular, "y"),
            ("lib_abs/a", EntryType::Regular, "a"),
            ("lib_up/u", EntryType::Regular, "u"),
            ("lib64link/c", EntryType::Regular, "c"),
        ],
    );
    let up = tmp.path().join("snap");
    for (path, content) in [
        ("usr/lib/x", "x"),
        ("usr/lib/sub/y", "y"),
        ("usr/lib/a", "a"),
        ("usr/lib/u", "u"),
        ("usr/lib/c", "c"),
    ] {
        assert_eq!(
            fs::read_to_string(up.join(path)).unwrap(),
            content,
            "{path}"
        );
    }
    for gone in ["lib", "lib_abs", "lib_up", "lib64link"] {
        assert!(
            fs::symlink_metadata(up.join(gone)).is_err(),
            "{gone} hides the lower symlink"
        );
    }
    assert_eq!(fixes.redirected.len(), 4, "{fixes:?}");
    // Nothing was written outside the snapshot.
    assert!(!Path::new("/usr/lib/u").exists());
}

#[test]
fn a_whiteout_or_an_explicit_directory_hides_the_lower_symlink() {
    use std::os::unix::fs::symlink;
    // The layer lists lib/ itself: it replaces the symlink with a directory.
    let (tmp, fixes) = over_lower(
        |l| {
            fs::create_dir_all(l.join("usr/lib")).unwrap();
            symlink("usr/lib", l.join("lib")).unwrap();
        },
        &[
            ("lib/", EntryType::Directory, ""),
            ("lib/x", EntryType::Regular, "x"),
        ],
    );
    assert!(tmp.path().join("snap/lib/x").is_file());
    assert!(fixes.redirected.is_empty());

    // A lower whiteout: the name is gone below it, the made-up dir stays.
    let tmp = tempfile::tempdir().unwrap();
    let (l0, l1, up) = (
        tmp.path().join("l0"),
        tmp.path().join("l1"),
        tmp.path().join("up"),
    );
    for d in [&l0, &l1, &up] {
        fs::create_dir(d).unwrap();
    }
    fs::create_dir_all(l0.join("usr/lib")).unwrap();
    symlink("usr/lib", l0.join("lib")).unwrap();
    // An overlay whiteout is a 0:0 character device: making one needs root.
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (mknod of a whiteout): run it as root"
    );
    nix::sys::stat::mknod(
        &l1.join("lib"),
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::empty(),
        0,
    )
    .unwrap();
    let stats = unpack_layer(
        &tar_of(&[("lib/x", EntryType::Regular, "x")])[..],
        &up,
        "sha256:up",
    )
    .unwrap();
    let fixes = resolve_implicit_dirs(&up, &stats.implicit_dirs, &[l1, l0]).unwrap();
    assert!(up.join("lib/x").is_file());
    assert!(fixes.redirected.is_empty());
}

#[test]
fn a_made_up_directory_takes_the_lower_directorys_owner_and_mode() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (chown): run it as root"
    );
    let (tmp, fixes) = over_lower(
        |l| {
            fs::create_dir_all(l.join("srv/data")).unwrap();
            fs::set_permissions(l.join("srv/data"), fs::Permissions::from_mode(0o710)).unwrap();
            nix::unistd::chown(
                &l.join("srv/data"),
                Some(nix::unistd::Uid::from_raw(1234)),
                Some(nix::unistd::Gid::from_raw(4321)),
            )
            .unwrap();
        },
        &[("srv/data/f", EntryType::Regular, "f")],
    );
    let m = fs::metadata(tmp.path().join("snap/srv/data")).unwrap();
    assert_eq!((m.mode() & 0o7777, m.uid(), m.gid()), (0o710, 1234, 4321));
    // srv: a directory in the lower layer too (mode 0755 there).
    assert_eq!(fixes.copied_up, 2);
    assert!(fixes.redirected.is_empty());
}

#[test]
fn lower_symlinks_never_lead_out_of_the_snapshot() {
    use std::os::unix::fs::symlink;
    let marker = format!("podhost-escape-{}", std::process::id());
    let (tmp, _) = over_lower(
        |l| {
            // Absolute and climbing links to a directory that exists on the host.
            symlink("/tmp", l.join("t")).unwrap();
            symlink("../../../../../../../../tmp", l.join("u")).unwrap();
            // A loop.
            symlink("v", l.join("v")).unwrap();
        },
        &[
            (&format!("t/{marker}-a"), EntryType::Regular, "a"),
            (&format!("u/{marker}-b"), EntryType::Regular, "b"),
            ("v/c", EntryType::Regular, "c"),
        ],
    );
    let up = tmp.path().join("snap");
    assert!(!Path::new("/tmp").join(format!("{marker}-a")).exists());
    assert!(!Path::new("/tmp").join(format!("{marker}-b")).exists());
    assert_eq!(fs::read(up.join(format!("tmp/{marker}-a"))).unwrap(), b"a");
    assert_eq!(fs::read(up.join(format!("tmp/{marker}-b"))).unwrap(), b"b");
    // The loop resolves nowhere: the layer's own directory stays.
    assert_eq!(fs::read(up.join("v/c")).unwrap(), b"c");
}

/// umoci-style names: `/` is the layer root (its metadata applied to the snapshot
/// root), `/bin/x` is `bin/x`, a hardlink target `/bin/x` is `bin/x`; `..` after the
/// `/` is still refused, and an absolute symlink followed by a name stays inside.
#[test]
fn leading_slash_names_are_relative_to_the_layer_root() {
    let data = tar_of(&[
        ("/", EntryType::Directory, ""),
        ("/bin/", EntryType::Directory, ""),
        ("/bin/busybox", EntryType::Regular, "elf"),
        ("/bin/sh", EntryType::Link, "/bin/busybox"),
        ("/etc", EntryType::Symlink, "/"),
        ("/etc/passwd", EntryType::Regular, "root:x:0:0::/:/bin/sh\n"),
    ]);
    let (tmp, r) = unpack(&data);
    let stats = r.unwrap();
    assert_eq!(stats.entries, 6);
    let snap = tmp.path().join("snap");
    assert_eq!(fs::read(snap.join("bin/busybox")).unwrap(), b"elf");
    let busybox = fs::metadata(snap.join("bin/busybox")).unwrap();
    assert_eq!(
        fs::metadata(snap.join("bin/sh")).unwrap().ino(),
        busybox.ino()
    );
    // The root entry's mode and mtime are the snapshot root's.
    let root = fs::metadata(&snap).unwrap();
    assert_eq!((root.mode() & 0o7777, root.mtime()), (0o750, 1_000_000));
    // "/etc" -> "/" resolves to the snapshot root, not the host's: the file lands there.
    assert_eq!(fs::read_link(snap.join("etc")).unwrap(), Path::new("/"));
    assert!(snap.join("passwd").is_file());
    assert_ne!(
        fs::read("/etc/passwd").unwrap(),
        b"root:x:0:0::/:/bin/sh\n".to_vec()
    );

    for bad in ["/../escape", "/a/../../escape"] {
        let (_tmp, r) = unpack(&tar_of(&[(bad, EntryType::Regular, "x")]));
        let err = r.unwrap_err().to_string();
        assert!(err.contains("\"..\""), "{bad}: {err}");
    }
}

/// umoci 0.4's `umoci insert` writes a layer that stops right after the last file's
/// data (no padding, no end blocks): read as the end, as Go's archive/tar does. A
/// stream cut inside the data or inside the padding is still an error.
#[test]
fn a_layer_ending_right_after_the_last_data_is_complete() {
    let data = tar_of(&[
        ("etc/", EntryType::Directory, ""),
        ("etc/greet", EntryType::Regular, "hello\n"),
    ]);
    let cut = 512 * 2 + 6;
    let (tmp, r) = unpack(&data[..cut]);
    let stats = r.unwrap();
    assert_eq!(stats.entries, 2);
    assert_eq!(stats.diff_id, super::super::digest::sha256_of(&data[..cut]));
    assert_eq!(
        fs::read(tmp.path().join("snap/etc/greet")).unwrap(),
        b"hello\n"
    );
    for short in [cut - 1, cut + 1, cut + 100] {
        let (_tmp, r) = unpack(&data[..short]);
        let err = r.unwrap_err();
        assert!(matches!(err, ImageError::Unpack { .. }), "{short}: {err}");
    }
}

/// A file larger than the copy's writes and the read-ahead's chunks, from a gzip
/// layer (the decompressor's reads end anywhere): on disk whole and in order, and the
/// files after it too.
#[test]
fn a_large_file_from_a_gzip_layer_is_written_whole() {
    use std::io::Write;
    let big: Vec<u8> = (0..3 * 256 * 1024 + 7777u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13).to_le_bytes()[0])
        .collect();
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in [("big.bin", &big[..]), ("after", b"after\n".as_slice())] {
        let mut h = Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    let tar = b.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    let (tmp, r) = unpack(&gz.finish().unwrap());
    let stats = r.unwrap();
    assert_eq!(stats.bytes, big.len() as u64 + 6);
    assert_eq!(stats.diff_id, super::super::digest::sha256_of(&tar));
    assert!(fs::read(tmp.path().join("snap/big.bin")).unwrap() == big);
    assert_eq!(fs::read(tmp.path().join("snap/after")).unwrap(), b"after\n");
}
