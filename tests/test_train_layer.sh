#!/bin/sh
# tests/test_train_layer.sh — the trainer (train/) is a layer above the
# core: its files include the public headers (torc/*.h), the C library's
# and its own train_internal.h only, and name no core internal (torc__*);
# and the core (core/) does not reach up: no file of it includes the whole
# public API (torc/torc.h) or the trainer's header (torc/train.h).
set -u
top=${TORC_TOP_SRCDIR:-.}
bad=0
for f in "$top"/train/*.c "$top"/train/*.h; do
  [ -r "$f" ] || { echo "FAIL: no trainer sources in $top/train"; exit 1; }
  # Quoted includes must be torc/NAME.h or train_internal.h.
  if grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
      grep -v -e '"torc/[a-z_]*\.h"' -e '"train_internal\.h"'; then
    echo "FAIL: $f includes a header that is not public (above)"
    bad=1
  fi
  if grep -n 'torc__[a-z]' "$f"; then
    echo "FAIL: $f uses a core internal (above)"
    bad=1
  fi
done
for f in "$top"/core/*.c "$top"/core/*.h; do
  if grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"torc/\(torc\|train\)\.h"' "$f"; then
    echo "FAIL: $f includes a header above the core (above)"
    bad=1
  fi
done
[ "$bad" -eq 0 ] || exit 1
echo "PASS: train/ uses the public headers only; core/ includes no header above it"
