# tests/local.mk — cmocka unit tests (one file per area) and shell tests.
# `make check` runs them all; TORC_VALGRIND=1 runs each under valgrind.
LDADD = libtorc.la $(CMOCKA_LIBS) -lm
TORC_TEST_LINK_FLAGS = $(AM_LDFLAGS) -no-install

UNIT_TESTS = \
	tests/test_error tests/test_dtype tests/test_tensor tests/test_random \
	tests/test_ops tests/test_sim tests/test_config tests/test_print \
	tests/test_plugin tests/test_abi tests/test_autograd \
	tests/test_elementwise tests/test_reduce tests/test_alloc

if HAVE_CMOCKA
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)
endif
TESTS += tests/test_cli.sh tests/test_template.sh tests/test_conformance.sh \
	tests/test_docs.sh tests/test_names.sh tests/test_defaults.sh

tests_test_error_SOURCES = tests/test_error.c tests/testutil.h
tests_test_dtype_SOURCES = tests/test_dtype.c tests/testutil.h
tests_test_tensor_SOURCES = tests/test_tensor.c tests/testutil.h
tests_test_random_SOURCES = tests/test_random.c tests/testutil.h
tests_test_ops_SOURCES = tests/test_ops.c tests/testutil.h tests/ops_testutil.h
tests_test_sim_SOURCES = tests/test_sim.c tests/testutil.h tests/sim_testutil.h
tests_test_config_SOURCES = tests/test_config.c tests/testutil.h
tests_test_print_SOURCES = tests/test_print.c tests/testutil.h
tests_test_plugin_SOURCES = tests/test_plugin.c tests/testutil.h \
	tests/plugin_testutil.h
tests_test_abi_SOURCES = tests/test_abi.c tests/testutil.h
tests_test_autograd_SOURCES = tests/test_autograd.c tests/testutil.h
tests_test_elementwise_SOURCES = tests/test_elementwise.c tests/testutil.h
tests_test_reduce_SOURCES = tests/test_reduce.c tests/testutil.h
tests_test_alloc_SOURCES = tests/test_alloc.c tests/testutil.h
tests_test_alloc_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_error_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_dtype_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_tensor_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_random_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_ops_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sim_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_config_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_print_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_plugin_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_abi_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_autograd_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_elementwise_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_reduce_LDFLAGS = $(TORC_TEST_LINK_FLAGS)

# The second parts of test_ops (reductions, matmul, casts, random), test_sim
# (its other configurations) and test_plugin (keys, tables, permissions,
# configuration files), sharing their first parts' helpers.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_ops_reduce_cast tests/test_sim_configs \
	tests/test_plugin_keys
TESTS += tests/test_ops_reduce_cast tests/test_sim_configs \
	tests/test_plugin_keys
endif
tests_test_ops_reduce_cast_SOURCES = tests/test_ops_reduce_cast.c \
	tests/testutil.h tests/ops_testutil.h
tests_test_ops_reduce_cast_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_sim_configs_SOURCES = tests/test_sim_configs.c tests/testutil.h \
	tests/sim_testutil.h
tests_test_sim_configs_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_plugin_keys_SOURCES = tests/test_plugin_keys.c tests/testutil.h \
	tests/plugin_testutil.h
tests_test_plugin_keys_LDFLAGS = $(TORC_TEST_LINK_FLAGS)

# Every test runs through tests/harness.sh (valgrind on request); tests
# find the build tree's plugins and the test plugins through the path.
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/harness.sh
SH_LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/harness.sh
TEST_EXTENSIONS = .sh
AM_TESTS_ENVIRONMENT = \
	TORC_PLUGIN_PATH='$(abs_top_builddir)/plugins/.libs'; export TORC_PLUGIN_PATH; \
	TORC_TEST_PLUGIN_DIR='$(abs_top_builddir)/tests/plugins/.libs'; export TORC_TEST_PLUGIN_DIR; \
	TORC_TOP_SRCDIR='$(abs_top_srcdir)'; export TORC_TOP_SRCDIR; \
	TORC_TOP_BUILDDIR='$(abs_top_builddir)'; export TORC_TOP_BUILDDIR; \
	TORC_DATA_CACHE='$(abs_top_builddir)/tests/data-cache'; export TORC_DATA_CACHE; \
	LIBTOOL='$(LIBTOOL)'; export LIBTOOL; MAKE='$(MAKE)'; export MAKE;
# Under the sanitizers LeakSanitizer skips the threads' TLS: gcc 12's LSan
# tracer dies on the thread-local blocks of plugins dlopen-ed with
# libgomp (a crash, not a leak, depending on the heap's layout); the
# OpenMP runtime's own per-thread blocks are then suppressed.
if SANITIZERS
AM_TESTS_ENVIRONMENT += \
	LSAN_OPTIONS="$${LSAN_OPTIONS:+$$LSAN_OPTIONS:}use_tls=0:print_suppressions=0:suppressions=$(abs_top_srcdir)/tests/lsan_libgomp.supp"; \
	export LSAN_OPTIONS;
endif
EXTRA_DIST += tests/harness.sh tests/cli_lib.sh tests/test_cli.sh tests/test_template.sh tests/test_conformance.sh \
	tests/test_docs.sh tests/test_names.sh tests/test_defaults.sh

include tests/plugins/local.mk
EXTRA_DIST += tests/valgrind.supp tests/data/cnn.ini
include tests/nn.mk
include tests/attention.mk
include tests/st.mk
include tests/index.mk
include tests/module.mk
include tests/data.mk
include tests/text.mk
include tests/optim.mk
include tests/cpu.mk
include tests/onednn.mk
include tests/onednn_bf16.mk
include tests/oom.mk
include tests/alloc.mk
include tests/train.mk
include tests/optable.mk
include tests/sched.mk
include tests/curves.mk
include tests/eval.mk
include tests/fast.mk
include tests/docs.mk
include tests/decline.mk
include tests/memory.mk
include tests/onnx.mk
include tests/onnx_module.mk
include tests/old_plugin.mk
include tests/cuda.mk
include tests/graph.mk
include tests/graph_plan.mk
include tests/rnn.mk
include tests/rnn_cell.mk
include tests/transformer.mk
include tests/roofline.mk
# torc train / torc eval end to end (tests/cli_lib.sh's helpers), and the
# INI examples' accuracy on short schedules.
TESTS += tests/test_train.sh tests/test_examples.sh
EXTRA_DIST += tests/test_train.sh tests/test_examples.sh tests/lsan_libgomp.supp
# The idx source's decoded-data cache of the tests (TORC_DATA_CACHE above).
clean-local: clean-local-data-cache
clean-local-data-cache:
	rm -rf tests/data-cache
.PHONY: clean-local-data-cache
include tests/onnx_export.mk
include tests/amp.mk
include tests/dist.mk
