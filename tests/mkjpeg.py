#!/usr/bin/python3
"""mkjpeg.py tree DIR N_TRAIN N_VAL SIZE — an ImageNet-style JPEG tree, written with PIL (Debian's
python3-pil, which encodes with libjpeg-turbo as ImageNet's own files were made by libjpeg):
train/<class>/*.JPEG and val/<class>/*.JPEG, 10 classes (mkimages.py's colours x stripes), SIZE x SIZE
images cycling through the kinds ImageNet holds:
  baseline      RGB, baseline, 4:2:0
  progressive   RGB, progressive
  cmyk          CMYK (Adobe, inverted), as about 22 ImageNet training images are
  grey          one channel, as about 1,300 are
  png           a PNG named .JPEG, as one ImageNet image is
  wide          RGB, SIZE*3/2 x SIZE: its centred square is what dtrain packs
and PNGs (.png) of the kinds people bring: rgba (alpha), la (grey and alpha), palette (with a
transparent entry), rgb16 and grey16 (16 bits a sample)
and one truncated JPEG, train/<class 0>/zz-truncated.JPEG. DIR/manifest lists every file and kind.

mkjpeg.py check DIR PACK SPLIT — PACK (dtrain's packed SPLIT of DIR) holds every image of DIR/SPLIT
but the truncated one, in order, with the labels of their folders, and each square image's pixels
are PIL's decoding of the file converted to RGB (to L for a pack of one channel): equal for baseline, progressive, grey and the PNGs,
within 2 levels for CMYK (the same formula, another rounding); for grey16, whose values PIL clips
to 255 when it converts, the high byte of each sample (as PIL takes it of rgb16's)."""
import os, random, struct, sys, zlib

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mkimages import image  # noqa: E402

KINDS = ["baseline", "progressive", "cmyk", "grey", "png", "wide", "rgba", "la", "palette", "rgb16", "grey16"]
PNGS = ("rgba", "la", "palette", "rgb16", "grey16")


def png16(path, arr):
    """a 16-bit PNG of arr (H x W x 3, or H x W for grey), written by hand: PIL writes no 16-bit RGB"""
    h, w = arr.shape[:2]
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    raw = b"".join(b"\x00" + arr[y].astype(">u2").tobytes() for y in range(h))
    head = struct.pack(">IIBBBBB", w, h, 16, 2 if arr.ndim == 3 else 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def rgb_array(rng, k, h, w):
    planes = image(rng, k, h, w)
    return np.stack([np.frombuffer(p, np.uint8).reshape(h, w) for p in planes], axis=2)


def write(path, kind, arr):
    im = Image.fromarray(arr, "RGB")
    if kind == "baseline" or kind == "wide":
        im.save(path, "JPEG", quality=90)
    elif kind == "progressive":
        im.save(path, "JPEG", quality=90, progressive=True)
    elif kind == "cmyk":
        im.convert("CMYK").save(path, "JPEG", quality=95)
    elif kind == "grey":
        im.convert("L").save(path, "JPEG", quality=90)
    elif kind == "png":
        im.save(path, "PNG")
    elif kind == "rgba":  # alpha from the red plane: PIL's convert("RGB") drops it
        Image.fromarray(np.dstack([arr, arr[:, :, :1]]), "RGBA").save(path, "PNG")
    elif kind == "la":
        g = np.asarray(im.convert("L"))
        Image.fromarray(np.dstack([g, 255 - g]), "LA").save(path, "PNG")
    elif kind == "palette":
        im.quantize(16).save(path, "PNG", transparency=0)
    elif kind == "rgb16":  # 16-bit samples whose low byte is not the high one's copy
        png16(path, arr.astype(np.uint16) * 257 - (arr > 0) * 129)
    elif kind == "grey16":
        png16(path, np.asarray(im.convert("L")).astype(np.uint16) * 256 + 200)


def tree(out, n_train, n_val, size):
    rng = random.Random(5)
    manifest = []
    for split, n in (("train", n_train), ("val", n_val)):
        for i in range(n):
            k, kind = i % 10, KINDS[(i // 10) % len(KINDS)]
            d = os.path.join(out, split, "n%08d" % k)
            os.makedirs(d, exist_ok=True)
            w = size * 3 // 2 if kind == "wide" else size
            path = os.path.join(d, "%s_%05d.%s" % (split, i, "png" if kind in PNGS else "JPEG"))
            write(path, kind, rgb_array(rng, k, size, w))
            manifest.append((path, kind))
    # truncated: a baseline JPEG cut in the middle of its scan
    path = os.path.join(out, "train", "n%08d" % 0, "zz-truncated.JPEG")
    write(path, "baseline", rgb_array(rng, 0, size, size))
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) * 2 // 3])
    manifest.append((path, "truncated"))
    with open(os.path.join(out, "manifest"), "w") as f:
        for p, kind in manifest:
            f.write("%s %s\n" % (p, kind))


def check(out, pack, split):
    kinds = dict(line.split() for line in open(os.path.join(out, "manifest")))
    b = open(pack, "rb").read()
    assert b[:8] == b"DTRAINPK", "not a pack"
    n, = struct.unpack_from("<Q", b, 16)
    c, h, w, k = struct.unpack_from("<IIII", b, 24)
    loff, = struct.unpack_from("<Q", b, 40)
    doff, = struct.unpack_from("<Q", b, 64)
    skipped, = struct.unpack_from("<Q", b, 96)
    classes = sorted(os.listdir(os.path.join(out, "train")))
    files = []
    for ci, cls in enumerate(sorted(os.listdir(os.path.join(out, split)))):
        for f in sorted(os.listdir(os.path.join(out, split, cls))):
            p = os.path.join(out, split, cls, f)
            if kinds[p] != "truncated":
                files.append((p, classes.index(cls)))
    want_skipped = sum(1 for p, kind in kinds.items() if kind == "truncated" and "/%s/" % split in p)
    assert (n, skipped) == (len(files), want_skipped), "pack: %d images, %d skipped; expected %d and %d" % (
        n, skipped, len(files), want_skipped)
    assert c in (1, 3) and h == w, (c, h, w)
    labels = np.frombuffer(b, np.uint16, n, loff)
    worst = {}
    for i, (p, label) in enumerate(files):
        assert labels[i] == label, "%s: label %d, expected %d" % (p, labels[i], label)
        if kinds[p] == "wide":
            continue
        got = np.frombuffer(b, np.uint8, c * h * w, doff + i * c * h * w).reshape(c, h, w).transpose(1, 2, 0)
        if kinds[p] == "grey16":
            ref = np.repeat((np.asarray(Image.open(p)) >> 8).astype(np.uint8)[:, :, None], c, axis=2)
        else:
            ref = np.asarray(Image.open(p).convert("RGB" if c == 3 else "L")).reshape(h, w, c)
        assert ref.shape == got.shape, "%s: %s, expected %s (SIZE must be the pack's side)" % (p, got.shape, ref.shape)
        d = int(np.abs(got.astype(int) - ref.astype(int)).max())
        worst[kinds[p]] = max(worst.get(kinds[p], 0), d)
    for kind, d in worst.items():
        limit = 2 if kind == "cmyk" else 0
        assert d <= limit, "%s images differ from PIL's decoding by up to %d levels (limit %d)" % (kind, d, limit)
    print("%s: %d images in order with their labels, %d skipped; largest difference from PIL by kind: %s" % (
        split, n, skipped, ", ".join("%s %d" % kd for kd in sorted(worst.items()))))


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "tree":
        tree(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) == 5 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
