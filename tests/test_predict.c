/* tests/test_predict.c — torc_module_predict (torc/graph.h): a CNN with
 * batch norms and an MLP give the eval-mode eager forward (within 1e-5:
 * folded batch norms), no autograd, the module's modes kept; later calls
 * of a shape allocate only their result; two shapes kept, a third
 * replaces the older; the plans follow an optimizer-style in-place step, a
 * loaded state dict and a new child; a forward that reads a value to the
 * host runs eagerly, both branches right, with one warning; the argument
 * errors. */
#include <math.h>

#include "testutil.h"
#include "torc/testing.h"

static void add(torc_module *m, torc_module *c) {
  assert_non_null(c);
  assert_int_equal(torc_sequential_append(m, c), 0);
}

static torc_module *cnn_new(void) {
  torc_module *m = torc_sequential_new();
  add(m, torc_module_build("conv2d",
                           "in_channels=1 out_channels=16 kernel=3 padding=1"));
  add(m, torc_module_build("batchnorm2d", "num_features=16"));
  add(m, torc_module_build("relu", ""));
  add(m, torc_module_build("maxpool2d", "kernel=2"));
  add(m, torc_flatten_new(1, -1));
  add(m, torc_linear_new(16 * 4 * 4, 10, 1));
  return m;
}

static torc_module *mlp_new(void) {
  torc_module *m = torc_sequential_new();
  add(m, torc_linear_new(12, 24, 1));
  add(m, torc_module_build("relu", ""));
  add(m, torc_module_build("dropout", "p=0.5"));
  add(m, torc_linear_new(24, 3, 1));
  return m;
}

/* A few training forwards (batch norm statistics), then eval mode off:
 * the module is left in training mode, as a training loop leaves it. */
static void warm(torc_module *m, const int64_t *shape, int ndim) {
  torc_module_train(m, 1);
  for (int i = 0; i < 3; i++) {
    int sc = torc_scope_begin();
    torc_tensor *x = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
    assert_non_null(torc_module_forward(m, x));
    torc_scope_end(sc);
  }
}

