# tests/memory.mk — `torc memory FILE.ini` end to end (cpu and sim: the
# step lines, the summary, the steady state, the errors).
TESTS += tests/test_memory_cmd.sh
EXTRA_DIST += tests/test_memory_cmd.sh
