# tests/onednn.mk — the onednn (oneDNN) plugin: the conformance suite
# against ref (torc test-backend onednn), and the geometry cases beyond it
# (both skipped when the plugin was not built).
TESTS += tests/test_onednn.sh
EXTRA_DIST += tests/test_onednn.sh
# Conv/transposed-conv geometry, pooling variants (ceil_mode, padding,
# dilation, divisor), batch norm in 2-D to 5-D, train and eval.
# The fused inference kernels (linear_act, conv2d_act) against ref's.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_onednn_ops tests/test_onednn_fused
TESTS += tests/test_onednn_ops tests/test_onednn_fused
endif
tests_test_onednn_ops_SOURCES = tests/test_onednn_ops.c tests/testutil.h
tests_test_onednn_ops_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_onednn_fused_SOURCES = tests/test_onednn_fused.c tests/testutil.h
tests_test_onednn_fused_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
