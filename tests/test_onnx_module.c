/* tests/test_onnx_module.c — an ONNX model imported as a module
 * (torc_onnx_module_new): the PyTorch-exported CNN of tests/fixtures/onnx
 * (make_fixture.py) gives PyTorch's logits in eval and in training mode,
 * updates its running statistics as PyTorch does, names its parameters and
 * buffers as PyTorch's state dict, fine-tunes with an optimizer, and saves
 * and loads; initializer names that are not state-dict names are
 * sanitised; Dropout follows the module's mode; garbage and unsupported
 * operators are one message each. */
#include <math.h>
#include <unistd.h>

#include "onnx_testutil.h"
#include "torc/autograd.h"
#include "torc/module.h"
#include "torc/onnx.h"
#include "torc/optim.h"
#include "torc/safetensors.h"
#include "torc/state.h"

static char fx_onnx[512], fx_io[512];

static torc_module *load_cnn(void) {
  torc_module *m = NULL;
  assert_ok(torc_onnx_module_new(fx_onnx, &m));
  assert_non_null(m);
  return m;
}

static torc_tensor *fixture(const char *name) {
  torc_safetensors *st = torc_safetensors_open(fx_io);
  assert_torc(st);
  torc_tensor *t = torc_safetensors_get(st, name, TORC_CPU);
  assert_torc(t);
  torc_safetensors_close(st);
  return t;
}

/* The largest |a - b| over the elements (same numel). */
static double max_abs_diff(const torc_tensor *a, const torc_tensor *b) {
  assert_int_equal(torc_numel(a), torc_numel(b));
  double *va = test_values(a), *vb = test_values(b), d = 0;
  for (int64_t i = 0; i < torc_numel(a); i++)
    if (fabs(va[i] - vb[i]) > d || isnan(va[i]))
      d = isnan(va[i]) ? INFINITY : fabs(va[i] - vb[i]);
  free(va);
  free(vb);
  return d;
}

static void test_eval_logits(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_module *m = load_cnn();
  torc_module_train(m, 0);
  torc_tensor *x = fixture("input"), *want = fixture("logits");
  torc_tensor *y = torc_module_forward(m, x);
  assert_torc(y);
  assert_int_equal(torc_ndim(y), 2);
  assert_int_equal(torc_size(y, 0), 4);
  assert_int_equal(torc_size(y, 1), 10);
  double d = max_abs_diff(y, want);
  printf("# eval-mode logits: max |torc - torch| = %.3g (tolerance 1e-5)\n",
         d);
  assert_true(d <= 1e-5);
  /* the dynamic batch: one sample alone gives its row */
  torc_tensor *x1 = torc_narrow(x, 0, 2, 1);
  torc_tensor *y1 = torc_module_forward(m, x1);
  assert_torc(y1);
  assert_true(max_abs_diff(y1, torc_narrow(want, 0, 2, 1)) <= 1e-5);
  torc_scope_end(scope);
  torc_module_free(m);
}

static void test_train_mode(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_module *m = load_cnn();
  assert_true(torc_module_is_training(m));
  torc_tensor *x = fixture("input");
  torc_tensor *y;
  {
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    y = torc_module_forward(m, x);
    torc_set_grad_mode(gm);
  }
  assert_torc(y);
  double d = max_abs_diff(y, fixture("train_logits"));
  printf("# training-mode logits (batch statistics): max |torc - torch| = "
         "%.3g\n", d);
  assert_true(d <= 1e-4);
  torc_module *bn1 = torc_module_find(m, "bn1");
  assert_torc(bn1);
  assert_true(max_abs_diff(torc_module_buffer(bn1, "running_mean"),
                           fixture("bn1_running_mean")) <= 1e-6);
  assert_true(max_abs_diff(torc_module_buffer(bn1, "running_var"),
                           fixture("bn1_running_var")) <= 1e-5);
  double nb = 0;
  assert_ok(torc_item(torc_module_buffer(bn1, "num_batches_tracked"), &nb));
  assert_true(nb == 1);
  torc_scope_end(scope);
  torc_module_free(m);
}

