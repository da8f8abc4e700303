/* tests/test_cpu_ops.c — the cpu (OpenBLAS) plugin beyond the conformance
 * suite's fixed shapes: conv2d and conv_transpose2d with groups, stride,
 * padding and dilation, and matmul with transposed, strided, broadcast and
 * batched operands, each computed twice on the cpu — the dispatcher pinned
 * to ref's kernels, then to the plugin's — and compared (forward and
 * gradients); linear_act in a fused plan against eager and ref; and that in
 * normal use the plugin serves cpu's matmul and conv2d above ref, and bf16
 * only for its elementwise, reduction and dropout kernels.
 */
#include <math.h>

#include "testutil.h"

static int setup_pinned(void **state) {
  (void)state;
  return test_apply_ini("[torc]\nthreads = 2\n"
                        "[plugin.ref]\nmodule = ref\n"
                        "[plugin.cpu]\nmodule = cpu\n",
                        "cpu.ini");
}

/* Runs what follows with ref's kernels (REF) or the plugin's (CPU). */
#define REF torc__dispatch_pin("ref")
#define CPU torc__dispatch_pin("cpu")
#define UNPIN torc__dispatch_pin(NULL)

/* Two equal leaves of the given shape, both requiring gradients
 * (scope-owned): c for ref's run, d for the plugin's. */
static void leaf_pair(const int64_t *shape, int nd, torc_dtype dt,
                      torc_tensor **c, torc_tensor **d) {
  *c = torc_randn(shape, nd, dt, TORC_CPU, NULL);
  assert_torc(*c);
  *d = torc_clone(*c);
  assert_torc(*d);
  assert_ok(torc_set_requires_grad(*c, 1));
  assert_ok(torc_set_requires_grad(*d, 1));
}

/* Backward of sum(y * r) for a fixed random r, ref's run then the
 * plugin's. */
static void backward_pair(torc_tensor *yc, torc_tensor *yd) {
  torc_tensor *r = torc_randn(torc_shape(yc), torc_ndim(yc), torc_dtype_of(yc),
                              TORC_CPU, NULL);
  assert_torc(r);
  REF;
  assert_ok(torc_backward(torc_sum(torc_mul(yc, r), NULL, 0, 0), NULL, 0));
  CPU;
  assert_ok(torc_backward(torc_sum(torc_mul(yd, r), NULL, 0, 0), NULL, 0));
  UNPIN;
}

static double tol_of(torc_dtype dt) { return dt == TORC_F64 ? 1e-10 : 2e-5; }

typedef struct conv_case {
  int64_t n, c, h, w, o, kh, kw;
  int64_t stride[2], pad[2], dil[2], groups;
  int bias;
} conv_case;

static const conv_case conv_cases[] = {
    {2, 4, 7, 6, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1},
    {2, 4, 9, 8, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, 1},
    {1, 6, 10, 11, 6, 3, 3, {2, 3}, {2, 1}, {2, 1}, 3, 0},
    {3, 3, 5, 5, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1}, /* pointwise */
    {2, 4, 6, 6, 4, 1, 1, {2, 2}, {0, 0}, {1, 1}, 2, 0}, /* 1x1, strided */
    {1, 2, 4, 4, 2, 5, 5, {1, 1}, {2, 2}, {1, 1}, 1, 1},
    {2, 8, 5, 5, 8, 3, 3, {1, 1}, {1, 1}, {1, 1}, 8, 1}, /* depthwise */
    {1, 2, 3, 3, 2, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, 0}, /* 1x1 output */
    {2, 3, 12, 12, 5, 3, 3, {3, 2}, {0, 2}, {3, 2}, 1, 1},
};

