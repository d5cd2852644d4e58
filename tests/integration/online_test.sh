#!/usr/bin/env bash
# The online loop (docs/online.md) through real processes: a CTR run without
# end (train.last-step = 0) writing a serving version every second, with rows
# evicted by age, followed by troupe-serve; a ps killed and restarted, the
# job stopped (SIGTERM) and started again on three shards instead of two.
#  - every version (base + deltas, composed by troupe-export --apply) equals
#    troupe-export's export of its checkpoint bit for bit (numpy);
#  - troupe-serve follows to the newest version, and scores as troupe-predict
#    does on that version's export;
#  - a damaged delta is refused and serving stays at the version before it
#    until a newer base; rollback and follow;
#  - bad requests get a 4xx and cost the server nothing lasting.
#   online_test.sh NODE EXPORT PREDICT SERVE ROOT
set -uo pipefail
bin=$1; export_tool=$2; predict=$3; serve=$4; root=$5
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
enter_scratch_dir
python=/usr/bin/python3

"$root/scripts/make-ctr-data" data --rows 20000 --vocab 10-20000 --seed 3 >/dev/null || exit 1
sections() {
  cat <<EOF
[train]
mode = "async"
model = "fm"
optimizer = "adagrad"
learning-rate = 0.02
batch-size = 128
last-step = 0
log-interval = 1000
[embedding]
dim = 4
optimizer = "adagrad"
learning-rate = 0.2
max-bytes-per-shard = 500000
[data]
train = ["data/train.tsv"]
test = ["data/test.tsv"]
format = "criteo"
[checkpoint]
log-dir = "logs"
keep = 1000
[export]
delta-interval = 1s
base-every = 4
EOF
}
sections | cluster_config two.conf 2 2
start_cluster two.conf
expect "the chief writes versions from its checkpoints" wait_for_line chief.log "serving version 3 " 90
"$serve" logs/serving --port=0 >serve.out 2>serve.log &
serve_pid=$!; pids+=($serve_pid)
wait_for_line serve.out '"url"' 10
url=$(grep -o 'http://[^"]*' serve.out)
ready() { curl -s "$url/readyz" | grep -q '"ready":true'; }
expect "troupe-serve answers /readyz once a version is loaded" eventually 10 ready

# A ps lost and restarted: the chief restores every shard, the versions go on.
kill -9 "${pid[ps0]}"
sleep 1
start_task ps0 two.conf ps 0
expect "the chief restores the shards after ps:0's loss" \
  wait_for_line chief.log "every shard restored from step" 120
versions_before=$(grep -c "serving version" chief.log)
more_versions() { [ "$(grep -c "serving version" chief.log)" -ge $((versions_before + 2)) ]; }
expect "versions go on after the restore" eventually 20 more_versions
kill -TERM "${pid[chief]}"
expect_exit 6 60 chief ps0 ps1
wait_tasks 60 w0 w1
last=$(grep -o "serving version [0-9]*" chief.log | tail -1 | grep -o "[0-9]*$")
expect "the final checkpoint became a version ($last, after $versions_before)" \
  test "$last" -gt "$versions_before"

# Started again on three shards: the series resumes from its newest version.
sections | cluster_config three.conf 3 2
start_cluster three.conf b
expect "a new chief on three shards resumes the versions" \
  wait_for_line bchief.log "serving versions in logs/serving go on from $last " 90
expect "and writes a delta against them" wait_for_line bchief.log "serving version $((last + 2)) " 90
kill -TERM "${pid[bchief]}"
expect_exit 6 60 bchief bps0 bps1 bps2
newest=$(grep -o "serving version [0-9]*" bchief.log | tail -1 | grep -o "[0-9]*$")

# Every version against its checkpoint's export, bit for bit.
mkdir -p composed
PYTHONPATH=$here $python "$here/serving_chain_check.py" "$export_tool" logs composed >chain.log
chain_rc=$?
expect "every version equals its checkpoint's export ($(tail -1 chain.log))" test "$chain_rc" -eq 0
expect "deltas deleted evicted rows" grep -q "[1-9][0-9]* rows deleted" chain.log

