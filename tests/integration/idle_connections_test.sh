#!/usr/bin/env bash
# Connections that never speak (a port scanner, a stranger holding sockets
# open) against a running sync cluster: beyond cluster.max-connections they
# are closed at accept, the rest after 2 x middleman.connection-timeout in
# silence; the ps's descriptors stay bounded, nothing spins, and the
# cluster's own connections (heartbeats every second) are never closed: the
# run finishes "ok":true with every step.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; client=$2; root=$3
enter_scratch_dir
max=24
example_config local-sync-1ps-2workers c.conf last-step=10000 log-interval=500 connection-timeout=3s
sed -i "s/^worker-wait-timeout = .*/&\nmax-connections = $max/" c.conf
ps_port=${ps_addr[0]##*:}
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

start_cluster c.conf
expect "the sync cluster trains" wait_for_line chief.log "global_step=500/" 90
expect "the ps says how many connections it holds" \
  grep -q "port $ps_port: at most $max connections (cluster.max-connections); connections silent for 6000 ms" ps0.log
before=$(fds "${pid[ps0]}"); ticks_before=$(cpu_ticks "${pid[ps0]}")
"$client" --hold 300 15 "${ps_addr[0]}" >client.log 2>&1 &
hold=$!
peak=$before
while kill -0 $hold 2>/dev/null; do n=$(fds "${pid[ps0]}"); [ "$n" -gt "$peak" ] && peak=$n; sleep 0.1; done
ticks_after=$(cpu_ticks "${pid[ps0]}")
sed 's/^/    client: /' client.log
expect "the ps closed all 300 silent connections" grep -q "held 300 .*closed by the node 300," client.log
last=$(grep -o 'last after [0-9.]*' client.log | awk '{ print $3 }')
expect "  the last within 6 s of silence plus a sweep ($last s)" \
  awk -v s="${last:-99}" 'BEGIN { exit !(s >= 5.5 && s <= 9) }'
expect "its descriptors stayed bounded ($before before, at most $peak during)" \
  test "$peak" -le $((before + max + 4))
# 300 connections over ~7 s at a spinning core would be ~700 ticks.
expect "it did not spin ($((ticks_after - ticks_before)) ticks of CPU in the hold)" \
  test $((ticks_after - ticks_before)) -lt 600
# The sweep logs what it closed after closing it: give the line a moment.
expect "it logged the connections it refused at accept" \
  wait_for_line ps0.log "port $ps_port: .*refused at accept, over cluster.max-connections = $max" 5
expect "it logged the connections it closed in silence" \
  wait_for_line ps0.log "port $ps_port: .*closed after 6000 ms in silence (from 127.0.0.1:" 5
wait_exit "${pid[chief]}" 240
expect "the chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok with all 10000 steps" \
  grep -q '"ok":true,"mode":"sync","global_step":10000,' chief.log
expect_exit 0 60 ps0 w0 w1
expect "no node lost a peer" grep -q '"lost_workers":0,' chief.log
expect "  and nothing was closed that the run needed" \
  bash -c "! grep -Eq 'chief: lost|lost the chief|lost ps|lost worker' chief.log ps0.log w0.log w1.log"

finish 8
