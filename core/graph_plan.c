/* core/graph_plan.c — planned execution of a traced graph (torc/graph.h):
 * liveness of every intermediate value, one arena whose slots are reused
 * by values that are never live together, the tensors over the arena made
 * once, elementwise unary nodes run in place when their input dies there,
 * and the inference rewrites (batch norm folded into the conv2d or linear
 * before it; a linear layer and its relu, a convolution with its relu and
 * max pool, each made one fused kernel call). A call allocates nothing but
 * the result it returns. */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "graph_internal.h"
#include "torc/testing.h"

typedef torc__gvalue gvalue;

#define SLOT_ALIGN 64 /* bytes; every slot starts on this boundary */

/* How the plan gets a value's tensor. */
enum {
  PV_CONST,      /* the traced tensor itself: parameter, buffer, constant */
  PV_INPUT,      /* the caller's input */
  PV_INPUT_VIEW, /* a view of an input: its storage set per call */
  PV_ARENA,      /* an intermediate in the arena (or a view of one) */
  PV_OUTPUT,     /* the result: the caller's tensor or a new one */
  PV_FOLDED      /* a tensor the plan made (folded weights) */
};

/* A node as the plan runs it: value ids after the rewrites. */
typedef struct {
  int op;
  torc_dtype kdtype;
  const void *params;
  size_t params_size;
  int n_in, n_out;
  int in[TORC__KCALL_MAX_IN];
  int out[TORC__KCALL_MAX_OUT];
} pnode;

struct torc_plan {
  const torc_graph *g; /* the graph while building, then `own` */
  torc_graph own;      /* its values (no tensors), inputs and result */
  void *params;        /* the nodes' params bytes */
  int n_values;      /* the graph's values, then the plan's own */
  int *cls;          /* PV_* per value */
  int *root;         /* the value whose storage it shares (itself) */
  int64_t *slot;     /* a root's byte offset in the arena, or -1 */
  torc_tensor **t;   /* tensor per value (NULL: set per call) */
  pnode *nodes;
  int n_nodes;
  torc_tensor *arena; /* made by the first run */
  torc_device dev;
  size_t arena_bytes;
  int n_inplace, n_folded, n_fused;
  union fused_params *fparams; /* the fused nodes' params until detach */
  /* Batch tiling: the nodes run on `tile` rows of the batch at a time
   * (0: the whole batch); `batch` is the traced batch size, is_batch[v]
   * says which values carry it in dim 0 (their geometry holds `tile`). */
  int64_t tile, batch;
  unsigned char *is_batch;
  torc_tensor *out_rows; /* the caller's result rows of a tile */
  int64_t *in_dim0;      /* each input's traced dim 0 (n_inputs) */
  int direct_out; /* the output node writes the result itself */
};

/* ---- free slots of the arena ---- */

typedef struct {
  int64_t off, size;
} block;

typedef struct {
  block *free;
  int n, cap;
  int64_t top; /* the arena's size so far */
} slots;

/* A slot of size bytes: the smallest free block that fits, else the end. */
static int64_t slot_take(slots *s, int64_t size) {
  int best = -1;
  for (int i = 0; i < s->n; i++)
    if (s->free[i].size >= size &&
        (best < 0 || s->free[i].size < s->free[best].size))
      best = i;
  if (best < 0) {
    /* A free block at the end grows into the new slot. */
    for (int i = 0; i < s->n; i++)
      if (s->free[i].off + s->free[i].size == s->top) {
        int64_t off = s->free[i].off;
        s->top = off + size;
        s->free[i] = s->free[--s->n];
        return off;
      }
    int64_t off = s->top;
    s->top += size;
    return off;
  }
  int64_t off = s->free[best].off;
  s->free[best].off += size;
  s->free[best].size -= size;
  if (s->free[best].size == 0)
    s->free[best] = s->free[--s->n];
  return off;
}

/* Gives a slot back, merged with its free neighbours; -1 on OOM. */
static int slot_give(slots *s, int64_t off, int64_t size) {
  for (int i = 0; i < s->n; i++) {
    block b = s->free[i];
    if (b.off + b.size == off || off + size == b.off) {
      s->free[i] = s->free[--s->n];
      return slot_give(s, b.off < off ? b.off : off, size + b.size);
    }
  }
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 16;
    block *f = torc__realloc(s->free, (size_t)cap * sizeof *f);
    if (f == NULL)
      return -1;
    s->free = f;
    s->cap = cap;
  }
  s->free[s->n].off = off;
  s->free[s->n].size = size;
  s->n++;
  return 0;
}

/* ---- the plan's values ---- */

/* The value whose storage v shares and that views nothing (v itself
 * when it is no view), as torc_graph_run rebuilds views. */
static int root_of(const torc_graph *g, int v) {
  while (g->values[v].base >= 0 && g->values[v].input < 0)
    v = g->values[v].base;
  return v;
}

/* A value's reach into its root's storage: the first byte past its last
 * element, counted from the root's first element; -1 when it starts
 * before the root (not planned). */
static int64_t reach_bytes(const gvalue *v, const gvalue *r) {
  int64_t es = (int64_t)torc_dtype_size(v->dtype);
  int64_t start = v->offset * es - r->offset * (int64_t)torc_dtype_size(r->dtype);
  if (start < 0 || start % es)
    return -1;
  int64_t last = 0, n = 1;
  for (int d = 0; d < v->ndim; d++) {
    if (v->strides[d] < 0)
      return -1;
    n *= v->shape[d];
    last += (v->shape[d] - 1) * v->strides[d];
  }
  return n == 0 ? start : start + (last + 1) * es;
}

/* A tensor of value v's dtype and geometry over `over`'s storage at
 * element offset off (contiguous strides when contig). */
static torc_tensor *tensor_over(const torc_tensor *over, const gvalue *v,
                                int contig, int64_t off) {
  int64_t st[TORC_MAX_DIMS];
  if (contig)
    torc__contiguous_strides(v->shape, v->ndim, st);
  torc_tensor *t =
      torc__view_of(over, v->shape, contig ? st : v->strides, v->ndim, off);
  if (t)
    t->dtype = v->dtype;
  return t;
}

static int same_dev(torc_device a, torc_device b) {
  return a.type == b.type && a.index == b.index;
}

static torc_status plan_oom(void) {
  return torc_set_error(TORC_ERR_OOM, "torc_plan_new: out of memory");
}

/* Appends a value of the plan's own (a folded weight, t owned); its id or
 * -1 on OOM (t released). */
static int add_folded(torc_plan *p, torc_tensor *t) {
  int n = p->n_values + 1;
  int *cls = torc__realloc(p->cls, (size_t)n * sizeof *cls);
  if (cls)
    p->cls = cls;
  int *root = cls ? torc__realloc(p->root, (size_t)n * sizeof *root) : NULL;
  if (root)
    p->root = root;
  int64_t *slot = root ? torc__realloc(p->slot, (size_t)n * sizeof *slot) : NULL;
  if (slot)
    p->slot = slot;
  torc_tensor **tt = slot ? torc__realloc(p->t, (size_t)n * sizeof *tt) : NULL;
  if (tt == NULL) {
    torc_release(t);
    return -1;
  }
  p->t = tt;
  int id = p->n_values++;
  p->cls[id] = PV_FOLDED;
  p->root[id] = id;
  p->slot[id] = -1;
  p->t[id] = t;
  return id;
}

/* Removes the nodes a rewrite dropped (op -1). The fused nodes' params
 * stay where they are: indexed by the node's position before. */
static void compact(torc_plan *p) {
  int k = 0;
  for (int i = 0; i < p->n_nodes; i++)
    if (p->nodes[i].op >= 0)
      p->nodes[k++] = p->nodes[i];
  p->n_nodes = k;
}

/* ---- batch norm folding ---- */

/* The number of node inputs that read value v or a view of it (views
 * counted through their root), per root, into readers. */
