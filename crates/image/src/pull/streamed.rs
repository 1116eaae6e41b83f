//! Unpacking a layer while it downloads: the blob writer thread hands every
//! chunk it writes to a [`Tee`], whose reader feeds
//! [`ImageStore::unpack_to_temp`] on its own thread, so a layer's unpack ends
//! about when its download does instead of starting then.
//!
//! The unpack reads unverified bytes, which is safe (every path stays inside the
//! temp dir) and never visible: the stream ends cleanly only on [`Tee::finish`],
//! called once the blob is stored (its digest checked), and the snapshot is
//! adopted only if its diff_id matches the config. Any break (the download
//! failed, or restarted from byte 0 on a registry without ranges) ends the
//! stream with an error; the layer is then unpacked from the stored blob.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::task::JoinHandle;

use super::super::{ImageError, ImageStore, UnpackedLayer};

/// Network chunks in flight to the unpacker (hyper's are at most ~400 KiB, most
/// far smaller): a bounded buffer, so a slow disk slows the download instead of
/// filling memory. A bigger one would not end the pull sooner: the layer is ready
/// when its unpack is.
const IN_FLIGHT: usize = 32;

enum Msg {
    Data(Bytes),
    End,
}

/// The sending side; see the module docs.
pub(super) struct Tee {
    sender: Mutex<Option<SyncSender<Msg>>>,
}

impl Tee {
    /// A sender for one attempt's writer thread; `None` once abandoned.
    pub(super) fn sender(&self) -> Option<TeeSender> {
        let guard = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        guard.clone().map(TeeSender)
    }

    /// The bytes sent so far will not be continued: the unpack fails.
    pub(super) fn abandon(&self) {
        let mut guard = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        guard.take();
    }

    /// The whole blob was sent and verified: the stream ends here.
    pub(super) fn finish(self) {
        let sender = self.sender.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = sender {
            let _ = s.send(Msg::End);
        }
    }
}

/// Sends chunks from the writer thread (blocking when the unpacker is behind).
pub(super) struct TeeSender(SyncSender<Msg>);

impl TeeSender {
    /// False once the unpacker stopped (it failed; the chunks are not needed).
    pub(super) fn send(&self, chunk: &Bytes) -> bool {
        self.0.send(Msg::Data(chunk.clone())).is_ok()
    }
}

/// Starts unpacking layer `digest` from what the returned [`Tee`] is given.
pub(super) fn start(
    store: Arc<ImageStore>,
    digest: String,
) -> (Tee, JoinHandle<Result<UnpackedLayer, ImageError>>) {
    let (tx, rx) = sync_channel(IN_FLIGHT);
    let unpack =
        tokio::task::spawn_blocking(move || store.unpack_to_temp(&digest, ChannelReader::new(rx)));
    let tee = Tee {
        sender: Mutex::new(Some(tx)),
    };
    (tee, unpack)
}

/// Reads the chunks in order; end of file only at [`Msg::End`].
struct ChannelReader {
    rx: Receiver<Msg>,
    current: Bytes,
    ended: bool,
}

impl ChannelReader {
    fn new(rx: Receiver<Msg>) -> ChannelReader {
        ChannelReader {
            rx,
            current: Bytes::new(),
            ended: false,
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() && !self.ended {
            match self.rx.recv() {
                Ok(Msg::Data(chunk)) => self.current = chunk,
                Ok(Msg::End) => self.ended = true,
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the download stopped before the end of the layer",
                    ));
                }
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        let _ = self.current.split_to(n);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader of `msgs` whose sender is gone.
    fn reader(msgs: Vec<Msg>) -> ChannelReader {
        let (tx, rx) = sync_channel(msgs.len() + 1);
        for m in msgs {
            tx.send(m).unwrap();
        }
        ChannelReader::new(rx)
    }

    #[test]
    fn reads_the_chunks_in_order_until_end() {
        let mut r = reader(vec![
            Msg::Data(Bytes::from_static(b"hel")),
            Msg::Data(Bytes::new()),
            Msg::Data(Bytes::from_static(b"lo")),
            Msg::End,
        ]);
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"hello");
        assert_eq!(r.read(&mut [0; 4]).unwrap(), 0);
    }

    #[test]
    fn a_stream_without_end_is_an_error_not_eof() {
        let mut r = reader(vec![Msg::Data(Bytes::from_static(b"part"))]);
        let mut out = Vec::new();
        let err = r.read_to_end(&mut out).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(out, b"part");
    }
}
