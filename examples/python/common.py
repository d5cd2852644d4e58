"""What the examples share: their command line, a local cluster's
configuration and run, and AUC."""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from troupe.local import LocalCluster, free_ports


def run_example(name: str, doc: str, train: str, test: str, make_data: str, steps: int,
                data: str, learning_rate: float, embedding_lr: float,
                work: Callable[[Path, int, int, int], None],
                evaluate: Callable[[Path, Path], dict]) -> None:
    """An example's command line: as a worker process (--worker, started by
    itself), `work(conf, task, workers, batch)`; else a local cluster of 1 ps,
    the chief and --workers of those processes, then `evaluate(conf,
    checkpoints)` printed as one JSON line with the run's figures. `data`: the
    [data] section's lines after train and test."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--train", default=train)
    parser.add_argument("--test", default=test)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=steps, help="global steps (train.last-step)")
    parser.add_argument("--log-dir", default=None,
                        help="logs and checkpoints (default: a temp dir)")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--conf", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        return work(Path(args.conf), args.worker, args.workers, args.batch)
    for path in (args.train, args.test):
        if not Path(path).is_file():
            sys.exit(f"{name}: no {path}: write the data with {make_data}, or give --train and "
                     "--test")
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix=f"troupe-{name}-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    section = (f'train = ["{Path(args.train).resolve()}"]\n'
               f'test = ["{Path(args.test).resolve()}"]\n{data}')
    conf = cluster_config(log_dir, args.workers, args.steps, section, "adagrad", learning_rate,
                          embedding_lr)
    started = time.time()
    script = sys.modules["__main__"].__file__
    with LocalCluster(conf, log_dir) as cluster:
        workers = [subprocess.Popen([sys.executable, script, "--worker", str(i), "--conf",
                                     str(conf), "--workers", str(args.workers), "--batch",
                                     str(args.batch)],
                                    stderr=open(log_dir / f"worker{i}.log", "w"))
                   for i in range(args.workers)]
        codes = [w.wait() for w in workers]
        cluster.wait(timeout=120)
        final = cluster.final()
    if any(codes) or not final["ok"]:
        sys.exit(f"{name}: the run failed (worker exit codes {codes}); logs in {log_dir}")
    result = evaluate(conf, log_dir / "checkpoints")
    result.update(examples_per_sec=final["examples_per_sec"], wall_seconds=time.time() - started,
                  reported=final["reported"], log_dir=str(log_dir))
    print(json.dumps(result))


def cluster_config(log_dir: Path, workers: int, steps: int, data: str, optimizer: str,
                   learning_rate: float, embedding_lr: float) -> Path:
    """A cluster of a chief, 1 ps and `workers` Python workers training a
    declared model, with checkpoints in log_dir/checkpoints; its [data] the
    examples read with troupe.load_data."""
    chief, ps, *worker_ports = free_ports(2 + workers)
    worker_list = ", ".join(f'"127.0.0.1:{p}"' for p in worker_ports)
    conf = log_dir / "cluster.conf"
    conf.write_text(f"""[cluster]
chief = ["127.0.0.1:{chief}"]
ps = ["127.0.0.1:{ps}"]
worker = [{worker_list}]

[train]
model = "declared"
mode = "async"
optimizer = "{optimizer}"
learning-rate = {learning_rate}
last-step = {steps}
seed = 42
log-interval = 500

[embedding]
initializer = "normal"
init-scale = 0.01
optimizer = "{optimizer}"
learning-rate = {embedding_lr}

[data]
{data}
[checkpoint]
log-dir = "{log_dir / 'checkpoints'}"
""")
    return conf


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve, by ranks (ties averaged)."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    ranks[order] = np.arange(1, len(scores) + 1)
    # average the ranks of ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    for start, count in zip(first[counts > 1], counts[counts > 1]):
        ranks[order[start:start + count]] = start + (count + 1) / 2
    positives = labels > 0.5
    n_pos, n_neg = positives.sum(), (~positives).sum()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
