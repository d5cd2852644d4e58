#!/usr/bin/env bash
# Several hosts on one machine: each task in its own network namespace with
# its own address (10.213.0.0/24, veth pairs on a bridge in a namespace of
# its own), so links can be cut and slowed like a real network's.
#   A  an async run over plain TCP: a stranger on another host is refused
#      and logged with its address; partitions of the ps and of the chief
#      shorter than middleman.connection-timeout (6 s) heal without harm; a worker
#      cut off for longer is dropped, waits for the chief, and rejoins by
#      itself when the link heals; the run ends "ok":true with every step.
#   B  the ps cut off for longer: the run ends "ok":false naming the lost ps,
#      every task exits 5 (lost_peer), nothing hangs.
#   C  the chief cut off for longer: the ps and the workers notice, wait for
#      a new chief (cluster.recovery-timeout, 8 s here), and exit 5.
#   D  sync with a backup worker (N = 3, R = 2) whose link is limited to
#      2 Mbit/s (tc tbf): the run does not wait for it (it computes far
#      fewer steps than the others) and ends "ok":true.
# Needs root, ip netns, bridges and tc; skipped (exit 77) where missing.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
. "$(dirname "$0")/../../scripts/lib/hosts.sh" # add_host, host_cluster_keys, host_middleman
bin=$1; client=$2
skip() { echo "netns_cluster_test: $1; skipped"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs ip and tc (iproute2)"
p=tr$$ # namespace and link prefix, unique per run
more_cleanup() { remove_hosts "$p"; }
enter_scratch_dir
why=$(add_switch "$p") || skip "$why"
declare -A addr=([chief]=10.213.0.1 [ps]=10.213.0.2 [w0]=10.213.0.3 [w1]=10.213.0.4 [w2]=10.213.0.5
                 [x]=10.213.0.9)
for host in chief ps w0 w1 w2 x; do
  add_host "$p" "$host" "${addr[$host]}"
done
cut() { ip -n "${p}sw" link set "$p$1s" down; }
heal() { ip -n "${p}sw" link set "$p$1s" up; }

config() { # name mode last_step workers replicas [recovery-timeout]
  local workers="" i
  for ((i = 0; i < $4; i++)); do workers+="${workers:+, }\"${addr[w$i]}:7300\""; done
  cat >"$tmp/$1.conf" <<CONF
[cluster]
chief = ["${addr[chief]}:7200"]
ps = ["${addr[ps]}:7201"]
worker = [$workers]
$(host_cluster_keys 30s 10s)
worker-wait-timeout = 60s
recovery-timeout = ${6:-8s}
[train]
model = "softmax"
mode = "$2"
batch-size = 100
learning-rate = 0.1
last-step = $3
log-interval = 1000
replicas-to-aggregate = $5
$(host_middleman 6s)
CONF
}
start() { # RUN HOST JOB INDEX: task JOB:INDEX of RUN.conf on HOST, named RUN_HOST
  launch=(ip netns exec "$p$2"); start_task "$1_$2" "$tmp/$1.conf" "$3" "$4"; launch=(); }
start_run() { # RUN: the tasks of RUN.conf, each on its host: chief, ps, w0, w1...
  local i n; n=$(cluster_entries "$tmp/$1.conf" worker | wc -l)
  start "$1" ps ps 0; start "$1" chief chief 0
  for ((i = 0; i < n; i++)); do start "$1" "w$i" worker "$i"; done; }
# RUN HOST: an async run that trains, then HOST cut off for longer than connection-timeout.
cut_off_long() { config "$1" async 200000 2 0; start_run "$1"
  expect "${1^^}: the cluster trains" wait_for_line "$tmp/$1_chief.log" "global_step=2000/" 60
  cut "$2"; }

echo "== A: an async run through a stranger, short partitions and a long one"
config a async 100000 2 0 40s
start_run a
expect "A: the cluster trains across namespaces" wait_for_line "$tmp/a_chief.log" "global_step=2000/" 60
expect "A: the tasks warn that plain TCP lets anyone join" grep -q "spans hosts over plain TCP" "$tmp/a_ps.log"
ip netns exec "${p}x" "$client" "${addr[chief]}:7200" "${addr[ps]}:7201" >"$tmp/a_client.log" 2>&1
expect "A: the stranger on 10.213.0.9 is refused everything" test $? = 0
sleep 1
expect "A: the ps logs the stranger's address" grep -q "refused a stop from .* at 10.213.0.9:" "$tmp/a_ps.log"
# Short cuts, apart: TCP retransmits after a back-off, so a link is back
# about a second after it heals.
cut ps; sleep 1.5; heal ps; sleep 6
cut chief; sleep 1.5; heal chief; sleep 6
expect "A: 1.5 s partitions of the ps and the chief lose nobody" \
  bash -c "! grep -q 'lost' '$tmp/a_chief.log' '$tmp/a_ps.log'"
cut w1
expect "A: a worker cut off for longer is dropped by the chief" wait_for_line "$tmp/a_chief.log" "lost worker:1" 30
expect "A:   and waits for the chief (cluster.recovery-timeout)" \
  wait_for_line "$tmp/a_w1.log" "lost the chief" 30
heal w1
expect "A: the link healed, it reaches the chief again by itself" \
  wait_for_line "$tmp/a_w1.log" "reached the chief again" 40
# Rejoining replays the worker's data up to its position: give it a moment.
expect "A:   and rejoins" bash -c "for i in \$(seq 100); do [ \$(grep -c 'ready; training' '$tmp/a_w1.log') = 2 ] && exit 0; sleep 0.2; done; exit 1"
wait_exit "${pid[a_chief]}" 180
expect "A: the run ends ok with every step (chief exit $rc)" \
  grep -q '"ok":true,"mode":"async","global_step":100000,' "$tmp/a_chief.log"
expect "A:   counting the lost worker" grep -q '"lost_workers":1' "$tmp/a_chief.log"
expect_exit 0 30 a_ps a_w0 a_w1

echo "== B: the ps cut off for longer than connection-timeout"
cut_off_long b ps
expect_exit 5 30 b_chief b_w0 b_w1
expect "B: the final line says ok:false and names the lost ps" \
  grep -q '"ok":false.*lost ps:0' "$tmp/b_chief.log"
heal ps
wait_exit "${pid[b_ps]}" 30
expect "B: the ps exits 5 too (got $rc)" test "$rc" = 5

echo "== C: the chief cut off for longer than connection-timeout"
cut_off_long c chief
expect_exit 5 30 c_ps c_w0 c_w1
expect "C: the ps says it lost the chief" grep -q "lost the chief" "$tmp/c_ps.log"
heal chief
kill "${pid[c_chief]}" 2>/dev/null

echo "== D: sync, N = 3, R = 2, one worker on a 2 Mbit/s link"
config d sync 3000 3 2
ip netns exec "${p}w2" tc qdisc add dev eth0 root tbf rate 2mbit burst 16kb latency 200ms ||
  skip "tc tbf is not available"
start_run d
wait_exit "${pid[d_chief]}" 180
expect "D: the run ends ok with every step (chief exit $rc)" \
  grep -q '"ok":true,"mode":"sync","global_step":3000,' "$tmp/d_chief.log"
steps_of() { grep -o "after [0-9]* local step" "$tmp/$1.log" | grep -o "[0-9]*"; }
w0_steps=$(steps_of d_w0); w2_steps=$(steps_of d_w2)
expect "D: the run did not wait for the slow worker (it took ${w2_steps:-?} steps, worker:0 ${w0_steps:-?})" \
  test "${w2_steps:-0}" -lt $(( ${w0_steps:-0} / 2 ))
expect_exit 0 30 d_ps d_w0 d_w1 d_w2

finish 6
