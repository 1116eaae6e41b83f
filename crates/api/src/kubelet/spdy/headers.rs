//! SPDY/3 header blocks: `count:32 (len:32 name len:32 value)*`, zlib-compressed with
//! the dictionary the SPDY/3 draft fixes. Each direction of a connection is ONE zlib
//! stream: every block is a sync-flushed continuation of the previous ones, so the
//! compressor and decompressor live as long as the connection and see every block in
//! order.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// Header names and values, names lower-case (as SPDY/3 requires).
pub type Headers = Vec<(String, String)>;

/// A header block that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("SPDY header block does not inflate: {0}")]
    Inflate(String),
    #[error("SPDY header block does not deflate: {0}")]
    Deflate(String),
    #[error("SPDY header block is malformed: {0}")]
    Malformed(&'static str),
    #[error(
        "SPDY header block inflates past {limit} bytes (a real client's are under 8 KiB): \
         refused as a protocol error"
    )]
    TooLarge { limit: usize },
}

/// The most one header block may inflate to. kubectl's blocks (streamtype, port,
/// requestid) are around a hundred bytes and no client sends more than a few KiB, but
/// zlib inflates up to ~1000x: one 16 MiB frame could ask for 16 GiB. 256 KiB is far
/// above any real block and small enough that a connection's bomb costs the daemon
/// nothing it would notice; past it the connection's zlib stream is abandoned (its
/// state no longer matches the peer's), so the whole session ends.
pub const MAX_INFLATED_BLOCK: usize = 256 * 1024;

/// How much is inflated per zlib call: the block grows by at most this past the cap
/// before the cap is checked.
const INFLATE_CHUNK: usize = 16 * 1024;

/// The words of the SPDY/3 draft's dictionary, each stored length-prefixed.
const DICTIONARY_WORDS: [&str; 71] = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
    // The rest of the draft's dictionary is one run of text without length prefixes;
    // these entries hold it, see `TAIL_FROM`.
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable",
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,",
    "publicprivatemax-age=gzip,deflate,sdch",
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
];
/// Entries from here on are plain text, not length-prefixed words.
const TAIL_FROM: usize = 65;

/// The SPDY/3 header dictionary (1423 bytes).
pub fn dictionary() -> Vec<u8> {
    let mut dict = Vec::with_capacity(1423);
    for (i, word) in DICTIONARY_WORDS.iter().enumerate() {
        if i < TAIL_FROM {
            let len = u32::try_from(word.len()).unwrap_or(0);
            dict.extend_from_slice(&len.to_be_bytes());
        }
        dict.extend_from_slice(word.as_bytes());
    }
    dict
}

fn push_str(out: &mut Vec<u8>, s: &str) {
    let len = u32::try_from(s.len()).unwrap_or(0);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The uncompressed block of `headers`.
pub fn encode_block(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    let count = u32::try_from(headers.len()).unwrap_or(0);
    out.extend_from_slice(&count.to_be_bytes());
    for (name, value) in headers {
        push_str(&mut out, &name.to_ascii_lowercase());
        push_str(&mut out, value);
    }
    out
}

/// The pairs of an uncompressed block.
pub fn decode_block(block: &[u8]) -> Result<Headers, HeaderError> {
    let mut at = 0usize;
    let take_u32 = |at: &mut usize| -> Result<usize, HeaderError> {
        let bytes = block
            .get(*at..*at + 4)
            .ok_or(HeaderError::Malformed("a length runs past the block"))?;
        *at += 4;
        let n = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        usize::try_from(n).map_err(|_| HeaderError::Malformed("a length does not fit"))
    };
    let count = take_u32(&mut at)?;
    let mut headers = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let text = |at: &mut usize| -> Result<String, HeaderError> {
            let len = take_u32(at)?;
            let bytes = block.get(*at..*at + len).ok_or(HeaderError::Malformed(
                "a name or value runs past the block",
            ))?;
            *at += len;
            Ok(String::from_utf8_lossy(bytes).into_owned())
        };
        let name = text(&mut at)?;
        let value = text(&mut at)?;
        headers.push((name, value));
    }
    Ok(headers)
}

