//! Recognizes the kernel log lines of an OOM report, one message at a time.
//!
//! Pure string work, no state: [`classify`] says which OOM line a message is and pulls
//! out its fields. Every extracted string is capped so that a pending event stays small
//! whatever the input.

/// Longest memcg path or constraint kept (longer ones are truncated).
pub(super) const MAX_FIELD: usize = 4096;
/// Longest command name kept (the kernel's own limit is 15 bytes, escaped up to 60).
pub(super) const MAX_COMM: usize = 64;

/// Which kind of OOM handler printed a kill line (the text before `: Killed process`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// `Memory cgroup out of memory`: a memcg limit was hit.
    Memcg,
    /// `Out of memory` (possibly with a suffix): the machine ran out.
    Global,
    /// No prefix (kernels before 5.0 print a bare `Killed process`) or an unknown one.
    Unknown,
}

/// The `oom-kill:` one-line summary (kernel ≥ 4.19), parsed by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Summary {
    pub constraint: Option<String>,
    /// The `global_oom` flag that replaces `oom_memcg=` for a system-wide OOM.
    pub global: bool,
    pub oom_memcg: Option<String>,
    pub task_memcg: Option<String>,
    pub task: Option<String>,
    pub pid: Option<i32>,
}

/// One recognized line of an OOM report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Line {
    /// `<comm> invoked oom-killer: gfp_mask=...`: a report begins.
    Start,
    /// `oom-kill:constraint=...,task=...,pid=...,uid=...`.
    Summary(Summary),
    /// `Task in <task_memcg> killed as a result of limit of <oom_memcg>` (before 5.0).
    Legacy {
        task_memcg: String,
        oom_memcg: String,
    },
    /// `memory: usage <n>kB, limit <n>kB, failcnt <n>`.
    Usage {
        usage_kb: Option<u64>,
        limit_kb: Option<u64>,
    },
    /// `Memory cgroup stats for <memcg>:` (the first one names the OOM memcg).
    Stats { memcg: String },
    /// `<scope>: Kill process <pid> (<comm>) score ... or sacrifice child` (before 5.0).
    PreKill { scope: Scope },
    /// `Tasks in <memcg> are going to be killed due to memory.oom.group set`.
    GroupKill { memcg: String },
    /// `[<scope>: ]Killed process <pid> (<comm>) total-vm:...`: a process was killed.
    Killed {
        scope: Scope,
        pid: i32,
        comm: String,
    },
}

/// Limits at or above this many kB mean "no limit" (the kernel prints PAGE_COUNTER_MAX).
const UNLIMITED_KB: u64 = 1 << 50;

/// Classifies one message. `None` for everything else. The whole message counts: a
/// command name may hold an (unescaped) newline.
pub(super) fn classify(message: &str) -> Option<Line> {
    let line = message.trim();
    if let Some(body) = line.strip_prefix("oom-kill:") {
        return Some(Line::Summary(summary(body)));
    }
    if line.contains(" invoked oom-killer:") {
        return Some(Line::Start);
    }
    if let Some(rest) = line.strip_prefix("memory: usage ") {
        return Some(Line::Usage {
            usage_kb: kb(rest),
            limit_kb: rest
                .find("limit ")
                .and_then(|i| kb(&rest[i + 6..]))
                .filter(|l| *l < UNLIMITED_KB),
        });
    }
    if let Some(rest) = line.strip_prefix("Task in ") {
        let (task, oom) = rest.split_once(" killed as a result of limit of ")?;
        return Some(Line::Legacy {
            task_memcg: memcg_path(task),
            oom_memcg: memcg_path(oom),
        });
    }
    if let Some(rest) = line.strip_prefix("Tasks in ") {
        let memcg = rest.strip_suffix(" are going to be killed due to memory.oom.group set")?;
        return Some(Line::GroupKill {
            memcg: memcg_path(memcg),
        });
    }
    if let Some(rest) = line.strip_prefix("Memory cgroup stats for ") {
        let memcg = match rest.strip_suffix(':') {
            Some(m) => m,
            None => rest.split_once(": ").map_or(rest, |(m, _)| m),
        };
        return Some(Line::Stats {
            memcg: memcg_path(memcg),
        });
    }
    if let Some((scope, rest)) = after_marker(line, "Killed process ") {
        let (pid, comm) = pid_and_comm(rest)?;
        return Some(Line::Killed { scope, pid, comm });
    }
    if let Some((scope, rest)) = after_marker(line, "Kill process ") {
        pid_and_comm(rest)?;
        return Some(Line::PreKill { scope });
    }
    None
}

/// Finds `marker` at the start of the line or right after `<prefix>: `.
fn after_marker<'a>(line: &'a str, marker: &str) -> Option<(Scope, &'a str)> {
    if let Some(rest) = line.strip_prefix(marker) {
        return Some((Scope::Unknown, rest));
    }
    let at = line.find(&format!(": {marker}"))?;
    let prefix = &line[..at];
    let scope = if prefix.starts_with("Memory cgroup out of memory") {
        Scope::Memcg
    } else if prefix.starts_with("Out of memory") {
        Scope::Global
    } else {
        Scope::Unknown
    };
    Some((scope, &line[at + 2 + marker.len()..]))
}

