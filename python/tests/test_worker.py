"""troupe.Worker: a worker task whose steps compute in Python (here in
PyTorch), beside troupe-node's chief, ps and C++ workers."""

import json
import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import troupe
from troupe.local import free_ports

SOURCE = Path(os.environ.get("TROUPE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
NODE = Path(os.environ.get("TROUPE_NODE", SOURCE / "build" / "bin" / "troupe-node"))
EXAMPLE = SOURCE / "config" / "examples" / "local-1ps-2workers.conf"
LAST_STEP = 1200

# A Python worker as a process of its own: worker:0 of CONF, printing the
# number of each step it pushed.
PYTHON_WORKER = """
import sys
sys.path.insert(0, {tests!r})
import troupe, test_worker
with troupe.Worker({conf!r}, task=0) as w:
    for n, step in enumerate(w.steps()):
        step.push(*test_worker.softmax_step(step))
        print(n, flush=True)
"""


def cluster_config(directory, workers=2, mode="async"):
    """A cluster of a chief, 1 ps and `workers` workers on free ports."""
    chief, ps, *worker_ports = free_ports(2 + workers)
    worker_list = ", ".join(f'"127.0.0.1:{port}"' for port in worker_ports)
    conf = directory / "cluster.conf"
    conf.write_text(
        f"""[cluster]
chief = ["127.0.0.1:{chief}"]
ps = ["127.0.0.1:{ps}"]
worker = [{worker_list}]
connect-timeout = 60s
request-timeout = 30s

[train]
model = "softmax"
mode = "{mode}"
batch-size = 100
learning-rate = 0.05
last-step = {LAST_STEP}
seed = 42
data-dir = "/usr/share/datasets/fashion-mnist"
log-interval = 400
"""
    )
    return conf


class Nodes:
    """troupe-node tasks of one cluster as processes, each logging to
    DIRECTORY/<job><index>.log; those still running are killed on exit."""

    def __init__(self, directory, conf, args=()):
        self.directory, self.conf, self.args = directory, conf, list(args)
        self.tasks = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for task in self.tasks.values():
            if task.poll() is None:
                task.kill()
                task.wait()

    def start(self, *tasks):
        for job, index in tasks:
            name = f"{job}{index}"
            self.tasks[name] = subprocess.Popen(
                [str(NODE), f"--config-file={self.conf}", f"--job_name={job}",
                 f"--task_index={index}", *self.args],
                stdout=open(self.directory / f"{name}.log", "w"), stderr=subprocess.STDOUT,
                cwd=self.directory,
            )

    def exit_codes(self, timeout=120):
        return {name: task.wait(timeout=timeout) for name, task in self.tasks.items()}

    def log(self, name):
        return (self.directory / f"{name}.log").read_text()

    def final(self):
        """The chief's final line."""
        log = self.log("chief0")
        return json.loads(log[log.index('{"event":"final"'):].splitlines()[0])


def python_worker_process(directory, conf):
    """PYTHON_WORKER as a process (its log: DIRECTORY/py0.log)."""
    script = PYTHON_WORKER.format(tests=str(Path(__file__).parent), conf=str(conf))
    return subprocess.Popen(["/usr/bin/python3", "-c", script], stdout=subprocess.PIPE,
                            stderr=open(directory / "py0.log", "w"), cwd=directory, text=True)


def softmax_step(step):
    """The softmax model's gradients, computed by PyTorch's autograd."""
    x = torch.from_numpy(step.features).reshape(len(step.labels), -1)
    y = torch.from_numpy(step.labels)
    weights = torch.from_numpy(step.params["softmax/weights"]).requires_grad_()
    biases = torch.from_numpy(step.params["softmax/biases"]).requires_grad_()
    logits = x @ weights + biases
    loss = F.cross_entropy(logits, y)
    loss.backward()
    correct = int((logits.argmax(1) == y).sum())
    grads = {"softmax/weights": weights.grad.numpy(), "softmax/biases": biases.grad.numpy()}
    return grads, float(loss), correct


@pytest.fixture(autouse=True)
def _no_cluster_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_python_worker_trains_beside_a_cpp_worker(tmp_path, mode):
    conf = cluster_config(tmp_path, mode=mode)
    with Nodes(tmp_path, conf) as nodes:
        # Async: the C++ worker joins once the Python worker has a step, so
        # that neither takes the whole run before the other is in.
        nodes.start(("chief", 0), ("ps", 0), *([("worker", 1)] if mode == "sync" else []))
        pushed = 0
        with troupe.Worker(conf, task=0) as worker:
            assert worker.name == "worker:0"
            assert worker.variables == [("softmax/weights", (784, 10)), ("softmax/biases", (10,))]
            for step in worker.steps():
                grads, loss, correct = softmax_step(step)
                if pushed == 0:  # a wrong shape is refused and the step stays open
                    with pytest.raises(ValueError, match="softmax/biases"):
                        step.push({**grads, "softmax/biases": np.zeros(3)}, loss, correct)
                    with pytest.raises(ValueError, match="no gradient"):
                        step.push({"softmax/weights": grads["softmax/weights"]}, loss)
                step.push(grads, loss, correct)
                pushed += 1
                if mode == "async" and pushed == 1:
                    nodes.start(("worker", 1))
                if pushed == 5:  # a Python worker serves its metrics as troupe-node's do
                    metrics, ready = worker_metrics(conf, 0)
                    assert 'troupe_worker_steps_total{worker="0"}' in metrics
                    assert ready == 200
                with pytest.raises(RuntimeError, match="answered"):
                    step.push(grads, loss, correct)
        assert worker.exit_code == 0
        assert nodes.exit_codes() == {"chief0": 0, "ps0": 0, "worker1": 0}
        final = nodes.final()
    assert final["ok"] is True
    assert final["global_step"] == LAST_STEP
    # Both workers took part (sync: in every step, R = N = 2), and the model
    # learned (softmax reaches ~0.80 in 1,200 steps of batch 100 here).
    assert final["mode"] == mode
    assert pushed == LAST_STEP if mode == "sync" else 0 < pushed < LAST_STEP
    assert final["test_accuracy"] > 0.75, final
    if mode == "sync":
        # Each step averages the Python worker's gradient with the C++
        # worker's: the same run with two C++ workers ends the same.
        cpp = cpp_only_final(tmp_path / "cpp", mode)
        assert abs(cpp["test_accuracy"] - final["test_accuracy"]) <= 0.001, (cpp, final)
        assert abs(cpp["test_loss"] - final["test_loss"]) <= 0.002, (cpp, final)


def worker_metrics(conf, index):
    """Worker `index`'s /metrics text and /readyz status (its port + 10000,
    or - 10000 above 55535: docs/operations.md#metrics-and-probes)."""
    workers = re.search(r"^worker = \[(.*)\]", conf.read_text(), re.M).group(1)
    port = int(re.findall(r":(\d+)\"", workers)[index])
    port = port + 10000 if port + 10000 <= 65535 else port - 10000
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
        return text, answer.status


def cpp_only_final(directory, mode):
    """The final line of the same run with C++ workers only."""
    directory.mkdir()
    with Nodes(directory, cluster_config(directory, mode=mode)) as nodes:
        nodes.start(("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1))
        assert set(nodes.exit_codes().values()) == {0}
        return nodes.final()


def test_a_configuration_that_names_no_worker_is_refused(tmp_path):
    with pytest.raises(troupe.ConfigError, match="task_index=5 is out of range"):
        troupe.Worker(EXAMPLE, task=5)
    with pytest.raises(troupe.ConfigError, match="config-file"):
        troupe.Worker(tmp_path / "absent.conf", task=0)


def test_a_task_index_must_be_an_int():
    with pytest.raises(TypeError):
        troupe.Worker(EXAMPLE, task="0")


def test_leaving_the_loop_early_stops_the_worker_and_says_so(tmp_path):
    conf = cluster_config(tmp_path)
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("chief", 0), ("ps", 0))
        worker = troupe.Worker(conf, task=0)
        with pytest.raises(troupe.WorkerError, match="exit code 1"):
            with worker:
                for taken, step in enumerate(worker.steps()):
                    step.push(*softmax_step(step))
                    if taken == 4:
                        break
        assert worker.exit_code == 1


@pytest.mark.parametrize("mistake", ["raises", "leaves a step unanswered"])
def test_an_error_in_the_loop_reaches_the_caller_and_stops_the_worker(tmp_path, mistake):
    conf = cluster_config(tmp_path)
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("chief", 0), ("ps", 0))
        worker = troupe.Worker(conf, task=0)
        expected = (ZeroDivisionError, "division") if mistake == "raises" else (
            RuntimeError, "neither pushed nor refused")
        with pytest.raises(expected[0], match=expected[1]):
            with worker:
                for step in worker.steps():
                    if mistake == "raises":
                        step.push(softmax_step(step)[0], 1 / 0)
        assert worker.exit_code == 1


def test_a_python_worker_killed_mid_run_rejoins_and_every_step_counts_once(tmp_path):
    # The only worker: while it is down the run waits for it (the chief's
    # recovery), and every step is the Python worker's.
    conf = cluster_config(tmp_path, workers=1)
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("chief", 0), ("ps", 0))
        first = python_worker_process(tmp_path, conf)
        for _ in range(20):  # 20 steps pushed, then SIGKILL mid-run
            assert first.stdout.readline(), "the Python worker ended before 20 steps"
        first.kill()
        first.wait()
        second = python_worker_process(tmp_path, conf)
        second.stdout.read()
        assert second.wait(timeout=120) == 0
        assert nodes.exit_codes() == {"chief0": 0, "ps0": 0}
        final = nodes.final()
        assert "lost worker:0" in nodes.log("chief0")
    assert final["ok"] is True  # the shard applied exactly the steps the chief counted
    assert final["global_step"] == LAST_STEP
    assert final["lost_workers"] == 1


def test_sigterm_makes_a_python_worker_leave_cleanly(tmp_path):
    conf = cluster_config(tmp_path)
    with Nodes(tmp_path, conf, args=["--train.last-step=8000"]) as nodes:
        nodes.start(("chief", 0), ("ps", 0))
        python = python_worker_process(tmp_path, conf)
        try:
            assert python.stdout.readline(), "the Python worker took no step"
            nodes.start(("worker", 1))  # finishes the run once worker:0 left
            for _ in range(20):
                assert python.stdout.readline(), "the Python worker ended before 20 steps"
            python.send_signal(signal.SIGTERM)
            python.stdout.read()
            assert python.wait(timeout=60) == 0
        finally:
            if python.poll() is None:
                python.kill()
        assert nodes.exit_codes() == {"chief0": 0, "ps0": 0, "worker1": 0}
        final = nodes.final()
    assert "leaves the run" in (tmp_path / "py0.log").read_text()
    assert final["ok"] is True
    assert final["global_step"] == 8000
    assert final["left_workers"] == 1 and final["lost_workers"] == 0


def test_an_unreachable_cluster_ends_the_worker_within_its_deadline(tmp_path):
    conf = cluster_config(tmp_path)  # nothing started
    worker = troupe.Worker(conf, task=0, args=["--cluster.connect-timeout=2s"])
    with pytest.raises(troupe.WorkerError, match="exit code 5.*no chief reachable at 127.0.0.1"):
        with worker:
            assert list(worker.steps()) == []
    assert worker.exit_code == 5  # lost_peer: retryable
