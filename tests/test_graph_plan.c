/* tests/test_graph_plan.c — planned execution (torc/graph.h): a plan's
 * result equals the eager forward bit for bit for an MLP, a CNN and a
 * residual block; calls after the first allocate nothing; the arena is
 * smaller than the intermediates together; nodes run in place; batch norm
 * folded into conv2d and linear within 1e-5; the fused kernels
 * (linear_act, conv2d_act) bit for bit on ref, NaN kept; batch tiles bit
 * for bit; the plan follows weights changed in place; the argument
 * errors. */
#include <math.h>

#include "testutil.h"
#include "torc/testing.h"

static torc_module *seq(void) {
  torc_module *m = torc_sequential_new();
  assert_non_null(m);
  return m;
}

static void add(torc_module *m, torc_module *c) {
  assert_non_null(c);
  assert_int_equal(torc_sequential_append(m, c), 0);
}

static torc_module *mlp_new(void) {
  torc_module *m = seq();
  add(m, torc_linear_new(16, 32, 1));
  add(m, torc_module_build("relu", ""));
  add(m, torc_linear_new(32, 32, 1));
  add(m, torc_module_build("tanh", ""));
  add(m, torc_linear_new(32, 3, 1));
  return m;
}

/* conv, bn, relu, pool, conv, bn, relu, flatten, linear. */
static torc_module *cnn_bn_new(void) {
  torc_module *m = seq();
  add(m, torc_module_build("conv2d",
                           "in_channels=2 out_channels=4 kernel=3 padding=1"));
  add(m, torc_module_build("batchnorm2d", "num_features=4"));
  add(m, torc_module_build("relu", ""));
  add(m, torc_module_build("maxpool2d", "kernel=2"));
  add(m, torc_module_build("conv2d", "in_channels=4 out_channels=6 kernel=3 "
                                     "padding=1 bias=false"));
  add(m, torc_module_build("batchnorm2d", "num_features=6"));
  add(m, torc_module_build("relu", ""));
  add(m, torc_flatten_new(1, -1));
  add(m, torc_linear_new(6 * 4 * 4, 5, 1));
  return m;
}

/* x + linear(relu(linear(x))). */
static torc_module *residual_new(void) {
  torc_module *m = seq();
  add(m, torc_linear_new(8, 8, 1));
  add(m, torc_module_build("relu", ""));
  add(m, torc_linear_new(8, 8, 1));
  add(m, torc_add_node_new(-4));
  return m;
}

/* Gives every batch norm non-trivial statistics and affine parameters:
 * a few training forwards, then random weights and biases. */
static void randomize_bn(torc_module *m, const int64_t *shape, int ndim) {
  torc_module_train(m, 1);
  for (int i = 0; i < 3; i++) {
    int sc = torc_scope_begin();
    torc_tensor *x = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
    assert_non_null(torc_module_forward(m, x));
    torc_scope_end(sc);
  }
  torc_module_train(m, 0);
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  for (int i = 0; i < n; i++) {
    torc_tensor *r = torc_rand(torc_shape(list[i].tensor),
                               torc_ndim(list[i].tensor), TORC_F32, TORC_CPU,
                               NULL);
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    torc_tensor *r2 = torc_add_scalar(r, 0.5);
    assert_int_equal(torc_copy_(list[i].tensor, r2), 0);
    torc_set_grad_mode(gm);
    torc_release(r2);
    torc_release(r);
  }
  torc_named_tensors_free(list, n);
}

/* m's eager forward in eval and inference mode. */
static torc_tensor *eager(torc_module *m, torc_tensor *x) {
  torc_module_train(m, 0);
  torc_grad_mode mode = torc_set_grad_mode(TORC_INFERENCE);
  torc_tensor *y = torc_module_forward(m, x);
  torc_set_grad_mode(mode);
  assert_non_null(y);
  return y;
}

static void assert_same(const torc_tensor *a, const torc_tensor *b) {
  assert_int_equal(torc_ndim(a), torc_ndim(b));
  assert_memory_equal(torc_shape(a), torc_shape(b),
                      (size_t)torc_ndim(a) * sizeof(int64_t));
  assert_true(torc_is_contiguous(a) && torc_is_contiguous(b));
  assert_memory_equal(torc_data(a), torc_data(b),
                      (size_t)torc_numel(a) * sizeof(float));
}

