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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_process_limits() {
        assert!(hard_limit("nofile").is_some_and(|n| n > 0));
        assert_eq!(hard_limit("bogus"), None);
    }
}
