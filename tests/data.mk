# tests/data.mk — tests of datasets, transforms, the loader and the data
# source plugin (test_data_hostile: its defences against hostile files).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_loader tests/test_loader_datasets \
	tests/test_sources tests/test_sources_csv_npy tests/test_sources_images \
	tests/test_data_hostile
TESTS += tests/test_loader tests/test_loader_datasets \
	tests/test_sources tests/test_sources_csv_npy tests/test_sources_images \
	tests/test_data_hostile
endif
tests_test_loader_SOURCES = tests/test_loader.c tests/testutil.h \
	tests/loader_testutil.h
tests_test_loader_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_loader_datasets_SOURCES = tests/test_loader_datasets.c \
	tests/testutil.h tests/loader_testutil.h
tests_test_loader_datasets_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sources_SOURCES = tests/test_sources.c tests/testutil.h \
	tests/data_testutil.h tests/sources_testutil.h
tests_test_sources_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sources_LDADD = $(LDADD) $(ZLIB_LIBS) $(PNG_LIBS) $(JPEG_LIBS)
tests_test_sources_csv_npy_SOURCES = tests/test_sources_csv_npy.c \
	tests/testutil.h tests/data_testutil.h tests/sources_testutil.h
tests_test_sources_csv_npy_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sources_csv_npy_LDADD = $(LDADD) $(ZLIB_LIBS) $(PNG_LIBS) \
	$(JPEG_LIBS)
tests_test_sources_images_SOURCES = tests/test_sources_images.c \
	tests/testutil.h tests/data_testutil.h tests/sources_testutil.h
tests_test_sources_images_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sources_images_LDADD = $(LDADD) $(ZLIB_LIBS) $(PNG_LIBS) \
	$(JPEG_LIBS)
tests_test_data_hostile_SOURCES = tests/test_data_hostile.c tests/testutil.h \
	tests/data_testutil.h
tests_test_data_hostile_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_data_hostile_LDADD = $(LDADD) $(ZLIB_LIBS) $(PNG_LIBS) $(JPEG_LIBS)
# The csv source's text column mode (sequence classification) and a short
# torc train run of a text classifier on it.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_sources_csv_text
TESTS += tests/test_sources_csv_text
endif
tests_test_sources_csv_text_SOURCES = tests/test_sources_csv_text.c \
	tests/testutil.h tests/data_testutil.h tests/sources_testutil.h
tests_test_sources_csv_text_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
TESTS += tests/test_csv_text.sh
EXTRA_DIST += tests/test_csv_text.sh
