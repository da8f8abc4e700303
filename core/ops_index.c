/* core/ops_index.c — the indexing and shape-building ops of torc/indexing.h:
 * argument and shape checks, output allocation, kernel calls (gather,
 * scatter, index_select, index_add, pad, interpolate, topk) and the ops
 * composed of views and copies (cat, stack, split, chunk, one_hot).
 */
#include <stdio.h>
#include <stdlib.h>

#include "index_internal.h"

#define SHAPE(t, buf) torc__shape_str((t)->shape, (t)->ndim, buf, sizeof buf)

/* Index tensors: i64 or i32 (the kernels read either). */
static torc_status check_index_dtype(const char *fn, const torc_tensor *idx) {
  if (idx->dtype == TORC_I64 || idx->dtype == TORC_I32)
    return TORC_OK;
  return torc_set_error(TORC_ERR_DTYPE,
                        "%s: the index must be an integer tensor (i64 or "
                        "i32), got %s; convert it with "
                        "torc_to_dtype(index, TORC_I64)",
                        fn, torc_dtype_name(idx->dtype));
}

/* A tensor to index into needs at least one dim. */
static torc_status check_not_scalar(const char *fn, const torc_tensor *x) {
  if (x->ndim > 0)
    return TORC_OK;
  return torc_set_error(TORC_ERR_SHAPE,
                        "%s: the input is 0-dimensional; reshape it to [1] "
                        "first (torc_reshape(x, TORC_SHAPE(1)))",
                        fn);
}

static torc_status check_same_dtype(const char *fn, const torc_tensor *x,
                                    const torc_tensor *src) {
  if (x->dtype == src->dtype)
    return TORC_OK;
  return torc_set_error(TORC_ERR_DTYPE,
                        "%s: src is %s but the input is %s; they must match "
                        "(convert src with torc_to_dtype(src, %s))",
                        fn, torc_dtype_name(src->dtype),
                        torc_dtype_name(x->dtype), torc_dtype_name(x->dtype));
}

/* A new untracked tensor of dtype dt on dev filled with v. */
static torc_tensor *filled(const int64_t *shape, int ndim, torc_dtype dt,
                           torc_device dev, double v) {
  torc_tensor *t = torc__empty(shape, ndim, dt, dev);
  if (t && torc_fill_(t, v)) {
    torc_release(t);
    return NULL;
  }
  return t;
}

/* ---- gather ---- */

static torc_tensor *gather(const torc_tensor *x, int dim,
                           const torc_tensor *index) {
  const char *fn = "torc_gather";
  if (x == NULL || index == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *pair[2] = {x, index};
  int d = 0;
  char a[128], b[128];
  if (torc__same_device(fn, pair, 2) || check_index_dtype(fn, index) ||
      check_not_scalar(fn, x) || torc__wrap_dim(dim, x->ndim, fn, &d))
    return NULL;
  if (index->ndim != x->ndim) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the index has %d dims (shape %s) but the input has "
                   "%d (shape %s); they must have the same number of dims",
                   fn, index->ndim, SHAPE(index, a), x->ndim, SHAPE(x, b));
    return NULL;
  }
  for (int i = 0; i < x->ndim; i++)
    if (i != d && index->shape[i] > x->shape[i]) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: the index (shape %s) is larger than the input "
                     "(shape %s) in dim %d (%lld > %lld); only dim %d may be "
                     "larger",
                     fn, SHAPE(index, a), SHAPE(x, b), i,
                     (long long)index->shape[i], (long long)x->shape[i], d);
      return NULL;
    }
  torc_tensor *out =
      torc__empty(index->shape, index->ndim, x->dtype, x->storage->device);
  if (out == NULL)
    return NULL;
  torc_index_params p = {d, 0};
  if ((torc__numel(out->shape, out->ndim) > 0 &&
       torc__kernel_call(TORC__OP_gather, x->dtype, pair, 2, &out, 1, &p,
                         sizeof p)) ||
      torc__record_gather(x, d, index, out)) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_gather(const torc_tensor *x, int dim,
                         const torc_tensor *index) {
  return torc__ret(gather(x, dim, index));
}

/* Checks an in-place write into x by `fn` (inputs in[0..n) include x):
 * no expanded target, and what autograd refuses. *rec: whether to record. */
