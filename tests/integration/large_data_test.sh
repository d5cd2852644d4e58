#!/usr/bin/env bash
# A training set several times larger than what a worker holds: 8 CSV shards
# (scripts/make-csv-shards, ~190 MB of text, 400000 examples of 64 features,
# 98 MiB as floats) trained by a chief, a ps and two workers in their own
# processes. Each worker reads its own four files once through (one epoch
# and more), streaming them through a shuffle buffer of 2000 examples; what
# its peak resident memory (logged at exit) holds beyond the ps task's (same
# binary, no data; the CUDA libraries alone make ~140 MiB of it) stays below
# a third of the data as floats, and the run learns the data.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir

"$root/scripts/make-csv-shards" shards --files 8 --rows 50000 --features 64 --classes 10 \
  --seed 3 2>/dev/null
"$root/scripts/make-csv-shards" test --files 1 --rows 2000 --features 64 --classes 10 \
  --seed 3 2>/dev/null
data_mb=$(du -sm shards | cut -f1)
cluster_config large.conf 1 2 <<CONF
[train]
model = "softmax"
batch-size = 100
learning-rate = 0.05
epochs = 1.2
log-interval = 2000
[data]
train = ["shards/part-*.csv"]
test = ["test/part-00000.csv"]
shuffle-buffer = 2000
prefetch = 4
CONF
start_cluster large.conf
wait_exit "${pid[chief]}" 400
expect "the run ends ok" test "$rc" = 0
wait_tasks 30 w0 w1 # (the workers log their peak memory as they exit)
acc=$(field chief.log test_accuracy)
echo "test accuracy $acc; data: $data_mb MB of CSV, 400000 x 64 floats = 98 MiB"
expect "it learns the data (accuracy above 0.9, got $acc)" \
  awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.9) }'
expect "each worker reads its own four files (200000 examples)" \
  bash -c 'grep -q "training on 200000 of 400000 examples" w0.log && grep -q "training on 200000 of 400000 examples" w1.log'
base=$(grep -o "peak resident memory: [0-9]* MiB" ps0.log | grep -o "[0-9]*")
echo "ps:0 (no data) peak resident memory: ${base:-?} MiB"
for w in 0 1; do
  peak=$(grep -o "peak resident memory: [0-9]* MiB" w$w.log | grep -o "[0-9]*")
  echo "worker:$w peak resident memory: ${peak:-?} MiB"
  expect "worker:$w holds less than a third of the data as floats beyond ps:0 ($((${peak:-999} - ${base:-0})) MiB < 33)" \
    test $((${peak:-999} - ${base:-0})) -lt 33
done
finish
