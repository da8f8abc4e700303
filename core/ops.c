/* core/ops.c — the ops' shape and dtype logic: broadcasting, PyTorch's type
 * promotion (result_type with its 0-dim rules), reductions' dims, matmul's
 * 1-D/batched rules. Each op checks its inputs, allocates the output and
 * hands the arithmetic to the kernel the dispatcher finds.
 */
#include <math.h>
#include <stdio.h>

#include "internal.h"

/* ---- dtype rules ---- */

static int category(torc_dtype dt) {
  return dt == TORC_BOOL ? 0 : torc_dtype_is_float(dt) ? 2 : 1;
}

/* c10's combine_categories: the 0-dim operand only promotes when it is of
 * a higher category (an f64 scalar does not turn an f32 tensor to f64). */
static torc_dtype combine_categories(torc_dtype higher, torc_dtype lower) {
  if (higher == TORC_DTYPE_ANY)
    return lower;
  if (lower == TORC_DTYPE_ANY || torc_dtype_is_float(higher))
    return higher;
  if (higher == TORC_BOOL || torc_dtype_is_float(lower))
    return torc_promote_types(higher, lower);
  return higher;
}

/* torch.result_type of two tensors. */
torc_dtype torc__result_type(const torc_tensor *a, const torc_tensor *b) {
  torc_dtype dim_r = TORC_DTYPE_ANY, zero_r = TORC_DTYPE_ANY;
  const torc_tensor *ts[2] = {a, b};
  for (int i = 0; i < 2; i++) {
    torc_dtype *r = ts[i]->ndim > 0 ? &dim_r : &zero_r;
    *r = *r == TORC_DTYPE_ANY ? ts[i]->dtype : torc_promote_types(*r, ts[i]->dtype);
  }
  return combine_categories(dim_r, zero_r);
}

/* ---- broadcasting ---- */

torc_status torc__broadcast_shapes(const char *fn, const torc_tensor *a,
                                   const torc_tensor *b, int64_t *out,
                                   int *out_ndim) {
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int i = 0; i < n; i++) {
    int ia = a->ndim - n + i, ib = b->ndim - n + i;
    int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char x[128], y[128];
      return torc_set_error(
          TORC_ERR_SHAPE,
          "%s: shapes %s and %s do not broadcast: at dim %d (counting from "
          "the end: %d) the sizes are %lld and %lld; each pair of sizes must "
          "be equal or one of them 1",
          fn, torc__shape_str(a->shape, a->ndim, x, sizeof x),
          torc__shape_str(b->shape, b->ndim, y, sizeof y), i, i - n,
          (long long)sa, (long long)sb);
    }
    out[i] = sa == 1 ? sb : sa;
  }
  *out_ndim = n;
  return TORC_OK;
}

/* t cast to dtype (a new reference; t itself when it already is). */
torc_tensor *torc__as_dtype(const torc_tensor *t, torc_dtype dt) {
  if (t->dtype == dt)
    return torc_retain((torc_tensor *)t);
  return torc__cast(t, dt);
}

#define OPNAME(op) (torc__ops[op].name)

/* ---- unary ---- */

torc_tensor *torc__unary_p(int op, const torc_tensor *x, const void *params,
                           size_t psize) {
  const char *fn = torc__op_fn[0][op];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  torc_dtype kdt = x->dtype, odt;
  torc__op_rule rule = torc__ops[op].rule;
  if (rule == TORC__R_NUMERIC && x->dtype == TORC_BOOL) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: not defined for bool tensors; cast first with "
                   "torc_to_dtype(x, TORC_I64) or TORC_F32",
                   fn);
    return NULL;
  }
  if (rule == TORC__R_FLOATONLY && !torc_dtype_is_float(x->dtype)) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the input is %s; this op is defined for floating "
                   "dtypes only (f32, f64, f16, bf16): cast first with "
                   "torc_to_dtype(x, TORC_F32)",
                   fn, torc_dtype_name(x->dtype));
    return NULL;
  }
  if (rule == TORC__R_FLOAT && !torc_dtype_is_float(kdt))
    kdt = TORC_F32;
  odt = rule == TORC__R_LOGICAL ? TORC_BOOL : kdt;
  torc_tensor *xin = torc__as_dtype(x, kdt);
  if (xin == NULL)
    return NULL;
  torc_tensor *out = torc__empty(x->shape, x->ndim, odt, x->storage->device);
  if (out && ((torc__numel(x->shape, x->ndim) > 0 &&
               torc__kernel_call(op, kdt, (const torc_tensor *const *)&xin, 1,
                                 &out, 1, params, psize)) ||
              torc__record_op(op, &x, 1, out, params, psize))) {
    torc_release(out);
    out = NULL;
  }
  torc_release(xin);
  return out;
}

