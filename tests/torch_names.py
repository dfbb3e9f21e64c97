#!/usr/bin/python3
"""torch_names.py — PyTorch state dicts in safetensors, with NumPy only (no torch needed):

  torch_names.py check FILE CLASSES        FILE (written by dtrain --net resnet18 --save) has exactly
                                           the tensors of torchvision's resnet18(num_classes=CLASSES)
                                           state_dict: names, shapes, F32, and I64 [] batch counters
  torch_names.py topytorch IN OUT [--drop NAME] [--extra NAME]
                                           writes IN's tensors as PyTorch would save them from a
                                           half-precision model: conv weights F16, fc.weight BF16, the
                                           rest F32, num_batches_tracked I64 = 7, in state_dict order
  torch_names.py compare BACK PT           BACK (dtrain's --save after --load PT) holds PT's values
                                           converted to fp32 exactly, and counters of 7

torchvision's names are built here from its ResNet definition (BasicBlock, layers 2-2-2-2), so
that the test runs where torchvision is not installed."""
import os, sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from safetensors_np import read, write  # noqa: E402


def resnet18_state(classes):
    """torchvision.models.resnet18(num_classes=classes).state_dict(): name -> (dtype, shape), in order"""
    out = {}
    def conv(name, o, i, k):
        out[name + ".weight"] = ("F32", [o, i, k, k])
    def bn(name, c):
        for t in ("weight", "bias", "running_mean", "running_var"):
            out["%s.%s" % (name, t)] = ("F32", [c])
        out[name + ".num_batches_tracked"] = ("I64", [])
    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    cin = 64
    for layer, c in enumerate((64, 128, 256, 512), 1):
        for b in range(2):
            p = "layer%d.%d" % (layer, b)
            conv(p + ".conv1", c, cin if b == 0 else c, 3)
            bn(p + ".bn1", c)
            conv(p + ".conv2", c, c, 3)
            bn(p + ".bn2", c)
            if b == 0 and (cin != c):
                conv(p + ".downsample.0", c, cin, 1)
                bn(p + ".downsample.1", c)
        cin = c
    out["fc.weight"] = ("F32", [classes, 512])
    out["fc.bias"] = ("F32", [classes])
    return out


def check(path, classes):
    got, want = read(path), resnet18_state(classes)
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    assert not missing and not extra, "missing %s, not torchvision's %s" % (missing, extra)
    for k, (dtype, shape) in want.items():
        assert (got[k][0], list(got[k][1])) == (dtype, shape), "%s: %s %s, torchvision has %s %s" % (
            k, got[k][0], got[k][1], dtype, shape)
    print("%s: the %d tensors of torchvision's resnet18(num_classes=%d) state_dict, names, shapes and dtypes" % (
        path, len(want), classes))


def to_pytorch(src, dst, drop, extra):
    t = read(src)
    out = []
    for k in resnet18_state(int(t["fc.bias"][1][0])):
        if k == drop:
            continue
        if k.endswith("num_batches_tracked"):
            out.append((k, "I64", np.array(7, np.int64)))
        elif k == "fc.weight":
            out.append((k, "BF16", t[k][2]))
        elif k.endswith(".weight") and t[k][2].ndim == 4:
            out.append((k, "F16", t[k][2]))
        else:
            out.append((k, "F32", t[k][2]))
    if extra:
        out.append((extra, "F32", np.zeros(3, np.float32)))
    write(dst, out)


def compare(back, pt):
    b, p = read(back), read(pt)
    for k, (dtype, shape, a) in p.items():
        assert k in b, "%s is not in %s" % (k, back)
        if dtype == "I64":
            assert b[k][0] == "I64" and int(b[k][2]) == int(a), "%s: %s, expected %d" % (k, b[k][2], int(a))
            continue
        want = a.astype(np.float32)
        assert b[k][0] == "F32" and np.array_equal(b[k][2], want), "%s: not %s converted to fp32" % (k, dtype)
    kinds = sorted(set(v[0] for v in p.values()))
    print("%s: every tensor of %s (%s) read and converted to fp32 exactly; counters kept" % (back, pt, ", ".join(kinds)))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "check":
        check(a[1], int(a[2]))
    elif len(a) >= 3 and a[0] == "topytorch":
        opt = dict(zip(a[3::2], a[4::2]))
        to_pytorch(a[1], a[2], opt.get("--drop"), opt.get("--extra"))
    elif len(a) == 3 and a[0] == "compare":
        compare(a[1], a[2])
    else:
        sys.exit(__doc__)
