/* tests/test_cpu_nn.c — the cpu plugin's nn kernels (plugins/cpu/nn.c)
 * against ref's: dropout (the same Philox mask, bit for bit), layer_norm
 * and its backward, gelu's backward in both forms, embedding and its
 * backward; odd and empty shapes, sizes that take the vector loops and the
 * pool, f32 and f64 (dropout bf16 too), each run pinned to ref, then to
 * the plugin, and compared; and results that do not depend on the thread
 * count.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#define REF torc__dispatch_pin("ref")
#define CPU torc__dispatch_pin("cpu")
#define UNPIN torc__dispatch_pin(NULL)

static int setup_pinned(void **state) {
  (void)state;
  return test_apply_ini("[torc]\nthreads = 2\n"
                        "[plugin.ref]\nmodule = ref\n"
                        "[plugin.cpu]\nmodule = cpu\n",
                        "cpu.ini");
}

static double tol_of(torc_dtype dt) { return dt == TORC_F64 ? 1e-10 : 2e-6; }

/* Two equal leaves requiring grad: c for ref's run, d for the plugin's. */
static void leaf_pair(const int64_t *shape, int nd, torc_dtype dt,
                      torc_tensor **c, torc_tensor **d) {
  *c = torc_randn(shape, nd, dt, TORC_CPU, NULL);
  assert_torc(*c);
  *d = torc_clone(*c);
  assert_torc(*d);
  assert_ok(torc_set_requires_grad(*c, 1));
  assert_ok(torc_set_requires_grad(*d, 1));
}

/* Backward of sum(y * r) for one random r, ref's run then the plugin's. */
static void backward_pair(torc_tensor *yc, torc_tensor *yd) {
  torc_tensor *r = torc_randn(torc_shape(yc), torc_ndim(yc), torc_dtype_of(yc),
                              TORC_CPU, NULL);
  assert_torc(r);
  REF;
  assert_ok(torc_backward(torc_sum(torc_mul(yc, r), NULL, 0, 0), NULL, 0));
  CPU;
  assert_ok(torc_backward(torc_sum(torc_mul(yd, r), NULL, 0, 0), NULL, 0));
  UNPIN;
}

/* Asserts a and b hold the same bits' values (exact, NaN matching NaN). */
static void assert_same(const torc_tensor *a, const torc_tensor *b) {
  test_assert_close(a, b, 0);
}

/* ---- dropout ---- */

/* Dropout of ones gives the mask itself: the plugin's must be ref's,
 * element for element, for the same generator state, at sizes below and
 * above the pool's threshold and the block size, p in (0, 1) and at the
 * ends; and of random x, y = x M within rounding (bf16: exactly, the
 * product rounded from double as ref's). */
static void test_dropout(void **state) {
  (void)state;
  static const int64_t sizes[] = {0, 1, 37, 2049, 100003};
  static const double ps[] = {0.1, 0.5, 0.0, 1.0, 0.9999};
  static const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_BF16};
  for (int d = 0; d < 3; d++) {
    torc_dtype dt = dts[d];
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        int scope = torc_scope_begin();
        int64_t shape[2] = {sizes[s] > 1 ? sizes[s] / 37 + 1 : 1, 37};
        if (sizes[s] <= 1)
          shape[1] = sizes[s];
        torc_tensor *one = torc_ones(shape, 2, dt, TORC_CPU);
        torc_tensor *x = torc_randn(shape, 2, dt, TORC_CPU, NULL);
        assert_torc(x);
        torc_generator *g1 = torc_generator_new(11 + s);
        torc_generator *g2 = torc_generator_new(11 + s);
        REF;
        torc_tensor *mr = torc_dropout(one, ps[k], 1, g1);
        torc_tensor *yr = torc_dropout(x, ps[k], 1, g1);
        CPU;
        torc_tensor *mc = torc_dropout(one, ps[k], 1, g2);
        torc_tensor *yc = torc_dropout(x, ps[k], 1, g2);
        UNPIN;
        assert_torc(mc);
        assert_torc(yc);
        assert_same(mc, mr);
        if (dt == TORC_BF16)
          assert_same(yc, yr);
        else
          test_assert_close(yc, yr, tol_of(dt));
        torc_generator_free(g1);
        torc_generator_free(g2);
        torc_scope_end(scope);
      }
  }
}

