//! A bound on the tar metadata read for one entry.
//!
//! The tar reader keeps GNU long names, long link names and pax headers in
//! memory, whatever their size; a few KiB of gzip can announce a name of
//! gigabytes. The unpacker reads every entry's data itself, so what the tar
//! reader reads while it looks for the next entry is only headers, metadata and
//! padding: [`MetaBudget`] fails that read once it exceeds [`META_LIMIT`].

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;

/// Most bytes of headers, long names and pax records accepted for one entry.
pub(crate) const META_LIMIT: u64 = 1 << 20;

/// Shared between the reader (inside the tar archive) and the unpack loop.
#[derive(Debug, Default)]
pub(crate) struct Budget {
    /// Counting (the loop is between entries) or not (reading an entry's data).
    armed: Cell<bool>,
    used: Cell<u64>,
    tripped: Cell<bool>,
}

impl Budget {
    /// Starts counting: the tar reader is about to look for the next entry.
    pub(crate) fn arm(&self) {
        self.used.set(0);
        self.armed.set(true);
    }

    /// Stops counting: the entry's data is read by the unpacker.
    pub(crate) fn disarm(&self) {
        self.armed.set(false);
    }

    /// True once a read failed for exceeding the limit.
    pub(crate) fn tripped(&self) -> bool {
        self.tripped.get()
    }
}

/// Reader that fails while armed and over budget.
pub(crate) struct MetaBudget<R> {
    inner: R,
    budget: Rc<Budget>,
}

impl<R: Read> MetaBudget<R> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: R, budget: Rc<Budget>) -> Self {
        MetaBudget { inner, budget }
    }
}

impl<R: Read> Read for MetaBudget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let b = &self.budget;
        if !b.armed.get() {
            return self.inner.read(buf);
        }
        let left = META_LIMIT.saturating_sub(b.used.get());
        if left == 0 {
            b.tripped.set(true);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("tar metadata (long name or pax header) larger than {META_LIMIT} bytes"),
            ));
        }
        let max = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        b.used.set(b.used.get() + n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn armed_reads_are_bounded() {
        let data = vec![0u8; usize::try_from(META_LIMIT).unwrap() * 2];
        let budget = Rc::new(Budget::default());
        let mut r = MetaBudget::new(&data[..], budget.clone());
        budget.arm();
        let mut sink = Vec::new();
        let err = r.read_to_end(&mut sink).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(budget.tripped());
        assert_eq!(sink.len() as u64, META_LIMIT);
        budget.disarm();
        sink.clear();
        r.read_to_end(&mut sink).unwrap();
        assert_eq!(sink.len() as u64, META_LIMIT);
    }
}
