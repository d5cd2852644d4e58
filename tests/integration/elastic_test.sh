#!/usr/bin/env bash
# Elastic membership (issue 29) on network namespaces: a job listing 2
# workers (cluster.max-workers = 4) grows to 4 while it trains, workers 2
# and 3 joining from hosts of their own beyond the list, then shrinks to 1
# as workers 1, 2 and 3 get SIGTERM (what `kubectl scale` does). Each
# member is told its new share of the data and reads it from its next
# epoch on; the leavers exit 0; the run ends "ok":true with every update
# applied once (the chief's check of every shard's count).
#   A  async, reports 8 at a time (train.report-every): the leavers send
#      their last batch before they exit
#   B  sync with replicas-to-aggregate = "all": R follows, 2 -> 4 -> 1
# Needs root, ip netns and bridges; skipped (exit 77) where missing.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_task, expect_exit, finish, ... (listed there)
. "$(dirname "$0")/../../scripts/lib/hosts.sh" # add_host, host_cluster_keys, host_middleman
bin=$1
skip() { echo "elastic_test: $1; skipped"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
command -v ip >/dev/null || skip "needs ip (iproute2)"
p=te$$ # namespace and link prefix, unique per run
more_cleanup() { remove_hosts "$p"; }
enter_scratch_dir
why=$(add_switch "$p") || skip "$why"
declare -A addr=([chief]=10.214.0.1 [ps]=10.214.0.2 [w0]=10.214.0.3 [w1]=10.214.0.4
                 [w2]=10.214.0.5 [w3]=10.214.0.6)
for host in chief ps w0 w1 w2 w3; do add_host "$p" "$host" "${addr[$host]}"; done

config() { # name mode last_step
  cat >"$tmp/$1.conf" <<CONF
[cluster]
chief = ["${addr[chief]}:7200"]
ps = ["${addr[ps]}:7201"]
worker = ["${addr[w0]}:7300", "${addr[w1]}:7300"]
max-workers = 4
$(host_cluster_keys 30s 10s)
[train]
model = "mlp"
mode = "$2"
batch-size = 100
learning-rate = 0.1
last-step = $3
log-interval = 500
replicas-to-aggregate = "all"
report-every = $([ "$2" = async ] && echo 8 || echo 1)
$(host_middleman 6s)
CONF
}
start() { # RUN HOST JOB INDEX: task JOB:INDEX of RUN.conf on HOST, named RUN_HOST
  launch=(ip netns exec "$p$2"); start_task "$1_$2" "$tmp/$1.conf" "$3" "$4"; launch=(); }
steps() { grep -o 'global_step=[0-9]*' "$tmp/$1_chief.log" | tail -1 | cut -d= -f2; }
wait_steps() { # RUN STEPS: until the chief has counted more than STEPS
  local end=$((SECONDS + 120))
  while [ $SECONDS -lt $end ]; do [ "$(steps "$1")" -gt "$2" ] 2>/dev/null && return 0; sleep 0.2; done
  return 1; }

grow_and_shrink() { # RUN MODE LAST_STEP
  local r=$1 R=${1^^} at
  config "$r" "$2" "$3"
  start "$r" ps ps 0; start "$r" chief chief 0; start "$r" w0 worker 0; start "$r" w1 worker 1
  expect "$R: the 2 listed workers train" wait_steps "$r" 1000
  start "$r" w2 worker 2; start "$r" w3 worker 3
  expect "$R: worker:2 beyond the list joins" wait_for_line "$tmp/${r}_chief.log" "worker:2 joined" 60
  expect "$R:   and worker:3" wait_for_line "$tmp/${r}_chief.log" "worker:3 joined" 60
  expect "$R: the joiner reads share 3 of 4 at once" \
    wait_for_line "$tmp/${r}_w3.log" "share 3 of 4" 60
  expect "$R: worker:0 reads share 0 of 4 from its next epoch" \
    wait_for_line "$tmp/${r}_w0.log" "epoch [0-9]* reads share 0 of 4" 90
  at=$(steps "$r")
  expect "$R: 4 workers train" wait_steps "$r" $((at + 1000))
  kill -TERM "${pid[${r}_w3]}" "${pid[${r}_w2]}" "${pid[${r}_w1]}"
  expect_exit 0 60 "${r}_w1" "${r}_w2" "${r}_w3"
  expect "$R: the leavers left (SIGTERM), none was lost" \
    bash -c "[ \$(grep -c 'left at step' '$tmp/${r}_chief.log') = 3 ] && ! grep -q 'lost worker' '$tmp/${r}_chief.log'"
  expect "$R: worker:0 alone reads the whole data from its next epoch" \
    wait_for_line "$tmp/${r}_w0.log" "epoch [0-9]* reads share 0 of 1" 120
  wait_exit "${pid[${r}_chief]}" 300
  expect "$R: the run ends ok with every update counted once (chief exit $rc)" \
    grep -q "\"ok\":true,\"mode\":\"$2\",\"global_step\":$3," "$tmp/${r}_chief.log"
  expect "$R:   three workers left, none lost" \
    grep -q '"lost_workers":0,"left_workers":3' "$tmp/${r}_chief.log"
  expect_exit 0 30 "${r}_ps" "${r}_w0"
}

echo "== A: async (reports 8 at a time), 2 -> 4 -> 1 workers"
grow_and_shrink a async 10000

echo "== B: sync, replicas-to-aggregate = \"all\", 2 -> 4 -> 1 workers"
grow_and_shrink b sync 6000
expect "B: R followed the membership up to 4" grep -q "averaging 4 gradient(s) per step from now on" "$tmp/b_chief.log"
expect "B:   and down to 1" grep -q "averaging 1 gradient(s) per step from now on" "$tmp/b_chief.log"

finish 8
