//! The ConfigMaps and Secrets a pod refers to, and the set of them a node holds.
//!
//! In cluster mode the node may read only the objects its bound pods refer to (the
//! Node authorizer checks exactly that), so the kubelet's configmap/secret managers
//! follow one object per reference; [`pod_config_refs`] is the reference walk
//! (volumes, projected sources, `env.valueFrom`, `envFrom` of every container kind) and
//! [`ObjectSet`] the current objects, with "not yet known" kept apart from "not found"
//! so a worker can wait for the first answer instead of failing at once.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvFromSource, EnvVar, Pod, Secret};

use super::env::ConfigLookup;

/// Which kind of object a reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    ConfigMap,
    Secret,
}

impl ObjectKind {
    /// The kubelet's lower-case word for it in messages (`configmap "x" not found`).
    pub fn word(self) -> &'static str {
        match self {
            ObjectKind::ConfigMap => "configmap",
            ObjectKind::Secret => "secret",
        }
    }
}

/// One referenced object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind.word(), self.namespace, self.name)
    }
}

/// Every ConfigMap and Secret `pod` refers to, optional ones included (an optional
/// object that exists is still used). Names that are empty are left out: validation
/// refuses them, and there is nothing to fetch.
pub fn pod_config_refs(pod: &Pod) -> BTreeSet<ObjectRef> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = BTreeSet::new();
    let mut add = |kind: ObjectKind, name: &str| {
        if !name.is_empty() {
            out.insert(ObjectRef {
                kind,
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        }
    };
    let Some(spec) = &pod.spec else {
        return BTreeSet::new();
    };
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = &v.config_map {
            add(ObjectKind::ConfigMap, &cm.name);
        }
        if let Some(s) = &v.secret {
            add(ObjectKind::Secret, s.secret_name.as_deref().unwrap_or(""));
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                add(ObjectKind::ConfigMap, &cm.name);
            }
            if let Some(s) = &source.secret {
                add(ObjectKind::Secret, &s.name);
            }
        }
    }
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|e| (e.env.as_ref(), e.env_from.as_ref()));
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c: &Container| (c.env.as_ref(), c.env_from.as_ref()));
    for (env, env_from) in containers.chain(ephemeral) {
        env_refs(env, env_from, &mut add);
    }
    out
}

fn env_refs(
    env: Option<&Vec<EnvVar>>,
    env_from: Option<&Vec<EnvFromSource>>,
    add: &mut impl FnMut(ObjectKind, &str),
) {
    for from in env_from.into_iter().flatten() {
        if let Some(cm) = &from.config_map_ref {
            add(ObjectKind::ConfigMap, &cm.name);
        }
        if let Some(s) = &from.secret_ref {
            add(ObjectKind::Secret, &s.name);
        }
    }
    for source in env
        .into_iter()
        .flatten()
        .filter_map(|e| e.value_from.as_ref())
    {
        if let Some(k) = &source.config_map_key_ref {
            add(ObjectKind::ConfigMap, &k.name);
        }
        if let Some(k) = &source.secret_key_ref {
            add(ObjectKind::Secret, &k.name);
        }
    }
}

/// What the node knows of one referenced object.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectState<T> {
    /// Referenced, but its first list has not answered yet (or was refused).
    Pending,
    /// Listed: there is no such object.
    Missing,
    Present(T),
}

/// The referenced ConfigMaps and Secrets as last seen: what a worker of an API pod
/// looks its env and volumes up in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectSet {
    pub config_maps: BTreeMap<(String, String), ObjectState<ConfigMap>>,
    pub secrets: BTreeMap<(String, String), ObjectState<Secret>>,
}

