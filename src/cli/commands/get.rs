//! `podhost get pods [NAME…] [-n NS | -A] [-l SEL] [-o FORMAT] [-w]` and `get events`,
//! as kubectl's `get`.

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Pod;

use crate::api::client::Client;
use crate::api::percent_encode;
use crate::cli::args::GetArgs;
use crate::cli::events::render_events;
use crate::cli::pod_output::{OutputFormat, PodPrint, render};
use crate::cli::pod_ref::{DEFAULT_NAMESPACE, PodRef, pods_path};
use crate::cli::selector::Selector;
use crate::cli::table::PodColumns;

/// What `get`'s arguments ask for.
enum Wanted {
    Events,
    /// Pods, all of the namespace(s) or these names.
    Pods(Vec<String>),
}

pub fn run(client: &Client, args: &GetArgs) -> Result<i32> {
    match wanted(&args.targets)? {
        Wanted::Events if args.watch => bail!("--watch follows pods only"),
        Wanted::Events => get_events(client, args),
        Wanted::Pods(_) if args.for_object.is_some() => bail!("--for applies to events only"),
        Wanted::Pods(names) => {
            let format = OutputFormat::parse(args.output.as_deref())?;
            let selector = Selector::parse(args.selector.as_deref().unwrap_or_default())?;
            if !names.is_empty() && args.selector.is_some() {
                bail!("a label selector (-l) cannot be used with pod names: give one or the other");
            }
            let asked = PodsAsked {
                args,
                print: PodPrint {
                    columns: PodColumns {
                        wide: false,
                        namespace: args.all_namespaces,
                        labels: args.show_labels,
                        no_headers: args.no_headers,
                    },
                    single: names.len() == 1,
                },
                names,
                selector,
                format,
            };
            if args.watch {
                return super::get_watch::watch_pods(client, &asked);
            }
            get_pods(client, &asked)
        }
    }
}

/// What `get pods` was asked for, parsed: by the list and by the watch.
pub(super) struct PodsAsked<'a> {
    pub args: &'a GetArgs,
    pub names: Vec<String>,
    pub selector: Selector,
    pub format: OutputFormat,
    pub print: PodPrint,
}

/// `pods`, `pods NAME…`, `pod/NAME…` or `events`.
fn wanted(targets: &[String]) -> Result<Wanted> {
    let Some((first, rest)) = targets.split_first() else {
        bail!("get needs a resource type: pods or events");
    };
    if first.contains('/') {
        let mut names = Vec::new();
        for t in targets {
            match t.split_once('/') {
                Some((kind, name)) if is_pods(kind) => names.push(name.to_string()),
                _ => bail!(
                    "{t:?}: with TYPE/NAME arguments each must be pod/NAME (or give `pods NAME…`)"
                ),
            }
        }
        return Ok(Wanted::Pods(names));
    }
    match first.as_str() {
        "events" | "event" | "ev" if rest.is_empty() => Ok(Wanted::Events),
        "events" | "event" | "ev" => {
            bail!("get events takes no names: use get events -n NAMESPACE")
        }
        kind => {
            pods_resource(kind)?;
            Ok(Wanted::Pods(rest.to_vec()))
        }
    }
}

/// `--for`'s object in the events' form: `pod/NAME` (`pods/`, `po/` too) or
/// `node/NAME` (`nodes/`, `no/`).
fn event_object(object: &str) -> Result<String> {
    match object.split_once('/') {
        Some((kind, name)) if is_pods(kind) && !name.is_empty() => Ok(format!("pod/{name}")),
        Some(("node" | "nodes" | "no", name)) if !name.is_empty() => Ok(format!("node/{name}")),
        _ => bail!("--for {object:?}: give pod/NAME or node/NAME"),
    }
}

fn is_pods(kind: &str) -> bool {
    matches!(kind, "pods" | "pod" | "po")
}

/// Only pods (`pods`, `pod`, `po`) are a resource besides events.
pub fn pods_resource(resource: &str) -> Result<()> {
    if is_pods(resource) {
        Ok(())
    } else {
        bail!("unknown resource type {resource:?}: podhost knows pods and events")
    }
}

