/* tests/test_cpu_bnorm.c — the cpu plugin's batch_norm and its backward
 * (plugins/cpu/bnorm.c) against ref's: f32, bf16 activations with f32
 * parameters (mixed precision) and all-bf16; training with and without
 * running statistics, and eval; odd inner sizes, a mean far from 0, the
 * pool's split; y, the running statistics and the three gradients. Also
 * the same bits with 1 thread and with 2, the short inner sizes it leaves
 * to ref, and that it serves both dtypes in normal use.
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

/* A leaf of `shape` in dtype dt, standard normal plus shift, scaled. */
static torc_tensor *leaf(const int64_t *shape, int nd, torc_dtype dt,
                         double scale, double shift) {
  torc_tensor *t = torc_to_dtype(
      torc_add_scalar(torc_mul_scalar(torc_randn(shape, nd, TORC_F32,
                                                 TORC_CPU, NULL),
                                      scale),
                      shift),
      dt);
  assert_torc(t);
  return t;
}

/* Requires-grad clones of t for ref's run and the plugin's. */
static void pair(torc_tensor *t, torc_tensor **c, torc_tensor **d) {
  *c = torc_clone(t);
  *d = torc_clone(t);
  assert_torc(*c);
  assert_torc(*d);
  assert_ok(torc_set_requires_grad(*c, 1));
  assert_ok(torc_set_requires_grad(*d, 1));
}

typedef struct bn_case {
  int nd;
  int64_t shape[4];
  double shift; /* added to x: a mean far from 0 */
} bn_case;

static const bn_case cases[] = {
    {3, {2, 5, 8}, 0},         {4, {4, 3, 5, 6}, 0},
    {4, {3, 4, 17, 19}, 0},    {4, {8, 16, 28, 28}, 0},
    {4, {5, 7, 9, 11}, 50},    {3, {1, 2, 4099}, 0},
    {4, {0, 3, 4, 4}, 0},
};

/* One case of x dtype xdt and parameter dtype pdt: training (with or
 * without running statistics) or eval, the plugin against ref. */
static void bn_run(const bn_case *k, torc_dtype xdt, torc_dtype pdt,
                   int training, int running) {
  int scope = torc_scope_begin();
  int64_t C = k->shape[1], cs[1] = {C};
  torc_tensor *xc, *xd, *wc, *wd, *bc, *bd;
  pair(leaf(k->shape, k->nd, xdt, 1.5, k->shift), &xc, &xd);
  pair(leaf(cs, 1, pdt, 1, 0), &wc, &wd);
  pair(leaf(cs, 1, pdt, 1, 0), &bc, &bd);
  torc_tensor *rmc = NULL, *rvc = NULL, *rmd = NULL, *rvd = NULL;
  if (running) {
    rmc = leaf(cs, 1, TORC_F32, 1, k->shift);
    rvc = torc_add_scalar(torc_abs(leaf(cs, 1, TORC_F32, 2, 0)), 0.1);
    rmd = torc_clone(rmc);
    rvd = torc_clone(rvc);
    assert_torc(rmd);
    assert_torc(rvd);
  }
  if (training && k->shape[0] == 0) { /* nothing to train on */
    torc_scope_end(scope);
    return;
  }
  REF;
  torc_tensor *yc = torc_batch_norm(xc, rmc, rvc, wc, bc, training, 0.1, 1e-5);
  CPU;
  torc_tensor *yd = torc_batch_norm(xd, rmd, rvd, wd, bd, training, 0.1, 1e-5);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  assert_int_equal(torc_dtype_of(yd), xdt);
  /* ref computes in double, the plugin in f32: a bf16 result may round
   * the other way (one bf16 step, 2^-8 relative) */
  int half = xdt == TORC_BF16;
  double tol = half ? 1.6e-2 : 2e-5 * (k->shift != 0 ? 20 : 1);
  test_assert_close(yd, yc, tol);
  if (running) {
    test_assert_close(rmd, rmc, 1e-5);
    test_assert_close(rvd, rvc, 1e-5);
  }
  /* backward of sum(y * r), r in y's dtype */
  torc_tensor *r = leaf(k->shape, k->nd, xdt, 1, 0);
  REF;
  assert_ok(torc_backward(torc_sum(torc_mul(yc, r), NULL, 0, 0), NULL, 0));
  CPU;
  assert_ok(torc_backward(torc_sum(torc_mul(yd, r), NULL, 0, 0), NULL, 0));
  UNPIN;
  assert_int_equal(torc_dtype_of(torc_grad_of(wd)), pdt);
  /* gx: relative to its largest magnitude (the training form subtracts
   * means of g), gw and gb: sums over the channel */
  torc_tensor *gxc = torc_grad_of(xc), *gxd = torc_grad_of(xd);
  double gmax = 0;
  if (torc_numel(gxc) > 0)
    assert_ok(torc_item(
      torc_amax(torc_abs(torc_to_dtype(gxc, TORC_F32)), NULL, 0, 0), &gmax));
  double gtol = (half ? 3e-2 : 1e-4 * (k->shift != 0 ? 20 : 1)) *
                (gmax > 1 ? gmax : 1);
  test_assert_close(gxd, gxc, gtol);
  double stol = half || pdt == TORC_BF16 ? 3e-2 : 1e-4;
  test_assert_close(torc_grad_of(wd), torc_grad_of(wc), stol);
  test_assert_close(torc_grad_of(bd), torc_grad_of(bc), stol);
  torc_scope_end(scope);
}

