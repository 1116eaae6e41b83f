//! Who calls the kubelet API and what a request asks for, in the API server's terms:
//! the kubelet authorizes every request on its port with a SubjectAccessReview of the
//! `nodes` resource of its own Node, the subresource chosen by the request's path
//! (`pkg/kubelet/server/auth.go`). Pure, so that the mapping is tested without a server.

use std::collections::BTreeMap;

/// An authenticated caller: from a client certificate (CN, O) or a TokenReview.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The resource attributes a SubjectAccessReview asks about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAccess {
    /// `get`, `create`, `update`, `patch`, `delete` (from the HTTP method).
    pub verb: String,
    /// Always `nodes`.
    pub resource: &'static str,
    /// `proxy` unless the path is one of the finer-grained ones (stats, metrics, log, spec).
    pub subresource: &'static str,
    /// The node's own name.
    pub name: String,
}

/// The kubelet's verb for an HTTP method; other methods get an empty verb, which no
/// RBAC rule allows.
pub fn verb_of(method: &str) -> &'static str {
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
}

/// `path` is `prefix` itself or below it (the kubelet's `isSubpath`).
fn is_subpath(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The subresource of `nodes/<name>` a request path is authorized as: exec, attach,
/// port-forward, container logs, pods and healthz are all `proxy` (so `nodes/proxy`
/// is what `kubectl logs`/`exec` need through the API server's client certificate).
pub fn subresource_of(path: &str) -> &'static str {
    if is_subpath(path, "/stats/") {
        "stats"
    } else if is_subpath(path, "/metrics") {
        "metrics"
    } else if is_subpath(path, "/logs/") {
        "log"
    } else if is_subpath(path, "/spec/") {
        "spec"
    } else {
        "proxy"
    }
}

/// What a request to the kubelet API on `node` asks for.
pub fn node_access(method: &str, path: &str, node: &str) -> NodeAccess {
    NodeAccess {
        verb: verb_of(method).to_string(),
        resource: "nodes",
        subresource: subresource_of(path),
        name: node.to_string(),
    }
}

/// The bearer token of an `Authorization` header value (`Bearer TOKEN`, the scheme
/// case-insensitive); `None` for any other scheme or an empty token.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_the_kubelets_subresources() {
        assert_eq!(subresource_of("/stats/summary"), "stats");
        assert_eq!(subresource_of("/stats"), "stats");
        assert_eq!(subresource_of("/metrics"), "metrics");
        assert_eq!(subresource_of("/metrics/cadvisor"), "metrics");
        assert_eq!(subresource_of("/metricsfoo"), "proxy");
        assert_eq!(subresource_of("/logs/messages"), "log");
        assert_eq!(subresource_of("/spec/"), "spec");
        for proxied in [
            "/containerLogs/default/web/app",
            "/exec/default/web/app",
            "/attach/default/web/app",
            "/portForward/default/web",
            "/pods",
            "/healthz",
            "/statsx",
        ] {
            assert_eq!(subresource_of(proxied), "proxy", "{proxied}");
        }
    }

    #[test]
    fn methods_map_to_verbs_and_the_node_is_named() {
        let a = node_access("POST", "/exec/ns/p/c", "n1");
        assert_eq!(
            a,
            NodeAccess {
                verb: "create".into(),
                resource: "nodes",
                subresource: "proxy",
                name: "n1".into()
            }
        );
        assert_eq!(node_access("GET", "/stats/summary", "n1").verb, "get");
        assert_eq!(verb_of("PUT"), "update");
        assert_eq!(verb_of("PATCH"), "patch");
        assert_eq!(verb_of("DELETE"), "delete");
        assert_eq!(verb_of("OPTIONS"), "");
    }

    #[test]
    fn bearer_tokens_only() {
        assert_eq!(bearer_token("Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic dXNlcjpw"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
