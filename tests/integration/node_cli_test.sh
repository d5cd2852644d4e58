#!/usr/bin/env bash
# The node binary as a user meets it: --help, --dump-config, and
# configuration errors that exit 2 with a message naming the key.
set -u
. "$(dirname "$0")/lib.sh" # enter_scratch_dir, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir
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
check "a true/false key given a value on the command line says it is a flag" 2 \
  "--train.pull-ahead sets it true" "$bin" --train.pull-ahead=false
check "pull-ahead with sync exits 2 naming the key" 2 "train.pull-ahead works in async mode only" \
  "$bin" --config-file="$conf" --job_name=worker --task_index=0 --train.mode=sync --train.pull-ahead
# Values that crashed the node or misled it before: each is a configuration
# error now, exit 2, naming the key.
printf '[scheduler]\nmax-threads = 0\n' | cat "$conf" - >"$tmp/threads.conf"
check "scheduler.max-threads = 0 exits 2 (was SIGFPE)" 2 "scheduler.max-threads = 0 is out of range" \
  "$bin" --config-file="$tmp/threads.conf" --job_name=ps --task_index=0
{ cat "$conf"; printf '[model]\nlayers = '; head -c 50000 /dev/zero | tr '\0' '['; echo; } >"$tmp/deep.conf"
check "a list nested 50,000 deep exits 2 (was SIGSEGV)" 2 "nested more than 4 deep" \
  "$bin" --config-file="$tmp/deep.conf" --job_name=ps --task_index=0
check "a batch of 10^7 exits 2 (workers died of bad_alloc)" 2 "train.batch-size = 10000000 is out of range" \
  "$bin" --config-file="$conf" --job_name=worker --task_index=0 --train.batch-size=10000000
check "epochs = 1e30 exits 2 (trained 1 step, ok:true)" 2 "train.epochs" \
  "$bin" --config-file="$conf" --job_name=worker --task_index=0 --train.epochs=1e30
check "a nanosecond timeout exits 2" 2 "cluster.request-timeout = 0ms is out of range" \
  "$bin" --config-file="$conf" --job_name=ps --task_index=0 --cluster.request-timeout=1ns
sed 's/^batch-size = \(.*\)/batch-size = \1\nbatch-size = 7/' "$conf" >"$tmp/twice.conf"
check "a key set twice exits 2 (the last one won silently)" 2 "train.batch-size is set twice" \
  "$bin" --config-file="$tmp/twice.conf" --job_name=ps --task_index=0
# A reader that goes away (troupe-node | head) does not end the run: the
# final line goes to the log instead, and the exit code is the run's.
check "a closed stdout does not kill the node" 0 "could not be written to stdout" \
  bash -c "'$bin' --train.last-step=300 2>'$tmp/pipe.log' | true; rc=\${PIPESTATUS[0]}
           cat '$tmp/pipe.log'; exit \$rc"
# A PS whose chief never comes gives up after connect-timeout (exit 5,
# lost_peer: retryable; no hang).
sed 's/^connect-timeout = 60s/connect-timeout = 2s/' "$conf" >"$tmp/short.conf"
move_to_free_ports "$tmp/short.conf" # sets chief_addr
check "ps without a chief exits 5 after connect-timeout" 5 "no chief initialised" \
  timeout 30 "$bin" --config-file="$tmp/short.conf" --job_name=ps --task_index=0
check "worker without a chief exits 5 after connect-timeout" 5 "no chief reachable" \
  timeout 30 "$bin" --config-file="$tmp/short.conf" --job_name=worker --task_index=0
# hold_port PORT SECONDS [GREETING]: a stand-in for a chief that reads its
# data (its lobby, apps/node/chief_lobby): accepts each connection, sends
# GREETING (the lobby's by default; "" for a server that says nothing) and
# closes it.
hold_port() {
  /usr/bin/python3 - "$1" "$2" "${3-troupe: the chief is reading its data}" <<'PY'
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16); s.settimeout(0.2)
end = time.time() + float(sys.argv[2])
greeting = (sys.argv[3] + "\n").encode() if sys.argv[3] else b""
while time.time() < end:
    try:
        c, _ = s.accept(); c.sendall(greeting); c.close()
    except socket.timeout:
        pass
PY
}
# A ps whose connect-timeout runs out while the chief's port answers waits
# on; once it is free, it gives up as before. The stand-in holds it 6 s.
hold_port "${chief_addr#*:}" 6 &
stand_in=$!
sleep 0.5
started=$SECONDS
check "ps waits on while the chief's port answers" 5 "says it is still reading its data" \
  timeout 30 "$bin" --config-file="$tmp/short.conf" --job_name=ps --task_index=0
waited=$((SECONDS - started))
wait $stand_in
expect "... and gives up once it is free, after the stand-in's 6 s (${waited} s; 2 s without the wait)" \
  eval 'grep -q "no chief initialised" "$tmp/out" && test "$waited" -ge 5'
# A port that accepts but does not say the chief is reading (another
# server, a chief that does not list this ps) does not keep the ps waiting.
hold_port "${chief_addr#*:}" 6 "" &
stand_in=$!
sleep 0.5
started=$SECONDS
check "ps does not wait on a port that does not say the chief is reading" 5 "does not say it is reading its data" \
  timeout 30 "$bin" --config-file="$tmp/short.conf" --job_name=ps --task_index=0
expect "... it gives up after its connect-timeout ($((SECONDS - started)) s)" test $((SECONDS - started)) -le 4
wait $stand_in
# A worker meets the same port (here held 5 s, its connect-timeout 2 s):
# each try fails at once, and it gives up in time, saying why.
hold_port "${chief_addr#*:}" 5 &
stand_in=$!
sleep 0.5
check "a worker whose chief still reads its data gives up after connect-timeout, saying so" 5 \
  "as a chief still reading its data does" \
  timeout 30 "$bin" --config-file="$tmp/short.conf" --job_name=worker --task_index=0
wait $stand_in
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
finish
