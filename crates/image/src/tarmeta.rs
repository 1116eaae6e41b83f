//! Metadata of a tar entry: mode, ownership, mtime and xattrs, from the header and
//! its pax extensions.

use std::io::{self, Read};

use nix::sys::time::TimeSpec;
use tar::Entry;

/// Metadata of one entry, from its header and pax extensions.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: TimeSpec,
    pub xattrs: Vec<(String, Vec<u8>)>,
}

/// Reads an entry's metadata; pax `uid`, `gid`, `mtime` override the header.
pub(crate) fn read_meta<R: Read>(entry: &mut Entry<'_, R>) -> io::Result<Meta> {
    let header = entry.header();
    let old = header.as_old();
    let mut meta = Meta {
        mode: header.mode()? & 0o7777,
        uid: u32::try_from(or_zero(header.uid(), &old.uid)?).unwrap_or(u32::MAX),
        gid: u32::try_from(or_zero(header.gid(), &old.gid)?).unwrap_or(u32::MAX),
        mtime: TimeSpec::new(
            i64::try_from(or_zero(header.mtime(), &old.mtime)?).unwrap_or(0),
            0,
        ),
        xattrs: Vec::new(),
    };
    if let Some(pax) = entry.pax_extensions()? {
        for ext in pax {
            let ext = ext?;
            let Ok(key) = ext.key() else { continue };
            let value = ext.value_bytes();
            let text = std::str::from_utf8(value).unwrap_or_default();
            match key {
                "uid" => meta.uid = text.parse().unwrap_or(meta.uid),
                "gid" => meta.gid = text.parse().unwrap_or(meta.gid),
                "mtime" => {
                    if let Some(ts) = parse_pax_time(text) {
                        meta.mtime = ts;
                    }
                }
                k => {
                    if let Some(attr) = k.strip_prefix("SCHILY.xattr.") {
                        meta.xattrs.push((attr.to_string(), value.to_vec()));
                    }
                }
            }
        }
    }
    Ok(meta)
}

/// A numeric header field; an empty one (all NUL or spaces, as some writers
/// leave uid, gid or mtime) is 0, as Go's archive/tar reads it.
fn or_zero(parsed: io::Result<u64>, raw: &[u8]) -> io::Result<u64> {
    match parsed {
        Err(_) if raw.iter().all(|b| matches!(b, 0 | b' ')) => Ok(0),
        r => r,
    }
}

/// Parses a pax time ("1700000000.123456789", possibly negative).
fn parse_pax_time(s: &str) -> Option<TimeSpec> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    let secs: i64 = secs.parse().ok()?;
    let digits: String = frac.chars().take(9).collect();
    let mut nanos: i64 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    for _ in digits.len()..9 {
        nanos *= 10;
    }
    if secs < 0 && nanos > 0 {
        return Some(TimeSpec::new(secs - 1, 1_000_000_000 - nanos));
    }
    Some(TimeSpec::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_times() {
        assert_eq!(parse_pax_time("12"), Some(TimeSpec::new(12, 0)));
        assert_eq!(parse_pax_time("12.5"), Some(TimeSpec::new(12, 500_000_000)));
        assert_eq!(parse_pax_time("-1.5"), Some(TimeSpec::new(-2, 500_000_000)));
        assert_eq!(parse_pax_time("x"), None);
    }
}
