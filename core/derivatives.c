/* core/derivatives.c — the backward formulas (torch's derivatives.yaml, as
 * C): one function per op, written with the public ops so they run on any
 * backend. The engine runs them in no-grad mode with scopes suspended, and
 * afterwards sums each gradient to its input's shape and casts it to the
 * input's dtype and device, so a formula may return the broadcast shape.
 */
#include <math.h>
#include <stdio.h>

#include "internal.h"

#define G (gout[0])
#define SAVED(i) (n->saved[i])
#define DONE(expr) ((expr) ? TORC_OK : torc_last_status())

/* A 0-dim constant of g's dtype and device. */
static torc_tensor *scalar(double v, const torc_tensor *like) {
  return torc_full(NULL, 0, v, torc_dtype_is_float(like->dtype) ? like->dtype
                                                               : TORC_F32,
                   like->storage->device);
}

/* g * f where f is made from a scalar: g * c. */
static torc_tensor *mul_c(const torc_tensor *g, double c) {
  torc_tensor *k = scalar(c, g);
  torc_tensor *r = k ? torc_mul(g, k) : NULL;
  torc_release(k);
  return r;
}

/* Releases a list of temporaries. */
static void drop(torc_tensor **ts, int n) {
  for (int i = 0; i < n; i++)
    torc_release(ts[i]);
}

/* ---- unary ---- */

static torc_status neg_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  return DONE(gin[0] = torc_neg(G));
}

static torc_status abs_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  torc_tensor *s = torc_sign(SAVED(0));
  gin[0] = s ? torc_mul(G, s) : NULL;
  torc_release(s);
  return DONE(gin[0]);
}

static torc_status zero_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  return DONE(gin[0] = torc_zeros_like(G));
}

static torc_status square_bw(torc__node *n, torc_tensor *const *gout,
                             torc_tensor **gin) {
  torc_tensor *t = mul_c(SAVED(0), 2.0);
  gin[0] = t ? torc_mul(G, t) : NULL;
  torc_release(t);
  return DONE(gin[0]);
}

/* *out = op(g, x) through a backward kernel of two inputs (g cast to x's
 * dtype and expanded to its shape; the result x's shape, dtype and
 * device), untracked: gelu_backward, relu_backward. */
static torc_status grad_kernel(int op, const torc_tensor *g,
                               const torc_tensor *x, const void *params,
                               size_t size, torc_tensor **out) {
  torc_tensor *gc = torc__as_dtype(g, x->dtype);
  torc_tensor *ge = gc ? torc__expand(gc, x->shape, x->ndim) : NULL;
  torc_tensor *y =
      ge ? torc__empty(x->shape, x->ndim, x->dtype, x->storage->device)
         : NULL;
  const torc_tensor *in[2] = {ge, x};
  torc_status st = y ? TORC_OK : torc_last_status();
  if (y && torc__numel(x->shape, x->ndim) > 0)
    st = torc__kernel_call(op, x->dtype, in, 2, &y, 1, params, size);
  torc_release(gc);
  torc_release(ge);
  if (st) {
    torc_release(y);
    return st;
  }
  *out = y;
  return TORC_OK;
}

/* relu: 0 where the output is <= 0, else the gradient (a NaN output
 * passes it, as PyTorch's threshold_backward), in one pass: the
 * relu_backward kernel, untracked. Integer outputs, and a backend without
 * the kernel, take the composed form where(y <= 0, 0, g). */
static torc_status relu_bw_composed(torc__node *n, torc_tensor *const *gout,
                                    torc_tensor **gin) {
  torc_tensor *z = scalar(0, SAVED(0));
  torc_tensor *m = z ? torc_le(SAVED(0), z) : NULL;
  torc_tensor *zg = m ? scalar(0, G) : NULL;
  gin[0] = zg ? torc_where(m, zg, G) : NULL;
  torc_release(z), torc_release(m), torc_release(zg);
  return DONE(gin[0]);
}

static torc_status relu_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  if (!torc_dtype_is_float(SAVED(0)->dtype))
    return relu_bw_composed(n, gout, gin);
  torc_status st =
      grad_kernel(TORC__OP_relu_backward, G, SAVED(0), NULL, 0, &gin[0]);
  if (st == TORC_ERR_NO_KERNEL) { /* a backend without it: le and where */
    torc_clear_error();
    return relu_bw_composed(n, gout, gin);
  }
  return st;
}

/* exp: g * out. */
static torc_status exp_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  return DONE(gin[0] = torc_mul(G, SAVED(0)));
}

/* log: g / x. */
static torc_status log_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  return DONE(gin[0] = torc_div(G, SAVED(0)));
}

/* sqrt: g / (2 out). */
static torc_status sqrt_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  torc_tensor *t = mul_c(SAVED(0), 2.0);
  gin[0] = t ? torc_div(G, t) : NULL;
  torc_release(t);
  return DONE(gin[0]);
}

static torc_status sin_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  torc_tensor *c = torc_cos(SAVED(0));
  gin[0] = c ? torc_mul(G, c) : NULL;
  torc_release(c);
  return DONE(gin[0]);
}

static torc_status cos_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  torc_tensor *t[2] = {torc_sin(SAVED(0)), NULL};
  t[1] = t[0] ? torc_mul(G, t[0]) : NULL;
  gin[0] = t[1] ? torc_neg(t[1]) : NULL;
  drop(t, 2);
  return DONE(gin[0]);
}

/* tanh: g (1 - out^2). */
static torc_status tanh_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  torc_tensor *t[3] = {torc_square(SAVED(0)), scalar(1, SAVED(0)), NULL};
  t[2] = t[0] && t[1] ? torc_sub(t[1], t[0]) : NULL;
  gin[0] = t[2] ? torc_mul(G, t[2]) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* sigmoid: g out (1 - out). */
