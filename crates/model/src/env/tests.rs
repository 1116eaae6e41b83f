use std::collections::BTreeMap;

use super::*;
use k8s_openapi::ByteString;

#[derive(Default)]
struct Objects {
    config_maps: BTreeMap<(String, String), ConfigMap>,
    secrets: BTreeMap<(String, String), Secret>,
}

impl ConfigLookup for Objects {
    fn config_map(&self, namespace: &str, name: &str) -> Option<&ConfigMap> {
        self.config_maps.get(&(namespace.into(), name.into()))
    }
    fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        self.secrets.get(&(namespace.into(), name.into()))
    }
}

fn objects() -> Objects {
    let mut o = Objects::default();
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "app", "namespace": "default"},
        "data": {"MODE": "prod", "LEVEL": "3", "1bad": "x", "has space": "y"}
    }))
    .unwrap();
    o.config_maps.insert(("default".into(), "app".into()), cm);
    let mut data = BTreeMap::new();
    data.insert("PASSWORD".to_string(), ByteString(b"s3cret".to_vec()));
    let secret = Secret {
        data: Some(data),
        ..Default::default()
    };
    o.secrets.insert(("default".into(), "db".into()), secret);
    o
}

fn container(yaml: &str) -> Container {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"memory": "64Mi"}}}]}
    }))
    .unwrap()
}

fn resolve(yaml: &str) -> Result<ResolvedEnv, EnvError> {
    let base = vec![
        ("PATH".to_string(), "/bin".to_string()),
        ("MODE".to_string(), "image".to_string()),
    ];
    resolve_env(
        &base,
        &pod(),
        &container(yaml),
        &objects(),
        &DownwardInputs::default(),
    )
}

fn get<'a>(env: &'a ResolvedEnv, k: &str) -> Option<&'a str> {
    env.vars
        .iter()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.as_str())
}

#[test]
fn env_from_first_then_env_later_wins_and_expands() {
    let env = resolve(
        "name: main
envFrom:
- configMapRef: {name: app}
- secretRef: {name: db}
  prefix: DB_
env:
- name: LEVEL
  value: override-$(MODE)
- name: URL
  value: postgres://u:$(DB_PASSWORD)@h
",
    )
    .unwrap();
    assert_eq!(
        get(&env, "MODE"),
        Some("prod"),
        "envFrom replaces the image's value"
    );
    assert_eq!(get(&env, "LEVEL"), Some("override-prod"));
    assert_eq!(get(&env, "DB_PASSWORD"), Some("s3cret"));
    assert_eq!(get(&env, "URL"), Some("postgres://u:s3cret@h"));
    assert_eq!(env.vars[0].0, "PATH", "image variables keep their place");
}

#[test]
fn invalid_keys_are_skipped_with_the_kubelets_message() {
    let env = resolve("name: main\nenvFrom:\n- configMapRef: {name: app}\n").unwrap();
    assert_eq!(get(&env, "1bad"), None);
    assert_eq!(env.skipped.len(), 1);
    assert_eq!(
        env.skipped[0].message(),
        "Keys [1bad, has space] from the EnvFrom configMap default/app were skipped since they are considered invalid environment variable names."
    );
    // A prefix can make a key valid.
    let env = resolve("name: main\nenvFrom:\n- configMapRef: {name: app}\n  prefix: P_\n").unwrap();
    assert_eq!(get(&env, "P_1bad"), Some("x"));
}

#[test]
fn value_from_keys_fields_and_resources() {
    let env = resolve(
        "name: main
env:
- name: M
  valueFrom: {configMapKeyRef: {name: app, key: MODE}}
- name: S
  valueFrom: {secretKeyRef: {name: db, key: PASSWORD}}
- name: POD
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: MEM
  valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}
- name: EMPTY
",
    )
    .unwrap();
    assert_eq!(get(&env, "M"), Some("prod"));
    assert_eq!(get(&env, "S"), Some("s3cret"));
    assert_eq!(get(&env, "POD"), Some("p"));
    assert_eq!(get(&env, "MEM"), Some("64"));
    assert_eq!(get(&env, "EMPTY"), Some(""));
}

#[test]
fn missing_references_fail_in_the_kubelets_words_unless_optional() {
    let cases = [
        (
            "envFrom:\n- configMapRef: {name: nope}\n",
            "configmap \"nope\" not found",
        ),
        (
            "envFrom:\n- secretRef: {name: nope}\n",
            "secret \"nope\" not found",
        ),
        (
            "env:\n- name: X\n  valueFrom: {configMapKeyRef: {name: app, key: y}}\n",
            "couldn't find key y in ConfigMap default/app",
        ),
        (
            "env:\n- name: X\n  valueFrom: {secretKeyRef: {name: db, key: y}}\n",
            "couldn't find key y in Secret default/db",
        ),
        (
            "env:\n- name: X\n  valueFrom: {secretKeyRef: {name: nope, key: y}}\n",
            "secret \"nope\" not found",
        ),
        (
            "env:\n- name: X\n  valueFrom: {fieldRef: {fieldPath: spec.bogus}}\n",
            "env X: unsupported fieldPath: spec.bogus",
        ),
    ];
    for (body, want) in cases {
        let err = resolve(&format!("name: main\n{body}")).unwrap_err();
        assert_eq!(err.to_string(), want, "{body}");
    }
    let env = resolve(
        "name: main
envFrom:
- configMapRef: {name: nope, optional: true}
env:
- name: A
  valueFrom: {configMapKeyRef: {name: app, key: y, optional: true}}
- name: B
  valueFrom: {secretKeyRef: {name: nope, key: y, optional: true}}
",
    )
    .unwrap();
    assert_eq!(
        get(&env, "A"),
        None,
        "an optional miss leaves the variable unset"
    );
    assert_eq!(get(&env, "B"), None);
}

#[test]
fn env_var_names() {
    for ok in ["A", "_a", "a.b-c", "-x", "X1"] {
        assert!(is_env_var_name(ok), "{ok}");
    }
    for bad in ["", "1A", "a b", "a=b", "é"] {
        assert!(!is_env_var_name(bad), "{bad}");
    }
}
