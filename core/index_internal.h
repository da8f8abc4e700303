/* core/index_internal.h — what core/ops_index.c (the indexing ops' forward
 * logic) and core/derivatives_index.c (their backward formulas and
 * records) share. Private to the core. */
#ifndef TORC_INDEX_INTERNAL_H
#define TORC_INDEX_INTERNAL_H

#include "internal.h"
#include "torc/indexing.h"

/* Each records out's node when an input requires grad (a no-op
 * otherwise); returns an error only on OOM. `dim` is wrapped. */
torc_status torc__record_gather(const torc_tensor *x, int dim,
                                const torc_tensor *index, torc_tensor *out);
torc_status torc__record_scatter(const torc_tensor *x, int dim,
                                 const torc_tensor *index,
                                 const torc_tensor *src, int add,
                                 torc_tensor *out);
torc_status torc__record_index_select(const torc_tensor *x, int dim,
                                      const torc_tensor *index,
                                      torc_tensor *out);
torc_status torc__record_index_add(const torc_tensor *x, int dim,
                                   const torc_tensor *index,
                                   const torc_tensor *src, double alpha,
                                   torc_tensor *out);
torc_status torc__record_cat(const torc_tensor *const *ts, int n, int dim,
                             torc_tensor *out);
torc_status torc__record_pad(const torc_tensor *x, const torc_pad_params *p,
                             torc_tensor *out);
torc_status torc__record_interpolate(const torc_tensor *x,
                                     const torc_interp_params *p,
                                     torc_tensor *out);
/* topk: only `values` joins the graph; `indices` is saved. */
torc_status torc__record_topk(const torc_tensor *x, int dim,
                              const torc_tensor *indices, torc_tensor *values);

/* 1 for a tensor torc_cat skips (1-D of size 0, PyTorch's legacy rule). */
static inline int torc__cat_skipped(int ndim, const int64_t *shape) {
  return ndim == 1 && shape[0] == 0;
}

#endif /* TORC_INDEX_INTERNAL_H */
