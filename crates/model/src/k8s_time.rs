//! Between `chrono` times (what podhost records) and the API's `metav1.Time`.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `t` as the API's time (nanosecond precision; out-of-range times become the epoch).
pub fn to_k8s(t: DateTime<Utc>) -> Time {
    let nanos = t.timestamp_nanos_opt().map(i128::from).unwrap_or_default();
    Time(k8s_openapi::jiff::Timestamp::from_nanosecond(nanos).unwrap_or_default())
}

/// The API's time as `chrono` (out-of-range times become the epoch).
pub fn from_k8s(t: &Time) -> DateTime<Utc> {
    let nanos = t.0.as_nanosecond();
    let secs = i64::try_from(nanos.div_euclid(1_000_000_000)).unwrap_or_default();
    let sub = u32::try_from(nanos.rem_euclid(1_000_000_000)).unwrap_or_default();
    DateTime::from_timestamp(secs, sub).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_nanoseconds() {
        let t = DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        assert_eq!(from_k8s(&to_k8s(t)), t);
        let before_epoch = DateTime::from_timestamp(-5, 1).unwrap();
        assert_eq!(from_k8s(&to_k8s(before_epoch)), before_epoch);
    }
}
