#!/bin/sh
# tests/test_onnx_export_cli.sh — `torc export` on every example model
# (fashion-mnist mlp, cnn, resnet; tabular wine, diabetes) and two models
# of many more layer types at opsets 13 and 17: weights saved
# by tests/onnx_export_ref (batch-norm statistics and biases away from
# their defaults), exported with a dynamic batch, then (a) onnx.checker
# (full_check) and strict shape inference under Debian's python3 and the
# python3 on PATH, (b) onnxruntime on fixed inputs at batch sizes 3 and 7
# (traced at 2) against torc's own outputs, within 1e-5 relative
# (tests/onnx_export_check.py). A python without onnx or onnxruntime is a
# skip of that part, with the reason; the test skips (77) when no part
# could run. Also the command's errors: a bad opset, an unwritable path
# (no file left), a missing checkpoint, usage. TORC_VALGRIND=1 runs torc
# under valgrind, on the models that load no oneDNN.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup onnx-export

S=$TORC_TOP_SRCDIR
REF=$TORC_TOP_BUILDDIR/tests/onnx_export_ref
CHECK=$S/tests/onnx_export_check.py
[ -x "$REF" ] || { echo "SKIP: $REF is not built"; exit 77; }

ran=0
skipped=
# py PYTHON MODE ARGS...: runs the checker (MODE check, run or all); a
# skip is noted once per python and part, and that part left out after;
# a failure ends the test.
py() {
  p=$1
  mode=$2
  shift 2
  case "$skipped" in *"[$p $mode]"*) return 0 ;; esac
  what="$p onnx_export_check.py $mode $*"
  "$p" "$CHECK" "$mode" "$@" >"$tmp/py.out" 2>&1
  prc=$?
  cat "$tmp/py.out"
  if [ $prc = 0 ] && grep -q '^SKIP: ' "$tmp/py.out"; then
    skipped="$skipped
  [$p run] $(grep '^SKIP: ' "$tmp/py.out")"
  fi
  case $prc in
    0) ran=$((ran + 1)) ;;
    77) skipped="$skipped
  [$p $mode] $(tail -n 1 "$tmp/py.out")" ;;
    *) rc=$prc; fail "the check failed" ;;
  esac
}

pythons=
for p in /usr/bin/python3 "$(command -v python3 || true)"; do
  [ -n "$p" ] && [ -x "$p" ] || continue
  case " $pythons " in *" $p "*) ;; *) pythons="$pythons $p" ;; esac
done

examples="fashion-mnist/mlp fashion-mnist/cnn fashion-mnist/resnet
          tabular/wine tabular/diabetes"
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  # Their INI files load oneDNN, whose OpenMP threads valgrind reports.
  echo "PASS: (the Fashion-MNIST models are not exported under valgrind)"
  examples="tabular/wine tabular/diabetes"
fi
models=
for ini in $examples; do
  name=$(basename "$ini")
  d=$tmp/$name
  mkdir -p "$d"
  what="onnx_export_ref $ini"
  "$REF" "$S/examples/$ini.ini" "$d" 3 7 >"$tmp/out" 2>"$tmp/err" ||
    { rc=$?; fail "the reference outputs"; }
  run_torc export "$S/examples/$ini.ini" --checkpoint "$d/weights.safetensors" \
    -o "$d/model.onnx"
  expect_rc 0
  expect_has out "wrote $d/model.onnx:"
  expect_has out "batch dynamic"
  [ -s "$d/model.onnx" ] || fail "no model.onnx"
  pass "$name exported"
  models="$models $d/model.onnx"
done

