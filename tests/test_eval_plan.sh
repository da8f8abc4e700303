#!/bin/sh
# tests/test_eval_plan.sh — torc eval through a plan (torc/graph.h): a CNN
# with batch norm traced on the first batch, the batch norm folded, the
# convolution, relu and pool fused into one call and the linear layer into
# another, the short last batch run eagerly, the same loss and accuracy as
# with [eval] plan = no; [eval] precision = bf16 and f16 report the accuracy
# against f32 (a small difference); a bad precision is refused.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup eval_plan

# 200 test samples in batches of 64: three planned, the last (8) eager.
cat >"$tmp/cnn.ini" <<'EOF2'
[torc]
seed = 3
deterministic = yes
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
shape = 2,8,8
classes = 4
samples = 128
batch_size = 32
[data.test]
source = synthetic
shape = 2,8,8
classes = 4
samples = 200
batch_size = 64
[model]
input = 2,8,8
[layer]
type = conv2d
out_channels = 6
kernel = 3
padding = 1
[layer]
type = batchnorm2d
[layer]
type = relu
[layer]
type = maxpool2d
kernel = 2
[layer]
type = flatten
[layer]
type = linear
out_features = 4
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.05
[train]
epochs = 2
log_every = 100
EOF2
cd "$tmp" || exit 1

run_torc train cnn.ini
expect_rc 0
pass "a CNN with batch norm trains"

W=runs/cnn/final.safetensors
run_torc eval cnn.ini --checkpoint $W --set eval.verbose=yes
expect_rc 0
expect_has out "plan: 2 kernel calls (1 batch norms folded, 2 fused, 0 in place)"
expect_has out "3 of 4 batches planned, the others eager"
planned=$(grep '^eval:' "$tmp/out")
[ -n "$planned" ] || fail "no eval: line"
pass "torc eval plans the model, folds its batch norm, fuses conv + relu + pool and the linear layer, runs the last batch eagerly"

run_torc eval cnn.ini --checkpoint $W --set eval.plan=no --set eval.verbose=yes
expect_rc 0
expect_lacks out "plan:"
eager=$(grep '^eval:' "$tmp/out")
[ "$planned" = "$eager" ] || fail "planned '$planned' but eager '$eager'"
pass "[eval] plan = no: eager, the same loss and accuracy ($eager)"

for p in bf16 f16; do
  run_torc eval cnn.ini --checkpoint $W --set eval.precision=$p
  expect_rc 0
  expect_has out "precision: $p accuracy="
  line=$(grep '^precision:' "$tmp/out")
  d=$(printf '%s\n' "$line" | sed 's/.*delta=\([-+0-9.]*\).*/\1/')
  awk -v d="$d" 'BEGIN { exit !(d >= -0.05 && d <= 0.05) }' ||
    fail "$p: accuracy delta $d beyond 0.05: $line"
  pass "[eval] precision = $p: $line"
done

run_torc eval cnn.ini --checkpoint $W --set eval.precision=f8
expect_rc 2
expect_has err "precision"
expect_has err "'f8' is not one of: f32, bf16, f16"
pass "a bad precision is refused, naming the choices"

echo "test_eval_plan.sh: $n_pass checks passed"
