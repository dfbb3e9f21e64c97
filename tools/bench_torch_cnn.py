#!/usr/bin/env python3
"""bench_torch_cnn.py NET CIFAR_DIR BATCH THREADS ITERS [WEIGHTS]

PyTorch's side of tools/bench for the CNNs: cifar-quick, resnet20 and alexnet built exactly as
dtrain's nets/*.net (same layers, same tensor names), trained with SGD (momentum 0.9) on the
CIFAR-10 binary files in CIFAR_DIR, normalised as dtrain does, no augmentation, THREADS threads.
alexnet takes CIFAR_DIR "synthetic": random 3x227x227 batches of 1000 classes made once, as
dtrain's --dataset synthetic (with WEIGHTS it then only checks that dtrain's file loads, every
tensor by name and shape, and prints its parameter count). The
clock covers ITERS training iterations after 5 warm-up ones. Prints JSON: samples/s, and the
multiply-add FLOPs of one training sample (forward, backward-data except the first layer,
backward-weights of every conv and dense layer), from which tools/bench derives the sgemm
ceiling.

With WEIGHTS (a safetensors file dtrain wrote), it instead loads them by name and prints the
test loss and accuracy in evaluation mode: tools/bench compares them with dtrain's on the same
file, which shows the two nets compute the same function.

lenet (dtrain's nets/lenet.net, 1x28x28, 10 classes) takes only "synthetic". BENCH_PRECISION=bf16
in the environment runs forward and loss under torch.autocast("cpu", dtype=torch.bfloat16), the
counterpart of dtrain's --precision bf16 (tools/bench_bf16)."""
import json, os, struct, sys, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32).reshape(1, 3, 1, 1)

def cifar(d, files):
    raw = b"".join(open(os.path.join(d, f), "rb").read() for f in files)
    rec = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3073)
    x = rec[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
    return torch.from_numpy((x - MEAN) / STD), torch.from_numpy(rec[:, 0].astype(np.int64))

class CifarQuick(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 32, 5, padding=2)
        self.conv3 = nn.Conv2d(32, 64, 5, padding=2)
        self.ip1 = nn.Linear(1024, 64)
        self.ip2 = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 3, 2, ceil_mode=True))
        x = F.avg_pool2d(F.relu(self.conv2(x)), 3, 2, ceil_mode=True)
        x = F.avg_pool2d(F.relu(self.conv3(x)), 3, 2, ceil_mode=True)
        return self.ip2(self.ip1(torch.flatten(x, 1)))

class Basic(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.stride, self.pad = stride, (planes - cin) // 2

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        s = x if self.stride == 1 else F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))  # option A
        return F.relu(y + s)

class ResNet20(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        cin = 16
        for i, planes in enumerate((16, 32, 64)):
            blocks = []
            for j in range(3):
                blocks.append(Basic(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes
            setattr(self, "layer%d" % (i + 1), nn.Sequential(*blocks))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

class AlexNet(nn.Module):
    """Caffe's bvlc_alexnet as nets/alexnet.net: grouped conv2/4/5, LRN after conv1 and conv2"""
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, 11, 4)
        self.conv2 = nn.Conv2d(96, 256, 5, padding=2, groups=2)
        self.conv3 = nn.Conv2d(256, 384, 3, padding=1)
        self.conv4 = nn.Conv2d(384, 384, 3, padding=1, groups=2)
        self.conv5 = nn.Conv2d(384, 256, 3, padding=1, groups=2)
        self.fc6 = nn.Linear(256 * 6 * 6, 4096)
        self.fc7 = nn.Linear(4096, 4096)
        self.fc8 = nn.Linear(4096, classes)
        self.lrn = nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)

    def forward(self, x):
        x = F.max_pool2d(self.lrn(F.relu(self.conv1(x))), 3, 2, ceil_mode=True)
        x = F.max_pool2d(self.lrn(F.relu(self.conv2(x))), 3, 2, ceil_mode=True)
        x = F.relu(self.conv4(F.relu(self.conv3(x))))
        x = F.max_pool2d(F.relu(self.conv5(x)), 3, 2, ceil_mode=True)
        x = F.dropout(F.relu(self.fc6(torch.flatten(x, 1))), 0.5, self.training)
        x = F.dropout(F.relu(self.fc7(x)), 0.5, self.training)
        return self.fc8(x)

class LeNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5, padding=2)
        self.conv2 = nn.Conv2d(20, 50, 5, padding=2)
        self.fc1 = nn.Linear(50 * 7 * 7, 500)
        self.fc2 = nn.Linear(500, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))

SIDE = {"lenet": 28, "cifar-quick": 32, "resnet20": 32, "alexnet": 227}
CHANNELS = {"lenet": 1}
CLASSES = {"alexnet": 1000}

def train_flops(model, channels, side):
    """multiply-add FLOPs of one training sample: 2 MACs forward, and backward weights and data"""
    layers = []
    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            macs = out[0].numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        else:
            macs = m.in_features * m.out_features
        layers.append(macs)
    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, channels, side, side))
    for h in hs:
        h.remove()
    fwd = 2 * sum(layers)
    return fwd, 3 * fwd - 2 * layers[0]

def load_weights(model, path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    sd = model.state_dict()
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        dtype = {"F32": np.float32, "I64": np.int64}[v["dtype"]]  # I64: batch norm's num_batches_tracked
        a = np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=dtype)
        if k not in sd or tuple(sd[k].shape) != tuple(v["shape"]):
            sys.exit("tensor %s %s has no counterpart in the PyTorch net" % (k, v["shape"]))
        sd[k].copy_(torch.from_numpy(a.reshape(v["shape"]).copy()))
    missing = [k for k in sd if k not in hdr and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit("PyTorch tensors missing from the file: %s" % missing)

def main():
    net, d, batch, threads, iters = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = {"lenet": LeNet, "cifar-quick": CifarQuick, "resnet20": ResNet20, "alexnet": AlexNet}[net]()
    low = os.environ.get("BENCH_PRECISION", "fp32") == "bf16"
    if len(sys.argv) > 6:
        load_weights(model, sys.argv[6])
        if d == "synthetic":
            print(json.dumps({"loaded": True, "params": sum(p.numel() for p in model.parameters())}))
            return
        x, y = cifar(d, ["test_batch.bin"])
        model.eval()
        with torch.no_grad():
            z = model(x)
            loss = F.cross_entropy(z, y).item()
            acc = (z.argmax(1) == y).float().mean().item()
        print(json.dumps({"test_loss": loss, "test_acc": acc}, separators=(",", ":")))
        return
    fwd, train = train_flops(model, CHANNELS.get(net, 3), SIDE[net])
    if d == "synthetic":
        x = torch.rand(4 * batch, CHANNELS.get(net, 3), SIDE[net], SIDE[net]) * 4 - 2
        y = torch.randint(0, CLASSES.get(net, 10), (4 * batch,))
    else:
        x, y = cifar(d, ["data_batch_%d.bin" % i for i in range(1, 6)])
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    n = x.shape[0]
    perm = torch.randperm(n)
    def step(i):
        idx = perm[(i * batch) % (n - batch):(i * batch) % (n - batch) + batch]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=low):
            loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
    for i in range(5):
        step(i)
    t0 = time.perf_counter()
    for i in range(iters):
        step(5 + i)
    t = time.perf_counter() - t0
    print(json.dumps({"samples_per_s": iters * batch / t, "fwd_flop": fwd, "train_flop": train,
                      "torch": torch.__version__,
                      "precision": "bf16" if low else "fp32"}, separators=(",", ":")))

if __name__ == "__main__":
    main()
