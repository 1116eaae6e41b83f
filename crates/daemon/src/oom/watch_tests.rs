//! The watcher end to end: line mode on files and FIFOs, the cursor across restarts,
//! and (when readable) the real `/dev/kmsg`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

use super::cursor::{BOOT_ID_PATH, KmsgCursor, read_boot_id};
use super::event::OomEvent;
use super::fixture_tests::{FULL_REPORT, GROUP_LINES, KEY_LINES};
use super::watch::{WatchConfig, spawn_kmsg_watcher, spawn_kmsg_watcher_with};

/// A later OOM of the same boot (pid 700), after everything in the fixtures.
const LATER_OOM: &str = "\
6,600,9000000,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=/x,task_memcg=/x,task=hog,pid=700,uid=0
3,601,9000100,-;Memory cgroup out of memory: Killed process 700 (hog) total-vm:1kB
";

fn config(dir: &Path, kmsg: &Path, boot: &str) -> WatchConfig {
    let boot_id_path = dir.join(format!("boot_id-{boot}"));
    std::fs::write(&boot_id_path, format!("{boot}\n")).unwrap();
    WatchConfig {
        kmsg_path: kmsg.to_path_buf(),
        cursor_file: dir.join("kmsg-cursor.json"),
        boot_id_path,
        hold_grace: Duration::from_millis(100),
    }
}

/// Runs a watcher to its end (end of file) and returns the pids it reported.
async fn run_to_end(cfg: WatchConfig) -> Vec<i32> {
    let (tx, mut rx) = mpsc::channel(16);
    let task = spawn_kmsg_watcher_with(cfg, tx).unwrap();
    let mut pids = Vec::new();
    while let Some(e) = recv(&mut rx).await {
        pids.push(e.victim_pid);
    }
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    pids
}

async fn recv(rx: &mut mpsc::Receiver<OomEvent>) -> Option<OomEvent> {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("no event and no end of stream within 10 s")
}

#[tokio::test]
async fn regular_file_cursor_restart_and_reboot() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kmsg.txt");
    std::fs::write(&log, format!("{FULL_REPORT}{GROUP_LINES}")).unwrap();
    let cfg = config(dir.path(), &log, "boot-1");

    assert_eq!(run_to_end(cfg.clone()).await, vec![142, 151, 152]);
    let saved = KmsgCursor::load(&cfg.cursor_file).unwrap().unwrap();
    assert_eq!((saved.boot_id.as_str(), saved.seq), ("boot-1", 527));

    assert_eq!(
        run_to_end(cfg.clone()).await,
        Vec::<i32>::new(),
        "no replay"
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(LATER_OOM.as_bytes())
        .unwrap();
    assert_eq!(
        run_to_end(cfg.clone()).await,
        vec![700],
        "only the new kill"
    );

    let rebooted = config(dir.path(), &log, "boot-2");
    assert_eq!(run_to_end(rebooted).await, vec![142, 151, 152, 700]);
}

#[tokio::test]
async fn fifo_line_mode_holds_flushes_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("kmsg.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let cfg = config(dir.path(), &fifo, "boot-1");

    let (tx, mut rx) = mpsc::channel(16);
    let task = spawn_kmsg_watcher_with(cfg.clone(), tx).unwrap();
    let (go_on, wait) = std::sync::mpsc::channel::<()>();
    let feeder = spawn_writer(fifo.clone(), move |w| {
        w.write_all(KEY_LINES.as_bytes()).unwrap();
        // The FIFO stays open: the kill must arrive after the hold grace alone.
        wait.recv_timeout(Duration::from_secs(10)).unwrap();
        let rest: String = GROUP_LINES
            .lines()
            .skip(2)
            .map(|l| format!("{l}\n"))
            .collect();
        w.write_all(rest.as_bytes()).unwrap();
    });
    let first = recv(&mut rx).await.unwrap();
    assert_eq!((first.victim_pid, first.group_kill), (142, false));
    go_on.send(()).unwrap();
    let mut rest = Vec::new();
    while let Some(e) = recv(&mut rx).await {
        rest.push((e.victim_pid, e.group_kill));
    }
    assert_eq!(rest, vec![(151, true), (152, true)]);
    feeder.join().unwrap();
    task.await.unwrap();

    // Restart: the whole log again plus a later OOM; only the later one is new.
    let (tx, mut rx) = mpsc::channel(16);
    let task = spawn_kmsg_watcher_with(cfg.clone(), tx).unwrap();
    let feeder = spawn_writer(fifo, |w| {
        for text in [FULL_REPORT, GROUP_LINES, LATER_OOM] {
            w.write_all(text.as_bytes()).unwrap();
        }
    });
    let mut pids = Vec::new();
    while let Some(e) = recv(&mut rx).await {
        pids.push(e.victim_pid);
    }
    assert_eq!(pids, vec![700]);
    feeder.join().unwrap();
    task.await.unwrap();
    assert_eq!(
        KmsgCursor::load(&cfg.cursor_file).unwrap().unwrap().seq,
        601
    );
}

/// Opens the FIFO for writing on a thread (blocks until the watcher reads) and runs `f`.
fn spawn_writer(
    fifo: PathBuf,
    f: impl FnOnce(&mut std::fs::File) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut w = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
        f(&mut w);
    })
}

#[tokio::test]
async fn stops_when_the_receiver_is_gone_and_survives_an_unwritable_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kmsg.txt");
    std::fs::write(&log, format!("{FULL_REPORT}{GROUP_LINES}")).unwrap();
    let mut cfg = config(dir.path(), &log, "boot-1");
    cfg.cursor_file = dir.path().join("missing/dir/cursor.json");
    assert_eq!(run_to_end(cfg.clone()).await, vec![142, 151, 152]);

    let (tx, rx) = mpsc::channel(1);
    drop(rx);
    let task = spawn_kmsg_watcher_with(cfg, tx).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();

    let (tx, _rx) = mpsc::channel(1);
    let missing = dir.path().join("no-such-kmsg");
    assert!(spawn_kmsg_watcher(missing, dir.path().join("c.json"), tx).is_err());
}

/// The real device (root with read access to the kernel log): records are read, the
/// cursor follows them, and a restart reports nothing at or below the saved cursor.
#[tokio::test]
async fn real_dev_kmsg_when_readable() {
    let kmsg = Path::new("/dev/kmsg");
    if std::fs::File::open(kmsg).is_err() || read_boot_id(Path::new(BOOT_ID_PATH)).is_err() {
        eprintln!("skipping: /dev/kmsg or the boot id is not readable here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cursor_file = dir.path().join("kmsg-cursor.json");
    let (tx, _rx) = mpsc::channel(1024);
    let task = spawn_kmsg_watcher(kmsg.into(), cursor_file.clone(), tx).unwrap();
    let saved = wait_for_cursor(&cursor_file).await;
    task.abort();
    assert_eq!(
        saved.boot_id,
        read_boot_id(Path::new(BOOT_ID_PATH)).unwrap()
    );

    let (tx, mut rx) = mpsc::channel(1024);
    let task = spawn_kmsg_watcher(kmsg.into(), cursor_file.clone(), tx).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    task.abort();
    while let Ok(e) = rx.try_recv() {
        assert!(e.seq > saved.seq, "replayed {e:?}");
    }
}

async fn wait_for_cursor(path: &Path) -> KmsgCursor {
    for _ in 0..100 {
        if let Ok(Some(c)) = KmsgCursor::load(path) {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the watcher saved no cursor for /dev/kmsg within 5 s");
}
