//! The resize channel (websocket channel 4, SPDY `resize` stream): JSON objects
//! `{"Width":…,"Height":…}` one after another, as Go's json.Encoder writes them; a
//! SPDY DATA frame may hold part of one or several.

use serde::Deserialize;

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct TerminalSize {
    #[serde(rename = "Width")]
    pub width: u16,
    #[serde(rename = "Height")]
    pub height: u16,
}

/// Collects the resize stream's bytes into whole messages.
#[derive(Debug, Default)]
pub struct ResizeDecoder {
    pending: Vec<u8>,
}

/// More than this without a whole message is not a resize stream.
const MAX_PENDING: usize = 4096;

impl ResizeDecoder {
    /// The sizes completed by `data`, in order; malformed messages are dropped.
    pub fn push(&mut self, data: &[u8]) -> Vec<TerminalSize> {
        self.pending.extend_from_slice(data);
        let mut sizes = Vec::new();
        let mut consumed = 0;
        let mut messages =
            serde_json::Deserializer::from_slice(&self.pending).into_iter::<serde_json::Value>();
        loop {
            match messages.next() {
                Some(Ok(value)) => {
                    consumed = messages.byte_offset();
                    match serde_json::from_value::<TerminalSize>(value) {
                        Ok(size) => sizes.push(size),
                        Err(e) => tracing::debug!(error = %e, "exec: resize message ignored"),
                    }
                }
                // A message cut short: the rest comes in the next frame.
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "exec: resize stream is not JSON; dropped");
                    consumed = self.pending.len();
                    break;
                }
                None => {
                    consumed = self.pending.len();
                    break;
                }
            }
        }
        self.pending.drain(..consumed);
        if self.pending.len() > MAX_PENDING {
            self.pending.clear();
        }
        sizes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_split_and_joined_messages() {
        let mut d = ResizeDecoder::default();
        assert_eq!(
            d.push(br#"{"Width":80,"Height":24}"#),
            vec![TerminalSize {
                width: 80,
                height: 24
            }]
        );
        assert_eq!(d.push(br#"{"Width":100,"He"#), vec![]);
        assert_eq!(
            d.push(b"ight\":30}\n{\"Width\":1,\"Height\":2}\n"),
            vec![
                TerminalSize {
                    width: 100,
                    height: 30
                },
                TerminalSize {
                    width: 1,
                    height: 2
                }
            ]
        );
        assert_eq!(d.push(b"not json"), vec![]);
        assert_eq!(
            d.push(br#"{"Width":5,"Height":6}"#),
            vec![TerminalSize {
                width: 5,
                height: 6
            }]
        );
    }
}
