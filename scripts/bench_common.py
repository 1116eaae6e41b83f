"""Helpers shared by the benchmark scripts (bench_podhost, bench_peers, bench_lifecycle,
bench_idle)."""
import http.client
import json
import socket


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
