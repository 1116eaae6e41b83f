//! One `/dev/kmsg` record.
//!
//! A read of `/dev/kmsg` returns exactly one record:
//!
//! ```text
//! 6,448,4008070,-;oom-kill:constraint=CONSTRAINT_MEMCG,...\n
//!  SUBSYSTEM=cpu\n
//!  DEVICE=+cpu:0\n
//! ```
//!
//! The header is `prio,seq,usec,flags` (more comma-separated fields may follow in newer
//! kernels), the message follows the first `;`. The kernel escapes every byte below
//! 0x20, at or above 0x7f, and `\` itself as `\xNN`, so a multi-line message is one line
//! holding `\x0a`. Lines that start with a space are the record's dictionary
//! (`KEY=VALUE`); they are skipped.

use super::OomError;

/// Messages longer than this are truncated (the kernel's own limit is 8 KiB escaped).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// One record of the kernel log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsgRecord {
    /// `facility << 3 | level`, as syslog encodes it. Kernel records have facility 0.
    pub facility_prio: u32,
    /// The record's sequence number; strictly increasing within one boot.
    pub seq: u64,
    /// Microseconds since boot when the record was logged.
    pub usec: u64,
    /// The unescaped message; may contain newlines.
    pub message: String,
}

impl KmsgRecord {
    /// The syslog facility (0 = kernel, 1 = user, ...).
    pub fn facility(&self) -> u32 {
        self.facility_prio >> 3
    }

    /// The log level (0 = emerg ... 7 = debug).
    pub fn level(&self) -> u32 {
        self.facility_prio & 7
    }

    /// True when the kernel itself logged the record (user space cannot fake this).
    pub fn is_kernel(&self) -> bool {
        self.facility() == 0
    }
}

/// Parses one record as returned by one `read()` of `/dev/kmsg` (or one line of a
/// captured log, with or without the trailing newline).
pub fn parse_record(raw: &[u8]) -> Result<KmsgRecord, OomError> {
    let first = raw.split(|b| *b == b'\n').next().unwrap_or(raw);
    let first = first.strip_suffix(b"\r").unwrap_or(first);
    if first.first() == Some(&b' ') {
        return Err(malformed("continuation line without a record"));
    }
    let semi = first
        .iter()
        .position(|b| *b == b';')
        .ok_or_else(|| malformed("no ';' between header and message"))?;
    let (header, message) = (&first[..semi], &first[semi + 1..]);
    let mut fields = header.split(|b| *b == b',');
    let facility_prio = number(fields.next(), "priority")?;
    let seq = number(fields.next(), "sequence number")?;
    let usec = number(fields.next(), "timestamp")?;
    let facility_prio =
        u32::try_from(facility_prio).map_err(|_| malformed("priority out of range"))?;
    Ok(KmsgRecord {
        facility_prio,
        seq,
        usec,
        message: unescape(message),
    })
}

/// Undoes the kernel's `\xNN` escaping; any other backslash stays as it is. The result
/// is capped at [`MAX_MESSAGE_BYTES`] and invalid UTF-8 becomes U+FFFD.
pub fn unescape(escaped: &[u8]) -> String {
    let mut out = Vec::with_capacity(escaped.len().min(MAX_MESSAGE_BYTES));
    let mut i = 0;
    while i < escaped.len() && out.len() < MAX_MESSAGE_BYTES {
        let b = escaped[i];
        if b == b'\\' && escaped.get(i + 1) == Some(&b'x') {
            let hex = (escaped.get(i + 2).copied(), escaped.get(i + 3).copied());
            if let (Some(hi), Some(lo)) = (hex.0.and_then(hex_digit), hex.1.and_then(hex_digit)) {
                out.push(hi << 4 | lo);
                i += 4;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn number(field: Option<&[u8]>, what: &'static str) -> Result<u64, OomError> {
    let field = field.ok_or_else(|| malformed(what))?;
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return Err(malformed(what));
    }
    std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| malformed(what))
}

fn malformed(reason: &'static str) -> OomError {
    OomError::MalformedRecord { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_header_and_message() {
        let r = parse_record(b"6,448,4008070,-;oom-kill:constraint=CONSTRAINT_MEMCG\n").unwrap();
        assert_eq!(r.facility_prio, 6);
        assert_eq!(r.seq, 448);
        assert_eq!(r.usec, 4008070);
        assert_eq!(r.message, "oom-kill:constraint=CONSTRAINT_MEMCG");
        assert!(r.is_kernel());
        assert_eq!(r.level(), 6);
    }

    #[test]
    fn extra_header_fields_and_semicolons_in_the_message() {
        let r = parse_record(b"14,9,10,-,caller=T1;a;b").unwrap();
        assert_eq!((r.facility(), r.level()), (1, 6));
        assert!(!r.is_kernel());
        assert_eq!(r.message, "a;b");
    }

    #[test]
    fn skips_dictionary_lines() {
        let raw = b"4,12,33,-;hello \\x5c world\n SUBSYSTEM=cpu\n DEVICE=+cpu:0\n";
        let r = parse_record(raw).unwrap();
        assert_eq!(r.message, "hello \\ world");
        assert!(parse_record(b" SUBSYSTEM=cpu").is_err());
    }

    #[test]
    fn unescapes_newlines_and_keeps_bad_escapes() {
        assert_eq!(unescape(b"anon 1\\x0afile 0"), "anon 1\nfile 0");
        assert_eq!(unescape(b"a\\xZZ\\x4"), "a\\xZZ\\x4");
        assert_eq!(unescape(b"\\xff"), "\u{fffd}");
        assert_eq!(unescape(b"crlf\\x0d\\x0A"), "crlf\r\n");
    }

    #[test]
    fn rejects_garbage() {
        for raw in [
            &b""[..],
            b"no header",
            b";msg",
            b"6;msg",
            b"6,1;msg",
            b"x,1,2,-;msg",
            b"6,-1,2,-;msg",
            b"99999999999,1,2,-;msg",
            b"6,1,18446744073709551616,-;msg",
        ] {
            assert!(
                parse_record(raw).is_err(),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn caps_huge_messages() {
        let mut raw = b"6,1,2,-;".to_vec();
        raw.extend(std::iter::repeat_n(b'a', MAX_MESSAGE_BYTES * 2));
        assert_eq!(parse_record(&raw).unwrap().message.len(), MAX_MESSAGE_BYTES);
    }
}
