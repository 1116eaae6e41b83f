//! The API-server defaults podhost relies on (`SetDefaults_PodSpec`,
//! `SetDefaults_Container`, …), applied to a decoded and validated pod.

use k8s_openapi::api::core::v1::{Container, Pod};

/// Default `spec.terminationGracePeriodSeconds`.
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;
/// Default `terminationMessagePath` of a container.
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// Fills in the defaults podhost reads, leaving values the manifest set alone.
pub fn apply_api_defaults(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.restart_policy
        .get_or_insert_with(|| "Always".to_string());
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    spec.dns_policy
        .get_or_insert_with(|| "ClusterFirst".to_string());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".to_string());
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        container_defaults(c);
    }
}

fn container_defaults(c: &mut Container) {
    if c.image_pull_policy
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        let image = c.image.as_deref().unwrap_or_default();
        c.image_pull_policy = Some(default_pull_policy(image).to_string());
    }
    if c.termination_message_path
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        c.termination_message_path = Some(DEFAULT_TERMINATION_MESSAGE_PATH.to_string());
    }
    if c.termination_message_policy
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        c.termination_message_policy = Some("File".to_string());
    }
    for port in c.ports.iter_mut().flatten() {
        port.protocol.get_or_insert_with(|| "TCP".to_string());
    }
}

/// `Always` when the image's tag is `latest` or it has neither tag nor digest (which
/// means `latest`), else `IfNotPresent` — as `SetDefaults_Container`.
pub fn default_pull_policy(image: &str) -> &'static str {
    let parts = podhost_model::image_ref::split_reference(image);
    match (parts.tag, parts.digest) {
        (Some("latest"), _) => "Always",
        (None, None) => "Always",
        _ => "IfNotPresent",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_from_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(default_pull_policy("localhost:5000/nginx"), "Always");
        assert_eq!(
            default_pull_policy("localhost:5000/nginx:1"),
            "IfNotPresent"
        );
        assert_eq!(
            default_pull_policy("nginx@sha256:0123456789abcdef"),
            "IfNotPresent"
        );
        assert_eq!(
            default_pull_policy("nginx:latest@sha256:0123456789abcdef"),
            "Always"
        );
    }
}
