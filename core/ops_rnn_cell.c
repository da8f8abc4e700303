/* core/ops_rnn_cell.c — the fused LSTM and GRU cells (torc_lstm_cell,
 * torc_gru_cell; rows of torc/ops_fused.def): the elementwise part of one
 * recurrent step as one kernel forward and one backward, recorded as one
 * node, where the composed form takes ~10 ops and ~10 nodes per step.
 * Each checks its inputs (messages name the shapes and dtypes involved),
 * allocates the outputs, calls the kernel and records its node.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "torc/nn.h"

#define SHP(t, buf) torc__shape_str((t)->shape, (t)->ndim, buf, sizeof buf)

/* Releases every tensor of ts (NULL entries are fine). */
static void release_all(torc_tensor **ts, int n) {
  for (int i = 0; i < n; i++) {
    torc_release(ts[i]);
    ts[i] = NULL;
  }
}

/* The inputs' dtypes: one floating dtype for all n. */
static torc_status check_dtypes(const char *fn, const torc_tensor *const *t,
                                const char *const *names, int n) {
  for (int i = 0; i < n; i++) {
    if (!torc_dtype_is_float(t[i]->dtype))
      return torc_set_error(TORC_ERR_DTYPE,
                            "%s: %s is %s; the cell takes floating tensors "
                            "(f32, f64, f16, bf16): convert it with "
                            "torc_to_dtype(%s, TORC_F32)",
                            fn, names[i], torc_dtype_name(t[i]->dtype),
                            names[i]);
    if (t[i]->dtype != t[0]->dtype)
      return torc_set_error(TORC_ERR_DTYPE,
                            "%s: %s is %s but %s is %s; give them one dtype "
                            "(torc_to_dtype)",
                            fn, names[0], torc_dtype_name(t[0]->dtype),
                            names[i], torc_dtype_name(t[i]->dtype));
  }
  return torc__same_device(fn, t, n);
}

/* 1 if t is [n, cols]. */
static int is_2d(const torc_tensor *t, int64_t n, int64_t cols) {
  return t->ndim == 2 && t->shape[0] == n && t->shape[1] == cols;
}

/* gout[i] in dtype dt (a gradient may arrive in another); new reference. */
static torc_tensor *grad_in(const torc_tensor *g, torc_dtype dt) {
  return g->dtype == dt ? torc_retain((torc_tensor *)g) : torc__cast(g, dt);
}

/* Runs `op` for a node's backward: outputs of the inputs' shapes
 * (n->in[i]), handed to gin where needed. */
static torc_status cell_bw(torc__node *n, int op, const torc_tensor *const *in,
                           int n_in, torc_tensor **gin) {
  torc_dtype dt = n->saved[0]->dtype;
  torc_device dev = n->saved[0]->storage->device;
  torc_tensor *out[3] = {NULL, NULL, NULL};
  torc_status st = TORC_OK;
  int64_t total = 0;
  for (int i = 0; i < n->n_in && st == TORC_OK; i++) {
    if (!(out[i] = torc__empty(n->in[i].shape, n->in[i].ndim, dt, dev)))
      st = torc_last_status();
    else
      total += torc__numel(n->in[i].shape, n->in[i].ndim);
  }
  if (st == TORC_OK && total > 0)
    st = torc__kernel_call(op, dt, in, n_in, out, n->n_in, NULL, 0);
  for (int i = 0; i < n->n_in; i++) {
    if (st == TORC_OK && torc__needs_grad(n, i)) {
      gin[i] = out[i];
      out[i] = NULL;
    }
  }
  release_all(out, 3);
  return st;
}

/* Records a node over `in` saving `save`, attached to the n_out outputs;
 * a no-op when nothing requires grad. */
static torc_status record(const char *name, const char *op,
                          torc__backward_fn fn, const torc_tensor *const *in,
                          int n_in, const torc_tensor *const *save,
                          int n_save, torc_tensor **out, int n_out) {
  if (!torc__should_record(in, n_in))
    return TORC_OK;
  torc__node *nd = torc__node_new(name, op, fn, in, n_in);
  if (nd == NULL)
    return torc_last_status();
  for (int i = 0; i < n_save; i++) {
    torc_status st = torc__node_save(nd, save[i]);
    if (st) {
      torc__node_release(nd);
      return st;
    }
  }
  torc__node_attach(nd, out, n_out);
  return TORC_OK;
}

/* ---- lstm_cell ---- */

/* Saved: act [N, 4H], c [N, H], tanh(c') [N, H]. gout: gh', gc'. */
static torc_status lstm_cell_bw(torc__node *n, torc_tensor *const *gout,
                                torc_tensor **gin) {
  torc_dtype dt = n->saved[0]->dtype;
  torc_tensor *g[2] = {grad_in(gout[0], dt), grad_in(gout[1], dt)};
  torc_status st = g[0] && g[1] ? TORC_OK : torc_last_status();
  if (st == TORC_OK) {
    const torc_tensor *in[5] = {g[0], g[1], n->saved[0], n->saved[1],
                                n->saved[2]};
    st = cell_bw(n, TORC__OP_lstm_cell_backward, in, 5, gin);
  }
  release_all(g, 2);
  return st;
}

