//! A container's environment from its `envFrom` and `env`, in the kubelet's order
//! (makeEnvironmentVariables): every `envFrom` source first, then each `env` entry,
//! a later name replacing an earlier one; `$(VAR)` in a `value` refers to what is
//! defined before it. ConfigMaps and Secrets come from a [`ConfigLookup`] (podhost's
//! `--config-dir` store), so this stays pure.

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVarSource, Pod, Secret};

use super::command::expand_env_refs;
use super::downward::{DownwardError, DownwardInputs, FieldScope, field_value, resource_value};

/// Where ConfigMaps and Secrets are looked up by (namespace, name).
pub trait ConfigLookup {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap>;
    /// A Secret with `stringData` already merged into `data`.
    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret>;
    /// A service account token issued for `token` (only the API server issues them:
    /// none without a cluster).
    fn service_account_token(&self, token: &super::config_refs::TokenRef) -> Option<&str> {
        let _ = token;
        None
    }
    /// What a volume's "not found" message adds: how to fix it here. The config dir's
    /// default; the API server's objects add nothing (the kubelet's message as is).
    fn missing_hint(&self) -> &'static str {
        " (add it to the config dir, or set optional: true)"
    }
    /// Whether tokens come from here (an API server's objects), so that a missing
    /// one is "not issued yet" rather than "impossible without a cluster".
    fn issues_tokens(&self) -> bool {
        false
    }
    /// Whether every object and token `pod` names has had its first answer. Until then
    /// a missing one is unknown rather than missing, and nothing about it is reported
    /// (a pod bound a moment ago, or a daemon just restarted, whose watches and token
    /// requests are still under way). A config dir has answered everything.
    fn answered_for(&self, pod: &k8s_openapi::api::core::v1::Pod) -> bool {
        let _ = pod;
        true
    }
}

/// Why a container's environment cannot be built: its `CreateContainerConfigError`,
/// in the kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("configmap \"{name}\" not found")]
    ConfigMapNotFound { name: String },
    #[error("secret \"{name}\" not found")]
    SecretNotFound { name: String },
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKeyNotFound {
        key: String,
        namespace: String,
        name: String,
    },
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKeyNotFound {
        key: String,
        namespace: String,
        name: String,
    },
    /// The service variables cannot be built yet (cluster mode).
    #[error(transparent)]
    Services(#[from] super::service_env::ServiceEnvError),
    /// A fieldRef or resourceFieldRef that cannot be resolved.
    #[error("env {var}: {source}")]
    Downward {
        var: String,
        #[source]
        source: DownwardError,
    },
}

/// Keys of one `envFrom` source skipped because they are not valid variable names:
/// the kubelet's `InvalidEnvironmentVariableNames` warning event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedKeys {
    /// `configMap` or `secret`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    /// Sorted, prefix included.
    pub keys: Vec<String>,
}

impl SkippedKeys {
    /// The kubelet's event message.
    pub fn message(&self) -> String {
        format!(
            "Keys [{}] from the EnvFrom {} {}/{} were skipped since they are considered invalid environment variable names.",
            self.keys.join(", "),
            self.kind,
            self.namespace,
            self.name
        )
    }
}

/// The environment built, in order, and what was skipped on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedEnv {
    pub vars: Vec<(String, String)>,
    pub skipped: Vec<SkippedKeys>,
}

impl ResolvedEnv {
    /// Sets `name`, replacing an earlier value in its place.
    fn set(&mut self, name: String, value: String) {
        match self.vars.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name, value)),
        }
    }
}

/// A valid environment variable name (Kubernetes' IsEnvVarName): `[-._a-zA-Z][-._a-zA-Z0-9]*`.
pub fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// Builds `container`'s environment on top of `base` (the image's, then in cluster mode
/// the service variables, which override it; `$(VAR)` may refer to any of them):
/// `envFrom` sources, then `env`.
pub fn resolve_env(
    base: &[(String, String)],
    pod: &Pod,
    container: &Container,
    objects: &dyn ConfigLookup,
    downward: &DownwardInputs,
) -> Result<ResolvedEnv, EnvError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = ResolvedEnv::default();
    for (k, v) in base {
        out.set(k.clone(), v.clone());
    }
    for source in container.env_from.iter().flatten() {
        let Some(EnvFromPairs { kind, name, pairs }) = env_from_pairs(source, namespace, objects)?
        else {
            continue;
        };
        let prefix = source.prefix.as_deref().unwrap_or_default();
        let mut invalid = Vec::new();
        for (key, value) in pairs {
            let var = format!("{prefix}{key}");
            if is_env_var_name(&var) {
                out.set(var, value);
            } else {
                invalid.push(var);
            }
        }
        if !invalid.is_empty() {
            invalid.sort();
            out.skipped.push(SkippedKeys {
                kind,
                namespace: namespace.to_string(),
                name,
                keys: invalid,
            });
        }
    }
    for var in container.env.iter().flatten() {
        let literal = var.value.as_deref().unwrap_or_default();
        let value = if !literal.is_empty() {
            expand_env_refs(literal, &out.vars)
        } else if let Some(from) = &var.value_from {
            match value_from(
                from, &var.name, namespace, pod, container, objects, downward,
            )? {
                Some(v) => v,
                // An optional reference to something missing leaves the variable unset.
                None => continue,
            }
        } else {
            String::new()
        };
        out.set(var.name.clone(), value);
    }
    Ok(out)
}

