#!/bin/sh
# tests/test_amp_train.sh — [train] precision: bf16 and fp16 mixed
# precision through torc train. Without fast kernels for the dtype a run
# is refused with the way out (allow_emulated); bf16 emulated on ref
# trains as f32 does; fp16 from a loss scale that overflows skips steps,
# backs the scale off, counts them in the metrics CSV and trains on; and a
# resumed fp16 run is the straight one bit for bit (the scaler's state is
# in the checkpoint).

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup amp-train

cat >"$tmp/small.ini" <<'INI'
[torc]
seed = 7
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
shape = 6
classes = 3
samples = 96
batch_size = 16
shuffle = yes
[data.test]
source = synthetic
shape = 6
classes = 3
samples = 48
batch_size = 24
[model]
input = 6
[layer]
type = linear
out_features = 16
[layer]
type = relu
[layer]
type = linear
out_features = 3
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
momentum = 0.9
[train]
epochs = 4
log_every = 2
[checkpoint]
every = 1
INI
cd "$tmp" || exit 1

# The test loss a run printed last.
test_loss() { sed -n 's/.*| test loss \([0-9.]*\).*/\1/p' "$tmp/out" | tail -n 1; }
# The metrics without their time columns (samples/s, seconds).
untimed() { cut -d, -f1-6,9 "$1"; }

# ---- no fast kernels: refused, with the way out ----
run_torc train small.ini --set train.precision=bf16 --set train.dir=r0
expect_rc 2
expect_has err "key 'precision' in [train]: bf16: no plugin has fast bf16 kernels on cpu"
expect_has err "allow_emulated = yes"
[ ! -e r0/final.safetensors ] || fail "a refused run wrote weights"
pass "bf16 without fast kernels is refused and says how to run it anyway"

# ---- bf16, emulated on ref: trains as f32 does ----
run_torc train small.ini --set train.dir=r32
expect_rc 0
l32=$(test_loss)
run_torc train small.ini --set train.precision=bf16 \
  --set train.allow_emulated=yes --set train.dir=rbf
expect_rc 0
expect_has out "precision: bf16 mixed (autocast: the products in bf16, the rest in f32; weights and optimizer f32)"
lbf=$(test_loss)
awk -v a="$l32" -v b="$lbf" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }' ||
  fail "bf16 test loss $lbf is not within 0.02 of f32's $l32"
[ "$(head -n 1 rbf/metrics.csv)" = \
  "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds" ] ||
  fail "a bf16 run's CSV has another header: $(head -n 1 rbf/metrics.csv)"
pass "bf16 (emulated) trains: test loss $lbf against f32's $l32"

# A bf16-trained run's weights are f32: torc eval takes them in f32 and,
# converted, in bf16.
run_torc eval small.ini --set train.dir=rbf
expect_rc 0
expect_has out "eval: loss=$lbf"
run_torc eval small.ini --set train.dir=rbf --set eval.precision=bf16
expect_rc 0
expect_has out "precision: bf16 accuracy="
pass "torc eval reads the bf16 run's checkpoint in f32 and in bf16"

run_torc bench small.ini --steps 3 --set train.precision=bf16 \
  --set train.allow_emulated=yes --set train.dir=rbb
expect_rc 0
expect_has out "3 training steps (after 5 of warm-up; bf16 mixed precision)"
pass "torc bench names the precision it measured"

# ---- fp16 from a scale that overflows ----
run_torc train small.ini --set train.precision=fp16 \
  --set train.allow_emulated=yes --set train.loss_scale=16777216 \
  --set train.dir=rh
expect_rc 0
expect_has out "weights and optimizer f32; dynamic loss scale)"
[ "$(head -n 1 rh/metrics.csv)" = \
  "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds,skipped_steps" ] ||
  fail "the fp16 CSV's header: $(head -n 1 rh/metrics.csv)"
first=$(sed -n 2p rh/metrics.csv | cut -d, -f9)
last=$(tail -n 1 rh/metrics.csv | cut -d, -f9)
# 2^24 times gradients of about 0.1 overflow f16 (65504): steps are
# skipped, the scale halves each time, until they fit.
[ "$first" -ge 1 ] 2>/dev/null || fail "no step was skipped in the first window ($first)"
[ "$last" -ge "$first" ] && [ "$last" -le 12 ] ||
  fail "skipped steps $first then $last; expected a few, then none"
lh=$(test_loss)
awk -v l="$lh" 'BEGIN { exit !(l < 1.2) }' || fail "fp16 test loss $lh"
pass "fp16: $last steps skipped while the scale backed off, then training goes on (test loss $lh)"

# ---- fp16 resumed is fp16 straight ----
untimed rh/metrics.csv >a
ck=$(ls rh/ckpt-*.safetensors | tail -n 1)
cp "$ck" straight.safetensors
rm -rf rh
run_torc train small.ini --set train.precision=fp16 \
  --set train.allow_emulated=yes --set train.loss_scale=16777216 \
  --set train.dir=rh --set train.epochs=2
expect_rc 0
run_torc train small.ini --set train.precision=fp16 \
  --set train.allow_emulated=yes --set train.loss_scale=16777216 \
  --set train.dir=rh --resume
expect_rc 0
untimed rh/metrics.csv >b
cmp -s a b || { diff a b; fail "2 epochs + resume for 2 differ from 4 straight"; }
same_tensors straight.safetensors "$(ls rh/ckpt-*.safetensors | tail -n 1)" ||
  fail "the resumed run's last checkpoint holds other tensors"
pass "fp16: 2 + 2 epochs resumed give the metrics and checkpoint of 4 straight"

echo "$n_pass passed"
