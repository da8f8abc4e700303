/* tests/test_attention.c — torc_scaled_dot_product_attention, torc_tril,
 * torc_triu and torc_masked_fill: outputs and input gradients against
 * tests/fixtures/attention.safetensors (PyTorch's values, written by
 * tests/fixtures/gen_attention.py), on the cpu device (the cpu plugin's
 * fused attention forward where it serves) and on sim (ref's kernels);
 * gradcheck on small f64 cases, dropout, the error messages, and the
 * memory of a 4096-long sequence (linear, not L * S).
 */
#include <math.h>
#include <time.h>

#include "testutil.h"

static double max_dev_f32, max_dev_f64;
static int have_cpu_plugin; /* the fused forward serves the cpu device */

/* Max |got - want| / max(1, max |want|) over the elements. */
static double deviation(const torc_tensor *got, const torc_tensor *want) {
  assert_int_equal(torc_numel(got), torc_numel(want));
  assert_int_equal(torc_ndim(got), torc_ndim(want));
  assert_memory_equal(torc_shape(got), torc_shape(want),
                      sizeof(int64_t) * (size_t)torc_ndim(got));
  int64_t n = torc_numel(want);
  double *g = test_values(got), *w = test_values(want), m = 1, d = 0;
  assert_non_null(g);
  assert_non_null(w);
  for (int64_t i = 0; i < n; i++)
    if (isfinite(w[i]))
      m = fmax(m, fabs(w[i]));
  for (int64_t i = 0; i < n; i++) {
    if (g[i] == w[i])
      continue;
    double e = fabs(g[i] - w[i]) / m;
    d = e > d || isnan(e) ? e : d;
  }
  free(g);
  free(w);
  return d;
}

static void expect(const torc_safetensors *st, const char *key,
                   const char *what, const torc_tensor *got,
                   const char *dev) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s", key, what);
  torc_tensor *want = torc_safetensors_get(st, name, TORC_CPU);
  assert_torc(want);
  assert_torc(got);
  int f64 = torc_dtype_of(want) == TORC_F64;
  assert_int_equal(torc_dtype_of(got), torc_dtype_of(want));
  double d = deviation(got, want), tol = f64 ? 1e-12 : 2e-6;
  if (!(d <= tol)) {
    print_error("%s on %s: deviation %.3g > %g\n", name, dev, d, tol);
    fail();
  }
  double *m = f64 ? &max_dev_f64 : &max_dev_f32;
  *m = fmax(*m, d);
}

static torc_tensor *get(const torc_safetensors *st, const char *key,
                        const char *what, torc_device dev, int grad) {
  char name[128];
  snprintf(name, sizeof name, "%s.%s", key, what);
  torc_tensor *t = torc_safetensors_get(st, name, dev);
  assert_torc(t);
  if (grad)
    assert_ok(torc_set_requires_grad(t, 1));
  return t;
}

/* One case on one device: forward, then backward of sum(out * gy). */
static void run_case(const torc_safetensors *st, const char *key,
                     const char *spec, torc_device dev) {
  char devname[32], op[32];
  torc_device_str(dev, devname, sizeof devname);
  int scope = torc_scope_begin();
  torc_tensor *gy = get(st, key, "gy", dev, 0), *out;
  torc_tensor *ins[3] = {NULL, NULL, NULL};
  static const char *const gnames[3] = {"gq", "gk", "gv"};
  int n_in = 1;
  if (strncmp(spec, "sdpa ", 5) == 0) {
    int kind = 0, causal = 0;
    double scale = 0;
    assert_int_equal(sscanf(spec + 5, "%d %d %lf", &kind, &causal, &scale),
                     3);
    ins[0] = get(st, key, "q", dev, 1);
    ins[1] = get(st, key, "k", dev, 1);
    ins[2] = get(st, key, "v", dev, 1);
    torc_tensor *m = kind ? get(st, key, "mask", dev, 0) : NULL;
    out = torc_scaled_dot_product_attention(ins[0], ins[1], ins[2], m, 0,
                                            causal, scale, NULL);
    n_in = 3;
  } else {
    double arg = 0;
    assert_int_equal(sscanf(spec, "%31s %lf", op, &arg), 2);
    ins[0] = get(st, key, "x", dev, 1);
    if (strcmp(op, "tril") == 0)
      out = torc_tril(ins[0], (int64_t)arg);
    else if (strcmp(op, "triu") == 0)
      out = torc_triu(ins[0], (int64_t)arg);
    else
      out = torc_masked_fill(ins[0], get(st, key, "mask", dev, 0), arg);
  }
  assert_torc(out);
  expect(st, key, "out", out, devname);
  assert_ok(torc_backward(torc_sum(torc_mul(out, gy), NULL, 0, 0), NULL, 0));
  for (int i = 0; i < n_in; i++)
    expect(st, key, n_in == 1 ? "gx" : gnames[i], torc_grad_of(ins[i]),
           devname);
  torc_scope_end(scope);
}

