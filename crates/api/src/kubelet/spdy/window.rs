//! Flow control of what this side sends: SPDY/3 gives every stream a 64 KiB window
//! the peer widens with WINDOW_UPDATE (and SETTINGS may change the initial size);
//! SPDY/3.1 adds a session-wide window (WINDOW_UPDATE on stream 0).
//!
//! moby/spdystream, the client kubectl uses, neither sends WINDOW_UPDATE nor reads it:
//! a sender that held it to 64 KiB would stall every exec printing more than that.
//! So a window is enforced only once the peer shows it keeps one — its first
//! WINDOW_UPDATE or INITIAL_WINDOW_SIZE setting — and the session window only once
//! the peer updated stream 0.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;

/// Every stream's window before the peer changes it.
pub const DEFAULT_WINDOW: i64 = 64 * 1024;

#[derive(Debug)]
struct State {
    /// The peer has shown it does flow control.
    enforced: bool,
    /// The peer has updated the session window (SPDY/3.1).
    session_enforced: bool,
    initial: i64,
    session: i64,
    streams: HashMap<u32, i64>,
    closed: bool,
}

/// The windows this side may still send into.
#[derive(Debug)]
pub struct SendWindows {
    state: Mutex<State>,
    changed: Notify,
}

impl Default for SendWindows {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                enforced: false,
                session_enforced: false,
                initial: DEFAULT_WINDOW,
                session: DEFAULT_WINDOW,
                streams: HashMap::new(),
                closed: false,
            }),
            changed: Notify::new(),
        }
    }
}

impl SendWindows {
    fn locked<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// Changes the windows and wakes whoever waits for one.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let out = self.locked(f);
        self.changed.notify_waiters();
        out
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE: every open stream's window moves by the change.
    pub fn set_initial(&self, size: u32) {
        self.with(|s| {
            s.enforced = true;
            let delta = i64::from(size) - s.initial;
            s.initial = i64::from(size);
            for window in s.streams.values_mut() {
                *window += delta;
            }
        });
    }

    /// WINDOW_UPDATE: `stream` 0 is the session's window.
    pub fn update(&self, stream: u32, delta: u32) {
        self.with(|s| {
            s.enforced = true;
            if stream == 0 {
                s.session_enforced = true;
                s.session += i64::from(delta);
            } else {
                let initial = s.initial;
                *s.streams.entry(stream).or_insert(initial) += i64::from(delta);
            }
        });
    }

    /// The peer has shown it keeps windows (and so wants to hear of ours).
    pub fn enforced(&self) -> bool {
        self.locked(|s| s.enforced)
    }

    /// The connection ended: nobody waits for a window any more.
    pub fn close(&self) {
        self.with(|s| s.closed = true);
    }

    /// How many of `want` bytes may go on `stream` now, waiting until at least one may;
    /// 0 once the connection is closed.
    pub async fn take(&self, stream: u32, want: usize) -> usize {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // Taking only shrinks windows: no one to wake (and waking ourselves would spin).
            let granted = self.locked(|s| {
                if s.closed {
                    return Some(0);
                }
                if !s.enforced {
                    return Some(want);
                }
                let initial = s.initial;
                let stream_window = *s.streams.entry(stream).or_insert(initial);
                let mut available = stream_window;
                if s.session_enforced {
                    available = available.min(s.session);
                }
                if available <= 0 {
                    return None;
                }
                let n = usize::try_from(available).unwrap_or(usize::MAX).min(want);
                let n_signed = i64::try_from(n).unwrap_or(i64::MAX);
                if let Some(w) = s.streams.get_mut(&stream) {
                    *w -= n_signed;
                }
                s.session -= n_signed;
                Some(n)
            });
            match granted {
                Some(n) => return n,
                None => notified.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_peer_without_flow_control_is_not_held_to_a_window() {
        let w = SendWindows::default();
        assert_eq!(w.take(1, 1 << 20).await, 1 << 20);
        assert_eq!(w.take(1, 1 << 20).await, 1 << 20);
    }

    #[tokio::test]
    async fn an_enforcing_peer_gets_no_more_than_its_window_until_it_updates() {
        let w = Arc::new(SendWindows::default());
        w.set_initial(10);
        assert_eq!(w.take(1, 100).await, 10);
        let waiter = {
            let w = w.clone();
            tokio::spawn(async move { w.take(1, 100).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "sent past a closed window");
        w.update(1, 7);
        assert_eq!(waiter.await.unwrap(), 7);
        // Another stream has its own window.
        assert_eq!(w.take(3, 4).await, 4);
    }

    #[tokio::test]
    async fn the_session_window_counts_once_the_peer_updates_it() {
        let w = Arc::new(SendWindows::default());
        w.update(0, 0);
        assert_eq!(w.take(1, 100_000).await, 64 * 1024);
        // Stream 3's own window is open, the session's is spent.
        let waiter = {
            let w = w.clone();
            tokio::spawn(async move { w.take(3, 1).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "sent past the session window");
        w.update(0, 5);
        assert_eq!(waiter.await.unwrap(), 1);
    }

    #[tokio::test]
    async fn closing_releases_waiters() {
        let w = Arc::new(SendWindows::default());
        w.set_initial(0);
        let waiter = {
            let w = w.clone();
            tokio::spawn(async move { w.take(1, 10).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        w.close();
        assert_eq!(waiter.await.unwrap(), 0);
    }
}
