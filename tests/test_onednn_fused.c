/* tests/test_onednn_fused.c — the onednn plugin's fused inference kernels
 * "linear_act" and "conv2d_act" (torc/plugin.h) against ref's, which
 * compose the separate ops: with and without bias, relu and none, the
 * max pool and none, odd sizes, ceil_mode, stride, dilation, groups, a
 * batch past the plugin's chunk and not a multiple of it, transposed and
 * padded weights, NaN and infinities (NaN where ref has it), and the cases
 * the plugin declines (then ref's answer, through the dispatch order).
 *
 * The first group loads ref.so and onednn.so itself, runs their init with
 * a host of its own that records the kernels they register, and calls
 * them as the dispatcher does: the highest priority first, the next one
 * when a kernel declines. The second
 * group checks, through torc's own loader, that in normal use the plugin
 * serves cpu's f32 linear_act and conv2d_act, that a frozen plan matches
 * eager, and that a sequential's no-grad forward, which runs its conv,
 * relu and pool layers as one conv2d_act, matches the layers one by one.
 */
#include "testutil.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>

#include "torc/plugin.h"

/* f32 sums of up to ~800 products of values in [-1, 1] against ref's
 * double ones (relative to 1 + |ref|). */
#define TOL 2e-5

/* ---- a host of the test's own ---- */

typedef struct kreg {
  char op[32], provider[16];
  int32_t dtype, priority;
  torc_kernel_fn fn;
} kreg;

static kreg regs[1024];
static int n_regs;
static const char *loading; /* the plugin whose init runs */
static char err_msg[1024];
static int err_status;
static int n_threads;

static int h_set_error_v(int status, const char *fmt, va_list ap) {
  vsnprintf(err_msg, sizeof err_msg, fmt, ap);
  err_status = status;
  return status;
}

static int h_set_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  h_set_error_v(status, fmt, ap);
  va_end(ap);
  return status;
}

static void h_log(int level, const char *fmt, ...) { (void)level, (void)fmt; }

static int h_register_kernel(torc_plugin *self, const torc_kernel_reg *r) {
  (void)self;
  if (strcmp(r->device_type, "cpu") != 0 || strlen(r->op) >= 32)
    return TORC_OK;
  if (n_regs == (int)(sizeof regs / sizeof regs[0]))
    return h_set_error(TORC_ERR_OOM, "test host: too many kernels");
  kreg *k = &regs[n_regs++];
  snprintf(k->op, sizeof k->op, "%s", r->op);
  snprintf(k->provider, sizeof k->provider, "%s", loading);
  k->dtype = r->dtype;
  k->priority = r->priority;
  k->fn = r->fn;
  return TORC_OK;
}

static int h_num_threads(void) { return n_threads; }

static const torc_host host = {
    .struct_size = offsetof(torc_host, api),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .core_version = "test",
    .set_error = h_set_error,
    .log = h_log,
    .register_kernel = h_register_kernel,
    .num_threads = h_num_threads,
    .set_error_v = h_set_error_v,
};

static const torc_plugin_info *dnn_info; /* for its fini */
static char self_token;                  /* the plugins' opaque `self` */

static const torc_plugin_info *load(const char *name) {
  const char *path = getenv("TORC_PLUGIN_PATH");
  char so[4096];
  snprintf(so, sizeof so, "%s/%s.so", path ? path : ".", name);
  /* never closed: the onednn plugin's libgomp threads outlive a dlclose */
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    print_error("dlopen %s: %s\n", so, dlerror());
    return NULL;
  }
  torc_plugin_entry_fn entry =
      (torc_plugin_entry_fn)(uintptr_t)dlsym(h, "torc_plugin_entry");
  const torc_plugin_info *info = entry ? entry() : NULL;
  loading = name;
  if (info == NULL ||
      info->init(&host, (torc_plugin *)(void *)&self_token) != TORC_OK) {
    print_error("init of %s failed: %s\n", name, err_msg);
    return NULL;
  }
  return info;
}

static int setup_host(void **state) {
  (void)state;
  /* Under valgrind (tests/harness.sh), one thread, as test_onednn_ops. */
  const char *vg = getenv("TORC_VALGRIND");
  n_threads = vg && strcmp(vg, "1") == 0 ? 1 : 2;
#ifdef TORC_SANITIZE
  n_threads = 1;
#endif
  if (load("ref") == NULL || (dnn_info = load("onednn")) == NULL)
    return -1;
  return 0;
}

static int teardown_host(void **state) {
  (void)state;
  if (dnn_info && dnn_info->fini)
    dnn_info->fini((torc_plugin *)(void *)&self_token);
  dnn_info = NULL;
  return 0;
}

/* Calls op's f32 kernels in priority order (only `pin`'s when not NULL),
 * the next when one declines; returns the status, and in *served the
 * provider that answered (NULL when every one declined). */
