//! The host's rlimits, for clamping what containers ask when podhost may not raise them.

use nix::sys::resource::Resource;
use oci_spec::runtime::PosixRlimitType;

use super::sys::{Kernel, LinuxKernel};

/// The calling process's hard limit for the rlimit `name` (`nofile`, `nproc`, …).
pub fn hard_limit(name: &str) -> Option<u64> {
    hard_limit_with(&LinuxKernel, name)
}

/// [`hard_limit`] through `kernel`.
pub fn hard_limit_with(kernel: &dyn Kernel, name: &str) -> Option<u64> {
    let resource = match name {
        "as" => Resource::RLIMIT_AS,
        "core" => Resource::RLIMIT_CORE,
        "cpu" => Resource::RLIMIT_CPU,
        "data" => Resource::RLIMIT_DATA,
        "fsize" => Resource::RLIMIT_FSIZE,
        "locks" => Resource::RLIMIT_LOCKS,
        "memlock" => Resource::RLIMIT_MEMLOCK,
        "msgqueue" => Resource::RLIMIT_MSGQUEUE,
        "nice" => Resource::RLIMIT_NICE,
        "nofile" => Resource::RLIMIT_NOFILE,
        "nproc" => Resource::RLIMIT_NPROC,
        "rss" => Resource::RLIMIT_RSS,
        "rtprio" => Resource::RLIMIT_RTPRIO,
        "rttime" => Resource::RLIMIT_RTTIME,
        "sigpending" => Resource::RLIMIT_SIGPENDING,
        "stack" => Resource::RLIMIT_STACK,
        _ => return None,
    };
    kernel.getrlimit(resource).ok().map(|(_, hard)| hard)
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
    raise_own_to_with(&LinuxKernel, rlimits)
}

/// [`raise_own_to`] through `kernel`.
pub fn raise_own_to_with(
    kernel: &dyn Kernel,
    rlimits: &[oci_spec::runtime::PosixRlimit],
) -> Vec<RefusedRlimit> {
    let mut refused = Vec::new();
    for r in rlimits {
        // The ones a container's user namespace cannot raise by itself.
        let resource = match r.typ() {
            PosixRlimitType::RlimitNofile => Resource::RLIMIT_NOFILE,
            PosixRlimitType::RlimitNproc => Resource::RLIMIT_NPROC,
            PosixRlimitType::RlimitCore => Resource::RLIMIT_CORE,
            PosixRlimitType::RlimitMemlock => Resource::RLIMIT_MEMLOCK,
            PosixRlimitType::RlimitStack => Resource::RLIMIT_STACK,
            _ => continue,
        };
        if let Err(errno) = kernel.setrlimit(resource, r.soft(), r.hard()) {
            refused.push(RefusedRlimit {
                rlimit: *r,
                error: std::io::Error::from(errno),
                current: kernel.getrlimit(resource).ok(),
            });
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use nix::errno::Errno;
    use oci_spec::runtime::PosixRlimitBuilder;

    use super::*;
    use crate::sys::recording::{Call, RecordingKernel};

    fn rlimit(typ: PosixRlimitType, soft: u64, hard: u64) -> oci_spec::runtime::PosixRlimit {
        PosixRlimitBuilder::default()
            .typ(typ)
            .soft(soft)
            .hard(hard)
            .build()
            .unwrap()
    }

    #[test]
    fn reads_the_process_limits() {
        assert!(hard_limit("nofile").is_some_and(|n| n > 0));
        assert_eq!(hard_limit("bogus"), None);
    }

    #[test]
    fn the_hard_limit_is_the_second_of_getrlimit() {
        let k = RecordingKernel::new();
        k.set_limits(Resource::RLIMIT_NPROC, 100, 4242);
        assert_eq!(hard_limit_with(&k, "nproc"), Some(4242));
        assert_eq!(
            hard_limit_with(&k, "nofile"),
            None,
            "unreadable: no limit known"
        );
        assert_eq!(hard_limit_with(&k, "bogus"), None);
        assert_eq!(
            k.calls(),
            vec![
                Call::GetRlimit(Resource::RLIMIT_NPROC),
                Call::GetRlimit(Resource::RLIMIT_NOFILE)
            ]
        );
    }

    #[test]
    fn only_the_limits_a_user_namespace_cannot_raise_are_taken() {
        let k = RecordingKernel::new();
        let asked = [
            rlimit(PosixRlimitType::RlimitNofile, 1024, 65536),
            rlimit(PosixRlimitType::RlimitCpu, 10, 10),
            rlimit(PosixRlimitType::RlimitMemlock, 1, 2),
        ];
        assert!(raise_own_to_with(&k, &asked).is_empty());
        assert_eq!(
            k.calls(),
            vec![
                Call::SetRlimit {
                    resource: Resource::RLIMIT_NOFILE,
                    soft: 1024,
                    hard: 65536
                },
                Call::SetRlimit {
                    resource: Resource::RLIMIT_MEMLOCK,
                    soft: 1,
                    hard: 2
                },
            ]
        );
    }

    #[test]
    fn a_refused_limit_is_reported_with_the_errno_and_the_limit_that_stays() {
        let k = RecordingKernel::new();
        k.set_limits(Resource::RLIMIT_NOFILE, 1024, 20000);
        k.fail(Errno::EPERM, |c| {
            matches!(
                c,
                Call::SetRlimit {
                    resource: Resource::RLIMIT_NOFILE,
                    ..
                }
            )
        });
        let asked = [
            rlimit(PosixRlimitType::RlimitNofile, 1048576, 1048576),
            rlimit(PosixRlimitType::RlimitNproc, 5, 5),
        ];
        let refused = raise_own_to_with(&k, &asked);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].rlimit, asked[0]);
        assert_eq!(refused[0].error.raw_os_error(), Some(libc::EPERM));
        assert_eq!(refused[0].current, Some((1024, 20000)));
    }
}
