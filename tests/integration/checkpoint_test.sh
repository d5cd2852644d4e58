#!/usr/bin/env bash
# Checkpoints through real processes (MLP, Adam, 2 ps shards, 2 workers):
#   A  async, saving every 500 steps: checkpoints at each fence and at the end,
#      keep-N, TF's pointer file; numpy (the reader in docs/operations.md)
#      reads the last one, and the model in it scores the test accuracy the
#      run reported.
#   B  a new run with --restore=auto onto 3 ps shards continues from there
#      (values, Adam's slots and step, data positions) to a later last-step.
#   C  the latest checkpoint corrupted: auto falls back to the previous one
#      and says so.
#   D  another model, or another optimizer: exit 2 naming the variable and
#      both shapes, before anything starts; --restore=never starts over.
#   E  sync mode saves and restores too.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir
py=/usr/bin/python3; [ -x "$py" ] || py=python3
# config NAME PS_COUNT LAST_STEP MODE: a chief, PS_COUNT ps tasks and 2 workers
config() {
  cluster_config "$tmp/$1.conf" "$2" 2 <<CONF
connect-timeout = 60s
$(train_section mode="\"$4\"" batch-size=100 last-step="$3" \
                data-dir='"/usr/share/datasets/fashion-mnist"')
[checkpoint]
log-dir = "logs"
save-steps = 500
save-interval = 0s
keep = 2
[middleman]
heartbeat-interval = 1s
connection-timeout = 10s
CONF
}
run_cluster() { # NAME PS_COUNT [extra chief flags]; waits for every task
  local name=$1 n=$2 i others=(); shift 2
  start_task "$name-chief" "$tmp/$name.conf" chief 0 "$@"
  for ((i = 0; i < n; i++)); do others+=("$name-ps$i"); start_task "$name-ps$i" "$tmp/$name.conf" ps $i; done
  for i in 0 1; do others+=("$name-w$i"); start_task "$name-w$i" "$tmp/$name.conf" worker $i; done
  wait_exit "${pid[$name-chief]}" 300; chief_rc=$rc
  if wait_tasks 60 "${others[@]}"; then all_rc=0; else all_rc="($exits)"; fi
}
final() { grep -o '{"event":"final".*' "$tmp/$1-chief.log"; }
field() { final "$1" | grep -o "\"$2\":[^,}]*" | cut -d: -f2; }

# A
config a 2 1500 async
run_cluster a 2
expect "A: the run ends ok (chief $chief_rc, others $all_rc)" test "$chief_rc$all_rc" = 00
expect "A:   with every step" test "$(field a global_step)" = 1500
expect "A: it saved during training and at the end" \
  bash -c "grep -q 'saved checkpoint logs/ckpt-5' '$tmp/a-chief.log' && grep -q 'saved checkpoint logs/ckpt-1500 (step 1500' '$tmp/a-chief.log'"
expect "A: the fence paused training for milliseconds at most" \
  bash -c "grep -o 'training paused) [0-9.]* ms' '$tmp/a-chief.log' | awk '{ if (\$3 > 100) bad = 1 } END { exit bad }'"
expect "A: two are kept, the pointer names the last" \
  bash -c "[ \$(ls -d '$tmp'/logs/ckpt-* | wc -l) = 2 ] && grep -q 'model_checkpoint_path: \"ckpt-1500\"' '$tmp/logs/checkpoint'"
"$py" "$root/tests/integration/read_checkpoint_check.py" "$root/docs/operations.md" "$tmp/logs/ckpt-1500" \
  /usr/share/datasets/fashion-mnist >"$tmp/numpy.txt" 2>&1
cat "$tmp/numpy.txt" | sed 's/^/    numpy: /'
reported=$(field a test_accuracy); read_back=$(awk '/^accuracy/ { print $2 }' "$tmp/numpy.txt")
expect "A: numpy reads it, and its model scores the reported accuracy ($read_back vs $reported)" \
  awk -v a="${read_back:-0}" -v b="${reported:-1}" 'BEGIN { d = a - b; exit !(d < 0.0006 && d > -0.0006) }'
expect "A:   with Adam's slots under TF's names" grep -q "hidden1/weights/Adam hidden1/weights/Adam_1" "$tmp/numpy.txt"

