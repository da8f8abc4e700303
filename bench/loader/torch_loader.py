#!/usr/bin/python3
"""bench/loader/torch_loader.py — PyTorch's side of the loader benchmark.

Fashion-MNIST through torch.utils.data.DataLoader with the same pipeline as
torc's (IDX files decoded once, per-sample scale + normalize, batch 64,
shuffled), at 0, 1 and 2 workers; and the share of an MLP training step
(784-128-10, SGD) spent waiting for the next batch. Prints one line per
measurement:  torch <what> <workers> <value>
Run by bench/loader/run.sh (Debian's python3-torch; never by make check).
"""
import gzip
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

ROOT = "/usr/share/datasets/fashion-mnist/"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


class FashionMNIST(Dataset):
    def __init__(self):
        self.x = torch.from_numpy(idx(ROOT + "train-images-idx3-ubyte.gz")
                                  .copy())
        self.y = torch.from_numpy(idx(ROOT + "train-labels-idx1-ubyte.gz")
                                  .astype(np.int64))

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        # torchvision's ToTensor() then Normalize((0.2860,), (0.3530,))
        x = self.x[i].unsqueeze(0).float() * (1.0 / 255.0)
        x = (x - 0.2860) / 0.3530
        return x, self.y[i]


def epoch_rate(ds, workers, limit):
    g = torch.Generator()
    g.manual_seed(0)
    dl = DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers,
                    generator=g, drop_last=False)
    t0 = time.perf_counter()
    n = 0
    for b, (x, y) in enumerate(dl):
        n += x.shape[0]
        if n >= limit:
            break
    return n / (time.perf_counter() - t0)


def step_wait(ds, workers, steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator()
    g.manual_seed(0)
    dl = DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers,
                    generator=g)
    it = iter(dl)
    wait = 0.0
    t0 = time.perf_counter()
    for _ in range(steps):
        w0 = time.perf_counter()
        x, y = next(it)
        wait += time.perf_counter() - w0
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    total = time.perf_counter() - t0
    return wait / total


def main():
    torch.set_num_threads(1)
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ds = FashionMNIST()
    for w in (0, 1, 2):
        rates = sorted(epoch_rate(ds, w, limit) for _ in range(runs))
        print("torch samples_per_sec %d %.0f" % (w, rates[len(rates) // 2]))
        sys.stdout.flush()
    for w in (0, 2):
        fr = sorted(step_wait(ds, w, steps) for _ in range(runs))
        print("torch wait_fraction %d %.4f" % (w, fr[len(fr) // 2]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
