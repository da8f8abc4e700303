#!/bin/sh
# tests/test_transformer_torch.sh — the torc -> PyTorch direction of the
# attention and transformer layers' state dicts: tests/test_transformer
# (with TORC_TRANSFORMER_EXPORT_DIR set, only its export) builds every case
# of tests/fixtures/gen_transformer.py with torc's own init and saves the
# state dicts, the inputs and its eval outputs; gen_transformer.py --check
# loads each state dict into PyTorch's module strictly and compares
# (1e-5). Skipped (77) where /usr/bin/python3 cannot import torch.
# TORC_VALGRIND=1 runs test_transformer under valgrind; Python never is.

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
TEST=$TORC_TOP_BUILDDIR/tests/test_transformer
[ -x "$TEST" ] || skip "$TEST is not built (needs cmocka)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-transformer.XXXXXX") ||
  fail "cannot create a temporary folder"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

rc=0
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  # $LIBTOOL is a command line ("/bin/bash .../libtool"): split on purpose.
  TORC_TRANSFORMER_EXPORT_DIR=$tmp ${LIBTOOL:-} ${LIBTOOL:+--mode=execute} \
    valgrind --quiet --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions="$TORC_TOP_SRCDIR/tests/valgrind.supp" \
    "$TEST" >"$tmp/out" 2>&1 || rc=$?
else
  TORC_TRANSFORMER_EXPORT_DIR=$tmp "$TEST" >"$tmp/out" 2>&1 || rc=$?
fi
if [ "$rc" -ne 0 ]; then
  cat "$tmp/out"
  fail "TORC_TRANSFORMER_EXPORT_DIR=$tmp $TEST exited with status $rc"
fi
file=$tmp/transformer.torc.safetensors
[ -s "$file" ] || { cat "$tmp/out"; fail "$TEST wrote no $file"; }
echo "PASS: test_transformer exported $file"

# No bytecode next to the sources (distcheck makes them read-only).
rc=0
PYTHONDONTWRITEBYTECODE=1 "$PYTHON" \
  "$TORC_TOP_SRCDIR/tests/fixtures/gen_transformer.py" --check "$file" \
  >"$tmp/py" 2>&1 || rc=$?
cat "$tmp/py"
[ "$rc" -eq 0 ] || fail "gen_transformer.py --check exited with status $rc"
echo "test_transformer_torch: 2 checks passed"
exit 0
