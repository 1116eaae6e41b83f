//! The Init Containers, Containers and Ephemeral Containers sections: each container's
//! image, ports, command, state, resources, probes, environment and mounts, as
//! kubectl's `describeContainers`.

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, EnvVar, Pod, Probe, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::rfc1123z;
use super::tabbed::Tabbed;

/// One section: `label:` then each container, with its status when there is one.
pub fn describe_containers(
    w: &mut Tabbed,
    label: &str,
    containers: &[Container],
    statuses: &[ContainerStatus],
    pod: &Pod,
) {
    let none = if containers.is_empty() { " <none>" } else { "" };
    w.write(0, &format!("{label}:{none}\n"));
    for c in containers {
        let status = statuses.iter().find(|s| s.name == c.name);
        basic_info(w, c, status);
        command(w, c);
        if let Some(s) = status {
            state(w, "State", s.state.as_ref());
            if let Some(last) = s.last_state.as_ref().filter(|l| l.terminated.is_some()) {
                state(w, "Last State", Some(last));
            }
            w.write(2, &format!("Ready:\t{}\n", go_bool(s.ready)));
            w.write(2, &format!("Restart Count:\t{}\n", s.restart_count));
        }
        resources(w, c.resources.as_ref());
        probes(w, c);
        env_from(w, c);
        env(w, c, pod);
        mounts(w, c);
    }
}

fn go_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

