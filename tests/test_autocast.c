/* tests/test_autocast.c — autocast (torc/amp.h): regions and their errors,
 * the op policy op by op (output dtypes in bf16 and f16 regions), the
 * parameters' cast cache and its invalidation, gradients of a small model
 * under autocast against an f32 run, and backward inside a region.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "testutil.h"

static torc_tensor *randn(const int64_t *shape, int ndim, torc_dtype dt) {
  torc_tensor *t = torc_randn(shape, ndim, dt, TORC_CPU, NULL);
  assert_torc(t);
  return t;
}

/* ---- regions ---- */

static void test_regions(void **state) {
  (void)state;
  assert_int_equal(torc_autocast_dtype(), TORC_F32);
  assert_int_equal(torc_autocast_end(), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "no autocast region is open");
  assert_int_equal(torc_autocast_begin(TORC_I32), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "dtype i32; autocast runs in TORC_BF16 or "
                                 "TORC_F16");
  assert_int_equal(torc_autocast_begin(TORC_F64), TORC_ERR_INVALID);
  assert_ok(torc_autocast_begin(TORC_BF16));
  assert_int_equal(torc_autocast_dtype(), TORC_BF16);
  assert_ok(torc_autocast_begin(TORC_F32)); /* enabled=False inside */
  assert_int_equal(torc_autocast_dtype(), TORC_F32);
  assert_ok(torc_autocast_begin(TORC_F16));
  assert_int_equal(torc_autocast_dtype(), TORC_F16);
  assert_ok(torc_autocast_end());
  assert_int_equal(torc_autocast_dtype(), TORC_F32);
  assert_ok(torc_autocast_end());
  assert_int_equal(torc_autocast_dtype(), TORC_BF16);
  assert_ok(torc_autocast_end());
  assert_int_equal(torc_autocast_dtype(), TORC_F32);

  /* 64 levels nest; the 65th is refused and changes nothing. */
  for (int i = 0; i < 64; i++)
    assert_ok(torc_autocast_begin(i % 2 ? TORC_F16 : TORC_BF16));
  assert_int_equal(torc_autocast_begin(TORC_BF16), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "64 regions are open");
  assert_int_equal(torc_autocast_dtype(), TORC_F16);
  for (int i = 0; i < 64; i++)
    assert_ok(torc_autocast_end());
  assert_int_equal(torc_autocast_dtype(), TORC_F32);
}

static void test_policy_names(void **state) {
  (void)state;
  const char *lower[] = {"matmul", "linear", "torc_linear", "conv1d",
                         "conv2d", "conv3d", "conv_transpose2d",
                         "scaled_dot_product_attention"};
  const char *f32[] = {"softmax", "log_softmax", "cross_entropy", "loss",
                       "exp", "log", "pow", "sum", "mean", "layer_norm",
                       "group_norm", "norm", "lstm_cell"};
  const char *follow[] = {"add", "relu", "max_pool2d", "dropout", "cat",
                          "batch_norm", "nope", "torc_"};
  for (size_t i = 0; i < sizeof lower / sizeof *lower; i++)
    assert_int_equal(torc_autocast_policy(lower[i]), TORC_AUTOCAST_LOWER);
  for (size_t i = 0; i < sizeof f32 / sizeof *f32; i++)
    assert_int_equal(torc_autocast_policy(f32[i]), TORC_AUTOCAST_F32);
  for (size_t i = 0; i < sizeof follow / sizeof *follow; i++)
    assert_int_equal(torc_autocast_policy(follow[i]), TORC_AUTOCAST_FOLLOW);
  assert_int_equal(torc_autocast_policy(NULL), TORC_AUTOCAST_FOLLOW);
}

/* ---- the op policy, op by op ---- */

#define DT(expr, want)                                                         \
  do {                                                                         \
    torc_tensor *r_ = (expr);                                                  \
    assert_torc(r_);                                                           \
    if (torc_dtype_of(r_) != (want)) {                                         \
      print_error("%s: %s, expected %s\n", #expr,                              \
                  torc_dtype_name(torc_dtype_of(r_)),                          \
                  torc_dtype_name(want));                                      \
      fail();                                                                  \
    }                                                                          \
  } while (0)

