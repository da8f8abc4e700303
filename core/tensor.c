/* core/tensor.c — storages and tensors: reference counting, properties,
 * creation, and moving data between layouts, dtypes, devices and the
 * host. Views (no copies) are in tensor_views.c. Arithmetic lives in
 * kernels; this file only moves bytes and computes geometry.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc_internal.h"
#include "internal.h"
#include "stream_internal.h"
#include "tensor_internal.h"

static _Atomic int64_t live_tensors;

/* ---- storage ---- */

torc_storage *torc__storage_new(torc_device dev, size_t nbytes) {
  if (torc__device_check(dev, "allocate"))
    return NULL;
  torc__devtype *d = torc__devtype_get(dev.type);
  size_t limit = d->limit[dev.index];
  if (limit) {
    /* Counted first, so that threads allocating at once cannot together
     * pass the limit; given back when the storage is not made. */
    size_t had = atomic_fetch_add(&d->allocated[dev.index], nbytes);
    if (nbytes > limit || had > limit - nbytes) {
      atomic_fetch_sub(&d->allocated[dev.index], nbytes);
      char want[32], lim[32], in_use[32];
      torc__mem_human(nbytes, want, sizeof want);
      torc__mem_human(limit, lim, sizeof lim);
      torc__mem_human(had, in_use, sizeof in_use);
      torc_set_error(TORC_ERR_OOM,
                     "out of memory on %s:%d: allocating %zu bytes (%s) "
                     "would pass the memory limit of %zu bytes (%s) set by "
                     "torc_device_set_memory_limit, with %zu bytes (%s) "
                     "allocated; lower the batch size or the model's size, "
                     "or raise the limit",
                     d->name, dev.index, nbytes, want, limit, lim, had,
                     in_use);
      return NULL;
    }
  }
  torc_storage *s = torc__obj_alloc(TORC__POOL_STORAGE, sizeof *s);
  if (s == NULL) {
    if (limit)
      atomic_fetch_sub(&d->allocated[dev.index], nbytes);
    torc_set_error(TORC_ERR_OOM, "out of host memory for a tensor header");
    return NULL;
  }
  void *p = NULL;
  if (torc__mem_alloc(d, dev.index, nbytes, &p) != TORC_OK) {
    if (limit)
      atomic_fetch_sub(&d->allocated[dev.index], nbytes);
    torc__obj_free(TORC__POOL_STORAGE, s);
    return NULL;
  }
  s->refcount = 1;
  s->device = dev;
  s->ptr = p;
  s->nbytes = nbytes;
  s->alloc_stream = torc__stream_current(dev.type, dev.index);
  if (!limit)
    atomic_fetch_add(&d->allocated[dev.index], nbytes);
  return s;
}

void torc__storage_release(torc_storage *s) {
  if (s == NULL || atomic_fetch_sub(&s->refcount, 1) != 1)
    return;
  if (s->host_alloc && s->pool) {
    torc__pin_pool_put(s->pool, s->ptr, s->nbytes);
  } else if (s->host_alloc) {
    torc_host_free(s->pinned_for, s->ptr);
  } else {
    torc__devtype *d = torc__devtype_get(s->device.type);
    if (d) {
      torc__mem_free_on(d, s->device.index, s->ptr, s->nbytes, s->used,
                        s->n_used);
      atomic_fetch_sub(&d->allocated[s->device.index], s->nbytes);
    }
  }
  if (s->used)
    torc__storage_used_free(s);
  torc__obj_free(TORC__POOL_STORAGE, s);
}

/* ---- geometry helpers ---- */

int64_t torc__numel(const int64_t *shape, int ndim) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  return n;
}

void torc__contiguous_strides(const int64_t *shape, int ndim, int64_t *out) {
  /* Saturates instead of overflowing: a stride only grows past int64 for a
   * shape with no elements, whose strides address nothing. */
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    out[i] = s;
    if (__builtin_mul_overflow(s, shape[i] > 1 ? shape[i] : 1, &s))
      s = INT64_MAX;
  }
}

