#!/usr/bin/env bash
# Lost peers between real processes: a worker killed with -9 is noticed and
# training goes on; a restarted worker rejoins; a frozen PS is noticed through
# heartbeats; with a short cluster.recovery-timeout nobody waits long for it:
# the run fails clearly and every process exits 1 - none hangs.
set -u
bin=$1; root=$2
tmp=$(mktemp -d)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
sed -e 's/7200/7600/; s/7201/7601/; s/7301/7701/; s/7302/7702/' \
    -e 's/^last-step = .*/last-step = 1000000/' -e 's/^log-interval = .*/log-interval = 0/' \
    "$root/config/examples/local-1ps-2workers.conf" >"$tmp/c.conf"
start() { # name job index
  "$bin" --config-file="$tmp/c.conf" --job_name="$2" --task_index="$3" --cluster.recovery-timeout=3s \
    >"$tmp/$1.log" 2>&1 &
  pids+=($!); eval "pid_$1=$!"
}
fails=0; passes=0
expect() { # description, condition command...
  local what=$1; shift
  if "$@"; then echo "ok: $what"; passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi
}
wait_for_line() { # file pattern seconds
  local end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
  return 1
}
# Sets rc to the exit code of pid (a child of this shell), or "hung".
wait_exit() { # pid seconds
  local end=$((SECONDS + $2))
  rc=hung
  while kill -0 "$1" 2>/dev/null; do [ $SECONDS -ge $end ] && return; sleep 0.2; done
  wait "$1"; rc=$?
}
start ps ps 0; start chief chief 0; start w0 worker 0; start w1 worker 1
expect "both workers start training" wait_for_line "$tmp/w1.log" "ready; training" 30
# A stranger's connection speaking garbage must not disturb the cluster. (The
# first byte is no BASP operation: a crafted header can still make CAF 0.17
# allocate its claimed payload; see docs/operations.md, Security.)
(exec 3<>/dev/tcp/127.0.0.1/7601 && { printf '\xff'; head -c 4096 /dev/urandom; } >&3; exec 3>&-) 2>/dev/null
(exec 3<>/dev/tcp/127.0.0.1/7600 && printf 'GET / HTTP/1.0\r\n\r\n' >&3; exec 3>&-) 2>/dev/null
sleep 1
alive() { kill -0 "$pid_ps" 2>/dev/null && kill -0 "$pid_chief" 2>/dev/null \
  && ! grep -q "training failed" "$tmp/chief.log"; }
expect "garbage connections leave the PS and chief training" alive
kill -9 "$pid_w1"
expect "the chief notices the killed worker" wait_for_line "$tmp/chief.log" "lost worker:1" 15
start w1b worker 1
expect "a restarted worker rejoins" wait_for_line "$tmp/w1b.log" "ready; training" 30
kill -STOP "$pid_ps"
expect "the chief notices the frozen PS through heartbeats" \
  wait_for_line "$tmp/chief.log" "lost ps:0" 30
wait_exit "$pid_chief" 20
expect "the chief exits 1 (got $rc) with a final line saying why" \
  test "$rc" = 1 -a -n "$(grep '"ok":false' "$tmp/chief.log")"
for w in w0 w1b; do
  eval "p=\$pid_$w"
  wait_exit "$p" 30
  expect "$w exits 1 (got $rc), no hang" test "$rc" = 1
done
kill -CONT "$pid_ps"
wait_exit "$pid_ps" 30
expect "the thawed PS finds its chief gone and exits 1 (got $rc)" test "$rc" = 1
[ $fails -eq 0 ] || for f in "$tmp"/*.log; do echo "== $f"; tail -8 "$f"; done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
