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
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit
bin=$1; client=$2; root=$3
tmp=$(mktemp -d)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
sed -e 's/7800/8860/; s/7801/8861/; s/7901/8960/; s/7902/8961/' \
    -e "s/^last-step = .*/last-step = 40000/" -e 's/^log-interval = .*/log-interval = 500/' \
    "$root/config/examples/local-sync-1ps-2workers.conf" >"$tmp/c.conf"
start() { # name job index
  "$bin" --config-file="$tmp/c.conf" --job_name="$2" --task_index="$3" >"$tmp/$1.log" 2>&1 &
  pids+=($!); eval "pid_$1=$!"
}

start ps ps 0; start chief chief 0; start w0 worker 0; start w1 worker 1
expect "the sync cluster trains" wait_for_line "$tmp/chief.log" "global_step=500/" 90
"$client" 127.0.0.1:8860 127.0.0.1:8861 >"$tmp/client.log" 2>&1
client_rc=$?
sed 's/^/    client: /' "$tmp/client.log"
expect "every request of the stranger was refused (exit $client_rc)" test "$client_rc" = 0
expect "  and the run was still training meanwhile" kill -0 "$pid_chief"
for what in "init of the shard" "pull of the weights" "push of a huge gradient" "stats of the shard" \
            "ready as worker 99" "ready as worker 0" "report as worker 0" "non-finite gradient as worker 0"; do
  expect "  refused: $what" grep -q "^refused: $what" "$tmp/client.log"
done
# A forger who read the run id off the wire (here: off the chief's log)
# pushes worker 0's steps with gradients 1000x, over a bulk connection and
# over BASP, and tries a spent ticket (before grant proofs, such a push was
# applied and the real one dropped as "applied already").
run=$(sed -n 's/.*chief: run \([0-9]*\)$/\1/p' "$tmp/chief.log" | head -1)
"$client" --forge "$run" 127.0.0.1:8861 >"$tmp/forge.log" 2>&1
forge_rc=$?
sed 's/^/    forger: /' "$tmp/forge.log"
expect "every push of the forger who knows the run was refused (exit $forge_rc)" test "$forge_rc" = 0
expect "  six pushes, each unauthorized" test "$(grep -c "^refused: .*push.*unauthorized" "$tmp/forge.log")" = 6
peak_mib() { awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$1/status"; }
ps_before=$(peak_mib "$pid_ps"); chief_before=$(peak_mib "$pid_chief")
"$client" --sweep ps 127.0.0.1:8861 >"$tmp/sweep-ps.log" 2>&1 &
sweep_ps=$!
"$client" --sweep chief 127.0.0.1:8860 >"$tmp/sweep-chief.log" 2>&1
sweep_chief_rc=$?
wait "$sweep_ps"; sweep_ps_rc=$?
grep -E "config_value|down" "$tmp/sweep-ps.log" "$tmp/sweep-chief.log" | sed 's/^/    /'
expect "the ps answered after each of $(grep -c ': closed\|: dropped' "$tmp/sweep-ps.log") messages naming CAF's own types (exit $sweep_ps_rc)" \
  test "$sweep_ps_rc" = 0
expect "  and so did the chief (exit $sweep_chief_rc)" test "$sweep_chief_rc" = 0
expect "  @config_value cost the stranger its connection" \
  grep -q "^ps: @config_value with bad variant index: closed" "$tmp/sweep-ps.log"
expect "  and the ps logged why, with the stranger's address" \
  grep -q "closed the connection of 127.0.0.1:[0-9]*: type @config_value is not part" "$tmp/ps.log"
"$client" --huge 8 5 127.0.0.1:8861 >"$tmp/huge-ps.log" 2>&1
"$client" --huge 8 5 127.0.0.1:8860 >"$tmp/huge-chief.log" 2>&1
sed 's/^/    ps: /' "$tmp/huge-ps.log"; sed 's/^/    chief: /' "$tmp/huge-chief.log"
expect "headers announcing 4 GiB cost the stranger each connection" \
  grep -q "closed by the node 8$" "$tmp/huge-ps.log"
expect "  on the chief too" grep -q "closed by the node 8$" "$tmp/huge-chief.log"
expect "the ps's memory stays bounded ($ps_before -> $(peak_mib "$pid_ps") MiB peak)" \
  test "$(peak_mib "$pid_ps")" -lt $((ps_before + 64))
expect "the chief's memory stays bounded ($chief_before -> $(peak_mib "$pid_chief") MiB peak)" \
  test "$(peak_mib "$pid_chief")" -lt $((chief_before + 64))
sleep 2 # the one-way messages, and the address lookups of the refusals
expect "the shard logged the refused stop with the stranger's address" \
  grep -q "ps:0: refused a stop from .* at 127.0.0.1:" "$tmp/ps.log"
expect "the shard logged the refused change of R" grep -q "ps:0: refused a change of R" "$tmp/ps.log"
expect "the shard logged the refused abort" grep -q "ps:0: refused an abort from .* at 127.0.0.1:" "$tmp/ps.log"
expect "the stranger's exit message (kill) cost it its connection" \
  grep -q "closed the connection of 127.0.0.1:[0-9]*: type @exit is not part" "$tmp/ps.log"
expect "the chief logged the forged step_done" grep -q "chief: refused a step_done" "$tmp/chief.log"
expect "the chief logged the fake worker's non-finite gradient with its address" \
  grep -q "chief: refused a non-finite gradient claiming worker:0 from .* at 127.0.0.1:" "$tmp/chief.log"
wait_exit "$pid_chief" 240
expect "the chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok with all 40000 steps" \
  grep -q '"ok":true,"mode":"sync","global_step":40000,' "$tmp/chief.log"
accuracy=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/chief.log" | cut -d: -f2)
expect "  and counts the forger's six refused pushes" grep -q '"unauthorized_pushes":6' "$tmp/chief.log"
expect "  and the accuracy of an undisturbed run ($accuracy >= 0.80)" \
  awk -v a="${accuracy:-0}" 'BEGIN { exit !(a >= 0.80) }'
for t in ps w0 w1; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "$t exits 0 (got $rc)" test "$rc" = 0; done

[ $fails -eq 0 ] || for f in "$tmp"/*.log; do echo "== $f"; tail -8 "$f"; done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
