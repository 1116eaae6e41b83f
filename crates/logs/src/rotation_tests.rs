//! Unit tests of rotation, drop records and reads across rotated files (no root).

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use chrono::{TimeZone, Utc};

use super::rotate::{RotationKey, rotated_files, rotated_path};
use super::*;

fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe().expect("pipe")
}

/// `seq-000000 <pad>` lines, numbered from `first`.
fn numbered(first: usize, count: usize, pad: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in first..first + count {
        out.extend_from_slice(format!("seq-{i:06} {}\n", "x".repeat(pad)).as_bytes());
    }
    out
}

/// Runs the writer with `policy` over a stdout pipe fed with `data` in 4 KiB writes.
fn write_through(path: &Path, policy: RotationPolicy, data: Vec<u8>) {
    let (or, ow) = pipe();
    let (er, ew) = pipe();
    drop(ew);
    let feeder = thread::spawn(move || {
        let mut f = std::fs::File::from(ow);
        for chunk in data.chunks(4096) {
            f.write_all(chunk).unwrap();
        }
    });
    let opts = WriterOptions {
        rotation: policy,
        drop_record: None,
    };
    copy_streams(or, er, path, &opts, None, || {}).expect("copy");
    feeder.join().unwrap();
}

fn read_log_text(path: &Path, opts: &ReadOptions) -> String {
    let mut out = Vec::new();
    read_log(path, opts, &mut out).expect("read_log");
    String::from_utf8(out).unwrap()
}

/// The sequence numbers of `seq-N` lines.
fn seqs(text: &str) -> Vec<usize> {
    text.lines()
        .map(|l| l[4..10].parse::<usize>().expect("seq line"))
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The kubelet's pattern: `0.log`, `0.log.YYYYMMDD-HHMMSS[_NNN][.gz]`.
fn kubelet_like(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("0.log") else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    let rest = rest.strip_prefix('.').unwrap_or("!");
    let rest = rest.strip_suffix(".gz").unwrap_or(rest);
    let (stamp, seq) = rest.split_once('_').unwrap_or((rest, "000"));
    stamp.len() == 15
        && stamp.as_bytes()[8] == b'-'
        && stamp.chars().filter(char::is_ascii_digit).count() == 14
        && seq.len() == 3
        && seq.chars().all(|c| c.is_ascii_digit())
}

#[test]
fn flags_parse_as_the_kubelet_validates_them() {
    assert_eq!(
        RotationPolicy::from_flags("10Mi", 5).unwrap(),
        RotationPolicy::default()
    );
    assert_eq!(
        RotationPolicy::from_flags("64Ki", 2).unwrap().max_size,
        64 * 1024
    );
    assert!(!RotationPolicy::from_flags("0", 5).unwrap().enabled());
    assert!(!RotationPolicy::from_flags("-1", 5).unwrap().enabled());
    assert!(
        RotationPolicy::from_flags("ten", 5)
            .unwrap_err()
            .to_string()
            .contains("--container-log-max-size \"ten\"")
    );
    assert_eq!(
        RotationPolicy::from_flags("1Mi", 1),
        Err(PolicyError::Files(1))
    );
}

#[test]
fn rotation_keys_sort_in_time_order_also_within_a_second() {
    let t = Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap();
    let k0 = RotationKey::next(t, None);
    assert_eq!(k0.stamp, "20260304-050607");
    assert_eq!(k0.seq, 0);
    let k1 = RotationKey::next(t, Some(&k0));
    let k2 = RotationKey::next(t - chrono::Duration::seconds(5), Some(&k1));
    assert_eq!((k1.seq, k2.seq), (1, 2));
    let k3 = RotationKey::next(t + chrono::Duration::seconds(1), Some(&k2));
    assert_eq!((k3.stamp.as_str(), k3.seq), ("20260304-050608", 0));
    assert_eq!(k0.time(), Some(t));
    // The names sort as plain strings in the same order, `.gz` or not (kubelet sorts so).
    let log = Path::new("/x/0.log");
    let mut names: Vec<String> = [&k0, &k1, &k2, &k3]
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let p = rotated_path(log, k).display().to_string();
            if i % 2 == 0 { format!("{p}.gz") } else { p }
        })
        .collect();
    let in_order = names.clone();
    names.sort();
    assert_eq!(names, in_order);
    assert!(in_order[1].ends_with("0.log.20260304-050607_001"));
}

