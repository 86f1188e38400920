#!/usr/bin/env bash
# outside-project.sh BUILD_DIR SOURCE_DIR WORK_DIR — what a user of the embedded scheduler or the
# client does: `cmake --install` the build into a fresh prefix, then build examples/ as a project
# of its own against it (find_package(delayq), delayq::embedded, delayq::client) and run one of
# its programs.
set -euo pipefail
build=$1 source=$2 work=$3
rm -rf "$work"
# A plain install into a prefix, as a user without root would make it (cmake --install --prefix
# "$HOME/.local"): run as root, the test makes it as nobody where nobody can read the build (a
# checkout under /root it cannot), so that a write outside the prefix fails; nobody may write
# the one file cmake keeps in the build directory, its manifest. Either way, the manifest must
# name nothing outside the prefix (below).
mkdir -p "$work/prefix"
as_user=()
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1 &&
  runuser -u nobody -- test -r "$build/cmake_install.cmake"; then
  chown nobody "$work/prefix"
  touch "$build/install_manifest.txt"
  chmod 666 "$build/install_manifest.txt"
  as_user=(runuser -u nobody --)
fi
"${as_user[@]}" cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; exit 1; }
for f in bin/delayqd bin/delayq include/delayq/scheduler.h include/delayq/client.h; do
  [ -e "$work/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
# lib/ or, with the prefix /usr on Debian, lib/<multiarch>/: where find_package looks either way.
config=$(find "$work/prefix/lib" -path '*/cmake/delayq/delayqConfig.cmake' | head -1)
[ -n "$config" ] || { echo "not installed: lib/.../cmake/delayq/delayqConfig.cmake"; exit 1; }
# The service's unit and /etc config belong to the package (component service) alone.
for f in etc lib/systemd; do
  [ ! -e "$work/prefix/$f" ] || { echo "installed outside its component: $f"; exit 1; }
done
if grep -v "^$work/prefix/" "$build/install_manifest.txt"; then
  echo "installed outside the prefix (above)"
  exit 1
fi
cmake -S "$source/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/examples" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/examples/order_auto_rating"
echo "the examples built against the installed package and ran"
