//! Container status values in the API's shape.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus,
};

use crate::disk::records::ExitRecord;
use crate::status::StatusStore;
use crate::status::k8s_time;

/// What the worker knows of one container, turned into a `ContainerStatus` on each change.
#[derive(Debug, Clone)]
pub struct ContainerView {
    pub name: String,
    pub image: String,
    pub image_id: String,
    pub restart_count: i32,
    pub container_id: Option<String>,
    pub state: ContainerState,
    pub last_state: Option<ContainerState>,
}

impl ContainerView {
    pub fn new(name: &str, image: &str, reason: &str) -> Self {
        Self {
            name: name.to_string(),
            image: image.to_string(),
            image_id: String::new(),
            restart_count: 0,
            container_id: None,
            state: waiting(reason, None),
            last_state: None,
        }
    }

    pub fn publish(&self, store: &StatusStore, uid: &str) {
        let running = self.state.running.is_some();
        store.set_container_status(
            uid,
            ContainerStatus {
                name: self.name.clone(),
                image: self.image.clone(),
                image_id: self.image_id.clone(),
                container_id: self.container_id.clone(),
                ready: running,
                started: Some(running),
                restart_count: self.restart_count,
                state: Some(self.state.clone()),
                last_state: self.last_state.clone(),
                ..Default::default()
            },
        );
    }
}

pub fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..Default::default()
    }
}

pub fn running(started_at: DateTime<Utc>) -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(k8s_time(started_at)),
        }),
        ..Default::default()
    }
}

/// The terminated state of an exit: reason Completed for 0, Error otherwise, unless the
/// caller knows better (StartError, ContainerStatusUnknown).
pub fn terminated(
    exit: &ExitRecord,
    container_id: Option<String>,
    reason: Option<&str>,
    message: Option<String>,
) -> ContainerState {
    let reason = reason.unwrap_or(if exit.exit_code == 0 {
        "Completed"
    } else {
        "Error"
    });
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit.exit_code,
            signal: exit.signal,
            reason: Some(reason.to_string()),
            message,
            started_at: Some(k8s_time(exit.started_at)),
            finished_at: Some(k8s_time(exit.finished_at)),
            container_id,
        }),
        ..Default::default()
    }
}
