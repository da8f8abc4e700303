/* tests/ops_testutil.h — shared by the tests of the ops through the public
 * API on the cpu with the ref plugin (test_ops, test_ops_reduce_cast): the
 * fixtures, under which every tensor a test makes goes through K() and is
 * released at teardown, and making and checking tensors of any dtype.
 * Included after testutil.h, once per program. */
#ifndef TORC_OPS_TESTUTIL_H
#define TORC_OPS_TESTUTIL_H

#include "testutil.h"

/* ---- fixtures: every tensor a test makes goes through K(), and is
 * released at teardown, which then checks that no tensor leaked ---- */

#define MAX_KEPT 256
static torc_tensor *kept[MAX_KEPT];
static int n_kept;
static int64_t live_at_start;

/* Keeps t for release at teardown; fails the test if t is NULL. */
static inline torc_tensor *keep(torc_tensor *t, const char *what) {
  if (t == NULL) {
    print_error("%s returned NULL: %s\n", what, torc_last_error());
    fail();
  }
  assert_true(n_kept < MAX_KEPT);
  kept[n_kept++] = t;
  return t;
}
#define K(call) keep((call), #call)

static inline int setup(void **state) {
  (void)state;
  test_load_plugin("ref");
  torc_clear_error();
  n_kept = 0;
  live_at_start = torc_tensor_live_count();
  return 0;
}

static inline int teardown(void **state) {
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
static inline double tol_of(torc_dtype dt) {
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
static inline torc_tensor *mk(torc_dtype dt, const int64_t *shape, int ndim,
                              const double *v) {
  torc_tensor *d = torc_from_host(v, shape, ndim, TORC_F64, TORC_CPU);
  torc_tensor *t = torc_to_dtype(d, dt);
  torc_release(d);
  return K(t);
}

/* A 0-dim tensor. */
static inline torc_tensor *scalar(torc_dtype dt, double v) {
  return mk(dt, NULL, 0, &v);
}

/* An exact i64 tensor. */
static inline torc_tensor *mk_i64(const int64_t *shape, int ndim,
                                  const int64_t *v) {
  return K(torc_from_host(v, shape, ndim, TORC_I64, TORC_CPU));
}

static inline void assert_shape(const torc_tensor *t, const int64_t *shape,
                                int ndim) {
  assert_non_null(t);
  assert_int_equal(torc_ndim(t), ndim);
  for (int d = 0; d < ndim; d++)
    assert_int_equal(torc_shape(t)[d], shape[d]);
}

/* Asserts t's dtype, shape and values (within tol). */
static inline void check(const torc_tensor *t, torc_dtype dt,
                         const int64_t *shape, int ndim, const double *expect,
                         double tol) {
  assert_non_null(t);
  assert_int_equal(torc_dtype_of(t), dt);
  assert_shape(t, shape, ndim);
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  test_assert_values(t, expect, n, tol);
}

/* Asserts an integer tensor's exact values, read as i64. */
static inline void check_exact(const torc_tensor *t, torc_dtype dt, int64_t n,
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

#endif /* TORC_OPS_TESTUTIL_H */
