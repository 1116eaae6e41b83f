//! Kubernetes resource quantities (`500m`, `0.5`, `128Mi`, `1G`, `1e3`), parsed as the
//! API server parses them (`k8s.io/apimachinery/pkg/api/resource`, `ParseQuantity`):
//!
//! ```text
//! <quantity> ::= <sign>? <digits>? ( "." <digits>? )? <suffix>
//! <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei          (binary, ×1024ⁿ)
//!              | n | u | m | "" | k | M | G | T | P | E (decimal SI)
//!              | (e | E) <sign>? <digits>             (decimal exponent)
//! ```
//!
//! Like the API server, a value is kept exactly and only rounded when it is read at a
//! scale (millicores, bytes), up and away from zero ("if you want some resources, you
//! get some"). Where the API server would silently cap or wrap (a binary value above
//! 2^63−1, an exponent beyond 32 bits), podhost refuses instead: a limit it cannot
//! represent is an error naming the field, never a different limit.
//!
//! The work is linear in the length of the text and never panics, whatever the input
//! (a property test below throws arbitrary strings at it).

use std::cmp::Ordering;

/// The longest exponent the API server keeps: it truncates the parsed `int64` to
/// `int32`, so anything beyond is a different number there; podhost refuses it.
const MAX_EXPONENT: i64 = i32::MAX as i64;

/// Why a quantity was refused. The messages are the API server's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not of the quantity grammar at all (`512MB`, `1 core`, `lots`, empty).
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// The grammar matched but the suffix is not one the API knows (`1K`, `1ki`, `1e`).
    #[error(
        "unable to parse quantity's suffix {suffix:?} (use Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or e<exponent>)"
    )]
    Suffix {
        /// The suffix as written.
        suffix: String,
    },
    /// A decimal exponent the API server would truncate to another number.
    #[error("exponent {exponent} is out of range (at most ±{MAX_EXPONENT})")]
    Exponent {
        /// The exponent as written.
        exponent: String,
    },
    /// The value does not fit a signed 64-bit integer at the scale it is used at.
    #[error("is too large: at most {max} {unit}")]
    TooLarge {
        /// The largest value, in `unit`.
        max: i64,
        /// What the value is counted in ("millicores", "bytes", "thousandths").
        unit: &'static str,
    },
}

/// A parsed quantity: `±digits × 10^exp10 × 2^exp2`, exact. Equality is by value
/// (`1Gi == 1024Mi`).
#[derive(Debug, Clone)]
pub struct Quantity {
    negative: bool,
    /// Significant decimal digits (ASCII), no leading zeros; empty for zero.
    digits: Vec<u8>,
    /// Power of ten applied to `digits` (the suffix's, minus the fraction's length).
    exp10: i64,
    /// Power of two applied to `digits` (0, or 10…60 for a binary suffix).
    exp2: u32,
}

