# tests/decline.mk — kernels that decline a case (the dispatcher's ranked
# lists, tests/test_decline.c with tests/plugins/decline.c), ktensor_of for
# plugins, and torc/philox.h compiled as CUDA device code.
TESTS += tests/test_philox_cuda.sh
EXTRA_DIST += tests/test_philox_cuda.sh tests/philox_cuda.cu

if HAVE_CMOCKA
check_PROGRAMS += tests/test_decline
TESTS += tests/test_decline
endif
tests_test_decline_SOURCES = tests/test_decline.c tests/testutil.h \
	tests/plugin_testutil.h
tests_test_decline_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