static void count_readers(const torc_plan *p, int *readers) {
  memset(readers, 0, (size_t)p->n_values * sizeof *readers);
  for (int i = 0; i < p->n_nodes; i++)
    for (int k = 0; k < p->nodes[i].n_in; k++)
      readers[p->root[p->nodes[i].in[k]]]++;
  const torc_graph *g = p->g;
  readers[p->root[g->output]]++;
}

/* Value v as an f64 CPU contiguous tensor (untracked), or NULL. */
static torc_tensor *as_f64(const torc_tensor *t) {
  torc_tensor *c = torc__to(t, TORC_CPU);
  torc_tensor *f = c ? torc__cast(c, TORC_F64) : NULL;
  torc_release(c);
  torc_tensor *k = f ? torc__contiguous(f) : NULL;
  torc_release(f);
  return k;
}

/* The f64 CPU tensor src cast to dtype dt on dev (untracked), or NULL;
 * src is released. */
static torc_tensor *from_f64(torc_tensor *src, torc_dtype dt, torc_device dev) {
  torc_tensor *c = src ? torc__cast(src, dt) : NULL;
  torc_release(src);
  torc_tensor *d = c ? torc__to(c, dev) : NULL;
  torc_release(c);
  torc_tensor *k = d ? torc__contiguous(d) : NULL;
  torc_release(d);
  return k;
}

/* The tensor a weight value reads through: its own for a non-view, the
 * named tensor it views otherwise (whose geometry the view is given
 * against). */
static const torc_tensor *named_tensor(const torc_graph *g, const gvalue *v) {
  if (!v->view)
    return v->t;
  for (int k = 0; k < g->n_named; k++)
    if (g->named[k].name == v->name)
      return g->named[k].tensor;
  return NULL;
}

/* Value wv (a weight whose dim 0 of its named tensor is the channel; a
 * bias when is_bias) scaled per channel: w * s[c], or (b - mean[c]) *
 * s[c] + beta[c] for a bias (b NULL: 0). A new value id read through the
 * same geometry, -1 when it cannot be folded, -2 out of memory. */
static int fold_value(torc_plan *p, int wv, int is_bias, const double *s,
                      const double *mean, const double *beta, int64_t C,
                      torc_dtype dt, torc_device dev) {
  const torc_graph *g = p->g;
  const gvalue *v = wv >= 0 && wv < g->n_values ? &g->values[wv] : NULL;
  const torc_tensor *base = v ? named_tensor(g, v) : NULL;
  if (is_bias && wv < 0)
    base = NULL;
  else if (base == NULL || torc_ndim(base) < 1 || torc_shape(base)[0] != C)
    return -1;
  torc_tensor *w = base ? as_f64(base) : torc__empty(&C, 1, TORC_F64, TORC_CPU);
  if (w == NULL)
    return -2;
  double *d = torc_data(w);
  int64_t per = torc_numel(w) / C;
  for (int64_t c = 0; c < C; c++)
    for (int64_t j = 0; j < per; j++) {
      double x = base ? d[c * per + j] : 0.0;
      d[c * per + j] = is_bias ? (x - mean[c]) * s[c] + beta[c] : x * s[c];
    }
  torc_tensor *nb = from_f64(w, dt, dev);
  if (nb == NULL)
    return -2;
  torc_tensor *t = nb;
  if (v && v->view) {
    t = torc__view_of(nb, v->shape, v->strides, v->ndim,
                      v->offset - torc_storage_offset(base));
    torc_release(nb);
    if (t == NULL)
      return -2;
  }
  int id = add_folded(p, t);
  return id < 0 ? -2 : id;
}

/* The per-channel scale gamma / sqrt(var + eps) and the shift's parts of
 * batch norm node bn (x, w, b, mean, var), into s, mean, beta (C each):
 * 1, 0 when the sizes are not C, -1 out of memory. */
static int bn_scale(const torc_plan *p, const pnode *bn, int64_t C, double *s,
                    double *mean, double *beta) {
  const torc_norm_kparams *kp = bn->params;
  torc_tensor *w = as_f64(p->t[bn->in[1]]), *b = as_f64(p->t[bn->in[2]]);
  torc_tensor *m = as_f64(p->t[bn->in[3]]), *var = as_f64(p->t[bn->in[4]]);
  int ok = w && b && m && var ? torc_numel(w) == C && torc_numel(b) == C &&
                                   torc_numel(m) == C && torc_numel(var) == C
                             : -1;
  if (ok > 0) {
    const double *wd = torc_data(w), *bd = torc_data(b), *md = torc_data(m),
                 *vd = torc_data(var);
    for (int64_t c = 0; c < C; c++) {
      s[c] = wd[c] / sqrt(vd[c] + kp->eps);
      mean[c] = md[c];
      beta[c] = bd[c];
    }
  }
  torc_release(w), torc_release(b), torc_release(m), torc_release(var);
  return ok;
}

/* Whether value id is an intermediate that only node `reader` reads, no
 * view of it exists, and it is not the result. */
static int only_read_by(const torc_plan *p, const int *readers, int id) {
  return id < p->g->n_values && p->cls[id] == PV_ARENA &&
         p->root[id] == id && readers[id] == 1 && id != p->g->output;
}

/* Folds batch norm node j into the conv2d or linear (matmul + add)
 * before it, when that is legal; 1 when folded, 0 when not, -1 on OOM. */
static int fold_bn(torc_plan *p, int j, const int *readers) {
  pnode *bn = &p->nodes[j];
  const torc_norm_kparams *kp = bn->params;
  if (bn->n_in != 5 || bn->params_size != sizeof *kp || kp->training)
    return 0;
  for (int k = 1; k < bn->n_out; k++)
    if (readers[p->root[bn->out[k]]])
      return 0;
  int x = bn->in[0];
  if (!only_read_by(p, readers, x))
    return 0;
  int i = -1;
  for (int k = j - 1; k >= 0 && i < 0; k--)
    if (p->nodes[k].n_out == 1 && p->nodes[k].out[0] == x)
      i = k;
  if (i < 0)
    return 0;
  const gvalue *xv = &p->g->values[x];
  if (xv->ndim < 2)
    return 0;
  int64_t C = xv->shape[1];
  pnode *n = &p->nodes[i], *mm = NULL;
  int is_conv = n->op == TORC__OP_conv2d && n->n_in >= 2;
  if (!is_conv) {
    /* linear: add(matmul(x, W^T), bias) on [N, C] */
    if (n->op != TORC__OP_add || n->n_in != 2 || xv->ndim != 2)
      return 0;
    int m = n->in[0];
    if (!only_read_by(p, readers, m))
      return 0;
    for (int k = i - 1; k >= 0 && mm == NULL; k--)
      if (p->nodes[k].n_out == 1 && p->nodes[k].out[0] == m)
        mm = &p->nodes[k];
    if (mm == NULL || mm->op != TORC__OP_matmul || mm->n_in != 2)
      return 0;
  }
  double *s = torc__malloc((size_t)C * 3 * sizeof(double));
  if (s == NULL)
    return -1;
  int done = bn_scale(p, bn, C, s, s + C, s + 2 * C);
  if (done > 0) {
    done = 0;
    int wv = is_conv ? n->in[1] : mm->in[1];
    int bv = is_conv ? (n->n_in == 3 ? n->in[2] : -1) : n->in[1];
    const torc_tensor *wt = wv < p->g->n_values ? p->t[wv] : NULL;
    int nw = wt ? fold_value(p, wv, 0, s, s + C, s + 2 * C, C,
                             torc_dtype_of(wt), torc_device_of(wt))
                : -1;
    int nbias = nw >= 0 ? fold_value(p, bv, 1, s, s + C, s + 2 * C, C,
                                     torc_dtype_of(wt), torc_device_of(wt))
                        : nw;
    if (nw == -2 || nbias == -2)
      done = -1;
    if (nw >= 0 && nbias >= 0) {
      bn = &p->nodes[j]; /* p->nodes is not moved by add_folded */
      if (is_conv) {
        n->in[1] = nw;
        n->in[2] = nbias;
        n->n_in = 3;
      } else {
        mm->in[1] = nw;
        n->in[1] = nbias;
      }
      n->out[0] = bn->out[0];
      bn->op = -1; /* dropped */
      done = 1;
    }
  }
  torc__free(s);
  return done;
}

