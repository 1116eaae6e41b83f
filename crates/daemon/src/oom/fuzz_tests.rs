//! Fuzz-style tests without a fuzzing crate: a xorshift PRNG mutates the captured
//! records (and makes up random ones); the record parser, the line splitter and the
//! OOM parser must never panic, and their state must stay bounded.

use super::event::OomEvent;
use super::fields::{MAX_COMM, MAX_FIELD};
use super::fixture_tests::{FULL_REPORT, GROUP_LINES};
use super::lines::LineSplitter;
use super::parse::OomParser;
use super::record::{MAX_MESSAGE_BYTES, parse_record};

/// xorshift64*: deterministic, so a failure is reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap()
    }

    /// The low byte of the next number.
    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
}

/// Fragments that steer mutations into the interesting parts of the grammar.
const TOKENS: &[&str] = &[
    ",",
    ";",
    "=",
    "(",
    ")",
    " ",
    "\\x",
    "\\x0a",
    "\\x5c",
    "\\xff",
    "\n",
    "\n ",
    "kB",
    "oom-kill:",
    "task=",
    ",pid=",
    ",uid=0",
    "oom_memcg=/",
    "task_memcg=/",
    "global_oom",
    "constraint=CONSTRAINT_NONE",
    "Killed process ",
    "Memory cgroup out of memory: ",
    "Out of memory: ",
    "Kill process ",
    " invoked oom-killer: ",
    "memory: usage ",
    ", limit ",
    "Task in /",
    " killed as a result of limit of /",
    "Tasks in /",
    " are going to be killed due to memory.oom.group set",
    "Memory cgroup stats for /",
    ") total-vm:",
    "4294967296",
    "-1",
    "18446744073709551616",
    "0",
    "é",
    "\u{fffd}",
];

fn mutate(rng: &mut Rng, line: &str) -> Vec<u8> {
    let mut b = line.as_bytes().to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                b.splice(at..at, t.bytes().collect::<Vec<_>>());
            }
            2 => b.truncate(at),
            3 if at < b.len() => {
                let end = (at + rng.below(16)).min(b.len());
                b.drain(at..end);
            }
            4 => {
                let junk: Vec<u8> = (0..rng.below(64)).map(|_| rng.byte()).collect();
                b.splice(at..at, junk);
            }
            _ => {
                let copy = b[at..].to_vec();
                b.extend_from_slice(&copy);
            }
        }
    }
    b
}

/// `OOM_FUZZ_SEED` / `OOM_FUZZ_ITERS` allow longer or different runs.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn check_event(e: &OomEvent) {
    assert!(e.victim_pid > 0, "{e:?}");
    assert!(
        e.oom_memcg.starts_with('/') && e.task_memcg.starts_with('/'),
        "{e:?}"
    );
    assert!(e.oom_memcg.len() <= MAX_FIELD + 1 && e.task_memcg.len() <= MAX_FIELD + 1);
    assert!(e.victim_comm.len() <= MAX_COMM);
    assert!(e.constraint.as_ref().is_none_or(|c| c.len() <= MAX_FIELD));
}

