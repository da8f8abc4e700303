# tests/optim.mk — losses, optimizers, schedulers and clipping.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_optim_core tests/test_optim_core_sched \
	tests/test_losses tests/test_optim
TESTS += tests/test_optim_core tests/test_optim_core_sched \
	tests/test_losses tests/test_optim
endif
tests_test_optim_core_SOURCES = tests/test_optim_core.c tests/testutil.h \
	tests/optim_core_testutil.h
tests_test_optim_core_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_optim_core_sched_SOURCES = tests/test_optim_core_sched.c \
	tests/testutil.h tests/optim_core_testutil.h
tests_test_optim_core_sched_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_losses_SOURCES = tests/test_losses.c tests/testutil.h
tests_test_losses_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_optim_SOURCES = tests/test_optim.c tests/testutil.h
tests_test_optim_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += tests/fixtures/gen_optim.py tests/fixtures/optim.safetensors
EXTRA_DIST += tests/fixtures/gen_losses.py tests/fixtures/losses.safetensors
EXTRA_DIST += tests/fixtures/gen_defaults.py tests/fixtures/torch_defaults.txt

# A model, data, loss, optimizer and scheduler together from one INI file;
# resuming from a checkpoint is bit-exact.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_train_config
TESTS += tests/test_train_config
endif
tests_test_train_config_SOURCES = tests/test_train_config.c tests/testutil.h
tests_test_train_config_LDFLAGS = $(TORC_TEST_LINK_FLAGS)

# The fused ops (cross-entropy, optimizer steps) against the
# composed ops they replace and a host computation, on ref and cpu.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_fused
TESTS += tests/test_fused
endif
tests_test_fused_SOURCES = tests/test_fused.c tests/testutil.h
tests_test_fused_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
