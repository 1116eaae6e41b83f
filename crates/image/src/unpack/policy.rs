//! What a layer may contain: entry names, xattrs and device nodes.
//!
//! These rules give clear errors and keep overlayfs' view of a snapshot the one
//! the image describes; they are not what keeps writes inside the snapshot (see
//! `rooted.rs`: the kernel does, with RESOLVE_IN_ROOT).
//!
//! - Entry names and hardlink targets: no `..`, no NUL byte, at most
//!   [`MAX_PATH`] bytes with components of at most [`MAX_NAME`] bytes. `.` and
//!   empty components are dropped; `./` is the layer root. A leading `/` is
//!   relative to the layer root, as containerd, podman and docker read it (umoci
//!   and some other builders write `/` and `/etc/...`): `/` is the layer root too.
//! - Device nodes: only the overlay whiteout (character device 0:0) is created;
//!   other character and block devices are skipped with a warning (a container
//!   gets its /dev from the runtime, never from an image). FIFOs are created.
//! - xattrs: `trusted.overlay.*` and `user.overlay.*` from the tar are dropped
//!   (they would change how overlayfs reads the snapshot: redirects, metacopy,
//!   opacity); whiteouts and opaque directories come only from `.wh.` entries.
//!   Everything else (`security.capability`, ACLs, `user.*`) is kept.

use std::path::PathBuf;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Longest entry path accepted, in bytes (PATH_MAX less the NUL).
pub(crate) const MAX_PATH: usize = 4095;
/// Longest path component accepted, in bytes (NAME_MAX).
pub(crate) const MAX_NAME: usize = 255;
/// Longest entry name quoted in an error message.
const MAX_QUOTED: usize = 200;

/// The entry path as relative components without `.`; an empty path is the
/// layer root. `Err` says why the name is refused.
pub(crate) fn clean(raw: &[u8]) -> Result<PathBuf, &'static str> {
    if raw.contains(&0) {
        return Err("the path contains a NUL byte");
    }
    if raw.len() > MAX_PATH {
        return Err("the path is longer than 4095 bytes");
    }
    // A leading '/' needs no special case: the empty first component is dropped
    // below like `.`, so "/etc/x" is "etc/x" and "/" the layer root. Confinement
    // does not rest on this: rooted.rs resolves every name with RESOLVE_IN_ROOT.
    let mut out = PathBuf::new();
    for comp in raw.split(|b| *b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => return Err("the path contains \"..\""),
            c if c.len() > MAX_NAME => return Err("a path component is longer than 255 bytes"),
            c => out.push(OsStr::from_bytes(c)),
        }
    }
    Ok(out)
}

/// An entry name for messages: lossy UTF-8, cut after [`MAX_QUOTED`] characters.
pub(crate) fn quoted(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    if s.chars().count() <= MAX_QUOTED {
        return s.into_owned();
    }
    let head: String = s.chars().take(MAX_QUOTED).collect();
    format!("{head}…({} bytes)", raw.len())
}

/// True for xattrs taken from the tar; false for the overlay's own.
pub(crate) fn xattr_allowed(key: &str) -> bool {
    !(key.starts_with("trusted.overlay.") || key.starts_with("user.overlay."))
}

/// True for the overlay whiteout device (char 0:0).
pub(crate) fn is_whiteout_device(char_dev: bool, major: u32, minor: u32) -> bool {
    char_dev && major == 0 && minor == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn clean_refuses_escapes_and_normalizes() {
        assert_eq!(clean(b"./a/b").unwrap(), Path::new("a/b"));
        assert_eq!(clean(b"a//b/./").unwrap(), Path::new("a/b"));
        assert_eq!(clean(b"./").unwrap(), Path::new(""));
        assert_eq!(clean(b"").unwrap(), Path::new(""));
        assert!(clean(b"../escape").is_err());
        assert!(clean(b"a/../../b").is_err());
        assert!(clean(b"a/..").is_err());
        // Absolute names are relative to the layer root (umoci, some builders).
        assert_eq!(clean(b"/etc/passwd").unwrap(), Path::new("etc/passwd"));
        assert_eq!(clean(b"//etc//passwd").unwrap(), Path::new("etc/passwd"));
        assert_eq!(clean(b"/").unwrap(), Path::new(""));
        assert!(clean(b"/../etc/passwd").is_err());
        assert!(clean(b"/a/../../etc").is_err());
        assert!(clean(b"a\0b").is_err());
        assert!(clean(&[b'a'; 256]).is_err());
        assert!(clean(&[b'a'; 255]).is_ok());
        let long: Vec<u8> = std::iter::repeat_n(&b"abc/"[..], 1100)
            .flatten()
            .copied()
            .collect();
        assert!(clean(&long).is_err());
    }

    #[test]
    fn quoted_names_are_bounded() {
        assert_eq!(quoted(b"etc/passwd"), "etc/passwd");
        let q = quoted(&[b'x'; 10_000]);
        assert!(q.len() < 300 && q.ends_with("(10000 bytes)"), "{q}");
    }

    #[test]
    fn overlay_xattrs_are_dropped() {
        assert!(!xattr_allowed("trusted.overlay.redirect"));
        assert!(!xattr_allowed("user.overlay.opaque"));
        assert!(xattr_allowed("security.capability"));
        assert!(xattr_allowed("user.mime_type"));
        assert!(is_whiteout_device(true, 0, 0));
        assert!(!is_whiteout_device(false, 0, 0));
        assert!(!is_whiteout_device(true, 1, 3));
    }
}