/* ---- fusing ---- */

/* The params of a fused node (a slot per node of the plan). */
union fused_params {
  torc_linear_act_kparams lin;
  torc_conv_act_kparams conv;
};

/* The one node after `from` that reads value v (v read once, by a node,
 * and not the result: only_read_by's conditions), or -1. */
static int sole_reader(const torc_plan *p, const int *readers, int v,
                       int from) {
  if (v >= p->g->n_values || p->cls[v] != PV_ARENA || p->root[v] != v ||
      readers[v] != 1 || v == p->g->output)
    return -1;
  for (int j = from + 1; j < p->n_nodes; j++) {
    const pnode *n = &p->nodes[j];
    for (int k = 0; n->op >= 0 && k < n->n_in; k++)
      if (n->in[k] == v)
        return j;
  }
  return -1;
}

/* Node j when it is a relu of v writing a new value, else -1. */
static int relu_of(const torc_plan *p, int j, int v) {
  const pnode *n = j >= 0 ? &p->nodes[j] : NULL;
  return n && n->op == TORC__OP_relu && n->n_in == 1 && n->n_out == 1 &&
                 n->in[0] == v && n->out[0] != v
             ? j
             : -1;
}

/* 1 when value id is an ndim-dim value of dtype dt with shape `shape`. */
static int value_is(const torc_plan *p, int id, int ndim, const int64_t *shape,
                    torc_dtype dt) {
  const gvalue *v = &p->g->values[id < p->g->n_values ? id : 0];
  if (id >= p->g->n_values) /* a folded value: its tensor */
    return torc_ndim(p->t[id]) == ndim && torc_dtype_of(p->t[id]) == dt &&
           memcmp(torc_shape(p->t[id]), shape,
                  (size_t)ndim * sizeof(int64_t)) == 0;
  return v->ndim == ndim && v->dtype == dt &&
         memcmp(v->shape, shape, (size_t)ndim * sizeof(int64_t)) == 0;
}

/* Drops the chain's nodes from i up to `last` (exclusive): the nodes on
 * the way from node i's output to value y, the fused node's output, which
 * node `last` writes. */
static void drop_between(torc_plan *p, int i, int last, int y) {
  int v = p->nodes[i].out[0];
  p->nodes[i].op = -1;
  for (int k = i + 1; k < last && v != y; k++) {
    pnode *n = &p->nodes[k];
    for (int r = 0; n->op >= 0 && r < n->n_in; r++)
      if (n->in[r] == v) {
        v = n->out[0];
        n->op = -1;
        break;
      }
  }
}

/* The [N] bias value an add reads as `other` against an [M, N] product:
 * other itself when it is [N]; when it is a constant [M, N] that repeats
 * one row (stride 0 over the rows: how a traced linear layer reads its
 * bias), a new value of the plan's viewing that row. -1 when neither, -2
 * out of memory. */
static int bias_vector(torc_plan *p, int other, const gvalue *yv) {
  if (value_is(p, other, 1, &yv->shape[1], yv->dtype))
    return other;
  const torc_tensor *t = p->t[other];
  if ((p->cls[other] != PV_CONST && p->cls[other] != PV_FOLDED) ||
      t == NULL || torc_ndim(t) != 2 || torc_dtype_of(t) != yv->dtype ||
      torc_shape(t)[0] != yv->shape[0] || torc_shape(t)[1] != yv->shape[1] ||
      (torc_shape(t)[0] > 1 && torc_strides(t)[0] != 0))
    return -1;
  torc_tensor *row = torc__view_of(t, &yv->shape[1], &torc_strides(t)[1], 1,
                                   torc_storage_offset(t));
  if (row == NULL)
    return -2;
  int id = add_folded(p, row);
  return id < 0 ? -2 : id;
}

/* Fuses matmul node i (2-D) with the bias add and the relu after it, when
 * at least one follows: the last fused node becomes the "linear_act"
 * call, the others are dropped. 1 when fused, 0 when not, -1 out of
 * memory. */
static int fuse_linear(torc_plan *p, int i, const int *readers) {
  pnode *mm = &p->nodes[i];
  if (mm->n_in != 2 || mm->n_out != 1)
    return 0;
  int y = mm->out[0];
  const gvalue *yv = &p->g->values[y];
  if (y >= p->g->n_values || yv->ndim != 2 ||
      p->g->values[mm->in[0]].ndim != 2)
    return 0;
  int last = i, bias = -1, act = TORC_ACT_NONE;
  int j = sole_reader(p, readers, y, i);
  if (j >= 0 && p->nodes[j].op == TORC__OP_add && p->nodes[j].n_in == 2 &&
      p->nodes[j].n_out == 1) {
    const pnode *a = &p->nodes[j];
    int other = a->in[0] == y ? a->in[1] : a->in[0];
    int b = other != y ? bias_vector(p, other, yv) : -1;
    if (b == -2)
      return -1;
    const gvalue *ov = &p->g->values[a->out[0]];
    if (b >= 0 && (a->in[0] == y || a->in[1] == y) &&
        a->out[0] < p->g->n_values && ov->ndim == 2 &&
        ov->shape[0] == yv->shape[0] && ov->shape[1] == yv->shape[1] &&
        ov->dtype == yv->dtype) {
      bias = b, last = j, y = a->out[0];
      j = sole_reader(p, readers, y, j);
    }
  }
  if (relu_of(p, j, y) >= 0)
    act = TORC_ACT_RELU, last = j, y = p->nodes[j].out[0];
  if (last == i)
    return 0;
  int x = mm->in[0], w = mm->in[1];
  torc_dtype kdt = mm->kdtype;
  drop_between(p, i, last, y);
  pnode *f = &p->nodes[last];
  union fused_params *fp = &p->fparams[last];
  memset(fp, 0, sizeof *fp);
  fp->lin.act = act;
  f->op = TORC__OP_linear_act;
  f->kdtype = kdt;
  f->params = &fp->lin;
  f->params_size = sizeof fp->lin;
  f->in[0] = x;
  f->in[1] = w;
  f->n_in = 2;
  if (bias >= 0)
    f->in[f->n_in++] = bias;
  f->out[0] = y;
  f->n_out = 1;
  return 1;
}

/* Fuses conv2d node i with the relu and the max pool after it (at least
 * one of them; the pool's indices read by nothing), or the pool and the
 * relu after it, into "conv2d_act". */
static int fuse_conv(torc_plan *p, int i, const int *readers) {
  pnode *cv = &p->nodes[i];
  if (cv->n_in < 2 || cv->n_out != 1 ||
      cv->params_size != sizeof(torc_conv_kparams))
    return 0;
  int y = cv->out[0], last = i, act = TORC_ACT_NONE;
  const torc_pool_kparams *pool = NULL;
  int j = sole_reader(p, readers, y, i);
  if (relu_of(p, j, y) >= 0) {
    act = TORC_ACT_RELU, last = j, y = p->nodes[j].out[0];
    j = sole_reader(p, readers, y, j);
  }
  if (j >= 0) {
    const pnode *mp = &p->nodes[j];
    if (mp->op == TORC__OP_max_pool2d && mp->n_in == 1 && mp->n_out == 2 &&
        mp->in[0] == y && mp->params_size == sizeof *pool &&
        readers[p->root[mp->out[1]]] == 0 && p->root[mp->out[0]] == mp->out[0])
      pool = mp->params, last = j, y = mp->out[0];
  }
  if (pool && act == TORC_ACT_NONE) {
    /* a relu after the pool (a sequential runs them in that order): max
     * commutes with relu, so conv2d_act's relu then pool is the same */
    int r = relu_of(p, sole_reader(p, readers, y, last), y);
    if (r >= 0)
      act = TORC_ACT_RELU, last = r, y = p->nodes[r].out[0];
  }
  if (last == i)
    return 0;
  union fused_params *fp = &p->fparams[last];
  memset(fp, 0, sizeof *fp);
  memcpy(&fp->conv.conv, cv->params, sizeof fp->conv.conv);
  fp->conv.act = act;
  if (pool) {
    fp->conv.has_pool = 1;
    fp->conv.pool = *pool;
  }
  int in[3] = {cv->in[0], cv->in[1], cv->n_in > 2 ? cv->in[2] : -1};
  int n_in = cv->n_in > 3 ? 3 : cv->n_in;
  torc_dtype kdt = cv->kdtype;
  drop_between(p, i, last, y);
  pnode *f = &p->nodes[last];
  f->op = TORC__OP_conv2d_act;
  f->kdtype = kdt;
  f->params = &fp->conv;
  f->params_size = sizeof fp->conv;
  f->n_in = n_in;
  memcpy(f->in, in, (size_t)n_in * sizeof(int));
  f->out[0] = y;
  f->n_out = 1;
  return 1;
}