/// `142 (tail) total-vm:...` → (142, "tail"). The command name may hold anything,
/// including `) `, so it ends at the *last* `) total-vm:` (or the last `)`).
fn pid_and_comm(rest: &str) -> Option<(i32, String)> {
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let pid: i32 = rest[..digits].parse().ok().filter(|p| *p > 0)?;
    let after = rest[digits..].strip_prefix(" (")?;
    let end = after
        .rfind(") total-vm:")
        .or_else(|| after.rfind(") score "))
        .or_else(|| after.rfind(')'))
        .unwrap_or(after.len());
    Some((pid, cap(&after[..end], MAX_COMM)))
}

/// The leading `<digits>kB` of `s` (after optional spaces).
fn kb(s: &str) -> Option<u64> {
    let s = s.trim_start();
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if !s[digits..].starts_with("kB") {
        return None;
    }
    s[..digits].parse().ok()
}

/// Parses the body of an `oom-kill:` line by key.
///
/// Everything before `task=` is a comma-separated list of `key=value` fields and bare
/// flags (`global_oom`); a piece that is neither (`nodemask=0,2` is printed as a list)
/// continues the previous value. The command name after `task=` is free text, so it
/// runs up to the *last* `,pid=`; what follows is parsed as fields again.
fn summary(body: &str) -> Summary {
    let mut s = Summary::default();
    let (head, tail) = match field_start(body, "task=") {
        Some(at) => (&body[..at], Some(&body[at + 5..])),
        None => (body, None),
    };
    let mut fields = split_fields(head);
    if let Some(tail) = tail {
        let (comm, rest) = match tail.rfind(",pid=") {
            Some(at) => (&tail[..at], &tail[at + 1..]),
            None => (tail, ""),
        };
        s.task = Some(cap(comm, MAX_COMM));
        fields.extend(split_fields(rest));
    }
    for (key, value) in fields {
        match (key, value) {
            ("global_oom", None) => s.global = true,
            ("constraint", Some(v)) => s.constraint = Some(cap(&v, MAX_FIELD)),
            ("oom_memcg", Some(v)) => s.oom_memcg = Some(memcg_path(&v)),
            ("task_memcg", Some(v)) => s.task_memcg = Some(memcg_path(&v)),
            ("pid", Some(v)) => s.pid = v.parse().ok().filter(|p: &i32| *p > 0),
            _ => {}
        }
    }
    s
}

/// Where `key` starts a field: at the very start or right after a comma.
fn field_start(body: &str, key: &str) -> Option<usize> {
    if body.starts_with(key) {
        return Some(0);
    }
    body.find(&format!(",{key}")).map(|i| i + 1)
}

/// Bare words the kernel prints in the summary instead of `key=value`.
const FLAGS: &[&str] = &["global_oom"];

/// Splits `a=1,global_oom,b=x,y` into `[("a", Some("1")), ("global_oom", None), ("b", Some("x,y"))]`.
fn split_fields(text: &str) -> Vec<(&str, Option<String>)> {
    let mut out: Vec<(&str, Option<String>)> = Vec::new();
    for piece in text.split(',').filter(|p| !p.is_empty()) {
        match piece.split_once('=') {
            Some((key, value)) if is_key(key) => out.push((key, Some(value.to_string()))),
            None if FLAGS.contains(&piece) => out.push((piece, None)),
            _ => {
                if let Some((_, Some(value))) = out.last_mut()
                    && value.len() < MAX_FIELD
                {
                    value.push(',');
                    value.push_str(piece);
                }
            }
        }
    }
    out
}

