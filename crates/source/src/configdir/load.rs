//! One full read of the config dir: files → ConfigMaps and Secrets, checked as the API
//! server checks them (names, keys, sizes), duplicates reported.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Deserialize as _;
use serde_json::Value;

use super::{ConfigDirError, ConfigObjects};

/// Files larger than this are refused (the kubelet's limit for a manifest file).
const MAX_FILE_BYTES: u64 = 10 << 20;
/// The API server's limit on one ConfigMap's or Secret's data.
const MAX_OBJECT_DATA: usize = 1 << 20;

/// An object read from a file.
enum Object {
    ConfigMap(ConfigMap),
    Secret(Secret),
}

impl Object {
    fn kind(&self) -> &'static str {
        match self {
            Object::ConfigMap(_) => "ConfigMap",
            Object::Secret(_) => "Secret",
        }
    }

    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Object::ConfigMap(c) => &c.metadata,
            Object::Secret(s) => &s.metadata,
        }
    }
}

pub(super) fn load_dir(dir: &Path) -> ConfigObjects {
    let mut out = ConfigObjects::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(source) => {
            out.errors.push(ConfigDirError::DirRead {
                path: dir.to_path_buf(),
                source,
            });
            return out;
        }
    };
    let mut paths = Vec::new();
    for entry in entries {
        match entry {
            Ok(e) if e.file_name().as_bytes().starts_with(b".") => {}
            Ok(e) => paths.push(e.path()),
            Err(source) => out.errors.push(ConfigDirError::DirRead {
                path: dir.to_path_buf(),
                source,
            }),
        }
    }
    paths.sort();
    let mut first_seen: BTreeMap<(&'static str, String, String), PathBuf> = BTreeMap::new();
    for path in paths {
        let text = match read_file(&path) {
            Ok(text) => text,
            Err(e) => {
                out.errors.push(e);
                continue;
            }
        };
        for mut object in parse_file(&path, &text, &mut out.errors) {
            if let Some(message) = check(&mut object) {
                out.errors.push(invalid(&path, &object, message));
                continue;
            }
            let meta = object.meta();
            let namespace = meta.namespace.clone().unwrap_or_default();
            let name = meta.name.clone().unwrap_or_default();
            let key = (object.kind(), namespace.clone(), name.clone());
            if let Some(first) = first_seen.get(&key) {
                out.errors.push(ConfigDirError::Duplicate {
                    path: path.clone(),
                    first: first.clone(),
                    kind: object.kind(),
                    namespace,
                    name,
                });
                continue;
            }
            first_seen.insert(key, path.clone());
            match object {
                Object::ConfigMap(c) => {
                    out.config_maps.insert((namespace, name), c);
                }
                Object::Secret(s) => {
                    out.secrets.insert((namespace, name), s);
                }
            }
        }
    }
    out
}

fn read_file(path: &Path) -> Result<String, ConfigDirError> {
    let file_err = |source| ConfigDirError::FileRead {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(file_err)?;
    if !meta.is_file() {
        return Err(ConfigDirError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ConfigDirError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit: MAX_FILE_BYTES,
        });
    }
    std::fs::read_to_string(path).map_err(file_err)
}

/// The objects of one file (YAML documents, JSON, Lists); what cannot be read is
/// pushed to `errors`.
fn parse_file(path: &Path, text: &str, errors: &mut Vec<ConfigDirError>) -> Vec<Object> {
    let mut objects = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let doc_no = i + 1;
        let parse_err = |message: String| ConfigDirError::Parse {
            path: path.to_path_buf(),
            doc: doc_no,
            message,
        };
        let value = match Value::deserialize(doc) {
            Ok(Value::Null) => continue,
            Ok(v) => v,
            Err(e) => {
                // The parser cannot resynchronise after a syntax error: stop here.
                errors.push(parse_err(e.to_string()));
                break;
            }
        };
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let api_version = value.get("apiVersion").and_then(Value::as_str);
        if api_version.is_some_and(|v| v != "v1") {
            errors.push(parse_err(format!(
                "apiVersion {:?} is not supported; ConfigMaps, Secrets and Lists are v1",
                api_version.unwrap_or_default()
            )));
            continue;
        }
        let items: Vec<(Value, String)> = match kind {
            "List" | "ConfigMapList" | "SecretList" => {
                let item_kind = kind.strip_suffix("List").unwrap_or_default().to_string();
                let Some(items) = value.get("items").and_then(Value::as_array) else {
                    errors.push(parse_err(format!("a {kind} needs an items array")));
                    continue;
                };
                items
                    .iter()
                    .map(|item| {
                        let k = item
                            .get("kind")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .unwrap_or_else(|| item_kind.clone());
                        (item.clone(), k)
                    })
                    .collect()
            }
            _ => vec![(value.clone(), kind.to_string())],
        };
        for (item, kind) in items {
            let decoded = match kind.as_str() {
                "ConfigMap" => serde_json::from_value(item).map(Object::ConfigMap),
                "Secret" => serde_json::from_value(item).map(Object::Secret),
                _ => {
                    errors.push(ConfigDirError::Kind {
                        path: path.to_path_buf(),
                        doc: doc_no,
                        kind,
                    });
                    continue;
                }
            };
            match decoded {
                Ok(o) => objects.push(o),
                Err(e) => errors.push(parse_err(format!("{kind}: {e}"))),
            }
        }
    }
    objects
}

