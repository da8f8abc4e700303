/* plugins/ref/kernels_binary.c — elementwise binary ops (arithmetic,
 * maximum/minimum, comparisons): one table row per op and one strided
 * loop. in[0], in[1] and out[0] have out's shape (the core broadcast them
 * with stride 0); in-place ops pass in[0] itself, maybe strided, as out.
 */
#include "ref_util.h"

typedef struct binary_op {
  double (*f)(double, double);    /* floating dtypes, in double */
  int64_t (*i)(int64_t, int64_t); /* i32 i64 u8 bool; NULL = floats only */
  int bool_ok;                    /* 1 if defined for bool */
} binary_op;

static double f_add(double x, double y) { return x + y; }
static double f_sub(double x, double y) { return x - y; }
static double f_mul(double x, double y) { return x * y; }
static double f_div(double x, double y) { return x / y; }
static double f_pow(double x, double y) { return pow(x, y); }
/* NaN propagates from either side (torch.maximum), unlike fmax. */
static double f_max(double x, double y) {
  return isnan(x) || isnan(y) ? x + y : x > y ? x : y;
}
static double f_min(double x, double y) {
  return isnan(x) || isnan(y) ? x + y : x < y ? x : y;
}
/* IEEE comparisons: NaN compares unequal to everything. */
static double f_eq(double x, double y) { return x == y; }
static double f_ne(double x, double y) { return x != y; }
static double f_lt(double x, double y) { return x < y; }
static double f_le(double x, double y) { return x <= y; }
static double f_gt(double x, double y) { return x > y; }
static double f_ge(double x, double y) { return x >= y; }

/* Integers: exact in int64, wrapping; bool operands are 0/1 and the bool
 * store is v != 0, so add is logical or, mul logical and, maximum or and
 * minimum and — PyTorch's bool semantics. */
static int64_t i_max(int64_t x, int64_t y) { return x > y ? x : y; }
static int64_t i_min(int64_t x, int64_t y) { return x < y ? x : y; }
static int64_t i_eq(int64_t x, int64_t y) { return x == y; }
static int64_t i_ne(int64_t x, int64_t y) { return x != y; }
static int64_t i_lt(int64_t x, int64_t y) { return x < y; }
static int64_t i_le(int64_t x, int64_t y) { return x <= y; }
static int64_t i_gt(int64_t x, int64_t y) { return x > y; }
static int64_t i_ge(int64_t x, int64_t y) { return x >= y; }

/* Integer power as PyTorch's tensor-tensor kernel (ATen powi): square and
 * multiply, wrapping; a negative exponent gives 1 for base 1, +-1 for base
 * -1 and 0 otherwise (the exact integer part of x^y). Wrapping in int64
 * then keeping the low bits equals wrapping in i32/u8 (mod 2^k is a ring
 * homomorphism). */
static int64_t i_pow(int64_t x, int64_t y) {
  if (y < 0) {
    if (x == 1)
      return 1;
    if (x == -1)
      return y % 2 != 0 ? -1 : 1;
    return 0;
  }
  int64_t r = 1;
  while (y > 0) {
    if (y & 1)
      r = ref_imul(r, x);
    y >>= 1;
    if (y > 0)
      x = ref_imul(x, x);
  }
  return r;
}

/* Division is registered for floating dtypes only: torc_div casts integer
 * inputs to f32 first (true division, as torch.div), so no integer
 * division by zero can reach a kernel. */
static int binary(const torc_kernel_args *a, const binary_op *op) {
  int st = ref_check_args(a, 2, 1);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[0], &a->out[0]);
  if (st == TORC_OK)
    st = ref_check_same_shape(a, &a->in[1], &a->out[0]);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->in[1], *z = &a->out[0];
  if (x->dtype != y->dtype)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s' got inputs of dtypes %s and %s (the "
                     "core should have cast them to one dtype)",
                     a->op, ref_dtype_name(x->dtype), ref_dtype_name(y->dtype));
  int is_float = torc_dtype_is_float((torc_dtype)x->dtype);
  if (!is_float && (op->i == NULL || (x->dtype == TORC_BOOL && !op->bool_ok)))
    return ref_error(TORC_ERR_DTYPE, "ref kernel '%s' is not defined for %s",
                     a->op, ref_dtype_name(x->dtype));
  ref_iter it;
  ref_iter_init(&it, z->ndim, z->shape);
  ref_iter_add_t(&it, x);
  ref_iter_add_t(&it, y);
  ref_iter_add_t(&it, z);
  for (; !ref_iter_done(&it); ref_iter_next(&it)) {
    const void *px = ref_ptr(x, it.pos[0]), *py = ref_ptr(y, it.pos[1]);
    void *pz = ref_ptr(z, it.pos[2]);
    if (is_float)
      ref_store_f(z->dtype, pz,
                  op->f(ref_load_f(x->dtype, px), ref_load_f(y->dtype, py)));
    else
      ref_store_i(z->dtype, pz,
                  op->i(ref_load_i(x->dtype, px), ref_load_i(y->dtype, py)));
  }
  return TORC_OK;
}

/* One kernel per op: its row, then the shared loop. */
#define BINARY(name, fexpr, iexpr, bool_ok)                                    \
  int torc_ref_k_##name(const torc_kernel_args *a) {                           \
    static const binary_op op = {fexpr, iexpr, bool_ok};                       \
    return binary(a, &op);                                                     \
  }

BINARY(add, f_add, ref_iadd, 1)
BINARY(sub, f_sub, ref_isub, 0)
BINARY(mul, f_mul, ref_imul, 1)
BINARY(div, f_div, NULL, 0)
BINARY(pow, f_pow, i_pow, 0)
BINARY(maximum, f_max, i_max, 1)
BINARY(minimum, f_min, i_min, 1)
BINARY(eq, f_eq, i_eq, 1)
BINARY(ne, f_ne, i_ne, 1)
BINARY(lt, f_lt, i_lt, 1)
BINARY(le, f_le, i_le, 1)
BINARY(gt, f_gt, i_gt, 1)
BINARY(ge, f_ge, i_ge, 1)

/* logical_and / logical_or: nonzero is true (NaN too); the core writes
 * them into a bool output. */
static double f_land(double x, double y) { return x != 0 && y != 0; }
static double f_lor(double x, double y) { return x != 0 || y != 0; }
static int64_t i_land(int64_t x, int64_t y) { return x != 0 && y != 0; }
static int64_t i_lor(int64_t x, int64_t y) { return x != 0 || y != 0; }

BINARY(logical_and, f_land, i_land, 1)
BINARY(logical_or, f_lor, i_lor, 1)
