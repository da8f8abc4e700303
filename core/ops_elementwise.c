/* core/ops_elementwise.c — the newer elementwise ops with their own
 * functions: the activations with parameters, clamp, in-place
 * relu_/clamp_, where, and the ops with a Python-number scalar (PyTorch's
 * rule: the scalar never promotes within a category). The plain unary
 * and binary ones come from the op table, in ops.c.
 */
#include <math.h>
#include <stdio.h>

#include "internal.h"

#define OPNAME(op) (torc__ops[op].name)

torc_tensor *torc__scalar(double v, torc_dtype dt, torc_device dev) {
  torc_tensor *t = torc__empty(NULL, 0, dt, dev);
  if (t == NULL)
    return NULL;
  torc_fill_params p = {v, 0};
  if (!torc_dtype_is_float(dt))
    p.ivalue = v >= -9.2233720368547758e18 && v < 9.2233720368547758e18
                   ? (int64_t)v
                   : 0;
  if (torc__kernel_call(TORC__OP_fill_, dt, NULL, 0, &t, 1, &p, sizeof p)) {
    torc_release(t);
    return NULL;
  }
  return t;
}

/* 1 if c is a Python int in PyTorch's sense here: integral, within int64. */
static int integral(double c) {
  return isfinite(c) && c == floor(c) && c >= -9.2233720368547758e18 &&
         c < 9.2233720368547758e18;
}

/* ---- unary with parameters ---- */

torc_tensor *torc_leaky_relu(const torc_tensor *x, double negative_slope) {
  torc_scalar_params p = {negative_slope, 0, 0, 0, 0, 0};
  return torc__ret(torc__unary_p(TORC__OP_leaky_relu, x, &p, sizeof p));
}

torc_tensor *torc_elu(const torc_tensor *x, double alpha) {
  torc_scalar_params p = {alpha, 0, 0, 0, 0, 0};
  return torc__ret(torc__unary_p(TORC__OP_elu, x, &p, sizeof p));
}

/* celu, hardtanh and relu6 are compositions of the ops above, each in its
 * own scope; the result comes out into the caller's. */
torc_tensor *torc_celu(const torc_tensor *x, double alpha) {
  if (x == NULL) {
    torc__null_input("torc_celu");
    return NULL;
  }
  if (!torc_dtype_is_float(x->dtype)) {
    torc_set_error(TORC_ERR_DTYPE,
                   "torc_celu: x is %s; it takes floating dtypes only (cast "
                   "with torc_to_dtype(x, TORC_F32))",
                   torc_dtype_name(x->dtype));
    return NULL;
  }
  if (!(alpha != 0)) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_celu: alpha is %g; it must be a number other than 0 "
                   "(PyTorch uses 1)",
                   alpha);
    return NULL;
  }
  int scope = torc_scope_begin();
  torc_tensor *zero = torc_full(NULL, 0, 0, x->dtype, x->storage->device);
  torc_tensor *pos = zero ? torc_gt(x, zero) : NULL;
  torc_tensor *xs = pos ? torc_mul_scalar(x, 1 / alpha) : NULL;
  torc_tensor *neg = xs ? torc_elu(xs, alpha) : NULL;
  torc_tensor *out = neg ? torc_where(pos, x, neg) : NULL;
  out = torc_scope_keep(out);
  torc_scope_end(scope);
  return out;
}

/* where(min < x < max, x, clamp(x) without its gradient): clamp's values,
 * PyTorch's hardtanh gradient (NaN stays NaN through clamp). */
torc_tensor *torc_hardtanh(const torc_tensor *x, double min_val,
                           double max_val) {
  if (x && !(min_val < max_val)) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_hardtanh: min_val %g and max_val %g; min_val must be "
                   "below max_val",
                   min_val, max_val);
    return NULL;
  }
  int scope = torc_scope_begin();
  torc_tensor *c = torc_clamp(x, 1, min_val, 1, max_val);
  torc_tensor *lo = c ? torc_full(NULL, 0, min_val, c->dtype,
                                  c->storage->device)
                      : NULL;
  torc_tensor *hi = c ? torc_full(NULL, 0, max_val, c->dtype,
                                  c->storage->device)
                      : NULL;
  torc_tensor *above = lo ? torc_gt(x, lo) : NULL;
  torc_tensor *below = hi ? torc_lt(x, hi) : NULL;
  torc_tensor *in = above && below ? torc_logical_and(above, below) : NULL;
  torc_tensor *flat = in ? torc_detach(c) : NULL;
  torc_tensor *out = flat ? torc_where(in, x, flat) : NULL;
  out = torc_scope_keep(out);
  torc_scope_end(scope);
  return out;
}

