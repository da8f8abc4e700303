#!/bin/sh
# tests/test_cli.sh — the `torc` command: version, help, usage errors and
# their exit codes, reserved commands, and `torc plugins` (the plugin list,
# devices and op table; --config with a missing file, a bad key, and a
# configuration that loads only ref). Run by `make check` through
# tests/harness.sh; TORC_VALGRIND=1 runs every torc under valgrind.
# Prints "PASS: ..." per check; stops at the first failure with a diff.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup cli

# The version and ABI the build was made from (config.h, plugin.h).
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
  "$TORC_TOP_BUILDDIR/config.h")
abi_major=$(sed -n 's/^#define TORC_ABI_MAJOR \([0-9]*\).*/\1/p' \
  "$TORC_TOP_SRCDIR/include/torc/plugin.h")
abi_minor=$(sed -n 's/^#define TORC_ABI_MINOR \([0-9]*\).*/\1/p' \
  "$TORC_TOP_SRCDIR/include/torc/plugin.h")
if [ -z "$version" ] || [ -z "$abi_major" ] || [ -z "$abi_minor" ]; then
  echo "FAIL: cannot read PACKAGE_VERSION from config.h or TORC_ABI_* from plugin.h"
  exit 1
fi

# ---- version ----

run_torc version
expect_rc 0
expect_text out "torc $version
plugin ABI $abi_major.$abi_minor"
expect_empty err
pass "prints version $version and ABI $abi_major.$abi_minor"

run_torc --version
expect_rc 0
expect_text out "torc $version
plugin ABI $abi_major.$abi_minor"
pass "same as torc version"

run_torc version extra
expect_rc 2
expect_has err "torc version: unknown argument 'extra'"
pass "an extra argument is a usage error (2)"

# ---- help ----

run_torc --help
expect_rc 0
expect_has out "usage: torc <command> [options]"
for cmd in plugins version help train eval export bench; do
  expect_has out "$cmd"
done
expect_empty err
cp "$tmp/out" "$tmp/help"
pass "usage lists the commands"

for args in "-h" "help"; do
  run_torc $args
  expect_rc 0
  if ! cmp -s "$tmp/help" "$tmp/out"; then
    echo "FAIL: $what: differs from torc --help (diff --help this):"
    diff -u "$tmp/help" "$tmp/out"
    exit 1
  fi
  pass "same as torc --help"
done

run_torc
expect_rc 2
expect_has err "usage: torc <command> [options]"
expect_empty out
pass "no command: usage on stderr, status 2"

run_torc plugins --help
expect_rc 0
expect_has out "usage: torc plugins [--config FILE]"
expect_has out "--config FILE"
cp "$tmp/out" "$tmp/help_plugins"
pass "prints the usage of plugins"

run_torc help plugins
expect_rc 0
if ! cmp -s "$tmp/help_plugins" "$tmp/out"; then
  echo "FAIL: $what: differs from torc plugins --help:"
  diff -u "$tmp/help_plugins" "$tmp/out"
  exit 1
fi
pass "same as torc plugins --help"

run_torc version --help
expect_rc 0
expect_has out "usage: torc version"
pass "prints the usage of version"

# ---- usage errors ----

run_torc frobnicate
expect_rc 2
expect_has err "torc: unknown command 'frobnicate'"
expect_has err "commands: train, eval, bench, plugins, describe, layers, sources,"
expect_empty out
pass "unknown command: named, commands listed, status 2"

run_torc --frobnicate
expect_rc 2
expect_has err "torc: unknown option '--frobnicate'"
expect_has err "commands: train, eval, bench, plugins, describe, layers, sources,"
pass "unknown option: named, commands listed, status 2"

run_torc help frobnicate
expect_rc 2
expect_has err "torc: unknown command 'frobnicate'"
pass "help for an unknown command: status 2"

run_torc plugins --bogus
expect_rc 2
expect_has err "torc plugins: unknown option '--bogus'"
expect_has err "usage: torc plugins [--config FILE]"
pass "unknown option of plugins: status 2"

run_torc plugins --config
expect_rc 2
expect_has err "option '--config' needs a file name"
pass "--config without a file: status 2"

run_torc export cfg.ini
expect_rc 2
expect_has err "torc export: which weights? add --checkpoint CKPT"
expect_empty out
pass "export without --checkpoint: message on stderr, status 2"

# ---- torc plugins: everything on the search path ----

# The op table's cell under the column whose header starts with HEADER, in
# the row of OP (columns are found from the header line's positions).
table_cell() { # OP HEADER
  awk -v op="$1" -v hdr="$2" '
    /^Ops:/ { in_ops = 1 }
    in_ops && /^  op  / {
      start = index($0, hdr)
      if (start == 0) exit
      rest = substr($0, start + length(hdr))
      match(rest, /[^ ]/)
      end = RSTART ? start + length(hdr) + RSTART - 1 : 0
      next
    }
    in_ops && start && $1 == op {
      cell = end ? substr($0, start, end - start) : substr($0, start)
      sub(/ +$/, "", cell)
      print cell
      exit
    }' "$tmp/out"
}

