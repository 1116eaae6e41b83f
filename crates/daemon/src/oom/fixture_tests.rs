//! The parser on kernel output captured in the VM (`tests/fixtures/kmsg/`) and on
//! realistic samples of the other report formats.

use super::event::OomEvent;
use super::parse::{OomParser, parse_records};
use super::record::parse_record;

pub(super) const FULL_REPORT: &str = include_str!("../../../../tests/fixtures/kmsg/kmsg-oom.txt");
pub(super) const KEY_LINES: &str =
    include_str!("../../../../tests/fixtures/kmsg/kmsg-oom-key-lines.txt");
pub(super) const GROUP_LINES: &str =
    include_str!("../../../../tests/fixtures/kmsg/kmsg-oom-group-lines.txt");

/// A cgroup v1 / pre-5.0 memcg OOM, in the shape of cadvisor's oomparser test data.
const LEGACY: &str = "\
4,900,1000000,-;java invoked oom-killer: gfp_mask=0xd0, order=0, oom_score_adj=0
4,901,1000010,-;java cpuset=/ mems_allowed=0
4,902,1000020,-;CPU: 0 PID: 1234 Comm: java Not tainted 4.4.0-1-amd64 #1
6,903,1000030,-;Task in /mem2 killed as a result of limit of /mem3
6,904,1000040,-;memory: usage 16384kB, limit 16384kB, failcnt 1953
6,905,1000050,-;memory+swap: usage 16384kB, limit 9007199254740988kB, failcnt 0
6,906,1000060,-;kmem: usage 0kB, limit 9007199254740988kB, failcnt 0
6,907,1000070,-;Memory cgroup stats for /mem3: cache:0KB rss:16384KB rss_huge:0KB
6,908,1000080,-;[ pid ]   uid  tgid total_vm      rss nr_ptes nr_pmds swapents oom_score_adj name
6,909,1000090,-;[ 1234]     0  1234   250000     4096      30       3        0             0 java
3,910,1000100,-;Memory cgroup out of memory: Kill process 1234 (java) score 0 or sacrifice child
3,911,1000110,-;Killed process 1234 (java) total-vm:1000000kB, anon-rss:16384kB, file-rss:0kB
";

/// A system-wide OOM on a ≥ 5.0 kernel: no memcg limit, `global_oom` instead of
/// `oom_memcg=`, the victim sits in a pod's container cgroup.
const SYSTEM: &str = "\
4,70,9000000,-;stress invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=1000
4,71,9000010,-;Mem-Info:
6,72,9000020,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/podhost/kubepods/besteffort/podabc/hog,task=stress,pid=4242,uid=0
3,73,9000030,-;Out of memory: Killed process 4242 (stress) total-vm:2000000kB, anon-rss:1900000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4000kB oom_score_adj:1000
";

fn expect_tail_142(e: &OomEvent) {
    assert_eq!(e.seq, 449);
    assert_eq!(e.time_usec, 4008699);
    assert_eq!(e.constraint.as_deref(), Some("CONSTRAINT_MEMCG"));
    assert_eq!(e.oom_memcg, "/oomtest");
    assert_eq!(e.task_memcg, "/oomtest");
    assert_eq!((e.victim_pid, e.victim_comm.as_str()), (142, "tail"));
    assert!(!e.system);
}

#[test]
fn full_captured_report_is_exactly_one_event() {
    let events = parse_records(FULL_REPORT);
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    expect_tail_142(e);
    assert_eq!((e.limit_kb, e.usage_kb), (Some(32768), Some(32768)));
    assert!(!e.group_kill);
}

#[test]
fn key_lines_alone_are_enough() {
    let events = parse_records(KEY_LINES);
    assert_eq!(events.len(), 1);
    expect_tail_142(&events[0]);
    assert_eq!((events[0].limit_kb, events[0].usage_kb), (None, None));
}

#[test]
fn group_kill_reports_each_pid_once() {
    let events = parse_records(GROUP_LINES);
    let pids: Vec<(i32, &str, bool, u64)> = events
        .iter()
        .map(|e| (e.victim_pid, e.victim_comm.as_str(), e.group_kill, e.seq))
        .collect();
    assert_eq!(
        pids,
        vec![
            (142, "tail", false, 449),
            (151, "tail", true, 524),
            (152, "sleep", true, 527)
        ]
    );
    for e in &events {
        assert_eq!(
            (e.oom_memcg.as_str(), e.task_memcg.as_str()),
            ("/oomtest", "/oomtest")
        );
        assert!(!e.system);
    }
}

