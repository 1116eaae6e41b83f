//! Who may use the API: root always, and the members of `--socket-group` when one is
//! given. The socket file's mode keeps others from connecting at all; this check, on
//! the credentials the kernel recorded at connect time, holds even when the file mode
//! was loosened by hand or a descriptor was passed on.

use podhost_runtime::peer_cred::PeerCred;

/// The group let in besides root (`--socket-group NAME|GID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketGroup {
    pub gid: u32,
    /// The group's name as given or looked up, for messages.
    pub name: String,
}

/// Who may use the socket.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SocketAccess {
    pub group: Option<SocketGroup>,
}

/// `--socket-group` could not be resolved, or a peer may not use the API.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// `--socket-group NAME` names no group.
    #[error(
        "--socket-group {0:?}: no such group in the group database; give an existing group name or a numeric GID"
    )]
    UnknownGroup(String),
    /// The group database could not be read.
    #[error("--socket-group {spec:?}: looking the group up failed: {source}")]
    Lookup {
        spec: String,
        #[source]
        source: nix::Error,
    },
    /// A peer other than root connected, and no group is let in.
    #[error(
        "uid {uid} (gid {gid}) may not use the podhost API: only root may; run as root, or start the daemon with --socket-group to let a group in"
    )]
    NotRoot { uid: u32, gid: u32 },
    /// A peer that is neither root nor a member of `--socket-group` connected.
    #[error(
        "uid {uid} (gid {gid}) may not use the podhost API: only root and members of group {group} (gid {group_gid}) may; run as root or add the user to that group"
    )]
    NotInGroup {
        uid: u32,
        gid: u32,
        group: String,
        group_gid: u32,
    },
    /// SO_PEERCRED failed: the peer cannot be identified, so it is not served.
    #[error("the daemon cannot read your credentials ({0}), and serves only peers it can identify")]
    NoCredentials(#[source] std::io::Error),
}

impl SocketAccess {
    /// Root only.
    pub fn root_only() -> Self {
        Self { group: None }
    }

    /// The socket file's mode: 0660 when a group is let in, else 0600.
    pub fn mode(&self) -> u32 {
        if self.group.is_some() { 0o660 } else { 0o600 }
    }

    /// `Ok` when `peer` may use the API; otherwise the reason, to send back and log.
    pub fn check(&self, peer: &PeerCred) -> Result<(), AccessError> {
        if peer.uid == 0 {
            return Ok(());
        }
        let (uid, gid) = (peer.uid, peer.gid);
        match &self.group {
            Some(g) if peer.gid == g.gid || peer.groups.contains(&g.gid) => Ok(()),
            Some(g) => Err(AccessError::NotInGroup {
                uid,
                gid,
                group: g.name.clone(),
                group_gid: g.gid,
            }),
            None => Err(AccessError::NotRoot { uid, gid }),
        }
    }
}

/// Resolves `--socket-group`: a number is taken as a GID (it need not be named in
/// /etc/group), anything else is looked up by name.
pub fn resolve_socket_group(spec: &str) -> Result<SocketGroup, AccessError> {
    let spec = spec.trim();
    if let Ok(gid) = spec.parse::<u32>() {
        let name = nix::unistd::Group::from_gid(gid.into())
            .ok()
            .flatten()
            .map(|g| g.name)
            .unwrap_or_else(|| gid.to_string());
        return Ok(SocketGroup { gid, name });
    }
    match nix::unistd::Group::from_name(spec) {
        Ok(Some(g)) => Ok(SocketGroup {
            gid: g.gid.as_raw(),
            name: g.name,
        }),
        Ok(None) => Err(AccessError::UnknownGroup(spec.to_string())),
        Err(source) => Err(AccessError::Lookup {
            spec: spec.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> PeerCred {
        PeerCred {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    fn with_group(gid: u32) -> SocketAccess {
        SocketAccess {
            group: Some(SocketGroup {
                gid,
                name: "podhost".into(),
            }),
        }
    }

    #[test]
    fn root_only_serves_uid_0_and_nobody_else() {
        let a = SocketAccess::root_only();
        assert_eq!(a.mode(), 0o600);
        assert!(a.check(&peer(0, 0, &[])).is_ok());
        assert!(a.check(&peer(0, 1234, &[])).is_ok());
        let why = a.check(&peer(65534, 0, &[0])).unwrap_err().to_string();
        assert!(why.contains("uid 65534"), "{why}");
        assert!(why.contains("--socket-group"), "{why}");
    }

    #[test]
    fn a_group_is_let_in_by_primary_or_supplementary_gid() {
        let a = with_group(4242);
        assert_eq!(a.mode(), 0o660);
        assert!(a.check(&peer(1000, 4242, &[])).is_ok());
        assert!(a.check(&peer(1000, 1000, &[27, 4242])).is_ok());
        let why = a.check(&peer(1000, 1000, &[27])).unwrap_err().to_string();
        assert!(why.contains("group podhost (gid 4242)"), "{why}");
    }

    #[test]
    fn socket_group_by_number_or_name() {
        assert_eq!(resolve_socket_group("4242").unwrap().gid, 4242);
        assert_eq!(resolve_socket_group(" 0 ").unwrap().name, "root");
        assert_eq!(resolve_socket_group("root").unwrap().gid, 0);
        let e = resolve_socket_group("no-such-group-podhost").unwrap_err();
        assert!(e.to_string().contains("no-such-group-podhost"), "{e}");
    }
}
