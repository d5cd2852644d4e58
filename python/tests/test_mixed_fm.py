"""A Python worker on a table model of Troupe's own (fm) beside a C++
worker: the Python code computes Troupe's FM in PyTorch on the batch and the
rows the worker pulled, and the run matches two C++ workers'."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import troupe
from test_worker import Nodes, free_ports

LAST_STEP = 300

PYTHON_FM_WORKER = """
import sys
sys.path.insert(0, {tests!r})
import troupe, test_mixed_fm
with troupe.Worker({conf!r}, task=0) as w:
    for step in w.steps():
        step.push(*test_mixed_fm.fm_step(step))
"""


@pytest.fixture(scope="module")
def ctr(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ctr")
    source = Path(__file__).resolve().parents[2]
    subprocess.run([str(source / "scripts" / "make-ctr-data"), str(directory), "--rows", "20000"],
                   check=True, capture_output=True, timeout=120)
    return directory


def fm_config(directory, ctr, mode):
    chief, ps, *workers = free_ports(4)
    conf = directory / "cluster.conf"
    conf.write_text(f"""[cluster]
chief = ["127.0.0.1:{chief}"]
ps = ["127.0.0.1:{ps}"]
worker = ["127.0.0.1:{workers[0]}", "127.0.0.1:{workers[1]}"]
connect-timeout = 60s

[train]
model = "fm"
mode = "{mode}"
optimizer = "adagrad"
learning-rate = 0.05
batch-size = 128
last-step = {LAST_STEP}
seed = 42
shuffle = false
log-interval = 1000

[embedding]
dim = 8
initializer = "normal"
init-scale = 0.1
optimizer = "adagrad"
learning-rate = 0.05

[data]
train = ["{ctr / 'train.tsv'}"]
test = ["{ctr / 'test.tsv'}"]
format = "criteo"
""")
    return conf


def fm_step(step):
    """Troupe's fm (tensor/nn/sparse_model.cpp) in PyTorch: bias + dense
    weights . x + sum a w + 0.5 * (sum_f (sum a v)^2 - sum a^2 v^2), log loss."""
    bias = torch.from_numpy(step.params["bias"]).requires_grad_()
    u = torch.from_numpy(step.params["dense/weights"]).requires_grad_()
    keys, values = step.rows["embedding"]
    table = torch.from_numpy(values).requires_grad_()
    flat = step.keys.reshape(len(step.keys), -1)
    weights = torch.from_numpy(step.key_weights.reshape(len(step.keys), -1))
    order = np.argsort(keys)
    position = order[np.searchsorted(keys[order], np.maximum(flat, 0)).clip(max=len(keys) - 1)]
    rows = table[torch.from_numpy(position)] * weights.unsqueeze(2)  # empty slots weigh 0
    x = torch.from_numpy(step.dense)
    v = rows[..., 1:]
    pairs = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1)
    logits = bias + x @ u + rows[..., 0].sum(1) + pairs
    labels = torch.from_numpy(step.labels).float()
    loss = F.binary_cross_entropy_with_logits(logits, labels)
    loss.backward()
    correct = int(((logits > 0).long() == torch.from_numpy(step.labels)).sum())
    grads = {"bias": bias.grad.numpy(), "dense/weights": u.grad.numpy()}
    return grads, float(loss), correct, {"embedding": table.grad.numpy()}


def run(directory, ctr, mode, python):
    conf = fm_config(directory, ctr, mode)
    with Nodes(directory, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0), ("worker", 1))
        if python:
            script = PYTHON_FM_WORKER.format(tests=str(Path(__file__).parent), conf=str(conf))
            worker = subprocess.Popen(["/usr/bin/python3", "-c", script],
                                      stderr=open(directory / "py0.log", "w"), cwd=directory)
            assert worker.wait(timeout=240) == 0, (directory / "py0.log").read_text()
        else:
            nodes.start(("worker", 0))
        assert nodes.exit_codes(timeout=240)["chief0"] == 0, nodes.log("chief0")
        return nodes.final()


@pytest.fixture(autouse=True)
def _no_cluster_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


def test_a_python_worker_computes_fm_beside_a_cpp_worker_as_a_cpp_worker_does(tmp_path, ctr):
    (tmp_path / "py").mkdir()
    (tmp_path / "cpp").mkdir()
    mixed = run(tmp_path / "py", ctr, "sync", True)
    reference = run(tmp_path / "cpp", ctr, "sync", False)
    assert mixed["ok"] and reference["ok"]
    assert mixed["global_step"] == reference["global_step"] == LAST_STEP
    # The same steps on the same batches: the same model, but for float rounding.
    assert abs(mixed["test_auc"] - reference["test_auc"]) < 1e-4, (mixed, reference)
    assert abs(mixed["test_logloss"] - reference["test_logloss"]) < 1e-4
    assert mixed["test_auc"] > 0.55  # it learns (chance: 0.5)