torc_tensor *torc_relu6(const torc_tensor *x) {
  return torc_hardtanh(x, 0, 6);
}

torc_tensor *torc_gelu(const torc_tensor *x, int approximate) {
  if (x && approximate != 0 && approximate != 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_gelu: approximate is %d; use 0 for the exact erf "
                   "form or 1 for the tanh approximation",
                   approximate);
    return NULL;
  }
  torc_scalar_params p = {0, 0, 0, 0, (uint32_t)approximate, 0};
  return torc__ret(torc__unary_p(TORC__OP_gelu, x, &p, sizeof p));
}

torc_tensor *torc_softplus(const torc_tensor *x, double beta,
                           double threshold) {
  if (x && (beta == 0 || isnan(beta) || isnan(threshold))) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_softplus: beta is %g and threshold %g; beta must be "
                   "non-zero and both must be numbers (PyTorch's defaults "
                   "are 1 and 20)",
                   beta, threshold);
    return NULL;
  }
  torc_scalar_params p = {beta, threshold, 0, 0, 0, 0};
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &x);
  torc_tensor *r = torc__unary_p(TORC__OP_softplus, x, &p, sizeof p);
  TORC__AC_END();
  return torc__ret(r);
}

/* ---- clamp ---- */

/* Checks clamp's arguments and fills its params; *dt receives the result
 * dtype (f32 for an integer x with a non-integral bound). */
static torc_status clamp_args(const char *fn, const torc_tensor *x,
                              int has_min, double min, int has_max, double max,
                              torc_scalar_params *p, torc_dtype *dt) {
  if (!has_min && !has_max)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: neither bound is set (has_min and has_max are "
                          "0); set at least one",
                          fn);
  if (x->dtype == TORC_BOOL)
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: not defined for bool tensors; cast first with "
                          "torc_to_dtype(x, TORC_I64)",
                          fn);
  *dt = x->dtype;
  if (!torc_dtype_is_float(x->dtype) && ((has_min && !integral(min)) ||
                                         (has_max && !integral(max))))
    *dt = TORC_F32;
  memset(p, 0, sizeof *p);
  p->a = min;
  p->b = max;
  p->flags = (has_min ? 1u : 0u) | (has_max ? 2u : 0u);
  p->ia = has_min && integral(min) ? (int64_t)min : 0;
  p->ib = has_max && integral(max) ? (int64_t)max : 0;
  return TORC_OK;
}

torc_tensor *torc_clamp(const torc_tensor *x, int has_min, double min,
                        int has_max, double max) {
  if (x == NULL) {
    torc__null_input("torc_clamp");
    return NULL;
  }
  torc_scalar_params p;
  torc_dtype dt;
  if (clamp_args("torc_clamp", x, has_min, min, has_max, max, &p, &dt))
    return NULL;
  torc_tensor *xin = torc__as_dtype(x, dt);
  if (xin == NULL)
    return NULL;
  /* A cast input is an integer tensor: nothing to record through it. */
  torc_tensor *out = torc__unary_p(TORC__OP_clamp, xin, &p, sizeof p);
  torc_release(xin);
  return torc__ret(out);
}

/* x = op(x): the unary kernel with out == in. Autograd as binary_inplace:
 * the node's edge comes from x's history, its input saved as a clone when
 * the formula needs it and the output saved after the write. */
