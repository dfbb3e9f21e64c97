#!/usr/bin/env python3
"""mkidx.py DIR N_TRAIN N_TEST [SEED] — writes the four MNIST-style IDX files (gzip) of a small,
learnable dataset: class c images are noisy copies of a fixed random pattern for c.
Standard library only, so tests need nothing beyond python3."""
import gzip, random, struct, sys, os

def idx(path, dims, data):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 8, len(dims)))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(bytes(data))

def main():
    out, ntr, nte = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 7)
    os.makedirs(out, exist_ok=True)
    protos = [[rng.randrange(256) for _ in range(784)] for _ in range(10)]
    for name, n in (("train", ntr), ("t10k", nte)):
        labels = [rng.randrange(10) for _ in range(n)]
        px = []
        for c in labels:
            px.extend(min(255, max(0, p + rng.randrange(-60, 61))) for p in protos[c])
        idx(f"{out}/{name}-images-idx3-ubyte.gz", [n, 28, 28], px)
        idx(f"{out}/{name}-labels-idx1-ubyte.gz", [n], labels)

main()
