/* plugins/ref/kernels_unary.c — elementwise unary ops: one table row per op
 * (its double and int64 formulas) and one strided loop that applies it.
 * Shapes: in[0] and out[0] equal; out has in's dtype (the core casts
 * integers to f32 before the floating-only ops).
 */
#include "ref_util.h"

typedef struct unary_op {
  double (*f)(double);   /* floating dtypes, computed in double */
  int64_t (*i)(int64_t); /* i32 i64 u8 (wrapping); NULL = floats only */
} unary_op;

/* NaN propagates through neg, abs and relu (relu(NaN) = NaN, as PyTorch's
 * clamp_min); sign follows PyTorch's kernel (0 < x) - (x < 0), so
 * sign(NaN) = 0 and sign(-0.0) = 0. */
static double f_neg(double x) { return -x; }
static double f_abs(double x) { return fabs(x); }
static double f_sign(double x) { return (double)((0 < x) - (x < 0)); }
static double f_square(double x) { return x * x; }
static double f_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0.0; }
static double f_reciprocal(double x) { return 1.0 / x; }

/* Stable logistic: e^-x never overflows for x >= 0, e^x never for x < 0. */
static double f_sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

/* Integers wrap: neg and abs of the most negative value give it back, and
 * for u8 (loaded as 0..255) neg stores 256 - x, as C's unsigned char. */
static int64_t i_neg(int64_t x) { return ref_isub(0, x); }
static int64_t i_abs(int64_t x) { return x < 0 ? ref_isub(0, x) : x; }
static int64_t i_sign(int64_t x) { return (0 < x) - (x < 0); }
static int64_t i_square(int64_t x) { return ref_imul(x, x); }
static int64_t i_relu(int64_t x) { return x > 0 ? x : 0; }

static int unary(const torc_kernel_args *a, const unary_op *op) {
  int st = ref_check_args(a, 1, 1);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);
  if (!is_float && (op->i == NULL || x->dtype == TORC_BOOL))
    return ref_error(TORC_ERR_DTYPE,
                     "ref kernel '%s' is not defined for dtype %s (floating "
                     "dtypes%s only)",
                     a->op, ref_dtype_name(x->dtype),
                     op->i ? " and i32/i64/u8" : "");
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    const void *src = ref_ptr(x, it.pos[0]);
    void *dst = ref_ptr(y, it.pos[1]);
    if (is_float)
      ref_store_f(y->dtype, dst, op->f(ref_load_f(x->dtype, src)));
    else
      ref_store_i(y->dtype, dst, op->i(ref_load_i(x->dtype, src)));
  }
  return TORC_OK;
}

/* One kernel per op: the row of its formulas, then the shared loop. */
#define UNARY(name, fexpr, iexpr)                                              \
  int torc_ref_k_##name(const torc_kernel_args *a) {                           \
    static const unary_op op = {fexpr, iexpr};                                 \
    return unary(a, &op);                                                      \
  }

UNARY(neg, f_neg, i_neg)
UNARY(abs, f_abs, i_abs)
UNARY(sign, f_sign, i_sign)
UNARY(square, f_square, i_square)
UNARY(relu, f_relu, i_relu)
UNARY(exp, exp, NULL)
UNARY(log, log, NULL)
UNARY(sqrt, sqrt, NULL)
UNARY(sin, sin, NULL)
UNARY(cos, cos, NULL)
UNARY(tanh, tanh, NULL)
UNARY(sigmoid, f_sigmoid, NULL)
UNARY(reciprocal, f_reciprocal, NULL)

/* ---- log1p, rsqrt, silu, logical_not ---- */

static double f_rsqrt(double x) { return 1.0 / sqrt(x); }
/* x * sigmoid(x), with the stable sigmoid. */
static double f_silu(double x) { return x * f_sigmoid(x); }

UNARY(log1p, log1p, NULL)
UNARY(rsqrt, f_rsqrt, NULL)
UNARY(silu, f_silu, NULL)

