/* tests/test_onnx_export.c — torc_onnx_export (torc/onnx.h): an MLP, a
 * CNN with batch norm, a residual block, a concatenation with group norm
 * and a model of many activations
 * exported at each opset 13..17, read back with torc_onnx_load_buffer and
 * run by torc's ONNX interpreter at a batch size other than the traced
 * one: outputs equal the eager forward within 1e-5; initializers keep
 * their state-dict names (a linear's weight untransposed, under Gemm's
 * transB); and the errors: ops with no mapping (every node listed), a bad
 * opset, a path that cannot be written (nothing left behind). */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static void append(torc_module *m, torc_module *child) {
  assert_non_null(child);
  assert_int_equal(torc_sequential_append(m, child), 0);
}

static torc_module *mlp_new(void) {
  torc_module *m = torc_sequential_new();
  append(m, torc_linear_new(4, 8, 1));
  append(m, torc_module_build("relu", ""));
  append(m, torc_linear_new(8, 3, 1));
  append(m, torc_module_build("log_softmax", "dim=1"));
  return m;
}

/* Batch-norm statistics away from 0 and 1, so that a wrong mapping shows. */
static void perturb_buffers(torc_module *m) {
  torc_named_tensor *list = NULL;
  int n = torc_module_named_buffers(m, 1, &list);
  assert_true(n >= 0);
  for (int i = 0; i < n; i++) {
    torc_tensor *t = list[i].tensor;
    if (torc_dtype_of(t) != TORC_F32)
      continue;
    torc_tensor *r = torc_rand(torc_shape(t), torc_ndim(t), TORC_F32,
                               TORC_CPU, NULL);
    assert_non_null(r);
    if (strstr(list[i].name, "running_var")) {
      torc_tensor *h = torc_full(torc_shape(t), torc_ndim(t), 0.5, TORC_F32,
                                 TORC_CPU);
      torc_tensor *s = torc_add(r, h);
      assert_int_equal(torc_copy_(t, s), 0);
      torc_release(h);
      torc_release(s);
    } else {
      assert_int_equal(torc_copy_(t, r), 0);
    }
    torc_release(r);
  }
  torc_named_tensors_free(list, n);
}

/* Exports m traced on x (opset `opset`) and runs the model on x2 with
 * torc's interpreter; asserts the result equals m's eager forward on x2.
 * Returns the model (the caller frees it). */
static torc_onnx_model *roundtrip(torc_module *m, torc_tensor *x,
                                  torc_tensor *x2, int opset) {
  torc_onnx_export_options o = {.opset = opset};
  void *buf = NULL;
  size_t len = 0;
  assert_ok(torc_onnx_export_buffer(m, (const torc_tensor *const *)&x, 1, &o,
                                    &buf, &len));
  assert_non_null(buf);
  torc_onnx_model *om = torc_onnx_load_buffer(buf, len, "exported");
  free(buf);
  assert_torc(om);
  assert_int_equal(torc_onnx_opset(om), opset ? opset : 17);
  assert_int_equal(torc_onnx_n_inputs(om), 1);
  assert_string_equal(torc_onnx_input_name(om, 0), "input");
  assert_string_equal(torc_onnx_output_name(om, 0), "output");
  assert_ok(torc_onnx_check(om));
  torc_tensor *got = NULL;
  assert_ok(torc_onnx_run(om, (const torc_tensor *const *)&x2, 1, NULL, &got,
                          1));
  torc_module_train(m, 0);
  torc_grad_mode mode = torc_set_grad_mode(TORC_INFERENCE);
  torc_tensor *want = torc_module_forward(m, x2);
  torc_set_grad_mode(mode);
  assert_non_null(want);
  assert_int_equal(torc_ndim(got), torc_ndim(want));
  assert_memory_equal(torc_shape(got), torc_shape(want),
                      (size_t)torc_ndim(want) * sizeof(int64_t));
  test_assert_close(got, want, 1e-5);
  torc_release(got);
  torc_release(want);
  return om;
}

static int has_init(const torc_onnx_model *om, const char *name) {
  for (int i = 0; i < torc_onnx_n_initializers(om); i++)
    if (strcmp(torc_onnx_initializer_name(om, i), name) == 0)
      return 1;
  return 0;
}

