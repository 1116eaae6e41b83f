//! The cert dir (`--cert-dir`, default ROOT/pki): `kubelet-client-<time>.pem` files
//! (chain and key, 0600) and the `kubelet-client-current.pem` symlink naming the one in
//! use, each written atomically (temp file, fsync, rename, fsync of the dir) so that a
//! crash leaves either the old pair or the new one, never half of one. The key of a
//! request still waiting for its certificate is kept in `kubelet-client.key.tmp`, so a
//! restart asks again with the same key (and finds the same CSR, named after it).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::CertError;
use super::pair::CertPair;

/// The symlink to the pair in use.
pub const CURRENT: &str = "kubelet-client-current.pem";
/// The key of a request not yet answered.
pub const PENDING_KEY: &str = "kubelet-client.key.tmp";

/// Writes `data` to `path` through a temp file in the same dir.
pub fn write_atomically(path: &Path, data: &[u8], mode: u32) -> Result<(), CertError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(CertError::io("cannot create", dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&temp)?;
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(data)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        sync_dir(dir)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&temp);
        CertError::Io {
            what: "cannot write",
            path: path.to_path_buf(),
            source,
        }
    })
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// The kubelet's name for a pair issued at `at`: `kubelet-client-2006-01-02-15-04-05.pem`.
pub fn pair_file_name(at: SystemTime) -> String {
    let at: chrono::DateTime<chrono::Utc> = at.into();
    format!("kubelet-client-{}.pem", at.format("%Y-%m-%d-%H-%M-%S"))
}

/// One cert dir.
#[derive(Debug, Clone)]
pub struct CertStore {
    dir: PathBuf,
}

impl CertStore {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path a kubeconfig names: the symlink, which rotation re-points.
    pub fn current_path(&self) -> PathBuf {
        self.dir.join(CURRENT)
    }

    /// The pair in use, if the dir has one.
    pub fn load_current(&self) -> Result<Option<CertPair>, CertError> {
        let path = self.current_path();
        match std::fs::read(&path) {
            Ok(pem) => CertPair::from_combined(&path.display().to_string(), &pem).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(CertError::Io {
                what: "cannot read",
                path,
                source,
            }),
        }
    }

    /// Stores `pair` as issued at `now` and points the current symlink at it (a
    /// temp symlink renamed over the old one). Returns the pair file's path.
    pub fn store(&self, pair: &CertPair, now: SystemTime) -> Result<PathBuf, CertError> {
        let name = pair_file_name(now);
        let file = self.dir.join(&name);
        write_atomically(&file, &pair.combined(), 0o600)?;
        let current = self.current_path();
        let temp = self
            .dir
            .join(format!(".{CURRENT}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let relink = || -> std::io::Result<()> {
            std::os::unix::fs::symlink(&name, &temp)?;
            std::fs::rename(&temp, &current)?;
            sync_dir(&self.dir)
        };
        relink().map_err(|source| {
            let _ = std::fs::remove_file(&temp);
            CertError::Io {
                what: "cannot point the current certificate at",
                path: file.clone(),
                source,
            }
        })?;
        Ok(file)
    }

    /// The key of the unanswered request, if one was made before a restart.
    pub fn pending_key(&self) -> Result<Option<String>, CertError> {
        let path = self.dir.join(PENDING_KEY);
        match std::fs::read_to_string(&path) {
            Ok(pem) => Ok(Some(pem)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(CertError::Io {
                what: "cannot read",
                path,
                source,
            }),
        }
    }

    /// Keeps the key of a request about to be posted.
    pub fn keep_pending_key(&self, key_pem: &str) -> Result<(), CertError> {
        write_atomically(&self.dir.join(PENDING_KEY), key_pem.as_bytes(), 0o600)
    }

    /// The request was answered: its key is in the pair file now.
    pub fn drop_pending_key(&self) {
        let _ = std::fs::remove_file(self.dir.join(PENDING_KEY));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pair(cn: &str) -> CertPair {
        super::super::pair::self_signed_for_tests(cn, 36_500)
    }

    #[test]
    fn pair_files_are_named_after_their_time_as_the_kubelet_names_them() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_000);
        assert_eq!(pair_file_name(at), "kubelet-client-2025-11-24-16-00-00.pem");
    }

    #[test]
    fn storing_points_the_current_symlink_at_a_private_pair_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::new(dir.path().join("pki"));
        assert!(store.load_current().unwrap().is_none());
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_000);
        let first = pair("a");
        let file = store.store(&first, t0).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(store.load_current().unwrap(), Some(first));
        let second = pair("b");
        store.store(&second, t0 + Duration::from_secs(60)).unwrap();
        assert_eq!(store.load_current().unwrap(), Some(second));
        assert_eq!(
            std::fs::read_link(store.current_path()).unwrap(),
            Path::new("kubelet-client-2025-11-24-16-01-00.pem")
        );
        // Both pair files stay (the kubelet keeps them too); no temp file is left.
        let mut names: Vec<String> = std::fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "kubelet-client-2025-11-24-16-00-00.pem",
                "kubelet-client-2025-11-24-16-01-00.pem",
                CURRENT
            ]
        );
    }

    #[test]
    fn the_pending_key_survives_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = CertStore::new(dir.path().to_path_buf());
        assert_eq!(store.pending_key().unwrap(), None);
        store.keep_pending_key("KEY").unwrap();
        assert_eq!(store.pending_key().unwrap().as_deref(), Some("KEY"));
        store.drop_pending_key();
        assert_eq!(store.pending_key().unwrap(), None);
    }
}
