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

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import troupe
import troupe.torch as tt

from common import run_example


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
    run_example("mf", __doc__, "data/movielens/train.csv", "data/movielens/test.csv",
                "scripts/convert-movielens data/movielens", 6000,
                'label-column = "rating"\ntask = "regression"\n'
                'categorical-columns = ["userId", "movieId"]\nignore-columns = ["timestamp"]\n',
                0.05, 0.2, work, evaluate)


if __name__ == "__main__":
    main()
