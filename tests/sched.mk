# tests/sched.mk — schedulers that cycle momentum (onecycle, cyclic)
# against PyTorch, and the transforms' torchvision defaults.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_sched_cycle
TESTS += tests/test_sched_cycle
endif
tests_test_sched_cycle_SOURCES = tests/test_sched_cycle.c tests/testutil.h
tests_test_sched_cycle_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += tests/fixtures/gen_sched.py tests/fixtures/sched.safetensors

if HAVE_CMOCKA
check_PROGRAMS += tests/test_transform_defaults
TESTS += tests/test_transform_defaults
endif
tests_test_transform_defaults_SOURCES = tests/test_transform_defaults.c \
	tests/testutil.h
tests_test_transform_defaults_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
