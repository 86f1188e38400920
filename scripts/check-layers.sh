#!/usr/bin/env bash
# check-layers.sh [ROOT] — every #include "..." in src/, include/ and apps/ points at its own
# folder or a layer below it. The layers are drawn in docs/design/architecture.md; RULES below is
# that drawing as a table, one row per source folder, and EXCEPTIONS the known breaks, each with
# its reason. Test code (*_test.cc, *_fuzz.cc, the TEST_ONLY headers) may also include
# tests/support/; production code may not include test code. Prints each forbidden include as
# "file:line: <folder> may not include <header>", then one summary line; exits 1 if any.
# ROOT is the project's root (default: this script's ../). `make test` runs it (CTest: layer_check).
set -euo pipefail

# "folder: what its files may include", its own folder first. Folders are named as under src/,
# plus apps and include/delayq; tests/support/ is "support". An entry naming a header (*.h)
# allows that header only. A row starting with a space continues the row above.
RULES=(
  "base:            base"
  # What a server counts for GET /metrics: every layer registers its families there.
  "metrics:         metrics base"
  "wheel:           wheel base"
  "store:           store base"
  # The engine is pure logic: of the store, only the record codec and the far tier's reader, both
  # in delayq_store_format. Its tests read the far tier from the MemoryStore (which
  # delayq_engine does not link, so no engine source can use it).
  "engine:          engine store/record.h store/far_reader.h store/memory_store.h wheel base"
  # The contract the front-ends link, and nothing below it (architecture.md, Layers).
  "broker:          broker schedule metrics base"
  "broker/local:    broker/local broker schedule metrics engine store wheel base"
  # State lives in Redis; of the store, only the record codec.
  "broker/redis:    broker/redis broker schedule metrics redis timing store/record.h base"
  "redis:           redis base"
  # Push delivery's rules, signatures and sender, below the front-ends that share them.
  "webhook:         webhook base"
  # The injected clock and timers of the parts on an event loop.
  "timing:          timing base"
  # Recurring schedules' expressions and zones (cron, intervals).
  "schedule:        schedule base"
  # What the front-ends share: the TCP listener, the metrics families they count in.
  "front:           front metrics base"
  "front/beanstalk: front/beanstalk front webhook broker metrics base"
  "front/http:      front/http front webhook broker schedule metrics base"
  "front/webhook:   front/webhook front webhook broker timing metrics base"
  # The programs: the top, over every layer of the server.
  "apps:            apps front front/beanstalk front/http front/webhook webhook broker"
  "                 broker/local broker/redis redis engine store wheel timing schedule metrics"
  "                 base"
  # The embedded API's public header (installed): the standard library only.
  "include/delayq:  include/delayq"
  "embedded:        embedded include/delayq wheel schedule base"
  # The client of a delayqd server: its public header only (it speaks the protocol, not our code).
  "client:          client include/delayq"
)

# Known exceptions: "folder  header  reason". Each is a break waiting for its fix, not a rule;
# once nothing needs one, the check prints a note to remove it.
EXCEPTIONS=(
)

# Headers that serve tests only: test code, like *_test.cc, and out of bounds for production.
TEST_ONLY=(engine/engine_model.h wheel/reference_queue.h)

DOC="docs/design/architecture.md"
root=${1:-"$(dirname "${BASH_SOURCE[0]}")/.."}
cd "$root"

