#!/usr/bin/env bash
# A stranger that speaks Troupe's protocol (troupe-foreign-client, not in the
# cluster file) attacks a running sync cluster over plain TCP: it tries to
# initialise, stop, re-plan and read the shard, to push a huge gradient, to
# join under a taken or a missing worker index, to report steps and non-finite
# gradients as worker 0, and to end the run with a forged step_done. Every
# attempt must be refused and logged with the stranger's address, and the run
# must finish "ok":true with every step and the accuracy it has without him.
# Then, below Troupe's protocol: messages naming each of CAF's built-in types
# with hostile bytes (one of them aborted the chief and deafened a ps), and
# BASP headers announcing 4 GiB (a ps allocated them): every node must stay
# up, answering, with its memory bounded.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; client=$2; root=$3
enter_scratch_dir
# Long enough to outlast every attack below on a fast machine (40,000 steps
# took 32 s on one, and its sweeps found the chief gone); steps is set once.
steps=100000
example_config local-sync-1ps-2workers c.conf last-step=$steps log-interval=500

start_cluster c.conf
expect "the sync cluster trains" wait_for_line chief.log "global_step=500/" 90
"$client" "$chief_addr" "${ps_addr[0]}" >client.log 2>&1
client_rc=$?
sed 's/^/    client: /' client.log
expect "every request of the stranger was refused (exit $client_rc)" test "$client_rc" = 0
expect "  and the run was still training meanwhile" kill -0 "${pid[chief]}"
for what in "init of the shard" "pull of the weights" "push of a huge gradient" "stats of the shard" \
            "ready as worker 99" "ready as worker 0" "report as worker 0" "non-finite gradient as worker 0"; do
  expect "  refused: $what" grep -q "^refused: $what" client.log
done
# A forger who read the run id off the wire (here: off the chief's log)
# pushes worker 0's steps with gradients 1000x, over a bulk connection and
# over BASP, and tries a spent ticket (before grant proofs, such a push was
# applied and the real one dropped as "applied already").
run=$(sed -n 's/.*chief: run \([0-9]*\)$/\1/p' chief.log | head -1)
"$client" --forge "$run" "${ps_addr[0]}" >forge.log 2>&1
forge_rc=$?
sed 's/^/    forger: /' forge.log
expect "every push of the forger who knows the run was refused (exit $forge_rc)" test "$forge_rc" = 0
expect "  six pushes, each unauthorized" test "$(grep -c "^refused: .*push.*unauthorized" forge.log)" = 6
peak_mib() { awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$1/status"; }
ps_before=$(peak_mib "${pid[ps0]}"); chief_before=$(peak_mib "${pid[chief]}")
"$client" --sweep ps "${ps_addr[0]}" >sweep-ps.log 2>&1 &
sweep_ps=$!
"$client" --sweep chief "$chief_addr" >sweep-chief.log 2>&1
sweep_chief_rc=$?
wait "$sweep_ps"; sweep_ps_rc=$?
grep -E "config_value|down" sweep-ps.log sweep-chief.log | sed 's/^/    /'
expect "the ps answered after each of $(grep -c ': closed\|: dropped' sweep-ps.log) messages naming CAF's own types (exit $sweep_ps_rc)" \
  test "$sweep_ps_rc" = 0
expect "  and so did the chief (exit $sweep_chief_rc)" test "$sweep_chief_rc" = 0
expect "  @config_value cost the stranger its connection" \
  grep -q "^ps: @config_value with bad variant index: closed" sweep-ps.log
expect "  and the ps logged why, with the stranger's address" \
  grep -q "closed the connection of 127.0.0.1:[0-9]*: type @config_value is not part" ps0.log
"$client" --huge 8 5 "${ps_addr[0]}" >huge-ps.log 2>&1
"$client" --huge 8 5 "$chief_addr" >huge-chief.log 2>&1
sed 's/^/    ps: /' huge-ps.log; sed 's/^/    chief: /' huge-chief.log
expect "headers announcing 4 GiB cost the stranger each connection" \
  grep -q "closed by the node 8$" huge-ps.log
expect "  on the chief too" grep -q "closed by the node 8$" huge-chief.log
expect "the ps's memory stays bounded ($ps_before -> $(peak_mib "${pid[ps0]}") MiB peak)" \
  test "$(peak_mib "${pid[ps0]}")" -lt $((ps_before + 64))
expect "the chief's memory stays bounded ($chief_before -> $(peak_mib "${pid[chief]}") MiB peak)" \
  test "$(peak_mib "${pid[chief]}")" -lt $((chief_before + 64))
sleep 2 # the one-way messages, and the address lookups of the refusals
expect "the shard logged the refused stop with the stranger's address" \
  grep -q "ps:0: refused a stop from .* at 127.0.0.1:" ps0.log
expect "the shard logged the refused change of R" grep -q "ps:0: refused a change of R" ps0.log
expect "the shard logged the refused abort" grep -q "ps:0: refused an abort from .* at 127.0.0.1:" ps0.log
expect "the stranger's exit message (kill) cost it its connection" \
  grep -q "closed the connection of 127.0.0.1:[0-9]*: type @exit is not part" ps0.log
expect "the chief logged the forged step_done" grep -q "chief: refused a step_done" chief.log
expect "  and the forged relayed batch of reports" \
  grep -q "chief: refused a relayed batch of reports from .* at 127.0.0.1:" chief.log
expect "the chief logged the fake worker's non-finite gradient with its address" \
  grep -q "chief: refused a non-finite gradient claiming worker:0 from .* at 127.0.0.1:" chief.log
wait_exit "${pid[chief]}" 420
expect "the chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok with all $steps steps" \
  grep -q "\"ok\":true,\"mode\":\"sync\",\"global_step\":$steps," chief.log
accuracy=$(grep -o '"test_accuracy":[0-9.]*' chief.log | cut -d: -f2)
expect "  and counts the forger's six refused pushes" grep -q '"unauthorized_pushes":6' chief.log
expect "  and the accuracy of an undisturbed run ($accuracy >= 0.80)" \
  awk -v a="${accuracy:-0}" 'BEGIN { exit !(a >= 0.80) }'
expect_exit 0 60 ps0 w0 w1
finish 8
