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
    pub(super) fn get(&self, registry: &str, auth: &RegistryAuth) -> Result<Client, String> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if slot.client.is_none() {
            slot.client = Some(build(&self.insecure)?);
        }
        match slot.auths.get(registry) {
            Some(known) if known == auth => {}
            None => {
                slot.auths.insert(registry.to_string(), auth.clone());
            }
            Some(_) => {
                tracing::info!(
                    registry,
                    "credentials changed; starting a new registry client"
                );
                slot.client = Some(build(&self.insecure)?);
                slot.auths.clear();
                slot.auths.insert(registry.to_string(), auth.clone());
            }
        }
        slot.client
            .clone()
            .ok_or_else(|| "no registry client".to_string())
    }
}

fn build(insecure: &[String]) -> Result<Client, String> {
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
    .map_err(|e| {
        format!("cannot create the registry client: {e} (install the ca-certificates package)")
    })
}
