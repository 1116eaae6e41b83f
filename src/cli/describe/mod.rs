//! `podhost describe pod`: kubectl's `describe pod` — its sections in its order, laid
//! out as its tabwriter lays them out — from the pod and its events.

mod containers;
mod node;
mod pod;
mod tabbed;
mod volumes;

pub use node::render_node;
pub use pod::render_describe;
pub use tabbed::layout;

/// kubectl's time in describe: RFC 1123 with a numeric zone (`Mon, 30 Nov 2026 20:55:57 +0000`).
fn rfc1123z(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> String {
    t.0.strftime("%a, %d %b %Y %H:%M:%S %z").to_string()
}

#[cfg(test)]
mod tests;