static void test_names(void **state) {
  (void)state;
  torc_module *m = load_cnn();
  static const char *const want[] = {
      "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias",
      "conv2.weight", "conv2.bias", "bn2.weight", "bn2.bias",
      "fc.weight",    "fc.bias"};
  torc_named_tensor *p = NULL;
  int n = torc_module_named_parameters(m, &p);
  assert_int_equal(n, 10);
  for (int i = 0; i < n; i++) {
    assert_string_equal(p[i].name, want[i]);
    assert_true(torc_requires_grad(p[i].tensor));
  }
  torc_named_tensors_free(p, n);
  /* conv 1*8*9+8, bn 2*8, conv 8*32*9+32, bn 2*32, fc 1568*10+10 */
  assert_int_equal(torc_module_parameter_count(m, 1),
                   80 + 16 + 2336 + 64 + 15690);
  static const char *const bufs[] = {
      "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
      "bn2.running_mean", "bn2.running_var", "bn2.num_batches_tracked"};
  n = torc_module_named_buffers(m, 1, &p);
  assert_int_equal(n, 6);
  for (int i = 0; i < n; i++) {
    assert_string_equal(p[i].name, bufs[i]);
    assert_false(torc_requires_grad(p[i].tensor));
  }
  torc_named_tensors_free(p, n);
  char *repr = torc_module_repr(m);
  assert_non_null(repr);
  assert_contains(repr, "opset=13");
  free(repr);
  torc_module_free(m);
}

/* A few SGD steps on the fixture's batch with fixed targets: the loss
 * falls. */
static void test_finetune(void **state) {
  (void)state;
  torc_module *m = load_cnn();
  torc_optimizer *opt = torc_optimizer_build("sgd", "lr=0.01",
                                             m);
  assert_torc(opt);
  int scope = torc_scope_begin();
  torc_tensor *x = fixture("input");
  int64_t tv[4] = {3, 1, 4, 1};
  torc_tensor *target = torc_from_host(tv, TORC_SHAPE(4), TORC_I64, TORC_CPU);
  assert_torc(target);
  double first = 0, last = 0;
  for (int step = 0; step < 6; step++) {
    int s2 = torc_scope_begin();
    assert_ok(torc_optimizer_zero_grad(opt, 1));
    torc_tensor *loss =
        torc_cross_entropy(torc_module_forward(m, x), target, NULL, NULL);
    assert_torc(loss);
    double v;
    assert_ok(torc_item(loss, &v));
    assert_ok(torc_backward(loss, NULL, 0));
    if (step == 0) { /* PyTorch's loss and gradients */
      assert_true(max_abs_diff(loss, fixture("train_loss")) <= 1e-5);
      static const char *const g[3][3] = {
          {"conv1", "weight", "grad_conv1_weight"},
          {"bn2", "weight", "grad_bn2_weight"},
          {"fc", "weight", "grad_fc_weight"}};
      for (int i = 0; i < 3; i++) {
        torc_tensor *p = torc_module_parameter(torc_module_find(m, g[i][0]),
                                               g[i][1]);
        torc_tensor *gp = torc_grad_of(p), *want = fixture(g[i][2]);
        assert_torc(gp);
        double d = max_abs_diff(gp, want), scale = 0;
        double *w = test_values(want);
        for (int64_t k = 0; k < torc_numel(want); k++)
          scale = fabs(w[k]) > scale ? fabs(w[k]) : scale;
        free(w);
        printf("# gradient of %s.%s: max |torc - torch| = %.3g (max "
               "|torch| %.3g)\n", g[i][0], g[i][1], d, scale);
        assert_true(d <= 1e-4 * (1 + scale));
      }
    }
    assert_ok(torc_optimizer_step(opt));
    if (step == 0)
      first = v;
    last = v;
    torc_scope_end(s2);
  }
  printf("# fine-tune, 6 SGD steps on 4 samples: loss %.4f -> %.4f\n", first,
         last);
  assert_true(isfinite(first) && last < 0.5 * first);
  torc_scope_end(scope);
  torc_optimizer_free(opt);
  torc_module_free(m);
}

/* Saved and loaded into a fresh import whose weights were changed: the
 * logits come back. */
