use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::adversary::{Adversary, Outside, Swap};
use super::sys::DirKernel;
use super::*;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn files_and_dirs_get_exactly_their_modes_whatever_the_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RootedDir::open(tmp.path()).unwrap();
    root.make_dir_all("a/b", 0o755).unwrap();
    root.create_file("a/b/f", b"data", 0o640, None).unwrap();
    root.replace_file("a/r", b"one", 0o644, true).unwrap();
    root.replace_file("a/r", b"two", 0o600, true).unwrap();
    assert_eq!(mode(&tmp.path().join("a/b")), 0o755);
    assert_eq!(mode(&tmp.path().join("a/b/f")), 0o640);
    assert_eq!(mode(&tmp.path().join("a/r")), 0o600);
    assert_eq!(std::fs::read(tmp.path().join("a/r")).unwrap(), b"two");
    assert_eq!(root.read_file("a/b/f", 2).unwrap(), b"da");
    let mut names = root.open_dir("a").unwrap().entries().unwrap();
    names.sort();
    assert_eq!(names, ["b", "r"]);
    root.symlink("..data/k", "k").unwrap();
    assert_eq!(root.read_link("k").unwrap().unwrap(), "..data/k");
    assert_eq!(root.read_link("missing").unwrap(), None);
    assert_eq!(root.kind("k").unwrap(), Some(EntryKind::Symlink));
    assert_eq!(root.kind("a").unwrap(), Some(EntryKind::Dir));
    root.remove_tree("a").unwrap();
    assert!(!tmp.path().join("a").exists());
}

#[test]
fn a_symlink_anywhere_on_the_way_is_refused_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = Outside::new();
    std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("f")).unwrap();
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    std::os::unix::fs::symlink("..", tmp.path().join("d/up")).unwrap();
    let root = RootedDir::open(tmp.path()).unwrap();
    for rel in ["out/secret", "out/new", "d/up/f", "f", "../x"] {
        let e = root.read_file(rel, 100).unwrap_err();
        assert!(
            e.is_escape() || e.errno() == Some(Errno::ENOENT),
            "{rel}: {e}"
        );
    }
    assert!(
        root.create_file("out/new", b"x", 0o644, None)
            .unwrap_err()
            .is_escape()
    );
    assert!(
        root.make_dir_all("out/new/deeper", 0o755)
            .unwrap_err()
            .is_escape()
    );
    assert!(
        root.replace_file("out/secret", b"x", 0o777, true)
            .unwrap_err()
            .is_escape()
    );
    let e = root.read_file("f", 100).unwrap_err();
    assert!(e.is_escape(), "{e}");
    assert!(
        e.to_string()
            .contains("is a symlink or leaves the directory"),
        "{e}"
    );
    // A walk and a removal change the links themselves, never their targets.
    set_group_tree(
        &root,
        nix::unistd::getegid().as_raw(),
        GroupBits {
            dir: 0o2070,
            file: 0o060,
        },
    )
    .unwrap();
    root.remove_tree("out").unwrap();
    root.remove_tree("f").unwrap();
    outside.assert_untouched("a planted link was followed");
}

