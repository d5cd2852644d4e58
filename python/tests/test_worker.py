"""troupe.Worker: a worker task whose steps compute in Python (here in
PyTorch), beside troupe-node's chief, ps and a C++ worker."""

import json
import signal
import os
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import troupe

SOURCE = Path(os.environ.get("TROUPE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
NODE = Path(os.environ.get("TROUPE_NODE", SOURCE / "build" / "bin" / "troupe-node"))
EXAMPLE = SOURCE / "config" / "examples" / "local-1ps-2workers.conf"
LAST_STEP = 1200


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def cluster_config(tmp_path, workers=2, mode="async"):
    chief, ps, *worker_ports = free_ports(2 + workers)
    worker_list = ", ".join(f'"127.0.0.1:{port}"' for port in worker_ports)
    conf = tmp_path / "cluster.conf"
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
def _no_cluster_from_environment(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_python_worker_trains_beside_a_cpp_worker(tmp_path, monkeypatch, mode):
    monkeypatch.chdir(tmp_path)
    conf = cluster_config(tmp_path, mode=mode)
    tasks = {}
    logs = {}
    for job, index in (("chief", 0), ("ps", 0), ("worker", 1)):
        name = f"{job}{index}"
        logs[name] = open(tmp_path / f"{name}.log", "w+")
        tasks[name] = subprocess.Popen(
            [str(NODE), f"--config-file={conf}", f"--job_name={job}", f"--task_index={index}"],
            stdout=logs[name], stderr=subprocess.STDOUT, cwd=tmp_path,
        )
    try:
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
                with pytest.raises(RuntimeError, match="answered"):
                    step.push(grads, loss, correct)
        assert worker.exit_code == 0
        codes = {name: task.wait(timeout=120) for name, task in tasks.items()}
    finally:
        for task in tasks.values():
            if task.poll() is None:
                task.kill()
    assert codes == {"chief0": 0, "ps0": 0, "worker1": 0}, codes
    logs["chief0"].seek(0)
    chief_log = logs["chief0"].read()
    final = json.loads(chief_log[chief_log.index('{"event":"final"'):].splitlines()[0])
    assert final["ok"] is True
    assert final["global_step"] == LAST_STEP
    # Both workers took part (sync: in every step, R = N = 2), and the model
    # learned (softmax reaches ~0.80 in 1,200 steps of batch 100 here).
    assert final["mode"] == mode
    assert pushed == LAST_STEP if mode == "sync" else pushed > LAST_STEP // 10
    assert final["test_accuracy"] > 0.75, final
    if mode == "sync":
        # Each step averages the Python worker's gradient with the C++
        # worker's: the same run with two C++ workers ends the same.
        cpp = cpp_only_final(tmp_path / "cpp", mode)
        assert abs(cpp["test_accuracy"] - final["test_accuracy"]) <= 0.001, (cpp, final)
        assert abs(cpp["test_loss"] - final["test_loss"]) <= 0.002, (cpp, final)


def final_line(log_text):
    return json.loads(log_text[log_text.index('{"event":"final"'):].splitlines()[0])


def cpp_only_final(directory, mode):
    """The final line of the same run with C++ workers only."""
    directory.mkdir()
    conf = cluster_config(directory, mode=mode)
    tasks = [
        subprocess.Popen(
            [str(NODE), f"--config-file={conf}", f"--job_name={job}", f"--task_index={index}"],
            stdout=open(directory / f"{job}{index}.log", "w"), stderr=subprocess.STDOUT,
            cwd=directory,
        )
        for job, index in (("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1))
    ]
    try:
        assert [task.wait(timeout=120) for task in tasks] == [0, 0, 0, 0]
    finally:
        for task in tasks:
            if task.poll() is None:
                task.kill()
    return final_line((directory / "chief0.log").read_text())


def test_a_configuration_that_names_no_worker_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(troupe.ConfigError, match="task_index=5 is out of range"):
        troupe.Worker(EXAMPLE, task=5)
    with pytest.raises(troupe.ConfigError, match="config-file"):
        troupe.Worker(tmp_path / "absent.conf", task=0)


def test_a_task_index_must_be_an_int():
    with pytest.raises(TypeError):
        troupe.Worker(EXAMPLE, task="0")


def test_leaving_the_loop_early_stops_the_worker_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    conf = cluster_config(tmp_path)
    tasks = [
        subprocess.Popen(
            [str(NODE), f"--config-file={conf}", f"--job_name={job}", "--task_index=0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
        )
        for job in ("chief", "ps")
    ]
    try:
        worker = troupe.Worker(conf, task=0)
        with pytest.raises(troupe.WorkerError, match="exit code 1"):
            with worker:
                for taken, step in enumerate(worker.steps()):
                    grads, loss, correct = softmax_step(step)
                    step.push(grads, loss, correct)
                    if taken == 4:
                        break
        assert worker.exit_code == 1
    finally:
        for task in tasks:
            task.kill()
            task.wait()


@pytest.mark.parametrize("mistake", ["raises", "leaves a step unanswered"])
def test_an_error_in_the_loop_reaches_the_caller_and_stops_the_worker(tmp_path, monkeypatch, mistake):
    monkeypatch.chdir(tmp_path)
    conf = cluster_config(tmp_path)
    tasks = [
        subprocess.Popen(
            [str(NODE), f"--config-file={conf}", f"--job_name={job}", "--task_index=0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
        )
        for job in ("chief", "ps")
    ]
    try:
        worker = troupe.Worker(conf, task=0)
        expected = (ZeroDivisionError, "division") if mistake == "raises" else (
            RuntimeError, "neither pushed nor refused")
        with pytest.raises(expected[0], match=expected[1]):
            with worker:
                for step in worker.steps():
                    if mistake == "raises":
                        step.push(*softmax_step(step)[:1], 1 / 0)
        assert worker.exit_code == 1
    finally:
        for task in tasks:
            task.kill()
            task.wait()


PYTHON_WORKER = """
import sys
sys.path.insert(0, {tests!r})
import troupe, test_worker
with troupe.Worker({conf!r}, task=0) as w:
    for n, step in enumerate(w.steps()):
        step.push(*test_worker.softmax_step(step))
        print(n, flush=True)
"""


def test_a_python_worker_killed_mid_run_rejoins_and_every_step_counts_once(tmp_path):
    # The only worker: while it is down the run waits for it (the chief's
    # recovery), and every step is the Python worker's.
    conf = cluster_config(tmp_path, workers=1)
    tasks = {
        f"{job}0": subprocess.Popen(
            [str(NODE), f"--config-file={conf}", f"--job_name={job}", "--task_index=0"],
            stdout=open(tmp_path / f"{job}0.log", "w"), stderr=subprocess.STDOUT, cwd=tmp_path,
        )
        for job in ("chief", "ps")
    }
    script = PYTHON_WORKER.format(tests=str(Path(__file__).parent), conf=str(conf))
    python = ["/usr/bin/python3", "-c", script]
    try:
        first = subprocess.Popen(python, stdout=subprocess.PIPE, stderr=open(tmp_path / "py0.log", "w"),
                                 cwd=tmp_path, text=True)
        for _ in range(20):  # 20 steps pushed, then SIGKILL mid-run
            assert first.stdout.readline(), "the Python worker ended before 20 steps"
        first.kill()
        first.wait()
        second = subprocess.run(python, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                cwd=tmp_path, text=True, timeout=120)
        assert second.returncode == 0
        codes = {name: task.wait(timeout=120) for name, task in tasks.items()}
    finally:
        for task in tasks.values():
            if task.poll() is None:
                task.kill()
    assert codes == {"chief0": 0, "ps0": 0}, codes
    chief_log = (tmp_path / "chief0.log").read_text()
    final = json.loads(chief_log[chief_log.index('{"event":"final"'):].splitlines()[0])
    assert final["ok"] is True  # the shard applied exactly the steps the chief counted
    assert final["global_step"] == LAST_STEP
    assert final["lost_workers"] == 1
    assert "lost worker:0" in chief_log


def test_sigterm_makes_a_python_worker_leave_cleanly(tmp_path):
    conf = cluster_config(tmp_path)
    node = lambda job, index: subprocess.Popen(  # noqa: E731
        [str(NODE), f"--config-file={conf}", f"--job_name={job}", f"--task_index={index}",
         "--train.last-step=8000"],
        stdout=open(tmp_path / f"{job}{index}.log", "w"), stderr=subprocess.STDOUT, cwd=tmp_path,
    )
    tasks = {"chief0": node("chief", 0), "ps0": node("ps", 0)}
    script = PYTHON_WORKER.format(tests=str(Path(__file__).parent), conf=str(conf))
    python = subprocess.Popen(["/usr/bin/python3", "-c", script], stdout=subprocess.PIPE,
                              stderr=open(tmp_path / "py0.log", "w"), cwd=tmp_path, text=True)
    try:
        assert python.stdout.readline(), "the Python worker took no step"
        tasks["worker1"] = node("worker", 1)  # finishes the run once worker:0 left
        for _ in range(20):
            assert python.stdout.readline(), "the Python worker ended before 20 steps"
        python.send_signal(signal.SIGTERM)
        python.stdout.read()
        assert python.wait(timeout=60) == 0
        codes = {name: task.wait(timeout=120) for name, task in tasks.items()}
    finally:
        for task in [*tasks.values(), python]:
            if task.poll() is None:
                task.kill()
    assert codes == {"chief0": 0, "ps0": 0, "worker1": 0}, codes
    assert "leaves the run" in (tmp_path / "py0.log").read_text()
    chief_log = (tmp_path / "chief0.log").read_text()
    final = json.loads(chief_log[chief_log.index('{"event":"final"'):].splitlines()[0])
    assert final["ok"] is True
    assert final["global_step"] == 8000
    assert final["left_workers"] == 1 and final["lost_workers"] == 0