/* m's forward in eval mode without autograd, m's mode put back. */
static torc_tensor *eager(torc_module *m, const torc_tensor *x) {
  int training = torc_module_is_training(m);
  torc_module_train(m, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *y = torc_module_forward(m, x);
  torc_set_grad_mode(gm);
  torc_module_train(m, training);
  assert_non_null(y);
  return y;
}

/* Within rel of want's largest magnitude. */
static void assert_near(const torc_tensor *got, const torc_tensor *want,
                        double rel) {
  assert_int_equal(torc_ndim(got), torc_ndim(want));
  assert_memory_equal(torc_shape(got), torc_shape(want),
                      (size_t)torc_ndim(want) * sizeof(int64_t));
  const float *g = torc_data(got), *w = torc_data(want);
  double top = 0, worst = 0;
  for (int64_t i = 0; i < torc_numel(want); i++)
    top = fmax(top, fabs(w[i]));
  for (int64_t i = 0; i < torc_numel(want); i++)
    worst = fmax(worst, fabs(g[i] - w[i]));
  if (!(worst <= rel * top)) {
    print_error("differs by %g, more than %g of %g\n", worst, rel, top);
    fail();
  }
}

/* predict(m, x) against eager, in a scope of its own. */
static void check(torc_module *m, const int64_t *shape, int ndim) {
  int sc = torc_scope_begin();
  torc_tensor *x = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
  torc_tensor *y = torc_module_predict(m, x);
  assert_non_null(y);
  assert_false(torc_requires_grad(y));
  assert_near(y, eager(m, x), 1e-5);
  torc_scope_end(sc);
}

static void test_matches_eager(void **state) {
  (void)state;
  torc_module *cnn = cnn_new(), *mlp = mlp_new();
  warm(cnn, TORC_SHAPE(8, 1, 8, 8));
  warm(mlp, TORC_SHAPE(8, 12));
  for (int i = 0; i < 3; i++) {
    check(cnn, TORC_SHAPE(8, 1, 8, 8));
    check(mlp, TORC_SHAPE(5, 12));
  }
  /* batch 1: traced once, no check at one row less */
  check(cnn, TORC_SHAPE(1, 1, 8, 8));
  /* the modules' modes are as the caller left them */
  assert_true(torc_module_is_training(cnn));
  assert_true(torc_module_is_training(torc_module_child(cnn, "1")));
  assert_true(torc_module_is_training(mlp));
  torc_module_free(cnn);
  torc_module_free(mlp);
}

/* What allocating a new tensor like t counts (the allocator's counter). */
static int64_t result_allocs(const torc_tensor *t) {
  int64_t before = torc_test_alloc_count();
  torc_tensor *e = torc_empty(torc_shape(t), torc_ndim(t), torc_dtype_of(t),
                              TORC_CPU);
  int64_t n = torc_test_alloc_count() - before;
  torc_release(e);
  return n;
}

/* After the first call of a shape, a call allocates its result only. */
static void test_steady_allocations(void **state) {
  (void)state;
  torc_module *m = cnn_new();
  warm(m, TORC_SHAPE(4, 1, 8, 8));
  torc_tensor *x = torc_randn(TORC_SHAPE(16, 1, 8, 8), TORC_F32, TORC_CPU,
                              NULL);
  torc_release(torc_module_predict(m, x));
  torc_release(torc_module_predict(m, x)); /* kernels' scratch warmed */
  for (int i = 0; i < 3; i++) {
    int64_t before = torc_test_alloc_count();
    torc_tensor *y = torc_module_predict(m, x);
    assert_non_null(y);
    int64_t n = torc_test_alloc_count() - before;
    assert_true(n > 0);
    assert_int_equal(n, result_allocs(y));
    torc_release(y);
  }
  torc_release(x);
  torc_module_free(m);
}

/* Two shapes at a time: alternating between them plans nothing new; a
 * third shape replaces the one used longest ago. */
static void test_shapes(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  int64_t shapes[3][2] = {{10, 12}, {3, 12}, {7, 12}};
  torc_tensor *x[3];
  for (int i = 0; i < 3; i++)
    x[i] = torc_randn(shapes[i], 2, TORC_F32, TORC_CPU, NULL);
  torc_release(torc_module_predict(m, x[0]));
  torc_release(torc_module_predict(m, x[1]));
  for (int k = 0; k < 2; k++) {
    torc_release(torc_module_predict(m, x[0]));
    torc_release(torc_module_predict(m, x[1]));
  }
  torc_tensor *y0 = torc_module_predict(m, x[0]);
  int64_t one = result_allocs(y0); /* a result's allocations */
  torc_release(y0);
  int64_t before = torc_test_alloc_count();
  for (int k = 0; k < 2; k++) {
    torc_release(torc_module_predict(m, x[0]));
    torc_release(torc_module_predict(m, x[1]));
  }
  assert_int_equal(torc_test_alloc_count() - before, 4 * one);
  /* the third shape plans (allocates more), replacing x[0]'s */
  before = torc_test_alloc_count();
  torc_release(torc_module_predict(m, x[2]));
  assert_true(torc_test_alloc_count() - before > one);
  before = torc_test_alloc_count();
  torc_release(torc_module_predict(m, x[1]));
  assert_int_equal(torc_test_alloc_count() - before, one);
  before = torc_test_alloc_count();
  torc_release(torc_module_predict(m, x[0]));
  assert_true(torc_test_alloc_count() - before > one);
  for (int i = 0; i < 3; i++) {
    torc_tensor *y = torc_module_predict(m, x[i]), *want = eager(m, x[i]);
    assert_near(y, want, 1e-5);
    torc_release(y);
    torc_release(want);
    torc_release(x[i]);
  }
  torc_module_free(m);
}

/* The plans follow the module: an in-place step on a weight, a state dict
 * loaded into it, a child appended. */
static void test_follows_changes(void **state) {
  (void)state;
  torc_module *m = cnn_new();
  warm(m, TORC_SHAPE(4, 1, 8, 8));
  torc_module_train(m, 0);
  int64_t xs[4] = {6, 1, 8, 8};
  torc_tensor *x = torc_randn(xs, 4, TORC_F32, TORC_CPU, NULL);
  torc_release(torc_module_predict(m, x));
  /* an optimizer-style step: the conv weight scaled in place */
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  assert_true(n > 0 && strcmp(list[0].name, "0.weight") == 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  assert_int_equal(torc_mul_scalar_(list[0].tensor, -2.0), 0);
  torc_set_grad_mode(gm);
  torc_named_tensors_free(list, n);
  check(m, xs, 4);
  /* another module's weights, loaded */
  torc_module *other = cnn_new();
  warm(other, TORC_SHAPE(4, 1, 8, 8));
  torc_state_dict *sd = torc_state_dict_new();
  assert_non_null(sd);
  assert_int_equal(torc_module_state_dict(other, NULL, sd), 0);
  assert_int_equal(torc_module_load_state_dict(m, sd, NULL, NULL), 0);
  torc_state_dict_free(sd);
  int sc = torc_scope_begin();
  assert_near(torc_module_predict(m, x), eager(other, x), 1e-5);
  torc_scope_end(sc);
  /* a child appended: the output changes shape */
  add(m, torc_module_build("softmax", "dim=1"));
  sc = torc_scope_begin();
  torc_tensor *y = torc_module_predict(m, x);
  assert_near(y, eager(m, x), 1e-5);
  double s = 0;
  assert_int_equal(torc_item(torc_sum(torc_narrow(y, 0, 0, 1), NULL, 0, 0),
                             &s),
                   0);
  assert_true(fabs(s - 1.0) < 1e-5);
  torc_scope_end(sc);
  torc_release(x);
  torc_module_free(other);
  torc_module_free(m);
}

/* relu when the input's sum is positive, else neg: a branch on the data,
 * through torc_item. */
static torc_tensor *branchy_forward(torc_module *m,
                                    const torc_tensor *const *in, int n_in) {
  (void)m;
  (void)n_in;
  double sum = 0;
  if (torc_item(torc_sum(in[0], NULL, 0, 0), &sum))
    return NULL;
  return sum > 0 ? torc_relu(in[0]) : torc_neg(in[0]);
}

static const torc_module_vtable branchy_vt = {
    sizeof(torc_module_vtable), branchy_forward, NULL, NULL, NULL};

static char logged[1024];
static int n_logged;
static void log_sink(int level, const char *msg, void *ud) {
  (void)ud;
  if (level == TORC_LOG_WARN) {
    n_logged++;
    snprintf(logged, sizeof logged, "%s", msg);
  }
}

static void test_data_dependent(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  add(m, torc_linear_new(4, 4, 1));
  add(m, torc_module_new("branchy", &branchy_vt, NULL));
  torc_set_log_callback(log_sink, NULL);
  n_logged = 0;
  int64_t xs[2] = {3, 4};
  for (int sign = 1; sign >= -1; sign -= 2)
    for (int k = 0; k < 2; k++) {
      int sc = torc_scope_begin();
      torc_tensor *x = torc_full(xs, 2, 0.5 * sign, TORC_F32, TORC_CPU);
      /* the linear layer's output sign follows x's: both branches run */
      assert_near(torc_module_predict(m, x), eager(m, x), 1e-6);
      torc_scope_end(sc);
    }
  /* another shape: eager without tracing again (no second warning) */
  int64_t xs5[2] = {5, 4};
  int sc5 = torc_scope_begin();
  torc_tensor *x5 = torc_full(xs5, 2, -1.0, TORC_F32, TORC_CPU);
  assert_near(torc_module_predict(m, x5), eager(m, x5), 1e-6);
  torc_scope_end(sc5);
  torc_set_log_callback(NULL, NULL);
  assert_int_equal(n_logged, 1);
  assert_non_null(strstr(logged, "torc_item in module \"1\""));
  assert_non_null(strstr(logged, "runs eagerly"));
  /* cleared: traced again (and refused again) */
  torc_module_predict_clear(m);
  torc_set_log_callback(log_sink, NULL);
  int sc = torc_scope_begin();
  assert_non_null(
      torc_module_predict(m, torc_full(xs, 2, 1.0, TORC_F32, TORC_CPU)));
  torc_scope_end(sc);
  torc_set_log_callback(NULL, NULL);
  assert_int_equal(n_logged, 2);
  torc_module_free(m);
}

static void test_errors(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  assert_null(torc_module_predict(m, NULL));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  torc_clear_error();
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 12), TORC_F32, TORC_CPU, NULL);
  assert_null(torc_module_predict(NULL, x));
  torc_clear_error();
  /* a shape the module does not take: the eager forward's error */
  torc_tensor *bad = torc_randn(TORC_SHAPE(2, 5), TORC_F32, TORC_CPU, NULL);
  assert_null(torc_module_predict(m, bad));
  assert_int_not_equal(torc_last_status(), TORC_OK);
  assert_non_null(strstr(torc_last_error(), "12"));
  torc_module_predict_clear(NULL);
  torc_release(bad);
  torc_release(x);
  torc_module_free(m);
}

