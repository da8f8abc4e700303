/* core/derivatives_index.c — backward formulas and records of the indexing
 * ops (torc/indexing.h): gather/scatter/index_* through each other, cat
 * through narrow views of the gradient, pad and interpolate through their
 * backward kernels, topk through scatter_add. Formulas run in no-grad mode
 * with scopes suspended (see internal.h).
 */
#include <stdio.h>

#include "index_internal.h"

#define G (gout[0])
#define SAVED(i) (n->saved[i])
#define DONE(expr) ((expr) ? TORC_OK : torc_last_status())

typedef struct dim_rec {
  int dim;
  int add;      /* scatter: 1 for scatter_add */
  double alpha; /* index_add */
} dim_rec;

/* The node's params, copied out: node->params is a byte array with no
 * alignment guarantee for the double in dim_rec. */
static const dim_rec *params_of(const torc__node *n, dim_rec *r) {
  memcpy(r, n->params, sizeof *r);
  return r;
}

/* Records a node over in[0..n_in) with params, saving `save`, producing
 * out. */
static torc_status record(const char *name, const char *op,
                          torc__backward_fn fn, const torc_tensor *const *in,
                          int n_in, const torc_tensor *const *save, int n_save,
                          const void *params, size_t psize, torc_tensor *out) {
  if (!torc__should_record(in, n_in))
    return TORC_OK;
  torc__node *nd = torc__node_new(name, op, fn, in, n_in);
  if (nd == NULL)
    return torc_last_status();
  if (psize > sizeof nd->params) {
    torc__node_release(nd);
    return torc_set_error(TORC_ERR_INTERNAL, "%s: params too large", name);
  }
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

/* Zeros of input i's shape in g's dtype and device. */
static torc_tensor *zeros_in(const torc__node *n, int i, const torc_tensor *g) {
  return torc_zeros(n->in[i].shape, n->in[i].ndim, g->dtype,
                    g->storage->device);
}

/* ---- gather: scatter_add of g into zeros ---- */

static torc_status gather_bw(torc__node *n, torc_tensor *const *gout,
                             torc_tensor **gin) {
  dim_rec rec;
  const dim_rec *r = params_of(n, &rec);
  torc_tensor *z = zeros_in(n, 0, G);
  gin[0] = z ? torc_scatter_add(z, r->dim, SAVED(0), G) : NULL;
  torc_release(z);
  return DONE(gin[0]);
}

torc_status torc__record_gather(const torc_tensor *x, int dim,
                                const torc_tensor *index, torc_tensor *out) {
  dim_rec r = {dim, 0, 1.0};
  const torc_tensor *in[2] = {x, index};
  return record("GatherBackward", "gather", gather_bw, in, 2, &index, 1, &r,
                sizeof r, out);
}

/* ---- scatter: x's gradient is g where nothing was written (all of g for
 * scatter_add); src's is g gathered at the index, placed in src's shape ---- */

static torc_status scatter_bw(torc__node *n, torc_tensor *const *gout,
                              torc_tensor **gin) {
  dim_rec rec;
  const dim_rec *r = params_of(n, &rec);
  torc_tensor *index = SAVED(0);
  if (torc__needs_grad(n, 0)) {
    if (r->add) {
      gin[0] = torc_retain(G);
    } else {
      torc_tensor *z = torc_zeros(index->shape, index->ndim, G->dtype,
                                  G->storage->device);
      gin[0] = z ? torc_scatter(G, r->dim, index, z) : NULL;
      torc_release(z);
    }
    if (gin[0] == NULL)
      return torc_last_status();
  }
  if (torc__needs_grad(n, 2)) {
    torc_tensor *gs = torc_gather(G, r->dim, index);
    if (gs == NULL)
      return torc_last_status();
    const torc__inmeta *m = &n->in[2];
    if (m->ndim == gs->ndim &&
        memcmp(m->shape, gs->shape, sizeof(int64_t) * (size_t)m->ndim) == 0) {
      gin[2] = gs;
      return TORC_OK;
    }
    /* src is larger than the index: the rest of it got no use */
    torc_tensor *z = zeros_in(n, 2, G);
    torc_tensor *v = z ? torc__view_of(z, gs->shape, z->strides, gs->ndim,
                                       z->offset)
                       : NULL;
    torc_status st = v ? torc_copy_(v, gs) : torc_last_status();
    torc_release(v), torc_release(gs);
    if (st) {
      torc_release(z);
      return st;
    }
    gin[2] = z;
  }
  return TORC_OK;
}

torc_status torc__record_scatter(const torc_tensor *x, int dim,
                                 const torc_tensor *index,
                                 const torc_tensor *src, int add,
                                 torc_tensor *out) {
  dim_rec r = {dim, add, 1.0};
  const torc_tensor *in[3] = {x, index, src};
  return record(add ? "ScatterAddBackward" : "ScatterBackward",
                add ? "scatter_add" : "scatter", scatter_bw, in, 3, &index, 1,
                &r, sizeof r, out);
}

/* ---- index_select / index_add ---- */

static torc_status index_select_bw(torc__node *n, torc_tensor *const *gout,
                                   torc_tensor **gin) {
  dim_rec rec;
  const dim_rec *r = params_of(n, &rec);
  torc_tensor *z = zeros_in(n, 0, G);
  gin[0] = z ? torc_index_add(z, r->dim, SAVED(0), G, 1.0) : NULL;
  torc_release(z);
  return DONE(gin[0]);
}

torc_status torc__record_index_select(const torc_tensor *x, int dim,
                                      const torc_tensor *index,
                                      torc_tensor *out) {
  dim_rec r = {dim, 0, 1.0};
  const torc_tensor *in[2] = {x, index};
  return record("IndexSelectBackward", "index_select", index_select_bw, in, 2,
                &index, 1, &r, sizeof r, out);
}

static torc_status index_add_bw(torc__node *n, torc_tensor *const *gout,
                                torc_tensor **gin) {
  dim_rec rec;
  const dim_rec *r = params_of(n, &rec);
  if (torc__needs_grad(n, 0) && !(gin[0] = torc_retain(G)))
    return torc_last_status();
  if (torc__needs_grad(n, 2)) {
    torc_tensor *s = torc_index_select(G, r->dim, SAVED(0));
    if (s && r->alpha != 1.0) {
      torc_tensor *k = torc_full(NULL, 0, r->alpha, G->dtype,
                                 G->storage->device);
      torc_tensor *m = k ? torc_mul(s, k) : NULL;
      torc_release(k), torc_release(s);
      s = m;
    }
    if ((gin[2] = s) == NULL)
      return torc_last_status();
  }
  return TORC_OK;
}

torc_status torc__record_index_add(const torc_tensor *x, int dim,
                                   const torc_tensor *index,
                                   const torc_tensor *src, double alpha,
                                   torc_tensor *out) {
  dim_rec r = {dim, 1, alpha};
  const torc_tensor *in[3] = {x, index, src};
  return record("IndexAddBackward", "index_add", index_add_bw, in, 3, &index,
                1, &r, sizeof r, out);
}

/* ---- cat: each input's gradient is its slice of g ---- */

static torc_status cat_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  dim_rec rec;
  const dim_rec *r = params_of(n, &rec);
  int64_t off = 0;
  for (int i = 0; i < n->n_in; i++) {
    const torc__inmeta *m = &n->in[i];
    int skipped = torc__cat_skipped(m->ndim, m->shape) && m->ndim != G->ndim;
    int64_t len = skipped ? 0 : m->shape[r->dim];
    if (torc__needs_grad(n, i)) {
      gin[i] = skipped ? zeros_in(n, i, G) : torc_narrow(G, r->dim, off, len);
      if (gin[i] == NULL)
        return torc_last_status();
    }
    off += len;
  }
  return TORC_OK;
}