/* bf16 dropout rounds x k once from double, as ref: every bf16
 * significand in [1, 2), at several exponents and both signs, with p
 * whose scale 1 / (1 - p) rounds some product differently in f32 (0.04:
 * 1.78125; 0.82: 1.3359375), matches ref's bits. */
static void test_dropout_bf16_rounding(void **state) {
  (void)state;
  enum { N = 128 * 64 };
  static const double ps[] = {0.04, 0.82};
  float *v = malloc(sizeof(float) * N);
  assert_non_null(v);
  for (int i = 0; i < N; i++)
    v[i] = (1.0f + (float)(i % 128) / 128.0f) *
           ldexpf((i / 128) % 2 ? -1.0f : 1.0f, (i / 256) % 16 - 8);
  int scope = torc_scope_begin();
  torc_tensor *x32 = torc_from_host(v, TORC_SHAPE(N), TORC_F32, TORC_CPU);
  free(v);
  torc_tensor *x = torc_to_dtype(x32, TORC_BF16);
  assert_torc(x);
  for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
    torc_generator *g1 = torc_generator_new(3), *g2 = torc_generator_new(3);
    REF;
    torc_tensor *yr = torc_dropout(x, ps[k], 1, g1);
    CPU;
    torc_tensor *yc = torc_dropout(x, ps[k], 1, g2);
    UNPIN;
    uint16_t *br = malloc(2 * N), *bc = malloc(2 * N);
    assert_non_null(br);
    assert_non_null(bc);
    assert_ok(torc_to_host(yr, br, 2 * N));
    assert_ok(torc_to_host(yc, bc, 2 * N));
    for (int i = 0; i < N; i++)
      if (br[i] != bc[i]) {
        print_error("p %g, element %d: cpu 0x%04x, ref 0x%04x\n", ps[k], i,
                    bc[i], br[i]);
        fail();
      }
    free(br), free(bc);
    torc_generator_free(g1);
    torc_generator_free(g2);
  }
  torc_scope_end(scope);
}

/* Dropout's backward multiplies by the saved mask: gradients agree
 * (bf16: exactly, every step an exact product). */
static void test_dropout_backward(void **state) {
  (void)state;
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_BF16 : TORC_F32;
    int scope = torc_scope_begin();
    int64_t shape[2] = {300, 129};
    torc_tensor *xc, *xd;
    leaf_pair(shape, 2, dt, &xc, &xd);
    torc_generator *g1 = torc_generator_new(5), *g2 = torc_generator_new(5);
    REF;
    torc_tensor *yc = torc_dropout(xc, 0.3, 1, g1);
    CPU;
    torc_tensor *yd = torc_dropout(xd, 0.3, 1, g2);
    UNPIN;
    backward_pair(yc, yd);
    if (d)
      assert_same(torc_grad_of(xd), torc_grad_of(xc));
    else
      test_assert_close(torc_grad_of(xd), torc_grad_of(xc), tol_of(dt));
    torc_generator_free(g1);
    torc_generator_free(g2);
    torc_scope_end(scope);
  }
}

/* ---- layer_norm ---- */

typedef struct ln_case {
  int nd;
  int64_t shape[3];
  int n_norm;   /* trailing dims normalised */
  double shift; /* added to x: rows far from 0 */
} ln_case;

static const ln_case ln_cases[] = {
    {2, {0, 8}, 1, 0},     {2, {1, 1}, 1, 0},        {2, {3, 5}, 1, 0},
    {2, {37, 129}, 1, 0},  {3, {4, 300, 128}, 1, 0}, {3, {7, 6, 33}, 2, 0},
    {2, {65, 17}, 1, 100}, {3, {2, 2, 1000}, 1, 0},
};

