# tests/nn.mk — the neural-network ops' tests (torc/nn.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_nn
TESTS += tests/test_nn
endif
tests_test_nn_SOURCES = tests/test_nn.c tests/testutil.h
tests_test_nn_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
if HAVE_CMOCKA
check_PROGRAMS += tests/test_nn_nd
TESTS += tests/test_nn_nd
endif
tests_test_nn_nd_SOURCES = tests/test_nn_nd.c tests/testutil.h
tests_test_nn_nd_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
