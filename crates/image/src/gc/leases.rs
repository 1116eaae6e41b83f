//! Leases on images a starting pod has selected (kubernetes#18140: the kubelet's image
//! GC could delete an image between the pod choosing it and its container existing).
//!
//! The worker takes a lease before it resolves an image and drops it once the container
//! exists (from then on the container itself keeps the image in use). Image GC counts
//! every held lease as in use; it evaluates the set only after it holds the GC barrier,
//! and [`crate::ImageStore::resolve`] holds the barrier's shared side, so a
//! lease taken before a resolve is always seen by a GC pass that could delete the image.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use super::InUse;
use crate::normalize_reference;

/// Thread-safe set of leased image references (normalized), counted: two pods leasing
/// the same image hold it until both leases are dropped. Clones share the set.
#[derive(Debug, Clone, Default)]
pub struct ImageLeases {
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// One lease; dropping it releases the image (when no other lease holds it).
#[derive(Debug)]
#[must_use = "the lease is released as soon as it is dropped"]
pub struct ImageLease {
    held: Arc<Mutex<HashMap<String, usize>>>,
    reference: String,
}

fn lock(m: &Mutex<HashMap<String, usize>>) -> MutexGuard<'_, HashMap<String, usize>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ImageLeases {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leases `reference` (a reference, normalized here, or a `sha256:` manifest digest).
    pub fn lease(&self, reference: &str) -> ImageLease {
        let reference = normalize_reference(reference);
        *lock(&self.held).entry(reference.clone()).or_insert(0) += 1;
        ImageLease {
            held: Arc::clone(&self.held),
            reference,
        }
    }

    /// The references currently leased.
    pub fn held(&self) -> HashSet<String> {
        lock(&self.held).keys().cloned().collect()
    }
}

impl ImageLease {
    /// The normalized reference this lease holds.
    pub fn reference(&self) -> &str {
        &self.reference
    }
}

impl Drop for ImageLease {
    fn drop(&mut self) {
        let mut held = lock(&self.held);
        if let Some(n) = held.get_mut(&self.reference) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.reference);
            }
        }
    }
}

impl InUse for ImageLeases {
    fn in_use(&self) -> HashSet<String> {
        self.held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_counted_normalized_and_released_on_drop() {
        let leases = ImageLeases::new();
        let a = leases.lease("busybox");
        let b = leases.clone().lease("docker.io/library/busybox:latest");
        assert_eq!(a.reference(), "docker.io/library/busybox:latest");
        assert_eq!(
            leases.held(),
            HashSet::from(["docker.io/library/busybox:latest".to_string()])
        );
        drop(a);
        assert_eq!(leases.held().len(), 1);
        drop(b);
        assert!(leases.in_use().is_empty());
    }

    #[test]
    fn leases_work_across_threads() {
        let leases = ImageLeases::new();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let l = leases.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        let _x = l.lease(&format!("localhost/img{}:latest", i % 2));
                    }
                })
            })
            .collect();
        let held = leases.lease("localhost/img0:latest");
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            leases.held(),
            HashSet::from(["localhost/img0:latest".to_string()])
        );
        drop(held);
        assert!(leases.held().is_empty());
    }
}
