#!/usr/bin/python3
"""bench/compare/torch_compare.py — PyTorch's side of bench/compare.sh.

The same models, hyper-parameters and measurements as bench_compare.c, one
measurement per invocation, printed as
    torch <measure> <value>

    torch_compare.py train mlp|cnn [SAMPLES]   training samples/s, peak RSS
    torch_compare.py eval mlp|cnn              t10k samples/s at batch 1000
    torch_compare.py op                        ns per torch.add (16 floats),
                                               ns per autograd mul+backward
    torch_compare.py latency                   batch-1 MLP forward, us
    torch_compare.py gemm N                    f32 N x N torch.matmul GFLOP/s
    torch_compare.py conv                      conv2d 64x32x28x28 * 64x32x3x3
                                               (padding 1) GFLOP/s
    torch_compare.py startup                   one training step, then exit
    torch_compare.py seq lstm|gpt [STEPS]      training tokens/s of a
                                               character model on random
                                               token ids (median of STEPS
                                               timed steps, default 20,
                                               after 3 warm-up), peak RSS

Threads: torch.set_num_threads(TORCH_THREADS) (default 2); bench/compare.sh
runs one process per configuration (interpreter, eager or compiled,
threads, allocator) and takes PyTorch's best, with OMP_WAIT_POLICY=PASSIVE
set before Python starts. TORCH_COMPILE=1 runs the train, eval, latency
and seq models through torch.compile (PyTorch 2.x; inductor on the cpu):
the model and its loss in one compiled function for training, the model
for the others, each compiled and warmed up on every batch shape it will
see before the clock starts, so that compile time is not in the figure;
op, gemm, conv and startup refuse it (one aten call each, or the compile
time would be the measure). Every train run does one untimed
forward/backward per batch shape first (no optimizer step, gradients
dropped), compiled or not. Its data pipeline is the fastest
honest one: the IDX files are decoded once into a normalised float tensor
((x/255 - 0.2860)/0.3530) and each batch is gathered from it with a shuffled
permutation; torc's side goes through its DataLoader with a per-sample
transform instead, which is the harder path for torc. TORCH_DATA=uint8 keeps
the images as bytes and normalises each batch instead: a little slower, but
~140 MB less peak RSS in training (the float training set is 188 MB).
Runs under Debian's python3-torch (/usr/bin/python3) and under the PyPI
torch of bench/setup-torch.sh's venv; never by make check.
"""
import gzip
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = "/usr/share/datasets/fashion-mnist/"
MEAN, STD = 0.2860, 0.3530
DATA = os.environ.get("TORCH_DATA", "float")
COMPILE = os.environ.get("TORCH_COMPILE", "0") == "1"


def compiled(fn):
    """fn through torch.compile when TORCH_COMPILE=1, else fn itself."""
    if not COMPILE:
        return fn
    if not hasattr(torch, "compile"):
        sys.exit("torch_compare: TORCH_COMPILE=1 needs PyTorch 2 (this is %s)"
                 % torch.__version__)
    # dynamic=False: one static graph per batch shape (an epoch's short
    # last batch gets its own), as fast as the fixed-shape one; with
    # automatic dynamic shapes the second shape would recompile the step
    # for symbolic sizes, and the 64-sample batches would run that.
    return torch.compile(fn, dynamic=False)


