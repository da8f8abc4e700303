#!/bin/sh
# tests/harness.sh — runs one test. With TORC_VALGRIND=1 the test runs under
# valgrind (leaks and invalid accesses fail it with status 99); shell tests
# see TORC_VALGRIND themselves and wrap the programs they start.
case "$1" in
  *.sh) exec "${SHELL:-/bin/sh}" "$@" ;;
esac
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  exec valgrind --quiet --error-exitcode=99 --leak-check=full \
    --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions="${TORC_TOP_SRCDIR:-.}/tests/valgrind.supp" "$@"
fi
exec "$@"
