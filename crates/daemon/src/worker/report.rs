//! What the worker's tasks report back to the pod's sync loop.

use std::future::Future;
use std::pin::Pin;

use nix::sys::signal::Signal;
use tokio::sync::mpsc;

use podhost_disk::records::StartedRecord;
use podhost_model::podsync::{BlockKind, Termination};
use podhost_runtime::process_handle::ProcessHandle;
use podhost_runtime::shim_client::ShimExit;

/// Resolves when the container's init has exited (then its record is durable and its
/// shim gone).
pub type ExitFuture = Pin<Box<dyn Future<Output = ShimExit> + Send>>;

/// A running container as signals and hooks need it.
#[derive(Debug, Clone)]
pub struct Running {
    pub started: StartedRecord,
    /// The container's init: signals go through it, never to `started.init_pid`.
    pub init: ProcessHandle,
    pub attempt: u32,
    /// libcontainer's id (`<uid>-<name>-<attempt>`), for exec hooks.
    pub container_id: String,
    pub stop_signal: Signal,
}

/// One observation, sent by the task that made it.
pub enum Report {
    /// The shim runs the container; `exit` resolves when it ends.
    Started {
        container: String,
        run: Running,
        image_id: String,
        exit: ExitFuture,
    },
    /// The start was blocked before anything ran (image, configuration).
    Blocked {
        container: String,
        kind: BlockKind,
        message: String,
    },
    /// The instance ended (a failed start counts, already released). `recorded`: its
    /// `exit.json` is durable already; if not, [`Report::Recorded`] follows (at the
    /// latest with [`Report::Released`]).
    Exited {
        container: String,
        attempt: u32,
        termination: Termination,
        released: bool,
        recorded: bool,
    },
    /// The exited instance's `exit.json` is durable: what must survive a crash may
    /// follow from its exit now.
    Recorded { container: String },
    /// The exited instance's shim is gone: cgroup and rootfs are released.
    Released { container: String },
    /// The pod must be evicted (an emptyDir over its sizeLimit, node pressure), for this
    /// reason, its containers stopped with this grace.
    Evict {
        message: String,
        grace: std::time::Duration,
    },
    /// The postStart hook ended.
    PostStartEnded {
        container: String,
        failure: Option<String>,
    },
    /// The preStop hook ended.
    HookEnded {
        container: String,
        failure: Option<String>,
    },
    /// What is wrong with the pod's sandbox now (`None`: nothing), from its guard.
    Sandbox { problem: Option<String> },
}

/// Where the pod's tasks send their [`Report`]s: the pod's sync loop, through a channel
/// that carries them boxed. tokio's unbounded channel allocates its slots 32 at a time,
/// the first block with the channel, kept for the pod's whole life: with a report
/// (~140 bytes) in each slot that was 4.6 KiB per pod for reports that come a few at a
/// time; a pointer per slot makes it 0.3 KiB.
#[derive(Clone)]
pub struct ReportSender(mpsc::UnboundedSender<Box<Report>>);

/// The sync loop's end of the report channel.
pub type ReportReceiver = mpsc::UnboundedReceiver<Box<Report>>;

/// A new report channel for one pod.
pub fn report_channel() -> (ReportSender, ReportReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    (ReportSender(tx), rx)
}

impl ReportSender {
    /// Sends `report`; an error once the sync loop has ended (the report is dropped).
    pub fn send(&self, report: Report) -> Result<(), mpsc::error::SendError<Box<Report>>> {
        self.0.send(Box::new(report))
    }
}
