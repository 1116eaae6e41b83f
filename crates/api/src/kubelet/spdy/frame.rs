//! SPDY/3 frames (what `Upgrade: SPDY/3.1` carries for kubectl's exec and port-forward;
//! moby/spdystream writes version 3 frames): pure encoding and parsing, no I/O and no
//! header compression (header blocks stay as the compressed bytes they are on the wire;
//! `headers.rs` turns them into names and values).
//!
//! A control frame is `1 | version:15 | type:16 | flags:8 | length:24 | payload`, a data
//! frame `0 | stream:31 | flags:8 | length:24 | data`.

/// The SPDY version in every control frame.
pub const VERSION: u16 = 3;
/// The flag that ends a stream's direction (DATA, SYN_STREAM, SYN_REPLY, HEADERS).
pub const FLAG_FIN: u8 = 0x01;
/// The bytes before a frame's payload.
pub const HEADER_LEN: usize = 8;
/// The largest payload a frame may declare (24 bits).
pub const MAX_PAYLOAD: usize = 0x00ff_ffff;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// SETTINGS id of the initial per-stream window.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u32 = 7;

/// RST_STREAM status codes used here.
pub const RST_PROTOCOL_ERROR: u32 = 1;
pub const RST_CANCEL: u32 = 5;
/// The stream's frame could not be taken whole (its header block too large).
pub const RST_FRAME_TOO_LARGE: u32 = 11;

/// GOAWAY status of a session ended by something the peer sent.
pub const GOAWAY_PROTOCOL_ERROR: u32 = 1;

/// One frame, borrowed from the bytes it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: u32,
        fin: bool,
        data: &'a [u8],
    },
    SynStream {
        stream: u32,
        fin: bool,
        /// The compressed header block.
        headers: &'a [u8],
    },
    SynReply {
        stream: u32,
        fin: bool,
        headers: &'a [u8],
    },
    RstStream {
        stream: u32,
        status: u32,
    },
    /// `(id, value)` pairs; the per-entry flags are not needed here.
    Settings(Vec<(u32, u32)>),
    Ping(u32),
    GoAway {
        last_good_stream: u32,
        status: u32,
    },
    Headers {
        stream: u32,
        fin: bool,
        headers: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        delta: u32,
    },
    /// A control frame of a type this server does not act on (NOOP, CREDENTIAL, ...):
    /// skipped, as the spec asks.
    Unknown {
        kind: u16,
    },
}

/// Bytes that are not a SPDY/3 frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("SPDY control frame of version {0}; only version 3 is spoken")]
    Version(u16),
    #[error("SPDY frame type {kind} with a {len}-byte payload is too short")]
    Short { kind: u16, len: usize },
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

fn stream_at(bytes: &[u8], at: usize) -> u32 {
    u32_at(bytes, at) & 0x7fff_ffff
}

fn payload_len(header: &[u8]) -> usize {
    usize::from(header[5]) << 16 | usize::from(header[6]) << 8 | usize::from(header[7])
}

/// The first frame in `buf` and how many bytes it took, or `Ok(None)` while `buf` holds
/// less than a whole frame.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = payload_len(buf);
    let total = HEADER_LEN + len;
    if buf.len() < total {
        return Ok(None);
    }
    let flags = buf[4];
    let fin = flags & FLAG_FIN != 0;
    let p = &buf[HEADER_LEN..total];
    if buf[0] & 0x80 == 0 {
        let frame = Frame::Data {
            stream: stream_at(buf, 0),
            fin,
            data: p,
        };
        return Ok(Some((frame, total)));
    }
    let version = u16::from_be_bytes([buf[0], buf[1]]) & 0x7fff;
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    let kind = u16::from_be_bytes([buf[2], buf[3]]);
    let need = |n: usize| {
        if p.len() < n {
            Err(FrameError::Short { kind, len: p.len() })
        } else {
            Ok(())
        }
    };
    let frame = match kind {
        SYN_STREAM => {
            // stream, associated stream, priority and slot, then the header block.
            need(10)?;
            Frame::SynStream {
                stream: stream_at(p, 0),
                fin,
                headers: &p[10..],
            }
        }
        SYN_REPLY => {
            need(4)?;
            Frame::SynReply {
                stream: stream_at(p, 0),
                fin,
                headers: &p[4..],
            }
        }
        RST_STREAM => {
            need(8)?;
            Frame::RstStream {
                stream: stream_at(p, 0),
                status: u32_at(p, 4),
            }
        }
        SETTINGS => {
            need(4)?;
            let count = usize::try_from(u32_at(p, 0)).unwrap_or(usize::MAX);
            let entries = &p[4..];
            if entries.len() / 8 < count {
                return Err(FrameError::Short { kind, len: p.len() });
            }
            let pairs = entries
                .chunks_exact(8)
                .take(count)
                .map(|e| (u32_at(e, 0) & 0x00ff_ffff, u32_at(e, 4)))
                .collect();
            Frame::Settings(pairs)
        }
        PING => {
            need(4)?;
            Frame::Ping(u32_at(p, 0))
        }
        GOAWAY => {
            need(4)?;
            // SPDY/3 adds a status after the last good stream; tolerate its absence.
            let status = if p.len() >= 8 { u32_at(p, 4) } else { 0 };
            Frame::GoAway {
                last_good_stream: stream_at(p, 0),
                status,
            }
        }
        HEADERS => {
            need(4)?;
            Frame::Headers {
                stream: stream_at(p, 0),
                fin,
                headers: &p[4..],
            }
        }
        WINDOW_UPDATE => {
            need(8)?;
            Frame::WindowUpdate {
                stream: stream_at(p, 0),
                delta: stream_at(p, 4),
            }
        }
        other => Frame::Unknown { kind: other },
    };
    Ok(Some((frame, total)))
}

