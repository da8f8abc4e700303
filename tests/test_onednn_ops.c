/* tests/test_onednn_ops.c — the onednn plugin beyond the conformance
 * suite's fixed shapes: conv2d and conv_transpose2d with groups, stride,
 * padding, dilation and output_padding (including geometries whose last
 * input rows no window reaches), max/avg pooling with padding, dilation,
 * ceil_mode, count_include_pad and divisor_override, max pooling's NaN
 * propagation, and batch_norm (training with running statistics, eval;
 * 2-D to 5-D inputs), each computed twice on the cpu — the dispatcher
 * pinned to ref's kernels, then to the plugin's — and compared (forward,
 * indices, running statistics and gradients); and that in normal use the
 * plugin serves cpu's f32 kernels for those ops above ref and cpu, and no
 * f64 ones.
 */
#include "testutil.h"

#include <math.h>

static int setup_pinned(void **state) {
  (void)state;
  /* Under valgrind (tests/harness.sh), one thread: libgomp never joins its
   * idle workers, whose thread-local blocks valgrind then reports as
   * "possibly lost" at exit. The same in a sanitizer build: LeakSanitizer's
   * exit-time scan crashes (SIGSEGV in its tracer) with them alive. */
  const char *vg = getenv("TORC_VALGRIND");
  int one = vg && strcmp(vg, "1") == 0;
#ifdef TORC_SANITIZE
  one = 1;
#endif
  return test_apply_ini(one ? "[torc]\nthreads = 1\n"
                              "[plugin.ref]\nmodule = ref\n"
                              "[plugin.onednn]\nmodule = onednn\n"
                            : "[torc]\nthreads = 2\n"
                              "[plugin.ref]\nmodule = ref\n"
                              "[plugin.onednn]\nmodule = onednn\n",
                        "onednn.ini");
}

/* Runs what follows with ref's kernels (REF) or the plugin's (DNN). */
#define REF torc__dispatch_pin("ref")
#define DNN torc__dispatch_pin("onednn")
#define UNPIN torc__dispatch_pin(NULL)

/* f32 against ref's double accumulation, on values of a few units summed
 * over at most a few hundred terms. */
#define TOL 5e-5

/* Two equal f32 leaves of the given shape, both requiring gradients
 * (scope-owned): c for ref's run, d for the plugin's. */
static void leaf_pair(const int64_t *shape, int nd, torc_tensor **c,
                      torc_tensor **d) {
  *c = torc_randn(shape, nd, TORC_F32, TORC_CPU, NULL);
  assert_torc(*c);
  *d = torc_clone(*c);
  assert_torc(*d);
  assert_ok(torc_set_requires_grad(*c, 1));
  assert_ok(torc_set_requires_grad(*d, 1));
}

/* Backward of sum(y * r) for a fixed random r, ref's run then the
 * plugin's. */
static void backward_pair(torc_tensor *yc, torc_tensor *yd) {
  torc_tensor *r = torc_randn(torc_shape(yc), torc_ndim(yc), TORC_F32,
                              TORC_CPU, NULL);
  assert_torc(r);
  REF;
  assert_ok(torc_backward(torc_sum(torc_mul(yc, r), NULL, 0, 0), NULL, 0));
  DNN;
  assert_ok(torc_backward(torc_sum(torc_mul(yd, r), NULL, 0, 0), NULL, 0));
  UNPIN;
}

/* ---- convolution ---- */

typedef struct conv_case {
  int64_t n, c, h, w, o, kh, kw;
  int64_t stride[2], pad[2], dil[2], groups;
  int bias;
  int64_t opad[2]; /* conv_transpose2d only */
} conv_case;

