//! A pod's `imagePullSecrets` as the kubelet uses them (`getPullSecretsForPod`, then
//! `MakeDockerKeyring`): each named Secret of type `kubernetes.io/dockerconfigjson`
//! (key `.dockerconfigjson`) or `kubernetes.io/dockercfg` (key `.dockercfg`) adds its
//! logins to one [`DockerKeyring`], whose logins for an image are tried before the
//! node's. A named Secret that cannot be had is the kubelet's
//! `FailedToRetrieveImagePullSecret` warning and the pull goes on without it; one of
//! another type, which the kubelet passes over in silence, is a warning here too; one
//! whose document is malformed fails the pull, as the kubelet's keyring error does.

mod docker_config;
mod glob;
mod keyring;

pub use docker_config::{DockerConfigError, DockerLogin, parse_config_json, parse_dockercfg};
pub use keyring::{DockerKeyring, SourcedLogin};

use k8s_openapi::api::core::v1::{Pod, Secret};

use super::env::ConfigLookup;

/// The type of a `.dockerconfigjson` Secret.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// Its key.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The type of a legacy `.dockercfg` Secret.
pub const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";
/// Its key.
pub const DOCKERCFG_KEY: &str = ".dockercfg";

/// The event reason of named Secrets that cannot be had (the kubelet's).
pub const FAILED_TO_RETRIEVE_REASON: &str = "FailedToRetrieveImagePullSecret";
/// The event reason of a Secret that is had but is not used (podhost's: the kubelet
/// says nothing).
pub const INVALID_REASON: &str = "InvalidImagePullSecret";

/// The names in the pod's `imagePullSecrets`, in order; empty ones left out, as the
/// kubelet leaves them out (API validation lets them through).
pub fn pull_secret_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.image_pull_secrets.iter().flatten())
        .map(|r| r.name.clone())
        .filter(|n| !n.is_empty())
        .collect()
}

/// A named Secret that is had but not (wholly) used: a warning on the pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullSecretWarning {
    /// Not of an image pull Secret's type, or without its key.
    #[error(
        "Secret \"{name}\" in imagePullSecrets is not used: {reason}; an image pull secret \
         is of type {DOCKER_CONFIG_JSON_TYPE} with key {DOCKER_CONFIG_JSON_KEY}, or of type \
         {DOCKERCFG_TYPE} with key {DOCKERCFG_KEY}"
    )]
    NotAPullSecret { name: String, reason: String },
    /// A registry location of its document that is no URL.
    #[error(
        "Secret \"{name}\" in imagePullSecrets: its entry for \"{location}\" is not used: \
         that is not a registry host[:port][/path]"
    )]
    BadLocation { name: String, location: String },
}

/// A named Secret whose document cannot be read: the pull fails, as the kubelet's does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot read image pull secret \"{namespace}/{name}\": {key} of a {secret_type} Secret: \
     {source}; fix the Secret or remove it from imagePullSecrets"
)]
pub struct PullSecretError {
    pub namespace: String,
    pub name: String,
    pub secret_type: &'static str,
    pub key: &'static str,
    #[source]
    pub source: DockerConfigError,
}

/// What a pod's `imagePullSecrets` give for its pulls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPullSecrets {
    /// The logins of every usable Secret; `Err` when one's document is malformed.
    pub keyring: Result<DockerKeyring, PullSecretError>,
    /// Named Secrets not found (or not known yet), in order.
    pub missing: Vec<String>,
    /// What of the found ones is not used.
    pub warnings: Vec<PullSecretWarning>,
}

impl PodPullSecrets {
    /// The kubelet's warning about `missing`, if any.
    pub fn missing_message(&self) -> Option<String> {
        (!self.missing.is_empty()).then(|| {
            format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image \
                 may not succeed.",
                self.missing.join(", ")
            )
        })
    }
}

/// The pod's pull secrets, looked up in `objects` (the pod's namespace).
pub fn pod_pull_secrets(pod: &Pod, objects: &dyn ConfigLookup) -> PodPullSecrets {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut keyring = Ok(DockerKeyring::default());
    let mut missing = Vec::new();
    let mut warnings = Vec::new();
    for name in pull_secret_names(pod) {
        let Some(secret) = objects.secret(namespace, &name) else {
            missing.push(name);
            continue;
        };
        let logins = match read_secret(secret) {
            SecretRead::Logins(logins) => logins,
            SecretRead::NotAPullSecret(reason) => {
                warnings.push(PullSecretWarning::NotAPullSecret { name, reason });
                continue;
            }
            SecretRead::Malformed {
                secret_type,
                key,
                source,
            } => {
                // The first malformed one fails the pull; the others are still checked
                // for what they warn of.
                if keyring.is_ok() {
                    keyring = Err(PullSecretError {
                        namespace: namespace.to_string(),
                        name,
                        secret_type,
                        key,
                        source,
                    });
                }
                continue;
            }
        };
        if let Ok(k) = &mut keyring {
            let source = format!("secret \"{namespace}/{name}\"");
            for location in k.add(&source, logins) {
                warnings.push(PullSecretWarning::BadLocation {
                    name: name.clone(),
                    location,
                });
            }
        }
    }
    PodPullSecrets {
        keyring,
        missing,
        warnings,
    }
}

/// What one Secret gives.
enum SecretRead {
    Logins(Vec<DockerLogin>),
    /// Not an image pull Secret: why.
    NotAPullSecret(String),
    Malformed {
        secret_type: &'static str,
        key: &'static str,
        source: DockerConfigError,
    },
}

fn read_secret(secret: &Secret) -> SecretRead {
    let found_type = secret.type_.as_deref().unwrap_or("Opaque");
    type Parse = fn(&[u8]) -> Result<Vec<DockerLogin>, DockerConfigError>;
    let (secret_type, key, parse): (&'static str, &'static str, Parse) = match found_type {
        DOCKER_CONFIG_JSON_TYPE => (
            DOCKER_CONFIG_JSON_TYPE,
            DOCKER_CONFIG_JSON_KEY,
            parse_config_json,
        ),
        DOCKERCFG_TYPE => (DOCKERCFG_TYPE, DOCKERCFG_KEY, parse_dockercfg),
        other => return SecretRead::NotAPullSecret(format!("it is of type \"{other}\"")),
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    if data.is_empty() {
        return SecretRead::NotAPullSecret(format!("it has no {key} (or it is empty)"));
    }
    match parse(data) {
        Ok(logins) => SecretRead::Logins(logins),
        Err(source) => SecretRead::Malformed {
            secret_type,
            key,
            source,
        },
    }
}

#[cfg(test)]
mod tests;
