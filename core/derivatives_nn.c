/* core/derivatives_nn.c — the nn ops' backward formulas and their records.
 * Conv, pooling, normalisation and embedding dispatch dedicated backward
 * kernels ("conv2d_backward_input", ...), so that oneDNN/cuDNN backends
 * replace them; bias gradients and dropout are composed of public ops.
 */
#include <stdio.h>

#include "nn_internal.h"

/* The params each node keeps must fit the node's buffer. */
_Static_assert(sizeof(torc_conv_kparams) <= sizeof(((torc__node *)0)->params),
               "conv params too large for a node");
_Static_assert(sizeof(torc_pool_kparams) <= sizeof(((torc__node *)0)->params),
               "pool params too large for a node");
_Static_assert(sizeof(torc_norm_kparams) <= sizeof(((torc__node *)0)->params),
               "norm params too large for a node");

#define G (gout[0])
#define SAVED(i) (n->saved[i])

/* g in dtype dt (a new reference). */
static torc_tensor *as_dt(const torc_tensor *g, torc_dtype dt) {
  return g->dtype == dt ? torc_retain((torc_tensor *)g) : torc__cast(g, dt);
}

/* Runs kernel `op` (kernel dtype of in[0] after the cast) into new outputs
 * of the given shapes, of dtype out_dts[i] (NULL: all dt); g (in[0]) is
 * cast to dt first. */
static torc_status run_dts(int op, torc_dtype dt,
                           const torc_tensor *const *in, int n_in,
                           torc_tensor **out, int n_out,
                           const torc__inmeta *const *shapes,
                           const torc_dtype *out_dts, const void *p,
                           size_t ps) {
  torc_tensor *cin[8] = {0};
  torc_status st = TORC_OK;
  for (int i = 0; i < n_out; i++)
    out[i] = NULL;
  for (int i = 0; i < n_in && st == TORC_OK; i++)
    if (!(cin[i] = in[i]->dtype == dt || i > 0
                       ? torc_retain((torc_tensor *)in[i])
                       : as_dt(in[i], dt)))
      st = torc_last_status();
  for (int i = 0; i < n_out && st == TORC_OK; i++)
    if (!(out[i] = torc__empty(shapes[i]->shape, shapes[i]->ndim,
                               out_dts ? out_dts[i] : dt,
                               in[0]->storage->device)))
      st = torc_last_status();
  if (st == TORC_OK)
    st = torc__kernel_call(op, dt, (const torc_tensor *const *)cin, n_in, out,
                           n_out, p, ps);
  for (int i = 0; i < n_in; i++)
    torc_release(cin[i]);
  if (st)
    for (int i = 0; i < n_out; i++) {
      torc_release(out[i]);
      out[i] = NULL;
    }
  return st;
}

static torc_status run(int op, torc_dtype dt, const torc_tensor *const *in,
                       int n_in, torc_tensor **out, int n_out,
                       const torc__inmeta *const *shapes, const void *p,
                       size_t ps) {
  return run_dts(op, dt, in, n_in, out, n_out, shapes, NULL, p, ps);
}

/* Sum of g over every dim but 1 (a bias gradient). A bf16 or f16 g is
 * summed in f32, as PyTorch accumulates half types, and the sum rounded
 * to g's dtype once. */
static torc_tensor *sum_but_channel(const torc_tensor *g) {
  int dims[TORC_MAX_DIMS], nd = 0;
  for (int i = 0; i < g->ndim; i++)
    if (i != 1)
      dims[nd++] = i;
  if (g->dtype != TORC_BF16 && g->dtype != TORC_F16)
    return torc_sum(g, dims, nd, 0);
  torc_tensor *f = torc__cast(g, TORC_F32);
  torc_tensor *s = f ? torc_sum(f, dims, nd, 0) : NULL;
  torc_release(f);
  torc_tensor *r = s ? torc__cast(s, g->dtype) : NULL;
  torc_release(s);
  return r;
}

static torc_status conv_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin, int transposed) {
  torc_tensor *x = SAVED(0), *w = SAVED(1);
  torc_conv_kparams p[1]; /* node params may be misaligned: copy */
  memcpy(p, n->params, sizeof p);
  torc_status st = TORC_OK;
  if (torc__needs_grad(n, 0)) {
    const torc_tensor *in[2] = {G, w};
    const torc__inmeta *sh[1] = {&n->in[0]};
    st = run(transposed ? TORC__OP_conv2d : TORC__OP_conv2d_backward_input,
             x->dtype, in, 2, &gin[0], 1, sh, p, sizeof *p);
    if (st)
      return st;
  }
  if (torc__needs_grad(n, 1)) {
    torc_tensor *g = as_dt(G, x->dtype);
    if (g == NULL)
      return torc_last_status();
    const torc_tensor *in[2] = {transposed ? g : x, transposed ? x : g};
    const torc__inmeta *sh[1] = {&n->in[1]};
    st = run(TORC__OP_conv2d_backward_weight, x->dtype, in, 2, &gin[1], 1, sh,
             p, sizeof *p);
    torc_release(g);
    if (st)
      return st;
  }
  if (torc__needs_grad(n, 2) && !(gin[2] = sum_but_channel(G)))
    return torc_last_status();
  return TORC_OK;
}

static torc_status conv2d_bw(torc__node *n, torc_tensor *const *gout,
                             torc_tensor **gin) {
  return conv_bw(n, gout, gin, 0);
}

static torc_status conv_t2d_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin) {
  return conv_bw(n, gout, gin, 1);
}

