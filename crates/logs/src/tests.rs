//! Unit tests of the CRI log writer and reader (no root needed).

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use super::writer::{StreamState, encode_line};
use super::*;

fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe().expect("pipe")
}

/// Spawns a thread that writes `chunks` to `w` (sleeping `pause` between them) and
/// closes it.
fn writer_thread(w: OwnedFd, chunks: Vec<Vec<u8>>, pause: Duration) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut f = std::fs::File::from(w);
        for c in chunks {
            f.write_all(&c).expect("write to pipe");
            if !pause.is_zero() {
                thread::sleep(pause);
            }
        }
    })
}

/// Runs the writer over two pipes fed with the given bytes; returns the log's lines.
fn copy(out: Vec<Vec<u8>>, err: Vec<Vec<u8>>) -> (tempfile::TempDir, PathBuf, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ns_pod_uid/c/0.log");
    let (or, ow) = pipe();
    let (er, ew) = pipe();
    let t1 = writer_thread(ow, out, Duration::ZERO);
    let t2 = writer_thread(ew, err, Duration::ZERO);
    copy_streams_to_cri_log(or, er, &path).expect("copy");
    t1.join().unwrap();
    t2.join().unwrap();
    let lines = log_lines(&path);
    (dir, path, lines)
}

fn log_lines(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    assert!(
        data.is_empty() || data.ends_with(b"\n"),
        "log must end in a newline"
    );
    data.split_inclusive(|&b| b == b'\n')
        .map(|l| l[..l.len() - 1].to_vec())
        .collect()
}

fn parsed(lines: &[Vec<u8>]) -> Vec<CriLine> {
    lines
        .iter()
        .map(|l| parse_line(l).expect("parse"))
        .collect()
}

fn read_all(path: &Path, opts: &ReadOptions) -> Vec<u8> {
    let mut out = Vec::new();
    read_messages(path, opts, &mut out).expect("read");
    out
}

// ---------------------------------------------------------------------------- writer

#[test]
fn line_format_has_rfc3339_nano_utc_timestamp_and_tags() {
    let before = Utc::now();
    let (_d, _p, lines) = copy(vec![b"hello world\n".to_vec()], vec![b"oops\n".to_vec()]);
    let after = Utc::now();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        let text = std::str::from_utf8(line).unwrap();
        let mut parts = text.splitn(4, ' ');
        let ts = parts.next().unwrap();
        // 2026-11-21T21:50:42.123456789Z
        assert_eq!(ts.len(), 30, "timestamp {ts:?}");
        let b = ts.as_bytes();
        for (i, c) in b.iter().enumerate() {
            let ok = match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'.',
                29 => *c == b'Z',
                _ => c.is_ascii_digit(),
            };
            assert!(ok, "byte {i} of timestamp {ts:?}");
        }
        let t = DateTime::parse_from_rfc3339(ts)
            .unwrap()
            .with_timezone(&Utc);
        assert!(
            t >= before - chrono::Duration::milliseconds(1) && t <= after,
            "{t} not in [{before}, {after}]"
        );
        let stream = parts.next().unwrap();
        let tag = parts.next().unwrap();
        let msg = parts.next().unwrap();
        assert_eq!(tag, "F");
        match stream {
            "stdout" => assert_eq!(msg, "hello world"),
            "stderr" => assert_eq!(msg, "oops"),
            other => panic!("unexpected stream {other}"),
        }
    }
    let streams: Vec<Stream> = parsed(&lines).iter().map(|l| l.stream).collect();
    assert!(streams.contains(&Stream::Stdout) && streams.contains(&Stream::Stderr));
}

