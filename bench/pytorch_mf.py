"""Biased matrix factorisation on MovieLens in PyTorch: issue 28's baseline.

The model Troupe's embedding tables are compared with (benchmark 3):
  prediction = global_bias + user_bias[u] + item_bias[i] + dot(P[u], Q[i])
P, Q, user_bias and item_bias are nn.Embedding(sparse=True) tables (the biases
of dimension 1), so each step reads and updates only the rows of its batch;
global_bias is a dense parameter that starts at the train mean. Loss: the mean
squared error of the batch, no regularisation. Optimizer: Adagrad
(initial_accumulator_value 0.1, as TF's) or plain SGD, one instance for the
sparse tables and one of the same kind for the dense global bias.
The defaults (Adagrad, lr 0.4, dim 32, batch 256, 20 epochs) gave the lowest
final-epoch test RMSE of a sweep over lr, optimizer and dim with at most 20
epochs (bench/pytorch_baselines.md); with no regularisation, larger rates
reach about the same minimum sooner and then overfit.

Ids: raw userId and movieId are mapped to contiguous rows by np.unique over
train.csv and test.csv together, so every test id has a row; a movie that only
test.csv rates keeps its initial row (bias 0, factors N(0, init_stddev^2)),
and its prediction is about global_bias + user_bias[u].

Input: a directory made by scripts/convert-movielens OUTDIR (train.csv,
test.csv with header userId,movieId,rating,timestamp).
Prints after every epoch
  epoch=E test_rmse=X train_examples_per_sec=Y
and at the end one JSON line with the figures and every argument.
examples_per_sec: training examples / training wall time (the shuffles and the
steps; not the CSV loading nor the evaluation).

  /usr/bin/python3 bench/pytorch_mf.py --data /tmp/ml
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from pytorch_loop import finish, train_epochs


def load_csv(path):
    a = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    if a.shape[1] != 4:
        sys.exit("pytorch_mf: %s: want 4 columns userId,movieId,rating,timestamp" % path)
    return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.float32)


class MF(nn.Module):
    def __init__(self, users, items, dim, init_stddev, mean):
        super().__init__()
        self.P = nn.Embedding(users, dim, sparse=True)
        self.Q = nn.Embedding(items, dim, sparse=True)
        self.user_bias = nn.Embedding(users, 1, sparse=True)
        self.item_bias = nn.Embedding(items, 1, sparse=True)
        nn.init.normal_(self.P.weight, 0.0, init_stddev)
        nn.init.normal_(self.Q.weight, 0.0, init_stddev)
        nn.init.zeros_(self.user_bias.weight)
        nn.init.zeros_(self.item_bias.weight)
        self.global_bias = nn.Parameter(torch.tensor(float(mean)))

    def forward(self, u, i):
        dot = (self.P(u) * self.Q(i)).sum(1)
        return self.global_bias + self.user_bias(u).squeeze(1) + self.item_bias(i).squeeze(1) + dot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="directory made by scripts/convert-movielens")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--optimizer", choices=["sgd", "adagrad"], default="adagrad")
    ap.add_argument("--lr", type=float, default=0.4)
    ap.add_argument("--init-stddev", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-shuffle", action="store_true",
                    help="keep train.csv's order (default: reshuffle every epoch)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    t0 = time.perf_counter()
    tr_u, tr_i, tr_r = load_csv(os.path.join(args.data, "train.csv"))
    te_u, te_i, te_r = load_csv(os.path.join(args.data, "test.csv"))
    users, uidx = np.unique(np.concatenate([tr_u, te_u]), return_inverse=True)
    items, iidx = np.unique(np.concatenate([tr_i, te_i]), return_inverse=True)
    n_tr = len(tr_r)
    mean = float(tr_r.astype(np.float64).mean())
    unseen_items = int((~np.isin(te_i, tr_i)).sum())
    unseen_users = int((~np.isin(te_u, tr_u)).sum())
    U = torch.from_numpy(uidx[:n_tr].astype(np.int64))
    It = torch.from_numpy(iidx[:n_tr].astype(np.int64))
    R = torch.from_numpy(tr_r)
    TU = torch.from_numpy(uidx[n_tr:].astype(np.int64))
    TI = torch.from_numpy(iidx[n_tr:].astype(np.int64))
    TR = torch.from_numpy(te_r)
    load_s = time.perf_counter() - t0

    model = MF(len(users), len(items), args.dim, args.init_stddev, mean)
    sparse = [model.P.weight, model.Q.weight, model.user_bias.weight, model.item_bias.weight]
    dense = [model.global_bias]
    if args.optimizer == "adagrad":
        opts = [torch.optim.Adagrad(sparse, lr=args.lr, initial_accumulator_value=0.1),
                torch.optim.Adagrad(dense, lr=args.lr, initial_accumulator_value=0.1)]
    else:
        opts = [torch.optim.SGD(sparse, lr=args.lr), torch.optim.SGD(dense, lr=args.lr)]

    def test_rmse():
        with torch.no_grad():
            return float(torch.sqrt(F.mse_loss(model(TU, TI), TR)))

    history = []
    rmse = test_rmse()

    def after_epoch(epoch, dt):
        nonlocal rmse
        rmse = test_rmse()
        history.append(round(rmse, 5))
        print("epoch=%d test_rmse=%.4f train_examples_per_sec=%.0f" % (epoch, rmse, n_tr / dt),
              flush=True)

    train_s = train_epochs(n_tr, args.batch, args.epochs, args.seed, not args.no_shuffle, opts,
                           lambda b: F.mse_loss(model(U[b], It[b]), R[b]), after_epoch)

    out = {"framework": "pytorch", "model": "mf", "test_rmse": round(rmse, 5),
           "examples_per_sec": round(n_tr * args.epochs / train_s) if train_s > 0 else None,
           "train_seconds": round(train_s, 3), "load_seconds": round(load_s, 3),
           "test_rmse_by_epoch": history,
           "baseline_mean_rmse": round(float(torch.sqrt(((TR - mean) ** 2).mean())), 5),
           "train_examples": n_tr, "test_examples": len(te_r), "users": len(users),
           "items": len(items),
           "test_unseen_users": unseen_users, "test_unseen_items": unseen_items,
           "torch": torch.__version__}
    finish(out, args)


if __name__ == "__main__":
    main()