impl Quantity {
    /// Parses `text` exactly as `resource.ParseQuantity` does (after the surrounding
    /// whitespace `Quantity.UnmarshalJSON` trims), with the refusals in the module
    /// documentation.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(QuantityError::Format);
        }
        let parts = scan(text.as_bytes())?;
        let (exp10, exp2) = interpret_suffix(parts.suffix)?;
        let frac_len = i64::try_from(parts.fraction.len()).map_err(|_| QuantityError::Format)?;
        let mut digits: Vec<u8> = parts
            .integer
            .iter()
            .chain(parts.fraction)
            .copied()
            .skip_while(|&d| d == b'0')
            .collect();
        // Trailing zeros move into the exponent, so large plain numbers stay short.
        let mut exp10 = exp10 - frac_len;
        while digits.last() == Some(&b'0') {
            digits.pop();
            exp10 += 1;
        }
        Ok(Self {
            negative: parts.negative && !digits.is_empty(),
            digits,
            exp10,
            exp2,
        })
    }

    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// Whether the value is a whole number (as `Quantity.Value()` needs for hugepages
    /// and extended resources).
    pub fn is_integer(&self) -> bool {
        self.exp10 >= 0 || self.is_zero() || self.fractional_digits_vanish()
    }

    /// The value in units of `10^-scale` (scale 3: thousandths), rounded up and away
    /// from zero as `Quantity.ScaledValue` rounds; an error when it does not fit `i64`.
    pub fn scaled(&self, scale: u32, unit: &'static str) -> Result<i64, QuantityError> {
        let too_large = QuantityError::TooLarge {
            max: i64::MAX,
            unit,
        };
        if self.is_zero() {
            return Ok(0);
        }
        let mantissa = times_power_of_two(&self.digits, self.exp2);
        let shift = self.exp10 + i64::from(scale);
        let magnitude = ceil_shifted(&mantissa, shift).ok_or(too_large.clone())?;
        let magnitude = i64::try_from(magnitude).map_err(|_| too_large)?;
        Ok(if self.negative { -magnitude } else { magnitude })
    }

    /// `Quantity.MilliValue()`: thousandths, rounded up (millicores for CPU).
    pub fn milli_value(&self) -> Result<i64, QuantityError> {
        self.scaled(3, "thousandths")
    }

    /// `Quantity.Value()`: whole units, rounded up (bytes for memory and storage).
    pub fn value(&self) -> Result<i64, QuantityError> {
        self.scaled(0, "units")
    }

    /// For the binary suffixes, `2^exp2 × digits × 10^exp10` is whole when the
    /// fraction's factors of five are absorbed: checked exactly on the scaled digits.
    fn fractional_digits_vanish(&self) -> bool {
        let mantissa = times_power_of_two(&self.digits, self.exp2);
        let Ok(places) = usize::try_from(-self.exp10) else {
            return true;
        };
        places <= mantissa.len()
            && mantissa[mantissa.len() - places..]
                .iter()
                .all(|&d| d == b'0')
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    /// Exact comparison (`Quantity.Cmp`), used for "request ≤ limit".
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => return Ordering::Greater,
            (true, false) => return Ordering::Less,
            _ => {}
        }
        let magnitude = compare_magnitudes(self, other);
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }
}

/// The pieces of a quantity's text, as `parseQuantityString` splits it.
struct Parts<'a> {
    negative: bool,
    integer: &'a [u8],
    fraction: &'a [u8],
    suffix: &'a [u8],
}

/// The API server's scanner: sign, digits, optional `.digits`, then a suffix made of
/// `eEinumkKMGTP` letters, an optional sign and digits; anything else is a format error.
fn scan(s: &[u8]) -> Result<Parts<'_>, QuantityError> {
    let (negative, rest) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let int_len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let (integer, rest) = rest.split_at(int_len);
    let (fraction, rest) = match rest.split_first() {
        Some((b'.', after)) => {
            let len = after.iter().take_while(|b| b.is_ascii_digit()).count();
            after.split_at(len)
        }
        _ => (&rest[..0], rest),
    };
    let letters = rest
        .iter()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    let mut end = letters;
    if matches!(rest.get(end), Some(b'+' | b'-')) {
        end += 1;
    }
    end += rest[end..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if end != rest.len() {
        return Err(QuantityError::Format);
    }
    Ok(Parts {
        negative,
        integer,
        fraction,
        suffix: rest,
    })
}

/// The suffix → (power of ten, power of two), as `suffixHandler.interpret`.
fn interpret_suffix(suffix: &[u8]) -> Result<(i64, u32), QuantityError> {
    let fixed = match suffix {
        b"n" => Some((-9, 0)),
        b"u" => Some((-6, 0)),
        b"m" => Some((-3, 0)),
        b"" => Some((0, 0)),
        b"k" => Some((3, 0)),
        b"M" => Some((6, 0)),
        b"G" => Some((9, 0)),
        b"T" => Some((12, 0)),
        b"P" => Some((15, 0)),
        b"E" => Some((18, 0)),
        b"Ki" => Some((0, 10)),
        b"Mi" => Some((0, 20)),
        b"Gi" => Some((0, 30)),
        b"Ti" => Some((0, 40)),
        b"Pi" => Some((0, 50)),
        b"Ei" => Some((0, 60)),
        _ => None,
    };
    if let Some(pair) = fixed {
        return Ok(pair);
    }
    let text = String::from_utf8_lossy(suffix).into_owned();
    let bad_suffix = || QuantityError::Suffix {
        suffix: text.clone(),
    };
    let Some((b'e' | b'E', exponent)) = suffix.split_first() else {
        return Err(bad_suffix());
    };
    // Go's strconv.ParseInt: an optional sign, then at least one digit, nothing else.
    let digits = exponent
        .strip_prefix(b"+")
        .or_else(|| exponent.strip_prefix(b"-"));
    let digits = digits.unwrap_or(exponent);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad_suffix());
    }
    let written = String::from_utf8_lossy(exponent).into_owned();
    // Beyond int64 the API server fails ParseInt (a suffix error); beyond int32 it
    // truncates. Both are refused, the second with its own reason.
    let parsed: i64 = written.parse().map_err(|_| bad_suffix())?;
    if !(-MAX_EXPONENT..=MAX_EXPONENT).contains(&parsed) {
        return Err(QuantityError::Exponent { exponent: written });
    }
    Ok((parsed, 0))
}