/* x * min(max(x + 3, 0), 6) / 6, as PyTorch's kernel; NaN propagates. */
static double f_hardswish(double x) {
  double t = x + 3;
  t = t < 0 ? 0 : t > 6 ? 6 : t;
  return x * t / 6;
}
UNARY(hardswish, f_hardswish, NULL)

/* min(max(x + 3, 0), 6) / 6, as PyTorch's kernel; NaN propagates. */
static double f_hardsigmoid(double x) {
  double t = x + 3;
  t = t < 0 ? 0 : t > 6 ? 6 : t;
  return t / 6;
}
UNARY(hardsigmoid, f_hardsigmoid, NULL)
UNARY(erf, erf, NULL)

static double f_softsign(double x) { return x / (1 + fabs(x)); }
UNARY(softsign, f_softsign, NULL)

/* scale (x where x > 0, else alpha expm1(x)), PyTorch's constants. */
#define TORC_SELU_ALPHA 1.6732632423543772848170429916717
#define TORC_SELU_SCALE 1.0507009873554804934193349852946
static double f_selu(double x) {
  return TORC_SELU_SCALE * (x > 0 ? x : TORC_SELU_ALPHA * expm1(x));
}
UNARY(selu, f_selu, NULL)

/* x tanh(log1p(e^x)), as PyTorch's kernel (e^x = inf gives x). */
static double f_mish(double x) { return x * tanh(log1p(exp(x))); }
UNARY(mish, f_mish, NULL)

/* Any dtype in (nonzero is true; NaN is nonzero), bool out. */
int torc_ref_k_logical_not(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    const void *src = ref_ptr(x, it.pos[0]);
    int zero = is_float ? ref_load_f(x->dtype, src) == 0
                        : ref_load_i(x->dtype, src) == 0;
    ref_store_i(y->dtype, ref_ptr(y, it.pos[1]), zero);
  }
  return TORC_OK;
}

/* ---- unary ops with torc_scalar_params ---- */

typedef struct unary_p_op {
  double (*f)(double, const torc_scalar_params *);
  int64_t (*i)(int64_t, const torc_scalar_params *); /* NULL: floats only */
} unary_p_op;

static double f_leaky_relu(double x, const torc_scalar_params *p) {
  return x > 0 ? x : x * p->a;
}

static double f_elu(double x, const torc_scalar_params *p) {
  return x > 0 ? x : p->a * expm1(x);
}

#define REF_SQRT_2_OVER_PI 0.79788456080286535588
#define REF_SQRT1_2 0.70710678118654752440

static double f_gelu(double x, const torc_scalar_params *p) {
  if (p->flags & 1u) {
    double u = REF_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1 + tanh(u));
  }
  return 0.5 * x * (1 + erf(x * REF_SQRT1_2));
}

/* log(1 + e^(beta x)) / beta, linear above the threshold (PyTorch). */
static double f_softplus(double x, const torc_scalar_params *p) {
  double bx = x * p->a;
  return bx > p->b ? x : log1p(exp(bx)) / p->a;
}

/* min(max(x, lo), hi) for the bounds that are set; NaN propagates from x
 * and from a bound. */
static double f_clamp(double x, const torc_scalar_params *p) {
  if (isnan(x))
    return x;
  if (p->flags & 1u)
    x = isnan(p->a) ? p->a : x < p->a ? p->a : x;
  if (p->flags & 2u)
    x = isnan(p->b) ? p->b : x > p->b ? p->b : x;
  return x;
}

static int64_t i_clamp(int64_t x, const torc_scalar_params *p) {
  if ((p->flags & 1u) && x < p->ia)
    x = p->ia;
  if ((p->flags & 2u) && x > p->ib)
    x = p->ib;
  return x;
}

