/* plugins/cpu/gemm.c — "matmul" for f32/f64 through OpenBLAS's
 * cblas_sgemm/dgemm: strided 2-D operands pass as transposes with their
 * leading dimension, other layouts through a contiguous copy; batches are a
 * loop of GEMMs, or one GEMM when a broadcast right operand lets the batch
 * fold into M.
 */
#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

void torc_cpu__threads(int n) {
  static atomic_int last;
  if (n < 1)
    n = 1;
  if (atomic_exchange(&last, n) != n)
    openblas_set_num_threads(n);
}

void torc_cpu__gemm(int32_t dtype, int ta, int tb, int64_t m, int64_t n,
                    int64_t k, double alpha, const void *a, int64_t lda,
                    const void *b, int64_t ldb, double beta, void *c,
                    int64_t ldc) {
  enum CBLAS_TRANSPOSE tA = ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tB = tb ? CblasTrans : CblasNoTrans;
  if (dtype == TORC_F64)
    cblas_dgemm(CblasRowMajor, tA, tB, (blasint)m, (blasint)n, (blasint)k,
                alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
  else
    cblas_sgemm(CblasRowMajor, tA, tB, (blasint)m, (blasint)n, (blasint)k,
                (float)alpha, a, (blasint)lda, b, (blasint)ldb, (float)beta, c,
                (blasint)ldc);
}

/* How BLAS can read a rows x cols matrix with strides (rs, cs): as is
 * (*trans 0, leading dimension *ld) or as the transpose of a row-major
 * cols x rows matrix (*trans 1). Returns 0 when neither fits (a broadcast
 * or doubly strided operand), and the caller copies it. */
static int blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                       int *trans, int64_t *ld) {
  if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= (cols > 1 ? cols : 1))) {
    *trans = 0;
    *ld = rows <= 1 ? (cols > 1 ? cols : 1) : rs;
    return 1;
  }
  if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= (rows > 1 ? rows : 1))) {
    *trans = 1;
    *ld = cols <= 1 ? (rows > 1 ? rows : 1) : cs;
    return 1;
  }
  return 0;
}

/* Copies a strided rows x cols matrix to dst, row-major. */
static void pack(int32_t dt, void *dst, const char *src, int64_t rows,
                 int64_t cols, int64_t rs, int64_t cs) {
  if (dt == TORC_F64) {
    double *d = dst;
    const double *s = (const double *)src;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++)
        d[i * cols + j] = s[i * rs + j * cs];
  } else {
    float *d = dst;
    const float *s = (const float *)src;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++)
        d[i * cols + j] = s[i * rs + j * cs];
  }
}

/* One operand of a GEMM: the pointer, transpose flag and leading
 * dimension BLAS gets, packing into *buf (grown as needed) when the
 * strides do not fit. */
typedef struct operand {
  const void *p;
  int trans;
  int64_t ld;
} operand;

static int prepare(int32_t dt, const char *src, int64_t rows, int64_t cols,
                   int64_t rs, int64_t cs, void **buf, operand *o) {
  if (blas_layout(rows, cols, rs, cs, &o->trans, &o->ld)) {
    o->p = src;
    return TORC_OK;
  }
  if (*buf == NULL) {
    size_t n = (size_t)(rows * cols > 0 ? rows * cols : 1);
    *buf = malloc(n * cpu_esize(dt));
    if (*buf == NULL)
      return torc_cpu__set_error(TORC_ERR_OOM,
                                 "cpu kernel 'matmul': out of memory packing "
                                 "a %lld x %lld operand",
                                 (long long)rows, (long long)cols);
  }
  pack(dt, *buf, src, rows, cols, rs, cs);
  o->p = *buf;
  o->trans = 0;
  o->ld = cols > 1 ? cols : 1;
  return TORC_OK;
}

/* 1 if a's batch dims (0 .. nb-1) and its rows (stride rs) form one
 * evenly strided run of B*M rows, so [B..., M, K] reads as [B*M, K]. */
static int rows_fold(const torc_ktensor *a, int nb, int64_t rs) {
  int64_t expect = rs * a->shape[nb];
  for (int d = nb - 1; d >= 0; d--) {
    if (a->shape[d] != 1 && a->strides[d] != expect)
      return 0;
    expect *= a->shape[d];
  }
  return 1;
}

