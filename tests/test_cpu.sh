#!/bin/sh
# tests/test_cpu.sh — the cpu plugin (OpenBLAS): `torc test-backend cpu`
# (every case run on the cpu pinned to ref, then pinned to the plugin)
# must pass with no failures, and its matmul, linear and conv2d cases must
# have run, not been skipped. Skipped (77) when configure did
# not find OpenBLAS. TORC_VALGRIND=1 runs torc under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup cpu
if [ ! -f "$TORC_TOP_BUILDDIR/plugins/.libs/cpu.so" ]; then
  echo "SKIP: the cpu plugin was not built (configure found no OpenBLAS:" \
    "apt-get install libopenblas-dev, then configure again)"
  exit 77
fi

# The plugin as users load it (kernels for cpu itself, above ref):
# test-backend runs every case pinned to ref and pinned to the plugin.
run_torc test-backend cpu --verbose
[ "$rc" -eq 99 ] && fail "valgrind found errors"
summary='^conformance of cpu on cpu \(against ref\): [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$'
line=$(grep -E "$summary" "$tmp/out")
[ -n "$line" ] || fail "expected the summary line 'conformance of cpu on cpu'"
echo "$line"
failed=$(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')
[ "$failed" -eq 0 ] || fail "$failed cases failed"
[ "$rc" -eq 0 ] || fail "expected exit status 0"
# Its matmul, linear and conv2d cases ran, forward and backward, and its
# kernels really ran: its f32 GEMM rounds differently from ref's loops, so
# some matmul deviation is not zero.
for op in matmul linear conv2d; do
  for dt in f32 f64; do
    for v in contiguous non-contiguous empty size-1; do
      for pass in forward backward; do
        [ "$v" = empty ] && [ "$pass" = backward ] && continue
        grep -E "^PASS: $op $dt $v on cpu \($pass\)" "$tmp/out" \
          >/dev/null || fail "expected PASS for $op $dt $v ($pass)"
      done
    done
  done
  grep -E "^PASS: $op f64 contiguous on cpu \(gradcheck\)" \
    "$tmp/out" >/dev/null || fail "expected a gradcheck PASS for $op"
done
grep -E '^PASS: matmul f32 contiguous on cpu \(forward\): max deviation [1-9]' \
  "$tmp/out" >/dev/null || fail "expected a non-zero matmul f32 deviation"

# The same suite with each lower ISA build of the elementwise loops
# (TORC_CPU_ISA; the machine's best ran above) and each f32 GEMM provider
# (TORC_CPU_GEMM; onednn only where the onednn plugin, hence libdnnl, was
# built). Not under valgrind: it hides AVX-512 anyway, and one run there
# takes minutes.
if [ "${TORC_VALGRIND:-0}" != 1 ]; then
  variants="TORC_CPU_ISA=scalar TORC_CPU_ISA=avx2 TORC_CPU_GEMM=openblas"
  [ -f "$TORC_TOP_BUILDDIR/plugins/.libs/onednn.so" ] &&
    variants="$variants TORC_CPU_GEMM=onednn"
  for v in $variants; do
    export "$v"
    run_torc test-backend cpu
    line=$(grep -E "$summary" "$tmp/out")
    [ -n "$line" ] || fail "$v: expected the summary line"
    failed=$(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')
    [ "$failed" -eq 0 ] || fail "$v: $failed cases failed"
    [ "$rc" -eq 0 ] || fail "$v: expected exit status 0"
    echo "$v: $line"
    unset "${v%%=*}"
  done
fi
echo "PASS: $what"

# The examples' way of loading a backend: cpu alone. The plugin requires ref
# (for the ops it does not provide: the initialisers' uniform_, ...), so
# the core loads ref beneath it; cosine's t_max, left out, is the run
# after the warm-up (3 epochs - 1 = 2: lr 0.1 in epoch 2, 0.05 in 3).
cat >"$tmp/cpu_only.ini" <<'EOF2'
[torc]
seed = 1
deterministic = yes
[plugin.cpu]
module = cpu
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
[data.test]
source = synthetic
shape = 1,4,4
classes = 2
samples = 32
batch_size = 32
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
[scheduler]
type = cosine
warmup_epochs = 1
[train]
epochs = 3
metrics = run/metrics.csv
EOF2
cd "$tmp" || exit 1
run_torc train cpu_only.ini
expect_rc 0
[ "$(grep ',test,' run/metrics.csv | cut -d, -f1,6 | tr '\n' ' ')" = "1,0.0775 2,0.1 3,0.05 " ] ||
  fail "lr per epoch: $(grep ',test,' run/metrics.csv | cut -d, -f1,6 | tr '\n' ' ')"
run_torc plugins --config cpu_only.ini
expect_rc 0
expect_has out "  ref 0.1.0"
pass "[plugin.cpu] alone: ref loaded beneath it; cosine's t_max is the run"

# A required plugin that cannot be found: one message naming both.
mkdir -p lonely empty
cp "$TORC_TOP_BUILDDIR/plugins/.libs/cpu.so" lonely/
printf '[plugin.cpu]\nmodule = %s/lonely/cpu.so\n' "$tmp" >lonely.ini
saved=$TORC_PLUGIN_PATH
TORC_PLUGIN_PATH=$tmp/empty
run_torc plugins --config lonely.ini
TORC_PLUGIN_PATH=$saved
expect_rc 2
expect_has err "lonely.ini:1: plugin 'cpu'"
expect_has err "requires plugin 'ref', which did not load: plugin 'ref' not found"
pass "a required plugin that is not found"

exit 0
