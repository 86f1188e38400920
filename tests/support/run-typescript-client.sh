#!/usr/bin/env bash
# run-typescript-client.sh SOURCE WORK — the TypeScript client's own tests (SOURCE is
# clients/typescript) with Node's test runner, in a copy under WORK: its locked dev dependencies
# (OpenTelemetry, for the tracing tests) are installed once into WORK/deps (npm-install.sh, under
# a lock, since the local and Redis runs may start together), and each mode runs in a copy of
# the package of its own that links them. Nothing is written into the source tree. Without the
# npm registry the tests run all the same, and the tracing tests skip, saying why.
# Exit status: the tests'.
set -euo pipefail
source=$1 work=$2
mkdir -p "$work"
installed=0
flock "$work/.lock" "$(dirname "$0")/npm-install.sh" "$source" "$work/deps" \
  "the TypeScript client's test dependencies" || installed=$?
[ "$installed" = 0 ] || [ "$installed" = 77 ] || exit "$installed"
mode=local
[ -n "${DELAYQ_TEST_REDIS_SEEDS_FILE:-}" ] && mode=redis
run="$work/$mode"
rm -rf "$run"
mkdir -p "$run"
cp -r "$source/package.json" "$source/package-lock.json" "$source/tsconfig.json" \
  "$source/README.md" "$source/src" "$source/dist" "$source/test" "$source/test-support" "$run/"
[ "$installed" = 0 ] && ln -s "$work/deps/node_modules" "$run/node_modules"
exec node --test "$run/test"