static torc_status inplace_check(const char *fn, torc_tensor *x,
                                 const torc_tensor *const *in, int n,
                                 int *rec) {
  for (int i = 0; i < x->ndim; i++)
    if (x->strides[i] == 0 && x->shape[i] > 1)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: the target is an expanded view (dim %d has "
                            "stride 0): several elements share one memory "
                            "location; clone it first",
                            fn, i);
  *rec = torc__should_record(in, n);
  if (!*rec)
    return TORC_OK;
  torc_status st = torc__check_inplace(x, fn);
  if (st)
    return st;
  if (x->is_view && !x->requires_grad)
    return torc_set_error(TORC_ERR_AUTOGRAD,
                          "%s: writing a value that requires grad into a view "
                          "of another tensor is not tracked by autograd (the "
                          "base would not know); use the out-of-place op",
                          fn);
  return TORC_OK;
}

/* ---- scatter, scatter_add ---- */

/* Out of place (a new tensor), or into `target` (x itself) in place. */
static torc_tensor *scatter(const char *fn, const torc_tensor *x, int dim,
                            const torc_tensor *index, const torc_tensor *src,
                            int add, torc_tensor *target) {
  if (x == NULL || index == NULL || src == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *all[3] = {x, index, src};
  int d = 0;
  char a[128], b[128];
  if (torc__same_device(fn, all, 3) || check_index_dtype(fn, index) ||
      check_same_dtype(fn, x, src) || check_not_scalar(fn, x) ||
      torc__wrap_dim(dim, x->ndim, fn, &d))
    return NULL;
  if (index->ndim != x->ndim || src->ndim != x->ndim) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the input (shape %s), index (shape %s) and src must "
                   "have the same number of dims, but src has %d",
                   fn, SHAPE(x, a), SHAPE(index, b), src->ndim);
    return NULL;
  }
  for (int i = 0; i < x->ndim; i++) {
    if (index->shape[i] > src->shape[i]) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: the index (shape %s) is larger than src (shape %s) "
                     "in dim %d; src must be at least as large in every dim",
                     fn, SHAPE(index, a), SHAPE(src, b), i);
      return NULL;
    }
    if (i != d && index->shape[i] > x->shape[i]) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: the index (shape %s) is larger than the input "
                     "(shape %s) in dim %d (%lld > %lld); only dim %d may be "
                     "larger",
                     fn, SHAPE(index, a), SHAPE(x, b), i,
                     (long long)index->shape[i], (long long)x->shape[i], d);
      return NULL;
    }
  }
  int rec = 0;
  if (target && inplace_check(fn, target, all, 3, &rec))
    return NULL;
  torc_tensor *out = target ? target : torc__cast(x, TORC_DTYPE_ANY);
  if (out == NULL)
    return NULL;
  torc_index_params p = {d, add};
  const torc_tensor *in[2] = {index, src};
  if (torc__numel(index->shape, index->ndim) > 0 &&
      torc__kernel_call(TORC__OP_scatter, x->dtype, in, 2, &out, 1, &p,
                        sizeof p)) {
    if (!target)
      torc_release(out);
    return NULL;
  }
  if (target)
    torc__bump_version(target);
  if (torc__record_scatter(x, d, index, src, add, out)) {
    if (!target)
      torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_scatter(const torc_tensor *x, int dim,
                          const torc_tensor *index, const torc_tensor *src) {
  return torc__ret(scatter("torc_scatter", x, dim, index, src, 0, NULL));
}

torc_tensor *torc_scatter_add(const torc_tensor *x, int dim,
                              const torc_tensor *index,
                              const torc_tensor *src) {
  return torc__ret(scatter("torc_scatter_add", x, dim, index, src, 1, NULL));
}

torc_status torc_scatter_(torc_tensor *x, int dim, const torc_tensor *index,
                          const torc_tensor *src) {
  if (x == NULL)
    return torc__null_input("torc_scatter_");
  return scatter("torc_scatter_", x, dim, index, src, 0, x)
             ? TORC_OK
             : torc_last_status();
}

torc_status torc_scatter_add_(torc_tensor *x, int dim,
                              const torc_tensor *index,
                              const torc_tensor *src) {
  if (x == NULL)
    return torc__null_input("torc_scatter_add_");
  return scatter("torc_scatter_add_", x, dim, index, src, 1, x)
             ? TORC_OK
             : torc_last_status();
}

/* ---- index_select, index_add ---- */

static torc_status check_index_1d(const char *fn, const torc_tensor *index) {
  if (index->ndim <= 1)
    return TORC_OK;
  char a[128];
  return torc_set_error(TORC_ERR_SHAPE,
                        "%s: the index must be 1-D (or 0-D), got shape %s; "
                        "flatten it with torc_flatten(index, 0, -1)",
                        fn, SHAPE(index, a));
}

static torc_tensor *index_select(const torc_tensor *x, int dim,
                                 const torc_tensor *index) {
  const char *fn = "torc_index_select";
  if (x == NULL || index == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *pair[2] = {x, index};
  int d = 0;
  if (torc__same_device(fn, pair, 2) || check_index_dtype(fn, index) ||
      check_index_1d(fn, index) || check_not_scalar(fn, x) ||
      torc__wrap_dim(dim, x->ndim, fn, &d))
    return NULL;
  int64_t shape[TORC_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[d] = torc__numel(index->shape, index->ndim);
  torc_tensor *out = torc__empty(shape, x->ndim, x->dtype, x->storage->device);
  if (out == NULL)
    return NULL;
  torc_index_params p = {d, 0};
  if ((torc__numel(shape, x->ndim) > 0 &&
       torc__kernel_call(TORC__OP_index_select, x->dtype, pair, 2, &out, 1,
                         &p, sizeof p)) ||
      torc__record_index_select(x, d, index, out)) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_index_select(const torc_tensor *x, int dim,
                               const torc_tensor *index) {
  return torc__ret(index_select(x, dim, index));
}

static torc_tensor *index_add(const char *fn, const torc_tensor *x, int dim,
                              const torc_tensor *index, const torc_tensor *src,
                              double alpha, torc_tensor *target) {
  if (x == NULL || index == NULL || src == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *all[3] = {x, index, src};
  int d = 0;
  char a[128], b[128];
  if (torc__same_device(fn, all, 3) || check_index_dtype(fn, index) ||
      check_index_1d(fn, index) || check_same_dtype(fn, x, src) ||
      check_not_scalar(fn, x) || torc__wrap_dim(dim, x->ndim, fn, &d))
    return NULL;
  int64_t len = torc__numel(index->shape, index->ndim);
  int ok = src->ndim == x->ndim;
  for (int i = 0; ok && i < x->ndim; i++)
    ok = src->shape[i] == (i == d ? len : x->shape[i]);
  if (!ok) {
    int64_t want[TORC_MAX_DIMS];
    char c[128];
    memcpy(want, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    want[d] = len;
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: src has shape %s but must have shape %s (the input's "
                   "shape %s with dim %d of the index's length %lld)",
                   fn, SHAPE(src, a), torc__shape_str(want, x->ndim, c, sizeof c),
                   SHAPE(x, b), d, (long long)len);
    return NULL;
  }
  int rec = 0;
  if (target && inplace_check(fn, target, all, 3, &rec))
    return NULL;
  torc_tensor *out = target ? target : torc__cast(x, TORC_DTYPE_ANY);
  torc_tensor *scaled = NULL;
  if (out == NULL)
    return NULL;
  if (alpha != 1.0) {
    /* untracked: the record below is on src itself */
    torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
    torc_tensor *k = filled(NULL, 0, x->dtype, x->storage->device, alpha);
    scaled = k ? torc__binary(TORC__OP_mul, src, k) : NULL;
    torc_set_grad_mode(m);
    torc_release(k);
    if (scaled == NULL) {
      if (!target)
        torc_release(out);
      return NULL;
    }
  }
  torc_index_params p = {d, 1};
  const torc_tensor *in[2] = {index, scaled ? scaled : src};
  torc_status st = TORC_OK;
  if (torc__numel(src->shape, src->ndim) > 0)
    st = torc__kernel_call(TORC__OP_index_add, x->dtype, in, 2, &out, 1, &p,
                           sizeof p);
  if (st == TORC_OK && target)
    torc__bump_version(target);
  if (st || torc__record_index_add(x, d, index, src, alpha, out)) {
    if (!target)
      torc_release(out);
    out = NULL;
  }
  torc_release(scaled);
  return out;
}

torc_tensor *torc_index_add(const torc_tensor *x, int dim,
                            const torc_tensor *index, const torc_tensor *src,
                            double alpha) {
  return torc__ret(index_add("torc_index_add", x, dim, index, src, alpha,
                             NULL));
}

torc_status torc_index_add_(torc_tensor *x, int dim, const torc_tensor *index,
                            const torc_tensor *src, double alpha) {
  if (x == NULL)
    return torc__null_input("torc_index_add_");
  return index_add("torc_index_add_", x, dim, index, src, alpha, x)
             ? TORC_OK
             : torc_last_status();
}

/* ---- one_hot: zeros, then a scatter of ones ---- */

static torc_tensor *one_hot(const torc_tensor *indices, int64_t num_classes) {
  const char *fn = "torc_one_hot";
  if (indices == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (torc_dtype_is_float(indices->dtype) || indices->dtype == TORC_BOOL) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the indices must be an integer tensor, got %s; "
                   "convert them with torc_to_dtype(indices, TORC_I64)",
                   fn, torc_dtype_name(indices->dtype));
    return NULL;
  }
  if (indices->ndim + 1 > TORC_MAX_DIMS) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the indices have %d dims; the result would have more "
                   "than %d",
                   fn, indices->ndim, TORC_MAX_DIMS);
    return NULL;
  }
  if (num_classes < -1) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: num_classes is %lld; pass a count >= 0, or -1 to use "
                   "max(indices) + 1",
                   fn, (long long)num_classes);
    return NULL;
  }
  int64_t n = torc__numel(indices->shape, indices->ndim);
  if (n == 0 && num_classes == -1) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: cannot infer num_classes (-1) from empty indices; "
                   "pass it explicitly",
                   fn);
    return NULL;
  }
  /* Check the values on the host: one message naming the bad value. On
   * another device with num_classes given, nothing is read (it would
   * stall the queue): the scatter kernel checks each index and a bad one
   * is an asynchronous error naming it, reported at the next read or
   * synchronisation. num_classes -1 needs the maximum, so a read. */
  torc_tensor *idx = torc__cast(indices, TORC_I64);
  int on_device =
      !torc_device_is_host(indices->storage->device) && num_classes >= 0;
  int64_t *v = idx && !on_device
                   ? torc__malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1))
                   : NULL;
  torc_tensor *out = NULL, *col = NULL, *ones = NULL;
  if (on_device && idx)
    goto checked;
  if (v == NULL) {
    if (idx)
      torc_set_error(TORC_ERR_OOM, "%s: out of host memory", fn);
    goto done;
  }
  if (torc_to_host(idx, v, sizeof(int64_t) * (size_t)n))
    goto done;
  int64_t mx = -1;
  for (int64_t i = 0; i < n; i++) {
    if (v[i] < 0) {
      torc_set_error(TORC_ERR_RANGE,
                     "%s: index %lld (element %lld) is negative; class "
                     "indices must be >= 0",
                     fn, (long long)v[i], (long long)i);
      goto done;
    }
    if (v[i] > mx)
      mx = v[i];
  }
  if (num_classes == -1)
    num_classes = mx + 1;
  else if (mx >= num_classes) {
    torc_set_error(TORC_ERR_RANGE,
                   "%s: index %lld is out of range for num_classes %lld "
                   "(expected 0 to %lld)",
                   fn, (long long)mx, (long long)num_classes,
                   (long long)num_classes - 1);
    goto done;
  }