#[test]
fn a_fifo_is_never_opened_for_reading() {
    let tmp = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(
        &tmp.path().join("p"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let root = RootedDir::open(tmp.path()).unwrap();
    // O_NONBLOCK: the open returns at once, and the fstat says what it is.
    let e = root.read_file("p", 10).unwrap_err();
    assert!(matches!(e, RootedError::NotAFile { .. }), "{e}");
}

/// A tree of two levels with files, as a volume holds.
fn tree(root: &Path) {
    for d in ["a", "a/b", "c"] {
        std::fs::create_dir(root.join(d)).unwrap();
        std::fs::set_permissions(root.join(d), PermissionsExt::from_mode(0o755)).unwrap();
    }
    for f in ["top", "a/f1", "a/b/f2", "c/f3"] {
        std::fs::write(root.join(f), f).unwrap();
        std::fs::set_permissions(root.join(f), PermissionsExt::from_mode(0o600)).unwrap();
    }
}

/// Runs `op` against a fresh tree once for every call it makes, with the adversary
/// swapping `what` right before that call, and checks the outside each time. Returns how
/// many runs saw the swap happen.
fn against_every_swap(name: &str, op: impl Fn(&RootedDir) -> Result<(), RootedError>) -> usize {
    // The calls of an undisturbed run.
    let clean = {
        let tmp = tempfile::tempdir().unwrap();
        tree(tmp.path());
        let outside = Outside::new();
        let k = Adversary::new(tmp.path(), outside.path(), Swap::All, 0);
        op(&RootedDir::open_with(k, tmp.path()).unwrap()).unwrap();
        k.calls()
    };
    assert!(clean > 0, "{name}: no calls through the seam");
    let mut raced = 0;
    for what in [Swap::Dirs, Swap::Files, Swap::All] {
        for at in 1..=clean {
            let tmp = tempfile::tempdir().unwrap();
            tree(tmp.path());
            let outside = Outside::new();
            let k = Adversary::new(tmp.path(), outside.path(), what, at);
            let root = RootedDir::open_with(k as &'static dyn DirKernel, tmp.path()).unwrap();
            // Failing is allowed (the tree changed under it); reaching outside is not.
            let _ = op(&root);
            assert!(k.swapped(), "{name}: call {at} of {clean} never came");
            outside.assert_untouched(&format!("{name}: {what:?} swapped before call {at}"));
            raced += 1;
        }
    }
    raced
}

#[test]
fn the_group_walk_never_reaches_outside_whenever_a_component_is_swapped() {
    let gid = nix::unistd::getegid().as_raw();
    let bits = GroupBits {
        dir: 0o2070,
        file: 0o060,
    };
    let raced = against_every_swap("set_group_tree", |root| {
        set_group_tree(root, gid, bits).map(drop)
    });
    assert!(raced > 30, "{raced}");
}

#[test]
fn removal_never_reaches_outside_whenever_a_component_is_swapped() {
    against_every_swap("remove_tree", |root| root.remove_tree("a"));
    against_every_swap("remove_tree of the root's entries", |root| {
        for name in root.entries()? {
            root.remove_tree(name.to_str().unwrap())?;
        }
        Ok(())
    });
}

#[test]
fn writes_never_reach_outside_whenever_a_component_is_swapped() {
    against_every_swap("create and replace", |root| {
        root.make_dir_all("a/b/new", 0o755)?;
        root.create_file(
            "a/b/new/f",
            b"x",
            0o666,
            Some(nix::unistd::getegid().as_raw()),
        )?;
        root.replace_file("a/f1", b"y", 0o666, true)?;
        root.replace_file("c/f3", b"z", 0o666, true)?;
        root.read_file("a/b/f2", 10)?;
        Ok(())
    });
}

#[test]
fn the_adversary_catches_a_walk_that_checks_then_uses_a_path() {
    // The old fsGroup walk's shape: stat through the seam, then chmod by path.
    let naive = |root: &RootedDir| -> Result<(), RootedError> {
        let k = root.kernel();
        for name in root.open_dir("a")?.entries()? {
            let rel = format!("a/{}", name.to_str().unwrap());
            let st = k
                .lstatat(root.open_dir("a")?.fd(), name.to_str().unwrap())
                .map_err(|e| RootedError::at("stat", Path::new(&rel), e))?;
            if EntryKind::of(&st) == EntryKind::File {
                let _ = k.fstat(root.fd());
                let path = root.path().join(&rel);
                let mode =
                    std::fs::metadata(&path).map_err(|e| RootedError::io("stat", &path, e))?;
                std::fs::set_permissions(&path, PermissionsExt::from_mode(mode.mode() | 0o060))
                    .map_err(|e| RootedError::io("chmod", &path, e))?;
            }
        }
        Ok(())
    };
    let caught = std::panic::catch_unwind(|| against_every_swap("naive walk", naive));
    assert!(
        caught.is_err(),
        "the adversary let a path-following walk through"
    );
}

#[test]
fn a_tree_deeper_than_path_max_is_removed_without_recursion() {
    // 3000 levels of "d/": 6000 bytes of path, beyond PATH_MAX, made through fds as a
    // container could make them (mkdir; chdir).
    let tmp = tempfile::tempdir().unwrap();
    let mut dir = nix::fcntl::open(
        tmp.path(),
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    std::fs::create_dir(tmp.path().join("top")).unwrap();
    dir = nix::fcntl::openat(
        &dir,
        "top",
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    for _ in 0..3000 {
        nix::sys::stat::mkdirat(&dir, "d", nix::sys::stat::Mode::from_bits_truncate(0o755))
            .unwrap();
        dir = nix::fcntl::openat(
            &dir,
            "d",
            nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
            nix::sys::stat::Mode::empty(),
        )
        .unwrap();
    }
    drop(dir);
    RootedDir::open(tmp.path())
        .unwrap()
        .remove_tree("top")
        .unwrap();
    assert!(!tmp.path().join("top").exists());
}
