//! The pod's hostname and domain (the kubelet's `GeneratePodHostNameAndDomain`) and the
//! name its UTS namespace gets (`GetNodenameForKernel`).

use super::DnsError;

/// The longest hostname: a DNS label (the kernel's field holds 64 bytes with the NUL).
pub const HOSTNAME_MAX_LEN: usize = 63;
/// The longest FQDN the kernel's nodename holds with setHostnameAsFQDN.
pub const FQDN_MAX_LEN: usize = 64;

/// A pod's hostname and, with a subdomain and a cluster domain, its domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHostname {
    /// `spec.hostname`, else the pod's name; at most 63 characters.
    pub hostname: String,
    /// `<subdomain>.<namespace>.svc.<cluster domain>`.
    pub domain: Option<String>,
}

impl PodHostname {
    /// `hostname.domain`, or the hostname alone without a domain.
    pub fn fqdn(&self) -> String {
        match &self.domain {
            Some(d) => format!("{}.{d}", self.hostname),
            None => self.hostname.clone(),
        }
    }
}

/// The pod's hostname and domain. A name longer than 63 characters is cut and stripped
/// of trailing `-` and `.`, as the kubelet cuts it. The domain needs both a subdomain
/// and a cluster domain: the kubelet would write `<sub>.<ns>.svc.` without a cluster
/// domain, a name nothing resolves, so podhost leaves the pod without a domain then.
pub fn pod_hostname(
    pod_name: &str,
    spec_hostname: Option<&str>,
    subdomain: Option<&str>,
    namespace: &str,
    cluster_domain: &str,
) -> Result<PodHostname, DnsError> {
    let wanted = spec_hostname.filter(|h| !h.is_empty()).unwrap_or(pod_name);
    let mut hostname = wanted.to_string();
    if hostname.len() > HOSTNAME_MAX_LEN {
        // Names are DNS labels or subdomains (ASCII), so a byte cut is a character cut;
        // backing off to a boundary keeps anything else from panicking.
        let mut cut = HOSTNAME_MAX_LEN;
        while !hostname.is_char_boundary(cut) {
            cut -= 1;
        }
        hostname.truncate(cut);
        let trimmed_len = hostname.trim_end_matches(['-', '.']).len();
        hostname.truncate(trimmed_len);
    }
    if hostname.is_empty() {
        return Err(DnsError::InvalidHostname {
            pod: pod_name.to_string(),
            hostname: wanted.to_string(),
        });
    }
    let domain = match subdomain.filter(|s| !s.is_empty()) {
        Some(sub) if !cluster_domain.is_empty() => {
            Some(format!("{sub}.{namespace}.svc.{cluster_domain}"))
        }
        _ => None,
    };
    Ok(PodHostname { hostname, domain })
}

/// The name the pod's UTS namespace gets: the hostname, or with setHostnameAsFQDN (and a
/// domain) the FQDN, which must fit the kernel's 64 characters.
pub fn kernel_hostname(name: &PodHostname, set_hostname_as_fqdn: bool) -> Result<String, DnsError> {
    if !set_hostname_as_fqdn || name.domain.is_none() {
        return Ok(name.hostname.clone());
    }
    let fqdn = name.fqdn();
    if fqdn.len() > FQDN_MAX_LEN {
        return Err(DnsError::FqdnTooLong {
            len: fqdn.len(),
            fqdn,
            max: FQDN_MAX_LEN,
        });
    }
    Ok(fqdn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_and_domain_follow_the_kubelets_rules() {
        let long = "a".repeat(62) + "-b";
        let dotted = "x".repeat(62) + ".y";
        // (pod name, spec.hostname, subdomain, cluster domain) → (hostname, domain)
        type Row<'a> = (
            &'a str,
            Option<&'a str>,
            Option<&'a str>,
            &'a str,
            &'a str,
            Option<&'a str>,
        );
        let table: &[Row] = &[
            ("web", None, None, "", "web", None),
            ("web", Some("h"), None, "cluster.local", "h", None),
            ("web", Some(""), None, "", "web", None),
            (
                "web",
                None,
                Some("sub"),
                "cluster.local",
                "web",
                Some("sub.ns.svc.cluster.local"),
            ),
            (
                "web",
                Some("h"),
                Some("sub"),
                "cluster.local",
                "h",
                Some("sub.ns.svc.cluster.local"),
            ),
            // No cluster domain: no domain (the kubelet would write "sub.ns.svc.").
            ("web", Some("h"), Some("sub"), "", "h", None),
            ("web", Some("h"), Some(""), "cluster.local", "h", None),
            // Cut to 63, then trailing '-' and '.' trimmed.
            (&long, None, None, "", &"a".repeat(62), None),
            (&dotted, None, None, "", &"x".repeat(62), None),
            (&"c".repeat(70), None, None, "", &"c".repeat(63), None),
        ];
        for (name, host, sub, cd, want_host, want_domain) in table {
            let got = pod_hostname(name, *host, *sub, "ns", cd).unwrap();
            assert_eq!(got.hostname, *want_host, "{name} {host:?}");
            assert_eq!(got.domain.as_deref(), *want_domain, "{name} {sub:?} {cd:?}");
        }
    }

    #[test]
    fn a_name_of_only_dashes_after_the_cut_is_an_error() {
        let name = "a".to_string() + &"-".repeat(70);
        let name = &name[1..];
        let err = pod_hostname(name, None, None, "ns", "").unwrap_err();
        assert!(matches!(err, DnsError::InvalidHostname { .. }), "{err}");
    }

    #[test]
    fn fqdn_as_hostname_only_with_a_domain_and_at_most_64_characters() {
        let with_domain = PodHostname {
            hostname: "h".into(),
            domain: Some("sub.ns.svc.cluster.local".into()),
        };
        assert_eq!(kernel_hostname(&with_domain, false).unwrap(), "h");
        assert_eq!(
            kernel_hostname(&with_domain, true).unwrap(),
            "h.sub.ns.svc.cluster.local"
        );
        let no_domain = PodHostname {
            hostname: "h".into(),
            domain: None,
        };
        assert_eq!(kernel_hostname(&no_domain, true).unwrap(), "h");
        // Exactly 64 fits; 65 does not, with the kubelet's message.
        let domain = "d".repeat(62);
        let fits = PodHostname {
            hostname: "h".into(),
            domain: Some(domain.clone()),
        };
        assert_eq!(kernel_hostname(&fits, true).unwrap().len(), 64);
        let too_long = PodHostname {
            hostname: "hh".into(),
            domain: Some(domain),
        };
        let err = kernel_hostname(&too_long, true).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "failed to construct FQDN from pod hostname and cluster domain, FQDN hh.{} is too long (64 characters is the max, 65 characters requested)",
                "d".repeat(62)
            )
        );
    }
}
