/* tests/test_ops.c — the ops through the public API on the cpu with the ref
 * plugin: hand-computed values in several dtypes, broadcasting, strided
 * inputs, type promotion, reductions, matmul, casts, random numbers,
 * zero-size tensors and the errors for bad shapes.
 */
#include <math.h>

#include "testutil.h"
#include "torc/philox.h"

/* ---- fixtures: every tensor a test makes goes through K(), and is
 * released at teardown, which then checks that no tensor leaked ---- */

#define MAX_KEPT 256
static torc_tensor *kept[MAX_KEPT];
static int n_kept;
static int64_t live_at_start;

/* Keeps t for release at teardown; fails the test if t is NULL. */
static torc_tensor *keep(torc_tensor *t, const char *what) {
  if (t == NULL) {
    print_error("%s returned NULL: %s\n", what, torc_last_error());
    fail();
  }
  assert_true(n_kept < MAX_KEPT);
  kept[n_kept++] = t;
  return t;
}
#define K(call) keep((call), #call)

static int setup(void **state) {
  (void)state;
  test_load_plugin("ref");
  torc_clear_error();
  n_kept = 0;
  live_at_start = torc_tensor_live_count();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < n_kept; i++)
    torc_release(kept[i]);
  n_kept = 0;
  int64_t live = torc_tensor_live_count();
  if (live != live_at_start) {
    fprintf(stderr, "teardown: %lld tensor(s) leaked\n",
            (long long)(live - live_at_start));
    return -1;
  }
  return 0;
}

/* ---- helpers ---- */

#define V(...) ((const double[]){__VA_ARGS__})
#define I64(...) ((const int64_t[]){__VA_ARGS__})

static const torc_dtype float_dtypes[] = {TORC_F32, TORC_F64, TORC_F16,
                                          TORC_BF16};

/* Tolerance for values rounded to dtype (relative + absolute). */
static double tol_of(torc_dtype dt) {
  switch (dt) {
  case TORC_F64: return 1e-12;
  case TORC_F32: return 1e-6;
  case TORC_F16: return 1e-3;
  case TORC_BF16: return 8e-3;
  default: return 0;
  }
}

/* A tensor of `dt` holding v (doubles, row-major), via an f64 tensor and a
 * cast (the ref copy kernel). */
static torc_tensor *mk(torc_dtype dt, const int64_t *shape, int ndim,
                       const double *v) {
  torc_tensor *d = torc_from_host(v, shape, ndim, TORC_F64, TORC_CPU);
  torc_tensor *t = torc_to_dtype(d, dt);
  torc_release(d);
  return K(t);
}

/* A 0-dim tensor. */
static torc_tensor *scalar(torc_dtype dt, double v) {
  return mk(dt, NULL, 0, &v);
}

/* An exact i64 tensor. */
static torc_tensor *mk_i64(const int64_t *shape, int ndim, const int64_t *v) {
  return K(torc_from_host(v, shape, ndim, TORC_I64, TORC_CPU));
}

static void assert_shape(const torc_tensor *t, const int64_t *shape,
                         int ndim) {
  assert_non_null(t);
  assert_int_equal(torc_ndim(t), ndim);
  for (int d = 0; d < ndim; d++)
    assert_int_equal(torc_shape(t)[d], shape[d]);
}

/* Asserts t's dtype, shape and values (within tol). */
static void check(const torc_tensor *t, torc_dtype dt, const int64_t *shape,
                  int ndim, const double *expect, double tol) {
  assert_non_null(t);
  assert_int_equal(torc_dtype_of(t), dt);
  assert_shape(t, shape, ndim);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  test_assert_values(t, expect, n, tol);
}

/* Asserts an integer tensor's exact values, read as i64. */
static void check_exact(const torc_tensor *t, torc_dtype dt, int64_t n,
                        const int64_t *expect) {
  assert_non_null(t);
  assert_int_equal(torc_dtype_of(t), dt);
  assert_int_equal(torc_numel(t), n);
  torc_tensor *c = K(torc_to_dtype(t, TORC_I64));
  int64_t got[16];
  assert_true(n <= 16);
  assert_ok(torc_to_host(c, got, sizeof(int64_t) * (size_t)n));
  for (int64_t i = 0; i < n; i++) {
    if (got[i] != expect[i]) {
      print_error("element %lld: got %lld, expected %lld\n", (long long)i,
                  (long long)got[i], (long long)expect[i]);
      fail();
    }
  }
}

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

