//! `podhost describe pod NAME`.

use anyhow::Result;

use crate::api::client::Client;
use crate::api::percent_encode;
use crate::cli::describe::render_describe;

/// `describe RESOURCE NAME`; only pods can be described.
pub fn run(client: &Client, resource: &str, name: &str) -> Result<i32> {
    super::get::pods_resource(resource)?;
    describe(client, name)
}

fn describe(client: &Client, name: &str) -> Result<i32> {
    let path = format!("/pods/{}", percent_encode(name));
    let pod: k8s_openapi::api::core::v1::Pod = client.get_json(&path)?;
    let events: Vec<crate::status::Event> = client.get_json(&format!("{path}/events"))?;
    print!("{}", render_describe(&pod, &events, chrono::Utc::now()));
    Ok(0)
}
