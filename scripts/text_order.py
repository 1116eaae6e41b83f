#!/usr/bin/env python3
"""The functions a binary runs, for lld's --symbol-ordering-file (scripts/text-order.sh).

usage:
  text_order.py callgrind CALLGRIND_OUT BINARY
      the functions of BINARY that ran under `valgrind --tool=callgrind --demangle=no`,
      the most instructions first
  text_order.py faults PERF_DATA BINARY ORDER_FILE
      the functions of BINARY, not in ORDER_FILE, where a process mapping BINARY took a
      page fault (`perf record -e exceptions:page_fault_user`), in the order of the faults
  text_order.py report BINARY ORDER_FILE
      how many of ORDER_FILE's functions BINARY has, and the span of text they fill
  text_order.py remap BINARY ORDER_FILE
      ORDER_FILE's functions, each one BINARY lacks replaced by BINARY's functions of the
      same demangled name once crate paths are read the same way: `podhost::<module>::`
      of the single crate and `podhost_<module>::` of the workspace's crates (the hash
      dropped). For a list made before code moved between crates: the fault passes of
      scripts/text-order.sh then add what it misses (with `--remap`, in place of the
      callgrind pass)

Why: the kernel maps a file's text 64 KiB around each fault ("fault-around"), so the
text a long-lived process keeps in its RSS is every 64 KiB window where any function it
ever ran lies. Listed first, the functions that run sit together at the start of .text.
Valgrind's CPU is not the host's (no SHA extensions, another cpuid) and it reaps
children its own way, so a second pass on the real CPU (faults) adds what only ran there.
"""
import bisect
import re
import subprocess
import sys


def text_symbols(binary):
    """(start, size, name) of every function in BINARY, by address."""
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True,
                         text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT":
            syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    syms.sort()
    return syms


def read_order(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def callgrind(out_file, binary):
    """Self cost (instructions) of each function of `binary`, from a callgrind file with
    name compression ("fn=(12) name" once, then "fn=(12)")."""
    names = {"fn": {}, "ob": {}}

    def decode(kind, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1))

    cost, ob, fn, skip_call_cost = {}, None, None, False
    with open(out_file) as f:
        for line in f:
            line = line.rstrip("\n")
            if skip_call_cost:  # the line after calls= is the callee's inclusive cost
                skip_call_cost = False
                continue
            if not line:
                continue
            if line[0].isdigit() or line[0] in "+-*":
                if fn is not None:
                    parts = line.split()
                    if len(parts) > 1:
                        cost[fn] += int(parts[1])
            elif line.startswith("ob="):
                ob = decode("ob", line[3:])
            elif line.startswith("cob="):
                decode("ob", line[4:])
            elif line.startswith("fn="):
                name = decode("fn", line[3:])
                fn = name if ob == binary else None
                if fn is not None:
                    cost.setdefault(fn, 0)
            elif line.startswith("cfn="):
                decode("fn", line[4:])
            elif line.startswith("calls="):
                skip_call_cost = True
    seen = set()
    for name, _ in sorted(cost.items(), key=lambda kv: -kv[1]):
        name = re.sub(r"'\d+$", "", name)  # callgrind's recursion-level suffix
        if name.startswith("_") and name not in seen:
            seen.add(name)
            print(name)


