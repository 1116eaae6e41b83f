//! Applies podhost's nftables ruleset (text from `model::net::nft`) with the `nft` tool,
//! one atomic transaction per change fed on stdin (`nft -f -`).
//!
//! Why the tool rather than a netlink crate: the Rust nftables crates either drive
//! this same `nft` binary through its JSON mode (`nftables`) or speak netlink at the
//! level of raw expressions (`rustables`, `nftnl` bindings to libnftnl, a C library
//! podhost would have to link), so a NAT table with fib, ct and per-family dnat would
//! be hand-assembled bytecode with no check but the kernel's. The tool parses the same
//! text an operator reads in `nft list table inet podhost`, applies a whole file as
//! one transaction (the table is replaced atomically, never half-written), and is the
//! Debian package every nftables host has. It runs only when the ruleset changes:
//! at start, for pods with hostPorts, and in reconcile — never for a pod without one.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use super::BridgeError;

/// The `nft` program to run, found once at start.
#[derive(Debug)]
pub(super) struct Nft {
    /// The program found, or `None` with `wanted` (what was looked for) missing.
    program: Option<PathBuf>,
    wanted: String,
    /// The table this daemon owns (`podhost`, or `podhost-<bridge>` for another bridge).
    table: String,
    /// Serializes transactions so that the last one applied is the newest rendering.
    lock: tokio::sync::Mutex<()>,
}

impl Nft {
    /// `program` as given when it holds a `/`, else looked up in PATH and in the sbin
    /// directories (a daemon's PATH may lack them).
    pub(super) fn find(program: &Path, table: String) -> Self {
        let found = if program.components().count() > 1 {
            program.is_file().then(|| program.to_path_buf())
        } else {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
                .map(|dir| dir.join(program))
                .find(|p| p.is_file())
        };
        Self {
            program: found,
            wanted: program.display().to_string(),
            table,
            lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Why nftables cannot be used, if it cannot.
    pub(super) fn unavailable(&self) -> Option<BridgeError> {
        self.program.is_none().then(|| BridgeError::NftMissing {
            program: self.wanted.clone(),
        })
    }

    /// Applies the transaction `render()` returns, rendered under the lock so that
    /// concurrent changes are applied in order and the last one wins.
    pub(super) async fn apply(&self, render: impl FnOnce() -> String) -> Result<(), BridgeError> {
        let Some(program) = self.program.clone() else {
            return Err(BridgeError::NftMissing {
                program: self.wanted.clone(),
            });
        };
        let _guard = self.lock.lock().await;
        let text = render();
        let failed = |message: String| BridgeError::Nft {
            program: program.clone(),
            table: self.table.clone(),
            message,
        };
        let mut child = tokio::process::Command::new(&program)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("could not start it: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(text.as_bytes())
                .await
                .map_err(|e| failed(format!("could not write the ruleset to it: {e}")))?;
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| failed(format!("could not wait for it: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(failed(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// The table this daemon owns.
    pub(super) fn table(&self) -> &str {
        &self.table
    }

    /// `nft list table inet <table>`: its text, or `None` when it does not exist.
    pub(super) async fn list_table(&self) -> Result<Option<String>, BridgeError> {
        let Some(program) = self.program.clone() else {
            return Err(BridgeError::NftMissing {
                program: self.wanted.clone(),
            });
        };
        let out = tokio::process::Command::new(&program)
            .args(["list", "table", "inet", &self.table])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| BridgeError::Nft {
                program: program.clone(),
                table: self.table.clone(),
                message: format!("could not run it: {e}"),
            })?;
        // nft says "No such file or directory" for a table that does not exist.
        Ok(out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned()))
    }
}
