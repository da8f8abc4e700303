/* tests/test_layers_init.c — parameter initialisation (torc/init.h): fans
 * and gains, every fill and init scheme, orthogonal init, their errors,
 * and the built-in layers' PyTorch default init and init schemes.
 */
#include <math.h>

#include "testutil.h"
#include "layers_testutil.h"

/* ---- init.h ---- */

static void test_init_fans_gains(void **state) {
  (void)state;
  int s = torc_scope_begin();
  int64_t in = 0, out = 0;
  torc_tensor *w = torc_zeros(TORC_SHAPE(4, 3, 2, 5), TORC_F32, TORC_CPU);
  assert_ok(torc_init_fans(w, &in, &out));
  assert_int_equal(in, 30);
  assert_int_equal(out, 40);
  assert_ok(torc_init_fans(w, NULL, &out)); /* either may be NULL */
  assert_ok(torc_init_fans(torc_zeros(TORC_SHAPE(7, 9), TORC_F32, TORC_CPU),
                           &in, &out));
  assert_int_equal(in, 9);
  assert_int_equal(out, 7);
  assert_int_equal(torc_init_fans(torc_zeros(TORC_SHAPE(5), TORC_F32,
                                             TORC_CPU), &in, &out),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "fewer than 2 dims");
  assert_contains(torc_last_error(), "[5]");
  assert_int_equal(torc_init_fans(NULL, &in, &out), TORC_ERR_NULL);

  assert_true(torc_init_gain("linear", 0) == 1);
  assert_true(torc_init_gain("conv2d", 0) == 1);
  assert_true(torc_init_gain("conv_transpose2d", 0) == 1);
  assert_true(torc_init_gain("sigmoid", 0) == 1);
  assert_true(fabs(torc_init_gain("tanh", 0) - 5.0 / 3) < 1e-15);
  assert_true(fabs(torc_init_gain("relu", 0) - sqrt(2.0)) < 1e-15);
  assert_true(fabs(torc_init_gain("leaky_relu", 0.2) - sqrt(2 / 1.04)) <
              1e-15);
  assert_true(fabs(torc_init_gain("leaky_relu", sqrt(5.0)) - sqrt(1 / 3.0)) <
              1e-15);
  assert_true(torc_init_gain("selu", 0) == 0.75);
  torc_clear_error();
  assert_true(torc_init_gain("swish", 0) == -1);
  assert_error(TORC_ERR_INVALID, "unknown nonlinearity 'swish'");
  assert_contains(torc_last_error(), "leaky_relu");
  torc_scope_end(s);
}

static void test_init_fills(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_generator *g = torc_generator_new(11);
  torc_tensor *t = torc_empty(TORC_SHAPE(200, 300), TORC_F32, TORC_CPU);
  /* kaiming_uniform, relu, fan_in: bound sqrt(6 / 300) */
  assert_ok(torc_init_kaiming_uniform_(t, 0, "fan_in", "relu", g));
  expect_uniform(t, sqrt(6.0 / 300) * (1 + 1e-6), 0.99);
  /* fan_out */
  assert_ok(torc_init_kaiming_uniform_(t, 0, "fan_out", "relu", g));
  expect_uniform(t, sqrt(6.0 / 200) * (1 + 1e-6), 0.99);
  /* PyTorch's default for weights: a = sqrt(5) gives 1/sqrt(fan_in) */
  assert_ok(torc_init_kaiming_uniform_(t, sqrt(5.0), NULL, NULL, g));
  expect_uniform(t, 1 / sqrt(300.0) * (1 + 1e-6), 0.99);
  /* kaiming_normal: std sqrt(2 / fan_in), mean 0 */
  assert_ok(torc_init_kaiming_normal_(t, 0, "fan_in", "relu", g));
  stats st = stats_of(t);
  assert_true(fabs(st.std / sqrt(2.0 / 300) - 1) < 0.02);
  assert_true(fabs(st.mean) < 0.002);
  /* xavier: std gain sqrt(2 / (fan_in + fan_out)) */
  assert_ok(torc_init_xavier_uniform_(t, 2, g));
  expect_uniform(t, 2 * sqrt(6.0 / 500) * (1 + 1e-6), 0.99);
  assert_ok(torc_init_xavier_normal_(t, 1, g));
  st = stats_of(t);
  assert_true(fabs(st.std / sqrt(2.0 / 500) - 1) < 0.02);
  /* uniform, normal, constants */
  assert_ok(torc_init_uniform_(t, -3, 5, g));
  st = stats_of(t);
  assert_true(st.min >= -3 && st.max < 5 && st.min < -2.99 && st.max > 4.99);
  assert_true(fabs(st.mean - 1) < 0.02);
  assert_ok(torc_init_normal_(t, 2, 0.5, g));
  st = stats_of(t);
  assert_true(fabs(st.mean - 2) < 0.01 && fabs(st.std - 0.5) < 0.01);
  assert_ok(torc_init_constant_(t, 0.25));
  st = stats_of(t);
  assert_true(st.min == 0.25 && st.max == 0.25);
  assert_ok(torc_init_ones_(t));
  assert_true(stats_of(t).min == 1);
  assert_ok(torc_init_zeros_(t));
  assert_true(stats_of(t).max == 0);
  /* a strided view is filled in place, the rest untouched */
  torc_tensor *col = torc_select(t, 1, 3);
  assert_ok(torc_init_uniform_(col, 1, 2, g));
  st = stats_of(t);
  assert_true(st.min == 0 && st.max > 1);
  assert_true(stats_of(col).min >= 1);
  /* same seed, same numbers, on every device */
  torc_tensor *a = torc_empty(TORC_SHAPE(8, 16), TORC_F64, TORC_CPU);
  torc_tensor *b = torc_empty(TORC_SHAPE(8, 16), TORC_F64, sim0());
  torc_generator_set_state(g, 5, 0);
  assert_ok(torc_init_kaiming_normal_(a, 0, "fan_in", "relu", g));
  torc_generator_set_state(g, 5, 0);
  assert_ok(torc_init_kaiming_normal_(b, 0, "fan_in", "relu", g));
  double *va = test_values(a), *vb = test_values(b);
  for (int i = 0; i < 128; i++)
    assert_true(va[i] == vb[i]);
  free(va);
  free(vb);
  /* a parameter that requires grad is filled without autograd */
  assert_ok(torc_set_requires_grad(a, 1));
  assert_ok(torc_init_xavier_uniform_(a, 1, g));
  assert_true(torc_is_leaf(a) && torc_requires_grad(a));
  torc_generator_free(g);
  torc_scope_end(s);
}