checked:;
  int64_t shape[TORC_MAX_DIMS];
  int nd = indices->ndim;
  memcpy(shape, indices->shape, sizeof(int64_t) * (size_t)nd);
  shape[nd] = 1;
  torc_device dev = indices->storage->device;
  shape[nd] = num_classes;
  if (!(out = filled(shape, nd + 1, TORC_I64, dev, 0)))
    goto done;
  if (n > 0 && num_classes > 0) {
    shape[nd] = 1;
    torc_index_params p = {nd, 0};
    if (!(col = torc__reshape(idx, shape, nd + 1, 1)) ||
        !(ones = filled(shape, nd + 1, TORC_I64, dev, 1)))
      goto fail;
    const torc_tensor *in[2] = {col, ones};
    if (torc__kernel_call(TORC__OP_scatter, TORC_I64, in, 2, &out, 1, &p,
                          sizeof p))
      goto fail;
  }
  goto done;
fail:
  torc_release(out);
  out = NULL;
done:
  torc__free(v);
  torc_release(idx), torc_release(col), torc_release(ones);
  return out;
}

torc_tensor *torc_one_hot(const torc_tensor *indices, int64_t num_classes) {
  return torc__ret(one_hot(indices, num_classes));
}

/* ---- cat, stack ---- */

static torc_tensor *cat(const char *fn, const torc_tensor *const *ts, int n,
                        int dim) {
  if (ts == NULL || n < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: expected a non-empty list of tensors, got %d%s", fn,
                   n, ts ? "" : " (NULL list)");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (ts[i] == NULL) {
      torc__null_input(fn);
      return NULL;
    }
  char a[128], b[128], c[64], e[64];
  /* the reference: the first tensor PyTorch does not skip */
  int r = 0;
  while (r < n - 1 && torc__cat_skipped(ts[r]->ndim, ts[r]->shape))
    r++;
  const torc_tensor *ref = ts[r];
  torc_device dev = ts[0]->storage->device;
  torc_dtype dt = ts[0]->dtype;
  for (int i = 1; i < n; i++) {
    if (!torc_device_eq(ts[i]->storage->device, dev)) {
      snprintf(c, sizeof c, "%s", torc__devname(ts[i]->storage->device));
      snprintf(e, sizeof e, "%s", torc__devname(dev));
      torc_set_error(TORC_ERR_DEVICE,
                     "%s: tensor %d is on %s but tensor 0 is on %s; all "
                     "tensors must be on one device (move it with "
                     "torc_to(t, device))",
                     fn, i, c, e);
      return NULL;
    }
    dt = torc_promote_types(dt, ts[i]->dtype);
  }
  if (ref->ndim == 0) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: tensor %d is 0-dimensional and cannot be "
                   "concatenated; reshape it to [1] first",
                   fn, r);
    return NULL;
  }
  int d = 0;
  if (torc__wrap_dim(dim, ref->ndim, fn, &d))
    return NULL;
  int64_t shape[TORC_MAX_DIMS];
  memcpy(shape, ref->shape, sizeof(int64_t) * (size_t)ref->ndim);
  shape[d] = 0;
  for (int i = 0; i < n; i++) {
    const torc_tensor *t = ts[i];
    if (torc__cat_skipped(t->ndim, t->shape) && i != r)
      continue;
    int bad = t->ndim != ref->ndim ? -1 : -2;
    for (int k = 0; bad == -2 && k < t->ndim; k++)
      if (k != d && t->shape[k] != ref->shape[k])
        bad = k;
    if (bad == -1) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: tensor %d has shape %s but tensor %d has shape %s: "
                     "they must have the same number of dims",
                     fn, i, SHAPE(t, a), r, SHAPE(ref, b));
      return NULL;
    }
    if (bad >= 0) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: tensor %d has shape %s but tensor %d has shape %s: "
                     "sizes must match except in dim %d (they differ in dim "
                     "%d)",
                     fn, i, SHAPE(t, a), r, SHAPE(ref, b), d, bad);
      return NULL;
    }
    shape[d] += t->shape[d];
  }
  torc_tensor *out = torc__empty(shape, ref->ndim, dt, dev);
  if (out == NULL)
    return NULL;
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    const torc_tensor *t = ts[i];
    if ((torc__cat_skipped(t->ndim, t->shape) && i != r) ||
        torc__numel(t->shape, t->ndim) == 0) {
      if (t->ndim == ref->ndim)
        off += t->shape[d];
      continue;
    }
    torc_tensor *v = torc__view_of(out, t->shape, out->strides, t->ndim,
                                   out->offset + off * out->strides[d]);
    torc_status st = v ? torc__kernel_call(TORC__OP_copy, t->dtype, &t, 1, &v,
                                           1, NULL, 0)
                       : torc_last_status();
    torc_release(v);
    if (st) {
      torc_release(out);
      return NULL;
    }
    off += t->shape[d];
  }
  if (torc__record_cat(ts, n, d, out)) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_cat(const torc_tensor *const *ts, int n, int dim) {
  return torc__ret(cat("torc_cat", ts, n, dim));
}

