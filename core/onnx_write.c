/* core/onnx_write.c — torc_onnx_export: a module's forward, traced
 * (torc_trace, core/graph_internal.h), written as an ONNX ModelProto with
 * protobuf-c. Each kernel call becomes one ONNX node or a few; parameters
 * and buffers become initializers under their state-dict names; views the
 * forward made without a kernel become Reshape, Transpose or Expand. With
 * a dynamic batch the forward is traced at two batch sizes, and the dims
 * whose size changed are the ones written as "batch" (inputs, output) or
 * -1 (Reshape targets). docs/export.md has the op table. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "graph_internal.h"
#include "onnx_internal.h"
#include "torc/module.h"
#include "torc/runtime.h"

/* ---- an arena for the messages: one free at the end; running out of
 * memory jumps back to the exporter's entry ---- */

typedef struct block {
  struct block *next;
  max_align_t data[];
} block;

typedef struct op_gap {
  int node;
  const char *why;
} op_gap;

typedef struct {
  block *blocks;
  jmp_buf oom;
  const torc_graph *g;
  int opset, dynamic;
  uint32_t *bmask;   /* per value: the dims that follow the batch */
  int *uses;         /* per value: how many node inputs read it */
  const char **name; /* per value: its ONNX name once defined */
  const char **src;  /* per value: what a copy node wrote into it */
  Onnx__NodeProto **nodes;
  size_t n_nodes, cap_nodes;
  Onnx__TensorProto **inits;
  size_t n_inits, cap_inits;
  int n_tmp;
  int cur; /* the graph node being written */
  op_gap *gaps;
  int n_gaps, cap_gaps;
} wr;

static void *alloc(wr *w, size_t n) {
  block *b = torc__calloc(1, sizeof *b + n + 1);
  if (b == NULL)
    longjmp(w->oom, 1);
  b->next = w->blocks;
  w->blocks = b;
  return b->data;
}

static void arena_free(wr *w) {
  while (w->blocks) {
    block *b = w->blocks;
    w->blocks = b->next;
    torc__free(b);
  }
}

static char *str(wr *w, const char *fmt, ...) TORC_PRINTF(2, 3);
static char *str(wr *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = alloc(w, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

/* Appends p to the list *v of *n (capacity *cap). */
static void push(wr *w, void ***v, size_t *n, size_t *cap, void *p) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 32;
    void **nv = alloc(w, c * sizeof *nv);
    if (*n)
      memcpy(nv, *v, *n * sizeof *nv);
    *v = nv;
    *cap = c;
  }
  (*v)[(*n)++] = p;
}

/* Records that graph node w->cur cannot be written, and why. */
static void gap(wr *w, const char *why) {
  if (w->n_gaps == w->cap_gaps) {
    int c = w->cap_gaps ? 2 * w->cap_gaps : 8;
    op_gap *g = alloc(w, (size_t)c * sizeof *g);
    if (w->n_gaps)
      memcpy(g, w->gaps, (size_t)w->n_gaps * sizeof *g);
    w->gaps = g;
    w->cap_gaps = c;
  }
  w->gaps[w->n_gaps].node = w->cur;
  w->gaps[w->n_gaps++].why = why;
}

/* ---- dtypes and tensors ---- */

/* ONNX's TensorProto.DataType for dt: the inverse of torc__onnx_dtype. */
static int onnx_type(torc_dtype dt) {
  for (int t = 1; t <= 16; t++) {
    torc_dtype d;
    if (torc__onnx_dtype(t, &d) && d == dt)
      return t;
  }
  return 0;
}

static Onnx__TensorProto *tensor_proto(wr *w, const char *name, torc_dtype dt,
                                       const int64_t *dims, int ndim,
                                       const void *data, size_t nbytes) {
  Onnx__TensorProto *tp = alloc(w, sizeof *tp);
  onnx__tensor_proto__init(tp);
  tp->name = str(w, "%s", name);
  tp->has_data_type = 1;
  tp->data_type = onnx_type(dt);
  tp->n_dims = (size_t)ndim;
  tp->dims = alloc(w, (size_t)(ndim + 1) * sizeof *tp->dims);
  if (ndim)
    memcpy(tp->dims, dims, (size_t)ndim * sizeof *dims);
  tp->has_raw_data = 1;
  tp->raw_data.len = nbytes;
  tp->raw_data.data = alloc(w, nbytes);
  memcpy(tp->raw_data.data, data, nbytes);
  return tp;
}

static void add_init(wr *w, Onnx__TensorProto *tp) {
  push(w, (void ***)&w->inits, &w->n_inits, &w->cap_inits, tp);
}

static int has_init(const wr *w, const char *name) {
  for (size_t i = 0; i < w->n_inits; i++)
    if (strcmp(w->inits[i]->name, name) == 0)
      return 1;
  return 0;
}

/* A tensor's elements (row-major) as the initializer `name`; NULL after
 * recording a gap when they cannot be read. */
static const char *init_from(wr *w, const char *name, const torc_tensor *t) {
  if (has_init(w, name))
    return name;
  size_t nbytes = (size_t)torc_numel(t) * torc_dtype_size(torc_dtype_of(t));
  void *data = alloc(w, nbytes);
  if (onnx_type(torc_dtype_of(t)) == 0 ||
      torc_to_host(t, data, nbytes) != TORC_OK) {
    gap(w, "a tensor whose values cannot be read or written to ONNX");
    return NULL;
  }
  add_init(w, tensor_proto(w, name, torc_dtype_of(t), torc_shape(t),
                           torc_ndim(t), data, nbytes));
  return name;
}

/* A fresh value name. */
static const char *tmp(wr *w) { return str(w, "tmp%d", w->n_tmp++); }

/* A constant initializer of n int64s: 1-D, or a scalar when scalar. */
static const char *const_i64(wr *w, const int64_t *v, int n, int scalar) {
  const char *name = str(w, "const%d", w->n_tmp++);
  int64_t d = n;
  add_init(w, tensor_proto(w, name, TORC_I64, &d, scalar ? 0 : 1, v,
                           (size_t)n * sizeof *v));
  return name;
}

/* A scalar constant of dtype dt holding v (floats and integers; f16 and
 * bf16 rounded from f32). */
static const char *const_scalar(wr *w, double v, torc_dtype dt) {
  unsigned char buf[8];
  switch (dt) {
  case TORC_F32: {
    float f = (float)v;
    memcpy(buf, &f, 4);
    break;
  }
  case TORC_F64:
    memcpy(buf, &v, 8);
    break;
  case TORC_F16:
  case TORC_BF16: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t h;
    if (dt == TORC_BF16) {
      h = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    } else {
      uint32_t sign = (u >> 16) & 0x8000u;
      int e = (int)((u >> 23) & 0xff) - 127 + 15;
      uint32_t m = u & 0x7fffffu;
      if (e >= 31)
        h = (uint16_t)(sign | 0x7c00u);
      else if (e <= 0)
        h = (uint16_t)sign; /* tiny constants flush to zero */
      else
        h = (uint16_t)(sign | ((uint32_t)e << 10) |
                       ((m + 0x1000u) >> 13));
    }
    memcpy(buf, &h, 2);
    break;
  }
  case TORC_I32: {
    int32_t i = (int32_t)v;
    memcpy(buf, &i, 4);
    break;
  }
  case TORC_I64: {
    int64_t i = (int64_t)v;
    memcpy(buf, &i, 8);
    break;
  }
  default: {
    buf[0] = (unsigned char)(v != 0);
    break;
  }
  }
  const char *name = str(w, "const%d", w->n_tmp++);
  add_init(w, tensor_proto(w, name, dt, NULL, 0, buf, torc_dtype_size(dt)));
  return name;
}

/* ---- nodes ---- */

