#!/bin/sh
# bench/gemm/run.sh — the GEMM benchmark, torc and PyTorch side by side in
# one run: f32 matmul GFLOP/s at n = 256, 1024, 2048, torc through the cpu
# (OpenBLAS) plugin, PyTorch with torch.set_num_threads(THREADS) and
# OMP_WAIT_POLICY=PASSIVE (its best on this machine), alternating, medians
# of RUNS repetitions (default 5) on THREADS threads (default 2). The
# machine's fp32 peak is ~420 GFLOP/s on 2 Zen 5 cores;
# OPENBLAS_CORETYPE=Haswell (set by the environment) limits OpenBLAS to its
# AVX2 kernels.
#   bash bench/gemm/run.sh [RUNS [THREADS]]
# Needs the build tree configured with OpenBLAS (bash scripts/setup.sh) and
# Debian's python3-torch (PyTorch's column is left out without it).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$top/_build}
runs=${1:-5} threads=${2:-2}
make -s -C "$build" plugins/cpu.la bench/gemm/bench_gemm >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
have_torch=0
/usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
[ "$have_torch" = 1 ] || echo "(PyTorch not installed: its column is empty)"
# Alternate the two, one repetition each (each the median of 3 timed runs),
# so that a busy spell of the shared machine hits both.
i=0
while [ "$i" -lt "$runs" ]; do
  TORC_PLUGIN_PATH="$build/plugins/.libs" \
    "$build/bench/gemm/bench_gemm" 3 "$threads" >>"$out"
  [ "$have_torch" = 1 ] || { i=$((i + 1)); continue; }
  # PyTorch's side: the same sizes and timing as bench_gemm.c.
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 - 3 "$threads" >>"$out" <<'PY'
import statistics
import sys
import time

import torch

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
torch.set_num_threads(threads)
torch.manual_seed(1)
for n in (256, 1024, 2048):
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    torch.matmul(a, b)  # warm-up
    flop = 2.0 * n * n * n
    reps = max(1, int(4e9 / flop))
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.matmul(a, b)
        rates.append(flop * reps / (time.perf_counter() - t0) / 1e9)
    print("torch gemm %d %.1f" % (n, statistics.median(rates)))
PY
  i=$((i + 1))
done
echo "GEMM benchmark: f32 n x n matmul, $threads threads," \
  "medians of $runs alternating repetitions"
printf '%-10s %14s %14s %12s\n' n torc_GFLOP/s torch_GFLOP/s torc/pytorch
awk '{ key = $1 " " $3; n = ++cnt[key]; v[key, n] = $4
       if (!($3 in seen)) { seen[$3] = 1; order[k++] = $3 } }
  function med(key,   n, i, j, t, a) {
    n = cnt[key]; if (n == 0) return ""
    for (i = 1; i <= n; i++) a[i] = v[key, i] + 0
    for (i = 2; i <= n; i++)
      for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
        t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
      }
    return a[int((n + 1) / 2)]
  }
  END {
    for (i = 0; i < k; i++) {
      n = order[i]; t = med("torc " n); p = med("torch " n)
      r = (p != "" && p + 0 != 0) ? sprintf("%.2f", t / p) : "-"
      printf "%-10s %14s %14s %12s\n", n, t, (p == "" ? "-" : p), r
    }
  }' "$out"
