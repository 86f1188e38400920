#!/usr/bin/env bash
# unpaid-order.sh [HOST:PORT] — the README's tour over the beanstalkd protocol, with nothing but
# bash (its /dev/tcp): puts "cancel unpaid order 42" due in 2 seconds, reserves it as a worker
# would, and deletes it, printing each line sent (>) and received (<) with the seconds since the
# start. Default: 127.0.0.1:11300, where `make run` listens.
set -euo pipefail
address=${1:-127.0.0.1:11300}
exec 3<>"/dev/tcp/${address%:*}/${address##*:}"
start=$(date +%s%N)

# The seconds since the start, as " 2.00s".
stamp() {
  local ms=$((($(date +%s%N) - start) / 1000000))
  printf '%2d.%02ds' $((ms / 1000)) $((ms % 1000 / 10))
}
send() {  # a command line, and the body that follows it, if any
  echo "$(stamp) > $1"
  printf '%s\r\n' "$1" >&3
  if [ $# -gt 1 ]; then
    echo "         $2"
    printf '%s\r\n' "$2" >&3
  fi
}
receive() {  # one reply line, and the body of a RESERVED
  IFS= read -r reply <&3
  reply=${reply%$'\r'}
  echo "$(stamp) < $reply"
  if [[ $reply == RESERVED* ]]; then
    IFS= read -r body <&3
    echo "         ${body%$'\r'}"
  fi
}

body="cancel unpaid order 42"
send "use orders"
receive
send "put 0 2 30 ${#body}" "$body"  # priority 0, due in 2 s, 30 s to run once reserved
receive
send "watch orders"
receive
send "reserve"  # waits until a job is due
receive
id=$(echo "$reply" | cut -d' ' -f2)
send "delete $id"
receive
