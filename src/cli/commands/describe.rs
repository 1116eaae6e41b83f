//! `podhost describe pod NAME`.

use anyhow::Result;

use crate::api::client::Client;
use crate::cli::describe::render_describe;
use crate::cli::pod_ref::{NamespaceFlag, PodRef};

/// `describe RESOURCE NAME`; only pods can be described.
pub fn run(client: &Client, resource: &str, name: &str, namespace: &NamespaceFlag) -> Result<i32> {
    super::get::pods_resource(resource)?;
    let pod: k8s_openapi::api::core::v1::Pod =
        client.get_json(&PodRef::parse(name, namespace)?.path())?;
    let events: Vec<crate::status::Event> =
        client.get_json(&format!("{}/events", PodRef::of(&pod).path()))?;
    print!("{}", render_describe(&pod, &events, chrono::Utc::now()));
    Ok(0)
}