static void conv_run(const conv_case *k, torc_dtype dt, int transpose) {
  int scope = torc_scope_begin();
  int64_t xs[4] = {k->n, k->c, k->h, k->w};
  /* conv_transpose2d's weight is [C_in, C_out/groups, kH, kW]. */
  int64_t ws[4] = {transpose ? k->c : k->o,
                   transpose ? k->o / k->groups : k->c / k->groups, k->kh,
                   k->kw};
  int64_t bs[1] = {k->o};
  torc_tensor *xc, *xd, *wc, *wd, *bc = NULL, *bd = NULL;
  leaf_pair(xs, 4, dt, &xc, &xd);
  leaf_pair(ws, 4, dt, &wc, &wd);
  if (k->bias)
    leaf_pair(bs, 1, dt, &bc, &bd);
  torc_conv2d_params p = {{k->stride[0], k->stride[1]},
                          {k->pad[0], k->pad[1]},
                          {k->dil[0], k->dil[1]},
                          {0, 0},
                          k->groups};
  REF;
  torc_tensor *yc = transpose ? torc_conv_transpose2d(xc, wc, bc, &p)
                              : torc_conv2d(xc, wc, bc, &p);
  CPU;
  torc_tensor *yd = transpose ? torc_conv_transpose2d(xd, wd, bd, &p)
                              : torc_conv2d(xd, wd, bd, &p);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  double tol = tol_of(dt);
  test_assert_close(yd, yc, tol);
  backward_pair(yc, yd);
  test_assert_close(torc_grad_of(xd), torc_grad_of(xc), tol);
  test_assert_close(torc_grad_of(wd), torc_grad_of(wc), tol);
  if (k->bias)
    test_assert_close(torc_grad_of(bd), torc_grad_of(bc), tol);
  torc_scope_end(scope);
}

static void test_conv2d_geometry(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
    conv_run(&conv_cases[i], TORC_F32, 0);
    conv_run(&conv_cases[i], TORC_F64, 0);
  }
}

static void test_conv_transpose2d_geometry(void **state) {
  (void)state;
  /* The cases whose channels also fit the transposed weight. */
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
    if (conv_cases[i].o % conv_cases[i].groups)
      continue;
    conv_run(&conv_cases[i], TORC_F32, 1);
    conv_run(&conv_cases[i], TORC_F64, 1);
  }
}

/* A matmul operand: a leaf of shape base[] and the view the op gets. */
enum { VIEW_NONE, VIEW_T, VIEW_STEP2, VIEW_EXPAND };

typedef struct mm_operand {
  int nd;
  int64_t base[4];
  int view;
  int64_t expand_rows; /* VIEW_EXPAND: rows of the [1, K] base */
} mm_operand;

static torc_tensor *mm_view(torc_tensor *t, const mm_operand *o) {
  int nd = o->nd;
  switch (o->view) {
  case VIEW_T:
    return torc_transpose(t, nd - 2, nd - 1);
  case VIEW_STEP2:
    return torc_slice(t, nd - 1, 0, TORC_END, 2);
  case VIEW_EXPAND: {
    int64_t s[4];
    memcpy(s, o->base, sizeof s);
    s[nd - 2] = o->expand_rows;
    return torc_expand(t, s, nd);
  }
  default:
    return t;
  }
}

static const mm_operand mm_cases[][2] = {
    {{2, {64, 33}, VIEW_NONE, 0}, {2, {33, 17}, VIEW_NONE, 0}},
    {{2, {33, 64}, VIEW_T, 0}, {2, {17, 33}, VIEW_T, 0}},
    {{2, {64, 33}, VIEW_NONE, 0}, {2, {17, 33}, VIEW_T, 0}},
    {{2, {5, 14}, VIEW_STEP2, 0}, {2, {7, 8}, VIEW_STEP2, 0}},
    {{2, {1, 7}, VIEW_EXPAND, 5}, {2, {7, 4}, VIEW_NONE, 0}},
    {{4, {2, 3, 5, 7}, VIEW_NONE, 0}, {2, {7, 4}, VIEW_NONE, 0}},
    {{4, {2, 3, 7, 5}, VIEW_T, 0}, {2, {4, 7}, VIEW_T, 0}},
    {{4, {3, 1, 5, 7}, VIEW_NONE, 0}, {3, {2, 7, 4}, VIEW_NONE, 0}},
    {{3, {2, 5, 7}, VIEW_NONE, 0}, {3, {2, 7, 4}, VIEW_NONE, 0}},
    {{1, {7}, VIEW_NONE, 0}, {2, {7, 4}, VIEW_NONE, 0}},
    {{2, {5, 7}, VIEW_NONE, 0}, {1, {7}, VIEW_NONE, 0}},
    {{2, {5, 1}, VIEW_NONE, 0}, {2, {1, 6}, VIEW_NONE, 0}},
};

/* Set when some f32 product differs in its last bits between the two runs:
 * proof that the plugin's kernels ran, not ref's twice. */
static int mm_rounding_differs;