static void test_export_mlp(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(5, 4), TORC_F32, TORC_CPU, NULL);
  for (int opset = 13; opset <= 17; opset++) {
    torc_onnx_model *om = roundtrip(m, x, x2, opset);
    /* The weights by their state-dict names, as stored (not transposed). */
    assert_true(has_init(om, "0.weight") && has_init(om, "0.bias") &&
                has_init(om, "2.weight") && has_init(om, "2.bias"));
    static const int64_t stored[2] = {8, 4};
    for (int i = 0; i < torc_onnx_n_initializers(om); i++)
      if (strcmp(torc_onnx_initializer_name(om, i), "0.weight") == 0)
        assert_memory_equal(torc_shape(torc_onnx_initializer(om, i)), stored,
                            sizeof stored);
    torc_onnx_free(om);
  }
  torc_release(x);
  torc_release(x2);
  torc_module_free(m);
}

static void test_export_cnn(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  append(m, torc_module_build("conv2d", "in_channels=2 out_channels=4 "
                                        "kernel=3 padding=1 stride=1"));
  append(m, torc_module_build("batchnorm2d", "num_features=4"));
  append(m, torc_module_build("relu", ""));
  append(m, torc_module_build("maxpool2d", "kernel=2"));
  append(m, torc_module_build("conv2d", "in_channels=4 out_channels=6 "
                                        "kernel=3 padding=1 bias=no"));
  append(m, torc_module_build("avgpool2d", "kernel=2"));
  append(m, torc_module_build("adaptive_avgpool2d", "output_size=1"));
  append(m, torc_flatten_new(1, -1));
  append(m, torc_linear_new(6, 3, 1));
  perturb_buffers(m);
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 2, 8, 8), TORC_F32, TORC_CPU,
                              NULL);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(3, 2, 8, 8), TORC_F32, TORC_CPU,
                               NULL);
  torc_onnx_free(roundtrip(m, x, x2, 0));
  torc_onnx_free(roundtrip(m, x, x2, 13));
  torc_release(x);
  torc_release(x2);
  torc_module_free(m);
}

/* x + linear(relu(linear(x))), through a skip node, then layer norm (a
 * LayerNormalization node at 17, its formula before). */
static void test_export_residual(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  append(m, torc_linear_new(4, 4, 1));
  append(m, torc_module_build("relu", ""));
  append(m, torc_linear_new(4, 4, 1));
  append(m, torc_add_node_new(-4));
  append(m, torc_module_build("layernorm", "normalized_shape=4"));
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(6, 4), TORC_F32, TORC_CPU, NULL);
  torc_onnx_free(roundtrip(m, x, x2, 17));
  torc_onnx_free(roundtrip(m, x, x2, 16));
  torc_release(x);
  torc_release(x2);
  torc_module_free(m);
}

/* A concatenation (copies into slices of one tensor: a Concat), group
 * norm (a formula), PReLU (a broadcast constant and Where). */
static void test_export_concat(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  append(m, torc_module_build("conv2d", "in_channels=2 out_channels=4 "
                                        "kernel=3 padding=1"));
  append(m, torc_module_build("groupnorm", "groups=2 num_channels=4"));
  append(m, torc_module_build("prelu", "num_parameters=4"));
  append(m, torc_module_build("concat", "from=-2"));
  append(m, torc_module_build("conv2d", "in_channels=8 out_channels=2 "
                                        "kernel=1"));
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 2, 5, 5), TORC_F32, TORC_CPU,
                              NULL);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(3, 2, 5, 5), TORC_F32, TORC_CPU,
                               NULL);
  torc_onnx_free(roundtrip(m, x, x2, 13));
  torc_onnx_free(roundtrip(m, x, x2, 17));
  torc_release(x);
  torc_release(x2);
  torc_module_free(m);
}

/* Activations that map to one op or a formula, by opset. */
static void test_export_activations(void **state) {
  (void)state;
  static const char *const layers[] = {
      "sigmoid", "tanh", "gelu", "silu", "elu", "leaky_relu", "softplus",
      "hardswish", "hardsigmoid", "selu", "mish", "softsign", "relu6",
      "softmax"};
  torc_module *m = torc_sequential_new();
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
    append(m, torc_module_build(layers[i], ""));
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 6), TORC_F32, TORC_CPU, NULL);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(4, 6), TORC_F32, TORC_CPU, NULL);
  torc_onnx_free(roundtrip(m, x, x2, 13));
  torc_onnx_free(roundtrip(m, x, x2, 17));
  torc_release(x);
  torc_release(x2);
  torc_module_free(m);
}

