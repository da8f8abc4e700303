/* tests/test_ops_reduce_cast.c — ops through the public API on the cpu
 * with the ref plugin: reductions over dims (integer ones too), matmul
 * against a naive product and its errors, casts (to and from the half
 * types) and fill, and random numbers (determinism, ranges, moments).
 */
#include <math.h>

#include "testutil.h"
#include "ops_testutil.h"
#include "torc/philox.h"

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

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
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
#undef T
  };
  return cmocka_run_group_tests_name("ops_reduce_cast", tests, NULL, test_teardown_all);
}
