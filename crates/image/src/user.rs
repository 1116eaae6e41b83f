//! The user a container runs as, resolved in its image's files as containerd does:
//! the image's `User` ("name", "uid", "uid:gid", "name:group"), or the pod's
//! `runAsUser`/`runAsGroup`, looked up in the image's `/etc/passwd` and `/etc/group`.
//!
//! Both files are read through the image's merged layers with symlinks resolved inside
//! the image's root ([`read_merged_file`]), only when they are regular files of at most
//! [`MAX_ACCOUNT_FILE`] bytes: a hostile image whose `etc/passwd` links to `/dev/zero`
//! or to a host file gets a clear error, never the host's content.

use std::path::{Path, PathBuf};

use super::unpack::{MergedReadError, read_merged_file};

/// The largest `/etc/passwd` or `/etc/group` read (real ones are a few KiB).
pub const MAX_ACCOUNT_FILE: u64 = 4 << 20;

/// Who the container's process is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUser {
    pub uid: u32,
    pub gid: u32,
    /// The user's name, when the image's `/etc/passwd` has an entry for it.
    pub name: Option<String>,
    /// The groups of the image's `/etc/group` that list the user as a member (its
    /// supplementary groups; containerd adds them unless the pod's policy is Strict).
    pub member_of: Vec<u32>,
}

/// What decides the user: the image's `User`, overridden by the pod's securityContext.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserRequest {
    /// The image config's `User` (may be empty: root).
    pub image_user: String,
    pub run_as_user: Option<u32>,
    pub run_as_group: Option<u32>,
}

/// Why the user could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error(
        "the image's user {user:?} is not in its /etc/passwd; set securityContext.runAsUser to a numeric uid, or fix the image"
    )]
    UnknownUser { user: String },
    #[error(
        "the image's group {group:?} is not in its /etc/group; set securityContext.runAsGroup to a numeric gid, or fix the image"
    )]
    UnknownGroup { group: String },
    #[error("the image's {file} has an entry for {name:?} with a bad {field}: {value:?}")]
    BadEntry {
        file: &'static str,
        name: String,
        field: &'static str,
        value: String,
    },
    #[error("cannot read the image's {file}: {source}")]
    Read {
        file: &'static str,
        #[source]
        source: MergedReadError,
    },
}

/// Resolves `req` in the image made of `layers` (snapshot dirs, top first). Blocking
/// file I/O: call it off the async threads.
pub fn resolve_user(layers: &[PathBuf], req: &UserRequest) -> Result<ImageUser, UserError> {
    let passwd = read_table(layers, "/etc/passwd")?;
    let (user_part, group_part) = match req.image_user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (req.image_user.as_str(), None),
    };
    let (uid, mut gid, name) = match req.run_as_user {
        Some(uid) => user_by_uid(&passwd, uid)?,
        None if user_part.is_empty() => user_by_uid(&passwd, 0)?,
        None => match user_part.parse::<u32>() {
            Ok(uid) => user_by_uid(&passwd, uid)?,
            Err(_) => user_by_name(&passwd, user_part)?,
        },
    };
    let mut group: Option<String> = None;
    if req.run_as_user.is_none()
        && let Some(g) = group_part.filter(|g| !g.is_empty())
    {
        match g.parse::<u32>() {
            Ok(n) => gid = n,
            Err(_) => group = Some(g.to_string()),
        }
    }
    let groups = if group.is_some() || name.is_some() {
        read_table(layers, "/etc/group")?
    } else {
        String::new()
    };
    if let Some(g) = group {
        let entry = entries(&groups, 3)
            .find(|f| f[0] == g)
            .ok_or(UserError::UnknownGroup { group: g.clone() })?;
        gid = number("/etc/group", &g, "gid", entry[2])?;
    }
    if let Some(g) = req.run_as_group {
        gid = g;
    }
    let member_of = match &name {
        Some(n) => entries(&groups, 4)
            .filter(|f| f[0] != n && f[3].split(',').any(|m| m.trim() == n))
            .filter_map(|f| f[2].parse().ok())
            .collect(),
        None => Vec::new(),
    };
    Ok(ImageUser {
        uid,
        gid,
        name,
        member_of,
    })
}

