# tests/roofline.mk — the roofline profile: kernel calls' FLOP and byte
# counts, the measured fp32 FMA peak and the report (tests/test_roofline.c),
# and `torc bench --roofline` on a small MLP (tests/test_bench_roofline.sh).
TESTS += tests/test_bench_roofline.sh
EXTRA_DIST += tests/test_bench_roofline.sh

if HAVE_CMOCKA
check_PROGRAMS += tests/test_roofline
TESTS += tests/test_roofline
endif
tests_test_roofline_SOURCES = tests/test_roofline.c tests/testutil.h
tests_test_roofline_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
