//! resolv.conf: read as the kubelet reads the host's, written as containerd writes a
//! pod's, and cut to the kubelet's limits.

use std::net::IpAddr;

/// The resolver settings a resolv.conf holds (what the kubelet keeps of it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    pub searches: Vec<String>,
    /// `ndots:5`, `edns0`, …
    pub options: Vec<String>,
}

/// At most this many nameservers (glibc's MAXNS; the API server's limit too).
pub const MAX_NAMESERVERS: usize = 3;
/// At most this many search domains (the kubelet's expanded DNS config, GA in 1.28).
pub const MAX_SEARCHES: usize = 32;
/// The search line is at most this long (domains joined by spaces).
pub const MAX_SEARCH_CHARS: usize = 2048;
/// A longer search domain makes some resolvers abort (glibc 2.28): always dropped.
pub const MAX_SEARCH_DOMAIN_LEN: usize = 253;

/// Reads a resolv.conf as the kubelet does: `nameserver` lines accumulate, the last
/// `search` line wins (trailing dots dropped, so `a.` and `a` count once), the last
/// `options` line wins; `domain` lines are ignored. Comments start with `#` or `;` (as
/// glibc's); a `nameserver` line without an address is skipped (the kubelet fails the
/// pod on it).
pub fn parse_resolv_conf(text: &str) -> ResolvConf {
    let mut conf = ResolvConf::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with(['#', ';']) {
            continue;
        }
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => conf.nameservers.extend(fields.next().map(str::to_string)),
            Some("search") => {
                conf.searches = fields
                    .map(|s| s.trim_end_matches('.').to_string())
                    .collect();
            }
            Some("options") => conf.options = fields.map(str::to_string).collect(),
            _ => {}
        }
    }
    conf
}

