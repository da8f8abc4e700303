/* plugins/ref/kernels_index.c — reference kernels of the indexing ops
 * (contracts in include/torc/indexing.h): gather, scatter (replace or add),
 * index_select, index_add, pad and its backward, interpolate (nearest,
 * bilinear) and its backward, topk. Indices are validated here: a bad one
 * is an error naming its value, the dim and the dim's size.
 */
#include <stdlib.h>

#include "ref_index.h"

/* The error for an index outside [0, size). */
static int index_error(const torc_kernel_args *a, int64_t v, int dim,
                       int64_t size) {
  if (size == 0)
    return ref_error(TORC_ERR_RANGE,
                     "torc_%s: index %lld is out of range for dim %d of size "
                     "0 (the dim is empty: no index is valid)",
                     a->op, (long long)v, dim);
  return ref_error(TORC_ERR_RANGE,
                   "torc_%s: index %lld is out of range for dim %d of size "
                   "%lld (valid indices: 0 to %lld)",
                   a->op, (long long)v, dim, (long long)size,
                   (long long)size - 1);
}

/* *dst += *src, both of dtype dt (floats in double, integers wrapping). */
static void add_elem(int dt, void *dst, const void *src) {
  if (torc_dtype_is_float((torc_dtype)dt))
    ref_store_f(dt, dst, ref_load_f(dt, dst) + ref_load_f(dt, src));
  else
    ref_store_i(dt, dst, ref_iadd(ref_load_i(dt, dst), ref_load_i(dt, src)));
}

/* Checks the dim parameter against a tensor's ndim. */
static const torc_index_params *index_params(const torc_kernel_args *a,
                                             int ndim) {
  const torc_index_params *p = ref_params(a, sizeof *p);
  if (p && (p->dim < 0 || p->dim >= ndim)) {
    ref_error(TORC_ERR_INTERNAL, "ref kernel '%s': dim %d for %d dims", a->op,
              (int)p->dim, ndim);
    return NULL;
  }
  return p;
}

/* ---- gather: out[..i..] = x[..index[..i..]..] ---- */

int torc_ref_k_gather(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st)
    return st;
  const torc_ktensor *x = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
  const torc_index_params *p = index_params(a, x->ndim);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int d = p->dim;
  size_t esz = torc_dtype_size((torc_dtype)x->dtype);
  int64_t xs[TORC_KERNEL_MAX_DIMS];
  memcpy(xs, x->strides, sizeof xs);
  xs[d] = 0;
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, idx);
  ref_iter_add_t(&it, y);
  ref_iter_add(&it, x->offset, xs);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t i = ref_load_i(idx->dtype, ref_ptr(idx, it.pos[0]));
    if (i < 0 || i >= x->shape[d])
      return index_error(a, i, d, x->shape[d]);
    memcpy(ref_ptr(y, it.pos[1]), ref_ptr(x, it.pos[2] + i * x->strides[d]),
           esz);
  }
  return TORC_OK;
}

/* ---- scatter: out[..index[..i..]..] (=|+=) src[..i..] ---- */

int torc_ref_k_scatter(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st)
    return st;
  const torc_ktensor *idx = &a->in[0], *src = &a->in[1], *y = &a->out[0];
  const torc_index_params *p = index_params(a, y->ndim);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int d = p->dim;
  size_t esz = torc_dtype_size((torc_dtype)y->dtype);
  int64_t ys[TORC_KERNEL_MAX_DIMS];
  memcpy(ys, y->strides, sizeof ys);
  ys[d] = 0;
  ref_iter it;
  ref_iter_init(&it, idx->ndim, idx->shape);
  ref_iter_add_t(&it, idx);
  ref_iter_add_t(&it, src);
  ref_iter_add(&it, y->offset, ys);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t i = ref_load_i(idx->dtype, ref_ptr(idx, it.pos[0]));
    if (i < 0 || i >= y->shape[d])
      return index_error(a, i, d, y->shape[d]);
    void *dst = ref_ptr(y, it.pos[2] + i * y->strides[d]);
    if (p->reduce)
      add_elem(y->dtype, dst, ref_ptr(src, it.pos[1]));
    else
      memcpy(dst, ref_ptr(src, it.pos[1]), esz);
  }
  return TORC_OK;
}

/* ---- index_select / index_add along dim with a 1-D (or 0-D) index ---- */

static int64_t index_at(const torc_ktensor *idx, int64_t k) {
  int64_t pos = idx->offset + (idx->ndim ? k * idx->strides[0] : 0);
  return ref_load_i(idx->dtype, ref_ptr(idx, pos));
}