/* 1 when the plan's device has a kernel for `fused` at the node's dtype
 * that ranks at least as high as the one serving the node's own op: a
 * fused call never trades a fast kernel for a slower one (ref's
 * linear_act for the cpu plugin's matmul). */
static int fusable(const torc_plan *p, const pnode *n, int fused) {
  int have = torc__kernel_rank(p->dev.type, fused, n->kdtype);
  return have != INT_MIN &&
         have >= torc__kernel_rank(p->dev.type, n->op, n->kdtype);
}

/* A conv2d_act whose result only the next conv2d_act reads hands it over
 * in blocks of 16 channels (torc_conv_act_kparams), where the channels
 * allow: neither call then reorders it. The value is an intermediate no
 * view, reader or caller sees in torc's layout. */
static void block_between_convs(torc_plan *p, const int *readers) {
  for (int j = 0; j < p->n_nodes; j++) {
    pnode *b = &p->nodes[j];
    if (b->op != TORC__OP_conv2d_act || b->params != &p->fparams[j].conv)
      continue;
    int v = b->in[0];
    if (v >= p->g->n_values || p->cls[v] != PV_ARENA || p->root[v] != v ||
        readers[v] != 1 || v == p->g->output ||
        p->g->values[v].ndim != 4 || p->g->values[v].shape[1] % 16)
      continue;
    for (int i = 0; i < j; i++) {
      pnode *a = &p->nodes[i];
      if (a->op == TORC__OP_conv2d_act && a->out[0] == v &&
          a->params == &p->fparams[i].conv) {
        p->fparams[i].conv.y_blocked = 1;
        p->fparams[j].conv.x_blocked = 1;
      }
    }
  }
}

/* In a frozen plan, a conv2d_act whose result a linear layer reads
 * flattened (and nothing else) also hands it over in blocks of 16
 * channels: the linear layer's weight gets its rows permuted to match,
 * once (a snapshot, as a folded weight), so that no reorder to torc's
 * layout runs. 0, or -1 out of memory. */
static int block_into_linear(torc_plan *p, const int *readers) {
  const torc_graph *g = p->g;
  for (int j = 0; j < p->n_nodes; j++) {
    pnode *l = &p->nodes[j];
    if (l->op != TORC__OP_linear_act || l->params != &p->fparams[j].lin ||
        p->dev.type != TORC_CPU.type)
      continue;
    int f = l->in[0], r = f < g->n_values ? p->root[f] : -1;
    if (r < 0 || r == f || p->cls[f] != PV_ARENA || p->cls[r] != PV_ARENA ||
        readers[r] != 1 || r == g->output)
      continue;
    const gvalue *fv = &g->values[f], *rv = &g->values[r];
    if (rv->ndim != 4 || rv->shape[1] % 16 || fv->ndim != 2)
      continue;
    int64_t C = rv->shape[1], HW = rv->shape[2] * rv->shape[3];
    int64_t K = C * HW;
    if (fv->shape[1] != K || fv->strides[0] != K || fv->strides[1] != 1 ||
        fv->offset != rv->offset)
      continue;
    int i = -1;
    for (int k = 0; k < j && i < 0; k++)
      if (p->nodes[k].op == TORC__OP_conv2d_act && p->nodes[k].out[0] == r &&
          p->nodes[k].params == &p->fparams[k].conv)
        i = k;
    const torc_tensor *w = p->t[l->in[1]];
    if (i < 0 || w == NULL || torc_ndim(w) != 2 || torc_shape(w)[0] != K)
      continue;
    /* w' row kb(k) = w row k, kb the blocked position of k = c * HW + s */
    torc_tensor *wc = torc__contiguous(w);
    int64_t shape[2] = {K, torc_shape(w)[1]};
    torc_tensor *wb = wc ? torc__empty(shape, 2, torc_dtype_of(w), p->dev)
                         : NULL;
    if (wb == NULL) {
      torc_release(wc);
      return -1;
    }
    size_t row = (size_t)shape[1] * torc_dtype_size(torc_dtype_of(w));
    const char *src = torc_data(wc);
    char *dst = torc_data(wb);
    for (int64_t c = 0; c < C; c++)
      for (int64_t sp = 0; sp < HW; sp++) {
        int64_t kb = ((c / 16) * HW + sp) * 16 + c % 16;
        memcpy(dst + (size_t)kb * row, src + (size_t)(c * HW + sp) * row, row);
      }
    torc_release(wc);
    int id = add_folded(p, wb);
    if (id < 0)
      return -1;
    l = &p->nodes[j];
    l->in[1] = id;
    p->fparams[i].conv.y_blocked = 1;
  }
  return 0;
}

/* Weights ids of frozen plans: one per plan, never reused. */
static _Atomic uint64_t next_weights_id = 1;

/* The fusions, where fusable says so; a frozen plan marks its fused
 * linear layers' weights constant under an id of its own. */
static torc_status fuse(torc_plan *p, int freeze) {
  p->fparams = torc__calloc((size_t)p->n_nodes + 1, sizeof *p->fparams);
  int *readers = torc__malloc(((size_t)p->n_values + 1) * sizeof(int));
  if (p->fparams == NULL || readers == NULL) {
    torc__free(readers);
    return plan_oom();
  }
  count_readers(p, readers);
  for (int i = 0; i < p->n_nodes; i++) {
    pnode *n = &p->nodes[i];
    int done = 0;
    if (n->op == TORC__OP_matmul && fusable(p, n, TORC__OP_linear_act))
      done = fuse_linear(p, i, readers);
    else if (n->op == TORC__OP_conv2d && fusable(p, n, TORC__OP_conv2d_act))
      done = fuse_conv(p, i, readers);
    if (done < 0) {
      torc__free(readers);
      return plan_oom();
    }
    p->n_fused += done;
  }
  block_between_convs(p, readers);
  if (freeze && block_into_linear(p, readers) < 0) {
    torc__free(readers);
    return plan_oom();
  }
  uint64_t id = freeze ? atomic_fetch_add(&next_weights_id, 1) : 0;
  for (int i = 0; i < p->n_nodes && freeze; i++)
    if (p->nodes[i].op == TORC__OP_linear_act) {
      p->fparams[i].lin.flags = TORC_FUSED_CONST_WEIGHTS;
      p->fparams[i].lin.weights_id = id;
    }
  torc__free(readers);
  compact(p);
  return TORC_OK;
}

/* ---- batch tiling ----
 * A forward whose every node treats the rows of the batch (dim 0)
 * independently (convolutions, pools, elementwise ops, a linear layer's
 * product) can run a tile of rows at a time through the whole graph: the
 * arena then holds one tile's intermediates, which stay in the caches
 * from the node that writes them to the one that reads them, instead of a
 * whole batch's streaming through memory between kernels. The plan picks
 * the tile from the bytes a row's intermediates take. */

/* Intermediates of one tile take about this many bytes (a test may set
 * another target: torc_test_plan_tile_bytes). */
enum { TILE_TARGET_BYTES = 4 << 20, TILE_MIN_ROWS = 8, TILE_ALIGN_ROWS = 32 };
static _Atomic int64_t tile_target = TILE_TARGET_BYTES;

void torc_test_plan_tile_bytes(int64_t bytes) {
  atomic_store(&tile_target, bytes > 0 ? bytes : TILE_TARGET_BYTES);
}