static void ln_run(const ln_case *k, torc_dtype dt, int affine) {
  int scope = torc_scope_begin();
  const int64_t *ns = k->shape + k->nd - k->n_norm;
  torc_tensor *wc = NULL, *wd = NULL, *bc = NULL, *bd = NULL;
  torc_tensor *x0 = torc_add(torc_randn(k->shape, k->nd, dt, TORC_CPU, NULL),
                             torc_full(NULL, 0, k->shift, dt, TORC_CPU));
  torc_tensor *xc = torc_clone(x0), *xd = torc_clone(x0);
  assert_torc(xd);
  assert_ok(torc_set_requires_grad(xc, 1));
  assert_ok(torc_set_requires_grad(xd, 1));
  if (affine) {
    leaf_pair(ns, k->n_norm, dt, &wc, &wd);
    leaf_pair(ns, k->n_norm, dt, &bc, &bd);
  }
  REF;
  torc_tensor *yc = torc_layer_norm(xc, ns, k->n_norm, wc, bc, 1e-5);
  CPU;
  torc_tensor *yd = torc_layer_norm(xd, ns, k->n_norm, wd, bd, 1e-5);
  UNPIN;
  assert_torc(yc);
  assert_torc(yd);
  double tol = tol_of(dt) * (k->shift != 0 ? 4 : 1);
  test_assert_close(yd, yc, tol);
  backward_pair(yc, yd);
  test_assert_close(torc_grad_of(xd), torc_grad_of(xc), tol);
  if (affine) {
    /* gw, gb: sums over up to 1200 rows */
    test_assert_close(torc_grad_of(wd), torc_grad_of(wc), tol * 10);
    test_assert_close(torc_grad_of(bd), torc_grad_of(bc), tol * 10);
  }
  torc_scope_end(scope);
}

static void test_layer_norm(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof ln_cases / sizeof ln_cases[0]; i++)
    for (int affine = 0; affine < 2; affine++) {
      ln_run(&ln_cases[i], TORC_F32, affine);
      ln_run(&ln_cases[i], TORC_F64, affine);
    }
}

/* ---- gelu's backward ---- */

/* Both forms, contiguous and strided, with special values, against ref. */
static void test_gelu_backward(void **state) {
  (void)state;
  static const double sp[] = {NAN,   INFINITY, -INFINITY, 0.0,     -0.0,
                              1e-40, -1e-40,   3.4e38,    -3.4e38, 5.5,
                              -5.5,  -9.0,     14.2,      -14.2,   0.5};
  static const int64_t sizes[] = {1, 37, 100003};
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (int form = 0; form < 2; form++)
        for (int strided = 0; strided < 2; strided++) {
          int scope = torc_scope_begin();
          int64_t n = sizes[s];
          double *v = malloc(sizeof(double) * (size_t)n);
          assert_non_null(v);
          for (int64_t i = 0; i < n; i++)
            v[i] = -12 + 24 * (double)((i * 7919) % n) / (double)n;
          for (int64_t i = 0; i < n && i < (int64_t)(sizeof sp / sizeof sp[0]);
               i++)
            v[i] = sp[i];
          torc_tensor *x64 =
              torc_from_host(v, TORC_SHAPE(n), TORC_F64, TORC_CPU);
          free(v);
          torc_tensor *base = torc_to_dtype(x64, dt);
          torc_tensor *x = strided ? torc_slice(base, 0, 0, n, 2) : base;
          assert_torc(x);
          torc_tensor *xc = torc_clone(x), *xd = torc_clone(x);
          assert_ok(torc_set_requires_grad(xc, 1));
          assert_ok(torc_set_requires_grad(xd, 1));
          REF;
          torc_tensor *yc = torc_gelu(xc, form);
          CPU;
          torc_tensor *yd = torc_gelu(xd, form);
          UNPIN;
          test_assert_close(yd, yc, tol_of(dt));
          backward_pair(yc, yd);
          test_assert_close(torc_grad_of(xd), torc_grad_of(xc), tol_of(dt));
          torc_scope_end(scope);
        }
  }
}

/* ---- embedding ---- */

/* Lookups with repeated rows, i64 and i32 indices, an empty batch: the
 * forward copies, and the backward sums in ref's order, so both are
 * exact; an index out of range is the same error as ref's. */
