"""Runs the numpy reader shown in docs/operations.md on a checkpoint of the
MLP, evaluates the model it holds on the Fashion-MNIST test set, and prints
the accuracy and the names it read:
    read_checkpoint_check.py DOCS_OPERATIONS_MD CHECKPOINT_DIR DATA_DIR"""
import gzip
import re
import sys

import numpy as np

docs, path, data = sys.argv[1:4]
block = re.search(r"```python\n(.*?def read_checkpoint.*?)```", open(docs).read(), re.S).group(1)
namespace = {}
exec(block, namespace)  # exactly the lines users are shown
values = namespace["read_checkpoint"](path)


def idx(name, offset):
    return np.frombuffer(gzip.open(f"{data}/{name}").read(), np.uint8, offset=offset)


images = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
labels = idx("t10k-labels-idx1-ubyte.gz", 8)
h = np.maximum(images @ values["hidden1/weights"] + values["hidden1/biases"], 0)
h = np.maximum(h @ values["hidden2/weights"] + values["hidden2/biases"], 0)
logits = h @ values["softmax_linear/weights"] + values["softmax_linear/biases"]
print("accuracy %.4f" % float((logits.argmax(1) == labels).mean()))
print("names " + " ".join(sorted(values)))
