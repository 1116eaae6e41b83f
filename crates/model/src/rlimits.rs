//! Per-container rlimits from the annotation `podhost.io/rlimits.<container>`
//! (`"nofile=65536:65536,nproc=4096,core=unlimited"`): kubernetes#3595, answered.

/// The annotation prefix; the container's name follows it.
pub const RLIMITS_ANNOTATION_PREFIX: &str = "podhost.io/rlimits.";

/// One limit: the resource as in `RLIMIT_<NAME>`, soft and hard (`u64::MAX` = unlimited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rlimit {
    pub resource: String,
    pub soft: u64,
    pub hard: u64,
}

const KNOWN: [&str; 16] = [
    "as",
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
];

/// Why an rlimits annotation (or `--default-rlimits`) cannot be used. The messages
/// name the item of the comma-separated list; the caller adds the annotation's key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RlimitError {
    /// An item has no `=`: it names no value.
    #[error("{item:?}: expected name=soft:hard")]
    NoValue {
        /// The item as written.
        item: String,
    },
    /// The name is not one of the kernel's `RLIMIT_*` resources.
    #[error("{name:?} is not an rlimit (one of {})", KNOWN.join(", "))]
    UnknownResource {
        /// The name, lowercased and without `rlimit_`.
        name: String,
    },
    /// A limit is neither a number nor `unlimited`/`infinity`/`-1`.
    #[error("{value:?} is not a number or \"unlimited\"")]
    BadValue {
        /// The value as written (trimmed).
        value: String,
        /// The parser's error.
        #[source]
        source: std::num::ParseIntError,
    },
    /// The soft limit is above the hard one, which setrlimit(2) refuses.
    #[error("{name}: soft limit {soft} is above the hard limit {hard}")]
    SoftAboveHard {
        /// The resource.
        name: String,
        /// The soft limit.
        soft: u64,
        /// The hard limit.
        hard: u64,
    },
}

fn value(v: &str) -> Result<u64, RlimitError> {
    match v.trim() {
        "unlimited" | "infinity" | "-1" => Ok(u64::MAX),
        n => n.parse().map_err(|source| RlimitError::BadValue {
            value: n.to_string(),
            source,
        }),
    }
}

/// Parses the annotation value. `name=N` sets soft and hard to N; `name=S:H` sets both.
pub fn parse_rlimits(text: &str) -> Result<Vec<Rlimit>, RlimitError> {
    let mut out: Vec<Rlimit> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, v) = item.split_once('=').ok_or_else(|| RlimitError::NoValue {
            item: item.to_string(),
        })?;
        let name = name.trim().to_ascii_lowercase();
        let name = name.strip_prefix("rlimit_").unwrap_or(&name).to_string();
        if !KNOWN.contains(&name.as_str()) {
            return Err(RlimitError::UnknownResource { name });
        }
        let (soft, hard) = match v.split_once(':') {
            Some((s, h)) => (value(s)?, value(h)?),
            None => {
                let n = value(v)?;
                (n, n)
            }
        };
        if soft > hard {
            return Err(RlimitError::SoftAboveHard { name, soft, hard });
        }
        out.retain(|r| r.resource != name);
        out.push(Rlimit {
            resource: name,
            soft,
            hard,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_annotation() {
        let r = parse_rlimits("nofile=65536:65536, nproc=4096,core=unlimited").unwrap();
        assert_eq!(
            r,
            vec![
                Rlimit {
                    resource: "nofile".into(),
                    soft: 65536,
                    hard: 65536
                },
                Rlimit {
                    resource: "nproc".into(),
                    soft: 4096,
                    hard: 4096
                },
                Rlimit {
                    resource: "core".into(),
                    soft: u64::MAX,
                    hard: u64::MAX
                },
            ]
        );
        assert_eq!(parse_rlimits("RLIMIT_NOFILE=10:20").unwrap()[0].hard, 20);
    }

    #[test]
    fn rejects_bad_values_with_reasons() {
        let err = |text: &str| parse_rlimits(text).unwrap_err().to_string();
        assert!(err("files=1").starts_with("\"files\" is not an rlimit (one of as, core,"));
        assert_eq!(
            err("nofile=20:10"),
            "nofile: soft limit 20 is above the hard limit 10"
        );
        assert_eq!(
            err("nofile=lots"),
            "\"lots\" is not a number or \"unlimited\""
        );
        assert_eq!(err("nofile"), "\"nofile\": expected name=soft:hard");
        assert!(matches!(
            parse_rlimits("nproc=1:x"),
            Err(RlimitError::BadValue { .. })
        ));
    }
}
