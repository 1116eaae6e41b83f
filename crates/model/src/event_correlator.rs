//! What becomes of an event before it is posted to the API server, as client-go's
//! `EventCorrelator` decides for the kubelet:
//!
//! 1. aggregation: more than 10 events within 10 minutes that differ only by message
//!    (same source, object, type and reason) become one event
//!    "(combined from similar events): <latest message>";
//! 2. deduplication: an event seen before (same source, object with its fieldPath, type,
//!    reason and message) is not created again; the existing object's `count` goes up
//!    and its `lastTimestamp` moves (a PATCH);
//! 3. the spam filter: each source + object has a token bucket of 25 events that
//!    refills one event every 5 minutes; an event without a token is dropped.
//!
//! Pure: the caller passes the time; the caches are bounded (4096 keys each, the least
//! recently used key goes first) as client-go's LRUs.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Event;

use super::k8s_time::to_k8s;
use super::token_bucket::TokenBucket;

/// Keys kept per cache (client-go's `maxLruCacheEntries`).
pub const MAX_KEYS: usize = 4096;
/// Similar events (differing only by message) before they are aggregated.
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// The window in which similar events count towards aggregation.
pub const AGGREGATE_INTERVAL_SECS: i64 = 600;
/// The spam filter's burst per source + object.
pub const SPAM_BURST: u32 = 25;
/// The spam filter's refill: one event per 5 minutes.
pub const SPAM_QPS: f64 = 1.0 / 300.0;

/// The prefix of an aggregated event's message.
pub const AGGREGATED_PREFIX: &str = "(combined from similar events): ";

/// What to send for one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Correlated {
    /// A new Event object (count 1).
    Create(Event),
    /// The existing object `event.metadata.name` with its new `count`,
    /// `lastTimestamp` and `message` (if the object is gone, it is created again).
    Patch(Event),
    /// Dropped by the spam filter.
    Skip,
}

#[derive(Debug)]
struct AggregateRecord {
    messages: HashSet<String>,
    last: DateTime<Utc>,
}

#[derive(Debug)]
struct Seen {
    /// The last version of the object as sent (name, count, first time, version).
    event: Event,
    last: DateTime<Utc>,
}

/// The correlator's caches; one per event sink (the node has one).
#[derive(Debug, Default)]
pub struct EventCorrelator {
    aggregates: HashMap<String, AggregateRecord>,
    seen: HashMap<String, Seen>,
    spam: HashMap<String, TokenBucket>,
}

fn source_and_object(e: &Event) -> Vec<&str> {
    let src = e.source.as_ref();
    let o = &e.involved_object;
    vec![
        src.and_then(|s| s.component.as_deref()).unwrap_or(""),
        src.and_then(|s| s.host.as_deref()).unwrap_or(""),
        o.kind.as_deref().unwrap_or(""),
        o.namespace.as_deref().unwrap_or(""),
        o.name.as_deref().unwrap_or(""),
        o.uid.as_deref().unwrap_or(""),
        o.api_version.as_deref().unwrap_or(""),
    ]
}

/// client-go's spam key: the source and the object.
fn spam_key(e: &Event) -> String {
    source_and_object(e).join("")
}

/// client-go's aggregation key: source, object, type and reason.
fn aggregate_key(e: &Event) -> String {
    let mut parts = source_and_object(e);
    parts.push(e.type_.as_deref().unwrap_or(""));
    parts.push(e.reason.as_deref().unwrap_or(""));
    parts.join("")
}

/// client-go's event key: source, object with fieldPath, type, reason, message.
fn event_key(e: &Event) -> String {
    let src = e.source.as_ref();
    let o = &e.involved_object;
    [
        src.and_then(|s| s.component.as_deref()).unwrap_or(""),
        src.and_then(|s| s.host.as_deref()).unwrap_or(""),
        o.kind.as_deref().unwrap_or(""),
        o.namespace.as_deref().unwrap_or(""),
        o.name.as_deref().unwrap_or(""),
        o.field_path.as_deref().unwrap_or(""),
        o.uid.as_deref().unwrap_or(""),
        o.api_version.as_deref().unwrap_or(""),
        e.type_.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.message.as_deref().unwrap_or(""),
    ]
    .join("")
}

