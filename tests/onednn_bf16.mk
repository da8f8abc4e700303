# tests/onednn_bf16.mk — the onednn plugin's bf16 kernels against ref's
# (skipped when the plugin was not built or the CPU has no native bf16).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_onednn_bf16
TESTS += tests/test_onednn_bf16
endif
tests_test_onednn_bf16_SOURCES = tests/test_onednn_bf16.c tests/testutil.h
tests_test_onednn_bf16_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