/* Within rel relative to the largest magnitude of want. */
static void assert_near(const torc_tensor *got, const torc_tensor *want,
                        double rel) {
  assert_int_equal(torc_numel(got), torc_numel(want));
  const float *g = torc_data(got), *w = torc_data(want);
  double top = 0, worst = 0;
  for (int64_t i = 0; i < torc_numel(want); i++)
    if (fabs(w[i]) > top)
      top = fabs(w[i]);
  for (int64_t i = 0; i < torc_numel(want); i++)
    if (fabs(g[i] - w[i]) > worst)
      worst = fabs(g[i] - w[i]);
  if (worst > rel * top) {
    print_error("differs by %g, more than %g of %g\n", worst, rel, top);
    fail();
  }
}

/* Traces m on x, plans it with flags, checks 4 calls (on new inputs)
 * against eager (bit for bit when exact, else within 1e-5), the later
 * calls of torc_plan_run_into allocating nothing, and returns the plan's
 * figures. */
typedef struct {
  size_t arena;
  int nodes, in_place, folded, fused, graph_nodes;
  int64_t tile;
} figures;

static figures check_plan(torc_module *m, const int64_t *shape, int ndim,
                          int flags, int exact) {
  torc_tensor *x = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  torc_plan *p = NULL;
  assert_int_equal(torc_plan_new(g, flags, &p), 0);
  assert_non_null(p);
  int graph_nodes = torc_graph_n_nodes(g);
  torc_graph_free(g); /* the plan does not need it */
  torc_tensor *y = NULL, *into = NULL;
  for (int call = 0; call < 4; call++) {
    torc_tensor *xi = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
    torc_tensor *want = eager(m, xi);
    int64_t at = torc_test_alloc_count();
    assert_int_equal(
        torc_plan_run(p, (const torc_tensor *const *)&xi, 1, &y), 0);
    /* torc_plan_run allocates its result: the counter sees it */
    assert_true(torc_test_alloc_count() > at);
    if (into == NULL)
      into = torc_empty(torc_shape(want), torc_ndim(want), TORC_F32,
                        TORC_CPU);
    int64_t before = torc_test_alloc_count();
    assert_int_equal(
        torc_plan_run_into(p, (const torc_tensor *const *)&xi, 1, into), 0);
    int64_t allocs = torc_test_alloc_count() - before;
    if (call > 0) /* the first call may warm the kernels' scratch */
      assert_int_equal(allocs, 0);
    if (exact) {
      assert_same(y, want);
      assert_same(into, want);
    } else {
      assert_near(y, want, 1e-5);
      assert_near(into, want, 1e-5);
    }
    torc_release(y);
    torc_release(want);
    torc_release(xi);
  }
  figures f = {torc_plan_arena_bytes(p), torc_plan_n_nodes(p),
               torc_plan_n_in_place(p), torc_plan_n_folded(p),
               torc_plan_n_fused(p), graph_nodes, torc_plan_tile_rows(p)};
  torc_release(into);
  torc_plan_free(p);
  torc_release(x);
  return f;
}

/* The most bytes an eager forward of m on x holds beyond what was held
 * before it (its intermediates and result, as the CPU's statistics
 * count them). */
static size_t eager_peak(torc_module *m, const int64_t *shape, int ndim) {
  torc_tensor *x = torc_randn(shape, ndim, TORC_F32, TORC_CPU, NULL);
  torc_memory_stats2 s = {.struct_size = sizeof s};
  assert_int_equal(torc_reset_peak_memory_stats(TORC_CPU), 0);
  assert_int_equal(torc_device_memory_stats2(TORC_CPU, &s), 0);
  size_t before = s.allocated;
  torc_tensor *y = eager(m, x);
  assert_int_equal(torc_device_memory_stats2(TORC_CPU, &s), 0);
  torc_release(y);
  torc_release(x);
  return s.peak_allocated - before;
}

static void test_plan_mlp(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  figures f = check_plan(m, TORC_SHAPE(64, 16), 0, 1);
  /* linear, relu, linear, tanh, linear: relu and tanh run in place, so
   * two slots of 64x32 floats hold every intermediate. */
  assert_true(f.in_place >= 2);
  assert_true(f.arena > 0);
  assert_true(f.arena <= 2 * 64 * 32 * sizeof(float));
  size_t peak = eager_peak(m, TORC_SHAPE(64, 16));
  printf("mlp [64,16]: %d nodes, %d in place, arena %zu bytes, eager peak "
         "%zu bytes (result included)\n",
         f.nodes, f.in_place, f.arena, peak);
  torc_module_free(m);
}

