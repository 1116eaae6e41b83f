use super::*;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn set(files: &[(&str, &[u8], u32)]) -> FileSet {
    files
        .iter()
        .map(|(p, d, m)| {
            (
                p.to_string(),
                ProjectedFile {
                    data: d.to_vec(),
                    mode: *m,
                },
            )
        })
        .collect()
}

/// A volume dir and, outside it, the writer's record (as the pod dir holds it).
struct Vol {
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
}

impl Vol {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, files: &FileSet, group: Option<u32>) -> Result<bool, ContentError> {
        write_atomically(self.path(), files, group, &self.state.path().join("record"))
    }
}

fn data_target(dir: &Path) -> PathBuf {
    fs::read_link(dir.join(DATA)).unwrap()
}

fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[test]
fn the_first_write_lays_out_payload_data_link_and_user_links() {
    let dir = Vol::new();
    let files = set(&[("a", b"A", 0o644), ("conf/b.txt", b"B", 0o600)]);
    assert!(dir.write(&files, None).unwrap());
    let payload = data_target(dir.path());
    assert!(payload.to_str().unwrap().starts_with(".."), "{payload:?}");
    assert_eq!(
        fs::read_link(dir.path().join("a")).unwrap(),
        PathBuf::from("..data/a")
    );
    assert_eq!(
        fs::read_link(dir.path().join("conf")).unwrap(),
        PathBuf::from("..data/conf")
    );
    assert_eq!(fs::read(dir.path().join("conf/b.txt")).unwrap(), b"B");
    let mode = |p: &str| {
        fs::metadata(dir.path().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("a"), 0o644);
    assert_eq!(mode("conf/b.txt"), 0o600);
    assert_eq!(mode(payload.to_str().unwrap()), 0o755);
    let expected: BTreeSet<String> = ["..data", "a", "conf", payload.to_str().unwrap()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names(dir.path()), expected);
}

#[test]
fn an_unchanged_payload_is_not_swapped_and_a_changed_one_is() {
    let dir = Vol::new();
    let files = set(&[("a", b"A", 0o644)]);
    assert!(dir.write(&files, None).unwrap());
    let first = data_target(dir.path());
    assert!(!dir.write(&files, None).unwrap());
    assert_eq!(
        data_target(dir.path()),
        first,
        "no swap for the same payload"
    );
    // A mode change is a change.
    assert!(dir.write(&set(&[("a", b"A", 0o600)]), None).unwrap());
    let second = data_target(dir.path());
    assert_ne!(second, first);
    assert!(
        !dir.path().join(&first).exists(),
        "the old payload is removed"
    );
}

#[test]
fn removed_keys_disappear_and_new_ones_appear() {
    let dir = Vol::new();
    dir.write(&set(&[("a", b"1", 0o644), ("d/x", b"2", 0o644)]), None)
        .unwrap();
    dir.write(&set(&[("b", b"3", 0o644)]), None).unwrap();
    let visible: BTreeSet<String> = names(dir.path())
        .into_iter()
        .filter(|n| !n.starts_with(".."))
        .collect();
    assert_eq!(visible, BTreeSet::from(["b".to_string()]));
    assert_eq!(
        names(dir.path()).len(),
        3,
        "..data, one payload, b: {:?}",
        names(dir.path())
    );
    // An empty payload (an optional object that is missing) empties the volume.
    assert!(dir.write(&FileSet::new(), None).unwrap());
    assert!(!dir.path().join("b").exists());
}

#[test]
fn escaping_and_reserved_paths_are_refused() {
    let dir = Vol::new();
    for bad in [
        "../x",
        "/etc/passwd",
        "a/../../x",
        "..data",
        "..x/y",
        "a/..b",
        "",
        "a//b",
        "./a",
    ] {
        let err = dir.write(&set(&[(bad, b"x", 0o644)]), None).unwrap_err();
        assert!(
            matches!(err, ContentError::UnsafePath { .. }),
            "{bad:?}: {err}"
        );
    }
    let err = dir
        .write(&set(&[("a", b"x", 0o644), ("a/b", b"y", 0o644)]), None)
        .unwrap_err();
    assert!(matches!(err, ContentError::UnsafePath { .. }), "{err}");
    assert!(
        names(dir.path()).is_empty(),
        "nothing written: {:?}",
        names(dir.path())
    );
}

#[test]
fn links_that_point_out_of_the_dir_are_never_followed() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("keep"), b"precious").unwrap();
    let dir = Vol::new();
    // ..data planted to point outside: refused, the outside untouched.
    std::os::unix::fs::symlink(outside.path(), dir.path().join(DATA)).unwrap();
    let err = dir.write(&set(&[("keep", b"x", 0o644)]), None).unwrap_err();
    assert!(matches!(err, ContentError::Foreign { .. }), "{err}");
    assert_eq!(fs::read(outside.path().join("keep")).unwrap(), b"precious");
    fs::remove_file(dir.path().join(DATA)).unwrap();

    // A link planted inside the current payload: never read (the writer compares with
    // its own record, not with what is in the volume), and removing that payload once
    // a new one is written removes the link, not what it points at.
    dir.write(&set(&[("a", b"A", 0o644)]), None).unwrap();
    let payload = dir.path().join(data_target(dir.path()));
    std::os::unix::fs::symlink(outside.path(), payload.join("evil")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("keep"), payload.join("a2")).unwrap();
    assert!(!dir.write(&set(&[("a", b"A", 0o644)]), None).unwrap());
    assert!(dir.write(&set(&[("a", b"A2", 0o644)]), None).unwrap());
    assert!(!payload.exists());
    assert_eq!(fs::read(outside.path().join("keep")).unwrap(), b"precious");

    // The current payload dir swapped for a link to the outside: rewritten (the record
    // names a dir that is no longer there), the outside untouched.
    let current = dir.path().join(data_target(dir.path()));
    let before = fs::metadata(outside.path().join("keep")).unwrap();
    fs::rename(&current, dir.path().join("..aside")).unwrap();
    std::os::unix::fs::symlink(outside.path(), &current).unwrap();
    assert!(dir.write(&set(&[("a", b"A3", 0o600)]), Some(4321)).unwrap());
    assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"A3");
    let keep = fs::metadata(outside.path().join("keep")).unwrap();
    assert_eq!((keep.gid(), keep.mode()), (before.gid(), before.mode()));
    assert_eq!(fs::read(outside.path().join("keep")).unwrap(), b"precious");

    // A plain file where a user-visible link belongs is not overwritten.
    fs::write(dir.path().join("b"), b"foreign").unwrap();
    let err = dir.write(&set(&[("b", b"B", 0o644)]), None).unwrap_err();
    assert!(matches!(err, ContentError::Foreign { .. }), "{err}");
    assert_eq!(fs::read(dir.path().join("b")).unwrap(), b"foreign");
}

