//! Which daemon a host object belongs to. Several daemons (each with its own root dir)
//! may share a host's network namespace; each must touch only its own veths, bridge
//! and rules. A daemon's identity is a hash of its canonical state directory
//! (`<root>/network/bridge`): stable across restarts, different for every root, and
//! needing no file that could be lost.
//!
//! The marks:
//! - every host veth carries the alias (IFLA_IFALIAS) `podhost:<id>:<uid>`, and
//!   reconcile deletes only veths carrying its own id;
//! - the bridge carries `podhost:<id>:<state dir>`, and the daemon holds an flock on
//!   `<state dir>/owner.lock` for the network's life: another daemon finding a bridge
//!   marked by a different id tries that lock (non-blocking) to learn whether its
//!   owner still runs, and refuses the bridge if it does.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};

use super::BridgeError;

/// Prefix of every alias podhost writes.
const MARK: &str = "podhost";

/// The lock file a daemon holds in its state directory while its network lives.
const LOCK_FILE: &str = "owner.lock";

/// Serializes claims of bridges across every daemon on the host (held for a few
/// netlink round trips): two daemons adopting the same unmarked bridge at once would
/// both believe they own it.
const CLAIM_LOCK: &str = "/run/lock/podhost-bridge-claim.lock";

/// Longest alias Linux keeps (IFALIASZ - 1).
const MAX_ALIAS: usize = 255;

/// A daemon's identity: 16 hex digits of the SHA-256 of its canonical state dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerId {
    id: String,
    state_dir: PathBuf,
}

impl OwnerId {
    /// The identity of the daemon whose bridge state lives in `state_dir` (made if
    /// missing, so that its canonical path exists).
    pub fn of_state_dir(state_dir: &Path) -> Result<Self, BridgeError> {
        std::fs::create_dir_all(state_dir).map_err(|e| BridgeError::io("create", state_dir, e))?;
        let canonical = state_dir
            .canonicalize()
            .map_err(|e| BridgeError::io("resolve", state_dir, e))?;
        let digest = Sha256::digest(canonical.as_os_str().as_encoded_bytes());
        Ok(Self {
            id: hex::encode(&digest[..8]),
            state_dir: canonical,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The alias of one of this daemon's host veths.
    pub fn veth_alias(&self, uid: &str) -> String {
        truncate(format!("{MARK}:{}:{uid}", self.id))
    }

    /// The alias of the bridge this daemon owns; without the path when it is too long
    /// to fit (another daemon then cannot tell whether this one lives, and refuses).
    pub fn bridge_alias(&self) -> String {
        let full = format!("{MARK}:{}:{}", self.id, self.state_dir.display());
        if full.len() <= MAX_ALIAS {
            full
        } else {
            format!("{MARK}:{}:", self.id)
        }
    }

    /// Whether `alias` (of a veth or the bridge) is this daemon's mark.
    pub fn owns(&self, alias: Option<&str>) -> bool {
        parse(alias).is_some_and(|(id, _)| id == self.id)
    }

    /// Takes this daemon's lock (held while the returned guard lives); fails when
    /// another process holds it (another daemon on the same root dir).
    pub fn lock(&self) -> Result<Flock<File>, BridgeError> {
        let path = self.state_dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| BridgeError::io("open", &path, e))?;
        Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| BridgeError::StateInUse {
            state_dir: self.state_dir.clone(),
        })
    }
}

/// A mark another daemon left: its id and the state dir it named (empty when it did
/// not fit in the alias).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignOwner {
    pub id: String,
    pub state_dir: String,
}

impl ForeignOwner {
    /// The other daemon's root dir as an operator knows it (`--root-dir`).
    pub fn root_dir(&self) -> String {
        let p = Path::new(&self.state_dir);
        match p.parent().and_then(Path::parent) {
            Some(root) if p.ends_with("network/bridge") => root.display().to_string(),
            _ => self.state_dir.clone(),
        }
    }