run_torc plugins
expect_rc 0
expect_empty err
expect_has out "torc $version, plugin ABI $abi_major.$abi_minor"
grep -E '^  ref [^ ]+  \(ABI [0-9]+\.[0-9]+, priority -?[0-9]+\)$' "$tmp/out" \
  >/dev/null || fail "expected a plugin line for ref"
grep -E '^  sim [^ ]+  \(ABI [0-9]+\.[0-9]+, priority -?[0-9]+\)$' "$tmp/out" \
  >/dev/null || fail "expected a plugin line for sim"
expect_has out "/ref.so"
expect_has out "/sim.so"
pass "lists ref and sim with their files"

grep -E '^  cpu +1 device$' "$tmp/out" >/dev/null ||
  fail "expected the device line 'cpu  1 device'"
grep -E '^    cpu:0 +host memory$' "$tmp/out" >/dev/null ||
  fail "expected 'cpu:0  host memory' under it"
grep -E '^  sim +[1-9][0-9]* devices?$' "$tmp/out" >/dev/null ||
  fail "expected a device line for sim"
grep -E '^    sim:0 +simulated accelerator, .* in use' "$tmp/out" >/dev/null ||
  fail "expected sim:0 with the plugin's description (its memory in use)"
pass "lists the cpu and sim devices"

# (a cuda column sits between them where the cuda plugin was built)
grep -E '^  op +cpu \(ref\) +(cuda \(cuda\) +)?sim \(sim\)$' "$tmp/out" >/dev/null ||
  fail "expected the op table header 'op  cpu (ref)  sim (sim)'"
cpu_cell=$(table_cell matmul "cpu (ref)")
sim_cell=$(table_cell matmul "sim (sim)")
case $cpu_cell in
  *f32* | *float* | all*) ;;
  *) fail "expected matmul on cpu to serve f32 (from ref), got cell '$cpu_cell'" ;;
esac
case $sim_cell in
  *f32* | *float* | all*) ;;
  *) fail "expected matmul on sim to serve f32, got cell '$sim_cell'" ;;
esac
pass "op table: matmul on cpu from ref ($cpu_cell) and on sim ($sim_cell)"

# Every op the core names has a row.
for op in copy add matmul sum relu; do
  grep -E "^  $op " "$tmp/out" >/dev/null || fail "expected a row for op $op"
done
expect_has out "Overridden kernels"
pass "op table has a row per op and the overridden list"

# ---- torc plugins --config ----

run_torc plugins --config "$tmp/missing.ini"
expect_rc 2
expect_has err "$tmp/missing.ini"
expect_empty out
pass "missing file: named, status 2"

cat >"$tmp/typo.ini" <<'EOF'
[torc]
seed = 1
thread = 2
EOF
run_torc plugins --config "$tmp/typo.ini"
expect_rc 2
expect_has err "$tmp/typo.ini:3"
expect_has err "thread"
pass "unknown key in [torc]: FILE:LINE, status 2"

cat >"$tmp/badkey.ini" <<'EOF'
; only ref, with a key ref does not declare
[plugin.ref]
module = ref
no_such_key = 1
EOF
run_torc plugins --config "$tmp/badkey.ini"
expect_rc 2
expect_has err "$tmp/badkey.ini:4"
expect_has err "no_such_key"
pass "unknown plugin key: FILE:LINE, status 2"

cat >"$tmp/ref_only.ini" <<'EOF'
; loads the reference backend only
[plugin.ref]
module = ref
EOF
run_torc plugins --config "$tmp/ref_only.ini"
expect_rc 0
expect_empty err
expect_has out "Plugins (1 loaded):"
grep -E '^  ref [^ ]+  \(ABI' "$tmp/out" >/dev/null ||
  fail "expected a plugin line for ref"
if grep -E '^  sim [^ ]+  \(ABI' "$tmp/out" >/dev/null; then
  fail "sim is listed, but the configuration loads only ref"
fi
expect_lacks out "sim:0"
grep -E '^  op +cpu \(ref\)$' "$tmp/out" >/dev/null ||
  fail "expected the op table header 'op  cpu (ref)' with no sim column"
pass "a configuration loading only ref lists ref, not sim"

