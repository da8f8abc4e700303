#!/bin/sh
# tests/test_train.sh — `torc train` and `torc eval` on a small synthetic
# problem (ref backend): the outputs docs/training.md fixes (summary lines, the
# metrics CSV, curves.svg, checkpoints, the done: line), determinism, resume
# bit for bit (after a finished run and after Ctrl-C), the NaN guard, and
# every user error a message and status 2. TORC_VALGRIND=1 runs each torc
# under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup train

# base.ini: 3 classes of 1x6x6 samples, a small MLP with dropout, SGD with
# momentum and a cosine schedule with warm-up, 2 loader workers.
cat >"$tmp/base.ini" <<'EOF'
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
shape = 1,6,6
classes = 3
samples = 384
batch_size = 32
shuffle = yes
workers = 2
[data.test]
source = synthetic
shape = 1,6,6
classes = 3
samples = 96
batch_size = 48
[model]
input = 1,6,6
[layer]
type = flatten
[layer]
type = linear
out_features = 16
[layer]
type = relu
[layer]
type = dropout
p = 0.1
[layer]
type = linear
out_features = 3
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
momentum = 0.9
[scheduler]
type = cosine
t_max = 4
warmup_epochs = 1
[train]
epochs = 4
log_every = 5
dir = run
metrics = run/metrics.csv
[checkpoint]
dir = run/ckpt
keep = 2
EOF
cd "$tmp" || exit 1

# The columns of the metrics CSV that do not measure time.
untimed() { cut -d, -f1-6 "$1"; }

# same_tensors A B: checkpoints A and B hold the same bytes after their
# safetensors headers (every tensor: weights, optimizer and scheduler
# state; the header's metadata has the run's seconds, which differ).
same_tensors() {
  na=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  nb=$(od -An -tu8 -N8 "$2" | tr -d ' ')
  tail -c +$((na + 9)) "$1" >"$tmp/ta" && tail -c +$((nb + 9)) "$2" >"$tmp/tb" &&
    [ -s "$tmp/ta" ] && cmp -s "$tmp/ta" "$tmp/tb"
}

# ---- a run ----

run_torc train base.ini
expect_rc 0
expect_has out "epoch 1/4: train loss"
expect_has out "| test loss"
expect_has out "epoch 4/4: train loss"
tail -n 1 "$tmp/out" | grep -q '^done: epochs=4 test_loss=[0-9.]* test_accuracy=[0-9.]* seconds=[0-9.]*$' ||
  fail "the last line is not the done: line"
pass "prints a summary per epoch and the done: line last"

head -n 1 run/metrics.csv | grep -qx 'epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds' ||
  fail "metrics CSV header"
[ "$(grep -c ',train,' run/metrics.csv)" -eq 12 ] || fail "12 train rows (3 per epoch)"
[ "$(grep -c ',test,' run/metrics.csv)" -eq 4 ] || fail "4 test rows"
grep -q '^4,48,test,' run/metrics.csv || fail "the last test row is epoch 4, step 48"
pass "metrics CSV: header, a row per log window and per evaluation"

# warmup_epochs = 1: the lr rises at every step of epoch 1, 0.1 * (0.1 +
# 0.9 * k / 12) at step k, and epoch 2 starts the cosine at 0.1.
[ "$(grep ',train,' run/metrics.csv | head -n 4 | cut -d, -f1,2,6 | tr '\n' ' ')" = \
  "1,5,0.04 1,10,0.0775 1,12,0.0925 2,17,0.1 " ] ||
  fail "warm-up lr by step: $(grep ',train,' run/metrics.csv | head -n 4 | cut -d, -f1,2,6 | tr '\n' ' ')"
pass "warmup_epochs: a linear warm-up raised at every step, then the schedule"

grep -q '<svg' run/curves.svg && grep -q 'polyline' run/curves.svg ||
  fail "curves.svg next to the metrics"
