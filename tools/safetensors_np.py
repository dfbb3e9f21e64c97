"""safetensors_np — safetensors files with NumPy alone (no torch, no safetensors package), for
tools/torch_eval.py and tests/torch_names.py: F32, F64, F16, BF16 and I64 tensors."""
import json, struct

import numpy as np

NP = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "F16": np.float16}


def read(path):
    """name -> (dtype, shape, array), in the file's order; BF16 comes back as float32"""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    data = b[8 + n:]
    t = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(data[s:e], np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(data[s:e], NP[v["dtype"]])
        t[k] = (v["dtype"], v["shape"], a.reshape(v["shape"]))
    return t


def write(path, tensors):
    """tensors: (name, dtype, array) in order; BF16 is written by truncating float32"""
    hdr, off, blobs = {}, 0, []
    for name, dtype, a in tensors:
        if dtype == "BF16":
            raw = (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        else:
            raw = np.ascontiguousarray(a, NP[dtype]).tobytes()
        hdr[name] = {"dtype": dtype, "shape": list(np.shape(a)), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
