#!/bin/sh
# tests/test_conformance.sh — `torc test-backend`: the conformance suite
# (tools/conformance.c) on the sim plugin must pass with a non-trivial
# number of cases, the summary names the ops a backend lacks, and a plugin
# that does not exist is a usage error (2).
# Run by `make check` through tests/harness.sh; TORC_VALGRIND=1 runs torc
# under valgrind.

set -u

. "${TORC_TOP_SRCDIR:-.}/tests/cli_lib.sh"
cli_setup conformance

run_torc test-backend sim --verbose
[ "$rc" -eq 99 ] && fail "valgrind found errors"
line=$(grep -E '^conformance on sim: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$tmp/out")
[ -n "$line" ] || fail "expected the summary line 'conformance on sim: ...'"
echo "$line"
passed=$(echo "$line" | sed 's/.*: \([0-9]*\) passed.*/\1/')
failed=$(echo "$line" | sed 's/.* \([0-9]*\) failed.*/\1/')
grep '^FAIL' "$tmp/out" | head -n 20
[ "$failed" -eq 0 ] || fail "$failed cases failed"
[ "$rc" -eq 0 ] || fail "expected exit status 0"
[ "$passed" -ge 500 ] || fail "only $passed cases passed; expected at least 500"
n_lines=$(grep -c -E '^(PASS|FAIL|SKIP): ' "$tmp/out")
total=$(echo "$line" | sed 's/.*: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped/\1 + \2 + \3/')
[ "$n_lines" -eq $((total)) ] ||
  fail "expected one line per case ($((total))), got $n_lines"
for op in add matmul sum softmax conv2d gather; do
  grep -E "^PASS: $op f32 contiguous on sim \(forward\)" "$tmp/out" >/dev/null ||
    fail "expected a PASS line for $op f32 contiguous forward"
done
grep -E '^PASS: matmul f64 contiguous on sim \(gradcheck\)' "$tmp/out" >/dev/null ||
  fail "expected a gradcheck PASS line for matmul"
echo "PASS: $what: $passed cases passed, none failed"

run_torc test-backend sim
[ "$rc" -eq 0 ] || fail "expected exit status 0"
grep -E '^(PASS|SKIP): ' "$tmp/out" >/dev/null &&
  fail "expected no per-case lines without --verbose"
grep -E '^conformance on sim: ' "$tmp/out" >/dev/null ||
  fail "expected the summary line"
echo "PASS: $what: summary only"

# The suite can fail: sim's fail_op key makes every exp kernel fail on the
# device, and the cases for exp must be reported as failures, exit 1.
printf '[plugin.sim]\nmodule = sim\nfail_op = exp\n' >"$tmp/broken.ini"
run_torc test-backend sim --config "$tmp/broken.ini" --verbose
[ "$rc" -eq 1 ] || fail "expected exit status 1 with a failing kernel"
grep -E '^FAIL: exp f32 contiguous on sim' "$tmp/out" >/dev/null ||
  fail "expected exp to be reported as failing"
grep -E '^PASS: add f32 contiguous on sim \(forward\)' "$tmp/out" >/dev/null ||
  fail "expected the other ops to pass"
echo "PASS: $what: a broken kernel is reported, status 1"

# The summary names the ops a backend lacks: goodkeys (tests/plugins)
# registers the device type testdev and no kernels, so exp and matmul are
# among the ops listed, even without --verbose.
if [ -n "${TORC_TEST_PLUGIN_DIR:-}" ]; then
  run_torc test-backend "$TORC_TEST_PLUGIN_DIR/goodkeys.so"
  [ "$rc" -eq 0 ] || fail "expected exit status 0 for a backend with no kernels"
  grep -E '^conformance on testdev: [0-9]+ passed, 0 failed, [1-9][0-9]* skipped$' \
    "$tmp/out" >/dev/null || fail "expected the summary line for testdev"
  lacks=$(grep -E '^ops with no kernel on testdev \([0-9]+; their cases are skipped\): ' "$tmp/out")
  [ -n "$lacks" ] || fail "expected the summary to list the ops testdev lacks"
  for op in 'exp (f32, f64' 'matmul (f32'; do
    case "$lacks" in *" $op"*) ;; *) fail "expected '$op' among the ops testdev lacks" ;; esac
  done
  echo "PASS: $what: the summary names the ops a backend lacks"
else
  echo "SKIP: $what: TORC_TEST_PLUGIN_DIR is unset, so no backend without kernels to test"
fi

run_torc test-backend nosuchplugin
[ "$rc" -eq 2 ] || fail "expected exit status 2"
grep -F "nosuchplugin" "$tmp/err" >/dev/null ||
  fail "expected the message to name the plugin"
echo "PASS: $what: status 2, plugin named"

run_torc test-backend
[ "$rc" -eq 2 ] || fail "expected exit status 2"
grep -F "usage: torc test-backend PLUGIN" "$tmp/err" >/dev/null ||
  fail "expected the usage"
echo "PASS: $what: status 2 with the usage"
exit 0
