# tests/train.mk — the trainer's callbacks (torc_train_ex): the events in
# order, stopping early from a callback, the built-in reporters; the host
# waits of a training step; and the
# public calls the trainer builds on (torc_config_get_*, schema tables,
# stale temporary files, the scheduler for a trainer's warm-up).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_train_callbacks tests/test_config_get \
  tests/test_train_split tests/test_nosync
TESTS += tests/test_train_callbacks tests/test_config_get \
  tests/test_train_split tests/test_nosync
endif
# A training step on sim waits on nothing between log windows; the
# deferred non-finite-loss guard.
tests_test_nosync_SOURCES = tests/test_nosync.c tests/testutil.h \
  tests/sim_testutil.h
tests_test_nosync_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_train_split_SOURCES = tests/test_train_split.c tests/testutil.h
tests_test_train_split_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_config_get_SOURCES = tests/test_config_get.c tests/testutil.h
tests_test_config_get_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_train_callbacks_SOURCES = tests/test_train_callbacks.c tests/testutil.h
tests_test_train_callbacks_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# train/ includes the public headers only.
TESTS += tests/test_train_layer.sh
EXTRA_DIST += tests/test_train_layer.sh
# torc train's run folder, best and final weights, early stopping, the
# validation split.
TESTS += tests/test_train_run.sh
EXTRA_DIST += tests/test_train_run.sh