ls run/ckpt >"$tmp/ckpts"
[ "$(cat "$tmp/ckpts")" = "ckpt-00000036.safetensors
ckpt-00000048.safetensors" ] || fail "checkpoints: the newest 2 (keep = 2), got $(cat "$tmp/ckpts")"
pass "curves.svg, and the newest two checkpoints"
mv run first

run_torc train base.ini --progress bar --set train.epochs=1 \
  --set train.dir=bar --set train.metrics=bar/metrics.csv --set checkpoint.dir=bar/ckpt
expect_rc 0
cr=$(printf '\r') esc=$(printf '\033')
expect_has out "${cr}epoch 1/1 [##########--------------] 5/12 loss "
expect_has out "${cr}epoch 1/1 [########################] 12/12 loss "
expect_has out "ETA 0:00${esc}[K"
grep -q '^epoch 1/1: train loss' "$tmp/out" || fail "the summary starts a line"
tail -n 1 "$tmp/out" | grep -q '^done: epochs=1 ' || fail "the done: line last"
pass "--progress bar: one line redrawn in place, then the summary"
rm -rf bar

# ---- determinism ----

run_torc train base.ini --set data.train.workers=0
expect_rc 0
untimed first/metrics.csv >a
untimed run/metrics.csv >b
cmp -s a b || { diff a b; fail "two runs (2 workers, then 0) differ"; }
run_torc eval base.ini --checkpoint first/ckpt/ckpt-00000048.safetensors --predict 8
expect_rc 0
cp "$tmp/out" eval1
run_torc eval base.ini --checkpoint run/ckpt/ckpt-00000048.safetensors --predict 8
expect_rc 0
cmp -s "$tmp/out" eval1 || fail "the two runs' weights give other outputs"
same_tensors first/ckpt/ckpt-00000048.safetensors run/ckpt/ckpt-00000048.safetensors ||
  fail "the two runs' final checkpoints hold other tensors"
! same_tensors first/ckpt/ckpt-00000036.safetensors run/ckpt/ckpt-00000048.safetensors ||
  fail "same_tensors takes epoch 3's checkpoint for epoch 4's"
pass "deterministic = yes: the same metrics and weights whatever workers is"
rm -rf run

# ---- the simulated accelerator: the same run on another device ----

cp base.ini sim.ini
printf '[plugin.sim]\nmodule = sim\n[device]\ntype = sim\n' >>sim.ini
run_torc train sim.ini
expect_rc 0
untimed run/metrics.csv >b
cmp -s a b || { diff a b; fail "the run on sim differs from the run on cpu"; }
run_torc eval base.ini --checkpoint run/ckpt/ckpt-00000048.safetensors --predict 8
expect_rc 0
cmp -s "$tmp/out" eval1 || fail "sim's checkpoint evaluates differently on cpu"
same_tensors first/ckpt/ckpt-00000048.safetensors run/ckpt/ckpt-00000048.safetensors ||
  fail "sim's final checkpoint holds other tensors than cpu's"
pass "[device] type = sim: the cpu run's metrics; its checkpoint loads on cpu"
rm -rf run

cp base.ini nosim.ini
printf '[device]\ntype = sim\n' >>nosim.ini
run_torc train nosim.ini
expect_rc 2
expect_has err "sim"
pass "a device no loaded plugin provides"

# ---- resume after a finished run ----

run_torc train base.ini --set train.epochs=2
expect_rc 0
tail -n 1 "$tmp/out" | grep -q '^done: epochs=2 ' || fail "2 epochs"
run_torc train base.ini --resume
expect_rc 0
untimed run/metrics.csv >b
cmp -s a b || { diff a b; fail "2 epochs + resume for 2 differ from 4 straight"; }
pass "--resume: 2 epochs then 2 more give the metrics of 4 straight"

run_torc eval base.ini --checkpoint run/ckpt/ckpt-00000048.safetensors --predict 8
expect_rc 0
cmp -s "$tmp/out" eval1 || fail "the resumed run's weights evaluate differently"
same_tensors first/ckpt/ckpt-00000048.safetensors run/ckpt/ckpt-00000048.safetensors ||
  fail "the resumed run's final checkpoint holds other tensors"
expect_has out "confusion matrix (rows: true class, columns: predicted):"
tail -n 1 "$tmp/out" | grep -q '^eval: loss=[0-9.]* accuracy=[0-9.]* samples=96$' ||
  fail "eval: last line"
pass "resumed weights equal the straight run's: same eval, confusion matrix"
rm -rf run

# ---- Ctrl-C: a checkpoint at the end of the step, status 130 ----

# long.ini: 2500 steps, a progress line per step. torc's stdout is a pipe
# this shell reads line by line, and SIGINT goes out as soon as the first
# step line arrives: from then on torc can write at most a pipe buffer
# (64 KiB, under 1000 lines) ahead of the reader, so the signal always
# lands mid-epoch, however fast the machine.
sed -e 's/^samples = 384/samples = 80000/' -e 's/^log_every = 5/log_every = 1/' \
  base.ini >long.ini
if [ "${TORC_VALGRIND:-0}" != 1 ]; then
  rm -f int.fifo out.int
  mkfifo int.fifo
  "$TORC" train long.ini --set train.epochs=1 >int.fifo 2>err.int &
  pid=$!
  sent=0
  while IFS= read -r line; do
    printf '%s\n' "$line" >>out.int
    # A step line: the loop runs, so the SIGINT handler is installed (a
    # background job of a non-interactive shell ignores SIGINT until then).
    case $sent$line in
      "0epoch 1/1 step"*) kill -INT "$pid"; sent=1 ;;
    esac
  done <int.fifo
  wait "$pid"
  rc=$?
  rm -f int.fifo
  what="torc train (Ctrl-C)"
  cp out.int "$tmp/out"
  cp err.int "$tmp/err"
  expect_rc 130
  expect_has out "interrupted at epoch 1, batch"
  expect_has out "go on with --resume"
  ls run/ckpt/ckpt-*.safetensors >/dev/null 2>&1 || fail "no checkpoint"
  run_torc train long.ini --set train.epochs=1 --resume
  expect_rc 0
  mv run interrupted
  run_torc train long.ini --set train.epochs=1
  expect_rc 0
  untimed interrupted/metrics.csv >a
  untimed run/metrics.csv >b
  cmp -s a b || { diff a b | head; fail "interrupted + resumed differs from straight"; }
  last=$(ls run/ckpt | tail -n 1)
  same_tensors "interrupted/ckpt/$last" "run/ckpt/$last" ||
    fail "interrupted + resumed: the final checkpoint holds other tensors"
  pass "Ctrl-C: status 130, a checkpoint; resumed, the same metrics as straight"
  rm -rf run interrupted
