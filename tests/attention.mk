# tests/attention.mk — attention and its masks (torc/nn.h):
# tests/test_attention against tests/fixtures/attention.safetensors
# (written by tests/fixtures/gen_attention.py).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_attention
TESTS += tests/test_attention
endif
tests_test_attention_SOURCES = tests/test_attention.c tests/testutil.h
tests_test_attention_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += tests/fixtures/gen_attention.py \
	tests/fixtures/attention.safetensors
