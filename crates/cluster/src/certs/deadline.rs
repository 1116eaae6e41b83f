//! When to ask for the next certificate: the kubelet's rule, a jittered 70–90 % of the
//! certificate's lifetime after its notBefore, so that a fleet of nodes whose
//! certificates were signed together does not renew together, and a renewal that fails
//! still has 10–30 % of the lifetime to be retried in.

use std::time::{Duration, SystemTime};

use super::pair::Validity;

/// The rotation deadline of `validity`, with `unit` a number in [0, 1) picking the
/// point between 70 % and 90 % of the lifetime.
pub fn rotation_deadline(validity: &Validity, unit: f64) -> SystemTime {
    let lifetime = validity
        .not_after
        .duration_since(validity.not_before)
        .unwrap_or(Duration::ZERO);
    let fraction = 0.7 + 0.2 * unit.clamp(0.0, 1.0);
    validity.not_before + lifetime.mul_f64(fraction)
}

/// The deadline with a fresh random jitter.
pub fn jittered_rotation_deadline(validity: &Validity) -> SystemTime {
    rotation_deadline(validity, fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lifetime(secs: u64) -> Validity {
        let not_before = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        Validity {
            not_before,
            not_after: not_before + Duration::from_secs(secs),
            serial: "01".into(),
        }
    }

    #[test]
    fn the_deadline_lies_between_70_and_90_percent_of_the_lifetime() {
        let v = lifetime(1000);
        let at = |unit| {
            rotation_deadline(&v, unit)
                .duration_since(v.not_before)
                .unwrap()
        };
        assert_eq!(at(0.0), Duration::from_secs(700));
        assert_eq!(at(0.5), Duration::from_secs(800));
        assert_eq!(at(1.0), Duration::from_secs(900));
        for _ in 0..1000 {
            let d = jittered_rotation_deadline(&v)
                .duration_since(v.not_before)
                .unwrap();
            assert!((700..=900).contains(&d.as_secs()), "{d:?}");
        }
    }

    #[test]
    fn a_certificate_whose_dates_are_reversed_is_due_at_once() {
        let mut v = lifetime(10);
        std::mem::swap(&mut v.not_before, &mut v.not_after);
        assert_eq!(rotation_deadline(&v, 0.5), v.not_before);
    }
}
