#!/usr/bin/env python3
"""watch-cache-waits.py BEFORE AFTER — from two snapshots of kube-apiserver's /metrics
text, names the resources whose watch cache made a read wait longer than the cache's
3 s limit between them (apiserver_watch_cache_read_wait_seconds: the count above its
last bucket, le="3"). Such a read fails with "Too large resource version"; a watch gets
an error event and its channel closes. The first snapshot leaves out the server's start,
when every cache makes its first reads wait. Prints one line, or nothing when no read
waited that long. A missing BEFORE counts as zero."""

import re
import sys
from collections import defaultdict

LINE = re.compile(r'^apiserver_watch_cache_read_wait_seconds_(bucket|count)\{([^}]*)\} (\S+)$')


def labels(text):
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def timed_out(path):
    """Reads past the limit so far, by group/resource."""
    within, total = defaultdict(float), defaultdict(float)
    try:
        metrics = open(path, encoding="utf-8")
    except FileNotFoundError:
        return {}
    with metrics:
        for line in metrics:
            m = LINE.match(line.strip())
            if not m:
                continue
            kind, raw, value = m.groups()
            lab = labels(raw)
            key = (lab.get("group") or "core") + "/" + lab.get("resource", "?")
            if kind == "count":
                total[key] += float(value)
            elif lab.get("le") == "3":
                within[key] += float(value)
    return {k: total[k] - within[k] for k in total}


def main(before_path, after_path):
    before, after = timed_out(before_path), timed_out(after_path)
    slow = {k: int(n - before.get(k, 0)) for k, n in after.items() if n > before.get(k, 0)}
    if slow:
        named = ", ".join(f"{k} {n}" for k, n in sorted(slow.items()))
        print(f"conformance: the API server's watch cache made reads wait past 3 s (they fail): {named}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: watch-cache-waits.py BEFORE AFTER")
    main(sys.argv[1], sys.argv[2])