static void mm_run(const mm_operand *ops, torc_dtype dt) {
  int scope = torc_scope_begin();
  torc_tensor *c[2], *d[2], *vc[2], *vd[2];
  for (int k = 0; k < 2; k++) {
    leaf_pair(ops[k].base, ops[k].nd, dt, &c[k], &d[k]);
    vc[k] = mm_view(c[k], &ops[k]);
    vd[k] = mm_view(d[k], &ops[k]);
  }
  REF;
  torc_tensor *yc = torc_matmul(vc[0], vc[1]);
  CPU;
  torc_tensor *yd = torc_matmul(vd[0], vd[1]);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  double tol = tol_of(dt);
  test_assert_close(yd, yc, tol);
  if (dt == TORC_F32) { /* the pin worked: GEMM rounds unlike ref's loops */
    double *a = test_values(yd), *b = test_values(yc);
    for (int64_t i = 0; i < torc_numel(yc); i++)
      mm_rounding_differs |= a[i] != b[i];
    free(a);
    free(b);
  }
  backward_pair(yc, yd);
  for (int k = 0; k < 2; k++)
    test_assert_close(torc_grad_of(d[k]), torc_grad_of(c[k]), tol);
  torc_scope_end(scope);
}

static void test_matmul_layouts(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof mm_cases / sizeof mm_cases[0]; i++) {
    mm_run(mm_cases[i], TORC_F32);
    mm_run(mm_cases[i], TORC_F64);
  }
  assert_true(mm_rounding_differs);
}

static void test_linear_3d(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t xs[3] = {4, 6, 9}, ws[2] = {5, 9}, bs[1] = {5};
  torc_tensor *xc, *xd, *wc, *wd, *bc, *bd;
  leaf_pair(xs, 3, TORC_F32, &xc, &xd);
  leaf_pair(ws, 2, TORC_F32, &wc, &wd);
  leaf_pair(bs, 1, TORC_F32, &bc, &bd);
  REF;
  torc_tensor *yc = torc_linear(xc, wc, bc);
  CPU;
  torc_tensor *yd = torc_linear(xd, wd, bd);
  UNPIN;
  test_assert_close(yd, yc, 2e-5);
  backward_pair(yc, yd);
  test_assert_close(torc_grad_of(xd), torc_grad_of(xc), 2e-5);
  test_assert_close(torc_grad_of(wd), torc_grad_of(wc), 2e-5);
  test_assert_close(torc_grad_of(bd), torc_grad_of(bc), 2e-5);
  torc_scope_end(scope);
}

/* linear_act through a fused plan (an MLP: linear + relu, linear), f32
 * and f64, a NaN and an infinity in the input: on the plugin's kernels
 * the fused plan gives the eager forward's bits (the same GEMM, then the
 * add's and relu's roundings); on ref's, the same values to a GEMM's
 * tolerance; NaN where eager has it. */
static void test_linear_act_plan(void **state) {
  (void)state;
  torc_dtype dts[2] = {TORC_F32, TORC_F64};
  for (int d = 0; d < 2; d++) {
    torc_module *m = torc_sequential_new();
    assert_ok(torc_sequential_append(m, torc_linear_new(24, 40, 1)));
    assert_ok(torc_sequential_append(m, torc_module_build("relu", "")));
    assert_ok(torc_sequential_append(m, torc_linear_new(40, 7, 1)));
    assert_ok(torc_module_to_dtype(m, dts[d]));
    torc_module_train(m, 0);
    torc_grad_mode gm = torc_set_grad_mode(TORC_INFERENCE);
    int scope = torc_scope_begin();
    int64_t xs[2] = {33, 24};
    torc_tensor *x = torc_randn(xs, 2, dts[d], TORC_CPU, NULL);
    assert_torc(x);
    torc_tensor *xn = torc_to_dtype(x, TORC_F64);
    double *xv = torc_data(xn);
    xv[5] = NAN, xv[24 * 3 + 1] = INFINITY;
    x = torc_to_dtype(xn, dts[d]);
    torc_tensor *y[2] = {NULL, NULL}, *want = NULL;
    for (int side = 0; side < 2; side++) {
      torc__dispatch_pin(side ? "ref" : "cpu");
      if (side == 0)
        want = torc_module_forward(m, x);
      torc_graph *g = NULL;
      torc_plan *p = NULL;
      assert_ok(torc_trace(m, (const torc_tensor *const *)&x, 1, &g));
      assert_ok(torc_plan_new(g, TORC_PLAN_FUSE, &p));
      assert_int_equal(torc_plan_n_fused(p), 2);
      assert_int_equal(torc_plan_n_nodes(p), 2);
      assert_ok(torc_plan_run(p, (const torc_tensor *const *)&x, 1, &y[side]));
      torc_plan_free(p);
      torc_graph_free(g);
    }
    UNPIN;
    assert_torc(want);
    size_t es = torc_dtype_size(dts[d]);
    assert_memory_equal(torc_data(y[0]), torc_data(want),
                        (size_t)torc_numel(want) * es);
    double *a = test_values(y[1]), *b = test_values(want);
    int n_nan = 0;
    for (int64_t i = 0; i < torc_numel(want); i++) {
      assert_int_equal(isnan(a[i]), isnan(b[i]));
      n_nan += isnan(b[i]) != 0;
      if (!isnan(b[i]) && !isinf(b[i]))
        assert_true(fabs(a[i] - b[i]) <= 1e-4 * (1 + fabs(b[i])));
    }
    assert_true(n_nan > 0);
    free(a), free(b);
    torc_release(y[0]), torc_release(y[1]);
    torc_scope_end(scope);
    torc_set_grad_mode(gm);
    torc_module_free(m);
  }
}