#[test]
fn writer_rotates_keeps_max_files_compresses_older_and_loses_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let policy = RotationPolicy {
        max_size: 8 * 1024,
        max_files: 4,
    };
    let count = 3000;
    write_through(&path, policy, numbered(0, count, 40));
    let files = names(dir.path());
    assert_eq!(files.len(), 4, "{files:?}");
    assert!(files.iter().all(|n| kubelet_like(n)), "{files:?}");
    let rotated = rotated_files(&path).unwrap();
    assert_eq!(rotated.len(), 3);
    // The newest rotated file stays plain, the older ones are gzip.
    let compressed: Vec<bool> = rotated.iter().map(|f| f.compressed).collect();
    assert_eq!(compressed, [true, true, false], "{files:?}");
    for f in &files {
        let len = std::fs::metadata(dir.path().join(f)).unwrap().len();
        assert!(len <= policy.max_size, "{f} has {len} bytes");
    }
    let mut gz = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&rotated[0].path).unwrap())
        .read_to_end(&mut gz)
        .unwrap();
    assert!(
        gz.len() as u64 > policy.max_size / 2,
        "gz holds a whole file"
    );
    // What is kept is the newest lines, every one of them, in order.
    let got = seqs(&read_log_text(&path, &ReadOptions::default()));
    let first = got[0];
    assert_eq!(got, (first..count).collect::<Vec<_>>());
    assert!(first > 0, "older lines were removed with the oldest files");
}

#[test]
fn without_pruning_every_line_of_a_flood_is_kept_across_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let policy = RotationPolicy {
        max_size: 16 * 1024,
        max_files: 1000,
    };
    let count = 20_000;
    write_through(&path, policy, numbered(0, count, 10));
    assert!(rotated_files(&path).unwrap().len() > 20);
    let got = seqs(&read_log_text(&path, &ReadOptions::default()));
    assert_eq!(got, (0..count).collect::<Vec<_>>());
    // tail, limit-bytes and since across the files.
    let tail = read_log_text(
        &path,
        &ReadOptions {
            tail: Some(1500),
            ..Default::default()
        },
    );
    assert_eq!(seqs(&tail), (count - 1500..count).collect::<Vec<_>>());
    let limited = read_log_text(
        &path,
        &ReadOptions {
            limit_bytes: Some(100),
            ..Default::default()
        },
    );
    assert_eq!(limited.len(), 100);
    assert!(limited.starts_with("seq-000000 "));
    let future = read_log_text(
        &path,
        &ReadOptions {
            since: Some(Utc::now() + chrono::Duration::seconds(5)),
            ..Default::default()
        },
    );
    assert_eq!(future, "");
}

#[test]
fn a_line_larger_than_the_limit_gets_a_file_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let policy = RotationPolicy {
        max_size: 1024,
        max_files: 10,
    };
    let mut data = numbered(0, 3, 10);
    data.extend_from_slice(&[b'L'; 3000]);
    data.push(b'\n');
    data.extend_from_slice(&numbered(3, 3, 10));
    write_through(&path, policy, data);
    let text = read_log_text(&path, &ReadOptions::default());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[3], "L".repeat(3000));
    assert!(rotated_files(&path).unwrap().len() >= 2);
}

/// A log written by hand: `n` messages, some split in `P` chunks, both streams.
fn handmade_log(path: &Path, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut msgs = Vec::new();
    for i in 0..n {
        let ts = Utc
            .timestamp_opt(1_700_000_000 + i as i64, 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        let stream = if i % 3 == 0 {
            Stream::Stderr
        } else {
            Stream::Stdout
        };
        let msg = format!("m{i}");
        if i % 5 == 0 {
            writer::encode_chunk(&mut out, &ts, stream, true, b"part-");
            msgs.push(format!("part-{msg}"));
        } else {
            msgs.push(msg.clone());
        }
        writer::encode_chunk(&mut out, &ts, stream, false, msg.as_bytes());
    }
    out.extend_from_slice(b"2026-01-01T00:00:00Z stdout F torn-with");
    std::fs::write(path, out).unwrap();
    msgs
}

#[test]
fn tail_read_backwards_equals_the_end_of_a_full_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    // Long enough for several 64 KiB blocks.
    let msgs = handmade_log(&path, 20_000);
    for n in [0, 1, 2, 5, 7, 100, 4999, 19_999, 20_000, 30_000] {
        let got = read_log_text(
            &path,
            &ReadOptions {
                tail: Some(n),
                ..Default::default()
            },
        );
        let want: String = msgs[msgs.len().saturating_sub(n)..]
            .iter()
            .map(|m| format!("{m}\n"))
            .collect();
        assert_eq!(got, want, "tail {n}");
    }
    // With a stream selected, the tail counts that stream's lines.
    let got = read_log_text(
        &path,
        &ReadOptions {
            tail: Some(3),
            stream: Some(Stream::Stderr),
            ..Default::default()
        },
    );
    assert_eq!(got, "m19992\npart-m19995\nm19998\n");
}

