use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

use super::*;

/// Secrets by name, all in namespace "team".
struct Objects(Vec<Secret>);

impl ConfigLookup for Objects {
    fn config_map(&self, _: &str, _: &str) -> Option<&ConfigMap> {
        None
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        (namespace == "team")
            .then(|| {
                self.0
                    .iter()
                    .find(|s| s.metadata.name.as_deref() == Some(name))
            })
            .flatten()
    }
}

fn secret(name: &str, type_: &str, key: &str, doc: &str) -> Secret {
    Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("team".into()),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some(BTreeMap::from([(
            key.to_string(),
            ByteString(doc.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

fn pod(names: &[&str]) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "team"},
        "spec": {
            "containers": [],
            "imagePullSecrets": names.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>()
        }
    }))
    .unwrap()
}

fn logins(got: &PodPullSecrets, repository: &str) -> Vec<(String, String)> {
    got.keyring
        .as_ref()
        .unwrap()
        .lookup(repository)
        .iter()
        .map(|l| (l.username.clone(), l.source.clone()))
        .collect()
}

// base64("alice:s3cret") and base64("bob:hunter2")
const ALICE: &str = "YWxpY2U6czNjcmV0";
const BOB: &str = "Ym9iOmh1bnRlcjI=";

#[test]
fn both_secret_types_give_logins_in_the_pods_order() {
    let objects = Objects(vec![
        secret(
            "json",
            DOCKER_CONFIG_JSON_TYPE,
            DOCKER_CONFIG_JSON_KEY,
            &format!(r#"{{"auths":{{"127.0.0.1:5000":{{"auth":"{ALICE}"}}}}}}"#),
        ),
        secret(
            "legacy",
            DOCKERCFG_TYPE,
            DOCKERCFG_KEY,
            &format!(r#"{{"127.0.0.1:5000":{{"auth":"{BOB}","email":"b@x"}}}}"#),
        ),
    ]);
    let got = pod_pull_secrets(&pod(&["legacy", "json"]), &objects);
    assert_eq!(got.missing, Vec::<String>::new());
    assert_eq!(got.warnings, []);
    assert_eq!(
        logins(&got, "127.0.0.1:5000/busybox"),
        [
            ("bob".to_string(), "secret \"team/legacy\"".to_string()),
            ("alice".to_string(), "secret \"team/json\"".to_string()),
        ]
    );
    let first = got
        .keyring
        .as_ref()
        .unwrap()
        .lookup("127.0.0.1:5000/busybox")[0]
        .clone();
    assert_eq!(first.password, "hunter2");
    assert!(logins(&got, "127.0.0.1:5001/busybox").is_empty());
}

#[test]
fn missing_and_other_secrets_are_warnings_and_the_rest_is_used() {
    let objects = Objects(vec![
        secret("opaque", "Opaque", DOCKER_CONFIG_JSON_KEY, "{}"),
        secret("empty", DOCKER_CONFIG_JSON_TYPE, "other", "{}"),
        secret(
            "good",
            DOCKER_CONFIG_JSON_TYPE,
            DOCKER_CONFIG_JSON_KEY,
            &format!(r#"{{"auths":{{"r.example.com":{{"auth":"{ALICE}"}},"bad host":{{}}}}}}"#),
        ),
    ]);
    let got = pod_pull_secrets(
        &pod(&["gone", "opaque", "", "empty", "good", "also-gone"]),
        &objects,
    );
    assert_eq!(got.missing, ["gone", "also-gone"]);
    assert_eq!(
        got.missing_message().unwrap(),
        "Unable to retrieve some image pull secrets (gone, also-gone); attempting to pull the \
         image may not succeed."
    );
    assert_eq!(
        got.warnings,
        [
            PullSecretWarning::NotAPullSecret {
                name: "opaque".into(),
                reason: "it is of type \"Opaque\"".into()
            },
            PullSecretWarning::NotAPullSecret {
                name: "empty".into(),
                reason: "it has no .dockerconfigjson (or it is empty)".into()
            },
            PullSecretWarning::BadLocation {
                name: "good".into(),
                location: "bad host".into()
            },
        ]
    );
    assert!(
        got.warnings[0].to_string().starts_with(
            "Secret \"opaque\" in imagePullSecrets is not used: it is of type \"Opaque\"; an \
             image pull secret is of type kubernetes.io/dockerconfigjson with key \
             .dockerconfigjson"
        ),
        "{}",
        got.warnings[0]
    );
    assert_eq!(logins(&got, "r.example.com/app").len(), 1);
    assert_eq!(
        pod_pull_secrets(&pod(&[]), &objects).missing_message(),
        None
    );
}

#[test]
fn a_malformed_document_fails_the_pull_naming_the_secret() {
    let objects = Objects(vec![
        secret("broken", DOCKERCFG_TYPE, DOCKERCFG_KEY, "{not json"),
        secret("opaque", "Opaque", "x", "{}"),
    ]);
    let got = pod_pull_secrets(&pod(&["broken", "opaque", "gone"]), &objects);
    let err = got.keyring.clone().unwrap_err();
    assert_eq!((err.name.as_str(), err.key), ("broken", DOCKERCFG_KEY));
    assert!(
        err.to_string().starts_with(
            "cannot read image pull secret \"team/broken\": .dockercfg of a \
             kubernetes.io/dockercfg Secret: it is not JSON: "
        ),
        "{err}"
    );
    // What the others warn of is still said.
    assert_eq!(got.missing, ["gone"]);
    assert_eq!(got.warnings.len(), 1);
}

#[test]
fn names_skip_empty_entries_and_a_pod_without_spec_has_none() {
    assert_eq!(pull_secret_names(&pod(&["a", "", "b"])), ["a", "b"]);
    assert!(pull_secret_names(&Pod::default()).is_empty());
}
