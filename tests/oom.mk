# tests/oom.mk — allocation-failure sweeps over the core (torc/testing.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_oom
TESTS += tests/test_oom
endif
tests_test_oom_SOURCES = tests/test_oom.c tests/testutil.h
tests_test_oom_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