char *torc__shape_str(const int64_t *shape, int ndim, char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < ndim && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "",
                            (long long)shape[i]);
  if (len < size)
    snprintf(buf + len, size - len, "]");
  return buf;
}

torc_status torc__check_shape(const int64_t *shape, int ndim, const char *fn) {
  if (ndim < 0 || ndim > TORC_MAX_DIMS)
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: %d dimensions requested; torc supports 0 to %d",
                          fn, ndim, TORC_MAX_DIMS);
  if (ndim > 0 && shape == NULL)
    return torc_set_error(TORC_ERR_INVALID, "%s: shape is NULL with ndim %d",
                          fn, ndim);
  /* The product skips zero sizes, so that a shape with no elements still
   * has contiguous strides that fit in int64 (they multiply the others). */
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      char b[128];
      return torc_set_error(TORC_ERR_SHAPE,
                            "%s: shape %s has a negative size at dim %d", fn,
                            torc__shape_str(shape, ndim, b, sizeof b), i);
    }
    if (shape[i] > 0 && n > INT64_MAX / 16 / shape[i]) {
      char b[128];
      return torc_set_error(TORC_ERR_SHAPE, "%s: shape %s is too large (its nonzero sizes "
                            "multiply past 2^59); pass the shape you meant", fn,
                            torc__shape_str(shape, ndim, b, sizeof b));
    }
    if (shape[i] > 0)
      n *= shape[i];
  }
  return TORC_OK;
}

torc_status torc__wrap_dim(int dim, int ndim, const char *fn, int *out) {
  int lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  if (dim < lo || dim > hi)
    return torc_set_error(TORC_ERR_RANGE,
                          "%s: dim %d is out of range for a %d-dimensional "
                          "tensor (expected %d to %d)",
                          fn, dim, ndim, lo, hi);
  *out = dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
  return TORC_OK;
}

/* ---- tensor objects ---- */

static torc_tensor *tensor_alloc(torc_storage *s, torc_dtype dtype,
                                 const int64_t *shape, const int64_t *strides,
                                 int ndim, int64_t offset) {
  torc_tensor *t = torc__obj_alloc(TORC__POOL_TENSOR, sizeof *t);
  if (t == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of host memory for a tensor header");
    return NULL;
  }
  t->refcount = 1;
  t->dtype = dtype;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->strides[i] = strides[i];
  }
  t->offset = offset;
  t->storage = s;
  atomic_fetch_add(&live_tensors, 1);
  return t;
}

torc_tensor *torc__empty(const int64_t *shape, int ndim, torc_dtype dtype,
                         torc_device dev) {
  if (torc__ensure_init() != TORC_OK)
    return NULL;
  if (torc__check_shape(shape, ndim, "torc_empty"))
    return NULL;
  if (!torc_dtype_valid(dtype)) {
    torc_set_error(TORC_ERR_DTYPE, "torc_empty: invalid dtype %d", (int)dtype);
    return NULL;
  }
  int64_t strides[TORC_MAX_DIMS];
  torc__contiguous_strides(shape, ndim, strides);
  size_t nbytes = (size_t)torc__numel(shape, ndim) * torc_dtype_size(dtype);
  torc_storage *s = torc__storage_new(dev, nbytes);
  if (s == NULL)
    return NULL;
  torc_tensor *t = tensor_alloc(s, dtype, shape, strides, ndim, 0);
  if (t == NULL)
    torc__storage_release(s);
  return t;
}

torc_tensor *torc__view_of(const torc_tensor *t, const int64_t *shape,
                           const int64_t *strides, int ndim, int64_t offset) {
  torc_tensor *v = tensor_alloc(t->storage, t->dtype, shape, strides, ndim,
                                offset);
  if (v) {
    atomic_fetch_add(&t->storage->refcount, 1);
    v->is_view = 1;
  }
  return v;
}