impl ResolvConf {
    /// The file's text as containerd writes it: `search`, the `nameserver` lines,
    /// `options`, each only when there is something to say.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.searches.is_empty() {
            out.push_str(&format!("search {}\n", self.searches.join(" ")));
        }
        for ns in &self.nameservers {
            out.push_str(&format!("nameserver {ns}\n"));
        }
        if !self.options.is_empty() {
            out.push_str(&format!("options {}\n", self.options.join(" ")));
        }
        out
    }

    /// True when every nameserver is a loopback address (systemd-resolved's 127.0.0.53
    /// stub, a local dnsmasq): unreachable from a pod's own network namespace.
    pub fn only_loopback_nameservers(&self) -> bool {
        !self.nameservers.is_empty()
            && self
                .nameservers
                .iter()
                .all(|ns| ns.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()))
    }

    /// Cuts the nameservers and search domains to the kubelet's limits; each cut is
    /// described in the kubelet's words, with what was omitted.
    pub fn fit_limits(&mut self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.nameservers.len() > MAX_NAMESERVERS {
            let omitted = self.nameservers.split_off(MAX_NAMESERVERS);
            warnings.push(format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {} (omitted: {})",
                self.nameservers.join(" "),
                omitted.join(" ")
            ));
        }
        let mut omitted = Vec::new();
        if self.searches.len() > MAX_SEARCHES {
            omitted = self.searches.split_off(MAX_SEARCHES);
        }
        let (kept, too_long): (Vec<String>, Vec<String>) = std::mem::take(&mut self.searches)
            .into_iter()
            .partition(|s| s.len() <= MAX_SEARCH_DOMAIN_LEN);
        self.searches = kept;
        omitted.splice(0..0, too_long);
        // Then whole domains from the end until the line fits.
        let mut line_len = self.searches.join(" ").len();
        let mut cut_from_end = Vec::new();
        while line_len > MAX_SEARCH_CHARS {
            let Some(last) = self.searches.pop() else {
                break;
            };
            line_len = line_len.saturating_sub(last.len() + 1);
            cut_from_end.insert(0, last);
        }
        omitted.extend(cut_from_end);
        if !omitted.is_empty() {
            warnings.push(format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {} (omitted: {})",
                self.searches.join(" "),
                omitted.join(" ")
            ));
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(ns: &[&str], search: &[&str], options: &[&str]) -> ResolvConf {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        ResolvConf {
            nameservers: v(ns),
            searches: v(search),
            options: v(options),
        }
    }

    #[test]
    fn parsing_keeps_what_the_kubelet_keeps() {
        let table: &[(&str, ResolvConf)] = &[
            ("", conf(&[], &[], &[])),
            (
                "# systemd-resolved\nnameserver 10.0.0.2\nnameserver  fd00::53 \nsearch a.example. b.example\noptions ndots:2 edns0\n",
                conf(
                    &["10.0.0.2", "fd00::53"],
                    &["a.example", "b.example"],
                    &["ndots:2", "edns0"],
                ),
            ),
            // The last search and options lines win; domain is ignored; ; comments.
            (
                "search one\nsearch two three\ndomain d.example\noptions a\noptions b\n; nameserver 1.1.1.1\n",
                conf(&[], &["two", "three"], &["b"]),
            ),
            // A bare nameserver line is skipped.
            (
                "nameserver\nnameserver 192.0.2.1\n",
                conf(&["192.0.2.1"], &[], &[]),
            ),
        ];
        for (text, want) in table {
            assert_eq!(&parse_resolv_conf(text), want, "{text:?}");
        }
    }

    #[test]
    fn rendering_is_containerds_layout() {
        assert_eq!(conf(&[], &[], &[]).render(), "");
        assert_eq!(
            conf(
                &["10.96.0.10", "fd00::a"],
                &["ns.svc.cluster.local", "svc.cluster.local"],
                &["ndots:5"]
            )
            .render(),
            "search ns.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver fd00::a\noptions ndots:5\n"
        );
        assert_eq!(
            conf(&["1.1.1.1"], &[], &[]).render(),
            "nameserver 1.1.1.1\n"
        );
    }

    #[test]
    fn loopback_only_detection() {
        assert!(conf(&["127.0.0.53"], &[], &[]).only_loopback_nameservers());
        assert!(conf(&["127.0.0.1", "::1"], &[], &[]).only_loopback_nameservers());
        assert!(!conf(&["127.0.0.53", "10.0.0.2"], &[], &[]).only_loopback_nameservers());
        assert!(!conf(&[], &[], &[]).only_loopback_nameservers());
        assert!(!conf(&["not-an-ip"], &[], &[]).only_loopback_nameservers());
    }

    #[test]
    fn limits_cut_nameservers_and_searches_and_say_what_was_omitted() {
        let mut c = conf(
            &["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4", "5.5.5.5"],
            &[],
            &[],
        );
        let w = c.fit_limits();
        assert_eq!(c.nameservers, ["1.1.1.1", "2.2.2.2", "3.3.3.3"]);
        assert_eq!(
            w,
            [
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3 (omitted: 4.4.4.4 5.5.5.5)"
            ]
        );

        // 34 domains: the last two go.
        let many: Vec<String> = (0..34).map(|i| format!("d{i}.example")).collect();
        let mut c = ResolvConf {
            searches: many.clone(),
            ..Default::default()
        };
        let w = c.fit_limits();
        assert_eq!(c.searches, many[..32]);
        assert!(
            w[0].ends_with("(omitted: d32.example d33.example)"),
            "{w:?}"
        );

        // A domain over 253 characters is dropped wherever it is.
        let long = format!("{}.example", "x".repeat(250));
        let mut c = conf(&[], &["a.example", &long, "b.example"], &[]);
        let w = c.fit_limits();
        assert_eq!(c.searches, ["a.example", "b.example"]);
        assert_eq!(
            w,
            [format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: a.example b.example (omitted: {long})"
            )]
        );

        // Over 2048 characters in all: whole domains from the end until it fits.
        let d200: Vec<String> = (0..12)
            .map(|i| format!("{i:02}{}", "y".repeat(198)))
            .collect();
        let mut c = ResolvConf {
            searches: d200.clone(),
            ..Default::default()
        };
        c.fit_limits();
        // 10 × 200 + 9 spaces = 2009 ≤ 2048; 11 would be 2210.
        assert_eq!(c.searches, d200[..10]);

        // Within every limit: nothing changes, nothing is said.
        let mut c = conf(&["1.1.1.1"], &["a"], &["ndots:1"]);
        assert!(c.fit_limits().is_empty());
        assert_eq!(c, conf(&["1.1.1.1"], &["a"], &["ndots:1"]));
    }
}
