# tests/rnn.mk — the recurrent layers against PyTorch (torc/module.h).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_rnn
TESTS += tests/test_rnn
endif
tests_test_rnn_SOURCES = tests/test_rnn.c tests/testutil.h
tests_test_rnn_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += tests/fixtures/gen_rnn.py tests/fixtures/rnn.safetensors
TESTS += tests/test_rnn_torch.sh
EXTRA_DIST += tests/test_rnn_torch.sh
