#!/usr/bin/env python3
"""bench_ddp.py DATA_DIR ITERS — PyTorch DistributedDataParallel (gloo, TCP over loopback) with 2
processes, 1 thread each, training the mlp (784-500-500-10) on Fashion-MNIST exactly as dtrain
does: global batch 100 (50 per rank, each rank its contiguous half of every global batch of one
shared permutation), SGD lr 0.02 momentum 0.9, the same normalisation. Times ITERS iterations
after 20 of warm-up; prints the samples/s over both ranks as JSON."""
import gzip, json, os, struct, sys, time
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def idx(path):
    with gzip.open(path) as f:
        raw = f.read()
    nd = raw[3]
    dims = struct.unpack(">" + "I" * nd, raw[4:4 + 4 * nd])
    return np.frombuffer(raw[4 + 4 * nd:], dtype=np.uint8).reshape(dims)

def run(rank, world, d, iters, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    x = torch.from_numpy(((idx(d + "/train-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0 - 0.2860) / 0.3530).astype(np.float32))
    y = torch.from_numpy(idx(d + "/train-labels-idx1-ubyte.gz").astype(np.int64))
    model = torch.nn.Sequential(torch.nn.Linear(784, 500), torch.nn.ReLU(), torch.nn.Linear(500, 500), torch.nn.ReLU(),
                                torch.nn.Linear(500, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.02, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(7)
    perm = torch.randperm(x.shape[0], generator=g)
    per = 100 // world
    def step(i):
        b = perm[(i * 100) % 60000:(i * 100) % 60000 + 100][rank * per:(rank + 1) * per]
        opt.zero_grad(set_to_none=True)
        loss_fn(ddp(x[b]), y[b]).backward()
        opt.step()
    for i in range(20):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(iters):
        step(20 + i)
    dist.barrier()
    t = time.perf_counter() - t0
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"samples_per_s": iters * 100 / t, "torch": torch.__version__}, f, separators=(",", ":"))
    dist.destroy_process_group()

if __name__ == "__main__":
    d, iters = sys.argv[1], int(sys.argv[2])
    out = f"/tmp/bench_ddp.{os.getpid()}.json"
    mp.spawn(run, args=(2, d, iters, 29500 + os.getpid() % 1000, out), nprocs=2)
    print(open(out).read())
    os.remove(out)
