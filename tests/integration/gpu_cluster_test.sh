#!/usr/bin/env bash
# On a machine with a CUDA device: the CNN trained through real processes by
# one GPU worker (config/examples/local-gpu-cnn.conf) and by a CPU and a GPU worker
# together (config/examples/local-mixed-cnn.conf), each to >= 0.90 test accuracy with
# every process exiting 0. Elsewhere: skipped (exit 77), saying so.
#   gpu_cluster_test.sh TROUPE_NODE ROOT [DATA_DIR]
set -u
bin=$1; root=$2; data=${3:-/usr/share/datasets/fashion-mnist}
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: no CUDA device on this machine (nvidia-smi -L failed); run on a GPU machine"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
fails=0; passes=0
for conf in local-gpu-cnn local-mixed-cnn; do
  timeout 580 "$root/scripts/local-cluster" "$root/config/examples/$conf.conf" --timeout 560 --bin "$bin" \
    -- --train.data-dir="$data" >"$tmp/$conf.log" 2>&1; rc=$?
  acc=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/$conf.log" | cut -d: -f2)
  grep -E '"event":"final"|exited|stop after' "$tmp/$conf.log"
  if [ $rc -eq 0 ] && [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.90) }'; then
    echo "ok: $conf: test_accuracy $acc, every process exited 0"; passes=$((passes + 1))
  else
    echo "FAIL: $conf: exit $rc, test_accuracy '${acc}'"; tail -30 "$tmp/$conf.log"; fails=$((fails + 1))
  fi
done
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
