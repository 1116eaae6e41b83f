//! Compression detection by magic bytes (layers and oci-archives may be gzipped
//! or plain tar, whatever their media type claims).

use std::io::{self, BufRead, BufReader, Read};

use flate2::bufread::MultiGzDecoder;

/// What a stream starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    /// No compression (a tar).
    None,
    /// gzip (`1f 8b`).
    Gzip,
    /// zstd (`28 b5 2f fd`), not supported.
    Zstd,
}

impl Compression {
    /// Detects the compression from the first bytes of a stream.
    pub(crate) fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Wraps `reader` in a gzip decoder if it starts with the gzip magic.
/// Returns the detected compression with the decompressed stream; for zstd the
/// stream is returned undecoded and the caller reports the error.
pub(crate) fn decompressed<'a, R: Read + Send + 'a>(
    reader: R,
) -> io::Result<(Compression, Box<dyn Read + Send + 'a>)> {
    let mut buffered = BufReader::with_capacity(256 * 1024, reader);
    let head = buffered.fill_buf()?;
    let kind = Compression::detect(head);
    let stream: Box<dyn Read + Send + 'a> = match kind {
        Compression::Gzip => Box::new(MultiGzDecoder::new(buffered)),
        Compression::None | Compression::Zstd => Box::new(buffered),
    };
    Ok((kind, stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_and_plain_are_detected() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"hello").unwrap();
        let gz = gz.finish().unwrap();
        let (kind, mut r) = decompressed(&gz[..]).unwrap();
        assert_eq!(kind, Compression::Gzip);
        let mut out = String::new();
        r.read_to_string(&mut out).unwrap();
        assert_eq!(out, "hello");

        let (kind, _) = decompressed(&b"plain"[..]).unwrap();
        assert_eq!(kind, Compression::None);
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Compression::Zstd
        );
    }
}
