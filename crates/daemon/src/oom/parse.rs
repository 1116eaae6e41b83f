//! The streaming OOM report parser: records in, one [`OomEvent`] per killed process out.
//!
//! An OOM report is a burst of records (see `tests/fixtures/kmsg/kmsg-oom.txt`):
//!
//! ```text
//! tail invoked oom-killer: ...                      start (optional)
//! memory: usage 32768kB, limit 32768kB, failcnt 33  limit and usage (memcg OOMs)
//! Memory cgroup stats for /oomtest:                 the OOM memcg (fallback)
//! oom-kill:constraint=...,oom_memcg=...,task=...    summary (≥ 4.19) or, before 5.0,
//! Task in /a killed as a result of limit of /b      the legacy line
//! Memory cgroup out of memory: Killed process ...   the kill: emits an event
//! Tasks in /oomtest are going to be killed due to memory.oom.group set
//! Memory cgroup out of memory: Killed process ...   the victim again, then the members
//! ```
//!
//! Any record may be missing (rate limits, an overwritten ring buffer), so every line is
//! optional: a kill line alone still gives an event. A kill event is held back until the
//! next OOM line (or [`OomParser::flush`]) so that a following `memory.oom.group` line can
//! still mark it as a group kill; the kernel prints that line right after the kill.

use super::event::OomEvent;
use super::fields::{Line, Scope, Summary, classify};
use super::record::KmsgRecord;

/// At most this many killed pids are remembered per report (for de-duplication).
const MAX_KILLED: usize = 1024;
/// A report's lines are logged within microseconds; a context older than this (kernel
/// time) belongs to an earlier OOM and is not attached to a new, unannounced kill.
const CONTEXT_TTL_USEC: u64 = 30_000_000;
/// A held kill is released once a record this much later (kernel time) arrives.
const HOLD_USEC: u64 = 1_000_000;

/// What is known about the OOM report being read.
#[derive(Debug, Default)]
struct Context {
    constraint: Option<String>,
    global: bool,
    oom_memcg: Option<String>,
    stats_memcg: Option<String>,
    task_memcg: Option<String>,
    summary_pid: Option<i32>,
    summary_comm: Option<String>,
    limit_kb: Option<u64>,
    usage_kb: Option<u64>,
    /// From a legacy `... : Kill process` line, before the bare `Killed process` line.
    scope: Option<Scope>,
    group_memcg: Option<String>,
    /// Pids already reported in this report (the group kill repeats the victim).
    killed: Vec<i32>,
    /// Kernel time of the context's latest line.
    last_usec: u64,
}

impl Context {
    fn has_summary(&self) -> bool {
        self.summary_pid.is_some() || self.task_memcg.is_some()
    }

    fn is_system(&self, scope: Scope) -> bool {
        if self.global {
            return true;
        }
        match self.constraint.as_deref() {
            Some("CONSTRAINT_MEMCG") => return false,
            Some(c) if c.starts_with("CONSTRAINT_") => return true,
            _ => {}
        }
        match (scope, self.scope) {
            (Scope::Memcg, _) | (Scope::Unknown, Some(Scope::Memcg)) => return false,
            (Scope::Global, _) | (Scope::Unknown, Some(Scope::Global)) => return true,
            _ => {}
        }
        self.oom_memcg().is_none_or(|m| m == "/")
    }

    fn oom_memcg(&self) -> Option<&str> {
        self.oom_memcg.as_deref().or(self.stats_memcg.as_deref())
    }
}

/// The streaming parser. Feed records in sequence order; it never panics and keeps at
/// most one report's context (a few capped strings and ≤ 1024 pids).
#[derive(Debug, Default)]
pub struct OomParser {
    ctx: Option<Context>,
    held: Option<OomEvent>,
    last_seq: Option<u64>,
}

