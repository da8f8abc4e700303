/* tests/test_ops.c — the elementwise ops through the public API on the cpu
 * with the ref plugin: every op's ref kernel, hand-computed unary and
 * binary values in several dtypes, comparisons, broadcasting, strided
 * inputs, type promotion, in-place ops, zero-size tensors and the errors
 * for bad shapes. Reductions, matmul, casts and random numbers are in
 * test_ops_reduce_cast.c.
 */
#include <math.h>

#include "testutil.h"
#include "ops_testutil.h"
#include "torc/philox.h"

/* ---- registration ---- */

/* Every op the core knows has a ref kernel on the cpu, served by ref (so
 * no op name in the kernel table is misspelt, none is missing). */
static void test_every_op_has_a_ref_kernel(void **state) {
  (void)state;
  int n = torc_kernel_count();
  assert_true(n > 0);
  torc_kernel_summary *ks = malloc(sizeof *ks * (size_t)n);
  assert_non_null(ks);
  int n_ref = 0;
  for (int i = 0; i < n; i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.provider, "ref") == 0 && strcmp(k.device_type, "cpu") == 0)
      ks[n_ref++] = k;
  }
  const char *missing = NULL;
  for (const char *const *op = torc_op_names(); *op && !missing; op++) {
    int found = 0;
    for (int i = 0; i < n_ref && !found; i++)
      found = strcmp(ks[i].op, *op) == 0;
    if (!found)
      missing = *op;
  }
  /* integer div is not registered: torc_div casts integers to f32 */
  int int_div = 0;
  for (int i = 0; i < n_ref; i++)
    int_div +=
        strcmp(ks[i].op, "div") == 0 && !torc_dtype_is_float(ks[i].dtype);
  free(ks);
  if (missing)
    print_error("op '%s' has no ref kernel on cpu\n", missing);
  assert_null(missing);
  assert_int_equal(int_div, 0);
}

/* ---- unary ---- */

typedef torc_tensor *(*unary_fn)(const torc_tensor *);

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_recip(double x) { return 1.0 / x; }

/* The floating unary ops against libm in double, in every float dtype.
 * Inputs are exact in f16/bf16, so the only error is the output's
 * rounding: tol_of(dtype). log/sqrt of -2 are NaN. */
static void test_unary_floating(void **state) {
  (void)state;
  static const struct {
    const char *name;
    unary_fn fn;
    double (*ref)(double);
  } rows[] = {
      {"exp", torc_exp, exp},         {"log", torc_log, log},
      {"sqrt", torc_sqrt, sqrt},      {"sin", torc_sin, sin},
      {"cos", torc_cos, cos},         {"tanh", torc_tanh, tanh},
      {"sigmoid", torc_sigmoid, ref_sigmoid},
      {"reciprocal", torc_reciprocal, ref_recip},
  };
  const double x[5] = {-2, -0.5, 0.25, 1, 3};
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    double expect[5];
    for (int i = 0; i < 5; i++)
      expect[i] = rows[r].ref(x[i]);
    for (size_t d = 0; d < 4; d++) {
      torc_dtype dt = float_dtypes[d];
      torc_tensor *y = K(rows[r].fn(mk(dt, TORC_SHAPE(5), x)));
      print_message("%s %s\n", rows[r].name, torc_dtype_name(dt));
      check(y, dt, TORC_SHAPE(5), expect, tol_of(dt));
    }
  }
}

