"""A factorization machine for click-through rate in PyTorch: issue 28's baseline.

The model Troupe's embedding tables are compared with (benchmark 4), on the
Criteo-layout TSV of scripts/make-ctr-data OUTDIR (train.tsv, test.tsv,
oracle.json; a line is label, I1..I13, C1..C26, tab-separated, any field but
the label may be empty):
  logit = bias + sum_f w[key_f] + dot(d, [log(1 + I), I is empty])
          + 0.5 * sum_k ((sum_f v_fk)^2 - sum_f v_fk^2)
over the 26 categorical fields f. w is nn.EmbeddingBag(mode="sum",
sparse=True) of dimension 1, summing the 26 keys of a row in one call; v is
nn.Embedding(dim, sparse=True): the pairwise term needs each field's vector,
not only their sum that an EmbeddingBag returns. Both tables hold every field
(one key per (field, value)); row 0 is the padding row (padding_idx, zero, never
updated) that an empty field points at, so an empty field contributes nothing,
and an empty or negative integer field gives the feature 0; each integer field
also has an indicator, 1 where it is empty, as Troupe's reader gives it.
bias and d are dense. Loss: BCEWithLogits, the mean over the batch. Optimizer: Adagrad, one
instance for the sparse tables (--row-lr, --initial-accumulator) and one for
the dense parameters (--dense-lr, initial_accumulator_value 0.1 as TF's); both
rates default to --lr. At TF's initial accumulator of 0.1 the default lr 1.0
gave the best test logloss (and about the best AUC) after one epoch over 1M
rows of make-ctr-data among 0.02..5 (bench/pytorch_baselines.md): with a mean
loss over 1024 rows, a rare key's gradients are far below sqrt(0.1), so the
accumulator never grows past its start and Adagrad is plain SGD for all but
the hottest rows. An accumulator near the gradients' square (1e-4) makes the
rate per row fall with its own updates, as Adagrad means it to
(bench/embedding-models passes the same settings to both sides).

Keys -> rows by a dictionary built from train.tsv (no hashing, no collisions):
field f's distinct train values get consecutive rows, then one "unknown" row
of f that every test value train never had shares. The unknown rows are never
trained: they keep their initial value (w 0, v N(0, init_stddev^2)), as an
unseen key reads its initial row in Troupe.

The TSV is parsed with Python and numpy into arrays before any timing (the
parse time is reported apart); --max-rows keeps the first N train lines (the
test set stays whole, for the comparison with oracle.json's figures).
Prints per epoch
  epoch=E test_auc=X test_logloss=Y examples_per_sec=Z
and at the end one JSON line with the figures, the oracle's AUC and logloss
(auc_gap = oracle_auc - test_auc) and every argument. AUC is exact
(rank-based, ties averaged); logloss clips probabilities to [1e-7, 1 - 1e-7].
examples_per_sec: training examples / training wall time (shuffle and steps).

  /usr/bin/python3 bench/pytorch_ctr.py --data /tmp/ctr1m
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from pytorch_loop import finish, train_epochs

NI, NC = 13, 26


def _bad(path, lines, first, what):
    """Exits naming the first line of the chunk that is wrong."""
    nf = 1 + NI + NC
    for k, l in enumerate(lines):
        if l.rstrip(b"\r\n").count(b"\t") != nf - 1:
            sys.exit("pytorch_ctr: %s:%d: %d fields, want %d"
                     % (path, first + k + 1, l.count(b"\t") + 1, nf))
    sys.exit("pytorch_ctr: %s: lines %d..%d: %s" % (path, first + 1, first + len(lines), what))


def _decimal(buf, st, en):
    """Parses the decimal integers buf[st:en] (row-wise arrays), an optional
    leading '-'. Returns (float64 values, empty mask) or None if malformed."""
    ln = en - st
    neg = (ln > 0) & (buf[np.minimum(st, len(buf) - 1)] == 45)
    st = st + neg
    ln = en - st
    if (neg & (ln == 0)).any():
        return None
    L = int(ln.max()) if len(ln) else 0
    if L > 18:
        return None
    if L == 0:
        return np.zeros(len(st)), ln == 0
    k = np.arange(L)
    valid = k < ln[:, None]
    ch = buf[np.where(valid, st[:, None] + k, 0)].astype(np.int64) - 48
    if ((ch < 0) | (ch > 9))[valid].any():
        return None
    v = np.where(valid, ch * 10.0 ** np.maximum(ln[:, None] - 1 - k, 0), 0.0).sum(1)
    v[neg] = -v[neg]
    return v, ln == 0


_HEX = np.full(256, -1, np.int64)
_HEX[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
_HEX[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
_HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16)
_SHIFT = 4 * np.arange(7, -1, -1)


def _hex8(buf, st, en):
    """Parses 8 hex digits buf[st:st+8] (or an empty field: -1). None if malformed."""
    ln = en - st
    empty = ln == 0
    if not ((ln == 8) | empty).all():
        return None
    d = _HEX[buf[np.where(empty, 0, st)[:, None] + np.arange(8)]]
    if (d[~empty] < 0).any():
        return None
    v = (d << _SHIFT).sum(1)
    v[empty] = -1
    return v


def parse_tsv(path, max_rows=0):
    """Returns labels float32 [n], ints float32 [n, 26]: log(1 + max(I, 0))
    (empty: 0) then 1 where I is empty, cats int64 [n, 26] as the hex value (empty: -1). Vectorised
    with numpy over the bytes of 32 MiB chunks of whole lines."""
    nf = 1 + NI + NC
    labels, ints, cats = [], [], []
    n = 0
    with open(path, "rb") as f:
        while True:
            lines = f.readlines(32 << 20)
            if not lines:
                break
            if max_rows and n + len(lines) > max_rows:
                lines = lines[:max_rows - n]
            data = b"".join(lines).replace(b"\r", b"")
            if not data.endswith(b"\n"):
                data += b"\n"
            nr = len(lines)
            buf = np.frombuffer(data, np.uint8)
            seps = np.flatnonzero((buf == 9) | (buf == 10))
            if len(seps) != nr * nf:
                _bad(path, lines, n, "wrong field count")
            st = np.empty_like(seps)
            st[0] = 0
            st[1:] = seps[:-1] + 1
            st, en = st.reshape(nr, nf), seps.reshape(nr, nf)
            if not (buf[en[:, nf - 1]] == 10).all():
                _bad(path, lines, n, "wrong field count")
            r = _decimal(buf, st[:, 0], en[:, 0])
            if r is None or r[1].any() or not np.isin(r[0], (0.0, 1.0)).all():
                _bad(path, lines, n, "a label that is not 0 or 1")
            labels.append(r[0].astype(np.float32))
            iv = np.empty((nr, 2 * NI), np.float32)
            for j in range(NI):
                r = _decimal(buf, st[:, 1 + j], en[:, 1 + j])
                if r is None:
                    _bad(path, lines, n, "field I%d is not an integer" % (j + 1))
                iv[:, j] = np.log1p(np.maximum(r[0], 0.0))   # empty: 0
                iv[:, NI + j] = r[1]
            ints.append(iv)
            cv = np.empty((nr, NC), np.int64)
            for j in range(NC):
                v = _hex8(buf, st[:, 1 + NI + j], en[:, 1 + NI + j])
                if v is None:
                    _bad(path, lines, n, "field C%d is not 8 hex digits" % (j + 1))
                cv[:, j] = v
            cats.append(cv)
            n += nr
            if max_rows and n >= max_rows:
                break
    if n == 0:
        sys.exit("pytorch_ctr: %s: no rows" % path)
    return np.concatenate(labels), np.concatenate(ints), np.concatenate(cats)


def build_rows(train_cats, test_cats):
    """Per field: train's distinct values, then an unknown row; row 0 pads."""
    tr = np.zeros(train_cats.shape, np.int64)
    te = np.zeros(test_cats.shape, np.int64)
    base = 1
    unknown_test = 0
    for j in range(NC):
        c = train_cats[:, j]
        vocab = np.unique(c[c >= 0])
        m = c >= 0
        tr[m, j] = base + np.searchsorted(vocab, c[m])
        t = test_cats[:, j]
        mt = t >= 0
        pos = np.searchsorted(vocab, t[mt])
        found = pos < len(vocab)
        found[found] = vocab[pos[found]] == t[mt][found]
        unknown_test += int((~found).sum())
        te[mt, j] = np.where(found, base + pos, base + len(vocab))
        base += len(vocab) + 1
    return tr, te, base, unknown_test


