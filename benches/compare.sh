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
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

ccusage=()
if command -v ccusage >/dev/null; then
    ccusage=(ccusage)
elif npx --no-install ccusage --version >/dev/null 2>&1; then
    ccusage=(npx --no-install ccusage)
fi

wc_l() { find "$tree" -name '*.jsonl' -print0 | xargs -0 wc -l >/dev/null; }
scan() { "$baton" scan --json "$tree/claude" "$tree/codex" >/dev/null; }
replay() { "$baton" replay "$tree/claude" "$tree/codex" >/dev/null; }
cc() { CLAUDE_CONFIG_DIR="$tree/claude" CODEX_HOME="$tree/codex" "${ccusage[@]}" session --json --offline >/dev/null; }
export -f wc_l scan replay cc
export tree baton
names=(wc_l scan replay)
[ ${#ccusage[@]} -gt 0 ] && { names+=(cc); export ccusage_cmd="${ccusage[*]}"; }

wc_l
for ((r = 1; r <= rounds; r++)); do
    for n in "${names[@]}"; do
        # wall s, user s, sys s, peak RSS KiB (of the largest process in the command)
        /usr/bin/time -f "%e %U %S %M" -a -o "$out/$n" bash -c "$n" ||
            { echo "$n failed" >&2; exit 1; }
    done
done

python3 - "$out" "${names[@]}" <<'PY'
import statistics, sys
out, names = sys.argv[1], sys.argv[2:]
rows = {}
for n in names:
    runs = [list(map(float, l.split())) for l in open(f"{out}/{n}") if l.strip()]
    rows[n] = (statistics.median(r[0] for r in runs),
               statistics.median(r[1] + r[2] for r in runs),
               statistics.median(r[3] for r in runs) / 1024,
               min(r[0] for r in runs), max(r[0] for r in runs), len(runs))
label = {"wc_l": "find … \\| xargs wc -l", "scan": "baton scan --json",
         "replay": "baton replay", "cc": "ccusage session --json --offline"}
print(f"| command | wall (median) | wall range | CPU user+sys | peak RSS | × wc -l |" + (" × ccusage |" if "cc" in rows else ""))
print("|---|---|---|---|---|---|" + ("---|" if "cc" in rows else ""))
for n in names:
    w, c, m, lo, hi, k = rows[n]
    line = (f"| {label[n]} | {w:.3f} s | {lo:.2f}–{hi:.2f} s (n={k}) | {c:.2f} s | {m:.1f} MiB "
            f"| {w / rows['wc_l'][0]:.2f}× |")
    if "cc" in rows:
        line += f" {w / rows['cc'][0]:.2f}× |"
    print(line)
PY
