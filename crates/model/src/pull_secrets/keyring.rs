//! Which logins apply to an image, as the kubelet's `BasicDockerKeyring` decides: each
//! login is filed under a key made of its location's host (with port) and path (`/v1/`
//! and `/v2/` prefixes dropped, a bare `/` none); the keys are searched from the most
//! specific (reverse sorted), and every key that matches the image's repository adds
//! its logins, in the order they were added. A key matches when its port equals the
//! image's, it has as many host labels, each label matches as a shell pattern
//! (`*.example.com`), and its path is a prefix of the repository's path. When no key
//! matches an image of Docker Hub, the logins of `index.docker.io` apply.

use std::collections::BTreeMap;

use super::docker_config::DockerLogin;
use super::glob;

/// Docker Hub's key (the docker CLI's `https://index.docker.io/v1/`).
const DEFAULT_REGISTRY_KEY: &str = "index.docker.io";

/// A login and where it came from, for messages.
#[derive(Clone, PartialEq, Eq)]
pub struct SourcedLogin {
    pub username: String,
    pub password: String,
    /// Where it came from: `secret "team/regcred"`.
    pub source: String,
}

impl std::fmt::Debug for SourcedLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password: these end up in logs.
        f.debug_struct("SourcedLogin")
            .field("username", &self.username)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Logins by registry location (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerKeyring {
    logins: BTreeMap<String, Vec<SourcedLogin>>,
}

impl DockerKeyring {
    /// Files `logins` (from `source`) under their keys. A location that is not a URL
    /// is skipped, as the kubelet skips it (it only logs it); the skipped are returned.
    pub fn add(&mut self, source: &str, logins: Vec<DockerLogin>) -> Vec<String> {
        let mut skipped = Vec::new();
        for login in logins {
            let Some(key) = key_of(&login.location) else {
                skipped.push(login.location);
                continue;
            };
            self.logins.entry(key).or_default().push(SourcedLogin {
                username: login.username,
                password: login.password,
                source: source.to_string(),
            });
        }
        skipped
    }

    pub fn is_empty(&self) -> bool {
        self.logins.is_empty()
    }

    /// The logins for `repository` (`host[:port]/path`, normalized: `docker.io/library/
    /// busybox`), the most specific key's first.
    pub fn lookup(&self, repository: &str) -> Vec<&SourcedLogin> {
        let Some(target) = Location::parse(repository) else {
            return Vec::new();
        };
        // Reverse sorted, so that `quay.io/team` is tried before `quay.io`.
        let found: Vec<&SourcedLogin> = self
            .logins
            .iter()
            .rev()
            .filter(|(key, _)| Location::parse(key).is_some_and(|k| k.covers(&target)))
            .flat_map(|(_, logins)| logins)
            .collect();
        if !found.is_empty() || !is_docker_hub(repository) {
            return found;
        }
        self.logins
            .get(DEFAULT_REGISTRY_KEY)
            .map(|l| l.iter().collect())
            .unwrap_or_default()
    }
}

/// The key a location is filed under: `host[:port]` and its path, without a scheme, a
/// `/v1/` or `/v2/` prefix, or a bare `/`. `None` when it is no URL.
fn key_of(location: &str) -> Option<String> {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let url = Location::parse(rest)?;
    let path = match url.path {
        p if p.starts_with("/v1/") || p.starts_with("/v2/") => &p[3..],
        p => p,
    };
    Some(match path {
        "" | "/" => url.host.to_string(),
        p => format!("{}{p}", url.host),
    })
}

/// A schemeless URL cut as Go's `url.Parse("https://" + s)` cuts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Location<'a> {
    /// `host[:port]`.
    host: &'a str,
    /// From the first `/` on (before any `?` or `#`), or empty.
    path: &'a str,
}

impl<'a> Location<'a> {
    fn parse(s: &'a str) -> Option<Location<'a>> {
        let end = s.find(['?', '#']).unwrap_or(s.len());
        let s = &s[..end];
        let (authority, path) = match s.find('/') {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        };
        // user:password@ before the host is not part of it.
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let bad = host.chars().any(|c| c.is_whitespace() || c.is_control())
            || host.chars().filter(|&c| c == '[').count() > 1;
        (!bad).then_some(Location { host, path })
    }

    /// The host's labels and its port (`""` when none), as Go's `SplitURL`.
    fn labels_and_port(&self) -> (Vec<&'a str>, &'a str) {
        let (host, port) = split_host_port(self.host).unwrap_or((self.host, ""));
        (host.split('.').collect(), port)
    }

    /// Whether this key (which may hold patterns) covers `target` (the kubelet's
    /// `URLsMatch`).
    fn covers(&self, target: &Location<'_>) -> bool {
        let (labels, port) = self.labels_and_port();
        let (target_labels, target_port) = target.labels_and_port();
        port == target_port
            && labels.len() == target_labels.len()
            && target.path.starts_with(self.path)
            && labels
                .iter()
                .zip(&target_labels)
                .all(|(pattern, label)| glob::matches(pattern, label))
    }
}

/// `host:port` or `[v6]:port` split as Go's `net.SplitHostPort`; `None` without a port.
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return after.strip_prefix(':').map(|port| (host, port));
    }
    let (host, port) = s.rsplit_once(':')?;
    // More than one colon without brackets is an address, not host:port.
    (!host.contains(':')).then_some((host, port))
}

