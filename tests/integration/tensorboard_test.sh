#!/usr/bin/env bash
# TensorBoard event files (checkpoint.summaries), decoded outside Troupe:
# protoc compiles an independent copy of TensorFlow's event schema, a Python
# reader checks every TFRecord's two masked CRC32Cs and parses the Events;
# the scalars must be the run's own: the loss and accuracy of each progress
# line, the learning rate, the checkpoint save times, the evaluations and
# the final test accuracy, the ps traffic. Sync runs add dropped gradients
# and straggler time. With summaries = false nothing is written.
set -u
. "$(dirname "$0")/lib.sh" # expect, cluster_config, finish, ... (listed there)
bin=$1; root=$2
here=$(cd "$(dirname "$0")" && pwd)
enter_scratch_dir
if ! command -v protoc >/dev/null || ! /usr/bin/python3 -c "import google.protobuf" 2>/dev/null; then
  echo "tensorboard_test: SKIPPED (needs protobuf-compiler and python3-protobuf)"
  exit 77
fi
mkdir gen
protoc --proto_path="$here/tensorboard" --python_out=gen "$here/tensorboard/event.proto"
read_events() { /usr/bin/python3 "$here/tensorboard/read_events.py" gen "$@"; }
run() { # NAME MODE EXTRA
  cluster_config "$1.conf" 2 2 <<CONF
[train]
model = "softmax"
mode = "$2"
learning-rate = 0.1
lr-schedule = "exponential"
lr-decay-steps = 100
lr-decay-rate = 0.5
last-step = 400
log-interval = 100
eval-interval = 200
[checkpoint]
log-dir = "logs/$1"
save-steps = 200
$3
CONF
  timeout 120 "$bin" --config-file="$1.conf" >"$1.out" 2>"$1.log"
}
run async async ""
files=(logs/async/events.out.tfevents.*)
expect "async: one event file in the log directory" test "${#files[@]}" = 1
read_events "${files[@]}" >async.txt 2>async.err; rc=$?
expect "async: every record's CRCs check and every event parses" test "$rc" = 0
expect "async: it starts with file_version brain.Event:2" grep -qx "file_version brain.Event:2" async.txt
for step in 100 200 300 400; do
  want=$(grep -o "chief: global_step=$step/400 loss=[0-9.]*" async.log | grep -o "loss=[0-9.]*" | cut -d= -f2)
  got=$(awk -v s=$step '$1 == s && $2 == "train/loss" { printf "%.4f", $3 }' async.txt)
  expect "async: train/loss at step $step is the log line's ($got, $want)" test "$got" = "$want"
done
acc=$(grep -o "chief: global_step=300/400 loss=[0-9.]* batch_accuracy=[0-9.]*" async.log | grep -o "accuracy=[0-9.]*" | cut -d= -f2)
expect "async: train/batch_accuracy at 300 is the log line's ($acc)" \
  test "$(awk '$1 == 300 && $2 == "train/batch_accuracy" { printf "%.4f", $3 }' async.txt)" = "$acc"
expect "async: the learning rate follows the schedule (0.1 x 0.5^(300/100) = 0.0125)" \
  awk '$1 == 300 && $2 == "train/learning_rate" { f = 1; if ($3 < 0.01249 || $3 > 0.01251) exit 1 } END { exit !f }' async.txt
expect "async: examples/s and steps/s are there" \
  bash -c "grep -q '^400 train/examples_per_sec ' async.txt && grep -q '^400 train/steps_per_sec ' async.txt"
saved=$(grep -c "chief: saved checkpoint" async.log)
expect "async: one checkpoint/save_ms per checkpoint saved ($saved)" \
  test "$(grep -c ' checkpoint/save_ms ' async.txt)" = "$saved"
eval_acc=$(grep -o "evaluation at global_step=200: test_accuracy=[0-9.]*" async.log | cut -d= -f3)
expect "async: the evaluation at step 200 ($eval_acc)" \
  test "$(awk '$1 == 200 && $2 == "eval/test_accuracy" { printf "%.4f", $3 }' async.txt)" = "$eval_acc"
final=$(grep -o '"test_accuracy":[0-9.]*' async.out | cut -d: -f2)
expect "async: the final test accuracy at step 400 ($final)" \
  test "$(awk '$1 == 400 && $2 == "eval/test_accuracy" { printf "%.4f", $3 }' async.txt)" = "$final"
expect "async: ps traffic per shard and the imbalance" \
  bash -c "grep -q '^400 ps/0/megabytes_in ' async.txt && grep -q '^400 ps/1/pushes ' async.txt && grep -q '^400 ps/imbalance ' async.txt"
expect "async: refused steps are counted" grep -q '^400 async/refused_steps 0.0' async.txt

run sync sync ""
read_events logs/sync/events.out.tfevents.* >sync.txt 2>sync.err; rc=$?
expect "sync: the file decodes" test "$rc" = 0
expect "sync: dropped gradients and straggler time" \
  bash -c "grep -q '^400 sync/dropped_gradients ' sync.txt && grep -q '^400 sync/straggler_ms ' sync.txt"

run off async "summaries = false"
expect "summaries = false: no event file" bash -c "! ls logs/off/events.out.tfevents.* 2>/dev/null"
finish