static torc_status sigmoid_bw(torc__node *n, torc_tensor *const *gout,
                              torc_tensor **gin) {
  torc_tensor *t[4] = {scalar(1, SAVED(0)), NULL, NULL, NULL};
  t[1] = t[0] ? torc_sub(t[0], SAVED(0)) : NULL;
  t[2] = t[1] ? torc_mul(SAVED(0), t[1]) : NULL;
  gin[0] = t[2] ? torc_mul(G, t[2]) : NULL;
  drop(t, 4);
  return DONE(gin[0]);
}

/* reciprocal: -g out^2. */
static torc_status reciprocal_bw(torc__node *n, torc_tensor *const *gout,
                                 torc_tensor **gin) {
  torc_tensor *t[2] = {torc_square(SAVED(0)), NULL};
  t[1] = t[0] ? torc_mul(G, t[0]) : NULL;
  gin[0] = t[1] ? torc_neg(t[1]) : NULL;
  drop(t, 2);
  return DONE(gin[0]);
}

/* ---- binary (the engine sums broadcast gradients back) ---- */

static torc_status add_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  if (torc__needs_grad(n, 0) && !(gin[0] = torc_retain(G)))
    return torc_last_status();
  if (torc__needs_grad(n, 1) && !(gin[1] = torc_retain(G)))
    return torc_last_status();
  return TORC_OK;
}

static torc_status sub_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  if (torc__needs_grad(n, 0))
    gin[0] = torc_retain(G);
  if (torc__needs_grad(n, 1) && !(gin[1] = torc_neg(G)))
    return torc_last_status();
  return TORC_OK;
}

static torc_status mul_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  if (torc__needs_grad(n, 0) && !(gin[0] = torc_mul(G, SAVED(1))))
    return torc_last_status();
  if (torc__needs_grad(n, 1) && !(gin[1] = torc_mul(G, SAVED(0))))
    return torc_last_status();
  return TORC_OK;
}

/* div: g / b and -g a / b^2. */
static torc_status div_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  if (torc__needs_grad(n, 0) && !(gin[0] = torc_div(G, SAVED(1))))
    return torc_last_status();
  if (torc__needs_grad(n, 1)) {
    torc_tensor *t[3] = {torc_mul(G, SAVED(0)), torc_square(SAVED(1)), NULL};
    t[2] = t[0] && t[1] ? torc_div(t[0], t[1]) : NULL;
    gin[1] = t[2] ? torc_neg(t[2]) : NULL;
    drop(t, 3);
    if (gin[1] == NULL)
      return torc_last_status();
  }
  return TORC_OK;
}

/* pow: g b a^(b-1); and g out log(a), taken as 0 where a == 0 and b >= 0
 * (the limit PyTorch uses). */
static torc_status pow_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  torc_tensor *a = SAVED(0), *b = SAVED(1), *out = SAVED(2);
  if (torc__needs_grad(n, 0)) {
    torc_tensor *t[4] = {scalar(1, G), NULL, NULL, NULL};
    t[1] = t[0] ? torc_sub(b, t[0]) : NULL;
    t[2] = t[1] ? torc_pow(a, t[1]) : NULL;
    t[3] = t[2] ? torc_mul(t[2], b) : NULL;
    gin[0] = t[3] ? torc_mul(G, t[3]) : NULL;
    drop(t, 4);
    if (gin[0] == NULL)
      return torc_last_status();
  }
  if (torc__needs_grad(n, 1)) {
    /* safe = a + (a == 0): log(safe) is 0 where a is 0 */
    torc_tensor *t[6] = {scalar(0, G), NULL, NULL, NULL, NULL, NULL};
    t[1] = t[0] ? torc_eq(a, t[0]) : NULL;
    t[2] = t[1] ? torc_add(a, t[1]) : NULL;
    t[3] = t[2] ? torc_log(t[2]) : NULL;
    t[4] = t[3] ? torc_mul(out, t[3]) : NULL;
    gin[1] = t[4] ? torc_mul(G, t[4]) : NULL;
    drop(t, 6);
    if (gin[1] == NULL)
      return torc_last_status();
  }
  return TORC_OK;
}

/* maximum/minimum: the gradient goes to the selected input, split evenly
 * on ties (as PyTorch). `first_wins` is gt for maximum, lt for minimum. */
static torc_status extremum_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin,
                               torc_tensor *(*first_wins)(const torc_tensor *,
                                                          const torc_tensor *)) {
  torc_tensor *a = SAVED(0), *b = SAVED(1);
  torc_tensor *t[6] = {torc_eq(a, b), NULL, NULL, NULL, NULL, NULL};
  t[1] = t[0] ? mul_c(t[0], 0.5) : NULL; /* half on ties */
  for (int i = 0; i < 2 && t[1]; i++) {
    if (!torc__needs_grad(n, i))
      continue;
    torc_tensor *win = i == 0 ? first_wins(a, b) : first_wins(b, a);
    torc_tensor *w = win ? torc_add(win, t[1]) : NULL;
    gin[i] = w ? torc_mul(G, w) : NULL;
    torc_release(win), torc_release(w);
    if (gin[i] == NULL)
      break;
  }
  torc_status st = TORC_OK;
  for (int i = 0; i < 2; i++)
    if (torc__needs_grad(n, i) && gin[i] == NULL)
      st = torc_last_status();
  drop(t, 6);
  return st;
}

static torc_status maximum_bw(torc__node *n, torc_tensor *const *gout,
                              torc_tensor **gin) {
  return extremum_bw(n, gout, gin, torc_gt);
}

static torc_status minimum_bw(torc__node *n, torc_tensor *const *gout,
                              torc_tensor **gin) {
  return extremum_bw(n, gout, gin, torc_lt);
}


/* ---- more unary ops: log1p, rsqrt, the activations, clamp ---- */

/* A 0-dim constant of t's (floating) dtype on t's device. */
#define K(v, t) scalar((v), (t))

/* The op's torc_scalar_params, copied out of the (unaligned) node->params. */
static torc_scalar_params scalar_params(const torc__node *n) {
  torc_scalar_params p;
  memcpy(&p, n->params, sizeof p);
  return p;
}