/// The value of `name` in `headers`; SPDY joins repeated values with NUL.
pub fn get<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.split('\0').next().unwrap_or_default())
}

/// Inflates the blocks one peer sends, in order.
pub struct Inflater {
    zlib: Decompress,
    dictionary: Vec<u8>,
}

impl Default for Inflater {
    fn default() -> Self {
        Self {
            zlib: Decompress::new(true),
            dictionary: dictionary(),
        }
    }
}

impl Inflater {
    /// The headers of one compressed block, refused once it inflates past
    /// [`MAX_INFLATED_BLOCK`].
    pub fn inflate(&mut self, compressed: &[u8]) -> Result<Headers, HeaderError> {
        let mut block = Vec::new();
        let mut chunk = vec![0u8; INFLATE_CHUNK];
        let mut input = compressed;
        loop {
            let before_in = self.zlib.total_in();
            let before_out = self.zlib.total_out();
            let result = self
                .zlib
                .decompress(input, &mut chunk, FlushDecompress::Sync);
            let used = usize::try_from(self.zlib.total_in() - before_in).unwrap_or(input.len());
            let made = usize::try_from(self.zlib.total_out() - before_out).unwrap_or(chunk.len());
            input = &input[used.min(input.len())..];
            block.extend_from_slice(&chunk[..made.min(chunk.len())]);
            if block.len() > MAX_INFLATED_BLOCK {
                return Err(HeaderError::TooLarge {
                    limit: MAX_INFLATED_BLOCK,
                });
            }
            match result {
                Ok(Status::StreamEnd) => break,
                Ok(_) => {
                    // Everything read and room left over: the sync flush is complete.
                    if (input.is_empty() && made < chunk.len()) || (used == 0 && made == 0) {
                        break;
                    }
                }
                Err(e) if e.needs_dictionary().is_some() => {
                    self.zlib
                        .set_dictionary(&self.dictionary)
                        .map_err(|e| HeaderError::Inflate(e.to_string()))?;
                }
                Err(e) => return Err(HeaderError::Inflate(e.to_string())),
            }
        }
        decode_block(&block)
    }
}

/// Deflates the blocks this side sends, in order.
pub struct Deflater {
    zlib: Compress,
}

impl Default for Deflater {
    fn default() -> Self {
        let mut zlib = Compress::new(Compression::default(), true);
        // A fresh stream always takes a dictionary; failing here would be a build of
        // zlib without dictionaries, which the headers could not be read by anyway.
        if let Err(e) = zlib.set_dictionary(&dictionary()) {
            tracing::warn!(error = %e, "SPDY: zlib refused the header dictionary");
        }
        Self { zlib }
    }
}

