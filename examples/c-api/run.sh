#!/bin/sh
# examples/c-api/run.sh — make check's short run of train_mlp: one epoch on
# 6000 training samples, at least 70% test accuracy (the full run is
# `train_mlp` with no arguments). Under TORC_VALGRIND=1: 640 samples under
# valgrind, tested on the first 1000 test images, any accuracy above
# chance.
prog=$TORC_TOP_BUILDDIR/examples/c-api/train_mlp
if [ "${TORC_VALGRIND:-0}" = 1 ]; then
  exec $LIBTOOL --mode=execute valgrind --quiet --error-exitcode=99 \
    --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible \
    --suppressions="$TORC_TOP_SRCDIR/tests/valgrind.supp" "$prog" 1 640 0.2 1000
fi
exec "$prog" 1 6000
