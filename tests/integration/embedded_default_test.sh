#!/usr/bin/env bash
# troupe-node with no arguments and no config file: the whole cluster in one
# process on the embedded defaults reaches >= 0.82 test accuracy and exits 0.
set -u
bin=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
timeout 240 "$bin" >"$tmp/out" 2>"$tmp/err"; rc=$?
tail -3 "$tmp/err"; cat "$tmp/out"
[ $rc -eq 0 ] || { echo "FAIL: exit code $rc"; echo "0 passed, 1 failed"; exit 1; }
acc=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/out" | cut -d: -f2)
grep -q '"global_step":6000' "$tmp/out" || { echo "FAIL: wrong global_step"; echo "0 passed, 1 failed"; exit 1; }
if awk -v a="$acc" 'BEGIN { exit !(a >= 0.82) }'; then
  echo "ok: embedded default reached test_accuracy $acc"; echo "1 passed, 0 failed"
else
  echo "FAIL: test_accuracy $acc < 0.82"; echo "0 passed, 1 failed"; exit 1
fi