fn is_key(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// Normalizes a memcg path as cadvisor does (`path.Join("/", p)`, minus the cleaning):
/// always absolute, no trailing slash, `/` when empty.
pub(super) fn memcg_path(p: &str) -> String {
    let p = cap(p.trim(), MAX_FIELD);
    let trimmed = p.trim_matches('/');
    if trimmed.is_empty() {
        "/".to_string()
    } else {
        format!("/{trimmed}")
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(super) fn cap(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: &str = "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=oomtest,mems_allowed=0,oom_memcg=/oomtest,task_memcg=/oomtest,task=tail,pid=142,uid=0";

    #[test]
    fn summary_by_keys() {
        let Some(Line::Summary(s)) = classify(NEW) else {
            panic!("not a summary")
        };
        assert_eq!(s.constraint.as_deref(), Some("CONSTRAINT_MEMCG"));
        assert_eq!(s.oom_memcg.as_deref(), Some("/oomtest"));
        assert_eq!(s.task_memcg.as_deref(), Some("/oomtest"));
        assert_eq!(
            (s.task.as_deref(), s.pid, s.global),
            (Some("tail"), Some(142), false)
        );
    }

    #[test]
    fn summary_reordered_missing_and_unknown_keys() {
        let line = "oom-kill:new_key=1,task_memcg=/a/b,constraint=CONSTRAINT_NONE,nodemask=0,2-3,global_oom,task=x,pid=7,uid=0,extra=9";
        let Some(Line::Summary(s)) = classify(line) else {
            panic!("not a summary")
        };
        assert!(s.global);
        assert_eq!(s.oom_memcg, None);
        assert_eq!(s.task_memcg.as_deref(), Some("/a/b"));
        assert_eq!((s.task.as_deref(), s.pid), (Some("x"), Some(7)));
        let Some(Line::Summary(s)) = classify("oom-kill:constraint=CONSTRAINT_MEMCG") else {
            panic!("not a summary")
        };
        assert_eq!((s.task, s.pid), (None, None));
    }

    #[test]
    fn hostile_command_names_cannot_move_fields() {
        let line = "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/real,task_memcg=/real/c,task=a,oom_memcg=/x,pid=1,pid=99,uid=0";
        let Some(Line::Summary(s)) = classify(line) else {
            panic!("not a summary")
        };
        assert_eq!(s.oom_memcg.as_deref(), Some("/real"));
        assert_eq!(s.task.as_deref(), Some("a,oom_memcg=/x,pid=1"));
        assert_eq!(s.pid, Some(99));
        let killed = classify("Out of memory: Killed process 5 (a) total-vm:1) b) total-vm:1kB, x");
        assert_eq!(
            killed,
            Some(Line::Killed {
                scope: Scope::Global,
                pid: 5,
                comm: "a) total-vm:1) b".into()
            })
        );
    }

    #[test]
    fn kill_lines_of_every_kernel() {
        let memcg = "Memory cgroup out of memory: Killed process 142 (tail) total-vm:34736kB, anon-rss:32632kB";
        assert_eq!(
            classify(memcg),
            Some(Line::Killed {
                scope: Scope::Memcg,
                pid: 142,
                comm: "tail".into()
            })
        );
        let bare = "Killed process 1234 (java) total-vm:1kB, anon-rss:2kB, file-rss:0kB";
        assert!(matches!(
            classify(bare),
            Some(Line::Killed {
                scope: Scope::Unknown,
                pid: 1234,
                ..
            })
        ));
        let pre =
            "Memory cgroup out of memory: Kill process 1234 (java) score 0 or sacrifice child";
        assert_eq!(
            classify(pre),
            Some(Line::PreKill {
                scope: Scope::Memcg
            })
        );
        assert_eq!(
            classify("oom_reaper: reaped process 142 (tail), now anon-rss:0kB"),
            None
        );
        assert_eq!(classify("Killed process x (a)"), None);
        assert_eq!(classify("Killed process 0 (a)"), None);
        assert_eq!(classify("Killed process 99999999999 (a)"), None);
        assert_eq!(classify("foo Killed process 12 (a)"), None);
    }

    #[test]
    fn usage_legacy_stats_group_and_start() {
        assert_eq!(
            classify("memory: usage 32768kB, limit 32768kB, failcnt 33"),
            Some(Line::Usage {
                usage_kb: Some(32768),
                limit_kb: Some(32768)
            })
        );
        assert_eq!(
            classify("memory: usage 5kB, limit 9007199254740988kB, failcnt 0"),
            Some(Line::Usage {
                usage_kb: Some(5),
                limit_kb: None
            })
        );
        assert_eq!(classify("swap: usage 0kB, limit 0kB, failcnt 0"), None);
        assert_eq!(
            classify("Task in /mem2 killed as a result of limit of mem3"),
            Some(Line::Legacy {
                task_memcg: "/mem2".into(),
                oom_memcg: "/mem3".into()
            })
        );
        assert_eq!(
            classify("Memory cgroup stats for /oomtest:"),
            Some(Line::Stats {
                memcg: "/oomtest".into()
            })
        );
        assert_eq!(
            classify("Memory cgroup stats for /a/b: cache:0KB rss:4KB"),
            Some(Line::Stats {
                memcg: "/a/b".into()
            })
        );
        assert_eq!(
            classify("Tasks in /oomtest are going to be killed due to memory.oom.group set"),
            Some(Line::GroupKill {
                memcg: "/oomtest".into()
            })
        );
        assert_eq!(
            classify("tail invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0"),
            Some(Line::Start)
        );
    }

    #[test]
    fn paths_are_normalized_and_capped() {
        assert_eq!(memcg_path(""), "/");
        assert_eq!(memcg_path("/"), "/");
        assert_eq!(memcg_path("a/b/"), "/a/b");
        assert_eq!(cap("ééé", 3), "é");
        assert!(memcg_path(&"x".repeat(MAX_FIELD * 2)).len() <= MAX_FIELD + 1);
    }
}
