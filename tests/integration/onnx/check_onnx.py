"""Checks a Troupe model.onnx outside Troupe: onnx.checker accepts it, and
OpenCV's dnn module (an independent ONNX runtime) computes, on the raw
inputs, what troupe-predict wrote for the same inputs (probabilities, or the
value for regression), within 1e-5.
    check_onnx.py MODEL.onnx INPUT(.csv | idx.gz) PREDICTIONS.csv [LABEL_COLUMN]
Prints "max abs diff D over N examples"; exits 1 when D > 1e-5."""
import csv
import gzip
import struct
import sys

import cv2
import numpy as np
import onnx

model_path, input_path, pred_path = sys.argv[1:4]
label_column = sys.argv[4] if len(sys.argv) > 4 else None
model = onnx.load(model_path)
onnx.checker.check_model(model)
shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]

if input_path.endswith(".csv"):
    rows = list(csv.reader(open(input_path)))
    header, body = rows[0], rows[1:]
    skip = header.index(label_column) if label_column in header else -1
    x = np.array([[float(v) for i, v in enumerate(r) if i != skip] for r in body], np.float32)
else:  # IDX, gzipped: magic, count, then dims
    data = gzip.open(input_path).read()
    dims = data[3]
    count = struct.unpack(">I", data[4:8])[0]
    x = np.frombuffer(data[4 + 4 * dims:], np.uint8).astype(np.float32).reshape(count, -1)
x = x.reshape([len(x)] + shape)

net = cv2.dnn.readNetFromONNX(model_path)
out = []
for start in range(0, len(x), 500):
    net.setInput(np.ascontiguousarray(x[start:start + 500]))
    out.append(net.forward().reshape(min(500, len(x) - start), -1))
out = np.concatenate(out)
pred_rows = list(csv.reader(open(pred_path)))
first = 3 if "label" in pred_rows[0] else 2 if pred_rows[0][1] == "class" else 1
pred = np.array([[float(v) for v in r[first:]] for r in pred_rows[1:]])
if out.shape != pred.shape:
    sys.exit("shapes differ: onnx %s, troupe-predict %s" % (out.shape, pred.shape))
diff = float(np.abs(out - pred).max())
print("max abs diff %.3g over %d examples" % (diff, len(x)))
sys.exit(0 if diff <= 1e-5 else 1)