fn get_pods(client: &Client, asked: &PodsAsked) -> Result<i32> {
    let PodsAsked {
        args,
        names,
        selector,
        format,
        print,
    } = asked;
    let mut code = 0;
    let pods: Vec<Pod> = if names.is_empty() {
        let list: k8s_openapi::List<Pod> =
            client.get_json(&pods_path(&args.namespace, args.all_namespaces))?;
        list.items
            .into_iter()
            .filter(|p| selector.matches(p.metadata.labels.as_ref()))
            .collect()
    } else {
        let mut found = Vec::new();
        for name in names {
            // Each name on its own, as kubectl: the others still print.
            match PodRef::parse(name, &args.namespace)
                .map_err(anyhow::Error::from)
                .and_then(|r| Ok(client.get_json::<Pod>(&r.path())?))
            {
                Ok(pod) => found.push(pod),
                Err(e) => {
                    eprintln!("error: {}", crate::cli::error_text::error_text(&e));
                    code = 1;
                }
            }
        }
        found
    };
    // kubectl's "No resources found" stands for an empty table; json, yaml and the
    // templates print the empty list.
    if pods.is_empty() && names.is_empty() && format.is_table() {
        no_pods_found(client, args)?;
        return Ok(0);
    }
    print!("{}", render(&pods, format, print, chrono::Utc::now())?);
    Ok(code)
}

/// kubectl's "No resources found in NS namespace.", and where the pods are when other
/// namespaces have some (a static pod's manifest often names kube-system).
fn no_pods_found(client: &Client, args: &GetArgs) -> Result<()> {
    if args.all_namespaces {
        eprintln!("No resources found");
        return Ok(());
    }
    let namespace = args
        .namespace
        .namespace
        .as_deref()
        .unwrap_or(DEFAULT_NAMESPACE);
    eprintln!("No resources found in {namespace} namespace.");
    let all: k8s_openapi::List<Pod> = client.get_json("/pods")?;
    let mut elsewhere: Vec<String> = all
        .items
        .iter()
        .map(|p| p.metadata.namespace.clone().unwrap_or_default())
        .filter(|ns| ns != namespace)
        .collect();
    let count = elsewhere.len();
    elsewhere.sort();
    elsewhere.dedup();
    if args.selector.is_none() && count > 0 {
        eprintln!(
            "({count} pods in other namespaces: {}; add -A, or -n NAMESPACE)",
            elsewhere.join(", ")
        );
    }
    Ok(())
}

/// `get events [-n NS | -A] [--for TYPE/NAME]`: the default namespace's without -n
/// (the node's events count as its), except that `--for` alone finds a pod in any.
fn get_events(client: &Client, args: &GetArgs) -> Result<i32> {
    let namespace = args.namespace.namespace.as_deref();
    // Every namespace's events: with -A, or a pod's found in any namespace.
    let all = args.all_namespaces || (namespace.is_none() && args.for_object.is_some());
    let mut path = match namespace {
        _ if all => "/events".to_string(),
        Some(ns) => format!("/namespaces/{}/events", percent_encode(ns)),
        None => format!("/namespaces/{DEFAULT_NAMESPACE}/events"),
    };
    if let Some(object) = &args.for_object {
        path.push_str(&format!("?for={}", percent_encode(&event_object(object)?)));
    }
    let events: Vec<crate::status::Event> = client.get_json(&path)?;
    match args.output.as_deref() {
        Some("json") => println!("{}", serde_json::to_string_pretty(&events)?),
        Some("yaml") => print!("{}", serde_yaml_ng::to_string(&events)?),
        None | Some("wide") => {
            if events.is_empty() && all {
                eprintln!("No resources found");
            } else if events.is_empty() {
                let ns = namespace.unwrap_or(DEFAULT_NAMESPACE);
                eprintln!("No resources found in {ns} namespace.");
            } else {
                print!("{}", render_events(&events, all, chrono::Utc::now()));
            }
        }
        Some(other) => bail!("unknown output format {other:?}: use wide, json or yaml"),
    }
    Ok(0)
}
