#!/usr/bin/env bash
# Real processes on 127.0.0.1 from config/examples/local-2ps-3workers.conf: softmax
# reaches >= 0.80 test accuracy and every process exits 0 within the bound.
set -u
bin=$1; root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
timeout 280 "$root/scripts/local-cluster" "$root/config/examples/local-2ps-3workers.conf" \
  --timeout 240 --bin "$bin" >"$tmp/log" 2>&1; rc=$?
grep -E 'final|exited|error|lost' "$tmp/log"
[ $rc -eq 0 ] || { echo "FAIL: local-cluster exit code $rc"; tail -30 "$tmp/log"; echo "0 passed, 1 failed"; exit 1; }
n_ok=$(grep -c 'exited with code' "$tmp/log")
acc=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/log" | cut -d: -f2)
[ -n "$acc" ] || { echo "FAIL: no final line from the chief"; echo "0 passed, 1 failed"; exit 1; }
if awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' && grep -q 'all 6 tasks exited 0' "$tmp/log"; then
  echo "ok: 6 processes exited 0, test_accuracy $acc"; echo "1 passed, 0 failed"
else
  echo "FAIL: test_accuracy $acc or exit codes ($n_ok failures)"; echo "0 passed, 1 failed"; exit 1
fi