torc_tensor *torc_retain(torc_tensor *t) {
  if (t)
    atomic_fetch_add(&t->refcount, 1);
  return t;
}

void torc_release(torc_tensor *t) {
  if (t == NULL || atomic_fetch_sub(&t->refcount, 1) != 1)
    return;
  torc__autograd_release(t);
  torc__storage_release(t->storage);
  atomic_fetch_sub(&live_tensors, 1);
  torc__obj_free(TORC__POOL_TENSOR, t);
}

int64_t torc_tensor_live_count(void) { return live_tensors; }

void torc__bump_version(torc_tensor *t) {
  if (!torc__inference_mode())
    atomic_fetch_add(&t->storage->version, 1);
}

/* ---- properties ---- */

int torc_ndim(const torc_tensor *t) { return t ? t->ndim : 0; }
const int64_t *torc_shape(const torc_tensor *t) { return t ? t->shape : NULL; }
const int64_t *torc_strides(const torc_tensor *t) {
  return t ? t->strides : NULL;
}
int64_t torc_storage_offset(const torc_tensor *t) { return t ? t->offset : 0; }
int64_t torc_numel(const torc_tensor *t) {
  return t ? torc__numel(t->shape, t->ndim) : 0;
}
torc_dtype torc_dtype_of(const torc_tensor *t) {
  return t ? t->dtype : TORC_DTYPE_ANY;
}
torc_device torc_device_of(const torc_tensor *t) {
  return t ? t->storage->device : TORC_CPU;
}
int torc_shares_storage(const torc_tensor *a, const torc_tensor *b) {
  return a && b && a->storage == b->storage;
}
uint64_t torc_version(const torc_tensor *t) {
  return t ? t->storage->version : 0;
}
int torc_is_pinned(const torc_tensor *t) { return t && t->storage->pinned; }

int64_t torc_size(const torc_tensor *t, int dim) {
  if (t == NULL) {
    torc__null_input("torc_size");
    return -1;
  }
  int d = 0;
  if (torc__wrap_dim(dim, t->ndim, "torc_size", &d) || t->ndim == 0) {
    if (t->ndim == 0)
      torc_set_error(TORC_ERR_RANGE,
                     "torc_size: dim %d of a 0-dimensional tensor (a scalar "
                     "has no dims)",
                     dim);
    return -1;
  }
  return t->shape[d];
}

int torc_is_contiguous(const torc_tensor *t) {
  if (t == NULL)
    return 0;
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 0)
      return 1;
    if (t->shape[i] != 1 && t->strides[i] != expect)
      return 0;
    expect *= t->shape[i];
  }
  return 1;
}

void *torc_data(const torc_tensor *t) {
  if (t == NULL) {
    torc__null_input("torc_data");
    return NULL;
  }
  if (!torc_device_is_host(t->storage->device)) {
    torc_set_error(TORC_ERR_DEVICE,
                   "torc_data: the tensor is on %s, whose memory the host "
                   "cannot read; copy it with torc_to(t, TORC_CPU) or "
                   "torc_to_host()",
                   torc__devname(t->storage->device));
    return NULL;
  }
  return (char *)t->storage->ptr + t->offset * (int64_t)torc_dtype_size(t->dtype);
}

/* ---- creation ---- */

torc_tensor *torc_empty(const int64_t *shape, int ndim, torc_dtype dtype,
                        torc_device dev) {
  return torc__ret(torc__empty(shape, ndim, dtype, dev));
}

/* fill_ kernel on a fresh contiguous tensor. */
static torc_status fill_contig(torc_tensor *t, double value) {
  torc_fill_params p = {value, 0};
  if (!torc_dtype_is_float(t->dtype)) {
    if (!(value >= -9.2233720368547758e18 && value < 9.2233720368547758e18))
      return torc_set_error(TORC_ERR_INVALID,
                            "fill: %g does not fit in %s", value,
                            torc_dtype_name(t->dtype));
    p.ivalue = (int64_t)value;
  }
  if (torc__numel(t->shape, t->ndim) == 0)
    return TORC_OK;
  return torc__kernel_call(TORC__OP_fill_, t->dtype, NULL, 0, &t, 1, &p,
                           sizeof p);
}

