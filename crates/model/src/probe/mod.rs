//! The kubelet's probe semantics (kubelet-semantics §4), pure: what a probe's spec means
//! ([`ProbeTiming`], [`ProbeAction`]), when it is due and how consecutive results become
//! the container's result ([`ProbeTracker`]), and the API server's rules for a probe
//! ([`validate_probe`]). The handlers that run probes live in `crate::probe`.

mod action;
mod timing;
mod tracker;
mod validate;

pub use action::{ActionError, HttpAction, HttpScheme, ProbeAction, resolve_port};
pub use timing::ProbeTiming;
pub use tracker::ProbeTracker;
pub use validate::{ProbeSpecError, validate_lifecycle_handler, validate_probe};

/// The `User-Agent` of HTTP and gRPC probes unless a probe sets its own: the kubelet's
/// `kube-probe/<major>.<minor>`, for the Kubernetes release whose semantics podhost follows.
pub const USER_AGENT: &str = "kube-probe/1.34";

/// The three probes a container may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    /// The result a new container instance has before its first probe: not ready, alive,
    /// not known to be started (the kubelet's prober worker's initial values).
    pub fn initial_result(self) -> ProbeResult {
        match self {
            ProbeKind::Startup => ProbeResult::Unknown,
            ProbeKind::Liveness => ProbeResult::Success,
            ProbeKind::Readiness => ProbeResult::Failure,
        }
    }

    /// Whether a failure restarts the container (and puts the prober on hold until the
    /// next instance).
    pub fn failure_restarts(self) -> bool {
        matches!(self, ProbeKind::Startup | ProbeKind::Liveness)
    }

    /// The field's name in the container spec, for messages.
    pub fn field(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startupProbe",
            ProbeKind::Liveness => "livenessProbe",
            ProbeKind::Readiness => "readinessProbe",
        }
    }

    /// As the kubelet names it in events ("Liveness probe failed: …").
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }
}

/// A probe's (or a container's) result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeResult {
    Success,
    Failure,
    /// The handler could not tell (it could not run); counts toward nothing.
    Unknown,
}

/// What one run of a handler found, with the text the kubelet would show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The probe ran and failed: a status code, a refused connection, an exit code,
    /// a timeout.
    Failure(String),
    /// The probe could not run (podhost's own error); not counted.
    Unknown(String),
    /// A success with something to tell (an HTTP redirect to another host, not
    /// followed): the kubelet's `probe.Warning`, a `ProbeWarning` event each time.
    Warning(String),
}

impl Outcome {
    pub fn result(&self) -> ProbeResult {
        match self {
            Outcome::Success | Outcome::Warning(_) => ProbeResult::Success,
            Outcome::Failure(_) => ProbeResult::Failure,
            Outcome::Unknown(_) => ProbeResult::Unknown,
        }
    }

    /// The failure's (or error's) text; empty for a success.
    pub fn message(&self) -> &str {
        match self {
            Outcome::Success | Outcome::Warning(_) => "",
            Outcome::Failure(m) | Outcome::Unknown(m) => m,
        }
    }

    /// A success's warning, if it has one.
    pub fn warning(&self) -> Option<&str> {
        match self {
            Outcome::Warning(w) => Some(w),
            _ => None,
        }
    }
}
