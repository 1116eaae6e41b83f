//! The host's rlimits, for clamping what containers ask when podhost may not raise them.

/// The calling process's hard limit for the rlimit `name` (`nofile`, `nproc`, …).
pub fn hard_limit(name: &str) -> Option<u64> {
    let resource = match name {
        "as" => libc::RLIMIT_AS,
        "core" => libc::RLIMIT_CORE,
        "cpu" => libc::RLIMIT_CPU,
        "data" => libc::RLIMIT_DATA,
        "fsize" => libc::RLIMIT_FSIZE,
        "locks" => libc::RLIMIT_LOCKS,
        "memlock" => libc::RLIMIT_MEMLOCK,
        "msgqueue" => libc::RLIMIT_MSGQUEUE,
        "nice" => libc::RLIMIT_NICE,
        "nofile" => libc::RLIMIT_NOFILE,
        "nproc" => libc::RLIMIT_NPROC,
        "rss" => libc::RLIMIT_RSS,
        "rtprio" => libc::RLIMIT_RTPRIO,
        "rttime" => libc::RLIMIT_RTTIME,
        "sigpending" => libc::RLIMIT_SIGPENDING,
        "stack" => libc::RLIMIT_STACK,
        _ => return None,
    };
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit struct we own; the resource is a valid constant.
    let rc = unsafe { libc::getrlimit(resource, &mut lim) };
    (rc == 0).then_some(lim.rlim_max)
}

/// An rlimit this process could not take.
#[derive(Debug)]
pub struct RefusedRlimit {
    /// What was asked.
    pub rlimit: oci_spec::runtime::PosixRlimit,
    /// Why setrlimit refused.
    pub error: std::io::Error,
    /// The process's limit (soft, hard) as it stays, when it could be read.
    pub current: Option<(u64, u64)>,
}

/// Raises (or sets) this process's own rlimits to `rlimits`, while it still holds
/// CAP_SYS_RESOURCE in the host's user namespace; returns the ones refused.
///
/// libcontainer sets a container's rlimits after joining the pod's user namespace,
/// where raising a hard limit is refused (the capability counts only in the host's
/// namespace). A process that will join one first — the shim for a `hostUsers: false`
/// pod, the exec helper for an exec into one — takes the container's values here; its
/// children inherit them and libcontainer's setrlimit then only keeps or lowers them.
pub fn raise_own_to(rlimits: &[oci_spec::runtime::PosixRlimit]) -> Vec<RefusedRlimit> {
    use oci_spec::runtime::PosixRlimitType as T;
    let mut refused = Vec::new();
    for r in rlimits {
        let resource = match r.typ() {
            T::RlimitNofile => libc::RLIMIT_NOFILE,
            T::RlimitNproc => libc::RLIMIT_NPROC,
            T::RlimitCore => libc::RLIMIT_CORE,
            T::RlimitMemlock => libc::RLIMIT_MEMLOCK,
            T::RlimitStack => libc::RLIMIT_STACK,
            _ => continue,
        };
        let limit = libc::rlimit {
            rlim_cur: r.soft(),
            rlim_max: r.hard(),
        };
        // SAFETY: setrlimit reads the struct, which lives across the call; it only
        // changes this process's limits.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            let error = std::io::Error::last_os_error();
            let mut now = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes into the struct, which lives across the call.
            let current = (unsafe { libc::getrlimit(resource, &mut now) } == 0)
                .then_some((now.rlim_cur, now.rlim_max));
            refused.push(RefusedRlimit {
                rlimit: *r,
                error,
                current,
            });
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_process_limits() {
        assert!(hard_limit("nofile").is_some_and(|n| n > 0));
        assert_eq!(hard_limit("bogus"), None);
    }
}
