//! What plugins print: an ADD result (interfaces, ips, routes, dns — the 0.3.0+ shape),
//! an error object (`{"code","msg","details"}`), and a VERSION answer. The raw result is
//! kept as JSON too, since the next plugin and the later CHECK/DEL get it verbatim.

use std::net::IpAddr;

use serde::Deserialize;
use serde_json::Value;

use super::CniFormatError;

/// The parts of an ADD result podhost reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CniResult {
    #[serde(default, rename = "cniVersion")]
    pub cni_version: String,
    #[serde(default)]
    pub interfaces: Vec<Interface>,
    #[serde(default)]
    pub ips: Vec<IpConfig>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Interface {
    pub name: String,
    #[serde(default)]
    pub mac: String,
    /// The netns path for an interface inside the pod; empty for host-side ones.
    #[serde(default)]
    pub sandbox: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IpConfig {
    /// CIDR notation, `10.22.0.5/16`.
    pub address: String,
    #[serde(default)]
    pub gateway: Option<String>,
    /// Index into `interfaces`.
    #[serde(default)]
    pub interface: Option<usize>,
}

/// A plugin's error object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PluginError {
    #[serde(default)]
    pub code: u32,
    #[serde(default)]
    pub msg: String,
    #[serde(default)]
    pub details: String,
}

impl PluginError {
    /// `msg; details` as libcni's Error() joins them (just `msg` without details).
    pub fn message(&self) -> String {
        match (self.msg.is_empty(), self.details.is_empty()) {
            (_, true) => self.msg.clone(),
            (true, false) => self.details.clone(),
            (false, false) => format!("{}; {}", self.msg, self.details),
        }
    }
}

/// The error object in a failed plugin's stdout, if it printed one.
pub fn parse_plugin_error(stdout: &[u8]) -> Option<PluginError> {
    let e: PluginError = serde_json::from_slice(stdout).ok()?;
    (e.code != 0 || !e.msg.is_empty()).then_some(e)
}

/// Parses `plugin`'s ADD result: the raw JSON (handed on) and the typed view.
pub fn parse_result(plugin: &str, stdout: &[u8]) -> Result<(Value, CniResult), CniFormatError> {
    let bad = |problem: String| CniFormatError::Output {
        plugin: plugin.to_string(),
        what: "a result",
        problem,
        output: String::from_utf8_lossy(stdout).chars().take(2000).collect(),
    };
    let raw: Value = serde_json::from_slice(stdout).map_err(|e| bad(e.to_string()))?;
    if !raw.is_object() {
        return Err(bad("not a JSON object".into()));
    }
    let typed: CniResult = serde_json::from_value(raw.clone()).map_err(|e| bad(e.to_string()))?;
    for ip in &typed.ips {
        parse_cidr_address(&ip.address)
            .ok_or_else(|| bad(format!("address {:?} is not an IP/prefix", ip.address)))?;
        if let Some(i) = ip.interface
            && i >= typed.interfaces.len()
        {
            return Err(bad(format!(
                "ip {} names interface {i}, which is not listed",
                ip.address
            )));
        }
    }
    Ok((raw, typed))
}

/// The address part of `10.22.0.5/16`.
pub fn parse_cidr_address(cidr: &str) -> Option<IpAddr> {
    let (addr, prefix) = cidr.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some(addr)
}

impl CniResult {
    /// The pod's addresses, IPv4 first, then IPv6, each in the result's order: those on
    /// an interface inside the pod (or on no named interface).
    pub fn pod_ips(&self) -> Vec<IpAddr> {
        let in_pod = |ip: &IpConfig| match ip.interface {
            Some(i) => self
                .interfaces
                .get(i)
                .is_some_and(|iface| !iface.sandbox.is_empty()),
            None => true,
        };
        let addrs: Vec<IpAddr> = self
            .ips
            .iter()
            .filter(|ip| in_pod(ip))
            .filter_map(|ip| parse_cidr_address(&ip.address))
            .collect();
        let (v4, v6): (Vec<IpAddr>, Vec<IpAddr>) = addrs.into_iter().partition(IpAddr::is_ipv4);
        v4.into_iter().chain(v6).collect()
    }

