#!/usr/bin/python3
"""tests/ckpt_edit.py IN OUT TENSOR INDEX VALUE

Writes OUT: the dtrain checkpoint IN with element INDEX of F32 tensor TENSOR set to VALUE (a float,
nan or inf), and its checksum made again as dtrain makes it (src/ckpt.c's meta_sum and
src/safetensors.c's sum_tensor: FNV-1a over the metadata pairs but the checksum, in order, then
per tensor in the header's order its name with its NUL, its int32 dimension count, its int64 shape,
and its data as 32-bit words). So the file passes the checksum, and what dtrain then makes of the
value is what a test sees: a checkpoint damaged or edited in a way no checksum catches.
"""
import json
import struct
import sys

PRIME, MASK = 0x100000001b3, (1 << 64) - 1


def fnv(data, h):
    for c in data:
        h = ((h ^ c) * PRIME) & MASK
    return h


def fnv_words(data, h):
    for (w,) in struct.iter_unpack("<I", data[:len(data) // 4 * 4]):
        h = ((h ^ w) * PRIME) & MASK
    return h


def main():
    src, dst, name, index, value = sys.argv[1:6]
    raw = open(src, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    data = bytearray(raw[8 + n:])
    e = head[name]
    if e["dtype"] != "F32":
        sys.exit("ckpt_edit: %s is %s, not F32" % (name, e["dtype"]))
    at = e["data_offsets"][0] + 4 * int(index)
    data[at:at + 4] = struct.pack("<f", float(value))
    meta = head["__metadata__"]
    h = 0xcbf29ce484222325
    for k, v in meta.items():
        if k != "checksum":
            h = fnv(k.encode() + b"\0" + v.encode() + b"\0", h)
    for k, t in head.items():
        if k == "__metadata__":
            continue
        h = fnv(k.encode() + b"\0" + struct.pack("<i", len(t["shape"])) + struct.pack("<%dq" % len(t["shape"]), *t["shape"]), h)
        b0, b1 = t["data_offsets"]
        h = fnv_words(bytes(data[b0:b1]), h)
    meta["checksum"] = "%016x" % h
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # the data 8-aligned, as dtrain writes it
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


if __name__ == "__main__":
    main()
