//! The API socket and the node name, against the real binary (as root): the socket's
//! mode and owner, how it comes into being (inotify on its directory), the peer check
//! with real unprivileged clients (`setpriv` + `curl`), a second daemon on the same
//! socket, stale and foreign files at the path, and `--node-name` / host name rules.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{BIN, remove_cgroup_tree, wait_until};

/// A podhost daemon for socket tests: own temp dirs and cgroup root, no image.
struct SocketDaemon {
    dir: tempfile::TempDir,
    /// Where sockets go: world-traversable so unprivileged clients reach the socket
    /// file itself (its mode is what is under test).
    sock_dir: PathBuf,
    socket: PathBuf,
    cgroup_root: String,
    child: Option<Child>,
}

impl SocketDaemon {
    fn new() -> Self {
        assert!(
            nix::unistd::geteuid().is_root(),
            "these tests need root (bind as root, setuid clients, UTS namespaces)"
        );
        let dir = tempfile::Builder::new()
            .prefix("podhost-sock-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        let sock_dir = dir.path().join("run");
        std::fs::create_dir(&sock_dir).unwrap();
        std::fs::set_permissions(&sock_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("manifests")).unwrap();
        let (own, _) = podhost::runtime::cgroup_root::own_root();
        let tag = dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        Self {
            socket: sock_dir.join("api.sock"),
            sock_dir,
            cgroup_root: format!("{own}-it-{tag}"),
            dir,
            child: None,
        }
    }

    /// The daemon's command line, `root` naming its root dir (a second daemon on the
    /// same socket needs another one).
    fn command(&self, root: &str, args: &[&str], wrapper: &[&str]) -> Command {
        let (prog, pre) = match wrapper.split_first() {
            Some((p, rest)) => (*p, rest),
            None => (BIN, &[][..]),
        };
        let mut cmd = Command::new(prog);
        cmd.args(pre);
        if !wrapper.is_empty() {
            cmd.arg(BIN);
        }
        let d = self.dir.path();
        cmd.arg("daemon")
            .arg("--eviction-hard=")
            .arg("--pod-manifest-path")
            .arg(d.join("manifests"))
            .arg("--root-dir")
            .arg(d.join(root))
            .arg("--log-dir")
            .arg(d.join(format!("{root}-logs")))
            .arg("--socket")
            .arg(&self.socket)
            .arg("--cgroup-root")
            .arg(&self.cgroup_root)
            .args(["--rescan-interval", "1"])
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null());
        cmd
    }

    /// Starts the daemon and waits until its socket answers root.
    fn start(&mut self, args: &[&str], wrapper: &[&str]) {
        let log = std::fs::File::create(self.log_path()).unwrap();
        let child = self
            .command("root", args, wrapper)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn the daemon");
        self.child = Some(child);
        let up = wait_until(Duration::from_secs(20), "socket answers", || {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("the daemon exited ({status}):\n{}", self.log());
            }
            self.get_as_root("/healthz").ok()
        });
        assert!(up.is_some(), "the daemon never answered:\n{}", self.log());
    }

    /// Runs a daemon that must refuse to start; returns its output.
    fn run_refused(&self, root: &str, args: &[&str], wrapper: &[&str]) -> Output {
        let mut child = self
            .command(root, args, wrapper)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the daemon");
        let ended = wait_until(Duration::from_secs(20), "daemon exits", || {
            child.try_wait().unwrap()
        });
        if ended.is_none() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the daemon did not refuse to start:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success(), "the daemon exited with success");
        out
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("daemon.log")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn get_as_root(&self, path: &str) -> Result<String, String> {
        let a = podhost::api::client::Client::new(&self.socket)
            .request("GET", path, None)
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&a.body).into_owned())
    }

    /// `curl` as uid 65534 with primary group `gid` and supplementary `groups`:
    /// (curl's exit code, HTTP status, headers + body).
    fn curl_as(&self, gid: u32, groups: &[u32]) -> (i32, u16, String) {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", &format!("--regid={gid}")]);
        if groups.is_empty() {
            cmd.arg("--clear-groups");
        } else {
            let list: Vec<String> = groups.iter().map(u32::to_string).collect();
            cmd.arg(format!("--groups={}", list.join(",")));
        }
        let out = cmd
            .args(["curl", "-s", "-i", "--max-time", "10", "--unix-socket"])
            .arg(&self.socket)
            .args(["-w", "\n%{http_code}", "http://podhost/pods"])
            .output()
            .expect("run setpriv + curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (
            out.status.code().unwrap_or(-1),
            code.trim().parse().unwrap_or(0),
            body.to_string(),
        )
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
    }
}

