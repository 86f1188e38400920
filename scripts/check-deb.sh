#!/usr/bin/env bash
# check-deb.sh DEB — what `make deb` made, checked before anyone installs it: its control fields
# (name, library dependencies from dpkg-shlibdeps), its files, its maintainer scripts and
# conffiles, the systemd unit through `systemd-analyze verify` (against the unpacked package,
# skipped with a note where systemd-analyze is missing), and the packaged config file read by the
# packaged delayqd (on free ports and a scratch data directory). Exit 0 when all hold.
set -euo pipefail
deb=${1:?usage: check-deb.sh DEB}
work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-deb: $*" >&2; exit 1; }

info=$(dpkg-deb --info "$deb")
grep -q '^ Package: delayq$' <<<"$info" || fail "not package delayq"
for dep in libboost-json libssl libhiredis libzstd passwd; do
  grep -q "^ Depends:.*$dep" <<<"$info" || fail "Depends lacks $dep"
done
# RocksDB is linked in, built for production (scripts/install-deps.sh), not Debian's librocksdb.
grep -q '^ Depends:.*librocksdb' <<<"$info" && fail "Depends names librocksdb: Debian's build is linked"
contents=$(dpkg-deb --contents "$deb" | awk '{print $NF}')
for f in ./usr/bin/delayqd ./usr/bin/delayq ./usr/lib/systemd/system/delayqd.service \
  ./etc/delayq/delayqd.conf ./usr/include/delayq/scheduler.h ./usr/share/doc/delayq/operations.md \
  ./usr/share/doc/delayq/grafana/delayq-dashboard.json; do
  grep -qxF "$f" <<<"$contents" || fail "missing $f"
done
grep -q '/cmake/delayq/delayqConfig.cmake$' <<<"$contents" || fail "missing the CMake package"
dpkg-deb --extract "$deb" "$work/root"
dpkg-deb --control "$deb" "$work/control"
for script in postinst prerm postrm; do
  [ -x "$work/control/$script" ] || fail "no executable $script"
  sh -n "$work/control/$script" || fail "$script is not valid sh"
done
grep -qxF /etc/delayq/delayqd.conf "$work/control/conffiles" || fail "the config is no conffile"

unit="$work/root/usr/lib/systemd/system/delayqd.service"
grep -q '^Type=notify$' "$unit" || fail "the unit is not Type=notify"
grep -q '^ExecStart=/usr/bin/delayqd --config /etc/delayq/delayqd.conf$' "$unit" ||
  fail "ExecStart is not the packaged binary with the packaged config"
if command -v systemd-analyze >/dev/null; then
  # Verified as installed, but for one thing: ExecStart names the unpacked binary, since the
  # package is not installed here (systemd-analyze checks that the command exists).
  mkdir -p "$work/units"
  sed "s|^ExecStart=/usr/bin/delayqd|ExecStart=$work/root/usr/bin/delayqd|" "$unit" \
    >"$work/units/delayqd.service"
  out=$(systemd-analyze verify "$work/units/delayqd.service" 2>&1) || fail "systemd-analyze: $out"
  [ -z "$out" ] || fail "systemd-analyze warns: $out"
  echo "check-deb: systemd-analyze verify: no warning"
else
  echo "check-deb: systemd-analyze is not installed: the unit was not verified"
fi

version=$("$work/root/usr/bin/delayqd" --version)
grep -q 'production build' <<<"$version" || fail "delayqd --version: $version (not the production RocksDB)"

# The packaged config, read by the packaged server, which refuses a key it does not know; flags
# on the command line win over it.
"$work/root/usr/bin/delayqd" --config "$work/root/etc/delayq/delayqd.conf" -p 0 \
  --http 127.0.0.1:0 -b "$work/data" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do
  grep -q 'http listening' "$work/out" && break
  kill -0 "$pid" 2>/dev/null || fail "delayqd did not start on the packaged config: $(cat "$work/err")"
  sleep 0.1
done
grep -q 'http listening' "$work/out" || fail "delayqd did not listen within 10 s"
kill "$pid"
wait "$pid" || fail "delayqd did not stop cleanly"
pid=
echo "check-deb: $(basename "$deb"): control, files, scripts, unit and config are right"
