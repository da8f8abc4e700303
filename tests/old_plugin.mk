# tests/old_plugin.mk — a plugin of the last shipped ABI (1.6) still loads
# and runs: tests/fixtures/abi-1.6/olddev.c is compiled against that
# release's public headers, kept verbatim beside it, and nothing of the
# tree's include/ (its own CPPFLAGS replace AM_CPPFLAGS); it is built as a
# test plugin into tests/plugins/.libs, where tests/test_old_plugin.c
# finds it by name.
TORC_ABI16_FIXTURE_H = tests/fixtures/abi-1.6/include/torc/plugin.h \
	tests/fixtures/abi-1.6/include/torc/dtype.h \
	tests/fixtures/abi-1.6/include/torc/error.h
check_LTLIBRARIES += tests/plugins/olddev.la
tests_plugins_olddev_la_SOURCES = tests/fixtures/abi-1.6/olddev.c \
	$(TORC_ABI16_FIXTURE_H)
tests_plugins_olddev_la_CPPFLAGS = \
	-I$(top_srcdir)/tests/fixtures/abi-1.6/include
tests_plugins_olddev_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	-export-symbols-regex '^(torc_plugin_entry|olddev_counts)$$'

if HAVE_CMOCKA
check_PROGRAMS += tests/test_old_plugin
TESTS += tests/test_old_plugin
endif
tests_test_old_plugin_SOURCES = tests/test_old_plugin.c tests/testutil.h \
	tests/plugin_testutil.h
tests_test_old_plugin_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