/* 1 when value v carries the batch in dim 0 the way tiling needs: B rows,
 * and a view's row stride is its root's (a flatten of the batch), so a
 * tile of rows is a tile of its root's rows. */
static int batch_value(const torc_plan *p, int v, int64_t B) {
  if (v >= p->g->n_values)
    return 0;
  const gvalue *gv = &p->g->values[v], *rv = &p->g->values[p->root[v]];
  if (gv->ndim < 1 || gv->shape[0] != B || rv->ndim < 1 || rv->shape[0] != B)
    return 0;
  int64_t row = torc__numel(rv->shape, rv->ndim) / (B > 0 ? B : 1);
  return (B == 1 || gv->strides[0] == row) && gv->offset >= rv->offset &&
         gv->offset - rv->offset < row;
}

/* 1 when node n computes each row of its batch operands from the same row
 * alone; batch[k] (inputs, then outputs) says which operands carry rows.
 * The other operands are weights: constants without the batch, or a
 * constant broadcast over it (stride 0). */
static int node_tileable(const torc_plan *p, const pnode *n, int64_t B,
                         unsigned char *batch) {
  int kind = torc__ops[n->op].kind, op = n->op;
  int elementwise = kind == TORC__OPK_UNARY || kind == TORC__OPK_BINARY ||
                    kind == TORC__OPK_WHERE || kind == TORC__OPK_COPY;
  int rows_in0 = op == TORC__OP_conv2d || op == TORC__OP_conv2d_act ||
                 op == TORC__OP_max_pool2d || op == TORC__OP_avg_pool2d ||
                 op == TORC__OP_adaptive_avg_pool2d;
  int product = op == TORC__OP_matmul || op == TORC__OP_linear_act;
  /* batch norm on running statistics; its mean and invstd outputs [C]
   * are the same for every tile */
  const torc_norm_kparams *bp = n->params;
  int bn = op == TORC__OP_batch_norm && n->n_in == 5 &&
           n->params_size == sizeof *bp && !bp->training;
  if (!elementwise && !rows_in0 && !product && !bn)
    return 0;
  int n_ops = n->n_in + n->n_out;
  for (int k = 0; k < n_ops; k++) {
    int v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
    int c = p->cls[v];
    int varies = c == PV_ARENA || c == PV_INPUT || c == PV_INPUT_VIEW;
    /* which operands carry rows: every output; inputs by op */
    int rows = k >= n->n_in || elementwise || k == 0;
    if (product && k == 0 && p->g->values[v].ndim != 2)
      return 0;
    if (bn && k > n->n_in) {
      batch[k] = 0; /* the statistics: not read per row */
      continue;
    }
    if (varies) {
      if (!rows || !batch_value(p, v, B))
        return 0;
      batch[k] = 1;
    } else {
      const torc_tensor *t = p->t[v];
      /* a weight; or, for an elementwise op, a constant repeated over
       * the rows (an expanded bias), sliced by its shape alone */
      batch[k] = 0;
      if (t && torc_ndim(t) >= 1 && torc_shape(t)[0] == B && B > 1) {
        if (!elementwise || torc_strides(t)[0] != 0)
          return 0;
        batch[k] = 2;
      }
    }
  }
  return 1;
}

/* Decides the tile and rewrites the plan's geometry for it (after
 * detach: the plan's own values). No tiling when some node is not
 * tileable, when the result is not an intermediate carrying the batch,
 * or when the whole batch already fits the target. -1 out of memory. */
static int tile(torc_plan *p) {
  torc_graph *g = &p->own;
  if (p->g != g || g->output < 0 || p->cls[g->output] != PV_ARENA ||
      g->values[g->output].ndim < 1)
    return 0;
  int64_t B = g->values[g->output].shape[0];
  if (B <= TILE_MIN_ROWS)
    return 0;
  p->is_batch = torc__calloc((size_t)p->n_values + 1, 1);
  if (p->is_batch == NULL)
    return -1;
  int ok = batch_value(p, g->output, B);
  for (int i = 0; i < p->n_nodes && ok; i++) {
    const pnode *n = &p->nodes[i];
    unsigned char b[TORC__KCALL_MAX_IN + TORC__KCALL_MAX_OUT] = {0};
    ok = node_tileable(p, n, B, b);
    for (int k = 0; ok && k < n->n_in + n->n_out; k++) {
      int v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
      p->is_batch[v] |= b[k];
    }
  }
  int64_t row_bytes = 0;
  for (int v = 0; v < g->n_values && ok; v++)
    if (p->is_batch[v] == 1 && p->cls[v] == PV_ARENA && p->root[v] == v)
      row_bytes += torc__numel(g->values[v].shape, g->values[v].ndim) / B *
                   (int64_t)torc_dtype_size(g->values[v].dtype);
  int64_t rows = row_bytes > 0 ? atomic_load(&tile_target) / row_bytes : B;
  /* whole multiples of the row blocks kernels work in (oneDNN's chunks of
   * 32 images, SIMD widths) */
  int64_t align = rows >= 4 * TILE_ALIGN_ROWS ? TILE_ALIGN_ROWS : TILE_MIN_ROWS;
  rows = rows / align * align;
  if (!ok || rows >= B) {
    torc__free(p->is_batch);
    p->is_batch = NULL;
    return 0;
  }
  if (rows < TILE_MIN_ROWS)
    rows = TILE_MIN_ROWS;
  /* inputs become input views (a plan tensor over the caller's rows);
   * constants repeated over the rows get a view of `rows` rows */
  p->in_dim0 = torc__calloc((size_t)g->n_inputs + 1, sizeof *p->in_dim0);
  if (p->in_dim0 == NULL)
    return -1;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].input >= 0 && g->values[v].ndim >= 1)
      p->in_dim0[g->values[v].input] = g->values[v].shape[0];
  for (int v = 0; v < p->n_values; v++) {
    if (!p->is_batch[v])
      continue;
    if (v < g->n_values) {
      gvalue *gv = &g->values[v];
      if (p->cls[v] == PV_INPUT) {
        /* a loaded graph keeps no strides for an input: contiguous */
        int known = 0;
        for (int d = 0; d < gv->ndim; d++)
          known |= gv->strides[d] != 0;
        if (!known)
          torc__contiguous_strides(gv->shape, gv->ndim, gv->strides);
        p->cls[v] = PV_INPUT_VIEW;
      }
      gv->shape[0] = rows;
    }
    if (p->is_batch[v] == 2) {
      torc_tensor *t = p->t[v], *r = NULL;
      int64_t shape[TORC_MAX_DIMS];
      memcpy(shape, torc_shape(t), (size_t)torc_ndim(t) * sizeof shape[0]);
      shape[0] = rows;
      r = torc__view_of(t, shape, torc_strides(t), torc_ndim(t),
                        torc_storage_offset(t));
      if (r == NULL)
        return -1;
      torc_release(t);
      p->t[v] = r;
    }
  }
  p->tile = rows;
  p->batch = B;
  return 1;
}

/* Sets dim 0 of every row-carrying tensor to n rows (a tile's). */
static void tile_rows(torc_plan *p, int64_t n) {
  for (int v = 0; v < p->n_values; v++)
    if (p->is_batch[v] && p->t[v])
      p->t[v]->shape[0] = n;
}

/* ---- building ---- */