/// `digits × 2^exp2` as decimal digits (no leading zeros), one pass with a carry.
fn times_power_of_two(digits: &[u8], exp2: u32) -> Vec<u8> {
    if exp2 == 0 {
        return digits.to_vec();
    }
    let factor: u128 = 1u128 << exp2;
    let mut out: Vec<u8> = Vec::with_capacity(digits.len() + 20);
    let mut carry: u128 = 0;
    for &d in digits.iter().rev() {
        let x = u128::from(d - b'0') * factor + carry;
        out.push(b'0' + digit_of(x % 10));
        carry = x / 10;
    }
    while carry > 0 {
        out.push(b'0' + digit_of(carry % 10));
        carry /= 10;
    }
    while out.last() == Some(&b'0') {
        out.pop();
    }
    out.reverse();
    out
}

/// A value below 10 as a digit.
fn digit_of(x: u128) -> u8 {
    u8::try_from(x).unwrap_or(0)
}

/// ⌈digits × 10^shift⌉ as an integer, `None` when it exceeds `u64`.
fn ceil_shifted(digits: &[u8], shift: i64) -> Option<u64> {
    let len = i64::try_from(digits.len()).ok()?;
    // More than 20 integer digits cannot fit u64 (checked before any allocation).
    if len.checked_add(shift)? > 20 {
        return None;
    }
    let (whole, fraction): (&[u8], &[u8]) = if shift >= 0 {
        (digits, &[])
    } else {
        let cut = usize::try_from(len + shift).unwrap_or(0);
        digits.split_at(cut.min(digits.len()))
    };
    let mut value: u64 = 0;
    for &d in whole {
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if shift > 0 {
        value = value.checked_mul(10u64.checked_pow(u32::try_from(shift).ok()?)?)?;
    }
    if fraction.iter().any(|&d| d != b'0') {
        value = value.checked_add(1)?;
    }
    Some(value)
}

/// Compares |a| and |b| exactly: by their decimal magnitude, then digit by digit.
fn compare_magnitudes(a: &Quantity, b: &Quantity) -> Ordering {
    let (ma, mb) = (
        times_power_of_two(&a.digits, a.exp2),
        times_power_of_two(&b.digits, b.exp2),
    );
    match (ma.is_empty(), mb.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    // Magnitude = position of the leading digit: len + exp10.
    let order = |m: &[u8], exp10: i64| i64::try_from(m.len()).unwrap_or(i64::MAX) + exp10;
    order(&ma, a.exp10).cmp(&order(&mb, b.exp10)).then_with(|| {
        // Same order of magnitude: compare the digit strings padded with zeros.
        let n = ma.len().max(mb.len());
        let at = |m: &[u8], i: usize| m.get(i).copied().unwrap_or(b'0');
        (0..n)
            .map(|i| at(&ma, i).cmp(&at(&mb, i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    })
}

/// CPU quantity in millicores (rounded up), `None` when it is not a quantity or does
/// not fit. Use [`Quantity::parse`] where the reason matters.
pub fn cpu_millis(q: &str) -> Option<i64> {
    Quantity::parse(q).ok()?.milli_value().ok()
}

/// Memory (or any byte) quantity in bytes, rounded up; `None` as [`cpu_millis`].
pub fn bytes(q: &str) -> Option<i64> {
    Quantity::parse(q).ok()?.value().ok()
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
mod tests;
