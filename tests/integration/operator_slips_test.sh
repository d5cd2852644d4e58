#!/usr/bin/env bash
# Operator slips against a cluster of real processes that is training: the
# chief, a ps task and a worker started a second time, a worker index the
# cluster does not have, and a whole second cluster on the same ports. Each
# slip exits non-zero with a clear message and touches nothing: the real run
# ends ok with every step counted and every process exiting 0.
set -u
bin=$1; root=$2
tmp=$(mktemp -d)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP_LOGS:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
keep=${KEEP_LOGS:-}
sed -e 's/7200/8800/; s/7201/8801/; s/7301/8900/; s/7302/8901/' \
    -e 's/^last-step = .*/last-step = 30000/' -e 's/^log-interval = .*/log-interval = 1000/' \
    "$root/config/examples/local-1ps-2workers.conf" >"$tmp/c.conf"
start() { # name job index
  "$bin" --config-file="$tmp/c.conf" --job_name="$2" --task_index="$3" >"$tmp/$1.log" 2>&1 &
  pids+=($!); eval "pid_$1=$!"
}
fails=0; passes=0
expect() { local what=$1; shift
  if "$@"; then echo "ok: $what"; passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi; }
wait_for_line() { local end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done; return 1; }
wait_exit() { local end=$((SECONDS + $2)); rc=hung
  while kill -0 "$1" 2>/dev/null; do [ $SECONDS -ge $end ] && return; sleep 0.2; done
  wait "$1"; rc=$?; }

start ps ps 0; start chief chief 0; start w0 worker 0; start w1 worker 1
expect "the cluster trains" wait_for_line "$tmp/chief.log" "global_step=1000/" 60

start chief2 chief 0
wait_exit "$pid_chief2" 30
expect "a second chief exits 1 (got $rc)" test "$rc" = 1
expect "  saying its address is in use" grep -q "is in use: is this task already running" "$tmp/chief2.log"
start ps2 ps 0
wait_exit "$pid_ps2" 30
expect "a second ps:0 exits 1 (got $rc)" test "$rc" = 1
expect "  saying its address is in use" grep -q "is in use" "$tmp/ps2.log"
start w0b worker 0
wait_exit "$pid_w0b" 60
expect "a second worker:0 exits 1 (got $rc)" test "$rc" = 1
expect "  refused by the chief" grep -q "worker:0 is running and answers" "$tmp/w0b.log"
expect "  which logged the refusal with the sender's node" \
  grep -q "refused a second worker:0 from actor [0-9]* on node" "$tmp/chief.log"
start w5 worker 5
wait_exit "$pid_w5" 30
expect "a worker index the cluster does not have exits 2 (got $rc)" test "$rc" = 2
# A whole second cluster of the same file.
start x_ps ps 0; start x_chief chief 0; start x_w0 worker 0; start x_w1 worker 1
for t in x_ps x_chief x_w0 x_w1; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "second cluster: $t exits non-zero (got $rc)" test "$rc" != 0 -a "$rc" != hung; done
expect "  its workers were refused while the real run trained" \
  grep -q "worker:1 is running and answers" "$tmp/x_w1.log"

wait_exit "$pid_chief" 240
expect "the real run's chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok" grep -q '"ok":true' "$tmp/chief.log"
expect "  with every step counted" grep -q '"global_step":30000' "$tmp/chief.log"
expect "  no worker was lost" grep -q '"lost_workers":0' "$tmp/chief.log"
for t in ps w0 w1; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "real $t exits 0 (got $rc)" test "$rc" = 0; done

[ $fails -eq 0 ] || for f in "$tmp"/*.log; do echo "== $f"; tail -5 "$f"; done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
