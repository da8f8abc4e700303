# tests/transformer.mk — attention, transformer layers and positional
# embeddings against PyTorch (torc/module.h), and incremental decoding.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_transformer
TESTS += tests/test_transformer
endif
tests_test_transformer_SOURCES = tests/test_transformer.c tests/testutil.h
tests_test_transformer_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += tests/fixtures/gen_transformer.py \
	tests/fixtures/transformer.safetensors
TESTS += tests/test_transformer_torch.sh
EXTRA_DIST += tests/test_transformer_torch.sh
# The decoder and sampling (torc/generate.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_generate
TESTS += tests/test_generate
endif
tests_test_generate_SOURCES = tests/test_generate.c tests/testutil.h
tests_test_generate_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