else
  echo "PASS: (Ctrl-C not timed under valgrind)"
fi

# ---- the NaN guard ----

run_torc train base.ini --set optimizer.lr=1e30
expect_rc 1
expect_has err "the loss is"
expect_has err "the last finite loss was"
expect_has err "clip_grad_norm"
pass "a non-finite loss stops the run with the step and advice, status 1"
rm -rf run

# ---- user errors: a message and status 2 ----

run_torc train missing.ini
expect_rc 2
expect_has err "missing.ini"
pass "a missing INI file"

printf '[bogus]\nx = 1\n' >>base.ini.bad
cat base.ini base.ini.bad >bad_section.ini
run_torc train bad_section.ini
expect_rc 2
expect_has err "bad_section.ini:"
expect_has err "bogus"
pass "an unknown section: FILE:LINE"

run_torc train base.ini --set train.epochz=3
expect_rc 2
expect_has err "epochz"
expect_has err "epochs"
pass "a misspelled key suggests the nearest"

run_torc train base.ini --set train.epochs=many
expect_rc 2
expect_has err "epochs"
expect_has err "many"
pass "a value of the wrong type"

sed -e 's/^out_features = 16/out_features = 16\nin_features = 7/' base.ini >shape.ini
run_torc train shape.ini
expect_rc 2
expect_has err "shape.ini:"
expect_has err "36"
expect_has err "7"
pass "a layer that does not fit its input names the shapes"