static void test_plan_cnn_bn(void **state) {
  (void)state;
  torc_module *m = cnn_bn_new();
  randomize_bn(m, TORC_SHAPE(8, 2, 8, 8));
  figures exact = check_plan(m, TORC_SHAPE(8, 2, 8, 8), 0, 1);
  assert_int_equal(exact.folded, 0);
  figures fold = check_plan(m, TORC_SHAPE(8, 2, 8, 8), TORC_PLAN_FOLD_BN, 0);
  assert_int_equal(fold.folded, 2);
  assert_int_equal(fold.nodes, exact.nodes - 2);
  size_t peak = eager_peak(m, TORC_SHAPE(8, 2, 8, 8));
  printf("cnn+bn [8,2,8,8]: %d nodes (%d folded), %d in place, arena %zu "
         "bytes (%zu unfolded), eager peak %zu bytes (result included)\n",
         fold.nodes, fold.folded, fold.in_place, fold.arena, exact.arena,
         peak);
  torc_module_free(m);
}

static void test_plan_linear_bn(void **state) {
  (void)state;
  torc_module *m = seq();
  add(m, torc_linear_new(6, 10, 1));
  add(m, torc_module_build("batchnorm1d", "num_features=10"));
  add(m, torc_module_build("relu", ""));
  add(m, torc_linear_new(10, 2, 1));
  randomize_bn(m, TORC_SHAPE(16, 6));
  figures fold = check_plan(m, TORC_SHAPE(16, 6), TORC_PLAN_FOLD_BN, 0);
  assert_int_equal(fold.folded, 1);
  torc_module_free(m);
}

static void test_plan_residual(void **state) {
  (void)state;
  torc_module *m = residual_new();
  figures f = check_plan(m, TORC_SHAPE(5, 8), 0, 1);
  assert_true(f.in_place >= 1);
  torc_module_free(m);
}

/* linear + relu, linear (then tanh), linear: three linear_act calls and
 * the tanh, bit for bit the eager forward on the reference kernels. */
static void test_plan_fused_mlp(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  figures f = check_plan(m, TORC_SHAPE(64, 16), TORC_PLAN_FUSE, 1);
  assert_int_equal(f.fused, 3);
  assert_int_equal(f.nodes, 4);
  torc_module_free(m);
}

/* conv + bn + relu + pool, conv + bn + relu, flatten, linear: the batch
 * norms folded, then two conv2d_act calls (the first with its pool) and
 * one linear_act, within 1e-5 of eager; unfolded, the linear layer alone
 * fused, bit for bit on the reference kernels. */
static void test_plan_fused_cnn(void **state) {
  (void)state;
  torc_module *m = cnn_bn_new();
  randomize_bn(m, TORC_SHAPE(8, 2, 8, 8));
  figures f = check_plan(m, TORC_SHAPE(8, 2, 8, 8),
                         TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE, 0);
  assert_int_equal(f.folded, 2);
  assert_int_equal(f.fused, 3);
  assert_int_equal(f.nodes, 3);
  /* unfolded: a batch norm stands between each conv and its relu */
  figures u = check_plan(m, TORC_SHAPE(8, 2, 8, 8), TORC_PLAN_FUSE, 1);
  assert_int_equal(u.fused, 1); /* the linear layer alone */
  torc_module_free(m);
}

/* Two conv + relu + pool stages of 16 and 32 channels: the first hands its
 * result to the second in blocks of 16 channels; bit for bit eager on
 * ref, in tiles too; frozen, the second hands its blocks to the linear
 * layer too. */
static void test_plan_fused_blocked(void **state) {
  (void)state;
  torc_module *m = seq();
  add(m, torc_module_build("conv2d",
                           "in_channels=3 out_channels=16 kernel=3 padding=1"));
  add(m, torc_module_build("relu", ""));
  add(m, torc_module_build("maxpool2d", "kernel=2"));
  add(m, torc_module_build("conv2d",
                           "in_channels=16 out_channels=32 kernel=3 padding=1"));
  add(m, torc_module_build("relu", ""));
  add(m, torc_module_build("maxpool2d", "kernel=2"));
  add(m, torc_flatten_new(1, -1));
  add(m, torc_linear_new(32 * 2 * 2, 5, 1));
  figures f = check_plan(m, TORC_SHAPE(11, 3, 8, 8), TORC_PLAN_FUSE, 1);
  assert_int_equal(f.fused, 3);
  /* frozen: the second stage hands its blocks to the linear layer, whose
   * weight rows are permuted to match (the sums reordered: within 1e-5) */
  figures z = check_plan(m, TORC_SHAPE(11, 3, 8, 8),
                         TORC_PLAN_FUSE | TORC_PLAN_FREEZE, 0);
  assert_int_equal(z.fused, 3);
  torc_test_plan_tile_bytes(4096);
  figures t =
      check_plan(m, TORC_SHAPE(11, 3, 8, 8), TORC_PLAN_FUSE | TORC_PLAN_TILE, 1);
  torc_test_plan_tile_bytes(0);
  assert_true(t.tile >= 8 && t.tile < 11);
  torc_module_free(m);
}

