#!/usr/bin/env bash
# Operator slips against a cluster of real processes that is training: the
# chief, a ps task and a worker started a second time, a worker index the
# cluster does not have, and a whole second cluster on the same ports. Each
# slip exits non-zero with a clear message and touches nothing: the real run
# ends ok with every step counted and every process exiting 0.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir
example_config local-1ps-2workers c.conf last-step=30000 log-interval=1000

start_cluster c.conf
expect "the cluster trains" wait_for_line chief.log "global_step=1000/" 60

start_task chief2 c.conf chief 0
wait_exit "${pid[chief2]}" 30
expect "a second chief exits 1 (got $rc)" test "$rc" = 1
expect "  saying its address is in use" grep -q "is in use: is this task already running" chief2.log
start_task ps2 c.conf ps 0
wait_exit "${pid[ps2]}" 30
expect "a second ps:0 exits 1 (got $rc)" test "$rc" = 1
expect "  saying its address is in use" grep -q "is in use" ps2.log
start_task w0b c.conf worker 0
wait_exit "${pid[w0b]}" 60
expect "a second worker:0 exits 1 (got $rc)" test "$rc" = 1
expect "  refused by the chief" grep -q "worker:0 is running and answers" w0b.log
expect "  which logged the refusal with the sender's node" \
  grep -q "refused a second worker:0 from actor [0-9]* on node" chief.log
start_task w5 c.conf worker 5
wait_exit "${pid[w5]}" 30
expect "a worker index the cluster does not have exits 2 (got $rc)" test "$rc" = 2
# A whole second cluster of the same file: each of its tasks exits non-zero.
start_cluster c.conf x_
expect_exit non-zero 60 x_ps0 x_chief x_w0 x_w1
expect "  its workers were refused while the real run trained" \
  grep -q "worker:1 is running and answers" x_w1.log

wait_exit "${pid[chief]}" 240
expect "the real run's chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok" grep -q '"ok":true' chief.log
expect "  with every step counted" grep -q '"global_step":30000' chief.log
expect "  no worker was lost" grep -q '"lost_workers":0' chief.log
expect_exit 0 60 ps0 w0 w1
finish 5
