//! Resolves an image's `User` ("name", "uid", "uid:gid", "name:group") inside its rootfs.

use std::path::Path;

/// Looks `user` up in the rootfs's /etc/passwd and /etc/group; numbers are taken as is.
/// Returns (uid, gid); an unknown name is an error naming it.
pub fn resolve_user(rootfs: &Path, user: &str) -> Result<(u32, u32), String> {
    if user.is_empty() {
        return Ok((0, 0));
    }
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap_or_default();
    let (uid, primary_gid) = match u.parse::<u32>() {
        Ok(n) => (
            n,
            lookup(&passwd, |f| f[2] == u)
                .map(|f| f[3].parse().unwrap_or(0))
                .unwrap_or(0),
        ),
        Err(_) => {
            let f = lookup(&passwd, |f| f[0] == u)
                .ok_or_else(|| format!("user {u:?} is not in the image's /etc/passwd"))?;
            (
                f[2].parse().map_err(|_| format!("bad uid for {u:?}"))?,
                f[3].parse().map_err(|_| format!("bad gid for {u:?}"))?,
            )
        }
    };
    let gid = match g {
        None => primary_gid,
        Some(g) => match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => {
                let group = std::fs::read_to_string(rootfs.join("etc/group")).unwrap_or_default();
                let f = lookup(&group, |f| f[0] == g)
                    .ok_or_else(|| format!("group {g:?} is not in the image's /etc/group"))?;
                f[2].parse()
                    .map_err(|_| format!("bad gid for group {g:?}"))?
            }
        },
    };
    Ok((uid, gid))
}

fn lookup(table: &str, pred: impl Fn(&[&str]) -> bool) -> Option<Vec<&str>> {
    table
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && pred(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(
            dir.path().join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\nweb:x:1000:1001::/home/web:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("etc/group"), "root:x:0:\nstaff:x:50:\n").unwrap();
        assert_eq!(resolve_user(dir.path(), ""), Ok((0, 0)));
        assert_eq!(resolve_user(dir.path(), "web"), Ok((1000, 1001)));
        assert_eq!(resolve_user(dir.path(), "1000"), Ok((1000, 1001)));
        assert_eq!(resolve_user(dir.path(), "42:7"), Ok((42, 7)));
        assert_eq!(resolve_user(dir.path(), "web:staff"), Ok((1000, 50)));
        assert!(
            resolve_user(dir.path(), "nobody")
                .unwrap_err()
                .contains("nobody")
        );
    }
}