#[test]
fn reads_span_plain_and_gzip_rotated_files_and_tolerate_a_vanished_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let key = |s: u32, seq| RotationKey {
        stamp: format!("20260101-0000{s:02}"),
        seq,
    };
    let write_part = |p: PathBuf, first: usize, gzip: bool| {
        let mut data = Vec::new();
        let ts = "2026-01-01T00:00:00.000000000Z";
        for i in first..first + 10 {
            writer::encode_chunk(
                &mut data,
                ts,
                Stream::Stdout,
                false,
                format!("seq-{i:06}").as_bytes(),
            );
        }
        if gzip {
            let mut gz = Vec::new();
            let mut enc = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::default());
            enc.write_all(&data).unwrap();
            enc.finish().unwrap();
            let mut name = p.into_os_string();
            name.push(".gz");
            std::fs::write(name, gz).unwrap();
        } else {
            std::fs::write(p, data).unwrap();
        }
    };
    write_part(rotated_path(&path, &key(1, 0)), 0, true);
    write_part(rotated_path(&path, &key(1, 1)), 10, true);
    write_part(rotated_path(&path, &key(2, 0)), 20, false);
    write_part(path.clone(), 30, false);
    std::fs::write(dir.path().join("0.log.20260101-000003.tmp"), b"junk").unwrap();
    std::fs::write(dir.path().join("1.log"), b"other restart").unwrap();
    let all = seqs(&read_log_text(&path, &ReadOptions::default()));
    assert_eq!(all, (0..40).collect::<Vec<_>>());
    let tail = seqs(&read_log_text(
        &path,
        &ReadOptions {
            tail: Some(25),
            ..Default::default()
        },
    ));
    assert_eq!(tail, (15..40).collect::<Vec<_>>());
    // A rotated file compressed between listing and opening is found as .gz; one
    // removed is skipped.
    let parts = files::log_parts(&path).unwrap();
    std::fs::remove_file(&parts[0].path).unwrap();
    let plain = parts[2].path.clone();
    compress::compress_file(&plain, &Default::default()).unwrap();
    assert!(!plain.exists());
    let opened = files::open_part(&parts[2]).unwrap();
    assert!(matches!(opened, Some(files::PartReader::Gzip(_))));
    assert!(files::open_part(&parts[0]).unwrap().is_none());
    let rest = seqs(&read_log_text(&path, &ReadOptions::default()));
    assert_eq!(rest, (10..40).collect::<Vec<_>>());
}

#[test]
fn drop_record_is_rewritten_in_place_at_a_fixed_size() {
    let dir = tempfile::tempdir().unwrap();
    let rec_path = dir.path().join(LOG_DROPS_FILE);
    let mut rec = drops::DropRecord::create(&rec_path, Path::new("/var/log/pods/x/0.log"));
    assert_eq!(
        usize::try_from(std::fs::metadata(&rec_path).unwrap().len()).unwrap(),
        drops::RECORD_BYTES
    );
    let d = read_drops(&rec_path).unwrap().unwrap();
    assert_eq!((d.failures, d.failing), (0, false));
    let big = LogDrops {
        failures: 3,
        failing: true,
        dropped_lines: 7,
        dropped_bytes: 700,
        error: Some("No space left on device ".repeat(200)),
        log_path: PathBuf::from("/var/log/pods/x/0.log"),
        ..Default::default()
    };
    rec.update(&big);
    assert_eq!(
        usize::try_from(std::fs::metadata(&rec_path).unwrap().len()).unwrap(),
        drops::RECORD_BYTES
    );
    let d = read_drops(&rec_path).unwrap().unwrap();
    assert_eq!((d.failures, d.dropped_lines, d.failing), (3, 7, true));
    assert!(d.error.unwrap().starts_with("No space left on device"));
    assert_eq!(read_drops(&dir.path().join("none")).unwrap(), None);
}

