# tests/text.mk — the data plugin's text source (plugins/data/text.c) and
# a short torc train run of a language model on it.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_sources_text
TESTS += tests/test_sources_text
endif
TESTS += tests/test_text_train.sh
EXTRA_DIST += tests/test_text_train.sh
tests_test_sources_text_SOURCES = tests/test_sources_text.c \
	tests/testutil.h tests/data_testutil.h tests/sources_testutil.h
tests_test_sources_text_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# A language model from an INI file: train, resume, torc generate.
TESTS += tests/test_lm.sh
EXTRA_DIST += tests/test_lm.sh
