//! Pull progress: the events [`Puller::pull`](super::Puller::pull) sends, and a
//! pure renderer that folds them into one status line for `podhost pull`
//! (`layers 2/3  12.4 MB / 33.6 MB`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// One step of a pull, in the order they happen: `Resolved`, then `LayerCached`
/// for every layer blob already in the store, `Layer` (repeatedly, ending with
/// `done == total`) and `Unpacking` for the others, then `Done`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PullProgress {
    /// The manifest is known.
    Resolved {
        /// The normalized reference being pulled.
        reference: String,
        /// `sha256:` digest of the (platform-specific) image manifest.
        digest: String,
        /// Distinct layer blobs of the image.
        layers: usize,
        /// Compressed bytes to download: the layers not yet in the store.
        total_bytes: u64,
    },
    /// Download progress of one layer blob (also sent once with `done == total`
    /// when a concurrent pull fetched it meanwhile).
    Layer {
        /// The layer blob's digest.
        digest: String,
        /// Bytes received so far.
        done: u64,
        /// The blob's size.
        total: u64,
    },
    /// The layer blob was already in the store; nothing is downloaded.
    LayerCached {
        /// The layer blob's digest.
        digest: String,
    },
    /// The layer is being unpacked into its snapshot.
    Unpacking {
        /// The layer blob's digest.
        digest: String,
    },
    /// The image is in the store under `reference`.
    Done {
        /// The normalized reference.
        reference: String,
        /// `sha256:` digest of the image manifest.
        digest: String,
    },
}

/// Folds progress events into what a status line shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgressState {
    layers: usize,
    total_bytes: u64,
    /// Per layer digest: (bytes done, complete).
    seen: BTreeMap<String, (u64, bool)>,
    unpacking: usize,
    done: bool,
}

impl ProgressState {
    /// Applies one event.
    pub fn apply(&mut self, event: &PullProgress) {
        match event {
            PullProgress::Resolved {
                layers,
                total_bytes,
                ..
            } => {
                self.layers = *layers;
                self.total_bytes = *total_bytes;
            }
            PullProgress::Layer {
                digest,
                done,
                total,
            } => {
                let entry = self.seen.entry(digest.clone()).or_default();
                entry.0 = entry.0.max(*done);
                entry.1 |= done >= total;
            }
            PullProgress::LayerCached { digest } => {
                self.seen.entry(digest.clone()).or_default().1 = true;
            }
            PullProgress::Unpacking { .. } => self.unpacking += 1,
            PullProgress::Done { .. } => self.done = true,
        }
    }

    /// The status line, e.g. `layers 2/3  12.4 MB / 33.6 MB`.
    pub fn line(&self) -> String {
        let complete = self.seen.values().filter(|(_, c)| *c).count();
        let bytes: u64 = self.seen.values().map(|(b, _)| *b).sum();
        let mut line = format!(
            "layers {complete}/{}  {} / {}",
            self.layers,
            human(bytes.min(self.total_bytes)),
            human(self.total_bytes)
        );
        if self.done {
            line.push_str("  done");
        } else if self.unpacking > 0 {
            line.push_str(&format!("  unpacked {}", self.unpacking));
        }
        line
    }
}

/// The status line for the events received so far (see [`ProgressState`]).
pub fn render_progress(events: &[PullProgress]) -> String {
    let mut state = ProgressState::default();
    for event in events {
        state.apply(event);
    }
    state.line()
}

/// Decimal units, one decimal: `0 B`, `999 B`, `12.4 MB`, `1.0 GB`.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 999.95 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The sending side used by the puller: state changes are awaited (they are
/// few), byte counts are dropped when the receiver lags. A closed or absent
/// receiver is ignored.
#[derive(Debug, Clone, Default)]
pub(super) struct Reporter(Option<mpsc::Sender<PullProgress>>);

impl Reporter {
    pub(super) fn new(tx: Option<mpsc::Sender<PullProgress>>) -> Reporter {
        Reporter(tx)
    }

    /// Sends an event, waiting for room in the channel.
    pub(super) async fn send(&self, event: PullProgress) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(event).await;
        }
    }

    /// Sends an event if there is room right now.
    pub(super) fn try_send(&self, event: PullProgress) {
        if let Some(tx) = &self.0 {
            let _ = tx.try_send(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(d: &str, done: u64, total: u64) -> PullProgress {
        PullProgress::Layer {
            digest: d.into(),
            done,
            total,
        }
    }

    #[test]
    fn renders_layers_and_bytes() {
        let mut events = vec![PullProgress::Resolved {
            reference: "r".into(),
            digest: "m".into(),
            layers: 3,
            total_bytes: 33_600_000,
        }];
        assert_eq!(render_progress(&events), "layers 0/3  0 B / 33.6 MB");
        events.push(layer("a", 1_000_000, 1_200_000));
        events.push(layer("a", 1_200_000, 1_200_000));
        events.push(PullProgress::LayerCached { digest: "b".into() });
        events.push(layer("c", 11_200_000, 32_400_000));
        assert_eq!(render_progress(&events), "layers 2/3  12.4 MB / 33.6 MB");
        events.push(layer("c", 32_400_000, 32_400_000));
        events.push(PullProgress::Unpacking { digest: "a".into() });
        assert_eq!(
            render_progress(&events),
            "layers 3/3  33.6 MB / 33.6 MB  unpacked 1"
        );
        events.push(PullProgress::Done {
            reference: "r".into(),
            digest: "m".into(),
        });
        assert_eq!(
            render_progress(&events),
            "layers 3/3  33.6 MB / 33.6 MB  done"
        );
    }

    #[test]
    fn everything_cached_and_no_events() {
        assert_eq!(render_progress(&[]), "layers 0/0  0 B / 0 B");
        let events = [
            PullProgress::Resolved {
                reference: "r".into(),
                digest: "m".into(),
                layers: 1,
                total_bytes: 0,
            },
            PullProgress::LayerCached { digest: "a".into() },
        ];
        assert_eq!(render_progress(&events), "layers 1/1  0 B / 0 B");
    }

    #[test]
    fn human_units() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(999), "999 B");
        assert_eq!(human(1000), "1.0 kB");
        assert_eq!(human(1_048_576), "1.0 MB");
        assert_eq!(human(999_960), "1.0 MB");
        assert_eq!(human(12_400_000), "12.4 MB");
        assert_eq!(human(2_500_000_000), "2.5 GB");
    }

    #[test]
    fn events_round_trip_as_json() {
        let e = layer("sha256:x", 1, 2);
        let s = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<PullProgress>(&s).unwrap(), e);
    }
}