static void test_pytorch_parity(void **state) {
  (void)state;
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/attention.safetensors",
           src ? src : ".");
  torc_safetensors *st = torc_safetensors_open(path);
  assert_torc(st);
  torc_device sim = TORC_CPU;
  assert_ok(torc_device_parse("sim", &sim));
  int n = 0;
  for (int i = 0; i < torc_safetensors_metadata_count(st); i++) {
    const char *mk = torc_safetensors_metadata_key(st, i);
    if (strncmp(mk, "case:", 5) != 0)
      continue;
    const char *spec = torc_safetensors_metadata(st, mk);
    run_case(st, mk + 5, spec, TORC_CPU);
    run_case(st, mk + 5, spec, sim);
    n++;
  }
  torc_safetensors_close(st);
  assert_true(n >= 18);
  printf("attention fixture: %d cases, max deviation f32 %.3g, f64 %.3g\n",
         n, max_dev_f32, max_dev_f64);
}

/* ---- gradcheck ---- */

typedef struct gc_case {
  int causal, mask; /* mask: 0 none, 1 bool, 2 float */
  double scale;
  torc_tensor *m;
} gc_case;

static torc_tensor *sdpa_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  gc_case *c = user;
  return torc_scaled_dot_product_attention(in[0], in[1], in[2], c->m, 0,
                                           c->causal, c->scale, NULL);
}

static torc_tensor *randn(const int64_t *shape, int nd) {
  torc_tensor *t = torc_randn(shape, nd, TORC_F64, TORC_CPU, NULL);
  assert_torc(t);
  return t;
}

static void test_gradcheck(void **state) {
  (void)state;
  int64_t qs[3] = {2, 3, 4}, ks[3] = {2, 5, 4}, vs[3] = {2, 5, 3};
  int64_t ms[2] = {3, 5};
  for (int c = 0; c < 4; c++) {
    int scope = torc_scope_begin();
    torc_tensor *in[3] = {randn(qs, 3), randn(ks, 3), randn(vs, 3)};
    for (int i = 0; i < 3; i++)
      assert_ok(torc_set_requires_grad(in[i], 1));
    gc_case g = {c == 1, 0, c == 3 ? 0.7 : 0, NULL};
    if (c == 2) /* float mask */
      g.m = randn(ms, 2);
    if (c == 3) { /* bool mask with a kept key per row */
      torc_tensor *r = randn(ms, 2);
      torc_tensor *keep = torc_gt(r, torc_full(NULL, 0, -0.3, TORC_F64,
                                               TORC_CPU));
      assert_torc(keep);
      g.m = torc_logical_or(keep, torc_triu(torc_tril(
                                      torc_full(ms, 2, 1, TORC_BOOL, TORC_CPU),
                                      0), 0));
    }
    assert_ok(torc_gradcheck(sdpa_fn, &g, in, 3, 1e-6, 1e-7, 1e-5));
    torc_scope_end(scope);
  }
}

static torc_tensor *tril_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  (void)user;
  torc_tensor *m = torc_gt(in[0], torc_full(NULL, 0, 0.5, TORC_F64, TORC_CPU));
  return torc_masked_fill(torc_triu(torc_tril(in[0], 1), -1), m, 2.0);
}