static void check_policy(torc_dtype low) {
  int scope = torc_scope_begin();
  int64_t s2[2] = {4, 6}, sw[2] = {3, 6}, sb[1] = {3}, s6[1] = {6};
  int64_t sx[4] = {2, 3, 6, 6}, sk[4] = {4, 3, 3, 3}, skt[4] = {3, 4, 3, 3};
  int64_t sq[3] = {2, 5, 8}, s1d[3] = {2, 3, 9}, sk1[3] = {4, 3, 3};
  int64_t s3d[5] = {1, 2, 4, 4, 4}, sk3[5] = {3, 2, 2, 2, 2};
  torc_tensor *a = randn(s2, 2, TORC_F32), *w = randn(sw, 2, TORC_F32);
  torc_tensor *b = randn(sb, 1, TORC_F32), *g6 = randn(s6, 1, TORC_F32);
  torc_tensor *x = randn(sx, 4, TORC_F32), *k = randn(sk, 4, TORC_F32);
  torc_tensor *kt = randn(skt, 4, TORC_F32), *q = randn(sq, 3, TORC_F32);
  torc_tensor *x1 = randn(s1d, 3, TORC_F32), *k1 = randn(sk1, 3, TORC_F32);
  torc_tensor *x3 = randn(s3d, 5, TORC_F32), *k3 = randn(sk3, 5, TORC_F32);
  torc_tensor *a64 = torc_to_dtype(a, TORC_F64);
  torc_tensor *w64 = torc_to_dtype(w, TORC_F64);
  torc_tensor *lab = torc_randint(0, 3, (int64_t[]){4}, 1, TORC_I64, TORC_CPU,
                                  NULL);
  torc_tensor *rm = torc_zeros((int64_t[]){3}, 1, TORC_F32, TORC_CPU);
  torc_tensor *rv = torc_ones((int64_t[]){3}, 1, TORC_F32, TORC_CPU);
  torc_tensor *bnw = torc_ones((int64_t[]){3}, 1, TORC_F32, TORC_CPU);
  torc_tensor *lin_t = torc_transpose(w, 0, 1);
  assert_torc(lab);

  assert_ok(torc_autocast_begin(low));
  /* products: in the low dtype, from f32 inputs */
  torc_tensor *y = torc_linear(a, w, b); /* [4, 3] */
  DT(y, low);
  DT(torc_matmul(a, lin_t), low);
  DT(torc_conv2d(x, k, NULL, NULL), low);
  DT(torc_conv_transpose2d(x, kt, NULL, NULL), low);
  DT(torc_conv1d(x1, k1, NULL, NULL), low);
  DT(torc_conv3d(x3, k3, NULL, NULL), low);
  DT(torc_scaled_dot_product_attention(q, q, q, NULL, 0, 1, 0, NULL), low);
  /* an f64 operand is left alone, and promotes */
  DT(torc_matmul(a64, torc_transpose(w64, 0, 1)), TORC_F64);
  /* range and accuracy: f32, from low-precision inputs */
  DT(torc_softmax(y, 1), TORC_F32);
  DT(torc_log_softmax(y, 1), TORC_F32);
  DT(torc_exp(y), TORC_F32);
  DT(torc_log(torc_abs(y)), TORC_F32);
  DT(torc_reciprocal(y), TORC_F32);
  DT(torc_pow_scalar(y, 2), TORC_F32);
  DT(torc_softplus(y, 1, 20), TORC_F32);
  DT(torc_sum(y, NULL, 0, 0), TORC_F32);
  DT(torc_mean(y, NULL, 0, 0), TORC_F32);
  DT(torc_logsumexp(y, (int[]){1}, 1, 0), TORC_F32);
  DT(torc_norm(y, 2, NULL, 0, 0), TORC_F32);
  DT(torc_var(y, NULL, 0, 1, 0), TORC_F32);
  DT(torc_cumsum(y, 0), TORC_F32);
  DT(torc_cross_entropy(y, lab, NULL, NULL), TORC_F32);
  DT(torc_layer_norm(torc_to_dtype(a, low), (int64_t[]){6}, 1, g6, NULL,
                     1e-5),
     TORC_F32);
  torc_tensor *cx = torc_conv2d(x, torc_narrow(k, 0, 0, 3), NULL, NULL);
  DT(cx, low);
  /* batch_norm follows x, with its f32 weight and statistics */
  DT(torc_batch_norm(cx, rm, rv, bnw, NULL, 1, 0.1, 1e-5), low);
  DT(torc_batch_norm(x, rm, rv, bnw, NULL, 1, 0.1, 1e-5), TORC_F32);
  DT(torc_group_norm(cx, 3, bnw, NULL, 1e-5), TORC_F32);
  /* the others follow their inputs */
  DT(torc_relu(y), low);
  DT(torc_add(y, y), low);
  DT(torc_add(y, torc_sum(y, NULL, 0, 0)), low); /* 0-dim f32: no promotion */
  DT(torc_add(y, torc_ones_like(torc_to_dtype(y, TORC_F32))), TORC_F32);
  torc_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}, {1, 1}, 0, 0, 0};
  DT(torc_max_pool2d(cx, &pp), low);
  /* a nested region with TORC_F32 turns it off */
  assert_ok(torc_autocast_begin(TORC_F32));
  DT(torc_linear(a, w, b), TORC_F32);
  DT(torc_exp(torc_to_dtype(a, low)), low);
  assert_ok(torc_autocast_end());
  assert_ok(torc_autocast_end());
  /* and outside: f32 */
  DT(torc_linear(a, w, b), TORC_F32);
  torc_scope_end(scope);
}

