#!/bin/sh
# tests/test_onnx_cases.sh — `torc onnx-test` over ONNX's own backend test cases
# (Debian's libonnx-testdata): no case fails on pytorch-operator,
# pytorch-converted and node, and each passes at least as many cases as
# measured when the interpreter was written (so support cannot regress);
# a case with a garbage or truncated model.onnx is one "fail" line and
# status 1; usage errors are status 2. TORC_VALGRIND=1 runs torc under
# valgrind on a fixed small sample of cases instead.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup onnx

D=/usr/share/libonnx-testdata/data
if [ ! -d "$D/node" ]; then
  echo "SKIP: ONNX's backend test data ($D) is not installed (apt-get install libonnx-testdata)"
  exit 77
fi

# check_set NAME MIN DIR...: no case fails, at least MIN pass.
check_set() {
  name=$1
  min=$2
  shift 2
  run_torc onnx-test "$@"
  expect_rc 0
  if grep -q '^fail ' "$tmp/out"; then
    fail "a case of $name fails"
  fi
  total=$(tail -n 1 "$tmp/out")
  passed=$(echo "$total" | sed -n 's/^onnx-test: \([0-9]*\) passed.*/\1/p')
  [ -n "$passed" ] || fail "no total line"
  [ "$passed" -ge "$min" ] || fail "$name: $passed cases pass, fewer than $min"
  pass "$name: $total"
}

if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  check_set sample 8 "$D/pytorch-operator/test_operator_add_broadcast" \
    "$D/pytorch-converted/test_Conv2d" "$D/pytorch-converted/test_MaxPool2d" \
    "$D/node/test_softmax_axis_0" "$D/node/test_gather_0" \
    "$D/node/test_slice_neg_steps" "$D/node/test_reshape_negative_dim" \
    "$D/node/test_transpose_default"
else
  check_set pytorch-operator 35 "$D/pytorch-operator"
  check_set pytorch-converted 82 "$D/pytorch-converted"
  check_set node 621 "$D/node"
fi

# A garbage model and a truncated one: one "fail" line each, status 1.
mkdir -p "$tmp/bad/garbage/test_data_set_0" "$tmp/bad/truncated" || exit 1
printf '\377\377\377\377garbage' >"$tmp/bad/garbage/model.onnx"
head -c 50 "$D/node/test_abs/model.onnx" >"$tmp/bad/truncated/model.onnx"
run_torc onnx-test "$tmp/bad"
expect_rc 1
grep -q "^fail garbage: '.*garbage/model.onnx' is not an ONNX model" "$tmp/out" ||
  fail "no fail line for the garbage model"
grep -q "^fail truncated: " "$tmp/out" || fail "no fail line for the truncated model"
grep -q '^onnx-test: 0 passed, 2 failed, 0 unsupported of 2 cases$' "$tmp/out" ||
  fail "wrong total line"
pass "bad models fail"

# --strict: an unsupported case is a failure.
run_torc onnx-test --strict "$D/node/test_floor"
if grep -q '^unsupported ' "$tmp/out"; then
  expect_rc 1
  pass "--strict fails on an unsupported case"
fi

run_torc onnx-test
expect_rc 2
run_torc onnx-test "$tmp/nothing-here"
expect_rc 2
grep -q "is not a folder" "$tmp/err" || fail "no message for a missing DIR"
run_torc onnx-test "$tmp"
expect_rc 2
pass "usage errors are status 2"
echo "$n_pass checks passed"
