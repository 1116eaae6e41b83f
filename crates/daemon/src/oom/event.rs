//! The typed result of the kmsg parser: one killed process.

use serde::{Deserialize, Serialize};

/// One process killed by the kernel's OOM killer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomEvent {
    /// Sequence number of the kmsg record that reported the kill.
    pub seq: u64,
    /// Timestamp of that record, in microseconds since boot (CLOCK_MONOTONIC-like).
    pub time_usec: u64,
    /// The OOM constraint (`CONSTRAINT_MEMCG`, `CONSTRAINT_NONE`, ...) when reported.
    pub constraint: Option<String>,
    /// The memcg whose limit was hit, relative to the cgroup2 root; `/` if unknown.
    pub oom_memcg: String,
    /// The memcg of the killed process; `/` if unknown. For the other members of a
    /// `memory.oom.group` kill this is the group's memcg (the kernel names no other).
    pub task_memcg: String,
    /// The killed process, as seen from the initial pid namespace.
    pub victim_pid: i32,
    /// The killed process's command name (at most 15 bytes in the kernel).
    pub victim_comm: String,
    /// The memcg limit at kill time (`memory: usage …, limit …kB`), when reported.
    pub limit_kb: Option<u64>,
    /// The memcg usage at kill time, when reported.
    pub usage_kb: Option<u64>,
    /// The kill was part of a `memory.oom.group` kill (the victim and every member).
    pub group_kill: bool,
    /// The OOM was not confined to a memcg: the whole machine (or a cpuset or memory
    /// policy) ran out of memory, or nothing said otherwise (`oom_memcg` is `/`).
    pub system: bool,
}