/* The ops the plugin serves for bf16 (f32 arithmetic inside): the
 * elementwise ones, fill_, where, the reductions, dropout, batch norm
 * (bnorm.c) and the max pool (maxpool.c). */
static int bf16_op(const char *op) {
  static const char *const ops[] = {
      "fill_", "neg", "abs", "sign", "square", "relu", "exp", "log", "sqrt",
      "tanh", "sigmoid", "reciprocal", "rsqrt", "silu", "leaky_relu", "gelu",
      "clamp", "add", "sub", "mul", "div", "maximum", "relu_backward",
      "minimum", "eq", "ne", "lt", "le", "gt", "ge", "where", "sum", "mean",
      "amax", "amin", "dropout", "batch_norm", "batch_norm_backward",
      "max_pool2d", "max_pool2d_backward"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(op, ops[i]) == 0)
      return 1;
  return 0;
}

/* In normal use the plugin's kernels serve cpu above ref's, for f32/f64,
 * and for bf16 the ops of bf16_op (ref keeps the other dtypes, but for
 * copy). */
static void test_serves_cpu(void **state) {
  (void)state;
  test_load_plugin("ref");
  test_load_plugin("cpu");
  int found = 0, found_bf16 = 0;
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.device_type, "cpu") != 0 || !k.active)
      continue;
    int fast = strcmp(k.op, "matmul") == 0 || strcmp(k.op, "conv2d") == 0 ||
               strcmp(k.op, "linear_act") == 0 ||
               strcmp(k.op, "conv2d_backward_input") == 0 ||
               strcmp(k.op, "conv2d_backward_weight") == 0 ||
               strcmp(k.op, "conv_transpose2d") == 0;
    int ours = strcmp(k.provider, "cpu") == 0;
    int floating = k.dtype == TORC_F32 || k.dtype == TORC_F64;
    if (fast && floating) {
      assert_true(ours);
      found++;
    } else if (k.dtype == TORC_BF16 && bf16_op(k.op)) {
      assert_true(ours);
      found_bf16++;
    } else if (!floating && strcmp(k.op, "copy") != 0) {
      /* Its fused kernels are f32/f64 too; only copy (casts) serves
       * every dtype. */
      assert_false(ours);
    }
  }
  assert_int_equal(found, 12);
  assert_int_equal(found_bf16, 40);
  torc_shutdown();
}

int main(void) {
  if (!test_plugin_built("cpu", "libopenblas-dev"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest pinned[] = {
      cmocka_unit_test_setup_teardown(test_conv2d_geometry, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_conv_transpose2d_geometry,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_matmul_layouts, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_linear_act_plan, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_linear_3d, test_live_setup,
                                      test_live_teardown),
  };
  const struct CMUnitTest plain[] = {
      cmocka_unit_test(test_serves_cpu),
  };
  int failed = cmocka_run_group_tests_name("cpu against ref", pinned,
                                           setup_pinned, test_teardown_all);
  failed +=
      cmocka_run_group_tests_name("cpu plugin", plain, NULL, test_teardown_all);
  return failed;
}
