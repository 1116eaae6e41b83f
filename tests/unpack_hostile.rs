//! Hostile layers: the corpus of tests/fixtures/hostile/ and a randomized
//! property test (the stand-in for fuzzing on stable Rust; `fuzz/` has the
//! cargo-fuzz target). The invariant everywhere: nothing outside the snapshot
//! root changes — a canary tree next to it stays byte-for-byte the same, no new
//! file appears beside it, /etc/passwd and /etc/shadow are untouched — and a
//! refused or skipped entry is reported by name.
//!
//! Store-level failures (truncated layer, full disk, killed `podhost load`) are
//! in unpack_hostile/store.rs.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "fixtures/hostile/corpus.rs"]
mod corpus;
#[path = "unpack_hostile/store.rs"]
mod store;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use corpus::{E, Expect, K, Lands};
use podhost::image::{ImageError, UnpackStats, unpack_layer};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A temp dir holding `root/` (the snapshot) and `canary/` (must not change).
struct Sandbox {
    tmp: tempfile::TempDir,
    canary: PathBuf,
    before: BTreeMap<PathBuf, String>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let canary = tmp.path().join("canary");
        fs::create_dir_all(canary.join("sub")).unwrap();
        fs::write(canary.join("secret"), b"secret").unwrap();
        fs::write(canary.join("sub/file"), b"file").unwrap();
        std::os::unix::fs::symlink("secret", canary.join("link")).unwrap();
        let before = tree(&canary);
        Sandbox {
            tmp,
            canary,
            before,
        }
    }

    fn canary_abs(&self) -> String {
        self.canary.display().to_string()
    }

    /// A fresh, empty snapshot root.
    fn root(&self, name: &str) -> PathBuf {
        let root = self.tmp.path().join(name);
        fs::create_dir(&root).unwrap();
        root
    }

    /// The invariant: canary unchanged, nothing new beside `root`.
    fn check_outside(&self, root: &Path) -> Result<(), String> {
        let after = tree(&self.canary);
        if after != self.before {
            return Err(format!("canary changed: {:?}", diff(&self.before, &after)));
        }
        let mut names: Vec<String> = fs::read_dir(self.tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let root_name = root.file_name().unwrap().to_string_lossy().into_owned();
        let mut want = vec!["canary".to_string(), root_name];
        want.sort();
        if names != want {
            return Err(format!("unexpected entries beside the root: {names:?}"));
        }
        Ok(())
    }
}

/// Every path under `dir` (not following symlinks) with type, mode, owner,
/// links, size, mtime and content or target.
fn tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let what = if m.is_dir() {
                stack.push(p.clone());
                String::new()
            } else if m.file_type().is_symlink() {
                fs::read_link(&p).unwrap().display().to_string()
            } else {
                String::from_utf8_lossy(&fs::read(&p).unwrap()).into_owned()
            };
            let desc = format!(
                "{:o} {}:{} n{} {}b t{} {what}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.nlink(),
                m.len(),
                m.mtime()
            );
            out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), desc);
        }
    }
    out
}

