# tests/plugins/local.mk — tiny plugins that exercise each way loading a
# plugin can fail, and one good plugin with keys (tests/test_plugin.c,
# tests/test_plugin_keys.c).
# check_LTLIBRARIES are static archives unless given -rpath: with it (and
# -module) libtool builds them as shared modules in tests/plugins/.libs,
# which the tests find through $TORC_TEST_PLUGIN_DIR. They are never
# installed.
TEST_PLUGIN_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-rpath /nowhere -no-undefined -Wl,--no-undefined
TEST_PLUGIN_EXPORT = -export-symbols-regex '^torc_plugin_entry$$'

check_LTLIBRARIES += \
	tests/plugins/bad_abi.la tests/plugins/no_entry.la \
	tests/plugins/init_fail.la tests/plugins/missing_dep.la \
	tests/plugins/goodkeys.la tests/plugins/short_info.la \
	tests/plugins/null_info.la

tests_plugins_bad_abi_la_SOURCES = tests/plugins/bad_abi.c
tests_plugins_bad_abi_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)

# Exports its descriptor under a wrong name, and nothing else.
tests_plugins_no_entry_la_SOURCES = tests/plugins/no_entry.c
tests_plugins_no_entry_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	-export-symbols-regex '^torc_plugin_entrypoint$$'

tests_plugins_init_fail_la_SOURCES = tests/plugins/init_fail.c \
	tests/plugins/noop_device.h
tests_plugins_init_fail_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)

tests_plugins_short_info_la_SOURCES = tests/plugins/short_info.c
tests_plugins_short_info_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)

tests_plugins_null_info_la_SOURCES = tests/plugins/null_info.c
tests_plugins_null_info_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)

tests_plugins_goodkeys_la_SOURCES = tests/plugins/goodkeys.c
tests_plugins_goodkeys_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)

# typo_op's kernel table names an op torc lacks; typo_op_ignores is the
# same source with an init that ignores the refusal; typo_op_newer has a
# newer minor ABI, whose unknown ops are skipped.
check_LTLIBRARIES += tests/plugins/typo_op.la \
	tests/plugins/typo_op_ignores.la tests/plugins/typo_op_newer.la
tests_plugins_typo_op_la_SOURCES = tests/plugins/typo_op.c \
	tests/plugins/noop_device.h
tests_plugins_typo_op_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)
tests_plugins_typo_op_ignores_la_SOURCES = tests/plugins/typo_op.c \
	tests/plugins/noop_device.h
tests_plugins_typo_op_ignores_la_CPPFLAGS = $(AM_CPPFLAGS) -DTYPO_OP_IGNORES
tests_plugins_typo_op_ignores_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	$(TEST_PLUGIN_EXPORT)
tests_plugins_typo_op_newer_la_SOURCES = tests/plugins/typo_op.c \
	tests/plugins/noop_device.h
tests_plugins_typo_op_newer_la_CPPFLAGS = $(AM_CPPFLAGS) -DTYPO_OP_NEWER
tests_plugins_typo_op_newer_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	$(TEST_PLUGIN_EXPORT)

# missing_dep links against libtorc_missing_dep.so.1, built below by a
# plain rule (not libtool) into tests/plugins/missing/ as a file named
# libtorc_missing_dep.so whose soname is libtorc_missing_dep.so.1: the
# link finds it through -L, and at run time no file of the soname's name
# exists anywhere, so dlopen fails "cannot open shared object file". It is
# linked with -L/-l, not as a .la, so libtool records no rpath for it.
TEST_MISSING_DEP_LIB = tests/plugins/missing/libtorc_missing_dep.so
tests_plugins_missing_dep_la_SOURCES = tests/plugins/missing_dep.c
tests_plugins_missing_dep_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	$(TEST_PLUGIN_EXPORT) -L$(abs_builddir)/tests/plugins/missing
tests_plugins_missing_dep_la_LIBADD = -ltorc_missing_dep
EXTRA_tests_plugins_missing_dep_la_DEPENDENCIES = $(TEST_MISSING_DEP_LIB)

$(TEST_MISSING_DEP_LIB): $(srcdir)/tests/plugins/missing_dep_lib.c
	@$(MKDIR_P) tests/plugins/missing
	$(AM_V_CCLD)$(CC) $(CFLAGS) -fPIC -shared \
		-Wl,-soname,libtorc_missing_dep.so.1 \
		-o $@ $(srcdir)/tests/plugins/missing_dep_lib.c

EXTRA_DIST += tests/plugins/missing_dep_lib.c
CLEANFILES += $(TEST_MISSING_DEP_LIB)

# modplug defines the module type scaled_tanh through host->api
# (tests/test_modplug.c); modplug_bare is the same source built without
# TORC_PROVIDES_MODULE in its descriptor.
check_LTLIBRARIES += tests/plugins/modplug.la tests/plugins/modplug_bare.la
tests_plugins_modplug_la_SOURCES = tests/plugins/modplug.c
tests_plugins_modplug_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)
tests_plugins_modplug_bare_la_SOURCES = tests/plugins/modplug.c
tests_plugins_modplug_bare_la_CPPFLAGS = $(AM_CPPFLAGS) -DMODPLUG_BARE
tests_plugins_modplug_bare_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	$(TEST_PLUGIN_EXPORT)

# modreset's module type implements the vtable's reset slot; modreset_old
# is the same source with a vtable from before the slot
# (tests/test_module_reset.c).
check_LTLIBRARIES += tests/plugins/modreset.la tests/plugins/modreset_old.la
tests_plugins_modreset_la_SOURCES = tests/plugins/modreset.c
tests_plugins_modreset_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) $(TEST_PLUGIN_EXPORT)
tests_plugins_modreset_old_la_SOURCES = tests/plugins/modreset.c
tests_plugins_modreset_old_la_CPPFLAGS = $(AM_CPPFLAGS) -DMODRESET_OLD
tests_plugins_modreset_old_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	$(TEST_PLUGIN_EXPORT)

# decline's kernels decline odd sizes and its ktdouble layer uses
# api->ktensor_of; decline_fail registers a kernel and fails its init
# (tests/test_decline.c reads decline's exported counters).
check_LTLIBRARIES += tests/plugins/decline.la tests/plugins/decline_fail.la
tests_plugins_decline_la_SOURCES = tests/plugins/decline.c
tests_plugins_decline_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	-export-symbols-regex '^(torc_plugin_entry|decline_counts|decline_scratch_outside)$$'
tests_plugins_decline_fail_la_SOURCES = tests/plugins/decline.c
tests_plugins_decline_fail_la_CPPFLAGS = $(AM_CPPFLAGS) -DDECLINE_FAIL
tests_plugins_decline_fail_la_LDFLAGS = $(TEST_PLUGIN_LDFLAGS) \
	$(TEST_PLUGIN_EXPORT)
