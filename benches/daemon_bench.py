#!/usr/bin/env python3
"""Benchmarks for `baton run` (latency, idle CPU and memory). Not tests: they print figures for BENCHMARKS.md.

    cargo build --release
    python3 benches/daemon_bench.py latency [--watcher auto|poll] [--n 500] [--idle-tree DIR]
    python3 benches/daemon_bench.py idle --tree DIR [--seconds 60] [--after 1] [--backdate-days 2]
    python3 benches/daemon_bench.py firststart --tree DIR [--rounds 3]
    python3 benches/daemon_bench.py restart --tree DIR [--rounds 3] [--settle 10]
    python3 benches/daemon_bench.py scale --tree DIR --bins OLD,NEW [--rounds 1] [--runs 5] [--settle 30]

latency: starts the daemon with `--events -` on a pipe, then, over and over, writes a
    prompt, waits for its turn_started, pauses a little, and times from just before the
    write() of a completing Claude record (stop_reason end_turn) to the moment its
    turn_completed line can be read from the pipe. Files stay open for appending, as
    agents keep them. --idle-tree adds a corpus of idle sessions to the same root.

idle: starts the daemon on a corpus tree (from ../shared/tools/gen-corpus.py), waits
    for daemon_ready, then measures CPU time (sum of the threads' schedstat, ns) and RSS
    over --seconds, reading the event stream all along. Generated files have fresh
    mtimes; real trees do not (only the sessions in use were written lately), so by
    default mtimes are set back --backdate-days (0 sets them to now: the worst case,
    every file "recently changed").

firststart: time from starting `baton run` with no saved state (a first run) to its
    daemon_ready, against `wc -l` over the same files, alternating, warm page cache;
    prints the medians and their ratio.

scale: for each build of --bins (e.g. old,new) in turn, --rounds times: first start to
    daemon_ready against `wc -l` in the same minute, RSS --settle s after daemon_ready,
    then `baton status --json` and the `status` table, --runs each, timed from outside
    with the client's peak RSS from GNU time. The event stream is read all along.

restart: a first run on the tree, stopped after --settle seconds (its first save of
    every file's state), then --rounds restarts on the same state directory: time to
    daemon_ready, warm page cache.
"""
import argparse
import threading
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import random
import uuid
import datetime as dt

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# BATON_BIN=path runs another build (e.g. an older one, for before/after figures).
BIN = os.environ.get("BATON_BIN", os.path.join(REPO, "target", "release", "baton"))