/* ---- reductions ---- */

static void test_reduce_dims(void **state) {
  (void)state;
  static const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
  for (size_t d = 0; d < 4; d++) {
    torc_dtype dt = dts[d];
    torc_tensor *x = mk(dt, TORC_SHAPE(2, 3), V(1, 2, 3, 4, 5, 6));
    int d0[] = {0}, d1[] = {1}, dneg[] = {-1};
    check(K(torc_sum(x, d0, 1, 0)), dt, TORC_SHAPE(3), V(5, 7, 9), 0);
    check(K(torc_sum(x, d0, 1, 1)), dt, TORC_SHAPE(1, 3), V(5, 7, 9), 0);
    check(K(torc_sum(x, d1, 1, 0)), dt, TORC_SHAPE(2), V(6, 15), 0);
    check(K(torc_sum(x, dneg, 1, 1)), dt, TORC_SHAPE(2, 1), V(6, 15), 0);
    check(K(torc_sum(x, NULL, 0, 0)), dt, NULL, 0, V(21), 0);
    check(K(torc_sum(x, NULL, 0, 1)), dt, TORC_SHAPE(1, 1), V(21), 0);
    check(K(torc_prod(x, d1, 1, 0)), dt, TORC_SHAPE(2), V(6, 120), 0);
    check(K(torc_mean(x, d0, 1, 0)), dt, TORC_SHAPE(3), V(2.5, 3.5, 4.5), 0);
    check(K(torc_mean(x, NULL, 0, 0)), dt, NULL, 0, V(3.5), 0);
    check(K(torc_amax(x, d1, 1, 0)), dt, TORC_SHAPE(2), V(3, 6), 0);
    check(K(torc_amin(x, d0, 1, 1)), dt, TORC_SHAPE(1, 3), V(1, 2, 3), 0);
  }
  /* 3-D, permuted (strided) input, two dims: y[i, j, k] = x[j, k, i] =
   * 12j + 4k + i, summed over i (4) and k (3): 144j + 48 + 18 */
  torc_tensor *x = K(torc_reshape(K(torc_arange(0, 24, 1, TORC_F64, TORC_CPU)),
                                  TORC_SHAPE(2, 3, 4)));
  torc_tensor *y = K(torc_permute(x, (const int[]){2, 0, 1}, 3));
  int dims[] = {0, 2};
  check(K(torc_sum(y, dims, 2, 0)), TORC_F64, TORC_SHAPE(2), V(66, 210), 0);
  check(K(torc_sum(y, dims, 2, 1)), TORC_F64, TORC_SHAPE(1, 2, 1), V(66, 210),
        0);
  check(K(torc_amax(y, dims, 2, 0)), TORC_F64, TORC_SHAPE(2), V(11, 23), 0);
}

/* Integers and bool sum and multiply exactly into i64; amax/amin keep the
 * dtype; floats accumulate in double. */