/* neg, abs, sign, square, relu: hand values in every numeric dtype. */
static void test_unary_numeric(void **state) {
  (void)state;
  static const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_F16,
                                   TORC_BF16, TORC_I32, TORC_I64};
  const double *x = V(-3, -1, 0, 2, 5);
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    torc_tensor *t = mk(dts[d], TORC_SHAPE(5), x);
    check(K(torc_neg(t)), dts[d], TORC_SHAPE(5), V(3, 1, 0, -2, -5), 0);
    check(K(torc_abs(t)), dts[d], TORC_SHAPE(5), V(3, 1, 0, 2, 5), 0);
    check(K(torc_sign(t)), dts[d], TORC_SHAPE(5), V(-1, -1, 0, 1, 1), 0);
    check(K(torc_square(t)), dts[d], TORC_SHAPE(5), V(9, 1, 0, 4, 25), 0);
    check(K(torc_relu(t)), dts[d], TORC_SHAPE(5), V(0, 0, 0, 2, 5), 0);
  }
  /* u8 wraps as C's unsigned char: -x = 256 - x, 200^2 = 40000 % 256 */
  torc_tensor *u = mk(TORC_U8, TORC_SHAPE(5), V(0, 1, 2, 200, 255));
  check(K(torc_neg(u)), TORC_U8, TORC_SHAPE(5), V(0, 255, 254, 56, 1), 0);
  check(K(torc_abs(u)), TORC_U8, TORC_SHAPE(5), V(0, 1, 2, 200, 255), 0);
  check(K(torc_sign(u)), TORC_U8, TORC_SHAPE(5), V(0, 1, 1, 1, 1), 0);
  check(K(torc_square(u)), TORC_U8, TORC_SHAPE(5), V(0, 1, 4, 64, 1), 0);
  check(K(torc_relu(u)), TORC_U8, TORC_SHAPE(5), V(0, 1, 2, 200, 255), 0);
  /* i32 wraps; i64 is exact beyond 2^53 and wraps at its limits */
  torc_tensor *i32 = mk(TORC_I32, TORC_SHAPE(3), V(-2147483648.0, 65536, -7));
  check(K(torc_neg(i32)), TORC_I32, TORC_SHAPE(3), V(-2147483648.0, -65536, 7),
        0);
  check(K(torc_abs(i32)), TORC_I32, TORC_SHAPE(3), V(-2147483648.0, 65536, 7),
        0);
  check(K(torc_square(i32)), TORC_I32, TORC_SHAPE(3), V(0, 0, 49), 0);
  torc_tensor *i64 =
      mk_i64(TORC_SHAPE(3), I64(INT64_MIN, -(INT64_C(1) << 62) - 1,
                                (INT64_C(1) << 53) + 1));
  check_exact(K(torc_neg(i64)), TORC_I64, 3,
              I64(INT64_MIN, (INT64_C(1) << 62) + 1, -(INT64_C(1) << 53) - 1));
  check_exact(K(torc_abs(i64)), TORC_I64, 3,
              I64(INT64_MIN, (INT64_C(1) << 62) + 1, (INT64_C(1) << 53) + 1));
  check_exact(K(torc_square(mk_i64(TORC_SHAPE(2), I64(3037000499, 1LL << 32)))),
              TORC_I64, 2, I64(INT64_C(9223372030926249001), 0));
}

/* The floating ops on integers and bool compute in f32 (as torch.exp). */
static void test_unary_integer_promotes(void **state) {
  (void)state;
  torc_tensor *i = mk(TORC_I32, TORC_SHAPE(3), V(0, 1, 4));
  check(K(torc_exp(i)), TORC_F32, TORC_SHAPE(3), V(1, exp(1), exp(4)), 1e-6);
  check(K(torc_sqrt(i)), TORC_F32, TORC_SHAPE(3), V(0, 1, 2), 0);
  torc_tensor *b = mk(TORC_BOOL, TORC_SHAPE(2), V(0, 1));
  check(K(torc_sigmoid(b)), TORC_F32, TORC_SHAPE(2), V(0.5, ref_sigmoid(1)),
        1e-6);
}

/* NaN: relu/neg/abs propagate it (PyTorch: relu(NaN) = NaN); sign(NaN) is
 * 0 as PyTorch's kernel (0 < x) - (x < 0) gives. */
static void test_unary_nan(void **state) {
  (void)state;
  for (size_t d = 0; d < 4; d++) {
    torc_tensor *x = mk(float_dtypes[d], TORC_SHAPE(2), V(NAN, -NAN));
    check(K(torc_relu(x)), float_dtypes[d], TORC_SHAPE(2), V(NAN, NAN), 0);
    check(K(torc_neg(x)), float_dtypes[d], TORC_SHAPE(2), V(NAN, NAN), 0);
    check(K(torc_abs(x)), float_dtypes[d], TORC_SHAPE(2), V(NAN, NAN), 0);
    check(K(torc_sign(x)), float_dtypes[d], TORC_SHAPE(2), V(0, 0), 0);
  }
}

