//! sha256 digests: validation, streaming hashing and OCI chain ids.

use std::io::{self, Read};

use sha2::{Digest as _, Sha256};

use super::error::ImageError;

/// Returns the 64-char lowercase hex of a `sha256:<hex>` digest, or
/// [`ImageError::BadDigest`]. The hex is safe to use as a file name.
pub(crate) fn sha256_hex(digest: &str) -> Result<&str, ImageError> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .ok_or_else(|| ImageError::BadDigest {
            digest: digest.to_string(),
        })
}

/// `sha256:<hex>` of a byte string.
pub(crate) fn sha256_of(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// The OCI chain ids of a stack of layers, bottom first:
/// `ChainID(L0) = DiffID(L0)`, `ChainID(L0..Ln) = sha256(ChainID(L0..Ln-1) + " " + DiffID(Ln))`.
pub fn chain_ids(diff_ids: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(diff_ids.len());
    for diff_id in diff_ids {
        let next = match out.last() {
            None => diff_id.clone(),
            Some(parent) => sha256_of(format!("{parent} {diff_id}").as_bytes()),
        };
        out.push(next);
    }
    out
}

/// A reader that hashes (sha256) and counts everything read through it.
pub(crate) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads the rest of the stream (so that the digest covers all of it) and
    /// returns `(sha256:<hex>, bytes read)`.
    pub(crate) fn finish(mut self) -> io::Result<(String, u64)> {
        io::copy(&mut self, &mut io::sink())?;
        Ok((
            format!("sha256:{}", hex::encode(self.hasher.finalize())),
            self.count,
        ))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_id_of_one_layer_is_its_diff_id() {
        let d = format!("sha256:{}", "1".repeat(64));
        assert_eq!(chain_ids(std::slice::from_ref(&d)), vec![d]);
        assert!(chain_ids(&[]).is_empty());
    }

    #[test]
    fn chain_id_follows_the_spec() {
        // Expected values computed independently with
        // printf 'sha256:<a> sha256:<b>' | sha256sum
        let a = format!("sha256:{}", "a".repeat(64));
        let b = format!("sha256:{}", "b".repeat(64));
        let c = format!("sha256:{}", "c".repeat(64));
        let ids = chain_ids(&[a.clone(), b, c]);
        assert_eq!(ids[0], a);
        assert_eq!(
            ids[1],
            "sha256:ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c"
        );
        assert_eq!(
            ids[2],
            "sha256:c1377126441fb2f5ec2c21ae2a60255331d639e830f0ee1b40a36e52d4c40588"
        );
    }

    #[test]
    fn sha256_hex_validates() {
        let h = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256_hex(&format!("sha256:{h}")).unwrap(), h);
        assert_eq!(sha256_of(b""), format!("sha256:{h}"));
        assert!(sha256_hex("sha256:../../etc/passwd").is_err());
        assert!(sha256_hex(&format!("sha512:{h}")).is_err());
        assert!(sha256_hex(&format!("sha256:{}", h.to_uppercase())).is_err());
    }

    #[test]
    fn hashing_reader_counts_and_hashes() {
        let r = HashingReader::new(&b"hello"[..]);
        let (d, n) = r.finish().unwrap();
        assert_eq!(n, 5);
        assert_eq!(d, sha256_of(b"hello"));
    }
}
