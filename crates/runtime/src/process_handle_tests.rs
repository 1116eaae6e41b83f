//! The handle's decisions against the recording kernel's process table: which process
//! a signal reaches, when nothing is signalled, and that a stored number alone never is.

use chrono::TimeZone;

use super::*;
use crate::sys::recording::{Call, RecordingKernel};

const PID: i32 = 4321;
const START: u64 = 777_000;

fn recorded(k: &RecordingKernel, start: u64) -> ProcessHandle {
    ProcessHandle::recorded_with(k, PID, StartCheck::Ticks(start), "the init of c").unwrap()
}

#[test]
fn pid_zero_and_negative_pids_are_refused_before_any_call() {
    let k = RecordingKernel::new();
    k.add_process(1, 5);
    for pid in [0, -1, -PID] {
        let err = ProcessHandle::recorded_with(&k, pid, StartCheck::Ticks(5), "the init of c")
            .unwrap_err();
        assert_eq!(
            err,
            ProcessError::NotAPid {
                pid,
                what: "the init of c".into()
            }
        );
        assert!(
            err.to_string().contains("process groups or every process"),
            "{err}"
        );
    }
    assert_eq!(k.calls(), vec![]);
}

#[test]
fn the_recorded_process_is_signalled_through_its_pidfd_never_by_number() {
    let k = RecordingKernel::new();
    k.add_process(PID, START);
    let h = recorded(&k, START);
    assert!(!h.is_gone());
    assert_eq!(h.signal_with(&k, Signal::SIGTERM), Ok(Delivery::Sent));
    assert_eq!(
        k.calls(),
        vec![
            Call::PidfdOpen(PID),
            Call::ReadFile(format!("/proc/{PID}/stat").into()),
            Call::PidfdSignal {
                pid: PID,
                signal: None
            },
            Call::PidfdSignal {
                pid: PID,
                signal: Some(Signal::SIGTERM)
            },
        ]
    );
}

#[test]
fn another_process_at_the_recorded_pid_is_never_signalled() {
    let k = RecordingKernel::new();
    // The init was reaped and its pid given to a process that started later.
    k.add_process(PID, START + 1);
    let h = recorded(&k, START);
    assert!(h.is_gone());
    assert_eq!(h.signal_with(&k, Signal::SIGKILL), Ok(Delivery::Gone));
    assert_eq!(k.signals_sent(), vec![]);
}

#[test]
fn a_recorded_process_that_is_gone_is_not_an_error() {
    let k = RecordingKernel::new();
    let h = recorded(&k, START);
    assert!(h.is_gone());
    assert_eq!(h.signal_with(&k, Signal::SIGTERM), Ok(Delivery::Gone));
    assert_eq!(k.calls(), vec![Call::PidfdOpen(PID)]);
}

#[test]
fn a_process_reaped_after_the_open_is_gone_even_when_its_pid_is_reused() {
    let k = RecordingKernel::new();
    k.add_process(PID, START);
    let h = recorded(&k, START);
    assert!(h.is_alive_with(&k));
    // Reaped, and the pid given to a new process with the same start tick: a number
    // and a start time alike would both name it; the pidfd does not.
    k.end_process(PID);
    k.add_process(PID, START);
    assert!(!h.is_alive_with(&k));
    assert_eq!(h.signal_with(&k, Signal::SIGTERM), Ok(Delivery::Gone));
    assert_eq!(
        k.calls().last(),
        Some(&Call::PidfdSignal {
            pid: PID,
            signal: Some(Signal::SIGTERM)
        })
    );
}

#[test]
fn a_pid_reused_between_the_open_and_the_check_is_caught_by_the_probe() {
    let k = RecordingKernel::new();
    k.add_process(PID, START);
    // The pidfd names the recorded process, which is then reaped; /proc shows its
    // successor, which started in the same tick: the check alone would pass.
    k.reuse_pid_after(1, |c| matches!(c, Call::PidfdOpen(_)), PID, START);
    let h = recorded(&k, START);
    assert!(h.is_gone());
    assert_eq!(h.signal_with(&k, Signal::SIGKILL), Ok(Delivery::Gone));
    assert_eq!(k.signals_sent(), vec![]);
}