static void test_init_errors(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *t = torc_empty(TORC_SHAPE(4, 5), TORC_F32, TORC_CPU);
  torc_tensor *v1 = torc_empty(TORC_SHAPE(5), TORC_F32, TORC_CPU);
  torc_tensor *it = torc_zeros(TORC_SHAPE(4, 5), TORC_I64, TORC_CPU);
  assert_int_equal(torc_init_kaiming_uniform_(t, 0, "fan_avg", "relu", NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "mode 'fan_avg' is not supported; use "
                                 "fan_in or fan_out");
  assert_int_equal(torc_init_kaiming_normal_(t, 0, "fan_in", "swish", NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "unknown nonlinearity 'swish'");
  assert_int_equal(torc_init_kaiming_uniform_(v1, 0, NULL, NULL, NULL),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "fewer than 2 dims");
  assert_int_equal(torc_init_xavier_normal_(v1, 1, NULL), TORC_ERR_SHAPE);
  assert_int_equal(torc_init_orthogonal_(v1, 1, NULL), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "2 or more dims");
  assert_int_equal(torc_init_normal_(t, 0, -1, NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "std is -1; it must be >= 0");
  assert_int_equal(torc_init_uniform_(t, 1, 0, NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "low must not exceed high");
  assert_int_equal(torc_init_uniform_(it, 0, 1, NULL), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "the tensor is i64");
  assert_int_equal(torc_init_ones_(it), TORC_ERR_DTYPE);
  assert_int_equal(torc_init_orthogonal_(it, 1, NULL), TORC_ERR_DTYPE);
  torc_clear_error();
  assert_int_equal(torc_init_zeros_(NULL), TORC_ERR_NULL);
  assert_int_equal(torc_init_normal_(NULL, 0, 1, NULL), TORC_ERR_NULL);
  /* empty tensors are a no-op */
  assert_ok(torc_init_kaiming_uniform_(
      torc_empty(TORC_SHAPE(0, 3), TORC_F32, TORC_CPU), 0, NULL, NULL, NULL));
  assert_ok(torc_init_orthogonal_(
      torc_empty(TORC_SHAPE(0, 3), TORC_F32, TORC_CPU), 1, NULL));
  torc_scope_end(s);
}

static void test_init_orthogonal(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_generator *g = torc_generator_new(3);
  torc_tensor *wide = torc_empty(TORC_SHAPE(6, 10), TORC_F32, TORC_CPU);
  assert_ok(torc_init_orthogonal_(wide, 1, g));
  expect_orthogonal(wide, 6, 10, 1); /* orthonormal rows */
  torc_tensor *tall = torc_empty(TORC_SHAPE(10, 6), TORC_F64, TORC_CPU);
  assert_ok(torc_init_orthogonal_(tall, 2, g));
  expect_orthogonal(tall, 10, 6, 2); /* orthogonal columns, times gain */
  torc_tensor *conv = torc_empty(TORC_SHAPE(4, 2, 3, 3), TORC_F64, sim0());
  assert_ok(torc_init_orthogonal_(conv, 1, g));
  expect_orthogonal(conv, 4, 18, 1); /* viewed as [4, 18], on sim */
  torc_tensor *sq = torc_empty(TORC_SHAPE(5, 5), TORC_F64, TORC_CPU);
  assert_ok(torc_init_orthogonal_(sq, 1, g));
  expect_orthogonal(sq, 5, 5, 1);

  /* The QR part: Q^T A must be R, upper triangular with a positive
   * diagonal (torch's sign fix), for A the normal matrix drawn first. */
  torc_generator_set_state(g, 9, 0);
  torc_tensor *a = torc_randn(TORC_SHAPE(7, 4), TORC_F64, TORC_CPU, g);
  torc_generator_set_state(g, 9, 0);
  assert_ok(torc_init_orthogonal_(tall = torc_empty(TORC_SHAPE(7, 4),
                                                    TORC_F64, TORC_CPU),
                                  1, g));
  torc_tensor *r = torc_matmul(torc_transpose(tall, 0, 1), a);
  double *rv = test_values(r);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      if (i > j)
        assert_true(fabs(rv[i * 4 + j]) < 1e-12);
      if (i == j)
        assert_true(rv[i * 4 + j] > 0);
    }
  free(rv);
  torc_generator_free(g);
  torc_scope_end(s);
}

/* ---- default init ---- */

static void test_default_init(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_manual_seed(1);
  torc_module *m = torc_linear_new(100, 50, 1);
  /* U(-1/sqrt(100), 1/sqrt(100)) for weight and bias */
  expect_uniform(torc_module_parameter(m, "weight"), 0.1 * (1 + 1e-6), 0.98);
  expect_uniform(torc_module_parameter(m, "bias"), 0.1 * (1 + 1e-6), 0.8);
  double *w1 = test_values(torc_module_parameter(m, "weight"));
  torc_module_free(m);
  /* the same seed gives the same values; another seed others */
  torc_manual_seed(1);
  m = torc_linear_new(100, 50, 1);
  double *w2 = test_values(torc_module_parameter(m, "weight"));
  assert_memory_equal(w1, w2, sizeof(double) * 5000);
  free(w2);
  torc_module_free(m);
  torc_manual_seed(2);
  m = torc_linear_new(100, 50, 1);
  w2 = test_values(torc_module_parameter(m, "weight"));
  assert_true(memcmp(w1, w2, sizeof(double) * 5000) != 0);
  free(w1);
  free(w2);
  torc_module_free(m);

  /* conv: fan_in = in/groups * kh * kw = 2 * 9 */
  torc_conv2d_params g2 = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, 2};
  m = torc_conv2d_new(4, 64, 3, 3, &g2, 1);
  expect_uniform(torc_module_parameter(m, "weight"), 1 / sqrt(18.0) + 1e-7,
                 0.98);
  expect_uniform(torc_module_parameter(m, "bias"), 1 / sqrt(18.0) + 1e-7,
                 0.7);
  torc_module_free(m);
  /* conv_transpose: weight [in, out/groups, kh, kw], fan_in =
   * weight.size(1) kh kw = 3 * 9 as PyTorch computes it */
  m = torc_conv_transpose2d_new(40, 6, 3, 3, &g2, 1);
  expect_shape(torc_module_parameter(m, "weight"), TORC_SHAPE(40, 3, 3, 3));
  expect_uniform(torc_module_parameter(m, "weight"), 1 / sqrt(27.0) + 1e-7,
                 0.98);
  torc_module_free(m);
  /* half-precision parameters are initialised in their dtype */
  m = torc_linear_new(64, 32, 1);
  assert_ok(torc_module_to_dtype(m, TORC_F16));
  assert_ok(torc_module_init(m, "default", NULL));
  assert_int_equal(torc_dtype_of(torc_module_parameter(m, "weight")),
                   TORC_F16);
  expect_uniform(torc_module_parameter(m, "weight"), 0.125 * (1 + 1e-3),
                 0.9);
  torc_module_free(m);
  /* embedding N(0, 1); norms ones and zeros */
  m = torc_embedding_new(1000, 20);
  stats st = stats_of(torc_module_parameter(m, "weight"));
  assert_true(fabs(st.mean) < 0.03 && fabs(st.std - 1) < 0.03);
  torc_module_free(m);
  m = torc_batchnorm2d_new(3, 1e-5, 0.1);
  assert_true(stats_of(torc_module_parameter(m, "weight")).min == 1);
  assert_true(stats_of(torc_module_parameter(m, "bias")).max == 0);
  assert_true(stats_of(torc_module_buffer(m, "running_mean")).max == 0);
  assert_true(stats_of(torc_module_buffer(m, "running_var")).min == 1);
  torc_module_free(m);
  m = torc_groupnorm_new(2, 4, 1e-5, 0);
  assert_null(torc_module_parameter(m, "weight")); /* affine=False */
  torc_module_free(m);
  /* parameters require grad, buffers do not */
  m = torc_batchnorm1d_new(3, 1e-5, 0.1);
  assert_true(torc_requires_grad(torc_module_parameter(m, "weight")));
  assert_false(torc_requires_grad(torc_module_buffer(m, "running_mean")));
  torc_module_free(m);
  torc_scope_end(s);
}

static void test_module_init_schemes(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_linear_new(200, 150, 1)));
  assert_ok(torc_sequential_append(seq, torc_batchnorm1d_new(150, 1e-5,
                                                             0.1)));
  assert_ok(torc_sequential_append(seq, torc_module_build("relu", NULL)));
  torc_tensor *w = torc_module_parameter(torc_module_child_at(seq, 0),
                                         "weight");
  torc_tensor *b = torc_module_parameter(torc_module_child_at(seq, 0), "bias");
  torc_module *bn = torc_module_child_at(seq, 1);
  torc_generator *g = torc_generator_new(4);

  assert_ok(torc_module_init(seq, "kaiming_normal", g));
  stats st = stats_of(w);
  assert_true(fabs(st.std / sqrt(2.0 / 200) - 1) < 0.02);
  assert_true(stats_of(b).min == 0 && stats_of(b).max == 0);
  assert_ok(torc_module_init(seq, "kaiming_uniform", g));
  expect_uniform(w, sqrt(6.0 / 200) + 1e-7, 0.99);
  assert_ok(torc_module_init(seq, "xavier_uniform", g));
  expect_uniform(w, sqrt(6.0 / 350) + 1e-7, 0.99);
  assert_ok(torc_module_init(seq, "xavier_normal", g));
  assert_true(fabs(stats_of(w).std / sqrt(2.0 / 350) - 1) < 0.02);
  assert_ok(torc_module_init(seq, "orthogonal", g));
  expect_orthogonal(w, 150, 200, 1);
  /* default: PyTorch's init again, and batch norm's statistics reset */
  set_t(bn, "running_mean", torc_full(TORC_SHAPE(150), 3, TORC_F32,
                                      TORC_CPU));
  set_t(bn, "weight", torc_full(TORC_SHAPE(150), 3, TORC_F32, TORC_CPU));
  assert_ok(torc_module_init(seq, "default", g));
  expect_uniform(w, 1 / sqrt(200.0) + 1e-7, 0.99);
  expect_uniform(b, 1 / sqrt(200.0) + 1e-7, 0.9);
  assert_true(stats_of(torc_module_buffer(bn, "running_mean")).max == 0);
  assert_true(stats_of(torc_module_parameter(bn, "weight")).max == 1);
  /* one generator seed, one result */
  torc_generator_set_state(g, 8, 0);
  assert_ok(torc_module_init(seq, "xavier_uniform", g));
  double *v1 = test_values(w);
  torc_generator_set_state(g, 8, 0);
  assert_ok(torc_module_init(seq, "xavier_uniform", g));
  double *v2 = test_values(w);
  assert_memory_equal(v1, v2, sizeof(double) * 30000);
  free(v1);
  free(v2);
  /* unknown scheme */
  assert_int_equal(torc_module_init(seq, "he", g), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "unknown init scheme 'he'");
  assert_contains(torc_last_error(), "kaiming_uniform");
  assert_int_equal(torc_module_init(NULL, "default", g), TORC_ERR_NULL);
  torc_module_free(seq);

  /* lazy parameters take the scheme when they are created */
  torc_module *lz = torc_linear_new(0, 30, 1);
  assert_ok(torc_module_init(lz, "kaiming_normal", NULL));
  assert_null(torc_module_parameter(lz, "weight"));
  assert_torc(torc_module_forward(lz, torc_zeros(TORC_SHAPE(2, 2000),
                                                 TORC_F32, TORC_CPU)));
  st = stats_of(torc_module_parameter(lz, "weight"));
  assert_true(fabs(st.std / sqrt(2.0 / 2000) - 1) < 0.03);
  assert_true(stats_of(torc_module_parameter(lz, "bias")).max == 0);
  torc_module_free(lz);
  torc_generator_free(g);
  torc_scope_end(s);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, test_live_setup, \
                                             test_live_teardown)
  const struct CMUnitTest tests[] = {
      T(test_init_fans_gains),
      T(test_init_fills),
      T(test_init_errors),
      T(test_init_orthogonal),
      T(test_default_init),
      T(test_module_init_schemes),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