#[test]
fn group_kill_without_flush_in_between_batches() {
    // Streaming: the victim is held until the next OOM line and then marked.
    let mut p = OomParser::new();
    let mut out = Vec::new();
    for line in GROUP_LINES.lines().skip(2) {
        out.extend(p.feed(&parse_record(line.as_bytes()).unwrap()));
        if line.contains("Killed process 151") && out.is_empty() {
            assert_eq!(p.held_seq(), Some(524));
        }
    }
    assert_eq!(out.len(), 1);
    assert!(out[0].group_kill);
    assert_eq!(p.flush().map(|e| e.victim_pid), Some(152));
    assert_eq!(p.flush(), None);
}

#[test]
fn legacy_format() {
    let events = parse_records(LEGACY);
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!((e.victim_pid, e.victim_comm.as_str()), (1234, "java"));
    assert_eq!(
        (e.task_memcg.as_str(), e.oom_memcg.as_str()),
        ("/mem2", "/mem3")
    );
    assert_eq!((e.limit_kb, e.usage_kb), (Some(16384), Some(16384)));
    assert_eq!(e.constraint, None);
    assert!(!e.system && !e.group_kill);
}

#[test]
fn system_oom() {
    let events = parse_records(SYSTEM);
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert!(e.system);
    assert_eq!(e.constraint.as_deref(), Some("CONSTRAINT_NONE"));
    assert_eq!(e.oom_memcg, "/");
    assert_eq!(e.task_memcg, "/podhost/kubepods/besteffort/podabc/hog");
    assert_eq!((e.victim_pid, e.limit_kb), (4242, None));
}

#[test]
fn legacy_system_oom_and_bare_kill_lines() {
    let text = "\
4,1,10,-;a invoked oom-killer: gfp_mask=0x24201ca, order=0, oom_score_adj=0
3,2,20,-;Out of memory: Kill process 77 (a) score 900 or sacrifice child
3,3,30,-;Killed process 77 (a) total-vm:1kB, anon-rss:1kB, file-rss:0kB
3,4,40000000,-;Killed process 78 (b) total-vm:1kB, anon-rss:1kB, file-rss:0kB
";
    let events = parse_records(text);
    assert_eq!(events.len(), 2);
    assert!(events[0].system);
    assert_eq!(events[1].victim_pid, 78);
    assert_eq!(
        (events[1].oom_memcg.as_str(), events[1].system),
        ("/", true)
    );
}

#[test]
fn rate_limited_kills_do_not_inherit_the_previous_report() {
    // dump_header() is rate-limited, the kill line is not: a second memcg OOM may show
    // up as a bare kill line. It must not be attributed to the first report's memcg.
    let text = format!(
        "{KEY_LINES}3,450,4100000,-;Memory cgroup out of memory: Killed process 300 (b) total-vm:1kB\n"
    );
    let events = parse_records(&text);
    assert_eq!(events.len(), 2);
    expect_tail_142(&events[0]);
    let e = &events[1];
    assert_eq!(
        (e.victim_pid, e.oom_memcg.as_str(), e.task_memcg.as_str()),
        (300, "/", "/")
    );
    assert!(!e.system, "the prefix says memcg");
}

#[test]
fn escaped_newlines_and_continuation_lines() {
    let text = "\
6,10,100,-;memory: usage 100kB, limit 200kB, failcnt 1\\x0aignored second line
 SUBSYSTEM=memory
 DEVICE=+memory:x
6,11,110,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=/a\\x2cb,task_memcg=/a\\x2cb/c,task=we\\x5cird\\x0a,pid=5,uid=0
3,12,120,-;Memory cgroup out of memory: Killed process 5 (we\\x5cird\\x0a) total-vm:1kB
";
    let events = parse_records(text);
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!((e.usage_kb, e.limit_kb), (Some(100), Some(200)));
    assert_eq!(e.oom_memcg, "/a,b");
    assert_eq!(e.task_memcg, "/a,b/c");
    assert_eq!(e.victim_comm, "we\\ird\n");
}

#[test]
fn garbage_user_records_and_replays_give_nothing() {
    let text = "\
garbage
;;;
6,1,2
12,3,4,-;Memory cgroup out of memory: Killed process 9 (forged) total-vm:1kB
14,5,6,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x,task_memcg=/x,task=f,pid=9,uid=0
6,7,8,-;Killed process (x) total-vm:1kB
6,9,10,-;Killed process 12 no parenthesis
";
    let events = parse_records(text);
    // User-space records (facility 1) cannot forge a report; the rest is not a kill line.
    assert_eq!(events.len(), 0, "{events:#?}");
    let replay = format!("{KEY_LINES}{KEY_LINES}");
    assert_eq!(parse_records(&replay).len(), 1, "seq ≤ last seq is ignored");
}
