#!/usr/bin/env bash
# CI's packaging step: builds the .deb (deb.sh), unpacks it into a scratch root with
# `dpkg -x`, and checks it as a user would meet it: the binary runs, systemd accepts the
# user unit, man renders every page. Prints the package's file list.
set -euo pipefail
cd "$(dirname "$0")/.."

deb=$(packaging/deb.sh)
echo "package: $deb"
dpkg-deb --field "$deb" Package Version Architecture Depends

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"

echo "-- the binary runs"
"$root/usr/bin/baton" --version

echo "-- systemd-analyze verify on the installed unit"
unit="$root/usr/lib/systemd/user/baton.service"
if ! grep -qx 'ExecStart=/usr/bin/baton run' "$unit"; then
  echo "$unit lacks the line 'ExecStart=/usr/bin/baton run'" >&2
  exit 1
fi
# verify checks that ExecStart's program exists, and /usr/bin/baton is in the scratch
# root, not on this machine (and `--root` does not reach ExecStart), so it verifies a
# copy naming the unpacked binary; the diff shows that is the only change.
check=$(mktemp -d)
trap 'rm -rf "$root" "$check"' EXIT
mkdir -p "$check/runtime"
sed "s|^ExecStart=/usr/bin/baton run\$|ExecStart=$root/usr/bin/baton run|" "$unit" > "$check/baton.service"
changed=$(diff "$unit" "$check/baton.service" | grep -c '^[<>]' || true)
[ "$changed" = 2 ]
said=$(XDG_RUNTIME_DIR="$check/runtime" systemd-analyze verify --user --man=no "$check/baton.service" 2>&1)
if [ -n "$said" ]; then
  echo "systemd-analyze verify: $said" >&2
  exit 1
fi
echo "ok"

echo "-- man renders every page"
pages=("$root"/usr/share/man/man1/*.1.gz)
for page in "${pages[@]}"; do
  text=$(MANPAGER=cat MANWIDTH=80 man --warnings -l "$page" 2>"$check/man.err")
  if [ -s "$check/man.err" ] || ! grep -q '^NAME' <<<"$text"; then
    echo "man -l $page:" >&2
    cat "$check/man.err" >&2
    exit 1
  fi
done
echo "${#pages[@]} pages; the first lines of baton(1):"
MANPAGER=cat MANWIDTH=80 man -l "$root/usr/share/man/man1/baton.1.gz" | head -n 8

echo "-- the package's files (dpkg -c)"
dpkg -c "$deb"