def idx(path):
    """Decodes one gzipped IDX file into a numpy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    """The split as (images, N int64 labels). With TORCH_DATA=float (the
    default) the images are decoded once into an N x 1 x 28 x 28 normalised
    float32 tensor, converted in place (no full-size temporaries, so that
    peak RSS holds only the tensor and the raw bytes); with
    TORCH_DATA=uint8 they stay N x 1 x 28 x 28 bytes (a quarter of the
    memory) and batch() normalises each batch."""
    raw = idx(ROOT + split + "-images-idx3-ubyte.gz")
    y = torch.from_numpy(idx(ROOT + split + "-labels-idx1-ubyte.gz")
                         .astype(np.int64))
    u8 = torch.from_numpy(raw.copy()).unsqueeze(1)
    del raw
    if DATA == "uint8":
        return u8, y
    x = torch.empty(u8.shape, dtype=torch.float32)
    x.copy_(u8)
    del u8
    x.mul_(1.0 / 255.0).sub_(MEAN).div_(STD)
    return x, y


def batch(x, rows):
    """The images at `rows` (an index tensor or a slice), normalised."""
    xb = x.index_select(0, rows) if isinstance(rows, torch.Tensor) else x[rows]
    if DATA == "uint8":
        xb = xb.float().mul_(1.0 / (255.0 * STD)).sub_(MEAN / STD)
    return xb


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                         nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def model(which):
    return cnn() if which == "cnn" else mlp()


def peak_rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def now():
    return time.perf_counter()


def train(which, limit, one_step=False):
    """Trains on `limit` shuffled samples (one epoch = 60000), batch 64,
    SGD lr 0.01 momentum 0.9, cross-entropy; returns samples/s."""
    torch.manual_seed(0)
    x, y = load("train")
    net = model(which)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    net.train()
    g = torch.Generator()
    g.manual_seed(0)

    def forward_loss(xb, yb):
        return F.cross_entropy(net(xb), yb)

    step_loss = compiled(forward_loss)
    if not one_step:
        # One untimed forward/backward per batch shape the run will see (64,
        # and the epoch's short last batch if it gets there): torch.compile
        # compiles here, eager warms its kernels; no optimizer step, so the
        # weights stay as they are, and the gradients are dropped.
        last = len(y) % 64 if limit >= len(y) else 0
        for size in sorted({64, last} - {0}):
            step_loss(batch(x, slice(0, size)), y[:size]).backward()
        opt.zero_grad(set_to_none=True)
    n = 0
    t0 = now()
    perm = torch.randperm(len(y), generator=g)
    for i in range(0, len(y), 64):
        if n >= limit:
            break
        j = perm[i:i + 64]
        xb, yb = batch(x, j), y.index_select(0, j)
        loss = step_loss(xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        n += len(j)
        if one_step:
            loss.item()
            break
    return n / (now() - t0)


def evaluate(which):
    """The (untrained) model on the 10000 test images at batch 1000, eval
    mode, no_grad, argmax accuracy counted; best of five passes (the first
    warms up, and compiles under TORCH_COMPILE=1)."""
    torch.manual_seed(0)
    x, y = load("t10k")
    net = model(which)
    net.eval()
    run = compiled(net)
    best = 0.0
    with torch.no_grad():
        for _ in range(5):  # the first warms up
            n, correct = 0, 0
            t0 = now()
            for i in range(0, len(y), 1000):
                xb, yb = batch(x, slice(i, i + 1000)), y[i:i + 1000]
                pred = run(xb).argmax(1)
                correct += (pred == yb).sum().item()
                n += len(yb)
            best = max(best, n / (now() - t0))
    return best


def op_overhead():
    """ns per torch.add of two 16-float tensors (no grad), and per forward +
    backward of one mul with autograd (a.grad reset to None each time)."""
    a = torch.randn(16)
    b = torch.randn(16)
    g = torch.ones(16)
    reps = 200000
    best = 1e9
    for _ in range(5):
        t0 = now()
        for _ in range(reps):
            torch.add(a, b)
        best = min(best, (now() - t0) / reps * 1e9)
    print("torch op_ns %.1f" % best)
    a.requires_grad_(True)
    best = 1e9
    for _ in range(5):
        t0 = now()
        for _ in range(reps // 4):
            y = a.mul(b)
            y.backward(g)
            a.grad = None
        best = min(best, (now() - t0) / (reps // 4) * 1e9)
    print("torch autograd_ns %.1f" % best)


def latency():
    """Batch-1 MLP forward in eval mode under no_grad, us."""
    torch.manual_seed(0)
    net = mlp()
    net.eval()
    run = compiled(net)
    x = torch.randn(1, 1, 28, 28)
    reps = 20000
    best = 1e9
    with torch.no_grad():
        for _ in range(3):  # compiles under TORCH_COMPILE=1
            run(x)
        for _ in range(5):
            t0 = now()
            for _ in range(reps):
                run(x)
            best = min(best, (now() - t0) / reps * 1e6)
    print("torch latency_us %.2f" % best)


def gemm(n):
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    flop = 2.0 * n * n * n
    torch.matmul(a, b)  # warm-up
    reps = int(2e9 / flop) + 1
    best = 0.0
    for _ in range(5):
        t0 = now()
        for _ in range(reps):
            torch.matmul(a, b)
        best = max(best, flop * reps / (now() - t0) / 1e9)
    return best


def conv():
    x = torch.randn(64, 32, 28, 28)
    w = torch.randn(64, 32, 3, 3)
    flop = 2.0 * 64 * 64 * 28 * 28 * 32 * 9
    with torch.no_grad():
        F.conv2d(x, w, padding=1)  # warm-up
        best = 0.0
        for _ in range(5):
            t0 = now()
            for _ in range(5):
                F.conv2d(x, w, padding=1)
            best = max(best, flop * 5 / (now() - t0) / 1e9)
    return best


# The sequence models of the seq rows, on random token ids (no dataset):
# SEQ_BATCH windows of SEQ_CONTEXT ids of a SEQ_VOCAB-char vocabulary, the
# targets the same windows' next ids.
SEQ_VOCAB, SEQ_BATCH, SEQ_CONTEXT = 113, 32, 128
SEQ_WARMUP, SEQ_STEPS = 3, 20


class SeqLSTM(nn.Module):
    """embedding(113, 64); LSTM(64, 256, batch_first); linear(256, 113)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(SEQ_VOCAB, 64)
        self.lstm = nn.LSTM(64, 256, batch_first=True)
        self.out = nn.Linear(256, SEQ_VOCAB)

    def forward(self, x):
        return self.out(self.lstm(self.emb(x))[0])


