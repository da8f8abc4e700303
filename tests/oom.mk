# tests/oom.mk — allocation-failure sweeps over the core (torc/testing.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_oom tests/test_oom_state tests/test_oom_train
TESTS += tests/test_oom tests/test_oom_state tests/test_oom_train
endif
tests_test_oom_SOURCES = tests/test_oom.c tests/testutil.h \
	tests/oom_testutil.h
tests_test_oom_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_oom_state_SOURCES = tests/test_oom_state.c tests/testutil.h \
	tests/oom_testutil.h
tests_test_oom_state_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_oom_train_SOURCES = tests/test_oom_train.c tests/testutil.h \
	tests/oom_testutil.h
tests_test_oom_train_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
