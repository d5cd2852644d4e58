#!/usr/bin/env bash
# Connections that never speak (a port scanner, a stranger holding sockets
# open) against a running sync cluster: beyond cluster.max-connections they
# are closed at accept, the rest after 2 x middleman.connection-timeout in
# silence; the ps's descriptors stay bounded, nothing spins, and the
# cluster's own connections (heartbeats every second) are never closed: the
# run finishes "ok":true with every step.
set -u
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit
bin=$1; client=$2; root=$3
tmp=$(mktemp -d)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${TROUPE_KEEP_LOGS:-}" ] && echo "logs in $tmp" || rm -rf "$tmp"; }
trap cleanup EXIT
max=24
sed -e 's/7800/8870/; s/7801/8871/; s/7901/8970/; s/7902/8971/' \
    -e 's/^last-step = .*/last-step = 10000/' -e 's/^log-interval = .*/log-interval = 500/' \
    -e "s/^worker-wait-timeout = .*/&\nmax-connections = $max/" \
    -e 's/^connection-timeout = .*/connection-timeout = 3s/' \
    "$root/config/examples/local-sync-1ps-2workers.conf" >"$tmp/c.conf"
start() { # name job index
  "$bin" --config-file="$tmp/c.conf" --job_name="$2" --task_index="$3" >"$tmp/$1.log" 2>&1 &
  pids+=($!); eval "pid_$1=$!"
}
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

start ps ps 0; start chief chief 0; start w0 worker 0; start w1 worker 1
expect "the sync cluster trains" wait_for_line "$tmp/chief.log" "global_step=500/" 90
expect "the ps says how many connections it holds" \
  grep -q "port 8871: at most $max connections (cluster.max-connections); connections silent for 6000 ms" "$tmp/ps.log"
before=$(fds "$pid_ps"); ticks_before=$(cpu_ticks "$pid_ps")
"$client" --hold 300 15 127.0.0.1:8871 >"$tmp/client.log" 2>&1 &
hold=$!
peak=$before
while kill -0 $hold 2>/dev/null; do n=$(fds "$pid_ps"); [ "$n" -gt "$peak" ] && peak=$n; sleep 0.1; done
ticks_after=$(cpu_ticks "$pid_ps")
sed 's/^/    client: /' "$tmp/client.log"
expect "the ps closed all 300 silent connections" grep -q "held 300 .*closed by the node 300," "$tmp/client.log"
last=$(grep -o 'last after [0-9.]*' "$tmp/client.log" | awk '{ print $3 }')
expect "  the last within 6 s of silence plus a sweep ($last s)" \
  awk -v s="${last:-99}" 'BEGIN { exit !(s >= 5.5 && s <= 9) }'
expect "its descriptors stayed bounded ($before before, at most $peak during)" \
  test "$peak" -le $((before + max + 4))
# 300 connections over ~7 s at a spinning core would be ~700 ticks.
expect "it did not spin ($((ticks_after - ticks_before)) ticks of CPU in the hold)" \
  test $((ticks_after - ticks_before)) -lt 600
# The sweep logs what it closed after closing it: give the line a moment.
expect "it logged the connections it refused at accept" \
  wait_for_line "$tmp/ps.log" "port 8871: .*refused at accept, over cluster.max-connections = $max" 5
expect "it logged the connections it closed in silence" \
  wait_for_line "$tmp/ps.log" "port 8871: .*closed after 6000 ms in silence (from 127.0.0.1:" 5
wait_exit "$pid_chief" 240
expect "the chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok with all 10000 steps" \
  grep -q '"ok":true,"mode":"sync","global_step":10000,' "$tmp/chief.log"
for t in ps w0 w1; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "$t exits 0 (got $rc)" test "$rc" = 0; done
expect "no node lost a peer" grep -q '"lost_workers":0,' "$tmp/chief.log"
expect "  and nothing was closed that the run needed" \
  bash -c "! grep -Eq 'chief: lost|lost the chief|lost ps|lost worker' '$tmp/chief.log' '$tmp/ps.log' '$tmp/w0.log' '$tmp/w1.log'"

[ $fails -eq 0 ] || for f in "$tmp"/*.log; do echo "== $f"; tail -8 "$f"; done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
