//! Ages and durations the way kubectl prints them (`HumanDuration`).

use std::time::Duration;

/// `5s`, `3m20s`, `45m`, `5h10m`, `30h`, `3d4h`, `20d`, `2y30d`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (m, h, days) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        let rem = s % 60;
        if rem == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{rem}s")
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        let rem = m % 60;
        if rem == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{rem}m")
        }
    } else if h < 48 {
        format!("{h}h")
    } else if days < 8 {
        let rem = h % 24;
        if rem == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{rem}h")
        }
    } else if days < 365 * 2 {
        format!("{days}d")
    } else {
        format!("{}y{}d", days / 365, days % 365)
    }
}

/// Age of an API time relative to `now` (`<unknown>` when absent).
pub fn age_of(
    t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let Some(t) = t else {
        return "<unknown>".into();
    };
    let then = t.0.as_nanosecond();
    let now_ns = i128::from(now.timestamp_nanos_opt().unwrap_or_default());
    // In the future (clock skew) reads as 0s; an age past u64 seconds cannot happen.
    let secs = u64::try_from((now_ns - then).max(0) / 1_000_000_000).unwrap_or(u64::MAX);
    human_duration(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_style() {
        let f = |s| human_duration(Duration::from_secs(s));
        assert_eq!(f(5), "5s");
        assert_eq!(f(119), "119s");
        assert_eq!(f(200), "3m20s");
        assert_eq!(f(45 * 60), "45m");
        assert_eq!(f(5 * 3600 + 600), "5h10m");
        assert_eq!(f(30 * 3600), "30h");
        assert_eq!(f(3 * 86400 + 4 * 3600), "3d4h");
        assert_eq!(f(20 * 86400), "20d");
    }
}
