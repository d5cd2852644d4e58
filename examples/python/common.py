"""What the examples share: a local cluster's configuration, and AUC."""

import socket
from pathlib import Path

import numpy as np


def free_ports(count: int):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


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
