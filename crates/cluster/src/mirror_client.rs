//! Mirror pods on the API server, as the kubelet's `basicMirrorClient`: the static pod
//! copied with its config hash as `kubernetes.io/config.mirror` and the Node as its
//! controller owner, created; deleted with grace 0 and the mirror pod's UID as
//! precondition (a mirror pod someone created again since is never taken for it).
//!
//! The NodeRestriction admission of the API server holds a node to exactly this: a
//! pod it creates must carry the mirror annotation, be bound to the node, and have a
//! single owner reference to the node's Node (`v1`, `Node`, its name and UID,
//! `controller: true`, no `blockOwnerDeletion`); and it may reference no service
//! account, secret, config map or claim (static pods that do cannot be mirrored).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::PostParams;

use super::ClusterError;
use super::pod_status::{PodWrite, delete_terminated};
use super::pods::ANNOTATION_CONFIG_MIRROR;
use super::register::FIELD_MANAGER;

/// The node a mirror pod belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOwner {
    pub name: String,
    pub uid: String,
}

/// The mirror pod of `static_pod` (the pod as the node runs it), for the API server:
/// its name, namespace, labels, annotations and spec, plus the mirror annotation with
/// `hash` and the Node as controller owner. What the API server sets (UID, versions,
/// times) and what it refuses on create (ephemeral containers) is left out, and so is
/// the status: the status sync writes it once the pod exists.
pub fn mirror_pod(static_pod: &Pod, hash: &str, node: &NodeOwner) -> Pod {
    let meta = &static_pod.metadata;
    let mut annotations = meta.annotations.clone().unwrap_or_default();
    annotations.insert(ANNOTATION_CONFIG_MIRROR.to_string(), hash.to_string());
    let mut spec = static_pod.spec.clone().unwrap_or_default();
    spec.ephemeral_containers = None;
    spec.node_name = Some(node.name.clone());
    Pod {
        metadata: ObjectMeta {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            labels: meta.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "Node".to_string(),
                name: node.name.clone(),
                uid: node.uid.clone(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// How a create ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorCreate {
    /// The API server created it.
    Created,
    /// A pod of that name exists already (a create the watch has not shown yet, or a
    /// mirror the delete before this one did not remove): the next plan, from the
    /// watch, decides about it.
    Exists,
}

/// Creates `mirror` (from [`mirror_pod`]); returns the created pod's UID when created.
pub async fn create_mirror(
    client: &kube::Client,
    mirror: &Pod,
) -> Result<(MirrorCreate, Option<String>), ClusterError> {
    let namespace = mirror.metadata.namespace.as_deref().unwrap_or("default");
    let name = mirror.metadata.name.as_deref().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    match pods.create(&params, mirror).await {
        Ok(created) => Ok((MirrorCreate::Created, created.metadata.uid)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok((MirrorCreate::Exists, None)),
        Err(source) => Err(ClusterError::Api {
            what: format!("creating the mirror pod {namespace}/{name}"),
            source,
        }),
    }
}

/// Deletes the mirror pod `namespace/name` with `uid`: grace 0, UID precondition, as
/// the kubelet's `DeleteMirrorPod`. Gone already, or replaced, is [`PodWrite::Gone`].
pub async fn delete_mirror(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<PodWrite, ClusterError> {
    delete_terminated(client, namespace, name, uid).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, EphemeralContainer, PodSpec, PodStatus};

    #[test]
    fn the_mirror_is_the_static_pod_with_the_hash_and_the_node_as_controller() {
        let static_pod = Pod {
            metadata: ObjectMeta {
                name: Some("web-n1".into()),
                namespace: Some("default".into()),
                uid: Some("h1".into()),
                resource_version: Some("7".into()),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                annotations: Some(
                    [("kubernetes.io/config.hash".to_string(), "h1".to_string())].into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    ..Container::default()
                }],
                ephemeral_containers: Some(vec![EphemeralContainer::default()]),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            }),
        };
        let node = NodeOwner {
            name: "n1".into(),
            uid: "node-uid".into(),
        };
        let m = mirror_pod(&static_pod, "h1", &node);
        assert_eq!(m.metadata.name.as_deref(), Some("web-n1"));
        assert_eq!(m.metadata.uid, None);
        assert_eq!(m.metadata.resource_version, None);
        let ann = m.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[ANNOTATION_CONFIG_MIRROR], "h1");
        assert_eq!(ann["kubernetes.io/config.hash"], "h1");
        assert_eq!(m.metadata.labels.as_ref().unwrap()["app"], "web");
        let owners = m.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].name.as_str()),
            ("Node", "n1")
        );
        assert_eq!(owners[0].uid, "node-uid");
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[0].block_owner_deletion, None);
        let spec = m.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.containers[0].name, "app");
        assert!(spec.ephemeral_containers.is_none());
        assert!(m.status.is_none());
    }
}
