#!/bin/sh
# tests/test_amp_cpu.sh — bf16 mixed precision on the CPU's fast plugins:
# every float kernel of a CNN training step (convolution, batch norm, relu,
# max pool, dropout, linear, the loss, the optimizer, the casts) runs on
# the cpu or onednn plugin, none on ref, as `torc bench --all-ops` shows.
# Skipped (77) where onednn was not built or the CPU has no native bf16
# (torc train then refuses bf16, as test_amp_train.sh checks).

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup amp-cpu

cat >"$tmp/cnn.ini" <<'INI'
[torc]
seed = 3
threads = 2
[plugin.ref]
module = ref
[plugin.cpu]
module = cpu
[plugin.onednn]
module = onednn
[plugin.data]
module = data
[plugin.losses]
module = losses
[plugin.optim]
module = optim
[data.train]
source = synthetic
shape = 1, 12, 12
classes = 4
samples = 64
batch_size = 16
[model]
input = 1, 12, 12
[layer]
type = conv2d
out_channels = 8
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
out_features = 16
[layer]
type = relu
[layer]
type = dropout
p = 0.25
[layer]
type = linear
out_features = 4
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.05
momentum = 0.9
[train]
epochs = 1
precision = bf16
INI

run_torc bench "$tmp/cnn.ini" --steps 2 --all-ops
if [ "$rc" = 2 ] && grep -q "no plugin has fast bf16 kernels" "$tmp/err"; then
  echo "SKIP: no fast bf16 kernels here (onednn not built, or a CPU without" \
    "AVX-512 BF16 or AMX, as valgrind's is): $(head -c 300 "$tmp/err")"
  exit 77
fi
[ "$rc" = 0 ] || fail "expected status 0"
grep -q "bf16 mixed precision" "$tmp/out" || fail "no bf16 in the header"
# the profile's rows: op, device, provider, calls, ms/step, share
rows=$(awk '$2 == "cpu" && NF == 6' "$tmp/out")
[ -n "$rows" ] || fail "no kernel rows in the profile"
for op in conv2d batch_norm relu max_pool2d dropout matmul \
  conv2d_backward_weight batch_norm_backward relu_backward \
  max_pool2d_backward; do
  echo "$rows" | awk -v o="$op" '$1 == o { f = 1 } END { exit !f }' ||
    fail "op $op is not in the profile"
done
# the step's float kernels; the accuracy's integer and boolean
# bookkeeping is ref's: eq and max_dim, and besides the float calls of
# add, sum and fill_ (cpu) their i64 and bool ones
on_ref=$(echo "$rows" | awk '
  $1 ~ /^(eq|max_dim)$/ { next }
  $1 ~ /^(add|sum|fill_)$/ { if ($3 == "ref") print $1 " (" $3 ")"; next }
  $3 ~ /ref/ { print $1 " (" $3 ")" }')
[ -z "$on_ref" ] || fail "served by ref: $(echo $on_ref)"
pass "every float kernel of the bf16 step runs on cpu or onednn"
echo "$n_pass passed"
