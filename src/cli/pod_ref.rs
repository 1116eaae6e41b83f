//! A pod as the command line names it: `NAME`, `NAMESPACE/NAME` or kubectl's
//! `pod/NAME`, with `-n NAMESPACE`. Without a namespace, the daemon looks the name up
//! in every namespace and refuses one that several have, listing them.

use k8s_openapi::api::core::v1::Pod;

use crate::api::percent_encode;

/// The namespace a list (`get`, `top`) shows when neither `-n` nor `-A` is given.
pub const DEFAULT_NAMESPACE: &str = "default";

/// `-n NAMESPACE`, on every command that names pods.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct NamespaceFlag {
    /// The pods' namespace. Lists show `default` without it; a pod named without it is
    /// looked up in every namespace (one that several have is an error listing them).
    #[arg(short = 'n', long = "namespace", value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodRefError {
    #[error("{arg:?} is not a pod name: use NAME, NAMESPACE/NAME or pod/NAME")]
    Malformed { arg: String },
    #[error("{arg:?} is not a pod: podhost runs pods only (give NAME, NAMESPACE/NAME or pod/NAME)")]
    NotAPod { arg: String },
    #[error("{arg:?} is in namespace {named:?} but -n says {flag:?}: give one of them")]
    NamespaceConflict {
        arg: String,
        named: String,
        flag: String,
    },
}

/// kubectl's names of the other kinds a TYPE/NAME argument may give: refused as not
/// pods rather than taken for a namespace.
const OTHER_KINDS: [&str; 30] = [
    "deployment",
    "deployments",
    "deploy",
    "service",
    "services",
    "svc",
    "replicaset",
    "replicasets",
    "rs",
    "statefulset",
    "statefulsets",
    "sts",
    "daemonset",
    "daemonsets",
    "ds",
    "job",
    "jobs",
    "cronjob",
    "cronjobs",
    "cj",
    "node",
    "nodes",
    "no",
    "configmap",
    "configmaps",
    "cm",
    "secret",
    "secrets",
    "replicationcontroller",
    "rc",
];

/// A pod named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// `None`: whichever one namespace has a pod of that name.
    pub namespace: Option<String>,
    pub name: String,
}

impl PodRef {
    pub fn parse(arg: &str, flag: &NamespaceFlag) -> Result<PodRef, PodRefError> {
        let malformed = || PodRefError::Malformed {
            arg: arg.to_string(),
        };
        let (named_namespace, name) = match arg.split_once('/') {
            Some(("pod" | "pods" | "po", name)) => (None, name),
            Some((kind, _)) if OTHER_KINDS.contains(&kind) => {
                return Err(PodRefError::NotAPod {
                    arg: arg.to_string(),
                });
            }
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, arg),
        };
        if name.is_empty() || name.contains('/') || named_namespace == Some("") {
            return Err(malformed());
        }
        let namespace = match (named_namespace, flag.namespace.as_deref()) {
            (Some(named), Some(flag)) if named != flag => {
                return Err(PodRefError::NamespaceConflict {
                    arg: arg.to_string(),
                    named: named.to_string(),
                    flag: flag.to_string(),
                });
            }
            (named, flag) => named.or(flag).map(str::to_string),
        };
        Ok(PodRef {
            namespace,
            name: name.to_string(),
        })
    }

    /// The pod exactly as the daemon answered it (its namespace known).
    pub fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: Some(
                pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| DEFAULT_NAMESPACE.into()),
            ),
            name: pod.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// The pod's API path: `/namespaces/NS/pods/NAME`, or `/pods/NAME` for the daemon
    /// to find in any one namespace.
    pub fn path(&self) -> String {
        match &self.namespace {
            Some(ns) => format!(
                "/namespaces/{}/pods/{}",
                percent_encode(ns),
                percent_encode(&self.name)
            ),
            None => format!("/pods/{}", percent_encode(&self.name)),
        }
    }

    /// `NAMESPACE/NAME`, or the name alone when the namespace is not known.
    pub fn display(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// The pods' list path for `-n`/`-A`: one namespace (`default` without `-n`) or all.
pub fn pods_path(flag: &NamespaceFlag, all_namespaces: bool) -> String {
    if all_namespaces {
        "/pods".into()
    } else {
        format!(
            "/namespaces/{}/pods",
            percent_encode(flag.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(n: Option<&str>) -> NamespaceFlag {
        NamespaceFlag {
            namespace: n.map(str::to_string),
        }
    }

    #[test]
    fn names_namespaced_names_and_kubectls_type_prefix() {
        let cases = [
            ("web", None, None, "/pods/web"),
            (
                "web",
                Some("team-a"),
                Some("team-a"),
                "/namespaces/team-a/pods/web",
            ),
            (
                "team-a/web",
                None,
                Some("team-a"),
                "/namespaces/team-a/pods/web",
            ),
            (
                "team-a/web",
                Some("team-a"),
                Some("team-a"),
                "/namespaces/team-a/pods/web",
            ),
            ("pod/web", None, None, "/pods/web"),
            ("po/web", Some("b"), Some("b"), "/namespaces/b/pods/web"),
        ];
        for (arg, flag, want_ns, path) in cases {
            let r = PodRef::parse(arg, &ns(flag)).unwrap();
            assert_eq!(r.namespace.as_deref(), want_ns, "{arg}");
            assert_eq!(r.name, "web");
            assert_eq!(r.path(), path);
        }
    }

    #[test]
    fn contradictions_and_malformed_names_are_errors() {
        assert_eq!(
            PodRef::parse("team-a/web", &ns(Some("team-b")))
                .unwrap_err()
                .to_string(),
            "\"team-a/web\" is in namespace \"team-a\" but -n says \"team-b\": give one of them"
        );
        assert!(matches!(
            PodRef::parse("deployment/web", &ns(None)),
            Err(PodRefError::NotAPod { .. })
        ));
        for bad in ["", "a/", "/web", "a/b/c", "pod/"] {
            assert!(
                matches!(
                    PodRef::parse(bad, &ns(None)),
                    Err(PodRefError::Malformed { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn lists_default_to_the_default_namespace() {
        assert_eq!(pods_path(&ns(None), false), "/namespaces/default/pods");
        assert_eq!(
            pods_path(&ns(Some("kube-system")), false),
            "/namespaces/kube-system/pods"
        );
        assert_eq!(pods_path(&ns(Some("kube-system")), true), "/pods");
    }
}
