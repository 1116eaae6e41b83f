//! The daemon's essential tasks, watched. Any one of them ending (by a panic or
//! otherwise) leaves a half-alive daemon: pods nobody manages, an API that no longer
//! answers, OOM kills nobody sees. The daemon exits instead, with
//! [`EXIT_TASK_ENDED`], so that the service manager (systemd `Restart=`) starts it
//! again; containers live on in their shims and the new daemon adopts them.

use std::any::Any;

use futures::future::select_all;
use tokio::task::{JoinError, JoinHandle};

/// The exit status of a daemon whose essential task ended: EX_SOFTWARE of sysexits.h
/// ("internal software error"), distinct from 1 (a start-up error such as a bad flag).
pub const EXIT_TASK_ENDED: i32 = 70;

/// Which essential task ended, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnd {
    /// The task's name, as the daemon registered it ("pod manager", "API server", …).
    pub task: &'static str,
    /// "panicked: <message>", "ended" or "was cancelled".
    pub how: String,
}

/// The tasks that must run for the daemon's whole life.
#[derive(Default)]
pub struct EssentialTasks {
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl EssentialTasks {
    /// Watches `handle` under `task`'s name.
    pub fn watch(&mut self, task: &'static str, handle: JoinHandle<()>) {
        self.tasks.push((task, handle));
    }

    /// Waits until the first watched task ends and says which and how. With nothing
    /// watched, never returns.
    pub async fn first_end(&mut self) -> TaskEnd {
        if self.tasks.is_empty() {
            return std::future::pending().await;
        }
        let (result, index, _) = select_all(self.tasks.iter_mut().map(|(_, h)| h)).await;
        // A finished JoinHandle must not be polled again: it leaves the set.
        let (task, _) = self.tasks.swap_remove(index);
        TaskEnd {
            task,
            how: describe(result),
        }
    }

    /// Aborts every task still watched (on the way out).
    pub fn abort_all(&self) {
        for (_, handle) in &self.tasks {
            handle.abort();
        }
    }
}

fn describe(result: Result<(), JoinError>) -> String {
    match result {
        Ok(()) => "ended".into(),
        Err(e) if e.is_panic() => format!("panicked: {}", panic_message(e.into_panic())),
        Err(_) => "was cancelled".into(),
    }
}

/// The text of a panic's payload (`panic!` with a literal or with a format).
fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload.downcast_ref::<&str>().map_or_else(
            || "(a panic without a message)".into(),
            |s| (*s).to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_panicking_task_is_named_with_its_message() {
        let mut tasks = EssentialTasks::default();
        tasks.watch(
            "sleeper",
            tokio::spawn(tokio::time::sleep(Duration::from_secs(3600))),
        );
        tasks.watch(
            "pod manager",
            tokio::spawn(async { panic!("boom at sync {}", 1) }),
        );
        let end = tasks.first_end().await;
        assert_eq!(
            end,
            TaskEnd {
                task: "pod manager",
                how: "panicked: boom at sync 1".into()
            }
        );
        tasks.abort_all();
    }

    #[tokio::test]
    async fn a_task_that_returns_has_ended() {
        let mut tasks = EssentialTasks::default();
        tasks.watch(
            "sleeper",
            tokio::spawn(tokio::time::sleep(Duration::from_secs(3600))),
        );
        tasks.watch("API server", tokio::spawn(async {}));
        let end = tasks.first_end().await;
        assert_eq!((end.task, end.how.as_str()), ("API server", "ended"));
        tasks.abort_all();
    }

    #[tokio::test]
    async fn an_aborted_task_was_cancelled_and_a_literal_panic_is_read() {
        let mut tasks = EssentialTasks::default();
        let sleeper = tokio::spawn(tokio::time::sleep(Duration::from_secs(3600)));
        sleeper.abort();
        tasks.watch("sleeper", sleeper);
        assert_eq!(tasks.first_end().await.how, "was cancelled");
        tasks.watch("gc", tokio::spawn(async { panic!("literal") }));
        assert_eq!(tasks.first_end().await.how, "panicked: literal");
    }
}