# B
config b 3 2500 async
cp -r "$tmp/logs" "$tmp/logs-after-a"
sed -i 's/^keep = 2/keep = 5/' "$tmp/b.conf"
run_cluster b 3
expect "B: a new run restores the last checkpoint" grep -q "checkpoint: restoring logs/ckpt-1500 (step 1500)" "$tmp/b-chief.log"
expect "B:   onto 3 shards at step 1500" bash -c "grep -l 'at step 1500' '$tmp'/b-ps*.log | wc -l | grep -qx 3"
expect "B:   the workers continue their data" grep -q "continuing its data at epoch" "$tmp/b-w0.log"
expect "B: it ends ok at last-step 2500 (chief $chief_rc, others $all_rc)" \
  bash -c "[ '$chief_rc$all_rc' = 00 ] && [ '$(field b global_step)' = 2500 ]"
expect "B:   having trained the 1000 steps left ($(field b examples) examples)" test "$(field b examples)" = 100000
# One final snapshot of async training swings by about a point either way:
# a full-suite run on 2026-11-27 ended B at 0.8548 after A's 0.8675, where
# the other runs improved. Lost state would fall further; the restore lines
# and the 1000 steps' examples above are the firmer evidence.
acc_b=$(field b test_accuracy)
expect "B:   and stayed near the restored model or above ($acc_b >= $reported - 0.02)" \
  awk -v a="${acc_b:-0}" -v b="${reported:-1}" 'BEGIN { exit !(a >= b - 0.02) }'

# C
rm -rf "$tmp/logs" && cp -r "$tmp/logs-after-a" "$tmp/logs"
printf 'X' | dd of="$tmp/logs/ckpt-1500/ps-1.safetensors" bs=1 seek=300 conv=notrunc 2>/dev/null
config c 2 1500 async
run_cluster c 2
expect "C: the corrupt checkpoint is named" grep -q "ckpt-1500/ps-1.safetensors: checksum mismatch (corrupt).*trying the previous" "$tmp/c-chief.log"
expect "C:   and the previous one restored" grep -q "checkpoint: restoring logs/ckpt-10[0-9]* (step 10[0-9]*)" "$tmp/c-chief.log"
expect "C:   the run ends ok at 1500 (chief $chief_rc, others $all_rc)" \
  bash -c "[ '$chief_rc$all_rc' = 00 ] && [ '$(field c global_step)' = 1500 ]"

# D
config d 2 3000 async
sed -i 's/^model = "mlp"/model = "softmax"/' "$tmp/d.conf"
"$bin" --config-file="$tmp/d.conf" --job_name=chief --task_index=0 >"$tmp/d.out" 2>&1
rc=$?
expect "D: another model is refused with exit 2 (got $rc)" test "$rc" = 2
expect "D:   naming the variable and its shape" grep -q "variable softmax/weights \[784, 10\] is not in the checkpoint" "$tmp/d.out"
sed -i 's/^model = "softmax"/model = "mlp"/; s/^optimizer = "adam"/optimizer = "momentum"/' "$tmp/d.conf"
"$bin" --config-file="$tmp/d.conf" --job_name=chief --task_index=0 >"$tmp/d2.out" 2>&1
rc=$?
expect "D: another optimizer is refused with exit 2 (got $rc)" \
  bash -c "[ $rc = 2 ] && grep -q \"optimizer = 'adam', this run uses 'momentum'\" '$tmp/d2.out'"
sed -i 's/^optimizer = "momentum"/optimizer = "adam"/' "$tmp/d.conf"
sed -i 's/^last-step = 3000/last-step = 200/' "$tmp/d.conf"
run_cluster d 2 --restore=never
expect "D: --restore=never starts over" \
  bash -c "grep -q 'restore=never: initialising from the seed' '$tmp/d-chief.log' && [ '$(field d global_step)' = 200 ] && [ '$chief_rc' = 0 ]"

# E
rm -rf "$tmp/logs"
config e 2 1200 sync
run_cluster e 2
expect "E: sync saves during training and at the end (chief $chief_rc)" \
  bash -c "[ '$chief_rc$all_rc' = 00 ] && grep -q 'saved checkpoint logs/ckpt-1200 (step 1200' '$tmp/e-chief.log' && grep -q 'saved checkpoint logs/ckpt-50[0-9] ' '$tmp/e-chief.log'"