impl Deflater {
    /// One compressed block carrying `headers`.
    pub fn deflate(&mut self, headers: &[(&str, &str)]) -> Result<Vec<u8>, HeaderError> {
        let block = encode_block(headers);
        let mut out = Vec::with_capacity(block.len() + 64);
        let mut input = block.as_slice();
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity().max(256));
            }
            let before_in = self.zlib.total_in();
            self.zlib
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| HeaderError::Deflate(e.to_string()))?;
            let used = usize::try_from(self.zlib.total_in() - before_in).unwrap_or(input.len());
            input = &input[used.min(input.len())..];
            // A sync flush is complete once the output was not filled to the brim.
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
        Ok(out)
    }

    /// A block of one header `x-bomb` whose value is `value_len` bytes of `a`, the next
    /// in this stream, compressed without ever holding the value whole: a zlib bomb
    /// (1 MiB inflated from about 1 KiB).
    #[cfg(test)]
    pub(crate) fn deflate_bomb(&mut self, value_len: usize) -> Vec<u8> {
        let mut head = encode_block(&[("x-bomb", "")]);
        head.truncate(head.len() - 4);
        head.extend_from_slice(&u32::try_from(value_len).unwrap_or(u32::MAX).to_be_bytes());
        let run = vec![b'a'; 1 << 20];
        let mut out = Vec::new();
        let mut feed = |bytes: &[u8], flush: FlushCompress| {
            let mut input = bytes;
            loop {
                out.reserve(64 * 1024);
                let before = self.zlib.total_in();
                if let Err(e) = self.zlib.compress_vec(input, &mut out, flush) {
                    panic!("deflating a bomb: {e}");
                }
                let used = usize::try_from(self.zlib.total_in() - before).unwrap_or(0);
                input = &input[used..];
                if input.is_empty() && out.len() < out.capacity() {
                    break;
                }
            }
        };
        feed(&head, FlushCompress::None);
        let mut left = value_len;
        while left > 0 {
            let n = left.min(run.len());
            feed(&run[..n], FlushCompress::None);
            left -= n;
        }
        feed(&[], FlushCompress::Sync);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_has_the_drafts_length_and_checksum() {
        let dict = dictionary();
        assert_eq!(dict.len(), 1423);
        assert_eq!(&dict[..11], b"\0\0\0\x07options");
        assert!(dict.ends_with(b"enq=0."));
    }

    #[test]
    fn blocks_round_trip_through_one_stream_per_direction() {
        let mut deflater = Deflater::default();
        let mut inflater = Inflater::default();
        for round in 0..3 {
            let value = format!("stdin-{round}");
            let block = deflater
                .deflate(&[("streamtype", &value), ("Port", "80")])
                .unwrap();
            let headers = inflater.inflate(&block).unwrap();
            assert_eq!(
                headers,
                vec![
                    ("streamtype".to_string(), value.clone()),
                    ("port".to_string(), "80".to_string())
                ]
            );
            assert_eq!(get(&headers, "StreamType"), Some(value.as_str()));
        }
        // An empty block (a SYN_REPLY without headers) too.
        let empty = deflater.deflate(&[]).unwrap();
        assert_eq!(inflater.inflate(&empty).unwrap(), vec![]);
    }

    #[test]
    fn a_second_inflater_cannot_join_mid_stream() {
        let mut deflater = Deflater::default();
        let _first = deflater.deflate(&[("a", "b")]).unwrap();
        let second = deflater.deflate(&[("c", "d")]).unwrap();
        assert!(Inflater::default().inflate(&second).is_err());
    }

    #[test]
    fn a_zlib_bomb_is_refused_at_the_cap_and_a_block_under_it_inflates() {
        let compressed = Deflater::default().deflate_bomb(64 << 20);
        assert!(
            compressed.len() < 128 * 1024,
            "a bomb: {} bytes compressed for 64 MiB",
            compressed.len()
        );
        let err = Inflater::default().inflate(&compressed).unwrap_err();
        assert!(
            matches!(err, HeaderError::TooLarge { limit } if limit == MAX_INFLATED_BLOCK),
            "{err}"
        );
        assert!(
            err.to_string().contains("inflates past 262144 bytes"),
            "{err}"
        );

        // The largest value that fits under the cap with its framing still inflates.
        let fits = MAX_INFLATED_BLOCK - encode_block(&[("x-bomb", "")]).len();
        let headers = Inflater::default()
            .inflate(&Deflater::default().deflate_bomb(fits))
            .unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0].1.len(), fits);
        assert!(matches!(
            Inflater::default().inflate(&Deflater::default().deflate_bomb(fits + 1)),
            Err(HeaderError::TooLarge { .. })
        ));
    }

    #[test]
    fn malformed_blocks_are_errors() {
        assert!(decode_block(&[0, 0, 0, 1, 0, 0, 0, 9, b'x']).is_err());
        assert!(decode_block(&[0, 0]).is_err());
    }
}
