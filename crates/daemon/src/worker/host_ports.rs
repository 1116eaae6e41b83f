//! Host-port admission: the kubelet's NodePorts predicate among the pods this node has
//! admitted. Two pods may not publish the same protocol and port on overlapping host
//! addresses; the later one is rejected (phase Failed, reason `NodePorts`) and never
//! started, with an event naming the pod that holds the port.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::security::Rejection;
use podhost_model::host_ports::{HostPort, first_conflict};

/// The kubelet's reason for a pod whose host ports are taken.
pub const REASON: &str = podhost_model::admission::HOST_PORTS_REASON;

/// The host ports of the admitted pods, by uid.
#[derive(Debug, Default, Clone)]
pub struct HostPortRegistry {
    held: Arc<Mutex<BTreeMap<String, Holder>>>,
}

#[derive(Debug)]
struct Holder {
    pod: String,
    ports: Vec<HostPort>,
}

impl HostPortRegistry {
    /// Admits `ports` of pod `uid` (named `pod`) unless another admitted pod holds one of
    /// them. With `already_admitted` (a pod a previous daemon admitted, adopted now) the
    /// ports are taken whatever the others hold: a running pod is never displaced by one
    /// that happens to be re-admitted first.
    pub fn reserve(
        &self,
        uid: &str,
        pod: &str,
        ports: &[HostPort],
        already_admitted: bool,
    ) -> Result<(), Rejection> {
        let mut held = self.lock();
        if !already_admitted {
            for (other_uid, holder) in held.iter() {
                if other_uid == uid {
                    continue;
                }
                if let Some((wanted, taken)) = first_conflict(ports, &holder.ports) {
                    return Err(Rejection {
                        reason: REASON.into(),
                        message: format!(
                            "Predicate NodePorts failed: node(s) didn't have free ports for the \
                             requested pod ports: {} is published by pod {} ({}); change or \
                             remove one of the hostPorts",
                            wanted.describe(),
                            holder.pod,
                            taken.describe()
                        ),
                    });
                }
            }
        }
        if !ports.is_empty() {
            held.insert(
                uid.to_string(),
                Holder {
                    pod: pod.to_string(),
                    ports: ports.to_vec(),
                },
            );
        }
        Ok(())
    }

    /// Frees the pod's ports (it has fully terminated).
    pub fn release(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Holder>> {
        // A panic while holding it cannot leave the map half-updated: every change is
        // one insert or remove.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use podhost_model::host_ports::Protocol;

    fn port(host_port: u16) -> HostPort {
        HostPort {
            host_ip: None,
            host_port,
            container_port: 80,
            protocol: Protocol::Tcp,
            container_index: 0,
        }
    }

    #[test]
    fn the_second_pod_on_a_port_is_rejected_until_the_first_goes() {
        let r = HostPortRegistry::default();
        r.reserve("a", "web-a", &[port(8080)], false).unwrap();
        let err = r.reserve("b", "web-b", &[port(8080)], false).unwrap_err();
        assert_eq!(err.reason, "NodePorts");
        assert!(
            err.message
                .contains("0.0.0.0:8080/TCP is published by pod web-a"),
            "{}",
            err.message
        );
        r.reserve("c", "web-c", &[port(8081)], false).unwrap();
        // Re-admitting the same pod (a daemon restart) is fine.
        r.reserve("a", "web-a", &[port(8080)], false).unwrap();
        r.release("a");
        r.reserve("b", "web-b", &[port(8080)], false).unwrap();
    }

    #[test]
    fn an_adopted_pod_keeps_its_ports() {
        let r = HostPortRegistry::default();
        r.reserve("new", "new", &[port(9000)], false).unwrap();
        r.reserve("old", "old", &[port(9000)], true).unwrap();
        assert!(r.reserve("third", "third", &[port(9000)], false).is_err());
    }
}
