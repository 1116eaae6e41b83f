//! Who is on the other end of a unix socket: the credentials the kernel recorded when
//! the peer called connect(2) (SO_PEERCRED) and its supplementary groups (SO_PEERGROUPS,
//! Linux ≥ 4.13). Both are fixed at connect time, so unlike /proc/<pid>/status they
//! cannot be raced by the peer exiting and its pid being reused.

use std::os::fd::{AsFd, AsRawFd};

use nix::sys::socket::{getsockopt, sockopt};

/// The peer of a connected unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the primary `gid` is not necessarily among them).
    pub groups: Vec<u32>,
}

/// Reads the peer's credentials and supplementary groups.
pub fn peer_cred(socket: &impl AsFd) -> std::io::Result<PeerCred> {
    let cred = getsockopt(socket, sockopt::PeerCredentials)?;
    Ok(PeerCred {
        pid: cred.pid(),
        uid: cred.uid(),
        gid: cred.gid(),
        groups: peer_groups(socket)?,
    })
}

/// Only the peer's pid, uid and gid (SO_PEERCRED).
pub fn peer_pid(socket: &impl AsFd) -> std::io::Result<i32> {
    Ok(getsockopt(socket, sockopt::PeerCredentials)?.pid())
}

/// SO_PEERGROUPS, growing the buffer when the kernel says it is too small (ERANGE
/// with the needed size in `len`). nix has no wrapper for this option.
fn peer_groups(socket: &impl AsFd) -> std::io::Result<Vec<u32>> {
    let fd = socket.as_fd().as_raw_fd();
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = libc::socklen_t::try_from(groups.len() * size_of::<libc::gid_t>())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: `groups` is a live, writable buffer of exactly `len` bytes and `len`
        // points to a live socklen_t; the kernel writes at most `len` bytes and stores
        // the size it wrote (or needs, on ERANGE) back into `len`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let wanted = len as usize / size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(wanted);
            return Ok(groups);
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ERANGE) && wanted > groups.len() {
            groups.resize(wanted, 0);
            continue;
        }
        return Err(err);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socketpair_peer_is_this_process() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let cred = peer_cred(&a).unwrap();
        assert_eq!(cred.pid, std::process::id() as i32);
        assert_eq!(cred.uid, nix::unistd::getuid().as_raw());
        assert_eq!(cred.gid, nix::unistd::getgid().as_raw());
        let mut mine: Vec<u32> = nix::unistd::getgroups()
            .unwrap()
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        let mut got = cred.groups.clone();
        mine.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, mine);
    }
}