static void test_gradcheck_masks(void **state) {
  (void)state;
  int64_t s[3] = {2, 4, 5};
  int scope = torc_scope_begin();
  torc_tensor *x = randn(s, 3);
  assert_ok(torc_set_requires_grad(x, 1));
  assert_ok(torc_gradcheck(tril_fn, NULL, &x, 1, 1e-6, 1e-7, 1e-5));
  torc_scope_end(scope);
}

/* ---- dropout ---- */

/* With dropout p the weights are a Philox mask over the softmax: the same
 * seed gives the same result on cpu and sim, p = 1 gives zeros, and the
 * result's mean over many keys stays near the undropped one's. */
static void test_dropout(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t s[3] = {2, 16, 8};
  torc_tensor *q = randn(s, 3), *k = randn(s, 3), *v = randn(s, 3);
  torc_device sim;
  assert_ok(torc_device_parse("sim", &sim));
  torc_generator *g1 = torc_generator_new(7), *g2 = torc_generator_new(7);
  assert_non_null(g1);
  assert_non_null(g2);
  torc_tensor *a = torc_scaled_dot_product_attention(q, k, v, NULL, 0.3, 0, 0,
                                                     g1);
  torc_tensor *b = torc_scaled_dot_product_attention(
      torc_to(q, sim), torc_to(k, sim), torc_to(v, sim),
      NULL, 0.3, 0, 0, g2);
  torc_tensor *plain = torc_scaled_dot_product_attention(q, k, v, NULL, 0, 0,
                                                         0, NULL);
  assert_torc(a);
  assert_torc(b);
  test_assert_close(a, b, 1e-12);
  double d = deviation(a, plain);
  assert_true(d > 1e-3); /* something was dropped */
  torc_tensor *z = torc_scaled_dot_product_attention(q, k, v, NULL, 1, 0, 0,
                                                     g1);
  double *zv = test_values(z);
  assert_non_null(zv);
  for (int64_t i = 0; i < torc_numel(z); i++)
    assert_true(zv[i] == 0);
  free(zv);
  torc_generator_free(g1);
  torc_generator_free(g2);
  torc_scope_end(scope);
}

/* With dropout the mask comes from the generator's stream: a fresh
 * generator of one seed per call gives every call the same mask, so
 * gradcheck sees a fixed function and checks the dropout backward. */
static torc_tensor *dropout_fn(torc_tensor *const *in, int n, void *user) {
  (void)n;
  (void)user;
  torc_generator *g = torc_generator_new(3);
  torc_tensor *o = torc_scaled_dot_product_attention(in[0], in[1], in[2],
                                                     NULL, 0.4, 0, 0, g);
  torc_generator_free(g);
  return o;
}

static void test_gradcheck_dropout(void **state) {
  (void)state;
  int64_t qs[3] = {2, 4, 3}, ks[3] = {2, 6, 3};
  int scope = torc_scope_begin();
  torc_tensor *in[3] = {randn(qs, 3), randn(ks, 3), randn(ks, 3)};
  for (int i = 0; i < 3; i++)
    assert_ok(torc_set_requires_grad(in[i], 1));
  assert_ok(torc_gradcheck(dropout_fn, NULL, in, 3, 1e-6, 1e-7, 1e-5));
  torc_scope_end(scope);
}

/* q, k, v as [B, L, H, E] transposed to [B, H, L, E] (strided views, as a
 * multi-head layer makes them) give what their contiguous copies give. */
static void test_strided_inputs(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t s[4] = {2, 7, 3, 8};
  torc_tensor *x[3], *xt[3], *xc[3];
  for (int i = 0; i < 3; i++) {
    x[i] = torc_randn(s, 4, TORC_F32, TORC_CPU, NULL);
    xt[i] = torc_transpose(x[i], 1, 2);
    xc[i] = torc_contiguous(xt[i]);
    assert_torc(xc[i]);
  }
  torc_tensor *a = torc_scaled_dot_product_attention(xt[0], xt[1], xt[2],
                                                     NULL, 0, 1, 0, NULL);
  torc_tensor *b = torc_scaled_dot_product_attention(xc[0], xc[1], xc[2],
                                                     NULL, 0, 1, 0, NULL);
  assert_torc(a);
  test_assert_close(a, b, 0);
  torc_scope_end(scope);
}

