/* core/nn_internal.h — what core/ops_nn.c (the nn ops' forward logic) and
 * core/derivatives_nn.c (their backward formulas and records) share.
 * Private to the core. */
#ifndef TORC_NN_INTERNAL_H
#define TORC_NN_INTERNAL_H

#include "internal.h"
#include "torc/nn.h"

/* Which nn op a node is for (the formula and the names). */
typedef enum torc__nn_rec {
  TORC__NN_CONV2D,         /* in x, w, b; saves x, w; conv kparams */
  TORC__NN_CONV_T2D,       /* in x, w, b; saves x, w; conv kparams */
  TORC__NN_MAX_POOL2D,     /* in x; saves the indices */
  TORC__NN_AVG_POOL2D,     /* in x; pool kparams */
  TORC__NN_ADAPTIVE_AVG2D, /* in x */
  TORC__NN_BATCH_NORM,     /* in x, w, b; saves x, w, mean, invstd */
  TORC__NN_LAYER_NORM,     /* in x, w, b; saves x, w, mean, rstd */
  TORC__NN_GROUP_NORM,     /* in x, w, b; saves x, w, mean, rstd */
  TORC__NN_DROPOUT,        /* in x; saves the scaled mask */
  TORC__NN_EMBEDDING       /* in indices, w; saves the indices */
} torc__nn_rec;

/* Records out's node for nn op `which` when an input requires grad (a
 * no-op otherwise). in[i] may be NULL (an absent bias): no edge. params
 * (at most the node's 96 bytes) are copied. Error only on OOM. */
torc_status torc__nn_record(torc__nn_rec which, const torc_tensor *const *in,
                            int n_in, const torc_tensor *const *save,
                            int n_save, const void *params, size_t psize,
                            torc_tensor *out);

#endif /* TORC_NN_INTERNAL_H */