torc_status torc__record_cat(const torc_tensor *const *ts, int n, int dim,
                             torc_tensor *out) {
  dim_rec r = {dim, 0, 1.0};
  return record("CatBackward", "cat", cat_bw, ts, n, NULL, 0, &r, sizeof r,
                out);
}

/* ---- pad and interpolate: their backward kernels ---- */

typedef struct pad_rec {
  int32_t mode;
  int32_t before[TORC_MAX_DIMS], after[TORC_MAX_DIMS];
} pad_rec;

/* The input's gradient from kernel `op` run on g (allocated here). */
static torc_status kernel_bw(torc__node *n, int op, const torc_tensor *g,
                             const void *p, size_t psize, torc_tensor **gin) {
  const torc__inmeta *m = &n->in[0];
  torc_tensor *gi = torc__empty(m->shape, m->ndim, g->dtype,
                                g->storage->device);
  if (gi == NULL)
    return torc_last_status();
  if (torc__numel(m->shape, m->ndim) > 0) {
    torc_status st;
    if (torc__numel(g->shape, g->ndim) == 0)
      st = torc_zero_(gi);
    else
      st = torc__kernel_call(op, g->dtype, &g, 1, &gi, 1, p, psize);
    if (st) {
      torc_release(gi);
      return st;
    }
  }
  *gin = gi;
  return TORC_OK;
}