fn diff(a: &BTreeMap<PathBuf, String>, b: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in a {
        if b.get(k) != Some(v) {
            out.push(format!("{}: {v} -> {:?}", k.display(), b.get(k)));
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out.push(format!("new: {}", k.display()));
    }
    out
}

/// Metadata of host files a hostile layer might aim at.
fn host_files() -> Vec<String> {
    ["/etc/passwd", "/etc/shadow"]
        .iter()
        .filter_map(|p| {
            let m = fs::symlink_metadata(p).ok()?;
            Some(format!(
                "{p} {} {} {} {}",
                m.ino(),
                m.nlink(),
                m.len(),
                m.mtime()
            ))
        })
        .collect()
}

fn check_expect(expect: &Expect, r: &Result<UnpackStats, ImageError>) -> Result<(), String> {
    match (expect, r) {
        (Expect::Ok, Ok(s)) if s.skipped.is_empty() => Ok(()),
        (Expect::Skip(e), Ok(s)) if s.skipped.iter().any(|x| &x.entry == e) => Ok(()),
        (Expect::Refuse(e), Err(err @ ImageError::UnsafeEntry { .. }))
            if err.to_string().contains(e.as_str()) =>
        {
            Ok(())
        }
        (want, got) => Err(format!("expected {want:?}, got {got:?}")),
    }
}

fn check_lands(root: &Path, lands: &[Lands]) -> Result<(), String> {
    for l in lands {
        let ok = match l {
            Lands::File(p, data) => fs::read(root.join(p)).ok().as_deref() == Some(*data),
            Lands::Dir(p) => fs::symlink_metadata(root.join(p)).is_ok_and(|m| m.is_dir()),
            Lands::Symlink(p, t) => fs::read_link(root.join(p)).is_ok_and(|l| l == Path::new(t)),
            Lands::Whiteout(p) => fs::symlink_metadata(root.join(p))
                .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == 0),
            Lands::Fifo(p) => {
                fs::symlink_metadata(root.join(p)).is_ok_and(|m| m.file_type().is_fifo())
            }
            Lands::Absent(p) => fs::symlink_metadata(root.join(p)).is_err(),
            Lands::Mode(p, mode) => {
                fs::symlink_metadata(root.join(p)).is_ok_and(|m| m.mode() & 0o7777 == *mode)
            }
            Lands::Opaque(p) => {
                xattr::get(root.join(p), "trusted.overlay.opaque")
                    .ok()
                    .flatten()
                    .as_deref()
                    == Some(b"y")
            }
            Lands::Owner(p, uid, gid) => {
                fs::symlink_metadata(root.join(p)).is_ok_and(|m| (m.uid(), m.gid()) == (*uid, *gid))
            }
            Lands::Xattr(p, key, value) => {
                xattr::get(root.join(p), key).ok().flatten().as_deref() == Some(*value)
            }
            Lands::SameInode(a, b) => {
                let ino = |p: &str| fs::symlink_metadata(root.join(p)).map(|m| m.ino()).ok();
                ino(a).is_some() && ino(a) == ino(b)
            }
        };
        if !ok {
            return Err(format!("not as expected in the snapshot: {l:?}"));
        }
    }
    Ok(())
}

#[test]
fn hostile_corpus() {
    let probe = Sandbox::new();
    let cases = corpus::cases(&probe.canary_abs());
    let out_dir = std::env::var_os("PODHOST_WRITE_CORPUS").map(PathBuf::from);
    let host_before = host_files();
    let mut failures = Vec::new();
    for case in &cases {
        let sb = Sandbox::new();
        // The canary path differs per sandbox: rebuild the case for this one.
        let case = corpus::cases(&sb.canary_abs())
            .into_iter()
            .find(|c| c.name == case.name)
            .unwrap();
        assert!(
            !case.needs_root || is_root(),
            "case {} needs root (mknod, chown, trusted xattrs): run this test as root",
            case.name
        );
        let data = corpus::tar(&case.entries);
        if let Some(dir) = &out_dir {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join(format!("{}.tar", case.name)), &data).unwrap();
        }
        let root = sb.root("root");
        let r = unpack_layer(&data[..], &root, case.name);
        let checks = [
            check_expect(&case.expect, &r),
            sb.check_outside(&root),
            if r.is_ok() {
                check_lands(&root, &case.lands)
            } else {
                Ok(())
            },
        ];
        for c in checks {
            if let Err(e) = c {
                failures.push(format!("{}: {e}", case.name));
            }
        }
    }
    assert_eq!(host_files(), host_before, "host files changed");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{} hostile cases checked", cases.len());
}

#[test]
fn hostile_corpus_gzipped_through_the_same_path() {
    // The same checks hold when the layer is gzipped (the usual case).
    let sb = Sandbox::new();
    let data = corpus::tar(&[
        E::sym("evil", "/"),
        E::file("evil/x", b"x"),
        E::file("../canary/p", b"p"),
    ]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&data).unwrap();
    let gz = gz.finish().unwrap();
    let root = sb.root("root");
    let err = unpack_layer(&gz[..], &root, "gz").unwrap_err();
    assert!(err.to_string().contains("../canary/p"), "{err}");
    assert!(root.join("x").is_file());
    sb.check_outside(&root).unwrap();
}

// ---- property test ---------------------------------------------------------------

/// xorshift64*, fixed seed: the same cases on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap()
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Name parts. Half the layers use only names that pass the name policy, so
/// that what they do with symlinks, hardlinks and whiteouts reaches the kernel's
/// path resolution; the other half also get `..`, empty parts (absolute
/// paths) and bad whiteout names.
const PARTS: &[&str] = &[
    "a",
    "b",
    "d",
    "canary",
    "secret",
    ".",
    ".wh.a",
    ".wh..wh..opq",
];
const HOSTILE_PARTS: &[&str] = &["..", "", ".wh...", ".wh.."];

