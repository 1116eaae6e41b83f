//! Bodies the API exchanges beyond the Kubernetes types.

use serde::{Deserialize, Serialize};

/// Where `podhost exec` finds a running container (the CLI execs itself, so that no
/// libcontainer call happens in the daemon).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecTarget {
    pub pod: String,
    pub container: String,
    pub libcontainer_root: String,
    pub container_id: String,
    pub running: bool,
}

/// `POST /images/load` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadRequest {
    pub path: String,
    /// `load --name REF`: the reference to give the source's image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `POST /images/pull` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullRequest {
    pub reference: String,
}

/// `POST /images/load` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadResponse {
    pub references: Vec<String>,
}

/// `GET /info`: which daemon answers on this socket. The CLI's image commands compare
/// `root_dir` with their `--root-dir` and say which store they acted on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonInfo {
    /// The daemon's `--root-dir`, as it was given (absolute).
    pub root_dir: String,
    /// Its image store: `<root_dir>/images` (blobs and references).
    pub image_store: String,
}

/// An error answer, in the shape of a Kubernetes `Status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiStatus {
    pub kind: String,
    pub status: String,
    pub message: String,
    pub code: u16,
}

impl ApiStatus {
    pub fn failure(code: u16, message: impl Into<String>) -> Self {
        Self {
            kind: "Status".into(),
            status: "Failure".into(),
            message: message.into(),
            code,
        }
    }
}