torc_tensor *torc__unary(int op, const torc_tensor *x) {
  return torc__unary_p(op, x, NULL, 0);
}

/* ---- binary ---- */

/* The dtype the kernel computes in, and the output dtype, for op on a, b. */
static torc_status binary_dtypes(int op, const char *fn, const torc_tensor *a,
                                 const torc_tensor *b, torc_dtype *kdt,
                                 torc_dtype *odt) {
  torc_dtype r = torc__result_type(a, b);
  switch (torc__ops[op].rule) {
  case TORC__R_NOBOOL:
    if (r == TORC_BOOL)
      return torc_set_error(TORC_ERR_DTYPE,
                            "%s: not defined for bool tensors; cast them "
                            "first with torc_to_dtype(t, TORC_I64)",
                            fn);
    break;
  case TORC__R_TRUEDIV:
    if (!torc_dtype_is_float(r))
      r = TORC_F32;
    break;
  default:
    break;
  }
  *kdt = r;
  *odt = torc__ops[op].rule == TORC__R_CMP ? TORC_BOOL : r;
  return TORC_OK;
}

torc_tensor *torc__binary(int op, const torc_tensor *a, const torc_tensor *b) {
  const char *fn = torc__op_fn[0][op];
  if (a == NULL || b == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *pair[2] = {a, b};
  if (torc__same_device(fn, pair, 2))
    return NULL;
  int64_t shape[TORC_MAX_DIMS];
  int ndim;
  torc_dtype kdt, odt;
  if (torc__broadcast_shapes(fn, a, b, shape, &ndim) ||
      binary_dtypes(op, fn, a, b, &kdt, &odt))
    return NULL;
  torc_tensor *out = torc__empty(shape, ndim, odt, a->storage->device);
  if (out == NULL)
    return NULL;
  if (torc__numel(shape, ndim) == 0) {
    if (torc__record_op(op, pair, 2, out, NULL, 0)) {
      torc_release(out);
      return NULL;
    }
    return out;
  }
  /* The kernel's inputs: a and b themselves in the common case (same
   * dtype and shape: no new tensor, no reference count touched), else a
   * cast and/or a broadcast view, released after the call. */
  const torc_tensor *in[2] = {a, b};
  torc_tensor *tmp[4] = {NULL, NULL, NULL, NULL};
  int ok = 1;
  for (int i = 0; i < 2 && ok; i++) {
    if (in[i]->dtype != kdt) {
      ok = (tmp[i] = torc__cast(in[i], kdt)) != NULL;
      in[i] = tmp[i];
    }
    if (ok && !(in[i]->ndim == ndim &&
                memcmp(in[i]->shape, shape, sizeof(int64_t) * (size_t)ndim) ==
                    0)) {
      ok = (tmp[2 + i] = torc__expand(in[i], shape, ndim)) != NULL;
      in[i] = tmp[2 + i];
    }
  }
  if (!ok || torc__kernel_call(op, kdt, in, 2, &out, 1, NULL, 0) ||
      torc__record_op(op, pair, 2, out, NULL, 0)) {
    torc_release(out);
    out = NULL;
  }
  for (int i = 0; i < 4; i++)
    torc_release(tmp[i]);
  return out;
}

/* The public functions of the table's plain ops (fn column UNARY, BINARY
 * or their _API forms; declared in torc/ops.h from the same rows). */
static torc_tensor *unary_autocast(int op, const torc_tensor *x) {
  TORC__AC_BEGIN(torc__autocast_op_policy(op), &x);
  torc_tensor *r = torc__unary(op, x);
  TORC__AC_END();
  return r;
}

static torc_tensor *binary_autocast(int op, const torc_tensor *a,
                                    const torc_tensor *b) {
  TORC__AC_BEGIN(torc__autocast_op_policy(op), &a, &b);
  torc_tensor *r = torc__binary(op, a, b);
  TORC__AC_END();
  return r;
}

#define TORC_OP_FN_UNARY(name)                                                 \
  torc_tensor *torc_##name(const torc_tensor *x) {                             \
    if (torc__autocast_tl != TORC_F32)                                         \
      return torc__ret(unary_autocast(TORC__OP_##name, x));                    \
    return torc__ret(torc__unary(TORC__OP_##name, x));                         \
  }
#define TORC_OP_FN_BINARY(name)                                                \
  torc_tensor *torc_##name(const torc_tensor *a, const torc_tensor *b) {       \
    if (torc__autocast_tl != TORC_F32)                                         \
      return torc__ret(binary_autocast(TORC__OP_##name, a, b));                \
    return torc__ret(torc__binary(TORC__OP_##name, a, b));                     \
  }
#define TORC_OP_FN_UNARY_API(name) TORC_OP_FN_UNARY(name)
#define TORC_OP_FN_BINARY_API(name) TORC_OP_FN_BINARY(name)
#define TORC_OP_FN_OWN(name)
#define TORC_OP_FN_NONE(name)
#define TORC_OP(name, kind, rule, fn, ...) TORC_OP_FN_##fn(name)
#include "torc/ops.def"
#undef TORC_OP

/* a op= b: b broadcasts to a's shape; the result must keep a's dtype. */
torc_status torc__binary_inplace(int op, torc_tensor *a, const torc_tensor *b) {
  const char *fn = torc__op_fn[1][op];
  if (a == NULL || b == NULL)
    return torc__null_input(fn);
  const torc_tensor *pair[2] = {a, b};
  torc_status st = torc__same_device(fn, pair, 2);
  if (st)
    return st;
  int64_t shape[TORC_MAX_DIMS];
  int ndim;
  torc_dtype kdt, odt;
  if ((st = torc__broadcast_shapes(fn, a, b, shape, &ndim)) ||
      (st = binary_dtypes(op, fn, a, b, &kdt, &odt)))
    return st;
  char x[128], y[128];
  if (ndim != a->ndim || memcmp(shape, a->shape, sizeof(int64_t) * (size_t)ndim))
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: the result has shape %s but the in-place "
                          "target has shape %s; use the out-of-place "
                          "torc_%s",
                          fn, torc__shape_str(shape, ndim, x, sizeof x),
                          torc__shape_str(a->shape, a->ndim, y, sizeof y),
                          OPNAME(op));
  if (category(odt) > category(a->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: the result type %s cannot be stored in place "
                          "into a %s tensor; use the out-of-place op or cast "
                          "the target first",
                          fn, torc_dtype_name(odt), torc_dtype_name(a->dtype));
  for (int i = 0; i < a->ndim; i++)
    if (a->strides[i] == 0 && a->shape[i] > 1)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: the target is an expanded view (dim %d has "
                            "stride 0): several elements share one memory "
                            "location; clone it first",
                            fn, i);
  /* Autograd: refuse writes it cannot track; record the op on a's old
   * value (a clone when the formula needs it, since a is overwritten). */
  int rec = torc__should_record(pair, 2);
  const torc__derivative *d = &torc__derivatives[op];
  torc__node *node = NULL;
  torc_tensor *old_a = NULL;
  if (rec) {
    if ((st = torc__check_inplace(a, fn)))
      return st;
    if (a->is_view && !a->requires_grad)
      return torc_set_error(
          TORC_ERR_AUTOGRAD,
          "%s: writing a value that requires grad into a view of another "
          "tensor is not tracked by autograd (the base would not know); "
          "build the result out of place instead",
          fn);
    if ((d->save & 1u) && (old_a = torc__cast(a, TORC_DTYPE_ANY)) == NULL)
      return torc_last_status();
    const torc_tensor *rin[2] = {old_a ? old_a : a, b};
    node = torc__node_new(d->name, OPNAME(op), d->fn, rin, 2);
    /* the edge must come from a's history, not from the clone's */
    if (node && old_a && a->requires_grad && a->grad_fn) {
      torc__node_release(node->next[0].node);
      atomic_fetch_add(&a->grad_fn->refcount, 1);
      node->next[0].node = a->grad_fn;
      node->next[0].input_nr = a->output_nr;
    }
    for (int i = 0; node && i < 2; i++)
      if ((d->save & (1u << i)) && torc__node_save(node, rin[i])) {
        torc__node_release(node);
        node = NULL;
      }
    if (node == NULL) {
      torc_release(old_a);
      return torc_last_status();
    }
  }
  if (torc__numel(a->shape, a->ndim) == 0) {
    torc_release(old_a);
    if (node)
      torc__node_attach(node, &a, 1);
    return TORC_OK;
  }
  kdt = a->dtype;
  torc_tensor *cb = torc__as_dtype(b, kdt);
  torc_tensor *eb = cb ? torc__expand_or_self(cb, a->shape, a->ndim) : NULL;
  if (eb == NULL) {
    torc_release(cb);
    torc_release(old_a);
    torc__node_release(node);
    return torc_last_status();
  }
  const torc_tensor *in[2] = {a, eb};
  st = torc__kernel_call(op, kdt, in, 2, &a, 1, NULL, 0);
  torc_release(cb);
  torc_release(eb);
  torc_release(old_a);
  if (st == TORC_OK) {
    torc__bump_version(a);
    if (node)
      torc__node_attach(node, &a, 1);
  } else {
    torc__node_release(node);
  }
  return st;
}

torc_status torc_add_(torc_tensor *a, const torc_tensor *b) {
  return torc__binary_inplace(TORC__OP_add, a, b);
}
torc_status torc_sub_(torc_tensor *a, const torc_tensor *b) {
  return torc__binary_inplace(TORC__OP_sub, a, b);
}
torc_status torc_mul_(torc_tensor *a, const torc_tensor *b) {
  return torc__binary_inplace(TORC__OP_mul, a, b);
}
torc_status torc_div_(torc_tensor *a, const torc_tensor *b) {
  if (a && !torc_dtype_is_float(a->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "torc_div_: true division of a %s tensor in place "
                          "would need a floating result; cast the target to "
                          "a floating dtype first",
                          torc_dtype_name(a->dtype));
  return torc__binary_inplace(TORC__OP_div, a, b);
}

/* ---- reductions ---- */

/* `extra`: var/std's correction, norm's p (unused by the others). */
static torc_tensor *reduce_ex(int op, const torc_tensor *x, const int *dims,
                              int n_dims, int keepdim, double extra) {
  const char *fn = torc__op_fn[0][op];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (n_dims < 0 || (n_dims > 0 && dims == NULL)) {
    torc_set_error(TORC_ERR_INVALID, "%s: n_dims is %d with dims %s", fn,
                   n_dims, dims ? "set" : "NULL");
    return NULL;
  }
  uint32_t mask = 0;
  if (n_dims == 0) {
    mask = x->ndim ? (uint32_t)((1u << x->ndim) - 1) : 0;
  } else {
    for (int i = 0; i < n_dims; i++) {
      int d = 0;
      if (torc__wrap_dim(dims[i], x->ndim, fn, &d))
        return NULL;
      if (x->ndim == 0)
        continue;
      if (mask & (1u << d)) {
        torc_set_error(TORC_ERR_INVALID, "%s: dim %d appears twice in dims",
                       fn, d);
        return NULL;
      }
      mask |= 1u << d;
    }
  }
  torc_dtype odt = x->dtype;
  switch (torc__ops[op].rule) {
  case TORC__R_SUM:
    if (!torc_dtype_is_float(x->dtype))
      odt = TORC_I64;
    break;
  case TORC__R_MEAN:
    if (!torc_dtype_is_float(x->dtype)) {
      torc_set_error(TORC_ERR_DTYPE,
                     "%s: the input is %s; the mean needs a floating dtype: "
                     "cast first with torc_to_dtype(x, TORC_F32)",
                     fn, torc_dtype_name(x->dtype));
      return NULL;
    }
    break;
  default:
    break;
  }
  int64_t kshape[TORC_MAX_DIMS], oshape[TORC_MAX_DIMS];
  int on = 0;
  for (int i = 0; i < x->ndim; i++) {
    int red = (mask >> i) & 1u;
    if (red && x->shape[i] == 0 &&
        (torc__ops[op].rule == TORC__R_SAME ||
         (op == TORC__OP_norm && isinf(extra)))) {
      char b[128];
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: cannot reduce over dim %d of size 0 (shape %s): the "
                     "maximum or minimum of nothing is undefined",
                     fn, i, torc__shape_str(x->shape, x->ndim, b, sizeof b));
      return NULL;
    }
    kshape[i] = red ? 1 : x->shape[i];
    if (!red || keepdim)
      oshape[on++] = kshape[i];
  }
  torc_tensor *out = torc__empty(kshape, x->ndim, odt, x->storage->device);
  if (out == NULL)
    return NULL;
  torc_reduce_params p = {mask, 0, extra};
  torc_norm_params np = {mask, 0, extra};
  const void *pp = op == TORC__OP_norm ? (const void *)&np : (const void *)&p;
  size_t ps = op == TORC__OP_norm ? sizeof np : sizeof p;
  if (torc__numel(kshape, x->ndim) > 0 &&
      torc__kernel_call(op, x->dtype, &x, 1, &out, 1, pp, ps)) {
    torc_release(out);
    return NULL;
  }
  if (on != x->ndim) {
    int64_t os[TORC_MAX_DIMS];
    torc__contiguous_strides(oshape, on, os);
    torc_tensor *v = torc__view_of(out, oshape, os, on, 0);
    torc_release(out);
    if ((out = v) == NULL)
      return NULL;
    out->is_view = 0; /* a private buffer's view */
  }
  torc_status st = op == TORC__OP_var || op == TORC__OP_std ||
                           op == TORC__OP_norm
                       ? torc__record_reduce_c(op, x, out, mask, keepdim, extra)
                       : torc__record_reduce(op, x, out, mask, keepdim);
  if (st) {
    torc_release(out);
    return NULL;
  }
  return out;
}

/* reduce_ex under autocast's policy for op. */
static torc_tensor *reduce_ac(int op, const torc_tensor *x, const int *dims,
                              int n_dims, int keepdim, double extra) {
  TORC__AC_BEGIN(torc__autocast_op_policy(op), &x);
  torc_tensor *r = reduce_ex(op, x, dims, n_dims, keepdim, extra);
  TORC__AC_END();
  return r;
}

#define REDUCE(name)                                                           \
  torc_tensor *torc_##name(const torc_tensor *x, const int *dims, int n_dims,  \
                           int keepdim) {                                      \
    return torc__ret(reduce_ac(TORC__OP_##name, x, dims, n_dims, keepdim, 0));  \
  }
REDUCE(sum)
REDUCE(mean)
REDUCE(prod)
REDUCE(amax)
REDUCE(amin)
REDUCE(logsumexp)
#undef REDUCE

torc_tensor *torc_var(const torc_tensor *x, const int *dims, int n_dims,
                      double correction, int keepdim) {
  return torc__ret(reduce_ac(TORC__OP_var, x, dims, n_dims, keepdim,
                             correction));
}

torc_tensor *torc_std(const torc_tensor *x, const int *dims, int n_dims,
                      double correction, int keepdim) {
  return torc__ret(reduce_ac(TORC__OP_std, x, dims, n_dims, keepdim,
                             correction));
}

torc_tensor *torc_norm(const torc_tensor *x, double p, const int *dims,
                       int n_dims, int keepdim) {
  if (x && !(p == 1 || p == 2 || (isinf(p) && p > 0))) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_norm: p = %g is not supported; use 1, 2 or INFINITY",
                   p);
    return NULL;
  }
  return torc__ret(reduce_ac(TORC__OP_norm, x, dims, n_dims, keepdim, p));
}

/* ---- matmul ---- */

torc_tensor *torc__matmul(const torc_tensor *a, const torc_tensor *b) {
  const char *fn = "torc_matmul";
  if (a == NULL || b == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *pair[2] = {a, b};
  if (torc__same_device(fn, pair, 2))
    return NULL;
  char x[128], y[128];
  if (a->ndim == 0 || b->ndim == 0) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: both operands need at least one dim, got shapes %s "
                   "and %s; use torc_mul for scalars",
                   fn, torc__shape_str(a->shape, a->ndim, x, sizeof x),
                   torc__shape_str(b->shape, b->ndim, y, sizeof y));
    return NULL;
  }
  torc_dtype dt = torc_promote_types(a->dtype, b->dtype);
  if (dt == TORC_BOOL) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: not defined for bool tensors; cast them first", fn);
    return NULL;
  }
  /* Promote 1-D operands to matrices, remembering which dims to drop. */
  int64_t as[TORC_MAX_DIMS + 1], bs[TORC_MAX_DIMS + 1];
  int an = a->ndim, bn = b->ndim;
  memcpy(as, a->shape, sizeof(int64_t) * (size_t)an);
  memcpy(bs, b->shape, sizeof(int64_t) * (size_t)bn);
  int drop_m = 0, drop_n = 0;
  if (an == 1) {
    as[1] = as[0], as[0] = 1, an = 2, drop_m = 1;
  }
  if (bn == 1) {
    bs[1] = 1, bn = 2, drop_n = 1;
  }
  int64_t M = as[an - 2], K = as[an - 1], K2 = bs[bn - 2], N = bs[bn - 1];
  if (K != K2) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: shapes %s and %s cannot be multiplied: the first has "
                   "%lld columns (its last dim) but the second has %lld rows "
                   "(its %s dim)",
                   fn, torc__shape_str(a->shape, a->ndim, x, sizeof x),
                   torc__shape_str(b->shape, b->ndim, y, sizeof y),
                   (long long)K, (long long)K2,
                   b->ndim == 1 ? "only" : "second-to-last");
    return NULL;
  }
  /* Broadcast the batch dims. */
  int abn = an - 2, bbn = bn - 2, nb = abn > bbn ? abn : bbn;
  if (nb + 2 > TORC_MAX_DIMS) {
    torc_set_error(TORC_ERR_SHAPE, "%s: too many dims", fn);
    return NULL;
  }
  int64_t batch[TORC_MAX_DIMS];
  for (int i = 0; i < nb; i++) {
    int ia = abn - nb + i, ib = bbn - nb + i;
    int64_t sa = ia >= 0 ? as[ia] : 1, sb = ib >= 0 ? bs[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: the batch dims of %s and %s do not broadcast (sizes "
                     "%lld and %lld at batch dim %d)",
                     fn, torc__shape_str(a->shape, a->ndim, x, sizeof x),
                     torc__shape_str(b->shape, b->ndim, y, sizeof y),
                     (long long)sa, (long long)sb, i);
      return NULL;
    }
    batch[i] = sa == 1 ? sb : sa;
  }
  int64_t ea_shape[TORC_MAX_DIMS], eb_shape[TORC_MAX_DIMS],
      o_shape[TORC_MAX_DIMS];
  memcpy(ea_shape, batch, sizeof(int64_t) * (size_t)nb);
  memcpy(eb_shape, batch, sizeof(int64_t) * (size_t)nb);
  memcpy(o_shape, batch, sizeof(int64_t) * (size_t)nb);
  ea_shape[nb] = M, ea_shape[nb + 1] = K;
  eb_shape[nb] = K, eb_shape[nb + 1] = N;
  o_shape[nb] = M, o_shape[nb + 1] = N;

  torc_tensor *out = torc__empty(o_shape, nb + 2, dt, a->storage->device);
  torc_tensor *ca = NULL, *cb = NULL, *ra = NULL, *rb = NULL, *xa = NULL,
              *xb = NULL;
  if (out == NULL)
    goto fail;
  if (torc__numel(o_shape, nb + 2) > 0) {
    if (!(ca = torc__as_dtype(a, dt)) || !(cb = torc__as_dtype(b, dt)) ||
        !(ra = torc__reshape(ca, as, an, 1)) ||
        !(rb = torc__reshape(cb, bs, bn, 1)) ||
        !(xa = torc__expand(ra, ea_shape, nb + 2)) ||
        !(xb = torc__expand(rb, eb_shape, nb + 2)))
      goto fail;
    const torc_tensor *in[2] = {xa, xb};
    if (torc__kernel_call(TORC__OP_matmul, dt, in, 2, &out, 1, NULL, 0))
      goto fail;
  }
  torc_release(ca), torc_release(cb), torc_release(ra), torc_release(rb);
  torc_release(xa), torc_release(xb);
  if (drop_m || drop_n) {
    int64_t fs[TORC_MAX_DIMS];
    int fn_ = 0;
    for (int i = 0; i < nb; i++)
      fs[fn_++] = batch[i];
    if (!drop_m)
      fs[fn_++] = M;
    if (!drop_n)
      fs[fn_++] = N;
    torc_tensor *v = torc__reshape(out, fs, fn_, 1);
    torc_release(out);
    if ((out = v) == NULL)
      return NULL;
    out->is_view = 0;
  }
  if (torc__record_matmul(a, b, out, drop_m, drop_n)) {
    torc_release(out);
    return NULL;
  }
  return out;
fail:
  torc_release(out), torc_release(ca), torc_release(cb), torc_release(ra);
  torc_release(rb), torc_release(xa), torc_release(xb);
  return NULL;
}

torc_tensor *torc_matmul(const torc_tensor *a, const torc_tensor *b) {
  TORC__AC_BEGIN(TORC_AUTOCAST_LOWER, &a, &b);
  torc_tensor *r = torc__matmul(a, b);
  TORC__AC_END();
  return torc__ret(r);
}