static void test_policy_bf16(void **state) {
  (void)state;
  check_policy(TORC_BF16);
}

static void test_policy_f16(void **state) {
  (void)state;
  check_policy(TORC_F16);
}

/* ---- the parameters' casts ---- */

static void test_cast_cache(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t sa[2] = {2, 4}, sw[2] = {3, 4};
  torc_tensor *a = randn(sa, 2, TORC_F32), *w = randn(sw, 2, TORC_F32);
  assert_ok(torc_set_requires_grad(w, 1));
  int64_t live0 = torc_tensor_live_count();
  assert_ok(torc_autocast_begin(TORC_BF16));
  torc_tensor *y1 = torc_linear(a, w, NULL);
  assert_torc(y1);
  int64_t live1 = torc_tensor_live_count();
  torc_tensor *y2 = torc_linear(a, w, NULL);
  assert_torc(y2);
  /* The second use reuses w's cast: it makes one tensor fewer than the
   * first (which made y1, the casts of a and w, and what autograd saved). */
  assert_int_equal(torc_tensor_live_count() - live1, live1 - live0 - 1);
  test_assert_close(y1, y2, 0);
  /* A parameter changed in place is cast again. */
  torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD);
  assert_ok(torc_mul_scalar_(w, 2));
  torc_set_grad_mode(m);
  torc_tensor *y3 = torc_linear(a, w, NULL);
  torc_tensor *y1x2 = torc_mul_scalar(torc_to_dtype(y1, TORC_F32), 2);
  test_assert_close(y3, y1x2, 1e-2);
  /* Both casts carry the gradient to w, in f32. */
  torc_tensor *loss = torc_sum(torc_add(y2, y3), NULL, 0, 0);
  assert_ok(torc_autocast_end());
  assert_ok(torc_backward(loss, NULL, 0));
  const torc_tensor *g = torc_grad_of(w);
  assert_torc(g);
  assert_int_equal(torc_dtype_of(g), TORC_F32);
  /* d/dw sum(a w^T) twice: 2 * column sums of a, per row of w */
  torc_tensor *cs = torc_sum(a, (int[]){0}, 1, 1);
  torc_tensor *want = torc_mul_scalar(torc_expand(cs, sw, 2), 2);
  test_assert_close(g, want, 2e-2);
  (void)live0;
  torc_scope_end(scope);
  /* the region's end dropped the cached cast */
  assert_int_equal(torc_tensor_live_count(), live0 - 2);
}

