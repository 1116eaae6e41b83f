//! Tells systemd (`Type=notify`) that the daemon is ready, how many pods run, and —
//! the watchdog — that it still makes progress: `WATCHDOG=1` is sent only when the pod
//! manager's loop answers a ping, never from a bare timer, so a wedged manager stops
//! the petting and systemd restarts the daemon (containers keep running).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::manager::{Heartbeat, Ping};
use super::sd_notify::{Notifier, watchdog_interval};
use podhost_status::StatusStore;

/// How often STATUS is refreshed when systemd set no watchdog.
const STATUS_PERIOD: Duration = Duration::from_secs(10);
/// How often the manager is asked whether the first sync is done, before READY=1.
const READY_POLL: Duration = Duration::from_millis(20);

/// The manager's answer within `wait` (queueing the ping included: a wedged manager
/// fills the queue).
async fn ping(manager: &mpsc::Sender<Ping>, wait: Duration) -> Option<Heartbeat> {
    let (tx, rx) = oneshot::channel();
    tokio::time::timeout(wait, async {
        manager.send(tx).await.ok()?;
        rx.await.ok()
    })
    .await
    .ok()
    .flatten()
}

/// Counted in place: a copy of every pod's record each period was an idle daemon's
/// largest allocation.
fn status_line(store: &StatusStore) -> String {
    let (mut running, mut known) = (0, 0);
    store.visit(|r| {
        known += 1;
        running += usize::from(r.phase() == Some("Running"));
    });
    format!("STATUS={running} pods running ({known} known)")
}

/// READY=1 once the manager applied its first scan (the API socket is served before
/// the manager starts), then STATUS and WATCHDOG=1 while the manager answers.
pub async fn run(notifier: Arc<Notifier>, manager: mpsc::Sender<Ping>, store: Arc<StatusStore>) {
    loop {
        match ping(&manager, Duration::from_secs(5)).await {
            Some(Heartbeat { synced: true }) => break,
            Some(_) => tokio::time::sleep(READY_POLL).await,
            None if manager.is_closed() => return,
            None => {}
        }
    }
    notifier.send(&format!("READY=1\n{}", status_line(&store)));
    tracing::info!("told the service manager the daemon is ready");
    let watchdog = watchdog_interval();
    let period = watchdog.unwrap_or(STATUS_PERIOD);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        match ping(&manager, period).await {
            Some(_) if watchdog.is_some() => {
                notifier.send(&format!("WATCHDOG=1\n{}", status_line(&store)));
            }
            Some(_) => notifier.send(&status_line(&store)),
            None => {
                tracing::warn!(
                    "the pod manager did not answer within {period:?}: the systemd watchdog is not petted"
                );
                notifier.send("STATUS=the pod manager is not answering");
            }
        }
    }
}