/* sigmoid stays finite where the textbook forms overflow: e^1000 is inf,
 * so e^x / (1 + e^x) would give NaN at 1000 and 1/(1 + e^-x) at -1000 is
 * fine only by luck; the stable form gives 0 and 1. */
static void test_sigmoid_stable(void **state) {
  (void)state;
  const double *x = V(-1000, -100, 0, 100, 1000);
  for (size_t d = 0; d < 2; d++) {
    torc_tensor *y = K(torc_sigmoid(mk(float_dtypes[d], TORC_SHAPE(5), x)));
    check(y, float_dtypes[d], TORC_SHAPE(5),
          V(0, 3.7200759760208356e-44, 0.5, 1, 1), 1e-12);
  }
  double v;
  torc_tensor *t = K(torc_sigmoid(scalar(TORC_F64, -100)));
  assert_ok(torc_item(t, &v));
  assert_true(fabs(v / 3.7200759760208356e-44 - 1) < 1e-12);
}

/* ---- binary ---- */

typedef torc_tensor *(*binary_fn)(const torc_tensor *, const torc_tensor *);

static void test_binary_floating(void **state) {
  (void)state;
  const double *a = V(1.5, -2, 4, 0.5), *b = V(2, 3, -0.5, 0.25);
  for (size_t d = 0; d < 4; d++) {
    torc_dtype dt = float_dtypes[d];
    double tol = tol_of(dt);
    torc_tensor *x = mk(dt, TORC_SHAPE(4), a), *y = mk(dt, TORC_SHAPE(4), b);
    check(K(torc_add(x, y)), dt, TORC_SHAPE(4), V(3.5, 1, 3.5, 0.75), 0);
    check(K(torc_sub(x, y)), dt, TORC_SHAPE(4), V(-0.5, -5, 4.5, 0.25), 0);
    check(K(torc_mul(x, y)), dt, TORC_SHAPE(4), V(3, -6, -2, 0.125), 0);
    check(K(torc_div(x, y)), dt, TORC_SHAPE(4), V(0.75, -2.0 / 3, -8, 2), tol);
    check(K(torc_pow(x, y)), dt, TORC_SHAPE(4),
          V(2.25, -8, 0.5, 0.8408964152537145), tol);
    check(K(torc_maximum(x, y)), dt, TORC_SHAPE(4), V(2, 3, 4, 0.5), 0);
    check(K(torc_minimum(x, y)), dt, TORC_SHAPE(4), V(1.5, -2, -0.5, 0.25), 0);
  }
}

/* f32 results are the f32 operation's (double then one rounding equals
 * f32 arithmetic for + - * /): 0.1f + 0.2f is 0.30000001192092896. */
static void test_binary_f32_rounding(void **state) {
  (void)state;
  torc_tensor *s = K(torc_add(scalar(TORC_F32, 0.1), scalar(TORC_F32, 0.2)));
  float got;
  assert_ok(torc_to_host(s, &got, sizeof got));
  assert_true(got == 0.1f + 0.2f);
  torc_tensor *q = K(torc_div(scalar(TORC_F32, 1), scalar(TORC_F32, 3)));
  assert_ok(torc_to_host(q, &got, sizeof got));
  assert_true(got == 1.0f / 3.0f);
}

