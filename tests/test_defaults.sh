#!/bin/sh
# tests/test_defaults.sh — every default of torc's layers, losses,
# optimizers, schedulers and transforms equals PyTorch's (the fixture
# tests/fixtures/torch_defaults.txt, made by gen_defaults.py from
# inspect.signature of each counterpart class), or is one of the
# deliberate differences listed below, each with its reason; docs/config.md
# ("PyTorch's names and defaults") lists the same ones. Fails naming each
# key whose default differs, each listed difference that is one no more,
# and each type with keys that the fixture has no counterpart for.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup defaults
cd "$tmp" || exit 1

fixture=$TORC_TOP_SRCDIR/tests/fixtures/torch_defaults.txt
if [ ! -r "$fixture" ]; then
  echo "FAIL: $fixture is missing"
  exit 1
fi

# KIND TYPE KEY: the reason torc's default differs from PyTorch's.
cat >"$tmp/deliberate" <<'EOF'
layer linear in_features 0 infers it from the first input (as LazyLinear); PyTorch requires it
layer conv2d in_channels 0 infers it from the first input (as LazyConv2d); PyTorch requires it
layer conv1d in_channels 0 infers it from the first input (as LazyConv1d); PyTorch requires it
layer conv3d in_channels 0 infers it from the first input (as LazyConv3d); PyTorch requires it
layer conv_transpose2d in_channels 0 infers it from the first input (as LazyConvTranspose2d); PyTorch requires it
layer batchnorm1d num_features 0 infers it from the first input (as LazyBatchNorm1d); PyTorch requires it
layer batchnorm2d num_features 0 infers it from the first input (as LazyBatchNorm2d); PyTorch requires it
layer groupnorm num_channels 0 infers it from the first input; PyTorch requires it
layer layernorm normalized_shape 0 takes the last dim of the first input; PyTorch requires it
layer maxpool2d stride 0 stands for PyTorch's None: the kernel size
layer avgpool2d stride 0 stands for PyTorch's None: the kernel size
layer maxpool1d stride 0 stands for PyTorch's None: the kernel size
layer avgpool1d stride 0 stands for PyTorch's None: the kernel size
layer maxpool3d stride 0 stands for PyTorch's None: the kernel size
layer avgpool3d stride 0 stands for PyTorch's None: the kernel size
layer avgpool2d divisor_override 0 stands for PyTorch's None: off
layer adaptive_avgpool2d output_size 1 is global pooling, the common use; PyTorch requires it
layer lstm input_size 0 infers it from the first input; PyTorch requires it
layer gru input_size 0 infers it from the first input; PyTorch requires it
layer rnn input_size 0 infers it from the first input; PyTorch requires it
layer softmax dim -1 is the last dim; PyTorch's None picks a dim implicitly, with a deprecation warning
layer log_softmax dim -1 is the last dim; PyTorch's None picks a dim implicitly, with a deprecation warning
scheduler onecycle max_lr empty takes each group's lr; PyTorch requires it
scheduler cyclic base_lr empty takes each group's lr; PyTorch requires it
EOF

# torc's defaults, "KIND TYPE KEY DEFAULT", from the listings: a type's
# name alone on a line, its description, then its keys, each ending in
# "(default X)" or "(required)".
for kind in layer loss optimizer scheduler; do
  case $kind in
  layer) cmd=layers ;; loss) cmd=losses ;; *) cmd=${kind}s ;;
  esac
  run_torc "$cmd"
  expect_rc 0
  awk -v kind="$kind" '
    /^[a-z_0-9]+$/ { t = $1; desc = 1; next }
    /^\(every type\)$/ { t = ""; next }
    desc { desc = 0; next }
    t != "" && /^    [a-z_]/ {
      d = $0
      if (match(d, /\(default [^()]*\)$/)) d = substr(d, RSTART + 9, RLENGTH - 10)
      else if (d ~ /\(required\)$/) d = "(required)"
      else next
      if (d == "") d = "(empty)"
      print kind, t, $1, d
    }' "$tmp/out" >>"$tmp/torc"