#[test]
fn fs_group_owns_the_payload_with_group_read() {
    let dir = Vol::new();
    dir.write(&set(&[("s/key", b"k", 0o600)]), Some(4321))
        .unwrap();
    let file = fs::metadata(dir.path().join("s/key")).unwrap();
    assert_eq!(file.gid(), 4321);
    assert_eq!(file.mode() & 0o7777, 0o640);
    let sub = fs::metadata(dir.path().join("..data/s")).unwrap();
    assert_eq!(sub.gid(), 4321);
    assert_eq!(sub.mode() & 0o7777, 0o2755);
    // Same payload and group: no rewrite.
    assert!(
        !dir.write(&set(&[("s/key", b"k", 0o600)]), Some(4321))
            .unwrap()
    );
}

/// A reader never sees a torn file, a file missing without a swap, or a mix of two
/// payloads, while the writer swaps payloads as fast as it can.
#[test]
fn readers_see_whole_payloads_while_the_writer_swaps() {
    const SIZE: usize = 256 * 1024;
    const ROUNDS: u8 = 200;
    let dir = Vol::new();
    let payload = |round: u8| {
        set(&[
            ("a", &vec![round; SIZE], 0o644),
            ("sub/b", &vec![round; SIZE], 0o644),
        ])
    };
    dir.write(&payload(0), None).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (dir, done) = (dir.path().to_path_buf(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !done.load(Ordering::Relaxed) {
                // Through the user-visible link: whole, one generation. A missing file
                // is allowed only if ..data moved during the read (the old payload was
                // retired under the reader's path walk).
                let before = fs::read_link(dir.join(DATA)).unwrap();
                match fs::read(dir.join("a")) {
                    Ok(a) => {
                        assert_eq!(a.len(), SIZE, "torn file");
                        assert!(a.iter().all(|b| *b == a[0]), "mixed file");
                    }
                    Err(e) => {
                        let after = fs::read_link(dir.join(DATA)).unwrap();
                        assert_ne!(before, after, "file missing without a swap: {e}");
                    }
                }
                // Through one opened payload dir: both files of the same generation,
                // unless that payload was retired meanwhile (..data points elsewhere).
                let Ok(opened) = fs::File::open(dir.join(DATA)) else {
                    continue;
                };
                let base = PathBuf::from(format!(
                    "/proc/self/fd/{}",
                    std::os::fd::AsRawFd::as_raw_fd(&opened)
                ));
                match (fs::read(base.join("a")), fs::read(base.join("sub/b"))) {
                    (Ok(a), Ok(b)) => assert_eq!(a[0], b[0], "files of two payloads mixed"),
                    _ => assert_ne!(
                        fs::metadata(dir.join(DATA)).unwrap().ino(),
                        opened.metadata().unwrap().ino(),
                        "the current payload lost a file"
                    ),
                }
                reads += 1;
            }
            reads
        })
    };
    for round in 1..=ROUNDS {
        assert!(dir.write(&payload(round), None).unwrap());
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader saw a broken payload");
    assert!(reads > 0);
    assert_eq!(fs::read(dir.path().join("sub/b")).unwrap()[0], ROUNDS);
    assert_eq!(names(dir.path()).len(), 4, "..data, one payload, a, sub");
}

