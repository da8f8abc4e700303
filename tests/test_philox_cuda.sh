#!/bin/sh
# tests/test_philox_cuda.sh — torc/philox.h compiles as CUDA device code:
# nvcc -c builds tests/philox_cuda.cu, a __global__ calling every function
# of the header (TORC_PHILOX_FN makes them __host__ __device__). Compiling
# needs no GPU; the test skips (77) where no nvcc is installed.

set -u

src=${TORC_TOP_SRCDIR:-.}
nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  else
    nvcc=$(command -v nvcc 2>/dev/null || true)
  fi
fi
if [ -z "$nvcc" ] || ! "$nvcc" --version >/dev/null 2>&1; then
  echo "SKIP: no working nvcc (looked at \$NVCC, /usr/local/cuda/bin/nvcc and PATH)"
  exit 77
fi
"$nvcc" --version | tail -n 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-philox-cuda.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# -Werror all-warnings: a host-only call from device code is an error
# anyway; warnings (e.g. on the host/device attributes) fail the test too.
if ! "$nvcc" -c -Werror all-warnings -I"$src/include" \
    -o "$tmp/philox_cuda.o" "$src/tests/philox_cuda.cu" >"$tmp/log" 2>&1; then
  cat "$tmp/log"
  echo "FAIL: nvcc could not compile torc/philox.h into a __global__"
  exit 1
fi
cat "$tmp/log"
if [ ! -s "$tmp/philox_cuda.o" ]; then
  echo "FAIL: nvcc wrote no object file"
  exit 1
fi
echo "PASS: torc/philox.h compiles as device code"