fn invalid(path: &Path, o: &Object, message: String) -> ConfigDirError {
    let meta = o.meta();
    ConfigDirError::Invalid {
        path: path.to_path_buf(),
        kind: o.kind(),
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name: meta.name.clone().unwrap_or_default(),
        message,
    }
}

/// Defaults the namespace, merges a Secret's `stringData`, and checks what the API
/// server would (names, keys, sizes): the problem found, if any.
fn check(object: &mut Object) -> Option<String> {
    let meta = match object {
        Object::ConfigMap(c) => &mut c.metadata,
        Object::Secret(s) => &mut s.metadata,
    };
    if meta.namespace.as_deref().is_none_or(str::is_empty) {
        meta.namespace = Some("default".into());
    }
    let name = meta.name.clone().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    if let Some(problem) = dns_subdomain_problem(&name) {
        return Some(format!("metadata.name: {problem}"));
    }
    if !(namespace.len() <= 63 && dns_label(&namespace)) {
        return Some(format!(
            "metadata.namespace {namespace:?} must be a DNS-1123 label"
        ));
    }
    match object {
        Object::ConfigMap(c) => config_map_problem(c),
        Object::Secret(s) => {
            merge_string_data(s);
            keys_problem(
                s.data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str(), v.0.len())),
                "data",
            )
        }
    }
}

/// The API server's merge: each `stringData` entry replaces the `data` entry of its key.
fn merge_string_data(s: &mut Secret) {
    if let Some(strings) = s.string_data.take() {
        let data = s.data.get_or_insert_with(BTreeMap::new);
        for (k, v) in strings {
            data.insert(k, ByteString(v.into_bytes()));
        }
    }
}

fn config_map_problem(c: &ConfigMap) -> Option<String> {
    let data = c.data.iter().flatten().map(|(k, v)| (k.as_str(), v.len()));
    let binary = c
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.0.len()));
    if let (Some(d), Some(b)) = (&c.data, &c.binary_data)
        && let Some(k) = d.keys().find(|k| b.contains_key(*k))
    {
        return Some(format!(
            "key {k:?} is in both data and binaryData; keep one"
        ));
    }
    keys_problem(data.chain(binary), "data/binaryData")
}

/// Unless every key is a valid ConfigMap key and the data at most 1 MiB in all, what
/// is wrong.
fn keys_problem<'a>(
    entries: impl Iterator<Item = (&'a str, usize)>,
    field: &str,
) -> Option<String> {
    let mut total = 0usize;
    for (key, len) in entries {
        if let Some(problem) = config_map_key_problem(key) {
            return Some(format!("{field} key {key:?}: {problem}"));
        }
        total = total.saturating_add(len);
    }
    (total > MAX_OBJECT_DATA).then(|| {
        format!(
            "{field} holds {total} bytes, more than the {MAX_OBJECT_DATA} a ConfigMap or Secret may hold"
        )
    })
}

/// Kubernetes' IsConfigMapKey: `[-._a-zA-Z0-9]+`, at most 253 characters, not `.`,
/// `..` or `..`-prefixed (those names are the volume writer's own). What is wrong, if
/// anything.
fn config_map_key_problem(key: &str) -> Option<&'static str> {
    if key.is_empty() || key.len() > 253 {
        return Some("must be 1 to 253 characters");
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        return Some("must consist of alphanumeric characters, '-', '_' or '.'");
    }
    if key == "." || key.starts_with("..") {
        return Some("must not be '.' or start with '..'");
    }
    None
}

fn dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty() && s.starts_with(ok) && s.ends_with(ok) && s.chars().all(|c| ok(c) || c == '-')
}

fn dns_subdomain_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("is required".into());
    }
    (s.len() > 253 || !s.split('.').all(|l| l.len() <= 63 && dns_label(l))).then(|| {
        format!("{s:?} must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')")
    })
}

#[cfg(test)]
mod tests;