class FM(nn.Module):
    def __init__(self, rows, dim, init_stddev):
        super().__init__()
        self.w = nn.EmbeddingBag(rows, 1, mode="sum", sparse=True, padding_idx=0)
        self.v = nn.Embedding(rows, dim, sparse=True, padding_idx=0)
        nn.init.zeros_(self.w.weight)
        nn.init.normal_(self.v.weight, 0.0, init_stddev)
        with torch.no_grad():
            self.v.weight[0].zero_()
        self.bias = nn.Parameter(torch.zeros(()))
        self.dense = nn.Parameter(torch.zeros(2 * NI))

    def forward(self, keys, x):
        v = self.v(keys)                      # [B, 26, dim]
        s = v.sum(1)
        pair = 0.5 * (s * s - (v * v).sum(1)).sum(1)
        return self.bias + self.w(keys).squeeze(1) + x @ self.dense + pair


def auc_exact(y, p):
    order = np.argsort(p, kind="mergesort")
    ps = p[order]
    _, inv, counts = np.unique(ps, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)                  # rank of each tie group's last member, 1-based
    avg = ends - (counts - 1) / 2.0
    ranks = avg[inv]
    pos = y[order] > 0.5
    npos = int(pos.sum())
    nneg = len(y) - npos
    if npos == 0 or nneg == 0:
        return float("nan")
    return float((ranks[pos].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))