/// Whether an image's repository is on Docker Hub (the kubelet's
/// `isDefaultRegistryMatch`).
fn is_docker_hub(repository: &str) -> bool {
    match repository.split_once('/') {
        None => !repository.is_empty(),
        Some(("", _)) => false,
        Some((first, _)) => {
            first == "docker.io" || first == "index.docker.io" || !first.contains(['.', ':'])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring(entries: &[(&str, &str, &str)]) -> DockerKeyring {
        let mut k = DockerKeyring::default();
        for &(source, location, user) in entries {
            let skipped = k.add(
                source,
                vec![DockerLogin {
                    location: location.into(),
                    username: user.into(),
                    password: format!("{user}-pw"),
                }],
            );
            assert!(skipped.is_empty(), "{location}");
        }
        k
    }

    fn users(k: &DockerKeyring, repository: &str) -> Vec<String> {
        k.lookup(repository)
            .iter()
            .map(|l| l.username.clone())
            .collect()
    }

    #[test]
    fn keys_drop_the_scheme_the_api_version_and_a_bare_slash() {
        assert_eq!(
            key_of("https://index.docker.io/v1/").unwrap(),
            "index.docker.io"
        );
        assert_eq!(
            key_of("http://r.example.com/v2/team").unwrap(),
            "r.example.com/team"
        );
        assert_eq!(key_of("127.0.0.1:5000").unwrap(), "127.0.0.1:5000");
        assert_eq!(key_of("quay.io/coreos/").unwrap(), "quay.io/coreos/");
        assert_eq!(key_of("r.example.com/").unwrap(), "r.example.com");
        assert_eq!(key_of("[::1]:5000").unwrap(), "[::1]:5000");
        assert_eq!(key_of("bad host"), None);
    }

    #[test]
    fn host_and_port_must_match_exactly() {
        let k = keyring(&[
            ("a", "127.0.0.1:5000", "five"),
            ("b", "registry.example.com", "plain"),
        ]);
        assert_eq!(users(&k, "127.0.0.1:5000/busybox"), ["five"]);
        assert!(users(&k, "127.0.0.1:5001/busybox").is_empty());
        assert!(users(&k, "127.0.0.1/busybox").is_empty());
        assert_eq!(users(&k, "registry.example.com/team/app"), ["plain"]);
        assert!(users(&k, "registry.example.com:443/team/app").is_empty());
        assert!(users(&k, "other.example.com/team/app").is_empty());
        assert!(users(&k, "example.com/team/app").is_empty());
    }

    #[test]
    fn path_prefixes_most_specific_first() {
        let k = keyring(&[
            ("a", "quay.io", "host"),
            ("b", "quay.io/coreos", "team"),
            ("c", "quay.io/coreos/etcd", "repo"),
        ]);
        assert_eq!(users(&k, "quay.io/coreos/etcd"), ["repo", "team", "host"]);
        assert_eq!(users(&k, "quay.io/coreos/flannel"), ["team", "host"]);
        // The path is a string prefix, as the kubelet's HasPrefix.
        assert_eq!(users(&k, "quay.io/coreosx/app"), ["team", "host"]);
        assert_eq!(users(&k, "quay.io/other/app"), ["host"]);
    }

    #[test]
    fn wildcards_match_one_label_each() {
        let k = keyring(&[
            ("a", "*.example.com", "wild"),
            ("b", "*.*.example.com:5000", "deep"),
        ]);
        assert_eq!(users(&k, "r.example.com/app"), ["wild"]);
        assert!(users(&k, "example.com/app").is_empty());
        assert!(users(&k, "a.b.example.com/app").is_empty());
        assert_eq!(users(&k, "a.b.example.com:5000/app"), ["deep"]);
        assert!(users(&k, "r.example.org/app").is_empty());
    }

    #[test]
    fn logins_of_one_key_keep_the_order_they_were_added_in() {
        let k = keyring(&[
            ("first", "registry.example.com", "one"),
            ("second", "https://registry.example.com/v2/", "two"),
        ]);
        let found = k.lookup("registry.example.com/app");
        let got: Vec<(&str, &str)> = found
            .iter()
            .map(|l| (l.username.as_str(), l.source.as_str()))
            .collect();
        assert_eq!(got, [("one", "first"), ("two", "second")]);
        assert_eq!(found[0].password, "one-pw");
    }

    #[test]
    fn docker_hub_falls_back_to_index_docker_io() {
        let k = keyring(&[("hub", "https://index.docker.io/v1/", "hub")]);
        assert_eq!(users(&k, "docker.io/library/busybox"), ["hub"]);
        assert_eq!(users(&k, "index.docker.io/library/busybox"), ["hub"]);
        assert!(users(&k, "quay.io/library/busybox").is_empty());
        let both = keyring(&[
            ("hub", "https://index.docker.io/v1/", "hub"),
            ("io", "docker.io", "io"),
        ]);
        // A matching key wins over the fall back.
        assert_eq!(users(&both, "docker.io/library/busybox"), ["io"]);
        assert!(is_docker_hub("library/busybox") && is_docker_hub("busybox"));
        assert!(!is_docker_hub("localhost:5000/busybox"));
    }

    #[test]
    fn ipv6_hosts_split_their_port() {
        let k = keyring(&[("a", "[::1]:5000", "six")]);
        assert_eq!(users(&k, "[::1]:5000/busybox"), ["six"]);
        assert!(users(&k, "[::1]:5001/busybox").is_empty());
    }
}