#[test]
fn long_line_is_split_into_partial_chunks_and_reassembled() {
    let line: Vec<u8> = (0..40000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut input = line.clone();
    input.push(b'\n');
    // Write in odd-sized pieces so chunk boundaries do not match read boundaries.
    let pieces: Vec<Vec<u8>> = input.chunks(7001).map(<[u8]>::to_vec).collect();
    let (_d, path, lines) = copy(pieces, vec![]);
    let p = parsed(&lines);
    let shape: Vec<(usize, bool)> = p.iter().map(|l| (l.msg.len(), l.partial)).collect();
    assert_eq!(shape, vec![(16384, true), (16384, true), (7232, false)]);
    assert!(p.iter().all(|l| l.stream == Stream::Stdout));
    let mut expected = line.clone();
    expected.push(b'\n');
    assert_eq!(read_all(&path, &ReadOptions::default()), expected);
}

#[test]
fn exact_chunk_size_line_is_one_full_line() {
    let mut st = StreamState::new(pipe().0, Stream::Stdout);
    let mut out = Vec::new();
    let mut data = vec![b'x'; MAX_LINE_BYTES];
    data.push(b'\n');
    st.feed(&data, "T", &mut out);
    let raw = log_lines_of(&out);
    assert_eq!(raw.len(), 1);
    assert!(raw[0].starts_with(b"T stdout F xxx"));
    assert_eq!(raw[0].len(), "T stdout F ".len() + MAX_LINE_BYTES);

    // The same line when its newline arrives in a later read.
    out.clear();
    st.feed(&vec![b'z'; MAX_LINE_BYTES], "T", &mut out);
    assert!(
        out.is_empty(),
        "a full-size chunk may still end with a newline"
    );
    st.feed(b"\n", "T", &mut out);
    let raw = log_lines_of(&out);
    assert_eq!(raw.len(), 1);
    assert!(raw[0].starts_with(b"T stdout F zzz"));
    assert_eq!(raw[0].len(), "T stdout F ".len() + MAX_LINE_BYTES);

    // One more byte: a full-size P chunk then a one-byte F chunk.
    out.clear();
    let mut data = vec![b'y'; MAX_LINE_BYTES + 1];
    data.push(b'\n');
    st.feed(&data, "T", &mut out);
    let raw = log_lines_of(&out);
    assert_eq!(raw.len(), 2);
    assert!(raw[0].starts_with(b"T stdout P yyy"));
    assert_eq!(raw[1], b"T stdout F y");
}

/// Splits encoded output into lines (without newlines); keeps unparsable ones.
fn log_lines_of(out: &[u8]) -> Vec<Vec<u8>> {
    out.split_inclusive(|&b| b == b'\n')
        .map(|l| l[..l.len() - 1].to_vec())
        .collect()
}

#[test]
fn feed_joins_pieces_and_keeps_streams_apart() {
    let mut st = StreamState::new(pipe().0, Stream::Stderr);
    let mut out = Vec::new();
    st.feed(b"ab", "T", &mut out);
    assert!(out.is_empty(), "no line before the newline");
    st.feed(b"c\nd", "T", &mut out);
    st.feed(b"e\n\nf", "T", &mut out);
    st.flush_pending("T", &mut out);
    assert_eq!(
        out,
        b"T stderr F abc\nT stderr F de\nT stderr F \nT stderr P f\n".to_vec()
    );
}

#[test]
fn trailing_text_without_newline_is_written_as_a_partial_line() {
    let (_d, _p, lines) = copy(vec![b"one\ntwo".to_vec()], vec![b"no newline".to_vec()]);
    let p = parsed(&lines);
    let out: Vec<(&[u8], bool)> = p
        .iter()
        .filter(|l| l.stream == Stream::Stdout)
        .map(|l| (&l.msg[..], l.partial))
        .collect();
    // As containerd writes it: the container never ended the line.
    assert_eq!(out, vec![(&b"one"[..], false), (&b"two"[..], true)]);
    let err: Vec<&CriLine> = p.iter().filter(|l| l.stream == Stream::Stderr).collect();
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].msg, b"no newline");
    assert!(err[0].partial);
}

