#!/usr/bin/env bash
# Side by side on one generated tree: `wc -l` (the floor: every byte read once), `baton
# scan --json`, `baton replay` and, when installed, ccusage. Runs alternate (one of each,
# ROUNDS times) so a noisy machine weighs on every command alike; prints each command's
# median wall time, CPU (user+sys) and peak RSS, and its ratio to `wc -l` and ccusage.
#
#   cargo build --release
#   python3 ../shared/tools/gen-corpus.py /tmp/gen512 --mib 512 --sessions 600 --seed 1
#   benches/compare.sh /tmp/gen512 [ROUNDS]        # ROUNDS defaults to 5
#
# BEFORE=path/to/an/older/baton adds its scan and replay as "before" rows (same rounds).
# The page cache is warmed first (one untimed `wc -l`). ccusage is looked up as
# `ccusage` on PATH, else as an already-installed `npx --no-install ccusage`; it reads
# $CLAUDE_CONFIG_DIR/projects and $CODEX_HOME, so both are pointed at the tree.
set -euo pipefail

tree=${1:?usage: benches/compare.sh TREE [ROUNDS]}
rounds=${2:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
baton=${BATON:-$repo/target/release/baton}
[ -x "$baton" ] || { echo "$baton missing: run cargo build --release" >&2; exit 1; }
tree=$(cd "$tree" && pwd)

ccusage=()
if command -v ccusage >/dev/null; then
    ccusage=(ccusage)
elif npx --no-install ccusage --version >/dev/null 2>&1; then
    ccusage=(npx --no-install ccusage)
fi

cc=""
[ ${#ccusage[@]} -gt 0 ] && cc="${ccusage[*]}"

python3 - "$tree" "$baton" "$rounds" "$cc" "${BEFORE:-}" <<'PY'
import os, shlex, statistics, subprocess, sys, time
tree, baton, rounds, cc, before = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
q = shlex.quote
cmds = {
    "wc_l": f"find {q(tree)} -name '*.jsonl' -print0 | xargs -0 wc -l",
    "scan": f"{q(baton)} scan --json {q(tree + '/claude')} {q(tree + '/codex')}",
    "replay": f"{q(baton)} replay {q(tree + '/claude')} {q(tree + '/codex')}",
}
if before:
    cmds["scan_before"] = f"{q(before)} scan --json {q(tree + '/claude')} {q(tree + '/codex')}"
    cmds["replay_before"] = f"{q(before)} replay {q(tree + '/claude')} {q(tree + '/codex')}"
if cc:
    cmds["cc"] = (f"CLAUDE_CONFIG_DIR={q(tree + '/claude')} CODEX_HOME={q(tree + '/codex')} "
                  f"{cc} session --json --offline")
label = {"wc_l": "find … \\| xargs wc -l", "scan": "baton scan --json",
         "replay": "baton replay", "cc": "ccusage session --json --offline",
         "scan_before": "baton scan --json (before)", "replay_before": "baton replay (before)"}

rss_file = f"/tmp/baton-compare-{os.getpid()}.rss"

def run(cmd):
    # Wall from perf_counter, CPU from wait4 (the shell and its children), peak RSS from
    # GNU time (wait4's would count this Python process, forked before the exec).
    t0 = time.perf_counter()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file, "sh", "-c", cmd],
                         stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        sys.exit(f"failed: {cmd}")
    rss = int(open(rss_file).read().split()[-1])
    return wall, ru.ru_utime + ru.ru_stime, rss / 1024

run(cmds["wc_l"])  # warm the page cache
res = {n: [] for n in cmds}
for _ in range(rounds):
    for n, c in cmds.items():
        res[n].append(run(c))
os.unlink(rss_file)
med = {n: [statistics.median(r[i] for r in rs) for i in range(3)] for n, rs in res.items()}
print(f"| command | wall (median of {rounds}) | wall range | CPU user+sys | peak RSS | × wc -l |"
      + (" × ccusage |" if cc else ""))
print("|---|---|---|---|---|---|" + ("---|" if cc else ""))
for n, rs in res.items():
    w, c, m = med[n]
    walls = [r[0] for r in rs]
    line = (f"| {label[n]} | {w:.3f} s | {min(walls):.3f}–{max(walls):.3f} s | {c:.2f} s "
            f"| {m:.1f} MiB | {w / med['wc_l'][0]:.2f}× |")
    if cc:
        line += f" {w / med['cc'][0]:.2f}× |"
    print(line)
PY
