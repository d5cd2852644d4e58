#!/usr/bin/python3
"""A real Prometheus scrapes a local cluster while it trains.

Starts a ps, a chief and two workers (softmax on Fashion-MNIST), each serving
/metrics on its cluster port + 10000, and Debian's prometheus with a scrape
config generated over those ports. Its HTTP API must show troupe_global_step
rising, every target up, and, once worker 1 is killed with SIGKILL, that
worker's target down. Exit 77 (skipped) where prometheus is not installed.

    prometheus_test.py TROUPE_NODE SOURCE_DIR
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

DEADLINE = 120  # seconds for each thing awaited


def free_port_pair():
    """A port p with p and p + 10000 both free on 127.0.0.1."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        try:
            with socket.socket() as t:
                t.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(api, expr):
    url = api + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as answer:
        body = json.load(answer)
    if body.get("status") != "success":
        raise RuntimeError("prometheus: " + json.dumps(body))
    return body["data"]["result"]


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def wait_for(what, check):
    end = time.time() + DEADLINE
    while time.time() < end:
        try:
            value = check()
            if value:
                return value
        except (OSError, RuntimeError, ValueError):
            pass
        time.sleep(0.5)
    raise AssertionError("timed out waiting for " + what)


def check_alert_rules(source, work):
    """The three alerts of docs/operations.md, as Prometheus's promtool reads them."""
    doc = open(os.path.join(source, "docs/operations.md")).read()
    block = doc[doc.index("### Three alerts"):]
    start = block.index("```yaml\n") + len("```yaml\n")
    path = os.path.join(work, "alerts.yml")
    with open(path, "w") as f:
        f.write(block[start:block.index("```", start)])
    checked = subprocess.run([shutil.which("promtool") or "promtool", "check", "rules", path],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 3 rules found" in checked.stdout, checked.stdout


def main():
    node, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    prometheus = shutil.which("prometheus")
    if not prometheus:
        print("SKIP: needs Debian's prometheus package (scripts/setup --for-tests)")
        return 77
    work = tempfile.mkdtemp(prefix="troupe-prometheus-")
    check_alert_rules(source, work)
    ports = {"chief": [free_port_pair()], "ps": [free_port_pair()],
             "worker": [free_port_pair(), free_port_pair()]}
    cluster = {job: "[" + ", ".join('"127.0.0.1:%d"' % p for p in ps) + "]"
               for job, ps in ports.items()}
    config = os.path.join(source, "config/examples/local-1ps-2workers.conf")
    flags = ["--config-file=" + config,
             "--cluster.chief=" + cluster["chief"], "--cluster.ps=" + cluster["ps"],
             "--cluster.worker=" + cluster["worker"],
             "--train.last-step=200000", "--checkpoint.log-dir=" + work + "/logs"]
    procs = {}
    scrape = ["global:", "  scrape_interval: 1s", "  scrape_timeout: 1s",
              "scrape_configs:"]
    for job, job_ports in ports.items():
        targets = ", ".join('"127.0.0.1:%d"' % (p + 10000) for p in job_ports)
        scrape += ["  - job_name: troupe-" + job,
                   "    static_configs:", "      - targets: [" + targets + "]"]
    with open(os.path.join(work, "prometheus.yml"), "w") as f:
        f.write("\n".join(scrape) + "\n")
    api = "http://127.0.0.1:%d" % free_port()
    logs = open(os.path.join(work, "tasks.log"), "w")
    try:
        for job in ("ps", "chief", "worker"):
            for index in range(len(ports[job])):
                procs[(job, index)] = subprocess.Popen(
                    [node] + flags + ["--job_name=" + job, "--task_index=%d" % index],
                    stdout=logs, stderr=subprocess.STDOUT, cwd=work)
        procs[("prometheus", 0)] = subprocess.Popen(
            [prometheus, "--config.file=" + work + "/prometheus.yml",
             "--storage.tsdb.path=" + work + "/tsdb",
             "--web.listen-address=" + api[len("http://"):]],
            stdout=logs, stderr=subprocess.STDOUT, cwd=work)

        ps_ready = "http://127.0.0.1:%d/readyz" % (ports["ps"][0] + 10000)
        wait_for("ps:0 to be ready (/readyz 200)", lambda: http_status(ps_ready) == 200)
        wait_for("all four targets up",
                 lambda: len([r for r in query(api, 'up{job=~"troupe-.*"}')
                              if r["value"][1] == "1"]) == 4)

        def step():
            result = query(api, "troupe_global_step")
            return float(result[0]["value"][1]) if result else None

        first = wait_for("a global step above 0", lambda: step() and step() > 0 and step())
        wait_for("the global step to rise past %g" % first, lambda: step() > first)

        def examples_per_second():
            rate = float(query(api, "rate(troupe_examples_total[5s])")[0]["value"][1])
            return rate if rate > 0 else None

        examples = wait_for("examples/s from troupe_examples_total", examples_per_second)
        print("prometheus_test: global step %g, then rising; rate(examples) %.0f/s"
              % (first, examples))
        pulls = query(api, "troupe_shard_pulls_total")
        assert pulls and float(pulls[0]["value"][1]) > 0, pulls
        steps = query(api, "troupe_worker_steps_total")
        assert len(steps) == 2, steps
        timed = query(api, "troupe_worker_step_duration_seconds_count")
        assert len(timed) == 2 and all(float(r["value"][1]) > 0 for r in timed), timed
        # The stuck alert's term: the step moved within the last seconds.
        since = float(query(api, "time() - troupe_global_step_timestamp_seconds")[0]["value"][1])
        assert since < 10, since

        victim = "127.0.0.1:%d" % (ports["worker"][1] + 10000)
        procs[("worker", 1)].send_signal(signal.SIGKILL)
        procs[("worker", 1)].wait()
        wait_for("worker:1's target down",
                 lambda: query(api, 'up{instance="%s"}' % victim)[0]["value"][1] == "0")
        after = step()
        wait_for("training to go on without worker:1", lambda: step() > after)
        print("prometheus_test: worker:1 killed, its target down, the run goes on")
        return 0
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        logs.close()
        if sys.exc_info()[0] is not None:
            with open(os.path.join(work, "tasks.log")) as f:
                print(f.read()[-6000:])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