sed -e 's/^source = synthetic/source = idx\nimages = nowhere-images.gz\nlabels = nowhere-labels.gz/' \
  -e '/^shape = /d' -e '/^classes = /d' -e '/^samples = /d' base.ini >nodata.ini
run_torc train nodata.ini
expect_rc 2
expect_has err "nowhere-images.gz"
pass "a data file that does not exist"

sed -e 's/^module = optim/module = optimz/' base.ini >noplugin.ini
run_torc train noplugin.ini
expect_rc 2
expect_has err "optimz"
pass "a plugin that is not found"

sed -e 's/^out_features = 16/out_features = 20/' base.ini >other.ini
run_torc eval other.ini --checkpoint first/ckpt/ckpt-00000048.safetensors
expect_rc 2
expect_has err "1.weight"
pass "a checkpoint of another model: the keys that differ"

run_torc train base.ini --set scheduler.warmup=2
expect_rc 2
expect_has err "warmup and warmup_epochs are both set"
pass "warmup and warmup_epochs together"

run_torc train base.ini --set scheduler.warmup_start_factor=2
expect_rc 2
expect_has err "warmup_start_factor"
expect_has err "(0, 1]"
pass "a warm-up start factor out of range"

sed -e '/^\[plugin.ref\]$/d' -e '/^module = ref$/d' base.ini >nobackend.ini
run_torc train nobackend.ini
expect_rc 2
expect_has err "cannot run on a sample of shape [1,6,6]: no kernel for op"
expect_has err "[plugin.ref] module = ref"
pass "no backend plugin: the layer cannot run, and what to load"

cp base.ini export.ini
printf '[export]\nonnx = model.onnx\n' >>export.ini
run_torc train export.ini
expect_rc 2
expect_has err "[export]: not a section; export a trained model with \`torc export"
pass "[export] (not a section): names the torc export command"

run_torc train base.ini --resume nowhere.safetensors
expect_rc 2
expect_has err "nowhere.safetensors"
pass "--resume with a missing checkpoint"

run_torc train
expect_rc 2
expect_has err "usage: torc train FILE.ini"
pass "no file: usage, status 2"

# ---- hostile checkpoint metadata ----

# setmeta IN OUT KEY=VALUE...: a copy of checkpoint IN with metadata keys
# rewritten (the header re-encoded; tensor offsets are relative to the
# data area, so the data bytes are copied as they are).
setmeta() {
  python3 - "$@" <<'PY'
import json, struct, sys
src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for e in edits:
    k, v = e.split("=", 1)
    h["__metadata__"][k] = v
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
}