fn push_len(out: &mut Vec<u8>, flags: u8, len: usize) {
    debug_assert!(len <= MAX_PAYLOAD);
    let len = u32::try_from(len.min(MAX_PAYLOAD)).unwrap_or(0);
    out.push(flags);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    push_len(&mut out, flags, payload.len());
    out.extend_from_slice(payload);
    out
}

fn fin_flag(fin: bool) -> u8 {
    if fin { FLAG_FIN } else { 0 }
}

/// A DATA frame; `data` must fit one frame (callers split at their window anyway).
pub fn data(stream: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + data.len());
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    push_len(&mut out, fin_flag(fin), data.len());
    out.extend_from_slice(data);
    out
}

/// A SYN_STREAM with an already compressed header block (priority 0, no association).
pub fn syn_stream(stream: u32, fin: bool, headers: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(10 + headers.len());
    payload.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    payload.extend_from_slice(&0u32.to_be_bytes());
    payload.extend_from_slice(&[0, 0]);
    payload.extend_from_slice(headers);
    control(SYN_STREAM, fin_flag(fin), &payload)
}

/// A SYN_REPLY with an already compressed header block.
pub fn syn_reply(stream: u32, fin: bool, headers: &[u8]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(4 + headers.len());
    payload.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    payload.extend_from_slice(headers);
    control(SYN_REPLY, fin_flag(fin), &payload)
}

pub fn rst_stream(stream: u32, status: u32) -> Vec<u8> {
    let mut payload = (stream & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(&status.to_be_bytes());
    control(RST_STREAM, 0, &payload)
}

pub fn settings(pairs: &[(u32, u32)]) -> Vec<u8> {
    let count = u32::try_from(pairs.len()).unwrap_or(0);
    let mut payload = count.to_be_bytes().to_vec();
    for (id, value) in pairs {
        payload.extend_from_slice(&(id & 0x00ff_ffff).to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    control(SETTINGS, 0, &payload)
}

pub fn ping(id: u32) -> Vec<u8> {
    control(PING, 0, &id.to_be_bytes())
}

pub fn goaway(last_good_stream: u32, status: u32) -> Vec<u8> {
    let mut payload = (last_good_stream & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(&status.to_be_bytes());
    control(GOAWAY, 0, &payload)
}

pub fn window_update(stream: u32, delta: u32) -> Vec<u8> {
    let mut payload = (stream & 0x7fff_ffff).to_be_bytes().to_vec();
    payload.extend_from_slice(&(delta & 0x7fff_ffff).to_be_bytes());
    control(WINDOW_UPDATE, 0, &payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Frame<'_> {
        let (frame, used) = parse(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        frame
    }

    #[test]
    fn data_frames_round_trip_with_fin() {
        let bytes = data(5, true, b"hello");
        assert_eq!(&bytes[..8], &[0, 0, 0, 5, FLAG_FIN, 0, 0, 5]);
        assert_eq!(
            one(&bytes),
            Frame::Data {
                stream: 5,
                fin: true,
                data: b"hello"
            }
        );
    }

    #[test]
    fn control_frames_round_trip() {
        let bytes = syn_stream(3, false, b"zz");
        assert_eq!(&bytes[..4], &[0x80, 3, 0, 1]);
        assert_eq!(
            one(&bytes),
            Frame::SynStream {
                stream: 3,
                fin: false,
                headers: b"zz"
            }
        );
        assert_eq!(
            one(&syn_reply(3, true, b"h")),
            Frame::SynReply {
                stream: 3,
                fin: true,
                headers: b"h"
            }
        );
        assert_eq!(
            one(&rst_stream(7, RST_CANCEL)),
            Frame::RstStream {
                stream: 7,
                status: RST_CANCEL
            }
        );
        assert_eq!(
            one(&settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)])),
            Frame::Settings(vec![(SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)])
        );
        assert_eq!(one(&ping(9)), Frame::Ping(9));
        assert_eq!(
            one(&goaway(5, 0)),
            Frame::GoAway {
                last_good_stream: 5,
                status: 0
            }
        );
        assert_eq!(
            one(&window_update(1, 4096)),
            Frame::WindowUpdate {
                stream: 1,
                delta: 4096
            }
        );
    }

    #[test]
    fn partial_input_waits_for_more() {
        let bytes = data(1, false, b"abcdef");
        for cut in 0..bytes.len() {
            assert_eq!(parse(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        // Two frames back to back: the first is taken, its length says where the next starts.
        let mut two = ping(1);
        two.extend_from_slice(&ping(2));
        let (first, used) = parse(&two).unwrap().unwrap();
        assert_eq!(first, Frame::Ping(1));
        assert_eq!(one(&two[used..]), Frame::Ping(2));
    }

    #[test]
    fn other_versions_and_short_payloads_are_refused() {
        let mut v2 = ping(1);
        v2[1] = 2;
        assert_eq!(parse(&v2), Err(FrameError::Version(2)));
        let short = control(RST_STREAM, 0, &[0, 0, 0, 1]);
        assert_eq!(
            parse(&short),
            Err(FrameError::Short {
                kind: RST_STREAM,
                len: 4
            })
        );
        assert_eq!(one(&control(5, 0, &[])), Frame::Unknown { kind: 5 });
    }
}