/* Each value's class, root and, for the traced tensors, its tensor. */
static torc_status classify(torc_plan *p) {
  const torc_graph *g = p->g;
  for (int v = 0; v < g->n_values; v++) {
    const gvalue *gv = &g->values[v];
    /* A node's output that is a strided part of a buffer no value of the
     * trace holds (the first piece a cat along a later dim writes): the
     * arena would give it a buffer of its own shape, and the pieces
     * written next to it would land outside. */
    if (gv->t && gv->produced && gv->base < 0 && gv->input < 0 &&
        gv->name == NULL && !torc__graph_contiguous_value(gv))
      return torc_set_error(TORC_ERR_INVALID,
                            "torc_plan_new: value %%%d is written as a "
                            "strided part of a buffer the trace holds no "
                            "value for (a cat along a later dim); run the "
                            "module eagerly",
                            v);
    int r = root_of(g, v);
    p->root[v] = r;
    p->slot[v] = -1;
    const gvalue *rv = &g->values[r];
    if (gv->input >= 0)
      p->cls[v] = PV_INPUT;
    else if (rv->input >= 0)
      p->cls[v] = PV_INPUT_VIEW;
    else if (rv->produced && rv->name == NULL)
      p->cls[v] = PV_ARENA;
    else
      p->cls[v] = PV_CONST;
    if (p->cls[v] == PV_CONST && gv->t)
      p->t[v] = torc_retain(gv->t);
    else if (p->cls[v] == PV_CONST && r != v && rv->t) /* a loaded view */
      p->t[v] = tensor_over(rv->t, gv, 0,
                            gv->offset - rv->offset +
                                torc_storage_offset(rv->t));
    if (p->cls[v] == PV_CONST && p->t[v] == NULL)
      return torc_set_error(TORC_ERR_INVALID,
                            "torc_plan_new: value %%%d is a constant the "
                            "graph holds no tensor for; run it with "
                            "torc_graph_run",
                            v);
    if (r != v && p->cls[v] != PV_CONST && p->cls[v] != PV_INPUT &&
        reach_bytes(gv, rv) < 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "torc_plan_new: value %%%d views its storage "
                            "from before its base or with negative "
                            "strides; run the graph with torc_graph_run",
                            v);
  }
  return TORC_OK;
}

/* Whether the result can be written by its node straight into the
 * caller's tensor: an intermediate no other planned value views. */
static int result_direct(const torc_plan *p) {
  int o = p->g->output;
  if (p->cls[o] != PV_ARENA || p->root[o] != o)
    return 0;
  for (int i = 0; i < p->n_nodes; i++) {
    const pnode *n = &p->nodes[i];
    for (int k = 0; k < n->n_in + n->n_out; k++) {
      int v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
      if (v != o && p->root[v] == o)
        return 0;
    }
  }
  return 1;
}

/* Whether node n may write its output into its input's slot: an
 * elementwise unary op on an intermediate of the same dtype and size that
 * dies here (last == i: no view of it is read later either). */
static int in_place_ok(const torc_plan *p, const pnode *n, int i,
                       const int *first, const int *last) {
  if (n->op < 0 || torc__ops[n->op].kind != TORC__OPK_UNARY || n->n_in != 1 ||
      n->n_out != 1)
    return 0;
  int a = n->in[0], b = n->out[0];
  if (a >= p->g->n_values || p->cls[a] != PV_ARENA || p->root[a] != a ||
      p->cls[b] != PV_ARENA || p->root[b] != b || last[a] != i || first[b] != i || a == b)
    return 0;
  const gvalue *av = &p->g->values[a], *bv = &p->g->values[b];
  return av->dtype == bv->dtype && av->ndim == bv->ndim &&
         memcmp(av->shape, bv->shape, (size_t)av->ndim * sizeof(int64_t)) == 0;
}

