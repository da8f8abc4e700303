/* plugins/ref/ref_nn.h — the reference kernels for the
 * neural-network and indexing ops (conv, pooling, normalisation, dropout,
 * embedding, gather/scatter, cat, pad, interpolate, topk): the helpers
 * they share. Their prototypes and table rows come from the op table
 * (ref_util.h, kernels_table.c). */
#ifndef TORC_REF_NN_H
#define TORC_REF_NN_H

#include "ref_util.h"

/* The nn kernels are registered with TORC_KERNEL_CONTIGUOUS: every input
 * and output is contiguous from its offset, so element i is at offset + i.
 */
static inline double nn_ld(const torc_ktensor *t, int64_t i) {
  return ref_load_f(t->dtype, ref_ptr(t, t->offset + i));
}
static inline int64_t nn_ldi(const torc_ktensor *t, int64_t i) {
  return ref_load_i(t->dtype, ref_ptr(t, t->offset + i));
}
static inline void nn_st(const torc_ktensor *t, int64_t i, double v) {
  ref_store_f(t->dtype, ref_ptr(t, t->offset + i), v);
}
static inline void nn_sti(const torc_ktensor *t, int64_t i, int64_t v) {
  ref_store_i(t->dtype, ref_ptr(t, t->offset + i), v);
}

/* Checks the argument counts (n_in may be one of two values) and that
 * every tensor has at least min_ndim dims. */
static inline int nn_check(const torc_kernel_args *a, int n_in_lo,
                           int n_in_hi, int n_out) {
  int n_in = a->n_in >= n_in_lo && a->n_in <= n_in_hi ? a->n_in : n_in_lo;
  return ref_check_args(a, n_in, n_out);
}

#endif /* TORC_REF_NN_H */
