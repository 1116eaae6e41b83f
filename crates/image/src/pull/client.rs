//! The registry clients, one per registry and credentials.
//!
//! An `oci_client::Client` remembers the first credentials it was given for a
//! registry for the rest of its life, and caches the bearer tokens it got with them
//! (per repository). So a client is never shared between credentials: each
//! `(registry, credentials)` pair has a client of its own (its connection pool and
//! token cache), and a pull with a pod's image pull secret can never use, nor leave
//! behind, a token another pod's pull may then use. A pull clones the client it was
//! given; the pool keeps the [`MAX_CLIENTS`] used last. When a loopback registry is
//! found to speak plain HTTP (see [`plain_http`](super::plain_http)), every client is
//! replaced by one that speaks plain HTTP to it; pulls already running keep theirs.

use std::sync::Mutex;
use std::time::Duration;

use oci_client::Client;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;

use super::plain_http;

/// Give up connecting after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Give up when a registry sends nothing for this long.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// Clients kept for reuse (a node pulls from a few registries with a few credentials;
/// rotated credentials leave old pairs that are never asked for again).
const MAX_CLIENTS: usize = 16;

/// See the module docs.
pub(super) struct Clients {
    /// `--insecure-registry`: never tried over HTTPS.
    insecure: Vec<String>,
    slot: Mutex<Slot>,
}

struct Slot {
    /// The clients, the one used last at the end. Built on first use: a host without
    /// CA certificates must not stop the daemon.
    pool: Vec<Pooled>,
    /// Loopback registries that answered TLS in plain HTTP, in the order found.
    plain_loopback: Vec<String>,
}

struct Pooled {
    registry: String,
    auth: RegistryAuth,
    client: Client,
}

impl Clients {
    /// `insecure`: registries (`host:port`) spoken to over plain HTTP.
    pub(super) fn new(insecure: Vec<String>) -> Clients {
        Clients {
            insecure,
            slot: Mutex::new(Slot {
                pool: Vec::new(),
                plain_loopback: Vec::new(),
            }),
        }
    }

    /// The client to use for `registry` with `auth`, and only with them.
    /// Errors say why no client could be made (e.g. no CA certificates on the host).
    pub(super) fn get(
        &self,
        registry: &str,
        auth: &RegistryAuth,
    ) -> Result<Client, OciDistributionError> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let found = slot
            .pool
            .iter()
            .position(|p| p.registry == registry && p.auth == *auth);
        let pooled = match found {
            Some(i) => slot.pool.remove(i),
            None => {
                let plain: Vec<String> = self
                    .insecure
                    .iter()
                    .chain(&slot.plain_loopback)
                    .cloned()
                    .collect();
                Pooled {
                    registry: registry.to_string(),
                    auth: auth.clone(),
                    client: build(&plain)?,
                }
            }
        };
        let client = pooled.client.clone();
        slot.pool.push(pooled);
        if slot.pool.len() > MAX_CLIENTS {
            slot.pool.remove(0);
        }
        Ok(client)
    }

    /// Called when `registry` answered the TLS handshake in plain HTTP: true when
    /// it is to be spoken to in plain HTTP instead (it is on this host's loopback and
    /// not an `--insecure-registry`, which is never tried over HTTPS), and the
    /// clients [`get`](Self::get) returns from now on do so. Said in the log the
    /// first time for each registry.
    pub(super) fn fall_back_to_plain_http(&self, registry: &str) -> bool {
        if !plain_http::is_loopback(registry) || self.insecure.iter().any(|r| r == registry) {
            return false;
        }
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if !slot.plain_loopback.iter().any(|r| r == registry) {
            tracing::info!(
                registry,
                "the registry is on this host's loopback and answered TLS in plain HTTP; \
                 speaking plain HTTP to it from now on"
            );
            slot.plain_loopback.push(registry.to_string());
            slot.pool.clear();
        }
        true
    }
}

