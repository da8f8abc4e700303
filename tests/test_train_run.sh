#!/bin/sh
# tests/test_train_run.sh — what a run keeps and how it stops: the run
# folder (runs/<INI name>/ by default: config.ini, metrics.csv, curves.svg,
# final.safetensors), the refusal to overwrite an earlier run without
# --overwrite or --resume, [checkpoint] best, [train] early_stop, the
# validation split ([data.valid] or valid_fraction), [data.NAME] sections
# the trainer does not read, and --resume on a finished run.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup train-run

# A small problem with no output settings at all.
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
out_features = 3
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
[train]
epochs = 2
INI
cd "$tmp" || exit 1

# ---- the run folder ----

run_torc train small.ini --set train.epochs=3
expect_rc 0
for f in config.ini metrics.csv curves.svg final.safetensors; do
  [ -s "runs/small/$f" ] || fail "runs/small/$f is missing"
done
grep -qx 'epochs = 3' runs/small/config.ini ||
  fail "config.ini does not hold the --set value: $(cat runs/small/config.ini)"
grep -qx '\[data.train\]' runs/small/config.ini || fail "config.ini lacks [data.train]"
pass "no output settings: runs/small/ holds config.ini, metrics.csv, curves.svg, final.safetensors"

run_torc eval small.ini --checkpoint runs/small/final.safetensors
expect_rc 0
expect_has out "eval: loss="
pass "final.safetensors holds the trained weights (torc eval loads it)"

run_torc train small.ini
expect_rc 2
expect_has err "runs/small holds an earlier run"
expect_has err "final.safetensors"
expect_has err "--overwrite"
expect_has err "--resume"
expect_has err "[train] dir"
grep -qx 'epochs = 3' runs/small/config.ini || fail "the refused run touched config.ini"
pass "a second run into the same folder: status 2, what is there and the ways on"

run_torc train small.ini --overwrite
expect_rc 0
grep -qx 'epochs = 2' runs/small/config.ini || fail "--overwrite did not replace config.ini"
[ "$(grep -c ',test,' runs/small/metrics.csv)" -eq 2 ] || fail "--overwrite: 2 test rows"
pass "--overwrite replaces the earlier run"

run_torc train small.ini --set train.dir=other
expect_rc 0
[ -s other/final.safetensors ] && [ -s other/metrics.csv ] || fail "[train] dir = other"
pass "[train] dir: another folder, relative to the INI's"

# ---- --resume on a finished run ----

printf '[checkpoint]\nkeep = 2\n' >>small.ini
run_torc train small.ini --set train.dir=ck
expect_rc 0
ls ck/ckpt-*.safetensors >/dev/null 2>&1 || fail "no checkpoint in the run folder"
run_torc train small.ini --set train.dir=ck --resume
expect_rc 2
expect_has err "already finished 2 epochs"
expect_has err "raise [train] epochs"
pass "--resume on a finished run says so (status 2), not done: epochs=0"
run_torc train small.ini --set train.dir=ck --set train.epochs=3 --resume
expect_rc 0
expect_has out "epoch 3/3: train loss"
grep -q 'epoch 2/3' "$tmp/out" && fail "the resumed run trained epoch 2 again"
pass "--resume with epochs raised goes on"

# ---- [checkpoint] best ----

run_torc train small.ini --set train.dir=best --set train.epochs=4 \
  --set checkpoint.best=test.accuracy
expect_rc 0
[ -s best/best.safetensors ] || fail "no best.safetensors"
want=$(grep ',test,' best/metrics.csv | cut -d, -f5 | sort -g | tail -n 1)
got=$(head -c 4096 best/best.safetensors | tr -c '[:print:]' '\n' |
  sed -n 's/.*"torc.best":"\([^"]*\)".*/\1/p')
awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; exit !(d < 1e-5 && d > -1e-5) }' ||
  fail "best.safetensors is of accuracy $got, the best in the CSV is $want"
pass "[checkpoint] best = test.accuracy: best.safetensors of the best epoch"

run_torc train small.ini --set train.dir=bad --set checkpoint.best=valid.loss
expect_rc 2
expect_has err "valid.loss is measured on a validation split"
pass "best = valid.loss without a validation split: status 2"

# ---- early stopping ----

run_torc train small.ini --set train.dir=early --set train.epochs=10 \
  --set train.early_stop=test.loss --set train.patience=2 \
  --set train.min_delta=100
expect_rc 0
expect_has out "early stop after epoch 3: test.loss has not improved"
expect_has out "the best, "
expect_has out "was at epoch 1"
tail -n 1 "$tmp/out" | grep -q '^done: epochs=3 ' || fail "stopped after epoch 3"
[ -s early/final.safetensors ] || fail "no final.safetensors after an early stop"
ls early/ckpt-*.safetensors >/dev/null 2>&1 || fail "no checkpoint at the early stop"
pass "early_stop = test.loss, patience = 2: stops after epoch 3, the best was epoch 1"

run_torc train small.ini --set train.dir=early2 --set train.epochs=3 \
  --set train.early_stop=test.loss --set train.patience=2
expect_rc 0
tail -n 1 "$tmp/out" | grep -q '^done: epochs=3 ' || fail "a loss that improves runs on"
pass "early_stop: an improving metric runs every epoch"

# ---- the validation split ----

run_torc train small.ini --set train.dir=vf --set data.train.valid_fraction=0.25 \
  --set train.early_stop=valid.loss
expect_rc 0
expect_has out "epoch 1/2: train loss"
expect_has out "| valid loss"
[ "$(grep -c ',valid,' vf/metrics.csv)" -eq 2 ] || fail "a valid row per epoch"
pass "valid_fraction = 0.25: valid loss in the summary and the CSV"

run_torc train small.ini --set train.dir=vf2 --set data.train.valid_fraction=0.25 \
  --set data.train.workers=2
expect_rc 0
[ "$(grep ',valid,' vf/metrics.csv | cut -d, -f1-5)" = \
  "$(grep ',valid,' vf2/metrics.csv | cut -d, -f1-5)" ] ||
  fail "two runs with the same seed give other validation figures"
pass "valid_fraction: the same split every run"

sed -n '/^\[data.test\]/,/^batch_size/p' small.ini | sed 's/data.test/data.valid/' >valid.ini
cat small.ini valid.ini >withvalid.ini
run_torc train withvalid.ini
expect_rc 0
expect_has out "| valid loss"
[ "$(grep -c ',valid,' runs/withvalid/metrics.csv)" -eq 2 ] || fail "[data.valid] rows"
pass "[data.valid]: its own data section, evaluated every epoch"

run_torc train withvalid.ini --set train.dir=both --set data.train.valid_fraction=0.1
expect_rc 2
expect_has err "[data.valid] section too"
pass "[data.valid] and valid_fraction together: status 2"

# ---- [data.NAME] sections the trainer does not read ----

printf '[data.validation]\nsource = synthetic\nbogus = 1\n' >>small.ini
run_torc train small.ini --set train.dir=unknown
expect_rc 2
expect_has err "small.ini:"
expect_has err "unknown section [data.validation]"
expect_has err "did you mean [data.valid]?"
[ -e unknown ] && fail "the refused run made its folder"
pass "[data.validation]: an error at load with the nearest name"

echo "$n_pass passed"
