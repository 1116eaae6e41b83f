//! A server's SPDY/3.1 connection after the `101 Switching Protocols`: one task reads
//! frames (answering PINGs, accepting every stream the client opens with a SYN_REPLY,
//! keeping the peer's windows) and hands stream events to the caller; one task writes,
//! so that header blocks are compressed in exactly the order they go out (one zlib
//! stream per direction).

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::SpdyError;
use super::frame::{self, Frame};
use super::headers::{Deflater, HeaderError, Headers, Inflater};
use super::window::SendWindows;

/// The largest DATA payload written at once.
const MAX_DATA: usize = 32 * 1024;

/// What the client did.
#[derive(Debug)]
pub enum Event {
    /// A new stream (already answered with SYN_REPLY).
    Opened {
        stream: u32,
        headers: Headers,
        fin: bool,
    },
    Data {
        stream: u32,
        data: Vec<u8>,
        fin: bool,
    },
    Reset {
        stream: u32,
    },
    /// The client will open no more streams.
    GoAway,
    /// The connection ended (or sent something that is not SPDY/3).
    Closed,
}

enum Outgoing {
    Frame(Vec<u8>),
    Reply {
        stream: u32,
    },
    /// Nothing more to send: shut the write side (TLS close_notify, then FIN).
    Shutdown,
}

/// Sends on the connection; cheap to clone. The write side is shut by [`close`]
/// (or once every clone and the reader are gone).
///
/// [`close`]: Sender::close
#[derive(Clone)]
pub struct Sender {
    out: mpsc::Sender<Outgoing>,
    windows: Arc<SendWindows>,
}

impl Sender {
    /// `data` on `stream`, in frames that fit the peer's window; false once the
    /// connection is gone.
    pub async fn data(&self, stream: u32, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            let n = self.windows.take(stream, data.len().min(MAX_DATA)).await;
            if n == 0 {
                return false;
            }
            let (now, rest) = data.split_at(n);
            data = rest;
            if !self.frame(frame::data(stream, false, now)).await {
                return false;
            }
        }
        true
    }

    /// This side's end of `stream` (an empty DATA with FIN).
    pub async fn finish(&self, stream: u32) -> bool {
        self.frame(frame::data(stream, true, &[])).await
    }

    /// GOAWAY: this side opens no streams and accepts none after `last_good_stream`.
    pub async fn go_away(&self, last_good_stream: u32) -> bool {
        self.frame(frame::goaway(last_good_stream, 0)).await
    }

    /// Half-closes the connection after everything queued: the client reads all of it
    /// and then its end, while this side still reads what the client sends.
    pub async fn close(&self) {
        let _ = self.out.send(Outgoing::Shutdown).await;
    }

    async fn frame(&self, bytes: Vec<u8>) -> bool {
        self.out.send(Outgoing::Frame(bytes)).await.is_ok()
    }
}