fn basic_info(w: &mut Tabbed, c: &Container, status: Option<&ContainerStatus>) {
    w.write(1, &format!("{}:\n", c.name));
    if let Some(s) = status {
        w.write(
            2,
            &format!(
                "Container ID:\t{}\n",
                s.container_id.as_deref().unwrap_or_default()
            ),
        );
    }
    w.write(
        2,
        &format!("Image:\t{}\n", c.image.as_deref().unwrap_or_default()),
    );
    if let Some(s) = status {
        w.write(2, &format!("Image ID:\t{}\n", s.image_id));
    }
    let ports = c.ports.as_deref().unwrap_or_default();
    let list = |number: &dyn Fn(&k8s_openapi::api::core::v1::ContainerPort) -> i32| {
        ports
            .iter()
            .map(|p| format!("{}/{}", number(p), p.protocol.as_deref().unwrap_or("TCP")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (one, several, text) in [
        ("Port", "Ports", list(&|p| p.container_port)),
        (
            "Host Port",
            "Host Ports",
            list(&|p| p.host_port.unwrap_or(0)),
        ),
    ] {
        if text.contains(',') {
            w.write(2, &format!("{several}:\t{text}\n"));
        } else if text.is_empty() {
            w.write(2, &format!("{one}:\t<none>\n"));
        } else {
            w.write(2, &format!("{one}:\t{text}\n"));
        }
    }
}

fn command(w: &mut Tabbed, c: &Container) {
    for (title, words) in [("Command", &c.command), ("Args", &c.args)] {
        let Some(words) = words.as_ref().filter(|w| !w.is_empty()) else {
            continue;
        };
        w.write(2, &format!("{title}:\n"));
        for line in words.iter().flat_map(|word| word.split('\n')) {
            w.write(3, &format!("{line}\n"));
        }
    }
}

fn state(w: &mut Tabbed, title: &str, state: Option<&ContainerState>) {
    let state = state.cloned().unwrap_or_default();
    if let Some(r) = &state.running {
        w.write(2, &format!("{title}:\tRunning\n"));
        let started = r.started_at.as_ref().map(rfc1123z).unwrap_or_default();
        w.write(3, &format!("Started:\t{started}\n"));
    } else if let Some(t) = &state.terminated {
        w.write(2, &format!("{title}:\tTerminated\n"));
        if let Some(reason) = t.reason.as_deref().filter(|r| !r.is_empty()) {
            w.write(3, &format!("Reason:\t{reason}\n"));
        }
        if let Some(message) = t.message.as_deref().filter(|m| !m.is_empty()) {
            w.write(3, &format!("Message:\t{message}\n"));
        }
        w.write(3, &format!("Exit Code:\t{}\n", t.exit_code));
        if let Some(signal) = t.signal.filter(|s| *s > 0) {
            w.write(3, &format!("Signal:\t{signal}\n"));
        }
        let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            t.map(rfc1123z).unwrap_or_default()
        };
        w.write(3, &format!("Started:\t{}\n", time(t.started_at.as_ref())));
        w.write(3, &format!("Finished:\t{}\n", time(t.finished_at.as_ref())));
    } else {
        w.write(2, &format!("{title}:\tWaiting\n"));
        if let Some(reason) = state
            .waiting
            .as_ref()
            .and_then(|wt| wt.reason.as_deref())
            .filter(|r| !r.is_empty())
        {
            w.write(3, &format!("Reason:\t{reason}\n"));
        }
    }
}

fn resources(w: &mut Tabbed, r: Option<&ResourceRequirements>) {
    let Some(r) = r else { return };
    for (title, map) in [("Limits", &r.limits), ("Requests", &r.requests)] {
        let Some(map) = map.as_ref().filter(|m| !m.is_empty()) else {
            continue;
        };
        w.write(2, &format!("{title}:\n"));
        for (name, quantity) in map {
            w.write(3, &format!("{name}:\t{}\n", quantity.0));
        }
    }
}

fn probes(w: &mut Tabbed, c: &Container) {
    for (title, probe) in [
        ("Liveness", &c.liveness_probe),
        ("Readiness", &c.readiness_probe),
        ("Startup", &c.startup_probe),
    ] {
        if let Some(p) = probe {
            w.write(2, &format!("{title}:\t{}\n", describe_probe(p)));
        }
    }
}

fn port_text(port: &IntOrString) -> String {
    match port {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// kubectl's `DescribeProbe`, with the API server's defaults for fields left unset.
pub fn describe_probe(p: &Probe) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s #success={} #failure={}",
        p.initial_delay_seconds.unwrap_or(0),
        p.timeout_seconds.unwrap_or(1),
        p.period_seconds.unwrap_or(10),
        p.success_threshold.unwrap_or(1),
        p.failure_threshold.unwrap_or(3)
    );
    if let Some(e) = &p.exec {
        return format!(
            "exec [{}] {attrs}",
            e.command.clone().unwrap_or_default().join(" ")
        );
    }
    if let Some(h) = &p.http_get {
        let scheme = h.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
        let host = h.host.as_deref().unwrap_or_default();
        let port = port_text(&h.port);
        let host_port = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let path = h.path.as_deref().unwrap_or_default();
        return format!("http-get {scheme}://{host_port}{path} {attrs}");
    }
    if let Some(t) = &p.tcp_socket {
        let host = t.host.as_deref().unwrap_or_default();
        return format!("tcp-socket {host}:{} {attrs}", port_text(&t.port));
    }
    if let Some(g) = &p.grpc {
        let service = g.service.as_deref().unwrap_or_default();
        return format!("grpc <pod>:{} {service} {attrs}", g.port);
    }
    format!("unknown {attrs}")
}

fn env_from(w: &mut Tabbed, c: &Container) {
    let Some(sources) = c.env_from.as_ref().filter(|s| !s.is_empty()) else {
        return;
    };
    w.write(2, "Environment Variables from:\n");
    for s in sources {
        let (name, from, optional) = if let Some(cm) = &s.config_map_ref {
            (cm.name.as_str(), "ConfigMap", cm.optional.unwrap_or(false))
        } else if let Some(secret) = &s.secret_ref {
            (
                secret.name.as_str(),
                "Secret",
                secret.optional.unwrap_or(false),
            )
        } else {
            ("", "", false)
        };
        match s.prefix.as_deref().filter(|p| !p.is_empty()) {
            None => w.write(3, &format!("{name}\t{from}\tOptional: {optional}\n")),
            Some(prefix) => w.write(
                3,
                &format!("{name}\t{from} with prefix '{prefix}'\tOptional: {optional}\n"),
            ),
        }
    }
}

fn env(w: &mut Tabbed, c: &Container, pod: &Pod) {
    let vars = c.env.as_deref().unwrap_or_default();
    if vars.is_empty() {
        w.write(2, "Environment:\t<none>\n");
        return;
    }
    w.write(2, "Environment:\n");
    for e in vars {
        let Some(from) = &e.value_from else {
            let value = e.value.as_deref().unwrap_or_default();
            for (i, line) in value.split('\n').enumerate() {
                if i == 0 {
                    w.write(3, &format!("{}:\t{line}\n", e.name));
                } else {
                    w.write(3, &format!("\t{line}\n"));
                }
            }
            continue;
        };
        if let Some(f) = &from.field_ref {
            let api = f.api_version.as_deref().unwrap_or("v1");
            let value = field_value(pod, e).unwrap_or_default();
            w.write(
                3,
                &format!("{}:\t{value} ({api}:{})\n", e.name, f.field_path),
            );
        } else if let Some(r) = &from.resource_field_ref {
            w.write(3, &format!("{}:\t ({})\n", e.name, r.resource));
        } else if let Some(s) = &from.secret_key_ref {
            w.write(
                3,
                &format!(
                    "{}:\t<set to the key '{}' in secret '{}'>\tOptional: {}\n",
                    e.name,
                    s.key,
                    s.name,
                    s.optional.unwrap_or(false)
                ),
            );
        } else if let Some(cm) = &from.config_map_key_ref {
            w.write(
                3,
                &format!(
                    "{}:\t<set to the key '{}' of config map '{}'>\tOptional: {}\n",
                    e.name,
                    cm.key,
                    cm.name,
                    cm.optional.unwrap_or(false)
                ),
            );
        }
    }
}

/// The metadata fields kubectl resolves for a fieldRef (others print empty).
fn field_value(pod: &Pod, e: &EnvVar) -> Option<String> {
    let path = &e.value_from.as_ref()?.field_ref.as_ref()?.field_path;
    let meta = &pod.metadata;
    let keyed = |prefix: &str| {
        path.strip_prefix(prefix)?
            .strip_suffix("']")
            .map(str::to_string)
    };
    match path.as_str() {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        _ => {
            if let Some(key) = keyed("metadata.labels['") {
                meta.labels.as_ref()?.get(&key).cloned()
            } else {
                meta.annotations
                    .as_ref()?
                    .get(&keyed("metadata.annotations['")?)
                    .cloned()
            }
        }
    }
}

fn mounts(w: &mut Tabbed, c: &Container) {
    let mut mounts = c.volume_mounts.clone().unwrap_or_default();
    if mounts.is_empty() {
        w.write(2, "Mounts:\t<none>\n");
        return;
    }
    w.write(2, "Mounts:\n");
    mounts.sort_by(|a, b| a.mount_path.cmp(&b.mount_path));
    for m in mounts {
        let mut flags = vec![
            if m.read_only == Some(true) {
                "ro"
            } else {
                "rw"
            }
            .to_string(),
        ];
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            flags.push(format!("path={sub:?}"));
        }
        w.write(
            3,
            &format!("{} from {} ({})\n", m.mount_path, m.name, flags.join(",")),
        );
    }
}
