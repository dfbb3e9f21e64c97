#!/usr/bin/env python3
"""mkimages.py cifar10|cifar100|pngtree DIR N_TRAIN N_TEST [SIZE] [SEED] — small learnable image
datasets in the true formats, standard library only:
  cifar10   data_batch_1..5.bin + test_batch.bin (1 label byte + 3072 channel-major pixels)
  cifar100  train.bin + test.bin (coarse and fine label bytes + 3072 pixels)
  pngtree   train/<class>/*.png and val/<class>/*.png, SIZE x SIZE-ish RGB images
A class is a colour (5 of them) times a stripe direction (horizontal or vertical): what random
crops and left-right flips keep, so augmented training still learns it. Pixel noise +-40."""
import os, random, struct, sys, zlib

COLOURS = [(220, 40, 40), (40, 200, 60), (50, 60, 230), (230, 210, 40), (200, 60, 210)]

def image(rng, k, h, w):
    """channel-major bytes of one h x w image of class k (k % 10 decides)"""
    col, vertical = COLOURS[k % 5], (k // 5) % 2
    phase = rng.randrange(4)
    planes = []
    for c in range(3):
        plane = bytearray(h * w)
        for y in range(h):
            for x in range(w):
                s = ((x if vertical else y) + phase) // 2 % 2
                v = col[c] * (0.45 + 0.55 * s) + rng.randrange(-40, 41)
                plane[y * w + x] = max(0, min(255, int(v)))
        planes.append(bytes(plane))
    return planes

def png(path, planes, h, w):
    raw = bytearray()
    for y in range(h):
        raw.append(0)
        for x in range(w):
            raw += bytes(p[y * w + x] for p in planes)
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + chunk(b"IEND", b""))

def main():
    kind, out, ntr, nte = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    size = int(sys.argv[5]) if len(sys.argv) > 5 else 32
    rng = random.Random(int(sys.argv[6]) if len(sys.argv) > 6 else 11)
    os.makedirs(out, exist_ok=True)
    if kind in ("cifar10", "cifar100"):
        classes = 10 if kind == "cifar10" else 100
        def records(n):
            data = bytearray()
            for _ in range(n):
                k = rng.randrange(classes)
                if kind == "cifar100":
                    data.append(k % 20)
                data.append(k)
                for p in image(rng, k, 32, 32):
                    data += p
            return bytes(data)
        if kind == "cifar10":
            per = [ntr // 5 + (1 if i < ntr % 5 else 0) for i in range(5)]
            for i, n in enumerate(per):
                open(f"{out}/data_batch_{i + 1}.bin", "wb").write(records(n))
            open(f"{out}/test_batch.bin", "wb").write(records(nte))
        else:
            open(f"{out}/train.bin", "wb").write(records(ntr))
            open(f"{out}/test.bin", "wb").write(records(nte))
    elif kind == "pngtree":
        for split, n in (("train", ntr), ("val", nte)):
            for k in range(10):
                os.makedirs(f"{out}/{split}/class{k:02d}", exist_ok=True)
            for i in range(n):
                k = i % 10
                h, w = size + rng.randrange(0, size // 2), size + rng.randrange(0, size // 2)
                png(f"{out}/{split}/class{k:02d}/img{i:05d}.png", image(rng, k, h, w), h, w)
    else:
        sys.exit("expected cifar10, cifar100 or pngtree")

if __name__ == "__main__":
    main()
