#!/usr/bin/env python3
"""The idle daemon's heap by where it was allocated (heaptrack). Not a test: it prints
figures for BENCHMARKS.md.

    apt-get install heaptrack
    cargo build --release --features system-alloc    # heaptrack sees malloc, not jemalloc
    python3 benches/heap_idle.py --tree DIR [--bin target/release/baton] [--seconds 40] [--frames 2]

Starts `baton run` under heaptrack on a corpus tree (from ../shared/tools/gen-corpus.py;
every file's mtime set two days back first, as `daemon_bench.py idle` does), waits for
daemon_ready and --seconds more, then kills it with SIGKILL: what heaptrack reports as
"leaked" is then exactly what was live at that moment. Prints the total and the bytes by
the innermost --frames frames of baton's own code (`src/...:line`) under each allocation.
"""

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_bench  # noqa: E402


def size(text):
    m = re.match(r"([\d.]+)([KMG]?)", text)
    return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]


def by_site(report, frames):
    """Bytes and calls by baton's innermost frames, from heaptrack_print's leak list
    (each allocation site: `SIZE leaked over N calls from:`, then its frames)."""
    total, calls = collections.Counter(), collections.Counter()
    sites = []
    site = None
    prev = ""
    for line in report.splitlines():
        m = re.match(r"^([\d.]+[KMG]?B?) leaked over (\d+) calls from(:?)$", line)
        if m:
            site = [size(m.group(1)), int(m.group(2)), []] if m.group(3) else None
            if site:
                sites.append(site)
            continue
        if site is not None:
            f = re.match(r"^\s+at (src/\S+)", line)
            if f:
                site[2].append(f"{prev.strip()}@{f.group(1)}")
        prev = line
    for sz, n, fr in sites:
        key = " <- ".join(fr[:frames]) or "(no frame of baton's)"
        total[key] += sz
        calls[key] += n
    return total, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", required=True)
    ap.add_argument("--bin", default=os.path.join(daemon_bench.REPO, "target", "release", "baton"))
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--frames", type=int, default=2)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    tree, binary = os.path.abspath(a.tree), os.path.abspath(a.bin)
    daemon_bench.backdate(tree, 2)
    home = tempfile.mkdtemp(prefix="baton-heap-home-")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(home, "config"),
               XDG_STATE_HOME=os.path.join(home, "state"), XDG_RUNTIME_DIR=os.path.join(home, "run"),
               DBUS_SESSION_BUS_ADDRESS="unix:path=" + os.path.join(home, "no-bus"))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
    out = os.path.join(home, "heap")
    args = ["heaptrack", "-o", out, binary, "run", "--no-default-roots", "--no-desktop", "--events", "-",
            "--watch", f"claude={tree}/claude/projects", "--watch", f"codex={tree}/codex/sessions"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    t0 = time.monotonic()
    for line in proc.stdout:
        if b'"daemon_ready"' in line:
            break
    ready = time.monotonic() - t0
    time.sleep(a.seconds)
    # heaptrack's child is the daemon itself.
    pid = int(subprocess.run(["pgrep", "-n", "-f", binary + " run"], capture_output=True,
                             text=True, check=True).stdout.split()[0])
    rss = {k: daemon_bench.status(pid, k) for k in ("VmRSS", "RssAnon", "RssFile")}
    os.kill(pid, signal.SIGKILL)
    proc.wait()
    data = next(os.path.join(home, f) for f in os.listdir(home) if f.startswith("heap"))
    report = subprocess.run(["heaptrack_print", "-f", data, "-l", "1", "-p", "0", "-a", "0", "-T", "0",
                             "-s", "100000"], capture_output=True, text=True).stdout
    leaked = re.search(r"total memory leaked: (\S+)", report)
    total, calls = by_site(report, a.frames)
    print(f"tree={tree} ready_after={ready:.1f}s (under heaptrack) then {a.seconds:.0f}s; "
          f"RSS {rss['VmRSS'] / 1024:.1f} MiB (anon {rss['RssAnon'] / 1024:.1f}, file {rss['RssFile'] / 1024:.1f}; "
          f"heaptrack's own included)")
    print(f"live heap: {leaked.group(1) if leaked else '?'}")
    for key, v in total.most_common(a.top):
        print(f"{v / 1e6:8.3f} MB {calls[key]:9d} calls  {key}")
    print(f"data: {data}")


if __name__ == "__main__":
    main()
