# tests/alloc.mk — the block allocator of caching plugin devices (sim)
# and the streams that keep its blocks apart.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_caching_alloc
TESTS += tests/test_caching_alloc
endif
tests_test_caching_alloc_SOURCES = tests/test_caching_alloc.c \
	tests/testutil.h tests/sim_testutil.h tests/loader_testutil.h
tests_test_caching_alloc_LDFLAGS = $(TORC_TEST_LINK_FLAGS)

# Streams and events (torc/stream.h) on sim, the cpu and decline's
# decldev, a device without the stream slots.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_streams
TESTS += tests/test_streams
endif
tests_test_streams_SOURCES = tests/test_streams.c tests/testutil.h \
	tests/sim_testutil.h tests/loader_testutil.h
tests_test_streams_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