static void test_binary_integer(void **state) {
  (void)state;
  static const torc_dtype dts[] = {TORC_I32, TORC_I64};
  for (size_t d = 0; d < 2; d++) {
    torc_dtype dt = dts[d];
    torc_tensor *x = mk(dt, TORC_SHAPE(4), V(7, -3, 4, 0));
    torc_tensor *y = mk(dt, TORC_SHAPE(4), V(2, 5, -6, 3));
    check(K(torc_add(x, y)), dt, TORC_SHAPE(4), V(9, 2, -2, 3), 0);
    check(K(torc_sub(x, y)), dt, TORC_SHAPE(4), V(5, -8, 10, -3), 0);
    check(K(torc_mul(x, y)), dt, TORC_SHAPE(4), V(14, -15, -24, 0), 0);
    check(K(torc_pow(x, y)), dt, TORC_SHAPE(4), V(49, -243, 0, 0), 0);
    check(K(torc_maximum(x, y)), dt, TORC_SHAPE(4), V(7, 5, 4, 3), 0);
    check(K(torc_minimum(x, y)), dt, TORC_SHAPE(4), V(2, -3, -6, 0), 0);
    /* negative integer exponents as PyTorch's tensor pow: 1, +-1, else 0 */
    torc_tensor *base = mk(dt, TORC_SHAPE(5), V(1, -1, -1, 2, -3));
    torc_tensor *ex = mk(dt, TORC_SHAPE(5), V(-2, -3, -2, -1, -1));
    check(K(torc_pow(base, ex)), dt, TORC_SHAPE(5), V(1, -1, 1, 0, 0), 0);
  }
  /* u8 wraps */
  torc_tensor *x = mk(TORC_U8, TORC_SHAPE(4), V(200, 3, 16, 0));
  torc_tensor *y = mk(TORC_U8, TORC_SHAPE(4), V(100, 5, 2, 7));
  check(K(torc_add(x, y)), TORC_U8, TORC_SHAPE(4), V(44, 8, 18, 7), 0);
  check(K(torc_sub(x, y)), TORC_U8, TORC_SHAPE(4), V(100, 254, 14, 249), 0);
  check(K(torc_mul(x, y)), TORC_U8, TORC_SHAPE(4), V(32, 15, 32, 0), 0);
  check(K(torc_pow(x, y)), TORC_U8, TORC_SHAPE(4), V(0, 243, 0, 0), 0);
  check(K(torc_maximum(x, y)), TORC_U8, TORC_SHAPE(4), V(200, 5, 16, 7), 0);
  check(K(torc_minimum(x, y)), TORC_U8, TORC_SHAPE(4), V(100, 3, 2, 0), 0);
  /* i32 wraps at 2^31 */
  check(K(torc_add(scalar(TORC_I32, 2147483647), scalar(TORC_I32, 1))),
        TORC_I32, NULL, 0, V(-2147483648.0), 0);
  /* i64 is exact (no trip through double) and wraps at 2^63 */
  int64_t big = INT64_C(1) << 62;
  torc_tensor *p = mk_i64(TORC_SHAPE(3), I64(big, INT64_MAX, 3037000499));
  torc_tensor *q = mk_i64(TORC_SHAPE(3), I64(big - 1, 1, 3037000499));
  check_exact(K(torc_add(p, q)), TORC_I64, 3,
              I64(INT64_MAX, INT64_MIN, 6074000998));
  check_exact(K(torc_mul(p, q)), TORC_I64, 3,
              I64(-big, INT64_MAX, /* 2^124 - 2^62 wraps to -2^62 */
                  INT64_C(9223372030926249001)));
  check_exact(K(torc_pow(mk_i64(TORC_SHAPE(1), I64(3)),
                         mk_i64(TORC_SHAPE(1), I64(39)))),
              TORC_I64, 1, I64(INT64_C(4052555153018976267)));
}

/* bool: add is or, mul is and, maximum or, minimum and (as PyTorch);
 * sub and pow are rejected. */
static void test_binary_bool(void **state) {
  (void)state;
  torc_tensor *x = mk(TORC_BOOL, TORC_SHAPE(4), V(0, 0, 1, 1));
  torc_tensor *y = mk(TORC_BOOL, TORC_SHAPE(4), V(0, 1, 0, 1));
  check(K(torc_add(x, y)), TORC_BOOL, TORC_SHAPE(4), V(0, 1, 1, 1), 0);
  check(K(torc_mul(x, y)), TORC_BOOL, TORC_SHAPE(4), V(0, 0, 0, 1), 0);
  check(K(torc_maximum(x, y)), TORC_BOOL, TORC_SHAPE(4), V(0, 1, 1, 1), 0);
  check(K(torc_minimum(x, y)), TORC_BOOL, TORC_SHAPE(4), V(0, 0, 0, 1), 0);
  torc_clear_error();
  assert_null(torc_sub(x, y));
  assert_int_not_equal(torc_last_status(), TORC_OK);
  assert_contains(torc_last_error(), "bool");
}

