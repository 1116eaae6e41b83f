//! What a plugin is given: its stdin (the plugin's config object with the keys the
//! runtime sets: `name`, `cniVersion`, `prevResult`, `runtimeConfig`), the `CNI_ARGS`
//! string, and the `portMappings` capability's entries built from a pod's hostPorts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::config::{ConfigList, PluginConfig};
use crate::host_ports::HostPort;

/// One entry of `runtimeConfig.portMappings` (the CNI conventions' shape).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    pub host_port: u16,
    pub container_port: u16,
    /// Lower case: `tcp`, `udp`, `sctp`.
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "hostIP")]
    pub host_ip: Option<String>,
}

impl PortMapping {
    pub fn from_host_port(p: &HostPort) -> Self {
        Self {
            host_port: p.host_port,
            container_port: p.container_port,
            protocol: p.protocol.lower().to_string(),
            host_ip: p.host_ip.map(|ip| ip.to_string()),
        }
    }
}

/// The runtime's side of a plugin's config: the capability arguments it offers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeArgs {
    pub port_mappings: Vec<PortMapping>,
}

/// The JSON `plugin` reads on stdin: its config object with `name` and `cniVersion` of
/// the list, `prevResult` when given, and `runtimeConfig` holding the capabilities the
/// plugin declares and the runtime has (libcni's buildOneConfig/injectRuntimeConfig).
pub fn plugin_stdin(
    list: &ConfigList,
    plugin: &PluginConfig,
    prev_result: Option<&Value>,
    runtime: &RuntimeArgs,
) -> Value {
    let mut conf: Map<String, Value> = plugin.raw.clone();
    conf.insert("name".into(), Value::String(list.name.clone()));
    conf.insert(
        "cniVersion".into(),
        Value::String(list.cni_version_text.clone()),
    );
    match prev_result {
        Some(prev) => {
            conf.insert("prevResult".into(), prev.clone());
        }
        None => {
            conf.remove("prevResult");
        }
    }
    if plugin.wants_port_mappings {
        let mappings = serde_json::to_value(&runtime.port_mappings).unwrap_or(Value::Null);
        let rc = conf
            .entry("runtimeConfig")
            .or_insert_with(|| Value::Object(Map::new()));
        if !rc.is_object() {
            *rc = Value::Object(Map::new());
        }
        if let Value::Object(rc) = rc {
            rc.insert("portMappings".into(), mappings);
        }
    }
    Value::Object(conf)
}

/// The identity of a pod given to plugins in `CNI_ARGS`, as the kubelet passes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodArgs {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodArgs {
    /// `IgnoreUnknown=1;K8S_POD_NAMESPACE=..;K8S_POD_NAME=..;K8S_POD_INFRA_CONTAINER_ID=..;K8S_POD_UID=..`
    /// (podhost has no infra container: the pod's uid stands for it, as for CNI_CONTAINERID).
    pub fn cni_args(&self) -> String {
        format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={}",
            self.namespace, self.name, self.uid, self.uid
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::config::parse_config_file;
    use crate::host_ports::Protocol;
    use std::path::Path;

    fn list() -> ConfigList {
        parse_config_file(
            Path::new("n.conflist"),
            br#"{"cniVersion":"1.0.0","name":"pods","plugins":[
                {"type":"bridge","name":"ignored","cniVersion":"0.1.0"},
                {"type":"portmap","capabilities":{"portMappings":true},"runtimeConfig":{"other":1}}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn the_list_name_and_version_override_the_plugins_own() {
        let l = list();
        let stdin = plugin_stdin(&l, &l.plugins[0], None, &RuntimeArgs::default());
        assert_eq!(stdin["name"], "pods");
        assert_eq!(stdin["cniVersion"], "1.0.0");
        assert!(stdin.get("prevResult").is_none());
        assert!(
            stdin.get("runtimeConfig").is_none(),
            "bridge declares no capability"
        );
    }

    #[test]
    fn port_mappings_go_only_to_plugins_that_declare_the_capability() {
        let l = list();
        let port = HostPort {
            host_ip: Some("10.1.2.3".parse().unwrap()),
            host_port: 8080,
            container_port: 80,
            protocol: Protocol::Udp,
            container_index: 0,
        };
        let rt = RuntimeArgs {
            port_mappings: vec![PortMapping::from_host_port(&port)],
        };
        let prev = serde_json::json!({"cniVersion":"1.0.0","ips":[]});
        let stdin = plugin_stdin(&l, &l.plugins[1], Some(&prev), &rt);
        assert_eq!(stdin["prevResult"], prev);
        assert_eq!(
            stdin["runtimeConfig"]["other"], 1,
            "the plugin's own keys stay"
        );
        assert_eq!(
            stdin["runtimeConfig"]["portMappings"],
            serde_json::json!([{"hostPort":8080,"containerPort":80,"protocol":"udp","hostIP":"10.1.2.3"}])
        );
        let wildcard = PortMapping::from_host_port(&HostPort {
            host_ip: None,
            ..port
        });
        assert!(
            serde_json::to_value(wildcard)
                .unwrap()
                .get("hostIP")
                .is_none()
        );
    }

    #[test]
    fn cni_args_carry_the_pod_identity_as_the_kubelet_does() {
        let args = PodArgs {
            namespace: "default".into(),
            name: "web".into(),
            uid: "1234-ab".into(),
        };
        assert_eq!(
            args.cni_args(),
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;\
             K8S_POD_INFRA_CONTAINER_ID=1234-ab;K8S_POD_UID=1234-ab"
        );
    }
}
