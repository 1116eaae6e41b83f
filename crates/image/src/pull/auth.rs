//! Registry credentials: the node's, from a docker `config.json` at an explicit path
//! (not `$DOCKER_CONFIG`): `auths.<host>.auth` / `username`+`password`, and
//! `credHelpers` / `credsStore` (which run `docker-credential-<name>`), all via
//! the `docker_credential` crate (no file, or no entry for the registry, means
//! anonymous access); and a pod's, from its image pull secrets' logins. Bearer tokens
//! are obtained by `oci_client` from the registry's `WWW-Authenticate` challenge, with
//! these credentials.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::secrets::RegistryAuth;

use super::error::CredentialsError;
use podhost_model::pull_secrets::SourcedLogin;

/// The credentials to use for one registry, and how to describe them in errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Credentials {
    /// What to send.
    pub auth: RegistryAuth,
    /// For error messages, e.g. `sent user "alice"`.
    pub sent: String,
}

impl Credentials {
    fn anonymous(why: String) -> Credentials {
        Credentials {
            auth: RegistryAuth::Anonymous,
            sent: why,
        }
    }

    /// A pod's login. One without a user or password sends none, as containerd does.
    pub(super) fn from_login(login: &SourcedLogin) -> Credentials {
        if login.username.is_empty() && login.password.is_empty() {
            return Credentials::anonymous(
                "its entry has no username or password, so none were sent".to_string(),
            );
        }
        Credentials {
            auth: RegistryAuth::Basic(login.username.clone(), login.password.clone()),
            sent: format!("sent user \"{}\"", login.username),
        }
    }
}

/// Looks up the credentials for `registry` (`host[:port]`) in `file`. Blocking
/// (a credential helper is a subprocess). `Err` says why the file could not be
/// used (malformed, helper failure).
pub(super) fn lookup(file: Option<&Path>, registry: &str) -> Result<Credentials, CredentialsError> {
    let Some(path) = file else {
        return Ok(Credentials::anonymous(
            "no credentials file is configured, so none were sent".to_string(),
        ));
    };
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Credentials::anonymous(
                "the file does not exist, so no credentials were sent".to_string(),
            ));
        }
        Err(e) => return Err(CredentialsError::Open(e)),
    };
    match docker_credential::get_credential_from_reader(BufReader::new(f), registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => Ok(Credentials {
            sent: format!("sent user \"{user}\""),
            auth: RegistryAuth::Basic(user, password),
        }),
        Ok(DockerCredential::IdentityToken(_)) => {
            tracing::warn!(registry, file = %path.display(),
                "the credentials file has an identity token (an OAuth refresh token) for this \
                 registry, which podhost cannot use; pulling anonymously");
            Ok(Credentials::anonymous(
                "it holds only an identity token for it, which podhost cannot use; log in with \
                 a username and password"
                    .to_string(),
            ))
        }
        Err(CredentialRetrievalError::NoCredentialConfigured) => Ok(Credentials::anonymous(
            format!("it has no entry for {registry}, so no credentials were sent"),
        )),
        Err(CredentialRetrievalError::ConfigReadError) => Err(CredentialsError::NotDockerConfig),
        Err(CredentialRetrievalError::CredentialDecodingError) => Err(CredentialsError::BadAuth {
            registry: registry.to_string(),
        }),
        Err(e) => Err(CredentialsError::Helper(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, json: &str) -> std::path::PathBuf {
        let p = dir.join("config.json");
        std::fs::write(&p, json).unwrap();
        p
    }

    #[test]
    fn auths_entry_gives_basic_auth() {
        let dir = tempfile::tempdir().unwrap();
        // base64("alice:s3cret")
        let p = write(
            dir.path(),
            r#"{"auths":{"127.0.0.1:5001":{"auth":"YWxpY2U6czNjcmV0"}}}"#,
        );
        let c = lookup(Some(&p), "127.0.0.1:5001").unwrap();
        assert_eq!(c.auth, RegistryAuth::Basic("alice".into(), "s3cret".into()));
        assert_eq!(c.sent, "sent user \"alice\"");
        let other = lookup(Some(&p), "127.0.0.1:5002").unwrap();
        assert_eq!(other.auth, RegistryAuth::Anonymous);
        assert!(
            other.sent.contains("no entry for 127.0.0.1:5002"),
            "{}",
            other.sent
        );
    }

    #[test]
    fn a_pods_login_is_basic_auth_unless_it_is_empty() {
        let login = |user: &str, password: &str| SourcedLogin {
            username: user.into(),
            password: password.into(),
            source: "secret \"team/regcred\"".into(),
        };
        let c = Credentials::from_login(&login("alice", "s3cret"));
        assert_eq!(c.auth, RegistryAuth::Basic("alice".into(), "s3cret".into()));
        assert_eq!(c.sent, "sent user \"alice\"");
        let c = Credentials::from_login(&login("", ""));
        assert_eq!(c.auth, RegistryAuth::Anonymous);
        assert!(c.sent.contains("no username or password"), "{}", c.sent);
    }

    #[test]
    fn missing_or_absent_file_is_anonymous_and_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(lookup(None, "r:1").unwrap().auth, RegistryAuth::Anonymous);
        let missing = dir.path().join("nope.json");
        let c = lookup(Some(&missing), "r:1").unwrap();
        assert_eq!(c.auth, RegistryAuth::Anonymous);
        assert!(c.sent.contains("does not exist"));
        let p = write(dir.path(), "{nope");
        assert!(matches!(
            lookup(Some(&p), "r:1"),
            Err(CredentialsError::NotDockerConfig)
        ));
        let p = write(dir.path(), r#"{"auths":{"r:1":{"auth":"!!!"}}}"#);
        let e = lookup(Some(&p), "r:1").unwrap_err().to_string();
        assert_eq!(e, "auths.\"r:1\".auth is not base64 of \"user:password\"");
    }
}