def logloss(y, p):
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="directory made by scripts/make-ctr-data")
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--row-lr", type=float, default=None, help="the tables' rate (default: --lr)")
    ap.add_argument("--dense-lr", type=float, default=None,
                    help="bias and d's rate (default: --lr)")
    ap.add_argument("--initial-accumulator", type=float, default=0.1,
                    help="Adagrad's, for the tables")
    ap.add_argument("--init-stddev", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-rows", type=int, default=0, help="first N train lines (0: all)")
    ap.add_argument("--no-shuffle", action="store_true",
                    help="keep train.tsv's order (default: reshuffle every epoch)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    t0 = time.perf_counter()
    ytr, xtr, ctr = parse_tsv(os.path.join(args.data, "train.tsv"), args.max_rows)
    yte, xte, cte = parse_tsv(os.path.join(args.data, "test.tsv"))
    parse_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ktr, kte, rows, unknown_test = build_rows(ctr, cte)
    del ctr, cte
    map_s = time.perf_counter() - t0
    oracle = {}
    op = os.path.join(args.data, "oracle.json")
    if os.path.exists(op):
        with open(op) as f:
            oracle = json.load(f)

    Ytr, Xtr, Ktr = torch.from_numpy(ytr), torch.from_numpy(xtr), torch.from_numpy(ktr)
    Xte, Kte = torch.from_numpy(xte), torch.from_numpy(kte)
    n = len(ytr)

    model = FM(rows, args.dim, args.init_stddev)
    row_lr = args.lr if args.row_lr is None else args.row_lr
    dense_lr = args.lr if args.dense_lr is None else args.dense_lr
    opts = [torch.optim.Adagrad([model.w.weight, model.v.weight], lr=row_lr,
                                initial_accumulator_value=args.initial_accumulator),
            torch.optim.Adagrad([model.bias, model.dense], lr=dense_lr,
                                initial_accumulator_value=0.1)]

    def evaluate():
        with torch.no_grad():
            logits = torch.cat([model(Kte[s:s + 65536], Xte[s:s + 65536])
                                for s in range(0, len(yte), 65536)])
        p = torch.sigmoid(logits.double()).numpy()
        return auc_exact(yte, p), logloss(yte, p)

    history = []
    auc, ll = float("nan"), float("nan")

    def after_epoch(epoch, dt):
        nonlocal auc, ll
        auc, ll = evaluate()
        history.append({"epoch": epoch, "test_auc": round(auc, 5), "test_logloss": round(ll, 5),
                        "examples_per_sec": round(n / dt)})
        print("epoch=%d test_auc=%.4f test_logloss=%.4f examples_per_sec=%.0f"
              % (epoch, auc, ll, n / dt), flush=True)

    def batch_loss(b):
        return F.binary_cross_entropy_with_logits(model(Ktr[b], Xtr[b]), Ytr[b])

    train_s = train_epochs(n, args.batch, args.epochs, args.seed, not args.no_shuffle, opts,
                           batch_loss, after_epoch)

    oauc = oracle.get("auc")
    out = {"framework": "pytorch", "model": "fm", "test_auc": round(auc, 5),
           "test_logloss": round(ll, 5),
           "oracle_auc": oauc, "oracle_logloss": oracle.get("logloss"),
           "auc_gap": round(oauc - auc, 5) if oauc is not None else None,
           "examples_per_sec": round(n * args.epochs / train_s) if train_s > 0 else None,
           "train_seconds": round(train_s, 3), "parse_seconds": round(parse_s, 3),
           "map_seconds": round(map_s, 3),
           "train_examples": n, "test_examples": len(yte), "table_rows": rows,
           "test_unknown_values": unknown_test,
           "key_mapping": "dictionary from train, unknown row per field",
           "history": history, "torch": torch.__version__}
    finish(out, args)


if __name__ == "__main__":
    main()
