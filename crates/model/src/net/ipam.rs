//! The host-local IPAM's choice of the next address (the state lives in
//! `network::bridge::ipam_store`): round robin after the last address handed out, so a
//! just-freed address is not reused at once (a peer may still hold it in a cache or a
//! connection), skipping the network, gateway and broadcast addresses and every taken one.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::Cidr;

/// The next free pod address of `cidr` after `last` (the last address handed out;
/// `None` or an address outside the pod range starts at the range's beginning),
/// wrapping around at the end; `None` when every pod address is taken.
pub fn next_free(cidr: &Cidr, taken: &BTreeSet<IpAddr>, last: Option<IpAddr>) -> Option<IpAddr> {
    let (first, end) = cidr.pod_offsets();
    let pool = end - first + 1;
    let start = last
        .and_then(|ip| cidr.offset_of(ip))
        .filter(|o| (first..=end).contains(o))
        .map_or(first, |o| if o == end { first } else { o + 1 });
    // Only taken addresses are skipped, so a free one turns up within taken.len() + 1
    // candidates: the search is bounded by what is allocated, not by the network size.
    let tries = pool.min(
        u128::try_from(taken.len())
            .unwrap_or(u128::MAX)
            .saturating_add(1),
    );
    let mut offset = start;
    for _ in 0..tries {
        let ip = cidr.nth(offset)?;
        if !taken.contains(&ip) {
            return Some(ip);
        }
        offset = if offset == end { first } else { offset + 1 };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn set(ips: &[&str]) -> BTreeSet<IpAddr> {
        ips.iter().map(|s| ip(s)).collect()
    }

    #[test]
    fn the_first_pod_gets_the_address_after_the_gateway() {
        let c: Cidr = "10.86.0.0/16".parse().unwrap();
        assert_eq!(next_free(&c, &set(&[]), None), Some(ip("10.86.0.2")));
        let v6: Cidr = "fd70:6f64:6800::/64".parse().unwrap();
        assert_eq!(
            next_free(&v6, &set(&[]), None),
            Some(ip("fd70:6f64:6800::2"))
        );
    }

    #[test]
    fn allocation_continues_after_the_last_and_does_not_reuse_a_freed_address_first() {
        let c: Cidr = "10.0.0.0/24".parse().unwrap();
        // .2 was freed, .3 is held, .3 was the last handed out.
        let next = next_free(&c, &set(&["10.0.0.3"]), Some(ip("10.0.0.3")));
        assert_eq!(next, Some(ip("10.0.0.4")));
        let next = next_free(&c, &set(&["10.0.0.4", "10.0.0.5"]), Some(ip("10.0.0.3")));
        assert_eq!(next, Some(ip("10.0.0.6")));
    }

    #[test]
    fn wraps_around_skipping_network_gateway_and_broadcast() {
        let c: Cidr = "10.0.0.0/29".parse().unwrap(); // pods: .2 ..= .6
        assert_eq!(
            next_free(&c, &set(&[]), Some(ip("10.0.0.6"))),
            Some(ip("10.0.0.2"))
        );
        let taken = set(&["10.0.0.2", "10.0.0.3"]);
        assert_eq!(
            next_free(&c, &taken, Some(ip("10.0.0.6"))),
            Some(ip("10.0.0.4"))
        );
        // A last address outside the pod range (the gateway, another network) restarts.
        assert_eq!(
            next_free(&c, &set(&[]), Some(ip("10.0.0.1"))),
            Some(ip("10.0.0.2"))
        );
        assert_eq!(
            next_free(&c, &set(&[]), Some(ip("10.9.0.9"))),
            Some(ip("10.0.0.2"))
        );
    }

    #[test]
    fn a_full_network_has_no_free_address() {
        let c: Cidr = "10.0.0.0/29".parse().unwrap();
        let all = set(&["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]);
        assert_eq!(next_free(&c, &all, Some(ip("10.0.0.4"))), None);
        let mut one_free = all.clone();
        one_free.remove(&ip("10.0.0.3"));
        assert_eq!(
            next_free(&c, &one_free, Some(ip("10.0.0.4"))),
            Some(ip("10.0.0.3"))
        );
    }

    #[test]
    fn a_hundred_allocations_are_distinct() {
        let c: Cidr = "fd00:1::/120".parse().unwrap();
        let mut taken = BTreeSet::new();
        let mut last = None;
        for _ in 0..100 {
            let next = next_free(&c, &taken, last).unwrap();
            assert!(taken.insert(next), "{next} handed out twice");
            last = Some(next);
        }
        assert_eq!(taken.len(), 100);
    }
}