static torc_tensor *stack(const torc_tensor *const *ts, int n, int dim) {
  const char *fn = "torc_stack";
  if (ts == NULL || n < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: expected a non-empty list of tensors, got %d%s", fn,
                   n, ts ? "" : " (NULL list)");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (ts[i] == NULL) {
      torc__null_input(fn);
      return NULL;
    }
  char a[128], b[128];
  const torc_tensor *t0 = ts[0];
  for (int i = 1; i < n; i++) {
    const torc_tensor *t = ts[i];
    if (t->ndim != t0->ndim ||
        memcmp(t->shape, t0->shape, sizeof(int64_t) * (size_t)t->ndim)) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: tensor %d has shape %s but tensor 0 has shape %s; "
                     "stacked tensors must all have the same shape",
                     fn, i, SHAPE(t, a), SHAPE(t0, b));
      return NULL;
    }
  }
  if (t0->ndim + 1 > TORC_MAX_DIMS) {
    torc_set_error(TORC_ERR_SHAPE, "%s: the result would have more than %d "
                   "dims", fn, TORC_MAX_DIMS);
    return NULL;
  }
  int d = 0;
  if (torc__wrap_dim(dim, t0->ndim + 1, fn, &d))
    return NULL;
  torc_tensor **u = torc__calloc((size_t)n, sizeof *u);
  if (u == NULL) {
    torc_set_error(TORC_ERR_OOM, "%s: out of host memory", fn);
    return NULL;
  }
  torc_tensor *out = NULL;
  int i = 0;
  for (; i < n; i++) {
    const torc_tensor *t = ts[i];
    int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
    for (int k = 0, j = 0; k <= t->ndim; k++) {
      if (k == d) {
        shape[k] = 1;
        strides[k] = j < t->ndim ? t->strides[j] * t->shape[j] : 1;
        continue;
      }
      shape[k] = t->shape[j];
      strides[k] = t->strides[j];
      j++;
    }
    u[i] = torc__record_view(
        torc__view_of(t, shape, strides, t->ndim + 1, t->offset), t,
        TORC__VIEW_RESHAPE, NULL, 0);
    if (u[i] == NULL)
      break;
  }
  if (i == n)
    out = cat(fn, (const torc_tensor *const *)u, n, d);
  for (int k = 0; k < n; k++)
    torc_release(u[k]);
  torc__free(u);
  return out;
}

