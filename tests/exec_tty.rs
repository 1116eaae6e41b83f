//! `podhost exec -i -t` on a real terminal: the CLI runs under a pty made here (as a
//! user's shell would run it, the pty its controlling terminal via `setsid --ctty`),
//! and the command in the container gets a terminal of its own — with this terminal's
//! size, resized when this one is, Ctrl-C delivered to it as SIGINT (the CLI's
//! terminal is raw, so the CLI itself is not interrupted), its exit status passed on.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common;

use common::*;

/// A command's run under a pty: what it printed so far, and the pty's master.
struct OnTerminal {
    child: std::process::Child,
    master: std::fs::File,
    output: Arc<Mutex<Vec<u8>>>,
    slave_path: std::path::PathBuf,
}

impl OnTerminal {
    fn start(d: &TestDaemon, args: &[&str]) -> OnTerminal {
        let size = nix::pty::Winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).unwrap();
        let slave_path = nix::unistd::ttyname(&pty.slave).unwrap();
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        let child = Command::new("setsid")
            .args(["--ctty", "--wait", BIN, "--socket"])
            .arg(&d.socket)
            .args(args)
            .stdin(stdio(&pty.slave))
            .stdout(stdio(&pty.slave))
            .stderr(stdio(&pty.slave))
            .spawn()
            .unwrap();
        drop(pty.slave);
        let master = std::fs::File::from(pty.master);
        let output = Arc::new(Mutex::new(Vec::new()));
        let (mut reader, sink) = (master.try_clone().unwrap(), output.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        OnTerminal {
            child,
            master,
            output,
            slave_path,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    fn type_keys(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Waits until the output (after `from` bytes) shows `needle`; returns where it ends.
    fn wait_for(&self, needle: &str, from: usize) -> usize {
        let found = wait_until(Duration::from_secs(15), needle, || {
            let out = self.output.lock().unwrap();
            let tail = String::from_utf8_lossy(&out[from.min(out.len())..]).into_owned();
            tail.find(needle).map(|at| from + at + needle.len())
        });
        found.unwrap_or_else(|| panic!("{needle:?} never shown; the terminal:\n{}", self.text()))
    }

    fn wait_exit(&mut self) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if start.elapsed() > Duration::from_secs(15) {
                let _ = self.child.kill();
                panic!("exec -it did not end; the terminal:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn exec_it_gives_a_terminal_sized_resized_interruptible_with_the_exit_status() {
    assert!(require_root());
    let d = TestDaemon::start();
    d.write_manifest(
        "t.yaml",
        &busybox_pod(
            "t",
            "  terminationGracePeriodSeconds: 1\n",
            "",
            "exec sleep 1000",
        ),
    );
    d.wait_pod("t", "t Running", 30, |p| {
        (phase(p) == "Running").then_some(())
    });
    let pod = d.full_name("t");

    // An interactive shell: a terminal of its own, with this one's size, then the new
    // size after this one is resized.
    let mut shell = OnTerminal::start(&d, &["exec", "-i", "-t", &pod, "--", "sh"]);
    shell.type_keys("tty; stty size\r");
    let at = shell.wait_for("/dev/pts/", 0);
    let at = shell.wait_for("24 80", at);
    let resized = Command::new("stty")
        .arg("-F")
        .arg(&shell.slave_path)
        .args(["rows", "40", "cols", "100"])
        .status()
        .unwrap();
    assert!(resized.success());
    // The size reaches the container's terminal with the CLI's SIGWINCH.
    let mut from = at;
    let shown = wait_until(Duration::from_secs(10), "the new size", || {
        shell.type_keys("stty size\r");
        std::thread::sleep(Duration::from_millis(200));
        let text = shell.text();
        let found = text[from..].contains("40 100");
        from = text.len();
        found.then_some(())
    });
    assert!(shown.is_some(), "the terminal:\n{}", shell.text());
    shell.type_keys("exit 7\r");
    assert_eq!(
        shell.wait_exit(),
        Some(7),
        "the terminal:\n{}",
        shell.text()
    );

    // Ctrl-C is the container's SIGINT, not the CLI's.
    let script = "trap 'echo got-INT; exit 3' INT; echo ready; while :; do sleep 1; done";
    let mut waiting = OnTerminal::start(&d, &["exec", "-it", &pod, "--", "sh", "-c", script]);
    let at = waiting.wait_for("ready", 0);
    waiting.type_keys("\x03");
    waiting.wait_for("got-INT", at);
    assert_eq!(
        waiting.wait_exit(),
        Some(3),
        "the terminal:\n{}",
        waiting.text()
    );

    // Without a terminal to read from, -t is dropped with kubectl's warning.
    let out = d.cli(&[
        "exec",
        "-i",
        "-t",
        &pod,
        "--",
        "sh",
        "-c",
        "test -t 0 || echo no-tty",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no-tty\n");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Unable to use a TTY - input is not a terminal or the right kind of file")
    );
    // -t alone has no terminal to read from either: dropped, and said.
    let out = d.cli(&[
        "exec",
        "-t",
        &pod,
        "--",
        "sh",
        "-c",
        "test -t 0 || echo no-tty",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "no-tty\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("-t needs -i"));
    d.remove_manifest("t.yaml");
    d.wait_gone("t", 30);
}
