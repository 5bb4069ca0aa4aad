#!/usr/bin/env bash
# Fuzzes the line reader and each projector with cargo-fuzz (needs a nightly toolchain
# and `cargo install cargo-fuzz`), one target at a time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Defaults: 600 s per target, every target. Crashes land in fuzz/artifacts/<target>/;
# reproduce one with `cargo +nightly fuzz run <target> <file>`. The corpus grows in
# fuzz/corpus/<target>/ and is seeded from tests' own transcripts on the first run.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-600}
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(line_reader claude codex norma sgme)
fi
jobs=${FUZZ_JOBS:-1}

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz on a nightly toolchain is needed: rustup toolchain install nightly && cargo install cargo-fuzz" >&2
  exit 2
fi

seed() {
  # A few real-shaped lines per provider, so the fuzzer starts inside the format.
  local t=$1 dir=fuzz/corpus/$1
  mkdir -p "$dir"
  [ -n "$(ls -A "$dir" 2>/dev/null)" ] && return 0
  local src=()
  case $t in
    claude) src=(../shared/corpus/claude) ;;
    codex) src=(../shared/corpus/codex) ;;
    norma) src=(tests/fixtures/norma) ;;
    sgme) src=(tests/fixtures/sgme) ;;
    line_reader) src=(tests/fixtures) ;;
  esac
  local n=0
  for d in "${src[@]}"; do
    [ -d "$d" ] || continue
    while IFS= read -r f; do
      # The first byte steers chunking and the line limit; the rest is the file's head.
      { printf '\x40'; head -c 8192 "$f"; } >"$dir/seed-$n"
      n=$((n + 1))
      [ "$n" -ge 32 ] && break
    done < <(find "$d" -type f | sort)
  done
  return 0
}

status=0
for t in "${targets[@]}"; do
  seed "$t"
  echo "== fuzz $t for ${secs}s"
  # One process by default (= -jobs=1): the machine is shared. FUZZ_JOBS=N runs N.
  par=()
  if [ "$jobs" -gt 1 ]; then par=(-jobs="$jobs" -workers="$jobs"); fi
  if ! cargo +nightly fuzz run "$t" -O -- -max_total_time="$secs" "${par[@]}" \
      -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1; then
    echo "!! $t: crash; see fuzz/artifacts/$t/" >&2
    status=1
  fi
done
exit "$status"