static int call(const char *op, const char *pin, const torc_ktensor *in,
                int n_in, const torc_ktensor *out, const void *params,
                size_t params_size, const char **served) {
  torc_kernel_args a = {
      .struct_size = sizeof a,
      .op = op,
      .in = in,
      .n_in = n_in,
      .out = out,
      .n_out = 1,
      .params = params,
      .params_size = params_size,
      .n_threads = n_threads,
  };
  int tried[1024] = {0};
  *served = NULL;
  err_status = TORC_OK;
  for (;;) {
    int best = -1;
    for (int i = 0; i < n_regs; i++)
      if (!tried[i] && strcmp(regs[i].op, op) == 0 &&
          regs[i].dtype == TORC_F32 &&
          (pin == NULL || strcmp(regs[i].provider, pin) == 0) &&
          (best < 0 || regs[i].priority > regs[best].priority))
        best = i;
    if (best < 0)
      return TORC_KERNEL_DECLINED;
    tried[best] = 1;
    int st = regs[best].fn(&a);
    if (st == TORC_KERNEL_DECLINED) {
      assert_int_equal(err_status, TORC_OK); /* declined: no error set */
      continue;
    }
    *served = regs[best].provider;
    return st;
  }
}

/* ---- tensors: plain arrays ---- */

static uint64_t rng = 88172645463325252ull;

/* Uniform in [-1, 1). */
static float rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}

/* A descriptor of data with the given shape and strides (NULL: contiguous). */
static torc_ktensor kt(float *data, int nd, const int64_t *shape,
                       const int64_t *strides) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = TORC_F32;
  t.ndim = nd;
  int64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = strides ? strides[d] : s;
    s *= shape[d];
  }
  return t;
}

static float *rnd_array(int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  assert_non_null(p);
  for (int64_t i = 0; i < n; i++)
    p[i] = rnd();
  return p;
}

/* got against want, n elements: NaN where want has NaN, infinities equal,
 * the rest within TOL. */
static void assert_close(const float *got, const float *want, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    int ok = (g != g && w != w) ||
             (isinf(w) ? g == w : fabs(g - w) <= TOL * (1 + fabs(w)));
    if (!ok) {
      print_error("element %lld: got %.9g, expected %.9g\n", (long long)i, g,
                  w);
      fail();
    }
  }
}

/* 1 when none of y[0, n) was written (all still the 0x7f7f7f7f fill). */
static int untouched(const float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &y[i], sizeof u);
    if (u != 0x7f7f7f7fu)
      return 0;
  }
  return 1;
}

/* ---- linear_act ---- */

typedef struct lin_case {
  int64_t m, k, n;
  int bias, relu;
  int layout; /* 0: w [N, K] read transposed; 1: w [K, N]; 2: w rows
               * padded by 3 and x transposed */
} lin_case;

/* 1 when oneDNN runs its brgemm matmul here (AVX-512 with BW, DQ and VL,
 * not under valgrind, whose CPU has none): the plugin's linear_act serves;
 * elsewhere it declines (the cpu plugin's GEMM then serves, ref here). */
static int brgemm_here(void) {
  const char *vg = getenv("TORC_VALGRIND");
  if (vg && strcmp(vg, "1") == 0)
    return 0;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

/* Runs c through ref and through the plugin; returns how many of y's
 * elements are NaN. x_poison: NaN and infinities written into x first. */
static int64_t lin_run(const lin_case *c, int x_poison) {
  int64_t M = c->m, K = c->k, N = c->n;
  int64_t pad = c->layout == 2 ? 3 : 0;
  float *xv = rnd_array(M * K), *wv = rnd_array(K * (N + pad) + N * K);
  float *bv = rnd_array(N + 1);
  float *yr = calloc((size_t)(M * N + 1), sizeof(float));
  float *yd = calloc((size_t)(M * N + 1), sizeof(float));
  assert_true(yr && yd);
  if (x_poison && M * K >= 4) {
    xv[0] = NAN;
    xv[K + 1 < M * K ? K + 1 : 1] = INFINITY;
    xv[M * K - 1] = -INFINITY;
  }
  int64_t xs[2] = {M, K}, ws[2] = {K, N}, bs[1] = {N}, ys[2] = {M, N};
  int64_t xst[2] = {1, M}, wt[2] = {1, K}, wp[2] = {N + pad, 1};
  torc_ktensor in[3] = {kt(xv, 2, xs, c->layout == 2 ? xst : NULL),
                        kt(wv, 2, ws,
                           c->layout == 0   ? wt
                           : c->layout == 2 ? wp
                                            : NULL),
                        kt(bv, 1, bs, NULL)};
  torc_ktensor yrt = kt(yr, 2, ys, NULL), ydt = kt(yd, 2, ys, NULL);
  torc_linear_act_kparams p = {.act = c->relu ? TORC_ACT_RELU : TORC_ACT_NONE};
  const char *who;
  int n_in = c->bias ? 3 : 2;
  assert_int_equal(
      call("linear_act", "ref", in, n_in, &yrt, &p, sizeof p, &who), TORC_OK);
  assert_int_equal(call("linear_act", NULL, in, n_in, &ydt, &p, sizeof p, &who),
                   TORC_OK);
  /* empty products (no oneDNN call) are the plugin's everywhere; a
   * transposed x may get oneDNN's gemm rather than brgemm (declined) */
  int empty = M == 0 || N == 0 || K == 0;
  if (c->layout != 2 || empty)
    assert_string_equal(who, brgemm_here() || empty ? "onednn" : "ref");
  assert_close(yd, yr, M * N);
  /* constant weights (a frozen plan's): packed once, the same result, at
   * the first call and the next */
  static uint64_t id = 1000;
  p.flags = TORC_FUSED_CONST_WEIGHTS, p.weights_id = ++id;
  for (int again = 0; again < 2; again++) {
    memset(yd, 0, (size_t)(M * N) * sizeof(float));
    assert_int_equal(
        call("linear_act", NULL, in, n_in, &ydt, &p, sizeof p, &who), TORC_OK);
    assert_close(yd, yr, M * N);
  }
  int64_t nan = 0;
  for (int64_t i = 0; i < M * N; i++)
    nan += yr[i] != yr[i];
  free(xv), free(wv), free(bv), free(yr), free(yd);
  return nan;
}

static const lin_case lin_cases[] = {
    {5, 7, 3, 1, 1, 0},    {33, 64, 17, 0, 0, 0},    {64, 100, 40, 1, 0, 1},
    {40, 30, 20, 1, 1, 2}, {1, 9, 1, 1, 1, 0},       {50, 1, 6, 1, 1, 0},
    {3, 1, 1, 0, 1, 1},    {8, 0, 5, 1, 1, 0},       {8, 0, 5, 0, 0, 0},
    {0, 4, 3, 1, 1, 0},    {100, 784, 256, 1, 1, 0}, {100, 128, 10, 1, 0, 0},
};

static void test_linear_act(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof lin_cases / sizeof lin_cases[0]; i++)
    lin_run(&lin_cases[i], 0);
}

