//! Copies an entry's data into its new file in large writes at aligned offsets.
//!
//! `io::copy` writes whatever each read returned, through an 8 KiB buffer. The
//! entry's reads end wherever the read-ahead's chunks end, so after the first
//! short one every 8 KiB write straddles page boundaries: ext4 then zeroes the
//! uncovered parts of each new page-cache folio before copying into it
//! (`ext4_block_write_begin` → `zero_user_segments`). That was 6 % of a daemon's
//! CPU pulling busybox (a 2 MB file), and 245 writes where 8 do.

use std::io::{self, Read, Write};

/// The size of each write but the last: a multiple of any page size, so every
/// write starts on a page (and, for ext4's large folios, a folio) boundary.
pub(super) const WRITE_SIZE: usize = 256 * 1024;

/// A buffer kept for the unpack's files, allocated on the first file that needs it.
#[derive(Default)]
pub(super) struct FileCopier {
    buf: Vec<u8>,
}

impl FileCopier {
    /// Copies all of `from` into `to`, every write but the last [`WRITE_SIZE`]
    /// bytes long; returns the bytes copied.
    pub(super) fn copy(&mut self, from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
        if self.buf.is_empty() {
            self.buf = vec![0; WRITE_SIZE];
        }
        let mut total = 0u64;
        loop {
            let filled = fill(from, &mut self.buf)?;
            if filled > 0 {
                to.write_all(&self.buf[..filled])?;
                total += filled as u64;
            }
            if filled < self.buf.len() {
                return Ok(total);
            }
        }
    }
}

/// Reads into `buf` until it is full or `from` ends; returns the bytes read.
fn fill(from: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match from.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns its data in pieces of odd sizes, as the read-ahead's chunk ends do.
    struct Ragged {
        data: Vec<u8>,
        pos: usize,
        sizes: std::iter::Cycle<std::vec::IntoIter<usize>>,
    }

    impl Read for Ragged {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self
                .sizes
                .next()
                .unwrap_or(1)
                .min(buf.len())
                .min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    /// Records the size of every write.
    #[derive(Default)]
    struct Recording {
        out: Vec<u8>,
        writes: Vec<usize>,
    }

    impl Write for Recording {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.out.extend_from_slice(buf);
            self.writes.push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn ragged(len: usize) -> Ragged {
        Ragged {
            data: (0..len).map(|i| (i % 251).to_le_bytes()[0]).collect(),
            pos: 0,
            sizes: vec![5632, 8192, 131_072, 1, 77_777].into_iter().cycle(),
        }
    }

    #[test]
    fn every_write_but_the_last_is_whole_and_the_bytes_are_all_there() {
        let len = 3 * WRITE_SIZE + 12_345;
        let mut from = ragged(len);
        let mut to = Recording::default();
        let copied = FileCopier::default().copy(&mut from, &mut to).unwrap();
        assert_eq!(copied, len as u64);
        assert_eq!(to.out, from.data);
        assert_eq!(to.writes, vec![WRITE_SIZE, WRITE_SIZE, WRITE_SIZE, 12_345]);
    }

    #[test]
    fn a_small_file_is_one_write_and_an_empty_one_none() {
        let mut copier = FileCopier::default();
        let mut to = Recording::default();
        assert_eq!(copier.copy(&mut ragged(20_000), &mut to).unwrap(), 20_000);
        assert_eq!(to.writes, vec![20_000]);
        let mut to = Recording::default();
        assert_eq!(copier.copy(&mut ragged(0), &mut to).unwrap(), 0);
        assert!(to.writes.is_empty());
    }

    #[test]
    fn an_exact_multiple_ends_without_an_empty_write() {
        let mut to = Recording::default();
        let n = FileCopier::default()
            .copy(&mut ragged(2 * WRITE_SIZE), &mut to)
            .unwrap();
        assert_eq!(n, 2 * WRITE_SIZE as u64);
        assert_eq!(to.writes, vec![WRITE_SIZE, WRITE_SIZE]);
    }

    #[test]
    fn a_read_error_is_returned() {
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::InvalidData, "corrupt"))
            }
        }
        let err = FileCopier::default()
            .copy(&mut Broken, &mut Recording::default())
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