# ---- more layers, at the lowest and highest opset ----
# zoo:
# Activations that are formulas at 13 (hardswish) or single ops, layer
# norm (LayerNormalization only from 17), average and adaptive pooling.
cat >"$tmp/zoo.ini" <<'INI'
[plugin.ref]
module = ref
[model]
input = 2,8,8
[layer]
type = conv2d
out_channels = 4
kernel = 3
padding = 1
[layer]
type = batchnorm2d
[layer]
type = gelu
[layer]
type = avgpool2d
kernel = 2
[layer]
type = silu
[layer]
type = adaptive_avgpool2d
output_size = 2
[layer]
type = flatten
[layer]
type = linear
out_features = 12
[layer]
type = layernorm
[layer]
type = hardswish
[layer]
type = leaky_relu
negative_slope = 0.1
[layer]
type = elu
[layer]
type = softplus
[layer]
type = tanh
[layer]
type = dropout
p = 0.5
[layer]
type = linear
out_features = 5
[layer]
type = log_softmax
INI
# A concatenation (copies into slices), group norm (a formula), PReLU,
# CELU, relu6 and hardtanh (where, clamp), a transposed convolution.
cat >"$tmp/zoo2.ini" <<'INI'
[plugin.ref]
module = ref
[model]
input = 2,6,6
[layer]
type = conv2d
out_channels = 4
kernel = 3
padding = 1
[layer]
type = prelu
num_parameters = 4
[layer]
type = conv_transpose2d
out_channels = 4
kernel = 3
stride = 2
padding = 1
[layer]
type = groupnorm
groups = 2
[layer]
type = celu
[layer]
type = relu6
[layer]
type = concat
from = -3
[layer]
type = hardtanh
[layer]
type = flatten
[layer]
type = linear
out_features = 5
[layer]
type = softmax
INI
for zoo in zoo zoo2; do
  d=$tmp/$zoo
  mkdir -p "$d"
  what="onnx_export_ref $zoo.ini"
  "$REF" "$tmp/$zoo.ini" "$d" 3 7 >"$tmp/out" 2>"$tmp/err" ||
    { rc=$?; fail "the reference outputs"; }
  for opset in 13 17; do
    run_torc export "$tmp/$zoo.ini" --checkpoint "$d/weights.safetensors" \
      -o "$d/model$opset.onnx" --opset $opset
    expect_rc 0
    expect_has out "opset $opset, batch dynamic"
    pass "$zoo exported at opset $opset"
    models="$models $d/model$opset.onnx"
  done
done

# Every model checked and run by each python, one process each.
for p in $pythons; do
  # shellcheck disable=SC2086
  py "$p" all 3,7 $models
done

# ---- the command's errors ----
d=$tmp/wine
run_torc export "$S/examples/tabular/wine.ini" --checkpoint "$d/weights.safetensors" \
  -o "$tmp/x.onnx" --opset 12
expect_rc 2
expect_has err "--opset 12: torc writes opsets 13 to 17"
[ ! -e "$tmp/x.onnx" ] || fail "a file was written"
pass "opset 12: status 2, the range named"

run_torc export "$S/examples/tabular/wine.ini" --checkpoint "$d/weights.safetensors" \
  -o "$tmp/no/such/dir/x.onnx"
expect_rc 2
expect_has err "cannot write $tmp/no/such/dir/x.onnx"
pass "unwritable path: status 2"

mkdir "$tmp/ro"
cp "$d/model.onnx" "$tmp/ro/keep.onnx"
run_torc export "$S/examples/tabular/wine.ini" --checkpoint "$d/weights.safetensors" \
  -o "$tmp/ro/keep.onnx" --opset 13 --batch 4
expect_rc 0
expect_has out "opset 13, batch 4"
[ "$(ls -A "$tmp/ro")" = keep.onnx ] || fail "a temporary file was left: $(ls -A "$tmp/ro")"
for p in $pythons; do
  py "$p" check "$tmp/ro/keep.onnx"
done
pass "opset 13, fixed batch 4: replaces the file, no temporary left"

run_torc export "$S/examples/tabular/wine.ini" -o "$tmp/x.onnx"
expect_rc 2
expect_has err "add --checkpoint CKPT"
run_torc export "$S/examples/tabular/wine.ini" --checkpoint "$tmp/none.safetensors" \
  -o "$tmp/x.onnx"
expect_rc 2
[ ! -e "$tmp/x.onnx" ] || fail "a file was written"
run_torc export "$S/examples/tabular/wine.ini" --checkpoint "$d/weights.safetensors" \
  -o "$tmp/x.onnx" --batch zero
expect_rc 2
expect_has err "--batch takes dynamic or a batch size"
run_torc export --help
expect_rc 0
expect_has out "usage: torc export FILE.ini"
pass "usage errors and a missing checkpoint: status 2"

if [ "$ran" -eq 0 ]; then
  echo "SKIP: no python could check the models$skipped"
  exit 77
fi
[ -z "$skipped" ] || echo "note: parts skipped:$skipped"
echo "PASS: $n_pass checks, $ran python checks"