static void test_embedding(void **state) {
  (void)state;
  static const int64_t dims[] = {1, 3, 130};
  static const int64_t counts[] = {0, 35, 5000};
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
        for (int i32 = 0; i32 < 2; i32++) {
          int scope = torc_scope_begin();
          int64_t n = counts[c], num = 13;
          int64_t *ix = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
          assert_non_null(ix);
          for (int64_t i = 0; i < n; i++)
            ix[i] = (i * 7 + i / 3) % (num - 2); /* rows 11, 12 unused */
          torc_tensor *idx =
              torc_from_host(ix, TORC_SHAPE(n / 5, 5), TORC_I64, TORC_CPU);
          free(ix);
          if (i32)
            idx = torc_to_dtype(idx, TORC_I32);
          assert_torc(idx);
          int64_t ws[2] = {num, dims[k]};
          torc_tensor *wc, *wd;
          leaf_pair(ws, 2, dt, &wc, &wd);
          REF;
          torc_tensor *yc = torc_embedding(idx, wc);
          CPU;
          torc_tensor *yd = torc_embedding(idx, wd);
          UNPIN;
          assert_torc(yc);
          assert_torc(yd);
          assert_same(yd, yc);
          if (n > 0) {
            backward_pair(yc, yd);
            assert_same(torc_grad_of(wd), torc_grad_of(wc));
          }
          torc_scope_end(scope);
        }
  }
  int scope = torc_scope_begin();
  int64_t bad[3] = {1, 13, 2};
  torc_tensor *idx = torc_from_host(bad, TORC_SHAPE(3), TORC_I64, TORC_CPU);
  torc_tensor *w = torc_randn(TORC_SHAPE(13, 4), TORC_F32, TORC_CPU, NULL);
  CPU;
  torc_tensor *y = torc_embedding(idx, w);
  UNPIN;
  assert_null(y);
  assert_non_null(strstr(torc_last_error(), "index 13 is out of range"));
  torc_clear_error();
  torc_scope_end(scope);
}

/* ---- norm ---- */

/* The 1-, 2- and inf-norm over every element (clip_grad_norm's call),
 * with a NaN, an infinity, all zeros, empty, huge values (the 2-norm's
 * scaling), and over one dim (which the plugin leaves to ref). */
static void test_norm(void **state) {
  (void)state;
  static const int64_t sizes[] = {0, 1, 37, 100003};
  static const double ps[] = {1, 2, INFINITY};
  for (int d = 0; d < 2; d++) {
    torc_dtype dt = d ? TORC_F64 : TORC_F32;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
      for (int kind = 0; kind < 5; kind++) {
        int scope = torc_scope_begin();
        int64_t n = sizes[s];
        double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
        assert_non_null(v);
        for (int64_t i = 0; i < n; i++)
          v[i] = kind == 2 ? 0 : sin((double)i) * (kind == 4 ? 1e30 : 3);
        if (n > 5 && kind == 1)
          v[n / 2] = NAN;
        if (n > 5 && kind == 3)
          v[n - 1] = -INFINITY;
        torc_tensor *x = torc_to_dtype(
            torc_from_host(v, TORC_SHAPE(n), TORC_F64, TORC_CPU), dt);
        free(v);
        assert_torc(x);
        for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
          if (n == 0 && isinf(ps[k]))
            continue; /* an error */
          REF;
          torc_tensor *r = torc_norm(x, ps[k], NULL, 0, 0);
          CPU;
          torc_tensor *c = torc_norm(x, ps[k], NULL, 0, 0);
          UNPIN;
          assert_torc(c);
          test_assert_close(c, r, tol_of(dt));
        }
        torc_scope_end(scope);
      }
  }
  int scope = torc_scope_begin();
  torc_tensor *x = torc_randn(TORC_SHAPE(7, 9), TORC_F32, TORC_CPU, NULL);
  int dim = 1;
  REF;
  torc_tensor *r = torc_norm(x, 2, &dim, 1, 0);
  CPU;
  torc_tensor *c = torc_norm(x, 2, &dim, 1, 0);
  UNPIN;
  test_assert_close(c, r, tol_of(TORC_F32));
  torc_scope_end(scope);
}

/* ---- thread count ---- */

/* layer_norm's backward (sums over rows) and dropout with 1 thread and
 * with 2 give the same bits. */