fn random_path(rng: &mut Rng, hostile: bool) -> String {
    let n = 1 + rng.below(4);
    let parts: Vec<&str> = (0..n)
        .map(|_| match hostile && rng.below(6) == 0 {
            true => rng.pick(HOSTILE_PARTS),
            false => rng.pick(PARTS),
        })
        .collect();
    let mut p = parts.join("/");
    match rng.below(24) {
        0 if hostile => p.insert(0, '/'),
        1..=3 => p.push('/'),
        4..=6 => p.insert_str(0, "./"),
        _ => {}
    }
    p
}

fn random_entry(rng: &mut Rng, canary: &str, hostile: bool) -> E {
    let path = random_path(rng, hostile);
    let targets = [
        "/",
        "..",
        "../..",
        "../canary",
        canary,
        "a",
        "a/b",
        "/a",
        "../../canary/secret",
        "",
        "b/../..",
        "d",
    ];
    let e = match rng.below(10) {
        0 | 1 => E::file(&path, b"data"),
        2 | 3 => E::dir(&path),
        4 | 5 => E::sym(&path, rng.pick(&targets)),
        6 => {
            let t = if rng.below(2) == 0 {
                rng.pick(&targets).to_string()
            } else {
                random_path(rng, hostile)
            };
            E::hard(&path, &t)
        }
        7 => {
            let (ma, mi) = [(0, 0), (1, 3), (8, 0)][rng.below(3)];
            E::node(
                &path,
                if rng.below(2) == 0 {
                    K::Char(ma, mi)
                } else {
                    K::Block(ma, mi)
                },
            )
        }
        8 => E::node(&path, K::Fifo),
        _ => E::file(&path, b"x").xattr(
            [
                "trusted.overlay.opaque",
                "user.podhost",
                "trusted.overlay.redirect",
            ][rng.below(3)],
            b"y",
        ),
    };
    e.mode([0o644, 0o4755, 0o000, 0o1777, 0o555][rng.below(5)])
}

#[test]
fn random_layers_never_escape() {
    const CASES: usize = 2500;
    let sb = Sandbox::new();
    let canary = sb.canary_abs();
    let host_before = host_files();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut refused, mut other) = (0, 0, 0);
    for i in 0..CASES {
        let n = 1 + rng.below(8);
        let hostile = rng.below(2) == 0;
        let entries: Vec<E> = (0..n)
            .map(|_| random_entry(&mut rng, &canary, hostile))
            .collect();
        let mut data = corpus::tar(&entries);
        match rng.below(10) {
            0 => {
                let cut = rng.below(data.len());
                data.truncate(cut);
            }
            1 => {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(&data).unwrap();
                data = gz.finish().unwrap();
            }
            _ => {}
        }
        let root = sb.root(&format!("root{i}"));
        let r = std::panic::catch_unwind(|| unpack_layer(&data[..], &root, "random"));
        let r = r.unwrap_or_else(|_| panic!("case {i} panicked: {entries:?}"));
        match &r {
            Ok(_) => ok += 1,
            Err(ImageError::UnsafeEntry { .. }) => refused += 1,
            Err(e) => {
                other += 1;
                if std::env::var_os("PODHOST_DEBUG_RANDOM").is_some() {
                    eprintln!("case {i}: {e}");
                }
            }
        }
        if let Err(e) = sb.check_outside(&root) {
            panic!("case {i}: {e}\nentries: {entries:?}\nresult: {r:?}");
        }
        // Make everything removable (modes 0 or 0555 in the layer), then remove.
        if !is_root() {
            let _ = std::process::Command::new("chmod")
                .args(["-R", "u+rwx"])
                .arg(&root)
                .status();
        }
        fs::remove_dir_all(&root).unwrap();
    }
    assert_eq!(host_files(), host_before, "host files changed");
    eprintln!("{CASES} random layers: {ok} unpacked, {refused} refused, {other} other errors");
    assert!(
        ok > CASES / 10 && refused > CASES / 10,
        "{ok} ok, {refused} refused: too one-sided"
    );
}
