//! Which container a command means when `-c` is not given, as kubectl picks it: the
//! `kubectl.kubernetes.io/default-container` annotation's, else the first container —
//! saying so on stderr ("Defaulted container …") when the pod has others.

use k8s_openapi::api::core::v1::Pod;

/// The annotation naming the container kubectl's commands default to.
pub const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// The container to use, and the notice kubectl prints on stderr when it picked the
/// first of several.
pub fn default_container(pod: &Pod) -> (Option<String>, Option<String>) {
    let Some(spec) = pod.spec.as_ref() else {
        return (None, None);
    };
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CONTAINER_ANNOTATION))
        .filter(|name| all_containers(pod).contains(name));
    if let Some(name) = annotated {
        return (Some(name.clone()), None);
    }
    let Some(first) = spec.containers.first().map(|c| c.name.clone()) else {
        return (None, None);
    };
    let others = spec.containers.len() > 1
        || spec.init_containers.as_ref().is_some_and(|l| !l.is_empty())
        || spec
            .ephemeral_containers
            .as_ref()
            .is_some_and(|l| !l.is_empty());
    let notice = others.then(|| {
        format!(
            "Defaulted container \"{first}\" out of: {}",
            container_list(pod)
        )
    });
    (Some(first), notice)
}

/// kubectl's list of a pod's containers: `a, b, setup (init), debugger (ephem)`.
fn container_list(pod: &Pod) -> String {
    let Some(spec) = pod.spec.as_ref() else {
        return String::new();
    };
    let containers = spec.containers.iter().map(|c| c.name.clone());
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| format!("{} (init)", c.name));
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| format!("{} (ephem)", c.name));
    containers
        .chain(init)
        .chain(ephemeral)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every container's name: init containers, containers, ephemeral containers (the
/// order of `logs --all-containers`).
pub fn all_containers(pod: &Pod) -> Vec<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone());
    let containers = spec.containers.iter().map(|c| c.name.clone());
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|c| c.name.clone());
    init.chain(containers).chain(ephemeral).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value, annotations: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "annotations": annotations}, "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn the_first_container_with_kubectls_notice_when_there_are_others() {
        let two = pod(
            serde_json::json!({
                "initContainers": [{"name": "setup"}],
                "containers": [{"name": "nginx"}, {"name": "log"}],
                "ephemeralContainers": [{"name": "debugger"}]
            }),
            serde_json::json!({}),
        );
        assert_eq!(
            default_container(&two),
            (
                Some("nginx".into()),
                Some(
                    "Defaulted container \"nginx\" out of: nginx, log, setup (init), debugger (ephem)"
                        .into()
                )
            )
        );
        assert_eq!(all_containers(&two), ["setup", "nginx", "log", "debugger"]);
        let one = pod(
            serde_json::json!({"containers": [{"name": "nginx"}]}),
            serde_json::json!({}),
        );
        assert_eq!(default_container(&one), (Some("nginx".into()), None));
    }

    #[test]
    fn the_annotation_names_the_default_when_it_names_a_container() {
        let spec = serde_json::json!({"containers": [{"name": "nginx"}, {"name": "log"}]});
        let annotated = pod(
            spec.clone(),
            serde_json::json!({DEFAULT_CONTAINER_ANNOTATION: "log"}),
        );
        assert_eq!(default_container(&annotated), (Some("log".into()), None));
        let wrong = pod(
            spec,
            serde_json::json!({DEFAULT_CONTAINER_ANNOTATION: "nope"}),
        );
        assert_eq!(default_container(&wrong).0.as_deref(), Some("nginx"));
    }
}