/* The causal mask as models build it: tril of a bool matrix, then
 * masked_fill of an integer tensor where it is false; checked element by
 * element against the definitions (kept where j - i <= diagonal). */
static void test_bool_and_int(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t s[2] = {4, 6};
  for (int64_t d = -2; d <= 2; d++) {
    torc_tensor *t = torc_tril(torc_ones(s, 2, TORC_BOOL, TORC_CPU), d);
    torc_tensor *u = torc_triu(torc_ones(s, 2, TORC_I32, TORC_CPU), d);
    assert_torc(t);
    assert_torc(u);
    assert_int_equal(torc_dtype_of(t), TORC_BOOL);
    torc_tensor *f = torc_masked_fill(torc_full(s, 2, 7, TORC_I64, TORC_CPU),
                                      torc_logical_not(t), -3);
    assert_torc(f);
    assert_int_equal(torc_dtype_of(f), TORC_I64);
    double *tv = test_values(t), *uv = test_values(u), *fv = test_values(f);
    assert_non_null(tv);
    assert_non_null(uv);
    assert_non_null(fv);
    for (int64_t i = 0; i < 4; i++)
      for (int64_t j = 0; j < 6; j++) {
        int low = j - i <= d, up = j - i >= d;
        assert_true(tv[i * 6 + j] == low);
        assert_true(uv[i * 6 + j] == up);
        assert_true(fv[i * 6 + j] == (low ? 7 : -3));
      }
    free(tv);
    free(uv);
    free(fv);
  }
  torc_scope_end(scope);
}

/* ---- errors ---- */

static void expect_err(torc_tensor *t, torc_status st, const char *a,
                       const char *b) {
  assert_null(t);
  assert_error(st, a);
  if (b)
    assert_contains(torc_last_error(), b);
  torc_clear_error();
}

static void test_errors(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  int64_t qs[3] = {2, 3, 4}, ks[3] = {2, 5, 4}, bad[3] = {2, 5, 6};
  int64_t vb[3] = {2, 6, 4}, ms[2] = {3, 5}, mb[2] = {4, 5};
  torc_tensor *q = randn(qs, 3), *k = randn(ks, 3);
  expect_err(torc_scaled_dot_product_attention(q, randn(bad, 3), k, NULL, 0,
                                               0, 0, NULL),
             TORC_ERR_SHAPE, "[2, 3, 4]", "[2, 5, 6]");
  expect_err(torc_scaled_dot_product_attention(q, k, randn(vb, 3), NULL, 0,
                                               0, 0, NULL),
             TORC_ERR_SHAPE, "[2, 5, 4]", "[2, 6, 4]");
  torc_tensor *bm = torc_ones(ms, 2, TORC_BOOL, TORC_CPU);
  expect_err(torc_scaled_dot_product_attention(q, k, k, bm, 0, 1, 0, NULL),
             TORC_ERR_INVALID, "attn_mask and is_causal", NULL);
  expect_err(torc_scaled_dot_product_attention(
                 q, k, k, torc_ones(ms, 2, TORC_I64, TORC_CPU), 0, 0, 0, NULL),
             TORC_ERR_DTYPE, "attn_mask is i64", NULL);
  expect_err(torc_scaled_dot_product_attention(
                 q, k, k, torc_ones(mb, 2, TORC_BOOL, TORC_CPU), 0, 0, 0,
                 NULL),
             TORC_ERR_SHAPE, "[4, 5]", "[2, 3, 5]");
  expect_err(torc_scaled_dot_product_attention(q, k, k, NULL, 1.5, 0, 0,
                                               NULL),
             TORC_ERR_INVALID, "dropout_p is 1.5", NULL);
  expect_err(torc_scaled_dot_product_attention(
                 q, torc_to_dtype(k, TORC_F32), k, NULL, 0, 0, 0, NULL),
             TORC_ERR_DTYPE, "f64, f32 and f64", NULL);
  int64_t v1[1] = {4};
  expect_err(torc_tril(randn(v1, 1), 0), TORC_ERR_SHAPE, "torc_tril", "[4]");
  expect_err(torc_masked_fill(q, torc_ones(ms, 2, TORC_F32, TORC_CPU), 0),
             TORC_ERR_DTYPE, "the mask is f32", NULL);
  expect_err(torc_masked_fill(q, torc_ones(mb, 2, TORC_BOOL, TORC_CPU), 0),
             TORC_ERR_SHAPE, "[4, 5]", "[2, 3, 4]");
  expect_err(torc_masked_fill(torc_ones(ms, 2, TORC_I64, TORC_CPU),
                              torc_ones(ms, 2, TORC_BOOL, TORC_CPU), NAN),
             TORC_ERR_INVALID, "value nan does not fit x's dtype i64", NULL);
  expect_err(torc_scaled_dot_product_attention(q, NULL, k, NULL, 0, 0, 0,
                                               NULL),
             TORC_ERR_NULL, "torc_scaled_dot_product_attention", NULL);
  torc_scope_end(scope);
}