/* ---- gradients of a small model against f32 ---- */

/* A sequential linear(12, 16) relu linear(16, 5) with seed 7, or (conv)
 * conv2d(1, 4, 3, padding 1, bias) relu maxpool2d(2) flatten
 * linear(64, 5). */
static int conv_model;

static torc_module *small_model(void) {
  torc_manual_seed(7);
  torc_module *seq = torc_sequential_new();
  assert_torc(seq);
  if (conv_model) {
    assert_ok(torc_sequential_append(
        seq, torc_module_build("conv2d", "in_channels=1, out_channels=4, "
                                         "kernel=3, padding=1")));
    assert_ok(torc_sequential_append(
        seq, torc_module_build("batchnorm2d", "num_features=4")));
    assert_ok(torc_sequential_append(seq, torc_module_build("relu", NULL)));
    assert_ok(torc_sequential_append(
        seq, torc_module_build("maxpool2d", "kernel=2")));
    assert_ok(torc_sequential_append(seq, torc_module_build("flatten",
                                                            NULL)));
    assert_ok(torc_sequential_append(
        seq, torc_module_build("linear", "in_features=64, out_features=5")));
    return seq;
  }
  assert_ok(torc_sequential_append(seq, torc_module_build(
                                            "linear", "in_features=12, "
                                                      "out_features=16")));
  assert_ok(torc_sequential_append(seq, torc_module_build("relu", NULL)));
  assert_ok(torc_sequential_append(seq, torc_module_build(
                                            "linear", "in_features=16, "
                                                      "out_features=5")));
  return seq;
}

/* Runs one forward (under autocast `dt` unless TORC_F32; backward
 * inside the region when `inside`) and returns the four gradients in
 * f64 (caller frees), with the loss's dtype in *ldt. */
static double *model_grads(torc_dtype dt, int inside, torc_dtype *ldt,
                           int *count) {
  torc_module *m = small_model();
  int scope = torc_scope_begin();
  torc_manual_seed(11);
  torc_tensor *x = conv_model ? randn((int64_t[]){8, 1, 8, 8}, 4, TORC_F32)
                              : randn((int64_t[]){8, 12}, 2, TORC_F32);
  torc_tensor *lab = torc_randint(0, 5, (int64_t[]){8}, 1, TORC_I64,
                                  TORC_CPU, NULL);
  if (dt != TORC_F32)
    assert_ok(torc_autocast_begin(dt));
  torc_tensor *logits = torc_module_forward(m, x);
  assert_torc(logits);
  assert_int_equal(torc_dtype_of(logits), dt == TORC_F32 ? TORC_F32 : dt);
  torc_tensor *loss = torc_cross_entropy(logits, lab, NULL, NULL);
  assert_torc(loss);
  *ldt = torc_dtype_of(loss);
  if (dt != TORC_F32 && !inside)
    assert_ok(torc_autocast_end());
  assert_ok(torc_backward(loss, NULL, 0));
  if (dt != TORC_F32 && inside)
    assert_ok(torc_autocast_end());
  torc_named_tensor *ps = NULL;
  int np = torc_module_named_parameters(m, &ps);
  assert_int_equal(np, conv_model ? 6 : 4);
  double *all = malloc(sizeof(double) * (16 * 12 + 16 + 5 * 64 + 5));
  int n = 0;
  for (int i = 0; i < np; i++) {
    const torc_tensor *g = torc_grad_of(ps[i].tensor);
    assert_torc(g);
    assert_int_equal(torc_dtype_of(g), TORC_F32); /* gradients arrive f32 */
    double *v = test_values(g);
    memcpy(all + n, v, sizeof(double) * (size_t)torc_numel(g));
    n += (int)torc_numel(g);
    free(v);
  }
  torc_named_tensors_free(ps, np);
  torc_scope_end(scope);
  torc_module_free(m);
  *count = n;
  return all;
}