/* A forward with two kernels ONNX has no form for (random draws). */
static torc_tensor *noisy_forward(torc_module *m,
                                  const torc_tensor *const *in, int n_in) {
  (void)m;
  (void)n_in;
  torc_tensor *a = torc_rand(torc_shape(in[0]), torc_ndim(in[0]), TORC_F32,
                             TORC_CPU, NULL);
  torc_tensor *b = torc_randn(torc_shape(in[0]), torc_ndim(in[0]), TORC_F32,
                              TORC_CPU, NULL);
  /* The scope the core opens around a forward owns the results. */
  return torc_add(in[0], torc_add(a, b));
}

static const torc_module_vtable noisy_vt = {sizeof(torc_module_vtable),
                                            noisy_forward, NULL, NULL, NULL};

static void test_export_unmapped(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  append(m, torc_linear_new(4, 4, 1));
  append(m, torc_module_new("noisy", &noisy_vt, NULL));
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  void *buf = (void *)1;
  size_t len = 1;
  assert_int_equal(torc_onnx_export_buffer(m, (const torc_tensor *const *)&x,
                                           1, NULL, &buf, &len),
                   TORC_ERR_UNSUPPORTED);
  assert_null(buf);
  assert_int_equal(len, 0);
  const char *e = torc_last_error();
  assert_contains(e, "2 nodes of the traced forward cannot be written");
  assert_contains(e, "uniform_ in module '1'");
  assert_contains(e, "normal_ in module '1'");
  assert_contains(e, "docs/export.md");
  torc_release(x);
  torc_module_free(m);
}

static void test_export_errors(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  const torc_tensor *const *in = (const torc_tensor *const *)&x;
  void *buf = NULL;
  size_t len = 0;
  for (int opset = 12; opset <= 18; opset += 6) {
    torc_onnx_export_options o = {.opset = opset};
    assert_int_equal(torc_onnx_export_buffer(m, in, 1, &o, &buf, &len),
                     TORC_ERR_RANGE);
    char want[64];
    snprintf(want, sizeof want, "opset %d is outside", opset);
    assert_contains(torc_last_error(), want);
    assert_contains(torc_last_error(), "13 to 17");
  }
  assert_int_equal(torc_onnx_export_buffer(NULL, in, 1, NULL, &buf, &len),
                   TORC_ERR_NULL);
  assert_int_equal(torc_onnx_export_buffer(m, in, 0, NULL, &buf, &len),
                   TORC_ERR_INVALID);

  char dir[256], path[512];
  assert_int_equal(test_make_tmpdir(dir, sizeof dir, "onnx-export"), 0);
  snprintf(path, sizeof path, "%s/no/such/model.onnx", dir);
  assert_int_equal(torc_onnx_export(m, in, 1, NULL, path), TORC_ERR_IO);
  assert_contains(torc_last_error(), "cannot write");
  assert_contains(torc_last_error(), path);
  /* A folder in the file's place: the rename fails, no temporary stays. */
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  assert_int_equal(mkdir(path, 0755), 0);
  assert_int_equal(torc_onnx_export(m, in, 1, NULL, path), TORC_ERR_IO);
  assert_contains(torc_last_error(), "nothing was written");
  assert_int_equal(rmdir(path), 0);
  assert_int_equal(rmdir(dir), 0); /* empty: no temporary file left */
  /* And a good write, read back from the file. */
  assert_int_equal(test_make_tmpdir(dir, sizeof dir, "onnx-export"), 0);
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  assert_ok(torc_onnx_export(m, in, 1, NULL, path));
  torc_onnx_model *om = torc_onnx_load(path);
  assert_torc(om);
  assert_ok(torc_onnx_check(om));
  torc_onnx_free(om);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
  torc_release(x);
  torc_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_export_mlp, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_export_cnn, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_export_residual, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_export_concat, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_export_activations,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_export_unmapped, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_export_errors, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
