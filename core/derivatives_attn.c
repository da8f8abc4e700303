/* core/derivatives_attn.c — the attention ops' backward formulas and their
 * records. tril, triu and masked_fill pass the gradient through the same
 * mask (their own ops on the gradient); attention dispatches its backward
 * kernel, which recomputes the weights row by row from the saved
 * log-sum-exp, so no [L, S] matrix is kept between the passes.
 */
#include "attn_internal.h"

_Static_assert(sizeof(torc_attention_kparams) <=
                   sizeof(((torc__node *)0)->params),
               "attention params too large for a node");

#define G (gout[0])
#define SAVED(i) (n->saved[i])

static torc_status tri_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin, int upper) {
  int64_t diagonal;
  memcpy(&diagonal, n->params, sizeof diagonal);
  return (gin[0] = torc__tri(G, diagonal, upper)) ? TORC_OK
                                                  : torc_last_status();
}

static torc_status tril_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  return tri_bw(n, gout, gin, 0);
}

static torc_status triu_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  return tri_bw(n, gout, gin, 1);
}

/* masked_fill: the gradient, zero where the mask is set. */
static torc_status masked_fill_bw(torc__node *n, torc_tensor *const *gout,
                                  torc_tensor **gin) {
  return (gin[0] = torc__masked_fill(G, SAVED(0), 0)) ? TORC_OK
                                                      : torc_last_status();
}

/* attention: kernel in gy, q, k, v, o, lse (+ mask); out gq, gk, gv. */
static torc_status sdpa_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  torc_attention_kparams p;
  memcpy(&p, n->params, sizeof p);
  torc_tensor *q = SAVED(0);
  /* gy in q's dtype and row-major (a gradient may arrive expanded) */
  torc_tensor *gc = G->dtype == q->dtype ? torc_retain(G)
                                         : torc__cast(G, q->dtype);
  torc_tensor *g = gc ? torc__contiguous(gc) : NULL;
  torc_release(gc);
  if (g == NULL)
    return torc_last_status();
  const torc_tensor *in[7] = {g,        q,        SAVED(1),
                              SAVED(2), SAVED(3), SAVED(4),
                              p.has_mask ? SAVED(5) : NULL};
  torc_tensor *out[3] = {NULL, NULL, NULL};
  torc_status st = TORC_OK;
  for (int i = 0; i < 3 && st == TORC_OK; i++)
    if (!(out[i] = torc__empty(n->in[i].shape, n->in[i].ndim, q->dtype,
                               q->storage->device)))
      st = torc_last_status();
  int64_t total = 0;
  for (int i = 0; i < 3; i++)
    total += torc__numel(n->in[i].shape, n->in[i].ndim);
  if (st == TORC_OK && total > 0)
    st = torc__kernel_call(TORC__OP_scaled_dot_product_attention_backward,
                           q->dtype, in, p.has_mask ? 7 : 6, out, 3, &p,
                           sizeof p);
  torc_release(g);
  for (int i = 0; i < 3; i++) {
    if (st == TORC_OK && torc__needs_grad(n, i))
      gin[i] = out[i];
    else
      torc_release(out[i]);
  }
  return st;
}

static const struct {
  const char *name, *op;
  torc__backward_fn fn;
} recs[] = {
    [TORC__ATTN_TRIL] = {"TrilBackward", "tril", tril_bw},
    [TORC__ATTN_TRIU] = {"TriuBackward", "triu", triu_bw},
    [TORC__ATTN_MASKED_FILL] = {"MaskedFillBackward", "masked_fill",
                                masked_fill_bw},
    [TORC__ATTN_SDPA] = {"ScaledDotProductAttentionBackward",
                         "scaled_dot_product_attention", sdpa_bw},
};

torc_status torc__attn_record(torc__attn_rec which,
                              const torc_tensor *const *in, int n_in,
                              const torc_tensor *const *save, int n_save,
                              const void *params, size_t psize,
                              torc_tensor *out) {
  if (!torc__should_record(in, n_in))
    return TORC_OK;
  torc__node *nd = torc__node_new(recs[which].name, recs[which].op,
                                  recs[which].fn, in, n_in);
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
