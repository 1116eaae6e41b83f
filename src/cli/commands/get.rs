//! `podhost get pods|events [-o wide|json|yaml] [--watch]`.

use anyhow::{Result, bail};

use crate::api::client::Client;
use crate::cli::events::render_events;
use crate::cli::table::render_pods;

/// `get RESOURCE`: pods (`pod`, `po`) or events (`event`, `ev`); `watch` follows the
/// pods' changes.
pub fn run(client: &Client, resource: &str, output: Option<&str>, watch: bool) -> Result<i32> {
    match resource {
        "events" | "event" | "ev" if watch => bail!("--watch follows pods only"),
        "events" | "event" | "ev" => get_events(client, output),
        _ => {
            pods_resource(resource)?;
            if watch {
                super::get_watch::watch_pods(client, output)
            } else {
                get_pods(client, output)
            }
        }
    }
}

/// Only pods (`pods`, `pod`, `po`) are a resource besides events.
pub fn pods_resource(resource: &str) -> Result<()> {
    match resource {
        "pods" | "pod" | "po" => Ok(()),
        other => bail!("unknown resource type {other:?}: podhost knows pods and events"),
    }
}

fn get_pods(client: &Client, output: Option<&str>) -> Result<i32> {
    let list: serde_json::Value = client.get_json("/pods")?;
    match output {
        Some("json") => println!("{}", serde_json::to_string_pretty(&list)?),
        Some("yaml") => print!("{}", serde_yaml_ng::to_string(&list)?),
        None | Some("wide") => {
            let pods: Vec<k8s_openapi::api::core::v1::Pod> =
                serde_json::from_value(list.get("items").cloned().unwrap_or_default())?;
            if pods.is_empty() {
                eprintln!("No resources found.");
            } else {
                print!(
                    "{}",
                    render_pods(&pods, output == Some("wide"), chrono::Utc::now())
                );
            }
        }
        Some(other) => bail!("unknown output format {other:?}: use wide, json or yaml"),
    }
    Ok(0)
}

fn get_events(client: &Client, output: Option<&str>) -> Result<i32> {
    let events: Vec<crate::status::Event> = client.get_json("/events")?;
    match output {
        Some("json") => println!("{}", serde_json::to_string_pretty(&events)?),
        Some("yaml") => print!("{}", serde_yaml_ng::to_string(&events)?),
        None | Some("wide") => {
            if events.is_empty() {
                eprintln!("No events found.");
            } else {
                print!("{}", render_events(&events, chrono::Utc::now()));
            }
        }
        Some(other) => bail!("unknown output format {other:?}: use wide, json or yaml"),
    }
    Ok(0)
}