int torc_ref_k_index_select(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st)
    return st;
  const torc_ktensor *x = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
  const torc_index_params *p = index_params(a, x->ndim);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int d = p->dim;
  size_t esz = torc_dtype_size((torc_dtype)x->dtype);
  int64_t xs[TORC_KERNEL_MAX_DIMS];
  memcpy(xs, x->strides, sizeof xs);
  xs[d] = 0;
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, y);
  ref_iter_add(&it, x->offset, xs);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t i = index_at(idx, it.idx[d]);
    if (i < 0 || i >= x->shape[d])
      return index_error(a, i, d, x->shape[d]);
    memcpy(ref_ptr(y, it.pos[0]), ref_ptr(x, it.pos[1] + i * x->strides[d]),
           esz);
  }
  return TORC_OK;
}

int torc_ref_k_index_add(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st)
    return st;
  const torc_ktensor *idx = &a->in[0], *src = &a->in[1], *y = &a->out[0];
  const torc_index_params *p = index_params(a, y->ndim);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int d = p->dim;
  int64_t ys[TORC_KERNEL_MAX_DIMS];
  memcpy(ys, y->strides, sizeof ys);
  ys[d] = 0;
  ref_iter it;
  ref_iter_init(&it, src->ndim, src->shape);
  ref_iter_add_t(&it, src);
  ref_iter_add(&it, y->offset, ys);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t i = index_at(idx, it.idx[d]);
    if (i < 0 || i >= y->shape[d])
      return index_error(a, i, d, y->shape[d]);
    add_elem(y->dtype, ref_ptr(y, it.pos[1] + i * y->strides[d]),
             ref_ptr(src, it.pos[0]));
  }
  return TORC_OK;
}

/* ---- pad ---- */

/* The input coordinate output coordinate o reads in a dim of `size` with
 * `before` added in front, or -1 (constant mode, outside the input). */
static int64_t pad_source(int mode, int64_t o, int64_t before, int64_t size) {
  int64_t s = o - before;
  switch (mode) {
  case 1: /* reflect (the core checked pads < size) */
    if (s < 0)
      s = -s;
    if (s >= size)
      s = 2 * (size - 1) - s;
    return s;
  case 2: /* replicate */
    return s < 0 ? 0 : s >= size ? size - 1 : s;
  default:
    return s >= 0 && s < size ? s : -1;
  }
}

/* For each output element: its input element's position, or -1. */
static int64_t pad_pos(const torc_pad_params *p, const torc_ktensor *x,
                       const int64_t *oidx) {
  int64_t pos = x->offset;
  for (int k = 0; k < x->ndim; k++) {
    int64_t s = pad_source(p->mode, oidx[k], p->before[k], x->shape[k]);
    if (s < 0)
      return -1;
    pos += s * x->strides[k];
  }
  return pos;
}

static const torc_pad_params *pad_params(const torc_kernel_args *a,
                                         const torc_ktensor *x,
                                         const torc_ktensor *y) {
  const torc_pad_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return NULL;
  int ok = x->ndim == y->ndim && p->mode >= 0 && p->mode <= 2;
  for (int k = 0; ok && k < x->ndim; k++)
    ok = y->shape[k] == x->shape[k] + p->before[k] + p->after[k];
  if (!ok) {
    char s1[128], s2[128];
    ref_error(TORC_ERR_INTERNAL,
              "ref kernel '%s': shapes %s and %s do not match the padding "
              "(mode %d)",
              a->op, ref_shape_str(x, s1, sizeof s1),
              ref_shape_str(y, s2, sizeof s2), (int)p->mode);
    return NULL;
  }
  return p;
}

int torc_ref_k_pad(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  if (st)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  const torc_pad_params *p = pad_params(a, x, y);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  size_t esz = torc_dtype_size((torc_dtype)x->dtype);
  unsigned char fill[16];
  ref_store_f(y->dtype, fill, p->value);
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t pos = pad_pos(p, x, it.idx);
    memcpy(ref_ptr(y, it.pos[0]), pos < 0 ? (void *)fill : ref_ptr(x, pos),
           esz);
  }
  return TORC_OK;
}

/* Zeroes t (any strides). */
static void zero_all(const torc_ktensor *t) {
  ref_iter it;
  ref_iter_init(&it, t->ndim, t->shape);
  ref_iter_add_t(&it, t);
  for (; !ref_iter_done(&it); ref_iter_next(&it))
    ref_store_f(t->dtype, ref_ptr(t, it.pos[0]), 0.0);
}