static void test_state_roundtrip(void **state) {
  (void)state;
  char path[] = "/tmp/torc-onnx-module-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  int scope = torc_scope_begin();
  torc_module *a = load_cnn(), *b = load_cnn();
  torc_module_train(a, 0);
  torc_module_train(b, 0);
  torc_tensor *x = fixture("input");
  {
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    assert_ok(torc_mul_scalar_(
        torc_module_parameter(torc_module_find(a, "fc"), "weight"), 0.5));
    assert_ok(torc_add_scalar_(
        torc_module_buffer(torc_module_find(a, "bn2"), "running_mean"), 0.25));
    torc_set_grad_mode(gm);
  }
  torc_tensor *ya = torc_module_forward(a, x);
  assert_torc(ya);
  assert_true(max_abs_diff(ya, torc_module_forward(b, x)) > 1e-3);
  assert_ok(torc_module_save(a, path));
  assert_ok(torc_module_load(b, path, NULL, NULL));
  assert_true(max_abs_diff(ya, torc_module_forward(b, x)) == 0);
  torc_scope_end(scope);
  torc_module_free(a);
  torc_module_free(b);
  unlink(path);
}

/* ---- hand-made models ---- */


/* A model on input x: nodes {op, in0, in1, out} (named after the output),
 * float initializers [1] named inits[i] holding 1 + i, output "z"; written
 * to a temporary file whose name goes to path. */
