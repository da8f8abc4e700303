#!/usr/bin/env python3
"""bench/gpu/torch_cuda.py — PyTorch's side of bench/gpu/check.sh on CUDA:
the MLP and CNN of examples/fashion-mnist (the same layers, SGD with lr
0.05, momentum 0.9, Nesterov; batch 64) trained for STEPS steps on one
device, and the cost of one dispatched op. Prints one line a measure, in
bench/gpu/check.sh's form:
    torch step_ms_mlp cuda:0 0.412
    torch train_mlp cuda:0 155339
    torch op_ns cuda:0 5123.0
    torch op_sync_ns cuda:0 9876.0
The batches are Fashion-MNIST's first training images, normalised as the
INI files do and placed on the device once, where the data set is
installed; N(0, 1) noise of the same shape otherwise (the step time is the
same). The timed steps follow 5 of warm-up and end with a synchronize.

    python3 bench/gpu/torch_cuda.py [--device cuda:0] [--steps 50]
"""
import argparse
import gzip
import os
import struct
import sys
import time

import torch
from torch import nn

ROOT = "/usr/share/datasets/fashion-mnist/"


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                         nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10))


def batches(n, device):
    """n samples as [n, 1, 28, 28] f32 and [n] i64 on device."""
    img = ROOT + "train-images-idx3-ubyte.gz"
    lab = ROOT + "train-labels-idx1-ubyte.gz"
    if os.path.exists(img) and os.path.exists(lab):
        with gzip.open(img, "rb") as f:
            _, count, rows, cols = struct.unpack(">IIII", f.read(16))
            n = min(n, count)
            x = torch.frombuffer(bytearray(f.read(n * rows * cols)),
                                 dtype=torch.uint8)
        with gzip.open(lab, "rb") as f:
            f.read(8)
            y = torch.frombuffer(bytearray(f.read(n)), dtype=torch.uint8)
        x = (x.float().view(n, 1, rows, cols) / 255.0 - 0.2860) / 0.3530
        return x.to(device), y.long().to(device), "fashion-mnist"
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return x.to(device), y.to(device), "synthetic"


def train(which, device, steps, batch=64):
    torch.manual_seed(0)
    net = (cnn() if which == "cnn" else mlp()).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9,
                          nesterov=True)
    loss_fn = nn.CrossEntropyLoss()
    warm = 5
    x, y, source = batches((steps + warm) * batch, device)
    nb = x.shape[0] // batch
    net.train()

    def step(i):
        j = (i % nb) * batch
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x[j:j + batch]), y[j:j + batch])
        loss.backward()
        opt.step()

    for i in range(warm):
        step(i)
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for i in range(steps):
        step(warm + i)
    torch.cuda.synchronize(device)
    dt = time.perf_counter() - t0
    print("torch step_ms_%s %s %.3f" % (which, device, dt / steps * 1e3))
    print("torch train_%s %s %.0f" % (which, device, steps * batch / dt))
    return source


def op_overhead(device, reps=20000):
    a = torch.randn(16, device=device)
    b = torch.randn(16, device=device)
    best = best_sync = float("inf")
    for _ in range(5):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.add(a, b)
        torch.cuda.synchronize(device)
        best = min(best, (time.perf_counter() - t0) / reps * 1e9)
        t0 = time.perf_counter()
        for _ in range(reps // 10):
            torch.add(a, b)
            torch.cuda.synchronize(device)
        best_sync = min(best_sync,
                        (time.perf_counter() - t0) / (reps // 10) * 1e9)
    print("torch op_ns %s %.1f" % (device, best))
    print("torch op_sync_ns %s %.1f" % (device, best_sync))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_cuda.py: torch.cuda.is_available() is false",
              file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    print("torch version %s cuda %s %s" % (
        torch.__version__, torch.version.cuda,
        torch.cuda.get_device_name(torch.device(args.device))))
    for which in ("mlp", "cnn"):
        source = train(which, args.device, args.steps)
    print("torch data %s %s" % (args.device, source))
    op_overhead(args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
