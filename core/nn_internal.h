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

/* A convolution, its activation (TORC_ACT_*) and the max pool after it
 * (pp, or NULL for none) as one "conv2d_act" call, for a no-grad forward
 * that would run conv2d, relu and max_pool2d one after the other (a
 * sequential's, module_containers.c). torc__conv2d_act_prepare: for an x
 * of sizes xs, dtype dt on dev, 1 with the call's params in *k and y's
 * sizes in ys when the fused kernel serves it at least as fast as conv2d's
 * (and the operands fit: 0 otherwise, no error set, and the separate ops
 * run and say what is wrong). The caller may then set k->x_blocked /
 * y_blocked (torc_conv_act_kparams). torc__conv2d_act_run: y, a new
 * untracked tensor, or NULL with the error. */
int torc__conv2d_act_prepare(const int64_t *xs, torc_dtype dt,
                             torc_device dev, const torc_tensor *w,
                             const torc_tensor *b,
                             const torc_conv2d_params *cp, int act,
                             const torc_pool2d_params *pp,
                             torc_conv_act_kparams *k, int64_t ys[4]);
torc_tensor *torc__conv2d_act_run(const torc_tensor *x, const torc_tensor *w,
                                  const torc_tensor *b,
                                  const torc_conv_act_kparams *k,
                                  const int64_t ys[4]);
/* relu(x w^T + b) as one "linear_act" call, for a sequential's no-grad
 * nn.Linear + nn.ReLU: y [M, N] from x [M, K], w [N, K] and b [N] or
 * NULL, all of one f32/f64 dtype on one device (the caller checked; the
 * layers one by one say what is wrong otherwise). NULL with the error
 * set when the call failed. */
torc_tensor *torc__linear_relu_run(const torc_tensor *x, const torc_tensor *w,
                                   const torc_tensor *b);

#endif /* TORC_NN_INTERNAL_H */
