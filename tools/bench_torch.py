#!/usr/bin/env python3
"""bench_torch.py DATA_DIR [EPOCHS] [BATCH] — the mlp (784-500-500-10, ReLU, softmax
cross-entropy) trained with PyTorch's SGD (lr 0.02, momentum 0.9) on Fashion-MNIST exactly as
dtrain does: same normalisation, one shuffle per epoch, batch 100, one thread. Data is loaded
and normalised before the clock starts; the clock covers the training iterations only, like
dtrain's samples_per_s. Prints JSON."""
import gzip, json, struct, sys, time
import numpy as np
import torch

def idx(path):
    with gzip.open(path) as f:
        raw = f.read()
    nd = raw[3]
    dims = struct.unpack(">" + "I" * nd, raw[4:4 + 4 * nd])
    return np.frombuffer(raw[4 + 4 * nd:], dtype=np.uint8).reshape(dims)

d = sys.argv[1]
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 100
torch.set_num_threads(1)
torch.manual_seed(1)
x = torch.from_numpy(((idx(d + "/train-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0 - 0.2860) / 0.3530).astype(np.float32))
y = torch.from_numpy(idx(d + "/train-labels-idx1-ubyte.gz").astype(np.int64))
model = torch.nn.Sequential(torch.nn.Linear(784, 500), torch.nn.ReLU(), torch.nn.Linear(500, 500), torch.nn.ReLU(),
                            torch.nn.Linear(500, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
n, seen, t_train = x.shape[0], 0, 0.0
for e in range(epochs):
    perm = torch.randperm(n)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        idxs = perm[i:i + batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[idxs]), y[idxs])
        loss.backward()
        opt.step()
        seen += len(idxs)
    t_train += time.perf_counter() - t0
print(json.dumps({"samples_per_s": seen / t_train, "loss": float(loss), "torch": torch.__version__}, separators=(",", ":")))
