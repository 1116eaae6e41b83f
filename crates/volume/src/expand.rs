//! `subPathExpr`: `$(VAR)` expanded from the container's environment, as the kubelet's
//! `ExpandContainerVolumeMounts` does. Pure.

use k8s_openapi::api::core::v1::{Container, Pod};

use podhost_model::command::expand_env_refs;

/// The variables a `subPathExpr` may use: the container's env `value`s (each expanded
/// from the ones before it) and the downward-API `fieldRef`s known from the spec
/// (metadata.name/namespace/uid, labels['k'], annotations['k'], spec.nodeName,
/// spec.serviceAccountName). Other sources (configMap/secret keys, resourceFieldRef,
/// status IPs) are left out: a reference to them counts as missing.
// wired at merge: CONTENT's model::downward resolves fieldRefs for env; use it here then.
pub fn subpath_env(pod: &Pod, c: &Container) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for e in c.env.iter().flatten() {
        let value = if let Some(v) = &e.value {
            Some(expand_env_refs(v, &env))
        } else {
            e.value_from
                .as_ref()
                .and_then(|f| f.field_ref.as_ref())
                .and_then(|f| field_ref(pod, &f.field_path))
        };
        if let Some(value) = value {
            env.retain(|(k, _)| *k != e.name);
            env.push((e.name.clone(), value));
        }
    }
    env
}

fn field_ref(pod: &Pod, path: &str) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let keyed = |prefix: &str| {
        path.strip_prefix(prefix)?
            .strip_suffix("']")
            .map(str::to_string)
    };
    match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => Some(meta.namespace.clone().unwrap_or_else(|| "default".into())),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        _ => {
            if let Some(k) = keyed("metadata.labels['") {
                meta.labels.as_ref()?.get(&k).cloned()
            } else if let Some(k) = keyed("metadata.annotations['") {
                meta.annotations.as_ref()?.get(&k).cloned()
            } else {
                None
            }
        }
    }
}

/// The names `$(NAME)` refers to in `expr` (`$$` escapes a `$`).
fn references(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            out.push(&inner[..end]);
            rest = &inner[end + 1..];
        } else {
            rest = after;
        }
    }
    out
}

/// Expands `expr`; a variable that is undefined or empty is an error listing every
/// such name (the kubelet's "missing value for …": the container does not start).
pub fn expand_sub_path_expr(expr: &str, env: &[(String, String)]) -> Result<String, Vec<String>> {
    let mut missing: Vec<String> = references(expr)
        .into_iter()
        .filter(|name| {
            env.iter()
                .rev()
                .find(|(k, _)| k == name)
                .is_none_or(|(_, v)| v.is_empty())
        })
        .map(str::to_string)
        .collect();
    missing.sort();
    missing.dedup();
    if missing.is_empty() {
        Ok(expand_env_refs(expr, env))
    } else {
        Err(missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_known_and_escapes() {
        let e = env(&[("POD", "web-1"), ("NS", "default")]);
        assert_eq!(
            expand_sub_path_expr("$(NS)/$(POD)", &e).unwrap(),
            "default/web-1"
        );
        assert_eq!(expand_sub_path_expr("a$$(POD)", &e).unwrap(), "a$(POD)");
        assert_eq!(expand_sub_path_expr("plain", &e).unwrap(), "plain");
    }

    #[test]
    fn missing_or_empty_is_an_error_naming_them() {
        let e = env(&[("EMPTY", "")]);
        assert_eq!(
            expand_sub_path_expr("$(X)/$(EMPTY)/$(X)", &e).unwrap_err(),
            vec!["EMPTY".to_string(), "X".to_string()]
        );
    }

    #[test]
    fn env_values_and_field_refs() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p-node", "uid": "u1", "labels": {"app": "db"}},
            "spec": {"nodeName": "node", "containers": [{
                "name": "c",
                "env": [
                    {"name": "A", "value": "x"},
                    {"name": "B", "value": "$(A)-y"},
                    {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
                ]
            }]}
        }))
        .unwrap();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let e = subpath_env(&pod, c);
        let get = |k: &str| e.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("B"), Some("x-y"));
        assert_eq!(get("NAME"), Some("p-node"));
        assert_eq!(get("APP"), Some("db"));
        assert_eq!(get("NODE"), Some("node"));
        assert_eq!(get("IP"), None);
    }
}