static torc_status max_pool_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin) {
  const torc_tensor *in[2] = {G, SAVED(0)};
  const torc__inmeta *sh[1] = {&n->in[0]};
  return run(TORC__OP_max_pool2d_backward, n->in[0].dtype, in, 2, &gin[0], 1,
             sh, NULL, 0);
}

static torc_status avg_pool_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin) {
  const torc_tensor *in[1] = {G};
  const torc__inmeta *sh[1] = {&n->in[0]};
  torc_pool_kparams p;
  memcpy(&p, n->params, sizeof p);
  return run(TORC__OP_avg_pool2d_backward, n->in[0].dtype, in, 1, &gin[0], 1,
             sh, &p, sizeof p);
}

static torc_status adaptive_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin) {
  const torc_tensor *in[1] = {G};
  const torc__inmeta *sh[1] = {&n->in[0]};
  return run(TORC__OP_adaptive_avg_pool2d_backward, n->in[0].dtype, in, 1,
             &gin[0], 1, sh, NULL, 0);
}

/* The three norms: kernel in gy, x, w, mean, rstd; out gx, gw, gb. */
static torc_status norm_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin, int op) {
  torc_tensor *x = SAVED(0), *w = SAVED(1);
  const torc_tensor *in[5] = {G, x, w, SAVED(2), SAVED(3)};
  torc__inmeta wm;
  memset(&wm, 0, sizeof wm);
  wm.ndim = w->ndim;
  memcpy(wm.shape, w->shape, sizeof(int64_t) * (size_t)w->ndim);
  const torc__inmeta *sh[3] = {&n->in[0], &wm, &wm};
  torc_tensor *out[3];
  torc_norm_kparams p;
  memcpy(&p, n->params, sizeof p);
  /* gx in x's dtype; gw and gb in w's (f32 beside a half x: batch_norm's
   * mixed precision) */
  const torc_dtype dts[3] = {x->dtype, w->dtype, w->dtype};
  torc_status st =
      run_dts(op, x->dtype, in, 5, out, 3, sh, dts, &p, sizeof p);
  if (st)
    return st;
  for (int i = 0; i < 3; i++) {
    if (torc__needs_grad(n, i))
      gin[i] = out[i];
    else
      torc_release(out[i]);
  }
  return TORC_OK;
}

static torc_status batch_norm_bw(torc__node *n, torc_tensor *const *gout,
                                 torc_tensor **gin) {
  return norm_bw(n, gout, gin, TORC__OP_batch_norm_backward);
}

static torc_status layer_norm_bw(torc__node *n, torc_tensor *const *gout,
                                 torc_tensor **gin) {
  return norm_bw(n, gout, gin, TORC__OP_layer_norm_backward);
}

static torc_status group_norm_bw(torc__node *n, torc_tensor *const *gout,
                                 torc_tensor **gin) {
  return norm_bw(n, gout, gin, TORC__OP_group_norm_backward);
}

/* dropout: g * mask (the mask already holds 1/(1-p)). */
static torc_status dropout_bw(torc__node *n, torc_tensor *const *gout,
                              torc_tensor **gin) {
  return (gin[0] = torc_mul(G, SAVED(0))) ? TORC_OK : torc_last_status();
}

static torc_status embedding_bw(torc__node *n, torc_tensor *const *gout,
                                torc_tensor **gin) {
  if (!torc__needs_grad(n, 1))
    return TORC_OK;
  const torc_tensor *in[2] = {G, SAVED(0)};
  const torc__inmeta *sh[1] = {&n->in[1]};
  return run(TORC__OP_embedding_backward, n->in[1].dtype, in, 2, &gin[1], 1,
             sh, NULL, 0);
}

static const struct {
  const char *name, *op;
  torc__backward_fn fn;
} recs[] = {
    [TORC__NN_CONV2D] = {"Conv2dBackward", "conv2d", conv2d_bw},
    [TORC__NN_CONV_T2D] = {"ConvTranspose2dBackward", "conv_transpose2d",
                           conv_t2d_bw},
    [TORC__NN_MAX_POOL2D] = {"MaxPool2dBackward", "max_pool2d", max_pool_bw},
    [TORC__NN_AVG_POOL2D] = {"AvgPool2dBackward", "avg_pool2d", avg_pool_bw},
    [TORC__NN_ADAPTIVE_AVG2D] = {"AdaptiveAvgPool2dBackward",
                                 "adaptive_avg_pool2d", adaptive_bw},
    [TORC__NN_BATCH_NORM] = {"BatchNormBackward", "batch_norm",
                             batch_norm_bw},
    [TORC__NN_LAYER_NORM] = {"LayerNormBackward", "layer_norm",
                             layer_norm_bw},
    [TORC__NN_GROUP_NORM] = {"GroupNormBackward", "group_norm",
                             group_norm_bw},
    [TORC__NN_DROPOUT] = {"DropoutBackward", "dropout", dropout_bw},
    [TORC__NN_EMBEDDING] = {"EmbeddingBackward", "embedding", embedding_bw},
};

torc_status torc__nn_record(torc__nn_rec which, const torc_tensor *const *in,
                            int n_in, const torc_tensor *const *save,
                            int n_save, const void *params, size_t psize,
                            torc_tensor *out) {
  if (!torc__should_record(in, n_in))
    return TORC_OK;
  torc__node *nd =
      torc__node_new(recs[which].name, recs[which].op, recs[which].fn, in, n_in);
  if (nd == NULL)
    return torc_last_status();
  if (params && psize <= sizeof nd->params)
    memcpy(nd->params, params, psize);
  for (int i = 0; i < n_save; i++) {
    torc_status st = torc__node_save(nd, save[i]);
    if (st) {
      torc__node_release(nd);
      return st;
    }
  }
  torc__node_attach(nd, &out, 1);
  return TORC_OK;
}