/* Liveness of the arena's roots and a slot for each; the arena's size. */
static torc_status assign_slots(torc_plan *p) {
  int nv = p->n_values;
  int *first = torc__malloc((size_t)nv * 3 * sizeof(int) + 1);
  int64_t *size = torc__calloc((size_t)nv + 1, sizeof *size);
  if (first == NULL || size == NULL) {
    torc__free(first), torc__free(size);
    return plan_oom();
  }
  int *last = first + nv, *moved = last + nv;
  for (int v = 0; v < nv; v++)
    first[v] = -1, last[v] = -1, moved[v] = 0;
  for (int i = 0; i < p->n_nodes; i++) {
    const pnode *n = &p->nodes[i];
    for (int k = 0; k < n->n_in + n->n_out; k++) {
      int v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
      int r = p->root[v];
      if (p->cls[v] != PV_ARENA)
        continue;
      if (k >= n->n_in && first[r] < 0)
        first[r] = i;
      last[r] = i;
      /* a root is made contiguous (a loaded graph keeps no strides for
       * it); a view reaches as far as its strides take it */
      const gvalue *gv = &p->g->values[v];
      int64_t b = v == r ? torc__numel(gv->shape, gv->ndim) *
                               (int64_t)torc_dtype_size(gv->dtype)
                         : reach_bytes(gv, &p->g->values[r]);
      if (b > size[r])
        size[r] = b;
    }
  }
  int o = p->g->output;
  if (p->cls[o] == PV_ARENA)
    last[p->root[o]] = p->n_nodes; /* copied out after the last node */
  slots s = {0};
  torc_status st = TORC_OK;
  for (int i = 0; i < p->n_nodes && st == TORC_OK; i++) {
    const pnode *n = &p->nodes[i];
    int inplace = in_place_ok(p, n, i, first, last);
    for (int k = 0; k < n->n_out; k++) {
      int r = p->root[n->out[k]];
      if (p->cls[r] != PV_ARENA || first[r] != i || p->slot[r] >= 0)
        continue;
      size[r] = (size[r] + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
      if (inplace && size[r] == size[n->in[0]]) {
        p->slot[r] = p->slot[n->in[0]];
        moved[n->in[0]] = 1;
        p->n_inplace++;
      } else {
        p->slot[r] = slot_take(&s, size[r]);
      }
    }
    for (int k = 0; k < n->n_in + n->n_out; k++) {
      int v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
      int r = p->root[v];
      if (p->cls[r] == PV_ARENA && last[r] == i && !moved[r] &&
          p->slot[r] >= 0) {
        if (slot_give(&s, p->slot[r], size[r]))
          st = plan_oom();
        moved[r] = 1; /* given back once */
      }
    }
  }
  p->arena_bytes = (size_t)s.top;
  torc__free(s.free);
  torc__free(first), torc__free(size);
  return st;
}

/* The device of the graph's inputs and intermediates, into p->dev. */
static torc_status plan_device(torc_plan *p) {
  int found = 0;
  p->dev = TORC_CPU;
  for (int v = 0; v < p->g->n_values; v++)
    if (p->cls[v] == PV_ARENA || p->cls[v] == PV_INPUT ||
        p->cls[v] == PV_OUTPUT) {
      const torc_tensor *t = p->g->values[v].t;
      /* a loaded graph holds no tensor for these: its device */
      torc_device d = t ? torc_device_of(t) : p->g->device;
      if (found && !same_dev(d, p->dev))
        return torc_set_error(TORC_ERR_INVALID,
                              "torc_plan_new: the graph's values are on "
                              "more than one device; plan a graph on one "
                              "device, or run it with torc_graph_run");
      p->dev = d, found = 1;
    }
  return TORC_OK;
}

/* The arena and the tensors over it, and the input views' tensors (over
 * the arena until a call points them at the input): made by the first
 * run, so that the graph's own tensors can be freed before. */
static torc_status make_tensors(torc_plan *p, const char *fn) {
  int64_t bytes = p->arena_bytes ? (int64_t)p->arena_bytes : SLOT_ALIGN;
  p->arena = torc__empty(&bytes, 1, TORC_U8, p->dev);
  for (int v = 0; v < p->g->n_values && p->arena; v++) {
    const gvalue *gv = &p->g->values[v];
    int r = p->root[v];
    if (p->cls[v] == PV_INPUT_VIEW) {
      p->t[v] = tensor_over(p->arena, gv, 0, 0);
    } else if (p->cls[v] == PV_ARENA && p->slot[r] >= 0) {
      const gvalue *rv = &p->g->values[r];
      int64_t es = (int64_t)torc_dtype_size(gv->dtype);
      int64_t off = (p->slot[r] + gv->offset * es -
                     rv->offset * (int64_t)torc_dtype_size(rv->dtype)) / es;
      p->t[v] = tensor_over(p->arena, gv, v == r, off);
    } else {
      continue;
    }
    if (p->t[v] == NULL)
      break;
  }
  if (p->arena && p->tile) {
    /* the result's rows of a tile, over the caller's tensor per call */
    gvalue o = p->g->values[p->g->output];
    p->out_rows = tensor_over(p->arena, &o, 1, 0);
  }
  int ok = p->arena != NULL && (p->tile == 0 || p->out_rows != NULL);
  for (int v = 0; v < p->g->n_values && ok; v++)
    ok = p->t[v] != NULL || (p->cls[v] != PV_INPUT_VIEW &&
                             !(p->cls[v] == PV_ARENA && p->slot[p->root[v]] >= 0));
  if (ok)
    return TORC_OK;
  for (int v = 0; v < p->g->n_values; v++)
    if (p->cls[v] == PV_INPUT_VIEW || p->cls[v] == PV_ARENA) {
      torc_release(p->t[v]);
      p->t[v] = NULL;
    }
  torc_release(p->out_rows);
  p->out_rows = NULL;
  torc_release(p->arena);
  p->arena = NULL;
  return torc_set_error(TORC_ERR_OOM,
                        "%s: out of memory for the plan's arena of %zu "
                        "bytes",
                        fn, p->arena_bytes);
}

/* Copies the graph's nodes into the plan. */
static torc_status copy_nodes(torc_plan *p) {
  const torc_graph *g = p->g;
  p->nodes = torc__calloc((size_t)g->n_nodes + 1, sizeof *p->nodes);
  if (p->nodes == NULL)
    return plan_oom();
  for (int i = 0; i < g->n_nodes; i++) {
    const torc__gnode *gn = &g->nodes[i];
    pnode *n = &p->nodes[i];
    n->op = gn->op;
    n->kdtype = gn->kdtype;
    n->params = gn->params;
    n->params_size = gn->params_size;
    n->n_in = gn->n_in;
    n->n_out = gn->n_out;
    memcpy(n->in, gn->in, (size_t)gn->n_in * sizeof(int));
    memcpy(n->out, gn->out, (size_t)gn->n_out * sizeof(int));
  }
  p->n_nodes = g->n_nodes;
  return TORC_OK;
}

/* The inference rewrites: batch norm folded where legal. */
static torc_status rewrite(torc_plan *p) {
  int *readers = torc__malloc(((size_t)p->n_values + 1) * sizeof(int));
  if (readers == NULL)
    return plan_oom();
  for (int j = 0; j < p->n_nodes; j++) {
    if (p->nodes[j].op != TORC__OP_batch_norm)
      continue;
    count_readers(p, readers);
    int r = fold_bn(p, j, readers);
    if (r < 0) {
      torc__free(readers);
      return plan_oom();
    }
    if (r > 0) {
      p->n_folded++;
      /* readers was sized for the values before the fold */
      int *nr = torc__realloc(readers, ((size_t)p->n_values + 1) * sizeof(int));
      if (nr == NULL) {
        torc__free(readers);
        return plan_oom();
      }
      readers = nr;
    }
  }
  torc__free(readers);
  compact(p);
  return TORC_OK;
}

/* Copies what a run reads of the graph (the values' geometry, the
 * inputs, the result, the params bytes) into the plan, so that the
 * graph may be freed. */
static torc_status detach(torc_plan *p) {
  const torc_graph *g = p->g;
  size_t bytes = 0;
  for (int i = 0; i < p->n_nodes; i++)
    bytes += p->nodes[i].params_size;
  p->own.values = torc__malloc(((size_t)g->n_values + 1) * sizeof(gvalue));
  p->params = torc__malloc(bytes + 1);
  if (p->own.values == NULL || p->params == NULL)
    return plan_oom();
  memcpy(p->own.values, g->values, (size_t)g->n_values * sizeof(gvalue));
  for (int v = 0; v < g->n_values; v++) {
    p->own.values[v].t = NULL;
    p->own.values[v].name = NULL;
  }
  p->own.n_values = g->n_values;
  p->own.n_inputs = g->n_inputs;
  p->own.output = g->output;
  char *at = p->params;
  for (int i = 0; i < p->n_nodes; i++) {
    pnode *n = &p->nodes[i];
    if (n->params_size)
      memcpy(at, n->params, n->params_size);
    n->params = at;
    at += n->params_size;
  }
  p->g = &p->own;
  return TORC_OK;
}

torc_status torc_plan_new(const torc_graph *g, int flags, torc_plan **out) {
  if (out)
    *out = NULL;
  if (g == NULL || out == NULL)
    return torc__null_input("torc_plan_new");
  int known =
      TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE | TORC_PLAN_FREEZE | TORC_PLAN_TILE;
  if (flags & ~known)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_plan_new: unknown flags 0x%x; pass 0 or "
                          "TORC_PLAN_FOLD_BN, TORC_PLAN_FUSE, "
                          "TORC_PLAN_FREEZE and TORC_PLAN_TILE or'ed",
                          (unsigned)(flags & ~known));
  torc_plan *p = torc__calloc(1, sizeof *p);
  size_t nv = (size_t)g->n_values + 1;
  if (p == NULL)
    return plan_oom();
  p->g = g;
  p->n_values = g->n_values;
  p->cls = torc__malloc(nv * sizeof *p->cls);
  p->root = torc__malloc(nv * sizeof *p->root);
  p->slot = torc__malloc(nv * sizeof *p->slot);
  p->t = torc__calloc(nv, sizeof *p->t);
  torc_status st = p->cls && p->root && p->slot && p->t ? TORC_OK : plan_oom();
  if (st == TORC_OK)
    st = classify(p);
  if (st == TORC_OK)
    st = copy_nodes(p);
  if (st == TORC_OK)
    st = plan_device(p);
  if (st == TORC_OK && (flags & TORC_PLAN_FOLD_BN))
    st = rewrite(p);
  if (st == TORC_OK && (flags & TORC_PLAN_FUSE))
    st = fuse(p, (flags & TORC_PLAN_FREEZE) != 0);
  if (st == TORC_OK)
    st = detach(p);
  if (st == TORC_OK && (flags & TORC_PLAN_TILE) && tile(p) < 0)
    st = plan_oom();
  if (st == TORC_OK) {
    p->direct_out = !p->tile && result_direct(p);
    if (p->direct_out)
      p->cls[p->g->output] = PV_OUTPUT;
    st = assign_slots(p);
  }
  if (st) {
    torc_plan_free(p);
    return st;
  }
  *out = p;
  return TORC_OK;
}

void torc_plan_free(torc_plan *p) {
  if (p == NULL)
    return;
  if (p->t)
    for (int v = 0; v < p->n_values; v++)
      torc_release(p->t[v]);
  torc_release(p->arena);
  torc__free(p->cls), torc__free(p->root), torc__free(p->slot);
  torc__free(p->t), torc__free(p->nodes);
  torc_release(p->out_rows);
  torc__free(p->own.values), torc__free(p->params), torc__free(p->fparams);
  torc__free(p->is_batch), torc__free(p->in_dim0);
  torc__free(p);
}

size_t torc_plan_arena_bytes(const torc_plan *p) {
  return p ? p->arena_bytes : 0;
}

int torc_plan_n_nodes(const torc_plan *p) { return p ? p->n_nodes : 0; }

int torc_plan_n_in_place(const torc_plan *p) { return p ? p->n_inplace : 0; }

int torc_plan_n_folded(const torc_plan *p) { return p ? p->n_folded : 0; }

int torc_plan_n_fused(const torc_plan *p) { return p ? p->n_fused : 0; }

int64_t torc_plan_tile_rows(const torc_plan *p) { return p ? p->tile : 0; }

/* ---- running ---- */

/* The result's value as the caller sees it: the whole batch's rows. */
static gvalue result_value(const torc_plan *p) {
  gvalue o = p->g->values[p->g->output];
  if (p->tile)
    o.shape[0] = p->batch;
  return o;
}

static int same_shape(const gvalue *v, const torc_tensor *t) {
  return torc_ndim(t) == v->ndim &&
         memcmp(torc_shape(t), v->shape, (size_t)v->ndim * sizeof(int64_t)) == 0;
}

