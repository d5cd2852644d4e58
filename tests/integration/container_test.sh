#!/usr/bin/env bash
# The deploy image run as a job of containers (issue 26), with Debian's own
# tools and no registry: the base image from debootstrap, the image built
# with deploy/Dockerfile from this checkout (build trees and all: .dockerignore
# keeps them out), then chief, 2 ps, 2 workers and an evaluator as six podman
# containers on a bridge network, each with its TF_CONFIG, the ps and workers
# with no volume at all, the evaluator with none shared with the chief. During
# the run:
#   - ps0 is killed and started again 2 s later at a NEW address under the
#     same name (the hosts entries of the others change, as a StatefulSet
#     pod's DNS record does): the chief restores every shard <= 3 s after it
#     listens;
#   - the chief is killed and started again on its log volume: the job
#     resumes from its checkpoint.
# Then: the final line ok:true and every container's exit code 0.
#   container_test.sh ROOT          (exit 77: skipped, podman/runc/root missing)
# TROUPE_REUSE_IMAGE=1 runs the job on an existing troupe:test image (while
# changing the test); TROUPE_KEEP_LOGS=1 keeps the logs.
# Costs here (2 cores): ~20 s for the base image once, 4-6 min for the image
# (compiled from scratch inside it), ~2 min for the job.
set -u
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit, train_section
root=$(cd "$1" && pwd)
skip() { echo "container_test: $1; skipped"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root"
command -v podman >/dev/null && command -v runc >/dev/null || skip "needs podman and runc"
pm() { podman --runtime runc --cgroup-manager cgroupfs "$@"; }
limits=(--ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
tmp=$(mktemp -d)
net=troupe-ct-$$
sub=10.89.$((($$ % 200) + 20))
names=(ct-$$-chief ct-$$-ps0 ct-$$-ps1 ct-$$-worker0 ct-$$-worker1 ct-$$-eval)
cleanup() {
  pm rm -f -t 1 "${names[@]}" >/dev/null 2>&1
  pm network rm -f "$net" >/dev/null 2>&1
  [ -n "${TROUPE_KEEP_LOGS:-}" ] && echo "logs in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

# 1. The base image, from Debian's archive (no registry needed).
if ! pm image exists debian:12; then
  command -v debootstrap >/dev/null || skip "needs debootstrap for the base image"
  debootstrap --variant=minbase bookworm "$tmp/rootfs" >"$tmp/debootstrap.log" 2>&1 \
    || { tail -5 "$tmp/debootstrap.log"; skip "debootstrap cannot reach Debian's archive"; }
  tar -C "$tmp/rootfs" -c . | pm import - debian:12 >/dev/null
  rm -rf "$tmp/rootfs"
fi
pm run --rm "${limits[@]}" debian:12 true >"$tmp/preflight.log" 2>&1 \
  || { tail -3 "$tmp/preflight.log"; skip "podman cannot run a container on this machine"; }
# 2. The image, from this checkout as it is.
start=$SECONDS
if [ -n "${TROUPE_REUSE_IMAGE:-}" ] && pm image exists troupe:test; then
  rc=0; echo "image build: skipped (TROUPE_REUSE_IMAGE, troupe:test exists)"
else
  pm build "${limits[@]}" -f "$root/deploy/Dockerfile" -t troupe:test "$root" >"$tmp/build.log" 2>&1
  rc=$?
  echo "image build: $((SECONDS - start)) s"
fi
expect "the image builds from a checkout that holds build trees (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || { tail -30 "$tmp/build.log"; exit 1; }

# 3. The job. Names resolve through each container's hosts file.
pm network create --subnet "$sub.0/24" "$net" >/dev/null || { echo "cannot create $net"; exit 1; }
declare -A ip=([chief]=$sub.10 [ps0]=$sub.11 [ps1]=$sub.12 [worker0]=$sub.13 [worker1]=$sub.14
               [eval]=$sub.15)
hosts() { for h in chief ps0 ps1 worker0 worker1 eval; do echo "${ip[$h]} $h"; done; }
cat >"$tmp/troupe.conf" <<CONF
[cluster]
allow-plain = true
recovery-timeout = 120s
$(train_section last-step=6000)
[checkpoint]
log-dir = "/work/logs/run"
save-steps = 500
CONF
cluster='"chief": ["chief:2222"], "ps": ["ps0:2222", "ps1:2222"], "worker": ["worker0:2222", "worker1:2222"]'
mkdir -p "$tmp/chief-logs" "$tmp/eval-logs"
run_task() { # TASK TYPE INDEX [podman options]
  local task=$1 type=$2 index=$3; shift 3
  local add=(); while read -r a h; do add+=(--add-host "$h:$a"); done < <(hosts)
  pm run -d --name "ct-$$-$task" --hostname "$task" --network "$net" --ip "${ip[$task]}" \
    "${add[@]}" "${limits[@]}" -v "$tmp/troupe.conf:/etc/troupe/troupe.conf:ro" \
    -e TF_CONFIG="{\"cluster\": {$cluster}, \"task\": {\"type\": \"$type\", \"index\": $index}}" \
    "$@" troupe:test --config-file=/etc/troupe/troupe.conf >/dev/null
}
logs() { pm logs "ct-$$-$1" 2>&1; }
for i in 0 1; do run_task "ps$i" ps "$i"; done
run_task chief chief 0 -v "$tmp/chief-logs:/work/logs"
for i in 0 1; do run_task "worker$i" worker "$i"; done
run_task eval evaluator 0 -v "$tmp/eval-logs:/work/logs"
wait_until() { local end=$((SECONDS + $1)); shift
  while [ $SECONDS -lt $end ]; do "$@" && return 0; sleep 0.5; done; return 1; }
expect "training runs and saves a checkpoint" \
  wait_until 240 bash -c "ls -d '$tmp'/chief-logs/run/ckpt-* >/dev/null 2>&1"

# 4. ps0 dies and comes back 2 s later at a new address under its name (the
# old entry goes from every hosts file, as a DNS record would change).
pm kill -s KILL "ct-$$-ps0" >/dev/null; pm rm -f "ct-$$-ps0" >/dev/null
sleep 2
ip[ps0]=$sub.21
for t in chief ps1 worker0 worker1 eval; do
  pm exec "ct-$$-$t" sh -c "awk '\$2 != \"ps0\"' /etc/hosts > /tmp/h; echo '${ip[ps0]} ps0' >> /tmp/h; cat /tmp/h > /etc/hosts"
done
run_task ps0 ps 0
expect "the chief restores every shard after ps0 is back" \
  wait_until 120 bash -c "podman --runtime runc --cgroup-manager cgroupfs logs ct-$$-chief 2>&1 | grep -q 'every shard restored'"
listen=$(logs ps0 | grep -m1 "listening on" | grep -o '^\[[0-9:.]*\]' | tr -d '[]')
back=$(logs chief | grep -m1 "every shard restored" | grep -o '^\[[0-9:.]*\]' | tr -d '[]')
secs() { awk -F: '{ printf "%.3f", $1 * 3600 + $2 * 60 + $3 }' <<<"$1"; }
delay=$(awk -v a="$(secs "$back")" -v b="$(secs "$listen")" 'BEGIN { printf "%.2f", a - b }')
echo "ps0 listening at $listen, every shard restored at $back: ${delay} s"
expect "the chief reached the restarted ps0 within 3 s of it listening (${delay} s)" \
  awk -v d="$delay" 'BEGIN { exit !(d != "" && d >= 0 && d <= 3) }'

# 5. The chief dies and comes back on its log volume.
steps_before=$(ls -d "$tmp"/chief-logs/run/ckpt-* | sed 's/.*ckpt-//' | sort -n | tail -1)
pm kill -s KILL "ct-$$-chief" >/dev/null; pm rm -f "ct-$$-chief" >/dev/null
sleep 2
run_task chief chief 0 -v "$tmp/chief-logs:/work/logs"
for t in "${names[@]}"; do pm wait "$t" >"$tmp/$t.rc" 2>/dev/null & done
wait
expect "the restarted chief resumed from a checkpoint (newest before: step $steps_before)" \
  bash -c "podman --runtime runc --cgroup-manager cgroupfs logs ct-$$-chief 2>&1 | grep -qi 'restor.*ckpt-'"
final=$(logs chief | grep '"ok":' | tail -1)
echo "final: $final"
expect "the job ends ok:true" grep -q '"ok":true' <<<"$final"
for t in chief ps0 ps1 worker0 worker1 eval; do
  code=$(cat "$tmp/ct-$$-$t.rc")
  expect "container $t exits 0 (got $code)" test "$code" = 0
done
n=$(logs eval | grep -c "evaluator: checkpoint .* test_accuracy=")
expect "the evaluator (no shared volume) evaluated checkpoints over the network ($n)" test "$n" -ge 2
if [ "$fails" -ne 0 ]; then
  for t in chief ps0 worker0 eval; do echo "--- $t"; logs "$t" | tail -15; done
fi
echo "container_test: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
