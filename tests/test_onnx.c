/* tests/test_onnx.c — the ONNX reader's errors (garbage, truncated, bad
 * dims, overflowing dims, raw_data of the wrong length, an unsupported
 * element type, external data, an undefined input, unsupported operators)
 * on protobuf messages encoded here by hand, and a small model run. */
#include "onnx_testutil.h"

/* A model of the given opset: input x, initializer (the given TensorProto)
 * w, and the nodes (op, in0, in1, out) in order, output `out`. */
static void model_at(buf *o, int opset, const buf *init,
                     const char *const (*nodes)[4], int n_nodes,
                     const char *out) {
  buf g = {{0}, 0}, t;
  for (int i = 0; i < n_nodes; i++) {
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
  if (init)
    f_msg(&g, 5, init);
  t.n = 0;
  f_str(&t, 1, "x");
  f_msg(&g, 11, &t);
  t.n = 0;
  f_str(&t, 1, out);
  f_msg(&g, 12, &t);
  o->n = 0;
  f_int(o, 1, 8);
  buf op = {{0}, 0};
  f_str(&op, 1, "");
  f_int(&op, 2, opset);
  f_msg(o, 8, &op);
  f_msg(o, 7, &g);
}

/* The same at opset 13. */
static void model(buf *o, const buf *init, const char *const (*nodes)[4],
                  int n_nodes, const char *out) {
  model_at(o, 13, init, nodes, n_nodes, out);
}

/* TensorProto "w" of FLOAT with dims and raw_data of raw_len bytes. */
static void tensor(buf *o, int dtype, const int64_t *dims, int nd,
                   const float *raw, size_t raw_len) {
  o->n = 0;
  for (int i = 0; i < nd; i++)
    f_int(o, 1, dims[i]);
  f_int(o, 2, dtype);
  f_str(o, 8, "w");
  if (raw)
    f_bytes(o, 9, raw, raw_len);
}

static const char *const add_relu[2][4] = {{"Add", "x", "w", "y"},
                                           {"Relu", "y", NULL, "z"}};

static void expect_load_error(const buf *m, torc_status st, const char *msg) {
  torc_onnx_model *md = torc_onnx_load_buffer(m->b, m->n, "t.onnx");
  assert_null(md);
  assert_error(st, msg);
}

static void test_bad_files(void **state) {
  (void)state;
  const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 'g', 'a', 'r'};
  assert_null(torc_onnx_load_buffer(garbage, sizeof garbage, "g.onnx"));
  assert_error(TORC_ERR_INVALID, "'g.onnx' is not an ONNX model");
  buf t, m;
  float w[2] = {1, -3};
  tensor(&t, 1, (const int64_t[]){2}, 1, w, sizeof w);
  model(&m, &t, add_relu, 2, "z");
  assert_null(torc_onnx_load_buffer(m.b, m.n / 2, "t.onnx"));
  assert_error(TORC_ERR_INVALID, "is not an ONNX model");
  assert_null(torc_onnx_load("/nonexistent/m.onnx"));
  assert_error(TORC_ERR_IO, "cannot open ONNX file '/nonexistent/m.onnx'");
}

static void test_bad_tensors(void **state) {
  (void)state;
  buf t, m;
  float w[2] = {1, -3};
  tensor(&t, 1, (const int64_t[]){-2}, 1, w, sizeof w);
  model(&m, &t, add_relu, 2, "z");
  expect_load_error(&m, TORC_ERR_INVALID, "tensor 'w' has a negative dim -2");
  tensor(&t, 1, (const int64_t[]){INT64_C(1) << 40, INT64_C(1) << 40}, 2, w,
         sizeof w);
  model(&m, &t, add_relu, 2, "z");
  expect_load_error(&m, TORC_ERR_INVALID, "dims whose product is too large");
  tensor(&t, 1, (const int64_t[]){3}, 1, w, sizeof w);
  model(&m, &t, add_relu, 2, "z");
  expect_load_error(&m, TORC_ERR_INVALID,
                    "has 8 bytes of raw_data, but its dims give 3 elements");
  tensor(&t, 3, (const int64_t[]){2}, 1, w, 2);
  model(&m, &t, add_relu, 2, "z");
  expect_load_error(&m, TORC_ERR_UNSUPPORTED, "element type INT8 (3)");
  tensor(&t, 1, (const int64_t[]){2}, 1, NULL, 0);
  f_int(&t, 14, 1);
  model(&m, &t, add_relu, 2, "z");
  expect_load_error(&m, TORC_ERR_UNSUPPORTED, "external file");
}

