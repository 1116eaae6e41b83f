//! The registry credentials of a docker config, as the kubelet reads an image pull
//! Secret (`credentialprovider.DockerConfig`): a map from a registry location
//! (`host[:port][/path]`, with or without `https://`) to `username`/`password`, or
//! `auth` (base64 of `user:password`, padded or not) which wins over them. Field names
//! match in any case, as Go's `encoding/json` matches them; unknown fields are ignored.

use base64::Engine;
use serde_json::{Map, Value};

/// One login of a docker config: where it applies and what to send.
#[derive(Clone, PartialEq, Eq)]
pub struct DockerLogin {
    /// The registry location as written (`127.0.0.1:5000`, `https://index.docker.io/v1/`).
    pub location: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for DockerLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password: these end up in logs.
        f.debug_struct("DockerLogin")
            .field("location", &self.location)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Why a docker config cannot be read. The kubelet fails the pull on these (its
/// `MakeDockerKeyring` returns the JSON error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerConfigError {
    #[error("it is not JSON: {0}")]
    NotJson(String),
    #[error("{what} is not a JSON object")]
    NotObject { what: String },
    #[error("{field} of \"{location}\" is not a string")]
    NotString {
        location: String,
        field: &'static str,
    },
    #[error("the auth of \"{location}\" is not base64 of \"user:password\" ({reason})")]
    BadAuth { location: String, reason: String },
}

/// The logins of a `.dockerconfigjson` document: `{"auths": {LOCATION: ENTRY}}`.
pub fn parse_config_json(bytes: &[u8]) -> Result<Vec<DockerLogin>, DockerConfigError> {
    let doc = parse_json(bytes)?;
    let Some(top) = as_object(&doc, "the document")? else {
        return Ok(Vec::new());
    };
    match field(top, "auths") {
        Some(auths) => logins(auths),
        None => Ok(Vec::new()),
    }
}

/// The logins of a legacy `.dockercfg` document: `{LOCATION: ENTRY}`, the auths map
/// without its wrapper.
pub fn parse_dockercfg(bytes: &[u8]) -> Result<Vec<DockerLogin>, DockerConfigError> {
    logins(&parse_json(bytes)?)
}

fn parse_json(bytes: &[u8]) -> Result<Value, DockerConfigError> {
    serde_json::from_slice(bytes).map_err(|e| DockerConfigError::NotJson(e.to_string()))
}

/// `value` as an object; `None` for JSON null (Go leaves the map empty).
fn as_object<'a>(
    value: &'a Value,
    what: &str,
) -> Result<Option<&'a Map<String, Value>>, DockerConfigError> {
    match value {
        Value::Object(m) => Ok(Some(m)),
        Value::Null => Ok(None),
        _ => Err(DockerConfigError::NotObject {
            what: what.to_string(),
        }),
    }
}

/// The member `name` of `object`, its name matched in any case (Go's `encoding/json`
/// prefers an exact match).
fn field<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object.get(name).or_else(|| {
        object
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    })
}

fn logins(map: &Value) -> Result<Vec<DockerLogin>, DockerConfigError> {
    let Some(map) = as_object(map, "the auths map")? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(map.len());
    for (location, entry) in map {
        let Some(entry) = as_object(entry, &format!("the entry of \"{location}\""))? else {
            out.push(DockerLogin {
                location: location.clone(),
                username: String::new(),
                password: String::new(),
            });
            continue;
        };
        let text = |name: &'static str| -> Result<String, DockerConfigError> {
            match field(entry, name) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(DockerConfigError::NotString {
                    location: location.clone(),
                    field: name,
                }),
            }
        };
        let (mut username, mut password) = (text("username")?, text("password")?);
        // Checked for its type even though the kubelet never sends it.
        text("email")?;
        let auth = text("auth")?;
        if !auth.is_empty() {
            (username, password) = decode_auth(location, &auth)?;
        }
        out.push(DockerLogin {
            location: location.clone(),
            username,
            password,
        });
    }
    Ok(out)
}