sed -i 's/^last-step = 1200/last-step = 1600/' "$tmp/e.conf"
run_cluster e 2
expect "E: and a sync run restores it and ends ok at 1600" \
  bash -c "grep -q 'restoring logs/ckpt-1200 (step 1200)' '$tmp/e-chief.log' && [ '$chief_rc$all_rc' = 00 ] && [ '$(field e global_step)' = 1600 ]"

# F (issue 25): the job started again once it is done (its latest checkpoint
# is at last-step): nothing to train, and every task exits 0 at once, the
# workers told to stop as they connect instead of waiting out a timeout.
started=$SECONDS
run_cluster e 2
expect "F: a finished job started again: every task exits 0 (chief $chief_rc, others $all_rc)" \
  test "$chief_rc$all_rc" = 00
expect "F:   within seconds ($((SECONDS - started)) s; the timeouts it used to wait out are 60 s)" \
  test $((SECONDS - started)) -lt 45
expect "F:   the chief says there is nothing to train" grep -q "nothing to train" "$tmp/e-chief.log"
expect "F:   and the workers were stopped by it" grep -q "stopped by the chief" "$tmp/e-w0.log"

# G (issue 25): SIGTERM to a chief whose ps tasks are not up yet ended only
# by SIGKILL; now it exits at once, saying so, with 6 (preempted: a
# scheduler starts it again; issue 54).
config g 1 1000 async # (its ps task never starts)
sed -i 's/^connect-timeout = .*/connect-timeout = 120s/' "$tmp/g.conf"
start_task g-chief "$tmp/g.conf" chief 0
sleep 3
kill -TERM "${pid[g-chief]}"; term_at=$SECONDS
wait_exit "${pid[g-chief]}" 20
# (bounds with room for a loaded machine: ctest runs two tests at once)
expect "G: SIGTERM to a chief still connecting: it exits 6 (got $rc) within 10 s ($((SECONDS - term_at)) s; it used to take SIGKILL)" \
  bash -c "[ '$rc' = 6 ] && [ $((SECONDS - term_at)) -le 10 ]"
expect "G:   saying what it was waiting for" \
  grep -q '"preempted":true.*stopped by SIGTERM while waiting for the ps tasks; nothing had started' "$tmp/g-chief.log"

# G2 (issue 52): SIGTERM to a ps task waiting for its chief ended it with 143
# and no line; now it says so and exits 6 (preempted; nothing was lost).
start_task g-ps0 "$tmp/g.conf" ps 0
sleep 3
kill -TERM "${pid[g-ps0]}"; term_at=$SECONDS
wait_exit "${pid[g-ps0]}" 20
expect "G2: SIGTERM to a ps waiting for its chief: it exits 6 (got $rc) within 10 s" \
  bash -c "[ '$rc' = 6 ] && [ $((SECONDS - term_at)) -le 10 ]"
expect "G2:   saying so" grep -q "stopped by SIGTERM while waiting for its chief; nothing to save" \
  "$tmp/g-ps0.log"

# H (issue 25): SIGTERM while the chief waits for a lost ps logged "stopped
# by SIGTERM before training began" after thousands of steps.
rm -rf "$tmp/logs"
config h 2 1000000 async
start_cluster "$tmp/h.conf" h-
wait_for_line "$tmp/h-chief.log" "saved checkpoint logs/ckpt-500 " 90
kill -9 "${pid[h-ps1]}"
wait_for_line "$tmp/h-chief.log" "lost ps:1" 20
kill -TERM "${pid[h-chief]}"; term_at=$SECONDS
wait_exit "${pid[h-chief]}" 30; h_rc=$rc
expect "H: SIGTERM while waiting for a lost ps: the chief exits 6 (got $h_rc) in $((SECONDS - term_at)) s" \
  bash -c "[ '$h_rc' = 6 ] && [ $((SECONDS - term_at)) -le 20 ]"
expect "H:   saying so, and where a restart continues" \
  grep -q '"preempted":true.*stopped by SIGTERM while waiting for lost ps:1 (lost at step [0-9]*); checkpoint saved at step [0-9]*' "$tmp/h-chief.log"
wait_tasks 30 h-ps0 h-w0 h-w1
expect "H:   and the other tasks exit 6 too ($exits)" test "$exits" = "h-ps0:6 h-w0:6 h-w1:6"

finish 5