/* Asserts the n gradients `got` differ from `ref` (an f32 run's), but by
 * at most frac of ref's largest magnitude. */
static void assert_grads_near(const double *ref, const double *got, int n,
                              double frac) {
  double maxabs = 0, maxdiff = 0;
  for (int i = 0; i < n; i++) {
    maxabs = fmax(maxabs, fabs(ref[i]));
    maxdiff = fmax(maxdiff, fabs(ref[i] - got[i]));
  }
  if (!(maxdiff <= frac * maxabs) || !(maxdiff > 0)) {
    print_error("gradients differ from f32 by %g (largest %g, allowed %g)\n",
                maxdiff, maxabs, frac * maxabs);
    fail();
  }
}

static void test_grads_vs_f32(void **state) {
  (void)state;
  torc_dtype ldt;
  int n, n2, n3;
  double *ref = model_grads(TORC_F32, 0, &ldt, &n);
  assert_int_equal(ldt, TORC_F32);
  double *bf = model_grads(TORC_BF16, 0, &ldt, &n2);
  assert_int_equal(ldt, TORC_F32); /* the loss in f32 */
  assert_int_equal(n, n2);
  /* bf16 keeps 8 bits: a few parts in a hundred of the largest gradient */
  assert_grads_near(ref, bf, n, 0.03);
  /* backward inside the region runs as outside it: the same bits */
  double *in = model_grads(TORC_BF16, 1, &ldt, &n3);
  assert_int_equal(n3, n);
  assert_memory_equal(in, bf, sizeof(double) * (size_t)n);
  /* f16 keeps 11 bits */
  double *h = model_grads(TORC_F16, 0, &ldt, &n3);
  assert_grads_near(ref, h, n, 0.005);
  free(ref), free(bf), free(in), free(h);
}

/* The same with a convolution and its bias (the bf16 backward kernels and
 * the bias gradient summed in f32) and a batch norm (bf16 activations,
 * its f32 weight and bias). */
static void test_conv_grads_vs_f32(void **state) {
  (void)state;
  torc_dtype ldt;
  int n, n2;
  conv_model = 1;
  double *ref = model_grads(TORC_F32, 0, &ldt, &n);
  double *bf = model_grads(TORC_BF16, 0, &ldt, &n2);
  conv_model = 0;
  assert_int_equal(n, n2);
  assert_grads_near(ref, bf, n, 0.03);
  free(ref), free(bf);
}

/* Under no-grad a sequential's fused linear+relu would run in f32: under
 * autocast the layers run one by one, in bf16. */
static void test_eval_module(void **state) {
  (void)state;
  torc_module *m = small_model();
  int scope = torc_scope_begin();
  torc_tensor *x = randn((int64_t[]){8, 12}, 2, TORC_F32);
  torc_grad_mode md = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *ref = torc_module_forward(m, x);
  assert_ok(torc_autocast_begin(TORC_BF16));
  torc_tensor *y = torc_module_forward(m, x);
  assert_ok(torc_autocast_end());
  torc_set_grad_mode(md);
  assert_torc(y);
  assert_int_equal(torc_dtype_of(y), TORC_BF16);
  test_assert_close(y, ref, 5e-2);
  torc_scope_end(scope);
  torc_module_free(m);
}

int main(void) {
  test_load_ref_cpu_onednn();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_regions, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test(test_policy_names),
      cmocka_unit_test_setup_teardown(test_policy_bf16, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_policy_f16, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_cast_cache, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_grads_vs_f32, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_conv_grads_vs_f32, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_eval_module, test_live_setup,
                                      test_live_teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  torc_shutdown();
  return rc;
}
