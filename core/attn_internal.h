/* core/attn_internal.h — what core/ops_attention.c (the attention ops'
 * forward logic) and core/derivatives_attn.c (their backward formulas and
 * records) share. Private to the core. */
#ifndef TORC_ATTN_INTERNAL_H
#define TORC_ATTN_INTERNAL_H

#include "internal.h"
#include "torc/nn.h"

/* Which attention op a node is for. */
typedef enum torc__attn_rec {
  TORC__ATTN_TRIL,        /* in x; params the diagonal */
  TORC__ATTN_TRIU,        /* in x; params the diagonal */
  TORC__ATTN_MASKED_FILL, /* in x; saves the mask */
  TORC__ATTN_SDPA         /* in q, k, v; saves q, k, v, o, lse (+ mask) */
} torc__attn_rec;

/* Untracked tril (upper 0) or triu (upper 1) of x. */
torc_tensor *torc__tri(const torc_tensor *x, int64_t diagonal, int upper);

/* Untracked masked_fill of x (mask bool, broadcastable to x). */
torc_tensor *torc__masked_fill(const torc_tensor *x, const torc_tensor *mask,
                               double value);

/* Records out's node for `which` when an input requires grad (a no-op
 * otherwise); params (at most 96 bytes) are copied. Error only on OOM. */
torc_status torc__attn_record(torc__attn_rec which,
                              const torc_tensor *const *in, int n_in,
                              const torc_tensor *const *save, int n_save,
                              const void *params, size_t psize,
                              torc_tensor *out);

#endif /* TORC_ATTN_INTERNAL_H */