static void test_reduce_integer(void **state) {
  (void)state;
  int d0[] = {0};
  torc_tensor *i = mk(TORC_I32, TORC_SHAPE(2), V(2147483647, 1));
  check_exact(K(torc_sum(i, NULL, 0, 0)), TORC_I64, 1, I64(2147483648));
  torc_tensor *p = mk(TORC_I32, TORC_SHAPE(2), V(100000, 100000));
  check_exact(K(torc_prod(p, NULL, 0, 0)), TORC_I64, 1,
              I64(INT64_C(10000000000)));
  torc_tensor *u = mk(TORC_U8, TORC_SHAPE(3), V(200, 200, 7));
  check_exact(K(torc_sum(u, d0, 1, 0)), TORC_I64, 1, I64(407));
  check_exact(K(torc_amax(u, NULL, 0, 0)), TORC_U8, 1, I64(200));
  check_exact(K(torc_amin(u, NULL, 0, 0)), TORC_U8, 1, I64(7));
  torc_tensor *b = mk(TORC_BOOL, TORC_SHAPE(4), V(1, 0, 1, 1));
  check_exact(K(torc_sum(b, NULL, 0, 0)), TORC_I64, 1, I64(3));
  check_exact(K(torc_prod(b, NULL, 0, 0)), TORC_I64, 1, I64(0));
  check_exact(K(torc_amax(b, NULL, 0, 0)), TORC_BOOL, 1, I64(1));
  check_exact(K(torc_amin(b, NULL, 0, 0)), TORC_BOOL, 1, I64(0));
  int64_t t60 = INT64_C(1) << 60;
  torc_tensor *l = mk_i64(TORC_SHAPE(2), I64(t60 + 1, t60 + 2));
  check_exact(K(torc_sum(l, NULL, 0, 0)), TORC_I64, 1, I64(2 * t60 + 3));
  check_exact(K(torc_amax(l, NULL, 0, 0)), TORC_I64, 1, I64(t60 + 2));
  check_exact(K(torc_amin(l, NULL, 0, 0)), TORC_I64, 1, I64(t60 + 1));
  /* f32 sums in double: 1e8 + 1 - 1e8 is 1 (an f32 accumulator says 0) */
  torc_tensor *f = mk(TORC_F32, TORC_SHAPE(3), V(1e8, 1, -1e8));
  check(K(torc_sum(f, NULL, 0, 0)), TORC_F32, NULL, 0, V(1), 0);
  /* NaN propagates through amax, amin and sum */
  torc_tensor *n = mk(TORC_F32, TORC_SHAPE(3), V(1, NAN, 3));
  check(K(torc_amax(n, NULL, 0, 0)), TORC_F32, NULL, 0, V(NAN), 0);
  check(K(torc_amin(n, NULL, 0, 0)), TORC_F32, NULL, 0, V(NAN), 0);
  check(K(torc_sum(n, NULL, 0, 0)), TORC_F32, NULL, 0, V(NAN), 0);
  /* mean is for floating dtypes only */
  torc_clear_error();
  assert_null(torc_mean(i, NULL, 0, 0));
  assert_int_equal(torc_last_status(), TORC_ERR_DTYPE);
}

/* ---- matmul ---- */

/* Reference batched product for the expected values. */
static void naive_matmul(const double *a, const double *b, double *c,
                         int64_t batch, int64_t m, int64_t k, int64_t n,
                         int a_batched, int b_batched) {
  for (int64_t z = 0; z < batch; z++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t q = 0; q < k; q++)
          s += a[(a_batched ? z : 0) * m * k + i * k + q] *
               b[(b_batched ? z : 0) * k * n + q * n + j];
        c[z * m * n + i * n + j] = s;
      }
}

