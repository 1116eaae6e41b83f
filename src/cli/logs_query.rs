//! `podhost logs` flags → the API's `/pods/NAME/log` query, as kubectl turns its flags
//! into PodLogOptions (`sinceSeconds`, `sinceTime`, `limitBytes`).

use chrono::{DateTime, Utc};

use crate::api::percent_encode;
use crate::cli::pod_ref::PodRef;

/// The flags of `podhost logs` (parsed by clap straight into this struct).
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct LogsFlags {
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// Keep streaming new lines until the container exits.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The previous instance of the container.
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// Print only the last N lines (read backwards from the end of the log).
    #[arg(long)]
    pub tail: Option<usize>,
    #[arg(long)]
    pub timestamps: bool,
    /// Only lines newer than this duration (e.g. 30s, 5m, 1h30m; Go-style durations).
    #[arg(long)]
    pub since: Option<String>,
    /// Only lines at or after this RFC 3339 time.
    #[arg(long)]
    pub since_time: Option<String>,
    /// Stop after this many bytes of output.
    #[arg(long)]
    pub limit_bytes: Option<u64>,
    /// Every container's logs: init containers', then the containers', then ephemeral
    /// ones' (with -f, all at once).
    #[arg(long, conflicts_with = "container")]
    pub all_containers: bool,
    /// Begin each line with `[pod/NAME/CONTAINER] `.
    #[arg(long)]
    pub prefix: bool,
}

/// A flag kubectl would refuse too.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LogsFlagError {
    #[error("--since {0:?} is not a duration such as 30s, 5m or 1h30m")]
    Since(String),
    #[error("--since-time {0:?} is not an RFC 3339 time such as 2024-05-01T10:00:00Z")]
    SinceTime(String),
    #[error("at most one of --since and --since-time may be given")]
    BothSince,
    #[error("--limit-bytes must be greater than 0")]
    LimitBytes,
}

/// Parses a Go duration (`1h2m3.5s`, `250ms`, `10us`); `None` if it is not one or is
/// negative.
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(std::time::Duration::ZERO);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * secs;
    }
    std::time::Duration::try_from_secs_f64(total).ok()
}

/// The API path for `pod`'s log with these flags.
pub fn log_query_path(pod: &PodRef, flags: &LogsFlags) -> Result<String, LogsFlagError> {
    let mut path = format!(
        "{}/log?follow={}&previous={}&timestamps={}",
        pod.path(),
        flags.follow,
        flags.previous,
        flags.timestamps
    );
    if let Some(c) = &flags.container {
        path.push_str(&format!("&container={}", percent_encode(c)));
    }
    if let Some(t) = flags.tail {
        path.push_str(&format!("&tail={t}"));
    }
    match (&flags.since, &flags.since_time) {
        (Some(_), Some(_)) => return Err(LogsFlagError::BothSince),
        (Some(d), None) => {
            let dur = parse_duration(d).ok_or_else(|| LogsFlagError::Since(d.clone()))?;
            // kubectl rounds up to whole seconds.
            let secs = dur.as_secs() + u64::from(dur.subsec_nanos() > 0);
            path.push_str(&format!("&sinceSeconds={secs}"));
        }
        (None, Some(t)) => {
            let time = DateTime::parse_from_rfc3339(t)
                .map_err(|_| LogsFlagError::SinceTime(t.clone()))?
                .with_timezone(&Utc);
            let text = time.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
            path.push_str(&format!("&sinceTime={}", percent_encode(&text)));
        }
        (None, None) => {}
    }
    if let Some(n) = flags.limit_bytes {
        if n == 0 {
            return Err(LogsFlagError::LimitBytes);
        }
        path.push_str(&format!("&limitBytes={n}"));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn any_pod() -> PodRef {
        PodRef {
            namespace: None,
            name: "p".into(),
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        for bad in ["", "5", "5x", "-3s", "s", "1h-2m"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn query_carries_since_and_limit() {
        let flags = LogsFlags {
            container: Some("web app".into()),
            tail: Some(5),
            since: Some("1500ms".into()),
            limit_bytes: Some(100),
            ..Default::default()
        };
        let pod = PodRef {
            namespace: Some("team-a".into()),
            name: "my-pod".into(),
        };
        let p = log_query_path(&pod, &flags).unwrap();
        assert_eq!(
            p,
            "/namespaces/team-a/pods/my-pod/log?follow=false&previous=false&timestamps=false&container=web%20app&tail=5&sinceSeconds=2&limitBytes=100"
        );
        let flags = LogsFlags {
            since_time: Some("2024-05-01T12:00:00+02:00".into()),
            ..Default::default()
        };
        let p = log_query_path(&any_pod(), &flags).unwrap();
        assert!(
            p.ends_with("&sinceTime=2024-05-01T10%3A00%3A00.000000000Z"),
            "{p}"
        );
    }

    #[test]
    fn bad_flags_are_refused_with_the_flag_named() {
        let both = LogsFlags {
            since: Some("1s".into()),
            since_time: Some("2024-05-01T10:00:00Z".into()),
            ..Default::default()
        };
        assert_eq!(
            log_query_path(&any_pod(), &both),
            Err(LogsFlagError::BothSince)
        );
        let bad = LogsFlags {
            since: Some("yesterday".into()),
            ..Default::default()
        };
        assert!(
            log_query_path(&any_pod(), &bad)
                .unwrap_err()
                .to_string()
                .contains("--since \"yesterday\"")
        );
        let zero = LogsFlags {
            limit_bytes: Some(0),
            ..Default::default()
        };
        assert_eq!(
            log_query_path(&any_pod(), &zero),
            Err(LogsFlagError::LimitBytes)
        );
    }
}
