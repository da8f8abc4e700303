/* tests/test_rnn_cell.c — the fused recurrent cells torc_lstm_cell and
 * torc_gru_cell: one step of torch.nn.LSTMCell / GRUCell (the matmuls by
 * torc_linear around the fused op) and its gradients against
 * tests/fixtures/rnn_cell.safetensors (written by
 * tests/fixtures/gen_rnn_cell.py), on the cpu device (the cpu plugin's
 * kernels where it is built) and on sim (ref's); the cpu plugin against
 * ref at sizes past one vector and one thread's slice; gradcheck in f64;
 * every error; empty batches; and that the lstm and gru layers run their
 * steps through the fused kernels.
 */
#include <math.h>

#include "testutil.h"

static int have_cpu_plugin; /* the cpu plugin's cell kernels serve cpu */
static torc_safetensors *fx;

/* Max |got - want| / max(1, max |want|). */
static double deviation(const torc_tensor *got, const torc_tensor *want) {
  assert_int_equal(torc_ndim(got), torc_ndim(want));
  assert_memory_equal(torc_shape(got), torc_shape(want),
                      sizeof(int64_t) * (size_t)torc_ndim(got));
  int64_t n = torc_numel(want);
  double *g = test_values(got), *w = test_values(want), m = 1, d = 0;
  assert_non_null(g);
  assert_non_null(w);
  for (int64_t i = 0; i < n; i++)
    m = fmax(m, fabs(w[i]));
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(g[i] - w[i]) / m;
    d = e > d || isnan(e) ? e : d;
  }
  free(g);
  free(w);
  return d;
}

static torc_tensor *get(const char *key, const char *what, torc_device dev,
                        int grad) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s", key, what);
  torc_tensor *t = torc_safetensors_get(fx, name, dev);
  assert_torc(t);
  if (grad)
    assert_ok(torc_set_requires_grad(t, 1));
  return t;
}

static double max_dev[2]; /* f32, f64 */

static void expect(const char *key, const char *what, const torc_tensor *got,
                   const char *dev) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s", key, what);
  torc_tensor *want = torc_safetensors_get(fx, name, TORC_CPU);
  assert_torc(want);
  assert_torc(got);
  int f64 = torc_dtype_of(want) == TORC_F64;
  assert_int_equal(torc_dtype_of(got), torc_dtype_of(want));
  /* f32: the matmuls' sums round differently from PyTorch's */
  double d = deviation(got, want), tol = f64 ? 1e-12 : 4e-6;
  if (!(d <= tol)) {
    print_error("%s on %s: deviation %.3g > %g\n", name, dev, d, tol);
    fail();
  }
  max_dev[f64] = fmax(max_dev[f64], d);
}

/* One fixture case on one device: the cell's outputs, then the gradients
 * of sum(h' gh) (+ sum(c' gc)) for the input, the states and the
 * weights. */
static void run_case(const char *key, int lstm, torc_device dev) {
  char dn[32];
  torc_device_str(dev, dn, sizeof dn);
  int scope = torc_scope_begin();
  static const char *const pn[4] = {"w_ih", "w_hh", "b_ih", "b_hh"};
  static const char *const gpn[4] = {"gw_ih", "gw_hh", "gb_ih", "gb_hh"};
  torc_tensor *x = get(key, "x", dev, 1), *h = get(key, "h", dev, 1);
  torc_tensor *p[4];
  for (int i = 0; i < 4; i++)
    p[i] = get(key, pn[i], dev, 1);
  torc_tensor *xp = torc_linear(x, p[0], p[2]), *hp = torc_linear(h, p[1], p[3]);
  torc_tensor *c = NULL, *h2 = NULL, *c2 = NULL, *loss;
  if (lstm) {
    c = get(key, "c", dev, 1);
    assert_ok(torc_lstm_cell(torc_add(xp, hp), c, &h2, &c2));
    expect(key, "c2", c2, dn);
    loss = torc_add(torc_sum(torc_mul(h2, get(key, "gh", dev, 0)), NULL, 0, 0),
                    torc_sum(torc_mul(c2, get(key, "gc", dev, 0)), NULL, 0, 0));
  } else {
    h2 = torc_gru_cell(xp, hp, h);
    loss = torc_sum(torc_mul(h2, get(key, "gh", dev, 0)), NULL, 0, 0);
  }
  expect(key, "h2", h2, dn);
  assert_ok(torc_backward(loss, NULL, 0));
  expect(key, "gx", torc_grad_of(x), dn);
  expect(key, "gh0", torc_grad_of(h), dn);
  if (lstm)
    expect(key, "gc0", torc_grad_of(c), dn);
  for (int i = 0; i < 4; i++)
    expect(key, gpn[i], torc_grad_of(p[i]), dn);
  torc_scope_end(scope);
}