/// A client speaking plain HTTP to the registries in `plain`, HTTPS to the others.
fn build(plain: &[String]) -> Result<Client, OciDistributionError> {
    let protocol = if plain.is_empty() {
        ClientProtocol::Https
    } else {
        ClientProtocol::HttpsExcept(plain.to_vec())
    };
    // `Client::new` falls back to a default client that panics without CA certificates;
    // `try_from` reports the problem instead.
    Client::try_from(ClientConfig {
        protocol,
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        ..ClientConfig::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str) -> RegistryAuth {
        RegistryAuth::Basic(user.to_string(), "pw".to_string())
    }

    /// The pool's pairs, the one used last at the end.
    fn pairs(clients: &Clients) -> Vec<(String, RegistryAuth)> {
        let slot = clients.slot.lock().unwrap();
        slot.pool
            .iter()
            .map(|p| (p.registry.clone(), p.auth.clone()))
            .collect()
    }

    #[test]
    fn each_registry_and_credentials_pair_has_a_client_of_its_own() {
        let clients = Clients::new(Vec::new());
        let r = "registry.example.com";
        for auth in [basic("alice"), basic("bob"), RegistryAuth::Anonymous] {
            clients.get(r, &auth).unwrap();
        }
        clients.get("other.example.com", &basic("alice")).unwrap();
        // Asked again with the same pair: the same client, now the one used last.
        clients.get(r, &basic("alice")).unwrap();
        let pair = |registry: &str, auth: RegistryAuth| (registry.to_string(), auth);
        assert_eq!(
            pairs(&clients),
            [
                pair(r, basic("bob")),
                pair(r, RegistryAuth::Anonymous),
                pair("other.example.com", basic("alice")),
                pair(r, basic("alice")),
            ]
        );
        // Another password for alice is another client.
        let rotated = RegistryAuth::Basic("alice".to_string(), "new".to_string());
        clients.get(r, &rotated).unwrap();
        assert_eq!(pairs(&clients).len(), 5);
        // Found to speak plain HTTP: every client goes (the next are made for it).
        assert!(clients.fall_back_to_plain_http("127.0.0.1:5000"));
        assert!(pairs(&clients).is_empty());
    }

    #[test]
    fn the_pool_keeps_the_clients_used_last() {
        let clients = Clients::new(Vec::new());
        for i in 0..MAX_CLIENTS + 3 {
            clients
                .get(&format!("r{i}.example.com"), &RegistryAuth::Anonymous)
                .unwrap();
        }
        // r3 used again: it is kept, r4 is the oldest now.
        clients
            .get("r3.example.com", &RegistryAuth::Anonymous)
            .unwrap();
        let kept: Vec<String> = pairs(&clients).into_iter().map(|(r, _)| r).collect();
        assert_eq!(kept.len(), MAX_CLIENTS);
        assert_eq!(kept.first().map(String::as_str), Some("r4.example.com"));
        assert_eq!(kept.last().map(String::as_str), Some("r3.example.com"));
        assert!(
            !kept
                .iter()
                .any(|r| r == "r0.example.com" || r == "r2.example.com")
        );
    }

    #[test]
    fn only_loopback_registries_not_listed_insecure_fall_back() {
        let clients = Clients::new(vec!["127.0.0.1:5001".to_string()]);
        assert!(clients.fall_back_to_plain_http("localhost:5000"));
        assert!(clients.fall_back_to_plain_http("[::1]:5000"));
        // Asked again (a second pull that started over HTTPS): still yes.
        assert!(clients.fall_back_to_plain_http("localhost:5000"));
        // Already plain HTTP: there is nothing to fall back to.
        assert!(!clients.fall_back_to_plain_http("127.0.0.1:5001"));
        assert!(!clients.fall_back_to_plain_http("registry.example.com:5000"));
        assert!(!clients.fall_back_to_plain_http("10.0.0.1:5000"));
        let slot = clients.slot.lock().unwrap();
        assert_eq!(slot.plain_loopback, ["localhost:5000", "[::1]:5000"]);
    }
}
