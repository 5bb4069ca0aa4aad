#!/usr/bin/env bash
# Builds the Debian package (packaging/deb.py, from [package.metadata.deb] in Cargo.toml,
# with dpkg-deb) and prints its path. The unit, man pages and completions are made here from their one
# source each (the template systemd/baton.service; the clap definitions, through
# `baton man` and `baton completions`) into packaging/out/, which the deb's assets name.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${CARGO_TARGET_DIR:-target}
cargo build --locked --release --bin baton
bin="$target/release/baton"
out=packaging/out
rm -rf "$out"
mkdir -p "$out/man" "$out/completions"

# The user unit: the template, its ExecStart placeholder naming the packaged binary.
placeholder='ExecStart=%h/.cargo/bin/baton run'
if [ "$(grep -cxF "$placeholder" systemd/baton.service)" != 1 ]; then
  echo "deb.sh: systemd/baton.service must hold the line '$placeholder' once" >&2
  exit 1
fi
awk -v from="$placeholder" '$0 == from { print "ExecStart=/usr/bin/baton run"; next } { print }' \
  systemd/baton.service > "$out/baton.service"

# Man pages: the top page and every subcommand page it names (`help` has none).
"$bin" man > "$out/man/baton.1"
for sub in $("$bin" man | sed -n 's/^baton\\-\([a-z]*\)(1)$/\1/p'); do
  [ "$sub" = help ] && continue
  "$bin" man "$sub" > "$out/man/baton-$sub.1"
done
# -n: no name or time stamp inside, so the same source makes the same package.
gzip -9n "$out"/man/*.1

"$bin" completions bash > "$out/completions/baton"
"$bin" completions zsh > "$out/completions/_baton"
"$bin" completions fish > "$out/completions/baton.fish"

# deb.py strips the binary it packs: the release profile keeps line tables (for
# backtraces), 90 MB of them; the package ships the binary without (15 MB). Needs `strip`
# (binutils, which gcc brings), dpkg-deb and dpkg-shlibdeps (dpkg-dev).
python3 packaging/deb.py "$bin" "$target/debian"