static void test_against_ref(void **state) {
  (void)state;
  static const torc_dtype dts[3][2] = {{TORC_F32, TORC_F32},
                                       {TORC_BF16, TORC_F32},
                                       {TORC_BF16, TORC_BF16}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int d = 0; d < 3; d++) {
      bn_run(&cases[i], dts[d][0], dts[d][1], 1, 0);
      bn_run(&cases[i], dts[d][0], dts[d][1], 1, 1);
      bn_run(&cases[i], dts[d][0], dts[d][1], 0, 1);
    }
}

/* 1 thread and 2 give the same bits: y, the statistics, the gradients. */
static void test_threads(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t shape[4] = {16, 8, 20, 20}, cs[1] = {8};
  torc_tensor *x = leaf(shape, 4, TORC_BF16, 1, 0.5);
  torc_tensor *w0 = leaf(cs, 1, TORC_F32, 1, 0);
  torc_tensor *r = leaf(shape, 4, TORC_BF16, 1, 0);
  torc_tensor *y[2], *gx[2], *gw[2];
  for (int t = 0; t < 2; t++) {
    assert_ok(torc_set_num_threads(t + 1));
    torc_tensor *xl = torc_clone(x), *w = torc_clone(w0);
    assert_ok(torc_set_requires_grad(xl, 1));
    assert_ok(torc_set_requires_grad(w, 1));
    CPU;
    y[t] = torc_batch_norm(xl, NULL, NULL, w, NULL, 1, 0.1, 1e-5);
    assert_ok(torc_backward(torc_sum(torc_mul(y[t], r), NULL, 0, 0), NULL, 0));
    UNPIN;
    gx[t] = torc_grad_of(xl);
    gw[t] = torc_grad_of(w);
  }
  assert_ok(torc_set_num_threads(2));
  test_assert_close(y[1], y[0], 0);
  test_assert_close(gx[1], gx[0], 0);
  test_assert_close(gw[1], gw[0], 0);
  torc_scope_end(scope);
}

/* The profile of one forward and backward of x through a batch norm
 * with parameters of dtype pdt (the caller frees it). */
static char *profile_of(const int64_t *shape, int nd, torc_dtype xdt,
                        torc_dtype pdt) {
  int scope = torc_scope_begin();
  int64_t cs[1] = {shape[1]};
  torc_tensor *x = leaf(shape, nd, xdt, 1, 0);
  torc_tensor *w = leaf(cs, 1, pdt, 1, 0), *b = leaf(cs, 1, pdt, 1, 0);
  assert_ok(torc_set_requires_grad(x, 1));
  assert_ok(torc_set_requires_grad(w, 1));
  torc_profile_enable(1);
  torc_tensor *y = torc_batch_norm(x, NULL, NULL, w, b, 1, 0.1, 1e-5);
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  char *rep = torc_profile_report(100, 1);
  torc_profile_enable(0);
  torc_scope_end(scope);
  assert_non_null(rep);
  return rep;
}

/* In normal use the plugin serves f32 and mixed bf16 batch norms, and
 * leaves an inner size below 8 (a [N, C] input) to ref. */
static void test_served(void **state) {
  (void)state;
  static const int64_t s4[4] = {4, 3, 6, 6}, s2[2] = {16, 5};
  struct {
    const int64_t *shape;
    int nd;
    torc_dtype xdt, pdt;
    const char *by;
  } runs[] = {{s4, 4, TORC_F32, TORC_F32, "cpu"},
              {s4, 4, TORC_BF16, TORC_F32, "cpu"},
              {s4, 4, TORC_BF16, TORC_BF16, "cpu"},
              {s2, 2, TORC_F32, TORC_F32, "ref"},
              {s2, 2, TORC_BF16, TORC_F32, "ref"}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char *rep = profile_of(runs[i].shape, runs[i].nd, runs[i].xdt,
                           runs[i].pdt);
    if (!test_profile_served(rep, "batch_norm", runs[i].by) ||
        !test_profile_served(rep, "batch_norm_backward", runs[i].by)) {
      print_error("run %zu: batch_norm is not served by %s alone:\n%s\n", i,
                  runs[i].by, rep);
      free(rep);
      fail();
    }
    free(rep);
  }
}

int main(void) {
  if (!test_plugin_built("cpu", "libopenblas-dev"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_against_ref, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_threads, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_served, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests_name("cpu batch norm against ref", tests,
                                     setup_pinned, test_teardown_all);
}
