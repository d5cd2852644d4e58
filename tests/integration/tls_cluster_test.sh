#!/usr/bin/env bash
# Mutual TLS between real processes (certificates from scripts/make-certs):
# the cluster trains over TLS; a worker without TLS, one whose certificate
# comes from another CA, and garbage or an oversized BASP header on the ps
# and chief ports are all refused before any message is read, leave the
# nodes' memory bounded, and do not harm the run. With troupe-foreign-client
# (third argument), the stranger of hostile_peer_test cannot even connect,
# and a peer holding a cluster certificate that names CAF's own types with
# hostile bytes costs neither the ps nor the chief its life.
set -u
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit
bin=$1; root=$2; client=${3:-}
command -v openssl >/dev/null || { echo "tls_cluster_test: openssl missing; skipped"; exit 77; }
tmp=$(mktemp -d)
cd "$tmp" || exit 1 # relative paths in configs (checkpoint.log-dir) land here
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
sed -e 's/7200/8820/; s/7201/8821/; s/7301/8920/; s/7302/8921/' \
    -e "s/^last-step = .*/last-step = 150000/" -e 's/^log-interval = .*/log-interval = 1000/' \
    "$root/config/examples/local-1ps-2workers.conf" >"$tmp/plain.conf"
cp "$tmp/plain.conf" "$tmp/tls.conf"
# The strangers give up after 5 s, long before the run ends.
sed -i 's/^connect-timeout = .*/connect-timeout = 5s/' "$tmp/plain.conf"
"$root/scripts/make-certs" "$tmp/tls.conf" "$tmp/certs" >>"$tmp/tls.conf" 2>/dev/null
cp "$tmp/plain.conf" "$tmp/rogue.conf"
"$root/scripts/make-certs" "$tmp/rogue.conf" "$tmp/rogue" >>"$tmp/rogue.conf" 2>/dev/null
start() { # name config job index
  "$bin" --config-file="$tmp/$2.conf" --job_name="$3" --task_index="$4" >"$tmp/$1.log" 2>&1 &
  pids+=($!); eval "pid_$1=$!"
}
peak_mib() { awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$1/status"; }

start ps tls ps 0; start chief tls chief 0; start w0 tls worker 0; start w1 tls worker 1
expect "the cluster trains over mutual TLS" wait_for_line "$tmp/chief.log" "global_step=1000/" 60
expect "  and says so" grep -q "listening on 127.0.0.1:8821 (mutual TLS)" "$tmp/ps.log"
# Issue 25: tensors travel on the bulk path under the same TLS, not over BASP.
bulk_port=$(sed -n 's/.*ps:0: bulk path on 127.0.0.1:\([0-9]*\) (mutual TLS)$/\1/p' "$tmp/ps.log")
expect "the ps serves the bulk path under mutual TLS (port ${bulk_port:-none})" test -n "$bulk_port"
expect "  and no worker fell back to BASP" bash -c "! grep -q 'no bulk path' '$tmp/w0.log' '$tmp/w1.log'"
# A stranger on the bulk port without a certificate: the handshake refuses it.
(exec 3<>/dev/tcp/127.0.0.1/"${bulk_port:-1}" && { printf 'TRPB'; head -c 60 /dev/zero; } >&3; sleep 0.5
 exec 3>&-) 2>/dev/null
wait_for_line "$tmp/ps.log" "refused a bulk connection from 127.0.0.1:[0-9]*: .*TLS handshake failed" 10
expect "  a plain connection to it fails the TLS handshake, logged with its address" \
  grep -q "refused a bulk connection from 127.0.0.1:[0-9]*: .*TLS handshake failed" "$tmp/ps.log"
ps_before=$(peak_mib "$pid_ps"); chief_before=$(peak_mib "$pid_chief")

# Garbage, and a BASP header claiming a 3 GiB payload: over plain TCP CAF 0.17
# would allocate the claim; TLS refuses the bytes before BASP reads them.
for port in 8820 8821; do
  for i in 1 2 3 4 5; do
    (exec 3<>/dev/tcp/127.0.0.1/$port && { printf '\x02\x00\x00\x00\xc0\x00\x00\x00'; head -c 24 /dev/zero;
      head -c 65536 /dev/urandom; } >&3; sleep 0.2; exec 3>&-) 2>/dev/null
  done
done
sleep 1
expect "the ps's memory stays bounded ($ps_before -> $(peak_mib "$pid_ps") MiB peak)" \
  test "$(peak_mib "$pid_ps")" -lt $((ps_before + 256))
expect "the chief's memory stays bounded ($chief_before -> $(peak_mib "$pid_chief") MiB peak)" \
  test "$(peak_mib "$pid_chief")" -lt $((chief_before + 256))

start plain plain worker 0
wait_exit "$pid_plain" 120
expect "a worker without TLS cannot join (exit $rc)" test "$rc" = 1
start rogue rogue worker 1
wait_exit "$pid_rogue" 120
expect "a worker with another CA's certificate cannot join (exit $rc)" test "$rc" = 1
if [ -n "$client" ]; then
  "$client" 127.0.0.1:8820 127.0.0.1:8821 >"$tmp/client.log" 2>&1
  expect "a foreign CAF client cannot connect to a TLS cluster (exit $?)" grep -q "cannot connect" "$tmp/client.log"
  insider=("$tmp/certs/worker-1.pem" "$tmp/certs/worker-1.key" "$tmp/certs/ca.pem")
  "$client" --sweep ps 127.0.0.1:8821 "${insider[@]}" >"$tmp/sweep-ps.log" 2>&1 &
  sweep_ps=$!
  "$client" --sweep chief 127.0.0.1:8820 "${insider[@]}" >"$tmp/sweep-chief.log" 2>&1
  sweep_chief_rc=$?
  wait "$sweep_ps"; sweep_ps_rc=$?
  expect "a certified peer naming CAF's own types: the ps answered every time (exit $sweep_ps_rc)" \
    test "$sweep_ps_rc" = 0
  expect "  and so did the chief (exit $sweep_chief_rc)" test "$sweep_chief_rc" = 0
  expect "  @config_value cost that peer its connection" \
    grep -q "^chief: @config_value with bad variant index: closed" "$tmp/sweep-chief.log"
fi
expect "  and the run was still going meanwhile" kill -0 "$pid_chief"
wait_exit "$pid_chief" 500
expect "the run's chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok with every step" grep -q '"ok":true.*"global_step":150000' "$tmp/chief.log"
for t in ps w0 w1; do eval "p=\$pid_$t"; wait_exit "$p" 60
  expect "$t exits 0 (got $rc)" test "$rc" = 0; done
# A certificate that does not match its key, or from another CA, is a
# configuration error before anything starts.
sed -e "s|key = \"$tmp/certs/{job}-{task}.key\"|key = \"$tmp/rogue/{job}-{task}.key\"|" "$tmp/tls.conf" >"$tmp/mismatch.conf"
"$bin" --config-file="$tmp/mismatch.conf" --job_name=ps --task_index=0 >"$tmp/mismatch.log" 2>&1
expect "a key of another certificate is refused at start (exit $?)" grep -q "does not belong to the certificate" "$tmp/mismatch.log"

[ $fails -eq 0 ] || for f in "$tmp"/*.log; do echo "== $f"; tail -5 "$f"; done
echo "$passes passed, $fails failed"
[ $fails -eq 0 ]
