/* plugins/cuda/blas_plan.h — how blas.c maps a row-major "matmul" call
 * onto column-major strided-batched GEMMs: each operand's transpose flag
 * and leading dimension, the batch dims merged, the calls' offsets. Plain
 * C with no CUDA types, so tests/test_cuda_blas_plan.c checks it on the CPU.
 */
#ifndef TORC_CUDA_BLAS_PLAN_H
#define TORC_CUDA_BLAS_PLAN_H

#include <stdint.h>

#include "torc/plugin.h"

/* One GEMM operand as cuBLAS reads it: op(A) = trans ? A^T : A, A stored
 * column-major with leading dimension ld. */
typedef struct torc_cuda_gemm_operand {
  int trans;
  int64_t ld;
} torc_cuda_gemm_operand;

/* y [B..., M, N] = x [B..., M, K] . w [B..., K, N], row-major, is the
 * column-major y^T [N, M] = w^T [N, K] . x^T [K, M]: cuBLAS's (m, n, k) =
 * (N, M, K), its A is w and its B is x. Each of n_calls calls is a
 * strided batch of count GEMMs, the operands stepping by sb_x, sb_w,
 * sb_y; the calls differ in the leading batch dims (lead, below). */
typedef struct torc_cuda_gemm_plan {
  int64_t M, N, K;
  torc_cuda_gemm_operand w, x, y;
  int64_t count, sb_x, sb_w, sb_y;
  int64_t n_calls;
  int n_lead;
  int64_t lead_shape[TORC_KERNEL_MAX_DIMS];
  int64_t lead_st[3][TORC_KERNEL_MAX_DIMS]; /* x, w, y */
} torc_cuda_gemm_plan;

/* A row-major matrix [R, C] at strides (sr, sc) as the operand whose op()
 * is its transpose [C, R]: untransposed with ld sr when its rows are
 * contiguous, transposed with ld sc when its columns are; 0 when neither
 * (the caller declines). A dim of size 1 fits either form. */
static inline int torc_cuda_as_operand(int64_t R, int64_t C, int64_t sr,
                                       int64_t sc,
                                       torc_cuda_gemm_operand *o) {
  int64_t minc = C > 1 ? C : 1, minr = R > 1 ? R : 1;
  if (sc == 1 || C == 1) {
    o->trans = 0;
    o->ld = R == 1 ? minc : sr;
    if (o->ld >= minc)
      return 1;
  }
  if (sr == 1 || R == 1) {
    o->trans = 1;
    o->ld = C == 1 ? minr : sr + sc - 1;
    if (o->ld >= minr)
      return 1;
  }
  return 0;
}

/* The plan of a call whose shapes were checked ([B..., M, K] x
 * [B..., K, N] -> [B..., M, N], one rank >= 2): 1, or 0 for a layout no
 * GEMM expresses (neither rows nor columns contiguous, or an output whose
 * rows are not). Batch dims of size 1 are dropped and neighbours that
 * every operand steps through as one dim are merged; the last merged dim
 * is the strided batch, the ones before it are the leading dims. */
static inline int torc_cuda_gemm_plan_of(const torc_ktensor *x,
                                         const torc_ktensor *w,
                                         const torc_ktensor *y,
                                         torc_cuda_gemm_plan *p) {
  int nd = y->ndim;
  p->M = y->shape[nd - 2];
  p->N = y->shape[nd - 1];
  p->K = x->shape[nd - 1];
  if (!torc_cuda_as_operand(p->K, p->N, w->strides[nd - 2],
                            w->strides[nd - 1], &p->w) ||
      !torc_cuda_as_operand(p->M, p->K, x->strides[nd - 2],
                            x->strides[nd - 1], &p->x) ||
      !torc_cuda_as_operand(p->M, p->N, y->strides[nd - 2],
                            y->strides[nd - 1], &p->y) ||
      p->y.trans)
    return 0;
  const torc_ktensor *t[3] = {x, w, y};
  int64_t shape[TORC_KERNEL_MAX_DIMS], st[3][TORC_KERNEL_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < nd - 2; d++) {
    int64_t s = y->shape[d];
    if (s == 1)
      continue;
    int merge = n > 0;
    for (int k = 0; merge && k < 3; k++)
      merge = st[k][n - 1] == t[k]->strides[d] * s;
    if (!merge)
      shape[n++] = 1;
    shape[n - 1] *= s;
    for (int k = 0; k < 3; k++)
      st[k][n - 1] = t[k]->strides[d];
  }
  p->count = n > 0 ? shape[n - 1] : 1;
  p->sb_x = n > 0 ? st[0][n - 1] : 0;
  p->sb_w = n > 0 ? st[1][n - 1] : 0;
  p->sb_y = n > 0 ? st[2][n - 1] : p->M * p->N;
  p->n_lead = n > 0 ? n - 1 : 0;
  p->n_calls = 1;
  for (int d = 0; d < p->n_lead; d++) {
    p->lead_shape[d] = shape[d];
    for (int k = 0; k < 3; k++)
      p->lead_st[k][d] = st[k][d];
    p->n_calls *= shape[d];
  }
  return 1;
}

/* The element offsets (from each tensor's first element) of call c's
 * first GEMM: c row-major over the leading dims. */
static inline void torc_cuda_gemm_call(const torc_cuda_gemm_plan *p,
                                       int64_t c, int64_t off[3]) {
  off[0] = off[1] = off[2] = 0;
  for (int d = p->n_lead - 1; d >= 0; d--) {
    int64_t i = c % p->lead_shape[d];
    c /= p->lead_shape[d];
    for (int k = 0; k < 3; k++)
      off[k] += i * p->lead_st[k][d];
  }
}

#endif /* TORC_CUDA_BLAS_PLAN_H */
