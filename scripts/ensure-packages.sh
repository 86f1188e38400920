#!/usr/bin/env bash
# ensure-packages.sh PACKAGE... — installs Debian packages that come with a service, if missing,
# without starting their services: Debian's beanstalkd, for one, enables and starts a daemon on
# 127.0.0.1:11300 when installed, which would take delayqd's default port. Uses sudo when not
# root.
set -euo pipefail
missing=()
for package in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
echo "ensure-packages: installing ${missing[*]} (services not started)" >&2
# invoke-rc.d asks /usr/sbin/policy-rc.d; 101 means "action forbidden": no service starts.
policy=/usr/sbin/policy-rc.d
placed=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  placed=1
fi
# (An if, not `&&`: the trap's status becomes the script's, and a policy found in place, as in
# many container images, must not fail an install that succeeded.)
cleanup() { if [ "$placed" -eq 1 ]; then $sudo rm -f "$policy"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# A service enabled for the next boot would take the port then: disable it (systemd only).
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  for package in "${missing[@]}"; do
    $sudo systemctl disable --now "$package" >/dev/null 2>&1 || true
  done
fi
