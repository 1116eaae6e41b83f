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

fn value(v: &str) -> Result<u64, String> {
    match v.trim() {
        "unlimited" | "infinity" | "-1" => Ok(u64::MAX),
        n => n
            .parse()
            .map_err(|_| format!("{n:?} is not a number or \"unlimited\"")),
    }
}

/// Parses the annotation value. `name=N` sets soft and hard to N; `name=S:H` sets both.
pub fn parse_rlimits(text: &str) -> Result<Vec<Rlimit>, String> {
    let mut out: Vec<Rlimit> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, v) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: expected name=soft:hard"))?;
        let name = name.trim().to_ascii_lowercase();
        let name = name.strip_prefix("rlimit_").unwrap_or(&name).to_string();
        if !KNOWN.contains(&name.as_str()) {
            return Err(format!(
                "{name:?} is not an rlimit (one of {})",
                KNOWN.join(", ")
            ));
        }
        let (soft, hard) = match v.split_once(':') {
            Some((s, h)) => (value(s)?, value(h)?),
            None => {
                let n = value(v)?;
                (n, n)
            }
        };
        if soft > hard {
            return Err(format!(
                "{name}: soft limit {soft} is above the hard limit {hard}"
            ));
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
        assert!(
            parse_rlimits("files=1")
                .unwrap_err()
                .contains("not an rlimit")
        );
        assert!(
            parse_rlimits("nofile=20:10")
                .unwrap_err()
                .contains("above the hard")
        );
        assert!(
            parse_rlimits("nofile=lots")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(parse_rlimits("nofile").unwrap_err().contains("expected"));
    }
}
