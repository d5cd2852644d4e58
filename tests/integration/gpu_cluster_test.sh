#!/usr/bin/env bash
# On a machine with a CUDA device: the CNN trained through real processes by
# one GPU worker (config/examples/local-gpu-cnn.conf) and by a CPU and a GPU worker
# together (config/examples/local-mixed-cnn.conf), each to >= 0.90 test accuracy with
# every process exiting 0. Elsewhere: skipped (exit 77), saying so.
#   gpu_cluster_test.sh TROUPE_NODE ROOT [DATA_DIR [LOG_DIR [SECONDS_PER_RUN]]]
# LOG_DIR keeps each run's log (scripts/gpu-checks passes its output folder, so
# a lease that ends mid-run still brings the logs back); SECONDS_PER_RUN bounds
# each run (default 560).
set -u
bin=$1; root=$2; data=${3:-/usr/share/datasets/fashion-mnist}
per_run=${5:-560}
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no CUDA device on this machine (nvidia-smi -L failed); run on a GPU machine"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
logs=${4:-$tmp}
mkdir -p "$logs"; logs=$(cd "$logs" && pwd)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
fails=0; passes=0
for conf in local-gpu-cnn local-mixed-cnn; do
  start=$(date +%s)
  timeout $((per_run + 20)) "$root/scripts/local-cluster" "$root/config/examples/$conf.conf" --timeout "$per_run" \
    --bin "$bin" -- --train.data-dir="$data" >"$logs/$conf.log" 2>&1; rc=$?
  echo "$conf: $(($(date +%s) - start)) s"
  acc=$(grep -o '"test_accuracy":[0-9.]*' "$logs/$conf.log" | cut -d: -f2)
  grep -E '"event":"final"|exited|stop after' "$logs/$conf.log"
  if [ $rc -eq 0 ] && [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.90) }'; then
    echo "ok: $conf: test_accuracy $acc, every process exited 0"; passes=$((passes + 1))
  else
    echo "FAIL: $conf: exit $rc, test_accuracy '${acc}'"; tail -30 "$logs/$conf.log"; fails=$((fails + 1))
  fi
done
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
