#!/usr/bin/env bash
# Soak: the model-based property test (tests/model.rs) with many cases. Each case is a
# random sequence of writer actions and faults against one transcript; every turn
# event must equal the oracle's, so a passing run has 0 lost, 0 duplicate and 0
# spurious events. Prints cases, actions, faults injected and completions owed.
#
#   scripts/soak.sh [CASES]            (default 10000)
#   SOAK_RELEASE=1 scripts/soak.sh     (optimized build: faster cases, slower build)
#
# A failure is minimized and saved in proptest-regressions/model.txt: commit it.
set -euo pipefail
cd "$(dirname "$0")/.."

cases=${1:-10000}
profile=()
if [ "${SOAK_RELEASE:-0}" = 1 ]; then profile=(--release); fi

start=$(date +%s)
log=$(mktemp)
set +e
BATON_MODEL_CASES="$cases" cargo test "${profile[@]}" --test integration \
  model::tailer_matches_the_oracle_under_random_faults -- --nocapture >"$log" 2>&1
status=$?
set -e
grep -E '^model:|test result|panicked|minimal failing|Test failed' "$log" || cat "$log"
rm -f "$log"
echo "soak: ${cases} cases in $(($(date +%s) - start)) s, exit ${status}"
exit "$status"
