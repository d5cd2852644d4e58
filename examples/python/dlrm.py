#!/usr/bin/python3
"""DLRM on click-through data, its embedding rows on Troupe's parameter server.

One command runs a local cluster: 1 ps and the chief (troupe-node), and
--workers Python worker processes training the module below; then it loads
the trained module from the run's checkpoint and prints its test AUC:

    scripts/make-ctr-data data/ctr               # train.tsv, test.tsv (Criteo's layout)
    examples/python/dlrm.py [--train data/ctr/train.tsv] [--test data/ctr/test.tsv]

The model (Naumov et al., 2019): a bottom MLP over the 13 dense values, an
embedding bag per categorical field (one table for all 26 fields: Troupe's
keys tell fields apart), the pairwise dot products of the 27 vectors, and a
top MLP over them and the bottom's output. The data is read by Troupe's own
reader (troupe.load_data), so the keys are those a troupe-node worker uses.
"""

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import troupe
import troupe.torch as tt

from common import auc, run_example


class DLRM(torch.nn.Module):
    def __init__(self, dense: int, fields: int, dim: int = 16):
        super().__init__()
        self.fields = fields
        self.bottom = torch.nn.Sequential(torch.nn.Linear(dense, 64), torch.nn.ReLU(),
                                          torch.nn.Linear(64, dim), torch.nn.ReLU())
        self.tables = tt.EmbeddingBag("ids", dim, mode="sum", padding_idx=-1)
        pairs = (fields + 1) * fields // 2
        self.top = torch.nn.Sequential(torch.nn.Linear(dim + pairs, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 1))
        rows, cols = torch.triu_indices(fields + 1, fields + 1, offset=1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """dense [B, 13]; ids [B, fields, slots] (-1: empty) -> logits [B]."""
        batch = dense.shape[0]
        bottom = self.bottom(dense)
        bags = self.tables(ids.reshape(batch * self.fields, -1)).view(batch, self.fields, -1)
        vectors = torch.cat([bottom.unsqueeze(1), bags], dim=1)
        dots = torch.bmm(vectors, vectors.transpose(1, 2))[:, self.rows, self.cols]
        return self.top(torch.cat([bottom, dots], dim=1)).squeeze(1)


def module_for(data: troupe.DataSet) -> DLRM:
    torch.manual_seed(0)  # each worker's module starts the same (the first one declared wins)
    return DLRM(data.dense.shape[1], data.keys.shape[1])


def batches(data: troupe.DataSet, task: int, workers: int, batch: int, seed: int):
    """Worker `task`'s share of the examples, reshuffled each pass."""
    share = np.arange(task, len(data), workers)
    rng = np.random.default_rng(seed + task)
    while True:
        rng.shuffle(share)
        for k in range(0, len(share) - batch + 1, batch):
            rows = share[k:k + batch]
            yield (torch.from_numpy(data.dense[rows]), torch.from_numpy(data.keys[rows]),
                   torch.from_numpy(data.labels[rows].astype(np.float32)))


def work(conf: Path, task: int, workers: int, batch: int) -> None:
    """A worker process: trains until the chief says the run is over."""
    train, _ = troupe.load_data(conf)
    module = module_for(train)
    losses = []
    with tt.worker(module, conf, task=task) as w:
        for dense, ids, label in w.batches(batches(train, task, workers, batch, 42),
                                           keys=lambda b: {"ids": b[1]}):
            losses.append(w.step(
                lambda m: F.binary_cross_entropy_with_logits(m(dense, ids), label)))
            if len(losses) % 100 == 0:
                w.report(train_logloss=float(np.mean(losses[-100:])))


def evaluate(conf: Path, log_dir: Path) -> dict:
    train, test = troupe.load_data(conf)
    module = module_for(train)
    step = tt.load(module, log_dir)
    with torch.no_grad():
        logits = torch.cat([module(torch.from_numpy(test.dense[k:k + 8192]),
                                   torch.from_numpy(test.keys[k:k + 8192]))
                            for k in range(0, len(test), 8192)])
    labels = test.labels.astype(np.float64)
    p = torch.sigmoid(logits).double().clamp(1e-7, 1 - 1e-7).numpy()
    logloss = float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))
    return {"step": step, "test_auc": auc(logits.numpy(), labels), "test_logloss": logloss,
            "test_examples": len(test)}


def main() -> None:
    run_example("dlrm", __doc__, "data/ctr/train.tsv", "data/ctr/test.tsv",
                "scripts/make-ctr-data data/ctr", 3000, 'format = "criteo"\n', 0.05, 0.05,
                work, evaluate)


if __name__ == "__main__":
    main()
