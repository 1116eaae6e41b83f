//! Integer conversions the types cannot prove lossless, each with its policy written
//! once: clamp into the target's range (never wrap, never panic). The `clippy::cast_*`
//! lints forbid `as` for these; call a helper here, or `try_from` with a typed error
//! where an out-of-range value is the caller's error to report.

use std::time::Duration;

/// Whole milliseconds in `d`, for a log field or a JSON number (saturates after 584
/// million years).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whole microseconds in `d` (saturates after 584 thousand years).
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A count or size from a signed Kubernetes field (restartCount, a quantity in bytes,
/// seconds): negative becomes 0.
pub fn non_negative_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// As [`non_negative_u64`], for the i32 fields (restartCount, attempt numbers).
pub fn non_negative_u32(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

/// A byte count or length as a `usize` for a buffer or slice bound: lossless on 64-bit
/// targets, saturating on 32-bit ones (where such a buffer could not be allocated anyway).
pub fn usize_saturating(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// A length as a `u64` (lossless on every target Rust supports today; saturates
/// otherwise).
pub fn len_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A float rounded toward zero into `u64`: negative and NaN become 0, past `u64::MAX`
/// becomes `u64::MAX`. No `TryFrom<f64>` exists; `as` from a float is defined to do
/// exactly this saturation (since Rust 1.45), which is why this one `as` is allowed.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn f64_to_u64_saturating(x: f64) -> u64 {
    x as u64
}

/// A wide intermediate result clamped into `u64`.
pub fn saturating_u64(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A wide signed intermediate result clamped into `i32`.
pub fn clamp_i32(n: i128) -> i32 {
    i32::try_from(n.clamp(i128::from(i32::MIN), i128::from(i32::MAX))).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_saturate() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(micros(Duration::from_micros(7)), 7);
        assert_eq!(millis(Duration::MAX), u64::MAX);
        assert_eq!(micros(Duration::MAX), u64::MAX);
    }

    #[test]
    fn negatives_become_zero() {
        assert_eq!(non_negative_u64(-1), 0);
        assert_eq!(non_negative_u64(i64::MIN), 0);
        assert_eq!(non_negative_u64(i64::MAX), 9_223_372_036_854_775_807);
        assert_eq!(non_negative_u32(-5), 0);
        assert_eq!(non_negative_u32(3), 3);
    }

    #[test]
    fn floats_saturate() {
        assert_eq!(f64_to_u64_saturating(99.9), 99);
        assert_eq!(f64_to_u64_saturating(-3.0), 0);
        assert_eq!(f64_to_u64_saturating(f64::NAN), 0);
        assert_eq!(f64_to_u64_saturating(1e30), u64::MAX);
    }

    #[test]
    fn widths_clamp() {
        assert_eq!(usize_saturating(42), 42);
        assert_eq!(len_u64(42), 42);
        assert_eq!(saturating_u64(u128::MAX), u64::MAX);
        assert_eq!(saturating_u64(9), 9);
        assert_eq!(clamp_i32(i128::MAX), i32::MAX);
        assert_eq!(clamp_i32(i128::MIN), i32::MIN);
        assert_eq!(clamp_i32(-999), -999);
    }
}
