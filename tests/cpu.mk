# tests/cpu.mk — the cpu (OpenBLAS) plugin: the conformance suite against
# ref (torc test-backend cpu; skipped when the plugin was not built).
TESTS += tests/test_cpu.sh
EXTRA_DIST += tests/test_cpu.sh
# Geometry and layout cases beyond the suite's fixed shapes (conv groups,
# stride, dilation; transposed, strided, broadcast, batched matmul).
if HAVE_CMOCKA
check_PROGRAMS += tests/test_cpu_ops
TESTS += tests/test_cpu_ops
endif
tests_test_cpu_ops_SOURCES = tests/test_cpu_ops.c tests/testutil.h
tests_test_cpu_ops_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# The elementwise, reduction, softmax and GEMM-split kernels at sizes that
# take the vector loops and the pool, with special values and layouts.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_cpu_ew
TESTS += tests/test_cpu_ew
endif
tests_test_cpu_ew_SOURCES = tests/test_cpu_ew.c tests/testutil.h
tests_test_cpu_ew_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# The nn kernels (dropout, layer_norm, gelu_backward, embedding) against
# ref's, the same Philox mask bit for bit, and thread-count independence.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_cpu_nn
TESTS += tests/test_cpu_nn
endif
tests_test_cpu_nn_SOURCES = tests/test_cpu_nn.c tests/testutil.h
tests_test_cpu_nn_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# batch_norm and its backward (f32, bf16 with f32 parameters) against
# ref's, thread-count independence, and which inputs it serves.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_cpu_bnorm
TESTS += tests/test_cpu_bnorm
endif
tests_test_cpu_bnorm_SOURCES = tests/test_cpu_bnorm.c tests/testutil.h
tests_test_cpu_bnorm_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
# bf16 max_pool2d (2x2, stride 2) and its backward against ref's.
if HAVE_CMOCKA
check_PROGRAMS += tests/test_cpu_maxpool
TESTS += tests/test_cpu_maxpool
endif
tests_test_cpu_maxpool_SOURCES = tests/test_cpu_maxpool.c tests/testutil.h
tests_test_cpu_maxpool_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
