"""troupe.torch: a PyTorch module's parameters and tables on Troupe's shards,
trained by Python workers beside troupe-node's chief and ps."""

import contextlib
import json
import signal
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import troupe
import troupe.torch as tt
from test_worker import NODE, Nodes, free_ports

USERS, ITEMS, RANK = 200, 150, 4
LAST_STEP = 2000
BATCH = 64

# A Python worker as a process: worker TASK of CONF trains MF on its share of
# the planted ratings, reporting its running loss.
MF_WORKER = """
import sys
import time
sys.path.insert(0, {tests!r})
import torch.nn.functional as F
import troupe.torch as tt, test_torch
module = test_torch.MF({dim})
with tt.worker(module, {conf!r}, task={task}) as w:
    losses = []
    for u, i, r in w.batches(test_torch.loader({task}), keys=test_torch.mf_keys):
        losses.append(w.step(lambda m: F.mse_loss(m(u, i), r)))
        if len(losses) % 50 == 0:
            w.report(train_mse=sum(losses[-50:]) / 50)
        print(len(losses), flush=True)
"""


class MF(torch.nn.Module):
    """Biased matrix factorisation: two tables on the shards, a dense bias."""

    def __init__(self, dim=8):
        super().__init__()
        self.users = tt.Embedding("users", dim)
        self.items = tt.Embedding("items", dim)
        self.user_bias = tt.Embedding("user_bias", 1)
        self.mean = torch.nn.Parameter(torch.full((1,), 3.0))

    def forward(self, u, i):
        dot = (self.users(u) * self.items(i)).sum(1)
        return dot + self.user_bias(u).squeeze(1) + self.mean


def planted(seed=7, n=20000):
    """Ratings of a rank-4 model plus noise: (users, items, ratings)."""
    rng = np.random.default_rng(seed)
    user_factors = rng.normal(0, 0.7, (USERS, RANK))
    item_factors = rng.normal(0, 0.7, (ITEMS, RANK))
    u = rng.integers(0, USERS, n)
    i = rng.integers(0, ITEMS, n)
    r = 3.0 + (user_factors[u] * item_factors[i]).sum(1) + rng.normal(0, 0.1, n)
    return u, i, r.astype(np.float32)


def loader(task, workers=2):
    """Worker `task`'s share of the first 16,000 ratings, in batches."""
    u, i, r = planted()
    u, i, r = u[:16000][task::workers], i[:16000][task::workers], r[:16000][task::workers]
    return [(torch.from_numpy(u[k:k + BATCH]), torch.from_numpy(i[k:k + BATCH]),
             torch.from_numpy(r[k:k + BATCH])) for k in range(0, len(u) - BATCH + 1, BATCH)]


def mf_keys(batch):
    u, i, _ = batch
    return {"users": u, "items": i, "user_bias": u}


def declared_config(directory, workers=2, mode="async", last_step=LAST_STEP):
    chief, ps, *worker_ports = free_ports(2 + workers)
    worker_list = ", ".join(f'"127.0.0.1:{port}"' for port in worker_ports)
    conf = directory / "cluster.conf"
    conf.write_text(f"""[cluster]
chief = ["127.0.0.1:{chief}"]
ps = ["127.0.0.1:{ps}"]
worker = [{worker_list}]
connect-timeout = 60s
request-timeout = 30s

[train]
model = "declared"
mode = "{mode}"
optimizer = "adagrad"
learning-rate = 0.1
last-step = {last_step}
seed = 42
log-interval = 200

[embedding]
initializer = "normal"
init-scale = 0.1
optimizer = "adagrad"
learning-rate = 0.3

[checkpoint]
log-dir = "{directory / 'logs'}"
""")
    return conf


def start_python_worker(directory, conf, task, dim=8):
    script = MF_WORKER.format(tests=str(Path(__file__).parent), conf=str(conf), task=task,
                              dim=dim)
    return subprocess.Popen(["/usr/bin/python3", "-c", script], stdout=subprocess.PIPE,
                            stderr=open(directory / f"py{task}.log", "w"), cwd=directory,
                            text=True)


@pytest.fixture(autouse=True)
def _no_cluster_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


# -- tables and declarations, without a cluster --------------------------------

def bound(table, keys, values):
    """`table` as inside a step whose pull gave `values` for `keys`."""
    keys = np.asarray(keys, dtype=np.int64)
    weight = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    table._bind(keys, np.arange(len(keys)), weight, None)
    return weight