class SeqGPT(nn.Module):
    """embedding(113, 128) plus learned positions (128 x 128, N(0, 1) as
    torc's); 4 nn.TransformerEncoderLayer (d_model 128, 4 heads,
    feed-forward 512, dropout 0.1, gelu, batch_first, norm_first) under a
    causal float mask (-inf above the diagonal; 1.13 has no is_causal);
    LayerNorm(128); linear(128, 113)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(SEQ_VOCAB, 128)
        self.pos = nn.Parameter(torch.randn(SEQ_CONTEXT, 128))
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(128, 4, 512, 0.1, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(4))
        self.norm = nn.LayerNorm(128)
        self.out = nn.Linear(128, SEQ_VOCAB)
        self.register_buffer("mask", torch.triu(
            torch.full((SEQ_CONTEXT, SEQ_CONTEXT), float("-inf")), 1))

    def forward(self, x):
        L = x.shape[1]
        h = self.emb(x) + self.pos[:L]
        mask = self.mask[:L, :L]
        for layer in self.layers:
            h = layer(h, src_mask=mask)
        return self.out(self.norm(h))


def train_seq(which, timed=SEQ_STEPS):
    """Training tokens/s: SEQ_WARMUP steps, then the median of `timed`
    timed steps (zero_grad, forward, cross-entropy, backward,
    clip_grad_norm_ 1.0, step: Adam lr 3e-3 for the LSTM, AdamW lr 1e-3
    weight decay 0.01 for the GPT; both with foreach=True, PyTorch's
    multi-tensor step). The batches are drawn before the clock starts."""
    torch.manual_seed(0)
    net = SeqGPT() if which == "gpt" else SeqLSTM()
    if which == "gpt":
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01,
                                foreach=True)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=3e-3, foreach=True)
    steps = SEQ_WARMUP + timed
    ids = torch.randint(0, SEQ_VOCAB, (steps, SEQ_BATCH, SEQ_CONTEXT + 1))
    xs = [ids[i, :, :-1].contiguous() for i in range(steps)]
    ys = [ids[i, :, 1:].contiguous() for i in range(steps)]
    net.train()
    run = compiled(net)  # compiled in the warm-up steps
    times = []
    for i in range(steps):
        t0 = now()
        opt.zero_grad(set_to_none=True)
        logits = run(xs[i])
        loss = F.cross_entropy(logits.reshape(-1, SEQ_VOCAB), ys[i].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if i >= SEQ_WARMUP:
            times.append(now() - t0)
    times.sort()
    k = len(times)
    med = times[k // 2] if k % 2 else (times[k // 2 - 1] + times[k // 2]) / 2
    return SEQ_BATCH * SEQ_CONTEXT / med


USAGE = ("usage: torch_compare.py train|eval mlp|cnn [SAMPLES] | op | "
         "latency | gemm N | conv | startup | seq lstm|gpt [STEPS]")


def main(argv):
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    mode = argv[1] if len(argv) > 1 else ""
    which = argv[2] if len(argv) > 2 else ""
    if COMPILE and mode in ("op", "gemm", "conv", "startup"):
        print("torch_compare: TORCH_COMPILE=1 is for train, eval, latency "
              "and seq", file=sys.stderr)
        return 2
    if mode == "train" and which in ("mlp", "cnn"):
        limit = int(argv[3]) if len(argv) > 3 else 60000
        rate = train(which, limit)
        print("torch train_%s %.0f" % (which, rate))
        print("torch rss_train_%s %d" % (which, peak_rss_kib()))
    elif mode == "eval" and which in ("mlp", "cnn"):
        rate = evaluate(which)
        print("torch eval_%s %.0f" % (which, rate))
        print("torch rss_eval_%s %d" % (which, peak_rss_kib()))
    elif mode == "op":
        op_overhead()
    elif mode == "latency":
        latency()
    elif mode == "gemm" and which:
        n = int(which)
        print("torch gemm_%d %.1f" % (n, gemm(n)))
    elif mode == "conv":
        print("torch conv %.1f" % conv())
    elif mode == "seq" and which in ("lstm", "gpt"):
        # At TORCH_THREADS only: bench/compare.sh runs 1 and 2 threads as
        # separate processes and takes the best.
        timed = int(argv[3]) if len(argv) > 3 else SEQ_STEPS
        rate = train_seq(which, timed)
        print("torch train_seq_%s %.0f" % (which, rate))
        print("torch rss_train_seq_%s %d" % (which, peak_rss_kib()))
    elif mode == "startup":
        train("mlp", 64, one_step=True)
    else:
        print(USAGE, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