static void test_pytorch_parity(void **state) {
  (void)state;
  torc_device sim;
  assert_ok(torc_device_parse("sim", &sim));
  int n = 0;
  for (int i = 0; i < torc_safetensors_metadata_count(fx); i++) {
    const char *mk = torc_safetensors_metadata_key(fx, i);
    if (strncmp(mk, "case:", 5) != 0)
      continue;
    int lstm = strcmp(torc_safetensors_metadata(fx, mk), "lstm") == 0;
    run_case(mk + 5, lstm, TORC_CPU);
    run_case(mk + 5, lstm, sim);
    n++;
  }
  assert_int_equal(n, 8);
  printf("rnn_cell fixture: %d cases on cpu (%s) and sim, max deviation "
         "f32 %.3g, f64 %.3g\n",
         n, have_cpu_plugin ? "cpu plugin" : "ref", max_dev[0], max_dev[1]);
}

/* ---- gradcheck ---- */

static torc_tensor *lstm_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  (void)user;
  torc_tensor *o[2] = {NULL, NULL};
  if (torc_lstm_cell(in[0], in[1], &o[0], &o[1]))
    return NULL;
  return torc_cat((const torc_tensor *const *)o, 2, 1);
}

static torc_tensor *gru_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  (void)user;
  return torc_gru_cell(in[0], in[1], in[2]);
}

static torc_tensor *randn(int64_t n, int64_t cols, torc_dtype dt,
                          double scale) {
  torc_tensor *t = torc_mul_scalar(
      torc_randn(TORC_SHAPE(n, cols), dt, TORC_CPU, NULL), scale);
  assert_torc(t);
  return t;
}

static void test_gradcheck(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_tensor *l[2] = {randn(3, 4 * 5, TORC_F64, 1.5),
                       randn(3, 5, TORC_F64, 1.5)};
  torc_tensor *g[3] = {randn(3, 3 * 4, TORC_F64, 1.5),
                       randn(3, 3 * 4, TORC_F64, 1.5),
                       randn(3, 4, TORC_F64, 1.5)};
  for (int i = 0; i < 3; i++) {
    if (i < 2)
      assert_ok(torc_set_requires_grad(l[i], 1));
    assert_ok(torc_set_requires_grad(g[i], 1));
  }
  assert_ok(torc_gradcheck(lstm_fn, NULL, l, 2, 1e-6, 1e-7, 1e-5));
  assert_ok(torc_gradcheck(gru_fn, NULL, g, 3, 1e-6, 1e-7, 1e-5));
  /* one input requiring grad: only its gradient is asked for */
  assert_ok(torc_set_requires_grad(g[0], 0));
  assert_ok(torc_set_requires_grad(g[2], 0));
  assert_ok(torc_gradcheck(gru_fn, NULL, g, 3, 1e-6, 1e-7, 1e-5));
  torc_scope_end(scope);
}

/* ---- the cpu plugin against ref ---- */

/* The cell's outputs and input gradients with the dispatcher pinned to
 * `pin` (NULL: the best kernel): out[0..1] h' (c'), grads[] of
 * sum(h' gy) (+ sum(c' gy)) for in[0..n_in). */
static void run_pinned(const char *pin, int lstm, torc_tensor *const *in,
                       const torc_tensor *gy, torc_tensor **out,
                       torc_tensor **grads) {
  torc__dispatch_pin(pin);
  int n_in = lstm ? 2 : 3;
  if (lstm)
    assert_ok(torc_lstm_cell(in[0], in[1], &out[0], &out[1]));
  else
    assert_torc(out[0] = torc_gru_cell(in[0], in[1], in[2]));
  const torc_tensor *gys[2] = {gy, gy};
  assert_ok(torc_grad(out, gys, lstm ? 2 : 1, in,
                      n_in, grads, 0, 0));
  torc__dispatch_pin(NULL);
}