impl Drop for SocketDaemon {
    fn drop(&mut self) {
        self.stop();
        // Whatever a pod started (sandbox helpers, shims) and the mounts it left.
        let root = self.dir.path().display().to_string();
        for pid in common::TestDaemon::pids_with(&root) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(String::from))
            .filter(|m| m.starts_with(&root))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        remove_cgroup_tree(&self.cgroup_root);
    }
}

fn mode_uid_gid(path: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.permissions().mode() & 0o7777, m.uid(), m.gid())
}

#[test]
fn the_socket_is_0600_root_owned_and_appears_only_by_rename() {
    use inotify::{Inotify, WatchMask};
    let mut d = SocketDaemon::new();
    let mut inotify = Inotify::init().unwrap();
    inotify
        .watches()
        .add(
            &d.sock_dir,
            WatchMask::CREATE | WatchMask::MOVED_TO | WatchMask::ATTRIB | WatchMask::DELETE,
        )
        .unwrap();
    // The most permissive umask: a socket bound in place would be 0777 until chmod.
    d.start(&[], &["sh", "-c", "umask 000; exec \"$0\" \"$@\""]);
    assert_eq!(mode_uid_gid(&d.socket), (0o600, 0, 0));

    let mut buf = [0u8; 4096];
    let mut seen = Vec::new();
    loop {
        match inotify.read_events(&mut buf) {
            Ok(events) => {
                let batch: Vec<_> = events
                    .map(|e| (e.name.map(|n| n.to_string_lossy().into_owned()), e.mask))
                    .collect();
                if batch.is_empty() {
                    break;
                }
                seen.extend(batch);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("inotify: {e}"),
        }
    }
    let on_socket: Vec<_> = seen
        .iter()
        .filter(|(n, _)| n.as_deref() == Some("api.sock"))
        .map(|(_, m)| *m)
        .collect();
    assert_eq!(
        on_socket,
        vec![inotify::EventMask::MOVED_TO],
        "the socket's name must appear only by rename, with no chmod after it; all events: {seen:?}"
    );
    let private: Vec<_> = seen
        .iter()
        .filter(|(n, _)| {
            n.as_deref()
                .is_some_and(|n| n.starts_with(".podhost-bind."))
        })
        .collect();
    assert!(
        private
            .iter()
            .any(|(_, m)| m.contains(inotify::EventMask::CREATE | inotify::EventMask::ISDIR)),
        "bound in a private directory: {seen:?}"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&d.sock_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".podhost-bind."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    d.stop();
    assert!(!d.socket.exists(), "a stopping daemon removes its socket");
}

/// A stop sent the moment the socket appears (a service manager's restart right after
/// start, or a test's teardown) ends the daemon through its cleanup, not by the
/// signal's default action: it exits 0 and takes its socket with it. Repeated, since
/// the window this guards (socket served, stop handler not yet installed) is short.
#[test]
fn a_stop_as_soon_as_the_socket_appears_still_removes_it() {
    use std::os::unix::process::ExitStatusExt;
    let d = SocketDaemon::new();
    for round in 0..5 {
        let log = std::fs::File::create(d.log_path()).unwrap();
        let mut child = d
            .command("root", &[], &[])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn the daemon");
        // Polled tightly (not wait_until's 50 ms): the stop must come right away.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut appeared = None;
        while appeared.is_none() && std::time::Instant::now() < deadline {
            appeared = d.socket.exists().then_some(());
            std::thread::sleep(Duration::from_micros(200));
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let status = child.wait().unwrap();
        assert!(appeared.is_some(), "round {round}: no socket:\n{}", d.log());
        assert_eq!(
            (status.code(), status.signal()),
            (Some(0), None),
            "round {round}: the daemon must catch SIGTERM from the start:\n{}",
            d.log()
        );
        assert!(
            !d.socket.exists(),
            "round {round}: a stopping daemon removes its socket:\n{}",
            d.log()
        );
    }
}

#[test]
fn a_non_root_client_is_refused_with_403() {
    let mut d = SocketDaemon::new();
    d.start(&[], &[]);
    let (curl_rc, code, _) = d.curl_as(65534, &[]);
    assert_eq!(
        (curl_rc, code),
        (7, 0),
        "the 0600 socket keeps a non-root client from connecting at all"
    );

    // Loosened by hand (or an fd handed on): the peer check still refuses.
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (_, code, text) = d.curl_as(65534, &[]);
    assert_eq!(code, 403, "{text}");
    assert!(text.to_lowercase().contains("connection: close"), "{text}");
    let body = &text[text.find('{').expect("a JSON body")..];
    let status: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 403);
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("uid 65534"), "{message}");
    assert!(message.contains("--socket-group"), "{message}");

    // The CLI says the same.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
        .arg("--socket")
        .arg(&d.socket)
        .args(["get", "pods"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("may not use the podhost API"), "{err}");

    assert!(
        d.log().contains("API connection refused"),
        "the refusal is logged:\n{}",
        d.log()
    );
    assert!(d.get_as_root("/pods").is_ok(), "root is still served");
}

#[test]
fn socket_group_members_are_served() {
    const GID: u32 = 4242;
    let mut d = SocketDaemon::new();
    d.start(&["--socket-group", &GID.to_string()], &[]);
    assert_eq!(mode_uid_gid(&d.socket), (0o660, 0, GID));

    let (_, code, text) = d.curl_as(GID, &[]);
    assert_eq!(code, 200, "primary group {GID}: {text}");
    let (_, code, text) = d.curl_as(65534, &[1000, GID]);
    assert_eq!(code, 200, "supplementary group {GID}: {text}");
    let (curl_rc, code, _) = d.curl_as(65534, &[]);
    assert_eq!((curl_rc, code), (7, 0), "a non-member cannot even connect");

    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (_, code, text) = d.curl_as(65534, &[1000]);
    assert_eq!(code, 403, "{text}");
    assert!(text.contains(&format!("(gid {GID})")), "{text}");
}

#[test]
fn an_unknown_socket_group_is_refused() {
    let d = SocketDaemon::new();
    let out = d.run_refused("root", &["--socket-group", "no-such-group-podhost"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--socket-group \"no-such-group-podhost\": no such group"),
        "{err}"
    );
    assert!(!d.socket.exists());
}

/// `ip netns exec` mounts a fresh sysfs over /sys, so /sys/fs/cgroup is an empty
/// directory of it: the daemon refuses to start, says why, and writes nothing first.
#[test]
fn a_daemon_under_ip_netns_exec_without_cgroups_is_refused_and_says_why() {
    let d = SocketDaemon::new();
    let netns = common::netns::TestNetns::new();
    let out = d.run_refused("root", &[], &["ip", "netns", "exec", &netns.name]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no cgroup hierarchy is mounted at /sys/fs/cgroup"),
        "{err}"
    );
    assert!(err.contains("ip netns exec"), "{err}");
    assert!(
        !d.dir.path().join("root").exists(),
        "nothing is written first"
    );
    assert!(!d.socket.exists());
}

#[test]
fn a_second_daemon_on_the_same_socket_is_refused_and_the_first_keeps_serving() {
    let mut d = SocketDaemon::new();
    d.start(&[], &[]);
    let ino = std::fs::metadata(&d.socket).unwrap().ino();

    let out = d.run_refused("root2", &[], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "another podhost daemon (pid {}) is serving {}",
        d.pid(),
        d.socket.display()
    );
    assert!(err.contains(&expected), "want {expected:?} in:\n{err}");

    assert_eq!(std::fs::metadata(&d.socket).unwrap().ino(), ino);
    assert!(
        d.get_as_root("/pods").is_ok(),
        "the first daemon still answers"
    );
}

#[test]
fn a_stale_socket_is_replaced() {
    let mut d = SocketDaemon::new();
    drop(std::os::unix::net::UnixListener::bind(&d.socket).unwrap());
    let stale = std::fs::metadata(&d.socket).unwrap().ino();
    d.start(&[], &[]);
    assert_ne!(std::fs::metadata(&d.socket).unwrap().ino(), stale);
    assert_eq!(mode_uid_gid(&d.socket), (0o600, 0, 0));
    assert!(
        d.log().contains("replacing a stale API socket"),
        "{}",
        d.log()
    );
}

#[test]
fn a_file_that_is_not_a_socket_is_left_alone() {
    let d = SocketDaemon::new();
    std::fs::write(&d.socket, b"not a socket").unwrap();
    let out = d.run_refused("root", &[], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "{} exists and is a regular file, not a socket",
        d.socket.display()
    );
    assert!(err.contains(&expected), "want {expected:?} in:\n{err}");
    assert_eq!(std::fs::read(&d.socket).unwrap(), b"not a socket");
}

#[test]
fn an_invalid_node_name_is_refused() {
    let d = SocketDaemon::new();
    let out = d.run_refused("root", &["--node-name", "Node_1"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node name \"node_1\" from --node-name (trimmed and lowercased) is not valid"),
        "{err}"
    );
    assert!(err.contains("DNS-1123 subdomain"), "{err}");

    let out = d.run_refused("root", &["--node-name", "  "], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("from --node-name is empty"), "{err}");

    let out = d.run_refused(
        "root",
        &[],
        &[
            "unshare",
            "--uts",
            "sh",
            "-c",
            "printf bad_host > /proc/sys/kernel/hostname && exec \"$0\" \"$@\"",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node name \"bad_host\" from the host name"),
        "{err}"
    );
    assert!(!d.socket.exists(), "refused before the socket is bound");
}

#[test]
fn an_uppercase_host_name_is_lowercased() {
    let mut d = SocketDaemon::new();
    d.start(
        &[],
        &[
            "unshare",
            "--uts",
            "sh",
            "-c",
            "hostname Node-UPPER.Example && exec \"$0\" \"$@\"",
        ],
    );
    // A pod that cannot start (its image is absent and never pulled) still shows its name.
    std::fs::write(
        d.dir.path().join("manifests/web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: c, image: localhost/absent:1, imagePullPolicy: Never}\n",
    )
    .unwrap();
    let pod = wait_until(Duration::from_secs(20), "pod listed", || {
        let list: serde_json::Value = serde_json::from_str(&d.get_as_root("/pods").ok()?).ok()?;
        list["items"].as_array()?.first().cloned()
    })
    .unwrap_or_else(|| panic!("the pod was never listed:\n{}", d.log()));
    assert_eq!(pod["metadata"]["name"], "web-node-upper.example");
    assert_eq!(pod["spec"]["nodeName"], "node-upper.example");
}

/// No daemon on the socket: one line that names the socket and the cause once.
#[test]
fn a_missing_socket_is_one_clear_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("podhost.sock");
    let out = Command::new(BIN)
        .arg("--socket")
        .arg(&socket)
        .args(["get", "pods"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&socket.display().to_string()), "{stderr}");
    assert!(stderr.contains("--socket"), "{stderr}");
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "the cause once: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
