#!/usr/bin/env bash
# outside-project.sh BUILD_DIR SOURCE_DIR WORK_DIR — what a user of the embedded scheduler does:
# `cmake --install` the build into a fresh prefix, then build examples/ as a project of its own
# against it (find_package(delayq), delayq::embedded) and run one of its programs.
set -euo pipefail
build=$1 source=$2 work=$3
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
for f in bin/delayqd bin/delayq include/delayq/scheduler.h lib/cmake/delayq/delayqConfig.cmake; do
  [ -e "$work/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
cmake -S "$source/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/examples" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/examples/order_auto_rating"
echo "the examples built against the installed package and ran"
