//! Decompression on a second thread: a layer's gzip stream is inflated ahead of
//! the tar reader, so inflating (a third of a small layer's unpack time) overlaps
//! with creating the files instead of alternating with it.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::Scope;

/// Bytes read from the inner stream per message.
const CHUNK: usize = 128 * 1024;
/// Chunks read ahead at most.
const AHEAD: usize = 8;

/// The reading side: yields what the thread read, in order, then its error or
/// the end of the stream.
pub(super) struct ReadAhead {
    rx: Receiver<io::Result<Vec<u8>>>,
    current: Vec<u8>,
    pos: usize,
}

/// Starts reading `inner` on a thread of `scope`. The thread stops at the end of
/// `inner`, at its first error, or when the [`ReadAhead`] is dropped.
pub(super) fn spawn<'scope, R: Read + Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    mut inner: R,
) -> ReadAhead {
    let (tx, rx) = sync_channel(AHEAD);
    scope.spawn(move || {
        loop {
            let mut buf = vec![0; CHUNK];
            let sent = match inner.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    buf.truncate(n);
                    tx.send(Ok(buf))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            if sent.is_err() {
                return;
            }
        }
    });
    ReadAhead {
        rx,
        current: Vec::new(),
        pos: 0,
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.current.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.current = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                // The thread finished: the end of the stream.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_everything_through_in_order() {
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let out = std::thread::scope(|s| {
            let mut r = spawn(s, &data[..]);
            let mut out = Vec::new();
            r.read_to_end(&mut out).unwrap();
            out
        });
        assert_eq!(out, data);
    }

    #[test]
    fn an_error_arrives_after_the_data_before_it() {
        struct Failing(bool);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, "corrupt"));
                }
                buf[..3].copy_from_slice(b"abc");
                Ok(3)
            }
        }
        std::thread::scope(|s| {
            let mut r = spawn(s, Failing(false));
            let mut out = Vec::new();
            let err = r.read_to_end(&mut out).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert_eq!(out, b"abc");
        });
    }

    #[test]
    fn dropping_the_reader_stops_the_thread() {
        let endless = io::repeat(7);
        std::thread::scope(|s| {
            let mut r = spawn(s, endless);
            let mut buf = [0; 10];
            r.read_exact(&mut buf).unwrap();
            assert_eq!(buf, [7; 10]);
        });
    }
}