static int unary_p(const torc_kernel_args *a, const unary_p_op *op) {
  int st = ref_check_args(a, 1, 1);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st != TORC_OK)
    return st;
  const torc_scalar_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);
  if (!is_float && (op->i == NULL || x->dtype == TORC_BOOL))
    return ref_error(TORC_ERR_DTYPE,
                     "ref kernel '%s' is not defined for dtype %s", a->op,
                     ref_dtype_name(x->dtype));
  ref_iter it;
  ref_iter_init(&it, y->ndim, y->shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    const void *src = ref_ptr(x, it.pos[0]);
    void *dst = ref_ptr(y, it.pos[1]);
    if (is_float)
      ref_store_f(y->dtype, dst, op->f(ref_load_f(x->dtype, src), p));
    else
      ref_store_i(y->dtype, dst, op->i(ref_load_i(x->dtype, src), p));
  }
  return TORC_OK;
}

#define UNARY_P(name, fexpr, iexpr)                                            \
  int torc_ref_k_##name(const torc_kernel_args *a) {                           \
    static const unary_p_op op = {fexpr, iexpr};                               \
    return unary_p(a, &op);                                                    \
  }

UNARY_P(leaky_relu, f_leaky_relu, NULL)
UNARY_P(elu, f_elu, NULL)
UNARY_P(gelu, f_gelu, NULL)
UNARY_P(softplus, f_softplus, NULL)
UNARY_P(clamp, f_clamp, i_clamp)

/* The operands of a backward kernel out = f(in[0] = g, in[1] = x): one
 * output, all three of one shape, a floating dtype. */
static int check_grad_pair(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[1], &a->out[0]);
  if (st == TORC_OK && !torc_dtype_is_float((torc_dtype)a->in[1].dtype))
    st = ref_error(TORC_ERR_DTYPE, "ref kernel '%s' is not defined for %s",
                   a->op, ref_dtype_name(a->in[1].dtype));
  return st;
}

/* An iterator over g, x and out, in that order (pos[0..2]). */
static void grad_pair_iter(ref_iter *it, const torc_kernel_args *a) {
  ref_iter_init(it, a->out[0].ndim, a->out[0].shape);
  ref_iter_add_t(it, &a->in[0]);
  ref_iter_add_t(it, &a->in[1]);
  ref_iter_add_t(it, &a->out[0]);
}

/* gelu's derivative times the gradient: in[0] g, in[1] x (same shape and
 * floating dtype). erf form: Phi(x) + x phi(x); tanh form: PyTorch's
 * GeluBackward formula for approximate='tanh'. */
int torc_ref_k_gelu_backward(const torc_kernel_args *a) {
  int st = check_grad_pair(a);
  if (st != TORC_OK)
    return st;
  const torc_scalar_params *p = ref_params(a, sizeof *p);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  const torc_ktensor *g = &a->in[0], *x = &a->in[1], *y = &a->out[0];
  ref_iter it;
  grad_pair_iter(&it, a);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    double gv = ref_load_f(g->dtype, ref_ptr(g, it.pos[0]));
    double v = ref_load_f(x->dtype, ref_ptr(x, it.pos[1]));
    double d;
    if (p->flags & 1u) {
      const double k = REF_SQRT_2_OVER_PI, c = 0.044715;
      double u = k * (v + c * v * v * v), t = tanh(u);
      d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
    } else {
      double cdf = 0.5 * (1 + erf(v * REF_SQRT1_2));
      double pdf = exp(-0.5 * v * v) * 0.39894228040143267794;
      d = cdf + v * pdf;
    }
    ref_store_f(y->dtype, ref_ptr(y, it.pos[2]), gv * d);
  }
  return TORC_OK;
}

/* relu's gradient: in[0] g, in[1] relu's output y; 0 where y <= 0, else
 * g (a NaN output passes it, as PyTorch's threshold_backward). */
int torc_ref_k_relu_backward(const torc_kernel_args *a) {
  int st = check_grad_pair(a);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *g = &a->in[0], *x = &a->in[1], *y = &a->out[0];
  ref_iter it;
  grad_pair_iter(&it, a);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    double v = ref_load_f(x->dtype, ref_ptr(x, it.pos[1]));
    double gv = v <= 0 ? 0.0 : ref_load_f(g->dtype, ref_ptr(g, it.pos[0]));
    ref_store_f(y->dtype, ref_ptr(y, it.pos[2]), gv);
  }
  return TORC_OK;
}