#[test]
fn twenty_thousand_mutated_records_never_panic() {
    let corpus: Vec<&str> = FULL_REPORT.lines().chain(GROUP_LINES.lines()).collect();
    // The report's key lines, picked half of the time so that events happen.
    let hot: Vec<&str> = corpus
        .iter()
        .copied()
        .filter(|l| {
            ["oom-kill:", "Killed", "Tasks in", "memory: usage"]
                .iter()
                .any(|k| l.contains(k))
        })
        .collect();
    let mut rng = Rng(env_or("OOM_FUZZ_SEED", 0x9e37_79b9_7f4a_7c15) | 1);
    let iterations = env_or("OOM_FUZZ_ITERS", 20_000);
    // `ordered` gets increasing sequence numbers (as the kernel gives them) so that the
    // mutated messages reach every state; `any` gets whatever the mutations make.
    let (mut ordered, mut any) = (OomParser::new(), OomParser::new());
    let (mut records, mut events) = (0, 0);
    let mut last_event_seq = None;
    for i in 0..iterations {
        let raw = match rng.below(10) {
            // Random bytes, including huge lines.
            0 => {
                let len = if rng.below(50) == 0 { 40_000 } else { 200 };
                (0..rng.below(len)).map(|_| rng.byte()).collect()
            }
            // A mutated whole record, header included.
            1..=3 => {
                let line = corpus[rng.below(corpus.len())];
                mutate(&mut rng, line)
            }
            // A valid, increasing header in front of a mutated message.
            _ => {
                let pool = if rng.below(2) == 0 { &hot } else { &corpus };
                let line = pool[rng.below(pool.len())];
                let msg = line.split_once(';').map_or(line, |(_, m)| m);
                let mut b = format!("{},{},{},-;", rng.below(8), 1000 + i, i * 1000).into_bytes();
                b.extend(mutate(&mut rng, msg));
                let Ok(rec) = parse_record(&b) else {
                    panic!(
                        "a valid header was rejected: {:?}",
                        String::from_utf8_lossy(&b)
                    );
                };
                if let Some(e) = ordered.feed(&rec) {
                    check_event(&e);
                    assert!(
                        last_event_seq.is_none_or(|s| e.seq > s),
                        "events in seq order"
                    );
                    last_event_seq = Some(e.seq);
                    events += 1;
                }
                assert!(ordered.pending_bytes() < 64 * 1024, "pending state grew");
                continue;
            }
        };
        if let Ok(rec) = parse_record(&raw) {
            records += 1;
            assert!(rec.message.len() <= MAX_MESSAGE_BYTES * 3);
            any.feed(&rec).iter().for_each(check_event);
        }
        assert!(any.pending_bytes() < 64 * 1024, "pending state grew");
    }
    ordered
        .flush()
        .iter()
        .chain(any.flush().iter())
        .for_each(check_event);
    // The mutations must still exercise the parser, not only its error paths.
    assert!(
        records > iterations / 10,
        "only {records} mutated records parsed"
    );
    assert!(events > iterations / 200, "only {events} events");
}

#[test]
fn random_chunks_through_the_line_splitter_never_panic() {
    let mut rng = Rng(42);
    let mut text = Vec::new();
    for _ in 0..2_000 {
        let src = if rng.below(2) == 0 {
            FULL_REPORT
        } else {
            GROUP_LINES
        };
        let line = src
            .lines()
            .nth(rng.below(src.lines().count()))
            .unwrap_or("");
        text.extend(mutate(&mut rng, line));
        text.push(b'\n');
    }
    let mut splitter = LineSplitter::default();
    let mut parser = OomParser::new();
    let mut at = 0;
    while at < text.len() {
        let end = (at + 1 + rng.below(5000)).min(text.len());
        splitter.push(&text[at..end], |l| {
            if let Ok(r) = parse_record(l) {
                parser.feed(&r).iter().for_each(check_event);
            }
        });
        at = end;
    }
    splitter.finish(|_| {});
}

#[test]
fn huge_group_kill_keeps_memory_bounded_and_reports_every_member() {
    let mut text = String::from(
        "6,1,10,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=/g,task_memcg=/g,task=a,pid=2,uid=0\n\
         3,2,11,-;Memory cgroup out of memory: Killed process 2 (a) total-vm:1kB\n\
         6,3,12,-;Tasks in /g are going to be killed due to memory.oom.group set\n\
         3,4,13,-;Memory cgroup out of memory: Killed process 2 (a) total-vm:1kB\n",
    );
    for pid in 3..5003 {
        text.push_str(&format!(
            "3,{},{},-;Memory cgroup out of memory: Killed process {pid} (m) total-vm:1kB\n",
            pid + 10,
            pid + 20
        ));
    }
    let mut parser = OomParser::new();
    let mut pids = Vec::new();
    for line in text.lines() {
        pids.extend(
            parser
                .feed(&parse_record(line.as_bytes()).unwrap())
                .map(|e| {
                    assert!(e.group_kill);
                    e.victim_pid
                }),
        );
        assert!(parser.pending_bytes() < 16 * 1024);
    }
    pids.extend(parser.flush().map(|e| e.victim_pid));
    assert_eq!(pids, (2..5003).collect::<Vec<_>>());
}