static void write_model(char *path, const char *const (*nodes)[4], int nn,
                        const char *const *inits, int ni) {
  buf g = {{0}, 0}, t, o = {{0}, 0};
  for (int i = 0; i < nn; i++) {
    buf nd = {{0}, 0};
    f_str(&nd, 1, nodes[i][1]);
    if (nodes[i][2])
      f_str(&nd, 1, nodes[i][2]);
    f_str(&nd, 2, nodes[i][3]);
    f_str(&nd, 3, nodes[i][3]);
    f_str(&nd, 4, nodes[i][0]);
    f_msg(&g, 1, &nd);
  }
  f_str(&g, 2, "g");
  for (int i = 0; i < ni; i++) {
    float v = 1.0f + (float)i;
    t.n = 0;
    f_int(&t, 1, 1);
    f_int(&t, 2, 1);
    f_str(&t, 8, inits[i]);
    f_bytes(&t, 9, &v, sizeof v);
    f_msg(&g, 5, &t);
  }
  t.n = 0;
  f_str(&t, 1, "x");
  f_msg(&g, 11, &t);
  t.n = 0;
  f_str(&t, 1, "z");
  f_msg(&g, 12, &t);
  f_int(&o, 1, 8);
  buf op = {{0}, 0};
  f_str(&op, 1, "");
  f_int(&op, 2, 13);
  f_msg(&o, 8, &op);
  f_msg(&o, 7, &g);
  strcpy(path, "/tmp/torc-onnx-model-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, o.b, o.n), (ssize_t)o.n);
  close(fd);
}

static void test_sanitised_names(void **state) {
  (void)state;
  const char *const nodes[4][4] = {{"Mul", "x", "onnx::Mul_3", "a"},
                                   {"Add", "a", "blk.w", "b"},
                                   {"Add", "b", "blk", "c"},
                                   {"Mul", "c", "blk.w.", "z"}};
  const char *const inits[4] = {"onnx::Mul_3", "blk.w", "blk", "blk.w."};
  char path[64];
  write_model(path, nodes, 4, inits, 4);
  torc_module *m = NULL;
  assert_ok(torc_onnx_module_new(path, &m));
  unlink(path);
  torc_named_tensor *p = NULL;
  int n = torc_module_named_parameters(m, &p);
  assert_int_equal(n, 4);
  /* own parameters first, then the child's, as PyTorch lists them */
  assert_string_equal(p[0].name, "onnx__Mul_3");
  assert_string_equal(p[1].name, "blk_2");
  assert_string_equal(p[2].name, "blk_w_");
  assert_string_equal(p[3].name, "blk.w");
  torc_named_tensors_free(p, n);
  /* ((x * 1 + 2) + 3) * 4, and the gradient reaches every parameter */
  int scope = torc_scope_begin();
  float xv = 0.5f;
  torc_tensor *x = torc_from_host(&xv, TORC_SHAPE(1), TORC_F32, TORC_CPU);
  torc_tensor *z = torc_module_forward(m, x);
  assert_torc(z);
  double v;
  assert_ok(torc_item(z, &v));
  assert_true(v == (0.5 * 1 + 2 + 3) * 4);
  assert_ok(torc_backward(z, NULL, 0));
  assert_non_null(torc_grad_of(torc_module_parameter(m, "blk_2")));
  torc_scope_end(scope);
  torc_module_free(m);
}

/* Dropout drops in training mode (ratio 0.5, the kept ones doubled) and is
 * the identity in eval mode. */
static void test_dropout_modes(void **state) {
  (void)state;
  const char *const nodes[1][4] = {{"Dropout", "x", NULL, "z"}};
  char path[64];
  write_model(path, nodes, 1, NULL, 0);
  torc_module *m = NULL;
  assert_ok(torc_onnx_module_new(path, &m));
  unlink(path);
  int scope = torc_scope_begin();
  torc_tensor *x = torc_ones(TORC_SHAPE(1000), TORC_F32, TORC_CPU);
  double *v = test_values(torc_module_forward(m, x));
  int zeros = 0, twos = 0;
  for (int i = 0; i < 1000; i++) {
    zeros += v[i] == 0;
    twos += v[i] == 2;
  }
  free(v);
  assert_int_equal(zeros + twos, 1000);
  assert_true(zeros > 400 && zeros < 600);
  torc_module_train(m, 0);
  assert_true(max_abs_diff(torc_module_forward(m, x), x) == 0);
  torc_scope_end(scope);
  torc_module_free(m);
}

static void test_errors(void **state) {
  (void)state;
  torc_module *m = (torc_module *)&m;
  /* garbage */
  char path[64];
  strcpy(path, "/tmp/torc-onnx-garbage-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char garbage[] = "\xff\xff\xff\xff this is not protobuf";
  assert_int_equal(write(fd, garbage, sizeof garbage),
                   (ssize_t)sizeof garbage);
  close(fd);
  assert_int_equal(torc_onnx_module_new(path, &m), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "is not an ONNX model");
  assert_null(m);
  unlink(path);
  /* missing file, NULL arguments */
  assert_int_equal(torc_onnx_module_new("/nonexistent/x.onnx", &m),
                   TORC_ERR_IO);
  assert_error(TORC_ERR_IO, "cannot open ONNX file '/nonexistent/x.onnx'");
  assert_int_equal(torc_onnx_module_new(NULL, &m), TORC_ERR_NULL);
  /* every unsupported operator, with its nodes, in one message */
  const char *const nodes[3][4] = {{"Foo", "x", NULL, "a"},
                                   {"Relu", "a", NULL, "b"},
                                   {"Bar", "b", NULL, "z"}};
  write_model(path, nodes, 3, NULL, 0);
  assert_int_equal(torc_onnx_module_new(path, &m), TORC_ERR_UNSUPPORTED);
  assert_error(TORC_ERR_UNSUPPORTED, "Foo (node a), Bar (node z)");
  assert_null(m);
  unlink(path);
  /* a wrong input count at forward */
  const char *const relu[1][4] = {{"Relu", "x", NULL, "z"}};
  write_model(path, relu, 1, NULL, 0);
  assert_ok(torc_onnx_module_new(path, &m));
  unlink(path);
  int scope = torc_scope_begin();
  torc_tensor *x = torc_zeros(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  const torc_tensor *two[2] = {x, x};
  assert_null(torc_module_forward_n(m, two, 2));
  assert_error(TORC_ERR_INVALID, "takes 1 inputs (x), given 2");
  torc_scope_end(scope);
  torc_module_free(m);
}

static int setup(void **state) {
  if (test_setup_ref_sim(state) != 0 ||
      torc_plugin_load("optim", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  const char *src = getenv("TORC_TOP_SRCDIR");
  snprintf(fx_onnx, sizeof fx_onnx, "%s/tests/fixtures/onnx/cnn.onnx",
           src ? src : ".");
  snprintf(fx_io, sizeof fx_io, "%s/tests/fixtures/onnx/cnn_io.safetensors",
           src ? src : ".");
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_eval_logits, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_train_mode, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_names, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_finetune, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_state_roundtrip, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_sanitised_names, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_dropout_modes, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_errors, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
