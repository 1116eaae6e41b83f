//! When a process started, as /proc tells it: what tells the process a record names
//! by its pid from a later one that was given the same number.
//!
//! Pids are reused: a pid in a record (a shim's `started.json`, a temp name that
//! carries its writer's pid) names whatever process has that number now. The start
//! time (field 22 of `/proc/<pid>/stat`, clock ticks after boot) does not repeat for
//! one pid within a boot, short of a whole pid wrap within one tick, so a record that
//! keeps it (`StartedRecord::init_start_ticks`) names one process for good; a record
//! that only knows when it was written still rules out every process started after.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// The clock ticks per second of /proc's times where sysconf cannot say (Linux's
/// USER_HZ is 100 on every architecture podhost runs on).
const DEFAULT_TICKS_PER_SECOND: u64 = 100;

/// A writer that started this long after the record's last change cannot be its
/// writer (the pid was reused): the slack covers the boot time's whole seconds and
/// the tick's rounding.
pub const START_SLACK: Duration = Duration::from_secs(2);

/// The start time in a `/proc/<pid>/stat` line: field 22, in clock ticks after boot.
/// The command (field 2) is in parentheses and may itself hold spaces and ')', so the
/// fields are counted after the last ')'.
pub fn start_ticks(stat: &str) -> Option<u64> {
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The boot time in seconds since the epoch: `btime` of a `/proc/stat` text.
pub fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// Clock ticks per second of /proc's times (`CLK_TCK`).
pub fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_TICKS_PER_SECOND)
}

/// The wall-clock time of a start `ticks` after a boot at `boot` (seconds since the
/// epoch).
pub fn wall_time(boot: u64, ticks: u64, per_second: u64) -> SystemTime {
    let per_second = per_second.max(1);
    let since_boot = Duration::from_secs(ticks / per_second)
        + Duration::from_nanos((ticks % per_second) * 1_000_000_000 / per_second);
    SystemTime::UNIX_EPOCH + Duration::from_secs(boot) + since_boot
}

/// The start of process `pid` in clock ticks after boot; `None` when no process has
/// that pid (or `pid` is not one: 0 and negative numbers name no single process).
pub fn read_start_ticks(pid: i32) -> Option<u64> {
    if pid <= 0 {
        return None;
    }
    start_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// When process `pid` started, on the wall clock.
pub fn started_at(pid: i32) -> Option<SystemTime> {
    let ticks = read_start_ticks(pid)?;
    let boot = boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
    Some(wall_time(boot, ticks, ticks_per_second()))
}

/// Whether process `pid` may be the writer of an entry whose inode last changed at
/// `changed`: a process has that pid, and it started before the change (give or take
/// [`START_SLACK`]). A process that started later was given the number after the
/// writer was gone. A pid of 0 or below is nobody's; a start that cannot be read
/// while the process runs counts as "may live" (a leftover is cheap, a removed temp of
/// a live writer is not).
pub fn writer_may_live(pid: i32, changed: Option<SystemTime>) -> bool {
    if pid <= 0 {
        return false;
    }
    if pid == std::process::id() as i32 {
        return true;
    }
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return false;
    }
    match (started_at(pid), changed) {
        (Some(start), Some(changed)) => start <= changed + START_SLACK,
        _ => true,
    }
}

/// When an entry's inode last changed (its ctime): a write, a rename or a chmod by
/// its writer moves it, and unlike the mtime nobody can set it back.
pub fn changed_at(meta: &std::fs::Metadata) -> Option<SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let secs = u64::try_from(meta.ctime()).ok()?;
    let nanos = u64::try_from(meta.ctime_nsec()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_field_22_counted_after_the_command() {
        // A command holding ") " and digits cannot shift the fields.
        let stat = "4242 (a) 1 2 3) S 1 4242 4242 0 -1 4194560 90 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 100 18446744073709551615";
        assert_eq!(start_ticks(stat), Some(987_654));
        assert_eq!(start_ticks("4242 (short) S 1 2"), None);
        assert_eq!(start_ticks("no parenthesis"), None);
    }

    #[test]
    fn boot_time_and_wall_time() {
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        assert_eq!(boot_time("cpu 1 2 3\n"), None);
        let t = wall_time(1_700_000_000, 250, 100);
        assert_eq!(
            t,
            SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_002_500)
        );
    }

    #[test]
    fn this_process_started_before_now_and_pid_0_is_nobody() {
        let me = std::process::id() as i32;
        let start = started_at(me).unwrap();
        assert!(start <= SystemTime::now() + START_SLACK);
        assert!(read_start_ticks(0).is_none() && read_start_ticks(-1).is_none());
        assert!(!writer_may_live(0, Some(SystemTime::now())));
        assert!(!writer_may_live(-1, Some(SystemTime::now())));
    }

    #[test]
    fn a_writer_that_started_after_the_change_is_another_process() {
        // pid 1 started at boot, before any file changed now...
        assert!(writer_may_live(1, Some(SystemTime::now())));
        // ...and cannot have written an entry that last changed before the boot.
        assert!(!writer_may_live(1, Some(SystemTime::UNIX_EPOCH)));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id() as i32;
        child.wait().unwrap();
        assert!(!writer_may_live(dead, Some(SystemTime::now())));
    }

    #[test]
    fn the_change_time_moves_on_a_write_and_not_with_the_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let file = std::fs::File::options().write(true).open(&f).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH).unwrap();
        let meta = std::fs::metadata(&f).unwrap();
        assert_eq!(meta.modified().unwrap(), SystemTime::UNIX_EPOCH);
        let changed = changed_at(&meta).unwrap();
        assert!(changed > SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000));
    }
}