def load_segments(binary):
    """(file offset, vaddr, size) of each executable LOAD segment."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True,
                         check=True).stdout
    segs = []
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "LOAD" and "E" in parts[-2]:
            segs.append((int(parts[1], 16), int(parts[2], 16), int(parts[5], 16)))
    return segs


def faults(perf_data, binary, order_file):
    syms = text_symbols(binary)
    starts = [s[0] for s in syms]
    (seg_off, seg_vaddr, _), = load_segments(binary)
    listed = set(read_order(order_file))
    out = subprocess.run(["perf", "script", "-i", perf_data, "--show-mmap-events",
                          "--show-task-events", "-F", "pid,trace"], capture_output=True, text=True, check=True).stdout
    mmap = re.compile(r"PERF_RECORD_MMAP2 (\d+)/\d+: \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ "
                      r"0x([0-9a-f]+) .*\]: r-xp (\S+)")
    execed = re.compile(r"PERF_RECORD_COMM exec: .*:(\d+)/")
    fault = re.compile(r"^\s*(\d+)\s+address=0x([0-9a-f]+) ")
    text_of = {}  # pid -> (start, end, vaddr of start)
    new, seen = [], set()
    for line in out.splitlines():
        m = mmap.search(line)
        if m:
            pid, start, size, pgoff, path = m.groups()
            if path == binary:
                start, size, pgoff = int(start, 16), int(size, 16), int(pgoff, 16)
                text_of[pid] = (start, start + size, pgoff - seg_off + seg_vaddr)
            continue
        m = execed.search(line)
        if m:
            text_of.pop(m.group(1), None)  # the process runs another program now
            continue
        m = fault.match(line)
        if not m or m.group(1) not in text_of:
            continue
        start, end, vaddr = text_of[m.group(1)]
        address = int(m.group(2), 16)
        if not start <= address < end:
            continue
        v = address - start + vaddr
        i = bisect.bisect_right(starts, v) - 1
        if i >= 0 and syms[i][0] <= v < syms[i][0] + max(syms[i][1], 1):
            name = syms[i][2]
            if name not in listed and name not in seen:
                seen.add(name)
                new.append(name)
    for name in new:
        print(name)


def report(binary, order_file):
    syms = text_symbols(binary)
    total = sum(s for _, s, _ in syms)
    where = {n: (a, s) for a, s, n in syms}
    order = read_order(order_file)
    found = [where[n] for n in order if n in where]
    if not found:
        print("%s: none of the %d functions of %s" % (binary, len(order), order_file))
        return
    lo = min(a for a, _ in found)
    hi = max(a + s for a, s in found)
    print("%s: %d of %d listed functions found; they fill %.2f MiB of text at its start "
          "(%.1f MiB in all)" % (binary, len(found), len(order), (hi - lo) / 2**20,
                                 total / 2**20))


# The workspace crates whose modules were top-level modules of the single crate, read
# back to those modules' paths (`podhost_daemon::worker::` is the old `podhost::worker::`).
CRATE_PATHS = [
    (re.compile(r"\bpodhost_model_core::"), "model::"),
    (re.compile(r"\bpodhost_daemon::"), ""),
    (re.compile(r"\bpodhost_source::configdir::"), "configdir::"),
    (re.compile(r"\bpodhost_([a-z_]+)::"), r"\1::"),
    (re.compile(r"\bpodhost::"), ""),
]
HASH = re.compile(r"::h[0-9a-f]{16}$")
# A demangled name without its hash is shared by every instance of a generic function:
# more candidates than this and the name is left to the fault passes, instead of
# putting instances that never run among those that do.
MAX_CANDIDATES = 4


def demangled(names):
    """`names` demangled by c++filt (Rust legacy and v0 names too), in order."""
    out = subprocess.run(["c++filt"], input="\n".join(names) + "\n", capture_output=True,
                         text=True, check=True).stdout
    return out.splitlines()


def path_key(name):
    key = HASH.sub("", name)
    for pattern, repl in CRATE_PATHS:
        key = pattern.sub(repl, key)
    return key


def remap(binary, order_file):
    have = [n for _, _, n in text_symbols(binary)]
    present = set(have)
    by_key = {}
    for mangled, plain in zip(have, demangled(have)):
        by_key.setdefault(path_key(plain), []).append(mangled)
    order = read_order(order_file)
    kept = moved = lost = 0
    seen = set()
    for mangled, plain in zip(order, demangled(order)):
        if mangled in present:
            names = [mangled]
            kept += 1
        else:
            names = by_key.get(path_key(plain), [])
            if len(names) > MAX_CANDIDATES:
                names = []
            if names:
                moved += 1
            else:
                lost += 1
        for n in names:
            if n not in seen:
                seen.add(n)
                print(n)
    print("remap: %d kept, %d found under their new crate, %d not found or generic" % (kept, moved, lost),
          file=sys.stderr)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "callgrind":
        callgrind(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "faults":
        faults(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "remap":
        remap(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
