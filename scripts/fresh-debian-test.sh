#!/usr/bin/env bash
# fresh-debian-test.sh [DIR] — the README's promise, tried for real: builds a fresh Debian 12
# root with debootstrap (minbase, plus only make and git), as bare as a minimal image (no
# /etc/hosts: "localhost" does not resolve), clones this checkout into it, and runs the README's
# two commands there: `make run` first, then `make test` (which runs the README's tour too), each
# installing what it needs itself; then builds the Debian package, installs it with apt and runs
# the installed server. Prints how long each step took, and the packages and megabytes each of
# the two commands downloaded. Needs root and Debian's mirrors; leaves DIR behind for a look
# (default: build/fresh-debian; removed first). Usage: sudo scripts/fresh-debian-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(realpath -m "${1:-build/fresh-debian}")
[ "$(id -u)" -eq 0 ] || { echo "fresh-debian-test: run as root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap

mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
step() { echo "== $1 ($(date -u +%H:%M:%S))"; }

for m in proc sys dev/pts dev; do
  if mountpoint -q "$root/$m" 2>/dev/null; then umount -l "$root/$m"; fi
done
rm -rf "$root"
start=$SECONDS
step "debootstrap bookworm (minbase + make, git) into $root"
debootstrap --variant=minbase --include=make,git,ca-certificates bookworm "$root" \
  http://deb.debian.org/debian >/dev/null
echo "   $((SECONDS - start)) s"

step "clone the checkout"
git clone -q "$(pwd)" "$root/root/delayq"
# The design documents sit beside the checkout, as they do for CI.
[ -d ../shared ] && cp -r ../shared "$root/root/shared"
# The machine's network, not the project's setup: its resolver and any CA it adds (a proxy's).
# No hosts file: debootstrap writes none, and neither do some minimal images.
cp /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
fi
for m in proc sys dev dev/pts; do
  mount --bind "/$m" "$root/$m"
  mounted+=("$root/$m")
done

# What a command installed: packages, and megabytes downloaded (apt keeps what it fetched).
installed() {
  echo "$(chroot "$root" dpkg-query -W -f '${Status}\n' | grep -c 'install ok installed') packages," \
    "$(du -sm "$root/var/cache/apt/archives" | cut -f1) MB in apt's cache"
}
echo "   before: $(installed)"

# `make run` first, on the bare root: it installs and builds only what the server needs, then
# serves on its defaults (stopped once it says it listens).
step "make run, as the README says"
t=$SECONDS
status=0
chroot "$root" /bin/bash -lc 'cd /root/delayq
  setsid make run >/tmp/make-run.out 2>&1 &  # its own process group: Ctrl-C reaches make and delayqd
  group=$!
  for _ in $(seq 3600); do grep -q "http listening" /tmp/make-run.out && break; sleep 1; done
  kill -INT -- "-$group"; wait "$group" || true
  tail -5 /tmp/make-run.out; grep -q "delayqd listening on 127.0.0.1:11300" /tmp/make-run.out &&
  grep -q "delayqd http listening on 127.0.0.1:8080" /tmp/make-run.out' || status=$?
echo "   make run: exit $status, $((SECONDS - t)) s; after it: $(installed)"
[ "$status" -eq 0 ] || exit "$status"

step "make test, as the README says"
t=$SECONDS
chroot "$root" /bin/bash -lc 'cd /root/delayq && make test' 2>&1 | tail -25 || status=${PIPESTATUS[0]}
echo "   make test: exit $status, $((SECONDS - t)) s; after it: $(installed)"
[ "$status" -eq 0 ] || exit "$status"

# The package, installed as a user would (apt resolves its dependencies), then the server
# started from the installed paths, as the delayq user, on the packaged config. systemd does
# not run in a chroot: postinst skips the service there, and this starts what ExecStart would.
step "make deb, apt-get install it, run the installed server"
t=$SECONDS
chroot "$root" /bin/bash -lc '
  set -e
  cd /root/delayq && make deb
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./build/release/delayq_*.deb >/dev/null
  getent passwd delayq
  stat -c "%U %a %n" /var/lib/delayq
  runuser -u delayq -- /usr/bin/delayqd --config /etc/delayq/delayqd.conf >/tmp/delayqd.out 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -q "http listening" /tmp/delayqd.out && break; sleep 0.1; done
  cat /tmp/delayqd.out
  delayq put "installed and running" --in 1h
  delayq stats | grep -E "^(delayed|version)"
  kill $pid
  wait $pid || true  # runuser reports the signal it passed on
  for _ in $(seq 100); do grep -q "stopped" /tmp/delayqd.out && break; sleep 0.1; done
  tail -2 /tmp/delayqd.out
  grep -q "stopped" /tmp/delayqd.out
  ls /var/lib/delayq | head -3
' 2>&1 | tail -20 || status=${PIPESTATUS[0]}
echo "   package: exit $status, $((SECONDS - t)) s; all steps $((SECONDS - start)) s"
exit "$status"