# The same file loaded a second time under another name, at a higher
# priority: that copy serves every cpu kernel and ref's are listed as
# overridden.
cat >"$tmp/override.ini" <<'EOF'
[plugin.ref]
module = ref
[plugin.fast]
module = ref
priority = 10
EOF
run_torc plugins --config "$tmp/override.ini"
expect_rc 0
expect_empty err
expect_has out "Plugins (2 loaded):"
grep -E '^  fast [^ ]+  \(ABI [0-9]+\.[0-9]+, priority 10\)$' "$tmp/out" \
  >/dev/null || fail "expected the plugin line of fast with priority 10"
grep -E '^  op +cpu \(fast\)$' "$tmp/out" >/dev/null ||
  fail "expected the op table header 'op  cpu (fast)'"
cpu_cell=$(table_cell matmul "cpu (fast)")
case $cpu_cell in
  *"(ref)"* | "" | -) fail "expected matmul on cpu served by fast alone, got '$cpu_cell'" ;;
esac
expect_has out "Overridden kernels (registered, not used):"
grep -E '^  matmul on cpu \[[a-z0-9 ]+\]: ref \(priority 0\) overridden by fast \(priority 10\)$' \
  "$tmp/out" >/dev/null ||
  fail "expected the line 'matmul on cpu [DTYPES]: ref (priority 0) overridden by fast (priority 10)'"
pass "a higher-priority provider: column named after it, ref listed as overridden"

# A device type without kernels (tests/plugins/goodkeys registers
# "testdev"): its column shows "-" for every op.
goodkeys=${TORC_TEST_PLUGIN_DIR:-}/goodkeys.so
if [ -f "$goodkeys" ]; then
  cat >"$tmp/testdev.ini" <<EOF
[plugin.ref]
module = ref
[plugin.goodkeys]
module = $goodkeys
devices = 2
greeting = hi
EOF
  run_torc plugins --config "$tmp/testdev.ini"
  expect_rc 0
  expect_has out "  goodkeys 1.2.3  (ABI 1.0, priority 0)"
  expect_has out "      provides: device"
  grep -E '^  testdev +2 devices$' "$tmp/out" >/dev/null ||
    fail "expected the device line 'testdev  2 devices'"
  grep -E '^    testdev:1 ' "$tmp/out" >/dev/null ||
    fail "expected a line for testdev:1"
  grep -E '^  op +cpu \(ref\) +testdev$' "$tmp/out" >/dev/null ||
    fail "expected the op table header 'op  cpu (ref)  testdev'"
  testdev_cell=$(table_cell matmul testdev)
  [ "$testdev_cell" = "-" ] ||
    fail "expected '-' for matmul on testdev, got '$testdev_cell'"
  pass "a device type with no kernels: listed, its column all '-'"
else
  echo "SKIP: $goodkeys is not built (tests/plugins); device without kernels not checked"
fi

printf 'this is not a shared object\n' >"$tmp/fake.so"
cat >"$tmp/fake.ini" <<EOF
[plugin.fake]
module = $tmp/fake.so
EOF
run_torc plugins --config "$tmp/fake.ini"
expect_rc 2
expect_has err "$tmp/fake.so"
expect_empty out
pass "a file that is not a plugin: named, bad input (2)"

# torc describe: the model of an INI file, lazy sizes inferred (docs/training.md
# shows this output).
run_torc describe "$TORC_TOP_SRCDIR/tests/data/cnn.ini"
expect_rc 0
expect_has out "(8): linear(in_features=3136, out_features=128, bias=True)"
expect_has out "  8 (linear)                       [1, 128]                  401,536"
expect_has out "Total params: 421,706"
expect_has out "Params size (MB): 1.61"
expect_empty err
pass "prints the tree and the summary table, 64*7*7 inferred"

sed 's/^out_features = 128 .*/out_features = 128\nin_features = 3000/' \
  "$TORC_TOP_SRCDIR/tests/data/cnn.ini" >"$tmp/bad.ini"
cp "$TORC_TOP_SRCDIR/tests/data/cnn.ini" "$tmp/cnn.ini"
run_torc describe "$tmp/bad.ini"
expect_rc 2
expect_has err "bad.ini:34: [layer]: layer 8 (linear) does not fit a sample of shape [1,28,28]: linear: input has 3136 features"
expect_empty out
pass "a layer that does not fit: its line, the numbers, exit 2"

sed 's/^kernel = 3$/kernal = 3/' "$tmp/cnn.ini" >"$tmp/bad.ini"
run_torc describe "$tmp/bad.ini"
expect_rc 2
expect_has err "bad.ini:13: key 'kernal' in [layer]: layer 0 (conv2d): conv2d: unknown key 'kernal' (did you mean 'kernel'?)"
pass "a misspelt layer key: file:line and the nearest key"

run_torc describe
expect_rc 2
expect_has err "usage: torc describe FILE.ini"
pass "no file: usage, exit 2"

run_torc layers
expect_rc 0
expect_has out "conv2d"
expect_has out "out_channels"
expect_has out "sequential"
pass "lists the module types and their keys"

