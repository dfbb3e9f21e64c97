#!/usr/bin/python3
"""bench_loader.py — the torchvision side of tools/bench_loader.

bench_loader.py tree DIR N — writes an ImageNet-style JPEG tree: DIR/train/<class>/*.JPEG and
DIR/val/<class>/*.JPEG, 10 classes, N training images of 500 x 375 (ImageNet's most common size),
random smooth colour fields (numpy, fixed seed) as baseline JPEGs of quality 90 (PIL, libjpeg-turbo).

bench_loader.py rate DIR SIZE OUT REPEATS — torchvision's ImageNet training transforms on the same
training images as dtrain's pack holds them: each decoded once, its centred square resized to
SIZE x SIZE (PIL bilinear), kept in memory. Then RandomResizedCrop(OUT), RandomHorizontalFlip,
ToTensor and Normalize per sample, one thread (a DataLoader worker's work), and the batch stacked:
prints {"samples_per_s": best of REPEATS batches of 64} as one JSON line."""
import json, os, sys, time

import numpy as np
from PIL import Image


def tree(d, n):
    rng = np.random.default_rng(7)
    for split, count in (("train", n), ("val", max(10, n // 10))):
        for i in range(count):
            k = i % 10
            cdir = os.path.join(d, split, "n%08d" % k)
            os.makedirs(cdir, exist_ok=True)
            small = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
            im = Image.fromarray(small, "RGB").resize((500, 375), Image.BILINEAR)
            arr = np.asarray(im).astype(np.int16) + rng.integers(-20, 21, size=(375, 500, 3))
            Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB").save(
                os.path.join(cdir, "img%05d.JPEG" % i), "JPEG", quality=90)


def rate(d, size, out, repeats):
    import torch
    import torchvision.transforms as T
    torch.set_num_threads(1)
    images = []
    for root, _, files in sorted(os.walk(os.path.join(d, "train"))):
        for f in sorted(files):
            im = Image.open(os.path.join(root, f)).convert("RGB")
            s = min(im.size)
            left, top = (im.size[0] - s) // 2, (im.size[1] - s) // 2
            images.append(im.crop((left, top, left + s, top + s)).resize((size, size), Image.BILINEAR))
    tf = T.Compose([T.RandomResizedCrop(out), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    torch.manual_seed(0)
    best, batch = 0.0, 64
    for r in range(repeats + 1):
        t = time.perf_counter()
        torch.stack([tf(images[(r * batch + i) % len(images)]) for i in range(batch)])
        t = time.perf_counter() - t
        if r > 0:
            best = max(best, batch / t)
    print(json.dumps({"samples_per_s": round(best, 1)}))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "tree":
        tree(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "rate":
        rate(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit(__doc__)