/// (uid, primary gid, name) of a numeric user: the entry's gid and name when
/// `/etc/passwd` has one, else gid 0 and no name (as containerd).
fn user_by_uid(passwd: &str, uid: u32) -> Result<(u32, u32, Option<String>), UserError> {
    let wanted = uid.to_string();
    match entries(passwd, 4).find(|f| f[2] == wanted) {
        Some(f) => Ok((
            uid,
            number("/etc/passwd", f[0], "gid", f[3])?,
            Some(f[0].to_string()),
        )),
        None => Ok((uid, 0, None)),
    }
}

fn user_by_name(passwd: &str, name: &str) -> Result<(u32, u32, Option<String>), UserError> {
    let f = entries(passwd, 4)
        .find(|f| f[0] == name)
        .ok_or_else(|| UserError::UnknownUser {
            user: name.to_string(),
        })?;
    Ok((
        number("/etc/passwd", name, "uid", f[2])?,
        number("/etc/passwd", name, "gid", f[3])?,
        Some(name.to_string()),
    ))
}

fn number(
    file: &'static str,
    name: &str,
    field: &'static str,
    value: &str,
) -> Result<u32, UserError> {
    value.trim().parse().map_err(|_| UserError::BadEntry {
        file,
        name: name.to_string(),
        field,
        value: value.to_string(),
    })
}

/// The colon-separated entries of a table with at least `min_fields` fields.
fn entries(table: &str, min_fields: usize) -> impl Iterator<Item = Vec<&str>> {
    table
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(move |f| f.len() >= min_fields)
}

