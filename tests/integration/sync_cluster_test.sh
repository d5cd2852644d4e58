#!/usr/bin/env bash
# Sync training between real processes on 127.0.0.1:
#  1. 2 workers (R = N = 2) reach >= 0.80 and every process exits 0;
#  2. 3 workers with R = 2: kill -9 one mid-training; training completes and
#     every remaining process exits 0;
#  3. R = N = 2 with on-worker-loss = wait: kill one worker, restart it;
#     training completes and every process still running exits 0;
#  4. ssp (staleness 1), one of two workers killed mid-run: the other is not
#     held back by it, all 3000 steps, every process still running exits 0.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir
accuracy_at_least() { local a; a=$(grep -o '"test_accuracy":[0-9.]*' "$1" | cut -d: -f2)
  [ -n "$a" ] && awk -v a="$a" -v m="$2" 'BEGIN { exit !(a >= m) }'; }

# 1. the plain sync example, through the launcher
timeout 200 "$root/scripts/local-cluster" "$root/config/examples/local-sync-1ps-2workers.conf" \
  --timeout 180 --bin "$bin" >plain.log 2>&1
expect "sync, 2 workers: every process exits 0" grep -q "all 4 tasks exited 0" plain.log
expect "sync, 2 workers: test accuracy >= 0.80 ($(grep -o '"test_accuracy":[0-9.]*' plain.log))" \
  accuracy_at_least plain.log 0.80
expect "sync, 2 workers: the final line says mode sync" grep -q '"mode":"sync"' plain.log

# 2. backups: lose one of three workers
start_cluster "$root/config/examples/local-sync-backup-1ps-3workers.conf" b_
expect "backup: training runs" wait_for_line b_chief.log "global_step=500/" 60
kill -9 "${pid[b_w2]}"
wait_exit "${pid[b_chief]}" 180
expect "backup: the chief finishes after losing a worker (exit $rc)" test "$rc" = 0
expect "backup: the loss was noticed" grep -q "lost worker:2" b_chief.log
expect "backup: stale gradients were dropped and counted" \
  grep -q '"dropped_gradients":[1-9]' b_chief.log
expect_exit 0 60 b_ps0 b_w0 b_w1

# 3. no backups, policy wait: lose a worker, bring it back
example_config local-sync-1ps-2workers wait.conf 'log-dir="logs/wait"'
start_cluster wait.conf w_
expect "wait: training runs" wait_for_line w_chief.log "global_step=500/" 60
kill -9 "${pid[w_w1]}"
expect "wait: the chief holds the step" wait_for_line w_chief.log "holding step" 20
start_task w_w1b wait.conf worker 1
expect "wait: the restarted worker rejoins" wait_for_line w_chief.log "worker:1 rejoined" 30
wait_exit "${pid[w_chief]}" 180
expect "wait: training completes (chief exit $rc)" test "$rc" = 0
expect "wait: it reached last_step" grep -q '"global_step":3000' w_chief.log
expect_exit 0 60 w_ps0 w_w0 w_w1b

# 4. ssp: a lost worker no longer holds the others back
example_config local-sync-1ps-2workers ssp.conf mode='"ssp"' 'log-dir=""'
sed -i 's/^mode = "ssp"$/mode = "ssp"\nstaleness = 1/' ssp.conf
start_cluster ssp.conf s_
expect "ssp: training runs" wait_for_line s_chief.log "global_step=500/" 60
kill -9 "${pid[s_w1]}"
wait_exit "${pid[s_chief]}" 180
expect "ssp: the chief finishes without the lost worker (exit $rc)" test "$rc" = 0
expect "ssp: all 3000 steps, the final line says mode ssp" \
  grep -q '"ok":true,"mode":"ssp","global_step":3000' s_chief.log
expect_exit 0 60 s_ps0 s_w0
finish 6
