"""The epochs loop both PyTorch baselines share (pytorch_ctr.py, pytorch_mf.py)."""
import json
import time

import torch


def train_epochs(n, batch, epochs, seed, shuffle, opts, batch_loss, after_epoch):
    """Trains `epochs` passes over `n` examples in batches of `batch`, reshuffled
    each epoch from `seed` unless `shuffle` is false: batch_loss(indices) gives a
    batch's loss, each of `opts` steps on it. after_epoch(epoch, seconds) runs
    after each pass. Returns the seconds spent training."""
    gen = torch.Generator().manual_seed(seed)
    train_s = 0.0
    for epoch in range(1, epochs + 1):
        t = time.perf_counter()
        order = torch.randperm(n, generator=gen) if shuffle else torch.arange(n)
        for s in range(0, n, batch):
            loss = batch_loss(order[s:s + batch])
            for o in opts:
                o.zero_grad(set_to_none=True)
            loss.backward()
            for o in opts:
                o.step()
        dt = time.perf_counter() - t
        train_s += dt
        after_epoch(epoch, dt)
    return train_s


def finish(out, args):
    """`out` with every command-line argument not already in it, as one JSON line."""
    for k, v in vars(args).items():
        out.setdefault(k, v)
    print(json.dumps(out), flush=True)
