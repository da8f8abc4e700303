/* core/ops_reduce.c — the ops along one dim (cumsum, max/min with
 * indices, argmax/argmin, softmax, log_softmax) and linear (composed from
 * matmul and add, recorded as one LinearBackward node). var, std, norm and
 * logsumexp are reductions and live with the others in ops.c.
 */
#include <stdio.h>

#include "internal.h"

#define OPNAME(op) (torc__ops[op].name)

/* x's shape with dim d set to 1 (nothing for a 0-dim x). */
static void keep_shape(const torc_tensor *x, int d, int64_t *shape) {
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  if (x->ndim > 0)
    shape[d] = 1;
}

/* t (a fresh private contiguous tensor of keepdim shape) with dim d
 * removed; consumes t. */
static torc_tensor *drop_dim(torc_tensor *t, int d) {
  if (t == NULL || t->ndim == 0)
    return t;
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != d)
      shape[n++] = t->shape[i];
  torc__contiguous_strides(shape, n, strides);
  torc_tensor *v = torc__view_of(t, shape, strides, n, t->offset);
  torc_release(t);
  if (v)
    v->is_view = 0; /* a private buffer's view */
  return v;
}

static torc_status need_float(const char *fn, const torc_tensor *x) {
  if (torc_dtype_is_float(x->dtype))
    return TORC_OK;
  return torc_set_error(TORC_ERR_DTYPE,
                        "%s: the input is %s; this op needs a floating dtype: "
                        "cast first with torc_to_dtype(x, TORC_F32)",
                        fn, torc_dtype_name(x->dtype));
}

/* ---- cumsum, softmax, log_softmax: out has x's shape ---- */

static torc_tensor *along_dim(int op, const torc_tensor *x, int dim) {
  const char *fn = torc__op_fn[0][op];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  int d = 0;
  if (torc__wrap_dim(dim, x->ndim, fn, &d))
    return NULL;
  torc_dtype odt = x->dtype;
  if (op == TORC__OP_cumsum) {
    if (!torc_dtype_is_float(x->dtype))
      odt = TORC_I64;
  } else if (need_float(fn, x)) {
    return NULL;
  }
  torc_tensor *out = torc__empty(x->shape, x->ndim, odt, x->storage->device);
  if (out == NULL)
    return NULL;
  torc_dim_params p = {d, 0};
  if ((torc__numel(x->shape, x->ndim) > 0 &&
       torc__kernel_call(op, x->dtype, &x, 1, &out, 1, &p, sizeof p)) ||
      torc__record_op(op, &x, 1, out, &p, sizeof p)) {
    torc_release(out);
    return NULL;
  }
  return out;
}

/* along_dim in f32 under autocast (all three are on its f32 list). */
static torc_tensor *along_dim_f32(int op, const torc_tensor *x, int dim) {
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &x);
  torc_tensor *r = along_dim(op, x, dim);
  TORC__AC_END();
  return r;
}

torc_tensor *torc_cumsum(const torc_tensor *x, int dim) {
  return torc__ret(along_dim_f32(TORC__OP_cumsum, x, dim));
}
torc_tensor *torc_softmax(const torc_tensor *x, int dim) {
  return torc__ret(along_dim_f32(TORC__OP_softmax, x, dim));
}
torc_tensor *torc_log_softmax(const torc_tensor *x, int dim) {
  return torc__ret(along_dim_f32(TORC__OP_log_softmax, x, dim));
}

/* ---- max/min along a dim, argmax/argmin ---- */

/* Untracked values and indices (keepdim shape unless !keepdim); records
 * the values when `record`. */
static torc_status extreme_dim(int op, const char *fn, const torc_tensor *x,
                               int dim, int keepdim, int record,
                               torc_tensor **values, torc_tensor **indices) {
  *values = *indices = NULL;
  if (x == NULL)
    return torc__null_input(fn);
  int d = 0;
  torc_status st = torc__wrap_dim(dim, x->ndim, fn, &d);
  if (st)
    return st;
  if (x->ndim > 0 && x->shape[d] == 0) {
    char b[128];
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: dim %d of the input (shape %s) has size 0: the "
                          "maximum or minimum of nothing is undefined",
                          fn, d, torc__shape_str(x->shape, x->ndim, b, sizeof b));
  }
  int64_t ks[TORC_MAX_DIMS];
  keep_shape(x, d, ks);
  torc_device dev = x->storage->device;
  torc_tensor *out[2] = {torc__empty(ks, x->ndim, x->dtype, dev),
                         torc__empty(ks, x->ndim, TORC_I64, dev)};
  torc_dim_params p = {d, 0};
  if (out[0] == NULL || out[1] == NULL ||
      (torc__numel(ks, x->ndim) > 0 &&
       torc__kernel_call(op, x->dtype, &x, 1, out, 2, &p, sizeof p))) {
    torc_release(out[0]);
    torc_release(out[1]);
    return torc_last_status();
  }
  if (!keepdim) {
    out[0] = drop_dim(out[0], d);
    out[1] = out[0] ? drop_dim(out[1], d) : (torc_release(out[1]), NULL);
    if (out[1] == NULL) {
      torc_release(out[0]);
      return torc_last_status();
    }
  }
  if (record && (st = torc__record_max_dim(op, x, out[0], out[1], d, keepdim))) {
    torc_release(out[0]);
    torc_release(out[1]);
    return st;
  }
  *values = out[0];
  *indices = out[1];
  return TORC_OK;
}

