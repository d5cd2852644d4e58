#!/usr/bin/env bash
# The node binary as a user meets it: --help, --dump-config, and
# configuration errors that exit 2 with a message naming the key.
set -u
bin=$1; root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
check() { # description, expected exit code, expected text, command...
  local what=$1 want_rc=$2 want_text=$3; shift 3
  "$@" >"$tmp/out" 2>&1; local rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$want_text" "$tmp/out"; then
    echo "FAIL: $what: exit $rc (want $want_rc), output:"; sed 's/^/    /' "$tmp/out"
    fails=$((fails + 1))
  else
    echo "ok: $what"; passes=$((passes + 1))
  fi
}
conf="$root/config/examples/local-1ps-2workers.conf"
check "help lists keys with defaults" 0 "train.batch-size" "$bin" --help
check "dump-config prints the cluster" 0 'ps = ["127.0.0.1:7201"]' \
  "$bin" --config-file="$conf" --job_name=ps --task_index=0 --dump-config
sed 's/^batch-size/batchsize/' "$conf" >"$tmp/typo.conf"
check "unknown key exits 2 with a suggestion" 2 "did you mean 'train.batch-size'" \
  "$bin" --config-file="$tmp/typo.conf" --job_name=worker --task_index=0
check "task index out of range exits 2" 2 "--task_index=5 is out of range" \
  "$bin" --config-file="$conf" --job_name=worker --task_index=5
check "job without a cluster file exits 2" 2 "needs a cluster" \
  bash -c "cd '$tmp' && '$bin' --job_name=ps --task_index=0"
check "unknown command-line option exits 2" 2 "did you mean --train.last-step" \
  "$bin" --train.last-stp=3
check "missing config file exits 2" 2 "/nope.conf" "$bin" --config-file=/nope.conf
# A PS whose chief never comes gives up after connect-timeout (exit 1, no hang).
sed 's/^connect-timeout = 60s/connect-timeout = 2s/' "$conf" >"$tmp/short.conf"
check "ps without a chief exits 1 after connect-timeout" 1 "no chief initialised" \
  timeout 30 "$bin" --config-file="$tmp/short.conf" --job_name=ps --task_index=0
check "worker without a chief exits 1 after connect-timeout" 1 "no chief reachable" \
  timeout 30 "$bin" --config-file="$tmp/short.conf" --job_name=worker --task_index=0
# A GPU worker where there is no GPU stops before it joins, naming the device.
if ls /dev/nvidia0 >/dev/null 2>&1; then
  echo "skip: this machine has a GPU; the no-device checks do not apply"
else
  check "cuda worker without a device exits 2" 2 "worker:1: device cuda:0 requested" \
    "$bin" --config-file="$conf" --job_name=worker --task_index=1 \
    '--train.worker-devices=["cpu", "cuda:0"]'
  check "whole cluster with a cuda worker exits 2" 2 "device error" \
    "$bin" --train.device=cuda:0
fi
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
