#!/usr/bin/env bash
# Simulated hosts for bench/placement --links: the chief, 2 PS shards and 2
# workers each in a network namespace of their own, with its own address on
# a bridge; each ps shard's link is limited to RATE in both directions with
# tc tbf (its own eth0 for what it sends, the bridge's port for what it
# receives). One run: start the five tasks, read each ps link's byte
# counters once training is under way and once it is near its end, and
# print "examples/s busiest_link_utilisation ps0_tx ps0_rx ps1_tx ps1_rx
# test_accuracy run_examples/s" (examples/s and utilisations of RATE over
# that window, from the chief's log times and the links' counters; the last
# field is the final line's, over the whole run). Exit 77 where namespaces, bridges
# or tbf are missing (not root, no iproute2).
#   bench/lib/links.sh BIN RATE_MBIT STEPS LOG -- troupe-node flags...
set -u
. "$(dirname "$0")/../../scripts/lib/hosts.sh" # add_host
bin=$1; rate=$2; steps=$3; log=$4; shift 5
[ "$(id -u)" = 0 ] || exit 77
command -v ip >/dev/null && command -v tc >/dev/null || exit 77
p=tb$$
ip netns add "${p}sw" 2>/dev/null || exit 77
tmp=$(mktemp -d)
pids=()
cleanup() {
  stop_tasks "${pids[@]}"
  remove_hosts "$p"
  rm -rf "$tmp"
}
trap cleanup EXIT
ip -n "${p}sw" link add br0 type bridge 2>/dev/null || exit 77
ip -n "${p}sw" link set br0 up
declare -A addr=([chief]=10.214.0.1 [ps0]=10.214.0.2 [ps1]=10.214.0.3 [w0]=10.214.0.4 [w1]=10.214.0.5)
for host in chief ps0 ps1 w0 w1; do
  add_host "$p" "$host" "${addr[$host]}"
done
for ps in ps0 ps1; do # out of the ps, and into it
  ip netns exec "$p$ps" tc qdisc add dev eth0 root tbf rate "${rate}mbit" burst 256kb latency 100ms \
    || exit 77
  ip netns exec "${p}sw" tc qdisc add dev "$p${ps}s" root tbf rate "${rate}mbit" burst 256kb \
    latency 100ms || exit 77
done
cat >"$tmp/c.conf" <<CONF
[cluster]
chief = ["${addr[chief]}:7400"]
ps = ["${addr[ps0]}:7401", "${addr[ps1]}:7401"]
worker = ["${addr[w0]}:7402", "${addr[w1]}:7402"]
allow-plain = true ; namespaces this script made: nobody else reaches them
connect-timeout = 60s
request-timeout = 60s
[train]
optimizer = "adam"
batch-size = 100
learning-rate = 0.001
last-step = $steps
log-interval = 1
[middleman]
heartbeat-interval = 1s
connection-timeout = 30s
CONF
flags=("$@")
start() {
  ip netns exec "$p$1" "$bin" --config-file="$tmp/c.conf" --job_name="$2" --task_index="$3" \
    "${flags[@]}" >"$tmp/$1.log" 2>&1 &
  pids+=($!)
}
start ps0 ps 0; start ps1 ps 1; start chief chief 0; start w0 worker 0; start w1 worker 1
counters() { # the ps links' bytes: ps0 tx rx ps1 tx rx, then the time
  local out=""
  for ps in ps0 ps1; do
    out+="$(ip netns exec "$p$ps" cat /sys/class/net/eth0/statistics/tx_bytes) "
    out+="$(ip netns exec "$p$ps" cat /sys/class/net/eth0/statistics/rx_bytes) "
  done
  echo "$out$(date +%s.%N)"
}
wait_step() { # step, seconds
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    grep -q "global_step=$1/" "$tmp/chief.log" 2>/dev/null && return 0
    kill -0 "${pids[2]}" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
from=$((steps / 5)); to=$((steps - steps / 10))
wait_step "$from" 600 || { tail -20 "$tmp/chief.log" >&2; exit 1; }
first=$(counters)
wait_step "$to" 900 || { tail -20 "$tmp/chief.log" >&2; exit 1; }
last=$(counters)
wait "${pids[2]}" || { tail -20 "$tmp/chief.log" >&2; exit 1; }
cp "$tmp/chief.log" "$log"
eps=$(grep -o '"examples_per_sec":[0-9.]*' "$tmp/chief.log" | tail -1 | cut -d: -f2)
acc=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/chief.log" | tail -1 | cut -d: -f2)
at_step() { # the chief's log time of a step, in seconds of the day
  grep -m1 "global_step=$1/" "$tmp/chief.log" | grep -o '[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]*' | head -1 \
    | awk -F: '{ print $1 * 3600 + $2 * 60 + $3 }'
}
awk -v a="$first" -v b="$last" -v rate="$rate" -v eps="$eps" -v acc="$acc" -v t0="$(at_step "$from")" \
    -v t1="$(at_step "$to")" -v steps=$((to - from)) 'BEGIN {
  split(a, x, " "); split(b, y, " "); secs = y[5] - x[5]; cap = rate * 1e6 / 8 * secs
  top = 0
  for (i = 1; i <= 4; i++) { u[i] = (y[i] - x[i]) / cap; if (u[i] > top) top = u[i] }
  printf "%.1f %.3f %.3f %.3f %.3f %.3f %s %s\n", steps * 100 / (t1 - t0), top, u[1], u[2], u[3], u[4], acc, eps }'