/* log1p: g / (1 + x). */
static torc_status log1p_bw(torc__node *n, torc_tensor *const *gout,
                            torc_tensor **gin) {
  torc_tensor *t[2] = {K(1, SAVED(0)), NULL};
  t[1] = t[0] ? torc_add(SAVED(0), t[0]) : NULL;
  gin[0] = t[1] ? torc_div(G, t[1]) : NULL;
  drop(t, 2);
  return DONE(gin[0]);
}

/* rsqrt: -g out^3 / 2. */
static torc_status rsqrt_bw(torc__node *n, torc_tensor *const *gout,
                            torc_tensor **gin) {
  torc_tensor *y = SAVED(0);
  torc_tensor *t[3] = {torc_square(y), NULL, NULL};
  t[1] = t[0] ? torc_mul(t[0], y) : NULL;
  t[2] = t[1] ? mul_c(t[1], -0.5) : NULL;
  gin[0] = t[2] ? torc_mul(G, t[2]) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* silu: g s (1 + x (1 - s)), s = sigmoid(x). */
static torc_status silu_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  torc_tensor *x = SAVED(0);
  torc_tensor *t[6] = {torc_sigmoid(x), K(1, x), NULL, NULL, NULL, NULL};
  t[2] = t[0] && t[1] ? torc_sub(t[1], t[0]) : NULL;
  t[3] = t[2] ? torc_mul(x, t[2]) : NULL;
  t[4] = t[3] ? torc_add(t[3], t[1]) : NULL;
  t[5] = t[4] ? torc_mul(t[0], t[4]) : NULL;
  gin[0] = t[5] ? torc_mul(G, t[5]) : NULL;
  drop(t, 6);
  return DONE(gin[0]);
}

/* hardswish: 0 where x < -3, g (x / 3 + 1/2) where x <= 3, else g
 * (PyTorch's hardswish_backward, boundaries included). */
static torc_status hardswish_bw(torc__node *n, torc_tensor *const *gout,
                                torc_tensor **gin) {
  torc_tensor *x = SAVED(0);
  torc_tensor *t[9] = {K(-3, x), K(3, x), K(0, x), K(1, x)};
  t[4] = t[0] ? torc_lt(x, t[0]) : NULL;
  t[5] = t[1] ? torc_le(x, t[1]) : NULL;
  t[6] = torc_div_scalar(x, 3);
  t[7] = t[6] ? torc_add_scalar(t[6], 0.5) : NULL;
  t[8] = t[5] && t[7] && t[3] ? torc_where(t[5], t[7], t[3]) : NULL;
  torc_tensor *slope = t[4] && t[2] && t[8] ? torc_where(t[4], t[2], t[8])
                                            : NULL;
  gin[0] = slope ? torc_mul(G, slope) : NULL;
  torc_release(slope);
  drop(t, 9);
  return DONE(gin[0]);
}

/* where(mask, a, b) * g, mask = x > 0 (for leaky_relu, elu). */
static torc_tensor *positive_mask(const torc_tensor *x) {
  torc_tensor *z = K(0, x);
  torc_tensor *m = z ? torc_gt(x, z) : NULL;
  torc_release(z);
  return m;
}

/* hardsigmoid: g / 6 where -3 < x < 3, else 0 (PyTorch's
 * hardsigmoid_backward: 0 at both boundaries). */
static torc_status hardsigmoid_bw(torc__node *n, torc_tensor *const *gout,
                                  torc_tensor **gin) {
  torc_tensor *x = SAVED(0);
  torc_tensor *t[7] = {K(-3, x), K(3, x), K(0, x)};
  t[3] = t[0] ? torc_gt(x, t[0]) : NULL;
  t[4] = t[1] ? torc_lt(x, t[1]) : NULL;
  t[5] = t[3] && t[4] ? torc_logical_and(t[3], t[4]) : NULL;
  t[6] = torc_div_scalar(G, 6);
  gin[0] = t[5] && t[6] && t[2] ? torc_where(t[5], t[6], t[2]) : NULL;
  drop(t, 7);
  return DONE(gin[0]);
}

/* erf: g 2 / sqrt(pi) e^(-x^2). */
static torc_status erf_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  torc_tensor *t[4] = {torc_square(SAVED(0))};
  t[1] = t[0] ? torc_neg(t[0]) : NULL;
  t[2] = t[1] ? torc_exp(t[1]) : NULL;
  t[3] = t[2] ? torc_mul_scalar(t[2], 1.1283791670955125738961589031215) : NULL;
  gin[0] = t[3] ? torc_mul(G, t[3]) : NULL;
  drop(t, 4);
  return DONE(gin[0]);
}

/* softsign: g / (1 + |x|)^2. */
static torc_status softsign_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin) {
  torc_tensor *t[3] = {torc_abs(SAVED(0))};
  t[1] = t[0] ? torc_add_scalar(t[0], 1) : NULL;
  t[2] = t[1] ? torc_square(t[1]) : NULL;
  gin[0] = t[2] ? torc_div(G, t[2]) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* selu: g scale where x > 0, else g scale alpha e^x. */
static torc_status selu_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  const double alpha = 1.6732632423543772848170429916717;
  const double scale = 1.0507009873554804934193349852946;
  torc_tensor *x = SAVED(0);
  torc_tensor *t[4] = {positive_mask(x), K(scale, x), torc_exp(x)};
  t[3] = t[2] ? torc_mul_scalar(t[2], scale * alpha) : NULL;
  torc_tensor *slope = t[0] && t[1] && t[3] ? torc_where(t[0], t[1], t[3])
                                            : NULL;
  gin[0] = slope ? torc_mul(G, slope) : NULL;
  torc_release(slope);
  drop(t, 4);
  return DONE(gin[0]);
}

/* mish: g (tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)), sp = log1p(e^x)
 * (PyTorch's mish_backward). */