torc_tensor *torc_stack(const torc_tensor *const *ts, int n, int dim) {
  return torc__ret(stack(ts, n, dim));
}

/* ---- split, chunk: narrow views ---- */

static int split_views(const char *fn, const torc_tensor *x, int64_t size,
                       int64_t count, int d, torc_tensor **out, int max) {
  if (count > max || out == NULL) {
    if (out == NULL && max == 0)
      return (int)count;
    torc_set_error(TORC_ERR_INVALID,
                   "%s: the result has %lld pieces but out holds %d; pass an "
                   "array of at least %lld (call with out NULL and max 0 to "
                   "get the count)",
                   fn, (long long)count, out ? max : 0, (long long)count);
    return -1;
  }
  int64_t len = x->shape[d];
  for (int64_t i = 0; i < count; i++) {
    int64_t start = i * size < len ? i * size : len;
    int64_t end = start + size < len ? start + size : len;
    int64_t shape[TORC_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[d] = end - start;
    int64_t p[4] = {d, start, end, 1};
    torc_tensor *v = torc__record_view(
        torc__view_of(x, shape, x->strides, x->ndim,
                      x->offset + start * x->strides[d]),
        x, TORC__VIEW_SLICE, p, 4);
    if (v == NULL) {
      for (int64_t k = 0; k < i; k++) {
        torc_release(out[k]);
        out[k] = NULL;
      }
      return -1;
    }
    out[i] = v;
  }
  if (torc__ret_all(out, (int)count) != TORC_OK)
    return -1;
  return (int)count;
}

int torc_split(const torc_tensor *x, int64_t split_size, int dim,
               torc_tensor **out, int max) {
  const char *fn = "torc_split";
  if (x == NULL) {
    torc__null_input(fn);
    return -1;
  }
  int d = 0;
  if (check_not_scalar(fn, x) || torc__wrap_dim(dim, x->ndim, fn, &d))
    return -1;
  if (split_size < 1) {
    char a[128];
    torc_set_error(TORC_ERR_INVALID,
                   "%s: split_size is %lld; it must be >= 1 (splitting dim %d "
                   "of shape %s)",
                   fn, (long long)split_size, d, SHAPE(x, a));
    return -1;
  }
  int64_t len = x->shape[d];
  int64_t count = len == 0 ? 1 : (len + split_size - 1) / split_size;
  if (count > INT32_MAX) {
    torc_set_error(TORC_ERR_INVALID, "%s: %lld pieces are too many", fn,
                   (long long)count);
    return -1;
  }
  return split_views(fn, x, split_size, count, d, out, max);
}

int torc_chunk(const torc_tensor *x, int chunks, int dim, torc_tensor **out,
               int max) {
  const char *fn = "torc_chunk";
  if (x == NULL) {
    torc__null_input(fn);
    return -1;
  }
  int d = 0;
  if (check_not_scalar(fn, x) || torc__wrap_dim(dim, x->ndim, fn, &d))
    return -1;
  if (chunks < 1) {
    torc_set_error(TORC_ERR_INVALID, "%s: chunks is %d; it must be >= 1", fn,
                   chunks);
    return -1;
  }
  int64_t len = x->shape[d];
  if (len == 0) /* as torch.chunk: `chunks` empty pieces */
    return split_views(fn, x, 0, chunks, d, out, max);
  int64_t size = (len + chunks - 1) / chunks;
  return split_views(fn, x, size, (len + size - 1) / size, d, out, max);
}

/* ---- pad ---- */

static torc_tensor *pad(const torc_tensor *x, const int64_t *pads, int n_pads,
                        torc_pad_mode mode, double value) {
  const char *fn = "torc_pad";
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  char a[128];
  if (mode < TORC_PAD_CONSTANT || mode > TORC_PAD_REPLICATE) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: unknown mode %d; use TORC_PAD_CONSTANT, "
                   "TORC_PAD_REFLECT or TORC_PAD_REPLICATE",
                   fn, (int)mode);
    return NULL;
  }
  if (n_pads < 0 || n_pads % 2 || n_pads / 2 > x->ndim ||
      (n_pads > 0 && pads == NULL)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: got %d padding amounts%s for a tensor of shape %s; "
                   "give two per padded dim (last dim first), at most %d",
                   fn, n_pads, n_pads > 0 && pads == NULL ? " (NULL array)" : "",
                   SHAPE(x, a), 2 * x->ndim);
    return NULL;
  }
  torc_pad_params p;
  memset(&p, 0, sizeof p);
  p.mode = (int32_t)mode;
  p.value = value;
  int64_t shape[TORC_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  for (int i = 0; i < n_pads / 2; i++) {
    int d = x->ndim - 1 - i;
    int64_t lo = pads[2 * i], hi = pads[2 * i + 1], size = x->shape[d];
    if (lo < INT32_MIN || lo > INT32_MAX || hi < INT32_MIN || hi > INT32_MAX) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: padding (%lld, %lld) of dim %d is too large", fn,
                     (long long)lo, (long long)hi, d);
      return NULL;
    }
    if (mode != TORC_PAD_CONSTANT && (lo < 0 || hi < 0)) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: padding (%lld, %lld) of dim %d is negative; only "
                     "constant mode crops",
                     fn, (long long)lo, (long long)hi, d);
      return NULL;
    }
    if (mode == TORC_PAD_REFLECT && (lo >= size || hi >= size) &&
        (lo > 0 || hi > 0)) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: reflect padding (%lld, %lld) of dim %d must be "
                     "less than its size %lld (shape %s)",
                     fn, (long long)lo, (long long)hi, d, (long long)size,
                     SHAPE(x, a));
      return NULL;
    }
    if (mode == TORC_PAD_REPLICATE && size == 0 && (lo > 0 || hi > 0)) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: replicate padding of dim %d needs a non-empty dim "
                     "(shape %s)",
                     fn, d, SHAPE(x, a));
      return NULL;
    }
    shape[d] = size + lo + hi;
    if (shape[d] < 0) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: padding (%lld, %lld) of dim %d of size %lld gives a "
                     "negative size %lld",
                     fn, (long long)lo, (long long)hi, d, (long long)size,
                     (long long)shape[d]);
      return NULL;
    }
    p.before[d] = lo;
    p.after[d] = hi;
  }
  torc_tensor *out = torc__empty(shape, x->ndim, x->dtype, x->storage->device);
  if (out == NULL)
    return NULL;
  if ((torc__numel(shape, x->ndim) > 0 &&
       torc__kernel_call(TORC__OP_pad, x->dtype, &x, 1, &out, 1, &p,
                         sizeof p)) ||
      torc__record_pad(x, &p, out)) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_pad(const torc_tensor *x, const int64_t *pads, int n_pads,
                      torc_pad_mode mode, double value) {
  return torc__ret(pad(x, pads, n_pads, mode, value));
}

