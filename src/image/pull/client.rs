//! The shared `oci_client::Client`.
//!
//! One client (one connection pool, one token cache) serves every pull. An
//! `oci_client::Client` remembers the first credentials it was given for a
//! registry for the rest of its life, so when the credentials for a registry
//! change (config.json was edited), a fresh client replaces the shared one;
//! pulls already running keep the old one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use oci_client::Client;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;

/// Give up connecting after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Give up when a registry sends nothing for this long.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// See the module docs.
pub(super) struct Clients {
    insecure: Vec<String>,
    slot: Mutex<Slot>,
}

struct Slot {
    /// Built on first use: a host without CA certificates must not stop the daemon.
    client: Option<Client>,
    /// The credentials `client` has been given, per registry.
    auths: HashMap<String, RegistryAuth>,
}

impl Clients {
    /// `insecure`: registries (`host:port`) spoken to over plain HTTP.
    pub(super) fn new(insecure: Vec<String>) -> Clients {
        Clients {
            insecure,
            slot: Mutex::new(Slot {
                client: None,
                auths: HashMap::new(),
            }),
        }
    }

    /// The client to use for `registry` with `auth`.
    /// Errors say why no client could be made (e.g. no CA certificates on the host).
    pub(super) fn get(
        &self,
        registry: &str,
        auth: &RegistryAuth,
    ) -> Result<Client, OciDistributionError> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let changed = slot.auths.get(registry).is_some_and(|known| known != auth);
        if changed {
            tracing::info!(
                registry,
                "credentials changed; starting a new registry client"
            );
            slot.client = None;
            slot.auths.clear();
        }
        let client = match &slot.client {
            Some(c) => c.clone(),
            None => {
                let c = build(&self.insecure)?;
                slot.client = Some(c.clone());
                c
            }
        };
        slot.auths.insert(registry.to_string(), auth.clone());
        Ok(client)
    }
}

fn build(insecure: &[String]) -> Result<Client, OciDistributionError> {
    let protocol = if insecure.is_empty() {
        ClientProtocol::Https
    } else {
        ClientProtocol::HttpsExcept(insecure.to_vec())
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
