#!/usr/bin/env python3
"""numpy_eval.py WEIGHTS.safetensors FASHION_MNIST_DIR — reads dtrain's weight file with nothing
but NumPy (the safetensors layout: 8-byte length, JSON header, raw little-endian data), runs the
mlp forward on the test set with dtrain's input normalisation, prints the accuracy."""
import gzip, json, struct, sys
import numpy as np

def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32"
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"])
    return out

def idx(path):
    with gzip.open(path) as f:
        raw = f.read()
    nd = raw[3]
    dims = struct.unpack(">" + "I" * nd, raw[4:4 + 4 * nd])
    return np.frombuffer(raw[4 + 4 * nd:], dtype=np.uint8).reshape(dims)

w = load(sys.argv[1])
x = idx(sys.argv[2] + "/t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32)
y = idx(sys.argv[2] + "/t10k-labels-idx1-ubyte.gz")
x = (x / 255.0 - 0.2860) / 0.3530          # Fashion-MNIST mean/std, as dtrain normalises
h = np.maximum(x @ w["fc1.weight"].T + w["fc1.bias"], 0)
h = np.maximum(h @ w["fc2.weight"].T + w["fc2.bias"], 0)
z = h @ w["fc3.weight"].T + w["fc3.bias"]
print(f"{(z.argmax(1) == y).mean():.6g}")