static torc_status mish_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  torc_tensor *x = SAVED(0);
  torc_tensor *t[10] = {torc_exp(x)};
  t[1] = t[0] ? torc_log1p(t[0]) : NULL;
  t[2] = t[1] ? torc_tanh(t[1]) : NULL;
  t[3] = t[2] ? torc_square(t[2]) : NULL;
  t[4] = K(1, x);
  t[5] = t[3] && t[4] ? torc_sub(t[4], t[3]) : NULL;
  t[6] = torc_sigmoid(x);
  t[7] = t[6] ? torc_mul(x, t[6]) : NULL;
  t[8] = t[7] && t[5] ? torc_mul(t[7], t[5]) : NULL;
  t[9] = t[8] && t[2] ? torc_add(t[2], t[8]) : NULL;
  gin[0] = t[9] ? torc_mul(G, t[9]) : NULL;
  drop(t, 10);
  return DONE(gin[0]);
}

static torc_status leaky_relu_bw(torc__node *n, torc_tensor *const *gout,
                                 torc_tensor **gin) {
  const torc_scalar_params pv = scalar_params(n), *p = &pv;
  torc_tensor *t[3] = {positive_mask(SAVED(0)), mul_c(G, p->a), NULL};
  gin[0] = t[0] && t[1] ? torc_where(t[0], G, t[1]) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* elu: g where x > 0, else g alpha e^x. */
static torc_status elu_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  const torc_scalar_params pv = scalar_params(n), *p = &pv;
  torc_tensor *x = SAVED(0);
  torc_tensor *t[4] = {positive_mask(x), torc_exp(x), NULL, NULL};
  t[2] = t[1] ? mul_c(t[1], p->a) : NULL;
  t[3] = t[2] ? torc_mul(G, t[2]) : NULL;
  gin[0] = t[0] && t[3] ? torc_where(t[0], G, t[3]) : NULL;
  drop(t, 4);
  return DONE(gin[0]);
}

/* gelu: the gelu_backward kernel (it needs erf), untracked. */
static torc_status gelu_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  torc_scalar_params p = scalar_params(n);
  return grad_kernel(TORC__OP_gelu_backward, G, SAVED(0), &p, sizeof p,
                     &gin[0]);
}

/* softplus: g where beta x > threshold, else g sigmoid(beta x). */
static torc_status softplus_bw(torc__node *n, torc_tensor *const *gout,
                               torc_tensor **gin) {
  const torc_scalar_params pv = scalar_params(n), *p = &pv;
  torc_tensor *x = SAVED(0);
  torc_tensor *t[5] = {mul_c(x, p->a), K(p->b, x), NULL, NULL, NULL};
  t[2] = t[0] && t[1] ? torc_gt(t[0], t[1]) : NULL;
  t[3] = t[0] ? torc_sigmoid(t[0]) : NULL;
  t[4] = t[3] ? torc_mul(G, t[3]) : NULL;
  gin[0] = t[2] && t[4] ? torc_where(t[2], G, t[4]) : NULL;
  drop(t, 5);
  return DONE(gin[0]);
}

/* clamp: g where min <= x <= max (each bound when set). */
static torc_status clamp_bw(torc__node *n, torc_tensor *const *gout,
                            torc_tensor **gin) {
  const torc_scalar_params pv = scalar_params(n), *p = &pv;
  torc_tensor *x = SAVED(0);
  torc_tensor *t[5] = {0};
  torc_tensor *m = torc_ones_like(x);
  torc_tensor *mask = m ? torc_to_dtype(m, TORC_BOOL) : NULL;
  torc_release(m);
  if (mask && (p->flags & 1u)) {
    t[0] = K(p->a, x);
    t[1] = t[0] ? torc_ge(x, t[0]) : NULL;
    torc_release(mask);
    mask = t[1] ? torc_retain(t[1]) : NULL;
  }
  if (mask && (p->flags & 2u)) {
    t[2] = K(p->b, x);
    t[3] = t[2] ? torc_le(x, t[2]) : NULL;
    t[4] = t[3] ? torc_logical_and(mask, t[3]) : NULL;
    torc_release(mask);
    mask = t[4] ? torc_retain(t[4]) : NULL;
  }
  gin[0] = mask ? torc_mul(G, mask) : NULL;
  torc_release(mask);
  drop(t, 5);
  return DONE(gin[0]);
}

/* where: g to a where cond, to b elsewhere. */
static torc_status where_bw(torc__node *n, torc_tensor *const *gout,
                            torc_tensor **gin) {
  torc_tensor *z = torc_zeros(NULL, 0, G->dtype, G->storage->device);
  if (z && torc__needs_grad(n, 1))
    gin[1] = torc_where(SAVED(0), G, z);
  if (z && torc__needs_grad(n, 2))
    gin[2] = torc_where(SAVED(0), z, G);
  torc_release(z);
  if (z == NULL || (torc__needs_grad(n, 1) && gin[1] == NULL) ||
      (torc__needs_grad(n, 2) && gin[2] == NULL))
    return torc_last_status();
  return TORC_OK;
}

/* ---- reductions: params = {mask, keepdim} ---- */

typedef struct reduce_rec {
  uint32_t mask;
  int keepdim;
  double correction; /* var/std: the correction; norm: p */
} reduce_rec;

/* node->params is not 8-byte aligned: copy it out (reduce_rec holds a
 * double). */
static reduce_rec reduce_params(const torc__node *n) {
  reduce_rec r;
  memcpy(&r, n->params, sizeof r);
  return r;
}

/* g (or the saved output) with the reduced dims restored as size 1 (the
 * keepdim shape). */
static torc_tensor *keepdim_grad(const torc__node *n, const torc_tensor *g) {
  const reduce_rec rv = reduce_params(n), *r = &rv;
  const torc__inmeta *m = &n->in[0];
  int64_t shape[TORC_MAX_DIMS];
  for (int i = 0; i < m->ndim; i++)
    shape[i] = (r->mask >> i) & 1u ? 1 : m->shape[i];
  return torc_reshape(g, shape, m->ndim);
}

