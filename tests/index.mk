# tests/index.mk — tests of the indexing and shape-building ops.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_index
TESTS += tests/test_index
endif
tests_test_index_SOURCES = tests/test_index.c tests/testutil.h
tests_test_index_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