static void test_matmul(void **state) {
  (void)state;
  static const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16,
                                   TORC_I32, TORC_I64, TORC_U8};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    torc_dtype dt = dts[d];
    torc_tensor *a = mk(dt, TORC_SHAPE(2, 3), V(1, 2, 3, 4, 5, 6));
    torc_tensor *b = mk(dt, TORC_SHAPE(3, 2), V(7, 8, 9, 10, 11, 12));
    print_message("matmul %s\n", torc_dtype_name(dt));
    check(K(torc_matmul(a, b)), dt, TORC_SHAPE(2, 2), V(58, 64, 139, 154), 0);
    /* 1-D . 1-D is a 0-dim dot product; 1-D operands gain and lose a dim */
    torc_tensor *v = mk(dt, TORC_SHAPE(3), V(1, 2, 3));
    check(K(torc_matmul(v, K(torc_arange(4, 7, 1, dt, TORC_CPU)))), dt, NULL,
          0, V(32), 0);
    check(K(torc_matmul(mk(dt, TORC_SHAPE(2), V(1, 2)), a)), dt,
          TORC_SHAPE(3), V(9, 12, 15), 0);
    check(K(torc_matmul(b, mk(dt, TORC_SHAPE(2), V(1, 1)))), dt,
          TORC_SHAPE(3), V(15, 19, 23), 0);
    /* a transposed (strided) operand: a^T [3, 2] x a [2, 3] */
    check(K(torc_matmul(K(torc_transpose(a, 0, 1)), a)), dt,
          TORC_SHAPE(3, 3), V(17, 22, 27, 22, 29, 36, 27, 36, 45), 0);
  }
  /* batched with broadcasting: [2, 2, 3] x [3, 2] and [1, 2, 3] x [4, 3, 2] */
  double av[12], bv[24], e[32];
  for (int i = 0; i < 12; i++)
    av[i] = i - 5;
  for (int i = 0; i < 24; i++)
    bv[i] = (i % 7) - 3;
  torc_tensor *a = mk(TORC_F64, TORC_SHAPE(2, 2, 3), av);
  torc_tensor *b = mk(TORC_F64, TORC_SHAPE(3, 2), bv);
  naive_matmul(av, bv, e, 2, 2, 3, 2, 1, 0);
  check(K(torc_matmul(a, b)), TORC_F64, TORC_SHAPE(2, 2, 2), e, 0);
  torc_tensor *a1 = mk(TORC_F32, TORC_SHAPE(1, 2, 3), av);
  torc_tensor *b4 = mk(TORC_F32, TORC_SHAPE(4, 3, 2), bv);
  naive_matmul(av, bv, e, 4, 2, 3, 2, 0, 1);
  check(K(torc_matmul(a1, b4)), TORC_F32, TORC_SHAPE(4, 2, 2), e, 0);
  /* K = 0: zeros, whatever the output memory held */
  torc_tensor *z = K(torc_matmul(
      K(torc_empty(TORC_SHAPE(2, 0), TORC_F32, TORC_CPU)),
      K(torc_empty(TORC_SHAPE(0, 3), TORC_F32, TORC_CPU))));
  check(z, TORC_F32, TORC_SHAPE(2, 3), V(0, 0, 0, 0, 0, 0), 0);
  /* integers: i64 exact beyond 2^53, u8 wraps */
  int64_t t31 = INT64_C(1) << 31;
  check_exact(K(torc_matmul(mk_i64(TORC_SHAPE(1, 2), I64(t31, t31)),
                            mk_i64(TORC_SHAPE(2, 1), I64(t31, 1)))),
              TORC_I64, 1, I64((INT64_C(1) << 62) + t31));
  /* floating products accumulate in double: 1e8 + 1 - 1e8 is 1 */
  check(K(torc_matmul(mk(TORC_F32, TORC_SHAPE(1, 3), V(1e8, 1, -1e8)),
                      K(torc_ones(TORC_SHAPE(3, 1), TORC_F32, TORC_CPU)))),
        TORC_F32, TORC_SHAPE(1, 1), V(1), 0);
  check(K(torc_matmul(mk(TORC_U8, TORC_SHAPE(2), V(16, 16)),
                      mk(TORC_U8, TORC_SHAPE(2), V(16, 1)))),
        TORC_U8, NULL, 0, V(16), 0);
}

static void test_matmul_errors(void **state) {
  (void)state;
  torc_tensor *a = K(torc_zeros(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU));
  torc_tensor *b = K(torc_zeros(TORC_SHAPE(4, 2), TORC_F32, TORC_CPU));
  torc_clear_error();
  assert_null(torc_matmul(a, b));
  assert_int_equal(torc_last_status(), TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "[2, 3]");
  assert_contains(torc_last_error(), "[4, 2]");
  /* batch dims that do not broadcast */
  torc_tensor *p = K(torc_zeros(TORC_SHAPE(2, 2, 3), TORC_F32, TORC_CPU));
  torc_tensor *q = K(torc_zeros(TORC_SHAPE(3, 3, 2), TORC_F32, TORC_CPU));
  torc_clear_error();
  assert_null(torc_matmul(p, q));
  assert_int_equal(torc_last_status(), TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "[2, 2, 3]");
  assert_contains(torc_last_error(), "[3, 3, 2]");
}

/* ---- copy / cast, fill ---- */

