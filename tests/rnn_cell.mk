# tests/rnn_cell.mk — the fused LSTM and GRU cells (torc/nn.h):
# tests/test_rnn_cell against tests/fixtures/rnn_cell.safetensors
# (written by tests/fixtures/gen_rnn_cell.py).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_rnn_cell
TESTS += tests/test_rnn_cell
endif
tests_test_rnn_cell_SOURCES = tests/test_rnn_cell.c tests/testutil.h
tests_test_rnn_cell_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += tests/fixtures/gen_rnn_cell.py \
	tests/fixtures/rnn_cell.safetensors
