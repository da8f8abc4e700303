#!/bin/sh
# autogen.sh — generates configure and Makefile.in (run once after a clone).
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf --install --force ${AUTOGEN_QUIET:+--warnings=none} >/dev/null
