/* tests/test_cuda_blas_plan.c — the cuda plugin's matmul plan
 * (plugins/cuda/blas_plan.h): each call's GEMMs run by a host model of
 * cuBLAS's column-major strided-batched GEMM, against ref's matmul, over
 * transposed, padded, broadcast and unmergeable batch layouts, and the
 * layouts it must decline. Needs no GPU (cuBLAS itself only runs there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "torc/plugin.h"

#include "../plugins/cuda/blas_plan.h"
#include "../plugins/ref/ref_kernels.h"

#define BUF 4096

static torc_kernel_fn ref_matmul(void) {
  for (size_t i = 0; i < torc_ref_n_kernels; i++)
    if (strcmp(torc_ref_kernels[i].op, "matmul") == 0 &&
        torc_ref_kernels[i].dtype == TORC_F64)
      return torc_ref_kernels[i].fn;
  fail_msg("no ref kernel for matmul f64");
  return NULL;
}

/* A view of buf: shape, strides (elements) and offset. */
static torc_ktensor view(double *buf, int nd, const int64_t *shape,
                         const int64_t *strides, int64_t offset) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = buf;
  t.offset = offset;
  t.dtype = TORC_F64;
  t.ndim = nd;
  for (int d = 0; d < nd; d++) {
    t.shape[d] = shape[d];
    t.strides[d] = strides[d];
  }
  return t;
}

static void contiguous_strides(int nd, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    st[d] = s;
    s *= shape[d];
  }
}

/* Reads element i of a buffer of BUF, failing on any read outside it. */
static double at(const double *buf, int64_t i) {
  if (i < 0 || i >= BUF)
    fail_msg("the plan reads element %lld, outside the operand's storage",
             (long long)i);
  return buf[i];
}

/* cuBLAS's cublasGemmStridedBatchedEx(opA, opB, m, n, k, A, lda, sA, B,
 * ldb, sB, C, ldc, sC, count), column-major, in double with k in order. */
static void model_gemm(const torc_cuda_gemm_plan *p, const double *A,
                       int64_t a0, const double *Bm, int64_t b0, double *C,
                       int64_t c0) {
  int64_t m = p->N, n = p->M, k = p->K;
  for (int64_t b = 0; b < p->count; b++) {
    int64_t oa = a0 + b * p->sb_w, ob = b0 + b * p->sb_x,
            oc = c0 + b * p->sb_y;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t l = 0; l < k; l++) {
          double va = p->w.trans ? at(A, oa + l + i * p->w.ld)
                                 : at(A, oa + i + l * p->w.ld);
          double vb = p->x.trans ? at(Bm, ob + j + l * p->x.ld)
                                 : at(Bm, ob + l + j * p->x.ld);
          acc += va * vb;
        }
        int64_t ci = oc + i + j * p->y.ld;
        assert_true(ci >= 0 && ci < BUF);
        C[ci] = acc;
      }
  }
}

/* One case: x and w views given by their strides and offsets, y
 * contiguous; the plan's GEMMs against ref, element for element. */
static void check_case(const char *what, int nd, const int64_t *xs,
                       const int64_t *xst, int64_t xoff, const int64_t *ws,
                       const int64_t *wst, int64_t woff) {
  static double xb[BUF], wb[BUF], yb[BUF], yr[BUF];
  for (int i = 0; i < BUF; i++) {
    xb[i] = (double)((i * 7 + 3) % 23) - 11;
    wb[i] = (double)((i * 5 + 1) % 19) - 9;
  }
  int64_t ys[TORC_KERNEL_MAX_DIMS], yst[TORC_KERNEL_MAX_DIMS];
  for (int d = 0; d < nd - 2; d++)
    ys[d] = xs[d];
  ys[nd - 2] = xs[nd - 2];
  ys[nd - 1] = ws[nd - 1];
  contiguous_strides(nd, ys, yst);
  torc_ktensor x = view(xb, nd, xs, xst, xoff);
  torc_ktensor w = view(wb, nd, ws, wst, woff);
  torc_ktensor y = view(yr, nd, ys, yst, 0);
  torc_ktensor in[2] = {x, w};
  torc_kernel_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.op = "matmul";
  a.n_in = 2;
  a.n_out = 1;
  a.in = in;
  a.out = &y;
  a.n_threads = 1;
  assert_int_equal(ref_matmul()(&a), TORC_OK);
  torc_cuda_gemm_plan p;
  if (!torc_cuda_gemm_plan_of(&x, &w, &y, &p))
    fail_msg("%s: the plan declined a layout GEMM expresses", what);
  memset(yb, 0, sizeof yb);
  for (int64_t c = 0; c < p.n_calls; c++) {
    int64_t off[3];
    torc_cuda_gemm_call(&p, c, off);
    model_gemm(&p, wb, woff + off[1], xb, xoff + off[0], yb, off[2]);
  }
  int64_t n = 1;
  for (int d = 0; d < nd; d++)
    n *= ys[d];
  for (int64_t i = 0; i < n; i++)
    if (yb[i] != yr[i])
      fail_msg("%s: element %lld: the plan's GEMMs give %g, ref %g", what,
               (long long)i, yb[i], yr[i]);
}