static void test_compare(void **state) {
  (void)state;
  static const binary_fn fns[6] = {torc_eq, torc_ne, torc_lt,
                                   torc_le, torc_gt, torc_ge};
  /* floats: NaN is unequal to everything, even itself */
  static const double fexp[6][4] = {{0, 1, 0, 0}, {1, 0, 1, 1},
                                    {1, 0, 0, 0}, {1, 1, 0, 0},
                                    {0, 0, 1, 0}, {0, 1, 1, 0}};
  for (size_t d = 0; d < 4; d++) {
    torc_tensor *a = mk(float_dtypes[d], TORC_SHAPE(4), V(1, 2, 3, NAN));
    torc_tensor *b = mk(float_dtypes[d], TORC_SHAPE(4), V(2, 2, 1, NAN));
    for (int f = 0; f < 6; f++)
      check(K(fns[f](a, b)), TORC_BOOL, TORC_SHAPE(4), fexp[f], 0);
  }
  static const double iexp[6][4] = {{0, 1, 0, 1}, {1, 0, 1, 0},
                                    {1, 0, 0, 0}, {1, 1, 0, 1},
                                    {0, 0, 1, 0}, {0, 1, 1, 1}};
  static const torc_dtype ints[] = {TORC_I32, TORC_I64, TORC_U8, TORC_BOOL};
  for (size_t d = 0; d < 4; d++) {
    int is_bool = ints[d] == TORC_BOOL;
    /* bool: 0/1 pairs giving the same pattern: (0,1) (1,1) (1,0) (0,0) */
    torc_tensor *a = mk(ints[d], TORC_SHAPE(4),
                        is_bool ? V(0, 1, 1, 0) : V(1, 2, 3, 0));
    torc_tensor *b = mk(ints[d], TORC_SHAPE(4),
                        is_bool ? V(1, 1, 0, 0) : V(2, 2, 1, 0));
    for (int f = 0; f < 6; f++)
      check(K(fns[f](a, b)), TORC_BOOL, TORC_SHAPE(4), iexp[f], 0);
  }
  /* i64 compares exactly: 2^53 + 1 > 2^53 (equal as doubles) */
  torc_tensor *p = mk_i64(TORC_SHAPE(1), I64((INT64_C(1) << 53) + 1));
  torc_tensor *q = mk_i64(TORC_SHAPE(1), I64(INT64_C(1) << 53));
  check(K(torc_gt(p, q)), TORC_BOOL, TORC_SHAPE(1), V(1), 0);
  check(K(torc_eq(p, q)), TORC_BOOL, TORC_SHAPE(1), V(0), 0);
}

/* maximum/minimum propagate NaN from either side (unlike fmax). */
static void test_maximum_nan(void **state) {
  (void)state;
  for (size_t d = 0; d < 4; d++) {
    torc_tensor *a = mk(float_dtypes[d], TORC_SHAPE(3), V(NAN, 1, 2));
    torc_tensor *b = mk(float_dtypes[d], TORC_SHAPE(3), V(1, NAN, 3));
    check(K(torc_maximum(a, b)), float_dtypes[d], TORC_SHAPE(3),
          V(NAN, NAN, 3), 0);
    check(K(torc_minimum(a, b)), float_dtypes[d], TORC_SHAPE(3),
          V(NAN, NAN, 2), 0);
  }
}

/* ---- broadcasting, strides, promotion, in place ---- */