static const conv_case conv_cases[] = {
    {2, 4, 7, 6, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, {0, 0}},
    {2, 4, 9, 8, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, 1, {1, 0}},
    {1, 6, 10, 11, 6, 3, 3, {2, 3}, {2, 1}, {2, 1}, 3, 0, {1, 2}},
    {3, 3, 5, 5, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1, {0, 0}}, /* 1x1 */
    {2, 4, 6, 6, 4, 1, 1, {2, 2}, {0, 0}, {1, 1}, 2, 0, {1, 1}}, /* 1x1 /2 */
    {1, 2, 4, 4, 2, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, 1, {0, 0}},
    {2, 8, 5, 5, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 8, 1, {0, 0}}, /* dw */
    {1, 2, 3, 3, 2, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, 0, {0, 0}},
    {2, 3, 12, 12, 5, 3, 3, {3, 2}, {0, 2}, {3, 2}, 1, 1, {2, 1}},
    /* last rows outside every window (oneDNN's padding_r < 0) */
    {2, 3, 13, 11, 4, 1, 2, {4, 3}, {0, 0}, {1, 1}, 1, 1, {3, 2}},
    /* channel counts for the blocked (16-wide) kernels; batch 1; odd */
    {1, 16, 9, 7, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, {0, 0}},
    {3, 32, 11, 11, 48, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 1, {1, 1}},
    {2, 32, 8, 8, 32, 3, 3, {1, 1}, {1, 0}, {2, 2}, 2, 0, {1, 1}},
    {4, 1, 28, 28, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, {0, 0}},
    {4, 32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, {0, 0}},
    /* more images than the plugin runs at once (64): chunks + remainder */
    {131, 2, 6, 5, 3, 3, 3, {2, 1}, {1, 1}, {1, 1}, 1, 1, {1, 0}},
};

static void conv_run(const conv_case *k, int transpose) {
  int scope = torc_scope_begin();
  int64_t xs[4] = {k->n, k->c, k->h, k->w};
  /* conv_transpose2d's weight is [C_in, C_out/groups, kH, kW]. */
  int64_t ws[4] = {transpose ? k->c : k->o,
                   transpose ? k->o / k->groups : k->c / k->groups, k->kh,
                   k->kw};
  int64_t bs[1] = {k->o};
  torc_tensor *xc, *xd, *wc, *wd, *bc = NULL, *bd = NULL;
  leaf_pair(xs, 4, &xc, &xd);
  leaf_pair(ws, 4, &wc, &wd);
  if (k->bias)
    leaf_pair(bs, 1, &bc, &bd);
  torc_conv2d_params p = {{k->stride[0], k->stride[1]},
                          {k->pad[0], k->pad[1]},
                          {k->dil[0], k->dil[1]},
                          {transpose ? k->opad[0] : 0,
                           transpose ? k->opad[1] : 0},
                          k->groups};
  REF;
  torc_tensor *yc = transpose ? torc_conv_transpose2d(xc, wc, bc, &p)
                              : torc_conv2d(xc, wc, bc, &p);
  DNN;
  torc_tensor *yd = transpose ? torc_conv_transpose2d(xd, wd, bd, &p)
                              : torc_conv2d(xd, wd, bd, &p);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  test_assert_close(yd, yc, TOL);
  backward_pair(yc, yd);
  test_assert_close(torc_grad_of(xd), torc_grad_of(xc), TOL);
  /* The weight and bias gradients sum over every image and position:
   * oneDNN's f32 sums drift from ref's double ones by ~sqrt(terms) ulps. */
  double terms = (double)(torc_numel(yc) / torc_shape(yc)[1] +
                          torc_numel(xc) / torc_shape(xc)[1]);
  double wtol = TOL * (sqrt(terms) / 8 > 1 ? sqrt(terms) / 8 : 1);
  test_assert_close(torc_grad_of(wd), torc_grad_of(wc), wtol);
  if (k->bias)
    test_assert_close(torc_grad_of(bd), torc_grad_of(bc), wtol);
  torc_scope_end(scope);
}

static void test_conv2d_geometry(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
    conv_run(&conv_cases[i], 0);
}

static void test_conv_transpose2d_geometry(void **state) {
  (void)state;
  /* The cases whose channels also fit the transposed weight. */
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
    if (conv_cases[i].o % conv_cases[i].groups == 0)
      conv_run(&conv_cases[i], 1);
}

/* ---- pooling ---- */

typedef struct pool_case {
  int64_t n, c, h, w;
  torc_pool2d_params p;
} pool_case;

static const pool_case pool_cases[] = {
    {2, 3, 8, 8, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0}},
    {2, 3, 7, 9, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0}}, /* odd */
    {2, 3, 7, 9, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 1, 0, 0}}, /* ceil */
    {1, 2, 9, 10, {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 0, 0, 0}},
    {1, 2, 10, 9, {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 1, 0, 0}},
    {2, 2, 10, 10, {{3, 2}, {2, 3}, {1, 0}, {0, 0}, 1, 1, 0}},
    {2, 2, 9, 9, {{3, 3}, {3, 3}, {1, 1}, {0, 0}, 1, 0, 0}},
    {2, 2, 9, 11, {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 0, 0, 4}}, /* divisor */
    {1, 1, 11, 12, {{5, 4}, {3, 2}, {2, 2}, {0, 0}, 1, 1, 0}},
    {2, 3, 28, 28, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0}},
    {2, 3, 6, 10, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0}}, /* 5 wide */
    {1, 2, 4, 15, {{2, 2}, {2, 2}, {0, 0}, {0, 0}, 0, 0, 0}}, /* 7 wide */
    {2, 2, 6, 7, {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0}},  /* 3 wide */
    {1, 16, 13, 13, {{1, 1}, {4, 4}, {0, 0}, {0, 0}, 0, 0, 0}}, /* skips */
};