static void test_cast(void **state) {
  (void)state;
  /* to u8: truncation toward zero; -1 wraps to 255 as C's unsigned char
   * after the integer conversion (PyTorch on x86 gives the same) */
  torc_tensor *f = mk(TORC_F32, TORC_SHAPE(5), V(0, 3.7, 255, 254.9, -1));
  check(K(torc_to_dtype(f, TORC_U8)), TORC_U8, TORC_SHAPE(5),
        V(0, 3, 255, 254, 255), 0);
  check(K(torc_to_dtype(mk(TORC_F64, TORC_SHAPE(3), V(-2.7, 2.7, -0.5)),
                        TORC_I32)),
        TORC_I32, TORC_SHAPE(3), V(-2, 2, 0), 0);
  /* to bool: != 0, so -0.0 is false and NaN true */
  torc_tensor *g = mk(TORC_F32, TORC_SHAPE(5), V(0, -0.0, 0.5, -2, NAN));
  check(K(torc_to_dtype(g, TORC_BOOL)), TORC_BOOL, TORC_SHAPE(5),
        V(0, 0, 1, 1, 1), 0);
  check(K(torc_to_dtype(mk(TORC_I32, TORC_SHAPE(3), V(0, 7, -1)), TORC_BOOL)),
        TORC_BOOL, TORC_SHAPE(3), V(0, 1, 1), 0);
  /* from bool: 0/1 */
  torc_tensor *b = mk(TORC_BOOL, TORC_SHAPE(2), V(0, 1));
  check(K(torc_to_dtype(b, TORC_F32)), TORC_F32, TORC_SHAPE(2), V(0, 1), 0);
  check_exact(K(torc_to_dtype(b, TORC_I64)), TORC_I64, 2, I64(0, 1));
  /* integer narrowing keeps the low bits */
  torc_tensor *l = mk_i64(TORC_SHAPE(3), I64((INT64_C(1) << 32) + 5, -1, 300));
  check(K(torc_to_dtype(l, TORC_I32)), TORC_I32, TORC_SHAPE(3), V(5, -1, 300),
        0);
  check(K(torc_to_dtype(l, TORC_U8)), TORC_U8, TORC_SHAPE(3), V(5, 255, 44), 0);
  /* i64 -> f32 rounds once: 2^60 + 2^36 + 1 is just above the midpoint of
   * two floats and goes up; through double it would tie and go down */
  int64_t t60 = INT64_C(1) << 60, t36 = INT64_C(1) << 36;
  torc_tensor *w = mk_i64(TORC_SHAPE(1), I64(t60 + t36 + 1));
  float wf;
  assert_ok(torc_to_host(K(torc_to_dtype(w, TORC_F32)), &wf, sizeof wf));
  assert_true(wf == (float)(t60 + 2 * t36));
  /* NaN and out-of-range floats to integers are defined (no UB) */
  torc_tensor *bad = mk(TORC_F64, TORC_SHAPE(3), V(NAN, 1e30, -1e30));
  check_exact(K(torc_to_dtype(bad, TORC_I64)), TORC_I64, 3,
              I64(0, INT64_MAX, INT64_MIN));
}

/* f16/bf16 conversions round to nearest even and overflow to inf. */
static void test_cast_half(void **state) {
  (void)state;
  torc_tensor *x = mk(TORC_F64, TORC_SHAPE(5), V(0.1, 1.0 / 3, 65504, 1e-7, 1));
  check(K(torc_to_dtype(K(torc_to_dtype(x, TORC_F16)), TORC_F64)), TORC_F64,
        TORC_SHAPE(5),
        V(0.0999755859375, 0.333251953125, 65504, 1.1920928955078125e-07, 1),
        0);
  check(K(torc_to_dtype(K(torc_to_dtype(x, TORC_BF16)), TORC_F64)), TORC_F64,
        TORC_SHAPE(5),
        V(0.10009765625, 0.333984375, 65536, 1.0011717677116394e-07, 1), 0);
  /* 1 + 2^-11 is halfway between two halves: ties to even (1) */
  torc_tensor *tie =
      mk(TORC_F32, TORC_SHAPE(2), V(1 + 1.0 / 2048, 1 + 3.0 / 2048));
  check(K(torc_to_dtype(tie, TORC_F16)), TORC_F16, TORC_SHAPE(2),
        V(1, 1 + 4.0 / 2048), 0);
  /* f16 values (a subnormal among them) survive f16 -> f32 -> f16 bit for
   * bit */
  torc_tensor *h = K(torc_to_dtype(
      mk(TORC_F32, TORC_SHAPE(4), V(-2.5, 0.125, 1024, 3e-6)), TORC_F16));
  torc_tensor *back = K(torc_to_dtype(K(torc_to_dtype(h, TORC_F32)), TORC_F16));
  uint16_t hb[4], bb[4];
  assert_ok(torc_to_host(h, hb, sizeof hb));
  assert_ok(torc_to_host(back, bb, sizeof bb));
  assert_memory_equal(hb, bb, sizeof hb);
  /* overflow */
  double big;
  assert_ok(torc_item(K(torc_to_dtype(scalar(TORC_F64, 1e6), TORC_F16)), &big));
  assert_true(isinf(big) && big > 0);
}

/* fill_ (through torc_full and torc_fill_) in every dtype, contiguous or
 * not. */
