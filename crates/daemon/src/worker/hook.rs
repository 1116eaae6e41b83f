//! Performs the core's `RunPostStart` and `RunPreStop` with the probe module's handlers
//! (exec through `podhost exec-helper`, httpGet, sleep) and reports how it ended. As the
//! kubelet, a hook has no timeout of its own: the core stops waiting for a preStop at the
//! grace deadline, and a hook still running when its pod is done is aborted with the
//! pod's tasks.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler};

use super::context::{Ctx, PodInfo};
use super::report::{Report, ReportSender, Running};
use podhost_model::probe::{Outcome, ProbeAction};
use podhost_probe::{HandlerTarget, PodNetwork, run_handler};
use podhost_runtime::sandbox::SandboxPaths;

/// Which hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    PostStart,
    /// A preStop: a sleep is bounded by this timeout (the grace period).
    PreStop {
        timeout: Duration,
    },
}

impl HookPoint {
    fn field(self) -> &'static str {
        match self {
            Self::PostStart => "lifecycle.postStart",
            Self::PreStop { .. } => "lifecycle.preStop",
        }
    }
}

/// Where the handlers of `pod`'s container instance `container_id` run.
pub fn handler_target(ctx: &Ctx, pod: &PodInfo, container_id: &str) -> HandlerTarget {
    let paths = SandboxPaths::new(&ctx.layout.pod_ns_dir(&pod.uid), pod.sandbox_shape());
    HandlerTarget {
        exe: ctx.exe.clone(),
        libcontainer_root: ctx.layout.libcontainer_root(),
        container_id: container_id.to_string(),
        network: match paths.net {
            Some(net) => PodNetwork::Namespace(net),
            None => PodNetwork::Host,
        },
        pod_ip: pod.current_ips(ctx).first().and_then(|ip| ip.parse().ok()),
    }
}

/// Runs `handler` of `c` for the running instance `run` and reports how it ended.
pub async fn run_hook(
    ctx: Arc<Ctx>,
    pod: Arc<PodInfo>,
    c: Container,
    point: HookPoint,
    handler: LifecycleHandler,
    run: Running,
    reports: ReportSender,
) {
    let failure = handle(&ctx, &pod, &c, &handler, &run, point).await;
    let container = c.name;
    let report = match point {
        HookPoint::PostStart => Report::PostStartEnded { container, failure },
        HookPoint::PreStop { .. } => Report::HookEnded { container, failure },
    };
    let _ = reports.send(report);
}

async fn handle(
    ctx: &Ctx,
    pod: &PodInfo,
    c: &Container,
    handler: &LifecycleHandler,
    run: &Running,
    point: HookPoint,
) -> Option<String> {
    let ports = c.ports.as_deref().unwrap_or_default();
    let mut action = match ProbeAction::of_lifecycle(handler, ports, point.field()) {
        Ok(a) => a,
        Err(e) => return Some(e.to_string()),
    };
    if let (ProbeAction::Sleep(d), HookPoint::PreStop { timeout }) = (&mut action, point) {
        *d = (*d).min(timeout);
    }
    let target = handler_target(ctx, pod, &run.container_id);
    match run_handler(&target, &action, None).await {
        Outcome::Success | Outcome::Warning(_) => None,
        Outcome::Failure(why) | Outcome::Unknown(why) => Some(why),
    }
}
