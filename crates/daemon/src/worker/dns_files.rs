//! The pod's `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname`: made as the kubelet
//! makes them (`model::dns`), written into the pod's directory when its sandbox is set
//! up, and bind-mounted into each of its containers.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Container;

use super::context::{Ctx, PodInfo};
use super::error::WorkerError;
use podhost_model::dns::{self, DnsSettings, PodDnsInput, ResolvConf};
use podhost_rooted::RootedDir;
use podhost_status::EventKind;

/// The pod's hosts file in its directory (the kubelet's name).
pub const HOSTS_FILE: &str = "etc-hosts";
/// The pod's resolv.conf in its directory.
pub const RESOLV_CONF_FILE: &str = "resolv.conf";
/// The pod's hostname file in its directory.
pub const HOSTNAME_FILE: &str = "hostname";
/// Where systemd-resolved lists the servers behind its 127.0.0.53 stub.
pub const SYSTEMD_RESOLVED_UPSTREAM: &str = "/run/systemd/resolve/resolv.conf";
/// The node's hosts file, a hostNetwork pod's base.
const NODE_HOSTS: &str = "/etc/hosts";

/// The node's DNS settings and what the daemon has said about them once.
#[derive(Debug)]
pub struct NodeDns {
    pub settings: DnsSettings,
    /// Read instead of the host's resolv.conf when that one names only loopback servers.
    pub resolved_upstream: PathBuf,
    said_upstream: AtomicBool,
    said_missing_cluster_dns: AtomicBool,
}

impl NodeDns {
    pub fn new(settings: DnsSettings) -> Self {
        Self {
            settings,
            resolved_upstream: PathBuf::from(SYSTEMD_RESOLVED_UPSTREAM),
            said_upstream: AtomicBool::new(false),
            said_missing_cluster_dns: AtomicBool::new(false),
        }
    }
}

/// Writes `<pod dir>/etc-hosts`, `resolv.conf` and `hostname` (each atomically, and only
/// when its content changed, so that a restarted daemon leaves the files its running
/// containers have mounted alone). Returns the warnings to emit as the pod's
/// `DNSConfigForming` events. A ClusterFirst pod without `--cluster-dns` is a node
/// event, once per daemon.
#[expect(
    clippy::result_large_err,
    reason = "the worker's one error type, as its callers take it; built once per sandbox"
)]
pub fn write_pod_dns_files(
    ctx: &Ctx,
    pod: &PodInfo,
    pod_ips: &[IpAddr],
) -> Result<Vec<String>, WorkerError> {
    let settings = &ctx.dns.settings;
    let spec = pod.pod.spec.clone().unwrap_or_default();
    let dns_err = |source| WorkerError::Dns {
        pod: pod.name.clone(),
        source,
    };
    let names = pod.host_name(settings).map_err(dns_err)?;
    let aliases = spec.host_aliases.as_deref().unwrap_or_default();
    // A host without the file (a minimal appliance, an initramfs) is said, not fatal.
    let mut missing = Vec::new();
    let (hosts, hostname) = if pod.host_network {
        // not a container's path: the node's own /etc/hosts
        let node_hosts = match std::fs::read_to_string(NODE_HOSTS) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.push(format!(
                    "the host has no {NODE_HOSTS}: the pod's hosts file holds only its hostAliases"
                ));
                String::new()
            }
            Err(source) => {
                return Err(host_file_error(
                    pod,
                    NODE_HOSTS,
                    "hosts file",
                    "fix the file",
                    source,
                ));
            }
        };
        let node_name = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default();
        (
            dns::host_network_hosts_file(&node_hosts, aliases),
            node_name,
        )
    } else {
        (
            dns::managed_hosts_file(pod_ips, &names, aliases),
            pod.hostname(settings).map_err(dns_err)?,
        )
    };
    let policy = spec.dns_policy.as_deref();
    let host = match (&settings.resolv_conf, policy) {
        // None takes nothing of the host: a broken host file must not stop the pod.
        (_, Some("None")) | (None, _) => None,
        (Some(path), _) => match host_resolv_conf(ctx, pod, path) {
            Ok(conf) => Some(conf),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.push(format!(
                    "the host's resolv.conf {} does not exist: the pod gets no nameservers \
                     from the host; create it, or point --resolv-conf at another file",
                    path.display()
                ));
                Some(ResolvConf::default())
            }
            Err(source) => {
                return Err(host_file_error(
                    pod,
                    path,
                    "resolv.conf",
                    "fix it, or point --resolv-conf at another file (\"\" for none)",
                    source,
                ));
            }
        },
    };
    let node_ips: Vec<IpAddr> = ctx
        .host_ips
        .iter()
        .filter_map(|ip| ip.parse().ok())
        .collect();
    let pod_dns = dns::pod_dns(&PodDnsInput {
        policy,
        host_network: pod.host_network,
        dns_config: spec.dns_config.as_ref(),
        namespace: &pod.namespace,
        settings,
        host: host.as_ref(),
        node_ips: &node_ips,
    });
    if pod_dns.missing_cluster_dns
        && !ctx
            .dns
            .said_missing_cluster_dns
            .swap(true, Ordering::Relaxed)
    {
        ctx.store.node_event(
            EventKind::Warning,
            "MissingClusterDNS",
            dns::policy::MISSING_CLUSTER_DNS.to_string(),
        );
    }
    let write_err = |source| WorkerError::DnsFiles {
        pod: pod.name.clone(),
        source,
    };
    let dir = ctx.layout.pod_dir(&pod.uid);
    // not a container's path: the pod dir, podhost's own
    std::fs::create_dir_all(&dir)
        .map_err(|e| write_err(podhost_rooted::RootedError::io("create", &dir, e)))?;
    let dir = RootedDir::open(&dir).map_err(write_err)?;
    write_if_changed(&dir, HOSTS_FILE, hosts.as_bytes()).map_err(write_err)?;
    write_if_changed(&dir, RESOLV_CONF_FILE, pod_dns.conf.render().as_bytes())
        .map_err(write_err)?;
    write_if_changed(&dir, HOSTNAME_FILE, format!("{hostname}\n").as_bytes()).map_err(write_err)?;
    missing.extend(pod_dns.warnings.into_iter().map(|w| w.message));
    Ok(missing)
}