/// A container that can write the volume (a privileged one that remounts it, say)
/// swaps payload dirs and files for links out of it between any two of the writer's
/// calls: the write may fail, the outside is never touched.
#[test]
fn a_swap_between_any_two_calls_never_reaches_outside() {
    use podhost_rooted::adversary::{Adversary, Outside, Swap};
    let v1 = set(&[("a", b"1", 0o644), ("d/b", b"2", 0o600)]);
    let v2 = set(&[
        ("a", b"3", 0o644),
        ("d/b", b"4", 0o600),
        ("e/c", b"5", 0o644),
    ]);
    let run = |what: Swap, at: usize| {
        let vol = Vol::new();
        vol.write(&v1, Some(4321)).unwrap();
        let outside = Outside::new();
        let k = Adversary::new(vol.path(), outside.path(), what, at);
        let record = vol.state.path().join("record");
        let _ = write_through(k, vol.path(), &v2, Some(4321), &record);
        outside.assert_untouched(&format!("{what:?} swapped before call {at}"));
        (k.calls(), k.swapped())
    };
    let (clean, _) = run(Swap::All, 0);
    assert!(clean > 20, "{clean} calls");
    for what in [Swap::Dirs, Swap::Files, Swap::All] {
        for at in 1..=clean {
            let (_, swapped) = run(what, at);
            assert!(swapped, "call {at} of {clean} never came");
        }
    }
}

/// A container's start fills a volume while the refresher may be writing it: writers
/// of the same volume take turns, so neither removes the payload the other just made
/// current (`..data` never dangles).
#[test]
fn concurrent_writers_never_leave_data_dangling() {
    let vol = Arc::new(Vol::new());
    let writers: Vec<_> = (0..4u8)
        .map(|w| {
            let vol = vol.clone();
            std::thread::spawn(move || {
                for round in 0..40u8 {
                    let value = [w, round % 2];
                    vol.write(&set(&[("k", &value, 0o644)]), None).unwrap();
                    let target = vol.path().join(data_target(vol.path()));
                    assert!(
                        target.is_dir(),
                        "..data dangles after writer {w}'s round {round}"
                    );
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("a writer saw a dangling ..data");
    }
    assert_eq!(fs::read(vol.path().join("k")).unwrap().len(), 2);
}
