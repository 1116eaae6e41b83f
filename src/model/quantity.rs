//! Kubernetes resource quantities (`500m`, `0.5`, `128Mi`, `1G`, `1e3`) as integers.

/// Parses a quantity into thousandths of its unit (millicores for CPU, milli-bytes for
/// memory), rounding up as the API does; `None` when it is not a quantity.
fn parse_milli(q: &str) -> Option<i128> {
    let q = q.trim();
    if q.is_empty() {
        return None;
    }
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let (num, exp10): (&str, i32) = match suffix {
        "" => (num, 0),
        "m" => (num, -3),
        "k" => (num, 3),
        "M" => (num, 6),
        "G" => (num, 9),
        "T" => (num, 12),
        "P" => (num, 15),
        "E" => (num, 18),
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let pow = match suffix {
                "Ki" => 1,
                "Mi" => 2,
                "Gi" => 3,
                "Ti" => 4,
                "Pi" => 5,
                _ => 6,
            };
            let base = parse_decimal_milli(num, 0)?;
            return base.checked_mul(1024i128.checked_pow(pow)?);
        }
        s if s.starts_with(['e', 'E']) => (num, s[1..].parse().ok()?),
        _ => return None,
    };
    parse_decimal_milli(num, exp10)
}

/// `digits[.digits] × 10^exp10`, in thousandths, rounded up.
fn parse_decimal_milli(num: &str, exp10: i32) -> Option<i128> {
    let (neg, num) = match num.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, num.strip_prefix('+').unwrap_or(num)),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits: String = format!("{int}{frac}");
    let mut value: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    // value × 10^(exp10 + 3 − len(frac))
    let scale = exp10
        .checked_add(3)?
        .checked_sub(i32::try_from(frac.len()).ok()?)?;
    if let Ok(up) = u32::try_from(scale) {
        value = value.checked_mul(10i128.checked_pow(up)?)?;
    } else {
        let div = 10i128.checked_pow(scale.unsigned_abs())?;
        value = (value + div - 1) / div;
    }
    Some(if neg { -value } else { value })
}

/// CPU quantity in millicores.
pub fn cpu_millis(q: &str) -> Option<i64> {
    parse_milli(q).and_then(|m| i64::try_from(m).ok())
}

/// Memory (or any byte) quantity in bytes, rounded up.
pub fn bytes(q: &str) -> Option<i64> {
    parse_milli(q)
        .map(|m| (m + 999).div_euclid(1000))
        .and_then(|b| i64::try_from(b).ok())
}

/// Formats bytes the way people write limits: `32Mi`, `1Gi`, `1500`.
pub fn format_bytes(b: i64) -> String {
    for (suffix, unit) in [("Gi", 1i64 << 30), ("Mi", 1 << 20)] {
        if b >= unit && b % unit == 0 {
            return format!("{}{suffix}", b / unit);
        }
    }
    if (1 << 10..1 << 20).contains(&b) && b % 1024 == 0 {
        return format!("{}Ki", b / 1024);
    }
    if b >= 1 << 20 {
        return format!("{:.1}Mi", b as f64 / (1u64 << 20) as f64);
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu() {
        assert_eq!(cpu_millis("500m"), Some(500));
        assert_eq!(cpu_millis("0.5"), Some(500));
        assert_eq!(cpu_millis("2"), Some(2000));
        assert_eq!(cpu_millis("0.0001"), Some(1), "rounded up");
        assert_eq!(cpu_millis("1e3"), Some(1_000_000));
        assert_eq!(cpu_millis("abc"), None);
        assert_eq!(cpu_millis(""), None);
    }

    #[test]
    fn memory() {
        assert_eq!(bytes("128Mi"), Some(128 << 20));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("1G"), Some(1_000_000_000));
        assert_eq!(bytes("1500"), Some(1500));
        assert_eq!(bytes("1.5Ki"), Some(1536));
        assert_eq!(bytes("1e3"), Some(1000));
        assert_eq!(bytes("100m"), Some(1), "milli-bytes round up");
        assert_eq!(bytes("12Qi"), None);
    }

    #[test]
    fn formatting() {
        assert_eq!(format_bytes(32 << 20), "32Mi");
        assert_eq!(format_bytes(1 << 30), "1Gi");
        assert_eq!(format_bytes(1000), "1000");
        assert_eq!(format_bytes((32 << 20) - 32 * 1024), "32.0Mi");
        assert_eq!(format_bytes(4096), "4Ki");
    }
}
