#!/usr/bin/env bash
# A stranger that speaks Troupe's protocol (troupe-foreign-client, not in the
# cluster file) attacks a running sync cluster over plain TCP: it tries to
# initialise, stop, re-plan and read the shard, to push a huge gradient, to
# join under a taken or a missing worker index, to report steps and non-finite
# gradients as worker 0, and to end the run with a forged step_done. Every
# attempt must be refused and logged with the stranger's address, and the run
# must finish "ok":true with every step and the accuracy it has without him.
set -u
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit
bin=$1; client=$2; root=$3
tmp=$(mktemp -d)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
sed -e 's/7800/8860/; s/7801/8861/; s/7901/8960/; s/7902/8961/' \
    -e 's/^last-step = .*/last-step = 10000/' -e 's/^log-interval = .*/log-interval = 500/' \
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
sleep 2 # the one-way messages, and the address lookups of the refusals
expect "the shard logged the refused stop with the stranger's address" \
  grep -q "ps:0: refused a stop from .* at 127.0.0.1:" "$tmp/ps.log"
expect "the shard logged the refused change of R" grep -q "ps:0: refused a change of R" "$tmp/ps.log"
expect "the shard ignored the stranger's exit message" grep -q "ignored an exit message" "$tmp/ps.log"
expect "the chief logged the forged step_done" grep -q "chief: refused a step_done" "$tmp/chief.log"
expect "the chief logged the fake worker's non-finite gradient with its address" \
  grep -q "chief: refused a non-finite gradient claiming worker:0 from .* at 127.0.0.1:" "$tmp/chief.log"
wait_exit "$pid_chief" 240
expect "the chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok with all 10000 steps" \
  grep -q '"ok":true,"mode":"sync","global_step":10000,' "$tmp/chief.log"
accuracy=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/chief.log" | cut -d: -f2)
expect "  and the accuracy of an undisturbed run ($accuracy >= 0.80)" \
  awk -v a="${accuracy:-0}" 'BEGIN { exit !(a >= 0.80) }'
for t in ps w0 w1; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "$t exits 0 (got $rc)" test "$rc" = 0; done

[ $fails -eq 0 ] || for f in "$tmp"/*.log; do echo "== $f"; tail -8 "$f"; done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