static void test_cpu_vs_ref(void **state) {
  (void)state;
  if (!have_cpu_plugin) {
    printf("cpu_vs_ref skipped: the cpu plugin is not built (ref serves "
           "the cpu)\n");
    skip();
  }
  /* N past one thread's slice, H past the vectors' widths with a tail */
  static const struct {
    int64_t N, H;
    torc_dtype dt;
  } cases[] = {{1, 1, TORC_F32}, {33, 67, TORC_F32}, {64, 256, TORC_F32},
               {17, 37, TORC_F64}, {40, 130, TORC_F64}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (int lstm = 0; lstm < 2; lstm++) {
      int scope = torc_scope_begin();
      int64_t N = cases[k].N, H = cases[k].H;
      torc_dtype dt = cases[k].dt;
      torc_tensor *in[3] = {randn(N, (lstm ? 4 : 3) * H, dt, 3),
                            lstm ? randn(N, H, dt, 2)
                                 : randn(N, 3 * H, dt, 3),
                            randn(N, H, dt, 2)};
      for (int i = 0; i < 3; i++)
        assert_ok(torc_set_requires_grad(in[i], 1));
      torc_tensor *gy = randn(N, H, dt, 1);
      torc_tensor *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL};
      torc_tensor *ga[3] = {NULL, NULL, NULL}, *gb[3] = {NULL, NULL, NULL};
      run_pinned(NULL, lstm, in, gy, a, ga);
      run_pinned("ref", lstm, in, gy, b, gb);
      /* f32: the cpu plugin's polynomial sigmoid and tanh (1-2 ulp) */
      double tol = dt == TORC_F64 ? 1e-13 : 2e-6, d = deviation(a[0], b[0]);
      if (lstm)
        d = fmax(d, deviation(a[1], b[1]));
      for (int i = 0; i < (lstm ? 2 : 3); i++)
        d = fmax(d, deviation(ga[i], gb[i]));
      if (!(d <= tol)) {
        print_error("%s N %lld H %lld %s: cpu differs from ref by %.3g\n",
                    lstm ? "lstm" : "gru", (long long)N, (long long)H,
                    torc_dtype_name(dt), d);
        fail();
      }
      torc_scope_end(scope);
    }
}

/* ---- empty batches, outputs not wanted, f16 on ref ---- */

static void test_edges(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_tensor *h2 = NULL, *c2 = NULL;
  torc_tensor *g0 = randn(0, 8, TORC_F32, 1), *c0 = randn(0, 2, TORC_F32, 1);
  assert_ok(torc_lstm_cell(g0, c0, &h2, &c2));
  assert_int_equal(torc_size(h2, 0), 0);
  assert_int_equal(torc_size(c2, 1), 2);
  h2 = torc_gru_cell(randn(0, 6, TORC_F32, 1), randn(0, 6, TORC_F32, 1),
                     randn(0, 2, TORC_F32, 1));
  assert_torc(h2);
  assert_int_equal(torc_numel(h2), 0);
  /* only c' wanted: h' is released (the live count checks it) */
  torc_tensor *g = randn(2, 12, TORC_F64, 1), *c = randn(2, 3, TORC_F64, 1);
  torc_tensor *c_only = NULL, *both[2] = {NULL, NULL};
  assert_ok(torc_lstm_cell(g, c, NULL, &c_only));
  assert_ok(torc_lstm_cell(g, c, &both[0], &both[1]));
  test_assert_close(c_only, both[1], 0);
  /* f16 runs on ref (computing in double, rounding once) */
  torc_tensor *h16 = NULL;
  assert_ok(torc_lstm_cell(torc_to_dtype(g, TORC_F16),
                           torc_to_dtype(c, TORC_F16), &h16, NULL));
  assert_int_equal(torc_dtype_of(h16), TORC_F16);
  test_assert_close(h16, both[0], 2e-3);
  torc_scope_end(scope);
}

/* ---- errors ---- */

static void expect_err(torc_status st, torc_status want, const char *a,
                       const char *b) {
  assert_int_equal(st, want);
  assert_contains(torc_last_error(), a);
  if (b)
    assert_contains(torc_last_error(), b);
  torc_clear_error();
}

static torc_status gru_st(torc_tensor *t) {
  assert_null(t);
  return torc_last_status();
}