def test_an_embedding_looks_up_the_pulled_rows_as_torch_does():
    table = tt.Embedding("t", 3)
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    weight = bound(table, [40, 10, 30, 20], values)
    ids = torch.tensor([[10, 20], [40, 10]])
    out = table(ids)
    reference = torch.nn.Embedding.from_pretrained(torch.from_numpy(values))
    rows = torch.tensor([[1, 3], [0, 1]])
    assert torch.equal(out, reference(rows))
    out.sum().backward()
    assert weight.grad.tolist() == [[1, 1, 1], [2, 2, 2], [0, 0, 0], [1, 1, 1]]


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_an_embedding_bag_combines_rows_as_torch_does(mode):
    table = tt.EmbeddingBag("t", 2, mode=mode, padding_idx=0)
    values = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    bound(table, [7, 8, 9], values)
    ids = torch.tensor([7, 9, 0, 8, 8])  # bags [7, 9, pad] and [8, 8]
    out = table(ids, torch.tensor([0, 3]))
    expected = {"sum": [[6, 8], [6, 8]], "mean": [[3, 4], [3, 4]]}[mode]
    assert out.tolist() == expected


def test_per_sample_weights_scale_each_row():
    table = tt.EmbeddingBag("t", 1, mode="sum")
    bound(table, [1, 2], [[1.0], [10.0]])
    out = table(torch.tensor([1, 2]), torch.tensor([0]), torch.tensor([2.0, 0.5]))
    assert out.tolist() == [[7.0]]


def test_an_id_the_step_did_not_pull_raises_naming_it():
    table = tt.Embedding("users", 2)
    bound(table, [1, 2], np.zeros((2, 2), np.float32))
    with pytest.raises(KeyError, match="users: id 5 is not among the keys"):
        table(torch.tensor([1, 5]))


def test_a_loaded_table_reads_zeros_for_an_id_it_lacks():
    table = tt.Embedding("users", 2)
    table._load(np.array([5, 3]), np.array([[1, 2], [3, 4]], dtype=np.float32))
    assert table(torch.tensor([3, 9, 5])).tolist() == [[3, 4], [0, 0], [1, 2]]


def test_float_ids_raise_type_error():
    table = tt.Embedding("users", 2)
    bound(table, [1], np.zeros((1, 2), np.float32))
    with pytest.raises(TypeError, match="int64"):
        table(torch.tensor([1.0]))


def test_a_table_outside_a_step_says_where_its_rows_are():
    with pytest.raises(RuntimeError, match="inside w.step"):
        tt.Embedding("users", 2)(torch.tensor([1]))


def test_bad_table_arguments_raise():
    with pytest.raises(ValueError, match="dim"):
        tt.Embedding("t", 0)
    with pytest.raises(ValueError, match="mode"):
        tt.EmbeddingBag("t", 2, mode="max")


def test_the_declaration_names_parameters_and_tables():
    variables, tables = tt.declaration(MF(4))
    assert [name for name, _ in variables] == ["mean"]
    assert tables == [("users", 4), ("items", 4), ("user_bias", 1)]


def test_a_float64_parameter_is_refused_by_name():
    module = torch.nn.Linear(2, 1).double()
    with pytest.raises(TypeError, match="weight is torch.float64"):
        tt.declaration(module)


def test_a_cluster_without_a_declared_model_refuses_a_module(tmp_path):
    conf = declared_config(tmp_path)
    conf.write_text(conf.read_text().replace('model = "declared"', 'model = "softmax"'))
    with pytest.raises(troupe.ConfigError, match="needs train.model"):
        tt.worker(MF(), conf, task=0)


def test_a_declared_model_needs_its_workers_programs(tmp_path):
    """troupe-node cannot be a worker of a declared run."""
    conf = declared_config(tmp_path)
    worker = subprocess.run([str(NODE), f"--config-file={conf}", "--job_name=worker",
                             "--task_index=0"], capture_output=True, text=True, timeout=60)
    assert worker.returncode != 0
    assert "declared by its program" in worker.stdout + worker.stderr


# -- runs ------------------------------------------------------------------------

def rmse(module, u, i, r):
    with torch.no_grad():
        return float(torch.sqrt(F.mse_loss(module(torch.from_numpy(u), torch.from_numpy(i)),
                                           torch.from_numpy(r))))