if command -v python3 >/dev/null 2>&1; then
  # first/ckpt: epoch 3 (36 steps) and epoch 4 (48 steps) of 12 batches.
  ck=first/ckpt/ckpt-00000036.safetensors
  setmeta $ck minstep.safetensors global_step=-9223372036854775808
  run_torc train base.ini --resume minstep.safetensors \
    --set checkpoint.dir=hostile/ckpt --set train.metrics=hostile/m.csv
  expect_rc 2
  expect_has err "minstep.safetensors"
  expect_has err "metadata 'global_step' is -9223372036854775808, outside 3.."
  ls hostile/ckpt 2>/dev/null | grep -q -e '--' &&
    fail "a checkpoint named with a negative step was written"
  pass "a checkpoint with global_step INT64_MIN: status 2, the key and range"

  setmeta $ck maxepoch.safetensors epoch=9223372036854775807
  run_torc train base.ini --resume maxepoch.safetensors \
    --set checkpoint.dir=hostile/ckpt --set train.metrics=hostile/m.csv
  expect_rc 2
  expect_has err "maxepoch.safetensors"
  expect_has err "metadata 'epoch' is 9223372036854775807, past [train] epochs = 4"
  expect_has err "(valid: 0..4)"
  pass "a checkpoint with epoch INT64_MAX: status 2, not a silent no-op"

  for bad in epoch=-1 batch=13 batch=-2 global_step=2 epoch=3x \
      train.wn=-4 train.seconds=nan train.classify=2; do
    setmeta $ck bad.safetensors "$bad"
    run_torc train base.ini --resume bad.safetensors \
      --set checkpoint.dir=hostile/ckpt --set train.metrics=hostile/m.csv
    expect_rc 2
    expect_has err "bad.safetensors: metadata '${bad%%=*}' is"
  done
  pass "epoch, batch, global_step and the window sums out of range: status 2"

  setmeta $ck fine.safetensors epoch=3 batch=0 global_step=36
  run_torc train base.ini --resume fine.safetensors \
    --set checkpoint.dir=hostile/ckpt --set train.metrics=hostile/m.csv
  expect_rc 0
  pass "the same rewrite with the saved values resumes"
  rm -rf hostile
else
  echo "PASS: (no python3: hostile checkpoint metadata not checked)"
fi

# ---- temporary files left by a killed save ----

# A process id that is not alive.
dead=$(($(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768) - 1))
while kill -0 "$dead" 2>/dev/null; do dead=$((dead - 1)); done
mkdir -p stale/ckpt
for f in ckpt/.ckpt-00000012.safetensors.tmp.$dead.0 \
    ckpt/.ckpt-00000012.safetensors.tmp.$$.3 ckpt/.notes.txt.tmp.$dead.0 \
    ckpt/ckpt-00000012.safetensors.tmp ckpt/.ckpt-7.safetensors.tmp.x.0 \
    .curves.svg.tmp.$dead.0 .metrics.csv.tmp.$dead.0; do
  echo partial >"stale/$f"
done
echo partial >stale/curves.svg.tmp
# Older than the run: a file changed since it started may be another
# machine's, being written.
find stale -type f -exec touch -d '1 hour ago' {} +
run_torc train base.ini --set train.epochs=1 --set train.dir=stale --set checkpoint.dir=stale/ckpt \
  --set train.metrics=stale/metrics.csv
expect_rc 0
for f in ckpt/.ckpt-00000012.safetensors.tmp.$dead.0 .curves.svg.tmp.$dead.0 \
    curves.svg.tmp; do
  [ -e "stale/$f" ] && fail "stale/$f (its process is gone) is still there"
done
for f in ckpt/.ckpt-00000012.safetensors.tmp.$$.3 ckpt/.notes.txt.tmp.$dead.0 \
    ckpt/ckpt-00000012.safetensors.tmp ckpt/.ckpt-7.safetensors.tmp.x.0 \
    .metrics.csv.tmp.$dead.0; do
  [ -e "stale/$f" ] || fail "stale/$f (a live process's, or not torc's) was removed"
done
[ -e stale/ckpt/ckpt-00000012.safetensors ] || fail "no checkpoint"
pass "a save removes the temporary files of killed saves, and nothing else"
rm -rf stale

# ---- torc bench: step time and the profile ----

run_torc bench base.ini --steps 6
expect_rc 0
expect_has out "6 training steps (after 5 of warm-up)"
expect_has out "samples/s"
expect_has out "kernels by op"
expect_has out "matmul"
expect_has out "outside kernels"
expect_has out "linear '1'"
expect_has out "dropout '3'"
pass "per-op and per-layer times of the user's model"

run_torc bench base.ini --steps zero
expect_rc 2
expect_has err "--steps takes a count"
pass "a bad --steps: status 2"

run_torc help config
expect_rc 0
expect_has out "[train]"
expect_has out "clip_grad_norm"
expect_has out "[checkpoint]"
pass "help config lists [train] and [checkpoint]"

echo "$n_pass checks passed"
