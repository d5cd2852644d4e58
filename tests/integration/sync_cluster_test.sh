#!/usr/bin/env bash
# Sync training between real processes on 127.0.0.1:
#  1. 2 workers (R = N = 2) reach >= 0.80 and every process exits 0;
#  2. 3 workers with R = 2: kill -9 one mid-training; training completes and
#     every remaining process exits 0;
#  3. R = N = 2 with on-worker-loss = wait: kill one worker, restart it;
#     training completes and every process still running exits 0.
set -u
bin=$1; root=$2
tmp=$(mktemp -d)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
fails=0; passes=0
expect() { local what=$1; shift
  if "$@"; then echo "ok: $what"; passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi; }
wait_for_line() { local end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done; return 1; }
wait_exit() { local end=$((SECONDS + $2)); rc=hung
  while kill -0 "$1" 2>/dev/null; do [ $SECONDS -ge $end ] && return; sleep 0.2; done
  wait "$1"; rc=$?; }
accuracy_at_least() { local a; a=$(grep -o '"test_accuracy":[0-9.]*' "$1" | cut -d: -f2)
  [ -n "$a" ] && awk -v a="$a" -v m="$2" 'BEGIN { exit !(a >= m) }'; }

# 1. the plain sync example, through the launcher
timeout 200 "$root/scripts/local-cluster" "$root/config/examples/local-sync-1ps-2workers.conf" \
  --timeout 180 --bin "$bin" >"$tmp/plain.log" 2>&1
expect "sync, 2 workers: every process exits 0" grep -q "all 4 tasks exited 0" "$tmp/plain.log"
expect "sync, 2 workers: test accuracy >= 0.80 ($(grep -o '"test_accuracy":[0-9.]*' "$tmp/plain.log"))" \
  accuracy_at_least "$tmp/plain.log" 0.80
expect "sync, 2 workers: the final line says mode sync" grep -q '"mode":"sync"' "$tmp/plain.log"

# Starts one task of config $1 as process named $2.
start() { "$bin" --config-file="$1" --job_name="$3" --task_index="$4" >"$tmp/$2.log" 2>&1 &
  pids+=($!); eval "pid_$2=$!"; }

# 2. backups: lose one of three workers
conf="$root/config/examples/local-sync-backup-1ps-3workers.conf"
start "$conf" b_ps ps 0; start "$conf" b_chief chief 0
start "$conf" b_w0 worker 0; start "$conf" b_w1 worker 1; start "$conf" b_w2 worker 2
expect "backup: training runs" wait_for_line "$tmp/b_chief.log" "global_step=500/" 60
kill -9 "$pid_b_w2"
wait_exit "$pid_b_chief" 180
expect "backup: the chief finishes after losing a worker (exit $rc)" test "$rc" = 0
expect "backup: the loss was noticed" grep -q "lost worker:2" "$tmp/b_chief.log"
expect "backup: stale gradients were dropped and counted" \
  grep -q '"dropped_gradients":[1-9]' "$tmp/b_chief.log"
for t in b_ps b_w0 b_w1; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "backup: $t exits 0 (got $rc)" test "$rc" = 0; done

# 3. no backups, policy wait: lose a worker, bring it back
# Ports of their own: peer_loss_test uses 76xx/77xx and may run alongside.
sed -e 's/78\([0-9][0-9]\)/86\1/g; s/79\([0-9][0-9]\)/87\1/g' -e 's|^log-dir = .*|log-dir = "logs/wait"|' \
  "$root/config/examples/local-sync-1ps-2workers.conf" >"$tmp/wait.conf"
start "$tmp/wait.conf" w_ps ps 0; start "$tmp/wait.conf" w_chief chief 0
start "$tmp/wait.conf" w_w0 worker 0; start "$tmp/wait.conf" w_w1 worker 1
expect "wait: training runs" wait_for_line "$tmp/w_chief.log" "global_step=500/" 60
kill -9 "$pid_w_w1"
expect "wait: the chief holds the step" wait_for_line "$tmp/w_chief.log" "holding step" 20
start "$tmp/wait.conf" w_w1b worker 1
expect "wait: the restarted worker rejoins" wait_for_line "$tmp/w_chief.log" "worker:1 rejoined" 30
wait_exit "$pid_w_chief" 180
expect "wait: training completes (chief exit $rc)" test "$rc" = 0
expect "wait: it reached last_step" grep -q '"global_step":3000' "$tmp/w_chief.log"
for t in w_ps w_w0 w_w1b; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "wait: $t exits 0 (got $rc)" test "$rc" = 0; done

[ $fails -eq 0 ] || for f in "$tmp"/*.log; do echo "== $f"; tail -6 "$f"; done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