static torc_status unary_inplace(int op, torc_tensor *x, const void *params,
                                 size_t psize) {
  const char *fn = torc__op_fn[1][op];
  if (x == NULL)
    return torc__null_input(fn);
  if (x->dtype == TORC_BOOL)
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: not defined for bool tensors; cast first with "
                          "torc_to_dtype(x, TORC_I64)",
                          fn);
  for (int i = 0; i < x->ndim; i++)
    if (x->strides[i] == 0 && x->shape[i] > 1)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: the target is an expanded view (dim %d has "
                            "stride 0): several elements share one memory "
                            "location; clone it first",
                            fn, i);
  const torc__derivative *d = &torc__derivatives[op];
  torc__node *node = NULL;
  torc_tensor *old = NULL;
  torc_status st;
  const torc_tensor *xc = x;
  if (d->fn && torc__should_record(&xc, 1)) {
    if ((st = torc__check_inplace(x, fn)))
      return st;
    if ((d->save & 1u) && (old = torc__cast(x, TORC_DTYPE_ANY)) == NULL)
      return torc_last_status();
    const torc_tensor *rin = old ? old : x;
    node = torc__node_new(d->name, OPNAME(op), d->fn, &rin, 1);
    if (node && old && x->grad_fn) {
      torc__node_release(node->next[0].node);
      atomic_fetch_add(&x->grad_fn->refcount, 1);
      node->next[0].node = x->grad_fn;
      node->next[0].input_nr = x->output_nr;
    }
    if (node && params && psize <= sizeof node->params)
      memcpy(node->params, params, psize);
    if (node && old && torc__node_save(node, old)) {
      torc__node_release(node);
      node = NULL;
    }
    torc_release(old);
    if (node == NULL)
      return torc_last_status();
  }
  st = torc__numel(x->shape, x->ndim) == 0
           ? TORC_OK
           : torc__kernel_call(op, x->dtype, &xc, 1, &x, 1, params, psize);
  if (st == TORC_OK)
    torc__bump_version(x);
  if (st == TORC_OK && node && (d->save & 0x80u))
    st = torc__node_save(node, x);
  if (st != TORC_OK) {
    torc__node_release(node);
    return st;
  }
  if (node)
    torc__node_attach(node, &x, 1);
  return TORC_OK;
}

torc_status torc_clamp_(torc_tensor *x, int has_min, double min, int has_max,
                        double max) {
  if (x == NULL)
    return torc__null_input("torc_clamp_");
  torc_scalar_params p;
  torc_dtype dt;
  torc_status st =
      clamp_args("torc_clamp_", x, has_min, min, has_max, max, &p, &dt);
  if (st)
    return st;
  if (dt != x->dtype)
    return torc_set_error(TORC_ERR_DTYPE,
                          "torc_clamp_: a non-integral bound (min %g, max %g) "
                          "makes the result f32, which cannot be stored in "
                          "place into a %s tensor; use torc_clamp or integral "
                          "bounds",
                          min, max, torc_dtype_name(x->dtype));
  return unary_inplace(TORC__OP_clamp, x, &p, sizeof p);
}

torc_status torc_relu_(torc_tensor *x) {
  return unary_inplace(TORC__OP_relu, x, NULL, 0);
}

/* ---- where ---- */

static torc_tensor *where(const torc_tensor *cond, const torc_tensor *a,
                          const torc_tensor *b) {
  const char *fn = "torc_where";
  if (cond == NULL || a == NULL || b == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  const torc_tensor *in[3] = {cond, a, b};
  if (torc__same_device(fn, in, 3))
    return NULL;
  if (cond->dtype != TORC_BOOL) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the condition is %s; it must be bool: compare first "
                   "(torc_ne(cond, zero)) or cast with torc_to_dtype(cond, "
                   "TORC_BOOL)",
                   fn, torc_dtype_name(cond->dtype));
    return NULL;
  }
  int64_t shape[TORC_MAX_DIMS];
  int nd = 0;
  for (int k = 0; k < 3; k++)
    if (in[k]->ndim > nd)
      nd = in[k]->ndim;
  for (int i = 0; i < nd; i++) {
    int64_t s = 1;
    for (int k = 0; k < 3; k++) {
      int j = in[k]->ndim - nd + i;
      int64_t sk = j >= 0 ? in[k]->shape[j] : 1;
      if (sk != 1 && s != 1 && sk != s) {
        char x[128], y[128], z[128];
        torc_set_error(
            TORC_ERR_SHAPE,
            "%s: shapes %s (cond), %s (a) and %s (b) do not broadcast: at "
            "dim %d (counting from the end: %d) sizes %lld and %lld meet; "
            "each size must be equal to the others or 1",
            fn, torc__shape_str(cond->shape, cond->ndim, x, sizeof x),
            torc__shape_str(a->shape, a->ndim, y, sizeof y),
            torc__shape_str(b->shape, b->ndim, z, sizeof z), i, i - nd,
            (long long)s, (long long)sk);
        return NULL;
      }
      if (sk != 1)
        s = sk;
    }
    shape[i] = s;
  }
  torc_dtype dt = torc__result_type(a, b);
  torc_tensor *out = torc__empty(shape, nd, dt, a->storage->device);
  if (out == NULL)
    return NULL;
  torc_tensor *t[5] = {0};
  torc_status st = TORC_OK;
  if (torc__numel(shape, nd) > 0) {
    if (!(t[0] = torc__as_dtype(a, dt)) || !(t[1] = torc__as_dtype(b, dt)) ||
        !(t[2] = torc__expand(cond, shape, nd)) ||
        !(t[3] = torc__expand(t[0], shape, nd)) ||
        !(t[4] = torc__expand(t[1], shape, nd))) {
      st = torc_last_status();
    } else {
      const torc_tensor *kin[3] = {t[2], t[3], t[4]};
      st = torc__kernel_call(TORC__OP_where, dt, kin, 3, &out, 1, NULL, 0);
    }
  }
  if (st == TORC_OK)
    st = torc__record_op(TORC__OP_where, in, 3, out, NULL, 0);
  for (int i = 0; i < 5; i++)
    torc_release(t[i]);
  if (st) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc_where(const torc_tensor *cond, const torc_tensor *a,
                        const torc_tensor *b) {
  return torc__ret(where(cond, a, b));
}

