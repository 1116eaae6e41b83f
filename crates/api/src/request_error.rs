//! [`RequestError`]: what is wrong with an API request, and the HTTP status it earns.

/// A request the API refuses before doing anything: it names the parameter, pod or
/// container and what the caller can ask instead.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// `container=` names a container the pod does not have.
    #[error("container {container} is not valid for pod {pod}; choose one of: {}", choices.join(", "))]
    UnknownContainer {
        container: String,
        pod: String,
        /// The pod's containers, in spec order.
        choices: Vec<String>,
    },
    /// The pod's spec lists no containers (a record written by a broken daemon).
    #[error("pod {pod} has no containers")]
    NoContainers { pod: String },
    /// A numeric parameter (`tail`, `sinceSeconds`, `limitBytes`…) is not a number.
    #[error("{key}={value:?} is not a non-negative integer")]
    NotANumber {
        key: String,
        value: String,
        #[source]
        source: std::num::ParseIntError,
    },
    /// Both `sinceSeconds` and `sinceTime` are given.
    #[error("at most one of sinceSeconds and sinceTime")]
    TwoSinces,
    /// `sinceTime` is not an RFC 3339 time.
    #[error("sinceTime={value:?} is not an RFC 3339 time: {source}")]
    BadSinceTime {
        value: String,
        #[source]
        source: chrono::ParseError,
    },
    /// A port-forward request without `Upgrade:` (it cannot carry the stream).
    #[error(
        "port-forward needs an HTTP upgrade: send `Connection: Upgrade` and `Upgrade: {protocol}`"
    )]
    NoUpgrade { protocol: &'static str },
    /// `port=` is missing or not a TCP port.
    #[error("port={value:?} is not a port number: give the pod's port, 1-65535")]
    BadPort { value: String },
    /// `uid=` names an earlier pod of that name.
    #[error("pod \"{pod}\" with UID {wanted} is gone (the pod of that name now has UID {now})")]
    PodReplaced {
        pod: String,
        wanted: String,
        now: String,
    },
    /// The pod is not Running (kubectl's words for the same refusal).
    #[error("unable to forward port because pod \"{pod}\" is not running. Current status={phase}")]
    PodNotRunning { pod: String, phase: String },
}

impl RequestError {
    /// The HTTP status of the answer: 404 for what does not exist, 400 for a malformed
    /// parameter, 409 for a pod not in the state the request needs.
    pub(super) fn status(&self) -> u16 {
        match self {
            Self::UnknownContainer { .. } | Self::NoContainers { .. } => 404,
            Self::NotANumber { .. }
            | Self::TwoSinces
            | Self::BadSinceTime { .. }
            | Self::NoUpgrade { .. }
            | Self::BadPort { .. } => 400,
            Self::PodReplaced { .. } => 404,
            Self::PodNotRunning { .. } => 409,
        }
    }
}