/// The pod's files for container `c`, (host path, container path): each one that exists,
/// unless the container mounts a volume at that path itself (as the kubelet leaves
/// /etc/hosts alone then).
pub fn container_dns_binds(ctx: &Ctx, pod: &PodInfo, c: &Container) -> Vec<(PathBuf, String)> {
    let own: HashSet<&str> = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.trim_end_matches('/'))
        .collect();
    let dir = ctx.layout.pod_dir(&pod.uid);
    [
        (HOSTS_FILE, "/etc/hosts"),
        (RESOLV_CONF_FILE, "/etc/resolv.conf"),
        (HOSTNAME_FILE, "/etc/hostname"),
    ]
    .into_iter()
    .filter(|(_, dest)| !own.contains(dest))
    .map(|(file, dest)| (dir.join(file), dest.to_string()))
    // not a container's path: the pod dir's files are podhost's entries (their
    // content is the containers')
    .filter(|(host, _)| host.exists())
    .collect()
}

fn host_file_error(
    pod: &PodInfo,
    path: impl Into<PathBuf>,
    what: &'static str,
    hint: &'static str,
    source: std::io::Error,
) -> WorkerError {
    WorkerError::HostFile {
        pod: pod.name.clone(),
        path: path.into(),
        what,
        hint,
        source,
    }
}

/// The host's resolver configuration for this pod, with systemd-resolved's upstream
/// list in place of a loopback-only file for a pod with its own network namespace
/// (said once in the log).
fn host_resolv_conf(ctx: &Ctx, pod: &PodInfo, path: &Path) -> std::io::Result<ResolvConf> {
    let (conf, replaced_by) =
        read_host_resolv_conf(path, &ctx.dns.resolved_upstream, !pod.host_network)?;
    if let Some(upstream) = replaced_by
        && !ctx.dns.said_upstream.swap(true, Ordering::Relaxed)
    {
        tracing::info!(
            resolv_conf = %path.display(),
            upstream = %upstream.display(),
            "the host's resolv.conf names only loopback nameservers (a local stub such as systemd-resolved's), which a pod's own network namespace cannot reach; pods use the stub's upstream servers instead"
        );
    }
    Ok(conf)
}