impl ObjectSet {
    /// The references of `refs` not answered yet.
    pub fn pending<'a>(&self, refs: impl IntoIterator<Item = &'a ObjectRef>) -> Vec<ObjectRef> {
        refs.into_iter()
            .filter(|r| {
                let key = (r.namespace.clone(), r.name.clone());
                match r.kind {
                    ObjectKind::ConfigMap => !matches!(
                        self.config_maps.get(&key),
                        Some(ObjectState::Missing | ObjectState::Present(_))
                    ),
                    ObjectKind::Secret => !matches!(
                        self.secrets.get(&key),
                        Some(ObjectState::Missing | ObjectState::Present(_))
                    ),
                }
            })
            .cloned()
            .collect()
    }

    /// Keeps exactly the objects of `refs`: new ones pending, dropped ones forgotten.
    pub fn retain_refs(&mut self, refs: &BTreeSet<ObjectRef>) {
        let keys = |kind: ObjectKind| -> BTreeSet<(String, String)> {
            refs.iter()
                .filter(|r| r.kind == kind)
                .map(|r| (r.namespace.clone(), r.name.clone()))
                .collect()
        };
        let (cms, secrets) = (keys(ObjectKind::ConfigMap), keys(ObjectKind::Secret));
        self.config_maps.retain(|k, _| cms.contains(k));
        self.secrets.retain(|k, _| secrets.contains(k));
        for k in cms {
            self.config_maps.entry(k).or_insert(ObjectState::Pending);
        }
        for k in secrets {
            self.secrets.entry(k).or_insert(ObjectState::Pending);
        }
    }
}

impl ConfigLookup for ObjectSet {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        match self
            .config_maps
            .get(&(namespace.to_string(), name.to_string()))
        {
            Some(ObjectState::Present(cm)) => Some(cm),
            _ => None,
        }
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        match self.secrets.get(&(namespace.to_string(), name.to_string())) {
            Some(ObjectState::Present(s)) => Some(s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "team"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn r(kind: ObjectKind, name: &str) -> ObjectRef {
        ObjectRef {
            kind,
            namespace: "team".into(),
            name: name.into(),
        }
    }

    #[test]
    fn every_kind_of_reference_is_found_once() {
        let p = pod(serde_json::json!({
            "volumes": [
                {"name": "a", "configMap": {"name": "cm-vol"}},
                {"name": "b", "secret": {"secretName": "sec-vol"}},
                {"name": "c", "projected": {"sources": [
                    {"configMap": {"name": "cm-proj"}},
                    {"secret": {"name": "sec-proj"}},
                    {"serviceAccountToken": {"path": "token"}}
                ]}},
                {"name": "d", "emptyDir": {}}
            ],
            "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "cm-init"}}]}],
            "containers": [{"name": "c", "image": "x",
                "envFrom": [{"secretRef": {"name": "sec-from", "optional": true}}],
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-vol", "key": "k"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "sec-key", "key": "k"}}},
                    {"name": "C", "value": "plain"}
                ]}],
            "ephemeralContainers": [{"name": "e", "image": "x",
                "env": [{"name": "D", "valueFrom": {"secretKeyRef": {"name": "sec-eph", "key": "k"}}}]}]
        }));
        let want: BTreeSet<ObjectRef> = [
            r(ObjectKind::ConfigMap, "cm-vol"),
            r(ObjectKind::ConfigMap, "cm-proj"),
            r(ObjectKind::ConfigMap, "cm-init"),
            r(ObjectKind::Secret, "sec-vol"),
            r(ObjectKind::Secret, "sec-proj"),
            r(ObjectKind::Secret, "sec-from"),
            r(ObjectKind::Secret, "sec-key"),
            r(ObjectKind::Secret, "sec-eph"),
        ]
        .into();
        assert_eq!(pod_config_refs(&p), want);
        assert!(pod_config_refs(&pod(serde_json::json!({"containers": []}))).is_empty());
    }

    #[test]
    fn pending_is_neither_missing_nor_present_and_lookups_see_only_present() {
        let refs: BTreeSet<ObjectRef> = [
            r(ObjectKind::ConfigMap, "a"),
            r(ObjectKind::Secret, "b"),
            r(ObjectKind::Secret, "c"),
        ]
        .into();
        let mut set = ObjectSet::default();
        set.retain_refs(&refs);
        assert_eq!(set.pending(&refs).len(), 3);
        set.config_maps.insert(
            ("team".into(), "a".into()),
            ObjectState::Present(ConfigMap::default()),
        );
        set.secrets
            .insert(("team".into(), "b".into()), ObjectState::Missing);
        assert_eq!(set.pending(&refs), vec![r(ObjectKind::Secret, "c")]);
        assert!(set.config_map("team", "a").is_some());
        assert!(set.secret("team", "b").is_none());
        // A reference dropped is forgotten; the ones kept keep their state.
        set.retain_refs(&[r(ObjectKind::ConfigMap, "a")].into());
        assert!(set.secrets.is_empty());
        assert!(set.config_map("team", "a").is_some());
    }
}