/* A NaN in x makes its row NaN, an infinity its row infinite (or NaN
 * where it meets a weight of the other sign... 0 * inf): the plugin keeps
 * each, through the bias and relu, where ref has it. */
static void test_linear_act_nan(void **state) {
  (void)state;
  static const lin_case cases[] = {
      {6, 5, 4, 1, 1, 0}, {6, 5, 4, 0, 0, 1}, {9, 64, 33, 1, 1, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_true(lin_run(&cases[i], 1) > 0);
}

/* x broadcast along M (stride 0) is no oneDNN layout: declined, and ref
 * answers through the dispatch order. */
static void test_linear_act_declined(void **state) {
  (void)state;
  int64_t M = 4, K = 6, N = 3;
  float *xv = rnd_array(K), *wv = rnd_array(K * N), *bv = rnd_array(N);
  float yr[12], yd[12];
  memset(yd, 0x7f, sizeof yd);
  int64_t xs[2] = {M, K}, xst[2] = {0, 1}, ws[2] = {K, N}, bs[1] = {N};
  int64_t ys[2] = {M, N};
  torc_ktensor in[3] = {kt(xv, 2, xs, xst), kt(wv, 2, ws, NULL),
                        kt(bv, 1, bs, NULL)};
  torc_ktensor yrt = kt(yr, 2, ys, NULL), ydt = kt(yd, 2, ys, NULL);
  torc_linear_act_kparams p = {.act = TORC_ACT_RELU};
  const char *who;
  assert_int_equal(
      call("linear_act", "onednn", in, 3, &ydt, &p, sizeof p, &who),
      TORC_KERNEL_DECLINED);
  assert_true(untouched(yd, M * N));
  assert_int_equal(call("linear_act", "ref", in, 3, &yrt, &p, sizeof p, &who),
                   TORC_OK);
  assert_int_equal(call("linear_act", NULL, in, 3, &ydt, &p, sizeof p, &who),
                   TORC_OK);
  assert_string_equal(who, "ref");
  assert_close(yd, yr, M * N);
  free(xv), free(wv), free(bv);
}

/* ---- conv2d_act ---- */

typedef struct conv_case {
  int64_t n, c, h, w, o, kh, kw;
  int64_t stride[2], pad[2], dil[2], groups;
  int bias, relu, pool;
  int64_t pk[2], ps[2], pp[2], pd[2];
  int ceil;
} conv_case;

/* The output size of a window k (dilation d) with stride s and padding p
 * over n, floor or ceil mode (PyTorch's rule: the last window starts
 * inside the input or its left padding). */
static int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d,
                        int ceil) {
  int64_t span = d * (k - 1) + 1, room = n + 2 * p - span;
  int64_t o = (ceil ? room + s - 1 : room) / s + 1;
  if (ceil && (o - 1) * s >= n + p)
    o--;
  return o;
}

/* Runs c through ref and through the dispatch order (expecting `server`
 * to answer); x_poison writes NaN and infinities into x, w_poison a NaN
 * into w and an infinity into b. */
static void conv_run_blocked(const conv_case *c, int x_poison, int w_poison,
                             const char *server, int blocked);

static void conv_run(const conv_case *c, int x_poison, int w_poison,
                     const char *server) {
  conv_run_blocked(c, x_poison, w_poison, server, 0);
}

/* conv_run with x (blocked & 1) or y (blocked & 2) in blocks of 16
 * channels: both kernels read and write the same memory so. */
static void conv_run_blocked(const conv_case *c, int x_poison, int w_poison,
                             const char *server, int blocked) {
  int64_t Cg = c->c / c->groups;
  int64_t OH = out_size(c->h, c->kh, c->stride[0], c->pad[0], c->dil[0], 0);
  int64_t OW = out_size(c->w, c->kw, c->stride[1], c->pad[1], c->dil[1], 0);
  int64_t PH =
      c->pool ? out_size(OH, c->pk[0], c->ps[0], c->pp[0], c->pd[0], c->ceil)
              : OH;
  int64_t PW =
      c->pool ? out_size(OW, c->pk[1], c->ps[1], c->pp[1], c->pd[1], c->ceil)
              : OW;
  int64_t xs[4] = {c->n, c->c, c->h, c->w}, ws[4] = {c->o, Cg, c->kh, c->kw};
  int64_t bs[1] = {c->o}, ys[4] = {c->n, c->o, PH, PW};
  int64_t nx = c->n * c->c * c->h * c->w, ny = c->n * c->o * PH * PW;
  float *xv = rnd_array(nx), *wv = rnd_array(c->o * Cg * c->kh * c->kw);
  float *bv = rnd_array(c->o);
  float *yr = calloc((size_t)ny, sizeof(float));
  float *yd = calloc((size_t)ny, sizeof(float));
  assert_true(yr && yd);
  if (x_poison) { /* spread over the images, one per plane's corner */
    for (int64_t i = 0; i < c->n; i++)
      xv[i * c->c * c->h * c->w + (i % 3) * c->w + i % c->w] = i % 3 == 0 ? NAN
                                                               : i % 3 == 1
                                                                   ? INFINITY
                                                                   : -INFINITY;
  }
  if (w_poison)
    wv[0] = NAN, bv[c->o - 1] = INFINITY;
  torc_ktensor in[3] = {kt(xv, 4, xs, NULL), kt(wv, 4, ws, NULL),
                        kt(bv, 1, bs, NULL)};
  torc_ktensor yrt = kt(yr, 4, ys, NULL), ydt = kt(yd, 4, ys, NULL);
  torc_conv_act_kparams p;
  memset(&p, 0, sizeof p);
  for (int d = 0; d < 2; d++) {
    p.conv.stride[d] = c->stride[d], p.conv.padding[d] = c->pad[d];
    p.conv.dilation[d] = c->dil[d];
    p.pool.kernel[d] = c->pk[d], p.pool.stride[d] = c->ps[d];
    p.pool.padding[d] = c->pp[d], p.pool.dilation[d] = c->pd[d];
  }
  p.conv.groups = c->groups;
  p.x_blocked = (blocked & 1) != 0, p.y_blocked = (blocked & 2) != 0;
  p.act = c->relu ? TORC_ACT_RELU : TORC_ACT_NONE;
  p.has_pool = c->pool;
  p.pool.ceil_mode = c->ceil;
  const char *who;
  int n_in = c->bias ? 3 : 2;
  assert_int_equal(
      call("conv2d_act", "ref", in, n_in, &yrt, &p, sizeof p, &who), TORC_OK);
  assert_int_equal(call("conv2d_act", NULL, in, n_in, &ydt, &p, sizeof p, &who),
                   TORC_OK);
  assert_string_equal(who, server);
  assert_close(yd, yr, ny);
  if (strcmp(server, "ref") == 0) { /* the plugin declines, writing nothing */
    memset(yd, 0x7f, sizeof(float) * (size_t)ny);
    assert_int_equal(
        call("conv2d_act", "onednn", in, n_in, &ydt, &p, sizeof p, &who),
        TORC_KERNEL_DECLINED);
    assert_true(untouched(yd, ny));
  }
  free(xv), free(wv), free(bv), free(yr), free(yd);
}

#define NOPOOL 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0
#define POOL2 1, {2, 2}, {2, 2}, {0, 0}, {1, 1}, 0

static const conv_case conv_cases[] = {
    /* the benchmark CNN's two layers, at a small batch */
    {5, 1, 28, 28, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 1, POOL2},
    {3, 32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 1, POOL2},
    /* without bias, relu, pool; each alone */
    {2, 3, 10, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 0, 0, NOPOOL},
    {2, 3, 10, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 1, NOPOOL},
    {2, 3, 10, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 0, 0, POOL2},
    {2, 3, 10, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 0, POOL2},
    /* odd sizes: the pool leaves the last row and column */
    {2, 3, 9, 11, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 1, POOL2},
    {2, 4, 7, 13, 8, 3, 3, {1, 1}, {0, 0}, {1, 1}, 1, 1, 1, POOL2},
    /* ceil_mode, a padded 3x3 pool of stride 2, a dilated one */
    {2,
     3,
     9,
     11,
     16,
     3,
     3,
     {1, 1},
     {1, 1},
     {1, 1},
     1,
     1,
     1,
     1,
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1},
     1},
    {2,
     3,
     10,
     11,
     16,
     3,
     3,
     {1, 1},
     {1, 1},
     {1, 1},
     1,
     1,
     1,
     1,
     {2, 2},
     {2, 2},
     {0, 0},
     {1, 1},
     1},
    {2,
     3,
     12,
     12,
     16,
     3,
     3,
     {1, 1},
     {1, 1},
     {1, 1},
     1,
     1,
     1,
     1,
     {3, 2},
     {2, 1},
     {1, 1},
     {2, 2},
     0},
    /* stride 2, dilation, padding asymmetric in H and W */
    {2, 5, 13, 12, 16, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, 1, 0, NOPOOL},
    {2, 5, 13, 12, 16, 3, 2, {2, 1}, {2, 0}, {2, 2}, 1, 1, 1, POOL2},
    /* last input rows outside every window (stride 3) */
    {2, 3, 10, 11, 8, 2, 2, {3, 3}, {0, 0}, {1, 1}, 1, 1, 1, NOPOOL},
    /* groups, depthwise */
    {2, 8, 10, 10, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, 1, 1, POOL2},
    {2, 32, 9, 9, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, 1, 1, POOL2},
    {2, 16, 8, 8, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 16, 1, 1, POOL2},
    /* more images than a chunk (32), and not a multiple of it */
    {70, 2, 8, 8, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 1, POOL2},
    {64, 1, 6, 6, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 0, 1, POOL2},
    /* 1x1 */
    {3, 16, 5, 5, 32, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, 1, 1, POOL2},
};