/* ---- memory: linear in the sequence length ---- */

static void test_memory_4096(void **state) {
  (void)state;
  const char *vg = getenv("TORC_VALGRIND");
  if (vg && *vg && strcmp(vg, "0") != 0) {
    printf("memory_4096 skipped under valgrind: a 4096 x 4096 attention "
           "takes minutes there\n");
    skip();
  }
  if (!have_cpu_plugin) {
    printf("memory_4096 skipped: without the cpu plugin ref's kernels take "
           "seconds at this size\n");
    skip();
  }
  int64_t s[3] = {1, 4096, 64};
  int scope = torc_scope_begin();
  torc_tensor *q = torc_randn(s, 3, TORC_F32, TORC_CPU, NULL);
  torc_tensor *k = torc_randn(s, 3, TORC_F32, TORC_CPU, NULL);
  torc_tensor *v = torc_randn(s, 3, TORC_F32, TORC_CPU, NULL);
  assert_torc(v);
  assert_ok(torc_reset_peak_memory_stats(TORC_CPU));
  torc_memory_stats2 before = {.struct_size = sizeof before};
  assert_ok(torc_device_memory_stats2(TORC_CPU, &before));
  torc_tensor *o = torc_scaled_dot_product_attention(q, k, v, NULL, 0, 1, 0,
                                                     NULL);
  assert_torc(o);
  assert_ok(torc_synchronize(TORC_CPU));
  torc_memory_stats2 after = {.struct_size = sizeof after};
  assert_ok(torc_device_memory_stats2(TORC_CPU, &after));
  size_t used = after.peak_allocated - before.allocated, used_fw = used;
  size_t full = (size_t)4096 * 4096 * 4;
  printf("attention at L = S = 4096, E = 64: peak %zu bytes above the "
         "inputs (the score matrix would be %zu)\n",
         used, full);
  assert_true(used < full / 16);
  /* the backward: the three gradients, gy and blocks, still no [L, S] */
  torc_tensor *in[3] = {q, k, v}, *g[3];
  for (int i = 0; i < 3; i++)
    assert_ok(torc_set_requires_grad(in[i], 1));
  torc_tensor *o2 = torc_scaled_dot_product_attention(q, k, v, NULL, 0, 1, 0,
                                                      NULL);
  assert_torc(o2);
  torc_tensor *root = torc_sum(o2, NULL, 0, 0);
  assert_torc(root);
  assert_ok(torc_synchronize(TORC_CPU));
  assert_ok(torc_device_memory_stats2(TORC_CPU, &before));
  assert_ok(torc_reset_peak_memory_stats(TORC_CPU));
  assert_ok(torc_grad(&root, NULL, 1, in, 3, g, 0, 0));
  assert_ok(torc_synchronize(TORC_CPU));
  assert_ok(torc_device_memory_stats2(TORC_CPU, &after));
  used = after.peak_allocated - before.allocated;
  printf("its backward: peak %zu bytes above what the forward left\n", used);
  assert_true(used < full / 8);
  size_t used_bw = used;
  /* with dropout: the mask is drawn per block, forward and backward */
  torc_generator *gen = torc_generator_new(1);
  assert_non_null(gen);
  assert_ok(torc_synchronize(TORC_CPU));
  assert_ok(torc_device_memory_stats2(TORC_CPU, &before));
  assert_ok(torc_reset_peak_memory_stats(TORC_CPU));
  torc_tensor *o3 = torc_scaled_dot_product_attention(q, k, v, NULL, 0.1, 1,
                                                      0, gen);
  torc_generator_free(gen);
  assert_torc(o3);
  torc_tensor *root3 = torc_sum(o3, NULL, 0, 0);
  assert_torc(root3);
  assert_ok(torc_grad(&root3, NULL, 1, in, 3, g, 0, 0));
  assert_ok(torc_synchronize(TORC_CPU));
  assert_ok(torc_device_memory_stats2(TORC_CPU, &after));
  used = after.peak_allocated - before.allocated;
  printf("with dropout 0.1, forward and backward: peak %zu bytes\n", used);
  /* no more than without dropout: not even a bit per (query, key), which
   * would be 2 MiB here */
  assert_true(used <= used_fw + used_bw + 65536);
  torc_scope_end(scope);
}

