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
