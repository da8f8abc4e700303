/* tests/test_graph.c — torc_trace (torc/graph.h): the nodes recorded for
 * an MLP, a CNN and a residual block, their module paths, parameters bound
 * by name, the printed form, the modes restored, the replay equal to the
 * eager forward bit for bit, the activations the forward let go of not
 * kept, and the argument errors; torc_trace_check:
 * graphs that run at other batches, and forwards it rejects. */
#include "testutil.h"

/* The graph's printed form in a malloc'ed string. */
static char *printed(const torc_graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  torc_graph_print(g, f);
  fclose(f);
  return buf;
}

static torc_module *mlp_new(void) {
  torc_module *m = torc_sequential_new();
  assert_int_equal(torc_sequential_append(m, torc_linear_new(4, 8, 1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  assert_int_equal(torc_sequential_append(m, torc_linear_new(8, 3, 1)), 0);
  return m;
}

/* Replays g on x and asserts the result equals m's eager forward (eval,
 * inference) bit for bit. */
static void assert_replay_equal(torc_module *m, const torc_graph *g,
                                torc_tensor *x) {
  torc_module_train(m, 0);
  torc_grad_mode mode = torc_set_grad_mode(TORC_INFERENCE);
  torc_tensor *want = torc_module_forward(m, x);
  torc_set_grad_mode(mode);
  assert_non_null(want);
  torc_tensor *got = NULL;
  assert_int_equal(
      torc_graph_run(g, (const torc_tensor *const *)&x, 1, &got, 1), 0);
  assert_non_null(got);
  assert_int_equal(torc_ndim(got), torc_ndim(want));
  assert_memory_equal(torc_shape(got), torc_shape(want),
                      (size_t)torc_ndim(want) * sizeof(int64_t));
  assert_true(torc_is_contiguous(got) && torc_is_contiguous(want));
  assert_memory_equal(torc_data(got), torc_data(want),
                      (size_t)torc_numel(want) * sizeof(float));
  torc_release(got);
  torc_release(want);
}

static void test_trace_mlp(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_module_train(m, 1);
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  assert_non_null(g);
  assert_true(torc_module_is_training(m));
  int n = torc_graph_n_nodes(g);
  assert_true(n >= 3);
  assert_null(torc_graph_node_op(g, n));
  assert_null(torc_graph_node_op(g, -1));
  /* Every node ran inside one of the three layers, in their order. */
  int last = 0, seen_relu = 0;
  for (int i = 0; i < n; i++) {
    const char *path = torc_graph_node_module(g, i);
    int at = atoi(path);
    assert_true(path[0] >= '0' && path[0] <= '2');
    assert_true(at >= last);
    last = at;
    if (strcmp(torc_graph_node_op(g, i), "relu") == 0) {
      assert_string_equal(path, "1");
      seen_relu = 1;
    }
  }
  assert_true(seen_relu);
  assert_int_equal(last, 2);
  char *s = printed(g);
  assert_contains(s, "input 0: %0 f32[2,4]\n");
  assert_contains(s, "@0.weight");
  assert_contains(s, "@2.bias");
  assert_contains(s, "f32[2,3]  # 2\n");
  assert_contains(s, "relu(");
  free(s);
  /* On new data of the traced shape. */
  torc_tensor *x2 = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  assert_replay_equal(m, g, x2);
  torc_tensor *y = (torc_tensor *)1;
  torc_tensor *bad = torc_randn(TORC_SHAPE(3, 4), TORC_F32, TORC_CPU, NULL);
  assert_error(torc_graph_run(g, (const torc_tensor *const *)&bad, 1, &y, 1),
               "input 0 is f32[3, 4] but the graph was traced with "
               "f32[2, 4]");
  assert_null(y);
  torc_tensor *two[2];
  assert_error(torc_graph_run(g, (const torc_tensor *const *)&bad, 1, two, 2),
               "the graph takes 1 inputs and gives 1 output");
  assert_null(two[0]);
  assert_null(two[1]);
  torc_release(bad);
  torc_release(x2);
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

static void test_trace_cnn(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("conv2d",
                                                  "in_channels=1 "
                                                  "out_channels=4 kernel=3 "
                                                  "padding=1")),
      0);
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("maxpool2d", "kernel=2")),
      0);
  assert_int_equal(torc_sequential_append(m, torc_flatten_new(1, -1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_linear_new(64, 5, 1)), 0);
  torc_tensor *x = torc_randn(TORC_SHAPE(3, 1, 8, 8), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  char *s = printed(g);
  /* Params decoded by field. */
  assert_contains(s, "conv2d(%0, @0.weight, @0.bias) {stride=[1,1] "
                     "padding=[1,1] dilation=[1,1] groups=1} f32[3,4,8,8]");
  /* The relu runs after the pool (a sequential's order for the pair:
   * the same values, a quarter of the relu's work). */
  assert_contains(s, "max_pool2d(%3) {kernel=[2,2] stride=[2,2] "
                     "padding=[0,0] dilation=[1,1] ceil_mode=0} "
                     "f32[3,4,4,4], i64[3,4,4,4]  # 2\n");
  assert_contains(s, "f32[3,4,8,8]  # 0\n");
  assert_contains(s, "%6 = relu(%4) {} f32[3,4,4,4]  # 1\n");
  /* flatten: a view of the relu's output, read by the linear layer. */
  assert_contains(s, "= view(%6) {strides=[64,1] offset=0} f32[3,64]\n");
  assert_contains(s, "f32[3,5]  # 4\n");
  free(s);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(3, 1, 8, 8), TORC_F32, TORC_CPU,
                               NULL);
  assert_replay_equal(m, g, x2);
  torc_release(x2);
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

static size_t cpu_allocated(void) {
  torc_memory_stats2 st = {.struct_size = sizeof st};
  assert_int_equal(torc_device_memory_stats2(TORC_CPU, &st), 0);
  return st.allocated;
}

static size_t cpu_reserved(void) {
  torc_memory_stats2 st = {.struct_size = sizeof st};
  assert_int_equal(torc_device_memory_stats2(TORC_CPU, &st), 0);
  return st.reserved;
}

/* The graph does not keep the activations the forward let go of: after
 * the trace of a CNN at batch 64 only the result is still allocated (not
 * the convolution's, the pool's and the relu's outputs), the printed graph
 * still shows them, and the replay and a plan still equal the eager
 * forward. The flattened view keeps the relu's output while it lives. */
static void test_trace_frees(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("conv2d",
                                                  "in_channels=1 "
                                                  "out_channels=16 kernel=3 "
                                                  "padding=1")),
      0);
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("maxpool2d", "kernel=2")),
      0);
  assert_int_equal(torc_sequential_append(m, torc_flatten_new(1, -1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_linear_new(256, 5, 1)), 0);
  torc_tensor *x = torc_randn(TORC_SHAPE(64, 1, 8, 8), TORC_F32, TORC_CPU,
                              NULL);
  torc_device_empty_cache(TORC_CPU);
  size_t before = cpu_allocated(), held = cpu_reserved();
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  /* the conv's output alone: 64 x 16 x 8 x 8 f32 (256 KiB); nor does the
   * memory cache keep what the trace freed */
  assert_true(cpu_allocated() - before < (size_t)64 * 16 * 8 * 8 * 4);
  assert_true(cpu_reserved() - held < (size_t)64 * 16 * 8 * 8 * 4);
  char *s = printed(g);
  assert_contains(s, "f32[64,16,8,8]  # 0\n");
  assert_contains(s, "= view(%6) {strides=[256,1] offset=0} f32[64,256]\n");
  free(s);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(64, 1, 8, 8), TORC_F32, TORC_CPU,
                               NULL);
  assert_replay_equal(m, g, x2);
  torc_plan *p = NULL;
  assert_int_equal(torc_plan_new(g, 0, &p), 0);
  torc_tensor *got = NULL;
  assert_int_equal(
      torc_plan_run(p, (const torc_tensor *const *)&x2, 1, &got), 0);
  torc_grad_mode mode = torc_set_grad_mode(TORC_INFERENCE);
  torc_tensor *want = torc_module_forward(m, x2);
  torc_set_grad_mode(mode);
  assert_memory_equal(torc_data(got), torc_data(want),
                      (size_t)torc_numel(want) * sizeof(float));
  torc_release(got);
  torc_release(want);
  torc_plan_free(p);
  torc_release(x2);
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