#[tokio::test]
async fn follow_reads_rotated_history_and_every_rotation_between_two_looks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let policy = RotationPolicy {
        max_size: 4 * 1024,
        max_files: 10_000,
    };
    // History: rotated files already there when following starts.
    write_through(&path, policy, numbered(0, 500, 20));
    assert!(rotated_files(&path).unwrap().len() > 3);
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(follow(path.clone(), ReadOptions::default(), tx, async {
        let _ = stop_rx.await;
    }));
    // A flood that rotates many times between two looks (every 100 ms).
    let p2 = path.clone();
    tokio::task::spawn_blocking(move || write_through(&p2, policy, numbered(500, 4500, 20)))
        .await
        .unwrap();
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !got.ends_with(b"seq-004999 xxxxxxxxxxxxxxxxxxxx\n") {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(b)) => got.extend_from_slice(&b),
            other => panic!("follow stalled: {other:?}"),
        }
    }
    stop_tx.send(()).unwrap();
    task.await.unwrap().unwrap();
    let text = String::from_utf8(got).unwrap();
    let got = seqs(&text);
    let want: Vec<usize> = (0..5000).collect();
    if got != want {
        let at = got.iter().zip(&want).position(|(a, b)| a != b);
        panic!(
            "{} lines; first difference at {at:?}: {:?}",
            got.len(),
            at.map(|i| &got[i.saturating_sub(2)..(i + 3).min(got.len())])
        );
    }
}

#[tokio::test]
async fn follow_with_tail_starts_in_the_right_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let policy = RotationPolicy {
        max_size: 2048,
        max_files: 100,
    };
    write_through(&path, policy, numbered(0, 400, 20));
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let opts = ReadOptions {
        tail: Some(150),
        ..Default::default()
    };
    let task = tokio::spawn(follow(path.clone(), opts, tx, async {}));
    let mut got = Vec::new();
    while let Some(b) = rx.recv().await {
        got.extend_from_slice(&b);
    }
    task.await.unwrap().unwrap();
    let text = String::from_utf8(got).unwrap();
    assert_eq!(seqs(&text), (250..400).collect::<Vec<_>>());
}

#[test]
fn remove_log_files_takes_the_rotated_ones_and_leaves_other_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    write_through(
        &path,
        RotationPolicy {
            max_size: 1024,
            max_files: 4,
        },
        numbered(0, 200, 10),
    );
    std::fs::write(dir.path().join("0.log.20260101-000000_009.gz.tmp"), b"x").unwrap();
    std::fs::write(dir.path().join("1.log"), b"").unwrap();
    std::fs::write(dir.path().join("1.log.20260101-000000"), b"").unwrap();
    assert!(names(dir.path()).len() > 4);
    rotate::remove_log_files(&path).unwrap();
    assert_eq!(names(dir.path()), ["1.log", "1.log.20260101-000000"]);
    rotate::remove_log_files(&path).unwrap();
}

#[test]
fn a_log_that_cannot_be_opened_still_drains_the_pipes_and_counts_the_drops() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let path = file.join("0.log"); // its parent is a regular file
    let record = dir.path().join(LOG_DROPS_FILE);
    let (or, ow) = pipe();
    let (er, ew) = pipe();
    drop(ew);
    // 1 MiB: far more than a pipe holds, so a writer that stopped reading would block.
    let feeder = thread::spawn(move || {
        let mut f = std::fs::File::from(ow);
        f.write_all(&numbered(0, 20_000, 40)).unwrap();
    });
    let opts = WriterOptions {
        rotation: RotationPolicy::default(),
        drop_record: Some(record.clone()),
    };
    let err = copy_streams(or, er, &path, &opts, None, || {}).unwrap_err();
    feeder.join().unwrap();
    match &err {
        LogError::Write { dropped, .. } => assert!(*dropped > 1_000_000, "{err}"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("0.log"), "{err}");
    let d = read_drops(&record).unwrap().unwrap();
    assert_eq!(d.dropped_lines, 20_000);
    assert_eq!((d.failures, d.failing), (1, true));
    assert!(d.error.is_some());
}