static void test_2d(void **state) {
  (void)state;
  int64_t xs[2] = {3, 4}, ws[2] = {4, 5}, xst[2], wst[2];
  contiguous_strides(2, xs, xst);
  contiguous_strides(2, ws, wst);
  check_case("plain [3, 4] x [4, 5]", 2, xs, xst, 0, ws, wst, 0);
  /* x^T and w^T views: stored [K, M] and [N, K]. */
  int64_t xt[2] = {1, 3}, wt[2] = {1, 4};
  check_case("x transposed", 2, xs, xt, 0, ws, wst, 0);
  check_case("w transposed", 2, xs, xst, 0, ws, wt, 0);
  check_case("both transposed", 2, xs, xt, 0, ws, wt, 0);
  /* Rows padded (a column slice of a wider matrix), at an offset. */
  int64_t xp[2] = {9, 1}, wp[2] = {7, 1};
  check_case("padded rows", 2, xs, xp, 5, ws, wp, 2);
  int64_t xpt[2] = {1, 6};
  check_case("padded columns of x^T", 2, xs, xpt, 1, ws, wst, 0);
}

static void test_size_one(void **state) {
  (void)state;
  /* M = 1, N = 1, K = 1, each with an arbitrary stride on its size-1 dim. */
  int64_t xs[2] = {1, 4}, xst[2] = {999, 1}, ws[2] = {4, 1}, wst[2] = {1, 77};
  check_case("M = N = 1", 2, xs, xst, 0, ws, wst, 0);
  int64_t xs2[2] = {5, 1}, xst2[2] = {1, 0}, ws2[2] = {1, 6},
          wst2[2] = {0, 1};
  check_case("K = 1", 2, xs2, xst2, 0, ws2, wst2, 0);
  int64_t xs3[2] = {1, 1}, xst3[2] = {0, 0}, ws3[2] = {1, 1}, wst3[2] = {3, 3};
  check_case("1 x 1", 2, xs3, xst3, 0, ws3, wst3, 0);
}

static void test_batches(void **state) {
  (void)state;
  /* [2, 3] batch, contiguous: one strided batch of 6. */
  int64_t xs[4] = {2, 3, 3, 4}, ws[4] = {2, 3, 4, 5}, xst[4], wst[4];
  contiguous_strides(4, xs, xst);
  contiguous_strides(4, ws, wst);
  check_case("batch [2, 3]", 4, xs, xst, 0, ws, wst, 0);
  /* w broadcast over the batch (stride 0). */
  int64_t wb0[4] = {0, 0, 5, 1};
  check_case("w broadcast", 4, xs, xst, 0, ws, wb0, 0);
  /* x broadcast over the first batch dim only: x's batch strides (0, 12)
   * and y's (45, 15) do not merge: two calls of 3. */
  int64_t xb0[4] = {0, 12, 4, 1};
  check_case("x broadcast over dim 0", 4, xs, xb0, 0, ws, wst, 0);
  /* x's batch dims stored in the other order ([3, 2, M, K] permuted). */
  int64_t xperm[4] = {12, 24, 4, 1};
  check_case("x batch dims permuted", 4, xs, xperm, 0, ws, wst, 0);
  /* A size-1 batch dim between the others, with a stray stride. */
  int64_t xs5[5] = {2, 1, 3, 3, 4}, ws5[5] = {2, 1, 3, 4, 5}, xst5[5],
          wst5[5];
  contiguous_strides(5, xs5, xst5);
  contiguous_strides(5, ws5, wst5);
  xst5[1] = 1000;
  check_case("size-1 batch dim", 5, xs5, xst5, 0, ws5, wst5, 0);
  /* Transposed matrices inside a batch. */
  int64_t xbt[4] = {36, 12, 1, 3};
  check_case("batch of x^T", 4, xs, xbt, 0, ws, wst, 0);
}

/* Neither rows nor columns contiguous: declined (the dispatcher then
 * tries the next provider). */
static void test_declines(void **state) {
  (void)state;
  static double b[BUF];
  int64_t xs[2] = {3, 4}, ws[2] = {4, 5}, ys[2] = {3, 5};
  int64_t bad[2] = {8, 2}, wst[2] = {5, 1}, yst[2] = {5, 1};
  torc_ktensor x = view(b, 2, xs, bad, 0), w = view(b, 2, ws, wst, 0),
               y = view(b, 2, ys, yst, 0);
  torc_cuda_gemm_plan p;
  assert_int_equal(torc_cuda_gemm_plan_of(&x, &w, &y, &p), 0);
  /* A leading dimension below the row length (overlapping rows). */
  int64_t overlap[2] = {2, 1};
  x = view(b, 2, xs, overlap, 0);
  assert_int_equal(torc_cuda_gemm_plan_of(&x, &w, &y, &p), 0);
  /* A transposed output. */
  int64_t xst[2] = {4, 1}, yt[2] = {1, 3};
  x = view(b, 2, xs, xst, 0);
  y = view(b, 2, ys, yt, 0);
  assert_int_equal(torc_cuda_gemm_plan_of(&x, &w, &y, &p), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_2d),
      cmocka_unit_test(test_size_one),
      cmocka_unit_test(test_batches),
      cmocka_unit_test(test_declines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
