#!/bin/sh
# tests/harness.sh — runs one test. With TORC_VALGRIND=1 the test runs under
# valgrind (leaks and invalid accesses fail it with status 99); shell tests
# see TORC_VALGRIND themselves and wrap the programs they start. The last
# line of each test's log gives its wall time, so a slow stage of CI can be
# traced to its tests.
start=$(date +%s)
case "$1" in
  *.sh) "${SHELL:-/bin/sh}" "$@" ;;
  *)
    if [ "${TORC_VALGRIND:-0}" = 1 ]; then
      valgrind --quiet --error-exitcode=99 --leak-check=full \
        --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect,possible \
        --suppressions="${TORC_TOP_SRCDIR:-.}/tests/valgrind.supp" "$@"
    else
      "$@"
    fi ;;
esac
rc=$?
echo "harness: ${1##*/} took $(($(date +%s) - start)) s (status $rc)" >&2
exit $rc