/* in[0]: the gradient of pad's output; out[0]: the input's gradient. */
int torc_ref_k_pad_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  if (st)
    return st;
  const torc_ktensor *g = &a->in[0], *gx = &a->out[0];
  const torc_pad_params *p = pad_params(a, gx, g);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  zero_all(gx);
  ref_iter it;
  ref_iter_init(&it, g->ndim, g->shape);
  ref_iter_add_t(&it, g);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    int64_t pos = pad_pos(p, gx, it.idx);
    if (pos >= 0)
      add_elem(g->dtype, ref_ptr(gx, pos), ref_ptr(g, it.pos[0]));
  }
  return TORC_OK;
}

/* ---- interpolate over the last two dims ---- */

/* Where output coordinate o reads, per PyTorch's upsample kernels:
 * *i0, *i1 and the weight *l1 of i1 (nearest: i1 = i0, l1 = 0). */
static void interp_source(const torc_interp_params *p, int64_t o,
                          int64_t in, int64_t out, int64_t *i0, int64_t *i1,
                          double *l1) {
  if (p->mode == 0) {
    /* nearest: floor(o * (in / out)) with the scale in float, as
     * PyTorch's nearest_idx (for every dtype) */
    float scale = (float)in / (float)out;
    int64_t s = out == in ? o : (int64_t)floorf((float)o * scale);
    *i0 = *i1 = s < in - 1 ? s : in - 1;
    *l1 = 0;
    return;
  }
  double src;
  if (p->align_corners) {
    src = out > 1 ? (double)(in - 1) / (double)(out - 1) * (double)o : 0.0;
  } else {
    src = (double)in / (double)out * ((double)o + 0.5) - 0.5;
    if (src < 0)
      src = 0;
  }
  int64_t h0 = (int64_t)src;
  if (h0 > in - 1)
    h0 = in - 1;
  *i0 = h0;
  *i1 = h0 < in - 1 ? h0 + 1 : h0;
  *l1 = src - (double)h0;
}

static const torc_interp_params *interp_params(const torc_kernel_args *a,
                                               const torc_ktensor *x,
                                               const torc_ktensor *y) {
  const torc_interp_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return NULL;
  if (x->ndim != 4 || y->ndim != 4 || x->shape[0] != y->shape[0] ||
      x->shape[1] != y->shape[1] || x->shape[2] < 1 || x->shape[3] < 1 ||
      p->mode < 0 || p->mode > 1) {
    char s1[128], s2[128];
    ref_error(TORC_ERR_INTERNAL,
              "ref kernel '%s': shapes %s and %s (mode %d) break the "
              "contract [N, C, H, W] -> [N, C, OH, OW]",
              a->op, ref_shape_str(x, s1, sizeof s1),
              ref_shape_str(y, s2, sizeof s2), (int)p->mode);
    return NULL;
  }
  return p;
}

/* Runs over every output element: out = sum of 4 weighted inputs (forward)
 * or the reverse accumulation (backward). x: the [N, C, H, W] side. */
static int interp_run(const torc_kernel_args *a, const torc_ktensor *x,
                      const torc_ktensor *y, int backward) {
  const torc_interp_params *p = interp_params(a, x, y);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int dt = x->dtype;
  int64_t H = x->shape[2], W = x->shape[3], OH = y->shape[2], OW = y->shape[3];
  if (backward)
    zero_all(x);
  for (int64_t n = 0; n < y->shape[0]; n++)
    for (int64_t c = 0; c < y->shape[1]; c++) {
      int64_t xb = x->offset + n * x->strides[0] + c * x->strides[1];
      int64_t yb = y->offset + n * y->strides[0] + c * y->strides[1];
      for (int64_t oh = 0; oh < OH; oh++) {
        int64_t h0, h1, w0, w1;
        double lh, lw;
        interp_source(p, oh, H, OH, &h0, &h1, &lh);
        for (int64_t ow = 0; ow < OW; ow++) {
          interp_source(p, ow, W, OW, &w0, &w1, &lw);
          int64_t pos[4] = {
              xb + h0 * x->strides[2] + w0 * x->strides[3],
              xb + h0 * x->strides[2] + w1 * x->strides[3],
              xb + h1 * x->strides[2] + w0 * x->strides[3],
              xb + h1 * x->strides[2] + w1 * x->strides[3]};
          double wt[4] = {(1 - lh) * (1 - lw), (1 - lh) * lw, lh * (1 - lw),
                          lh * lw};
          void *py = ref_ptr(y, yb + oh * y->strides[2] + ow * y->strides[3]);
          if (!backward) {
            double v = 0;
            for (int k = 0; k < 4; k++)
              if (wt[k] != 0)
                v += wt[k] * ref_load_f(dt, ref_ptr(x, pos[k]));
            ref_store_f(dt, py, v);
          } else {
            double g = ref_load_f(dt, py);
            for (int k = 0; k < 4; k++) {
              if (wt[k] == 0)
                continue;
              void *px = ref_ptr(x, pos[k]);
              ref_store_f(dt, px, ref_load_f(dt, px) + wt[k] * g);
            }
          }
        }
      }
    }
  return TORC_OK;
}