declare -A allowed=() test_only=()
folder=
for row in "${RULES[@]}"; do
  if [[ $row != " "* ]]; then
    folder=${row%%:*}
    row=${row#*:}
    allowed[$folder]=" "
  fi
  read -ra words <<<"$row"
  allowed[$folder]+="${words[*]} "
done
for h in "${TEST_ONLY[@]}"; do test_only[$h]=1; done
exc_folder=() exc_header=() exc_used=()
for e in "${EXCEPTIONS[@]}"; do
  read -r f h _ <<<"$e"
  exc_folder+=("$f") exc_header+=("$h") exc_used+=(0)
done

# folder_of PATH: the folder a file of ROOT belongs to, in $REPLY: src/broker/local/node.h ->
# broker/local, include/delayq/scheduler.h -> include/delayq, tests/support/seed.h -> support.
folder_of() {
  REPLY=${1%/*}
  REPLY=${REPLY#src/}
  REPLY=${REPLY#tests/}
}

# resolve DIR NAME: the header as the compiler finds it, in $REPLY: beside the includer, then
# under src/, include/, tests/ (the include paths CMake gives). One found nowhere (generated at
# build time) is taken as under src/.
resolve() {
  local dir=$1 name=$2 base
  if [[ -f $dir/$name ]]; then
    REPLY=$dir/$name
    if [[ $name == *./* ]]; then REPLY=$(realpath -m --relative-to=. "$REPLY"); fi
    return 0
  fi
  for base in src include tests; do
    REPLY=$base/$name
    [[ -f $REPLY ]] && return
  done
  REPLY=src/$name
}

# may_include FOLDER PATH IS_TEST: may a file of FOLDER include the header at PATH?
may_include() {
  local folder=$1 path=$2 test=$3 key hfolder
  key=${path#src/}
  key=${key#include/}
  [[ $test == 0 && -n ${test_only[$key]:-} ]] && return 1
  folder_of "$path"
  hfolder=$REPLY
  [[ $hfolder == "$folder" ]] && return 0
  [[ $test == 1 && $hfolder == support ]] && return 0
  [[ ${allowed[$folder]} == *" $hfolder "* || ${allowed[$folder]} == *" $key "* ]]
}

# excused FOLDER KEY: is this include a known exception? Marks the exception used.
excused() {
  local i
  for i in "${!exc_folder[@]}"; do
    if [[ ${exc_folder[$i]} == "$1" && ${exc_header[$i]} == "$2" ]]; then
      exc_used[i]=1
      return 0
    fi
  done
  return 1
}

mapfile -t files < <(find src include apps -type f \
  \( -name '*.h' -o -name '*.cc' -o -name '*.cc.in' \) 2>/dev/null | sort)
declare -A rowless=()
bad=0 excuses=0 includes=0
for file in "${files[@]}"; do
  folder_of "$file"
  folder=$REPLY
  if [[ -z ${allowed[$folder]:-} ]]; then
    # A new folder needs its row: once per folder.
    if [[ -z ${rowless[$folder]:-} ]]; then
      echo "$file:1: $folder has no row in the layer table of scripts/check-layers.sh"
      rowless[$folder]=1
      bad=$((bad + 1))
    fi
    continue
  fi
  test=0
  key=${file#src/}
  [[ $file == *_test.cc || $file == *_fuzz.cc || -n ${test_only[$key]:-} ]] && test=1
  while IFS=: read -r line text; do
    [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    header=${BASH_REMATCH[1]}
    includes=$((includes + 1))
    resolve "${file%/*}" "$header"
    path=$REPLY
    may_include "$folder" "$path" "$test" && continue
    key=${path#src/}
    if excused "$folder" "$key"; then
      excuses=$((excuses + 1))
      continue
    fi
    note="layers: $DOC"
    [[ $test == 0 && -n ${test_only[$key]:-} ]] && note="a test-only header; $note"
    echo "$file:$line: $folder may not include $header ($note)"
    bad=$((bad + 1))
  done < <(grep -n 'include' "$file" || true)
done

for i in "${!exc_folder[@]}"; do
  [[ ${exc_used[$i]} == 1 ]] && continue
  echo "note: nothing needs the exception \"${exc_folder[$i]} ${exc_header[$i]}\" any more:" \
    "remove it from scripts/check-layers.sh"
done

summary="${#files[@]} files, $includes includes, $excuses under known exceptions"
if ((bad > 0)); then
  echo "layer check: $bad forbidden ($summary; rules: scripts/check-layers.sh)"
  exit 1
fi
echo "layer check: ok ($summary)"