    /// The pod-side interface's name: the first with a sandbox that is `ifname`, else
    /// the first with any sandbox.
    pub fn pod_interface(&self, ifname: &str) -> Option<String> {
        let in_pod = || self.interfaces.iter().filter(|i| !i.sandbox.is_empty());
        in_pod()
            .find(|i| i.name == ifname)
            .or_else(|| in_pod().next())
            .map(|i| i.name.clone())
    }
}

/// The `supportedVersions` of a VERSION answer.
pub fn parse_supported_versions(
    plugin: &str,
    stdout: &[u8],
) -> Result<Vec<String>, CniFormatError> {
    #[derive(Deserialize)]
    struct VersionAnswer {
        #[serde(rename = "supportedVersions")]
        supported_versions: Vec<String>,
    }
    serde_json::from_slice::<VersionAnswer>(stdout)
        .map(|a| a.supported_versions)
        .map_err(|e| CniFormatError::Output {
            plugin: plugin.to_string(),
            what: "a VERSION answer",
            problem: e.to_string(),
            output: String::from_utf8_lossy(stdout).chars().take(2000).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape Debian's bridge plugin 1.1.1 prints for a dual-stack ADD.
    const BRIDGE_RESULT: &str = r#"{
      "cniVersion": "1.0.0",
      "interfaces": [
        {"name": "cni-t0", "mac": "aa:bb:cc:00:00:01"},
        {"name": "veth1234", "mac": "aa:bb:cc:00:00:02"},
        {"name": "eth0", "mac": "aa:bb:cc:00:00:03", "sandbox": "/run/netns/p1"}
      ],
      "ips": [
        {"interface": 2, "address": "fd00:10::5/64", "gateway": "fd00:10::1"},
        {"interface": 2, "address": "10.99.0.5/24", "gateway": "10.99.0.1"},
        {"interface": 0, "address": "10.99.0.1/24"}
      ],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dns": {}
    }"#;

    #[test]
    fn a_result_gives_the_pod_addresses_ipv4_first_and_its_interface() {
        let (raw, r) = parse_result("bridge", BRIDGE_RESULT.as_bytes()).unwrap();
        assert_eq!(
            raw["routes"][0]["dst"], "0.0.0.0/0",
            "the raw result is kept whole"
        );
        let ips: Vec<String> = r.pod_ips().iter().map(ToString::to_string).collect();
        assert_eq!(
            ips,
            ["10.99.0.5", "fd00:10::5"],
            "the bridge's own address is not the pod's"
        );
        assert_eq!(r.pod_interface("eth0").as_deref(), Some("eth0"));
        assert_eq!(r.pod_interface("net1").as_deref(), Some("eth0"));
    }

    #[test]
    fn malformed_results_name_the_plugin() {
        let cases = [
            ("not json", "expected"),
            ("[]", "not a JSON object"),
            (r#"{"ips":[{"address":"10.0.0.1"}]}"#, "not an IP/prefix"),
            (
                r#"{"ips":[{"address":"10.0.0.1/24","interface":3}]}"#,
                "names interface 3",
            ),
        ];
        for (out, want) in cases {
            let err = parse_result("weird", out.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("\"weird\"") && err.contains(want),
                "{out}: {err}"
            );
        }
    }

    #[test]
    fn plugin_errors_keep_msg_and_details_verbatim() {
        let e = parse_plugin_error(
            br#"{"code":999,"msg":"invalid CIDR address: 10.0.0.0/99","details":"more"}"#,
        )
        .unwrap();
        assert_eq!(e.code, 999);
        assert_eq!(e.message(), "invalid CIDR address: 10.0.0.0/99; more");
        assert_eq!(parse_plugin_error(b"{}"), None);
        assert_eq!(parse_plugin_error(b"panic: oops"), None);
    }

    #[test]
    fn version_answers_list_supported_versions() {
        let v = parse_supported_versions(
            "bridge",
            br#"{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}"#,
        )
        .unwrap();
        assert_eq!(v, ["0.4.0", "1.0.0"]);
        assert!(parse_supported_versions("x", b"{}").is_err());
    }
}
