#!/bin/sh
# tests/test_cuda_nodev.sh — the cuda plugin on a machine with no usable
# GPU: it loads and registers device type cuda with 0 devices, `torc
# plugins` lists it, a run asking for a cuda device fails with one message
# (no device, the CUDA runtime's own words, how to run on the CPU) and
# status 2, [plugin.cuda]'s keys are checked at load, and the nccl
# communicator is registered when the plugin was built with NCCL (a run
# on the cpu asking for it is refused). Skipped (77) when configure did
# not build the plugin, or when a CUDA device is present (the zero-device
# parts cannot run there). TORC_VALGRIND=1 runs torc under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup cuda_nodev
# Under ASan the CUDA driver maps memory where ASan's shadow gap is
# protected: CUDA programs run with protect_shadow_gap=0 (a no-op for the
# other builds, and harmless where no driver loads).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}protect_shadow_gap=0"
export ASAN_OPTIONS
if [ ! -f "$TORC_TOP_BUILDDIR/plugins/.libs/cuda.so" ]; then
  echo "SKIP: the cuda plugin was not built (configure found no CUDA" \
    "toolkit with cuBLAS and cuDNN: configure --with-cuda=DIR)"
  exit 77
fi

# [plugin.cuda]'s keys: good values load, a bad one names the key, the
# value and the accepted values (status 2, a configuration error).
printf '[plugin.cuda]\nmodule = cuda\ntf32 = yes\nbenchmark = no\ndeterministic = on\n' \
  >"$tmp/keys.ini"
run_torc plugins --config "$tmp/keys.ini"
expect_rc 0
expect_has out "  cuda 0.1.0"
pass "[plugin.cuda] tf32 = yes, benchmark = no, deterministic = on load"
# (under valgrind one of them: the three take the same path, and each run
# that loads CUDA's libraries costs valgrind ~12 s)
keys="tf32 benchmark deterministic"
[ "${TORC_VALGRIND:-0}" != 1 ] || keys=tf32
for key in $keys; do
  printf '[plugin.cuda]\nmodule = cuda\n%s = maybe\n' "$key" >"$tmp/bad.ini"
  run_torc plugins --config "$tmp/bad.ini"
  expect_rc 2
  expect_has err "[plugin.cuda] $key = maybe: expected yes or no"
  pass "[plugin.cuda] $key = maybe is refused, naming the key and the values"
done
printf '[plugin.cuda]\nmodule = cuda\ntf23 = yes\n' >"$tmp/typo.ini"
run_torc plugins --config "$tmp/typo.ini"
expect_rc 2
expect_has err "tf23"
pass "an unknown key of [plugin.cuda] is refused"

# The plugin path's plugins, cuda among them: a device and kernel
# provider. The rest needs a machine where CUDA finds no device.
run_torc plugins
expect_rc 0
expect_has out "  cuda 0.1.0"
expect_has out "      provides: device, kernels"
pass "torc plugins lists cuda as a device and kernel provider"
cp "$tmp/out" "$tmp/plugins.out"

# Built with NCCL, the plugin registers the "nccl" communicator at load,
# GPU or not: the core finds it and refuses it for a run on the cpu (its
# tensors are cuda's). Without NCCL the core says where it comes from.
src=$TORC_TOP_SRCDIR/examples/tabular
sed -e "s|^path = |path = $src/|" -e "s|^metrics = .*|metrics = $tmp/m.csv|" \
  "$src/diabetes.ini" >"$tmp/tab.ini"
if grep -E '^      provides: device, kernels, communicators$' \
  "$tmp/plugins.out" >/dev/null; then
  run_torc train "$tmp/tab.ini" --set plugin.cuda.module=cuda \
    --set dist.backend=nccl --set train.epochs=1
  expect_rc 2
  expect_has err "[dist] backend = nccl moves cuda tensors, but the run computes on cpu; use backend = mpi"
  pass "the nccl communicator is registered (refused for a run on the cpu)"
else
  run_torc train "$tmp/tab.ini" --set plugin.cuda.module=cuda \
    --set dist.backend=nccl --set train.epochs=1
  expect_rc 2
  expect_has err "no plugin registered the communicator 'nccl'"
  pass "without NCCL there is no nccl communicator, and the message says why"
fi
# The listing again, for the checks below.
cp "$tmp/plugins.out" "$tmp/out"
what="torc plugins"
if ! grep -E '^  cuda +0 devices' "$tmp/out" >/dev/null; then
  echo "SKIP: this machine has a CUDA device (torc plugins lists:" \
    "$(grep -E '^  cuda ' "$tmp/out")); the zero-device behaviour is" \
    "checked on machines without one"
  exit 77
fi
expect_has out "    no CUDA device was found (cudaGetDeviceCount: "
pass "torc plugins lists cuda with 0 devices and the plugin's reason"

# A run on cuda: one line on stderr, what failed, the runtime's words
# (cudaGetDeviceCount's error, e.g. "CUDA driver version is insufficient
# for CUDA runtime version"), the way to run on the CPU; status 2 (bad
# input: a device that does not exist), before any data is read.
cp "$tmp/tab.ini" "$tmp/cuda.ini"
printf '\n[device]\ntype = cuda\n' >>"$tmp/cuda.ini"
check_message() { # DEVICE
  expect_rc 2
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "expected one line on stderr"
  expect_has err "device '$1' does not exist: cuda has 0 devices: no CUDA device was found (cudaGetDeviceCount: "
  grep -E 'cudaGetDeviceCount: [A-Za-z][^)]+\)' "$tmp/err" >/dev/null ||
    fail "expected the CUDA runtime's words after cudaGetDeviceCount:"
  expect_has err "run on the CPU instead: --set device.type=cpu"
  expect_empty out
}
run_torc train "$tmp/cuda.ini"
check_message cuda
pass "[device] type = cuda: one message, the runtime's words, the fix"
run_torc train "$src/diabetes.ini" --set device.type=cuda:1
check_message cuda:1
pass "--set device.type=cuda:1: the same message"
# The fix the message gives works.
run_torc train "$tmp/cuda.ini" --set device.type=cpu --set train.epochs=1
expect_rc 0
pass "--set device.type=cpu runs the same file on the CPU"

echo "PASS: $n_pass checks"
exit 0
