#!/usr/bin/env python3
"""Two builds side by side on one tree, alternating run by run. Not a test: it prints
figures for BENCHMARKS.md.

    python3 benches/ab.py scan --tree DIR --bins OLD,NEW [--runs 40]
    python3 benches/ab.py status --tree DIR --daemon BIN --bins OLD,NEW [--runs 20]

`scan`: `baton scan --json DIR/claude DIR/codex` with each build in turn (the order
swapped every run), and `find DIR -name '*.jsonl' | xargs wc -l` after each pair; the
median wall time of each build and its ratio to wc's median. The tree is read twice
first, so every run finds it in the page cache.

`status`: one daemon (`--daemon`) on the tree (its mtimes set two days back first, as
`daemon_bench.py` does), 30 s after daemon_ready, then `status --json` and the `status`
table with each client build in turn (their output written to a file, as
`daemon_bench.py scale` does): the median wall time, and the client's own CPU time. A
client from before a change talks to the daemon as it always did (the daemon answers
what it is asked), so the clients are compared against the same daemon and the same
sessions.
"""

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_bench  # noqa: E402


def timed(cmd, **kw):
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)
    return time.monotonic() - t0


def quartiles(xs):
    s = sorted(xs)
    return s[len(s) // 4], statistics.median(s), s[3 * len(s) // 4]


def scan(a, bins):
    tree = os.path.abspath(a.tree)
    q = shlex.quote
    wc = f"find {q(tree)} -name '*.jsonl' -print0 | xargs -0 wc -l > /dev/null"
    for _ in range(2):
        timed(f"find {q(tree)} -name '*.jsonl' -print0 | xargs -0 cat > /dev/null", shell=True)
    walls = {b: [] for b in bins}
    wcs = []
    for i in range(a.runs):
        for b in bins if i % 2 == 0 else list(reversed(bins)):
            walls[b].append(timed([b, "scan", "--json", f"{tree}/claude", f"{tree}/codex"]))
        wcs.append(timed(wc, shell=True))
    w = statistics.median(wcs)
    print(f"tree={tree} runs={a.runs} wc -l median {w * 1000:.1f} ms")
    for b in bins:
        p25, m, p75 = quartiles(walls[b])
        print(f"{b}: scan median {m * 1000:.1f} ms (p25 {p25 * 1000:.1f}, p75 {p75 * 1000:.1f}), "
              f"{m / w:.3f}x wc -l")


def status(a, bins):
    tree = os.path.abspath(a.tree)
    roots = [("claude", os.path.join(tree, "claude", "projects")),
             ("codex", os.path.join(tree, "codex", "sessions"))]
    daemon_bench.backdate(tree, 2)
    daemon_bench.wc_seconds(tree)
    proc, ev, ready = daemon_bench.start(roots, [], binary=os.path.abspath(a.daemon))
    daemon_bench.read_events(ev)
    time.sleep(30)
    print(f"tree={tree} daemon={a.daemon} ready {ready:.2f}s, "
          f"RSS {daemon_bench.status(proc.pid, 'VmRSS') / 1024:.1f} MiB", flush=True)
    with tempfile.NamedTemporaryFile() as out:
        for args in (["--json"], ["--color", "never"]):
            wall = {b: [] for b in bins}
            cpu = {b: [] for b in bins}
            for i in range(a.runs):
                for b in bins if i % 2 == 0 else list(reversed(bins)):
                    out.seek(0)
                    out.truncate()
                    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t0 = time.monotonic()
                    subprocess.run([b, "status"] + args, env=proc.env, stdout=out, check=True)
                    wall[b].append(time.monotonic() - t0)
                    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu[b].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            for b in bins:
                p25, m, p75 = quartiles(wall[b])
                print(f"status {' '.join(args)}, client {b}: median {m * 1000:.0f} ms "
                      f"(p25 {p25 * 1000:.0f}, p75 {p75 * 1000:.0f}), client CPU median "
                      f"{statistics.median(cpu[b]) * 1000:.0f} ms", flush=True)
    daemon_bench.stop(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["scan", "status"])
    ap.add_argument("--tree", required=True)
    ap.add_argument("--bins", required=True, help="comma-separated builds")
    ap.add_argument("--daemon", help="status: the daemon's build")
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    bins = [os.path.abspath(b) for b in a.bins.split(",")]
    if a.what == "status" and not a.daemon:
        sys.exit("status needs --daemon")
    {"scan": scan, "status": status}[a.what](a, bins)


if __name__ == "__main__":
    main()
