/* plugins/ref/kernels_nn_misc.c — "dropout" (a Philox mask, the same bits
 * on every backend), "embedding" (row lookup) and "embedding_backward"
 * (rows accumulated into a zeroed weight gradient).
 */
#include <stdlib.h>

#include "ref_nn.h"
#include "torc/philox.h"

/* in x; out y, mask (x's dtype: 0 or 1/(1-p)). */
int torc_ref_k_dropout(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 2);
  const torc_dropout_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0], *m = &a->out[1];
  double scale = p->p >= 1 ? 0 : 1.0 / (1.0 - p->p);
  int64_t n = ref_numel(x->ndim, x->shape);
  for (int64_t i = 0; i < n; i++) {
    double u = torc_philox_uniform(p->seed, p->offset + (uint64_t)i);
    double k = u >= p->p ? scale : 0;
    nn_st(m, i, k);
    nn_st(y, i, nn_ld(x, i) * k);
  }
  return TORC_OK;
}

/* in idx (integer, any shape), w [num, D]; out [idx..., D]. */
int torc_ref_k_embedding(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st)
    return st;
  const torc_ktensor *ix = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int64_t n = ref_numel(ix->ndim, ix->shape), num = w->shape[0];
  int64_t D = w->shape[1];
  for (int64_t i = 0; i < n; i++) {
    int64_t k = nn_ldi(ix, i);
    if (k < 0 || k >= num)
      return ref_error(TORC_ERR_RANGE,
                       "embedding: index %lld is out of range for "
                       "num_embeddings %lld (valid: 0..%lld)",
                       (long long)k, (long long)num, (long long)num - 1);
    for (int64_t d = 0; d < D; d++)
      nn_st(y, i * D + d, nn_ld(w, k * D + d));
  }
  return TORC_OK;
}

/* in gy [idx..., D], idx; out gw [num, D]. */
int torc_ref_k_embedding_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st)
    return st;
  const torc_ktensor *gy = &a->in[0], *ix = &a->in[1], *gw = &a->out[0];
  int64_t n = ref_numel(ix->ndim, ix->shape), num = gw->shape[0];
  int64_t D = gw->shape[1];
  double *acc = calloc((size_t)(num * D > 0 ? num * D : 1), sizeof(double));
  if (acc == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel '%s': out of memory", a->op);
  for (int64_t i = 0; i < n; i++) {
    int64_t k = nn_ldi(ix, i);
    if (k < 0 || k >= num) {
      free(acc);
      return ref_error(TORC_ERR_RANGE,
                       "embedding_backward: index %lld is out of range for "
                       "num_embeddings %lld",
                       (long long)k, (long long)num);
    }
    for (int64_t d = 0; d < D; d++)
      acc[k * D + d] += nn_ld(gy, i * D + d);
  }
  for (int64_t i = 0; i < num * D; i++)
    nn_st(gw, i, acc[i]);
  free(acc);
  return TORC_OK;
}