/// Makes room for one more key: the least recently used one goes.
fn bound<V, T: PartialOrd>(map: &mut HashMap<String, V>, last: impl Fn(&V) -> T) {
    if map.len() < MAX_KEYS {
        return;
    }
    if let Some(oldest) = map
        .iter()
        .min_by(|(_, a), (_, b)| {
            last(a)
                .partial_cmp(&last(b))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
}

impl EventCorrelator {
    /// Decides what to send for `event` (a complete new Event with count 1, its
    /// timestamps at `now`).
    pub fn correlate(&mut self, event: Event, now: DateTime<Utc>) -> Correlated {
        let (event, key) = self.aggregate(event, now);
        let observed = self.observe(event, key, now);
        if !self.allow(&observed, now) {
            return Correlated::Skip;
        }
        if observed.count.unwrap_or(1) > 1 {
            Correlated::Patch(observed)
        } else {
            Correlated::Create(observed)
        }
    }

    /// The event as it is to be sent, and the key it is deduplicated by: its own, or
    /// the aggregation key once similar events are combined (every later one then
    /// counts on the one combined event, whatever its message).
    fn aggregate(&mut self, mut event: Event, now: DateTime<Utc>) -> (Event, String) {
        let key = aggregate_key(&event);
        let message = event.message.clone().unwrap_or_default();
        let fresh = |r: &AggregateRecord| (now - r.last).num_seconds() <= AGGREGATE_INTERVAL_SECS;
        if !self.aggregates.get(&key).is_some_and(fresh) {
            bound(&mut self.aggregates, |r| r.last);
            self.aggregates.insert(
                key.clone(),
                AggregateRecord {
                    messages: HashSet::new(),
                    last: now,
                },
            );
        }
        let Some(record) = self.aggregates.get_mut(&key) else {
            return (event.clone(), event_key(&event));
        };
        record.messages.insert(message.clone());
        record.last = now;
        if record.messages.len() < AGGREGATE_MAX_EVENTS {
            let own = event_key(&event);
            return (event, own);
        }
        // The set stays one short of the limit, so that each further new message is
        // combined too (client-go pops any one).
        if let Some(any) = record.messages.iter().next().cloned() {
            record.messages.remove(&any);
        }
        event.message = Some(format!("{AGGREGATED_PREFIX}{message}"));
        (event, key)
    }

    fn observe(&mut self, mut event: Event, key: String, now: DateTime<Utc>) -> Event {
        match self.seen.get_mut(&key) {
            Some(seen) => {
                let count = seen.event.count.unwrap_or(1) + 1;
                event.metadata.name = seen.event.metadata.name.clone();
                event.metadata.resource_version = seen.event.metadata.resource_version.clone();
                event.first_timestamp = seen.event.first_timestamp.clone();
                event.count = Some(count);
                event.last_timestamp = Some(to_k8s(now));
                seen.event.count = Some(count);
                seen.last = now;
                event
            }
            None => {
                bound(&mut self.seen, |s| s.last);
                self.seen.insert(
                    key,
                    Seen {
                        event: event.clone(),
                        last: now,
                    },
                );
                event
            }
        }
    }

    fn allow(&mut self, event: &Event, now: DateTime<Utc>) -> bool {
        let key = spam_key(event);
        if !self.spam.contains_key(&key) {
            bound(&mut self.spam, TokenBucket::last_used);
        }
        let secs = now.timestamp_millis() as f64 / 1000.0;
        self.spam
            .entry(key)
            .or_insert_with(|| TokenBucket::new(SPAM_QPS, SPAM_BURST, secs))
            .try_take(secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn event(pod: &str, reason: &str, message: &str, at: DateTime<Utc>) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{pod}.{:x}", at.timestamp_nanos_opt().unwrap())),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some("default".into()),
                name: Some(pod.into()),
                uid: Some(format!("uid-{pod}")),
                api_version: Some("v1".into()),
                field_path: Some("spec.containers{app}".into()),
                ..Default::default()
            },
            source: Some(EventSource {
                component: Some("kubelet".into()),
                host: Some("node".into()),
            }),
            type_: Some("Normal".into()),
            reason: Some(reason.into()),
            message: Some(message.into()),
            count: Some(1),
            first_timestamp: Some(to_k8s(at)),
            last_timestamp: Some(to_k8s(at)),
            ..Default::default()
        }
    }

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_repeated_event_patches_the_first_object_with_its_count() {
        let mut c = EventCorrelator::default();
        let Correlated::Create(first) = c.correlate(event("p", "BackOff", "m", t(0)), t(0)) else {
            panic!("the first one is created")
        };
        let Correlated::Patch(again) = c.correlate(event("p", "BackOff", "m", t(10)), t(10)) else {
            panic!("the second one patches")
        };
        assert_eq!(again.metadata.name, first.metadata.name);
        assert_eq!(again.count, Some(2));
        assert_eq!(again.first_timestamp, first.first_timestamp);
        assert_eq!(again.last_timestamp, Some(to_k8s(t(10))));
        let Correlated::Patch(third) = c.correlate(event("p", "BackOff", "m", t(20)), t(20)) else {
            panic!("the third one patches")
        };
        assert_eq!(third.count, Some(3));
        // Another message is another event.
        assert!(matches!(
            c.correlate(event("p", "BackOff", "other", t(21)), t(21)),
            Correlated::Create(_)
        ));
    }

    #[test]
    fn the_tenth_distinct_message_is_combined_and_later_ones_count_on_it() {
        let mut c = EventCorrelator::default();
        for i in 0..9 {
            let r = c.correlate(event("p", "Failed", &format!("m{i}"), t(i)), t(i));
            assert!(matches!(r, Correlated::Create(_)), "{i}: {r:?}");
        }
        let Correlated::Create(combined) = c.correlate(event("p", "Failed", "m9", t(9)), t(9))
        else {
            panic!("the tenth distinct message starts the aggregate")
        };
        assert_eq!(
            combined.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        let Correlated::Patch(next) = c.correlate(event("p", "Failed", "m10", t(10)), t(10)) else {
            panic!("later ones count on the aggregate")
        };
        assert_eq!(next.count, Some(2));
        assert_eq!(
            next.message.as_deref(),
            Some("(combined from similar events): m10")
        );
    }

    #[test]
    fn the_spam_filter_allows_25_per_object_then_one_per_5_minutes() {
        let mut c = EventCorrelator::default();
        let mut sent = 0;
        for i in 0..40 {
            // Distinct reasons: neither dedup nor aggregation is involved.
            if c.correlate(event("p", &format!("R{i}"), "m", t(0)), t(0)) != Correlated::Skip {
                sent += 1;
            }
        }
        assert_eq!(sent, 25);
        // Another object has its own bucket.
        assert_ne!(
            c.correlate(event("q", "R", "m", t(0)), t(0)),
            Correlated::Skip
        );
        assert_eq!(
            c.correlate(event("p", "X1", "m", t(299)), t(299)),
            Correlated::Skip
        );
        assert_ne!(
            c.correlate(event("p", "X2", "m", t(301)), t(301)),
            Correlated::Skip
        );
        assert_eq!(
            c.correlate(event("p", "X3", "m", t(302)), t(302)),
            Correlated::Skip
        );
    }
}
