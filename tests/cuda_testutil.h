/* tests/cuda_testutil.h — what the cuda plugin's CPU tests
 * (tests/test_cuda_*_bodies.c, test_cuda_dnn_plan.c) share: finding ref's
 * kernel of an (op, dtype) and filling the arguments of a call to it.
 * Included after cmocka.h, once per program. */
#ifndef TORC_TEST_CUDA_TESTUTIL_H
#define TORC_TEST_CUDA_TESTUTIL_H

#include <string.h>

#include "torc/plugin.h"

#include "../plugins/ref/ref_kernels.h"

/* ref's kernel of op for dtype dt: the exact dtype's, else the one for
 * every dtype; fails the test when ref has neither. */
static inline torc_kernel_fn cuda_test_ref_kernel(const char *op, int dt) {
  for (size_t i = 0; i < torc_ref_n_kernels; i++)
    if (strcmp(torc_ref_kernels[i].op, op) == 0 &&
        (torc_ref_kernels[i].dtype == dt ||
         torc_ref_kernels[i].dtype == TORC_DTYPE_ANY))
      return torc_ref_kernels[i].fn;
  fail_msg("no ref kernel for %s of dtype %d", op, dt);
  return NULL;
}

/* *a as the core fills it for one call of op: n_in inputs, n_out
 * outputs, params p of psize bytes, one thread. */
static inline void cuda_test_args(torc_kernel_args *a, const char *op,
                                  const torc_ktensor *in, int n_in,
                                  const torc_ktensor *out, int n_out,
                                  const void *p, size_t psize) {
  memset(a, 0, sizeof *a);
  a->struct_size = sizeof *a;
  a->op = op;
  a->n_in = n_in;
  a->n_out = n_out;
  a->in = in;
  a->out = out;
  a->params = p;
  a->params_size = psize;
  a->n_threads = 1;
}

#endif /* TORC_TEST_CUDA_TESTUTIL_H */
