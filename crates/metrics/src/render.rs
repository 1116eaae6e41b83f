//! The exposition formats: OpenMetrics text (what `prometheus-client` writes) and the
//! Prometheus text format 0.0.4 that older scrapers and `curl | grep` users expect.

use std::collections::BTreeSet;

/// The text format of a scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`, the default.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`, when the scraper asks for it.
    OpenMetrics,
}

pub(super) const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
pub(super) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics only when it is named (as
    /// Prometheus does when it prefers it), else the 0.0.4 text.
    pub fn from_accept(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }
}

/// Rewrites an OpenMetrics text exposition as Prometheus text 0.0.4: a counter
/// family is named as its samples (`x_total`) in HELP and TYPE, and what 0.0.4 does
/// not know is left out (`# UNIT`, `# EOF`, `_created` samples, exemplars).
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let keyword = &line[..7];
            let tail = if keyword == "# TYPE " && tail == "unknown" {
                "untyped"
            } else {
                tail
            };
            if counters.contains(name) {
                out.push_str(&format!("{keyword}{name}_total {tail}\n"));
            } else {
                out.push_str(&format!("{keyword}{name} {tail}\n"));
            }
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        if line[..name_end]
            .strip_suffix("_created")
            .is_some_and(|family| counters.contains(family))
        {
            continue;
        }
        // An exemplar follows the value after " # ".
        let sample = line.split_once(" # ").map_or(line, |(s, _)| s);
        out.push_str(sample);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_as_their_samples_and_openmetrics_only_lines_go() {
        let om = "# HELP a_started Started.\n# TYPE a_started counter\na_started_total 3\n\
                  a_started_created 1.7e9\n# HELP b_seconds Time.\n# TYPE b_seconds histogram\n\
                  # UNIT b_seconds seconds\nb_seconds_bucket{le=\"1.0\"} 1 # {id=\"x\"} 0.5\n\
                  # HELP c Other.\n# TYPE c unknown\nc 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP a_started_total Started.\n# TYPE a_started_total counter\na_started_total 3\n\
             # HELP b_seconds Time.\n# TYPE b_seconds histogram\nb_seconds_bucket{le=\"1.0\"} 1\n\
             # HELP c Other.\n# TYPE c untyped\nc 1\n"
        );
    }

    #[test]
    fn openmetrics_is_served_only_when_asked_for() {
        assert_eq!(Format::from_accept(None), Format::Prometheus);
        assert_eq!(Format::from_accept(Some("*/*")), Format::Prometheus);
        assert_eq!(
            Format::from_accept(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            )),
            Format::OpenMetrics
        );
    }
}
