#!/bin/sh
# tests/test_names.sh — PyTorch's names understood: its name for a key is
# accepted in place of torc's (kernel_size for kernel), both at once is
# an error naming both, names far in spelling but close in meaning are
# suggested (learning_rate -> lr, clip_norm -> clip_grad_norm, step ->
# step_size), a misspelt command is suggested (trian -> train), and the
# listings `torc losses`, `optimizers`, `schedulers`, `transforms` show
# each type's keys with their defaults.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup names

cnn=$TORC_TOP_SRCDIR/tests/data/cnn.ini
cd "$tmp" || exit 1 # torc train writes its outputs here

# ---- aliases ----

sed 's/^kernel = 3$/kernel_size = 3/' "$cnn" >"$tmp/alias.ini"
run_torc describe "$tmp/alias.ini"
expect_rc 0
expect_has out "Total params: 421,706"
expect_empty err
pass "kernel_size, PyTorch's name, works as conv2d's kernel"

sed 's/^kernel = 3$/kernel = 3\nkernel_size = 5/' "$cnn" >"$tmp/both.ini"
run_torc describe "$tmp/both.ini"
expect_rc 2
expect_has err "both.ini:13: key 'kernel' in [layer]: layer 0 (conv2d): conv2d: key 'kernel' is given twice, as 'kernel = 3' and as 'kernel_size = 5' ('kernel_size' is PyTorch's name for it); keep one"
pass "the key and its PyTorch name both given: an error naming both"

sed 's/^kernel = 3$/kernel_size = 0/' "$cnn" >"$tmp/k0.ini"
run_torc describe "$tmp/k0.ini"
expect_rc 2
expect_has err "k0.ini:13: key 'kernel_size' in [layer]: layer 0 (conv2d): conv2d: key 'kernel' = '0' is not"
pass "a bad value under PyTorch's name: its own line and name"

sed 's/^kernel = 3$/kernal_size = 3/' "$cnn" >"$tmp/ks.ini"
run_torc describe "$tmp/ks.ini"
expect_rc 2
expect_has err "conv2d: unknown key 'kernal_size' (did you mean 'kernel_size'?)"
pass "a misspelt PyTorch name: did you mean it"

# groupnorm's groups is PyTorch's num_groups; conv2d's groups is not.
cat >"$tmp/gn.ini" <<'EOF'
[plugin.ref]
module = ref
[model]
input = 4,6,6
[layer]
type = groupnorm
num_groups = 2
[layer]
type = conv2d
out_channels = 4
kernel_size = 3
num_groups = 2
EOF
run_torc describe "$tmp/gn.ini"
expect_rc 2
expect_has err "gn.ini:12: key 'num_groups' in [layer]: layer 1 (conv2d): conv2d: unknown key 'num_groups'"
expect_lacks err "layer 0"
pass "an alias holds for its own type only (num_groups: groupnorm, not conv2d)"

# ---- suggestions far in spelling ----

cat >"$tmp/base.ini" <<'EOF'
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
shape = 4
classes = 2
samples = 8
batch_size = 4
[model]
input = 4
[layer]
type = linear
out_features = 2
[loss]
type = cross_entropy
[optimizer]
type = adam
[train]
epochs = 1
EOF

printf 'learning_rate = 0.01\n' >"$tmp/lr.add"
sed '/^type = adam$/r '"$tmp/lr.add" "$tmp/base.ini" >"$tmp/lr.ini"
run_torc train "$tmp/lr.ini"
expect_rc 2
expect_has err "adam: unknown key 'learning_rate' (did you mean 'lr'?)"
pass "learning_rate: did you mean 'lr'"

printf 'momentum = 0.9\n' >"$tmp/mom.add"
sed '/^type = adam$/r '"$tmp/mom.add" "$tmp/base.ini" >"$tmp/mom.ini"
run_torc train "$tmp/mom.ini"
expect_rc 2
expect_has err "adam: unknown key 'momentum' (did you mean 'betas'?)"
pass "momentum for adam: did you mean 'betas'"