/* A bidirectional batch_first lstm concatenates its directions along the
 * last dim: the trace's first piece is a strided part of a buffer it holds
 * no value for, which a plan (or a graph file) cannot describe, so the
 * module runs eagerly and predict still equals the forward. */
static void test_strided_pieces(void **state) {
  (void)state;
  torc_rnn_options o = torc_rnn_options_default(5);
  o.input_size = 4;
  o.batch_first = 1;
  o.bidirectional = 1;
  torc_module *m = torc_lstm_new(&o);
  torc_module_train(m, 0);
  for (int i = 0; i < 2; i++)
    check(m, TORC_SHAPE(3, 2, 4));
  int sc = torc_scope_begin();
  torc_tensor *x = torc_randn(TORC_SHAPE(3, 2, 4), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_ok(torc_trace(m, (const torc_tensor *const *)&x, 1, &g));
  torc_plan *p = NULL;
  assert_int_equal(torc_plan_new(g, 0, &p), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "is written as a strided part of a buffer");
  assert_null(p);
  assert_int_equal(torc_graph_save(g, "/nonexistent/g.safetensors"),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "which a graph file cannot describe");
  torc_graph_free(g);
  torc_clear_error();
  torc_scope_end(sc);
  torc_module_free(m);
}

#define T(f) cmocka_unit_test_setup_teardown(f, test_live_setup, test_live_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_matches_eager),   T(test_steady_allocations), T(test_shapes),
      T(test_follows_changes), T(test_data_dependent),     T(test_errors),
      T(test_strided_pieces),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
