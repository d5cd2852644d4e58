#!/usr/bin/python3
"""Biased matrix factorisation on MovieLens, its rows on Troupe's parameter server.

One command runs a local cluster: 1 ps and the chief (troupe-node), and
--workers Python worker processes training the module below; then it loads
the trained module from the run's checkpoint and prints its test RMSE:

    scripts/convert-movielens data/movielens     # train.csv, test.csv
    examples/python/mf.py [--train data/movielens/train.csv] [--test data/movielens/test.csv]

rating = mean + b_user + b_movie + p_user . q_movie: a dense mean and two
tables (factors and biases) keyed by Troupe's field keys of userId and
movieId, as troupe.load_data reads them.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import troupe
import troupe.torch as tt
from troupe.local import LocalCluster

from common import cluster_config


class BiasedMF(torch.nn.Module):
    def __init__(self, dim: int = 32, mean: float = 3.5):
        super().__init__()
        self.factors = tt.Embedding("factors", dim)
        self.biases = tt.Embedding("biases", 1)
        self.mean = torch.nn.Parameter(torch.full((1,), mean))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, 2]: the user's and the movie's keys -> ratings [B]."""
        p, q = self.factors(ids).unbind(1)
        return self.mean + self.biases(ids).sum((1, 2)) + (p * q).sum(1)


def pairs(data: troupe.DataSet) -> np.ndarray:
    return np.ascontiguousarray(data.keys[:, :, 0])  # one key per field


def batches(data: troupe.DataSet, task: int, workers: int, batch: int):
    ids, targets = pairs(data), data.targets
    share = np.arange(task, len(data), workers)
    rng = np.random.default_rng(42 + task)
    while True:
        rng.shuffle(share)
        for k in range(0, len(share) - batch + 1, batch):
            rows = share[k:k + batch]
            yield torch.from_numpy(ids[rows]), torch.from_numpy(targets[rows])


def work(conf: Path, task: int, workers: int, batch: int) -> None:
    train, _ = troupe.load_data(conf)
    module = BiasedMF(mean=float(train.targets.mean()))
    losses = []
    with tt.worker(module, conf, task=task) as w:
        for ids, rating in w.batches(batches(train, task, workers, batch),
                                     keys=lambda b: {"factors": b[0], "biases": b[0]}):
            losses.append(w.step(lambda m: F.mse_loss(m(ids), rating)))
            if len(losses) % 100 == 0:
                w.report(train_rmse=float(np.sqrt(np.mean(losses[-100:]))))


def evaluate(conf: Path, log_dir: Path) -> dict:
    train, test = troupe.load_data(conf)
    module = BiasedMF()
    step = tt.load(module, log_dir)
    with torch.no_grad():
        predicted = module(torch.from_numpy(pairs(test))).clamp(0.5, 5.0).numpy()
    rmse = float(np.sqrt(np.mean((predicted - test.targets) ** 2)))
    baseline = float(np.sqrt(np.mean((train.targets.mean() - test.targets) ** 2)))
    return {"step": step, "test_rmse": rmse, "rmse_of_the_mean": baseline,
            "test_examples": len(test)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", default="data/movielens/train.csv")
    parser.add_argument("--test", default="data/movielens/test.csv")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=6000, help="global steps (train.last-step)")
    parser.add_argument("--log-dir", default=None,
                        help="logs and checkpoints (default: a temp dir)")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--conf", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        return work(Path(args.conf), args.worker, args.workers, args.batch)
    for path in (args.train, args.test):
        if not Path(path).is_file():
            sys.exit(f"mf: no {path}: write the data with scripts/convert-movielens "
                     "data/movielens, or give --train and --test")
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="troupe-mf-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    conf = cluster_config(log_dir, args.workers, args.steps, data=f"""
train = ["{Path(args.train).resolve()}"]
test = ["{Path(args.test).resolve()}"]
label-column = "rating"
task = "regression"
categorical-columns = ["userId", "movieId"]
ignore-columns = ["timestamp"]
""", optimizer="adagrad", learning_rate=0.05, embedding_lr=0.2)
    started = time.time()
    with LocalCluster(conf, log_dir) as cluster:
        workers = [subprocess.Popen([sys.executable, __file__, "--worker", str(i),
                                     "--conf", str(conf), "--workers", str(args.workers),
                                     "--batch", str(args.batch)],
                                    stderr=open(log_dir / f"worker{i}.log", "w"))
                   for i in range(args.workers)]
        codes = [w.wait() for w in workers]
        cluster.wait(timeout=120)
        final = cluster.final()
    if any(codes) or not final["ok"]:
        sys.exit(f"mf: the run failed (worker exit codes {codes}); logs in {log_dir}")
    result = evaluate(conf, log_dir / "checkpoints")
    result.update(examples_per_sec=final["examples_per_sec"], wall_seconds=time.time() - started,
                  reported=final["reported"], log_dir=str(log_dir))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
