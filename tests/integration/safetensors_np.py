"""Reads a safetensors file with numpy alone (the format: an 8-byte header
length, a JSON header, then each tensor's little-endian bytes)."""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "I64": np.int64, "U32": np.uint32}


def read_safetensors(path: str) -> dict:
    """Every tensor of `path` by name, as numpy arrays."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=DTYPES[entry["dtype"]]).reshape(
            entry["shape"])
    return out


def rows_by_key(tensors: dict) -> dict:
    """An export's table as {key: the bytes of its row}."""
    keys = tensors["embedding/keys"]
    values = tensors["embedding/values"]
    return {int(k): values[i].tobytes() for i, k in enumerate(keys)}


def same_export(a: dict, b: dict) -> str:
    """'' where two exports hold the same rows and variables bit for bit,
    else what differs."""
    if a.keys() != b.keys():
        return "tensors differ: %s" % sorted(set(a.keys()) ^ set(b.keys()))
    for name in a:
        if name.startswith("embedding/"):
            continue
        if a[name].tobytes() != b[name].tobytes():
            return "variable %s differs" % name
    if "embedding/keys" in a:
        ra, rb = rows_by_key(a), rows_by_key(b)
        if ra.keys() != rb.keys():
            return "keys differ: %d only in one, %d only in the other" % (
                len(ra.keys() - rb.keys()), len(rb.keys() - ra.keys()))
        changed = [k for k in ra if ra[k] != rb[k]]
        if changed:
            return "%d rows differ, e.g. key %d" % (len(changed), changed[0])
    return ""