torc_tensor *torc_full(const int64_t *shape, int ndim, double value,
                       torc_dtype dtype, torc_device dev) {
  torc_tensor *t = torc__empty(shape, ndim, dtype, dev);
  if (t && fill_contig(t, value) != TORC_OK) {
    torc_release(t);
    t = NULL;
  }
  return torc__ret(t);
}

torc_tensor *torc_zeros(const int64_t *shape, int ndim, torc_dtype dtype,
                        torc_device dev) {
  return torc_full(shape, ndim, 0.0, dtype, dev);
}

torc_tensor *torc_ones(const int64_t *shape, int ndim, torc_dtype dtype,
                       torc_device dev) {
  return torc_full(shape, ndim, 1.0, dtype, dev);
}

torc_tensor *torc_empty_like(const torc_tensor *like) {
  if (like == NULL) {
    torc__null_input("torc_empty_like");
    return NULL;
  }
  return torc_empty(like->shape, like->ndim, like->dtype, like->storage->device);
}

torc_tensor *torc_zeros_like(const torc_tensor *like) {
  if (like == NULL) {
    torc__null_input("torc_zeros_like");
    return NULL;
  }
  return torc_zeros(like->shape, like->ndim, like->dtype, like->storage->device);
}

torc_tensor *torc_ones_like(const torc_tensor *like) {
  if (like == NULL) {
    torc__null_input("torc_ones_like");
    return NULL;
  }
  return torc_ones(like->shape, like->ndim, like->dtype, like->storage->device);
}

/* Copies `nbytes` of host memory into a fresh contiguous tensor. */
static torc_tensor *from_host_bytes(const void *data, const int64_t *shape,
                                    int ndim, torc_dtype dtype,
                                    torc_device dev) {
  torc_tensor *t = torc__empty(shape, ndim, dtype, dev);
  if (t == NULL)
    return NULL;
  size_t nbytes = t->storage->nbytes;
  if (nbytes) {
    torc__devtype *d = torc__devtype_get(dev.type);
    if (torc__copy_from_host(d, dev.index, t->storage->ptr, 0, data, nbytes,
                             0) != TORC_OK) {
      torc_release(t);
      return NULL;
    }
  }
  return t;
}

torc_tensor *torc_from_host(const void *data, const int64_t *shape, int ndim,
                            torc_dtype dtype, torc_device dev) {
  if (data == NULL && torc__numel(shape, ndim) > 0) {
    torc_set_error(TORC_ERR_INVALID, "torc_from_host: data is NULL");
    return NULL;
  }
  return torc__ret(from_host_bytes(data, shape, ndim, dtype, dev));
}

/* Builds a 1-D host buffer of n values f(i) in dtype, then uploads it. */
static torc_tensor *host_filled(int64_t n, torc_dtype dtype, torc_device dev,
                                double start, double step, double end,
                                int linspace) {
  size_t es = torc_dtype_size(dtype);
  if (es == 0) {
    torc_set_error(TORC_ERR_DTYPE, "invalid dtype %d", (int)dtype);
    return NULL;
  }
  char *buf = torc__malloc((size_t)(n > 0 ? n : 1) * es);
  if (buf == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of host memory for %lld elements",
                   (long long)n);
    return NULL;
  }
  int int_exact = !torc_dtype_is_float(dtype) && start == floor(start) &&
                  step == floor(step) && !linspace && fabs(start) < 9e15 &&
                  fabs(step) < 9e15;
  for (int64_t i = 0; i < n; i++) {
    if (int_exact)
      torc__store_i64(dtype, buf + i * (int64_t)es,
                      (int64_t)start + i * (int64_t)step);
    else if (linspace && i >= n / 2)
      torc__store_f64(dtype, buf + i * (int64_t)es,
                      end - step * (double)(n - 1 - i));
    else
      torc__store_f64(dtype, buf + i * (int64_t)es, start + step * (double)i);
  }
  int64_t shape[1] = {n};
  torc_tensor *t = from_host_bytes(buf, shape, 1, dtype, dev);
  torc__free(buf);
  return t;
}