static void test_fill(void **state) {
  (void)state;
  for (int d = 0; d < TORC_DTYPE_COUNT; d++) {
    torc_dtype dt = (torc_dtype)d;
    double v = dt == TORC_BOOL ? 1 : dt == TORC_U8 ? 7 : -3;
    check(K(torc_full(TORC_SHAPE(2, 2), v, dt, TORC_CPU)), dt,
          TORC_SHAPE(2, 2), V(v, v, v, v), 0);
    check(K(torc_zeros(TORC_SHAPE(3), dt, TORC_CPU)), dt, TORC_SHAPE(3),
          V(0, 0, 0), 0);
    check(K(torc_ones(NULL, 0, dt, TORC_CPU)), dt, NULL, 0, V(1), 0);
  }
  check(K(torc_full(TORC_SHAPE(2), 0.1, TORC_F32, TORC_CPU)), TORC_F32,
        TORC_SHAPE(2), V((float)0.1, (float)0.1), 0);
  /* a strided view: only its elements change */
  torc_tensor *m = K(torc_zeros(TORC_SHAPE(2, 3), TORC_I64, TORC_CPU));
  assert_ok(torc_fill_(K(torc_slice(m, 1, 0, TORC_END, 2)), 9));
  check(m, TORC_I64, TORC_SHAPE(2, 3), V(9, 0, 9, 9, 0, 9), 0);
}

/* ---- random ---- */

/* Same seed, same numbers; the values are exactly philox.h's for the
 * generator's counters (offset + i), in every dtype. */
static void test_random_determinism(void **state) {
  (void)state;
  enum { N = 257 };
  torc_generator *g1 = torc_generator_new(1234);
  torc_generator *g2 = torc_generator_new(1234);
  torc_generator *g3 = torc_generator_new(1235);
  assert_non_null(g1);
  assert_non_null(g2);
  assert_non_null(g3);
  float a[N], b[N], c[N];
  assert_ok(torc_to_host(K(torc_rand(TORC_SHAPE(N), TORC_F32, TORC_CPU, g1)),
                         a, sizeof a));
  assert_ok(torc_to_host(K(torc_rand(TORC_SHAPE(N), TORC_F32, TORC_CPU, g2)),
                         b, sizeof b));
  assert_ok(torc_to_host(K(torc_rand(TORC_SHAPE(N), TORC_F32, TORC_CPU, g3)),
                         c, sizeof c));
  assert_memory_equal(a, b, sizeof a);
  int differ = 0;
  for (int i = 0; i < N; i++) {
    assert_true(a[i] == torc_philox_uniform_f32(1234, (uint64_t)i));
    differ += a[i] != c[i];
  }
  assert_true(differ > N - 5);
  /* g1 continues at offset N: f64 uniform, normal, and randint */
  uint64_t seed, off;
  torc_generator_get_state(g1, &seed, &off);
  assert_int_equal(off, N);
  double u[N], z[N];
  int64_t r[N];
  assert_ok(torc_to_host(K(torc_rand(TORC_SHAPE(N), TORC_F64, TORC_CPU, g1)),
                         u, sizeof u));
  assert_ok(torc_to_host(K(torc_randn(TORC_SHAPE(N), TORC_F64, TORC_CPU, g1)),
                         z, sizeof z));
  assert_ok(torc_to_host(
      K(torc_randint(-5, 1000, TORC_SHAPE(N), TORC_I64, TORC_CPU, g1)), r,
      sizeof r));
  for (int i = 0; i < N; i++) {
    assert_true(u[i] == torc_philox_uniform(seed, off + (uint64_t)i));
    assert_true(z[i] == torc_philox_normal(seed, off + N + (uint64_t)i));
    assert_int_equal(r[i],
                     torc_philox_randint(seed, off + 2 * N + (uint64_t)i, -5,
                                         1000));
  }
  /* f32 normal rounds the f64 value once; f16 uniform rounds the f32 one */
  torc_generator_set_state(g2, 99, 7);
  float zf[N];
  assert_ok(torc_to_host(K(torc_randn(TORC_SHAPE(N), TORC_F32, TORC_CPU, g2)),
                         zf, sizeof zf));
  for (int i = 0; i < N; i++)
    assert_true(zf[i] == (float)torc_philox_normal(99, 7 + (uint64_t)i));
  torc_generator_set_state(g2, 99, 7);
  uint16_t h[N];
  assert_ok(torc_to_host(K(torc_rand(TORC_SHAPE(N), TORC_F16, TORC_CPU, g2)),
                         h, sizeof h));
  for (int i = 0; i < N; i++) {
    float e = torc_philox_uniform_f32(99, 7 + (uint64_t)i);
    uint16_t eh = torc_f32_to_f16(e);
    if (torc_f16_to_f32(eh) >= 1.0f)
      eh = 0x3bff; /* the largest half below 1 */
    assert_int_equal(h[i], eh);
  }
  torc_generator_free(g1);
  torc_generator_free(g2);
  torc_generator_free(g3);
}