static torc_status max_min_dim(int op, const char *fn, const torc_tensor *x,
                               int dim, int keepdim, torc_tensor **values,
                               torc_tensor **indices) {
  if (values)
    *values = NULL;
  if (indices)
    *indices = NULL;
  torc_tensor *v, *i;
  torc_status st = extreme_dim(op, fn, x, dim, keepdim, 1, &v, &i);
  if (st)
    return st;
  if (values == NULL)
    torc_release(v), v = NULL;
  if (indices == NULL)
    torc_release(i), i = NULL;
  torc_tensor *both[2] = {v, i};
  if ((st = torc__ret_all(both, 2)) != TORC_OK)
    return st;
  if (values)
    *values = both[0];
  if (indices)
    *indices = both[1];
  return TORC_OK;
}

torc_status torc_max_dim(const torc_tensor *x, int dim, int keepdim,
                         torc_tensor **values, torc_tensor **indices) {
  return max_min_dim(TORC__OP_max_dim, "torc_max_dim", x, dim, keepdim, values,
                     indices);
}

torc_status torc_min_dim(const torc_tensor *x, int dim, int keepdim,
                         torc_tensor **values, torc_tensor **indices) {
  return max_min_dim(TORC__OP_min_dim, "torc_min_dim", x, dim, keepdim, values,
                     indices);
}

static torc_tensor *arg_extreme(int op, const char *fn, const torc_tensor *x,
                                const int *dim, int keepdim) {
  torc_tensor *v = NULL, *i = NULL;
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (dim) {
    if (extreme_dim(op, fn, x, *dim, keepdim, 0, &v, &i))
      return NULL;
    torc_release(v);
    return i;
  }
  /* Over the flattened tensor. */
  int64_t n = torc__numel(x->shape, x->ndim);
  if (n == 0) {
    char b[128];
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the input (shape %s) has no elements: the index of "
                   "the maximum or minimum of nothing is undefined",
                   fn, torc__shape_str(x->shape, x->ndim, b, sizeof b));
    return NULL;
  }
  torc_tensor *flat = torc__reshape(x, &n, 1, 1);
  if (flat == NULL || extreme_dim(op, fn, flat, 0, 0, 0, &v, &i)) {
    torc_release(flat);
    return NULL;
  }
  torc_release(flat);
  torc_release(v);
  if (keepdim && x->ndim > 0) {
    int64_t ones[TORC_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++)
      ones[k] = 1;
    torc_tensor *r = torc__reshape(i, ones, x->ndim, 1);
    torc_release(i);
    if (r)
      r->is_view = 0;
    i = r;
  }
  return i;
}

torc_tensor *torc_argmax(const torc_tensor *x, const int *dim, int keepdim) {
  return torc__ret(arg_extreme(TORC__OP_max_dim, "torc_argmax", x, dim,
                               keepdim));
}

torc_tensor *torc_argmin(const torc_tensor *x, const int *dim, int keepdim) {
  return torc__ret(arg_extreme(TORC__OP_min_dim, "torc_argmin", x, dim,
                               keepdim));
}

/* ---- linear ---- */

static torc_tensor *linear(const torc_tensor *x, const torc_tensor *w,
                           const torc_tensor *b) {
  const char *fn = "torc_linear";
  if (x == NULL || w == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *in[3] = {x, w, b};
  if (torc__same_device(fn, in, b ? 3 : 2))
    return NULL;
  char s1[128], s2[128], s3[128];
  if (w->ndim != 2 || x->ndim == 0 || x->shape[x->ndim - 1] != w->shape[1]) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: input of shape %s and weight of shape %s do not fit: "
                   "the weight must be [out_features, in_features] and the "
                   "input's last dim in_features",
                   fn, torc__shape_str(x->shape, x->ndim, s1, sizeof s1),
                   torc__shape_str(w->shape, w->ndim, s2, sizeof s2));
    return NULL;
  }
  if (b && (b->ndim > 1 ||
            (b->ndim == 1 && b->shape[0] != w->shape[0] && b->shape[0] != 1))) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: bias of shape %s does not fit weight of shape %s: it "
                   "must be [%lld] (out_features)",
                   fn, torc__shape_str(b->shape, b->ndim, s3, sizeof s3),
                   torc__shape_str(w->shape, w->ndim, s2, sizeof s2),
                   (long long)w->shape[0]);
    return NULL;
  }
  /* The parts run unrecorded; one node covers the whole op. */
  torc_grad_mode mode = torc_get_grad_mode();
  if (mode == TORC_GRAD_ENABLED)
    torc_set_grad_mode(TORC_NO_GRAD);
  int64_t ts[2] = {w->shape[1], w->shape[0]};
  int64_t tst[2] = {w->strides[1], w->strides[0]};
  torc_tensor *wt = torc__view_of(w, ts, tst, 2, w->offset);
  torc_tensor *mm = wt ? torc__matmul(x, wt) : NULL;
  torc_tensor *out = mm && b ? torc__binary(TORC__OP_add, mm, b) : NULL;
  if (b == NULL)
    out = mm ? torc_retain(mm) : NULL;
  torc_release(wt);
  torc_release(mm);
  if (mode == TORC_GRAD_ENABLED)
    torc_set_grad_mode(mode);
  if (out && torc__record_linear(x, w, b, out)) {
    torc_release(out);
    out = NULL;
  }
  return out;
}

torc_tensor *torc_linear(const torc_tensor *x, const torc_tensor *weight,
                         const torc_tensor *bias) {
  TORC__AC_BEGIN(TORC_AUTOCAST_LOWER, &x, &weight, &bias);
  torc_tensor *r = linear(x, weight, bias);
  TORC__AC_END();
  return torc__ret(r);
}