torc_tensor *torc_arange(double start, double end, double step,
                         torc_dtype dtype, torc_device dev) {
  if (step == 0 || isnan(step) || isnan(start) || isnan(end) ||
      isinf(start) || isinf(end)) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_arange: start %g, end %g, step %g: step must be "
                   "non-zero and the bounds finite",
                   start, end, step);
    return NULL;
  }
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_arange: end %g is on the wrong side of start %g for "
                   "step %g; flip the step's sign",
                   end, start, step);
    return NULL;
  }
  double len = ceil((end - start) / step);
  if (len > 1e15) {
    torc_set_error(TORC_ERR_INVALID, "torc_arange: %g elements is too many",
                   len);
    return NULL;
  }
  return torc__ret(host_filled((int64_t)len, dtype, dev, start, step, end, 0));
}

torc_tensor *torc_linspace(double start, double end, int64_t steps,
                           torc_dtype dtype, torc_device dev) {
  if (steps < 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_linspace: steps is %lld; it must be >= 0",
                   (long long)steps);
    return NULL;
  }
  double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
  return torc__ret(host_filled(steps, dtype, dev, start, step, end, 1));
}

torc_tensor *torc_eye(int64_t n, int64_t m, torc_dtype dtype, torc_device dev) {
  if (m < 0)
    m = n;
  if (n < 0) {
    torc_set_error(TORC_ERR_INVALID, "torc_eye: n is %lld; it must be >= 0",
                   (long long)n);
    return NULL;
  }
  size_t es = torc_dtype_size(dtype);
  int64_t shape[2] = {n, m};
  if (es == 0 || torc__check_shape(shape, 2, "torc_eye")) {
    if (es == 0)
      torc_set_error(TORC_ERR_DTYPE, "torc_eye: invalid dtype %d", (int)dtype);
    return NULL;
  }
  char *buf = torc__calloc((size_t)(n * m > 0 ? n * m : 1), es);
  if (buf == NULL) {
    torc_set_error(TORC_ERR_OOM, "torc_eye: out of host memory");
    return NULL;
  }
  for (int64_t i = 0; i < n && i < m; i++)
    torc__store_f64(dtype, buf + (i * m + i) * (int64_t)es, 1.0);
  torc_tensor *t = from_host_bytes(buf, shape, 2, dtype, dev);
  torc__free(buf);
  return torc__ret(t);
}

/* A pinned cpu tensor for for_dev, its memory from host_alloc or from
 * pool p (when not NULL). Untracked. */
static torc_tensor *empty_pinned(const int64_t *shape, int ndim,
                                 torc_dtype dtype, torc_device for_dev,
                                 torc__pin_pool *pool) {
  if (torc__check_shape(shape, ndim, "torc_empty_pinned") ||
      torc__device_check(for_dev, "torc_empty_pinned"))
    return NULL;
  if (!torc_dtype_valid(dtype)) {
    torc_set_error(TORC_ERR_DTYPE, "torc_empty_pinned: invalid dtype %d",
                   (int)dtype);
    return NULL;
  }
  size_t nbytes = (size_t)torc__numel(shape, ndim) * torc_dtype_size(dtype);
  torc_storage *s = torc__obj_alloc(TORC__POOL_STORAGE, sizeof *s);
  if (s == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of host memory for a tensor header");
    return NULL;
  }
  s->ptr = pool ? torc__pin_pool_get(pool, nbytes)
                : torc_host_alloc(for_dev, nbytes);
  if (s->ptr == NULL) {
    torc__obj_free(TORC__POOL_STORAGE, s);
    return NULL;
  }
  torc__devtype *d = torc__devtype_get(for_dev.type);
  s->refcount = 1;
  s->device = TORC_CPU;
  s->nbytes = nbytes;
  s->host_alloc = 1;
  s->pinned = d->ops.host_alloc != NULL;
  s->pinned_for = for_dev;
  s->pool = pool;
  int64_t strides[TORC_MAX_DIMS];
  torc__contiguous_strides(shape, ndim, strides);
  torc_tensor *t = tensor_alloc(s, dtype, shape, strides, ndim, 0);
  if (t == NULL) {
    torc__storage_release(s);
    return NULL;
  }
  return t;
}