def test_two_python_workers_train_a_module_and_torch_loads_the_result(tmp_path):
    conf = declared_config(tmp_path)
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0))
        workers = [start_python_worker(tmp_path, conf, task) for task in (0, 1)]
        steps = [len(w.communicate(timeout=240)[0].split()) for w in workers]
        assert [w.returncode for w in workers] == [0, 0], (tmp_path / "py0.log").read_text()
        assert nodes.exit_codes()["chief0"] == 0, nodes.log("chief0")
        final = nodes.final()
    assert final["ok"] is True and final["global_step"] == LAST_STEP
    assert final["test_loss"] is None and "train_mse" in final["reported"]
    assert sum(steps) >= LAST_STEP and min(steps) > 0, steps
    trained = MF()
    assert tt.load(trained, tmp_path / "logs") == LAST_STEP
    u, i, r = planted()
    held_out = (u[16000:], i[16000:], r[16000:])
    baseline = float(np.std(held_out[2]))
    score = rmse(trained, *held_out)
    assert score < 0.75 * baseline, (score, baseline)
    assert abs(float(trained.mean) - 3.0) < 0.5


def test_a_worker_whose_module_differs_is_refused_naming_the_difference(tmp_path):
    conf = declared_config(tmp_path, last_step=10_000_000)  # runs until the test ends it
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0))
        first = start_python_worker(tmp_path, conf, 0, dim=8)
        try:
            for line in first.stdout:  # the run's model is placed: worker 0 trains
                break
            second = start_python_worker(tmp_path, conf, 1, dim=6)
            second.communicate(timeout=120)
            assert second.returncode != 0
            log = (tmp_path / "py1.log").read_text()
            assert "its table users has dim 6, the run's 8" in log, log
            assert first.poll() is None  # the run goes on without it
        finally:
            first.kill()
            first.wait()


def test_a_python_worker_killed_mid_run_rejoins_and_each_step_counts_once(tmp_path):
    conf = declared_config(tmp_path, workers=1, last_step=1500)
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0))
        first = start_python_worker(tmp_path, conf, 0)
        for n, line in enumerate(first.stdout):
            if n == 20:
                break
        first.kill()  # SIGKILL: no goodbye
        first.wait()
        again = start_python_worker(tmp_path, conf, 0)
        again.communicate(timeout=240)
        assert again.returncode == 0, (tmp_path / "py0.log").read_text()
        assert nodes.exit_codes()["chief0"] == 0, nodes.log("chief0")
        final = nodes.final()
    assert final["ok"] is True and final["global_step"] == 1500
    assert final["lost_workers"] == 1
    # Every step counted once: a push the killed worker left on the way is
    # applied once, whoever sends it again.
    assert final["examples"] == 1500 * BATCH


def test_a_loader_used_up_after_one_pass_is_named(tmp_path):
    """A generator ends after one pass: the second pass's error says so."""
    w = tt.ModuleWorker.__new__(tt.ModuleWorker)  # batches() without a cluster
    w._tables, w._pending, w._held = [], False, None
    w._begin = lambda ids: True
    w._refuse = lambda why: None

    def once():
        yield (torch.zeros(2),)

    batches = w.batches(once())
    next(batches)
    w._pending = False  # as if w.step ran
    with pytest.raises(ValueError, match="a generator ends after one pass"):
        next(batches)


def start_slow_python_worker(directory, conf, task, name=None):
    """MF_WORKER, each step a little slower, so that a kill lands mid-run."""
    script = MF_WORKER.format(tests=str(Path(__file__).parent), conf=str(conf), task=task,
                              dim=8).replace("print(len(losses), flush=True)",
                                             "print(len(losses), flush=True); time.sleep(0.002)")
    script = "import time\n" + script
    return subprocess.Popen(["/usr/bin/python3", "-c", script], stdout=subprocess.PIPE,
                            stderr=open(directory / f"{name or f'py{task}'}.log", "w"),
                            cwd=directory, text=True)


@pytest.mark.parametrize("mode", ["sync", "ssp"])
def test_two_python_workers_train_in_sync_and_ssp_modes(tmp_path, mode):
    conf = declared_config(tmp_path, mode=mode, last_step=300)
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0))
        workers = [start_python_worker(tmp_path, conf, task) for task in (0, 1)]
        steps = [len(w.communicate(timeout=240)[0].split()) for w in workers]
        assert [w.returncode for w in workers] == [0, 0], (tmp_path / "py1.log").read_text()
        assert nodes.exit_codes()["chief0"] == 0, nodes.log("chief0")
        final = nodes.final()
    assert final["ok"] is True and final["global_step"] == 300
    if mode == "sync":
        assert steps == [300, 300]  # each update averages both workers' gradients
        # As with C++ workers, sync mode's count leaves one gradient out.
        assert (2 * 300 - 1) * BATCH <= final["examples"] <= 2 * 300 * BATCH
    else:
        assert sum(steps) == 300 and min(steps) > 0


