"""Helpers shared by scripts/bench_podhost.py and scripts/bench_peers.py."""


def pct(values, p):
    """The p-th percentile (nearest rank) of values."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def rss_pss_kib(pid):
    """(RSS, PSS) of a process in KiB, from /proc/PID/smaps_rollup."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                out[key] = int(rest.split()[0])
    return out["Rss"], out["Pss"]