static void test_broadcast(void **state) {
  (void)state;
  torc_tensor *a = mk(TORC_F32, TORC_SHAPE(2, 3), V(1, 2, 3, 4, 5, 6));
  torc_tensor *r = mk(TORC_F32, TORC_SHAPE(3), V(10, 20, 30));
  check(K(torc_add(a, r)), TORC_F32, TORC_SHAPE(2, 3),
        V(11, 22, 33, 14, 25, 36), 0);
  check(K(torc_sub(r, a)), TORC_F32, TORC_SHAPE(2, 3), V(9, 18, 27, 6, 15, 24),
        0);
  torc_tensor *c = mk(TORC_I32, TORC_SHAPE(2, 1), V(1, 2));
  torc_tensor *w = mk(TORC_I32, TORC_SHAPE(1, 3), V(1, 2, 3));
  check(K(torc_mul(c, w)), TORC_I32, TORC_SHAPE(2, 3), V(1, 2, 3, 2, 4, 6), 0);
  /* a 0-dim scalar broadcasts to anything; two give a 0-dim result */
  torc_tensor *s = scalar(TORC_F64, 5);
  torc_tensor *m = mk(TORC_F64, TORC_SHAPE(2, 2), V(1, 2, 3, 4));
  check(K(torc_add(s, m)), TORC_F64, TORC_SHAPE(2, 2), V(6, 7, 8, 9), 0);
  check(K(torc_lt(m, s)), TORC_BOOL, TORC_SHAPE(2, 2), V(1, 1, 1, 1), 0);
  check(K(torc_mul(s, scalar(TORC_F64, 3))), TORC_F64, NULL, 0, V(15), 0);
  /* [3, 1, 2] with [4, 1] gives [3, 4, 2]: out[i, j, k] = x[i, k] + y[j] */
  torc_tensor *x = K(torc_reshape(
      K(torc_arange(0, 6, 1, TORC_F32, TORC_CPU)), TORC_SHAPE(3, 1, 2)));
  torc_tensor *y = mk(TORC_F32, TORC_SHAPE(4, 1), V(0, 10, 20, 30));
  double e[24];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 2; k++)
        e[(i * 4 + j) * 2 + k] = (i * 2 + k) + 10 * j;
  check(K(torc_add(x, y)), TORC_F32, TORC_SHAPE(3, 4, 2), e, 0);
}

/* Strided inputs: a transposed view, a slice with a step, an expanded
 * (stride 0) view. */
static void test_noncontiguous_inputs(void **state) {
  (void)state;
  torc_tensor *a = K(torc_reshape(K(torc_arange(0, 6, 1, TORC_F32, TORC_CPU)),
                                  TORC_SHAPE(2, 3)));
  torc_tensor *at = K(torc_transpose(a, 0, 1)); /* [3, 2] */
  assert_false(torc_is_contiguous(at));
  check(K(torc_neg(at)), TORC_F32, TORC_SHAPE(3, 2), V(0, -3, -1, -4, -2, -5),
        0);
  torc_tensor *b = mk(TORC_F32, TORC_SHAPE(3, 2), V(1, 1, 2, 2, 3, 3));
  check(K(torc_mul(at, b)), TORC_F32, TORC_SHAPE(3, 2), V(0, 3, 2, 8, 6, 15),
        0);
  check(K(torc_contiguous(at)), TORC_F32, TORC_SHAPE(3, 2),
        V(0, 3, 1, 4, 2, 5), 0);
  /* every third element from 1: 1, 4, 7 */
  torc_tensor *r = K(torc_arange(0, 10, 1, TORC_I64, TORC_CPU));
  torc_tensor *s = K(torc_slice(r, 0, 1, TORC_END, 3));
  check(K(torc_square(s)), TORC_I64, TORC_SHAPE(3), V(1, 16, 49), 0);
  /* columns 0 and 2 of a 3x4 matrix, transposed: [2, 3] with strides 2, 4 */
  torc_tensor *g = K(torc_reshape(K(torc_arange(0, 12, 1, TORC_F64, TORC_CPU)),
                                  TORC_SHAPE(3, 4)));
  torc_tensor *g02 = K(torc_slice(g, 1, 0, TORC_END, 2));
  torc_tensor *gs = K(torc_transpose(g02, 0, 1));
  check(K(torc_add(gs, gs)), TORC_F64, TORC_SHAPE(2, 3),
        V(0, 8, 16, 4, 12, 20), 0);
  /* an expanded view (stride 0) as input */
  torc_tensor *col = mk(TORC_F32, TORC_SHAPE(2, 1), V(1, 2));
  torc_tensor *ex = K(torc_expand(col, TORC_SHAPE(2, 3)));
  check(K(torc_relu(ex)), TORC_F32, TORC_SHAPE(2, 3), V(1, 1, 1, 2, 2, 2), 0);
}

