//! Go's `time.ParseDuration` syntax, as `metav1.Duration` fields of a
//! KubeletConfiguration are written: `"2m30s"`, `"1.5h"`, `"300ms"`, `"0"`.

use std::time::Duration;

/// Parses a non-negative Go duration; `None` when `text` is not one.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let seconds_per_unit = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * seconds_per_unit;
        rest = next;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        let secs = |t: &str| parse_go_duration(t).map(|d| d.as_secs_f64());
        assert_eq!(secs("2m30s"), Some(150.0));
        assert_eq!(secs("1.5h"), Some(5400.0));
        assert_eq!(secs("300ms"), Some(0.3));
        assert_eq!(secs("0"), Some(0.0));
        assert_eq!(secs("0s"), Some(0.0));
        assert_eq!(secs("1h2m3s4ms"), Some(3723.004));
        assert_eq!(secs("20"), None, "a unit is required except for 0");
        assert_eq!(secs("-1s"), None, "negative durations are refused");
        assert_eq!(secs("5d"), None);
        assert_eq!(secs(""), None);
        assert_eq!(secs("s"), None);
    }
}