int torc_ref_k_interpolate(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  return st ? st : interp_run(a, &a->in[0], &a->out[0], 0);
}

/* in[0]: the output's gradient; out[0]: the input's gradient. */
int torc_ref_k_interpolate_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  return st ? st : interp_run(a, &a->out[0], &a->in[0], 1);
}

/* ---- topk: a stable sort of each row ---- */

typedef struct topk_item {
  double f;
  int64_t i; /* integer value */
  int64_t at;
  int nan;
} topk_item;

/* Descending (NaN first), ties by lower position. */
static int cmp_f_desc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->nan != b->nan)
    return a->nan ? -1 : 1;
  if (!a->nan && a->f != b->f)
    return a->f > b->f ? -1 : 1;
  return a->at < b->at ? -1 : a->at > b->at;
}
/* Ascending (NaN last), ties by lower position. */
static int cmp_f_asc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->nan != b->nan)
    return a->nan ? 1 : -1;
  if (!a->nan && a->f != b->f)
    return a->f < b->f ? -1 : 1;
  return a->at < b->at ? -1 : a->at > b->at;
}
static int cmp_i_desc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->i != b->i)
    return a->i > b->i ? -1 : 1;
  return a->at < b->at ? -1 : a->at > b->at;
}
static int cmp_i_asc(const void *pa, const void *pb) {
  const topk_item *a = pa, *b = pb;
  if (a->i != b->i)
    return a->i < b->i ? -1 : 1;
  return a->at < b->at ? -1 : a->at > b->at;
}

int torc_ref_k_topk(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 2);
  if (st)
    return st;
  const torc_ktensor *x = &a->in[0], *v = &a->out[0], *ix = &a->out[1];
  const torc_topk_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int d = p->dim;
  if (d < 0 || d >= x->ndim || p->k < 0 || p->k > x->shape[d] ||
      ix->dtype != TORC_I64 || !ref_same_shape(v, ix))
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel 'topk': bad arguments (dim %d, k %lld)",
                     (int)d, (long long)p->k);
  int64_t len = x->shape[d];
  topk_item *items = malloc(sizeof *items * (size_t)(len > 0 ? len : 1));
  if (items == NULL)
    return ref_error(TORC_ERR_OOM, "torc_topk: out of host memory for %lld "
                     "elements", (long long)len);
  int isf = torc_dtype_is_float((torc_dtype)x->dtype);
  int (*cmp)(const void *, const void *) =
      isf ? (p->largest ? cmp_f_desc : cmp_f_asc)
          : (p->largest ? cmp_i_desc : cmp_i_asc);
  size_t esz = torc_dtype_size((torc_dtype)x->dtype);
  int64_t rows[TORC_KERNEL_MAX_DIMS];
  memcpy(rows, x->shape, sizeof rows);
  rows[d] = 1;
  ref_iter it;
  ref_iter_init(&it, x->ndim, rows);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, v);
  ref_iter_add_t(&it, ix);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    for (int64_t j = 0; j < len; j++) {
      const void *e = ref_ptr(x, it.pos[0] + j * x->strides[d]);
      topk_item *t = &items[j];
      t->at = j;
      if (isf) {
        t->f = ref_load_f(x->dtype, e);
        t->nan = t->f != t->f;
      } else {
        t->i = ref_load_i(x->dtype, e);
      }
    }
    qsort(items, (size_t)len, sizeof *items, cmp);
    for (int64_t j = 0; j < p->k; j++) {
      memcpy(ref_ptr(v, it.pos[1] + j * v->strides[d]),
             ref_ptr(x, it.pos[0] + items[j].at * x->strides[d]), esz);
      *(int64_t *)ref_ptr(ix, it.pos[2] + j * ix->strides[d]) = items[j].at;
    }
  }
  free(items);
  return TORC_OK;
}