# troupe-serve follows to the newest version and scores as troupe-predict.
serving_version() { curl -s "$1/v1/version" | grep -q "\"version\":$2,"; }
expect "troupe-serve reached version $newest" eventually 15 serving_version "$url" "$newest"
head -50 data/test.tsv >rows.tsv
$python - "$url" rows.tsv >served.csv <<'EOF'
import json, sys, urllib.request
rows = [line.rstrip("\n") for line in open(sys.argv[2])]
request = urllib.request.Request(sys.argv[1] + "/v1/predict", method="POST",
                                 data=json.dumps({"rows": rows}).encode())
for score in json.load(urllib.request.urlopen(request))["scores"]:
    print(score)
EOF
latest=composed/v$newest
"$predict" "$latest" rows.tsv --format=criteo --output=predicted.csv 2>/dev/null
expect "troupe-serve's scores are troupe-predict's on version $newest" \
  $python -c "
import csv, sys
served = [float(x) for x in open('served.csv')]
predicted = [float(r['p_1']) for r in csv.DictReader(open('predicted.csv'))]
sys.exit(not (len(served) == len(predicted) == 50
              and max(abs(a - b) for a, b in zip(served, predicted)) < 1e-6))"
curl -s -XPOST -d '' "$url/v1/rollback?version=$((newest - 2))" >rollback.json
expect "rollback to version $((newest - 2)) pins it" grep -q "\"version\":$((newest - 2)),.*\"pinned\":true" rollback.json
curl -s -XPOST -d '' "$url/v1/follow" >/dev/null
expect "follow moves forward again" eventually 10 serving_version "$url" "$newest"

# Bad requests: 4xx, and the server answers after them.
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
expect "malformed JSON: 400" test "$(code -XPOST -d '{"rows": [' "$url/v1/predict")" = 400
expect "a row of the wrong shape: 400" test "$(code -XPOST -d '{"rows": ["1\t2"]}' "$url/v1/predict")" = 400
expect "a GET of /v1/predict: 405" test "$(code "$url/v1/predict")" = 405
expect "another path: 404" test "$(code "$url/nothing")" = 404
big=$($python - "$url" <<'EOF'
import socket, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n")
print(s.recv(200).split(b" ")[1].decode())
EOF
)
expect "a 1 GB body is refused unread: 413 (got $big)" test "$big" = 413
$python - "$url" >idle.log <<'EOF'
import json, socket, sys, time, urllib.parse, urllib.request
u = urllib.parse.urlparse(sys.argv[1])
idle = [socket.create_connection((u.hostname, u.port)) for _ in range(500)]
start = time.time()
urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=30).read()
took = time.time() - start
print("answered behind 500 idle connections in %.2f s" % took)
sys.exit(0 if took < 10 else 1)
EOF
idle_rc=$?
expect "$(cat idle.log) (bound: 10 s, two read timeouts)" test "$idle_rc" -eq 0
expect "troupe-serve still answers" test "$(code "$url/healthz")" = 200

# A damaged delta: refused, serving stays at the version before it; a newer
# base moves it on.
mkdir -p copy
cp -r logs/serving/base-000000000001 copy/
for v in 2 3 4; do cp logs/serving/delta-00000000000$v.* copy/; done
printf '\x7f' | dd of=copy/delta-000000000003.safetensors bs=1 seek=200 conv=notrunc 2>/dev/null
"$serve" copy --port=0 --poll-ms=100 >serve2.out 2>serve2.log &
pids+=($!)
wait_for_line serve2.out '"url"' 10
url2=$(grep -o 'http://[^"]*' serve2.out)
sleep 1
expect "a damaged delta 3 is refused: serving stays at version 2" \
  grep -q '"version":2,' <(curl -s "$url2/v1/version")
expect "and says why" grep -q "refused, still serving version 2: .*delta 3 (applies to version 2).*damaged" serve2.log
expect "and counts it" grep -q "^troupe_serve_deltas_refused_total 1" <(curl -s "$url2/metrics")
cp -r logs/serving/base-000000000005 copy/
expect "a newer base moves it on" eventually 10 serving_version "$url2" 5
kill -TERM "$serve_pid"
wait_exit "$serve_pid" 10
expect "troupe-serve exits 0 on SIGTERM (got $rc)" test "$rc" = 0
finish 30