    /// Whether the daemon that left the mark still holds its lock. Its lock file is
    /// only opened read-only (never created, never followed through a symlink); a
    /// state dir that is gone or not recorded counts as: gone, and unknown (= live).
    pub fn is_live(&self) -> bool {
        if self.state_dir.is_empty() {
            return true;
        }
        let path = Path::new(&self.state_dir).join(LOCK_FILE);
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            Err(_) => return true,
        };
        // Taken: nobody holds it (released again when the guard drops).
        Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
    }
}

/// The owner named by a podhost alias, if `alias` is one.
pub fn parse(alias: Option<&str>) -> Option<(String, String)> {
    let rest = alias?.strip_prefix(MARK)?.strip_prefix(':')?;
    let (id, tail) = rest.split_once(':')?;
    (id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (id.to_string(), tail.to_string()))
}

/// The owner of a bridge whose alias is `alias`, when it is another daemon.
pub fn foreign_owner(me: &OwnerId, alias: Option<&str>) -> Option<ForeignOwner> {
    let (id, state_dir) = parse(alias)?;
    (id != me.id).then_some(ForeignOwner { id, state_dir })
}

/// Holds the host-wide claim lock while the guard lives; `None` (with a warning) when
/// it cannot be taken, the claim then going on unserialized.
pub fn claim_lock() -> Option<Flock<File>> {
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(CLAIM_LOCK);
    match opened.map(|f| Flock::lock(f, FlockArg::LockExclusive)) {
        Ok(Ok(guard)) => Some(guard),
        Ok(Err((_, e))) => {
            tracing::warn!(
                path = CLAIM_LOCK,
                "cannot lock: {e}; bridge claims unserialized"
            );
            None
        }
        Err(e) => {
            tracing::warn!(
                path = CLAIM_LOCK,
                "cannot open: {e}; bridge claims unserialized"
            );
            None
        }
    }
}

fn truncate(mut s: String) -> String {
    if s.len() > MAX_ALIAS {
        let mut end = MAX_ALIAS;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_differ_per_root_and_are_stable() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ia = OwnerId::of_state_dir(&a.path().join("network/bridge")).unwrap();
        let ib = OwnerId::of_state_dir(&b.path().join("network/bridge")).unwrap();
        assert_ne!(ia.id(), ib.id());
        // The same dir through another spelling is the same daemon.
        let again = OwnerId::of_state_dir(&a.path().join("network/../network/bridge")).unwrap();
        assert_eq!(ia, again);
        assert!(ia.owns(Some(&ia.veth_alias("u1"))));
        assert!(!ib.owns(Some(&ia.veth_alias("u1"))));
        assert!(!ia.owns(None));
        assert!(!ia.owns(Some("someone else's veth")));
    }

    #[test]
    fn a_bridge_mark_names_the_other_root_and_its_liveness_follows_its_lock() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ia = OwnerId::of_state_dir(&a.path().join("network/bridge")).unwrap();
        let ib = OwnerId::of_state_dir(&b.path().join("network/bridge")).unwrap();
        let alias = ia.bridge_alias();
        assert_eq!(foreign_owner(&ia, Some(&alias)), None);
        let other = foreign_owner(&ib, Some(&alias)).expect("a's mark seen from b");
        assert_eq!(
            Path::new(&other.root_dir()),
            a.path().canonicalize().unwrap()
        );
        assert!(!other.is_live(), "nobody holds a's lock yet");
        let held = ia.lock().unwrap();
        assert!(other.is_live());
        // The same root twice: the second is refused.
        let err = ia.lock().unwrap_err();
        assert!(matches!(err, BridgeError::StateInUse { .. }), "{err}");
        drop(held);
        assert!(!other.is_live());
        // A mark without a path cannot be checked: taken as live.
        let no_path = foreign_owner(&ib, Some(&format!("podhost:{}:", ia.id()))).unwrap();
        assert!(no_path.is_live());
    }

    #[test]
    fn long_paths_leave_the_alias_within_the_kernel_limit() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("d".repeat(200)).join("network/bridge");
        let id = OwnerId::of_state_dir(&deep).unwrap();
        assert!(id.bridge_alias().len() <= MAX_ALIAS);
        assert!(id.owns(Some(&id.bridge_alias())));
        assert!(id.veth_alias(&"u".repeat(300)).len() <= MAX_ALIAS);
    }
}
