#!/usr/bin/env bash
# Lost peers between real processes: a worker killed with -9 is noticed and
# training goes on; a restarted worker rejoins; a frozen PS is noticed through
# heartbeats; with a short cluster.recovery-timeout nobody waits long for it:
# the run fails clearly and every process exits 5 (lost_peer) - none hangs.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir
example_config local-1ps-2workers c.conf last-step=1000000 log-interval=0
short=--cluster.recovery-timeout=3s
start_cluster c.conf "" $short
expect "both workers start training" wait_for_line w1.log "ready; training" 30
# A stranger's connection speaking garbage must not disturb the cluster. (The
# first byte is no BASP operation: a crafted header can still make CAF 0.17
# allocate its claimed payload; see docs/operations.md, Security.)
(exec 3<>/dev/tcp/127.0.0.1/${ps_addr[0]##*:} && { printf '\xff'; head -c 4096 /dev/urandom; } >&3; exec 3>&-) 2>/dev/null
(exec 3<>/dev/tcp/127.0.0.1/${chief_addr##*:} && printf 'GET / HTTP/1.0\r\n\r\n' >&3; exec 3>&-) 2>/dev/null
sleep 1
alive() { kill -0 "${pid[ps0]}" 2>/dev/null && kill -0 "${pid[chief]}" 2>/dev/null \
  && ! grep -q "training failed" chief.log; }
expect "garbage connections leave the PS and chief training" alive
kill -9 "${pid[w1]}"
expect "the chief notices the killed worker" wait_for_line chief.log "lost worker:1" 15
start_task w1b c.conf worker 1 $short
expect "a restarted worker rejoins" wait_for_line w1b.log "ready; training" 30
kill -STOP "${pid[ps0]}"
expect "the chief notices the frozen PS through heartbeats" \
  wait_for_line chief.log "lost ps:0" 30
wait_exit "${pid[chief]}" 20
expect "the chief exits 5, lost_peer (got $rc), with a final line saying why" \
  test "$rc" = 5 -a -n "$(grep '"ok":false' chief.log)"
# The workers exit 5 too: none hangs.
expect_exit 5 30 w0 w1b
kill -CONT "${pid[ps0]}"
wait_exit "${pid[ps0]}" 30
expect "the thawed PS finds its chief gone and exits 5 (got $rc)" test "$rc" = 5
finish 8
