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
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit
bin=$1; root=$2
tmp=$(mktemp -d)
cd "$tmp" || exit 1
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ -n "${TROUPE_KEEP_LOGS:-}" ] && echo "logs in $tmp" || rm -rf "$tmp"; }
trap cleanup EXIT

"$root/scripts/make-csv-shards" shards --files 8 --rows 50000 --features 64 --classes 10 \
  --seed 3 2>/dev/null
"$root/scripts/make-csv-shards" test --files 1 --rows 2000 --features 64 --classes 10 \
  --seed 3 2>/dev/null
data_mb=$(du -sm shards | cut -f1)
cat >large.conf <<CONF
[cluster]
chief = ["127.0.0.1:7740"]
ps = ["127.0.0.1:7741"]
worker = ["127.0.0.1:7841", "127.0.0.1:7842"]
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
"$bin" --config-file=large.conf --job_name=ps --task_index=0 >ps.out 2>ps.log & pids+=($!)
"$bin" --config-file=large.conf --job_name=chief --task_index=0 >chief.out 2>chief.log & chief=$!
pids+=($chief)
for w in 0 1; do
  "$bin" --config-file=large.conf --job_name=worker --task_index=$w >w$w.out 2>w$w.log & pids+=($!)
done
wait_exit "$chief" 400
expect "the run ends ok" test "$rc" = 0
for w in 0 1; do wait_exit "${pids[$((w + 2))]}" 30; done
acc=$(grep -o '"test_accuracy":[0-9.]*' chief.out | cut -d: -f2)
echo "test accuracy $acc; data: $data_mb MB of CSV, 400000 x 64 floats = 98 MiB"
expect "it learns the data (accuracy above 0.9, got $acc)" \
  awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.9) }'
expect "each worker reads its own four files (200000 examples)" \
  bash -c 'grep -q "training on 200000 of 400000 examples" w0.log && grep -q "training on 200000 of 400000 examples" w1.log'
base=$(grep -o "peak resident memory: [0-9]* MiB" ps.log | grep -o "[0-9]*")
echo "ps:0 (no data) peak resident memory: ${base:-?} MiB"
for w in 0 1; do
  peak=$(grep -o "peak resident memory: [0-9]* MiB" w$w.log | grep -o "[0-9]*")
  echo "worker:$w peak resident memory: ${peak:-?} MiB"
  expect "worker:$w holds less than a third of the data as floats beyond ps:0 ($((${peak:-999} - ${base:-0})) MiB < 33)" \
    test $((${peak:-999} - ${base:-0})) -lt 33
done
echo "large_data_test: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