run_torc help config
expect_rc 0
expect_has out "[layer] (may repeat)"
expect_has out "[data.NAME]"
expect_has out "[optimizer]"
expect_has out "  seed                 one seed for init"
pass "the reference of every section and key"

run_torc sources
expect_rc 0
expect_has out "idx"
expect_has out "images"
expect_has out "synthetic"
pass "lists the data sources of the plugins on the path and their keys"

# ---- one exit status per kind of error, whatever the command ----
# (docs/exit-status.md: 0 ok, 1 a failure while running, 2 bad input, 130
# interrupted)

cat >"$tmp/small.ini" <<'EOF'
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
samples = 32
batch_size = 16
[data.test]
source = synthetic
shape = 4
classes = 2
samples = 16
batch_size = 16
[model]
input = 4
[layer]
type = linear
out_features = 2
[loss]
type = cross_entropy
[optimizer]
type = sgd
lr = 0.1
[train]
epochs = 1
[checkpoint]
dir = ck
EOF
here=$(pwd)
cd "$tmp" || exit 1
run_torc train small.ini
expect_rc 0
good=ck/ckpt-00000002.safetensors
[ -f $good ] || fail "no checkpoint $good"

# The same broken checkpoint: 2 from train --resume and from eval, with the
# same message (train exited 1 for it before).
head -c "$(($(wc -c <$good) / 2))" $good >trunc.safetensors
printf 'not a safetensors file' >junk.safetensors
for ck in trunc.safetensors junk.safetensors; do
  run_torc train small.ini --resume $ck --set checkpoint.dir=ck2
  expect_rc 2
  expect_has err "$ck"
  sed 's/^torc train: //' "$tmp/err" >"$tmp/err.train"
  run_torc eval small.ini --checkpoint $ck
  expect_rc 2
  sed 's/^torc eval: //' "$tmp/err" >"$tmp/err.eval"
  cmp -s "$tmp/err.train" "$tmp/err.eval" ||
    fail "train and eval word the error on $ck differently"
done
pass "a broken checkpoint: status 2 from both train and eval, one message"

for cmd in "train small.ini" "eval small.ini --checkpoint $good" \
    "bench small.ini --steps 1"; do
  run_torc $cmd --set train.epochz=2
  expect_rc 2
  expect_has err "epochz"
done
pass "a misspelt key: status 2 from train, eval and bench"

sed 's/^module = losses$/module = nosuchplugin/' small.ini >noplug.ini
for cmd in "train noplug.ini" "eval noplug.ini --checkpoint $good" \
    "bench noplug.ini --steps 1" "describe noplug.ini" \
    "plugins --config noplug.ini" "test-backend nosuchplugin"; do
  run_torc $cmd
  expect_rc 2
  expect_has err "nosuchplugin"
done
pass "a missing plugin: status 2 from every command"

ref_so=$TORC_TOP_BUILDDIR/plugins/.libs/ref.so
if [ -f "$ref_so" ]; then
  head -c "$(($(wc -c <"$ref_so") / 2))" "$ref_so" >"$tmp/cut.so"
  sed "s|^module = ref\$|module = $tmp/cut.so|" small.ini >cut.ini
  for cmd in "train cut.ini" "plugins --config cut.ini" "describe cut.ini"; do
    run_torc $cmd
    expect_rc 2
    expect_has err "$tmp/cut.so) is not a loadable shared object: it is"
    expect_has err "the file is truncated"
  done
  pass "a plugin file cut short: status 2 and its size, not SIGBUS (135)"
fi

{ cat small.ini; printf '[device]\ntype = sim\n'; } >nosim.ini
for cmd in "train nosim.ini" "eval nosim.ini --checkpoint $good"; do
  run_torc $cmd
  expect_rc 2
  expect_has err "sim"
done
pass "a device no loaded plugin provides: status 2 from train and eval"

run_torc --help
expect_has out "130 interrupted"
expect_has out "2 bad input"
for cmd in train eval bench describe test-backend; do
  run_torc help $cmd
  expect_has out "Exit status"
done
pass "the help of every command that lists statuses states the table"
cd "$here" || exit 1

# README's first command runs scripts/torc: the build tree's torc with the
# build tree's plugins, and no TORC_PLUGIN_PATH set by the caller.
what="scripts/torc plugins (README's command)"
rc=0
env -u TORC_PLUGIN_PATH BUILD="$TORC_TOP_BUILDDIR" \
  "$TORC_TOP_SRCDIR/scripts/torc" plugins >"$tmp/out" 2>"$tmp/err" || rc=$?
expect_rc 0
expect_has out "/plugins/.libs/ref.so"
expect_has out "/plugins/.libs/sim.so"
pass "lists ref and sim from the build tree"

echo "test_cli: $n_pass checks passed"
exit 0
