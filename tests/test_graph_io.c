/* tests/test_graph_io.c — torc_graph_save and torc_graph_load
 * (torc/graph.h): graphs written and read back run equal to the eager
 * forward bit for bit (an MLP, a checked CNN at another batch, a forward
 * with a constant), and damaged or hostile files (truncated, garbage, bad
 * JSON, an index out of range, an unknown op, huge dims, params of the
 * wrong size, a module without the graph's parameters) are each one error
 * with a message, never a crash or a leak. */
#include "testutil.h"

static char dir[512];

static int group_setup(void **state) {
  if (test_make_tmpdir(dir, sizeof dir, "test_graph_io"))
    return -1;
  return test_setup_ref_sim(state);
}

static int group_teardown(void **state) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "teardown: could not remove %s\n", dir);
  return test_teardown_all(state);
}

/* dir/name into a static buffer. */
static const char *path_of(const char *name) {
  static char buf[600];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

static torc_module *mlp_new(int hidden) {
  torc_module *m = torc_sequential_new();
  assert_int_equal(torc_sequential_append(m, torc_linear_new(4, hidden, 1)),
                   0);
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  assert_int_equal(torc_sequential_append(m, torc_linear_new(hidden, 3, 1)),
                   0);
  return m;
}

/* Asserts g run on x equals m's eager forward (eval, inference) bit for
 * bit. */
static void assert_run_equal(torc_module *m, const torc_graph *g,
                             torc_tensor *x) {
  torc_module_train(m, 0);
  torc_grad_mode mode = torc_set_grad_mode(TORC_INFERENCE);
  torc_tensor *want = torc_module_forward(m, x);
  torc_set_grad_mode(mode);
  assert_non_null(want);
  torc_tensor *got = NULL;
  torc_status st =
      torc_graph_run(g, (const torc_tensor *const *)&x, 1, &got, 1);
  if (st)
    fprintf(stderr, "%s\n", torc_last_error());
  assert_int_equal(st, 0);
  assert_int_equal(torc_ndim(got), torc_ndim(want));
  assert_memory_equal(torc_shape(got), torc_shape(want),
                      (size_t)torc_ndim(want) * sizeof(int64_t));
  assert_memory_equal(torc_data(got), torc_data(want),
                      (size_t)torc_numel(want) * sizeof(float));
  torc_release(got);
  torc_release(want);
}

/* Traces m on x and saves it to `name`. */
static void save_traced(torc_module *m, const int64_t *shape, int ndim,
                        const char *name) {
  torc_tensor *x = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  assert_int_equal(torc_graph_save(g, path_of(name)), 0);
  torc_graph_free(g);
  torc_release(x);
}

static torc_graph *load_ok(const char *name, torc_module *m) {
  torc_graph *g = NULL;
  torc_status st = torc_graph_load(path_of(name), m, &g);
  if (st)
    fprintf(stderr, "%s\n", torc_last_error());
  assert_int_equal(st, 0);
  assert_non_null(g);
  return g;
}

/* The JSON of a saved graph, malloc'ed. */
static char *graph_text(const char *name) {
  torc_safetensors *st = torc_safetensors_open(path_of(name));
  assert_non_null(st);
  const char *t = torc_safetensors_metadata(st, "torc.graph");
  assert_non_null(t);
  char *s = strdup(t);
  torc_safetensors_close(st);
  return s;
}

/* text with its first `from` replaced by `to` (which must be there),
 * saved as a graph file `name` without tensors. */
static void save_edited(const char *text, const char *from, const char *to,
                        const char *name) {
  const char *at = strstr(text, from);
  if (at == NULL)
    fail_msg("\"%s\" not in %s", from, text);
  size_t n = strlen(text) + strlen(to) + 1;
  char *s = malloc(n);
  assert_non_null(s);
  snprintf(s, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
  const char *key = "torc.graph", *val = s;
  assert_int_equal(
      torc_safetensors_save(path_of(name), NULL, NULL, 0, &key, &val, 1), 0);
  free(s);
}

static void test_round_trip_mlp(void **state) {
  (void)state;
  torc_module *m = mlp_new(8);
  save_traced(m, TORC_SHAPE(2, 4), "mlp.graph");
  torc_graph *g = load_ok("mlp.graph", m);
  assert_int_equal(torc_graph_n_nodes(g), 5);
  assert_string_equal(torc_graph_node_op(g, 0), "matmul");
  assert_string_equal(torc_graph_node_module(g, 4), "2");
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  assert_run_equal(m, g, x);
  /* Bound by name: the replay follows the module's weights. */
  torc_named_tensor *ps = NULL;
  int n = torc_module_named_parameters(m, &ps);
  assert_true(n == 4);
  ((float *)torc_data(ps[0].tensor))[0] += 1.0f;
  torc_named_tensors_free(ps, n);
  assert_run_equal(m, g, x);
  torc_release(x);
  torc_graph_free(g);
  torc_module_free(m);
}

static void test_round_trip_checked_cnn(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("conv2d",
                                                  "in_channels=1 "
                                                  "out_channels=4 kernel=3 "
                                                  "padding=1")),
      0);
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("batchnorm2d",
                                                  "num_features=4")),
      0);
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("maxpool2d", "kernel=2")),
      0);
  assert_int_equal(torc_sequential_append(m, torc_flatten_new(1, -1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_linear_new(64, 5, 1)), 0);
  torc_tensor *xa = torc_randn(TORC_SHAPE(2, 1, 8, 8), TORC_F32, TORC_CPU,
                               NULL);
  torc_tensor *xb = torc_randn(TORC_SHAPE(3, 1, 8, 8), TORC_F32, TORC_CPU,
                               NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace_check(m, (const torc_tensor *const *)&xa,
                                    (const torc_tensor *const *)&xb, 1, &g),
                   0);
  assert_int_equal(torc_graph_save(g, path_of("cnn.graph")), 0);
  /* Saving again over it is atomic and gives the same bytes. */
  size_t n1, n2;
  unsigned char *b1 = test_read_file(path_of("cnn.graph"), &n1);
  assert_int_equal(torc_graph_save(g, path_of("cnn.graph")), 0);
  unsigned char *b2 = test_read_file(path_of("cnn.graph"), &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(b1, b2, n1);
  free(b1);
  free(b2);
  torc_graph_free(g);
  g = load_ok("cnn.graph", m);
  torc_tensor *x = torc_randn(TORC_SHAPE(5, 1, 8, 8), TORC_F32, TORC_CPU,
                              NULL);
  assert_run_equal(m, g, x);
  /* Bytes changed all through the file: an error, or a graph that runs
   * or fails with an error. */
  size_t n;
  unsigned char *bytes = test_read_file(path_of("cnn.graph"), &n);
  for (size_t i = 8; i < n; i += 29) {
    unsigned char keep = bytes[i];
    bytes[i] = (unsigned char)(keep ^ (1u << (i % 8)));
    test_write_file(path_of("flip.graph"), bytes, n);
    bytes[i] = keep;
    torc_graph *fg = NULL;
    if (torc_graph_load(path_of("flip.graph"), m, &fg) != TORC_OK) {
      assert_null(fg);
      continue;
    }
    torc_tensor *y = NULL;
    if (torc_graph_run(fg, (const torc_tensor *const *)&x, 1, &y, 1) ==
        TORC_OK)
      torc_release(y);
    else
      assert_null(y);
    torc_graph_free(fg);
  }
  free(bytes);
  /* The conv's output grown in the file: its kernel would overrun. */
  char *text = graph_text("cnn.graph");
  save_edited(text, "\"shape\":[2,4,8,8]", "\"shape\":[2,4,9,8]",
              "badcnn.graph");
  free(text);
  torc_graph *bad = (torc_graph *)1;
  assert_error(torc_graph_load(path_of("badcnn.graph"), m, &bad),
               "node 0 (conv2d): its output size is not the convolution's");
  assert_null(bad);
  torc_release(x);
  torc_graph_free(g);
  torc_release(xa);
  torc_release(xb);
  torc_module_free(m);
}

/* "shifted": x + a tensor the module holds without registering it, which
 * the graph keeps as a constant. */
static torc_tensor *shifted_forward(torc_module *m,
                                    const torc_tensor *const *in, int n_in) {
  (void)n_in;
  return torc_add(in[0], (torc_tensor *)torc_module_state(m));
}

static void shifted_destroy(torc_module *m) {
  torc_release((torc_tensor *)torc_module_state(m));
}

static const torc_module_vtable shifted_vt = {
    sizeof(torc_module_vtable), shifted_forward, shifted_destroy, NULL, NULL};

static void test_round_trip_constant(void **state) {
  (void)state;
  torc_tensor *c = torc_randn(TORC_SHAPE(4), TORC_F32, TORC_CPU, NULL);
  torc_module *m = torc_module_new("shifted", &shifted_vt, c);
  assert_non_null(m);
  save_traced(m, TORC_SHAPE(3, 4), "const.graph");
  torc_safetensors *st = torc_safetensors_open(path_of("const.graph"));
  assert_non_null(st);
  assert_int_equal(torc_safetensors_count(st), 1);
  assert_non_null(torc_safetensors_metadata(st, "torc.graph"));
  torc_safetensors_close(st);
  torc_graph *g = load_ok("const.graph", m);
  torc_tensor *x = torc_randn(TORC_SHAPE(3, 4), TORC_F32, TORC_CPU, NULL);
  assert_run_equal(m, g, x);
  torc_release(x);
  torc_graph_free(g);
  /* Checked: the constant is broadcast over the batch, saved as one row,
   * and runs at another batch. */
  torc_tensor *xa = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *xb = torc_randn(TORC_SHAPE(3, 4), TORC_F32, TORC_CPU, NULL);
  assert_int_equal(torc_trace_check(m, (const torc_tensor *const *)&xa,
                                    (const torc_tensor *const *)&xb, 1, &g),
                   0);
  x = torc_randn(TORC_SHAPE(5, 4), TORC_F32, TORC_CPU, NULL);
  assert_run_equal(m, g, x);
  assert_int_equal(torc_graph_save(g, path_of("bconst.graph")), 0);
  torc_graph_free(g);
  torc_dtype dt;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  st = torc_safetensors_open(path_of("bconst.graph"));
  assert_non_null(st);
  assert_int_equal(torc_safetensors_count(st), 1);
  assert_int_equal(torc_safetensors_info(st, torc_safetensors_name(st, 0),
                                         &dt, &ndim, shape),
                   0);
  assert_int_equal(ndim, 2);
  assert_int_equal(shape[0], 1);
  assert_int_equal(shape[1], 4);
  torc_safetensors_close(st);
  g = load_ok("bconst.graph", m);
  assert_run_equal(m, g, x);
  assert_run_equal(m, g, xa);
  torc_graph_free(g);
  torc_release(x);
  torc_release(xa);
  torc_release(xb);
  torc_module_free(m);
}

/* Loading `name` into m fails with a message containing needle. */
static void assert_load_fails(const char *name, torc_module *m,
                              const char *needle) {
  torc_graph *g = (torc_graph *)1;
  assert_error(torc_graph_load(path_of(name), m, &g), needle);
  assert_null(g);
}

/* An op whose shapes the loader cannot verify is refused, by name. */
static void test_unverifiable_op(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  assert_int_equal(torc_sequential_append(m, torc_adaptive_avgpool2d_new(1, 1)),
                   0);
  save_traced(m, TORC_SHAPE(2, 3, 4, 4), "adaptive.graph");
  assert_load_fails("adaptive.graph", m,
                    "(adaptive_avg_pool2d): torc cannot verify this op's "
                    "shapes, so a saved graph may not hold it");
  torc_module_free(m);
}

static void test_hostile(void **state) {
  (void)state;
  torc_module *m = mlp_new(8);
  save_traced(m, TORC_SHAPE(2, 4), "good.graph");
  char *text = graph_text("good.graph");
  /* Bad JSON. */
  save_edited(text, "{", "{oops", "bad.graph");
  assert_load_fails("bad.graph", m, "the graph's JSON is malformed at line 1");
  /* A node reading a value past the last. */
  save_edited(text, "\"ins\":[", "\"ins\":[999,", "bad.graph");
  assert_load_fails("bad.graph", m, "node 0: \"ins\"[0] is out of range");
  /* An unknown op. */
  save_edited(text, "\"op\":\"relu\"", "\"op\":\"frobnicate\"", "bad.graph");
  assert_load_fails("bad.graph", m, "op \"frobnicate\" is not an op");
  /* Huge dims, and a shape whose product overflows. */
  save_edited(text, "\"shape\":[2,4]", "\"shape\":[2,4000000000000000]",
              "bad.graph");
  assert_load_fails("bad.graph", m, "value 0: \"shape\"[1] is out of range");
  save_edited(text, "\"shape\":[2,4]",
              "\"shape\":[1099511627776,1099511627776]", "bad.graph");
  assert_load_fails("bad.graph", m, "elements or more");
  /* Params of the wrong size: relu takes none. */
  save_edited(text, "\"op\":\"relu\",\"params\":\"\"",
              "\"op\":\"relu\",\"params\":\"00\"", "bad.graph");
  assert_load_fails("bad.graph", m,
                    "params are 2 hex digits; the op's params struct takes "
                    "0 bytes");
  /* A node whose shapes its kernel would overrun: relu's output grown. */
  save_edited(text,
              "\"shape\":[2,8],\"batch_mask\":0},{\"role\":\"result\","
              "\"dtype\":\"f32\",\"shape\":[2,8]",
              "\"shape\":[2,8],\"batch_mask\":0},{\"role\":\"result\","
              "\"dtype\":\"f32\",\"shape\":[2,80]",
              "bad.graph");
  assert_load_fails("bad.graph", m,
                    "node 2 (relu): its inputs and outputs differ in shape");
  /* A role unknown, an output out of range, another version. */
  save_edited(text, "\"role\":\"result\"", "\"role\":\"wizard\"", "bad.graph");
  assert_load_fails("bad.graph", m, "role \"wizard\" is not");
  save_edited(text, "\"output\":", "\"output\":-5,\"x\":", "bad.graph");
  assert_load_fails("bad.graph", m, "\"output\" is -5, outside");
  save_edited(text, "\"batch_checked\":0,\"batch\":0", "\"batch_checked\":1",
              "bad.graph");
  assert_load_fails("bad.graph", m, "\"batch\" is missing");
  save_edited(text, "\"version\":1", "\"version\":7", "bad.graph");
  assert_load_fails("bad.graph", m, "\"version\" is 7");
  /* A module without the graph's parameters, or with other shapes. */
  torc_module *other = mlp_new(9);
  assert_load_fails("good.graph", other,
                    "the module's \"0.weight\" is f32[9, 4] but the graph "
                    "has f32[8, 4]; build the module with the traced sizes");
  torc_module_free(other);
  other = torc_sequential_new();
  assert_load_fails("good.graph", other,
                    "the parameter or buffer \"0.weight\" (f32[8, 4]), which "
                    "the module has not");
  torc_module_free(other);
  /* Not a graph file; garbage; missing. */
  torc_tensor *t = torc_zeros(TORC_SHAPE(2), TORC_F32, TORC_CPU);
  const char *tn = "w";
  assert_int_equal(torc_safetensors_save(path_of("plain.st"), &tn,
                                         (const torc_tensor *const *)&t, 1,
                                         NULL, NULL, 0),
                   0);
  torc_release(t);
  assert_load_fails("plain.st", m, "not a graph file");
  unsigned char junk[200];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (unsigned char)(i * 37 + 11);
  test_write_file(path_of("junk.graph"), junk, sizeof junk);
  assert_load_fails("junk.graph", m, "junk.graph");
  assert_load_fails("missing.graph", m, "missing.graph");
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  /* Every truncation of a good file fails cleanly. */
  size_t n;
  unsigned char *bytes = test_read_file(path_of("good.graph"), &n);
  for (size_t len = 0; len < n; len += 7) {
    test_write_file(path_of("cut.graph"), bytes, len);
    torc_graph *g = (torc_graph *)1;
    assert_int_not_equal(torc_graph_load(path_of("cut.graph"), m, &g), 0);
    assert_null(g);
  }
  /* Bytes changed through the header: an error or a graph, no crash. */
  for (size_t i = 8; i < n; i += 5) {
    unsigned char keep = bytes[i];
    bytes[i] = (unsigned char)(keep ^ 0x5a);
    test_write_file(path_of("flip.graph"), bytes, n);
    bytes[i] = keep;
    torc_graph *g = NULL;
    if (torc_graph_load(path_of("flip.graph"), m, &g) != TORC_OK) {
      assert_null(g);
      continue;
    }
    /* It loaded: running it gives a result or an error. */
    torc_tensor *y = NULL;
    if (torc_graph_run(g, (const torc_tensor *const *)&x, 1, &y, 1) ==
        TORC_OK)
      torc_release(y);
    else
      assert_null(y);
    torc_graph_free(g);
  }
  free(bytes);
  free(text);
  torc_release(x);
  torc_module_free(m);
}

/* A checked graph whose file loses a batch mask: it loads (its shapes
 * are right at the traced batch) but running it at another batch is an
 * error before any kernel sees the wrong shapes. */
static void test_hostile_masks(void **state) {
  (void)state;
  torc_module *m = mlp_new(8);
  torc_tensor *xa = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *xb = torc_randn(TORC_SHAPE(3, 4), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace_check(m, (const torc_tensor *const *)&xa,
                                    (const torc_tensor *const *)&xb, 1, &g),
                   0);
  assert_int_equal(torc_graph_save(g, path_of("checked.graph")), 0);
  torc_graph_free(g);
  char *text = graph_text("checked.graph");
  const char *r = "{\"role\":\"result\",\"dtype\":\"f32\",\"shape\":[2,8],";
  char from[300], to[300];
  snprintf(from, sizeof from, "%s\"batch_mask\":1},%s\"batch_mask\":1}", r,
           r);
  snprintf(to, sizeof to, "%s\"batch_mask\":1},%s\"batch_mask\":0}", r, r);
  save_edited(text, from, to, "mask.graph");
  g = load_ok("mask.graph", m);
  assert_run_equal(m, g, xa);
  torc_tensor *y = (torc_tensor *)1;
  assert_error(torc_graph_run(g, (const torc_tensor *const *)&xb, 1, &y, 1),
               "node 2 (relu) of the loaded graph: its inputs and outputs "
               "differ in shape at this batch");
  assert_null(y);
  torc_graph_free(g);
  free(text);
  torc_release(xa);
  torc_release(xb);
  torc_module_free(m);
}

static void test_io_errors(void **state) {
  (void)state;
  torc_graph *g = (torc_graph *)1;
  assert_int_equal(torc_graph_load(NULL, NULL, &g), TORC_ERR_NULL);
  assert_null(g);
  assert_int_equal(torc_graph_save(NULL, "x"), TORC_ERR_NULL);
  /* A folder that does not exist: an IO error naming it. */
  torc_module *m = mlp_new(8);
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  assert_error(torc_graph_save(g, path_of("no/such/dir/g.graph")),
               "no/such/dir");
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip_mlp, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_checked_cnn,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_constant,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_hostile, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_hostile_masks, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_io_errors, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_unverifiable_op, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