static Onnx__NodeProto *node(wr *w, const char *op, int n_in,
                             const char *const *in, const char *out) {
  Onnx__NodeProto *n = alloc(w, sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = str(w, "%s", op);
  const char *mod = w->g->nodes[w->cur].module;
  n->name = str(w, "%s%s%s_%zu", mod, *mod ? "/" : "", op, w->n_nodes);
  n->n_input = (size_t)n_in;
  n->input = alloc(w, (size_t)(n_in + 1) * sizeof *n->input);
  for (int i = 0; i < n_in; i++)
    n->input[i] = (char *)(in[i] ? in[i] : "");
  n->n_output = 1;
  n->output = alloc(w, sizeof *n->output);
  n->output[0] = (char *)out;
  push(w, (void ***)&w->nodes, &w->n_nodes, &w->cap_nodes, n);
  return n;
}

static Onnx__AttributeProto *attr(wr *w, Onnx__NodeProto *n,
                                  const char *name, int type) {
  Onnx__AttributeProto *a = alloc(w, sizeof *a);
  onnx__attribute_proto__init(a);
  a->name = str(w, "%s", name);
  a->has_type = 1;
  a->type = type;
  Onnx__AttributeProto **v =
      alloc(w, (n->n_attribute + 1) * sizeof *n->attribute);
  if (n->n_attribute)
    memcpy(v, n->attribute, n->n_attribute * sizeof *v);
  v[n->n_attribute++] = a;
  n->attribute = v;
  return a;
}

static void attr_i(wr *w, Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *a =
      attr(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = v;
}

static void attr_f(wr *w, Onnx__NodeProto *n, const char *name, double v) {
  Onnx__AttributeProto *a =
      attr(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = 1;
  a->f = (float)v;
}

static void attr_s(wr *w, Onnx__NodeProto *n, const char *name,
                   const char *v) {
  Onnx__AttributeProto *a =
      attr(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  a->has_s = 1;
  a->s.data = (uint8_t *)str(w, "%s", v);
  a->s.len = strlen(v);
}

static void attr_ints(wr *w, Onnx__NodeProto *n, const char *name,
                      const int64_t *v, int k) {
  Onnx__AttributeProto *a =
      attr(w, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->n_ints = (size_t)k;
  a->ints = alloc(w, (size_t)(k + 1) * sizeof *a->ints);
  memcpy(a->ints, v, (size_t)k * sizeof *v);
}

/* One-input and two-input nodes into a fresh name (or `out`). */
static const char *op1(wr *w, const char *op, const char *x,
                       const char *out) {
  out = out ? out : tmp(w);
  node(w, op, 1, &x, out);
  return out;
}

static const char *op2(wr *w, const char *op, const char *a, const char *b,
                       const char *out) {
  const char *in[2] = {a, b};
  out = out ? out : tmp(w);
  node(w, op, 2, in, out);
  return out;
}

static const char *cast(wr *w, const char *x, torc_dtype from,
                        torc_dtype to) {
  if (from == to)
    return x;
  const char *out = tmp(w);
  attr_i(w, node(w, "Cast", 1, &x, out), "to", onnx_type(to));
  return out;
}

/* ---- values ---- */

static const torc__gvalue *val(const wr *w, int id) {
  return &w->g->values[id];
}

/* The named tensor `name` of the module. */
static const torc_tensor *named(const wr *w, const char *name) {
  for (int i = 0; i < w->g->n_named; i++)
    if (strcmp(w->g->named[i].name, name) == 0)
      return w->g->named[i].tensor;
  return NULL;
}

static int64_t numel(const int64_t *s, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++)
    p *= s[i];
  return p;
}

static int is_contig(const int64_t *shape, const int64_t *strides, int n) {
  int64_t want = 1;
  for (int i = n - 1; i >= 0; i--) {
    if (shape[i] != 1 && strides[i] != want)
      return 0;
    want *= shape[i];
  }
  return 1;
}

/* The Reshape target for a value of `shape` whose batch dims are `bm`:
 * the one batch-following dim as -1; NULL (after recording a gap) when
 * more than one dim follows the batch. */
static const char *reshape_target(wr *w, const int64_t *shape, int ndim,
                                  uint32_t bm) {
  int64_t t[TORC_MAX_DIMS];
  int nb = 0;
  for (int i = 0; i < ndim; i++) {
    t[i] = shape[i];
    if (w->dynamic && (bm >> i & 1u)) {
      t[i] = -1;
      nb++;
    }
  }
  if (nb > 1) {
    gap(w, "a reshape where more than one dim follows the batch size");
    return NULL;
  }
  return const_i64(w, t, ndim, 0);
}

static const char *reshape(wr *w, const char *x, const int64_t *shape,
                           int ndim, uint32_t bm, const char *out) {
  const char *t = reshape_target(w, shape, ndim, bm);
  return t ? op2(w, "Reshape", x, t, out) : NULL;
}

static const char *name_of(wr *w, int id);

/* The value a view chain of id starts from (id itself when it has none). */
static int group_root(const wr *w, int id) {
  while (val(w, id)->base >= 0 && val(w, id)->input < 0)
    id = val(w, id)->base;
  return id;
}

/* Value id, a contiguous view of the storage of root r that copy nodes
 * wrote in pieces (torc's concatenation), as a Concat of what they
 * copied; NULL after recording a gap when the pieces are not slices
 * along one dim that tile it. */
static const char *concat_of(wr *w, int id, int r) {
  const torc__gvalue *v = val(w, id);
  int piece[64], np = 0, axis = -1;
  int64_t start[64];
  if (!is_contig(v->shape, v->strides, v->ndim))
    goto bad;
  for (int k = 0; k < w->g->n_values; k++) {
    const torc__gvalue *p = val(w, k);
    if (k == id || !w->src[k] || group_root(w, k) != r)
      continue;
    if (np == 64 || p->ndim != v->ndim)
      goto bad;
    for (int d = 0; d < v->ndim; d++) {
      if (p->shape[d] == v->shape[d])
        continue;
      if (axis >= 0 && axis != d)
        goto bad;
      axis = d;
    }
    for (int d = 0; d < v->ndim; d++)
      if (p->shape[d] != 1 && p->strides[d] != v->strides[d])
        goto bad;
    piece[np] = k;
    start[np++] = p->offset - v->offset;
  }
  if (np == 0 || axis < 0)
    goto bad;
  /* In storage order; each starts where the one before ends. */
  for (int i = 1; i < np; i++)
    for (int j = i; j > 0 && start[j - 1] > start[j]; j--) {
      int64_t t = start[j - 1];
      start[j - 1] = start[j];
      start[j] = t;
      int q = piece[j - 1];
      piece[j - 1] = piece[j];
      piece[j] = q;
    }
  int64_t at = 0;
  const char **in = alloc(w, (size_t)np * sizeof *in);
  for (int i = 0; i < np; i++) {
    if (start[i] != at * v->strides[axis])
      goto bad;
    at += val(w, piece[i])->shape[axis];
    in[i] = w->src[piece[i]];
  }
  if (at != v->shape[axis])
    goto bad;
  const char *o = tmp(w);
  attr_i(w, node(w, "Concat", np, in, o), "axis", axis);
  return w->name[id] = o;
bad:
  gap(w, "it reads a tensor that copies assembled in a way other than a "
         "concatenation along one dim");
  return NULL;
}

/* A view (shape, strides, offset) of a root of contiguous `rshape`
 * (named `root`) as ONNX: Reshape to the layout the view's strides read,
 * Transpose to the view's order, Expand where strides are 0. `bm` are the
 * view's batch dims; `expand` 0 leaves stride-0 dims at size 1 (for a
 * reader that broadcasts). NULL after recording a gap. */
static const char *view_expr(wr *w, const char *root, const int64_t *rshape,
                             int rndim, int64_t roffset, const int64_t *shape,
                             const int64_t *strides, int ndim,
                             int64_t offset, uint32_t bm, int expand,
                             const char *out) {
  uint32_t bm_view = bm;
  if (offset != roffset) {
    gap(w, "a view at an offset into its tensor (a slice)");
    return NULL;
  }
  /* pre: the view with stride-0 dims at size 1. */
  int64_t pre[TORC_MAX_DIMS];
  int n_bcast = 0;
  for (int i = 0; i < ndim; i++) {
    pre[i] = shape[i] != 1 && strides[i] == 0 ? 1 : shape[i];
    n_bcast += pre[i] != shape[i];
    if (pre[i] != shape[i])
      bm &= ~(1u << i); /* a broadcast dim is 1 before the Expand */
  }
  if (numel(pre, ndim) != numel(rshape, rndim)) {
    gap(w, "a view that reads part of its tensor");
    return NULL;
  }
  /* The layout: the non-unit dims sorted by stride, largest first, in
   * the places the non-unit dims hold (unit dims stay where they are). */
  int perm[TORC_MAX_DIMS], pos[TORC_MAX_DIMS], srt[TORC_MAX_DIMS], k = 0;
  for (int i = 0; i < ndim; i++) {
    perm[i] = i;
    if (pre[i] != 1)
      pos[k] = srt[k] = i, k++;
  }
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && strides[srt[j - 1]] < strides[srt[j]]; j--) {
      int t = srt[j - 1];
      srt[j - 1] = srt[j];
      srt[j] = t;
    }
  for (int j = 0; j < k; j++)
    perm[pos[j]] = srt[j];
  int64_t lshape[TORC_MAX_DIMS], lstr[TORC_MAX_DIMS];
  uint32_t lbm = 0;
  int identity = 1;
  for (int i = 0; i < ndim; i++) {
    lshape[i] = pre[perm[i]];
    lstr[i] = strides[perm[i]];
    lbm |= (bm >> perm[i] & 1u) << i;
    identity &= perm[i] == i;
  }
  if (!is_contig(lshape, lstr, ndim)) {
    gap(w, "a view whose strides are not a permutation of a contiguous "
           "layout");
    return NULL;
  }
  const char *x = root;
  int same = rndim == ndim && memcmp(rshape, pre, sizeof *pre * (size_t)ndim) == 0;
  if (identity && same && (!expand || n_bcast == 0)) {
    /* nothing to do but name it */
  } else if (identity) {
    if (!same) {
      /* A reader that broadcasts takes the root itself when the view only
       * adds leading unit dims. */
      int lead = ndim - rndim;
      int skip = !expand && lead >= 0 && n_bcast > 0;
      for (int i = 0; skip && i < ndim; i++)
        skip = i < lead ? pre[i] == 1 : pre[i] == rshape[i - lead];
      if (!skip && (x = reshape(w, x, pre, ndim, bm,
                                expand && n_bcast ? NULL : out)) == NULL)
        return NULL;
    }
  } else {
    if (rndim != ndim || memcmp(rshape, lshape, sizeof *lshape * (size_t)ndim))
      if ((x = reshape(w, x, lshape, ndim, lbm, NULL)) == NULL)
        return NULL;
    int64_t p[TORC_MAX_DIMS];
    /* The view's dim i is the layout's dim q where perm[q] == i. */
    for (int i = 0; i < ndim; i++)
      for (int q = 0; q < ndim; q++)
        if (perm[q] == i)
          p[i] = q;
    const char *o = expand && n_bcast ? tmp(w) : out ? out : tmp(w);
    attr_ints(w, node(w, "Transpose", 1, &x, o), "perm", p, ndim);
    x = o;
  }
  if (expand && n_bcast) {
    int64_t s[TORC_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
      s[i] = pre[i] == shape[i] ? 1 : shape[i];
      if (s[i] != 1 && w->dynamic && (bm_view >> i & 1u)) {
        gap(w, "a broadcast along the batch dim");
        return NULL;
      }
    }
    x = op2(w, "Expand", x, const_i64(w, s, ndim, 0), out ? out : tmp(w));
  } else if (out && x != out && x == root) {
    x = op1(w, "Identity", x, out);
  }
  return x;
}

/* The ONNX name of value id as a reader sees it; with broadcast 1 a view
 * that only broadcasts may come unexpanded (for Add, Mul...). */
static const char *operand(wr *w, int id, int broadcast) {
  const torc__gvalue *v = val(w, id);
  if (w->name[id] && !(broadcast && (v->base >= 0 || v->view)))
    return w->name[id];
  if (v->input >= 0 || (v->produced && v->base < 0 && v->name == NULL))
    return w->name[id];
  if (v->name && !v->view) {
    const torc_tensor *t = named(w, v->name);
    return w->name[id] = t ? init_from(w, v->name, t) : NULL;
  }
  if (v->name) {
    const torc_tensor *t = named(w, v->name);
    const char *root = t ? init_from(w, v->name, t) : NULL;
    if (root == NULL)
      return NULL;
    const char *x = view_expr(w, root, torc_shape(t), torc_ndim(t),
                              torc_storage_offset(t), v->shape, v->strides,
                              v->ndim, v->offset, w->bmask[id], !broadcast,
                              NULL);
    if (!broadcast)
      w->name[id] = x;
    return x;
  }
  if (v->base >= 0) {
    int r = v->base;
    while (val(w, r)->base >= 0 && val(w, r)->input < 0)
      r = val(w, r)->base;
    for (int k = 0; k < w->g->n_values; k++)
      if (w->src[k] && val(w, k)->base >= 0 && group_root(w, k) == r)
        return concat_of(w, id, r);
    const torc__gvalue *rv = val(w, r);
    const char *root = name_of(w, r);
    if (root == NULL)
      return NULL;
    if (!is_contig(rv->shape, rv->strides, rv->ndim)) {
      gap(w, "a view of a tensor that is itself not contiguous");
      return NULL;
    }
    const char *x = view_expr(w, root, rv->shape, rv->ndim, rv->offset,
                              v->shape, v->strides, v->ndim, v->offset,
                              w->bmask[id], !broadcast, NULL);
    if (!broadcast)
      w->name[id] = x;
    return x;
  }
  /* A tensor the forward made without a kernel: a constant. */
  if (w->dynamic && w->bmask[id]) {
    gap(w, "a constant whose shape follows the batch size");
    return NULL;
  }
  return w->name[id] = init_from(w, str(w, "const_value%d", id), v->t);
}

static const char *name_of(wr *w, int id) { return operand(w, id, 0); }

/* The name node outputs write to value id: the graph output's name for
 * the output, a fresh name when the value is written again in place. */
static const char *out_name(wr *w, int id, const char *output) {
  const char *s = id == w->g->output ? output : str(w, "v%d", id);
  if (w->name[id])
    s = str(w, "v%d_%d", id, w->n_tmp++);
  return w->name[id] = s;
}

/* ---- the ops ---- */

typedef struct {
  const char *torc, *onnx;
} op_name;

static const op_name unary_ops[] = {
    {"neg", "Neg"},         {"abs", "Abs"},         {"sign", "Sign"},
    {"relu", "Relu"},       {"exp", "Exp"},         {"log", "Log"},
    {"sqrt", "Sqrt"},       {"sin", "Sin"},         {"cos", "Cos"},
    {"tanh", "Tanh"},       {"sigmoid", "Sigmoid"}, {"reciprocal", "Reciprocal"},
    {"erf", "Erf"},         {"softsign", "Softsign"}, {NULL, NULL}};

static const op_name binary_ops[] = {
    {"add", "Add"},     {"sub", "Sub"},     {"mul", "Mul"},
    {"div", "Div"},     {"pow", "Pow"},     {"maximum", "Max"},
    {"minimum", "Min"}, {"eq", "Equal"},    {"lt", "Less"},
    {"le", "LessOrEqual"}, {"gt", "Greater"}, {"ge", "GreaterOrEqual"},
    {"logical_and", "And"}, {"logical_or", "Or"}, {NULL, NULL}};

static const char *find_op(const op_name *t, const char *name) {
  for (int i = 0; t[i].torc; i++)
    if (strcmp(t[i].torc, name) == 0)
      return t[i].onnx;
  return NULL;
}

static const char *reduce_op(const char *name) {
  static const op_name t[] = {{"sum", "ReduceSum"},   {"mean", "ReduceMean"},
                              {"prod", "ReduceProd"}, {"amax", "ReduceMax"},
                              {"amin", "ReduceMin"},
                              {"logsumexp", "ReduceLogSumExp"},
                              {NULL, NULL}};
  return find_op(t, name);
}

/* A reduction over `axes` (k of them): axes as an input for ReduceSum
 * (opset 13 on), as an attribute for the others (before 18). */
static const char *reduce(wr *w, const char *op, const char *x,
                          const int64_t *axes, int k, int keep,
                          const char *out) {
  out = out ? out : tmp(w);
  Onnx__NodeProto *n;
  if (strcmp(op, "ReduceSum") == 0) {
    const char *in[2] = {x, const_i64(w, axes, k, 0)};
    n = node(w, op, 2, in, out);
  } else {
    n = node(w, op, 1, &x, out);
    attr_ints(w, n, "axes", axes, k);
  }
  attr_i(w, n, "keepdims", keep);
  return out;
}

/* The dims set in mask, up to ndim, into axes; their count. */
static int mask_axes(uint32_t mask, int ndim, int64_t *axes) {
  int k = 0;
  for (int i = 0; i < ndim; i++)
    if (mask >> i & 1u)
      axes[k++] = i;
  return k;
}

static const char *gelu(wr *w, const char *x, torc_dtype dt, int tanh_form,
                        const char *out) {
  const char *half = op2(w, "Mul", x, const_scalar(w, 0.5, dt), NULL);
  const char *inner;
  if (tanh_form) {
    const char *x3 = op2(w, "Mul", op2(w, "Mul", x, x, NULL), x, NULL);
    const char *s = op2(w, "Add", x,
                        op2(w, "Mul", x3, const_scalar(w, 0.044715, dt), NULL),
                        NULL);
    inner = op1(w, "Tanh",
                op2(w, "Mul", s, const_scalar(w, 0.7978845608028654, dt), NULL),
                NULL);
  } else {
    inner = op1(w, "Erf", op2(w, "Div", x, const_scalar(w, 1.4142135623730951, dt), NULL),
                NULL);
  }
  return op2(w, "Mul", half, op2(w, "Add", inner, const_scalar(w, 1, dt), NULL),
             out);
}

/* Whether node i's outputs other than the first are read (by a node or
 * as the graph's output). */
static int extra_outputs_read(const wr *w, const torc__gnode *n) {
  for (int k = 1; k < n->n_out; k++)
    if (w->uses[n->out[k]] || n->out[k] == w->g->output)
      return 1;
  return 0;
}

/* Layer normalisation over the last `k` dims of x (ndim of them): the
 * LayerNormalization op from opset 17, mean and variance before. */
static void layer_norm(wr *w, const char *x, const char *wt, const char *b,
                       int ndim, int k, double eps, torc_dtype dt,
                       const char *out) {
  if (w->opset >= 17) {
    const char *in[3] = {x, wt, b};
    Onnx__NodeProto *n = node(w, "LayerNormalization", 3, in, out);
    attr_i(w, n, "axis", ndim - k);
    attr_f(w, n, "epsilon", eps);
    return;
  }
  int64_t axes[TORC_MAX_DIMS];
  for (int i = 0; i < k; i++)
    axes[i] = ndim - k + i;
  const char *mean = reduce(w, "ReduceMean", x, axes, k, 1, NULL);
  const char *d = op2(w, "Sub", x, mean, NULL);
  const char *var = reduce(w, "ReduceMean", op2(w, "Mul", d, d, NULL), axes,
                           k, 1, NULL);
  const char *rstd = op1(w, "Reciprocal",
                         op1(w, "Sqrt",
                             op2(w, "Add", var, const_scalar(w, eps, dt), NULL),
                             NULL),
                         NULL);
  const char *y = op2(w, "Mul", d, rstd, NULL);
  if (wt)
    y = op2(w, "Mul", y, wt, NULL);
  if (b)
    op2(w, "Add", y, b, out);
  else
    op1(w, "Identity", y, out);
}

/* Writes graph node i; returns how many graph nodes it consumed (2 when
 * a matmul and the add of its bias became one Gemm). */
static int write_node(wr *w, int i, const char *output) {
  const torc_graph *g = w->g;
  const torc__gnode *n = &g->nodes[i];
  const char *op = torc__ops[n->op].name;
  w->cur = i;
  const torc__gvalue *y = val(w, n->out[0]);
  torc_dtype dt = y->dtype;
  const char *in[8] = {0};
  for (int k = 1; k < n->n_out; k++)
    if (val(w, n->out[k])->base >= 0 || val(w, n->out[k])->name)
      gap(w, "it writes into part of another tensor or into a parameter");
  if ((y->base >= 0 && strcmp(op, "copy") != 0) || y->name) {
    gap(w, "it writes into part of another tensor (a concatenation, a "
           "slice assignment) or into a parameter");
    for (int k = 0; k < n->n_out; k++)
      out_name(w, n->out[k], output);
    return 1;
  }
  const char *o = NULL;
  const char *s;
  if ((s = find_op(unary_ops, op)) != NULL) {
    in[0] = cast(w, name_of(w, n->in[0]), val(w, n->in[0])->dtype, dt);
    o = out_name(w, n->out[0], output);
    op1(w, s, in[0], o);
  } else if ((s = find_op(binary_ops, op)) != NULL || !strcmp(op, "ne")) {
    int logical = !strcmp(op, "logical_and") || !strcmp(op, "logical_or");
    int cmp = dt == TORC_BOOL && !logical;
    torc_dtype to = logical ? TORC_BOOL : cmp ? n->kdtype : dt;
    for (int k = 0; k < 2; k++)
      in[k] = cast(w, operand(w, n->in[k], 1), val(w, n->in[k])->dtype, to);
    o = out_name(w, n->out[0], output);
    if (!strcmp(op, "ne"))
      op1(w, "Not", op2(w, "Equal", in[0], in[1], NULL), o);
    else
      op2(w, s, in[0], in[1], o);
  } else if (!strcmp(op, "matmul")) {
    const torc__gvalue *a = val(w, n->in[0]), *b = val(w, n->in[1]);
    /* linear: x [M, K] times a 2-D weight read transposed, then + bias. */
    int gemm = a->ndim == 2 && b->ndim == 2 && b->name && b->view &&
               b->offset == 0 && b->strides[0] == 1 &&
               b->strides[1] == b->shape[0];
    const torc__gnode *next = i + 1 < g->n_nodes ? &g->nodes[i + 1] : NULL;
    int bias = -1;
    if (gemm && next && !strcmp(torc__ops[next->op].name, "add") &&
        w->uses[n->out[0]] == 1 && n->out[0] != g->output &&
        val(w, next->out[0])->base < 0) {
      int k = next->in[0] == n->out[0] ? 1 : next->in[1] == n->out[0] ? 0 : -1;
      if (k >= 0 && val(w, next->in[k])->name &&
          val(w, next->out[0])->ndim == 2)
        bias = next->in[k];
    }
    if (gemm) {
      const torc_tensor *wt = named(w, b->name);
      in[0] = name_of(w, n->in[0]);
      in[1] = wt ? init_from(w, b->name, wt) : NULL;
      in[2] = bias >= 0 ? operand(w, bias, 1) : NULL;
      int last = bias >= 0 ? next->out[0] : n->out[0];
      if (bias >= 0)
        out_name(w, n->out[0], output);
      o = out_name(w, last, output);
      Onnx__NodeProto *nd = node(w, "Gemm", bias >= 0 ? 3 : 2, in, o);
      attr_i(w, nd, "transB", 1);
      return bias >= 0 ? 2 : 1;
    }
    in[0] = operand(w, n->in[0], 1);
    in[1] = operand(w, n->in[1], 1);
    o = out_name(w, n->out[0], output);
    op2(w, "MatMul", in[0], in[1], o);
  } else if (!strcmp(op, "copy") || !strcmp(op, "dropout")) {
    in[0] = cast(w, name_of(w, n->in[0]), val(w, n->in[0])->dtype, dt);
    if (extra_outputs_read(w, n))
      gap(w, "the dropout mask is read");
    if (op[0] == 'c' && (y->base >= 0 || !is_contig(y->shape, y->strides,
                                                     y->ndim))) {
      /* A piece of a tensor assembled by copies (a concatenation): its
       * readers see what was copied; the whole is a Concat. */
      w->src[n->out[0]] = w->name[n->out[0]] = in[0];
      return 1;
    }
    o = out_name(w, n->out[0], output);
    op1(w, "Identity", in[0], o);
    if (op[0] == 'c')
      w->src[n->out[0]] = o;
  } else if (!strcmp(op, "conv2d") || !strcmp(op, "conv_transpose2d")) {
    const torc_conv_kparams *p = n->params;
    const torc__gvalue *x = val(w, n->in[0]), *wv = val(w, n->in[1]);
    for (int k = 0; k < n->n_in; k++)
      in[k] = name_of(w, n->in[k]);
    o = out_name(w, n->out[0], output);
    int tr = op[4] == '_';
    Onnx__NodeProto *nd = node(w, tr ? "ConvTranspose" : "Conv", n->n_in, in, o);
    int64_t pads[4] = {p->padding[0], p->padding[1], p->padding[0],
                       p->padding[1]};
    attr_ints(w, nd, "kernel_shape", wv->shape + 2, 2);
    attr_ints(w, nd, "strides", p->stride, 2);
    attr_ints(w, nd, "pads", pads, 4);
    attr_ints(w, nd, "dilations", p->dilation, 2);
    attr_i(w, nd, "group", p->groups);
    if (tr) {
      int64_t op_[2];
      for (int d = 0; d < 2; d++)
        op_[d] = y->shape[2 + d] -
                 ((x->shape[2 + d] - 1) * p->stride[d] - 2 * p->padding[d] +
                  p->dilation[d] * (wv->shape[2 + d] - 1) + 1);
      attr_ints(w, nd, "output_padding", op_, 2);
    }
  } else if (!strcmp(op, "max_pool2d") || !strcmp(op, "avg_pool2d")) {
    const torc_pool_kparams *p = n->params;
    int avg = op[0] == 'a';
    if (extra_outputs_read(w, n))
      gap(w, "max pooling's indices are read (ONNX MaxPool's are not "
             "torc's)");
    if (avg && p->divisor != 0)
      gap(w, "avg_pool2d with divisor_override");
    if (avg && (p->dilation[0] != 1 || p->dilation[1] != 1))
      gap(w, "avg_pool2d with dilation (AveragePool has it from opset 19)");
    in[0] = name_of(w, n->in[0]);
    o = out_name(w, n->out[0], output);
    for (int k = 1; k < n->n_out; k++)
      out_name(w, n->out[k], output);
    Onnx__NodeProto *nd = node(w, avg ? "AveragePool" : "MaxPool", 1, in, o);
    int64_t pads[4] = {p->padding[0], p->padding[1], p->padding[0],
                       p->padding[1]};
    attr_ints(w, nd, "kernel_shape", p->kernel, 2);
    attr_ints(w, nd, "strides", p->stride, 2);
    attr_ints(w, nd, "pads", pads, 4);
    if (!avg)
      attr_ints(w, nd, "dilations", p->dilation, 2);
    else
      attr_i(w, nd, "count_include_pad", p->count_include_pad);
    attr_i(w, nd, "ceil_mode", p->ceil_mode);
    return 1;
  } else if (!strcmp(op, "adaptive_avg_pool2d")) {
    const torc__gvalue *x = val(w, n->in[0]);
    in[0] = name_of(w, n->in[0]);
    o = out_name(w, n->out[0], output);
    int nd_ = x->ndim;
    int64_t h = x->shape[nd_ - 2], wd = x->shape[nd_ - 1],
            oh = y->shape[nd_ - 2], ow = y->shape[nd_ - 1];
    if (nd_ != 4) {
      gap(w, "adaptive_avg_pool2d of a 3-D input");
    } else if (oh == 1 && ow == 1) {
      op1(w, "GlobalAveragePool", in[0], o);
    } else if (h % oh == 0 && wd % ow == 0) {
      int64_t k[2] = {h / oh, wd / ow};
      Onnx__NodeProto *nd = node(w, "AveragePool", 1, in, o);
      attr_ints(w, nd, "kernel_shape", k, 2);
      attr_ints(w, nd, "strides", k, 2);
    } else {
      gap(w, "adaptive_avg_pool2d to a size that does not divide the input");
    }
  } else if (!strcmp(op, "batch_norm")) {
    const torc_norm_kparams *p = n->params;
    if (p->training || n->n_in != 5)
      gap(w, "batch_norm on batch statistics (export runs in eval mode; "
             "the module has no running statistics)");
    if (extra_outputs_read(w, n))
      gap(w, "batch_norm's mean or invstd output is read");
    for (int k = 0; k < n->n_in; k++)
      in[k] = name_of(w, n->in[k]);
    o = out_name(w, n->out[0], output);
    for (int k = 1; k < n->n_out; k++)
      out_name(w, n->out[k], output);
    if (n->n_in == 5)
      attr_f(w, node(w, "BatchNormalization", 5, in, o), "epsilon", p->eps);
    return 1;
  } else if (!strcmp(op, "layer_norm")) {
    const torc_norm_kparams *p = n->params;
    const torc__gvalue *x = val(w, n->in[0]);
    const torc__gvalue *wv = val(w, n->in[1]);
    int64_t kn = numel(wv->shape, wv->ndim);
    int k = 0;
    while (k < x->ndim && numel(x->shape + x->ndim - k, k) < kn)
      k++;
    if (extra_outputs_read(w, n))
      gap(w, "layer_norm's mean or rstd output is read");
    if (numel(x->shape + x->ndim - k, k) != kn)
      gap(w, "layer_norm whose weight does not match the input's last dims");
    for (int j = 0; j < 3; j++)
      in[j] = operand(w, n->in[j], 1);
    o = out_name(w, n->out[0], output);
    for (int j = 1; j < n->n_out; j++)
      out_name(w, n->out[j], output);
    if (w->opset >= 17 && val(w, n->in[1])->ndim != k) {
      /* LayerNormalization wants the weight in the normalised dims. */
      for (int j = 1; j < 3; j++)
        in[j] = reshape(w, in[j], x->shape + x->ndim - k, k, 0, NULL);
    }
    layer_norm(w, in[0], in[1], in[2], x->ndim, k, p->eps, dt, o);
    return 1;
  } else if (!strcmp(op, "group_norm")) {
    const torc_norm_kparams *p = n->params;
    const torc__gvalue *x = val(w, n->in[0]);
    if (extra_outputs_read(w, n))
      gap(w, "group_norm's mean or rstd output is read");
    for (int j = 0; j < 3; j++)
      in[j] = name_of(w, n->in[j]);
    o = out_name(w, n->out[0], output);
    for (int j = 1; j < n->n_out; j++)
      out_name(w, n->out[j], output);
    /* [N, G, rest] (0 keeps N), normalised over the last dim, reshaped
     * back to x's own shape, then the per-channel weight and bias. */
    int64_t t[3] = {0, p->groups, -1}, ax = 2, cs[TORC_MAX_DIMS];
    const char *xr = op2(w, "Reshape", in[0], const_i64(w, t, 3, 0), NULL);
    const char *mean = reduce(w, "ReduceMean", xr, &ax, 1, 1, NULL);
    const char *d = op2(w, "Sub", xr, mean, NULL);
    const char *var = reduce(w, "ReduceMean", op2(w, "Mul", d, d, NULL), &ax,
                             1, 1, NULL);
    const char *yr = op2(
        w, "Mul", d,
        op1(w, "Reciprocal",
            op1(w, "Sqrt", op2(w, "Add", var, const_scalar(w, p->eps, dt), NULL),
                NULL),
            NULL),
        NULL);
    const char *y2 = op2(w, "Reshape", yr, op1(w, "Shape", in[0], NULL), NULL);
    cs[0] = x->shape[1];
    for (int j = 1; j < x->ndim - 1; j++)
      cs[j] = 1;
    const char *c = const_i64(w, cs, x->ndim - 1, 0);
    op2(w, "Add",
        op2(w, "Mul", y2, op2(w, "Reshape", in[1], c, NULL), NULL),
        op2(w, "Reshape", in[2], c, NULL), o);
    return 1;
  } else if (!strcmp(op, "softmax") || !strcmp(op, "log_softmax")) {
    const torc_dim_params *p = n->params;
    in[0] = name_of(w, n->in[0]);
    o = out_name(w, n->out[0], output);
    attr_i(w, node(w, op[0] == 's' ? "Softmax" : "LogSoftmax", 1, in, o),
           "axis", p->dim);
  } else if (reduce_op(op) || !strcmp(op, "norm")) {
    const torc__gvalue *x = val(w, n->in[0]);
    uint32_t mask = ((const uint32_t *)n->params)[0];
    int64_t axes[TORC_MAX_DIMS];
    int k = mask_axes(mask, x->ndim, axes);
    int keep = y->ndim == x->ndim;
    in[0] = cast(w, name_of(w, n->in[0]), x->dtype, dt);
    o = out_name(w, n->out[0], output);
    if (k == 0) {
      op1(w, "Identity", in[0], o);
    } else if (!strcmp(op, "norm")) {
      double pn = ((const torc_norm_params *)n->params)->p;
      if (pn == 1)
        reduce(w, "ReduceL1", in[0], axes, k, keep, o);
      else if (pn == 2)
        reduce(w, "ReduceL2", in[0], axes, k, keep, o);
      else
        reduce(w, "ReduceMax", op1(w, "Abs", in[0], NULL), axes, k, keep, o);
    } else {
      reduce(w, reduce_op(op), in[0], axes, k, keep, o);
    }
  } else if (!strcmp(op, "var") || !strcmp(op, "std")) {
    const torc_reduce_params *p = n->params;
    const torc__gvalue *x = val(w, n->in[0]);
    int64_t axes[TORC_MAX_DIMS], cnt = 1;
    int k = mask_axes(p->dims_mask, x->ndim, axes);
    for (int j = 0; j < k; j++) {
      cnt *= x->shape[axes[j]];
      if (w->dynamic && (w->bmask[n->in[0]] >> axes[j] & 1u))
        gap(w, "a variance over the batch dim");
    }
    in[0] = name_of(w, n->in[0]);
    o = out_name(w, n->out[0], output);
    const char *d = op2(w, "Sub", in[0],
                        reduce(w, "ReduceMean", in[0], axes, k, 1, NULL), NULL);
    const char *ss = reduce(w, "ReduceSum", op2(w, "Mul", d, d, NULL), axes, k,
                            y->ndim == x->ndim, NULL);
    const char *v = op2(w, "Div", ss,
                        const_scalar(w, (double)cnt - p->correction, dt),
                        op[0] == 'v' ? o : NULL);
    if (op[0] == 's')
      op1(w, "Sqrt", v, o);
  } else if (!strcmp(op, "square") || !strcmp(op, "silu") ||
             !strcmp(op, "log1p") || !strcmp(op, "rsqrt") ||
             !strcmp(op, "mish") || !strcmp(op, "hardswish") ||
             !strcmp(op, "hardsigmoid") || !strcmp(op, "selu")) {
    const char *x = cast(w, name_of(w, n->in[0]), val(w, n->in[0])->dtype, dt);
    o = out_name(w, n->out[0], output);
    if (!strcmp(op, "square")) {
      op2(w, "Mul", x, x, o);
    } else if (!strcmp(op, "silu")) {
      op2(w, "Mul", x, op1(w, "Sigmoid", x, NULL), o);
    } else if (!strcmp(op, "log1p")) {
      op1(w, "Log", op2(w, "Add", x, const_scalar(w, 1, dt), NULL), o);
    } else if (!strcmp(op, "rsqrt")) {
      op1(w, "Reciprocal", op1(w, "Sqrt", x, NULL), o);
    } else if (!strcmp(op, "mish")) {
      op2(w, "Mul", x, op1(w, "Tanh", op1(w, "Softplus", x, NULL), NULL), o);
    } else if (!strcmp(op, "hardswish") && w->opset >= 14) {
      op1(w, "HardSwish", x, o);
    } else if (!strcmp(op, "selu")) {
      Onnx__NodeProto *nd = node(w, "Selu", 1, &x, o);
      attr_f(w, nd, "alpha", 1.6732632423543772);
      attr_f(w, nd, "gamma", 1.0507009873554805);
    } else {
      /* hardsigmoid; hardswish before opset 14 is x times it */
      int hs = !strcmp(op, "hardswish");
      const char *hsig = hs ? tmp(w) : o;
      Onnx__NodeProto *nd = node(w, "HardSigmoid", 1, &x, hsig);
      attr_f(w, nd, "alpha", 1.0 / 6.0);
      attr_f(w, nd, "beta", 0.5);
      if (hs)
        op2(w, "Mul", x, hsig, o);
    }
  } else if (!strcmp(op, "leaky_relu") || !strcmp(op, "elu") ||
             !strcmp(op, "gelu") || !strcmp(op, "softplus") ||
             !strcmp(op, "clamp")) {
    const torc_scalar_params *p = n->params;
    const char *x = name_of(w, n->in[0]);
    o = out_name(w, n->out[0], output);
    if (!strcmp(op, "leaky_relu")) {
      attr_f(w, node(w, "LeakyRelu", 1, &x, o), "alpha", p->a);
    } else if (!strcmp(op, "elu")) {
      attr_f(w, node(w, "Elu", 1, &x, o), "alpha", p->a);
    } else if (!strcmp(op, "gelu")) {
      gelu(w, x, dt, (int)(p->flags & 1u), o);
    } else if (!strcmp(op, "softplus")) {
      if (p->a == 1)
        op1(w, "Softplus", x, o);
      else
        op2(w, "Div",
            op1(w, "Softplus", op2(w, "Mul", x, const_scalar(w, p->a, dt), NULL),
                NULL),
            const_scalar(w, p->a, dt), o);
    } else {
      int fl = torc_dtype_is_float(dt);
      in[0] = x;
      in[1] = p->flags & 1u ? const_scalar(w, fl ? p->a : (double)p->ia, dt)
                            : NULL;
      in[2] = p->flags & 2u ? const_scalar(w, fl ? p->b : (double)p->ib, dt)
                            : NULL;
      node(w, "Clip", in[2] ? 3 : in[1] ? 2 : 1, in, o);
    }
  } else if (!strcmp(op, "logical_not")) {
    in[0] = cast(w, name_of(w, n->in[0]), val(w, n->in[0])->dtype, TORC_BOOL);
    o = out_name(w, n->out[0], output);
    op1(w, "Not", in[0], o);
  } else if (!strcmp(op, "where")) {
    for (int k = 0; k < 3; k++)
      in[k] = operand(w, n->in[k], 1);
    in[0] = cast(w, in[0], val(w, n->in[0])->dtype, TORC_BOOL);
    for (int k = 1; k < 3; k++)
      in[k] = cast(w, in[k], val(w, n->in[k])->dtype, dt);
    o = out_name(w, n->out[0], output);
    node(w, "Where", 3, in, o);
  } else if (!strcmp(op, "cumsum")) {
    const torc_dim_params *p = n->params;
    int64_t ax = p->dim;
    in[0] = cast(w, name_of(w, n->in[0]), val(w, n->in[0])->dtype, dt);
    in[1] = const_i64(w, &ax, 1, 1);
    o = out_name(w, n->out[0], output);
    node(w, "CumSum", 2, in, o);
  } else if (!strcmp(op, "max_dim") || !strcmp(op, "min_dim")) {
    const torc_dim_params *p = n->params;
    int64_t ax = p->dim;
    int mx = op[1] == 'a';
    in[0] = name_of(w, n->in[0]);
    o = out_name(w, n->out[0], output);
    const char *oi = out_name(w, n->out[1], output);
    reduce(w, mx ? "ReduceMax" : "ReduceMin", in[0], &ax, 1, 1, o);
    Onnx__NodeProto *nd = node(w, mx ? "ArgMax" : "ArgMin", 1, in, oi);
    attr_i(w, nd, "axis", ax);
    attr_i(w, nd, "keepdims", 1);
    return 1;
  } else if (!strcmp(op, "embedding") || !strcmp(op, "index_select") ||
             !strcmp(op, "gather")) {
    int emb = op[0] == 'e';
    int64_t ax = emb ? 0 : ((const torc_index_params *)n->params)->dim;
    in[0] = name_of(w, n->in[emb ? 1 : 0]);
    in[1] = name_of(w, n->in[emb ? 0 : 1]);
    o = out_name(w, n->out[0], output);
    attr_i(w, node(w, op[0] == 'g' ? "GatherElements" : "Gather", 2, in, o),
           "axis", ax);
  } else if (!strcmp(op, "pad")) {
    const torc_pad_params *p = n->params;
    const torc__gvalue *x = val(w, n->in[0]);
    int64_t pads[2 * TORC_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
      pads[d] = p->before[d];
      pads[x->ndim + d] = p->after[d];
    }
    in[0] = name_of(w, n->in[0]);
    in[1] = const_i64(w, pads, 2 * x->ndim, 0);
    in[2] = p->mode == 0 ? const_scalar(w, p->value, dt) : NULL;
    o = out_name(w, n->out[0], output);
    attr_s(w, node(w, "Pad", in[2] ? 3 : 2, in, o), "mode",
           p->mode == 0 ? "constant" : p->mode == 1 ? "reflect" : "edge");
  } else if (!strcmp(op, "topk")) {
    const torc_topk_params *p = n->params;
    in[0] = name_of(w, n->in[0]);
    in[1] = const_i64(w, &p->k, 1, 0);
    o = out_name(w, n->out[0], output);
    const char *oi = out_name(w, n->out[1], output);
    Onnx__NodeProto *nd = node(w, "TopK", 2, in, o);
    nd->n_output = 2;
    nd->output = alloc(w, 2 * sizeof *nd->output);
    nd->output[0] = (char *)o;
    nd->output[1] = (char *)oi;
    attr_i(w, nd, "axis", p->dim);
    attr_i(w, nd, "largest", p->largest);
    attr_i(w, nd, "sorted", 1);
    return 1;
  } else if (!strcmp(op, "fill_")) {
    const torc_fill_params *p = n->params;
    o = out_name(w, n->out[0], output);
    if (w->dynamic && w->bmask[n->out[0]]) {
      gap(w, "a filled tensor whose shape follows the batch size");
    } else {
      double v = torc_dtype_is_float(dt) ? p->value : (double)p->ivalue;
      const char *one = const_scalar(w, v, dt);
      /* ConstantOfShape's value: the scalar as a 1-element tensor. */
      Onnx__TensorProto *tv = w->inits[w->n_inits - 1];
      w->n_inits--;
      tv->n_dims = 1;
      tv->dims[0] = 1;
      (void)one;
      in[0] = const_i64(w, y->shape, y->ndim, 0);
      Onnx__NodeProto *nd = node(w, "ConstantOfShape", 1, in, o);
      Onnx__AttributeProto *a =
          attr(w, nd, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
      a->t = tv;
    }
  } else {
    gap(w, "no ONNX mapping for this op");
  }
  for (int k = 0; k < n->n_out; k++)
    if (w->name[n->out[k]] == NULL)
      out_name(w, n->out[k], output);
  return 1;
}

/* ---- the model ---- */

static Onnx__ValueInfoProto *value_info(wr *w, const char *name,
                                        const torc__gvalue *v, uint32_t bm,
                                        int64_t batch) {
  Onnx__ValueInfoProto *vi = alloc(w, sizeof *vi);
  onnx__value_info_proto__init(vi);
  vi->name = (char *)name;
  Onnx__TypeProto *tp = alloc(w, sizeof *tp);
  onnx__type_proto__init(tp);
  Onnx__TypeProto__Tensor *tt = alloc(w, sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1;
  tt->elem_type = onnx_type(v->dtype);
  Onnx__TensorShapeProto *sh = alloc(w, sizeof *sh);
  onnx__tensor_shape_proto__init(sh);
  sh->n_dim = (size_t)v->ndim;
  sh->dim = alloc(w, (size_t)(v->ndim + 1) * sizeof *sh->dim);
  for (int d = 0; d < v->ndim; d++) {
    Onnx__TensorShapeProto__Dimension *dm = alloc(w, sizeof *dm);
    onnx__tensor_shape_proto__dimension__init(dm);
    if (w->dynamic && (bm >> d & 1u)) {
      if (v->shape[d] == batch) {
        dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
        dm->dim_param = (char *)"batch";
      }
    } else {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      dm->dim_value = v->shape[d];
    }
    sh->dim[d] = dm;
  }
  tt->shape = sh;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  vi->type = tp;
  return vi;
}

/* The error naming every node that could not be written. */
static torc_status gaps_error(wr *w) {
  char buf[2048];
  size_t len = 0;
  int shown = 0;
  for (int i = 0; i < w->n_gaps && len + 400 < sizeof buf; i++, shown++) {
    const torc__gnode *n = &w->g->nodes[w->gaps[i].node];
    len += (size_t)snprintf(buf + len, sizeof buf - len,
                            "%snode %d %s in module '%.200s' (%s)",
                            i ? "; " : "", w->gaps[i].node,
                            torc__ops[n->op].name, n->module, w->gaps[i].why);
    if (len >= sizeof buf)
      len = sizeof buf - 1; /* truncated */
  }
  if (shown < w->n_gaps)
    snprintf(buf + len, sizeof buf - len, "; and %d more",
             w->n_gaps - shown);
  return torc_set_error(TORC_ERR_UNSUPPORTED,
                        "ONNX export: %d node%s of the traced forward cannot "
                        "be written to ONNX: %s; change the model to use "
                        "layers docs/export.md lists, or run it with torc",
                        w->n_gaps, w->n_gaps == 1 ? "" : "s", buf);
}

/* The batch-following dims of every value of g: g traced again (into g2)
 * with inputs one row longer; dims whose sizes differ follow the batch. */
static torc_status batch_dims(torc_module *m, const torc_graph *g,
                              const torc_tensor *const *inputs, int n_in,
                              uint32_t *bmask) {
  torc_tensor *big[16];
  torc_status st = TORC_OK;
  for (int i = 0; i < n_in; i++) {
    int64_t s[TORC_MAX_DIMS];
    int nd = torc_ndim(inputs[i]);
    memcpy(s, torc_shape(inputs[i]), (size_t)nd * sizeof *s);
    s[0]++;
    big[i] = torc_zeros(s, nd, torc_dtype_of(inputs[i]),
                        torc_device_of(inputs[i]));
    if (big[i] == NULL) {
      for (int k = 0; k < i; k++)
        torc_release(big[k]);
      return torc_last_status();
    }
  }
  torc_graph *g2 = NULL;
  st = torc_trace(m, (const torc_tensor *const *)big, n_in, &g2);
  for (int i = 0; i < n_in; i++)
    torc_release(big[i]);
  if (st)
    return st;
  int same = g2->n_nodes == g->n_nodes && g2->n_values == g->n_values;
  for (int i = 0; same && i < g->n_nodes; i++)
    same = g->nodes[i].op == g2->nodes[i].op;
  for (int i = 0; same && i < g->n_values; i++) {
    const torc__gvalue *a = &g->values[i], *b = &g2->values[i];
    same = a->ndim == b->ndim;
    bmask[i] = 0;
    for (int d = 0; same && d < a->ndim; d++)
      if (a->shape[d] != b->shape[d])
        bmask[i] |= 1u << d;
  }
  if (!same)
    st = torc_set_error(TORC_ERR_SHAPE,
                        "ONNX export: the forward records %d nodes at batch "
                        "size %lld and %d at %lld, so its graph depends on "
                        "the batch size; export with a fixed batch "
                        "(fixed_batch = 1, torc export --batch N)",
                        g->n_nodes, (long long)torc_shape(inputs[0])[0],
                        g2->n_nodes, (long long)torc_shape(inputs[0])[0] + 1);
  torc_graph_free(g2);
  return st;
}

static torc_status check_args(torc_module *m,
                              const torc_tensor *const *inputs, int n_in,
                              const torc_onnx_export_options *opt,
                              const char *fn) {
  if (m == NULL || (n_in > 0 && inputs == NULL))
    return torc__null_input(fn);
  if (n_in < 1 || n_in > 16)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: %d example inputs; pass 1 to 16", fn, n_in);
  for (int i = 0; i < n_in; i++) {
    if (inputs[i] == NULL)
      return torc__null_input(fn);
    if (torc_ndim(inputs[i]) < 1 && !(opt && opt->fixed_batch))
      return torc_set_error(TORC_ERR_SHAPE,
                            "%s: example input %d has no dims, so no batch "
                            "dim; give it a batch dim, or set fixed_batch",
                            fn, i);
  }
  int opset = opt && opt->opset ? opt->opset : TORC_ONNX_EXPORT_MAX_OPSET;
  if (opset < TORC_ONNX_EXPORT_MIN_OPSET || opset > TORC_ONNX_EXPORT_MAX_OPSET)
    return torc_set_error(TORC_ERR_RANGE,
                          "%s: opset %d is outside the opsets torc writes, "
                          "%d to %d; choose one of those",
                          fn, opset, TORC_ONNX_EXPORT_MIN_OPSET,
                          TORC_ONNX_EXPORT_MAX_OPSET);
  return TORC_OK;
}

/* The model of m traced on the inputs, packed into *out (torc__malloc'ed,
 * *len bytes). */
static torc_status export_model(torc_module *m,
                                const torc_tensor *const *inputs, int n_in,
                                const torc_onnx_export_options *opt,
                                void **out, size_t *len) {
  torc_graph *g = NULL;
  torc_status st = torc_trace(m, inputs, n_in, &g);
  if (st)
    return st;
  wr *w = torc__calloc(1, sizeof *w);
  if (w == NULL) {
    torc_graph_free(g);
    return torc_set_error(TORC_ERR_OOM, "ONNX export: out of memory");
  }
  /* Everything below allocates from the arena; running out jumps here. */
  if (setjmp(w->oom)) {
    arena_free(w);
    torc__free(w);
    torc_graph_free(g);
    return torc_set_error(TORC_ERR_OOM, "ONNX export: out of memory");
  }
  w->g = g;
  w->opset = opt && opt->opset ? opt->opset : TORC_ONNX_EXPORT_MAX_OPSET;
  w->dynamic = !(opt && opt->fixed_batch);
  size_t nv = (size_t)g->n_values + 1;
  w->bmask = alloc(w, nv * sizeof *w->bmask);
  w->uses = alloc(w, nv * sizeof *w->uses);
  w->name = alloc(w, nv * sizeof *w->name);
  w->src = alloc(w, nv * sizeof *w->src);
  if (w->dynamic)
    st = batch_dims(m, g, inputs, n_in, w->bmask);
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_in; k++)
      w->uses[g->nodes[i].in[k]]++;
  const char *output = opt && opt->output_name ? opt->output_name : "output";
  Onnx__ValueInfoProto **gin = alloc(w, (size_t)n_in * sizeof *gin);
  for (int i = 0; st == TORC_OK && i < g->n_values; i++) {
    const torc__gvalue *v = &g->values[i];
    if (v->input < 0)
      continue;
    const char *nm = opt && opt->input_names && opt->input_names[v->input]
                         ? opt->input_names[v->input]
                     : n_in == 1 ? "input"
                                 : str(w, "input%d", v->input);
    w->name[i] = str(w, "%s", nm);
    gin[v->input] = value_info(w, w->name[i], v, w->dynamic ? 1u : 0u,
                               v->shape[0]);
  }
  for (int i = 0; st == TORC_OK && i < g->n_nodes;)
    i += write_node(w, i, output);
  const torc__gvalue *ov = &g->values[g->output];
  if (st == TORC_OK) {
    /* The output: a node wrote it under its name, or it is an input, a
     * parameter or a view: then an Identity (or the view's nodes). */
    w->cur = g->n_nodes ? g->n_nodes - 1 : 0;
    const char *nm = w->name[g->output];
    if (nm == NULL || strcmp(nm, output) != 0) {
      if (ov->base >= 0 || ov->view)
        nm = name_of(w, g->output);
      else
        nm = name_of(w, g->output);
      if (nm && strcmp(nm, output) != 0)
        op1(w, "Identity", nm, output);
    }
    if (g->n_nodes == 0 && w->n_gaps)
      w->gaps[0].node = 0;
  }
  if (st == TORC_OK && w->n_gaps)
    st = gaps_error(w);
  if (st == TORC_OK) {
    int64_t batch = torc_ndim(inputs[0]) ? torc_shape(inputs[0])[0] : 0;
    Onnx__GraphProto *gp = alloc(w, sizeof *gp);
    onnx__graph_proto__init(gp);
    gp->name = (char *)"torc";
    gp->n_node = w->n_nodes;
    gp->node = w->nodes;
    gp->n_initializer = w->n_inits;
    gp->initializer = w->inits;
    gp->n_input = (size_t)n_in;
    gp->input = gin;
    gp->n_output = 1;
    gp->output = alloc(w, sizeof *gp->output);
    gp->output[0] = value_info(w, output, ov, w->bmask[g->output], batch);
    Onnx__OperatorSetIdProto *os = alloc(w, sizeof *os);
    onnx__operator_set_id_proto__init(os);
    os->domain = (char *)"";
    os->has_version = 1;
    os->version = w->opset;
    Onnx__ModelProto mp = ONNX__MODEL_PROTO__INIT;
    mp.has_ir_version = 1;
    mp.ir_version = 8;
    mp.n_opset_import = 1;
    mp.opset_import = &os;
    mp.producer_name = (char *)"torc";
    mp.producer_version = (char *)torc_version_string();
    mp.graph = gp;
    *len = protobuf_c_message_get_packed_size(&mp.base);
    *out = torc__malloc(*len ? *len : 1);
    if (*out == NULL)
      st = torc_set_error(TORC_ERR_OOM, "ONNX export: out of memory for "
                          "%zu bytes of model", *len);
    else
      protobuf_c_message_pack(&mp.base, *out);
  }
  arena_free(w);
  torc__free(w);
  torc_graph_free(g);
  return st;
}

torc_status torc_onnx_export_buffer(torc_module *m,
                                    const torc_tensor *const *example_inputs,
                                    int n_in,
                                    const torc_onnx_export_options *opt,
                                    void **out, size_t *len) {
  if (out)
    *out = NULL;
  if (len)
    *len = 0;
  if (out == NULL || len == NULL)
    return torc__null_input("torc_onnx_export_buffer");
  torc_status st = check_args(m, example_inputs, n_in, opt,
                              "torc_onnx_export_buffer");
  return st ? st : export_model(m, example_inputs, n_in, opt, out, len);
}

static int write_all(int fd, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

torc_status torc_onnx_export(torc_module *m,
                             const torc_tensor *const *example_inputs,
                             int n_in, const torc_onnx_export_options *opt,
                             const char *path) {
  if (path == NULL)
    return torc__null_input("torc_onnx_export");
  torc_status st = check_args(m, example_inputs, n_in, opt,
                              "torc_onnx_export");
  void *buf = NULL;
  size_t len = 0;
  if (st == TORC_OK)
    st = export_model(m, example_inputs, n_in, opt, &buf, &len);
  if (st)
    return st;
  /* A temporary file beside path, renamed over it once complete. */
  size_t pl = strlen(path);
  char *tmpf = torc__malloc(pl + 64);
  if (tmpf == NULL) {
    torc__free(buf);
    return torc_set_error(TORC_ERR_OOM, "torc_onnx_export: out of memory");
  }
  const char *slash = strrchr(path, '/');
  size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
  snprintf(tmpf, pl + 64, "%.*s.%s.tmp.%ld", (int)dl, path,
           path + dl, (long)getpid());
  int fd = open(tmpf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    st = torc_set_error(TORC_ERR_IO,
                        "torc_onnx_export: cannot write %s: %s; check that "
                        "its folder exists and is writable",
                        path, strerror(errno));
  } else {
    int bad = write_all(fd, buf, len) || fsync(fd);
    int e = errno;
    if (close(fd) != 0 && !bad) {
      bad = 1;
      e = errno;
    }
    if (!bad && rename(tmpf, path) != 0) {
      bad = 1;
      e = errno;
    }
    if (bad) {
      unlink(tmpf);
      st = torc_set_error(TORC_ERR_IO, "torc_onnx_export: writing %s failed: "
                          "%s; nothing was written (check the disk space and "
                          "that %s is not a folder)",
                          path, strerror(e), path);
    }
  }
  torc__free(tmpf);
  torc__free(buf);
  return st;
}