static void test_threads(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t shape[2] = {1000, 96};
  int64_t ns[1] = {96};
  torc_tensor *x = torc_randn(shape, 2, TORC_F32, TORC_CPU, NULL);
  torc_tensor *r = torc_randn(shape, 2, TORC_F32, TORC_CPU, NULL);
  torc_tensor *w0 = torc_randn(ns, 1, TORC_F32, TORC_CPU, NULL);
  torc_tensor *b0 = torc_randn(ns, 1, TORC_F32, TORC_CPU, NULL);
  torc_tensor *gw[2], *gx[2], *dr[2];
  for (int t = 0; t < 2; t++) {
    assert_ok(torc_set_num_threads(t + 1));
    torc_tensor *xl = torc_clone(x), *w = torc_clone(w0);
    assert_ok(torc_set_requires_grad(xl, 1));
    assert_ok(torc_set_requires_grad(w, 1));
    CPU;
    torc_tensor *y = torc_layer_norm(xl, ns, 1, w, b0, 1e-5);
    assert_ok(torc_backward(torc_sum(torc_mul(y, r), NULL, 0, 0), NULL, 0));
    torc_generator *g = torc_generator_new(9);
    dr[t] = torc_dropout(x, 0.2, 1, g);
    UNPIN;
    torc_generator_free(g);
    gw[t] = torc_grad_of(w);
    gx[t] = torc_grad_of(xl);
  }
  assert_ok(torc_set_num_threads(2));
  assert_same(gw[1], gw[0]);
  assert_same(gx[1], gx[0]);
  assert_same(dr[1], dr[0]);
  torc_scope_end(scope);
}

/* ---- the plugin serves them ---- */

/* In normal use (no pin) the plugin's kernels run each op of this file,
 * f32, with a dropout in the attention: none declines to ref. */
static void test_served(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t xs[3] = {2, 40, 24}, ns[1] = {24};
  torc_tensor *x = torc_randn(xs, 3, TORC_F32, TORC_CPU, NULL);
  torc_tensor *w = torc_randn(ns, 1, TORC_F32, TORC_CPU, NULL);
  torc_tensor *b = torc_randn(ns, 1, TORC_F32, TORC_CPU, NULL);
  torc_tensor *tab = torc_randn(TORC_SHAPE(13, 24), TORC_F32, TORC_CPU, NULL);
  int64_t ix[4] = {0, 3, 3, 12};
  torc_tensor *idx = torc_from_host(ix, TORC_SHAPE(4), TORC_I64, TORC_CPU);
  assert_torc(idx);
  torc_tensor *leaves[3] = {x, w, tab};
  for (int i = 0; i < 3; i++)
    assert_ok(torc_set_requires_grad(leaves[i], 1));
  torc_generator *g = torc_generator_new(4);
  torc_profile_enable(1);
  torc_tensor *y = torc_gelu(torc_layer_norm(x, ns, 1, w, b, 1e-5), 0);
  y = torc_dropout(y, 0.25, 1, g);
  y = torc_scaled_dot_product_attention(y, y, y, NULL, 0.25, 1, 0, g);
  torc_tensor *e = torc_embedding(idx, tab);
  torc_tensor *loss =
      torc_add(torc_sum(y, NULL, 0, 0), torc_sum(e, NULL, 0, 0));
  assert_torc(loss);
  assert_ok(torc_backward(loss, NULL, 0));
  assert_torc(torc_norm(torc_grad_of(x), 2, NULL, 0, 0));
  char *rep = torc_profile_report(100, 1);
  torc_profile_enable(0);
  torc_generator_free(g);
  assert_non_null(rep);
  static const char *const ops[] = {"layer_norm",
                                    "layer_norm_backward",
                                    "gelu",
                                    "gelu_backward",
                                    "dropout",
                                    "scaled_dot_product_attention",
                                    "scaled_dot_product_attention_backward",
                                    "embedding",
                                    "embedding_backward",
                                    "norm"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!test_profile_served(rep, ops[i], "cpu") ||
        test_profile_served(rep, ops[i], "ref")) {
      print_error("%s is not served by the cpu plugin alone:\n%s\n", ops[i],
                  rep);
      free(rep);
      fail();
    }
  free(rep);
  torc_scope_end(scope);
}

int main(void) {
  if (!test_plugin_built("cpu", "libopenblas-dev"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_dropout, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_dropout_backward, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_dropout_bf16_rounding,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_layer_norm, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_gelu_backward, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_embedding, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_norm, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_threads, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_served, test_live_setup,
                                      test_live_teardown),
  };
  return cmocka_run_group_tests_name("cpu nn kernels against ref", tests,
                                     setup_pinned, test_teardown_all);
}