sed 's/^epochs = 1$/epochs = 1\nclip_norm = 1/' "$tmp/base.ini" >"$tmp/clip.ini"
run_torc train "$tmp/clip.ini"
expect_rc 2
expect_has err "key 'clip_norm' in [train]: unknown key; did you mean 'clip_grad_norm'?"
pass "clip_norm: did you mean 'clip_grad_norm'"

sed 's/^\[train\]$/[scheduler]\ntype = step\nstep = 2\n[train]/' \
  "$tmp/base.ini" >"$tmp/step.ini"
run_torc train "$tmp/step.ini"
expect_rc 2
expect_has err "step: unknown key 'step' (did you mean 'step_size'?)"
pass "step: did you mean 'step_size'"

sed 's/^\[train\]$/[scheduler]\ntype = cosine\nT_max = 2\n[train]/' \
  "$tmp/base.ini" >"$tmp/tmax.ini"

run_torc train "$tmp/tmax.ini"
expect_rc 0
pass "T_max, PyTorch's name, works as cosine's t_max"

sed 's/^batch_size = 4$/batch_size = 4\nnum_workers = 2/' "$tmp/base.ini" \
  >"$tmp/nw.ini"
run_torc train "$tmp/nw.ini"
expect_rc 0
pass "num_workers, PyTorch's name, works as [data.NAME] workers"

run_torc train "$tmp/base.ini" --set data.train.num_workers=2
expect_rc 0
pass "--set with PyTorch's name of a section key"

sed 's/^batch_size = 4$/batch_size = 4\nworkers = 1\nnum_workers = 2/' \
  "$tmp/base.ini" >"$tmp/nw2.ini"
run_torc train "$tmp/nw2.ini"
expect_rc 2
expect_has err "nw2.ini:16: key 'num_workers' in [data.train]: PyTorch's name for 'workers', which line 15 gives too; keep one"
pass "workers and num_workers both given: an error naming both"

sed 's/^batch_size = 4$/batch_size = 4\nprefetch_factor = 2/' "$tmp/base.ini" \
  >"$tmp/pf.ini"
run_torc train "$tmp/pf.ini"
expect_rc 2
expect_has err "unknown key 'prefetch_factor' (did you mean the section's 'prefetch'?)"
pass "prefetch_factor in [data.NAME]: did you mean the section's 'prefetch'"

# ---- commands ----

run_torc trian "$cnn"
expect_rc 2
expect_has err "torc: unknown command 'trian'; did you mean 'train'?"
pass "a misspelt command: did you mean 'train'"

run_torc frobnicate
expect_rc 2
expect_lacks err "did you mean"
pass "a command nothing like any: no suggestion"

# ---- listings ----

run_torc losses
expect_rc 0
expect_has out "cross_entropy"
expect_has out "    label_smoothing        in [0, 1]: the share of each target spread evenly over all classes (default 0.0)"
expect_has out "    ignore_index           "
pass "torc losses: the types, their keys and defaults"

run_torc optimizers
expect_rc 0
expect_has out "adamw"
expect_has out "    betas                  "
expect_has out "(default 0.9,0.999)"
expect_has out "(default 1e-8)"
pass "torc optimizers: the types, their keys and defaults"

run_torc schedulers
expect_rc 0
expect_has out "cosine"
expect_has out "    t_max (or T_max)       "
expect_has out "    step_size              steps between two decays (an integer >= 1) (required)"
expect_has out "    warmup_start_factor    "
pass "torc schedulers: the types, their keys and defaults, PyTorch's names"

run_torc transforms
expect_rc 0
expect_has out "random_hflip"
expect_has out "normalize(mean, std)"
pass "torc transforms: the stages and their arguments"

run_torc layers
expect_rc 0
expect_has out "    kernel (or kernel_size) "
expect_has out "    groups (or num_groups) "
pass "torc layers: PyTorch's names shown next to torc's"

run_torc help losses
expect_rc 0
expect_has out "usage: torc losses [--config FILE]"
pass "torc help losses"

run_torc help config
expect_rc 0
expect_has out "kernel_size for kernel"
expect_has out "  workers (or num_workers) "
pass "torc help config names PyTorch's names"

echo "PASS: $n_pass checks"