torc_tensor *torc_empty_pinned(const int64_t *shape, int ndim, torc_dtype dtype,
                               torc_device for_dev) {
  torc__ensure_init();
  return torc__ret(empty_pinned(shape, ndim, dtype, for_dev, NULL));
}

torc_tensor *torc__empty_pinned_pooled(const int64_t *shape, int ndim,
                                       torc_dtype dtype, torc__pin_pool *p,
                                       torc_device for_dev) {
  return empty_pinned(shape, ndim, dtype, for_dev, p);
}

/* ---- copies between layouts, dtypes and devices ---- */

torc_tensor *torc__contiguous(const torc_tensor *t) {
  if (torc_is_contiguous(t))
    return torc_retain((torc_tensor *)t);
  return torc__cast(t, TORC_DTYPE_ANY);
}

/* A contiguous copy of t on its device in `dtype` (ANY: t's dtype). */
torc_tensor *torc__cast(const torc_tensor *t, torc_dtype dtype) {
  if (dtype == TORC_DTYPE_ANY)
    dtype = t->dtype;
  torc_tensor *out = torc__empty(t->shape, t->ndim, dtype, t->storage->device);
  if (out == NULL)
    return NULL;
  if (torc__numel(t->shape, t->ndim) > 0 &&
      torc__kernel_call(TORC__OP_copy, t->dtype, &t, 1, &out, 1, NULL, 0)) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_contiguous(const torc_tensor *t) {
  CHECK_IN(t, "torc_contiguous");
  if (torc_is_contiguous(t))
    return torc__ret(torc_retain((torc_tensor *)t));
  return torc__ret(torc__record_view(torc__contiguous(t), t,
                                     TORC__VIEW_IDENTITY, NULL, 0));
}

torc_tensor *torc_clone(const torc_tensor *t) {
  CHECK_IN(t, "torc_clone");
  return torc__ret(torc__record_view(torc__cast(t, TORC_DTYPE_ANY), t,
                                     TORC__VIEW_IDENTITY, NULL, 0));
}

torc_tensor *torc_to_dtype(const torc_tensor *t, torc_dtype dtype) {
  CHECK_IN(t, "torc_to_dtype");
  if (!torc_dtype_valid(dtype)) {
    torc_set_error(TORC_ERR_DTYPE, "torc_to_dtype: invalid dtype %d",
                   (int)dtype);
    return NULL;
  }
  if (dtype == t->dtype)
    return torc__ret(torc_retain((torc_tensor *)t));
  torc_tensor *c = torc__cast(t, dtype);
  if (c && !torc_dtype_is_float(dtype))
    return torc__ret(c); /* integers carry no gradient */
  return torc__ret(torc__record_view(c, t, TORC__VIEW_IDENTITY, NULL, 0));
}

torc_tensor *torc__to(const torc_tensor *t, torc_device dev) {
  if (torc__device_check(dev, "torc_to"))
    return NULL;
  torc_device src_dev = t->storage->device;
  if (torc_device_eq(src_dev, dev))
    return torc_retain((torc_tensor *)t);
  torc_tensor *c = torc__contiguous(t);
  if (c == NULL)
    return NULL;
  size_t es = torc_dtype_size(c->dtype);
  size_t nbytes = (size_t)torc__numel(c->shape, c->ndim) * es;
  size_t off = (size_t)c->offset * es;
  torc_tensor *out = torc__empty(c->shape, c->ndim, c->dtype, dev);
  torc_status st = out ? TORC_OK : torc_last_status();
  if (out && nbytes) {
    torc__devtype *sd = torc__devtype_get(src_dev.type);
    torc__devtype *dd = torc__devtype_get(dev.type);
    if (torc_device_is_host(src_dev)) {
      uint32_t flags = 0;
      if (c->storage->pinned && torc_device_eq(c->storage->pinned_for, dev))
        flags |= TORC_COPY_ASYNC_PINNED;
      st = torc__copy_from_host(dd, dev.index, out->storage->ptr, 0,
                                (char *)c->storage->ptr + off, nbytes, flags);
    } else if (torc_device_is_host(dev)) {
      st = sd->ops.copy_to_host(sd->ops.user, src_dev.index, out->storage->ptr,
                                c->storage->ptr, off, nbytes);
    } else if (torc__copy_d2d_possible(sd, dd)) { /* device to device */
      st = torc__copy_d2d(dd, dev, out->storage->ptr, src_dev,
                          c->storage->ptr, off, nbytes);
    } else { /* between two accelerators: through the host */
      void *tmp = torc__malloc(nbytes);
      if (tmp == NULL) {
        st = torc_set_error(TORC_ERR_OOM,
                            "torc_to: out of host memory staging %zu bytes",
                            nbytes);
      } else {
        st = sd->ops.copy_to_host(sd->ops.user, src_dev.index, tmp,
                                  c->storage->ptr, off, nbytes);
        if (st == TORC_OK)
          st = torc__copy_from_host(dd, dev.index, out->storage->ptr, 0, tmp,
                                    nbytes, 0);
        torc__free(tmp);
      }
    }
  }
  torc_release(c);
  if (st != TORC_OK) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_to(const torc_tensor *t, torc_device dev) {
  CHECK_IN(t, "torc_to");
  if (torc_device_eq(t->storage->device, dev))
    return torc__ret(torc_retain((torc_tensor *)t));
  return torc__ret(torc__record_view(torc__to(t, dev), t, TORC__VIEW_IDENTITY,
                                     NULL, 0));
}

torc_status torc_copy_(torc_tensor *dst, const torc_tensor *src) {
  if (dst == NULL || src == NULL)
    return torc__null_input("torc_copy_");
  const torc_tensor *pair[2] = {dst, src};
  torc_status st = torc__same_device("torc_copy_", pair, 2);
  if (st)
    return st;
  const torc_tensor *both[2] = {dst, src};
  int rec = torc__should_record(both, 2);
  if (rec && (st = torc__check_inplace(dst, "torc_copy_")))
    return st;
  if (rec && src->requires_grad && dst->is_view)
    return torc_set_error(
        TORC_ERR_AUTOGRAD,
        "torc_copy_: copying a value that requires grad into a view of "
        "another tensor is not tracked by autograd; build the result out of "
        "place (e.g. with torc_cat) instead");
  torc_tensor *e = torc__expand_or_self(src, dst->shape, dst->ndim);
  if (e == NULL) {
    char a[128], b[128];
    return torc_set_error(TORC_ERR_SHAPE,
                          "torc_copy_: source of shape %s does not broadcast "
                          "to the destination's shape %s",
                          torc__shape_str(src->shape, src->ndim, a, sizeof a),
                          torc__shape_str(dst->shape, dst->ndim, b, sizeof b));
  }
  if (torc__numel(dst->shape, dst->ndim) > 0)
    st = torc__kernel_call(TORC__OP_copy, src->dtype,
                           (const torc_tensor *const *)&e, 1, &dst, 1, NULL, 0);
  torc_release(e);
  if (st == TORC_OK) {
    torc__bump_version(dst);
    if (rec) { /* dst's old history is overwritten: it now depends on src */
      if (dst->grad_fn) {
        torc__node_release(dst->grad_fn);
        dst->grad_fn = NULL;
      }
      dst->requires_grad = 0;
      if (src->requires_grad &&
          torc__record_view(torc_retain(dst), src, TORC__VIEW_IDENTITY, NULL,
                            0) == NULL)
        return torc_last_status();
      torc_release(dst); /* the reference record_view was given */
    }
  }
  return st;
}

torc_status torc_fill_(torc_tensor *t, double value) {
  if (t == NULL)
    return torc__null_input("torc_fill_");
  torc_status st = torc__check_inplace(t, "torc_fill_");
  if (st)
    return st;
  if (torc_is_contiguous(t)) {
    st = fill_contig(t, value);
  } else { /* fill a contiguous temporary, then copy through the strides */
    torc_tensor *tmp = torc__empty(t->shape, t->ndim, t->dtype,
                                   t->storage->device);
    if (tmp == NULL)
      return torc_last_status();
    st = fill_contig(tmp, value);
    if (st == TORC_OK)
      st = torc__kernel_call(TORC__OP_copy, t->dtype,
                             (const torc_tensor *const *)&tmp, 1, &t, 1, NULL,
                             0);
    torc_release(tmp);
  }
  if (st == TORC_OK)
    torc__bump_version(t);
  return st;
}

torc_status torc_zero_(torc_tensor *t) { return torc_fill_(t, 0.0); }

torc_status torc_to_host(const torc_tensor *t, void *dst, size_t nbytes) {
  if (torc__trace_on)
    torc__trace_host_read("torc_to_host");
  if (t == NULL)
    return torc__null_input("torc_to_host");
  size_t es = torc_dtype_size(t->dtype);
  size_t need = (size_t)torc__numel(t->shape, t->ndim) * es;
  if (nbytes != need) {
    char b[128];
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_to_host: the buffer has %zu bytes; a %s tensor "
                          "of shape %s needs exactly %zu",
                          nbytes, torc_dtype_name(t->dtype),
                          torc__shape_str(t->shape, t->ndim, b, sizeof b),
                          need);
  }
  if (need && dst == NULL)
    return torc_set_error(TORC_ERR_INVALID, "torc_to_host: dst is NULL");
  if (need == 0)
    return TORC_OK;
  torc_tensor *c = torc__contiguous(t);
  if (c == NULL)
    return torc_last_status();
  torc__devtype *d = torc__devtype_get(c->storage->device.type);
  torc_status st = d->ops.copy_to_host(d->ops.user, c->storage->device.index,
                                       dst, c->storage->ptr,
                                       (size_t)c->offset * es, need);
  torc_release(c);
  return st;
}

static torc_status item_bytes(const torc_tensor *t, const char *fn,
                              unsigned char buf[8]) {
  if (t == NULL)
    return torc__null_input(fn);
  if (torc__numel(t->shape, t->ndim) != 1) {
    char b[128];
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: the tensor has shape %s (%lld elements); only a "
                          "one-element tensor has a single value (reduce it "
                          "first, e.g. torc_sum or torc_mean)",
                          fn, torc__shape_str(t->shape, t->ndim, b, sizeof b),
                          (long long)torc__numel(t->shape, t->ndim));
  }
  if (torc__trace_on)
    torc__trace_host_read(fn);
  return torc_to_host(t, buf, torc_dtype_size(t->dtype));
}

torc_status torc_item(const torc_tensor *t, double *out) {
  unsigned char buf[8];
  torc_status st = item_bytes(t, "torc_item", buf);
  if (st == TORC_OK)
    *out = torc__load_f64(t->dtype, buf);
  return st;
}

torc_status torc_item_i64(const torc_tensor *t, int64_t *out) {
  unsigned char buf[8];
  torc_status st = item_bytes(t, "torc_item_i64", buf);
  if (st)
    return st;
  if (torc_dtype_is_float(t->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "torc_item_i64: the tensor is %s; use torc_item for "
                          "floating values",
                          torc_dtype_name(t->dtype));
  *out = torc__load_i64(t->dtype, buf);
  return TORC_OK;
}