int torc_cpu__k_matmul(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel 'matmul' got %d inputs and %d "
                               "outputs (expected 2 and 1)",
                               a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int nd = y->ndim, nb = nd - 2;
  int ok = nd >= 2 && x->ndim == nd && w->ndim == nd && x->dtype == y->dtype &&
           w->dtype == y->dtype &&
           (y->dtype == TORC_F32 || y->dtype == TORC_F64);
  for (int d = 0; ok && d < nb; d++)
    ok = x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
  if (ok)
    ok = x->shape[nd - 2] == y->shape[nd - 2] &&
         w->shape[nd - 1] == y->shape[nd - 1] &&
         x->shape[nd - 1] == w->shape[nd - 2];
  if (!ok)
    return torc_cpu__set_error(TORC_ERR_SHAPE,
                               "cpu kernel 'matmul' got operands of %d, %d "
                               "and %d dims that are not [B..., M, K] x "
                               "[B..., K, N] -> [B..., M, N] in one of f32, "
                               "f64",
                               x->ndim, w->ndim, y->ndim);
  torc_cpu__threads(a->n_threads);
  int32_t dt = y->dtype;
  size_t es = cpu_esize(dt);
  int64_t M = y->shape[nd - 2], N = y->shape[nd - 1], K = x->shape[nd - 1];
  int64_t B = 1;
  for (int d = 0; d < nb; d++)
    B *= y->shape[d];
  if (B == 0 || M == 0 || N == 0)
    return TORC_OK;
  /* The output is contiguous (the contract): batch b at b*M*N. */
  char *yp = cpu_ptr(y, 0);
  if (K == 0) {
    memset(yp, 0, (size_t)(B * M * N) * es);
    return TORC_OK;
  }
  int64_t xs_m = x->strides[nd - 2], xs_k = x->strides[nd - 1];
  int64_t ws_k = w->strides[nd - 2], ws_n = w->strides[nd - 1];
  int w_bcast = 1;
  for (int d = 0; d < nb; d++)
    w_bcast = w_bcast && (w->shape[d] == 1 || w->strides[d] == 0);
  void *xbuf = NULL, *wbuf = NULL;
  operand ox, ow;
  int st = TORC_OK;
  if (B > 1 && w_bcast && (xs_k == 1 || K == 1) && rows_fold(x, nb, xs_m) &&
      xs_m >= K) {
    /* [B..., M, K] x [K, N]: one GEMM of B*M rows. */
    st = prepare(dt, cpu_ptr(w, 0), K, N, ws_k, ws_n, &wbuf, &ow);
    if (st == TORC_OK)
      torc_cpu__gemm(dt, 0, ow.trans, B * M, N, K, 1.0, cpu_ptr(x, 0),
                     xs_m > 0 ? xs_m : 1, ow.p, ow.ld, 0.0, yp, N);
    free(wbuf);
    return st;
  }
  int64_t idx[TORC_KERNEL_MAX_DIMS] = {0};
  int w_packed = 0;
  for (int64_t b = 0; b < B && st == TORC_OK; b++) {
    int64_t xo = 0, wo = 0;
    for (int d = 0; d < nb; d++)
      xo += idx[d] * x->strides[d], wo += idx[d] * w->strides[d];
    st = prepare(dt, cpu_ptr(x, xo), M, K, xs_m, xs_k, &xbuf, &ox);
    /* A broadcast right operand is packed once for the whole batch. */
    if (st == TORC_OK && !(w_bcast && w_packed)) {
      st = prepare(dt, cpu_ptr(w, wo), K, N, ws_k, ws_n, &wbuf, &ow);
      w_packed = 1;
    }
    if (st == TORC_OK)
      torc_cpu__gemm(dt, ox.trans, ow.trans, M, N, K, 1.0, ox.p, ox.ld, ow.p,
                     ow.ld, 0.0, yp + (size_t)(b * M * N) * es, N);
    for (int d = nb - 1; d >= 0; d--) {
      if (++idx[d] < y->shape[d])
        break;
      idx[d] = 0;
    }
  }
  free(xbuf);
  free(wbuf);
  return st;
}
