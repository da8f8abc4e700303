# tests/module.mk — tests of modules, layers, init and state dicts.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_module tests/test_layers tests/test_layers_init \
	tests/test_layers_errors tests/test_state tests/test_state_checkpoint \
	tests/test_model
TESTS += tests/test_module tests/test_layers tests/test_layers_init \
	tests/test_layers_errors tests/test_state tests/test_state_checkpoint \
	tests/test_model
endif
tests_test_module_SOURCES = tests/test_module.c tests/testutil.h
tests_test_module_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_layers_SOURCES = tests/test_layers.c tests/testutil.h \
	tests/layers_testutil.h
tests_test_layers_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_layers_init_SOURCES = tests/test_layers_init.c tests/testutil.h \
	tests/layers_testutil.h
tests_test_layers_init_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_layers_errors_SOURCES = tests/test_layers_errors.c \
	tests/testutil.h tests/layers_testutil.h
tests_test_layers_errors_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_state_SOURCES = tests/test_state.c tests/testutil.h \
	tests/state_testutil.h
tests_test_state_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_state_checkpoint_SOURCES = tests/test_state_checkpoint.c \
	tests/testutil.h tests/state_testutil.h tests/st_testutil.h
tests_test_state_checkpoint_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_model_SOURCES = tests/test_model.c tests/testutil.h
tests_test_model_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# Models and INI files of 100,000 layers: linear cost, counted, not timed.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_scale
TESTS += tests/test_scale
endif
tests_test_scale_SOURCES = tests/test_scale.c tests/testutil.h
tests_test_scale_LDFLAGS = $(TORC_TEST_LINK_FLAGS)

# The PyTorch side of test_model (skipped where /usr/bin/python3 has no
# torch); test_model's export writes two files into the build tree.
TESTS += tests/test_model_torch.sh
EXTRA_DIST += tests/test_model_torch.sh tests/fixtures/gen_model.py \
	tests/fixtures/model.safetensors tests/fixtures/model_io.safetensors
CLEANFILES += tests/test_model.torc.safetensors \
	tests/test_model.torc_io.safetensors

# Module types registered by a plugin (tests/plugins/modplug.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_modplug
TESTS += tests/test_modplug
endif
tests_test_modplug_SOURCES = tests/test_modplug.c tests/testutil.h
tests_test_modplug_LDFLAGS = $(TORC_TEST_LINK_FLAGS)

# The reset slot of torc_module_vtable: torc_module_init and [model] init,
# for types of the program and of plugins (tests/plugins/modreset.c).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_module_reset
TESTS += tests/test_module_reset
endif
tests_test_module_reset_SOURCES = tests/test_module_reset.c tests/testutil.h
tests_test_module_reset_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