/* ---- the cpu plugin's fused forward against ref's kernels ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Dropout of run_pinned's calls: p, and the seed of a fresh generator
 * per call (so two runs draw the same mask). */
static double pin_dropout;
static uint64_t pin_seed;

/* The result with the dispatcher pinned to `pin` (NULL: the best kernel)
 * and its time; with grads != NULL (in[] requiring grad) also the
 * gradients of sum(out * gy) into grads[0..2] and their time. */
static torc_tensor *run_pinned(const char *pin, torc_tensor *const *in,
                               const torc_tensor *mask, int causal,
                               double *secs, const torc_tensor *gy,
                               torc_tensor **grads, double *bw_secs) {
  torc__dispatch_pin(pin);
  torc_generator *g = pin_dropout > 0 ? torc_generator_new(pin_seed) : NULL;
  double t0 = now_s();
  torc_tensor *o = torc_scaled_dot_product_attention(
      in[0], in[1], in[2], mask, pin_dropout, causal, 0, g);
  torc_generator_free(g);
  assert_torc(o);
  assert_ok(torc_synchronize(TORC_CPU));
  *secs = now_s() - t0;
  if (grads) {
    t0 = now_s();
    assert_ok(torc_grad(&o, &gy, 1, in, 3, grads, 0, 0));
    assert_ok(torc_synchronize(TORC_CPU));
    *bw_secs = now_s() - t0;
  }
  torc__dispatch_pin(NULL);
  return o;
}

/* Sizes beyond one block of queries (64) and keys (256), odd ones, with
 * each mask kind: the online softmax across key blocks matches ref. */
static void test_fused_vs_ref(void **state) {
  (void)state;
  static const struct {
    int64_t L, S;
    int mask, causal;
    torc_dtype dt;
  } cases[] = {
      {100, 700, 0, 0, TORC_F32}, {300, 300, 0, 1, TORC_F32},
      {70, 513, 1, 0, TORC_F64},  {130, 260, 2, 0, TORC_F32},
      {600, 90, 0, 1, TORC_F64},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int scope = torc_scope_begin();
    int64_t qs[3] = {2, cases[c].L, 32}, ks[3] = {2, cases[c].S, 32};
    int64_t ms[2] = {cases[c].L, cases[c].S};
    torc_dtype dt = cases[c].dt;
    torc_tensor *in[3] = {torc_randn(qs, 3, dt, TORC_CPU, NULL),
                          torc_randn(ks, 3, dt, TORC_CPU, NULL),
                          torc_randn(ks, 3, dt, TORC_CPU, NULL)};
    torc_tensor *m = NULL;
    if (cases[c].mask == 1) /* bool, the diagonal band always kept */
      m = torc_logical_or(
          torc_gt(torc_randn(ms, 2, dt, TORC_CPU, NULL),
                  torc_full(NULL, 0, 0.5, dt, TORC_CPU)),
          torc_tril(torc_ones(ms, 2, TORC_BOOL, TORC_CPU), 0));
    else if (cases[c].mask == 2)
      m = torc_randn(ms, 2, dt, TORC_CPU, NULL);
    for (int i = 0; i < 3; i++)
      assert_ok(torc_set_requires_grad(in[i], 1));
    int64_t os[3] = {2, cases[c].L, 32};
    torc_tensor *gy = torc_randn(os, 3, dt, TORC_CPU, NULL);
    torc_tensor *ga[3], *gb[3];
    double t, tb;
    torc_tensor *a = run_pinned(NULL, in, m, cases[c].causal, &t, gy, ga, &tb);
    torc_tensor *b = run_pinned("ref", in, m, cases[c].causal, &t, gy, gb,
                                &tb);
    double tol = dt == TORC_F64 ? 1e-12 : 2e-6;
    double d = deviation(a, b);
    for (int i = 0; i < 3; i++) {
      d = fmax(d, deviation(ga[i], gb[i]));
    }
    if (!(d <= tol * 5)) {
      print_error("case %zu: fused differs from ref by %.3g\n", c, d);
      fail();
    }
    torc_scope_end(scope);
  }
}

