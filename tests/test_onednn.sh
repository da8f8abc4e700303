#!/bin/sh
# tests/test_onednn.sh — the onednn plugin (oneDNN): `torc test-backend
# onednn` (every case run on the cpu pinned to ref, then pinned to the
# plugin) must pass with no failures, and its f32 conv2d and pooling cases
# must have run, forward and backward, not been skipped. Skipped (77) when
# configure did not find oneDNN. TORC_VALGRIND=1 runs torc under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup onednn
if [ ! -f "$TORC_TOP_BUILDDIR/plugins/.libs/onednn.so" ]; then
  echo "SKIP: the onednn plugin was not built (configure found no oneDNN:" \
    "apt-get install libdnnl-dev, then configure again)"
  exit 77
fi

# The plugin as users load it (kernels for cpu itself, above ref):
# test-backend runs every case pinned to ref and pinned to the plugin.
run_torc test-backend onednn --verbose
[ "$rc" -eq 99 ] && fail "valgrind found errors"
summary='^conformance of onednn on cpu \(against ref\): [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$'
line=$(grep -E "$summary" "$tmp/out")
[ -n "$line" ] || fail "expected the summary line 'conformance of onednn on cpu'"
echo "$line"
failed=$(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')
[ "$failed" -eq 0 ] || fail "$failed cases failed"
[ "$rc" -eq 0 ] || fail "expected exit status 0"
# Its conv2d and pooling cases ran, forward and backward (the backward
# passes run conv2d_backward_input/weight and the pooling backwards).
for op in conv2d max_pool2d avg_pool2d; do
  for v in contiguous non-contiguous empty size-1; do
    for pass in forward backward; do
      grep -E "^PASS: $op f32 $v on cpu \($pass\)" "$tmp/out" \
        >/dev/null || fail "expected PASS for $op f32 $v ($pass)"
    done
  done
done
# Its kernels really ran: oneDNN's convolution sums in another order than
# ref's double loops, so the f32 conv2d deviation is not zero.
grep -E '^PASS: conv2d f32 contiguous on cpu \(forward\): max deviation [1-9]' \
  "$tmp/out" >/dev/null || fail "expected a non-zero conv2d f32 deviation"
echo "PASS: $what"

exit 0
