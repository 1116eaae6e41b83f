//! The ConfigMaps and Secrets a pod refers to, and the set of them a node holds.
//!
//! In cluster mode the node may read only the objects its bound pods refer to (the
//! Node authorizer checks exactly that), so the kubelet's configmap/secret managers
//! follow one object per reference; [`pod_config_refs`] is the reference walk
//! (volumes, projected sources, `imagePullSecrets`, `env.valueFrom`, `envFrom` of every
//! container kind) and [`ObjectSet`] the current objects, with "not yet known" kept
//! apart from "not found" so a worker can wait for the first answer instead of failing
//! at once.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, EnvFromSource, EnvVar, Pod, Secret, ServiceAccountTokenProjection,
};

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
    // The node may read these too (the Node authorizer's graph has them, as the
    // kubelet's getSecretNames does).
    for r in spec.image_pull_secrets.iter().flatten() {
        add(ObjectKind::Secret, &r.name);
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

/// The token lifetime a projection gets when it names none (the API's default).
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// One service account token a pod's projected volume asks for: a TokenRequest of the
/// pod's service account, for `audience` (empty: the API server's own), bound to the
/// pod (it dies with the pod).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenRef {
    pub namespace: String,
    pub service_account: String,
    pub pod_name: String,
    pub pod_uid: String,
    pub audience: String,
    pub expiration_seconds: i64,
}

impl std::fmt::Display for TokenRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "token of serviceaccount {}/{} for pod {} (audience {:?})",
            self.namespace, self.service_account, self.pod_name, self.audience
        )
    }
}

/// The token `source` of `pod` asks for.
pub fn token_ref(pod: &Pod, source: &ServiceAccountTokenProjection) -> TokenRef {
    let spec = pod.spec.as_ref();
    TokenRef {
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        service_account: spec
            .and_then(|s| s.service_account_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into()),
        pod_name: pod.metadata.name.clone().unwrap_or_default(),
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
        audience: source.audience.clone().unwrap_or_default(),
        expiration_seconds: source
            .expiration_seconds
            .unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
    }
}

/// Every token the projected volumes of `pod` ask for.
pub fn pod_token_refs(pod: &Pod) -> BTreeSet<TokenRef> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .flat_map(|v| v.projected.iter().flat_map(|p| p.sources.iter().flatten()))
        .filter_map(|source| source.service_account_token.as_ref())
        .map(|t| token_ref(pod, t))
        .collect()
}

/// When an issued token is replaced, as the kubelet's token manager: once 80% of its
/// life has passed, and at the latest a day after it was issued.
pub fn token_refresh_at(
    issued: chrono::DateTime<chrono::Utc>,
    expires: chrono::DateTime<chrono::Utc>,
) -> chrono::DateTime<chrono::Utc> {
    let life = (expires - issued).max(chrono::Duration::zero());
    let at_80 = issued + life * 4 / 5;
    at_80.min(issued + chrono::Duration::hours(24))
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
    /// Tokens as last issued (`Missing`: the API server refused to issue one).
    pub tokens: BTreeMap<TokenRef, ObjectState<String>>,
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

    /// The tokens of `refs` not issued or refused yet.
    pub fn pending_tokens<'a>(
        &self,
        refs: impl IntoIterator<Item = &'a TokenRef>,
    ) -> Vec<TokenRef> {
        refs.into_iter()
            .filter(|r| matches!(self.tokens.get(*r), None | Some(ObjectState::Pending)))
            .cloned()
            .collect()
    }

    /// Keeps exactly the tokens of `refs`: new ones pending, dropped ones forgotten.
    pub fn retain_tokens(&mut self, refs: &BTreeSet<TokenRef>) {
        self.tokens.retain(|r, _| refs.contains(r));
        for r in refs {
            self.tokens.entry(r.clone()).or_insert(ObjectState::Pending);
        }
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
    fn answered_for(&self, pod: &Pod) -> bool {
        self.pending(&pod_config_refs(pod)).is_empty()
            && self.pending_tokens(&pod_token_refs(pod)).is_empty()
    }

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

    fn issues_tokens(&self) -> bool {
        true
    }

    fn missing_hint(&self) -> &'static str {
        ""
    }

    fn service_account_token(&self, token: &TokenRef) -> Option<&str> {
        match self.tokens.get(token) {
            Some(ObjectState::Present(t)) => Some(t),
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
            "imagePullSecrets": [{"name": "sec-pull"}, {"name": ""}],
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
            r(ObjectKind::Secret, "sec-pull"),
        ]
        .into();
        assert_eq!(pod_config_refs(&p), want);
        assert!(pod_config_refs(&pod(serde_json::json!({"containers": []}))).is_empty());
    }

    #[test]
    fn a_token_projection_asks_for_the_pods_service_account_with_the_defaults() {
        let mut p = pod(serde_json::json!({
            "serviceAccountName": "builder",
            "volumes": [{"name": "t", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"serviceAccountToken": {"path": "vault", "audience": "vault", "expirationSeconds": 600}}
            ]}}],
            "containers": []
        }));
        p.metadata.uid = Some("u1".into());
        let refs: Vec<TokenRef> = pod_token_refs(&p).into_iter().collect();
        assert_eq!(refs.len(), 2);
        assert_eq!(
            (
                refs[0].service_account.as_str(),
                refs[0].audience.as_str(),
                refs[0].expiration_seconds
            ),
            ("builder", "", 3600)
        );
        assert_eq!(
            (refs[1].audience.as_str(), refs[1].expiration_seconds),
            ("vault", 600)
        );
        assert_eq!(
            (refs[1].pod_name.as_str(), refs[1].pod_uid.as_str()),
            ("p", "u1")
        );
        let mut set = ObjectSet::default();
        set.retain_tokens(&refs.iter().cloned().collect());
        assert_eq!(set.pending_tokens(&refs).len(), 2);
        set.tokens
            .insert(refs[0].clone(), ObjectState::Present("jwt".into()));
        assert_eq!(set.service_account_token(&refs[0]), Some("jwt"));
        assert_eq!(set.pending_tokens(&refs), vec![refs[1].clone()]);
    }

    #[test]
    fn a_token_is_replaced_at_80_percent_of_its_life_or_after_a_day() {
        let t0 = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let hour = chrono::Duration::hours(1);
        assert_eq!(
            token_refresh_at(t0, t0 + hour),
            t0 + chrono::Duration::minutes(48)
        );
        let week = chrono::Duration::days(7);
        assert_eq!(
            token_refresh_at(t0, t0 + week),
            t0 + chrono::Duration::hours(24)
        );
        // Already expired (a clock jump): replaced at once.
        assert_eq!(token_refresh_at(t0, t0 - hour), t0);
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