/* Uniform values lie in [0, 1) in every float dtype — also bf16, where
 * rounding a draw within 2^-9 of 1 would otherwise give 1 (about 20 of
 * 10000) — and cover it (min < 0.01, max > 0.99). */
static void test_random_range(void **state) {
  (void)state;
  enum { N = 10000 };
  torc_generator *g = torc_generator_new(7);
  assert_non_null(g);
  for (size_t d = 0; d < 4; d++) {
    double *v = test_values(K(torc_rand(TORC_SHAPE(N), float_dtypes[d],
                                        TORC_CPU, g)));
    assert_non_null(v);
    double lo = 1, hi = 0;
    int outside = 0;
    for (int i = 0; i < N; i++) {
      outside += !(v[i] >= 0 && v[i] < 1); /* NaN counts too */
      lo = v[i] < lo ? v[i] : lo;
      hi = v[i] > hi ? v[i] : hi;
    }
    free(v);
    print_message("%s: min %.9g max %.9g, %d outside [0, 1)\n",
                  torc_dtype_name(float_dtypes[d]), lo, hi, outside);
    assert_int_equal(outside, 0);
    assert_true(lo < 0.01 && hi > 0.99);
  }
  /* randint covers [low, high) and stays in it, in every non-bool dtype */
  static const torc_dtype ints[] = {TORC_I32, TORC_I64, TORC_U8, TORC_F32};
  for (size_t d = 0; d < 4; d++) {
    int64_t low = ints[d] == TORC_U8 ? 250 : -3;
    double *v = test_values(
        K(torc_randint(low, low + 6, TORC_SHAPE(600), ints[d], TORC_CPU, g)));
    assert_non_null(v);
    int seen[6] = {0};
    for (int i = 0; i < 600; i++) {
      assert_true(v[i] >= (double)low && v[i] < (double)(low + 6));
      assert_true(v[i] == floor(v[i]));
      seen[(int)(v[i] - (double)low)]++;
    }
    free(v);
    for (int k = 0; k < 6; k++)
      assert_true(seen[k] > 50); /* expected 100 each */
  }
  torc_generator_free(g);
}

/* Normal samples: on n = 10000 draws the sample mean has standard error
 * 1/sqrt(n) = 0.01 and the sample std about 1/sqrt(2n) = 0.0071; the
 * bounds are 5 standard errors (a false failure has odds below 1e-6, and
 * with the fixed seed the draws are the same every run). */
static void test_random_normal_moments(void **state) {
  (void)state;
  enum { N = 10000 };
  torc_generator *g = torc_generator_new(2024);
  assert_non_null(g);
  static const torc_dtype dts[] = {TORC_F32, TORC_F64};
  for (size_t d = 0; d < 2; d++) {
    double *v = test_values(K(torc_randn(TORC_SHAPE(N), dts[d], TORC_CPU, g)));
    assert_non_null(v);
    double s = 0, s2 = 0;
    for (int i = 0; i < N; i++)
      s += v[i];
    double mean = s / N;
    for (int i = 0; i < N; i++)
      s2 += (v[i] - mean) * (v[i] - mean);
    double sd = sqrt(s2 / (N - 1));
    free(v);
    print_message("randn %s: mean %.4f std %.4f\n", torc_dtype_name(dts[d]),
                  mean, sd);
    assert_true(fabs(mean) < 0.05);
    assert_true(fabs(sd - 1) < 0.036);
  }
  torc_generator_free(g);
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
      T(test_reduce_dims),
      T(test_reduce_integer),
      T(test_matmul),
      T(test_matmul_errors),
      T(test_cast),
      T(test_cast_half),
      T(test_fill),
      T(test_random_determinism),
      T(test_random_range),
      T(test_random_normal_moments),
      T(test_zero_size),
      T(test_broadcast_error),
#undef T
  };
  return cmocka_run_group_tests_name("ops", tests, NULL, test_teardown_all);
}