static void test_promotion(void **state) {
  (void)state;
  const double *v = V(1, 2);
  static const struct {
    torc_dtype a, b, out;
    double e0, e1; /* a + b with a = b = (1, 2); bool: (1, 1) */
  } rows[] = {
      {TORC_I32, TORC_F32, TORC_F32, 2, 4},
      {TORC_U8, TORC_I32, TORC_I32, 2, 4},
      {TORC_BOOL, TORC_BOOL, TORC_BOOL, 1, 1},
      {TORC_F16, TORC_BF16, TORC_F32, 2, 4},
      {TORC_I64, TORC_BOOL, TORC_I64, 2, 3},
      {TORC_U8, TORC_BOOL, TORC_U8, 2, 3},
      {TORC_I64, TORC_F16, TORC_F16, 2, 4},
      {TORC_F32, TORC_F64, TORC_F64, 2, 4},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    torc_tensor *a = mk(rows[r].a, TORC_SHAPE(2), v);
    torc_tensor *b = mk(rows[r].b, TORC_SHAPE(2), v);
    torc_tensor *s = K(torc_add(a, b));
    print_message("%s + %s\n", torc_dtype_name(rows[r].a),
                  torc_dtype_name(rows[r].b));
    check(s, rows[r].out, TORC_SHAPE(2), V(rows[r].e0, rows[r].e1), 0);
  }
  /* integer division is true division in f32 */
  torc_tensor *p = mk(TORC_I32, TORC_SHAPE(3), V(7, -7, 1));
  torc_tensor *q = mk(TORC_I32, TORC_SHAPE(3), V(2, 2, 3));
  check(K(torc_div(p, q)), TORC_F32, TORC_SHAPE(3), V(3.5, -3.5, 1.0 / 3),
        1e-7);
  /* comparisons across dtypes compare the promoted values */
  torc_tensor *f = mk(TORC_F32, TORC_SHAPE(3), V(6.5, -7, 0.5));
  check(K(torc_gt(p, f)), TORC_BOOL, TORC_SHAPE(3), V(1, 0, 1), 0);
}

/* In place: add_ writes through the view's strides, bumps the version
 * shared by all views; an f32 tensor takes an i32 operand, an i32 one
 * cannot take f32. */
static void test_inplace(void **state) {
  (void)state;
  torc_tensor *a = K(torc_zeros(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU));
  torc_tensor *at = K(torc_transpose(a, 0, 1)); /* [3, 2], strided */
  torc_tensor *b = mk(TORC_F32, TORC_SHAPE(3, 2), V(1, 2, 3, 4, 5, 6));
  uint64_t v0 = torc_version(a);
  assert_ok(torc_add_(at, b));
  assert_int_equal(torc_version(a), v0 + 1);
  assert_int_equal(torc_version(at), v0 + 1);
  check(a, TORC_F32, TORC_SHAPE(2, 3), V(1, 3, 5, 2, 4, 6), 0);
  /* broadcast operand, then i32 into f32 */
  assert_ok(torc_mul_(a, mk(TORC_F32, TORC_SHAPE(3), V(1, 10, 100))));
  check(a, TORC_F32, TORC_SHAPE(2, 3), V(1, 30, 500, 2, 40, 600), 0);
  assert_ok(torc_sub_(a, mk(TORC_I32, TORC_SHAPE(1), V(1))));
  check(a, TORC_F32, TORC_SHAPE(2, 3), V(0, 29, 499, 1, 39, 599), 0);
  assert_ok(torc_div_(a, scalar(TORC_F32, 2)));
  check(a, TORC_F32, TORC_SHAPE(2, 3), V(0, 14.5, 249.5, 0.5, 19.5, 299.5), 0);
  assert_int_equal(torc_version(a), v0 + 4);
  /* i32 += f32 would need f32: refused, a unchanged */
  torc_tensor *i = mk(TORC_I32, TORC_SHAPE(2), V(1, 2));
  uint64_t vi = torc_version(i);
  torc_clear_error();
  assert_int_not_equal(torc_add_(i, mk(TORC_F32, TORC_SHAPE(2), V(0.5, 0.5))),
                       TORC_OK);
  assert_int_equal(torc_version(i), vi);
  check(i, TORC_I32, TORC_SHAPE(2), V(1, 2), 0);
}