/* Input taps (C x kH x kW) the plugin's direct kernel takes at most. */
enum { FEW_TAPS = 64 };

/* c with its input channels multiplied by the least factor that gives it
 * more taps than the direct kernel takes (and keeps the groups), so that
 * oneDNN's chain serves it; c itself when it has that many already. */
static conv_case wide(const conv_case *c) {
  conv_case d = *c;
  for (int64_t k = 2; d.c * d.kh * d.kw <= FEW_TAPS; k++)
    d.c = c->c * k;
  return d;
}

/* Each case as it is (few input taps: the direct kernel, where it serves
 * the geometry) and, when that is another case, wide (oneDNN's chain). */
static void test_conv2d_act(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
    conv_case d = wide(&conv_cases[i]);
    conv_run(&conv_cases[i], 0, 0, "onednn");
    if (d.c != conv_cases[i].c)
      conv_run(&d, 0, 0, "onednn");
  }
}

/* The direct kernel's lower builds (TORC_CPU_ISA), which only CPUs
 * without AVX-512 or AVX2 run otherwise: the direct cases, NaN in x too. */
static void test_conv2d_act_isa(void **state) {
  (void)state;
  static const char *const isas[] = {"avx2", "scalar"};
  for (int k = 0; k < 2; k++) {
    assert_int_equal(setenv("TORC_CPU_ISA", isas[k], 1), 0);
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
      conv_run(&conv_cases[i], 0, 0, "onednn");
    conv_run(&conv_cases[0], 1, 0, "onednn");
    conv_run(&conv_cases[6], 1, 0, "onednn");
  }
  assert_int_equal(unsetenv("TORC_CPU_ISA"), 0);
}

