#!/bin/sh
# tests/test_onnx_import.sh — `[model] onnx = FILE.onnx`: the model of an
# INI file imported from the PyTorch-exported CNN of tests/fixtures/onnx,
# its path relative to the INI file's folder; torc describe shows it, one
# short training run lowers the loss (metrics.csv), torc eval runs
# on the trained weights; the errors (with [layer] sections, with init, a
# missing file, a garbage file, unsupported operators) are one message
# each. The data: the first 512 Fashion-MNIST images where
# dataset-fashion-mnist is installed, else (and under TORC_VALGRIND=1,
# which also loads only the reference plugins: oneDNN's JIT code reads
# past its buffers on purpose) 32 synthetic samples seen 6 times, 64
# to test on.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup onnx-import

fx=$TORC_TOP_SRCDIR/tests/fixtures/onnx
mkdir "$tmp/models" "$tmp/cfg"
cp "$fx/cnn.onnx" "$fx/unsupported.onnx" "$tmp/models/" || exit 1
printf 'not an onnx model\377\377\377' >"$tmp/models/garbage.onnx"

fm=/usr/share/datasets/fashion-mnist
plugins=
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  fm=/nonexistent
  plugins='[plugin.ref]
module = ref
[plugin.data]
module = data
[plugin.losses]
module = losses
[plugin.optim]
module = optim'
fi
if [ -r "$fm/train-images-idx3-ubyte.gz" ] && [ -r "$fm/t10k-labels-idx1-ubyte.gz" ]; then
  data="Fashion-MNIST (512 training images), one epoch"
  epochs=1
  cat >"$tmp/cfg/data.ini" <<INI
[data.train]
source = idx
images = $fm/train-images-idx3-ubyte.gz
labels = $fm/train-labels-idx1-ubyte.gz
transform = scale(0.00392156862745098), normalize(0.2860, 0.3530)
batch_size = 32
limit = 512
[data.test]
source = idx
images = $fm/t10k-images-idx3-ubyte.gz
labels = $fm/t10k-labels-idx1-ubyte.gz
transform = scale(0.00392156862745098), normalize(0.2860, 0.3530)
batch_size = 256
limit = 256
INI
else
  # random labels: learnt only by seeing the same few samples again
  data="32 synthetic samples, 6 epochs"
  epochs=6
  cat >"$tmp/cfg/data.ini" <<'INI'
[data.train]
source = synthetic
shape = 1,28,28
samples = 32
batch_size = 8
[data.test]
source = synthetic
shape = 1,28,28
samples = 64
seed = 1
batch_size = 64
INI
fi

# write_ini NAME MODEL_LINES: cfg/NAME.ini with the data above and [model]
# holding MODEL_LINES.
write_ini() {
  {
    printf '[torc]\nseed = 0\ndeterministic = yes\n%s\n' "$plugins"
    cat "$tmp/cfg/data.ini"
    printf '[model]\ninput = 1,28,28\n%s\n' "$2"
    printf '[loss]\ntype = cross_entropy\n'
    printf '[optimizer]\ntype = sgd\nlr = 0.01\nmomentum = 0.9\n'
    printf '[train]\nepochs = %s\nlog_every = 4\n' "$epochs"
  } >"$tmp/cfg/$1.ini"
}

cd "$tmp" || exit 1
write_ini cnn 'onnx = ../models/cnn.onnx'

run_torc describe cfg/cnn.ini
expect_rc 0
expect_has out "onnx("
expect_has out "(conv1): onnx_scope()"
expect_has out "Total params: 18,186"
pass "describe: the imported model, 18,186 parameters"

run_torc train cfg/cnn.ini
expect_rc 0
csv=cfg/runs/cnn/metrics.csv
[ -s "$csv" ] || fail "$csv is missing"
first=$(awk -F, '$3 == "train" { print $4; exit }' "$csv")
last=$(awk -F, '$3 == "train" { v = $4 } END { print v }' "$csv")
rows=$(awk -F, '$3 == "train"' "$csv" | wc -l)
[ "$rows" -ge 3 ] || fail "$csv has $rows training rows, expected 4 or more: $(cat "$csv")"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
  fail "the training loss did not fall: $first -> $last ($(cat "$csv"))"
pass "train on $data: the loss falls from $first to $last"

run_torc eval cfg/cnn.ini --checkpoint cfg/runs/cnn/final.safetensors
expect_rc 0
expect_has out "eval: loss="
pass "eval loads the fine-tuned weights"

# ---- errors ----

write_ini both 'onnx = ../models/cnn.onnx
[layer]
type = linear
out_features = 10'
run_torc describe cfg/both.ini
expect_rc 2
expect_has err "builds the model from the ONNX file, and [layer] sections build another"
expect_has err "remove the [layer] sections"
pass "onnx with [layer] sections: one message with both fixes"

write_ini init 'onnx = ../models/cnn.onnx
init = kaiming_normal'
run_torc describe cfg/init.ini
expect_rc 2
expect_has err "init = kaiming_normal would overwrite the weights"
pass "onnx with an init scheme: refused"

write_ini missing 'onnx = ../models/none.onnx'
run_torc describe cfg/missing.ini
expect_rc 2
expect_has err "key 'onnx'"
expect_has err "cannot open ONNX file 'cfg/../models/none.onnx'"
pass "a missing file: named as resolved against the INI file's folder"

write_ini garbage 'onnx = ../models/garbage.onnx'
run_torc describe cfg/garbage.ini
expect_rc 2
expect_has err "is not an ONNX model"
pass "a garbage file: one message"

write_ini unsup 'onnx = ../models/unsupported.onnx'
run_torc describe cfg/unsup.ini
expect_rc 2
expect_has err "Hardmax (node hardmax), Det (node det)"
pass "unsupported operators: all listed in one message"

echo "PASS: $n_pass checks"
