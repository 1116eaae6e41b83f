//! CNI spec versions (`cniVersion`), compared as numbers: which operations a config's
//! version allows (CHECK from 0.4.0, STATUS from 1.1.0) and whether a plugin speaks it.

use std::cmp::Ordering;
use std::fmt;

/// A `major.minor.patch` spec version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpecVersion(pub u32, pub u32, pub u32);

impl SpecVersion {
    /// CHECK exists since 0.4.0 (and DEL gets the cached result as `prevResult`).
    pub const CHECK: SpecVersion = SpecVersion(0, 4, 0);
    /// STATUS exists since 1.1.0.
    pub const STATUS: SpecVersion = SpecVersion(1, 1, 0);
    /// The oldest version whose results have the `ips`/`interfaces` shape podhost reads.
    pub const OLDEST_RESULT: SpecVersion = SpecVersion(0, 3, 0);

    /// Parses `1.0.0` (a missing patch or minor counts as 0, as semver-lenient libcni
    /// accepts `0.4`). `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.trim().split('.');
        let mut next = |required: bool| match parts.next() {
            Some(p) => p.parse::<u32>().ok(),
            None if required => None,
            None => Some(0),
        };
        let v = SpecVersion(next(true)?, next(false)?, next(false)?);
        parts.next().is_none().then_some(v)
    }

    pub fn at_least(self, other: SpecVersion) -> bool {
        self.cmp(&other) != Ordering::Less
    }
}

impl fmt::Display for SpecVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Whether a plugin's VERSION answer (`supportedVersions`) includes `wanted`.
pub fn plugin_supports(supported: &[String], wanted: SpecVersion) -> bool {
    supported
        .iter()
        .filter_map(|s| SpecVersion::parse(s))
        .any(|v| v == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_gate_operations() {
        assert_eq!(SpecVersion::parse("1.0.0"), Some(SpecVersion(1, 0, 0)));
        assert_eq!(SpecVersion::parse("0.4"), Some(SpecVersion(0, 4, 0)));
        assert_eq!(SpecVersion::parse("1.0.0.1"), None);
        assert_eq!(SpecVersion::parse("one"), None);
        assert_eq!(SpecVersion::parse(""), None);
        let v100 = SpecVersion(1, 0, 0);
        assert!(v100.at_least(SpecVersion::CHECK));
        assert!(
            !v100.at_least(SpecVersion::STATUS),
            "Debian's 1.1.1 plugins speak 1.0.0"
        );
        assert!(SpecVersion(1, 1, 0).at_least(SpecVersion::STATUS));
        assert!(!SpecVersion(0, 3, 1).at_least(SpecVersion::CHECK));
        assert_eq!(SpecVersion(0, 3, 1).to_string(), "0.3.1");
    }

    #[test]
    fn a_plugin_supports_only_the_versions_it_lists() {
        let listed = vec!["0.3.1".to_string(), "1.0.0".to_string()];
        assert!(plugin_supports(&listed, SpecVersion(1, 0, 0)));
        assert!(!plugin_supports(&listed, SpecVersion(1, 1, 0)));
    }
}
