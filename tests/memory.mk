# tests/memory.mk — `torc memory FILE.ini` end to end (cpu and sim: the
# step lines, the summary, the steady state, the errors).
TESTS += tests/test_memory_cmd.sh
EXTRA_DIST += tests/test_memory_cmd.sh

# The caching allocator's steady state in a training step built from an
# INI text (sim: the block allocator).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_memory_steady
TESTS += tests/test_memory_steady
endif
tests_test_memory_steady_SOURCES = tests/test_memory_steady.c \
	tests/testutil.h tests/sim_testutil.h
tests_test_memory_steady_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