#[test]
fn empty_lines_and_non_utf8_bytes_are_kept() {
    let msg = b"\xff\xfe bin \x00\x01".to_vec();
    let mut input = msg.clone();
    input.extend_from_slice(b"\n\n");
    let (_d, path, lines) = copy(vec![input], vec![]);
    let p = parsed(&lines);
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].msg, msg);
    assert_eq!(p[1].msg, b"");
    let mut expected = msg.clone();
    expected.extend_from_slice(b"\n\n");
    assert_eq!(read_all(&path, &ReadOptions::default()), expected);
}

#[test]
fn interleaved_pipes_keep_every_line_once_in_order() {
    const N: usize = 5000;
    let out: Vec<Vec<u8>> = (0..N)
        .map(|i| format!("out line {i} {}\n", "o".repeat(i % 97)).into_bytes())
        .collect();
    // stderr writes in uneven batches that cut lines in the middle.
    let err_all: Vec<u8> = (0..N)
        .flat_map(|i| format!("err line {i}\n").into_bytes())
        .collect();
    let err: Vec<Vec<u8>> = err_all.chunks(333).map(<[u8]>::to_vec).collect();
    let (_d, path, lines) = copy(out, err);
    let p = parsed(&lines);
    assert!(p.iter().all(|l| !l.partial));
    let got_out: Vec<String> = p
        .iter()
        .filter(|l| l.stream == Stream::Stdout)
        .map(|l| String::from_utf8(l.msg.clone()).unwrap())
        .collect();
    let got_err: Vec<String> = p
        .iter()
        .filter(|l| l.stream == Stream::Stderr)
        .map(|l| String::from_utf8(l.msg.clone()).unwrap())
        .collect();
    let want_out: Vec<String> = (0..N)
        .map(|i| format!("out line {i} {}", "o".repeat(i % 97)))
        .collect();
    let want_err: Vec<String> = (0..N).map(|i| format!("err line {i}")).collect();
    assert_eq!(got_out, want_out);
    assert_eq!(got_err, want_err);
    // Timestamps never go backwards in the file.
    assert!(p.windows(2).all(|w| w[0].time <= w[1].time));
    // The reader with a stream filter gives back exactly one stream.
    let only_err = read_all(
        &path,
        &ReadOptions {
            stream: Some(Stream::Stderr),
            ..Default::default()
        },
    );
    assert_eq!(only_err, err_all);
}

#[test]
fn log_file_is_appended_with_mode_0640() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/0.log");
    for text in ["first\n", "second\n"] {
        let (or, ow) = pipe();
        let (er, ew) = pipe();
        drop(ew);
        let t = writer_thread(ow, vec![text.as_bytes().to_vec()], Duration::ZERO);
        copy_streams_to_cri_log(or, er, &path).unwrap();
        t.join().unwrap();
    }
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    // The umask can only remove bits.
    assert_eq!(mode & !0o640, 0, "mode {mode:o}");
    assert_eq!(read_all(&path, &ReadOptions::default()), b"first\nsecond\n");
}

#[test]
fn open_error_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let path = file.join("0.log"); // parent is a regular file
    let err = open_log_file(&path).unwrap_err();
    assert!(matches!(err, LogError::CreateDir { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&file.display().to_string()),
        "{err}"
    );
}

#[test]
fn stop_fd_ends_the_copy_and_flushes_pending_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let (or, ow) = pipe();
    let (er, _ew) = pipe(); // stderr never closes
    let (stop_r, stop_w) = pipe();
    let mut w = std::fs::File::from(ow);
    w.write_all(b"done\nhalf").unwrap();
    let stopper = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        drop(stop_w); // hang-up makes the stop fd readable
    });
    copy_streams(
        or,
        er,
        &path,
        &WriterOptions::default(),
        Some(stop_r.as_fd()),
        || {},
    )
    .unwrap();
    stopper.join().unwrap();
    drop(w);
    let p = parsed(&log_lines(&path));
    let msgs: Vec<&[u8]> = p.iter().map(|l| &l.msg[..]).collect();
    assert_eq!(msgs, vec![&b"done"[..], &b"half"[..]]);
}

