#!/usr/bin/env python3
"""bench_torch_gpu.py NET BATCH ITERS TF32 — PyTorch's side of tools/bench_gpu.

The same net as dtrain's (cifar-quick, resnet20, alexnet as in bench_torch_cnn.py; vgg16 for
CIFAR with batch norm as nets/vgg16.net; resnet18 and resnet50 from torchvision, whose layout
dtrain's nets follow) trained on the GPU in eager mode with SGD (momentum 0.9), fp32, TF32 on or
off (TF32 = 1/0), cudnn.benchmark on, on synthetic batches made once on the GPU. The clock covers
ITERS iterations after 10 warm-up ones, between two synchronisations. Prints JSON: samples/s and
the peak GPU memory PyTorch allocated (MB)."""
import json, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_torch_cnn import CifarQuick, ResNet20, AlexNet  # noqa: E402


class VGG16(nn.Module):  # nets/vgg16.net: 13 conv-bn-relu, 5 max pools, one fc
    def __init__(self, classes=10):
        super().__init__()
        cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
        layers, c = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def make(net):
    if net in ("resnet18", "resnet50"):
        import torchvision
        return getattr(torchvision.models, net)(), 224, 1000
    cls, side, classes = {"cifar-quick": (CifarQuick, 32, 10), "resnet20": (ResNet20, 32, 10),
                          "vgg16": (VGG16, 32, 10), "alexnet": (AlexNet, 227, 1000)}[net]
    return cls(classes), side, classes


def main():
    # MATH: 0 fp32, 1 TF32, bf16: autocast to bfloat16 (TF32 off), as dtrain's --precision bf16;
    # fp16: autocast to float16 with GradScaler's dynamic loss scaling (AMP), as --precision fp16
    net, batch, iters, math = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    tf32, low = math == "1", {"bf16": torch.bfloat16, "fp16": torch.float16}.get(math)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    model, side, classes = make(net)
    model = model.cuda().train()
    x = torch.rand(batch, 3, side, side, device="cuda") * 4 - 2
    y = torch.randint(0, classes, (batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    scaler = torch.cuda.amp.GradScaler(enabled=low == torch.float16)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=low or torch.bfloat16, enabled=low is not None):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    print(json.dumps({"samples_per_s": iters * batch / t, "peak_mb": torch.cuda.max_memory_allocated() / 1e6,
                      "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}, separators=(",", ":")))


if __name__ == "__main__":
    main()