/* ---- with a scalar ---- */

/* The 0-dim operand for x op c: its dtype is already the result dtype, so
 * the promotion of torc__binary keeps it (also for a 0-dim x). */
static torc_tensor *scalar_for(const char *fn, const torc_tensor *x,
                               double c) {
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  torc_dtype dt;
  if (torc_dtype_is_float(x->dtype))
    dt = x->dtype;
  else if (!integral(c))
    dt = TORC_F32;
  else
    dt = x->dtype == TORC_BOOL ? TORC_I64 : x->dtype;
  return torc__scalar(c, dt, x->storage->device);
}

static torc_tensor *binary_scalar(int op, const torc_tensor *x, double c) {
  const char *fn = torc__op_fn[2][op];
  if (op == TORC__OP_pow && x && !torc_dtype_is_float(x->dtype) &&
      integral(c) && c < 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: a %s tensor to the negative integer power %g is not "
                   "an integer; cast x to a floating dtype first",
                   fn, torc_dtype_name(x->dtype), c);
    return NULL;
  }
  torc_tensor *s = scalar_for(fn, x, c);
  if (s == NULL)
    return NULL;
  torc_tensor *out = torc__binary(op, x, s);
  torc_release(s);
  return out;
}

torc_tensor *torc_add_scalar(const torc_tensor *x, double c) {
  return torc__ret(binary_scalar(TORC__OP_add, x, c));
}
torc_tensor *torc_sub_scalar(const torc_tensor *x, double c) {
  return torc__ret(binary_scalar(TORC__OP_sub, x, c));
}
torc_tensor *torc_mul_scalar(const torc_tensor *x, double c) {
  return torc__ret(binary_scalar(TORC__OP_mul, x, c));
}
torc_tensor *torc_div_scalar(const torc_tensor *x, double c) {
  return torc__ret(binary_scalar(TORC__OP_div, x, c));
}
torc_tensor *torc_pow_scalar(const torc_tensor *x, double c) {
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &x);
  torc_tensor *r = binary_scalar(TORC__OP_pow, x, c);
  TORC__AC_END();
  return torc__ret(r);
}

static torc_status inplace_scalar(int op, torc_tensor *x, double c) {
  const char *fn = torc__op_fn[3][op];
  torc_tensor *s = scalar_for(fn, x, c);
  if (s == NULL)
    return torc_last_status();
  torc_status st = torc__binary_inplace(op, x, s);
  torc_release(s);
  return st;
}

torc_status torc_add_scalar_(torc_tensor *x, double c) {
  return inplace_scalar(TORC__OP_add, x, c);
}
torc_status torc_mul_scalar_(torc_tensor *x, double c) {
  return inplace_scalar(TORC__OP_mul, x, c);
}