#[test]
fn lines_reach_the_file_before_the_pipes_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let (or, ow) = pipe();
    let (er, ew) = pipe();
    let p2 = path.clone();
    let copier = thread::spawn(move || copy_streams_to_cri_log(or, er, &p2));
    let mut w = std::fs::File::from(ow);
    w.write_all(b"early\n").unwrap();
    let mut seen = false;
    for _ in 0..200 {
        thread::sleep(Duration::from_millis(10));
        if std::fs::read(&path).is_ok_and(|d| d.ends_with(b" stdout F early\n")) {
            seen = true;
            break;
        }
    }
    drop(w);
    drop(ew);
    copier.join().unwrap().unwrap();
    assert!(seen, "line was not flushed while the pipe was open");
}

// ---------------------------------------------------------------------------- parser

#[test]
fn parse_line_accepts_cri_lines() {
    let l = parse_line(b"2026-11-21T21:50:42.123456789Z stdout F hello world\n").unwrap();
    assert_eq!(
        l.time,
        Utc.with_ymd_and_hms(2026, 11, 21, 21, 50, 42).unwrap()
            + chrono::Duration::nanoseconds(123_456_789)
    );
    assert_eq!(l.stream, Stream::Stdout);
    assert!(!l.partial);
    assert_eq!(l.msg, b"hello world");

    // containerd trims trailing zeros (Go RFC3339Nano); other offsets are converted.
    let l = parse_line(b"2026-11-21T22:50:42.5+01:00 stderr P  two  spaces ").unwrap();
    assert_eq!(
        l.time,
        Utc.with_ymd_and_hms(2026, 11, 21, 21, 50, 42).unwrap()
            + chrono::Duration::milliseconds(500)
    );
    assert_eq!(l.stream, Stream::Stderr);
    assert!(l.partial);
    assert_eq!(l.msg, b" two  spaces ");

    // Extra tags after ':' are ignored; an empty message may lack the space.
    let l = parse_line(b"2026-11-21T21:50:42Z stdout F:x ").unwrap();
    assert_eq!(l.msg, b"");
    let l = parse_line(b"2026-11-21T21:50:42Z stdout F").unwrap();
    assert_eq!(l.msg, b"");
    assert!(!l.partial);
}

#[test]
fn parse_line_rejects_malformed_lines() {
    let bad: &[&[u8]] = &[
        b"",
        b"garbage",
        b"2026-11-21T21:50:42Z",
        b"2026-11-21T21:50:42Z stdout",
        b"2026-11-21 21:50:42Z stdout F msg",
        b"yesterday stdout F msg",
        b"2026-11-21T21:50:42Z stdin F msg",
        b"2026-11-21T21:50:42Z stdout X msg",
        b"2026-11-21T21:50:42Z stdout  msg",
        b"\xff\xfe stdout F msg",
    ];
    for line in bad {
        match parse_line(line) {
            Err(LogError::Malformed { reason }) => assert!(!reason.is_empty()),
            other => panic!("{:?} parsed as {other:?}", String::from_utf8_lossy(line)),
        }
    }
}

// ---------------------------------------------------------------------------- reader

/// Writes a log from (seconds, stream, partial, msg) entries.
fn write_log(path: &Path, entries: &[(i64, Stream, bool, &str)]) {
    let mut out = Vec::new();
    for &(secs, stream, partial, msg) in entries {
        let ts = ts(secs).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
        super::writer::encode_chunk(&mut out, &ts, stream, partial, msg.as_bytes());
    }
    std::fs::write(path, out).unwrap();
}

fn ts(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(secs)
}

const O: Stream = Stream::Stdout;
const E: Stream = Stream::Stderr;