static torc_status pad_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  pad_rec rr;
  memcpy(&rr, n->params, sizeof rr);
  const pad_rec *r = &rr;
  torc_pad_params p;
  memset(&p, 0, sizeof p);
  p.mode = r->mode;
  for (int i = 0; i < TORC_MAX_DIMS; i++) {
    p.before[i] = r->before[i];
    p.after[i] = r->after[i];
  }
  return kernel_bw(n, TORC__OP_pad_backward, G, &p, sizeof p, &gin[0]);
}

torc_status torc__record_pad(const torc_tensor *x, const torc_pad_params *p,
                             torc_tensor *out) {
  pad_rec r;
  memset(&r, 0, sizeof r);
  r.mode = p->mode;
  for (int i = 0; i < TORC_MAX_DIMS; i++) {
    r.before[i] = (int32_t)p->before[i];
    r.after[i] = (int32_t)p->after[i];
  }
  return record("PadBackward", "pad", pad_bw, &x, 1, NULL, 0, &r, sizeof r,
                out);
}

static torc_status interpolate_bw(torc__node *n, torc_tensor *const *gout,
                                  torc_tensor **gin) {
  torc_interp_params p;
  memcpy(&p, n->params, sizeof p);
  return kernel_bw(n, TORC__OP_interpolate_backward, G, &p, sizeof p,
                   &gin[0]);
}

torc_status torc__record_interpolate(const torc_tensor *x,
                                     const torc_interp_params *p,
                                     torc_tensor *out) {
  return record(p->mode ? "UpsampleBilinear2DBackward"
                        : "UpsampleNearest2DBackward",
                "interpolate", interpolate_bw, &x, 1, NULL, 0, p, sizeof *p,
                out);
}

/* ---- topk: the values' gradient goes back to where they came from ---- */

static torc_status topk_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  dim_rec rec;
  const dim_rec *r = params_of(n, &rec);
  torc_tensor *z = zeros_in(n, 0, G);
  gin[0] = z ? torc_scatter_add(z, r->dim, SAVED(0), G) : NULL;
  torc_release(z);
  return DONE(gin[0]);
}

torc_status torc__record_topk(const torc_tensor *x, int dim,
                              const torc_tensor *indices, torc_tensor *values) {
  dim_rec r = {dim, 0, 1.0};
  return record("TopkBackward", "topk", topk_bw, &x, 1, &indices, 1, &r,
                sizeof r, values);
}
