#!/bin/sh
# tests/test_model_torch.sh — the torc -> PyTorch direction of the state-dict
# interchange: tests/test_model (with TORC_MODEL_EXPORT_DIR set, only its
# export) trains the CNN of tests/fixtures/gen_model.py in torc and saves
# its state dict, an input and its eval logits; gen_model.py --check then
# loads that state dict into PyTorch's Net strictly and compares the
# logits (1e-5). Skipped (77) where /usr/bin/python3 cannot import torch.
# TORC_VALGRIND=1 runs test_model under valgrind; Python never is.

set -u

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

if [ -z "${TORC_TOP_BUILDDIR:-}" ] || [ -z "${TORC_TOP_SRCDIR:-}" ]; then
  skip "run through make check (TORC_TOP_BUILDDIR is not set)"
fi
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || skip "$PYTHON is not installed (PyTorch check not run)"
if ! why=$("$PYTHON" -c 'import torch' 2>&1); then
  why=$(printf '%s\n' "$why" | tail -n 1)
  skip "$PYTHON cannot import torch (PyTorch check not run): $why"
fi
TEST=$TORC_TOP_BUILDDIR/tests/test_model
[ -x "$TEST" ] || skip "$TEST is not built (needs cmocka)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-model.XXXXXX") ||
  fail "cannot create a temporary folder"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

# ---- 1. torc trains and exports ----
rc=0
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  # $LIBTOOL is a command line ("/bin/bash .../libtool"): split on purpose.
  TORC_MODEL_EXPORT_DIR=$tmp ${LIBTOOL:-} ${LIBTOOL:+--mode=execute} \
    valgrind --quiet --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions="$TORC_TOP_SRCDIR/tests/valgrind.supp" \
    "$TEST" >"$tmp/out" 2>&1 || rc=$?
else
  TORC_MODEL_EXPORT_DIR=$tmp "$TEST" >"$tmp/out" 2>&1 || rc=$?
fi
if [ "$rc" -ne 0 ]; then
  cat "$tmp/out"
  fail "TORC_MODEL_EXPORT_DIR=$tmp $TEST exited with status $rc"
fi
state=$tmp/test_model.torc.safetensors
io=$tmp/test_model.torc_io.safetensors
for f in "$state" "$io"; do
  [ -s "$f" ] || { cat "$tmp/out"; fail "$TEST wrote no $f"; }
done
echo "PASS: test_model exported $state and $io"

# ---- 2. PyTorch loads them strictly and gives the same logits ----
# No bytecode next to the sources (distcheck makes them read-only).
rc=0
PYTHONDONTWRITEBYTECODE=1 "$PYTHON" \
  "$TORC_TOP_SRCDIR/tests/fixtures/gen_model.py" --check "$state" "$io" \
  >"$tmp/py" 2>&1 || rc=$?
cat "$tmp/py"
[ "$rc" -eq 0 ] || fail "gen_model.py --check exited with status $rc"
echo "test_model_torch: 2 checks passed"
exit 0