#[test]
fn reader_tail_since_timestamps_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    write_log(
        &path,
        &[
            (1, O, false, "a"),
            (2, E, false, "b"),
            (3, O, true, "c1-"),
            (4, E, false, "d"),
            (5, O, false, "c2"),
            (6, O, false, "e"),
        ],
    );
    let all = ReadOptions::default();
    assert_eq!(read_all(&path, &all), b"a\nb\nd\nc1-c2\ne\n");
    let tail = |n| ReadOptions {
        tail: Some(n),
        ..Default::default()
    };
    assert_eq!(read_all(&path, &tail(2)), b"c1-c2\ne\n");
    assert_eq!(read_all(&path, &tail(3)), b"d\nc1-c2\ne\n");
    assert_eq!(read_all(&path, &tail(0)), b"");
    assert_eq!(read_all(&path, &tail(100)), b"a\nb\nd\nc1-c2\ne\n");
    let out_tail = ReadOptions {
        tail: Some(2),
        stream: Some(O),
        ..Default::default()
    };
    assert_eq!(read_all(&path, &out_tail), b"c1-c2\ne\n");
    let err_only = ReadOptions {
        stream: Some(E),
        ..Default::default()
    };
    assert_eq!(read_all(&path, &err_only), b"b\nd\n");
    // A joined line is dated by its first chunk.
    let since = ReadOptions {
        since: Some(ts(3)),
        ..Default::default()
    };
    assert_eq!(read_all(&path, &since), b"d\nc1-c2\ne\n");
    let stamps = ReadOptions {
        tail: Some(2),
        timestamps: true,
        ..Default::default()
    };
    assert_eq!(
        String::from_utf8(read_all(&path, &stamps)).unwrap(),
        "2026-01-01T00:00:03.000000000Z c1-c2\n2026-01-01T00:00:06.000000000Z e\n"
    );
    let limit = ReadOptions {
        limit_bytes: Some(5),
        ..Default::default()
    };
    assert_eq!(read_all(&path, &limit), b"a\nb\nd");
}

#[test]
fn reader_skips_malformed_lines_and_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let good = "2026-01-01T00:00:00Z stdout F ok\n";
    let text = format!("{good}not a cri line\n{good}2026-01-01T00:00:01Z stdout F tor");
    std::fs::write(&path, &text).unwrap();
    let mut out = Vec::new();
    let summary = read_messages(&path, &ReadOptions::default(), &mut out).unwrap();
    assert_eq!(out, b"ok\nok\n");
    assert_eq!(summary.skipped_lines, 1);
    assert_eq!(
        usize::try_from(summary.end_offset).unwrap(),
        text.rfind('\n').unwrap() + 1
    );
}

#[test]
fn reader_prints_dangling_partial_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    write_log(
        &path,
        &[
            (1, O, true, "start"),
            (2, E, false, "x"),
            (3, O, true, "-more"),
        ],
    );
    // Without a newline, as the kubelet's reader gives an unfinished line.
    assert_eq!(read_all(&path, &ReadOptions::default()), b"x\nstart-more");
}

#[test]
fn read_missing_file_names_the_path() {
    let err = read_messages(
        Path::new("/nonexistent/podhost/0.log"),
        &ReadOptions::default(),
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(err, LogError::Open { .. }));
    assert!(
        err.to_string().contains("/nonexistent/podhost/0.log"),
        "{err}"
    );
}

#[test]
fn encode_line_round_trips_through_parse() {
    let msg: Vec<u8> = (0..(3 * MAX_LINE_BYTES))
        .map(|i| u8::try_from(i % 251).unwrap())
        .filter(|&b| b != b'\n')
        .collect();
    let mut out = Vec::new();
    encode_line(&mut out, "2026-01-01T00:00:00.000000000Z", E, &msg);
    let p = parsed(&log_lines_of(&out));
    assert!(
        p[..p.len() - 1]
            .iter()
            .all(|l| l.partial && l.msg.len() == MAX_LINE_BYTES)
    );
    assert!(!p.last().unwrap().partial);
    let joined: Vec<u8> = p.iter().flat_map(|l| l.msg.clone()).collect();
    assert_eq!(joined, msg);
}

// ---------------------------------------------------------------------------- follow