impl OomParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one record; returns the event it completes, if any. Records that are not
    /// from the kernel, or whose sequence number is not above the last one (an
    /// overlapping capture, a re-read), are ignored.
    pub fn feed(&mut self, rec: &KmsgRecord) -> Option<OomEvent> {
        if !rec.is_kernel() || self.last_seq.is_some_and(|s| rec.seq <= s) {
            return None;
        }
        self.last_seq = Some(rec.seq);
        let line = classify(&rec.message);
        let late = self
            .held
            .as_ref()
            .is_some_and(|h| rec.usec.saturating_sub(h.time_usec) > HOLD_USEC);
        let release = match &line {
            None => late,
            Some(Line::GroupKill { .. }) => {
                if let Some(h) = self.held.as_mut() {
                    h.group_kill = true;
                }
                true
            }
            Some(_) => true,
        };
        let out = if release { self.held.take() } else { None };
        if let Some(line) = line {
            self.apply(line, rec);
        }
        out
    }

    /// Releases the held kill event, if any (call when no more records are coming soon).
    pub fn flush(&mut self) -> Option<OomEvent> {
        self.held.take()
    }

    /// The sequence number of the held event: the cursor must stay below it.
    pub fn held_seq(&self) -> Option<u64> {
        self.held.as_ref().map(|e| e.seq)
    }

    /// The last sequence number accepted.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// Roughly how many bytes the pending state holds (tests check it stays bounded).
    #[cfg(test)]
    pub(super) fn pending_bytes(&self) -> usize {
        let strings = |c: &Context| {
            [
                &c.constraint,
                &c.oom_memcg,
                &c.stats_memcg,
                &c.task_memcg,
                &c.summary_comm,
                &c.group_memcg,
            ]
            .iter()
            .map(|s| s.as_ref().map_or(0, String::len))
            .sum::<usize>()
                + c.killed.len() * 4
        };
        let held = self.held.as_ref().map_or(0, |e| {
            e.oom_memcg.len() + e.task_memcg.len() + e.victim_comm.len()
        });
        self.ctx.as_ref().map_or(0, strings) + held
    }

    fn apply(&mut self, line: Line, rec: &KmsgRecord) {
        match line {
            Line::Start => {
                self.ctx = None;
                self.context(rec);
            }
            Line::Summary(s) => {
                let ctx = self.context_for_report(rec, |c| c.has_summary());
                apply_summary(ctx, s);
            }
            Line::Legacy {
                task_memcg,
                oom_memcg,
            } => {
                let ctx = self.context_for_report(rec, |c| c.has_summary());
                ctx.task_memcg = Some(task_memcg);
                ctx.oom_memcg = Some(oom_memcg);
            }
            Line::Usage { usage_kb, limit_kb } => {
                let ctx = self.context_for_report(rec, |c| c.usage_kb.is_some());
                ctx.usage_kb = usage_kb;
                ctx.limit_kb = limit_kb;
            }
            Line::Stats { memcg } => {
                let ctx = self.context_for_report(rec, |_| false);
                ctx.stats_memcg.get_or_insert(memcg);
            }
            Line::PreKill { scope } => {
                self.context_for_report(rec, |_| false).scope = Some(scope);
            }
            Line::GroupKill { memcg } => {
                self.context(rec).group_memcg = Some(memcg);
            }
            Line::Killed { scope, pid, comm } => {
                self.held = self.kill(rec, scope, pid, comm);
            }
        }
    }

    /// The current context, or a fresh one when there is none, it is stale, it already
    /// reported kills, or `seen` says this line was already had (a new report whose
    /// start line was missed).
    fn context_for_report(
        &mut self,
        rec: &KmsgRecord,
        seen: impl Fn(&Context) -> bool,
    ) -> &mut Context {
        let fresh = self
            .ctx
            .as_ref()
            .is_none_or(|c| !c.killed.is_empty() || seen(c) || stale(c, rec.usec));
        if fresh {
            self.ctx = Some(Context::default());
        }
        self.context(rec)
    }

    /// The current context (fresh if there is none or it is stale), touched at `rec`.
    fn context(&mut self, rec: &KmsgRecord) -> &mut Context {
        if self.ctx.as_ref().is_some_and(|c| stale(c, rec.usec)) {
            self.ctx = None;
        }
        let ctx = self.ctx.get_or_insert_with(Context::default);
        ctx.last_usec = rec.usec;
        ctx
    }

    fn kill(&mut self, rec: &KmsgRecord, scope: Scope, pid: i32, comm: String) -> Option<OomEvent> {
        let ctx = self.context(rec);
        if ctx.killed.contains(&pid) {
            return None;
        }
        if !ctx.killed.is_empty() && ctx.group_memcg.is_none() {
            // Another kill without a report of its own: the kernel rate-limits the
            // report, not the kill line. Nothing is known about its memcgs.
            self.ctx = None;
        }
        let ctx = self.context(rec);
        if ctx.killed.len() < MAX_KILLED {
            ctx.killed.push(pid);
        }
        let group_kill = ctx.group_memcg.is_some();
        let task_memcg = match (&ctx.group_memcg, ctx.summary_pid) {
            (Some(group), Some(victim)) if victim != pid => Some(group.clone()),
            (Some(group), None) => Some(group.clone()),
            _ => ctx.task_memcg.clone(),
        };
        let victim_comm = match (&ctx.summary_comm, ctx.summary_pid) {
            (Some(c), Some(p)) if comm.is_empty() && p == pid => c.clone(),
            _ => comm,
        };
        Some(OomEvent {
            seq: rec.seq,
            time_usec: rec.usec,
            constraint: ctx.constraint.clone(),
            oom_memcg: ctx.oom_memcg().unwrap_or("/").to_string(),
            task_memcg: task_memcg.unwrap_or_else(|| "/".to_string()),
            victim_pid: pid,
            victim_comm,
            limit_kb: ctx.limit_kb,
            usage_kb: ctx.usage_kb,
            group_kill,
            system: ctx.is_system(scope),
        })
    }
}

fn apply_summary(ctx: &mut Context, s: Summary) {
    ctx.constraint = s.constraint;
    ctx.global = s.global;
    if s.oom_memcg.is_some() {
        ctx.oom_memcg = s.oom_memcg;
    }
    if s.global {
        ctx.oom_memcg = Some("/".to_string());
    }
    ctx.task_memcg = s.task_memcg;
    ctx.summary_pid = s.pid;
    ctx.summary_comm = s.task;
}

fn stale(ctx: &Context, usec: u64) -> bool {
    usec.saturating_sub(ctx.last_usec) > CONTEXT_TTL_USEC
}

/// Parses a whole captured log: one record per line (continuation lines starting with a
/// space and malformed lines are skipped), then flushes. For tests and tools.
pub fn parse_records(text: &str) -> Vec<OomEvent> {
    let mut parser = OomParser::new();
    let mut out: Vec<OomEvent> = text
        .lines()
        .filter_map(|l| super::record::parse_record(l.as_bytes()).ok())
        .filter_map(|r| parser.feed(&r))
        .collect();
    out.extend(parser.flush());
    out
}
