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
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; root=$2; client=${3:-}
command -v openssl >/dev/null || { echo "tls_cluster_test: openssl missing; skipped"; exit 77; }
enter_scratch_dir
# Long enough (about 100 s on a 2-core VM) to outlast the sweeps below.
example_config local-1ps-2workers plain.conf last-step=400000 log-interval=1000
cp plain.conf tls.conf
# The strangers give up after 5 s, long before the run ends.
sed -i 's/^connect-timeout = .*/connect-timeout = 5s/' plain.conf
"$root/scripts/make-certs" "$tmp/tls.conf" "$tmp/certs" >>tls.conf 2>/dev/null
cp plain.conf rogue.conf
"$root/scripts/make-certs" "$tmp/rogue.conf" "$tmp/rogue" >>rogue.conf 2>/dev/null
peak_mib() { awk '/VmHWM/ { print int($2 / 1024) }' "/proc/$1/status"; }

start_cluster tls.conf
expect "the cluster trains over mutual TLS" wait_for_line chief.log "global_step=1000/" 60
expect "  and says so" grep -q "listening on ${ps_addr[0]} (mutual TLS)" ps0.log
# Issue 25: tensors travel on the bulk path under the same TLS, not over BASP.
bulk_port=$(sed -n 's/.*ps:0: bulk path on 127.0.0.1:\([0-9]*\) (mutual TLS)$/\1/p' ps0.log)
expect "the ps serves the bulk path under mutual TLS (port ${bulk_port:-none})" test -n "$bulk_port"
expect "  and no worker fell back to BASP" bash -c "! grep -q 'no bulk path' w0.log w1.log"
# A stranger on the bulk port without a certificate: the handshake refuses it.
(exec 3<>/dev/tcp/127.0.0.1/"${bulk_port:-1}" && { printf 'TRPB'; head -c 60 /dev/zero; } >&3; sleep 0.5
 exec 3>&-) 2>/dev/null
wait_for_line ps0.log "refused a bulk connection from 127.0.0.1:[0-9]*: .*TLS handshake failed" 10
expect "  a plain connection to it fails the TLS handshake, logged with its address" \
  grep -q "refused a bulk connection from 127.0.0.1:[0-9]*: .*TLS handshake failed" ps0.log
# A peer with a cluster certificate that goes on speaking TLS after the
# handshake (openssl s_client) sends TLS records where the bulk path's own
# belong: refused, and named.
echo hello | timeout 5 openssl s_client -quiet -cert "$tmp/certs/worker-1.pem" \
  -key "$tmp/certs/worker-1.key" -CAfile "$tmp/certs/ca.pem" -connect "127.0.0.1:${bulk_port:-1}" \
  >/dev/null 2>&1
wait_for_line ps0.log "bulk connection from 127.0.0.1:[0-9]*: .*TLS record where a Troupe record belongs" 10
expect "  a certified peer speaking TLS records after the handshake is refused, and named" \
  grep -q "bulk connection from 127.0.0.1:[0-9]*: .*TLS record where a Troupe record belongs" ps0.log
# The workers' reports go to the chief on the report channel, under the same TLS.
report_port=$(sed -n 's/.*chief: report channel on 127.0.0.1:\([0-9]*\) (mutual TLS)$/\1/p' chief.log)
expect "the chief takes its workers' reports under mutual TLS (port ${report_port:-none})" \
  test -n "$report_port"
expect "  and no worker fell back to BASP for them" \
  bash -c "! grep -q 'no report channel' w0.log w1.log"
(exec 3<>/dev/tcp/127.0.0.1/"${report_port:-1}" && { printf 'TRPB'; head -c 60 /dev/zero; } >&3
 sleep 0.5; exec 3>&-) 2>/dev/null
wait_for_line chief.log "refused a report connection from 127.0.0.1:[0-9]*: .*TLS handshake failed" 10
expect "  a plain connection to it fails the TLS handshake, logged with its address" \
  grep -q "refused a report connection from 127.0.0.1:[0-9]*: .*TLS handshake failed" chief.log
ps_before=$(peak_mib "${pid[ps0]}"); chief_before=$(peak_mib "${pid[chief]}")

# Garbage, and a BASP header claiming a 3 GiB payload: over plain TCP CAF 0.17
# would allocate the claim; TLS refuses the bytes before BASP reads them.
for port in ${chief_addr##*:} ${ps_addr[0]##*:}; do
  for i in 1 2 3 4 5; do
    (exec 3<>/dev/tcp/127.0.0.1/$port && { printf '\x02\x00\x00\x00\xc0\x00\x00\x00'; head -c 24 /dev/zero;
      head -c 65536 /dev/urandom; } >&3; sleep 0.2; exec 3>&-) 2>/dev/null
  done
done
sleep 1
expect "the ps's memory stays bounded ($ps_before -> $(peak_mib "${pid[ps0]}") MiB peak)" \
  test "$(peak_mib "${pid[ps0]}")" -lt $((ps_before + 256))
expect "the chief's memory stays bounded ($chief_before -> $(peak_mib "${pid[chief]}") MiB peak)" \
  test "$(peak_mib "${pid[chief]}")" -lt $((chief_before + 256))

start_task plain plain.conf worker 0
wait_exit "${pid[plain]}" 120
# Exit 5 (lost_peer): to such a worker the chief is unreachable.
expect "a worker without TLS cannot join (exit $rc)" test "$rc" = 5
start_task rogue rogue.conf worker 1
wait_exit "${pid[rogue]}" 120
expect "a worker with another CA's certificate cannot join (exit $rc)" test "$rc" = 5
if [ -n "$client" ]; then
  "$client" "$chief_addr" "${ps_addr[0]}" >client.log 2>&1
  expect "a foreign CAF client cannot connect to a TLS cluster (exit $?)" grep -q "cannot connect" client.log
  insider=("$tmp/certs/worker-1.pem" "$tmp/certs/worker-1.key" "$tmp/certs/ca.pem")
  "$client" --sweep ps "${ps_addr[0]}" "${insider[@]}" >sweep-ps.log 2>&1 &
  sweep_ps=$!
  "$client" --sweep chief "$chief_addr" "${insider[@]}" >sweep-chief.log 2>&1
  sweep_chief_rc=$?
  wait "$sweep_ps"; sweep_ps_rc=$?
  expect "a certified peer naming CAF's own types: the ps answered every time (exit $sweep_ps_rc)" \
    test "$sweep_ps_rc" = 0
  expect "  and so did the chief (exit $sweep_chief_rc)" test "$sweep_chief_rc" = 0
  expect "  @config_value cost that peer its connection" \
    grep -q "^chief: @config_value with bad variant index: closed" sweep-chief.log
fi
expect "  and the run was still going meanwhile" kill -0 "${pid[chief]}"
wait_exit "${pid[chief]}" 500
expect "the run's chief exits 0 (got $rc)" test "$rc" = 0
expect "  its final line says ok with every step" grep -q '"ok":true.*"global_step":400000' chief.log
expect_exit 0 60 ps0 w0 w1
# A certificate that does not match its key, or from another CA, is a
# configuration error before anything starts.
sed -e "s|key = \"$tmp/certs/{job}-{task}.key\"|key = \"$tmp/rogue/{job}-{task}.key\"|" "$tmp/tls.conf" >"$tmp/mismatch.conf"
"$bin" --config-file="$tmp/mismatch.conf" --job_name=ps --task_index=0 >mismatch.log 2>&1
expect "a key of another certificate is refused at start (exit $?)" grep -q "does not belong to the certificate" mismatch.log

finish 5
