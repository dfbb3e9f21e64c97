#!/usr/bin/python3
"""tools/torch_eval.py — dtrain's weights in PyTorch and PyTorch's in dtrain: resnet18, resnet50, googlenet,
alexnet-torchvision, vgg16-torchvision (torchvision's alexnet and vgg16).

  tools/torch_eval.py eval WEIGHTS DIR [--net NET]
      loads WEIGHTS (dtrain --save, safetensors) into torchvision's model with
      load_state_dict(strict=True) and evaluates it on the class folders of DIR/val as dtrain does
      for --dataset imagenet: centred square, resized to 256, centre 224, ImageNet mean/std.
      Prints the test loss and accuracy (compare with dtrain --epochs 0 --load WEIGHTS).
  tools/torch_eval.py export OUT [--net NET] [--classes N] [--seed S]
      writes a torchvision model's state_dict (random init from the seed, BN statistics made
      non-trivial) as safetensors for dtrain --load.

Needs Debian's python3-torch and python3-torchvision (/usr/bin/python3); reads and writes
safetensors with NumPy, so the safetensors package is not needed."""
import os, sys

import numpy as np
import torch
import torchvision
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def read_safetensors(path):
    return {k: torch.from_numpy(a.copy()) for k, (_, _, a) in safetensors_np.read(path).items()}


def write_safetensors(path, state):
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    safetensors_np.write(path, [(k, kinds[t.numpy().dtype], t.detach().cpu().numpy()) for k, t in state.items()])


def model(net, classes):
    if net == "googlenet":  # dtrain's googlenet.net: no auxiliary classifiers, inputs as they are
        return torchvision.models.googlenet(weights=None, num_classes=classes, aux_logits=False, transform_input=False,
                                            init_weights=True)
    return getattr(torchvision.models, net.replace("-torchvision", ""))(weights=None, num_classes=classes)


def load_image(path):
    """dtrain's packing (centred square of the shorter side, resized to 256) and evaluation crop"""
    im = Image.open(path).convert("RGB")
    w, h = im.size
    s = min(w, h)
    im = im.crop(((w - s) // 2, (h - s) // 2, (w - s) // 2 + s, (h - s) // 2 + s)).resize((256, 256), Image.BILINEAR)
    a = np.asarray(im, np.float32)[16:240, 16:240] / 255.0
    a = (a - MEAN) / STD
    return torch.from_numpy(a.transpose(2, 0, 1).astype(np.float32))


def evaluate(weights, root, net):
    state = read_safetensors(weights)
    m = model(net, (state["fc.bias"] if "fc.bias" in state else state["classifier.6.bias"]).shape[0])
    m.load_state_dict(state, strict=True)
    m.eval()
    classes = sorted(os.listdir(os.path.join(root, "train")))
    loss, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for c in sorted(os.listdir(os.path.join(root, "val"))):
            files = sorted(os.listdir(os.path.join(root, "val", c)))
            x = torch.stack([load_image(os.path.join(root, "val", c, f)) for f in files])
            y = torch.full((len(files),), classes.index(c))
            out = m(x)
            loss += torch.nn.functional.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            n += len(files)
    print("torchvision %s with %s (strict): test loss %.6f, test accuracy %.4f on %d images" % (
        net, weights, loss / n, correct / n, n))


def export(out, net, classes, seed):
    torch.manual_seed(seed)
    m = model(net, classes)
    for mod in m.modules():  # running statistics that are not 0 and 1, so loading them is tested
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
            mod.num_batches_tracked.fill_(1234)
    if not net.startswith("resnet"):  # their init gives near-uniform logits: far from it, differences show
        last = [mod for mod in m.modules() if isinstance(mod, torch.nn.Linear)][-1]
        with torch.no_grad():
            last.weight.mul_(100.0)
    write_safetensors(out, m.state_dict())
    print("%s: torchvision %s state_dict, %d tensors" % (out, net, len(m.state_dict())))


if __name__ == "__main__":
    a = sys.argv[1:]
    opt = dict(zip(a[3::2], a[4::2])) if a and a[0] == "eval" else dict(zip(a[2::2], a[3::2]))
    net = opt.get("--net", "resnet18")
    if len(a) >= 3 and a[0] == "eval":
        evaluate(a[1], a[2], net)
    elif len(a) >= 2 and a[0] == "export":
        export(a[1], net, int(opt.get("--classes", 1000)), int(opt.get("--seed", 1)))
    else:
        sys.exit(__doc__)
