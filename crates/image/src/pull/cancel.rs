//! [`Cancel`]: how a failed pull stops its other layer tasks *cooperatively*.
//!
//! Aborting a task drops its future, but the blocking threads it started (the
//! blob writer, the streamed unpack) run on and remove their temp files only
//! when they next notice — after the pull has already reported its failure. A
//! pull must not return while anything of it is still half-written, so instead
//! of aborting, it raises this flag: downloads stop at their next chunk and
//! clean up, waits end, and the pull joins every task before it returns.

use tokio::sync::watch;

use super::error::{Ctx, PullError};

/// Raised once by [`CancelSender::cancel`]; cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct Cancel(Option<watch::Receiver<bool>>);

/// The pull's side of a [`Cancel`].
#[derive(Debug)]
pub(super) struct CancelSender(watch::Sender<bool>);

/// A flag not yet raised, and its sender.
pub(super) fn channel() -> (CancelSender, Cancel) {
    let (tx, rx) = watch::channel(false);
    (CancelSender(tx), Cancel(Some(rx)))
}

impl CancelSender {
    /// Tells every task holding the flag to stop.
    pub(super) fn cancel(&self) {
        self.0.send_replace(true);
    }
}

impl Cancel {
    /// A flag that is never raised (a download outside the layer phase).
    pub(super) fn never() -> Cancel {
        Cancel(None)
    }

    /// Completes once the flag is raised (or its pull is gone); never for
    /// [`Cancel::never`].
    pub(super) async fn cancelled(&mut self) {
        match self.0.as_mut() {
            Some(rx) => {
                let _ = rx.wait_for(|raised| *raised).await;
            }
            None => std::future::pending().await,
        }
    }
}

/// The error of a task stopped because another part of its pull failed (the
/// pull reports that failure, not this one).
pub(super) fn stopped(ctx: &Ctx) -> PullError {
    ctx.internal("stopped: another part of the pull failed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_raised_flag_wakes_every_clone() {
        let (tx, cancel) = channel();
        let mut a = cancel.clone();
        let mut b = cancel;
        let early = tokio::time::timeout(Duration::from_millis(20), a.cancelled()).await;
        assert!(early.is_err(), "not raised yet");
        let waiter = tokio::spawn(async move { b.cancelled().await });
        tx.cancel();
        tokio::time::timeout(Duration::from_secs(5), a.cancelled())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn never_is_never_raised() {
        let mut never = Cancel::never();
        let waited = tokio::time::timeout(Duration::from_millis(20), never.cancelled()).await;
        assert!(waited.is_err());
    }
}