/* With dropout the fused kernels draw ref's Philox mask (forward) and
 * draw it again (backward): outputs and gradients match ref's at odd
 * sizes across blocks, with each mask kind, causal or not, f32 and f64,
 * and with 1 thread and 2 the same bits. */
static void test_fused_dropout_vs_ref(void **state) {
  (void)state;
  if (!have_cpu_plugin) {
    printf("fused_dropout_vs_ref skipped: the cpu plugin is not built\n");
    skip();
  }
  int nt0 = torc_get_num_threads();
  assert_ok(torc_set_num_threads(2));
  static const struct {
    int64_t B, L, S, E;
    int mask, causal;
    double p;
    torc_dtype dt;
  } cases[] = {
      {2, 100, 300, 16, 0, 0, 0.1, TORC_F32},
      {3, 130, 130, 8, 0, 1, 0.5, TORC_F32},
      {1, 70, 513, 12, 1, 0, 0.3, TORC_F64},
      {2, 65, 260, 16, 2, 0, 0.2, TORC_F32},
      {1, 200, 90, 8, 0, 1, 0.9, TORC_F64},
      {1, 1, 1, 4, 0, 1, 0.5, TORC_F32},
      {2, 0, 5, 4, 0, 0, 0.5, TORC_F32},
      /* 16 and more (batch, head)s: the one-pass backward */
      {16, 130, 130, 8, 0, 1, 0.2, TORC_F32},
      {17, 70, 300, 8, 2, 0, 0.0, TORC_F64},
      {16, 0, 9, 4, 0, 0, 0.3, TORC_F32},
      {20, 65, 40, 8, 1, 0, 0.0, TORC_F32},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int scope = torc_scope_begin();
    int64_t qs[3] = {cases[c].B, cases[c].L, cases[c].E};
    int64_t ks[3] = {cases[c].B, cases[c].S, cases[c].E};
    int64_t ms[2] = {cases[c].L, cases[c].S};
    torc_dtype dt = cases[c].dt;
    torc_tensor *in[3] = {torc_randn(qs, 3, dt, TORC_CPU, NULL),
                          torc_randn(ks, 3, dt, TORC_CPU, NULL),
                          torc_randn(ks, 3, dt, TORC_CPU, NULL)};
    torc_tensor *m = NULL;
    if (cases[c].mask == 1)
      m = torc_logical_or(
          torc_gt(torc_randn(ms, 2, dt, TORC_CPU, NULL),
                  torc_full(NULL, 0, 0.5, dt, TORC_CPU)),
          torc_tril(torc_ones(ms, 2, TORC_BOOL, TORC_CPU), 0));
    else if (cases[c].mask == 2)
      m = torc_randn(ms, 2, dt, TORC_CPU, NULL);
    for (int i = 0; i < 3; i++)
      assert_ok(torc_set_requires_grad(in[i], 1));
    torc_tensor *gy = torc_randn(qs, 3, dt, TORC_CPU, NULL);
    torc_tensor *ga[3], *gb[3], *g1[3];
    double t, tb;
    pin_dropout = cases[c].p;
    pin_seed = 100 + c;
    torc_tensor *a = run_pinned(NULL, in, m, cases[c].causal, &t, gy, ga, &tb);
    torc_tensor *b = run_pinned("ref", in, m, cases[c].causal, &t, gy, gb,
                                &tb);
    assert_ok(torc_set_num_threads(1));
    torc_tensor *a1 = run_pinned(NULL, in, m, cases[c].causal, &t, gy, g1,
                                 &tb);
    assert_ok(torc_set_num_threads(2));
    pin_dropout = 0;
    double tol = dt == TORC_F64 ? 1e-12 : 2e-6;
    double d = deviation(a, b);
    for (int i = 0; i < 3; i++)
      d = fmax(d, deviation(ga[i], gb[i]));
    if (!(d <= tol * 5)) {
      print_error("case %zu: fused with dropout differs from ref by %.3g\n",
                  c, d);
      fail();
    }
    assert_true(deviation(a1, a) == 0);
    for (int i = 0; i < 3; i++)
      assert_true(deviation(g1[i], ga[i]) == 0);
    torc_scope_end(scope);
  }
  assert_ok(torc_set_num_threads(nt0));
}

