#!/bin/sh
# examples/c-api/early_stop.sh — make check's run of early_stop on a small
# synthetic problem: with a MIN_DELTA no evaluation can beat, PATIENCE 1
# stops the 5-epoch run after its second epoch, with a checkpoint though
# none was due. Under TORC_VALGRIND=1 it runs under valgrind.
set -u
prog=$TORC_TOP_BUILDDIR/examples/c-api/early_stop
tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-early-stop-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/es.ini" <<'INI'
[torc]
seed = 5
[plugin.ref]
module = ref
[plugin.data]
module = data
[plugin.losses]
module = losses
[plugin.optim]
module = optim
[model]
input = 6
[layer]
type = linear
out_features = 3
[data.train]
source = synthetic
shape = 6
classes = 3
samples = 48
batch_size = 8
[data.test]
source = synthetic
shape = 6
classes = 3
samples = 24
batch_size = 12
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
[train]
epochs = 5
log_every = 3
[checkpoint]
dir = ckpt
every = 0
INI
run=
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  run="$LIBTOOL --mode=execute valgrind --quiet --error-exitcode=99 \
    --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions=$TORC_TOP_SRCDIR/tests/valgrind.supp"
fi
$run "$prog" "$tmp/es.ini" 1 100 >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
fail() {
  echo "FAIL: $1"
  exit 1
}
[ "$rc" -eq 0 ] || fail "early_stop exited $rc"
grep -q '^early stopping: test loss [0-9.]*, no better than [0-9.]* for 1 evaluations$' "$tmp/out" ||
  fail "no early-stopping line"
grep -q '^epoch 2/5: train loss ' "$tmp/out" || fail "no summary of epoch 2"
grep -q '^epoch 3/5' "$tmp/out" && fail "epoch 3 ran"
grep -qx "stopped early after epoch 2: checkpoint $tmp/ckpt/ckpt-00000012.safetensors; go on with --resume" "$tmp/out" ||
  fail "no stop message naming the checkpoint"
[ -f "$tmp/ckpt/ckpt-00000012.safetensors" ] || fail "no checkpoint"
tail -n 1 "$tmp/out" | grep -q '^done: epochs=2 best_test_loss=[0-9.]* checkpoint=' ||
  fail "the done: line"
echo "PASS: early_stop stopped after epoch 2 of 5 with a checkpoint"
