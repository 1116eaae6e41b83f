//! Reads what the Node reports about the host, once at start (as the kubelet reads
//! cAdvisor's machine info).

use std::net::{IpAddr, SocketAddr, UdpSocket};

use podhost_model::node::HostFacts;

/// Reads the host's facts. `node_ips` are `--node-ip` (empty: the source addresses of
/// the default routes); `memory_bytes` (MemTotal) and `nodefs_bytes` (the size of the
/// root dir's filesystem) are the daemon's readings, which it already takes for QoS and
/// statistics.
pub fn read(node_ips: &[IpAddr], memory_bytes: i64, nodefs_bytes: i64) -> HostFacts {
    HostFacts {
        cpus: online_cpus(),
        memory_bytes,
        ephemeral_storage_bytes: nodefs_bytes,
        machine_id: first_line("/etc/machine-id"),
        system_uuid: first_line("/sys/class/dmi/id/product_uuid").to_lowercase(),
        boot_id: first_line("/proc/sys/kernel/random/boot_id"),
        kernel_version: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        os_image: os_image(),
        architecture: go_arch(std::env::consts::ARCH).to_string(),
        hostname: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        internal_ips: if node_ips.is_empty() {
            default_route_sources()
        } else {
            node_ips.iter().map(IpAddr::to_string).collect()
        },
    }
}

/// Logical CPUs, counted as cAdvisor counts them (`processor` lines).
fn online_cpus() -> u32 {
    let counted = std::fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    u32::try_from(counted).unwrap_or(u32::MAX).max(1)
}

fn first_line(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.lines().next().unwrap_or("").trim().to_string())
        .unwrap_or_default()
}

fn os_image() -> String {
    let text = std::fs::read_to_string("/etc/os-release")
        .or_else(|_| std::fs::read_to_string("/usr/lib/os-release"))
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".to_string())
}

/// The architecture as Go (and so the API's `kubernetes.io/arch`) spells it.
pub fn go_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// The addresses the host would send from on its default routes (IPv4 first): a
/// connected UDP socket sends nothing, it only asks the kernel's routing.
fn default_route_sources() -> Vec<String> {
    let probes: [(&str, SocketAddr); 2] = [
        ("0.0.0.0:0", SocketAddr::from(([192, 0, 2, 1], 9))),
        (
            "[::]:0",
            SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1], 9)),
        ),
    ];
    probes
        .iter()
        .filter_map(|(bind, target)| {
            let socket = UdpSocket::bind(bind).ok()?;
            socket.connect(target).ok()?;
            let ip = socket.local_addr().ok()?.ip();
            (!ip.is_unspecified() && !ip.is_loopback()).then(|| ip.to_string())
        })
        .collect()
}