/// Starts serving SPDY on `io`: the sender and the client's events.
pub fn start<IO>(io: IO) -> (Sender, mpsc::Receiver<Event>)
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, writer) = tokio::io::split(io);
    let (out_tx, out_rx) = mpsc::channel(32);
    let (event_tx, event_rx) = mpsc::channel(32);
    let windows = Arc::new(SendWindows::default());
    tokio::spawn(write_loop(writer, out_rx));
    let sender = Sender {
        out: out_tx.clone(),
        windows: windows.clone(),
    };
    tokio::spawn(read_loop(reader, out_tx, event_tx, windows));
    (sender, event_rx)
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut out: mpsc::Receiver<Outgoing>) {
    let mut deflater = Deflater::default();
    while let Some(next) = out.recv().await {
        let bytes = match next {
            Outgoing::Frame(bytes) => bytes,
            Outgoing::Shutdown => break,
            Outgoing::Reply { stream } => match deflater.deflate(&[]) {
                Ok(block) => frame::syn_reply(stream, false, &block),
                Err(e) => {
                    tracing::warn!(error = %e, "SPDY: cannot write a SYN_REPLY");
                    break;
                }
            },
        };
        if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

/// Reads until the connection ends; `out` answers PINGs and new streams.
async fn read_loop<R: AsyncRead + Unpin>(
    mut reader: R,
    out: mpsc::Sender<Outgoing>,
    events: mpsc::Sender<Event>,
    windows: Arc<SendWindows>,
) {
    let mut inflater = Inflater::default();
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    // The peer does flow control of its own: it hears about what we consumed.
    let mut peer_counts_windows = false;
    // The last stream accepted, for a GOAWAY.
    let mut last_good_stream = 0;
    'read: loop {
        loop {
            let (event, used) = match frame::parse(&buf) {
                Ok(Some((parsed, used))) => {
                    let opening = match &parsed {
                        Frame::SynStream { stream, .. } => Some(*stream),
                        _ => None,
                    };
                    let event = match handle(parsed, &mut inflater, &windows, &out).await {
                        Ok(event) => event,
                        Err(SpdyError::WriterGone) => break 'read,
                        Err(e) => {
                            end_with_protocol_error(&out, last_good_stream, opening, &e);
                            break 'read;
                        }
                    };
                    (event, used)
                }
                Ok(None) => break,
                Err(e) => {
                    end_with_protocol_error(&out, last_good_stream, None, &e.into());
                    break 'read;
                }
            };
            buf.drain(..used);
            if let Some(Event::Opened { stream, .. }) = &event {
                last_good_stream = *stream;
            }
            if let Some(event) = event {
                if let Event::Data { stream, data, .. } = &event
                    && peer_counts_windows
                    && !data.is_empty()
                {
                    let delta = u32::try_from(data.len()).unwrap_or(u32::MAX);
                    let _ = out
                        .send(Outgoing::Frame(frame::window_update(*stream, delta)))
                        .await;
                }
                if events.send(event).await.is_err() {
                    break 'read;
                }
            }
        }
        // A peer that sent WINDOW_UPDATE or SETTINGS is one that keeps windows.
        peer_counts_windows |= windows.enforced();
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    windows.close();
    let _ = events.send(Event::Closed).await;
}

/// Ends the session as SPDY/3 asks on a session error (the peer's frame cannot be read,
/// or its header block left this side's zlib stream out of step): GOAWAY with
/// PROTOCOL_ERROR naming the last stream accepted, then the connection closes. A stream
/// whose header block was refused for its size is also reset with FRAME_TOO_LARGE, so
/// the client learns which stream and why. Queued without waiting: a peer that does not
/// read is not waited for, the connection just ends.
fn end_with_protocol_error(
    out: &mpsc::Sender<Outgoing>,
    last_good_stream: u32,
    refused_stream: Option<u32>,
    error: &SpdyError,
) {
    tracing::warn!(
        %error,
        last_good_stream,
        "SPDY: protocol error from the client; ending the session with GOAWAY PROTOCOL_ERROR"
    );
    if let (Some(stream), SpdyError::Headers(HeaderError::TooLarge { .. })) =
        (refused_stream, error)
    {
        let reset = frame::rst_stream(stream, frame::RST_FRAME_TOO_LARGE);
        let _ = out.try_send(Outgoing::Frame(reset));
    }
    let go_away = frame::goaway(last_good_stream, frame::GOAWAY_PROTOCOL_ERROR);
    let _ = out.try_send(Outgoing::Frame(go_away));
    let _ = out.try_send(Outgoing::Shutdown);
}

/// One frame's effect; `Err` ends the connection.
async fn handle(
    parsed: Frame<'_>,
    inflater: &mut Inflater,
    windows: &SendWindows,
    out: &mpsc::Sender<Outgoing>,
) -> Result<Option<Event>, SpdyError> {
    Ok(match parsed {
        Frame::SynStream {
            stream,
            fin,
            headers,
        } => {
            let headers = inflater.inflate(headers)?;
            out.send(Outgoing::Reply { stream })
                .await
                .map_err(|_| SpdyError::WriterGone)?;
            Some(Event::Opened {
                stream,
                headers,
                fin,
            })
        }
        Frame::SynReply { headers, .. } | Frame::Headers { headers, .. } => {
            // Nothing to act on, but the zlib stream must see every block.
            inflater.inflate(headers)?;
            None
        }
        Frame::Data { stream, fin, data } => Some(Event::Data {
            stream,
            data: data.to_vec(),
            fin,
        }),
        Frame::RstStream { stream, .. } => Some(Event::Reset { stream }),
        Frame::Settings(pairs) => {
            for (id, value) in pairs {
                if id == frame::SETTINGS_INITIAL_WINDOW_SIZE {
                    windows.set_initial(value);
                }
            }
            None
        }
        Frame::Ping(id) => {
            // Odd ids are the client's pings, to be echoed; even ones would be answers
            // to ours, and this side sends none.
            if id % 2 == 1 {
                let _ = out.send(Outgoing::Frame(frame::ping(id))).await;
            }
            None
        }
        Frame::GoAway { .. } => Some(Event::GoAway),
        Frame::WindowUpdate { stream, delta } => {
            windows.update(stream, delta);
            None
        }
        Frame::Unknown { kind } => {
            tracing::debug!(kind, "SPDY: control frame type ignored");
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::spdy::headers::{self, Deflater, MAX_INFLATED_BLOCK};

    /// Every frame the server sent until it closed the connection.
    async fn frames_until_closed(mut client: tokio::io::DuplexStream) -> Vec<Vec<u8>> {
        let mut bytes = Vec::new();
        let read = client.read_to_end(&mut bytes);
        tokio::time::timeout(std::time::Duration::from_secs(10), read)
            .await
            .expect("the server closes the connection")
            .unwrap();
        let mut frames = Vec::new();
        let mut rest = bytes.as_slice();
        while let Some((_, used)) = frame::parse(rest).unwrap() {
            frames.push(rest[..used].to_vec());
            rest = &rest[used..];
        }
        assert!(rest.is_empty(), "a partial frame at the end");
        frames
    }

    #[tokio::test]
    async fn a_header_bomb_resets_its_stream_and_ends_the_session_with_goaway() {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let (_sender, mut events) = start(server);
        let mut deflater = Deflater::default();
        let good = deflater.deflate(&[("streamtype", "error")]).unwrap();
        client
            .write_all(&frame::syn_stream(1, false, &good))
            .await
            .unwrap();
        // 64 MiB from about 64 KiB, in the same compression stream as the first block.
        let bomb = deflater.deflate_bomb(64 << 20);
        assert!(bomb.len() < MAX_INFLATED_BLOCK, "{} bytes", bomb.len());
        client
            .write_all(&frame::syn_stream(3, false, &bomb))
            .await
            .unwrap();

        let frames = frames_until_closed(client).await;
        let parsed: Vec<Frame<'_>> = frames
            .iter()
            .map(|f| frame::parse(f).unwrap().unwrap().0)
            .collect();
        assert!(
            matches!(parsed[0], Frame::SynReply { stream: 1, .. }),
            "{parsed:?}"
        );
        assert_eq!(
            parsed[1..],
            [
                Frame::RstStream {
                    stream: 3,
                    status: frame::RST_FRAME_TOO_LARGE
                },
                Frame::GoAway {
                    last_good_stream: 1,
                    status: frame::GOAWAY_PROTOCOL_ERROR
                }
            ]
        );
        match events.recv().await {
            Some(Event::Opened {
                stream: 1, headers, ..
            }) => assert_eq!(headers::get(&headers, "streamtype"), Some("error")),
            other => panic!("expected stream 1 opened, got {other:?}"),
        }
        assert!(matches!(events.recv().await, Some(Event::Closed)));
    }

    #[tokio::test]
    async fn bytes_that_are_not_spdy_end_the_session_with_goaway() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (_sender, mut events) = start(server);
        // A control frame of SPDY version 2.
        client
            .write_all(&[0x80, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00])
            .await
            .unwrap();
        let frames = frames_until_closed(client).await;
        assert_eq!(
            frame::parse(&frames[0]).unwrap().unwrap().0,
            Frame::GoAway {
                last_good_stream: 0,
                status: frame::GOAWAY_PROTOCOL_ERROR
            }
        );
        assert_eq!(frames.len(), 1);
        assert!(matches!(events.recv().await, Some(Event::Closed)));
    }
}
