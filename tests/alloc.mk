# tests/alloc.mk — the block allocator of caching plugin devices (sim).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_caching_alloc
TESTS += tests/test_caching_alloc
endif
tests_test_caching_alloc_SOURCES = tests/test_caching_alloc.c \
	tests/testutil.h tests/sim_testutil.h
tests_test_caching_alloc_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
