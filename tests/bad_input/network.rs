//! Bad input from the network: a daemon given only `--address` (what a user sets for
//! the kubelet API) must not open the unauthenticated read-only port, and a zlib bomb
//! in a SPDY header block sent to the kubelet API's exec path must be a clear protocol
//! error that costs the serving process no memory to speak of. The healthy pod is
//! untouched either way.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};

use flate2::{Compress, Compression, FlushCompress};
use podhost::api::kubelet::spdy::frame::{self, Frame};
use podhost::api::kubelet::spdy::headers;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::common::*;
use super::common_spdy;
use super::{Healthy, Outcome, peak_rss_kib, print_outcomes};

/// The kubelet's read-only port, which `--address` alone used to open.
const READ_ONLY_PORT: u16 = 10255;

/// The TCP sockets `pid` holds in LISTEN state, as `address:port` in /proc's hex.
fn listening_sockets(pid: u32) -> Vec<String> {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            let inode = target.strip_prefix("socket:[")?.strip_suffix(']')?;
            Some(inode.to_string())
        })
        .collect();
    let mut listening = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            // local_address is column 1, st column 3 (0A: LISTEN), inode column 9.
            if cols.len() > 9 && cols[3] == "0A" && inodes.contains(cols[9]) {
                listening.push(format!("{table} {}", cols[1]));
            }
        }
    }
    listening
}

#[test]
fn address_alone_opens_no_read_only_port() {
    require_root();
    let d = TestDaemon::start_with(&["--address=127.0.0.1"]);
    let healthy = Healthy::start(&d);
    let mut outcomes = Vec::new();

    let probe = move || TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], READ_ONLY_PORT)));
    let answer = match &d.netns {
        Some(ns) => ns.run(probe),
        None => probe(),
    };
    assert_eq!(
        answer.as_ref().map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::ConnectionRefused),
        "the read-only port with only --address: {answer:?}"
    );
    outcomes.push(Outcome {
        kind: "read-only port probe",
        message: format!("127.0.0.1:{READ_ONLY_PORT} refused"),
    });

    // Not on another port either: the daemon listens on no TCP socket at all.
    let pid = d.daemon_pid().expect("daemon started");
    let listening = listening_sockets(pid);
    assert!(
        listening.is_empty(),
        "the daemon listens on TCP: {listening:?}"
    );
    outcomes.push(Outcome {
        kind: "daemon's TCP listeners",
        message: "none".to_string(),
    });

    // And the flag that did nothing is named.
    let log = d.daemon_log();
    let warning = log
        .lines()
        .find(|l| l.contains("--address has no effect"))
        .unwrap_or_else(|| panic!("no warning about the unused --address:\n{log}"));
    outcomes.push(Outcome {
        kind: "unused --address",
        message: warning
            .split_once("WARN")
            .map_or(warning, |(_, w)| w)
            .trim()
            .to_string(),
    });

    print_outcomes("--address alone", &outcomes);
    healthy.assert_undisturbed(&d, &["localhost/busybox:latest"]);
}

/// What the bomb's header block inflates to: 256 MiB, 1024 times the cap.
const BOMB_INFLATED: usize = 256 << 20;
/// Growth of the serving process's peak RSS past which the bomb counts as inflated: a
/// quarter of the bomb, and above what the corpus's other tests, running beside this
/// one in the same process, allocate (an 11 MiB manifest, a few times).
const MAX_PEAK_GROWTH_KIB: u64 = 64 * 1024;