/* Max pooling only: dilation. */
static const pool_case max_cases[] = {
    {2, 2, 11, 11, {{3, 3}, {2, 2}, {1, 1}, {2, 2}, 0, 0, 0}},
    {1, 3, 12, 10, {{2, 3}, {1, 2}, {1, 1}, {3, 2}, 1, 0, 0}},
};

static void pool_run(const pool_case *k, int max) {
  int scope = torc_scope_begin();
  int64_t xs[4] = {k->n, k->c, k->h, k->w};
  torc_tensor *xc, *xd, *ic = NULL, *id = NULL;
  leaf_pair(xs, 4, &xc, &xd);
  REF;
  torc_tensor *yc = max ? torc_max_pool2d_with_indices(xc, &k->p, &ic)
                        : torc_avg_pool2d(xc, &k->p);
  DNN;
  torc_tensor *yd = max ? torc_max_pool2d_with_indices(xd, &k->p, &id)
                        : torc_avg_pool2d(xd, &k->p);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  test_assert_close(yd, yc, TOL);
  if (max)
    test_assert_close(id, ic, 0);
  backward_pair(yc, yd);
  test_assert_close(torc_grad_of(xd), torc_grad_of(xc), TOL);
  torc_scope_end(scope);
}

static void test_max_pool2d_geometry(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
    pool_run(&pool_cases[i], 1);
  for (size_t i = 0; i < sizeof max_cases / sizeof max_cases[0]; i++)
    pool_run(&max_cases[i], 1);
}

/* NaN wins a max (as PyTorch), wherever it lies in the window, and ties
 * go to the first maximum in window order: stride 1, and the 2x2 stride-2
 * pool (whose loop is its own) on rows of 7 outputs. */
static void test_max_pool2d_nan(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  float v[2 * 6 * 14];
  for (int i = 0; i < 2 * 6 * 14; i++)
    v[i] = (float)((i * 7) % 5);
  v[0] = v[6] = v[33] = v[43] = v[100] = v[101] = v[150] = NAN;
  v[17] = v[160] = -INFINITY;
  const torc_pool2d_params ps[2] = {
      {{2, 2}, {1, 1}, {0, 0}, {0, 0}, 0, 0, 0},
      {{2, 2}, {2, 2}, {0, 0}, {0, 0}, 0, 0, 0},
  };
  const int64_t shapes[2][4] = {{1, 2, 5, 5}, {2, 1, 6, 14}};
  for (int k = 0; k < 2; k++) {
    torc_tensor *x = torc_from_host(v, shapes[k], 4, TORC_F32, TORC_CPU);
    assert_torc(x);
    torc_tensor *ic, *id;
    REF;
    torc_tensor *yc = torc_max_pool2d_with_indices(x, &ps[k], &ic);
    DNN;
    torc_tensor *yd = torc_max_pool2d_with_indices(x, &ps[k], &id);
    UNPIN;
    assert_torc(yc);
    assert_torc(yd);
    test_assert_close(yd, yc, 0);
    test_assert_close(id, ic, 0);
  }
  torc_scope_end(scope);
}

static void test_avg_pool2d_geometry(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++)
    pool_run(&pool_cases[i], 0);
}

/* ---- batch norm ---- */

