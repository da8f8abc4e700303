/* tests/test_cpu_maxpool.c — the cpu plugin's bf16 max_pool2d (the 2x2,
 * stride-2 pool) and its backward (plugins/cpu/maxpool.c) against ref's:
 * rows of 3, 7, 14 and 20 outputs (the vector loop, its masked tail, the
 * scalar one), odd sizes that leave the last row and column out, NaN,
 * -inf and ties (the first maximum, a NaN where met), y and the gradient
 * exactly; the overlapping windows of a 3x3 stride-1 pool through the
 * backward (its forward is another provider's); and which calls it
 * serves in normal use.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#define REF torc__dispatch_pin("ref")
#define CPU torc__dispatch_pin("cpu")
#define UNPIN torc__dispatch_pin(NULL)

static int setup_pinned(void **state) {
  (void)state;
  return test_apply_ini("[torc]\nthreads = 2\n"
                        "[plugin.ref]\nmodule = ref\n"
                        "[plugin.cpu]\nmodule = cpu\n",
                        "cpu.ini");
}

static const torc_pool2d_params p2 = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 0, 0};
static const torc_pool2d_params p3 = {{3, 3}, {1, 1}, {1, 1}, {1, 1}, 0, 0, 0};

/* A bf16 x of `shape`: rounded to a few values (ties), with NaN and
 * -inf at some positions when `special`. */
static torc_tensor *x_of(const int64_t *shape, int special) {
  torc_tensor *t = torc_randn(shape, 4, TORC_F32, TORC_CPU, NULL);
  assert_torc(t);
  int64_t n = torc_numel(t);
  float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
  assert_non_null(v);
  assert_ok(torc_to_host(t, v, sizeof(float) * (size_t)n));
  for (int64_t i = 0; i < n; i++) {
    v[i] = roundf(2 * v[i]); /* few values: ties in the windows */
    if (special && i % 37 == 0)
      v[i] = i % 74 ? NAN : -INFINITY;
  }
  t = torc_to_dtype(torc_from_host(v, shape, 4, TORC_F32, TORC_CPU),
                    TORC_BF16);
  free(v);
  assert_torc(t);
  return t;
}

/* y and the gradient of sum(y * r) from ref and from the plugin. */
static void pool_run(const int64_t *shape, const torc_pool2d_params *p,
                     int special) {
  int scope = torc_scope_begin();
  torc_tensor *x = x_of(shape, special);
  torc_tensor *xc = torc_clone(x), *xd = torc_clone(x);
  assert_ok(torc_set_requires_grad(xc, 1));
  assert_ok(torc_set_requires_grad(xd, 1));
  REF;
  torc_tensor *yc = torc_max_pool2d(xc, p);
  CPU;
  torc_tensor *yd = torc_max_pool2d(xd, p);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  assert_int_equal(torc_dtype_of(yd), TORC_BF16);
  test_assert_close(yd, yc, 0);
  torc_tensor *r = torc_to_dtype(
      torc_randn(torc_shape(yc), 4, TORC_F32, TORC_CPU, NULL), TORC_BF16);
  REF;
  assert_ok(torc_backward(torc_sum(torc_mul(yc, r), NULL, 0, 0), NULL, 0));
  CPU;
  assert_ok(torc_backward(torc_sum(torc_mul(yd, r), NULL, 0, 0), NULL, 0));
  UNPIN;
  /* one gy per element in disjoint windows: exact; up to nine summed
   * where they overlap (f32 against ref's double, rounded once) */
  test_assert_close(torc_grad_of(xd), torc_grad_of(xc),
                    p == &p2 ? 0 : 1e-2);
  torc_scope_end(scope);
}

static void test_against_ref(void **state) {
  (void)state;
  static const int64_t shapes[][4] = {{2, 3, 28, 28}, {2, 4, 14, 14},
                                      {1, 2, 8, 40},  {1, 1, 5, 7},
                                      {3, 2, 6, 6},   {1, 2, 2, 2}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (int special = 0; special < 2; special++) {
      pool_run(shapes[i], &p2, special);
      pool_run(shapes[i], &p3, special);
    }
}

/* In normal use the plugin serves the bf16 2x2 pool and every bf16
 * backward; a 3x3 forward and ceil_mode's clipped last window are
 * another provider's (here ref). */
static void test_served(void **state) {
  (void)state;
  static const int64_t s[4] = {2, 3, 9, 9};
  torc_pool2d_params ceil = p2;
  ceil.ceil_mode = 1;
  const struct {
    const torc_pool2d_params *p;
    const char *fwd;
  } runs[] = {{&p2, "cpu"}, {&p3, "ref"}, {&ceil, "ref"}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    int scope = torc_scope_begin();
    torc_tensor *x = x_of(s, 0);
    assert_ok(torc_set_requires_grad(x, 1));
    torc_profile_enable(1);
    torc_tensor *y = torc_max_pool2d(x, runs[i].p);
    assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
    char *rep = torc_profile_report(100, 1);
    torc_profile_enable(0);
    assert_non_null(rep);
    if (!test_profile_served(rep, "max_pool2d", runs[i].fwd) ||
        !test_profile_served(rep, "max_pool2d_backward", "cpu")) {
      print_error("run %zu: max_pool2d not by %s, or its backward not by "
                  "cpu:\n%s\n",
                  i, runs[i].fwd, rep);
      free(rep);
      fail();
    }
    free(rep);
    torc_scope_end(scope);
  }
}

int main(void) {
  if (!test_plugin_built("cpu", "libopenblas-dev"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_against_ref, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_served, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests_name("cpu bf16 max pool against ref", tests,
                                     setup_pinned, test_teardown_all);
}