static torc_status sum_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  torc_tensor *k = keepdim_grad(n, G);
  gin[0] = k ? torc_expand(k, n->in[0].shape, n->in[0].ndim) : NULL;
  torc_release(k);
  return DONE(gin[0]);
}

static torc_status mean_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  const reduce_rec rv = reduce_params(n), *r = &rv;
  double count = 1;
  for (int i = 0; i < n->in[0].ndim; i++)
    if ((r->mask >> i) & 1u)
      count *= (double)n->in[0].shape[i];
  torc_tensor *t[2] = {keepdim_grad(n, G), NULL};
  t[1] = t[0] ? mul_c(t[0], 1.0 / count) : NULL;
  gin[0] = t[1] ? torc_expand(t[1], n->in[0].shape, n->in[0].ndim) : NULL;
  drop(t, 2);
  return DONE(gin[0]);
}

/* prod: g * (product of the other elements), exact with zeros: where x is
 * not 0, out / x; where x is the only zero of its group, the product of the
 * nonzero others; elsewhere 0. */
static torc_status prod_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  const reduce_rec rv = reduce_params(n), *r = &rv;
  torc_tensor *x = SAVED(0);
  int dims[TORC_MAX_DIMS], nd = 0;
  for (int i = 0; i < x->ndim; i++)
    if ((r->mask >> i) & 1u)
      dims[nd++] = i;
  torc_tensor *t[14] = {0};
  t[0] = keepdim_grad(n, G);                                 /* g */
  t[1] = keepdim_grad(n, SAVED(1));                           /* out */
  t[2] = scalar(0, x);
  t[3] = t[2] ? torc_eq(x, t[2]) : NULL;                     /* x == 0 */
  t[4] = t[3] ? torc_add(x, t[3]) : NULL;                    /* safe x */
  t[5] = t[4] && t[1] ? torc_div(t[1], t[4]) : NULL;         /* out / x */
  t[6] = t[2] ? torc_ne(x, t[2]) : NULL;                     /* x != 0 */
  t[7] = t[5] && t[6] ? torc_mul(t[5], t[6]) : NULL;         /* nonzero part */
  t[8] = t[4] ? (nd ? torc_prod(t[4], dims, nd, 1)
                    : torc_retain(t[4])) : NULL;             /* prod(safe) */
  t[9] = t[3] ? (nd ? torc_sum(t[3], dims, nd, 1)
                    : torc_to_dtype(t[3], TORC_I64)) : NULL; /* zeros */
  torc_tensor *one = scalar(1, x);
  t[10] = t[9] && one ? torc_eq(t[9], one) : NULL;           /* one zero */
  t[11] = t[10] && t[8] ? torc_mul(t[8], t[10]) : NULL;
  t[12] = t[11] ? torc_mul(t[11], t[3]) : NULL;              /* zero part */
  t[13] = t[12] && t[7] ? torc_add(t[7], t[12]) : NULL;
  gin[0] = t[13] && t[0] ? torc_mul(t[0], t[13]) : NULL;
  torc_release(one);
  drop(t, 14);
  return DONE(gin[0]);
}

/* amax/amin: split evenly among the elements equal to the result. */
static torc_status extreme_reduce_bw(torc__node *n, torc_tensor *const *gout,
                                     torc_tensor **gin) {
  const reduce_rec rv = reduce_params(n), *r = &rv;
  torc_tensor *x = SAVED(0);
  int dims[TORC_MAX_DIMS], nd = 0;
  for (int i = 0; i < x->ndim; i++)
    if ((r->mask >> i) & 1u)
      dims[nd++] = i;
  torc_tensor *t[7] = {keepdim_grad(n, G), keepdim_grad(n, SAVED(1)), NULL,
                       NULL, NULL, NULL, NULL};
  t[2] = t[1] ? torc_eq(x, t[1]) : NULL;
  t[5] = t[2] && t[0] ? torc_to_dtype(t[2], t[0]->dtype) : NULL;
  t[3] = t[5] ? (nd ? torc_sum(t[5], dims, nd, 1) : torc_retain(t[5])) : NULL;
  t[4] = t[5] && t[3] ? torc_div(t[5], t[3]) : NULL;
  gin[0] = t[4] && t[0] ? torc_mul(t[0], t[4]) : NULL;
  drop(t, 7);
  return DONE(gin[0]);
}


/* ---- reductions with parameters ---- */

/* The reduced dims of node n's input as a list; returns how many. */
static int reduced_dims(const torc__node *n, int *dims) {
  const reduce_rec rv = reduce_params(n), *r = &rv;
  int nd = 0;
  for (int i = 0; i < n->in[0].ndim; i++)
    if ((r->mask >> i) & 1u)
      dims[nd++] = i;
  return nd;
}

/* x - mean(x) over the reduced dims (keepdim), and the divisor N - c. */
static torc_tensor *centered(const torc__node *n, const torc_tensor *x,
                             double *div) {
  const reduce_rec rv = reduce_params(n), *r = &rv;
  int dims[TORC_MAX_DIMS];
  int nd = reduced_dims(n, dims);
  double count = 1;
  for (int i = 0; i < nd; i++)
    count *= (double)x->shape[dims[i]];
  *div = count - r->correction;
  if (*div < 0)
    *div = 0;
  torc_tensor *m = nd ? torc_mean(x, dims, nd, 1) : torc_retain((torc_tensor *)x);
  torc_tensor *c = m ? torc_sub(x, m) : NULL;
  torc_release(m);
  return c;
}

/* var: g 2 (x - mean) / (N - c). */
static torc_status var_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  double div;
  torc_tensor *t[3] = {keepdim_grad(n, G), centered(n, SAVED(0), &div), NULL};
  t[2] = t[1] ? mul_c(t[1], 2.0 / div) : NULL;
  gin[0] = t[0] && t[2] ? torc_mul(t[0], t[2]) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* std: g (x - mean) / ((N - c) std). */
