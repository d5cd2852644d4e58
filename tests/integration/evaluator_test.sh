#!/usr/bin/env bash
# The evaluator job (TensorFlow's): a troupe-node --job_name=evaluator
# beside a training run (its tasks as processes) gets the chief's checkpoints over the network (it
# runs in a directory of its own: no volume shared with the chief; issue 26),
# evaluates new ones as they appear (keep = 2 deletes them meanwhile), logs
# each and writes eval/ TensorBoard scalars in its own log directory, scores
# the last one as the run's final line does (the chief waits for it), and
# exits 0 when training is done. Started from TF_CONFIG. Without a chief it
# gives up after connect-timeout; without checkpoint.log-dir it says what is
# missing (exit 2). Beside an embedding model (ctr-fm) it scores the
# checkpoints' tables, AUC and log loss included.
set -u
. "$(dirname "$0")/lib.sh" # expect, cluster_config, train_section, tf_config, ... (listed there)
bin=$1; root=$2
here=$(cd "$(dirname "$0")" && pwd)
enter_scratch_dir
cluster_config run.conf 1 2 <<CONF
$(train_section last-step=2000)
[checkpoint]
log-dir = "logs/run"
save-steps = 250
keep = 2
CONF
mkdir elsewhere
(cd elsewhere && TF_CONFIG=$(tf_config ../run.conf evaluator 0) \
  exec "$bin" --config-file=../run.conf >../eval.out 2>../eval.log) & evaluator=$!
pids+=($evaluator)
timeout 300 "$root/scripts/local-cluster" run.conf --timeout 280 --bin "$bin" >run.out 2>run.log; rc=$?
expect "the training run ends ok" test "$rc" = 0
wait_exit "$evaluator" 120
expect "the evaluator (from TF_CONFIG) exits 0 once training is done (got $rc)" test "$rc" = 0
n=$(grep -c "evaluator: checkpoint .* test_accuracy=" eval.log)
echo "evaluations: $n; skipped (deleted or incomplete while read): $(grep -c 'evaluator: skipping' eval.log)"
expect "it evaluated several checkpoints as they came ($n)" test "$n" -ge 2
final=$(grep -o '"test_accuracy":[0-9.]*' run.out | cut -d: -f2)
last=$(grep -o "(step 2000): test_accuracy=[0-9.]*" eval.log | cut -d= -f2)
expect "its evaluation of step 2000 is the run's final accuracy ($last, $final)" \
  test -n "$last" -a "$last" = "$final"
expect "it wrote TensorBoard scalars under its own eval/" \
  bash -c "ls elsewhere/logs/run/eval/events.out.tfevents.* >/dev/null"
expect "  and nothing into the chief's log directory" bash -c "! test -e logs/run/eval"
if command -v protoc >/dev/null && /usr/bin/python3 -c "import google.protobuf" 2>/dev/null; then
  mkdir gen && protoc --proto_path="$here/tensorboard" --python_out=gen "$here/tensorboard/event.proto"
  /usr/bin/python3 "$here/tensorboard/read_events.py" gen elsewhere/logs/run/eval/events.out.tfevents.* >eval.txt
  expect "  with eval/test_accuracy at step 2000" \
    test "$(awk '$1 == 2000 && $2 == "eval/test_accuracy" { printf "%.4f", $3 }' eval.txt)" = "$final"
fi
# With no chief to follow it gives up after connect-timeout (exit 5), saying
# where it looked, instead of waiting for ever.
sed -e 's/^\[cluster\]/[cluster]\nconnect-timeout = 2s/' run.conf >gone.conf
timeout 60 "$bin" --config-file=gone.conf --job_name=evaluator >gone.out 2>gone.log; rc=$?
expect "without a chief: exit 5, lost_peer (got $rc), naming where it looked" \
  bash -c "test $rc = 5 && grep -q 'no chief reachable at $chief_addr' gone.log"
# An embedding model (ctr-fm on make-ctr-data's rows): the evaluator scores each
# checkpoint's table as the chief scores the shards' rows, AUC and log loss
# included, and writes them as eval/ scalars. 40 epochs (720 steps, a few
# seconds): an evaluator that first finds the chief after the run ended
# exits 5 by design, and 2 epochs ended within 0.2 s.
"$root/scripts/make-ctr-data" data/ctr --rows 20000 --vocab 10-2000 --seed 3 >ctr-data.log 2>&1
example_config ctr-fm ctr.conf epochs=40 log-interval=0 eval-interval=0 log-dir='"logs/ctr"'
sed -i 's/^save-interval = .*/save-steps = 60/' ctr.conf
mkdir ctr-elsewhere && ln -s ../data ctr-elsewhere/data
(cd ctr-elsewhere && exec "$bin" --config-file=../ctr.conf --job_name=evaluator \
  >../ctr-eval.out 2>../ctr-eval.log) & evaluator=$!
pids+=($evaluator)
timeout 300 "$root/scripts/local-cluster" ctr.conf --timeout 280 --bin "$bin" >ctr-run.out 2>ctr-run.log; rc=$?
expect "ctr-fm beside an evaluator: the run ends ok" test "$rc" = 0
wait_exit "$evaluator" 120
expect "its evaluator exits 0 once training is done (got $rc)" test "$rc" = 0
step=$(grep -o '"global_step":[0-9]*' ctr-run.out | tail -1 | cut -d: -f2)
final=$(grep -o '"test_auc":[0-9.]*' ctr-run.out | tail -1 | cut -d: -f2)
last=$(grep -o "(step $step): test_auc=[0-9.]*" ctr-eval.log | cut -d= -f2)
echo "ctr-fm: $(grep -c 'evaluator: checkpoint .* test_auc=' ctr-eval.log) evaluations with AUC"
expect "  its AUC of step $step is the run's final AUC ($last, $final)" \
  test -n "$last" -a "$last" = "$(awk -v x="$final" 'BEGIN { printf "%.4f", x }')"
if [ -f gen/event_pb2.py ]; then
  /usr/bin/python3 "$here/tensorboard/read_events.py" gen ctr-elsewhere/logs/ctr/eval/events.out.tfevents.* >ctr-eval.txt
  expect "  with eval/test_auc and eval/test_logloss at step $step" \
    eval "grep -q '^$step eval/test_auc ' ctr-eval.txt && grep -q '^$step eval/test_logloss ' ctr-eval.txt"
fi
sed '/log-dir/d' run.conf >nolog.conf
"$bin" --config-file=nolog.conf --job_name=evaluator >/dev/null 2>nolog.err; rc=$?
expect "without checkpoint.log-dir: exit 2, saying so" \
  bash -c "test $rc = 2 && grep -q 'the evaluator keeps its copies of the chief.s checkpoints' nolog.err"
finish