static void bn_run(int nd, const int64_t *shape, int training, int running) {
  int scope = torc_scope_begin();
  int64_t C = shape[1], cs[1] = {C};
  torc_tensor *xc, *xd, *wc, *wd, *bc, *bd;
  leaf_pair(shape, nd, &xc, &xd);
  leaf_pair(cs, 1, &wc, &wd);
  leaf_pair(cs, 1, &bc, &bd);
  torc_tensor *rmc = NULL, *rvc = NULL, *rmd = NULL, *rvd = NULL;
  if (running) {
    rmc = torc_randn(cs, 1, TORC_F32, TORC_CPU, NULL);
    rvc = torc_abs(torc_randn(cs, 1, TORC_F32, TORC_CPU, NULL));
    assert_torc(rmc);
    assert_torc(rvc);
    rmd = torc_clone(rmc);
    rvd = torc_clone(rvc);
    assert_torc(rmd);
    assert_torc(rvd);
  }
  REF;
  torc_tensor *yc = torc_batch_norm(xc, rmc, rvc, wc, bc, training, 0.1, 1e-5);
  DNN;
  torc_tensor *yd = torc_batch_norm(xd, rmd, rvd, wd, bd, training, 0.1, 1e-5);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  test_assert_close(yd, yc, TOL);
  if (running) {
    test_assert_close(rmd, rmc, TOL);
    test_assert_close(rvd, rvc, TOL);
  }
  backward_pair(yc, yd);
  test_assert_close(torc_grad_of(xd), torc_grad_of(xc), 2e-4);
  test_assert_close(torc_grad_of(wd), torc_grad_of(wc), 2e-4);
  test_assert_close(torc_grad_of(bd), torc_grad_of(bc), TOL);
  torc_scope_end(scope);
}

static void test_batch_norm(void **state) {
  (void)state;
  static const int64_t s2[] = {6, 5}, s3[] = {3, 4, 7}, s4[] = {4, 3, 5, 6},
                       s5[] = {2, 3, 2, 3, 4}, big[] = {8, 32, 14, 14};
  for (int running = 0; running < 2; running++) {
    bn_run(2, s2, 1, running);
    bn_run(3, s3, 1, running);
    bn_run(4, s4, 1, running);
    bn_run(5, s5, 1, running);
    bn_run(4, big, 1, running);
  }
  bn_run(2, s2, 0, 1);
  bn_run(4, s4, 0, 1);
  bn_run(4, big, 0, 1);
}

/* ---- registration ---- */

/* In normal use the plugin's kernels serve cpu's f32 conv, pooling and
 * fused inference ops above ref and cpu, and no other kernel but the bf16
 * ones (test_onednn_bf16): the products, the convolution's backward and
 * pooling. Batch norm is the cpu plugin's (its kernel ranks above this
 * plugin's, which serves the [N, C] inputs the cpu one declines). */
static void test_serves_cpu(void **state) {
  (void)state;
  static const char *const ops[] = {
      "conv2d",         "conv2d_backward_input", "conv_transpose2d",
      "conv2d_backward_weight", "max_pool2d",    "max_pool2d_backward",
      "avg_pool2d",     "avg_pool2d_backward",   "linear_act",
      "conv2d_act"};
  static const char *const bf16_ops[] = {
      "matmul",     "conv2d",     "conv2d_backward_input",
      "conv2d_backward_weight",   "max_pool2d", "max_pool2d_backward",
      "avg_pool2d"};
  test_load_ref_cpu_onednn();
  int found = 0;
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.device_type, "cpu") != 0 || !k.active)
      continue;
    int listed = 0;
    for (size_t j = 0; j < sizeof ops / sizeof ops[0]; j++)
      listed |= strcmp(k.op, ops[j]) == 0;
    int ours = strcmp(k.provider, "onednn") == 0;
    int bf16 = 0; /* the bf16 ones, on CPUs with native bf16 */
    for (size_t j = 0; j < sizeof bf16_ops / sizeof bf16_ops[0]; j++)
      bf16 |= k.dtype == TORC_BF16 && strcmp(k.op, bf16_ops[j]) == 0;
    if (listed && k.dtype == TORC_F32) {
      assert_true(ours);
      found++;
    } else if (!bf16) {
      assert_false(ours);
    }
  }
  assert_int_equal(found, (int)(sizeof ops / sizeof ops[0]));
  torc_shutdown();
}

int main(void) {
  if (!test_plugin_built("onednn", "libdnnl-dev"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest pinned[] = {
      cmocka_unit_test_setup_teardown(test_conv2d_geometry, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_conv_transpose2d_geometry,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_max_pool2d_geometry,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_max_pool2d_nan, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_avg_pool2d_geometry,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_batch_norm, test_live_setup,
                                      test_live_teardown),
  };
  const struct CMUnitTest plain[] = {
      cmocka_unit_test(test_serves_cpu),
  };
  int failed = cmocka_run_group_tests_name("onednn against ref", pinned,
                                           setup_pinned, test_teardown_all);
  failed += cmocka_run_group_tests_name("onednn registration", plain, NULL,
                                        NULL);
  return failed;
}