/* ---- interpolate ---- */

static torc_tensor *interpolate(const torc_tensor *x, int64_t out_h,
                                int64_t out_w, torc_interp_mode mode,
                                int align_corners) {
  const char *fn = "torc_interpolate";
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  char a[128];
  if (mode != TORC_INTERP_NEAREST && mode != TORC_INTERP_BILINEAR) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: unknown mode %d; use TORC_INTERP_NEAREST or "
                   "TORC_INTERP_BILINEAR",
                   fn, (int)mode);
    return NULL;
  }
  if (mode == TORC_INTERP_NEAREST && align_corners) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: align_corners only applies to bilinear mode; pass 0 "
                   "for nearest",
                   fn);
    return NULL;
  }
  if (x->ndim != 4) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: expected a 4-D input [N, C, H, W], got shape %s", fn,
                   SHAPE(x, a));
    return NULL;
  }
  if (!torc_dtype_is_float(x->dtype)) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the input is %s; interpolation needs a floating "
                   "dtype (convert with torc_to_dtype(x, TORC_F32))",
                   fn, torc_dtype_name(x->dtype));
    return NULL;
  }
  if (out_h < 1 || out_w < 1 || x->shape[2] < 1 || x->shape[3] < 1) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: input size %s and output size [%lld, %lld] must both "
                   "be non-empty in H and W",
                   fn, SHAPE(x, a), (long long)out_h, (long long)out_w);
    return NULL;
  }
  int64_t shape[4] = {x->shape[0], x->shape[1], out_h, out_w};
  torc_tensor *out = torc__empty(shape, 4, x->dtype, x->storage->device);
  if (out == NULL)
    return NULL;
  torc_interp_params p = {(int32_t)mode, align_corners ? 1 : 0};
  if ((torc__numel(shape, 4) > 0 &&
       torc__kernel_call(TORC__OP_interpolate, x->dtype, &x, 1, &out, 1, &p,
                         sizeof p)) ||
      torc__record_interpolate(x, &p, out)) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_interpolate(const torc_tensor *x, int64_t out_h,
                              int64_t out_w, torc_interp_mode mode,
                              int align_corners) {
  return torc__ret(interpolate(x, out_h, out_w, mode, align_corners));
}