/* Checks the inputs against the traced ones. */
static torc_status check_inputs(const torc_plan *p,
                                const torc_tensor *const *inputs) {
  for (int v = 0; v < p->g->n_values; v++) {
    const gvalue *gv = &p->g->values[v];
    if (gv->input < 0)
      continue;
    const torc_tensor *t = inputs[gv->input];
    if (t == NULL)
      return torc__null_input("torc_plan_run");
    int64_t shape[TORC_MAX_DIMS];
    memcpy(shape, gv->shape, (size_t)gv->ndim * sizeof shape[0]);
    if (p->in_dim0 && gv->ndim >= 1)
      shape[0] = p->in_dim0[gv->input];
    int ok = torc_dtype_of(t) == gv->dtype && torc_ndim(t) == gv->ndim &&
             memcmp(torc_shape(t), shape,
                    (size_t)gv->ndim * sizeof(int64_t)) == 0;
    /* views of the input are read through the traced strides (a loaded
     * graph keeps none: then the traced input was contiguous) */
    int64_t want_st[TORC_MAX_DIMS];
    int known = 0;
    for (int d = 0; d < gv->ndim; d++)
      known |= gv->strides[d] != 0;
    if (known)
      memcpy(want_st, gv->strides, (size_t)gv->ndim * sizeof want_st[0]);
    else
      torc__contiguous_strides(shape, gv->ndim, want_st);
    for (int d = 0; ok && d < gv->ndim; d++)
      ok = shape[d] <= 1 || torc_strides(t)[d] == want_st[d];
    if (!ok) {
      char want[160], got[160];
      torc__shape_str(shape, gv->ndim, want, sizeof want);
      torc__shape_str(torc_shape(t), torc_ndim(t), got, sizeof got);
      return torc_set_error(TORC_ERR_SHAPE,
                            "torc_plan_run: input %d is %s%s%s but the "
                            "plan was built for %s%s; pass a contiguous "
                            "input of the traced dtype and shape, or run "
                            "the module eagerly for this one",
                            gv->input, torc_dtype_name(torc_dtype_of(t)), got,
                            torc_is_contiguous(t) ? "" : " (not contiguous)",
                            torc_dtype_name(gv->dtype), want);
    }
  }
  return TORC_OK;
}

/* Points the input views at the inputs' storages (or, with inputs NULL,
 * back at the arena's, so that no input is held between calls). */
static void point_at(torc_tensor *t, const torc_tensor *src, int64_t off) {
  torc_storage *old = t->storage;
  atomic_fetch_add(&src->storage->refcount, 1);
  t->storage = src->storage;
  t->offset = off;
  torc__storage_release(old);
}

static void point_input_views(torc_plan *p, const torc_tensor *const *inputs,
                              int64_t row0) {
  const torc_graph *g = p->g;
  for (int v = 0; v < g->n_values; v++) {
    if (p->cls[v] != PV_INPUT_VIEW)
      continue;
    const gvalue *gv = &g->values[v], *rv = &g->values[p->root[v]];
    const torc_tensor *src = inputs ? inputs[rv->input] : p->arena;
    int64_t off = 0;
    if (inputs)
      off = gv->offset - rv->offset + src->offset + row0 * src->strides[0];
    point_at(p->t[v], src, off);
  }
}

/* Runs the plan's nodes once. */
static torc_status run_nodes(torc_plan *p) {
  torc_status st = TORC_OK;
  for (int i = 0; i < p->n_nodes && st == TORC_OK; i++) {
    const pnode *n = &p->nodes[i];
    const torc_tensor *in[TORC__KCALL_MAX_IN];
    torc_tensor *out[TORC__KCALL_MAX_OUT];
    for (int k = 0; k < n->n_in; k++)
      in[k] = p->t[n->in[k]];
    for (int k = 0; k < n->n_out; k++)
      out[k] = p->t[n->out[k]];
    st = torc__kernel_call(n->op, n->kdtype, in, n->n_in, out, n->n_out,
                           n->params, n->params_size);
  }
  return st;
}

/* Runs a tiled plan tile by tile, each tile's result copied into its
 * rows of dst. */
static torc_status run_tiles(torc_plan *p, const torc_tensor *const *inputs,
                             torc_tensor *dst) {
  torc_status st = TORC_OK;
  int64_t row = dst->ndim > 0 && p->batch > 0 ? torc_numel(dst) / p->batch
                                                : 0;
  for (int64_t r0 = 0; r0 < p->batch && st == TORC_OK; r0 += p->tile) {
    int64_t n = p->batch - r0 < p->tile ? p->batch - r0 : p->tile;
    tile_rows(p, n);
    point_input_views(p, inputs, r0);
    p->out_rows->shape[0] = n;
    point_at(p->out_rows, dst, dst->offset + r0 * row);
    st = run_nodes(p);
    if (st == TORC_OK)
      st = torc_copy_(p->out_rows, p->t[p->g->output]);
  }
  tile_rows(p, p->tile);
  point_at(p->out_rows, p->arena, 0);
  return st;
}

static torc_status run(torc_plan *p, const torc_tensor *const *inputs,
                       int n_in, torc_tensor *dst, const char *fn) {
  const torc_graph *g = p->g;
  if (n_in != g->n_inputs)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: %d inputs given; the plan takes %d", fn, n_in,
                          g->n_inputs);
  torc_status st = check_inputs(p, inputs);
  if (st == TORC_OK && p->arena == NULL)
    st = make_tensors(p, fn);
  if (st)
    return st;
  for (int v = 0; v < g->n_values; v++)
    if (p->cls[v] == PV_INPUT)
      p->t[v] = (torc_tensor *)inputs[g->values[v].input];
  if (p->tile) {
    st = run_tiles(p, inputs, dst);
  } else {
    point_input_views(p, inputs, 0);
    if (p->direct_out)
      p->t[g->output] = dst;
    st = run_nodes(p);
    if (st == TORC_OK && !p->direct_out)
      st = torc_copy_(dst, p->t[g->output]);
  }
  point_input_views(p, NULL, 0);
  for (int v = 0; v < g->n_values; v++)
    if (p->cls[v] == PV_INPUT || p->cls[v] == PV_OUTPUT)
      p->t[v] = NULL;
  return st;
}

torc_status torc_plan_run(torc_plan *p, const torc_tensor *const *inputs,
                          int n_in, torc_tensor **out) {
  if (out)
    *out = NULL;
  if (p == NULL || out == NULL || (n_in > 0 && inputs == NULL))
    return torc__null_input("torc_plan_run");
  gvalue r = result_value(p);
  const gvalue *o = &r;
  torc_tensor *y = torc__empty(o->shape, o->ndim, o->dtype, p->dev);
  if (y == NULL)
    return torc_set_error(TORC_ERR_OOM, "torc_plan_run: out of memory for "
                                        "the result");
  torc_status st = run(p, inputs, n_in, y, "torc_plan_run");
  if (st) {
    torc_release(y);
    return st;
  }
  *out = y;
  return TORC_OK;
}

torc_status torc_plan_run_into(torc_plan *p, const torc_tensor *const *inputs,
                               int n_in, torc_tensor *out) {
  if (p == NULL || out == NULL || (n_in > 0 && inputs == NULL))
    return torc__null_input("torc_plan_run_into");
  gvalue r = result_value(p);
  const gvalue *o = &r;
  if (torc_dtype_of(out) != o->dtype || !same_shape(o, out) ||
      !torc_is_contiguous(out) ||
      !same_dev(torc_device_of(out), p->dev)) {
    char want[160], got[160];
    torc__shape_str(o->shape, o->ndim, want, sizeof want);
    torc__shape_str(torc_shape(out), torc_ndim(out), got, sizeof got);
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_plan_run_into: out is %s%s%s but the plan "
                          "gives a contiguous %s%s on its device; pass a "
                          "contiguous tensor of that dtype and shape",
                          torc_dtype_name(torc_dtype_of(out)), got,
                          torc_is_contiguous(out) ? "" : " (not contiguous)",
                          torc_dtype_name(o->dtype), want);
  }
  return run(p, inputs, n_in, out, "torc_plan_run_into");
}
