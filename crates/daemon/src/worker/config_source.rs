//! Where a pod's ConfigMaps and Secrets come from: a static pod's from `--config-dir`,
//! an API pod's from the API server (only the objects the node's pods name, followed by
//! cluster mode). An API pod never sees the config dir's objects, nor a static pod the
//! API's: each source is what its kind of pod is allowed to read.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::context::{Ctx, PodInfo};
use podhost_model::config_refs::{
    ObjectKind, ObjectRef, ObjectSet, pod_config_refs, pod_token_refs,
};
use podhost_model::env::ConfigLookup;
use podhost_source::configdir::ConfigObjects;

/// How long a container's start waits for the first answer about the objects its pod
/// names (a pod bound a moment ago: its objects' watches were just started) before it
/// fails with the kubelet's "failed to sync … cache" and is retried.
pub const FIRST_ANSWER_WAIT: Duration = Duration::from_secs(10);

/// The objects a pod's env and volumes are built from, at one moment.
pub enum PodObjects {
    Dir(Arc<ConfigObjects>),
    Api(Arc<ObjectSet>),
}

impl PodObjects {
    pub fn lookup(&self) -> &dyn ConfigLookup {
        match self {
            PodObjects::Dir(o) => o.as_ref(),
            PodObjects::Api(o) => o.as_ref(),
        }
    }
}

/// The channel an API pod's objects come on; `None` for a static pod.
pub fn api_channel(ctx: &Ctx, pod: &PodInfo) -> Option<watch::Receiver<Arc<ObjectSet>>> {
    if !podhost_source::is_api_pod(&pod.pod) {
        return None;
    }
    // An API pod without cluster mode's object watches (cannot happen in the daemon)
    // sees an empty set: every required object is missing.
    Some(
        ctx.api_objects
            .clone()
            .unwrap_or_else(|| watch::channel(Arc::new(ObjectSet::default())).1),
    )
}

/// The pod's objects as they are now.
pub fn current(ctx: &Ctx, pod: &PodInfo) -> PodObjects {
    match api_channel(ctx, pod) {
        Some(rx) => PodObjects::Api(rx.borrow().clone()),
        None => PodObjects::Dir(ctx.config_objects.borrow().clone()),
    }
}

/// Waits until each of `refs` (objects the API pod names) has had its first answer
/// (found or not), at most `limit`; false when one is still unknown then. A static
/// pod's config dir has answered everything.
pub async fn wait_for_objects(
    ctx: &Ctx,
    pod: &PodInfo,
    refs: &BTreeSet<ObjectRef>,
    limit: Duration,
) -> bool {
    let Some(mut rx) = api_channel(ctx, pod) else {
        return true;
    };
    let answered = |set: &Arc<ObjectSet>| set.pending(refs).is_empty();
    tokio::time::timeout(limit, rx.wait_for(answered))
        .await
        .is_ok_and(|r| r.is_ok())
}

/// An API pod's object or token still unanswered when its container was to start; the
/// messages are the kubelet's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAnswered {
    /// The TokenRequest of a projected token has not been answered.
    #[error("failed to fetch token: the {0} is not issued yet")]
    Token(String),
    /// The watch of a ConfigMap or Secret has not listed it yet.
    #[error(
        "failed to sync {kind} cache: timed out waiting for the condition ({kind} {namespace}/{name})"
    )]
    Cache {
        kind: &'static str,
        namespace: String,
        name: String,
    },
}

/// Waits until every object the API pod names has had its first answer (found or
/// not), at most `limit`; `Err` names the first one still unknown. A static pod never
/// waits.
pub async fn wait_for_first_answers(
    ctx: &Ctx,
    pod: &PodInfo,
    limit: Duration,
) -> Result<(), NotAnswered> {
    let Some(mut rx) = api_channel(ctx, pod) else {
        return Ok(());
    };
    let refs = pod_config_refs(&pod.pod);
    let tokens = pod_token_refs(&pod.pod);
    if refs.is_empty() && tokens.is_empty() {
        return Ok(());
    }
    let settled = |set: &Arc<ObjectSet>| {
        set.pending(&refs).is_empty() && set.pending_tokens(&tokens).is_empty()
    };
    let answered = tokio::time::timeout(limit, rx.wait_for(settled))
        .await
        .is_ok();
    match answered {
        true => Ok(()),
        false => {
            let set = rx.borrow().clone();
            if let Some(t) = set.pending_tokens(&tokens).first() {
                return Err(NotAnswered::Token(t.to_string()));
            }
            match set.pending(&refs).first() {
                // Answered in the moment between the timeout and this look.
                None => Ok(()),
                Some(r) => Err(NotAnswered::Cache {
                    kind: match r.kind {
                        ObjectKind::ConfigMap => "configmap",
                        ObjectKind::Secret => "secret",
                    },
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                }),
            }
        }
    }
}
