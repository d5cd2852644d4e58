"""model.onnx of a model over a fixed-size embedding table (fm, deepfm, a
custom network over an embedding layer), checked outside Troupe.

    onnx_table_check.py EXPORT_DIR DATA PREDICTIONS_CSV

onnx.checker accepts the file; a small numpy interpreter of the operators
the graph uses (Debian's python3-onnx 1.12 has no evaluator of its own, and
OpenCV's dnn importer does not take int64 inputs) computes the probabilities
(or values) of every example in DATA from the inputs docs/export.md
describes: each field's row (embedding.id-mapping's arithmetic, done here
from Troupe's documented key hash) and the dense values as Troupe's reader
gives them. They must match troupe-predict's PREDICTIONS_CSV within 1e-5.
Prints the largest difference; exits 1 on a mismatch.
"""
import json
import math
import sys

import numpy as np
import onnx
from onnx import numpy_helper

MASK64 = (1 << 64) - 1


def mix64(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & MASK64
    k ^= k >> 33
    return k


def hash_bytes(text):
    h = 0xCBF29CE484222325
    for c in text.encode():
        h ^= c
        h = (h * 0x100000001B3) & MASK64
    return mix64(h)


def category_key(text):
    """docs/embeddings.md: ids stay ids, anything else 2^48 | hash mod 2^47."""
    plain = 0 < len(text) <= 15 and text.isdigit() and (len(text) == 1 or text[0] != "0")
    if plain and int(text) < (1 << 48):
        return int(text)
    return (1 << 48) | (hash_bytes(text) & ((1 << 47) - 1))


def field_row(text, size, mapping):
    key = category_key(text)
    if mapping == "hash":
        return mix64(key) % size
    if key >= (1 << 48):
        return (key & ((1 << 48) - 1)) % size
    assert key < size, f"id {key} past its field's {size} rows"
    return key


def criteo_inputs(path, card):
    sizes, mapping = card["embedding"]["vocabulary"], card["embedding"]["id_mapping"]
    ids, dense = [], []
    for line in open(path):
        f = line.rstrip("\r\n").split("\t")
        dense.append([math.copysign(math.log1p(abs(int(x))), int(x)) if x else 0.0
                      for x in f[1:14]] + [0.0 if x else 1.0 for x in f[1:14]])
        ids.append([field_row(x, sizes[c], mapping) if x else -1 for c, x in enumerate(f[14:40])])
    return {"ids": np.array(ids, dtype=np.int64), "dense": np.array(dense, dtype=np.float32)}


def run(model, feeds):
    env = dict(feeds)
    for init in model.graph.initializer:
        env[init.name] = numpy_helper.to_array(init)

    def attr(node, name, default=None):
        return next((onnx.helper.get_attribute_value(a) for a in node.attribute
                     if a.name == name), default)

    for node in model.graph.node:
        x = [env[i] for i in node.input]
        op = node.op_type
        if op in ("Add", "Sub", "Mul", "Max"):
            fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum}[op]
            out = fn(x[0], x[1])
        elif op == "GreaterOrEqual":
            out = x[0] >= x[1]
        elif op == "Cast":
            assert attr(node, "to") == onnx.TensorProto.FLOAT
            out = x[0].astype(np.float32)
        elif op == "Gather":
            out = np.take(x[0], x[1], axis=attr(node, "axis", 0))
        elif op == "Reshape":
            out = x[0].reshape(x[1])
        elif op == "ReduceSum":
            out = x[0].sum(axis=tuple(x[1]), keepdims=bool(attr(node, "keepdims", 1)))
        elif op == "Slice":
            index = [slice(None)] * x[0].ndim
            for start, end, axis in zip(x[1], x[2], x[3]):
                index[axis] = slice(start, end)
            out = x[0][tuple(index)]
        elif op == "MatMul":
            out = x[0] @ x[1]
        elif op == "Gemm":
            out = x[0] @ (x[1].T if attr(node, "transB", 0) else x[1]) + x[2]
        elif op == "Relu":
            out = np.maximum(x[0], 0)
        elif op == "Concat":
            out = np.concatenate(x, axis=attr(node, "axis"))
        elif op == "Softmax":
            z = np.exp(x[0] - x[0].max(axis=1, keepdims=True))
            out = z / z.sum(axis=1, keepdims=True)
        elif op == "Identity":
            out = x[0]
        else:
            raise SystemExit(f"operator {op} is not interpreted here")
        env[node.output[0]] = out
    return env[model.graph.output[0].name]


def main():
    export, data, predictions = sys.argv[1:4]
    model = onnx.load(f"{export}/model.onnx")
    onnx.checker.check_model(model)
    card = json.load(open(f"{export}/model.json"))
    feeds = criteo_inputs(data, card)
    names = {i.name for i in model.graph.input}
    out = run(model, {k: v for k, v in feeds.items() if k in names})
    want = np.loadtxt(predictions, delimiter=",", skiprows=1)[:, 2:]
    diff = float(np.abs(out - want).max())
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"onnx: {len(want)} examples, largest difference {diff:.2e}; operators {' '.join(ops)}")
    sys.exit(0 if out.shape == want.shape and diff < 1e-5 else 1)


main()