/// The `auth` of `location`, `base64(user:password)`: padded when it ends in `=`, else
/// unpadded (the kubelet's `decodeDockerConfigFieldAuth`; line breaks are skipped, as
/// Go's decoder does).
fn decode_auth(location: &str, field: &str) -> Result<(String, String), DockerConfigError> {
    let bad = |reason: String| DockerConfigError::BadAuth {
        location: location.to_string(),
        reason,
    };
    let compact: String = field
        .chars()
        .filter(|c| !matches!(c, '\r' | '\n'))
        .collect();
    let engine = match field.trim().ends_with('=') {
        true => &base64::engine::general_purpose::STANDARD,
        false => &base64::engine::general_purpose::STANDARD_NO_PAD,
    };
    let decoded = engine.decode(compact).map_err(|e| bad(e.to_string()))?;
    let decoded = String::from_utf8_lossy(&decoded);
    match decoded.split_once(':') {
        Some((user, password)) => Ok((user.to_string(), password.to_string())),
        None => Err(bad("no \":\" between user and password".to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(location: &str, username: &str, password: &str) -> DockerLogin {
        DockerLogin {
            location: location.into(),
            username: username.into(),
            password: password.into(),
        }
    }

    #[test]
    fn config_json_auth_wins_over_username_and_password() {
        // "dXNlcjpwYXNzd29yZA==" is base64("user:password"), the e2e registry's login.
        let doc = br#"{"auths": {
            "localhost:5000": {"auth": "dXNlcjpwYXNzd29yZA==", "username": "x", "password": "y"},
            "https://index.docker.io/v1/": {"username": "bob", "password": "pw", "email": "b@x"}
        }}"#;
        let mut got = parse_config_json(doc).unwrap();
        got.sort_by(|a, b| a.location.cmp(&b.location));
        assert_eq!(
            got,
            [
                login("https://index.docker.io/v1/", "bob", "pw"),
                login("localhost:5000", "user", "password"),
            ]
        );
    }

    #[test]
    fn dockercfg_is_the_auths_map_without_its_wrapper() {
        // base64("alice:s3:cret") without padding: the password keeps its colon.
        let doc = br#"{"registry.example.com": {"auth": "YWxpY2U6czM6Y3JldA", "email": "a@x"}}"#;
        assert_eq!(
            parse_dockercfg(doc).unwrap(),
            [login("registry.example.com", "alice", "s3:cret")]
        );
        // The same document as a .dockerconfigjson has no "auths": nothing.
        assert_eq!(parse_config_json(doc).unwrap(), []);
    }

    #[test]
    fn field_names_match_in_any_case_and_null_is_empty() {
        let doc = br#"{"Auths": {"r:1": {"Username": "u", "PASSWORD": "p"}, "r:2": null}}"#;
        let mut got = parse_config_json(doc).unwrap();
        got.sort_by(|a, b| a.location.cmp(&b.location));
        assert_eq!(got, [login("r:1", "u", "p"), login("r:2", "", "")]);
        assert_eq!(parse_config_json(b"null").unwrap(), []);
        assert_eq!(parse_config_json(br#"{"auths": null}"#).unwrap(), []);
    }

    #[test]
    fn what_the_kubelet_refuses_is_an_error_naming_the_entry() {
        assert!(matches!(
            parse_config_json(b"{nope"),
            Err(DockerConfigError::NotJson(_))
        ));
        assert_eq!(
            parse_config_json(br#"{"auths": []}"#)
                .unwrap_err()
                .to_string(),
            "the auths map is not a JSON object"
        );
        assert_eq!(
            parse_config_json(br#"{"auths": {"r:1": {"username": 5}}}"#)
                .unwrap_err()
                .to_string(),
            "username of \"r:1\" is not a string"
        );
        let bad = parse_dockercfg(br#"{"r:1": {"auth": "!!!"}}"#).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("the auth of \"r:1\" is not base64 of \"user:password\" ("),
            "{bad}"
        );
        // base64("nocolon")
        let bad = parse_dockercfg(br#"{"r:1": {"auth": "bm9jb2xvbg=="}}"#).unwrap_err();
        assert_eq!(
            bad,
            DockerConfigError::BadAuth {
                location: "r:1".into(),
                reason: "no \":\" between user and password".into()
            }
        );
    }

    #[test]
    fn debug_never_shows_the_password() {
        let shown = format!("{:?}", login("r:1", "alice", "s3cret"));
        assert!(
            shown.contains("alice") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