#[test]
fn a_refused_signal_is_an_error_naming_the_process() {
    let k = RecordingKernel::new();
    k.add_process(PID, START);
    let h = recorded(&k, START);
    k.fail_nth(1, nix::Error::EPERM, |c| {
        matches!(
            c,
            Call::PidfdSignal {
                signal: Some(_),
                ..
            }
        )
    });
    let err = h.signal_with(&k, Signal::SIGTERM).unwrap_err();
    assert!(matches!(
        err,
        ProcessError::Sys {
            source: nix::Error::EPERM,
            pid: PID,
            ..
        }
    ));
    assert!(err.to_string().contains("the init of c"), "{err}");
}

#[test]
fn without_pidfds_the_start_is_checked_again_right_before_each_kill() {
    let k = RecordingKernel::new();
    k.fail(nix::Error::ENOSYS, |c| matches!(c, Call::PidfdOpen(_)));
    k.add_process(PID, START);
    let h = recorded(&k, START);
    assert_eq!(h.signal_with(&k, Signal::SIGTERM), Ok(Delivery::Sent));
    // The process is reaped and the pid reused: the next kill would hit a stranger.
    k.end_process(PID);
    k.add_process(PID, START + 50);
    assert_eq!(h.signal_with(&k, Signal::SIGKILL), Ok(Delivery::Gone));
    assert_eq!(
        k.signals_sent(),
        vec![Call::Kill {
            pid: PID,
            signal: Some(Signal::SIGTERM)
        }]
    );
}

#[test]
fn an_old_record_without_a_start_rules_out_processes_started_after_it() {
    let boot = 1_700_000_000_u64;
    let per_second = proc_start::ticks_per_second();
    let recorded_at = Utc.timestamp_opt(1_700_000_100, 0).unwrap();
    let check = StartCheck::NotAfter(recorded_at);
    let k = RecordingKernel::new();
    k.add_file("/proc/stat", &format!("cpu 1 2 3\nbtime {boot}\n"));
    // Started 99 s after boot: before the record.
    k.add_process(PID, 99 * per_second);
    let h = ProcessHandle::recorded_with(&k, PID, check, "the init of c").unwrap();
    assert_eq!(h.signal_with(&k, Signal::SIGTERM), Ok(Delivery::Sent));
    // Started 10 s after the record: not the recorded process.
    k.end_process(PID);
    k.add_process(PID, 110 * per_second);
    let later = ProcessHandle::recorded_with(&k, PID, check, "the init of c").unwrap();
    assert!(later.is_gone());
    assert_eq!(later.signal_with(&k, Signal::SIGTERM), Ok(Delivery::Gone));
    assert_eq!(k.signals_sent().len(), 1);
}

#[test]
fn a_record_with_its_start_is_checked_by_ticks_and_one_without_by_time() {
    let at = Utc.timestamp_opt(1_700_000_100, 0).unwrap();
    let mut record = StartedRecord {
        shim_pid: 10,
        init_pid: PID,
        started_at: at,
        init_start_ticks: Some(START),
    };
    assert_eq!(StartCheck::of(&record), StartCheck::Ticks(START));
    record.init_start_ticks = None;
    assert_eq!(StartCheck::of(&record), StartCheck::NotAfter(at));
    // A record written before the field existed still reads.
    let old: StartedRecord = serde_json::from_str(&format!(
        r#"{{"shim_pid": 10, "init_pid": {PID}, "started_at": "2023-11-14T22:15:00Z"}}"#
    ))
    .unwrap();
    assert_eq!(old.init_start_ticks, None);
}

#[test]
fn open_if_decides_on_the_pidfds_process() {
    let k = RecordingKernel::new();
    k.add_process(PID, START);
    let yes = ProcessHandle::open_if_with(&k, PID, "a child of the shim", |_, _| true).unwrap();
    let no = ProcessHandle::open_if_with(&k, PID, "a child of the shim", |_, _| false).unwrap();
    assert!(!yes.is_gone() && no.is_gone());
    assert_eq!(no.signal_with(&k, Signal::SIGKILL), Ok(Delivery::Gone));
    assert_eq!(yes.signal_with(&k, Signal::SIGKILL), Ok(Delivery::Sent));
    assert_eq!(
        k.signals_sent(),
        vec![Call::PidfdSignal {
            pid: PID,
            signal: Some(Signal::SIGKILL)
        }]
    );
}