/* A residual block: x + linear(relu(linear(x))), through a skip node. */
static void test_trace_residual(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  assert_int_equal(torc_sequential_append(m, torc_linear_new(4, 4, 1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  assert_int_equal(torc_sequential_append(m, torc_linear_new(4, 4, 1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_add_node_new(-4)), 0);
  torc_tensor *x = torc_randn(TORC_SHAPE(5, 4), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  int n = torc_graph_n_nodes(g);
  assert_string_equal(torc_graph_node_op(g, n - 1), "add");
  assert_string_equal(torc_graph_node_module(g, n - 1), "3");
  char *s = printed(g);
  assert_contains(s, ", %0) {} f32[5,4]  # 3\n");
  free(s);
  torc_tensor *x2 = torc_randn(TORC_SHAPE(5, 4), TORC_F32, TORC_CPU, NULL);
  assert_replay_equal(m, g, x2);
  torc_release(x2);
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

/* "retrace": a forward that starts a second trace of its child. */
static torc_status inner_status;
static char inner_message[256];
static torc_tensor *retrace_forward(torc_module *m,
                                    const torc_tensor *const *in, int n_in) {
  torc_graph *g = (torc_graph *)1;
  inner_status = torc_trace(torc_module_child(m, "inner"), in, n_in, &g);
  assert_null(g);
  snprintf(inner_message, sizeof inner_message, "%s", torc_last_error());
  return torc_module_forward(torc_module_child(m, "inner"), in[0]);
}

static const torc_module_vtable retrace_vt = {sizeof(torc_module_vtable),
                                              retrace_forward, NULL, NULL,
                                              NULL};

static void test_trace_nested(void **state) {
  (void)state;
  torc_module *m = torc_module_new("retrace", &retrace_vt, NULL);
  assert_non_null(m);
  assert_int_equal(torc_module_add_child(m, "inner", mlp_new()), 0);
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  assert_int_equal(inner_status, TORC_ERR_INVALID);
  assert_contains(inner_message, "a trace is already running");
  /* The outer trace records the inner module's nodes by their path. */
  assert_string_equal(torc_graph_node_module(g, 0), "inner.0");
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

static void test_trace_errors(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_graph *g = (torc_graph *)1;
  assert_error(torc_trace(m, NULL, 0, &g), "pass at least one example input");
  assert_null(g);
  /* A forward that fails: the graph is not returned, nothing leaks. */
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 5), TORC_F32, TORC_CPU, NULL);
  assert_int_not_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g),
                       0);
  assert_null(g);
  torc_release(x);
  torc_module_free(m);
}

/* An eager forward at x equals the checked graph's replay at x's batch. */
static void assert_runs_at(torc_module *m, const torc_graph *g,
                           const int64_t *shape, int ndim) {
  torc_tensor *x = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
  assert_replay_equal(m, g, x);
  torc_release(x);
}

/* torc_trace_check at batches a and b of an input shaped like `shape`
 * (dim 0 replaced); returns the graph. */
static torc_graph *check_at(torc_module *m, const int64_t *shape, int ndim,
                            int64_t a, int64_t b) {
  int64_t sa[8], sb[8];
  memcpy(sa, shape, (size_t)ndim * sizeof *sa);
  memcpy(sb, shape, (size_t)ndim * sizeof *sb);
  sa[0] = a;
  sb[0] = b;
  torc_tensor *xa = torc_randn(sa, ndim, TORC_F32, TORC_CPU, NULL);
  torc_tensor *xb = torc_randn(sb, ndim, TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  torc_status st = torc_trace_check(m, (const torc_tensor *const *)&xa,
                                    (const torc_tensor *const *)&xb, 1, &g);
  if (st)
    fprintf(stderr, "%s\n", torc_last_error());
  assert_int_equal(st, 0);
  assert_non_null(g);
  torc_release(xa);
  torc_release(xb);
  return g;
}

static void test_check_mlp(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_graph *g = check_at(m, TORC_SHAPE(2, 4), 2, 3);
  /* The first trace is kept: the graph prints at batch 2. */
  char *s = printed(g);
  assert_contains(s, "input 0: %0 f32[2,4]\n");
  free(s);
  assert_runs_at(m, g, TORC_SHAPE(7, 4));
  assert_runs_at(m, g, TORC_SHAPE(2, 4));
  assert_runs_at(m, g, TORC_SHAPE(1, 4));
  torc_tensor *bad = torc_randn(TORC_SHAPE(7, 5), TORC_F32, TORC_CPU, NULL);
  torc_tensor *y = (torc_tensor *)1;
  assert_error(torc_graph_run(g, (const torc_tensor *const *)&bad, 1, &y, 1),
               "input 0 is f32[7, 5] but the graph was traced with "
               "f32[2, 4] at batch 2");
  assert_null(y);
  torc_release(bad);
  torc_graph_free(g);
  torc_module_free(m);
}

static void test_check_cnn(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("conv2d",
                                                  "in_channels=2 "
                                                  "out_channels=4 kernel=3 "
                                                  "padding=1")),
      0);
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("batchnorm2d",
                                                  "num_features=4")),
      0);
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  assert_int_equal(
      torc_sequential_append(m, torc_module_build("maxpool2d", "kernel=2")),
      0);
  assert_int_equal(torc_sequential_append(m, torc_flatten_new(1, -1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_linear_new(64, 5, 1)), 0);
  torc_graph *g = check_at(m, TORC_SHAPE(2, 2, 8, 8), 2, 3);
  assert_runs_at(m, g, TORC_SHAPE(5, 2, 8, 8));
  assert_runs_at(m, g, TORC_SHAPE(1, 2, 8, 8));
  torc_graph_free(g);
  torc_module_free(m);
}

/* A layer norm whose weights its first forward creates: both traces bind
 * them by name. */
static void test_check_lazy(void **state) {
  (void)state;
  torc_module *m = torc_sequential_new();
  assert_int_equal(torc_sequential_append(m, torc_linear_new(4, 8, 1)), 0);
  assert_int_equal(
      torc_sequential_append(m, torc_layernorm_new(NULL, 0, 1e-5, 1)), 0);
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  torc_graph *g = check_at(m, TORC_SHAPE(2, 4), 2, 3);
  char *s = printed(g);
  assert_contains(s, "layer_norm(");
  assert_contains(s, "@1.weight");
  assert_contains(s, "{eps=1e-05}");
  free(s);
  assert_runs_at(m, g, TORC_SHAPE(6, 4));
  torc_graph_free(g);
  torc_module_free(m);
}

/* A forward that folds the batch into the rows: [B, 6] -> [3B, 2], a
 * linear layer on each row, and back to [B, 3*out]. */
static torc_tensor *fold_forward(torc_module *m, const torc_tensor *const *in,
                                 int n_in) {
  (void)n_in;
  int64_t b = torc_shape(in[0])[0];
  torc_tensor *rows = torc_reshape(in[0], TORC_SHAPE(3 * b, 2));
  torc_tensor *y = torc_module_forward(torc_module_child(m, "lin"), rows);
  return torc_reshape(y, TORC_SHAPE(b, -1));
}

static const torc_module_vtable fold_vt = {sizeof(torc_module_vtable),
                                           fold_forward, NULL, NULL, NULL};

static void test_check_fold(void **state) {
  (void)state;
  torc_module *m = torc_module_new("fold", &fold_vt, NULL);
  assert_int_equal(torc_module_add_child(m, "lin", torc_linear_new(2, 4, 1)),
                   0);
  torc_graph *g = check_at(m, TORC_SHAPE(2, 6), 4, 5);
  assert_runs_at(m, g, TORC_SHAPE(3, 6));
  torc_graph_free(g);
  torc_module_free(m);
}

/* "branchy": relu when the input's sum is positive, else neg: a branch on
 * the data. */
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

/* "perbatch": x divided by its batch size by hand. */
static torc_tensor *perbatch_forward(torc_module *m,
                                     const torc_tensor *const *in, int n_in) {
  (void)m;
  (void)n_in;
  return torc_mul_scalar(in[0], 1.0 / (double)torc_shape(in[0])[0]);
}

static const torc_module_vtable perbatch_vt = {
    sizeof(torc_module_vtable), perbatch_forward, NULL, NULL, NULL};

/* "padded": a zeros tensor one row longer than the batch. */
static torc_tensor *padded_forward(torc_module *m,
                                   const torc_tensor *const *in, int n_in) {
  (void)m;
  (void)n_in;
  int64_t b = torc_shape(in[0])[0];
  torc_tensor *z = torc_zeros(TORC_SHAPE(b + 1, 4), TORC_F32, TORC_CPU);
  return torc_add(torc_sum(z, NULL, 0, 0), in[0]);
}

static const torc_module_vtable padded_vt = {
    sizeof(torc_module_vtable), padded_forward, NULL, NULL, NULL};

/* "counted": x plus a constant made on the host from the batch size. */
static torc_tensor *counted_forward(torc_module *m,
                                    const torc_tensor *const *in, int n_in) {
  (void)m;
  (void)n_in;
  float b[4];
  for (int i = 0; i < 4; i++)
    b[i] = (float)torc_shape(in[0])[0];
  torc_tensor *c = torc_from_host(b, TORC_SHAPE(4), TORC_F32, TORC_CPU);
  return torc_add(in[0], c);
}

static const torc_module_vtable counted_vt = {
    sizeof(torc_module_vtable), counted_forward, NULL, NULL, NULL};

/* A module of vtable vt as child 1 of a sequential after a relu, checked
 * at batches 2 and 3 of inputs filled with sa and sb; returns the
 * status. */
static torc_status check_wrapped(const torc_module_vtable *vt, double sa,
                                 double sb) {
  torc_module *m = torc_sequential_new();
  assert_int_equal(torc_sequential_append(m, torc_module_build("relu", "")),
                   0);
  assert_int_equal(
      torc_sequential_append(m, torc_module_new("custom", vt, NULL)), 0);
  torc_tensor *xa = torc_full(TORC_SHAPE(2, 4), sa, TORC_F32, TORC_CPU);
  torc_tensor *xb = torc_full(TORC_SHAPE(3, 4), sb, TORC_F32, TORC_CPU);
  torc_graph *g = (torc_graph *)1;
  torc_status st = torc_trace_check(m, (const torc_tensor *const *)&xa,
                                    (const torc_tensor *const *)&xb, 1, &g);
  if (st == TORC_OK)
    torc_graph_free(g);
  else
    assert_null(g);
  torc_release(xa);
  torc_release(xb);
  torc_module_free(m);
  return st;
}

static void test_check_rejects(void **state) {
  (void)state;
  /* The data: positive in one batch, zero (after relu) in the other. */
  assert_error(check_wrapped(&branchy_vt, 1.0, -1.0),
               "the traces differ at node");
  assert_contains(torc_last_error(), "relu in module \"1\"");
  assert_contains(torc_last_error(), "neg in module \"1\"");
  assert_contains(torc_last_error(), "branches on the data");
  assert_contains(torc_last_error(), "cannot be traced");
  /* The same data in both: the traces are equal, but the forward read a
   * value to the host, which the check refuses. */
  assert_error(check_wrapped(&branchy_vt, 1.0, 1.0),
               "reads a tensor's value to the host (torc_item in module "
               "\"1\")");
  assert_contains(torc_last_error(), "torc_where");
  /* A scalar computed from the batch. */
  assert_error(check_wrapped(&perbatch_vt, 1.0, 1.0), "in module \"1\")");
  assert_contains(torc_last_error(), "with batch 2");
  assert_contains(torc_last_error(), "with batch 3");
  assert_contains(torc_last_error(), "0.5");
  assert_contains(torc_last_error(), "0.333");
  assert_contains(torc_last_error(), "cannot be traced");
  /* A shape of batch + 1. */
  assert_error(check_wrapped(&padded_vt, 1.0, 1.0),
               "f32[3, 4] with batch 2 but f32[4, 4] with batch 3: dim 0 "
               "differs and is not a multiple of the batch");
  assert_contains(torc_last_error(), "in module \"1\")");
  /* A constant holding the batch size. */
  assert_error(check_wrapped(&counted_vt, 1.0, 1.0),
               "in module \"1\") reads a constant");
  assert_contains(torc_last_error(),
                  "whose element 0 is 2 with batch 2 but 3 with batch 3");
}

static void test_check_errors(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_tensor *xa = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *xb = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *xc = torc_randn(TORC_SHAPE(3, 5), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = (torc_graph *)1;
  assert_error(torc_trace_check(m, (const torc_tensor *const *)&xa,
                                (const torc_tensor *const *)&xb, 1, &g),
               "no input differs in dim 0");
  assert_null(g);
  assert_error(torc_trace_check(m, (const torc_tensor *const *)&xa,
                                (const torc_tensor *const *)&xc, 1, &g),
               "input 0 is f32[2, 4] in the first batch but f32[3, 5] in "
               "the second");
  assert_error(torc_trace_check(m, NULL, NULL, 0, &g),
               "pass at least one example input");
  /* An unchecked graph names torc_trace_check for other batches. */
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&xa, 1, &g), 0);
  torc_tensor *y = NULL;
  assert_error(torc_graph_run(g, (const torc_tensor *const *)&xc, 1, &y, 1),
               "trace with torc_trace_check");
  torc_graph_free(g);
  torc_release(xa);
  torc_release(xb);
  torc_release(xc);
  torc_module_free(m);
}

/* A trace inside the caller's open scope: the forward's temporaries and
 * result stay out of it, and the graph replays after the scope ends. */
static void test_trace_in_scope(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  int scope = torc_scope_begin();
  torc_tensor *x = torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  torc_tensor *x2 = torc_scope_keep(
      torc_randn(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU, NULL));
  torc_scope_end(scope);
  assert_replay_equal(m, g, x2);
  torc_release(x2);
  torc_graph_free(g);
  torc_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_trace_mlp, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_trace_in_scope, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_trace_cnn, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_trace_frees, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_trace_residual, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_trace_nested, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_trace_errors, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_check_mlp, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_check_cnn, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_check_lazy, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_check_fold, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_check_rejects, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_check_errors, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
