//! This mount namespace's mount table (/proc/self/mountinfo): the mount points under a
//! directory, and a mount's propagation.

use std::path::{Path, PathBuf};

use super::VolumeError;

/// One line of mountinfo: where it is mounted and whether it is shared / a slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub shared: bool,
    pub slave: bool,
}

/// Decodes mountinfo's octal escapes (`\040` is a space).
fn unescape(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = (u32::from(d[0] - b'0') << 6)
                    | (u32::from(d[1] - b'0') << 3)
                    | u32::from(d[2] - b'0');
                match u8::try_from(v) {
                    Ok(byte) => out.push(byte),
                    Err(_) => out.extend_from_slice(&b[i..i + 4]),
                }
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

/// Parses mountinfo text, in the kernel's order (parents before children).
pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_point = unescape(fields.get(4)?);
            let optional = fields.iter().skip(6).take_while(|f| **f != "-");
            let (mut shared, mut slave) = (false, false);
            for f in optional {
                shared |= f.starts_with("shared:");
                slave |= f.starts_with("master:");
            }
            Some(MountEntry {
                mount_point,
                shared,
                slave,
            })
        })
        .collect()
}

pub fn read() -> Result<Vec<MountEntry>, VolumeError> {
    let path = Path::new("/proc/self/mountinfo");
    let text = std::fs::read_to_string(path).map_err(|e| VolumeError::io("read", path, e))?;
    Ok(parse(&text))
}

/// Mount points at or below `dir`, the latest mounted first (so children before their
/// parents, and a bind before the tmpfs it was taken from).
pub fn mounts_under(dir: &Path) -> Result<Vec<PathBuf>, VolumeError> {
    let mut out: Vec<PathBuf> = read()?
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|mp| mp.starts_with(dir))
        .collect();
    out.reverse();
    Ok(out)
}

/// The mount that holds `path` (the longest mount point that is a prefix of it; the
/// last one mounted there wins).
pub fn mount_of(path: &Path) -> Result<Option<MountEntry>, VolumeError> {
    let path = std::fs::canonicalize(path).map_err(|e| VolumeError::io("resolve", path, e))?;
    Ok(read()?
        .into_iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .fold(None, |best: Option<MountEntry>, m| match &best {
            Some(b) if b.mount_point.components().count() > m.mount_point.components().count() => {
                best
            }
            _ => Some(m),
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_points_and_propagation() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    30 22 0:40 / /a\\040b rw master:3 - tmpfs tmpfs rw\n\
                    31 22 0:41 / /c rw - tmpfs tmpfs rw\n";
        let m = parse(text);
        assert_eq!(m.len(), 3);
        assert!(m[0].shared && !m[0].slave);
        assert_eq!(m[1].mount_point, PathBuf::from("/a b"));
        assert!(m[1].slave && !m[1].shared);
        assert!(!m[2].shared && !m[2].slave);
    }
}