async fn recv_until(rx: &mut tokio::sync::mpsc::Receiver<Vec<u8>>, got: &mut Vec<u8>, want: &[u8]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !got.ends_with(want) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(b)) => got.extend_from_slice(&b),
            Ok(None) => panic!("follow ended early; got {:?}", String::from_utf8_lossy(got)),
            Err(_) => panic!("timed out; got {:?}", String::from_utf8_lossy(got)),
        }
    }
}

fn append(path: &Path, data: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(data).unwrap();
}

fn cri(secs: i64, stream: Stream, partial: bool, msg: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let t = ts(secs).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    super::writer::encode_chunk(&mut out, &t, stream, partial, msg.as_bytes());
    out
}

#[tokio::test]
async fn follow_sees_appended_lines_and_drains_on_stop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    write_log(
        &path,
        &[
            (1, O, false, "old1"),
            (2, O, false, "old2"),
            (3, E, false, "old3"),
        ],
    );
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let opts = ReadOptions {
        tail: Some(2),
        ..Default::default()
    };
    let task = tokio::spawn(follow(path.clone(), opts, tx, async {
        let _ = stop_rx.await;
    }));
    let mut got = Vec::new();
    recv_until(&mut rx, &mut got, b"old2\nold3\n").await;
    assert_eq!(got, b"old2\nold3\n");

    append(&path, &cri(4, O, false, "new1"));
    recv_until(&mut rx, &mut got, b"new1\n").await;

    // A line written in two pieces, and a split line, arrive whole.
    let mut torn = cri(5, E, false, "new2");
    let rest = torn.split_off(10);
    append(&path, &torn);
    tokio::time::sleep(Duration::from_millis(250)).await;
    append(&path, &rest);
    append(&path, &cri(6, O, true, "long-"));
    recv_until(&mut rx, &mut got, b"new2\n").await;
    append(&path, &cri(7, O, false, "line"));
    recv_until(&mut rx, &mut got, b"long-line\n").await;

    // Written right before stop: still delivered, as is a dangling partial chunk.
    append(&path, &cri(8, O, false, "last"));
    append(&path, &cri(9, E, true, "dangling"));
    stop_tx.send(()).unwrap();
    task.await.unwrap().unwrap();
    while let Some(b) = rx.recv().await {
        got.extend_from_slice(&b);
    }
    assert_eq!(
        String::from_utf8(got).unwrap(),
        "old2\nold3\nnew1\nnew2\nlong-line\nlast\ndangling"
    );
}

#[tokio::test]
async fn follow_switches_to_a_rotated_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    write_log(&path, &[(1, O, false, "before")]);
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(follow(path.clone(), ReadOptions::default(), tx, async {
        let _ = stop_rx.await;
    }));
    let mut got = Vec::new();
    recv_until(&mut rx, &mut got, b"before\n").await;
    append(&path, &cri(2, O, false, "old file end"));
    std::fs::rename(&path, dir.path().join("0.log.20260101-000000")).unwrap();
    write_log(&path, &[(3, O, false, "new file")]);
    recv_until(&mut rx, &mut got, b"new file\n").await;
    // copytruncate-style rotation: the same file starts over.
    append(&path, &cri(4, O, false, "more text in the new file"));
    recv_until(&mut rx, &mut got, b"more text in the new file\n").await;
    std::fs::write(&path, cri(5, O, false, "truncated")).unwrap();
    recv_until(&mut rx, &mut got, b"truncated\n").await;
    stop_tx.send(()).unwrap();
    task.await.unwrap().unwrap();
    assert_eq!(
        String::from_utf8(got).unwrap(),
        "before\nold file end\nnew file\nmore text in the new file\ntruncated\n"
    );
}

#[tokio::test]
async fn follow_ends_when_receiver_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    write_log(&path, &[(1, O, false, "x")]);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    drop(rx);
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        follow(
            path,
            ReadOptions::default(),
            tx,
            std::future::pending::<()>(),
        ),
    )
    .await;
    assert!(matches!(r, Ok(Ok(()))), "{r:?}");
}
