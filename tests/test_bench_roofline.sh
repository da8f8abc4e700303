#!/bin/sh
# tests/test_bench_roofline.sh — `torc bench --roofline` on a small MLP (ref
# backend): the machine's peak in the header, the FLOPs per step of each op
# and layer exactly (a linear 784 -> 256 at batch 64 is 2 * 64 * 784 * 256
# forward FLOPs), GFLOP/s and % of the peak printed, the step's total line,
# and torc bench without --roofline as before. TORC_VALGRIND=1 runs torc
# under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup roofline

# 64 samples of 1x28x28 per batch, flatten, linear 784 -> 256, relu,
# linear 256 -> 10.
cat >"$tmp/mlp.ini" <<'EOF'
[torc]
seed = 3
[plugin.ref]
module = ref
[plugin.data]
module = data
[plugin.losses]
module = losses
[plugin.optim]
module = optim
[data.train]
source = synthetic
shape = 1,28,28
classes = 10
samples = 128
batch_size = 64
[model]
input = 1,28,28
[layer]
type = flatten
[layer]
type = linear
out_features = 256
[layer]
type = relu
[layer]
type = linear
out_features = 10
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
EOF

# field N of the line of $tmp/out that starts (after its indent) with
# NAME: field 1 is NAME's first word.
field() {
  awk -v name="$1" -v n="$2" '
    { line = $0; sub(/^ +/, "", line) }
    index(line, name) == 1 { split(line, f, / +/); print f[n]; exit }
  ' "$tmp/out"
}

run_torc bench "$tmp/mlp.ini" --steps 1 --roofline
expect_rc 0
expect_has out "1 training steps (after 5 of warm-up)"
if ! grep -Eq '^machine fp32 FMA peak: ([0-9.]+ GFLOP/s \((avx2|avx512), 1 thread\)|unknown)' "$tmp/out"; then
  fail "no 'machine fp32 FMA peak: N GFLOP/s (ISA, 1 thread)' line"
fi
expect_has out "roofline by op"
expect_has out "roofline by module"
pass "the header names the machine's peak; the roofline tables follow"

# matmul per step: forward 2*64*784*256 + 2*64*256*10, backward the
# weights' gradients of both layers and the input gradient of the second:
# 2*(2*64*784*256) + 3*(2*64*256*10) = 52,363,264.
[ "$(field 'matmul ' 5)" = "52,363,264" ] ||
  fail "matmul: expected 52,363,264 FLOP/step"
[ "$(field 'matmul ' 10)" = "compute" ] || fail "matmul is not compute-bound"
# linear '1': forward 2*64*784*256 = 25,690,112 and the bias add 64*256;
# backward the weight gradient alone (its input needs none).
[ "$(field "linear '1'" 5)" = "25,706,496" ] ||
  fail "linear '1': expected 25,706,496 forward FLOP/step"
[ "$(field "linear '1'" 6)" = "25,690,112" ] ||
  fail "linear '1': expected 25,690,112 backward FLOP/step"
# linear '3': 2*64*256*10 + 64*10 forward; weight and input gradients.
[ "$(field "linear '3'" 5)" = "328,320" ] ||
  fail "linear '3': expected 328,320 forward FLOP/step"
[ "$(field "linear '3'" 6)" = "655,360" ] ||
  fail "linear '3': expected 655,360 backward FLOP/step"
# relu: 1 FLOP per element of [64, 256] each way, memory-bound.
[ "$(field "relu '2'" 5)" = "16,384" ] || fail "relu '2': expected 16,384"
[ "$(field 'relu ' 10)" = "memory" ] || fail "relu is not memory-bound"
# flatten runs no kernel: 0 FLOPs, no rate.
[ "$(field "flatten '0'" 5)" = "0" ] || fail "flatten '0': expected 0 FLOPs"
[ "$(field "flatten '0'" 7)" = "-" ] || fail "flatten '0': expected no rate"
# an op with no formula: "-".
[ "$(field 'sgd_step_ ' 5)" = "-" ] || fail "sgd_step_: expected - FLOPs"
pass "FLOPs per step of each op and layer, exact"

# GFLOP/s and % of peak for the linear layers and the matmul (where the CPU
# has no FMA to measure, "-").
if grep -q '^machine fp32 FMA peak: unknown' "$tmp/out"; then
  pct='^-$'
else
  pct='^[0-9]+\.[0-9]%$'
fi
field "linear '1'" 7 | grep -Eq '^[0-9]+\.[0-9]$' ||
  fail "linear '1': no GFLOP/s"
field "linear '1'" 8 | grep -Eq "$pct" || fail "linear '1': no % of peak"
field 'matmul ' 8 | grep -Eq "$pct" || fail "matmul: no % of peak"
grep -Eq '^step: 52,4[0-9,]+\+ FLOP/step in [0-9.]+ ms/step = [0-9.]+ GFLOP/s' "$tmp/out" ||
  fail "no step: line with the FLOPs per step and GFLOP/s"
pass "GFLOP/s and % of peak per op and layer, and the whole step's"

run_torc bench "$tmp/mlp.ini" --steps 1
expect_rc 0
expect_has out "kernels by op"
if grep -q "roofline\|FMA peak" "$tmp/out"; then
  fail "torc bench without --roofline printed the roofline"
fi
pass "without --roofline, the report as before"

run_torc bench --roofline
expect_rc 2
expect_has err "which file?"
run_torc bench "$tmp/mlp.ini" --roofline=yes
expect_rc 2
expect_has err "unknown option (or missing value) --roofline=yes"
pass "usage errors: status 2 with a message"

echo "$n_pass checks passed"
