# tests/cli_lib.sh — shared by the shell tests of the `torc` command
# (test_cli.sh, test_train.sh): sourced, never run. `cli_setup NAME` checks
# the build, makes $tmp (removed on exit); run_torc runs torc (under
# valgrind when TORC_VALGRIND=1) into $tmp/out, $tmp/err and $rc; the
# expect_* checks stop the test at the first failure, printing both
# streams.

cli_setup() {
  if [ -z "${TORC_TOP_BUILDDIR:-}" ] || [ -z "${TORC_TOP_SRCDIR:-}" ]; then
    echo "SKIP: run through make check (TORC_TOP_BUILDDIR is not set)"
    exit 77
  fi
  TORC=$TORC_TOP_BUILDDIR/tools/torc
  if [ ! -x "$TORC" ]; then
    echo "SKIP: $TORC is not built"
    exit 77
  fi
  # make check's LIBTOOL is relative to the build folder ("/bin/bash
  # ./libtool"): made absolute, so that a test may cd elsewhere.
  LIBTOOL=$(echo "${LIBTOOL:-libtool}" |
    sed "s|\./libtool|$TORC_TOP_BUILDDIR/libtool|")
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/torc-$1.XXXXXX") || exit 1
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 1' INT TERM HUP
}
n_pass=0
what=

# run_torc ARGS...: runs torc (under valgrind when TORC_VALGRIND=1), its
# output in $tmp/out and $tmp/err, its status in $rc.
run_torc() {
  what="torc $*"
  if [ "${TORC_VALGRIND:-0}" = 1 ]; then
    # $LIBTOOL is a command line ("/bin/bash .../libtool"): split on purpose.
    $LIBTOOL --mode=execute valgrind --quiet --error-exitcode=99 \
      --leak-check=full --show-leak-kinds=definite,indirect,possible \
      --errors-for-leak-kinds=definite,indirect,possible \
      --suppressions="$TORC_TOP_SRCDIR/tests/valgrind.supp" \
      "$TORC" "$@" >"$tmp/out" 2>"$tmp/err"
  else
    "$TORC" "$@" >"$tmp/out" 2>"$tmp/err"
  fi
  rc=$?
}

fail() {
  echo "FAIL: $what: $*"
  echo "--- exit status: $rc"
  echo "--- stdout (the last 60 lines):"
  tail -n 60 "$tmp/out"
  echo "--- stderr:"
  cat "$tmp/err"
  exit 1
}

pass() {
  n_pass=$((n_pass + 1))
  echo "PASS: $what: $*"
}

expect_rc() {
  if [ "$rc" -ne "$1" ]; then
    if [ "$rc" -eq 99 ] && [ "${TORC_VALGRIND:-0}" = 1 ]; then
      fail "valgrind found errors (status 99), expected status $1"
    fi
    fail "expected exit status $1, got $rc"
  fi
}

# expect_text FILE EXPECTED: FILE (out or err) equals EXPECTED exactly.
expect_text() {
  printf '%s\n' "$2" >"$tmp/expected"
  if ! cmp -s "$tmp/expected" "$tmp/$1"; then
    echo "FAIL: $what: std$1 differs from what was expected (diff expected got):"
    diff -u "$tmp/expected" "$tmp/$1"
    echo "--- exit status: $rc"
    exit 1
  fi
}

# expect_has FILE STRING / expect_lacks FILE STRING: fixed-string search.
expect_has() {
  grep -F -e "$2" "$tmp/$1" >/dev/null ||
    fail "expected std$1 to contain: $2"
}
expect_lacks() {
  if grep -F -e "$2" "$tmp/$1" >/dev/null; then
    fail "expected std$1 NOT to contain: $2"
  fi
}

expect_empty() {
  [ -s "$tmp/$1" ] && fail "expected std$1 to be empty"
  return 0
}

# same_tensors A B: 0 when two safetensors files hold the same tensor bytes
# (their JSON headers, which may order the metadata otherwise, aside).
same_tensors() {
  na=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  nb=$(od -An -tu8 -N8 "$2" | tr -d ' ')
  tail -c +$((na + 9)) "$1" >"$tmp/ta" && tail -c +$((nb + 9)) "$2" >"$tmp/tb" &&
    [ -s "$tmp/ta" ] && cmp -s "$tmp/ta" "$tmp/tb"
}