/// A client's first SPDY header block: `streamtype: error` and a header whose value is
/// `value_len` bytes of `a`, deflated with SPDY's dictionary a MiB at a time.
fn header_bomb(value_len: usize) -> Vec<u8> {
    let mut zlib = Compress::new(Compression::best(), true);
    zlib.set_dictionary(&headers::dictionary()).unwrap();
    let mut block = headers::encode_block(&[("streamtype", "error"), ("x-bomb", "")]);
    block.truncate(block.len() - 4);
    block.extend_from_slice(&u32::try_from(value_len).unwrap().to_be_bytes());
    let run = vec![b'a'; 1 << 20];
    let mut out = Vec::new();
    let mut feed = |mut input: &[u8], flush: FlushCompress| {
        loop {
            out.reserve(64 * 1024);
            let before = zlib.total_in();
            zlib.compress_vec(input, &mut out, flush).unwrap();
            input = &input[usize::try_from(zlib.total_in() - before).unwrap()..];
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
    };
    feed(&block, FlushCompress::None);
    let mut left = value_len;
    while left > 0 {
        let n = left.min(run.len());
        feed(&run[..n], FlushCompress::None);
        left -= n;
    }
    feed(&[], FlushCompress::Sync);
    out
}

/// This process's peak RSS (VmHWM) in KiB.
fn own_peak_rss_kib() -> u64 {
    peak_rss_kib(i32::try_from(std::process::id()).unwrap())
}

/// Starts this process's peak RSS afresh from its current RSS (clear_refs 5).
fn reset_own_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// What the server sent on a SPDY connection after its 101, until it closed it.
#[derive(Debug, Default)]
struct SpdyAnswer {
    head: String,
    resets: Vec<(u32, u32)>,
    go_away: Option<(u32, u32)>,
    replied: Vec<u32>,
    closed: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_bomb_on_the_kubelet_apis_spdy_exec_is_a_protocol_error() {
    require_root();
    // As tests/common_spdy serves it: the daemon's own kubelet API code over a real
    // daemon's state, in this process (cluster mode's daemon needs an API server).
    let d = TestDaemon::start_on_machine_network(&[]);
    let healthy = Healthy::start(&d);
    let s = common_spdy::serve_kubelet_api(d, "healthy").await;
    let bomb = header_bomb(BOMB_INFLATED);
    assert!(
        bomb.len() < BOMB_INFLATED / 512,
        "a bomb: {} bytes for {BOMB_INFLATED}",
        bomb.len()
    );

    let tls = common_spdy::connect(s.addr, &s.pki).await;
    let (mut rd, mut wr) = tokio::io::split(tls);
    let request = format!(
        "POST /exec/{}/{}/main?command=true&output=1&error=1 HTTP/1.1\r\nHost: {}\r\n\
         Content-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
         X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n",
        s.namespace, s.pod, s.addr
    );
    wr.write_all(request.as_bytes()).await.unwrap();
    let reader = tokio::spawn(async move {
        let mut answer = SpdyAnswer::default();
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            if answer.head.is_empty()
                && let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n")
            {
                let head: Vec<u8> = buf.drain(..end + 4).collect();
                answer.head = String::from_utf8_lossy(&head).into_owned();
            }
            if !answer.head.is_empty() {
                while let Some((f, used)) = frame::parse(&buf).unwrap() {
                    match f {
                        Frame::SynReply { stream, .. } => answer.replied.push(stream),
                        Frame::RstStream { stream, status } => answer.resets.push((stream, status)),
                        Frame::GoAway {
                            last_good_stream,
                            status,
                        } => answer.go_away = Some((last_good_stream, status)),
                        _ => {}
                    }
                    buf.drain(..used);
                }
            }
            match rd.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        answer.closed = true;
        answer
    });

    reset_own_peak_rss();
    let before = own_peak_rss_kib();
    wr.write_all(&frame::syn_stream(1, false, &bomb))
        .await
        .unwrap();
    let answer = tokio::time::timeout(common_spdy::WAIT, reader)
        .await
        .map(Result::unwrap)
        .unwrap_or_default();
    let growth = own_peak_rss_kib().saturating_sub(before);
    let _ = wr.shutdown().await;

    let outcome = Outcome {
        kind: "SPDY header bomb",
        message: format!(
            "{} KiB inflating to {} MiB: resets {:?}, GOAWAY {:?}, closed {}, peak RSS +{} KiB",
            bomb.len() / 1024,
            BOMB_INFLATED >> 20,
            answer.resets,
            answer.go_away,
            answer.closed,
            growth
        ),
    };
    print_outcomes("SPDY header bombs", std::slice::from_ref(&outcome));
    assert!(
        growth < MAX_PEAK_GROWTH_KIB,
        "the bomb grew the serving process's peak RSS by {growth} KiB"
    );
    assert!(answer.head.starts_with("HTTP/1.1 101"), "{answer:?}");
    assert!(
        answer.closed,
        "the server never ended the connection: {answer:?}"
    );
    assert!(
        answer.replied.is_empty(),
        "the bomb's stream was accepted: {answer:?}"
    );
    assert_eq!(
        answer.resets,
        [(1, frame::RST_FRAME_TOO_LARGE)],
        "{answer:?}"
    );
    assert_eq!(
        answer.go_away,
        Some((0, frame::GOAWAY_PROTOCOL_ERROR)),
        "{answer:?}"
    );

    // The kubelet API still serves: kubectl's recorded exec of `cat` gets its stdin back.
    let recorded = common_spdy::load_fixture("tests/fixtures/cluster/exec-spdy.jsonl");
    let cat = recorded
        .iter()
        .find(|r| r.command().contains("cat"))
        .expect("the fixture's exec of cat");
    let target = cat.kubelet_target(&s.namespace, &s.pod, "main");
    let after = common_spdy::replay(s.addr, &s.pki, cat, &target).await;
    assert_eq!(
        after.text(&cat.stream_types(), "stdout"),
        "hello spdy\n",
        "{after:?}"
    );

    healthy.assert_undisturbed(&s.daemon, &["localhost/busybox:latest"]);
}