done
grep -q '^layer conv2d stride 1$' "$tmp/torc" ||
  { echo "FAIL: cannot read the listings:"; cat "$tmp/torc"; exit 1; }

# Transforms have no key listing: random_hflip's p is "(required)" while a
# bare random_hflip is refused, else the default is 0.5 when it trains
# exactly as random_hflip(0.5) does (and not as random_hflip(0.3)).
cat >"$tmp/flip.ini" <<'EOF'
[torc]
seed = 5
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
shape = 1,4,4
classes = 2
samples = 64
batch_size = 16
transform = FLIP
[model]
input = 1,4,4
[layer]
type = flatten
[layer]
type = linear
out_features = 2
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
[train]
epochs = 2
EOF
flip_run() {
  sed "s/FLIP/$1/" "$tmp/flip.ini" >"$tmp/f.ini"
  run_torc train "$tmp/f.ini" --overwrite
  # the epoch lines without their " | S s" time, which varies run to run
  grep '^epoch [0-9]*/[0-9]*: ' "$tmp/out" | sed 's/ | [0-9.]* s$//' \
    >"$tmp/flip.$2"
  [ "$rc" -eq 0 ]
}
flip=
if flip_run random_hflip bare || flip_run 'random_hflip()' bare; then
  flip_run 'random_hflip(0.5)' half || fail "random_hflip(0.5) does not train"
  flip_run 'random_hflip(0.3)' other || fail "random_hflip(0.3) does not train"
  if cmp -s "$tmp/flip.bare" "$tmp/flip.half" &&
    ! cmp -s "$tmp/flip.bare" "$tmp/flip.other"; then
    flip=0.5
  else
    flip="not-0.5"
  fi
else
  flip="(required)"
fi
echo "transform random_hflip p $flip" >>"$tmp/torc"

# Compare: equal as text, as numbers (1e-5 = 1e-05, 0.0 = 0), or an empty
# torc default ("not set") against PyTorch's None.
awk -v deliberate="$tmp/deliberate" '
  function num(s) { return s ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ }
  function same(a, b) {
    if (a == b) return 1
    if (num(a) && num(b) && a + 0 == b + 0) return 1
    if (a == "(empty)" && b == "none") return 1
    return 0
  }
  BEGIN {
    while ((getline l < deliberate) > 0) {
      split(l, f, " ")
      why[f[1] " " f[2] " " f[3]] = l
    }
  }
  FNR == NR {
    if ($1 !~ /^#/) { torch[$1 " " $2 " " $3] = $4; typed[$1 " " $2] = 1 }
    next
  }
  {
    id = $1 " " $2 " " $3
    # add and concat are torc graph nodes: PyTorch writes them in forward();
    # positional_embedding is a module PyTorch users write by hand
    if (!(($1 " " $2) in typed) && $2 != "add" && $2 != "concat" &&
        $2 != "positional_embedding" &&
        !(($1 " " $2) in told)) {
      printf "UNKNOWN: %s %s has no PyTorch counterpart in the fixture; add it to tests/fixtures/gen_defaults.py and rerun it\n", $1, $2
      told[$1 " " $2] = 1
      bad++
    }
    if (!(id in torch)) next  # a key PyTorch lacks (warmup, ...)
    compared++
    if (same($4, torch[id])) {
      if (id in why) {
        printf "STALE: %s: torc %s now equals PyTorch'\''s %s; remove it from the deliberate differences in tests/test_defaults.sh and docs/config.md\n", id, $4, torch[id]
        bad++
      }
    } else if (!(id in why)) {
      printf "DIFFERS: %s: torc %s, PyTorch %s\n", id, $4, torch[id]
      bad++
    } else
      listed++
  }
  END {
    if (bad) { printf "FAIL: %d problems (above) among the %d defaults compared with PyTorch'\''s\n", bad, compared; exit 1 }
    printf "PASS: %d defaults equal PyTorch'\''s; %d differ deliberately (listed)\n", compared - listed, listed
  }' "$fixture" "$tmp/torc"
