#!/usr/bin/env bash
# Every exit code of docs/operations.md#exit-codes, produced by the case the
# table names (issue 54): what a scheduler's failure policy acts on.
#   exit_codes_test.sh TROUPE_NODE SOURCE_DIR
set -u
. "$(dirname "$0")/lib.sh"
bin=$1; root=$2
enter_scratch_dir
# The table's codes, read from the document: each must be produced below.
table=$(sed -n '/^## Exit codes/,/^## /p' "$root/docs/operations.md" | grep -oE '^\| [0-9]+ \| [a-z_]+' \
        | awk '{print $2 ":" $4}' | tr '\n' ' ')
expect "the table lists codes 0 to 6 ($table)" \
  test "$table" = "0:done 1:failed 2:config 3:bad_data 4:diverged 5:lost_peer 6:preempted "

run() { "$bin" "$@" >"$tmp/out.log" 2>&1; echo $?; }

# 0 done: a short run of every task in one process.
rc=$(run --train.last-step=30 --train.log-interval=0)
expect "0 done: a whole cluster that trains to last-step exits 0 (got $rc)" test "$rc" = 0

# 2 config: a value out of range; nothing starts.
rc=$(run --train.batch-size=-1)
expect "2 config: a bad value exits 2 (got $rc)" test "$rc" = 2

# 3 bad_data: a record that cannot be parsed.
mkdir -p data
printf 'x,label\n1.0,0\n2.0,1\n' >data/test.csv
printf 'x,label\n1.0,0\noops,1\n' >data/train.csv
rc=$(run --train.model=lr --data.train='["data/train.csv"]' --data.test='["data/test.csv"]' \
         --data.label-column=label --train.last-step=10)
expect "3 bad_data: a bad record exits 3 (got $rc)" test "$rc" = 3
expect "3 bad_data:   naming the record" grep -q "oops" "$tmp/out.log"

# 4 diverged: a learning rate that makes every update non-finite.
rc=$(run --train.last-step=400 --train.learning-rate=1e38 --train.max-refused-steps=3 \
         --train.log-interval=0)
expect "4 diverged: non-finite training exits 4 (got $rc)" test "$rc" = 4
expect "4 diverged:   saying so" grep -q "training diverged" "$tmp/out.log"

cluster_config "$tmp/c.conf" 1 1 <<'CONF'
connect-timeout = 3s
[train]
model = "softmax"
CONF

# 5 lost_peer: a worker whose chief never comes.
rc=$(run --config-file="$tmp/c.conf" --job_name=worker --task_index=0)
expect "5 lost_peer: a worker without a chief within connect-timeout exits 5 (got $rc)" \
  test "$rc" = 5

# 1 failed: a ps task started twice on its address (the second finds it taken).
start_task ps-first "$tmp/c.conf" ps 0 --cluster.connect-timeout=60s
wait_for_line "$tmp/ps-first.log" "waiting\|listening\|published\|ps:0" 30 || true
sleep 1
rc=$(run --config-file="$tmp/c.conf" --job_name=ps --task_index=0)
expect "1 failed: a second ps task on the same address exits 1 (got $rc)" test "$rc" = 1
expect "1 failed:   naming the address in use" grep -q "is in use" "$tmp/out.log"

# 6 preempted: SIGTERM to that ps task while it waits for its chief, and to
# a chief that waits for its shards.
kill -TERM "${pid[ps-first]}"
expect_exit 6 20 ps-first
start_task chief-waiting "$tmp/c.conf" chief 0 --cluster.connect-timeout=60s
sleep 2
kill -TERM "${pid[chief-waiting]}"
expect_exit 6 20 chief-waiting
expect "6 preempted:   the chief's final line says so" \
  grep -q '"preempted":true' "$tmp/chief-waiting.log"
finish 20