def now_ts():
    t = dt.datetime.now(dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


class Events:
    """Reads event lines from the daemon's stdout pipe."""

    def __init__(self, proc):
        self.fd = proc.stdout.fileno()
        self.buf = b""

    def next(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no event")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise EOFError("daemon exited")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def until(self, pred, timeout=30.0):
        while True:
            e = self.next(timeout)
            if pred(e):
                return e


def start(roots, extra, home=None, binary=None):
    # No desktop notifications, and private config/state/runtime dirs (the status
    # socket stays on: it is part of the daemon as shipped). A given `home` keeps the
    # state of an earlier run there (a restart).
    args = [binary or BIN, "run", "--no-default-roots", "--no-desktop", "--events", "-"]
    for prov, d in roots:
        args += ["--watch", f"{prov}={d}"]
    fresh = home is None
    home = home or tempfile.mkdtemp(prefix="baton-bench-home-")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(home, "config"),
               XDG_STATE_HOME=os.path.join(home, "state"), XDG_RUNTIME_DIR=os.path.join(home, "run"),
               DBUS_SESSION_BUS_ADDRESS="unix:path=" + os.path.join(home, "no-bus"))
    if fresh:
        os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
    # BENCH_STDERR=FILE keeps the daemon's stderr (e.g. jemalloc's statistics at exit,
    # with _RJEM_MALLOC_CONF=stats_print:true).
    err = open(os.environ["BENCH_STDERR"], "ab") if os.environ.get("BENCH_STDERR") else subprocess.DEVNULL
    proc = subprocess.Popen(args + extra, stdout=subprocess.PIPE, stderr=err, env=env)
    ev = Events(proc)
    t0 = time.monotonic()
    ev.until(lambda e: e["event"] == "daemon_ready", timeout=600)
    proc.home = home
    proc.env = env
    return proc, ev, time.monotonic() - t0


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def pct(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def idle_copy(src, dst):
    """The idle sessions for the latency bench, which only reads them: hard links when the
    tree is on the same filesystem (seconds instead of minutes for 10,000 sessions on a
    busy disk), a copy otherwise."""
    try:
        shutil.copytree(src, dst, copy_function=os.link)
    except (OSError, shutil.Error):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)


def latency(a):
    tmp = tempfile.mkdtemp(prefix="baton-lat-")
    root = os.path.join(tmp, "claude")
    proj = os.path.join(root, "proj")
    os.makedirs(proj)
    if a.idle_tree:
        idle_copy(os.path.join(a.idle_tree, "claude", "projects"), os.path.join(root, "idle"))
    extra = ["--watcher", a.watcher]
    if a.poll_interval:
        extra += ["--poll-interval", a.poll_interval]
    proc, ev, ready = start([("claude", root)], extra)
    sessions = []
    for _ in range(a.sessions):
        sid = str(uuid.uuid4())
        fd = os.open(os.path.join(proj, sid + ".jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sessions.append((sid, fd))
    # --settle: probe a settled daemon, after the first save of every file's state and
    # the merges that follow it (10-15 s at 10,000 sessions), reading the stream meanwhile.
    settled = time.monotonic() + a.settle
    while time.monotonic() < settled:
        try:
            ev.next(timeout=max(0.01, settled - time.monotonic()))
        except TimeoutError:
            pass
    lat = []
    # The daemon's CPU over the probes: steadier than the times, which move with how
    # fast this virtual machine wakes an idle CPU.
    c0 = cpu_ns(proc.pid)
    try:
        for i in range(a.n):
            sid, fd = sessions[i % len(sessions)]
            turn = str(uuid.uuid4())
            prompt = {"type": "user", "uuid": turn, "sessionId": sid, "timestamp": now_ts(),
                      "message": {"role": "user", "content": f"prompt {i}"}}
            os.write(fd, (json.dumps(prompt) + "\n").encode())
            ev.until(lambda e: e["event"] == "turn_started" and e["turn"] == turn)
            # Let the daemon go idle (and, with polling, land anywhere in its interval).
            time.sleep(random.uniform(0, a.pause))
            answer = {"type": "assistant", "uuid": str(uuid.uuid4()), "sessionId": sid, "timestamp": now_ts(),
                      "message": {"role": "assistant", "model": "bench",
                                  "content": [{"type": "text", "text": f"answer {i}"}], "stop_reason": "end_turn"}}
            line = (json.dumps(answer) + "\n").encode()
            t0 = time.perf_counter()
            os.write(fd, line)
            ev.until(lambda e: e["event"] == "turn_completed" and e["turn"] == turn)
            lat.append((time.perf_counter() - t0) * 1000)
        c1 = cpu_ns(proc.pid)
    finally:
        stop(proc)
        for _, fd in sessions:
            os.close(fd)
        shutil.rmtree(tmp)
    print(f"watcher={a.watcher} poll_interval={a.poll_interval or '2s'} n={len(lat)} "
          f"idle_tree={a.idle_tree or '-'} ready_after={ready:.2f}s settle={a.settle:g}s")
    print(f"latency ms: p50={statistics.median(lat):.3f} p90={pct(lat, 90):.3f} "
          f"p99={pct(lat, 99):.3f} max={max(lat):.3f} min={min(lat):.3f}")
    print(f"daemon CPU per probe (two appends, two events): {(c1 - c0) / 1e3 / len(lat):.1f} us")


def cpu_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])  # kB
    return 0


def count_files(tree):
    n = 0
    for _, _, files in os.walk(tree):
        n += sum(1 for f in files if f.endswith(".jsonl"))
    return n


def read_events(ev):
    """Reads the event stream from now on, as a dashboard would, on a thread of its own;
    returns the counts by kind, kept up to date. Left unread, the pipe fills (64 KiB) and
    the daemon holds what it could not write yet: the liveness sweep's turn_interrupted
    events, about 2.5 minutes after the start on a generated tree, then showed as a step
    of 2-3 MiB that was the bench's, not the daemon's."""
    counts = {}

    def drain():
        while True:
            try:
                e = ev.next(timeout=3600)
            except TimeoutError:
                continue
            except (EOFError, ValueError, OSError):
                return
            counts[e["event"]] = counts.get(e["event"], 0) + 1

    threading.Thread(target=drain, daemon=True).start()
    return counts


def idle(a):
    tree = os.path.abspath(a.tree)
    if a.backdate_days >= 0:
        t = time.time() - a.backdate_days * 86400
        for d, _, files in os.walk(tree):
            for f in files:
                os.utime(os.path.join(d, f), (t, t))
    roots = [("claude", os.path.join(tree, "claude", "projects")), ("codex", os.path.join(tree, "codex", "sessions"))]
    proc, ev, ready = start(roots, [])
    pid = proc.pid
    counts = read_events(ev)
    # Let the history read's last allocations settle; --after also skips the first
    # save of every file's state, which a first run makes right after daemon_ready.
    time.sleep(max(1.0, a.after))
    c0, t0 = cpu_ns(pid), time.monotonic()
    rss_max = 0
    while time.monotonic() - t0 < a.seconds:
        time.sleep(1)
        rss_max = max(rss_max, status(pid, "VmRSS"))
        if a.sample_every and int(time.monotonic() - t0) % a.sample_every == 0:
            # A curve, for "flat over an hour": one line per sample, seconds since the
            # measuring began.
            print(f"sample t={time.monotonic() - t0:.0f}s rss={status(pid, 'VmRSS') / 1024:.1f} MiB "
                  f"anon={status(pid, 'RssAnon') / 1024:.1f} MiB cpu={(cpu_ns(pid) - c0) / 1e9:.3f} cpu-s",
                  flush=True)
    c1, t1 = cpu_ns(pid), time.monotonic()
    hwm = status(pid, "VmHWM")
    rss = status(pid, "VmRSS")
    anon, file = status(pid, "RssAnon"), status(pid, "RssFile")
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    stop(proc)
    print(f"tree={tree} files={count_files(tree)} backdated={a.backdate_days}d history_read={ready:.1f}s")
    print(f"idle {t1 - t0:.0f}s: cpu={(c1 - c0) / 1e9:.4f} cpu-s  rss_end={rss / 1024:.1f} MiB "
          f"rss_max_idle={rss_max / 1024:.1f} MiB  peak(VmHWM, incl. history read)={hwm / 1024:.1f} MiB  fds={fds}")
    print(f"at end: RssAnon={anon / 1024:.1f} MiB (heap, stacks) RssFile={file / 1024:.1f} MiB (code pages)")
    print(f"events read while idle and after: {dict(sorted(counts.items()))}")


def wc_seconds(tree):
    t0 = time.monotonic()
    subprocess.run(f"find '{tree}' -name '*.jsonl' -print0 | xargs -0 wc -l > /dev/null",
                   shell=True, check=True)
    return time.monotonic() - t0


def firststart(a):
    tree = os.path.abspath(a.tree)
    roots = [("claude", os.path.join(tree, "claude", "projects")), ("codex", os.path.join(tree, "codex", "sessions"))]
    wc_seconds(tree)  # warm the page cache
    wcs, readys = [], []
    for _ in range(a.rounds):
        wcs.append(wc_seconds(tree))
        # start() gives every run fresh private state: each one is a first run.
        proc, _, ready = start(roots, [])
        stop(proc)
        readys.append(ready)
    w, r = statistics.median(wcs), statistics.median(readys)
    print(f"tree={tree} files={count_files(tree)} rounds={a.rounds}")
    print(f"first start to daemon_ready: median={r:.2f}s (min {min(readys):.2f}, max {max(readys):.2f}); "
          f"wc -l: median={w:.2f}s; ratio={r / w:.2f}x wc -l")


def restart(a):
    tree = os.path.abspath(a.tree)
    roots = [("claude", os.path.join(tree, "claude", "projects")), ("codex", os.path.join(tree, "codex", "sessions"))]
    wc_seconds(tree)  # warm the page cache
    proc, _, first = start(roots, [])
    # Let the first run save every file's state before it stops.
    time.sleep(a.settle)
    stop(proc)
    home = proc.home
    readys = []
    for _ in range(a.rounds):
        proc, _, ready = start(roots, [], home)
        stop(proc)
        readys.append(ready)
    print(f"tree={tree} files={count_files(tree)} rounds={a.rounds} first_run={first:.2f}s")
    print(f"restart to daemon_ready (page cache warm): median={statistics.median(readys):.2f}s "
          f"(min {min(readys):.2f}, max {max(readys):.2f})")


def backdate(tree, days):
    t = time.time() - days * 86400
    for d, _, files in os.walk(tree):
        for f in files:
            os.utime(os.path.join(d, f), (t, t))


def client(binary, env, args):
    """Runs `baton status ARGS` against the daemon of `env`: wall seconds (from outside),
    peak RSS in KiB (GNU time's "Maximum resident set size") and lines printed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        subprocess.run(["/usr/bin/time", "-v", binary, "status"] + args, stdout=out, stderr=err,
                       env=env, check=True)
        wall = time.perf_counter() - t0
        out.seek(0)
        lines = sum(1 for _ in out)
        err.seek(0)
        rss = 0
        for line in err.read().decode(errors="replace").splitlines():
            if "Maximum resident set size" in line:
                rss = int(line.split(":")[1])
    return wall, rss, lines


def scale(a):
    """The scale figures of one tree for each build in turn, old then new (or the
    given order), --rounds times: first start to daemon_ready against `wc -l` in the
    same minute, RSS --settle seconds after daemon_ready, then `status --json` and the
    `status` table (--runs each: wall, the client's peak RSS); the event stream is read
    all along."""
    tree = os.path.abspath(a.tree)
    roots = [("claude", os.path.join(tree, "claude", "projects")), ("codex", os.path.join(tree, "codex", "sessions"))]
    builds = [os.path.abspath(b) for b in a.bins.split(",")]
    if a.backdate_days >= 0:
        backdate(tree, a.backdate_days)
    wc_seconds(tree)  # warm the page cache
    print(f"tree={tree} files={count_files(tree)} rounds={a.rounds} builds={builds}", flush=True)
    for r in range(a.rounds):
        for b in builds:
            wc = wc_seconds(tree)
            proc, ev, ready = start(roots, [], binary=b)
            read_events(ev)
            time.sleep(a.settle)
            rss = status(proc.pid, "VmRSS")
            hwm = status(proc.pid, "VmHWM")
            js = [client(b, proc.env, ["--json"]) for _ in range(a.runs)]
            tb = [client(b, proc.env, ["--color", "never"]) for _ in range(a.runs)]
            rss_after = status(proc.pid, "VmRSS")
            stop(proc)
            shutil.rmtree(proc.home, ignore_errors=True)

            def med(xs, i):
                return statistics.median(x[i] for x in xs)

            print(f"round {r + 1} {b}: first start {ready:.2f}s, wc -l {wc:.2f}s, {ready / wc:.2f}x; "
                  f"RSS {a.settle:.0f}s after ready {rss / 1024:.1f} MiB (peak {hwm / 1024:.1f}, "
                  f"after the status runs {rss_after / 1024:.1f}); "
                  f"status --json median {med(js, 0) * 1000:.0f} ms "
                  f"(min {min(x[0] for x in js) * 1000:.0f}, max {max(x[0] for x in js) * 1000:.0f}), "
                  f"client peak {max(x[1] for x in js) / 1024:.1f} MiB, {js[0][2]} lines; "
                  f"status table median {med(tb, 0) * 1000:.0f} ms, client peak "
                  f"{max(x[1] for x in tb) / 1024:.1f} MiB, {tb[0][2]} lines", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    la = sub.add_parser("latency")
    la.add_argument("--watcher", default="auto", choices=["auto", "native", "poll"])
    la.add_argument("--poll-interval", default=None)
    la.add_argument("--n", type=int, default=500)
    la.add_argument("--sessions", type=int, default=10)
    la.add_argument("--pause", type=float, default=0.02, help="up to this many seconds (uniform) between turn_started and the completion")
    la.add_argument("--idle-tree", default=None)
    la.add_argument("--settle", type=float, default=0,
                    help="seconds between daemon_ready and the first probe")
    ia = sub.add_parser("idle")
    ia.add_argument("--tree", required=True)
    ia.add_argument("--seconds", type=float, default=60)
    ia.add_argument("--after", type=float, default=1,
                    help="start measuring this many seconds after daemon_ready")
    ia.add_argument("--backdate-days", type=float, default=2,
                    help="set every file's mtime this many days back (0: now; -1: leave as is)")
    ia.add_argument("--sample-every", type=int, default=0,
                    help="also print the RSS every this many seconds (0: only at the end)")
    fa = sub.add_parser("firststart")
    fa.add_argument("--tree", required=True)
    fa.add_argument("--rounds", type=int, default=3)
    ra = sub.add_parser("restart")
    ra.add_argument("--tree", required=True)
    ra.add_argument("--rounds", type=int, default=3)
    ra.add_argument("--settle", type=float, default=10,
                    help="seconds the first run keeps going before it stops (its first save)")
    sa = sub.add_parser("scale")
    sa.add_argument("--tree", required=True)
    sa.add_argument("--bins", default=BIN, help="comma-separated builds, run in this order each round")
    sa.add_argument("--rounds", type=int, default=1)
    sa.add_argument("--runs", type=int, default=5, help="status clients of each kind per round")
    sa.add_argument("--settle", type=float, default=30, help="seconds after daemon_ready the RSS is read")
    sa.add_argument("--backdate-days", type=float, default=2,
                    help="set every file's mtime this many days back first (-1: leave as is)")
    a = ap.parse_args()
    if not os.path.exists(BIN):
        sys.exit(f"{BIN} missing: run `cargo build --release` first")
    {"latency": latency, "idle": idle, "firststart": firststart, "restart": restart,
     "scale": scale}[a.cmd](a)


if __name__ == "__main__":
    main()
