#!/usr/bin/env python3
"""Where append -> event time goes, hop by hop, from a scheduler trace of the latency bench.

Not a test: it prints figures for BENCHMARKS.md. Record the latency bench with the
scheduler and syscall tracepoints, then read the trace:

    perf record -q -a -o /tmp/lat.data -e sched:sched_waking,sched:sched_switch \
        -e syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_futex \
        -- python3 benches/daemon_bench.py latency --n 60 --idle-tree TREE
    perf script -i /tmp/lat.data -F comm,tid,cpu,time,event,trace > /tmp/lat.txt
    python3 benches/latency_hops.py /tmp/lat.txt

(Before issue 34 item 2 the event line went through the tokio runtime and its blocking
pool, with hops `runtime` and `deliver`; the core now hands each batch straight to the
event writer's thread, `baton-events`.)

For each probe (the bench's write of an answer line, the only write of more than 250
bytes to a transcript), it finds the next of each of these, in order, and prints each
gap's median and 90th percentile:

    append    the bench's write(2) of the answer line
    watcher   notify's thread reads the inotify descriptor (the kernel woke it)
    core      baton-core's first read(2) of the transcript (the hint crossed, stat done)
    handoff   baton-core wakes baton-events (line read, projected, reduced, the sinks
              and the socket fed, the batch on the writer's queue)
    stdout    baton-events writes the event line to stdout (after the journal line)
    reader    the bench's read(2) of the event stream
"""
import re
import statistics
import sys

LINE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$")
ORDER = ["append", "watcher", "core", "handoff", "stdout", "reader"]


def classify(comm, ev, rest):
    fd = re.search(r"fd: (0x[0-9a-f]+)", rest)
    fd = int(fd.group(1), 16) if fd else None
    count = re.search(r"count: (0x[0-9a-f]+)", rest)
    count = int(count.group(1), 16) if count else 0
    if comm == "python3" and ev == "syscalls:sys_enter_write" and fd and fd > 4 and count > 250:
        return "append"
    if (comm.startswith("notify-rs") or comm == "baton-inotify") and ev == "syscalls:sys_enter_read":
        return "watcher"
    if comm == "baton-core" and ev == "syscalls:sys_enter_read" and count == 0x10000:
        return "core"
    if comm == "baton-core" and ev == "sched:sched_waking" and "comm=baton-events" in rest:
        return "handoff"
    if comm == "baton-events" and ev == "syscalls:sys_enter_write" and fd == 1:
        return "stdout"
    if comm == "python3" and ev == "syscalls:sys_enter_read" and fd == 3:
        return "reader"
    return None


def main():
    gaps = {f"{a} -> {b}": [] for a, b in zip(ORDER, ORDER[1:])}
    total, cur = [], None
    for raw in open(sys.argv[1], errors="replace"):
        m = LINE.match(raw)
        if not m:
            continue
        comm, _tid, _cpu, t, ev, rest = m.groups()
        kind = classify(comm, ev, rest)
        if kind == "append":
            cur = {"append": float(t)}
        elif kind and cur is not None and kind not in cur:
            prev = ORDER[ORDER.index(kind) - 1]
            if prev in cur:
                cur[kind] = float(t)
            if kind == "reader" and len(cur) == len(ORDER):
                for a, b in zip(ORDER, ORDER[1:]):
                    gaps[f"{a} -> {b}"].append((cur[b] - cur[a]) * 1e6)
                total.append((cur["reader"] - cur["append"]) * 1e6)
                cur = None
    if not total:
        sys.exit("no complete probe found (were the bench and baton's threads traced?)")
    print(f"{len(total)} probes with every hop seen")
    for name, xs in list(gaps.items()) + [("append -> reader (all)", total)]:
        xs.sort()
        print(f"{name:24} p50 {statistics.median(xs):6.0f} us   p90 {xs[int(0.9 * (len(xs) - 1))]:6.0f} us")


if __name__ == "__main__":
    main()
