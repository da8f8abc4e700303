#!/bin/sh
# tests/test_fast_default.sh — the plugins a file gets: the docs' CNN
# (extracted at test time: README.md's ```ini block with a conv2d) on
# small synthetic data. With no [plugin.NAME] section the standard set
# loads and the start-up header shows cpu/onednn serving matmul/conv2d;
# with only ref named the slow-kernel warning gives the lines to add,
# once per op, and data/losses/optim still load for their sections; a
# standard plugin that is not installed is skipped quietly; torc bench
# names the plugin that served each op; torc eval prints the header too.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup fast

plugins=${TORC_PLUGIN_PATH:-}
if [ ! -f "$plugins/cpu.so" ] || [ ! -f "$plugins/onednn.so" ]; then
  echo "SKIP: the cpu and onednn plugins were not built (OpenBLAS, oneDNN)"
  exit 77
fi

# The model sections of README.md's CNN (its first ```ini block with a
# conv2d): every section but the plugins, the data, the run's schedule and
# outputs.
awk '/^```ini/ { grab = 1; buf = ""; next }
     grab && /^```/ { if (buf ~ /type = conv2d/) { printf "%s", buf; exit }
                      grab = 0; next }
     grab { buf = buf $0 "\n" }' "$TORC_TOP_SRCDIR/README.md" >"$tmp/snippet.ini"
if ! grep -q 'type = conv2d' "$tmp/snippet.ini"; then
  echo "FAIL: README.md has no \`\`\`ini block with a conv2d layer (its CNN snippet)"
  exit 1
fi
if grep -q '^\[plugin' "$tmp/snippet.ini"; then
  echo "FAIL: README.md's CNN snippet names plugins; it shows the standard set"
  exit 1
fi
awk '/^\[/ { keep = $0 !~ /^\[(plugin\.|plugins\]|data\.|train\]|checkpoint\]|scheduler\]|torc\])/ }
     keep' "$tmp/snippet.ini" >"$tmp/model.ini"
grep -q 'type = conv2d' "$tmp/model.ini" || {
  echo "FAIL: no conv2d layer in the CNN snippet"; cat "$tmp/snippet.ini"
  exit 1
}
grep -q '^\[loss\]' "$tmp/model.ini" || printf '[loss]\ntype = cross_entropy\n' >>"$tmp/model.ini"
grep -q '^\[optimizer\]' "$tmp/model.ini" || printf '[optimizer]\ntype = sgd\nlr = 0.01\n' >>"$tmp/model.ini"

# Its input shape and class count, for synthetic data of that shape.
shape=$(sed -n 's/^input *= *\([0-9,]*\).*/\1/p' "$tmp/model.ini" | head -n 1)
classes=$(sed -n 's/^out_features *= *\([0-9]*\).*/\1/p' "$tmp/model.ini" | tail -n 1)
cat >"$tmp/data.ini" <<EOD
[torc]
seed = 1
[data.train]
source = synthetic
shape = $shape
classes = $classes
samples = 32
batch_size = 16
[data.test]
source = synthetic
shape = $shape
classes = $classes
samples = 16
batch_size = 16
[train]
epochs = 1
[checkpoint]
dir = ck
EOD
cat "$tmp/data.ini" "$tmp/model.ini" >"$tmp/cnn.ini"
printf '[plugin.ref]\nmodule = ref\n[plugin.data]\nmodule = data\n[plugin.losses]\nmodule = losses\n[plugin.optim]\nmodule = optim\n' >"$tmp/ref_all.ini"
cat "$tmp/cnn.ini" >>"$tmp/ref_all.ini"
printf '[plugin.ref]\nmodule = ref\n' >"$tmp/ref_only.ini"
cat "$tmp/cnn.ini" >>"$tmp/ref_only.ini"
cd "$tmp" || exit 1

slow="runs on the slow reference kernels"

run_torc train cnn.ini
expect_rc 0
expect_has out "torc "
expect_has out " train: cnn.ini on cpu"
grep -E '^  onednn .* serves [0-9]+ ops on cpu \(the heavy ones: .*conv2d' out >/dev/null ||
  fail "expected the header's onednn line to list conv2d"
grep -E '^  cpu .* serves [0-9]+ ops on cpu \(the heavy ones: .*matmul' out >/dev/null ||
  fail "expected the header's cpu line to list matmul"
for p in ref data losses optim; do
  grep -E "^  $p " out >/dev/null || fail "expected plugin $p in the header"
done
expect_has out "model: "
expect_has out "  train    32 samples, 2 batches per epoch"
expect_has out "  test     16 samples, 1 batch per epoch"
expect_has out "checkpoints "
expect_has out "done: epochs=1"
expect_lacks err "$slow"
expect_lacks err "no kernel"
pass "no [plugin.NAME] section: the standard set, cpu/onednn serve matmul/conv2d"

# The header comes before the first step.
first_epoch=$(grep -n '^epoch ' out | head -n 1 | cut -d: -f1)
header=$(grep -n ' train: cnn.ini on cpu' out | head -n 1 | cut -d: -f1)
[ -n "$first_epoch" ] && [ -n "$header" ] && [ "$header" -lt "$first_epoch" ] ||
  fail "expected the header before the first progress line"
pass "the header is printed before the first step"

run_torc train ref_all.ini --overwrite
expect_rc 0
expect_has err "op 'conv2d' on cpu $slow"
expect_has err "[plugin.onednn] module = onednn"
expect_has err "op 'matmul' on cpu $slow"
expect_has err "[plugin.cpu] module = cpu"
[ "$(grep -c "op 'conv2d' on cpu $slow" err)" -eq 1 ] ||
  fail "expected the conv2d warning once"
grep -E '^  (cpu|onednn) ' out >/dev/null &&
  fail "expected an explicit plugin list to stay exact (no cpu, onednn)"
pass "only ref named: the slow-kernel warning with the line to add, once per op"

run_torc train ref_only.ini --overwrite
expect_rc 0
expect_has out "done: epochs=1"
for p in data losses optim; do
  grep -E "^  $p " out >/dev/null || fail "expected plugin $p loaded for its section"
done
pass "[plugin.ref] alone: data, losses and optim load for [data.*], [loss], [optimizer]"

# A standard plugin that was not built: skipped quietly (INFO), not an
# error. The plugin folder without onednn and cpu.
mkdir partial
for f in "$plugins"/*.so; do
  case $(basename "$f") in
  onednn.so | cpu.so) ;;
  *) ln -s "$f" partial/ ;;
  esac
done
TORC_PLUGIN_PATH=$tmp/partial run_torc train cnn.ini --overwrite --set checkpoint.dir=ck2
if [ -f "/usr/local/lib/torc/plugins/onednn.so" ]; then
  echo "SKIP part: an installed onednn.so is found in the install folder"
else
  expect_rc 0
  expect_lacks out "  onednn "
  expect_lacks err "onednn"
  expect_has out "done: epochs=1"
  TORC_LOG=info TORC_PLUGIN_PATH=$tmp/partial run_torc train cnn.ini --overwrite --set checkpoint.dir=ck3
  expect_rc 0
  expect_has err "plugin onednn (the standard set"
  expect_has err "is not installed"
  pass "a standard plugin that is not installed is skipped (INFO), not an error"
fi

run_torc bench cnn.ini --steps 2 --set data.train.batch_size=2
expect_rc 0
expect_has out "provider"
grep -E '^  conv2d +cpu +onednn ' out >/dev/null ||
  fail "expected bench to show conv2d served by onednn"
run_torc bench ref_all.ini --steps 2 --set data.train.batch_size=2
expect_rc 0
grep -E '^  conv2d +cpu +ref ' out >/dev/null ||
  fail "expected bench to show conv2d served by ref"
pass "torc bench names the plugin that served each op"

ck=$(ls ck/*.safetensors | head -n 1)
run_torc eval cnn.ini --checkpoint "$ck"
expect_rc 0
expect_has out " eval: cnn.ini on cpu"
expect_has out "  test     16 samples, 1 batch per epoch"
expect_has out "eval: loss="
pass "torc eval prints the header"

echo "$n_pass passed"
