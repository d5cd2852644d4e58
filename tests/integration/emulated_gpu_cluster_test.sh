#!/usr/bin/env bash
# A cuda:0 worker beside a CPU worker, through real processes, on every
# machine: troupe-node built against the emulated CUDA device
# (tests/gpu/emulated) runs config/examples/local-mixed-cnn.conf for a few synchronous
# steps, and the same run with both workers on the CPU is its reference. In
# sync mode every step averages both workers' gradients for the same
# parameters and batches, and the GPU model draws the CPU's dropout masks, so
# the two runs differ only by float rounding. Gradients are clipped to norm 1,
# which the GPU worker applies in place to its staged gradients.
# Calibration (10 steps): the runs agreed to the 4 printed decimals (0.6871,
# loss 0.9424); planted bugs moved them by 43% / 0.147 (staged gradients not
# clipped) and 7% / 0.002 (dropout's backward ignoring the mask). Without
# clipping, rounding alone moved the loss by 0.07%.
# Then a worker refused its device: more memory than is free, no such index.
#   emulated_gpu_cluster_test.sh TROUPE_NODE_EMULATED ROOT [DATA_DIR]
set -u
bin=$1; root=$2; data=${3:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
steps=10
run() { # name, worker-devices
  timeout 380 "$root/scripts/local-cluster" "$root/config/examples/local-mixed-cnn.conf" --timeout 360 \
    --bin "$bin" -- --train.data-dir="$data" --train.mode=sync --train.last-step=$steps \
    --train.log-interval=5 --train.clip-norm=1 --train.worker-devices="$2" >"$tmp/$1.log" 2>&1
}
field() { grep -o "\"$2\":[0-9.]*" "$tmp/$1.log" | cut -d: -f2; }
run mixed '["cpu", "cuda:0"]'; mixed_rc=$?
run cpu '["cpu", "cpu"]'; cpu_rc=$?
grep -E 'computing on|"event":"final"|stop after' "$tmp/mixed.log" "$tmp/cpu.log"
fails=0
check() { # description, condition
  if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
check "both runs exit 0" '[ $mixed_rc -eq 0 ] && [ $cpu_rc -eq 0 ]'
check "worker:1 computes on the emulated cuda:0" \
  'grep -q "worker:1: computing on cuda:0 (emulated CUDA device" "$tmp/mixed.log"'
check "the GPU worker took part in all $steps steps" \
  'grep -q "worker:1: stop after $steps local step(s)" "$tmp/mixed.log"'
acc_mixed=$(field mixed test_accuracy); acc_cpu=$(field cpu test_accuracy)
loss_mixed=$(field mixed test_loss); loss_cpu=$(field cpu test_loss)
echo "test_accuracy cpu+gpu=$acc_mixed cpu+cpu=$acc_cpu; test_loss cpu+gpu=$loss_mixed cpu+cpu=$loss_cpu"
check "the model learned (test_accuracy >= 0.4 after $steps steps; chance is 0.1)" \
  'awk -v a="$acc_mixed" "BEGIN { exit !(a >= 0.4) }"'
check "CPU+GPU matches CPU+CPU (accuracy within 0.005, loss within 0.5%)" \
  'awk -v a="$acc_mixed" -v b="$acc_cpu" -v l="$loss_mixed" -v m="$loss_cpu" \
     "BEGIN { d = a - b; e = l - m; exit !(m > 0 && d * d <= 0.005 ^ 2 && e * e <= (0.005 * m) ^ 2) }"'
[ $fails -eq 0 ] || { tail -40 "$tmp/mixed.log"; tail -20 "$tmp/cpu.log"; }

# A GPU worker that cannot have its device stops before it joins: exit 2, the
# device and the key named, nothing waiting for a chief.
refuse() { # description, expected text, environment, extra flags...
  local what=$1 text=$2 env=$3; shift 3
  env $env timeout 30 "$bin" --config-file="$root/config/examples/local-mixed-cnn.conf" --job_name=worker \
    --task_index=1 "$@" >"$tmp/refuse.log" 2>&1
  local rc=$?
  check "$what (exit $rc)" '[ $rc -eq 2 ] && grep -q -- "$text" "$tmp/refuse.log"'
  cat "$tmp/refuse.log"
}
refuse "more memory than is free is refused" \
  "train.gpu-memory-fraction = 0.5 asks for 40960 MB of cuda:0, but only 20480 MB" \
  TROUPE_EMULATED_CUDA_BUSY_MB=61440 --train.gpu-memory-fraction=0.5
refuse "a device index that is not there is refused" \
  "worker:1: device cuda:1 requested, but 1 CUDA device(s) are visible" \
  TROUPE_EMULATED_CUDA_DEVICES=1 --train.worker-devices='["cpu", "cuda:1"]'

echo "$fails failed"
[ $fails -eq 0 ]