static void test_graph_errors(void **state) {
  (void)state;
  buf t, m;
  float w[2] = {1, -3};
  tensor(&t, 1, (const int64_t[]){2}, 1, w, sizeof w);
  const char *const undefined[1][4] = {{"Relu", "q", NULL, "z"}};
  model(&m, &t, undefined, 1, "z");
  torc_onnx_model *md = torc_onnx_load_buffer(m.b, m.n, "t.onnx");
  assert_non_null(md);
  assert_int_equal(torc_onnx_check(md), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "node z (Relu) reads 'q', which no earlier");
  torc_onnx_free(md);
  const char *const unsup[3][4] = {{"Foo", "x", NULL, "a"},
                                   {"Bar", "a", NULL, "b"},
                                   {"Foo", "b", NULL, "z"}};
  model(&m, &t, unsup, 3, "z");
  assert_non_null(md = torc_onnx_load_buffer(m.b, m.n, "t.onnx"));
  assert_int_equal(torc_onnx_check(md), TORC_ERR_UNSUPPORTED);
  assert_error(TORC_ERR_UNSUPPORTED,
               "unsupported ONNX operators at opset 13: Foo (node a), Foo "
               "(node z), Bar (node b)");
  torc_onnx_free(md);
}

static void test_run(void **state) {
  (void)state;
  buf t, m;
  float w[2] = {1, -3};
  tensor(&t, 1, (const int64_t[]){2}, 1, w, sizeof w);
  model(&m, &t, add_relu, 2, "z");
  int64_t live = torc_tensor_live_count();
  torc_onnx_model *md = torc_onnx_load_buffer(m.b, m.n, "t.onnx");
  assert_non_null(md);
  assert_int_equal(torc_onnx_opset(md), 13);
  assert_int_equal(torc_onnx_n_inputs(md), 1);
  assert_string_equal(torc_onnx_input_name(md, 0), "x");
  assert_string_equal(torc_onnx_initializer_name(md, 0), "w");
  float xv[2] = {0.5f, 2.5f};
  torc_tensor *x = torc_from_host(xv, TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_tensor *z = NULL;
  assert_ok(torc_onnx_run(md, (const torc_tensor *const *)&x, 1, NULL, &z, 1));
  float zv[2];
  assert_ok(torc_to_host(z, zv, sizeof zv));
  assert_true(zv[0] == 1.5f && zv[1] == 0.0f);
  torc_release(z);
  /* a wrong input count is one message */
  assert_int_equal(torc_onnx_run(md, NULL, 0, NULL, &z, 1), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "takes 1 inputs and gives 1 outputs");
  torc_release(x);
  torc_onnx_free(md);
  assert_int_equal(torc_tensor_live_count(), live);
}

/* Before opset 5 Reshape takes its shape as an attribute; a node without
 * one is a bad model, said as such when it runs. */
static void test_old_reshape_without_shape(void **state) {
  (void)state;
  buf m;
  const char *const reshape[1][4] = {{"Reshape", "x", NULL, "z"}};
  model_at(&m, 4, NULL, reshape, 1, "z");
  int64_t live = torc_tensor_live_count();
  torc_onnx_model *md = torc_onnx_load_buffer(m.b, m.n, "t.onnx");
  assert_non_null(md);
  float xv[2] = {0.5f, 2.5f};
  torc_tensor *x = torc_from_host(xv, TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_tensor *z = NULL;
  assert_int_equal(
      torc_onnx_run(md, (const torc_tensor *const *)&x, 1, NULL, &z, 1),
      TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "Reshape of opset 4 has no 'shape' attribute");
  assert_null(z);
  torc_release(x);
  torc_onnx_free(md);
  assert_int_equal(torc_tensor_live_count(), live);
}

static int setup(void **state) { return test_setup_ref_sim(state); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_bad_tensors),
      cmocka_unit_test(test_graph_errors),
      cmocka_unit_test(test_run),
      cmocka_unit_test(test_old_reshape_without_shape),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
