# tests/data.mk — tests of datasets, transforms, the loader and the data
# source plugin.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_loader tests/test_sources
TESTS += tests/test_loader tests/test_sources
endif
tests_test_loader_SOURCES = tests/test_loader.c tests/testutil.h
tests_test_loader_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sources_SOURCES = tests/test_sources.c tests/testutil.h
tests_test_sources_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sources_LDADD = $(LDADD) $(ZLIB_LIBS) $(PNG_LIBS) $(JPEG_LIBS)