/* ---- zero-size tensors ---- */

static void test_zero_size(void **state) {
  (void)state;
  torc_tensor *e = K(torc_zeros(TORC_SHAPE(0, 3), TORC_F32, TORC_CPU));
  check(K(torc_neg(e)), TORC_F32, TORC_SHAPE(0, 3), NULL, 0);
  check(K(torc_add(e, mk(TORC_F32, TORC_SHAPE(3), V(1, 2, 3)))), TORC_F32,
        TORC_SHAPE(0, 3), NULL, 0);
  check(K(torc_to_dtype(e, TORC_I64)), TORC_I64, TORC_SHAPE(0, 3), NULL, 0);
  int d0[] = {0}, d1[] = {1};
  /* over the empty dim: sum 0, prod 1, mean NaN (0/0) */
  check(K(torc_sum(e, d0, 1, 0)), TORC_F32, TORC_SHAPE(3), V(0, 0, 0), 0);
  check(K(torc_prod(e, d0, 1, 0)), TORC_F32, TORC_SHAPE(3), V(1, 1, 1), 0);
  check(K(torc_mean(e, d0, 1, 0)), TORC_F32, TORC_SHAPE(3), V(NAN, NAN, NAN),
        0);
  check_exact(K(torc_sum(K(torc_zeros(TORC_SHAPE(0), TORC_I32, TORC_CPU)),
                         NULL, 0, 0)),
              TORC_I64, 1, I64(0));
  /* over a non-empty dim of an empty tensor: an empty result */
  check(K(torc_sum(e, d1, 1, 0)), TORC_F32, TORC_SHAPE(0), NULL, 0);
  check(K(torc_amax(e, d1, 1, 1)), TORC_F32, TORC_SHAPE(0, 1), NULL, 0);
  /* amax over an empty dim has no identity: an error, as PyTorch */
  torc_clear_error();
  assert_null(torc_amax(e, d0, 1, 0));
  assert_int_not_equal(torc_last_status(), TORC_OK);
  assert_contains(torc_last_error(), "[0, 3]");
  /* matmul with an empty M */
  torc_tensor *b = K(torc_ones(TORC_SHAPE(3, 2), TORC_F32, TORC_CPU));
  check(K(torc_matmul(e, b)), TORC_F32, TORC_SHAPE(0, 2), NULL, 0);
  check(K(torc_rand(TORC_SHAPE(0), TORC_F32, TORC_CPU, NULL)), TORC_F32,
        TORC_SHAPE(0), NULL, 0);
}

/* ---- errors ---- */

static void test_broadcast_error(void **state) {
  (void)state;
  torc_tensor *a = K(torc_zeros(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU));
  torc_tensor *b = K(torc_zeros(TORC_SHAPE(4), TORC_F32, TORC_CPU));
  torc_clear_error();
  assert_null(torc_add(a, b));
  assert_int_equal(torc_last_status(), TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "[2, 3]");
  assert_contains(torc_last_error(), "[4]");
  /* in place: b must broadcast to a's shape, not the other way round */
  torc_tensor *r = K(torc_zeros(TORC_SHAPE(3), TORC_F32, TORC_CPU));
  torc_clear_error();
  assert_int_equal(torc_add_(r, a), TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "[3]");
  assert_contains(torc_last_error(), "[2, 3]");
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
      T(test_every_op_has_a_ref_kernel),
      T(test_unary_floating),
      T(test_unary_numeric),
      T(test_unary_integer_promotes),
      T(test_unary_nan),
      T(test_sigmoid_stable),
      T(test_binary_floating),
      T(test_binary_f32_rounding),
      T(test_binary_integer),
      T(test_binary_bool),
      T(test_compare),
      T(test_maximum_nan),
      T(test_broadcast),
      T(test_noncontiguous_inputs),
      T(test_promotion),
      T(test_inplace),
      T(test_zero_size),
      T(test_broadcast_error),
#undef T
  };
  return cmocka_run_group_tests_name("ops", tests, NULL, test_teardown_all);
}