/* One timing of the fused forward and ref's at L = S = 1024, E = 64. */
static void test_fused_speed(void **state) {
  (void)state;
  const char *vg = getenv("TORC_VALGRIND");
  if (vg && *vg && strcmp(vg, "0") != 0) {
    printf("fused_speed skipped under valgrind: timing means nothing "
           "there\n");
    skip();
  }
  if (!have_cpu_plugin) {
    printf("fused_speed skipped: the cpu plugin is not built\n");
    skip();
  }
  int scope = torc_scope_begin();
  int64_t s[3] = {1, 1024, 64};
  torc_tensor *in[3] = {torc_randn(s, 3, TORC_F32, TORC_CPU, NULL),
                        torc_randn(s, 3, TORC_F32, TORC_CPU, NULL),
                        torc_randn(s, 3, TORC_F32, TORC_CPU, NULL)};
  for (int i = 0; i < 3; i++)
    assert_ok(torc_set_requires_grad(in[i], 1));
  torc_tensor *gy = torc_randn(s, 3, TORC_F32, TORC_CPU, NULL);
  torc_tensor *ga[3], *gb[3];
  double tf, tr, bf, br;
  torc_tensor *a = run_pinned(NULL, in, NULL, 0, &tf, gy, ga, &bf);
  torc_tensor *b = run_pinned("ref", in, NULL, 0, &tr, gy, gb, &br);
  printf("attention at L = S = 1024, E = 64, f32: forward fused %.4f s, ref "
         "%.4f s (%.1fx); backward fused %.4f s, ref %.4f s (%.1fx)\n",
         tf, tr, tr / tf, bf, br, br / bf);
  double d = deviation(a, b);
  for (int i = 0; i < 3; i++) {
    d = fmax(d, deviation(ga[i], gb[i]));
  }
  assert_true(d <= 1e-5);
  torc_scope_end(scope);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pytorch_parity),
      cmocka_unit_test(test_gradcheck),
      cmocka_unit_test(test_gradcheck_masks),
      cmocka_unit_test(test_dropout),
      cmocka_unit_test(test_gradcheck_dropout),
      cmocka_unit_test(test_strided_inputs),
      cmocka_unit_test(test_bool_and_int),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_memory_4096),
      cmocka_unit_test(test_fused_vs_ref),
      cmocka_unit_test(test_fused_dropout_vs_ref),
      cmocka_unit_test(test_fused_speed),
  };
  int st = torc_plugin_load("ref", NULL);
  if (st == TORC_OK)
    st = torc_plugin_load("sim", NULL);
  if (st != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return 1;
  }
  have_cpu_plugin = torc_plugin_load("cpu", NULL) == TORC_OK;
  if (!have_cpu_plugin) {
    printf("the cpu plugin is not built: cpu runs ref's kernels\n");
    torc_clear_error();
  }
  int rc = cmocka_run_group_tests_name("attention", tests, NULL, NULL);
  torc_shutdown();
  return rc;
}
