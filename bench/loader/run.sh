#!/bin/sh
# bench/loader/run.sh — the loader benchmark, torc and PyTorch side by side
# in one run: Fashion-MNIST samples/s through each framework's DataLoader
# (normalise pipeline, batch 64, shuffled) at 0, 1 and 2 workers, and the
# share of an MLP training step spent waiting for data. Medians of RUNS
# runs (default 3); the machine is shared, so compare ratios, not times.
#   bash bench/loader/run.sh [RUNS [SAMPLES [STEPS]]]
# Needs the build tree (bash scripts/setup.sh), dataset-fashion-mnist and
# Debian's python3-torch (PyTorch's column is left out without it).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$top/_build}
runs=${1:-3} samples=${2:-60000} steps=${3:-300}
make -s -C "$build" bench/loader/bench_loader >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
TORC_PLUGIN_PATH="$build/plugins/.libs" \
  "$build/bench/loader/bench_loader" "$runs" "$samples" "$steps" >>"$out"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 "$top/bench/loader/torch_loader.py" "$runs" "$samples" \
    "$steps" >>"$out"
else
  echo "(PyTorch not installed: its column is empty)"
fi
echo "loader benchmark: Fashion-MNIST train, batch 64, medians of $runs runs"
printf '%-28s %8s %12s %12s %10s\n' measure workers torc pytorch torc/pytorch
awk '{ key = $2 " " $3; v[$1, key] = $4; if (!(key in seen)) { seen[key] = 1; order[n++] = key } }
  END {
    for (i = 0; i < n; i++) {
      split(order[i], k, " ")
      t = v["torc", order[i]]; p = v["torch", order[i]]
      r = (p != "" && p + 0 != 0) ? sprintf("%.2f", t / p) : "-"
      printf "%-28s %8s %12s %12s %10s\n", k[1], k[2], t, (p == "" ? "-" : p), r
    }
  }' "$out"
