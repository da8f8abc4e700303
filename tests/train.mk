# tests/train.mk — the trainer's callbacks (torc_train_ex): the events in
# order, stopping early from a callback, the built-in reporters.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_train_callbacks
TESTS += tests/test_train_callbacks
endif
tests_test_train_callbacks_SOURCES = tests/test_train_callbacks.c tests/testutil.h
tests_test_train_callbacks_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# train/ includes the public headers only.
TESTS += tests/test_train_layer.sh
EXTRA_DIST += tests/test_train_layer.sh