def run_with_a_task_killed(tmp_path, job):
    """One Python worker to step 3,000 with checkpoints every 200 steps;
    task `job`:0 SIGKILLed after 600 steps and started again at its address.
    Returns the chief's final line and log."""
    conf = declared_config(tmp_path, workers=1, last_step=3000)
    conf.write_text(conf.read_text() + "save-steps = 200\n")
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0))
        worker = start_slow_python_worker(tmp_path, conf, 0)
        for n, line in enumerate(worker.stdout):
            if n == 600:
                break
        nodes.tasks[f"{job}0"].kill()
        nodes.tasks[f"{job}0"].wait()
        if job == "chief":
            (tmp_path / "chief0.log").rename(tmp_path / "chief0-first.log")
        nodes.start((job, 0))
        worker.communicate(timeout=240)
        assert worker.returncode == 0, (tmp_path / "py0.log").read_text()
        assert nodes.exit_codes()["chief0"] == 0, nodes.log("chief0")
        return nodes.final(), nodes.log("chief0")


def test_a_ps_killed_mid_run_is_restored_and_the_run_finishes(tmp_path):
    final, log = run_with_a_task_killed(tmp_path, "ps")
    assert final["ok"] is True and final["global_step"] == 3000
    assert "every shard restored from step" in log


def test_a_chief_killed_mid_run_is_restarted_from_its_checkpoint(tmp_path):
    final, log = run_with_a_task_killed(tmp_path, "chief")
    # It restores the newest checkpoint, then the worker declares its module again.
    assert final["ok"] is True and final["global_step"] == 3000
    assert "checkpoint: restoring" in log and "declared the model" in log


@contextlib.contextmanager
def two_module_workers(tmp_path):
    """A ps, the chief and two module workers, worker 1 some 20 steps in:
    yields (worker 0, worker 1); worker 0 is killed on the way out."""
    conf = declared_config(tmp_path, last_step=10_000_000)
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0))
        staying = start_python_worker(tmp_path, conf, 0)
        other = start_python_worker(tmp_path, conf, 1)
        try:
            for n, _ in enumerate(other.stdout):
                if n == 20:
                    break
            yield staying, other
        finally:
            staying.kill()
            staying.wait()


def test_sigterm_makes_a_module_worker_leave_cleanly(tmp_path):
    with two_module_workers(tmp_path) as (staying, leaving):
        leaving.send_signal(signal.SIGTERM)
        leaving.communicate(timeout=120)
        assert leaving.returncode == 0, (tmp_path / "py1.log").read_text()
        assert "leaves the run" in (tmp_path / "py1.log").read_text()
        assert staying.poll() is None  # the run goes on


def test_ctrl_c_stops_a_module_worker_and_the_run_goes_on(tmp_path):
    with two_module_workers(tmp_path) as (staying, stopped):
        stopped.send_signal(signal.SIGINT)
        stopped.communicate(timeout=60)  # no hang: the worker task stops with the block
        log = (tmp_path / "py1.log").read_text()
        assert stopped.returncode != 0, log
        assert "KeyboardInterrupt" in log, log
        chief_log = tmp_path / "chief0.log"
        deadline = time.time() + 60

        def ended():  # its steps go to the others
            return [line for line in chief_log.read_text().splitlines()
                    if "failed: worker:1 (" in line and "raised KeyboardInterrupt" in line]

        while not ended() and time.time() < deadline:
            time.sleep(0.2)
        assert ended(), chief_log.read_text()
        assert staying.poll() is None  # the run goes on


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_a_module_on_cuda_trains(tmp_path):
    conf = declared_config(tmp_path, workers=1, last_step=300)
    script = MF_WORKER.format(tests=str(Path(__file__).parent), conf=str(conf), task=0,
                              dim=8).replace("module = test_torch.MF(8)",
                                             "module = test_torch.MF(8).cuda()")
    script = script.replace("m(u, i), r", "m(u.cuda(), i.cuda()), r.cuda()")
    with Nodes(tmp_path, conf) as nodes:
        nodes.start(("ps", 0), ("chief", 0))
        worker = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True,
                                text=True, timeout=240, cwd=tmp_path)
        assert worker.returncode == 0, worker.stderr
        assert nodes.exit_codes()["chief0"] == 0
        assert nodes.final()["ok"] is True
