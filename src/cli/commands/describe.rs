//! `podhost describe pod NAME` (or `pod/NAME`, or every pod of a namespace) and
//! `podhost describe node [NAME]`, as kubectl's.

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{Node, Pod};

use crate::api::client::Client;
use crate::api::percent_encode;
use crate::cli::describe::{render_describe, render_node};
use crate::cli::pod_ref::{NamespaceFlag, PodRef, pods_path};

/// `describe RESOURCE [NAME]` or `describe TYPE/NAME`.
pub fn run(
    client: &Client,
    resource: &str,
    name: Option<&str>,
    namespace: &NamespaceFlag,
) -> Result<i32> {
    let (kind, name) = match resource.split_once('/') {
        Some(_) if name.is_some() => bail!("give {resource:?} or a type and a name, not both"),
        Some((kind, name)) => (kind, Some(name)),
        None => (resource, name),
    };
    match kind {
        "node" | "nodes" | "no" => describe_node(client, name),
        "pod" | "pods" | "po" => match name {
            Some(name) => describe_pod(client, &PodRef::parse(name, namespace)?),
            None => {
                let list: k8s_openapi::List<Pod> = client.get_json(&pods_path(namespace, false))?;
                let texts = list
                    .items
                    .iter()
                    .map(|p| describe_text(client, p))
                    .collect::<Result<Vec<_>>>()?;
                print!("{}", texts.join("\n\n"));
                Ok(0)
            }
        },
        other => bail!("unknown resource type {other:?}: podhost describes pods and its node"),
    }
}

fn describe_pod(client: &Client, pod: &PodRef) -> Result<i32> {
    let pod: Pod = client.get_json(&pod.path())?;
    print!("{}", describe_text(client, &pod)?);
    Ok(0)
}

fn describe_text(client: &Client, pod: &Pod) -> Result<String> {
    let events: Vec<crate::status::Event> =
        client.get_json(&format!("{}/events", PodRef::of(pod).path()))?;
    Ok(render_describe(pod, &events, chrono::Utc::now()))
}

fn describe_node(client: &Client, name: Option<&str>) -> Result<i32> {
    let node: Node = client.get_json("/node")?;
    let node_name = node.metadata.name.clone().unwrap_or_default();
    if let Some(asked) = name.filter(|n| *n != node_name) {
        bail!("node {asked:?} not found: this daemon's node is {node_name:?}");
    }
    let pods: k8s_openapi::List<Pod> = client.get_json("/pods")?;
    let events: Vec<crate::status::Event> = client.get_json(&format!(
        "/events?for={}",
        percent_encode(&format!("node/{node_name}"))
    ))?;
    print!(
        "{}",
        render_node(&node, &pods.items, &events, chrono::Utc::now())
    );
    Ok(0)
}
