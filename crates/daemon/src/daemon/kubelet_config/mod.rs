//! `--config FILE`: a `KubeletConfiguration` (kubelet.config.k8s.io/v1beta1, YAML or
//! JSON). Its fields are mapped onto `podhost daemon`'s flags; a flag given on the
//! command line wins over the file. Fields podhost does not implement are reported once
//! (never silently dropped); a name that is no field at all is an error, as in the
//! kubelet, so that a typo never passes for a setting.

mod apply;
mod duration;
pub mod fields;
mod typed;

pub use apply::apply;
pub use duration::parse_go_duration;
pub use typed::Implemented;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use fields::{CRASH_LOOP_BACK_OFF_FIELDS, FIELDS, LOGGING_FIELDS, Support};

pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
pub const KIND: &str = "KubeletConfiguration";

/// A config file podhost cannot use; each names the file, the field and what to do.
#[derive(Debug, thiserror::Error)]
pub enum KubeletConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is not valid YAML or JSON: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    #[error(
        "config file {path}: found apiVersion {api_version:?}, kind {kind:?}; podhost reads \
         apiVersion: {API_VERSION}, kind: {KIND} (a KubeletConfiguration)"
    )]
    Kind {
        path: PathBuf,
        api_version: String,
        kind: String,
    },
    #[error(
        "config file {path}: unknown field {field:?}{}; it is not a field of {API_VERSION} \
         KubeletConfiguration: fix or remove it",
        suggestion.map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default()
    )]
    UnknownField {
        path: PathBuf,
        field: String,
        suggestion: Option<&'static str>,
    },
    #[error("config file {path}: field {field}: {problem}; fix the field in the file")]
    Field {
        path: PathBuf,
        field: String,
        problem: String,
    },
}

/// A config file as read: what it sets, and what of it podhost does not implement.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// The implemented fields set, by name (`logging.format` for sub-fields), with
    /// their values as written: what a reload compares.
    pub values: BTreeMap<String, Value>,
    /// The implemented fields, typed.
    pub fields: Implemented,
    /// The fields set that podhost does not implement, each with why.
    pub unsupported: Vec<(String, &'static str)>,
}

impl ConfigFile {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<Self, KubeletConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| KubeletConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Checks `text`, the content of `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, KubeletConfigError> {
        let field_error = |field: &str, problem: String| KubeletConfigError::Field {
            path: path.to_path_buf(),
            field: field.to_string(),
            problem,
        };
        let doc: Value =
            serde_yaml_ng::from_str(text).map_err(|source| KubeletConfigError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        let Value::Object(map) = doc else {
            return Err(KubeletConfigError::Kind {
                path: path.to_path_buf(),
                api_version: String::new(),
                kind: String::new(),
            });
        };
        let text_of = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or_default();
        if text_of("apiVersion") != API_VERSION || text_of("kind") != KIND {
            return Err(KubeletConfigError::Kind {
                path: path.to_path_buf(),
                api_version: text_of("apiVersion").to_string(),
                kind: text_of("kind").to_string(),
            });
        }
        let mut file = ConfigFile {
            path: path.to_path_buf(),
            values: BTreeMap::new(),
            fields: Implemented::default(),
            unsupported: Vec::new(),
        };
        let mut implemented = Map::new();
        for (key, value) in &map {
            if key == "apiVersion" || key == "kind" {
                continue;
            }
            let support = fields::lookup(FIELDS, key).ok_or_else(|| self::unknown(path, key))?;
            let sub_table = match key.as_str() {
                "logging" => Some(LOGGING_FIELDS),
                "crashLoopBackOff" => Some(CRASH_LOOP_BACK_OFF_FIELDS),
                _ => None,
            };
            match (support, sub_table) {
                (_, Some(table)) => {
                    let Value::Object(sub) = value else {
                        return Err(field_error(key, "must be a mapping".into()));
                    };
                    let mut kept = Map::new();
                    for (sub_key, sub_value) in sub {
                        let name = format!("{key}.{sub_key}");
                        match fields::lookup(table, sub_key) {
                            None => {
                                return Err(KubeletConfigError::UnknownField {
                                    path: path.to_path_buf(),
                                    field: name,
                                    suggestion: fields::nearest(table, sub_key),
                                });
                            }
                            Some(Support::Unsupported(why)) => file.unsupported.push((name, why)),
                            Some(Support::Flag(_)) => {
                                file.values.insert(name, sub_value.clone());
                                kept.insert(sub_key.clone(), sub_value.clone());
                            }
                        }
                    }
                    implemented.insert(key.clone(), Value::Object(kept));
                }
                (Support::Unsupported(why), None) => file.unsupported.push((key.clone(), why)),
                (Support::Flag(_), None) => {
                    file.values.insert(key.clone(), value.clone());
                    implemented.insert(key.clone(), value.clone());
                }
            }
        }
        // Field by field, so that a value of the wrong type is named by its field.
        for (key, value) in &implemented {
            let one = Map::from_iter([(key.clone(), value.clone())]);
            serde_json::from_value::<Implemented>(Value::Object(one))
                .map_err(|e| field_error(key, e.to_string()))?;
        }
        file.fields = serde_json::from_value(Value::Object(implemented))
            .map_err(|e| field_error("(the file)", e.to_string()))?;
        Ok(file)
    }

    /// The unimplemented fields as one line: `cgroupDriver (why), …`.
    pub fn unsupported_summary(&self) -> String {
        self.unsupported
            .iter()
            .map(|(name, why)| format!("{name} ({why})"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The implemented fields set in the file whose flag was given on the command line
    /// (the flag wins).
    pub fn overridden(&self, given: &BTreeSet<String>) -> Vec<String> {
        self.values
            .keys()
            .filter(|name| flag_of(name).is_some_and(|flag| given.contains(flag)))
            .cloned()
            .collect()
    }

    /// The file's field behind a flag error of `podhost daemon` (the message names the
    /// flag as `--flag-name`), when the flag's value came from this file.
    pub fn field_behind(&self, flag_message: &str, given: &BTreeSet<String>) -> Option<String> {
        self.values
            .keys()
            .filter(|name| {
                flag_of(name).is_some_and(|flag| {
                    !given.contains(flag)
                        && flag_message.contains(&format!("--{}", flag.replace('_', "-")))
                })
            })
            .max_by_key(|name| name.len())
            .cloned()
    }
}

/// The flag (clap id) a field name (`logging.format` for sub-fields) maps onto.
pub fn flag_of(name: &str) -> Option<&'static str> {
    let (table, key) = match name.split_once('.') {
        Some(("logging", sub)) => (LOGGING_FIELDS, sub),
        Some(("crashLoopBackOff", sub)) => (CRASH_LOOP_BACK_OFF_FIELDS, sub),
        Some(_) => return None,
        None => (FIELDS, name),
    };
    match fields::lookup(table, key)? {
        Support::Flag(flag) => Some(flag),
        Support::Unsupported(_) => None,
    }
}

fn unknown(path: &Path, key: &str) -> KubeletConfigError {
    KubeletConfigError::UnknownField {
        path: path.to_path_buf(),
        field: key.to_string(),
        suggestion: fields::nearest(FIELDS, key),
    }
}

#[cfg(test)]
mod tests;