/// Reads `primary`; when `own_netns` and it names only loopback servers, `upstream`
/// instead if that names any (returned as the second value).
fn read_host_resolv_conf(
    primary: &Path,
    upstream: &Path,
    own_netns: bool,
) -> std::io::Result<(ResolvConf, Option<PathBuf>)> {
    // not a container's path: the host's resolver configuration
    let conf = dns::parse_resolv_conf(&std::fs::read_to_string(primary)?);
    if own_netns
        && conf.only_loopback_nameservers()
        // not a container's path: systemd-resolved's file on the host
        && let Ok(text) = std::fs::read_to_string(upstream)
    {
        let behind = dns::parse_resolv_conf(&text);
        if !behind.nameservers.is_empty() && !behind.only_loopback_nameservers() {
            return Ok((behind, Some(upstream.to_path_buf())));
        }
    }
    Ok((conf, None))
}

/// Writes `bytes` to the file `name` of the pod dir atomically unless it already holds
/// exactly them. The containers can write these files' content (they are bind-mounted
/// read-write, as the kubelet's): the comparison reads at most one byte more than
/// `bytes`, through the rooted layer, so a container that grows its /etc/hosts to
/// gigabytes costs the daemon nothing. Boot-scoped (no fsync): a pod's sandbox, and so
/// these files, is made again after the host restarts.
fn write_if_changed(
    dir: &RootedDir,
    name: &str,
    bytes: &[u8],
) -> Result<(), podhost_rooted::RootedError> {
    let limit = u64::try_from(bytes.len())
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    if dir.read_file(name, limit).is_ok_and(|now| now == bytes) {
        return Ok(());
    }
    dir.replace_file(name, bytes, 0o644, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_loopback_stub_is_replaced_by_its_upstream_for_pods_with_their_own_network() {
        let dir = tempfile::tempdir().unwrap();
        let stub = file(
            dir.path(),
            "stub",
            "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n",
        );
        let upstream = file(dir.path(), "upstream", "nameserver 192.0.2.1\nsearch lan\n");
        let (conf, replaced) = read_host_resolv_conf(&stub, &upstream, true).unwrap();
        assert_eq!(conf.nameservers, ["192.0.2.1"]);
        assert_eq!(replaced.as_deref(), Some(upstream.as_path()));
        // A hostNetwork pod reaches the stub: the host's file as it is.
        let (conf, replaced) = read_host_resolv_conf(&stub, &upstream, false).unwrap();
        assert_eq!(conf.nameservers, ["127.0.0.53"]);
        assert!(replaced.is_none());
        // No upstream file (not systemd-resolved), or one without servers: unchanged.
        let missing = dir.path().join("missing");
        let (conf, replaced) = read_host_resolv_conf(&stub, &missing, true).unwrap();
        assert_eq!(
            (conf.nameservers.as_slice(), replaced),
            (&["127.0.0.53".to_string()][..], None)
        );
        let empty = file(dir.path(), "empty", "# nothing\n");
        let (_, replaced) = read_host_resolv_conf(&stub, &empty, true).unwrap();
        assert!(replaced.is_none());
        // A file with a real server is never replaced.
        let real = file(
            dir.path(),
            "real",
            "nameserver 127.0.0.53\nnameserver 10.0.0.2\n",
        );
        let (conf, replaced) = read_host_resolv_conf(&real, &upstream, true).unwrap();
        assert_eq!(conf.nameservers, ["127.0.0.53", "10.0.0.2"]);
        assert!(replaced.is_none());
        // A missing primary is an error (the pod's event names it).
        assert!(read_host_resolv_conf(&missing, &upstream, true).is_err());
    }

    #[test]
    fn unchanged_content_keeps_the_file_and_its_inode() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = RootedDir::open(tmp.path()).unwrap();
        let path = tmp.path().join("etc-hosts");
        write_if_changed(&dir, "etc-hosts", b"a\n").unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        write_if_changed(&dir, "etc-hosts", b"a\n").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino);
        write_if_changed(&dir, "etc-hosts", b"b\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"b\n");
        // Content a container appended (beyond what podhost wrote) is a change too.
        std::fs::write(&path, b"b\nmore").unwrap();
        write_if_changed(&dir, "etc-hosts", b"b\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"b\n");
        // A link planted in its place is replaced (renamed over), its target untouched.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("f"), b"keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), &path).unwrap();
        write_if_changed(&dir, "etc-hosts", b"c\n").unwrap();
        assert_eq!(std::fs::read(outside.path().join("f")).unwrap(), b"keep");
        assert_eq!(std::fs::read(&path).unwrap(), b"c\n");
    }
}