/// The file's text ("" when the image has none).
fn read_table(layers: &[PathBuf], file: &'static str) -> Result<String, UserError> {
    match read_merged_file(layers, Path::new(file), MAX_ACCOUNT_FILE) {
        Ok(Some(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Ok(None) => Ok(String::new()),
        Err(source) => Err(UserError::Read { file, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn layer(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        for (path, content) in files {
            std::fs::write(dir.join(path), content).unwrap();
        }
        dir
    }

    fn req(user: &str) -> UserRequest {
        UserRequest {
            image_user: user.into(),
            ..Default::default()
        }
    }

    #[test]
    fn names_numbers_groups_and_overrides() {
        let tmp = tempfile::tempdir().unwrap();
        let base = layer(
            tmp.path(),
            "base",
            &[
                (
                    "etc/passwd",
                    "root:x:0:0:root:/root:/bin/sh\nweb:x:1000:1001::/home/web:/bin/sh\n",
                ),
                (
                    "etc/group",
                    "root:x:0:\nweb:x:1001:web\nstaff:x:50:alice,web\naudio:x:29:bob\n",
                ),
            ],
        );
        let layers = vec![base];
        let r = |u: &str| resolve_user(&layers, &req(u)).unwrap();
        assert_eq!((r("").uid, r("").gid), (0, 0));
        let web = r("web");
        assert_eq!(
            (web.uid, web.gid, web.name.as_deref()),
            (1000, 1001, Some("web"))
        );
        assert_eq!(
            web.member_of,
            vec![50],
            "its own group is its primary, not extra"
        );
        assert_eq!((r("1000").uid, r("1000").gid), (1000, 1001));
        assert_eq!(
            (r("42:7").uid, r("42:7").gid, r("42:7").name),
            (42, 7, None)
        );
        assert_eq!(r("web:staff").gid, 50);
        let over = resolve_user(
            &layers,
            &UserRequest {
                image_user: "web:staff".into(),
                run_as_user: Some(1000),
                run_as_group: Some(3000),
            },
        )
        .unwrap();
        assert_eq!((over.uid, over.gid), (1000, 3000));
        let unknown_uid = resolve_user(
            &layers,
            &UserRequest {
                run_as_user: Some(4242),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!((unknown_uid.uid, unknown_uid.gid), (4242, 0));
        let err = resolve_user(&layers, &req("nobody")).unwrap_err();
        assert!(matches!(err, UserError::UnknownUser { .. }), "{err}");
        assert!(err.to_string().contains("\"nobody\""), "{err}");
        let err = resolve_user(&layers, &req("web:wheel")).unwrap_err();
        assert!(matches!(err, UserError::UnknownGroup { .. }), "{err}");
    }

    #[test]
    fn the_top_layer_wins_and_a_whiteout_hides() {
        let tmp = tempfile::tempdir().unwrap();
        let base = layer(
            tmp.path(),
            "base",
            &[("etc/passwd", "app:x:5:5::/:/bin/sh\n")],
        );
        let top = layer(
            tmp.path(),
            "top",
            &[("etc/passwd", "app:x:6:6::/:/bin/sh\n")],
        );
        let r = resolve_user(&[top.clone(), base.clone()], &req("app")).unwrap();
        assert_eq!(r.uid, 6);
        // A whiteout in the top layer: no passwd at all.
        std::fs::remove_file(top.join("etc/passwd")).unwrap();
        nix::sys::stat::mknod(
            &top.join("etc/passwd"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap();
        let err = resolve_user(&[top, base], &req("app")).unwrap_err();
        assert!(matches!(err, UserError::UnknownUser { .. }), "{err}");
    }

    /// Symlinks are resolved inside the image: an absolute link to a lower layer's
    /// file works; links to host devices, host files or loops never reach the host.
    #[test]
    fn symlinks_stay_in_the_image() {
        let tmp = tempfile::tempdir().unwrap();
        let base = layer(
            tmp.path(),
            "base",
            &[("etc/passwd.real", "app:x:7:7::/:/bin/sh\n")],
        );
        let top = layer(tmp.path(), "top", &[]);
        symlink("/etc/passwd.real", top.join("etc/passwd")).unwrap();
        let layers = vec![top.clone(), base];
        assert_eq!(resolve_user(&layers, &req("app")).unwrap().uid, 7);

        // To the host's /dev/zero: inside the image there is no such file.
        std::fs::remove_file(top.join("etc/passwd")).unwrap();
        symlink("/dev/zero", top.join("etc/passwd")).unwrap();
        let err = resolve_user(&layers, &req("app")).unwrap_err();
        assert!(matches!(err, UserError::UnknownUser { .. }), "{err}");
        // To the host's /etc/passwd through `..`: the image's own (absent) file.
        std::fs::remove_file(top.join("etc/passwd")).unwrap();
        symlink("../../../../../../etc/hostname", top.join("etc/passwd")).unwrap();
        assert!(resolve_user(&layers, &req("root")).is_err());
        // A loop.
        std::fs::remove_file(top.join("etc/passwd")).unwrap();
        symlink("passwd", top.join("etc/passwd")).unwrap();
        let err = resolve_user(&layers, &req("app")).unwrap_err();
        assert!(
            matches!(
                err,
                UserError::Read {
                    source: MergedReadError::Loop,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn devices_fifos_and_huge_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let top = layer(tmp.path(), "top", &[]);
        let layers = vec![top.clone()];
        let passwd = top.join("etc/passwd");
        // A char device of the image's own (1:5, what /dev/zero is).
        nix::sys::stat::mknod(
            &passwd,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o644),
            nix::sys::stat::makedev(1, 5),
        )
        .unwrap();
        let err = resolve_user(&layers, &req("app")).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        // A FIFO: refused without blocking on open.
        std::fs::remove_file(&passwd).unwrap();
        nix::unistd::mkfifo(&passwd, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let err = resolve_user(&layers, &req("app")).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        // A sparse file past the bound.
        std::fs::remove_file(&passwd).unwrap();
        let f = std::fs::File::create(&passwd).unwrap();
        f.set_len(MAX_ACCOUNT_FILE + 1).unwrap();
        let err = resolve_user(&layers, &req("app")).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }
}