/* A fused plan keeps NaN and infinities where the eager forward has them:
 * relu(NaN) = NaN, a pool window holding a NaN gives NaN. */
static void test_plan_fused_nan(void **state) {
  (void)state;
  torc_module *m = cnn_bn_new();
  randomize_bn(m, TORC_SHAPE(8, 2, 8, 8));
  torc_tensor *x = torc_randn(TORC_SHAPE(8, 2, 8, 8), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  torc_plan *p = NULL;
  assert_int_equal(
      torc_plan_new(g, TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE, &p), 0);
  torc_graph_free(g);
  float *xd = torc_data(x);
  xd[5] = NAN;               /* image 0 */
  xd[3 * 128 + 70] = INFINITY; /* image 3 */
  xd[6 * 128 + 9] = -INFINITY; /* image 6 */
  torc_tensor *want = eager(m, x), *y = NULL;
  assert_int_equal(torc_plan_run(p, (const torc_tensor *const *)&x, 1, &y),
                   0);
  const float *a = torc_data(y), *b = torc_data(want);
  int n_nan = 0;
  for (int64_t i = 0; i < torc_numel(want); i++) {
    assert_int_equal(isnan(a[i]), isnan(b[i]));
    n_nan += isnan(b[i]) != 0;
  }
  assert_true(n_nan > 0);
  torc_release(y), torc_release(want), torc_release(x);
  torc_plan_free(p);
  torc_module_free(m);
}

/* With a small tile target, the MLP and the CNN (folded, fused) run in
 * tiles of rows, the last one short (37 rows): bit for bit the untiled
 * plan on ref, no allocation per call, an arena of a tile's rows. A graph
 * with a node that mixes rows (a softmax over dim 0) is not tiled. */
static void test_plan_tiled(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  figures whole = check_plan(m, TORC_SHAPE(37, 16), TORC_PLAN_FUSE, 1);
  assert_int_equal(whole.tile, 0);
  torc_test_plan_tile_bytes(1024);
  figures n = check_plan(m, TORC_SHAPE(37, 16), TORC_PLAN_FUSE, 1);
  assert_int_equal(n.tile, 0); /* not asked for */
  figures f =
      check_plan(m, TORC_SHAPE(37, 16), TORC_PLAN_FUSE | TORC_PLAN_TILE, 1);
  figures u = check_plan(m, TORC_SHAPE(37, 16), TORC_PLAN_TILE, 1);
  torc_module_free(m);
  assert_true(f.tile >= 8 && f.tile < 37);
  assert_true(u.tile >= 8 && u.tile < 37);
  assert_true(f.arena < whole.arena);
  m = cnn_bn_new();
  randomize_bn(m, TORC_SHAPE(37, 2, 8, 8));
  figures c = check_plan(m, TORC_SHAPE(37, 2, 8, 8),
                         TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE | TORC_PLAN_TILE,
                         0);
  assert_true(c.tile >= 8 && c.tile < 37);
  assert_int_equal(c.fused, 3);
  figures ce = check_plan(m, TORC_SHAPE(37, 2, 8, 8), TORC_PLAN_TILE, 1);
  assert_true(ce.tile >= 8 && ce.tile < 37);
  torc_module_free(m);
  m = seq();
  add(m, torc_linear_new(16, 8, 1));
  add(m, torc_module_build("softmax", "dim=0"));
  figures sm =
      check_plan(m, TORC_SHAPE(37, 16), TORC_PLAN_FUSE | TORC_PLAN_TILE, 1);
  assert_int_equal(sm.tile, 0);
  torc_module_free(m);
  torc_test_plan_tile_bytes(0);
  printf("tiled: mlp %lld rows a tile (arena %zu bytes, %zu whole), cnn "
         "%lld rows\n",
         (long long)f.tile, f.arena, whole.arena, (long long)c.tile);
}

/* A graph saved and loaded (no tensors for its intermediates) plans and
 * runs as the traced one: batch norm folded, within 1e-5 of eager. */
static void test_plan_loaded(void **state) {
  (void)state;
  torc_module *m = cnn_bn_new();
  randomize_bn(m, TORC_SHAPE(8, 2, 8, 8));
  torc_tensor *x = torc_randn(TORC_SHAPE(8, 2, 8, 8), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  char path[] = "/tmp/test_graph_plan_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(torc_graph_save(g, path), 0);
  torc_graph_free(g);
  g = NULL;
  assert_int_equal(torc_graph_load(path, m, &g), 0);
  unlink(path);
  torc_plan *p = NULL;
  assert_int_equal(torc_plan_new(g, TORC_PLAN_FOLD_BN, &p), 0);
  torc_graph_free(g);
  assert_int_equal(torc_plan_n_folded(p), 2);
  torc_tensor *y = NULL, *want = eager(m, x);
  assert_int_equal(torc_plan_run(p, (const torc_tensor *const *)&x, 1, &y), 0);
  assert_near(y, want, 1e-5);
  torc_release(y);
  torc_release(want);
  torc_plan_free(p);
  torc_release(x);
  torc_module_free(m);
}

/* Weights changed in place after planning: the plan reads them. */
static void test_plan_follows_weights(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_tensor *x = torc_randn(TORC_SHAPE(4, 16), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  torc_plan *p = NULL;
  assert_int_equal(torc_plan_new(g, 0, &p), 0);
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  assert_true(n > 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  assert_int_equal(torc_fill_(list[0].tensor, 0.25), 0);
  torc_set_grad_mode(gm);
  torc_named_tensors_free(list, n);
  torc_tensor *y = NULL, *want = eager(m, x);
  assert_int_equal(torc_plan_run(p, (const torc_tensor *const *)&x, 1, &y), 0);
  assert_same(y, want);
  torc_release(y);
  torc_release(want);
  torc_plan_free(p);
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

static void test_plan_errors(void **state) {
  (void)state;
  torc_module *m = mlp_new();
  torc_tensor *x = torc_randn(TORC_SHAPE(4, 16), TORC_F32, TORC_CPU, NULL);
  torc_graph *g = NULL;
  assert_int_equal(torc_trace(m, (const torc_tensor *const *)&x, 1, &g), 0);
  torc_plan *p = (torc_plan *)1;
  assert_int_equal(torc_plan_new(NULL, 0, &p), TORC_ERR_NULL);
  assert_null(p);
  assert_int_equal(torc_plan_new(g, 16, &p), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "unknown flags 0x10");
  assert_null(p);
  assert_int_equal(torc_plan_new(g, 0, &p), 0);
  torc_tensor *small = torc_randn(TORC_SHAPE(3, 16), TORC_F32, TORC_CPU, NULL);
  torc_tensor *y = (torc_tensor *)1;
  assert_int_equal(
      torc_plan_run(p, (const torc_tensor *const *)&small, 1, &y),
      TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "input 0 is f32[3, 16] but the plan was "
                               "built for f32[4, 16]");
  assert_null(y);
  /* the right shape through other strides: refused, not misread */
  torc_tensor *wide = torc_randn(TORC_SHAPE(16, 4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *tr = torc_transpose(wide, 0, 1);
  assert_int_equal(torc_plan_run(p, (const torc_tensor *const *)&tr, 1, &y),
                   TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "input 0 is f32[4, 16] (not contiguous) but "
                               "the plan was built for f32[4, 16]; pass a "
                               "contiguous input");
  torc_release(tr), torc_release(wide);
  assert_int_equal(torc_plan_run(p, (const torc_tensor *const *)&x, 2, &y),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "2 inputs given; the plan takes 1");
  torc_tensor *bad = torc_empty(TORC_SHAPE(4, 2), TORC_F32, TORC_CPU);
  assert_int_equal(
      torc_plan_run_into(p, (const torc_tensor *const *)&x, 1, bad),
      TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "out is f32[4, 2] but the plan gives a "
                               "contiguous f32[4, 3]");
  assert_int_equal(torc_plan_run(NULL, (const torc_tensor *const *)&x, 1, &y),
                   TORC_ERR_NULL);
  assert_int_equal(torc_plan_arena_bytes(NULL), 0);
  torc_plan_free(NULL);
  torc_release(bad);
  torc_release(small);
  torc_plan_free(p);
  torc_graph_free(g);
  torc_release(x);
  torc_module_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_plan_mlp, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_cnn_bn, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_linear_bn, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_residual, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_fused_mlp, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_fused_cnn, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_fused_blocked, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_fused_nan, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_tiled, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_loaded, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_follows_weights,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plan_errors, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
