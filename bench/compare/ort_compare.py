#!/usr/bin/env python3
"""bench/compare/ort_compare.py — onnxruntime's side of bench/compare.sh's
eval rows: the benchmark's MLP and CNN (the layers of bench_compare.c and
torch_compare.py) built as ONNX graphs with onnx.helper, weights drawn
with PyTorch's default initialisation ranges (uniform +-1/sqrt(fan_in)),
run by an InferenceSession on the 10000 Fashion-MNIST test images at batch
1000, decoded and normalised once beforehand (as PyTorch's side), argmax
accuracy counted; best of five passes, the first warming up. Threads:
TORCH_THREADS (the same count as the other sides) intra-op, one inter-op,
sequential execution.

    ort_compare.py eval mlp|cnn     prints `ort eval_mlp <samples/s>` and
                                    `ort rss_eval_mlp <KiB>`

Needs numpy, onnx and onnxruntime (python3 -m pip install onnxruntime onnx).
"""
import gzip
import os
import resource
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = "/usr/share/datasets/fashion-mnist/"
MEAN, STD = 0.2860, 0.3530
BATCH = 1000


def idx(path):
    """Decodes one gzipped IDX file into a numpy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load():
    """The test split: N x 1 x 28 x 28 normalised float32, N int64 labels."""
    x = idx(ROOT + "t10k-images-idx3-ubyte.gz").astype(np.float32)
    x = ((x / 255.0 - MEAN) / STD).astype(np.float32).reshape(-1, 1, 28, 28)
    y = idx(ROOT + "t10k-labels-idx1-ubyte.gz").astype(np.int64)
    return x, y


class Builder:
    """Nodes and initialisers of one graph, named in order."""

    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0
        self.rng = np.random.default_rng(0)

    def name(self, what):
        self.n += 1
        return "%s%d" % (what, self.n)

    def weight(self, shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        w = self.rng.uniform(-bound, bound, shape).astype(np.float32)
        n = self.name("w")
        self.inits.append(numpy_helper.from_array(w, n))
        return n

    def op(self, kind, inputs, **attrs):
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(self, x, fin, fout):
        w = self.weight((fout, fin), fin)
        b = self.weight((fout,), fin)
        return self.op("Gemm", [x, w, b], transB=1)

    def conv(self, x, cin, cout):
        fan = cin * 9
        w = self.weight((cout, cin, 3, 3), fan)
        b = self.weight((cout,), fan)
        return self.op("Conv", [x, w, b], kernel_shape=[3, 3],
                       pads=[1, 1, 1, 1])


def model(which):
    """The ONNX model of the benchmark's MLP or CNN."""
    g = Builder()
    x = "x"
    if which == "cnn":
        h = g.op("Relu", [g.conv(x, 1, 32)])
        h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
        h = g.op("Relu", [g.conv(h, 32, 64)])
        h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
        h = g.op("Flatten", [h], axis=1)
        h = g.op("Relu", [g.linear(h, 3136, 128)])
        y = g.linear(h, 128, 10)
    else:
        h = g.op("Flatten", [x], axis=1)
        h = g.op("Relu", [g.linear(h, 784, 256)])
        h = g.op("Relu", [g.linear(h, 256, 128)])
        y = g.linear(h, 128, 10)
    graph = helper.make_graph(
        g.nodes, which,
        [helper.make_tensor_value_info(x, TensorProto.FLOAT,
                                       ["N", 1, 28, 28])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["N", 10])],
        g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def evaluate(which):
    x, y = load()
    threads = int(os.environ.get("TORCH_THREADS", "2"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model(which).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    best = 0.0
    for _ in range(5):  # the first warms up
        n, correct = 0, 0
        t0 = time.perf_counter()
        for i in range(0, len(y), BATCH):
            out = sess.run(None, {"x": x[i:i + BATCH]})[0]
            correct += int((out.argmax(1) == y[i:i + BATCH]).sum())
            n += len(out)
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main(argv):
    if len(argv) != 3 or argv[1] != "eval" or argv[2] not in ("mlp", "cnn"):
        sys.stderr.write("usage: ort_compare.py eval mlp|cnn\n")
        return 2
    rate = evaluate(argv[2])
    print("ort eval_%s %.0f" % (argv[2], rate))
    print("ort rss_eval_%s %d" % (
        argv[2], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
