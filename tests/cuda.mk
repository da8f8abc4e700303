# tests/cuda.mk — the cuda plugin without a GPU: its kernels' per-element
# bodies against ref (always built: they are plain C on the host), and the
# plugin's zero-device behaviour (skipped when configure left it out).
if HAVE_CMOCKA
CUDA_BODY_TESTS = tests/test_cuda_bodies
CUDA_BODY_TESTS += tests/test_cuda_reduce_bodies
CUDA_BODY_TESTS += tests/test_cuda_rand_bodies
CUDA_BODY_TESTS += tests/test_cuda_blas_plan
CUDA_BODY_TESTS += tests/test_cuda_tiled_mm_bodies
CUDA_BODY_TESTS += tests/test_cuda_pool_bodies
CUDA_BODY_TESTS += tests/test_cuda_dnn_plan
CUDA_BODY_TESTS += tests/test_cuda_index_bodies
CUDA_BODY_TESTS += tests/test_cuda_ew2_bodies
CUDA_BODY_TESTS += tests/test_cuda_nn_bodies
check_PROGRAMS += $(CUDA_BODY_TESTS) tests/test_cuda_coverage \
	tests/test_cuda_device
TESTS += $(CUDA_BODY_TESTS) tests/test_cuda_coverage tests/test_cuda_device
endif
tests_test_cuda_coverage_SOURCES = tests/test_cuda_coverage.c tests/testutil.h
tests_test_cuda_coverage_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_device_SOURCES = tests/test_cuda_device.c tests/testutil.h
tests_test_cuda_device_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_tiled_mm_bodies_SOURCES = tests/test_cuda_tiled_mm_bodies.c \
	plugins/cuda/tiled_mm_body.h
tests_test_cuda_tiled_mm_bodies_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_tiled_mm_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_bodies_SOURCES = tests/test_cuda_bodies.c \
	plugins/cuda/ew_body.h
tests_test_cuda_bodies_LDADD = plugins/ref/librefkernels.la $(CMOCKA_LIBS) -lm
tests_test_cuda_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_ew2_bodies_SOURCES = tests/test_cuda_ew2_bodies.c \
	plugins/cuda/ew_body.h
tests_test_cuda_ew2_bodies_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_ew2_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_reduce_bodies_SOURCES = tests/test_cuda_reduce_bodies.c \
	plugins/cuda/reduce_body.h
tests_test_cuda_reduce_bodies_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_reduce_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_rand_bodies_SOURCES = tests/test_cuda_rand_bodies.c \
	plugins/cuda/rand_body.h
tests_test_cuda_rand_bodies_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_rand_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_blas_plan_SOURCES = tests/test_cuda_blas_plan.c \
	plugins/cuda/blas_plan.h
tests_test_cuda_blas_plan_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_blas_plan_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_pool_bodies_SOURCES = tests/test_cuda_pool_bodies.c \
	plugins/cuda/pool_body.h
tests_test_cuda_pool_bodies_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_pool_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_dnn_plan_SOURCES = tests/test_cuda_dnn_plan.c \
	plugins/cuda/dnn_plan.h plugins/cuda/pool_body.h
tests_test_cuda_dnn_plan_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_dnn_plan_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_index_bodies_SOURCES = tests/test_cuda_index_bodies.c \
	plugins/cuda/index_body.h
tests_test_cuda_index_bodies_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_index_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
tests_test_cuda_nn_bodies_SOURCES = tests/test_cuda_nn_bodies.c \
	plugins/cuda/nn_body.h plugins/cuda/optim_body.h
tests_test_cuda_nn_bodies_LDADD = plugins/ref/librefkernels.la \
	$(CMOCKA_LIBS) -lm
tests_test_cuda_nn_bodies_LDFLAGS = $(TORC_TEST_LINK_FLAGS)
EXTRA_DIST += tests/cuda_testutil.h
TESTS += tests/test_cuda_nodev.sh
EXTRA_DIST += tests/test_cuda_nodev.sh