/* NaN and infinities in x: the plugin keeps them as the separate ops do
 * (the direct kernel by its rules; the chain pools its blocked
 * convolution output itself, or, where oneDNN pools, hands a chunk
 * holding one to the direct kernel: valgrind's CPU runs that one), and
 * declines where the direct kernel cannot serve the geometry (groups, O
 * not a multiple of 16), as for NaN in w or b: ref's answer then comes
 * through the dispatch order, NaN where the separate ops put it. */
/* x, y or both in blocks of 16 channels (a plan handing a tensor from one
 * conv2d_act to the next): the plugin against ref's relayout; NaN in a
 * blocked x served through the direct kernel, in w declined to ref. */
static void test_conv2d_act_blocked(void **state) {
  (void)state;
  static const conv_case cases[] = {
      {3, 32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 1, POOL2},
      {2, 16, 9, 11, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 1, 1, POOL2},
      {2, 16, 8, 8, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, 0, 1, NOPOOL},
      {35, 32, 6, 6, 32, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, 1, 1, POOL2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int blocked = 1; blocked <= 3; blocked++)
      conv_run_blocked(&cases[i], 0, 0, "onednn", blocked);
  for (int blocked = 1; blocked <= 3; blocked++) {
    conv_run_blocked(&cases[0], 1, 0, "onednn", blocked);
    conv_run_blocked(&cases[1], 1, 0, "onednn", blocked);
  }
  conv_run_blocked(&cases[0], 0, 1, "ref", 3);
}

static void test_conv2d_act_nan(void **state) {
  (void)state;
  /* the direct kernel */
  conv_run(&conv_cases[0], 1, 0, "onednn");
  conv_run(&conv_cases[6], 1, 0, "onednn");
  conv_run(&conv_cases[17], 1, 0, "onednn");
  /* the chain, its chunks holding a NaN or an infinity sent to it */
  conv_case d = wide(&conv_cases[17]);
  conv_run(&conv_cases[1], 1, 0, "onednn");
  conv_run(&d, 1, 0, "onednn");
  d = wide(&conv_cases[8]);
  conv_run(&d, 1, 0, "onednn");
  /* geometry the direct kernel does not serve: declined */
  conv_run(&conv_cases[7], 1, 0, "ref");
  conv_run(&conv_cases[15], 1, 0, "ref");
  /* NaN or infinity in w or b: declined (the direct kernel multiplies
   * padding by w, where ref skips it) */
  conv_run(&conv_cases[2], 0, 1, "ref");
  conv_run(&conv_cases[4], 0, 1, "ref");
  d = wide(&conv_cases[4]);
  conv_run(&d, 0, 1, "ref");
}

/* ---- registration, through torc's loader ---- */

/* The module's output for x: eager, or through a new plan (flags). */
static torc_tensor *mlp_out(torc_module *m, torc_tensor *x, int flags,
                            torc_plan **keep) {
  if (flags < 0)
    return torc_module_forward(m, x);
  torc_graph *g = NULL;
  torc_plan *p = NULL;
  torc_tensor *y = NULL;
  assert_ok(torc_trace(m, (const torc_tensor *const *)&x, 1, &g));
  assert_ok(torc_plan_new(g, flags, &p));
  torc_graph_free(g);
  assert_int_equal(torc_plan_n_fused(p), 2);
  assert_ok(torc_plan_run(p, (const torc_tensor *const *)&x, 1, &y));
  if (keep)
    *keep = p;
  else
    torc_plan_free(p);
  return y;
}

/* Packed constant weights: a frozen plan (TORC_PLAN_FREEZE) matches eager;
 * after the weights change in place, a new frozen plan repacks them (the
 * same address, another weights id) and a plan that is not frozen follows
 * them. */
static void test_plan_frozen(void **state) {
  (void)state;
  test_load_plugin("ref");
  test_load_plugin("onednn");
  torc_module *m = torc_sequential_new();
  /* (not 784 deep: under valgrind oneDNN's avx2 sgemm over-reads its own
   * buffer there, see test_linear_act) */
  assert_ok(torc_sequential_append(m, torc_linear_new(160, 64, 1)));
  assert_ok(torc_sequential_append(m, torc_module_build("relu", "")));
  assert_ok(torc_sequential_append(m, torc_linear_new(64, 10, 1)));
  torc_module_train(m, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  int64_t xs[2] = {200, 160};
  torc_tensor *x = torc_randn(xs, 2, TORC_F32, TORC_CPU, NULL);
  int fz = TORC_PLAN_FUSE | TORC_PLAN_FREEZE;
  torc_plan *live = NULL;
  torc_tensor *want = mlp_out(m, x, -1, NULL);
  torc_tensor *y1 = mlp_out(m, x, fz, NULL);
  torc_tensor *y0 = mlp_out(m, x, TORC_PLAN_FUSE, &live);
  test_assert_close(y1, want, 1e-5);
  test_assert_close(y0, want, 1e-5);
  /* the first layer's weight changes in place */
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  assert_true(n == 4 && strcmp(list[0].name, "0.weight") == 0);
  torc_tensor *w2 = torc_mul_scalar(list[0].tensor, -1.5);
  assert_ok(torc_copy_(list[0].tensor, w2));
  torc_named_tensors_free(list, n);
  torc_tensor *want2 = mlp_out(m, x, -1, NULL);
  torc_tensor *y2 = mlp_out(m, x, fz, NULL), *y3 = NULL;
  assert_ok(torc_plan_run(live, (const torc_tensor *const *)&x, 1, &y3));
  test_assert_close(y2, want2, 1e-5);
  test_assert_close(y3, want2, 1e-5);
  double *a = test_values(y1), *b = test_values(y2);
  int differ = 0;
  for (int64_t i = 0; i < torc_numel(y1); i++)
    differ |= fabs(a[i] - b[i]) > 1e-3;
  assert_true(differ);
  free(a), free(b);
  torc_release(y1), torc_release(y0), torc_release(y2), torc_release(y3);
  torc_release(want), torc_release(want2), torc_release(w2), torc_release(x);
  torc_plan_free(live);
  torc_set_grad_mode(gm);
  torc_module_free(m);
}

/* y = m(x) in grad mode `gm` (TORC_GRAD_ENABLED: the layers one by one;
 * otherwise a sequential fuses conv2d, relu and max pool), and the peak of
 * the cpu's allocated bytes over the forward into *peak. */
static torc_tensor *forward_in(torc_module *m, const torc_tensor *x,
                               torc_grad_mode gm, size_t *peak) {
  torc_grad_mode old = torc_set_grad_mode(gm);
  assert_ok(torc_reset_peak_memory_stats(TORC_CPU));
  int scope = torc_scope_begin();
  torc_tensor *y = torc_module_forward(m, x);
  assert_non_null(y);
  torc_tensor *d = torc_detach(y);
  torc_retain(d);
  torc_scope_end(scope);
  torc_memory_stats2 st = {.struct_size = sizeof st};
  assert_ok(torc_device_memory_stats2(TORC_CPU, &st));
  if (peak)
    *peak = st.peak_allocated;
  torc_set_grad_mode(old);
  return d;
}

/* A fused forward's results (no-grad `got`, inference `inf`) against the
 * layers one by one (`want`): NaN and infinities where they are, the rest
 * within tol relative. */
static void assert_like_layers(const torc_tensor *got, const torc_tensor *inf,
                               const torc_tensor *want, double tol) {
  assert_int_equal(torc_numel(got), torc_numel(want));
  assert_int_equal(torc_numel(inf), torc_numel(want));
  double *a = test_values(got), *b = test_values(want), *c = test_values(inf);
  for (int64_t j = 0; j < torc_numel(want); j++) {
    assert_true(isnan(a[j]) == isnan(b[j]) && isnan(c[j]) == isnan(b[j]));
    if (isinf(b[j])) {
      assert_true(a[j] == b[j] && c[j] == b[j]);
    } else if (!isnan(b[j])) {
      assert_true(fabs(a[j] - b[j]) <= tol * (1 + fabs(b[j])));
      assert_true(fabs(c[j] - b[j]) <= tol * (1 + fabs(b[j])));
    }
  }
  free(a), free(b), free(c);
}

static torc_module *seq_of(torc_module *const *layers, int n) {
  torc_module *m = torc_sequential_new();
  for (int i = 0; i < n; i++)
    assert_ok(torc_sequential_append(m, layers[i]));
  return m;
}

/* A sequential under no-grad runs nn.Conv2d + nn.ReLU + nn.MaxPool2d as
 * one conv2d_act (the result of the first group handed to the second in
 * blocks of 16 channels): the same values as the layers one by one (NaN
 * where they give it), and the convolution's full-size output is never
 * allocated. Groups of a conv and a relu alone, or a conv and a pool; an
 * output another node reads too (an add node), a strided conv that leaves
 * the last rows unread, an unbatched image, and a lazy conv run as
 * before. */
static void test_sequential_fused(void **state) {
  (void)state;
  test_load_ref_cpu_onednn();
  torc_manual_seed(3);
  torc_conv2d_params same = {.padding = {1, 1}};
  torc_conv2d_params s2 = {.stride = {2, 2}};
  torc_pool2d_params pool = {.kernel = {2, 2}};
  torc_pool2d_params ceil = {.kernel = {3, 3}, .stride = {2, 2},
                             .ceil_mode = 1};
  torc_module *cnn[] = {
      torc_conv2d_new(3, 32, 3, 3, &same, 1),
      torc_module_build("relu", ""),
      torc_maxpool2d_new(&pool),
      torc_conv2d_new(32, 48, 3, 3, &same, 0),
      torc_module_build("relu", ""),
      torc_maxpool2d_new(&ceil),
      torc_conv2d_new(48, 16, 3, 3, &same, 1),
      torc_module_build("relu", ""),
      torc_conv2d_new(16, 16, 2, 2, &s2, 1),
      torc_maxpool2d_new(&pool),
      torc_flatten_new(1, -1),
  };
  int n_cnn = (int)(sizeof cnn / sizeof cnn[0]);
  torc_module *skip[] = {
      torc_conv2d_new(3, 16, 3, 3, &same, 1),
      torc_module_build("relu", ""),
      torc_conv2d_new(16, 16, 3, 3, &same, 1),
      torc_module_build("relu", ""),
      torc_add_node_new(-3),
      torc_maxpool2d_new(&pool),
  };
  torc_module *lazy[] = {
      torc_conv2d_new(0, 16, 3, 3, &same, 1),
      torc_module_build("relu", ""),
      torc_maxpool2d_new(&pool),
  };
  torc_module *models[] = {seq_of(cnn, n_cnn), seq_of(skip, 6),
                           seq_of(lazy, 3)};
  /* 70 images (two chunks of 32 and a rest), 29 x 29; under valgrind,
   * whose emulation of oneDNN's generated code makes this test the
   * suite's slowest, 34 (one chunk and a rest) */
  const char *vg = getenv("TORC_VALGRIND");
  int64_t N = vg && strcmp(vg, "1") == 0 ? 34 : 70;
  torc_tensor *x = torc_randn(TORC_SHAPE(N, 3, 29, 29), TORC_F32, TORC_CPU,
                              NULL);
  torc_tensor *nan = torc_randn(TORC_SHAPE(N, 3, 29, 29), TORC_F32,
                                TORC_CPU, NULL);
  float *np = torc_data(nan);
  np[5 * 3 * 29 * 29 + 100] = NAN;
  np[(N == 70 ? 40 : N - 1) * 3 * 29 * 29 + 2000] = INFINITY; /* chunk 2 */
  /* the lazy conv's weight is made by a no-grad forward, unfused */
  torc_release(forward_in(models[2], x, TORC_NO_GRAD, NULL));
  for (int i = 0; i < 3; i++) {
    torc_module *m = models[i];
    torc_module_train(m, 0);
    for (int k = 0; k < 2; k++) {
      const torc_tensor *in = k ? nan : x;
      torc_tensor *want = forward_in(m, in, TORC_GRAD_ENABLED, NULL);
      size_t peak = 0;
      torc_tensor *got = forward_in(m, in, TORC_NO_GRAD, &peak);
      torc_tensor *inf = forward_in(m, in, TORC_INFERENCE, NULL);
      assert_int_equal(torc_ndim(got), torc_ndim(want));
      assert_memory_equal(torc_shape(got), torc_shape(want),
                          sizeof(int64_t) * (size_t)torc_ndim(want));
      assert_like_layers(got, inf, want, 1e-4);
      if (i == 0 && k == 0) {
        /* the first conv's output alone would be N x 32 x 29 x 29 f32 */
        assert_true(peak < (size_t)N * 32 * 29 * 29 * 4);
        /* unbatched: the same as image 0 of the batch */
        torc_tensor *x0 = torc_select(x, 0, 0);
        torc_tensor *y0 = forward_in(m, x0, TORC_NO_GRAD, NULL);
        torc_tensor *w0 = torc_select(want, 0, 0);
        test_assert_close(y0, w0, 1e-4);
        torc_release(x0), torc_release(y0), torc_release(w0);
      }
      torc_release(want), torc_release(got), torc_release(inf);
    }
    torc_module_free(m);
  }
  torc_release(x), torc_release(nan);
  torc_shutdown();
}

/* A sequential under no-grad runs nn.Linear + nn.ReLU as one linear_act:
 * the values of the layers one by one (NaN where they give it, f32 and
 * f64), without the linear's output beside the relu's; a linear whose
 * output an add node also reads, a linear with no relu after it, a lazy
 * linear and a 1-D input run as before. */
static void test_sequential_linear_fused(void **state) {
  (void)state;
  test_load_ref_cpu_onednn();
  torc_manual_seed(5);
  for (int f = 0; f < 2; f++) {
    torc_dtype dt = f ? TORC_F64 : TORC_F32;
    torc_module *mlp[] = {
        torc_linear_new(64, 256, 1), torc_module_build("relu", ""),
        torc_linear_new(256, 40, 0), torc_module_build("relu", ""),
        torc_linear_new(40, 40, 1),  torc_module_build("relu", ""),
        torc_add_node_new(-2),       torc_linear_new(40, 10, 1),
    };
    torc_module *lazy[] = {torc_linear_new(0, 16, 1),
                           torc_module_build("relu", "")};
    torc_module *models[] = {seq_of(mlp, 8), seq_of(lazy, 2)};
    for (int i = 0; i < 2; i++) {
      assert_ok(torc_module_to_dtype(models[i], dt));
      torc_module_train(models[i], 0);
    }
    torc_tensor *x = torc_randn(TORC_SHAPE(512, 64), dt, TORC_CPU, NULL);
    torc_tensor *x1 = torc_randn(TORC_SHAPE(64), dt, TORC_CPU, NULL);
    torc_tensor *row = torc_narrow(x, 0, 7, 1);
    assert_ok(torc_fill_(row, NAN));
    torc_release(row);
    /* the lazy linear's weight is made by a grad-mode forward, unfused */
    torc_release(forward_in(models[1], x, TORC_GRAD_ENABLED, NULL));
    for (int i = 0; i < 2; i++) {
      for (int k = 0; k < 2; k++) {
        const torc_tensor *in = k ? x1 : x;
        if (k && i == 1)
          continue;
        torc_tensor *want = forward_in(models[i], in, TORC_GRAD_ENABLED, NULL);
        size_t peak = 0;
        torc_tensor *got = forward_in(models[i], in, TORC_NO_GRAD, &peak);
        torc_tensor *inf = forward_in(models[i], in, TORC_INFERENCE, NULL);
        assert_like_layers(got, inf, want, 1e-5);
        if (i == 0 && k == 0) /* the linear's 512 x 256 beside the relu's */
          assert_true(peak < (size_t)2 * 512 * 256 * torc_dtype_size(dt));
        torc_release(want), torc_release(got), torc_release(inf);
      }
    }
    torc_module_free(models[0]), torc_module_free(models[1]);
    torc_release(x), torc_release(x1);
  }
  torc_shutdown();
}

/* In normal use the plugin's f32 linear_act and conv2d_act serve the cpu,
 * above ref (and cpu, which has none). */
static void test_serves_cpu(void **state) {
  (void)state;
  test_load_ref_cpu_onednn();
  int found = 0;
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.device_type, "cpu") != 0 || k.dtype != TORC_F32 ||
        (strcmp(k.op, "linear_act") != 0 && strcmp(k.op, "conv2d_act") != 0))
      continue;
    if (strcmp(k.provider, "onednn") == 0) {
      assert_true(k.active);
      found++;
    } else {
      assert_false(k.active);
    }
  }
  assert_int_equal(found, 2);
  torc_shutdown();
}

int main(void) {
  if (!test_plugin_built("onednn", "libdnnl-dev"))
    return TEST_SKIP_STATUS;
  const struct CMUnitTest against_ref[] = {
      cmocka_unit_test(test_linear_act),
      cmocka_unit_test(test_linear_act_nan),
      cmocka_unit_test(test_linear_act_declined),
      cmocka_unit_test(test_conv2d_act),
      cmocka_unit_test(test_conv2d_act_isa),
      cmocka_unit_test(test_conv2d_act_nan),
      cmocka_unit_test(test_conv2d_act_blocked),
  };
  const struct CMUnitTest plain[] = {
      cmocka_unit_test(test_plan_frozen),
      cmocka_unit_test(test_sequential_fused),
      cmocka_unit_test(test_sequential_linear_fused),
      cmocka_unit_test(test_serves_cpu),
  };
  int failed =
      cmocka_run_group_tests_name("onednn fused kernels against ref",
                                  against_ref, setup_host, teardown_host);
  failed += cmocka_run_group_tests_name("onednn fused registration", plain,
                                        NULL, NULL);
  return failed;
}
