#!/usr/bin/env bash
# What can be checked of deploy/ without a Kubernetes cluster or Docker:
# every manifest parses; the TFJob has a chief, 2 ps and workers restarted
# OnFailure, the chief's log directory on a persistent volume; the TF_CONFIG
# the Kubeflow operator would set in each pod, and the one
# tf-config-from-statefulset builds in each StatefulSet pod, are accepted by
# troupe-node with the shipped config (--dump-config, exit 0, naming the
# task); the Dockerfile copies what exists, and .dockerignore keeps build
# trees and logs out of the image.
set -u
. "$(dirname "$0")/lib.sh" # expect, enter_scratch_dir, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir
py=/usr/bin/python3
k8s=$root/deploy/kubernetes
expect "every manifest parses as YAML" "$py" -c '
import sys, yaml
for path in sys.argv[1:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    assert docs, path
' "$k8s"/*.yaml
# The config the pods mount, from the ConfigMap.
"$py" -c '
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
open("troupe.conf", "w").write(doc["data"]["caf-application.conf"])
' "$k8s/troupe-config.yaml"
expect "the ConfigMap holds the config file" grep -q '^log-dir = "logs/run"' troupe.conf
# The TFJob, and the TF_CONFIG of each of its replicas as the operator sets it.
"$py" - "$k8s/tfjob.yaml" >tfjob.txt <<'PY'
import json, sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
specs = job["spec"]["tfReplicaSpecs"]
name, ns = job["metadata"]["name"], "default"
def port(spec):
    for c in spec["template"]["spec"]["containers"]:
        for p in c.get("ports", []):
            if p.get("name") == "tfjob-port":
                return p["containerPort"]
    return 2222
cluster = {t.lower(): ["%s-%s-%d.%s.svc:%d" % (name, t.lower(), i, ns, port(s))
                       for i in range(s["replicas"])] for t, s in specs.items()}
print("counts", " ".join("%s=%d" % (t.lower(), s["replicas"]) for t, s in sorted(specs.items())))
print("restart", " ".join(sorted(set(s["restartPolicy"] for s in specs.values()))))
chief = specs["Chief"]["template"]["spec"]
mounts = {m["name"]: m["mountPath"] for m in chief["containers"][0]["volumeMounts"]}
claims = {v["name"] for v in chief["volumes"] if "persistentVolumeClaim" in v}
print("chief-logs", mounts.get("logs", "-"), "pvc" if "logs" in claims else "no-pvc")
for t in cluster:
    for i in range(len(cluster[t])):
        print("tfconfig", t, i, json.dumps({"cluster": cluster, "task": {"type": t, "index": i}}))
PY
expect "the TFJob has 1 chief, 2 ps and 3 workers" grep -qx "counts chief=1 ps=2 worker=3" tfjob.txt
expect "every replica restarts OnFailure" grep -qx "restart OnFailure" tfjob.txt
expect "the chief's log directory is on a persistent volume" grep -qx "chief-logs /work/logs pvc" tfjob.txt
n=0
while read -r _ type index json; do
  TF_CONFIG=$json "$bin" --config-file=troupe.conf --dump-config >dump.txt 2>dump.err; rc=$?
  expect "TFJob $type:$index: troupe-node accepts its TF_CONFIG" \
    bash -c "test $rc = 0 && grep -q '; job: $type:$index (from TF_CONFIG)' dump.txt"
  n=$((n + 1))
done < <(grep '^tfconfig ' tfjob.txt)
expect "all 6 TFJob tasks checked" test "$n" = 6
# The StatefulSet variant: TF_CONFIG from each pod's hostname.
for host in troupe-chief-0 troupe-ps-0 troupe-ps-1 troupe-worker-0 troupe-worker-2; do
  tf=$(HOSTNAME=$host TROUPE_PS_REPLICAS=2 TROUPE_WORKER_REPLICAS=3 "$k8s/tf-config-from-statefulset" --print)
  TF_CONFIG=$tf "$bin" --config-file=troupe.conf --dump-config >dump.txt 2>dump.err; rc=$?
  job=${host#troupe-}; job=${job%-*}:${host##*-}
  expect "StatefulSet $host: troupe-node accepts $job" \
    bash -c "test $rc = 0 && grep -q '; job: $job (from TF_CONFIG)' dump.txt"
done
# Scaled up past the 3 replicas its pods list (cluster.max-workers = 8).
tf=$(HOSTNAME=troupe-worker-5 TROUPE_PS_REPLICAS=2 TROUPE_WORKER_REPLICAS=3 "$k8s/tf-config-from-statefulset" --print)
TF_CONFIG=$tf "$bin" --config-file=troupe.conf --dump-config >dump.txt 2>dump.err; rc=$?
expect "StatefulSet scaled to 6: troupe-node accepts worker:5 beyond the list" \
  bash -c "test $rc = 0 && grep -q '; job: worker:5 (from TF_CONFIG)' dump.txt"
tf=$(HOSTNAME=troupe-worker-8 TROUPE_PS_REPLICAS=2 TROUPE_WORKER_REPLICAS=3 "$k8s/tf-config-from-statefulset" --print)
TF_CONFIG=$tf "$bin" --config-file=troupe.conf --dump-config >dump.txt 2>dump.err; rc=$?
expect "  but not worker:8, past cluster.max-workers (exit $rc)" \
  bash -c "test $rc = 2 && grep -q 'task worker:8 is not in the cluster' dump.err"
HOSTNAME=other-0 TROUPE_PS_REPLICAS=2 TROUPE_WORKER_REPLICAS=3 "$k8s/tf-config-from-statefulset" --print \
  >/dev/null 2>bad.err; rc=$?
expect "a hostname of no job: exit 2, named" bash -c "test $rc = 2 && grep -q \"'other-0'\" bad.err"
# Issue 54: the JobSet and the Indexed Jobs. Each pod's TF_CONFIG from its
# job and completion index; the failure policies act on the exit-code table
# of docs/operations.md (permanent codes fail the job, 6 is not counted); the
# probes use /healthz and /readyz on the metrics port the ConfigMap sets.
"$py" - "$k8s" "$root/docs/operations.md" >policies.txt <<'PY'
import re, sys, yaml
k8s, table = sys.argv[1], open(sys.argv[2]).read()
section = table[table.index("## Exit codes"):]
section = section[:section.index("\n## ", 5)]
rows = re.findall(r"^\| (\d+) \| (\w+) \| (yes|no|—) \|", section, re.M)
permanent = sorted(int(c) for c, _, r in rows if r == "no")
print("permanent", permanent)
jobset = yaml.safe_load(open(k8s + "/jobset.yaml"))
indexed = [d for d in yaml.safe_load_all(open(k8s + "/indexed-jobs.yaml")) if d and d["kind"] == "Job"]
jobs = [(r["name"], r["template"]["spec"]) for r in jobset["spec"]["replicatedJobs"]]
jobs += [(d["metadata"]["name"], d["spec"]) for d in indexed]
for name, spec in jobs:
    rules = spec["podFailurePolicy"]["rules"]
    fail = [r["onExitCodes"]["values"] for r in rules if r["action"] == "FailJob"]
    ignore = [r["onExitCodes"]["values"] for r in rules if r["action"] == "Ignore" and "onExitCodes" in r]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    probes = (c["startupProbe"]["httpGet"]["path"], c["livenessProbe"]["httpGet"]["path"],
              c["readinessProbe"]["httpGet"]["path"])
    print("job", name, spec["completionMode"], pod["restartPolicy"], fail == [permanent],
          ignore == [[6]], ",".join(probes), pod["terminationGracePeriodSeconds"])
rules = jobset["spec"]["failurePolicy"]["rules"]
print("jobset-fails-on", ",".join(r["onJobFailureReasons"][0] for r in rules if r["action"] == "FailJobSet"))
print("jobset-succeeds-with", ",".join(jobset["spec"]["successPolicy"]["targetReplicatedJobs"]))
PY
expect "the table's permanent codes are 2, 3 and 4" grep -qx "permanent \[2, 3, 4\]" policies.txt
expect "every Job of the JobSet and the Indexed Jobs: Indexed, restartPolicy Never, FailJob on the permanent codes, Ignore 6, probes /healthz /healthz /readyz" \
  test "$(grep -c '^job [a-z-]* Indexed Never True True /healthz,/healthz,/readyz ' policies.txt)" = 6
expect "the JobSet fails on a Job's podFailurePolicy and succeeds with the chief" \
  bash -c "grep -qx 'jobset-fails-on PodFailurePolicy' policies.txt && grep -qx 'jobset-succeeds-with chief' policies.txt"
expect "the ConfigMap serves metrics on 9400 of every address" \
  bash -c "grep -q '^port = 9400' troupe.conf && grep -q '^address = \"0.0.0.0\"' troupe.conf"
for task in chief:0 ps:0 ps:1 worker:0 worker:2; do
  for hosts in "{name}-{job}-{index}.{service}" "{name}-{job}-0-{index}.{service}"; do
    tf=$(TROUPE_JOB=${task%:*} JOB_COMPLETION_INDEX=${task#*:} TROUPE_PS_REPLICAS=2 TROUPE_WORKER_REPLICAS=3 \
         TROUPE_HOSTS=$hosts "$k8s/tf-config-from-index" --print)
    TF_CONFIG=$tf "$bin" --config-file=troupe.conf --dump-config >dump.txt 2>dump.err; rc=$?
    expect "Indexed Job ($hosts) $task: troupe-node accepts its TF_CONFIG" \
      bash -c "test $rc = 0 && grep -q '; job: $task (from TF_CONFIG)' dump.txt"
  done
done
expect "JobSet's pod names: ps:1 is troupe-ps-0-1.troupe" bash -c \
  "TROUPE_JOB=ps JOB_COMPLETION_INDEX=1 TROUPE_PS_REPLICAS=2 TROUPE_WORKER_REPLICAS=3 \
   TROUPE_HOSTS='{name}-{job}-0-{index}.{service}' '$k8s/tf-config-from-index' --print \
   | grep -q '\"troupe-ps-0-1.troupe:2222\"'"
TROUPE_JOB=evaluator JOB_COMPLETION_INDEX=0 TROUPE_PS_REPLICAS=2 TROUPE_WORKER_REPLICAS=3 \
  "$k8s/tf-config-from-index" --print >/dev/null 2>bad.err; rc=$?
expect "tf-config-from-index: a job of no kind exits 2, named" \
  bash -c "test $rc = 2 && grep -q \"TROUPE_JOB='evaluator'\" bad.err"
missing=$(grep -E '^COPY' "$root/deploy/Dockerfile" | grep -oE '(^| )deploy/[^ ]+' | while read -r f; do
  [ -e "$root/$f" ] || echo "$f"; done)
expect "the Dockerfile copies files that exist (${missing:-all there})" test -z "$missing"
# Issue 26: COPY . . carried build/CMakeCache.txt into the image and CMake stopped.
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  expect ".dockerignore leaves out every path git ignores, and no tracked file" \
    "$py" "$root/tests/integration/dockerignore_check.py" "$root"
fi
finish
