"""Helpers shared by the benchmark scripts (bench_podhost, bench_peers, bench_lifecycle,
bench_idle)."""
import http.client
import json
import socket
import threading
import time


class UnixConnection(http.client.HTTPConnection):
    """HTTP over podhost's unix API socket."""

    def __init__(self, path):
        super().__init__("podhost")
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)


def api_pods(sock):
    """The daemon's pods by name, from GET /pods on its socket."""
    c = UnixConnection(sock)
    c.request("GET", "/pods")
    body = c.getresponse().read()
    c.close()
    return {p["metadata"]["name"]: p for p in json.loads(body)["items"]}


def pct(values, p):
    """The p-th percentile (nearest rank) of values."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def smaps_kib(pid, keys=("Rss", "Pss")):
    """The fields `keys` of /proc/PID/smaps_rollup, in KiB, by name."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in keys:
                out[key] = int(rest.split()[0])
    return out


def rss_pss_kib(pid):
    """(RSS, PSS) of a process in KiB."""
    out = smaps_kib(pid)
    return out["Rss"], out["Pss"]


class PodWatch:
    """The daemon's pods as its watch reports them (GET /pods?watch=true on the unix
    socket): a thread reads the events as they come. wait(pred) blocks until pred over
    {name: pod} returns something other than None and returns (the arrival time of the
    newest event then, what pred returned). Nothing is polled: a poll of /pods every
    2 ms with 100 pods took about a core between the daemon and the poller."""

    def __init__(self, sock):
        self.pods = {}
        self.arrived = time.time()
        self.cond = threading.Condition()
        self.ended = False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock)
        self.sock.sendall(b"GET /pods?watch=true HTTP/1.1\r\nHost: podhost\r\n\r\n")
        self.f = self.sock.makefile("rb")
        status = self.f.readline()
        if b" 200 " not in status:
            raise SystemExit("bench: the watch was refused: %r" % status)
        headers = b""
        while (line := self.f.readline()) not in (b"\r\n", b""):
            headers += line.lower()
        self.chunked = b"transfer-encoding: chunked" in headers
        threading.Thread(target=self._read, daemon=True).start()

    def _chunks(self):
        if not self.chunked:
            while data := self.f.read1(65536):
                yield data
            return
        while True:
            size = int(self.f.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return
            data = self.f.read(size)
            self.f.readline()
            yield data

    def _read(self):
        buf = b""
        try:
            for data in self._chunks():
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    event = json.loads(line)
                    pod = event["object"]
                    now = time.time()
                    with self.cond:
                        if event["type"] == "DELETED":
                            self.pods.pop(pod["metadata"]["name"], None)
                        else:
                            self.pods[pod["metadata"]["name"]] = pod
                        self.arrived = now
                        self.cond.notify_all()
        except (OSError, ValueError):
            pass
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def wait(self, pred, timeout=120):
        end = time.time() + timeout
        with self.cond:
            while True:
                got = pred(self.pods)
                if got is not None:
                    return self.arrived, got
                left = end - time.time()
                if left <= 0 or self.ended:
                    raise SystemExit("bench: timed out waiting for the daemon's watch")
                self.cond.wait(left)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