static torc_status std_bw(torc__node *n, torc_tensor *const *gout,
                          torc_tensor **gin) {
  double div;
  torc_tensor *t[5] = {keepdim_grad(n, G), centered(n, SAVED(0), &div),
                       keepdim_grad(n, SAVED(1)), NULL, NULL};
  t[3] = t[1] && t[2] ? torc_div(t[1], t[2]) : NULL;
  t[4] = t[3] ? mul_c(t[3], 1.0 / div) : NULL;
  gin[0] = t[0] && t[4] ? torc_mul(t[0], t[4]) : NULL;
  drop(t, 5);
  return DONE(gin[0]);
}

/* logsumexp: g e^(x - out). */
static torc_status logsumexp_bw(torc__node *n, torc_tensor *const *gout,
                                torc_tensor **gin) {
  torc_tensor *t[4] = {keepdim_grad(n, G), keepdim_grad(n, SAVED(1)), NULL,
                       NULL};
  t[2] = t[1] ? torc_sub(SAVED(0), t[1]) : NULL;
  t[3] = t[2] ? torc_exp(t[2]) : NULL;
  gin[0] = t[0] && t[3] ? torc_mul(t[0], t[3]) : NULL;
  drop(t, 4);
  return DONE(gin[0]);
}

/* norm: p = 1: g sign(x); p = 2: g x / out (0 where out is 0); p = inf:
 * g sign(x), split evenly among the elements with |x| = out. */
static torc_status norm_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  const reduce_rec rv = reduce_params(n), *r = &rv;
  torc_tensor *x = SAVED(0);
  torc_tensor *t[10] = {keepdim_grad(n, G), keepdim_grad(n, SAVED(1))};
  if (r->correction == 1) {
    t[2] = torc_sign(x);
    gin[0] = t[0] && t[2] ? torc_mul(t[0], t[2]) : NULL;
  } else if (r->correction == 2) {
    t[2] = K(0, x);
    t[3] = t[2] && t[1] ? torc_eq(t[1], t[2]) : NULL;
    t[4] = t[1] ? torc_div(x, t[1]) : NULL;
    t[5] = t[3] && t[4] ? torc_where(t[3], t[2], t[4]) : NULL;
    gin[0] = t[0] && t[5] ? torc_mul(t[0], t[5]) : NULL;
  } else {
    int dims[TORC_MAX_DIMS];
    int nd = reduced_dims(n, dims);
    t[2] = torc_abs(x);
    t[3] = t[2] && t[1] ? torc_eq(t[2], t[1]) : NULL;
    t[4] = t[3] ? torc_to_dtype(t[3], x->dtype) : NULL;
    t[5] = t[4] ? (nd ? torc_sum(t[4], dims, nd, 1) : torc_retain(t[4]))
                : NULL;
    t[6] = t[5] ? torc_div(t[4], t[5]) : NULL;
    t[7] = torc_sign(x);
    t[8] = t[6] && t[7] ? torc_mul(t[6], t[7]) : NULL;
    gin[0] = t[0] && t[8] ? torc_mul(t[0], t[8]) : NULL;
  }
  drop(t, 10);
  return DONE(gin[0]);
}

/* ---- along one dim: params torc_dim_params ---- */