/// What one `envFrom` source holds.
struct EnvFromPairs {
    /// `configMap` or `secret`.
    kind: &'static str,
    name: String,
    pairs: Vec<(String, String)>,
}

/// The key/value pairs of one `envFrom` source; `None` when it is optional and missing.
fn env_from_pairs(
    source: &k8s_openapi::api::core::v1::EnvFromSource,
    namespace: &str,
    objects: &dyn ConfigLookup,
) -> Result<Option<EnvFromPairs>, EnvError> {
    if let Some(r) = &source.config_map_ref {
        return match objects.config_map(namespace, &r.name) {
            Some(cm) => Ok(Some(EnvFromPairs {
                kind: "configMap",
                name: r.name.clone(),
                pairs: cm
                    .data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            })),
            None if r.optional == Some(true) => Ok(None),
            None => Err(EnvError::ConfigMapNotFound {
                name: r.name.clone(),
            }),
        };
    }
    if let Some(r) = &source.secret_ref {
        return match objects.secret(namespace, &r.name) {
            Some(s) => Ok(Some(EnvFromPairs {
                kind: "secret",
                name: r.name.clone(),
                pairs: s
                    .data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), secret_text(&v.0)))
                    .collect(),
            })),
            None if r.optional == Some(true) => Ok(None),
            None => Err(EnvError::SecretNotFound {
                name: r.name.clone(),
            }),
        };
    }
    Ok(None)
}

/// A secret's bytes as an env value. Env values are text here; bytes that are not
/// UTF-8 become U+FFFD (the kubelet would pass them through).
fn secret_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One `valueFrom`; `None` when an optional ConfigMap/Secret or key is missing.
fn value_from(
    from: &EnvVarSource,
    var: &str,
    namespace: &str,
    pod: &Pod,
    container: &Container,
    objects: &dyn ConfigLookup,
    downward: &DownwardInputs,
) -> Result<Option<String>, EnvError> {
    let downward_err = |source| EnvError::Downward {
        var: var.to_string(),
        source,
    };
    if let Some(sel) = &from.field_ref {
        return field_value(sel, pod, downward, FieldScope::Env)
            .map(Some)
            .map_err(downward_err);
    }
    if let Some(sel) = &from.resource_field_ref {
        return resource_value(sel, pod, Some(&container.name), downward)
            .map(Some)
            .map_err(downward_err);
    }
    if let Some(r) = &from.config_map_key_ref {
        let optional = r.optional == Some(true);
        let Some(cm) = objects.config_map(namespace, &r.name) else {
            return if optional {
                Ok(None)
            } else {
                Err(EnvError::ConfigMapNotFound {
                    name: r.name.clone(),
                })
            };
        };
        return match cm.data.as_ref().and_then(|d| d.get(&r.key)) {
            Some(v) => Ok(Some(v.clone())),
            None if optional => Ok(None),
            None => Err(EnvError::ConfigMapKeyNotFound {
                key: r.key.clone(),
                namespace: namespace.to_string(),
                name: r.name.clone(),
            }),
        };
    }
    if let Some(r) = &from.secret_key_ref {
        let optional = r.optional == Some(true);
        let Some(s) = objects.secret(namespace, &r.name) else {
            return if optional {
                Ok(None)
            } else {
                Err(EnvError::SecretNotFound {
                    name: r.name.clone(),
                })
            };
        };
        return match s.data.as_ref().and_then(|d| d.get(&r.key)) {
            Some(v) => Ok(Some(secret_text(&v.0))),
            None if optional => Ok(None),
            None => Err(EnvError::SecretKeyNotFound {
                key: r.key.clone(),
                namespace: namespace.to_string(),
                name: r.name.clone(),
            }),
        };
    }
    Ok(Some(String::new()))
}

#[cfg(test)]
mod tests;