static void test_errors(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_device sim;
  assert_ok(torc_device_parse("sim", &sim));
  torc_tensor *g = randn(2, 12, TORC_F32, 1), *c = randn(2, 3, TORC_F32, 1);
  torc_tensor *xg = randn(2, 9, TORC_F32, 1), *h = c;
  torc_tensor *h2 = (torc_tensor *)1, *c2 = (torc_tensor *)1;
  /* NULL inputs: outputs set to NULL */
  expect_err(torc_lstm_cell(NULL, c, &h2, &c2), TORC_ERR_NULL,
             "torc_lstm_cell", NULL);
  assert_null(h2);
  assert_null(c2);
  expect_err(gru_st(torc_gru_cell(xg, NULL, h)), TORC_ERR_NULL,
             "torc_gru_cell", NULL);
  /* shapes */
  expect_err(torc_lstm_cell(randn(2, 11, TORC_F32, 1), c, &h2, &c2),
             TORC_ERR_SHAPE, "gates [2, 11] and c [2, 3]", "[N, 4H]");
  expect_err(torc_lstm_cell(randn(3, 12, TORC_F32, 1), c, &h2, &c2),
             TORC_ERR_SHAPE, "gates [3, 12] and c [2, 3]", NULL);
  expect_err(torc_lstm_cell(g, torc_reshape(c, TORC_SHAPE(6)), &h2, &c2),
             TORC_ERR_SHAPE, "c [6]", NULL);
  expect_err(gru_st(torc_gru_cell(randn(2, 12, TORC_F32, 1), xg, h)),
             TORC_ERR_SHAPE, "xg [2, 12], hg [2, 9] and h [2, 3]", "[N, 3H]");
  expect_err(gru_st(torc_gru_cell(xg, randn(2, 8, TORC_F32, 1), h)),
             TORC_ERR_SHAPE, "hg [2, 8]", NULL);
  expect_err(gru_st(torc_gru_cell(xg, xg, randn(1, 3, TORC_F32, 1))),
             TORC_ERR_SHAPE, "h [1, 3]", NULL);
  /* dtypes: integers refused with the fix; two floating dtypes */
  expect_err(torc_lstm_cell(torc_to_dtype(g, TORC_I32), c, &h2, &c2),
             TORC_ERR_DTYPE, "gates is i32", "torc_to_dtype");
  expect_err(torc_lstm_cell(g, torc_to_dtype(c, TORC_F64), &h2, &c2),
             TORC_ERR_DTYPE, "gates is f32 but c is f64", NULL);
  expect_err(gru_st(torc_gru_cell(xg, xg, torc_to_dtype(h, TORC_I64))),
             TORC_ERR_DTYPE, "h is i64", NULL);
  expect_err(gru_st(torc_gru_cell(xg, torc_to_dtype(xg, TORC_F64), h)),
             TORC_ERR_DTYPE, "xg is f32 but hg is f64", NULL);
  /* devices */
  expect_err(torc_lstm_cell(g, torc_to(c, sim), &h2, &c2), TORC_ERR_DEVICE,
             "torc_lstm_cell", NULL);
  expect_err(gru_st(torc_gru_cell(xg, xg, torc_to(h, sim))), TORC_ERR_DEVICE,
             "torc_gru_cell", NULL);
  torc_scope_end(scope);
}

/* ---- the layers run their steps through the fused kernels ---- */

static void test_layers_use_fused(void **state) {
  (void)state;
  for (int lstm = 0; lstm < 2; lstm++) {
    int scope = torc_scope_begin();
    torc_rnn_options o = torc_rnn_options_default(8);
    o.input_size = 5;
    torc_module *m = lstm ? torc_lstm_new(&o) : torc_gru_new(&o);
    assert_non_null(m);
    torc_tensor *x = torc_randn(TORC_SHAPE(6, 3, 5), TORC_F32, TORC_CPU,
                                NULL);
    torc_profile_enable(1);
    torc_tensor *y = torc_module_forward(m, x);
    assert_torc(y);
    assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
    char *rep = torc_profile_report(0, 0);
    torc_profile_enable(0);
    assert_non_null(rep);
    const char *op = lstm ? "lstm_cell" : "gru_cell";
    char bw[64];
    snprintf(bw, sizeof bw, "%s_backward", op);
    if (!strstr(rep, op) || !strstr(rep, bw) || strstr(rep, "sigmoid")) {
      print_error("expected %s and %s, no sigmoid, in:\n%s\n", op, bw, rep);
      free(rep);
      fail();
    }
    free(rep);
    torc_module_free(m);
    torc_scope_end(scope);
  }
}

static int group_setup(void **state) {
  if (test_setup_ref_sim(state))
    return -1;
  have_cpu_plugin = torc_plugin_load("cpu", NULL) == TORC_OK;
  if (!have_cpu_plugin) {
    printf("the cpu plugin is not built: cpu runs ref's kernels\n");
    torc_clear_error();
  }
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/rnn_cell.safetensors",
           src ? src : ".");
  fx = torc_safetensors_open(path);
  if (fx == NULL) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static int group_teardown(void **state) {
  torc_safetensors_close(fx);
  return test_teardown_all(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_pytorch_parity, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_gradcheck, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_cpu_vs_ref, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_edges, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_errors, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_layers_use_fused, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests_name("rnn_cell", tests, group_setup,
                                     group_teardown);
}