/* ---- topk ---- */

torc_status torc_topk(const torc_tensor *x, int64_t k, int dim, int largest,
                      int sorted, torc_tensor **values,
                      torc_tensor **indices) {
  const char *fn = "torc_topk";
  (void)sorted; /* always sorted: see indexing.h */
  if (values)
    *values = NULL;
  if (indices)
    *indices = NULL;
  if (x == NULL)
    return torc__null_input(fn);
  int d = 0;
  torc_status st;
  if ((st = check_not_scalar(fn, x)) || (st = torc__wrap_dim(dim, x->ndim, fn, &d)))
    return st;
  char a[128];
  if (k < 0 || k > x->shape[d])
    return torc_set_error(TORC_ERR_RANGE,
                          "%s: k is %lld but dim %d has size %lld (shape %s); "
                          "k must be in 0 to %lld",
                          fn, (long long)k, d, (long long)x->shape[d],
                          SHAPE(x, a), (long long)x->shape[d]);
  if (x->dtype == TORC_BOOL)
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: not defined for bool tensors; convert with "
                          "torc_to_dtype(x, TORC_I64) first",
                          fn);
  int64_t shape[TORC_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[d] = k;
  torc_device dev = x->storage->device;
  torc_tensor *out[2] = {torc__empty(shape, x->ndim, x->dtype, dev),
                         torc__empty(shape, x->ndim, TORC_I64, dev)};
  torc_topk_params p = {k, d, largest ? 1 : 0};
  if (out[0] == NULL || out[1] == NULL ||
      (torc__numel(shape, x->ndim) > 0 &&
       torc__kernel_call(TORC__OP_topk, x->dtype, &x, 1, out, 2, &p,
                         sizeof p)) ||
      torc__record_topk(x, d, out[1], out[0])) {
    st = torc_last_status();
    torc_release(out[0]), torc_release(out[1]);
    return st;
  }
  if (values == NULL)
    torc_release(out[0]), out[0] = NULL;
  if (indices == NULL)
    torc_release(out[1]), out[1] = NULL;
  if ((st = torc__ret_all(out, 2)) != TORC_OK)
    return st;
  if (values)
    *values = out[0];
  if (indices)
    *indices = out[1];
  return TORC_OK;
}
