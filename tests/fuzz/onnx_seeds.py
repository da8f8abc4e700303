#!/usr/bin/env python3
"""tests/fuzz/onnx_seeds.py — makes the seed corpus of fuzz_onnx from ONNX's
backend test cases (Debian's libonnx-testdata): each seed is a case's
model.onnx and its test_data_set_0 inputs in fuzz_onnx's layout (each part
after a 4-byte little-endian length). Run by hand, with the names of the
cases `torc onnx-test` passes (one per line, "pass NAME"), and commit the
result:

  torc onnx-test DIR... > pass.txt
  python3 tests/fuzz/onnx_seeds.py pass.txt tests/fuzz/corpus/onnx

Cases are taken up to 3000 bytes each, one per op family, so
the corpus stays small and varied."""
import os
import re
import struct
import sys

DATA = "/usr/share/libonnx-testdata/data"


def main():
    passed = set()
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("pass "):
                passed.add(line.split()[1])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    families = {}
    for sub in ("node", "pytorch-operator", "pytorch-converted", "simple"):
        root = os.path.join(DATA, sub)
        if not os.path.isdir(root):
            continue
        for case in sorted(os.listdir(root)):
            if case not in passed:
                continue
            d = os.path.join(root, case)
            ds = os.path.join(d, "test_data_set_0")
            if not os.path.isdir(ds):
                continue
            parts = [open(os.path.join(d, "model.onnx"), "rb").read()]
            inputs = sorted(p for p in os.listdir(ds) if p.startswith("input_"))
            inputs.sort(key=lambda p: int(re.sub(r"\D", "", p)))
            parts += [open(os.path.join(ds, p), "rb").read() for p in inputs]
            blob = b"".join(struct.pack("<I", len(p)) + p for p in parts)
            if len(blob) > 3000:
                continue
            family = case[5:].split("_")[0]
            if families.get(family, 0) >= 1:
                continue
            families[family] = families.get(family, 0) + 1
            with open(os.path.join(out, case), "wb") as f:
                f.write(blob)


if __name__ == "__main__":
    main()
