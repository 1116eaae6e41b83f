//! What the hostile-container suites (`tests/hostile_*.rs`) share: the host sentinel
//! whose modes, owners, contents and entries must come out unchanged, the attacker image
//! (tests/programs/swapper.c), and the daemon's peak memory.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::common::{TestDaemon, static_program_layout};

/// The attacker's image.
pub const IMAGE: &str = "localhost/swapper:1";
/// The daemon's peak resident memory above which the attack counts as a blow-up.
pub const MAX_DAEMON_PEAK_RSS_KIB: u64 = 256 * 1024;

/// A host directory no container sees: one secret file (0600), one private subdir
/// with a file, owned by root.
pub struct Sentinel {
    _dir: tempfile::TempDir,
    path: PathBuf,
    before: BTreeMap<String, String>,
}

impl Sentinel {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("podhost-sentinel-")
            .tempdir()
            .unwrap();
        let path = dir.path().to_path_buf();
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::write(path.join("secret"), b"host secret\n").unwrap();
        std::fs::set_permissions(path.join("secret"), PermissionsExt::from_mode(0o600)).unwrap();
        std::fs::create_dir(path.join("sub")).unwrap();
        std::fs::set_permissions(path.join("sub"), PermissionsExt::from_mode(0o700)).unwrap();
        std::fs::write(path.join("sub/inner"), b"inner\n").unwrap();
        std::fs::set_permissions(path.join("sub/inner"), PermissionsExt::from_mode(0o640)).unwrap();
        let before = snapshot(&path);
        Self {
            _dir: dir,
            path,
            before,
        }
    }

    pub fn host_dir(&self) -> &str {
        self.path.to_str().unwrap()
    }

    pub fn assert_unchanged(&self, d: &TestDaemon) {
        let after = snapshot(&self.path);
        assert_eq!(
            after,
            self.before,
            "the host sentinel {} changed under a hostile container; daemon log:\n{}",
            self.path.display(),
            d.daemon_log()
        );
    }
}

/// Every entry below `root` (and root itself): type, mode, owner, content.
pub fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let what = if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
            "dir".to_string()
        } else if m.is_file() {
            format!("file {:?}", std::fs::read(&p).unwrap())
        } else {
            format!("other {:?}", std::fs::read_link(&p).ok())
        };
        out.insert(
            rel,
            format!("{what} mode={:o} uid={} gid={}", m.mode(), m.uid(), m.gid()),
        );
    }
    out
}

/// The swapper image (tests/programs/swapper.c, static) loaded into `d`.
pub fn load_swapper(d: &TestDaemon) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/swapper.c");
    let work = d.dir.path().join("swapper-image");
    std::fs::create_dir_all(&work).unwrap();
    d.load(&static_program_layout(&src, &work, IMAGE));
}

/// The peak resident memory (VmHWM) of process `pid`.
pub fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The last `swaps=S refused=R` the swapper printed in `logs`.
pub fn tally(logs: &str) -> (u64, u64) {
    let last = logs
        .lines()
        .rev()
        .find(|l| l.starts_with("swaps="))
        .unwrap_or("swaps=0 refused=0");
    let num = |key: &str| {
        last.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (num("swaps="), num("refused="))
}
