//! Which pod a name means. Pod names are unique only within a namespace: a name asked
//! for without one means the pod of that name if exactly one namespace has it, and is
//! refused, with the candidates, when several do — never one of them picked silently.

use crate::store::{PodRecord, StatusStore};

/// Why a name names no single pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodLookupError {
    #[error("pod \"{name}\" not found in namespace \"{namespace}\"")]
    NotInNamespace { namespace: String, name: String },
    #[error("pod \"{name}\" not found")]
    NotFound { name: String },
    /// `candidates` as `namespace/name`, sorted.
    #[error(
        "pod name \"{name}\" is used in {} namespaces: {}; name one as NAMESPACE/NAME or with -n NAMESPACE",
        candidates.len(),
        candidates.join(", ")
    )]
    Ambiguous {
        name: String,
        candidates: Vec<String>,
    },
}

impl PodLookupError {
    /// The HTTP status the API answers with: 404, or 409 for an ambiguous name.
    pub fn status(&self) -> u16 {
        match self {
            PodLookupError::Ambiguous { .. } => 409,
            _ => 404,
        }
    }
}

impl PodRecord {
    pub fn namespace(&self) -> &str {
        self.admitted
            .metadata
            .namespace
            .as_deref()
            .unwrap_or("default")
    }
}

impl StatusStore {
    /// The pod `name` in `namespace`, or in the one namespace that has a pod of that
    /// name when `namespace` is `None`. Of two records of one pod (a manifest replaced
    /// while the old pod stops), the one seen last.
    pub fn find_pod(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<PodRecord, PodLookupError> {
        let mut named: Vec<PodRecord> = self
            .pods()
            .into_iter()
            .filter(|r| r.name() == name)
            .filter(|r| namespace.is_none_or(|ns| r.namespace() == ns))
            .collect();
        let mut namespaces: Vec<String> = named.iter().map(|r| r.namespace().to_string()).collect();
        namespaces.sort();
        namespaces.dedup();
        if namespaces.len() > 1 {
            return Err(PodLookupError::Ambiguous {
                name: name.to_string(),
                candidates: namespaces.iter().map(|ns| format!("{ns}/{name}")).collect(),
            });
        }
        named.sort_by_key(|r| seen_at(r).map(str::to_string));
        named.pop().ok_or_else(|| match namespace {
            Some(ns) => PodLookupError::NotInNamespace {
                namespace: ns.to_string(),
                name: name.to_string(),
            },
            None => PodLookupError::NotFound {
                name: name.to_string(),
            },
        })
    }
}

fn seen_at(rec: &PodRecord) -> Option<&str> {
    rec.admitted
        .metadata
        .annotations
        .as_ref()?
        .get("kubernetes.io/config.seen")
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use podhost_disk::Layout;

    fn pod_in(namespace: &str, name: &str, uid: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}
            }))
            .unwrap(),
        )
    }

    fn store_with(pods: &[(&str, &str, &str)]) -> (tempfile::TempDir, StatusStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = StatusStore::load(
            Layout::new(dir.path().join("root"), dir.path().join("logs")),
            "node",
        );
        for (ns, name, uid) in pods {
            store.admit(&pod_in(ns, name, uid));
        }
        (dir, store)
    }

    #[test]
    fn a_name_used_in_two_namespaces_is_refused_with_both_candidates() {
        let (_dir, store) = store_with(&[("team-b", "dup", "u2"), ("team-a", "dup", "u1")]);
        let err = store.find_pod(None, "dup").unwrap_err();
        assert_eq!(
            err,
            PodLookupError::Ambiguous {
                name: "dup".into(),
                candidates: vec!["team-a/dup".into(), "team-b/dup".into()],
            }
        );
        assert_eq!(err.status(), 409);
        assert_eq!(
            err.to_string(),
            "pod name \"dup\" is used in 2 namespaces: team-a/dup, team-b/dup; name one as NAMESPACE/NAME or with -n NAMESPACE"
        );
        assert_eq!(store.find_pod(Some("team-b"), "dup").unwrap().uid(), "u2");
        assert_eq!(store.find_pod(Some("team-a"), "dup").unwrap().uid(), "u1");
    }

    #[test]
    fn a_name_in_one_namespace_is_found_without_naming_it() {
        let (_dir, store) =
            store_with(&[("kube-system", "etcd-n1", "u1"), ("default", "web", "u2")]);
        assert_eq!(store.find_pod(None, "etcd-n1").unwrap().uid(), "u1");
        assert_eq!(
            store.find_pod(Some("default"), "etcd-n1").unwrap_err(),
            PodLookupError::NotInNamespace {
                namespace: "default".into(),
                name: "etcd-n1".into()
            }
        );
        assert_eq!(store.find_pod(None, "gone").unwrap_err().status(), 404);
    }
}