static torc_status lstm_cell(const torc_tensor *gates, const torc_tensor *c,
                             torc_tensor **out) {
  const char *fn = "torc_lstm_cell";
  char bg[128], bc[128];
  if (gates == NULL || c == NULL)
    return torc__null_input(fn);
  const torc_tensor *in[2] = {gates, c};
  static const char *const names[2] = {"gates", "c"};
  torc_status st = check_dtypes(fn, in, names, 2);
  if (st)
    return st;
  if (c->ndim != 2 || !is_2d(gates, c->shape[0], 4 * c->shape[1]))
    return torc_set_error(
        TORC_ERR_SHAPE,
        "%s: gates %s and c %s must be [N, 4H] and [N, H] (the four gates "
        "i, f, g, o side by side along dim 1 of gates)",
        fn, SHP(gates, bg), SHP(c, bc));
  torc_device dev = c->storage->device;
  torc_dtype dt = c->dtype;
  /* out: h', c', act, tanh(c') */
  torc_tensor *o[4] = {torc__empty(c->shape, 2, dt, dev),
                       torc__empty(c->shape, 2, dt, dev),
                       torc__empty(gates->shape, 2, dt, dev),
                       torc__empty(c->shape, 2, dt, dev)};
  st = o[0] && o[1] && o[2] && o[3] ? TORC_OK : torc_last_status();
  if (st == TORC_OK && torc__numel(gates->shape, 2) > 0)
    st = torc__kernel_call(TORC__OP_lstm_cell, dt, in, 2, o, 4, NULL, 0);
  if (st == TORC_OK) {
    const torc_tensor *save[3] = {o[2], c, o[3]};
    st = record("LstmCellBackward", "lstm_cell", lstm_cell_bw, in, 2, save, 3,
                o, 2);
  }
  if (st == TORC_OK) {
    out[0] = o[0];
    out[1] = o[1];
    o[0] = o[1] = NULL;
  }
  release_all(o, 4);
  return st;
}

torc_status torc_lstm_cell(const torc_tensor *gates, const torc_tensor *c,
                           torc_tensor **h_out, torc_tensor **c_out) {
  if (h_out)
    *h_out = NULL;
  if (c_out)
    *c_out = NULL;
  torc_tensor *o[2] = {NULL, NULL};
  torc__ac ac_ = {.n = 0};
  torc_status st = torc__autocast_tl == TORC_F32
                       ? TORC_OK
                       : torc__autocast_args(&ac_, TORC_AUTOCAST_F32, &gates,
                                             &c, (const torc_tensor **)NULL);
  if (st)
    return st;
  st = lstm_cell(gates, c, o);
  TORC__AC_END();
  if (st == TORC_OK)
    st = torc__ret_all(o, 2); /* sets the error itself */
  if (st)
    return st;
  if (h_out)
    *h_out = o[0];
  else
    torc_release(torc_scope_keep(o[0]));
  if (c_out)
    *c_out = o[1];
  else
    torc_release(torc_scope_keep(o[1]));
  return TORC_OK;
}

/* ---- gru_cell ---- */

/* Saved: act [N, 3H], hg [N, 3H], h [N, H]. gout: gh'. */
static torc_status gru_cell_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin) {
  torc_tensor *g = grad_in(gout[0], n->saved[0]->dtype);
  if (g == NULL)
    return torc_last_status();
  const torc_tensor *in[4] = {g, n->saved[0], n->saved[1], n->saved[2]};
  torc_status st = cell_bw(n, TORC__OP_gru_cell_backward, in, 4, gin);
  torc_release(g);
  return st;
}

static torc_tensor *gru_cell(const torc_tensor *xg, const torc_tensor *hg,
                             const torc_tensor *h) {
  const char *fn = "torc_gru_cell";
  char bx[128], bg[128], bh[128];
  if (xg == NULL || hg == NULL || h == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *in[3] = {xg, hg, h};
  static const char *const names[3] = {"xg", "hg", "h"};
  if (check_dtypes(fn, in, names, 3))
    return NULL;
  if (h->ndim != 2 || !is_2d(xg, h->shape[0], 3 * h->shape[1]) ||
      !is_2d(hg, h->shape[0], 3 * h->shape[1])) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: xg %s, hg %s and h %s must be [N, 3H], [N, 3H] and "
                   "[N, H] (the gates r, z, n side by side along dim 1 of "
                   "xg and hg)",
                   fn, SHP(xg, bx), SHP(hg, bg), SHP(h, bh));
    return NULL;
  }
  torc_device dev = h->storage->device;
  torc_dtype dt = h->dtype;
  /* out: h', act */
  torc_tensor *o[2] = {torc__empty(h->shape, 2, dt, dev),
                       torc__empty(xg->shape, 2, dt, dev)};
  torc_status st = o[0] && o[1] ? TORC_OK : torc_last_status();
  if (st == TORC_OK && torc__numel(xg->shape, 2) > 0)
    st = torc__kernel_call(TORC__OP_gru_cell, dt, in, 3, o, 2, NULL, 0);
  if (st == TORC_OK) {
    const torc_tensor *save[3] = {o[1], hg, h};
    st = record("GruCellBackward", "gru_cell", gru_cell_bw, in, 3, save, 3, o,
                1);
  }
  torc_tensor *res = st == TORC_OK ? o[0] : NULL;
  if (res)
    o[0] = NULL;
  release_all(o, 2);
  return res;
}

torc_tensor *torc_gru_cell(const torc_tensor *xg, const torc_tensor *hg,
                           const torc_tensor *h) {
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &xg, &hg, &h);
  torc_tensor *r = gru_cell(xg, hg, h);
  TORC__AC_END();
  return torc__ret(r);
}
