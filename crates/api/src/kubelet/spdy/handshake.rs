//! The HTTP side of a SPDY upgrade as the kubelet answers it: the client lists the
//! stream protocols it speaks in `X-Stream-Protocol-Version` headers (kubectl: one
//! header each, most preferred first); the answer is `101 Switching Protocols` naming
//! the one chosen, or 403 listing the ones served.

use hyper::Request;
use hyper::Response;
use hyper::body::Incoming;

use crate::server::{Body, respond};

/// An `Upgrade: SPDY/3.1` request?
pub fn is_spdy(req: &Request<Incoming>) -> bool {
    req.headers()
        .get_all(hyper::header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case(super::UPGRADE))
        })
}

/// The protocols the client offers, in its order.
pub fn offered(req: &Request<Incoming>) -> Vec<String> {
    req.headers()
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect()
}

/// The first protocol the client offers that is `served` (the client's order wins, as
/// in the kubelet's handshake).
pub fn choose<'a>(offered: &[String], served: &[&'a str]) -> Option<&'a str> {
    offered
        .iter()
        .find_map(|o| served.iter().find(|s| **s == o.as_str()).copied())
}

/// 403: nothing in common.
pub fn no_common_protocol(offered: &[String], served: &[&str]) -> Response<Body> {
    let mut resp = respond(
        403,
        "text/plain; charset=utf-8",
        format!(
            "unable to upgrade: no common stream protocol: offered {offered:?}, served {served:?}\n"
        )
        .into_bytes(),
    );
    if let Ok(v) = served.join(", ").parse() {
        resp.headers_mut()
            .insert("x-accepted-stream-protocol-versions", v);
    }
    resp
}

/// 101 to SPDY/3.1 with `protocol`.
pub fn switching_protocols(protocol: &str) -> Response<Body> {
    let mut resp = respond(101, "text/plain", Vec::new());
    let headers = resp.headers_mut();
    headers.remove(hyper::header::CONTENT_TYPE);
    for (name, value) in [
        ("connection", "Upgrade"),
        ("upgrade", super::UPGRADE),
        ("x-stream-protocol-version", protocol),
    ] {
        if let Ok(v) = value.parse() {
            headers.insert(name, v);
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_order_picks_the_protocol() {
        let served = ["v4.channel.k8s.io", "v3.channel.k8s.io"];
        let offer = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            choose(
                &offer(&[
                    "v5.channel.k8s.io",
                    "v3.channel.k8s.io",
                    "v4.channel.k8s.io"
                ]),
                &served
            ),
            Some("v3.channel.k8s.io")
        );
        assert_eq!(choose(&offer(&["channel.k8s.io"]), &served), None);
        assert_eq!(choose(&[], &served), None);
    }
}
