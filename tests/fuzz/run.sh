#!/bin/sh
# tests/fuzz/run.sh — what `make fuzz` runs: each named harness for
# FUZZ_TIME seconds on a fresh copy of its seed corpus (new inputs go to
# the build tree, never to tests/fuzz/corpus), with libFuzzer's memory
# limits, then one line per harness and "fuzz: N passed, M failed".
# Exits 1 when any harness found anything (a crash, a sanitizer report, a
# leak, an allocation over the limit, an input slower than the timeout).
#
#   sh tests/fuzz/run.sh SRCDIR BUILDDIR NAME...     (NAME: ini, npy, ...)
# FUZZ_JOBS harnesses (default: the number of CPUs) run at a time; the
# lines still come out in NAME order.
set -u
src=$1
build=$2
shift 2
time=${FUZZ_TIME:-60}
rss=${FUZZ_RSS_MB:-2048}
mlimit=${FUZZ_MALLOC_MB:-512}
tmo=${FUZZ_INPUT_TIMEOUT:-10}
# Leaks fail a run; UBSan stops at the first report with a stack.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS
# Symbolised stacks: Debian's llvm-14 has llvm-symbolizer off the PATH.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && ! command -v llvm-symbolizer >/dev/null; then
  for s in /usr/lib/llvm-14/bin/llvm-symbolizer /usr/bin/llvm-symbolizer-14; do
    [ -x "$s" ] && { ASAN_SYMBOLIZER_PATH=$s; export ASAN_SYMBOLIZER_PATH; break; }
  done
fi
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac

# fuzz_one NAME: runs harness NAME; writes its lines to its work folder's
# "result" and exits 0 when it passed.
fuzz_one() {
  name=$1
  exe=$build/tests/fuzz/fuzz_$name
  work=$build/tests/fuzz/work/$name
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts" "$work/tmp"
  if [ ! -x "$exe" ]; then
    echo "fuzz_$name: FAILED: $exe is not built (configure --enable-fuzzers)" \
      >"$work/result"
    return 1
  fi
  if [ -d "$src/tests/fuzz/corpus/$name" ]; then
    cp "$src/tests/fuzz/corpus/$name"/* "$work/corpus/" 2>/dev/null
  fi
  dict=
  [ -f "$src/tests/fuzz/$name.dict" ] && dict="-dict=$src/tests/fuzz/$name.dict"
  start=$(date +%s)
  # shellcheck disable=SC2086
  TMPDIR=$work/tmp "$exe" -max_total_time="$time" -rss_limit_mb="$rss" \
    -malloc_limit_mb="$mlimit" -timeout="$tmo" -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" $dict "$work/corpus" \
    >"$work/log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  if [ $rc -eq 0 ]; then
    echo "fuzz_$name: passed (${runs:-?} inputs in ${secs} s)" >"$work/result"
    return 0
  fi
  what=$(grep -m1 -E '^(SUMMARY: |==[0-9]+== ?ERROR: |.*runtime error: )' \
         "$work/log" | cut -c1-200)
  [ -n "$what" ] || what=$(grep -m1 -E 'ERROR|out-of-memory|timeout|leak' \
                          "$work/log" | cut -c1-200)
  crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$work/log" | tail -1)
  {
    echo "fuzz_$name: FAILED after ${secs} s (status $rc): ${what:-see the log}"
    echo "  crash file: ${crash:-none written}"
    echo "  log: $work/log"
    [ -n "$crash" ] && echo "  reproduce: $exe $crash"
  } >"$work/result"
  return 1
}

# Batches of $jobs harnesses at a time, then their lines in order.
pass=0
fail=0
set -- "$@"
while [ $# -gt 0 ]; do
  batch=
  i=0
  while [ $# -gt 0 ] && [ $i -lt "$jobs" ]; do
    fuzz_one "$1" &
    batch="$batch $1"
    i=$((i + 1))
    shift
  done
  wait
  for name in $batch; do
    result=$build/tests/fuzz/work/$name/result
    if [ -f "$result" ]; then
      cat "$result"
    else
      echo "fuzz_$name: FAILED: no result written"
    fi
    if [ -f "$result" ] && head -1 "$result" | grep -q ': passed ('; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
    fi
  done
done
echo "fuzz: $pass passed, $fail failed"
[ $fail -eq 0 ]