/* cumsum: the reversed cumulative sum of g, as total - cumsum(g) + g. */
static torc_status cumsum_bw(torc__node *n, torc_tensor *const *gout,
                             torc_tensor **gin) {
  int d = ((const torc_dim_params *)n->params)->dim;
  torc_tensor *t[3] = {torc_sum(G, &d, 1, 1), torc_cumsum(G, d), NULL};
  t[2] = t[0] && t[1] ? torc_sub(t[0], t[1]) : NULL;
  gin[0] = t[2] ? torc_add(t[2], G) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* softmax: y (g - sum(g y)). */
static torc_status softmax_bw(torc__node *n, torc_tensor *const *gout,
                              torc_tensor **gin) {
  int d = ((const torc_dim_params *)n->params)->dim;
  torc_tensor *y = SAVED(0);
  torc_tensor *t[3] = {torc_mul(G, y), NULL, NULL};
  t[1] = t[0] ? torc_sum(t[0], &d, 1, 1) : NULL;
  t[2] = t[1] ? torc_sub(G, t[1]) : NULL;
  gin[0] = t[2] ? torc_mul(y, t[2]) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* log_softmax: g - e^y sum(g). */
static torc_status log_softmax_bw(torc__node *n, torc_tensor *const *gout,
                                  torc_tensor **gin) {
  int d = ((const torc_dim_params *)n->params)->dim;
  torc_tensor *t[3] = {torc_exp(SAVED(0)), torc_sum(G, &d, 1, 1), NULL};
  t[2] = t[0] && t[1] ? torc_mul(t[0], t[1]) : NULL;
  gin[0] = t[2] ? torc_sub(G, t[2]) : NULL;
  drop(t, 3);
  return DONE(gin[0]);
}

/* max_dim/min_dim: g to the selected index (one winner). params: dim,
 * keepdim; saved: the indices. */
typedef struct dimkeep_rec {
  int dim, keepdim;
} dimkeep_rec;

static torc_status max_dim_bw(torc__node *n, torc_tensor *const *gout,
                              torc_tensor **gin) {
  const dimkeep_rec *r = (const dimkeep_rec *)n->params;
  const torc__inmeta *m = &n->in[0];
  if (m->ndim == 0)
    return DONE(gin[0] = torc_retain(G));
  torc_tensor *t[5] = {0};
  t[0] = r->keepdim ? torc_retain(G) : torc_unsqueeze(G, r->dim);
  t[1] = r->keepdim ? torc_retain(SAVED(0)) : torc_unsqueeze(SAVED(0), r->dim);
  t[2] = torc_arange(0, (double)m->shape[r->dim], 1, TORC_I64,
                     G->storage->device);
  int64_t shape[TORC_MAX_DIMS];
  for (int i = 0; i < m->ndim; i++)
    shape[i] = i == r->dim ? m->shape[i] : 1;
  t[3] = t[2] ? torc_reshape(t[2], shape, m->ndim) : NULL;
  t[4] = t[3] && t[1] ? torc_eq(t[3], t[1]) : NULL;
  gin[0] = t[0] && t[4] ? torc_mul(t[0], t[4]) : NULL;
  drop(t, 5);
  return DONE(gin[0]);
}

torc_status torc__record_max_dim(int op, const torc_tensor *x,
                                 torc_tensor *values,
                                 const torc_tensor *indices, int dim,
                                 int keepdim) {
  if (!torc__should_record(&x, 1))
    return TORC_OK;
  torc__node *nd = torc__node_new(
      op == TORC__OP_max_dim ? "MaxBackward" : "MinBackward",
      torc__ops[op].name, max_dim_bw, &x, 1);
  if (nd == NULL)
    return torc_last_status();
  dimkeep_rec *r = (dimkeep_rec *)nd->params;
  r->dim = dim;
  r->keepdim = keepdim;
  torc_status st = torc__node_save(nd, indices);
  if (st) {
    torc__node_release(nd);
    return st;
  }
  /* The indices are not differentiable (as PyTorch's): only the values
   * are made outputs of the node. */
  torc__node_attach(nd, &values, 1);
  return TORC_OK;
}

/* ---- linear: x [..., in], w [out, in], b [out] or NULL ---- */

static torc_status linear_bw(torc__node *n, torc_tensor *const *gout,
                             torc_tensor **gin) {
  torc_tensor *x = SAVED(0), *w = SAVED(1);
  if (torc__needs_grad(n, 0) && !(gin[0] = torc_matmul(G, w)))
    return torc_last_status();
  if (torc__needs_grad(n, 1)) {
    int64_t out_f = w->shape[0], in_f = w->shape[1];
    int64_t rows = torc_numel(x) / (in_f ? in_f : 1);
    if (in_f == 0)
      rows = torc_numel(G) / (out_f ? out_f : 1);
    torc_tensor *t[4] = {torc_reshape(G, (const int64_t[]){rows, out_f}, 2),
                         torc_reshape(x, (const int64_t[]){rows, in_f}, 2),
                         NULL, NULL};
    t[2] = t[0] ? torc_transpose(t[0], 0, 1) : NULL;
    gin[1] = t[2] && t[1] ? torc_matmul(t[2], t[1]) : NULL;
    drop(t, 4);
    if (gin[1] == NULL)
      return torc_last_status();
  }
  if (n->n_in > 2 && torc__needs_grad(n, 2) && !(gin[2] = torc_retain(G)))
    return torc_last_status();
  return TORC_OK;
}

torc_status torc__record_linear(const torc_tensor *x, const torc_tensor *w,
                                const torc_tensor *b, torc_tensor *out) {
  const torc_tensor *in[3] = {x, w, b};
  int n_in = b ? 3 : 2;
  if (!torc__should_record(in, n_in))
    return TORC_OK;
  torc__node *nd = torc__node_new("LinearBackward", "linear", linear_bw, in,
                                  n_in);
  if (nd == NULL)
    return torc_last_status();
  torc_status st = torc__node_save(nd, x);
  if (st == TORC_OK)
    st = torc__node_save(nd, w);
  if (st) {
    torc__node_release(nd);
    return st;
  }
  torc__node_attach(nd, &out, 1);
  return TORC_OK;
}

/* ---- matmul: recorded on the original operands; params say whether a
 * (1-D, [K] -> [1, K]) or b ([K] -> [K, 1]) was promoted ---- */

typedef struct matmul_rec {
  int a_vec, b_vec;
} matmul_rec;

static torc_status matmul_bw(torc__node *n, torc_tensor *const *gout,
                             torc_tensor **gin) {
  const matmul_rec *r = (const matmul_rec *)n->params;
  torc_tensor *a = SAVED(0), *b = SAVED(1);
  torc_tensor *t[6] = {0};
  torc_status st = TORC_OK;
  /* The matrix forms: a2 [.., M, K], b2 [.., K, N], g2 [.., M, N]. */
  t[0] = r->a_vec ? torc_unsqueeze(a, 0) : torc_retain(a);
  t[1] = r->b_vec ? torc_unsqueeze(b, -1) : torc_retain(b);
  torc_tensor *g2 = torc_retain(G);
  if (g2 && r->a_vec) {
    torc_tensor *u = torc_unsqueeze(g2, g2->ndim - (r->b_vec ? 0 : 1));
    torc_release(g2);
    g2 = u;
  }
  if (g2 && r->b_vec) {
    torc_tensor *u = torc_unsqueeze(g2, -1);
    torc_release(g2);
    g2 = u;
  }
  if (!t[0] || !t[1] || !g2) {
    st = torc_last_status();
    goto out;
  }
  if (torc__needs_grad(n, 0)) {
    t[2] = torc_transpose(t[1], -1, -2);
    t[3] = t[2] ? torc_matmul(g2, t[2]) : NULL;
    t[4] = t[3] ? torc__sum_to(t[3], t[0]->shape, t[0]->ndim) : NULL;
    gin[0] = t[4] ? torc_reshape(t[4], a->shape, a->ndim) : NULL;
    if (gin[0] == NULL) {
      st = torc_last_status();
      goto out;
    }
    drop(&t[2], 3);
    t[2] = t[3] = t[4] = NULL;
  }
  if (torc__needs_grad(n, 1)) {
    t[2] = torc_transpose(t[0], -1, -2);
    t[3] = t[2] ? torc_matmul(t[2], g2) : NULL;
    t[4] = t[3] ? torc__sum_to(t[3], t[1]->shape, t[1]->ndim) : NULL;
    gin[1] = t[4] ? torc_reshape(t[4], b->shape, b->ndim) : NULL;
    if (gin[1] == NULL)
      st = torc_last_status();
  }
out:
  torc_release(g2);
  drop(t, 6);
  return st;
}

torc_status torc__record_matmul(const torc_tensor *a, const torc_tensor *b,
                                torc_tensor *out, int a_vec, int b_vec) {
  const torc_tensor *in[2] = {a, b};
  if (!torc__should_record(in, 2))
    return TORC_OK;
  torc__node *nd =
      torc__node_new("MatmulBackward", "matmul", matmul_bw, in, 2);
  if (nd == NULL)
    return torc_last_status();
  matmul_rec *r = (matmul_rec *)nd->params;
  r->a_vec = a_vec;
  r->b_vec = b_vec;
  torc_status st = torc__node_save(nd, a);
  if (st == TORC_OK)
    st = torc__node_save(nd, b);
  if (st) {
    torc__node_release(nd);
    return st;
  }
  torc__node_attach(nd, &out, 1);
  return TORC_OK;
}

/* ---- the table: the backward column of torc/ops.def ---- */

/* BW(Node, formula, saves): what the formula reads is saved at record
 * time (bit i: input i; bit 7: the output). OWNBW rows record their own
 * node (matmul, max_dim, the nn and indexing ops); NOBW rows none. */
#define IN0 0x01u
#define IN1 0x02u
#define OUT 0x80u
#define BW(node, fn_, save_) {#node, fn_, save_}
#define OWNBW {0}
#define NOBW {0}
#define TORC_OP(name, kind, rule, fn, io, params, ref, backward, ...)          \
  [TORC__OP_##name] = backward,
const torc__derivative torc__derivatives[TORC__OP_COUNT] = {
#include "torc/ops.def"
};
#undef TORC_OP
#undef BW
#undef OWNBW
#undef NOBW

torc_status torc__record_reduce(int op, const torc_tensor *in,
                                torc_tensor *out, uint32_t mask, int keepdim) {
  reduce_rec r = {mask, keepdim, 0.0};
  return torc__record_op(op, &in, 1, out, &r, sizeof r);
}

torc_status torc__record_reduce_c(int op, const torc_tensor *in,
                                  torc_tensor *out, uint32_t mask, int keepdim,
                                  double correction) {
  reduce_rec r = {mask, keepdim, correction};
  return torc__record_op(op, &in, 1, out, &r, sizeof r);
}

/* ---- views and copies ---- */

typedef struct view_rec {
  int kind;
  int np;
  int64_t p[TORC_MAX_DIMS];
} view_rec;
_Static_assert(sizeof(view_rec) <= sizeof(((torc__node *)0)->params) &&
                   sizeof(reduce_rec) <= sizeof(((torc__node *)0)->params) &&
                   sizeof(torc_scalar_params) <=
                       sizeof(((torc__node *)0)->params),
               "op parameters must fit in torc__node.params");

static torc_status view_bw(torc__node *n, torc_tensor *const *gout,
                           torc_tensor **gin) {
  view_rec vr; /* copied out: node->params is not 8-byte aligned */
  memcpy(&vr, n->params, sizeof vr);
  const view_rec *v = &vr;
  const torc__inmeta *m = &n->in[0];
  switch (v->kind) {
  case TORC__VIEW_RESHAPE:
    return DONE(gin[0] = torc_reshape(G, m->shape, m->ndim));
  case TORC__VIEW_PERMUTE: {
    int inv[TORC_MAX_DIMS];
    for (int i = 0; i < v->np; i++)
      inv[v->p[i]] = i;
    return DONE(gin[0] = torc_permute(G, inv, v->np));
  }
  case TORC__VIEW_TRANSPOSE:
    return DONE(gin[0] = torc_transpose(G, (int)v->p[0], (int)v->p[1]));
  case TORC__VIEW_EXPAND:
  case TORC__VIEW_IDENTITY: /* the engine sums, casts and moves */
    return DONE(gin[0] = torc_retain(G));
  case TORC__VIEW_SLICE:
  case TORC__VIEW_SELECT: {
    /* zeros of the input's shape, with g written through the same view */
    torc_tensor *z = torc_zeros(m->shape, m->ndim, G->dtype, G->storage->device);
    torc_tensor *w = NULL;
    if (z)
      w = v->kind == TORC__VIEW_SLICE
              ? torc_slice(z, (int)v->p[0], v->p[1], v->p[2], v->p[3])
              : torc_select(z, (int)v->p[0], v->p[1]);
    torc_status st = w ? torc_copy_(w, G) : torc_last_status();
    torc_release(w);
    if (st) {
      torc_release(z);
      return st;
    }
    gin[0] = z;
    return TORC_OK;
  }
  }
  return torc_set_error(TORC_ERR_INTERNAL, "unknown view kind %d", v->kind);
}

int torc__view_region(const torc__node *n, int *kind, int64_t p[4]) {
  if (n->fn != view_bw)
    return 0;
  view_rec v;
  memcpy(&v, n->params, sizeof v);
  if (v.kind != TORC__VIEW_SELECT && v.kind != TORC__VIEW_SLICE)
    return 0;
  *kind = v.kind;
  for (int i = 0; i < 4; i++)
    p[i] = v.p[i];
  return 1;
}

torc_tensor *torc__record_view(torc_tensor *out, const torc_tensor *in,
                               int kind, const int64_t *p, int np) {
  static const char *const names[] = {
      "ViewBackward",   "PermuteBackward", "TransposeBackward",
      "ExpandBackward", "SliceBackward",   "SelectBackward",
      "CloneBackward"};
  static const char *const ops[] = {"reshape", "permute", "transpose",
                                    "expand",  "slice",   "select", "copy"};
  if (out == NULL || !torc__should_record(&in, 1))
    return out;
  torc__node *nd = torc__node_new(names[kind], ops[kind], view_bw, &in, 1);
  if (nd == NULL) {
    torc_release(out);
    return NULL;
  }
  view_rec v = {kind, np, {0}};
  for (int i = 0; i < np && i < TORC_MAX_DIMS; i++)
    v.p[i] = p[i];
  memcpy(nd->params, &v, sizeof v);
  nd->view = kind != TORC__VIEW_IDENTITY;
  torc__node_attach(nd, &out, 1);
  return out;
}
