/* tests/test_nn_nd.c — 1-D and 3-D convolution and pooling (torc/nn.h)
 * and their layers: each op against a direct loop over the definition
 * (strides, padding, dilation, groups, bias, count_include_pad), the
 * gradients against finite differences, the errors a caller can make; the
 * layers' PyTorch reprs, parameters and INI keys. */
#include <math.h>

#include "testutil.h"

static int setup(void **state) {
  (void)state;
  test_load_plugin("ref");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  torc_shutdown();
  return 0;
}

/* A tensor of n pseudo-random values in [-1, 1) (fixed by seed). */
static torc_tensor *rnd(const int64_t *shape, int nd, unsigned seed,
                        torc_dtype dt) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    v[i] = (double)(seed >> 8 & 0xffff) / 32768.0 - 1.0;
  }
  int scope = torc_scope_begin();
  torc_tensor *t = torc_from_host(v, shape, nd, TORC_F64, TORC_CPU);
  free(v);
  torc_tensor *c = torc_scope_keep(torc_to_dtype(t, dt));
  torc_scope_end(scope);
  return c;
}

static double *host(const torc_tensor *t) {
  int scope = torc_scope_begin();
  torc_tensor *d = torc_to_dtype(t, TORC_F64);
  size_t n = (size_t)torc_numel(d);
  double *v = malloc(n * sizeof *v + 1);
  assert_ok(torc_to_host(d, v, n * sizeof *v));
  torc_scope_end(scope);
  return v;
}

static void assert_close(const torc_tensor *got, const double *want,
                         const int64_t *shape, int nd, double tol) {
  assert_int_equal(torc_ndim(got), nd);
  int64_t n = 1;
  for (int i = 0; i < nd; i++) {
    assert_int_equal(torc_size(got, i), shape[i]);
    n *= shape[i];
  }
  double *g = host(got);
  for (int64_t i = 0; i < n; i++)
    if (fabs(g[i] - want[i]) > tol * (1 + fabs(want[i]))) {
      print_error("element %lld: got %.9g, want %.9g\n", (long long)i, g[i],
                  want[i]);
      free(g);
      fail();
    }
  free(g);
}

/* The 3-D geometry of one case. */
typedef struct {
  int64_t n, c, o, d[3], k[3], s[3], p[3], dl[3], groups;
} g3;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p,
                        int64_t dl) {
  return (in + 2 * p - dl * (k - 1) - 1) / s + 1;
}

/* conv3d by its definition. */
static double *conv3d_ref(const g3 *g, const double *x, const double *w,
                          const double *b, int64_t os[5]) {
  int64_t od[3];
  for (int i = 0; i < 3; i++)
    od[i] = out_size(g->d[i], g->k[i], g->s[i], g->p[i], g->dl[i]);
  os[0] = g->n, os[1] = g->o, os[2] = od[0], os[3] = od[1], os[4] = od[2];
  int64_t cg = g->c / g->groups, og = g->o / g->groups;
  double *y = calloc((size_t)(g->n * g->o * od[0] * od[1] * od[2]), sizeof *y);
  for (int64_t n = 0; n < g->n; n++)
    for (int64_t o = 0; o < g->o; o++)
      for (int64_t a = 0; a < od[0]; a++)
        for (int64_t bb = 0; bb < od[1]; bb++)
          for (int64_t cc = 0; cc < od[2]; cc++) {
            double acc = b ? b[o] : 0;
            int64_t grp = o / og;
            for (int64_t ci = 0; ci < cg; ci++)
              for (int64_t i = 0; i < g->k[0]; i++)
                for (int64_t j = 0; j < g->k[1]; j++)
                  for (int64_t l = 0; l < g->k[2]; l++) {
                    int64_t z = a * g->s[0] - g->p[0] + i * g->dl[0];
                    int64_t yy = bb * g->s[1] - g->p[1] + j * g->dl[1];
                    int64_t xx = cc * g->s[2] - g->p[2] + l * g->dl[2];
                    if (z < 0 || z >= g->d[0] || yy < 0 || yy >= g->d[1] ||
                        xx < 0 || xx >= g->d[2])
                      continue;
                    int64_t c = grp * cg + ci;
                    acc += x[(((n * g->c + c) * g->d[0] + z) * g->d[1] + yy) *
                                 g->d[2] +
                             xx] *
                           w[(((o * cg + ci) * g->k[0] + i) * g->k[1] + j) *
                                 g->k[2] +
                             l];
                  }
            y[(((n * g->o + o) * od[0] + a) * od[1] + bb) * od[2] + cc] = acc;
          }
  return y;
}

static void test_conv3d(void **state) {
  (void)state;
  const g3 cases[] = {
      {2, 3, 4, {5, 6, 7}, {3, 2, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1},
      {1, 4, 6, {6, 5, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0}, {2, 1, 1}, 2},
      {1, 2, 2, {4, 4, 4}, {1, 1, 1}, {1, 2, 1}, {0, 0, 0}, {1, 1, 1}, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const g3 *g = &cases[c];
    int scope = torc_scope_begin();
    int64_t xs[5] = {g->n, g->c, g->d[0], g->d[1], g->d[2]};
    int64_t ws[5] = {g->o, g->c / g->groups, g->k[0], g->k[1], g->k[2]};
    int64_t bs[1] = {g->o};
    torc_tensor *x = rnd(xs, 5, 1 + (unsigned)c, TORC_F32);
    torc_tensor *w = rnd(ws, 5, 7 + (unsigned)c, TORC_F32);
    torc_tensor *b = c == 1 ? NULL : rnd(bs, 1, 11, TORC_F32);
    torc_conv3d_params p = {{g->s[0], g->s[1], g->s[2]},
                            {g->p[0], g->p[1], g->p[2]},
                            {g->dl[0], g->dl[1], g->dl[2]},
                            g->groups};
    torc_tensor *y = torc_conv3d(x, w, b, &p);
    assert_non_null(y);
    double *hx = host(x), *hw = host(w), *hb = b ? host(b) : NULL;
    int64_t os[5];
    double *want = conv3d_ref(g, hx, hw, hb, os);
    assert_close(y, want, os, 5, 1e-5);
    free(hx), free(hw), free(hb), free(want);
    torc_scope_end(scope);
  }
}

/* max/avg pool3d by the definition; include: padding counted. */
static double *pool3d_ref(const g3 *g, const double *x, int max, int include,
                          int64_t os[5]) {
  int64_t od[3];
  for (int i = 0; i < 3; i++)
    od[i] = out_size(g->d[i], g->k[i], g->s[i], g->p[i], g->dl[i]);
  os[0] = g->n, os[1] = g->c, os[2] = od[0], os[3] = od[1], os[4] = od[2];
  double *y = calloc((size_t)(g->n * g->c * od[0] * od[1] * od[2]), sizeof *y);
  for (int64_t nc = 0; nc < g->n * g->c; nc++)
    for (int64_t a = 0; a < od[0]; a++)
      for (int64_t bb = 0; bb < od[1]; bb++)
        for (int64_t cc = 0; cc < od[2]; cc++) {
          double acc = max ? -INFINITY : 0;
          int64_t cnt = 0;
          for (int64_t i = 0; i < g->k[0]; i++)
            for (int64_t j = 0; j < g->k[1]; j++)
              for (int64_t l = 0; l < g->k[2]; l++) {
                int64_t z = a * g->s[0] - g->p[0] + i * g->dl[0];
                int64_t yy = bb * g->s[1] - g->p[1] + j * g->dl[1];
                int64_t xx = cc * g->s[2] - g->p[2] + l * g->dl[2];
                if (z < 0 || z >= g->d[0] || yy < 0 || yy >= g->d[1] ||
                    xx < 0 || xx >= g->d[2])
                  continue;
                double v = x[((nc * g->d[0] + z) * g->d[1] + yy) * g->d[2] + xx];
                acc = max ? fmax(acc, v) : acc + v;
                cnt++;
              }
          if (!max)
            acc /= include ? (double)(g->k[0] * g->k[1] * g->k[2]) : (double)cnt;
          y[((nc * od[0] + a) * od[1] + bb) * od[2] + cc] = acc;
        }
  return y;
}

static void test_pool3d(void **state) {
  (void)state;
  const g3 cases[] = {
      {2, 3, 3, {5, 6, 7}, {3, 2, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, 1},
      {1, 2, 2, {6, 5, 6}, {2, 3, 2}, {1, 1, 2}, {0, 1, 0}, {2, 1, 1}, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int mode = 0; mode < 3; mode++) { /* max, avg, avg excluding pad */
      const g3 *g = &cases[c];
      if (mode && (g->dl[0] != 1 || g->dl[1] != 1 || g->dl[2] != 1))
        continue;
      int scope = torc_scope_begin();
      int64_t xs[5] = {g->n, g->c, g->d[0], g->d[1], g->d[2]};
      torc_tensor *x = rnd(xs, 5, 3 + (unsigned)c, TORC_F32);
      torc_pool3d_params p;
      memset(&p, 0, sizeof p);
      for (int i = 0; i < 3; i++) {
        p.kernel[i] = g->k[i];
        p.stride[i] = g->s[i];
        p.padding[i] = g->p[i];
        p.dilation[i] = g->dl[i];
      }
      p.exclude_pad = mode == 2;
      torc_tensor *y = mode ? torc_avg_pool3d(x, &p) : torc_max_pool3d(x, &p);
      assert_non_null(y);
      double *hx = host(x);
      int64_t os[5];
      double *want = pool3d_ref(g, hx, mode == 0, mode == 1, os);
      assert_close(y, want, os, 5, 1e-5);
      free(hx), free(want);
      torc_scope_end(scope);
    }
}

static void test_1d(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  /* conv1d: stride 2, padding 1, dilation 2, groups 2, against conv3d on
   * a depth and height of 1 (itself checked against the loops above) */
  torc_tensor *x = rnd(TORC_SHAPE(2, 4, 11), 1, TORC_F32);
  torc_tensor *w = rnd(TORC_SHAPE(6, 2, 3), 2, TORC_F32);
  torc_tensor *b = rnd(TORC_SHAPE(6), 3, TORC_F32);
  torc_conv1d_params p1 = {2, 1, 2, 2};
  torc_tensor *y = torc_conv1d(x, w, b, &p1);
  assert_non_null(y);
  g3 g = {2, 4, 6, {1, 1, 11}, {1, 1, 3}, {1, 1, 2}, {0, 0, 1}, {1, 1, 2}, 2};
  double *hx = host(x), *hw = host(w), *hb = host(b);
  int64_t os[5];
  double *want = conv3d_ref(&g, hx, hw, hb, os);
  int64_t os3[3] = {os[0], os[1], os[4]};
  assert_close(y, want, os3, 3, 1e-5);
  free(want);
  /* pools */
  for (int mode = 0; mode < 3; mode++) {
    torc_pool1d_params pp = {3, 2, 1, 0, 0, mode == 2};
    g3 gp = {2, 4, 4, {1, 1, 11}, {1, 1, 3}, {1, 1, 2}, {0, 0, 1}, {1, 1, 1}, 1};
    y = mode ? torc_avg_pool1d(x, &pp) : torc_max_pool1d(x, &pp);
    assert_non_null(y);
    want = pool3d_ref(&gp, hx, mode == 0, mode == 1, os);
    int64_t ps3[3] = {os[0], os[1], os[4]};
    assert_close(y, want, ps3, 3, 1e-5);
    free(want);
  }
  free(hx), free(hw), free(hb);
  torc_scope_end(scope);
}

static torc_tensor *f_conv3d(torc_tensor *const *in, int n, void *user) {
  (void)n;
  (void)user;
  torc_conv3d_params p = {{2, 1, 1}, {1, 0, 1}, {1, 1, 1}, 1};
  return torc_conv3d(in[0], in[1], in[2], &p);
}

static torc_tensor *f_pool3d(torc_tensor *const *in, int n, void *user) {
  (void)n;
  torc_pool3d_params p = {{2, 2, 2}, {1, 2, 1}, {1, 1, 0}, {0, 0, 0}, 0, 0};
  p.exclude_pad = user != NULL;
  return user == (void *)2 ? torc_max_pool3d(in[0], &p)
                           : torc_avg_pool3d(in[0], &p);
}

static torc_tensor *f_conv1d(torc_tensor *const *in, int n, void *user) {
  (void)n;
  (void)user;
  torc_conv1d_params p = {2, 1, 1, 1};
  return torc_conv1d(in[0], in[1], in[2], &p);
}

static void test_gradients(void **state) {
  (void)state;
  torc_tensor *in[3] = {rnd(TORC_SHAPE(1, 2, 4, 3, 3), 5, TORC_F64),
                        rnd(TORC_SHAPE(3, 2, 2, 2, 2), 6, TORC_F64),
                        rnd(TORC_SHAPE(3), 7, TORC_F64)};
  for (int i = 0; i < 3; i++)
    assert_ok(torc_set_requires_grad(in[i], 1));
  if (torc_gradcheck(f_conv3d, NULL, in, 3, 1e-6, 1e-7, 1e-5)) {
    print_error("conv3d: %s\n", torc_last_error());
    fail();
  }
  for (int u = 0; u < 3; u++)
    if (torc_gradcheck(f_pool3d, (void *)(intptr_t)u, in, 1, 1e-6, 1e-7,
                       1e-5)) {
      print_error("pool3d %d: %s\n", u, torc_last_error());
      fail();
    }
  for (int i = 0; i < 3; i++)
    torc_release(in[i]);
  torc_tensor *in1[3] = {rnd(TORC_SHAPE(2, 2, 7), 8, TORC_F64),
                         rnd(TORC_SHAPE(3, 2, 3), 9, TORC_F64),
                         rnd(TORC_SHAPE(3), 10, TORC_F64)};
  for (int i = 0; i < 3; i++)
    assert_ok(torc_set_requires_grad(in1[i], 1));
  if (torc_gradcheck(f_conv1d, NULL, in1, 3, 1e-6, 1e-7, 1e-5)) {
    print_error("conv1d: %s\n", torc_last_error());
    fail();
  }
  for (int i = 0; i < 3; i++)
    torc_release(in1[i]);
}

static void test_errors(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_tensor *x4 = torc_zeros(TORC_SHAPE(1, 2, 3, 3), TORC_F32, TORC_CPU);
  torc_tensor *x5 = torc_zeros(TORC_SHAPE(1, 2, 3, 3, 3), TORC_F32, TORC_CPU);
  torc_tensor *w5 = torc_zeros(TORC_SHAPE(4, 3, 2, 2, 2), TORC_F32, TORC_CPU);
  assert_null(torc_conv3d(x4, w5, NULL, NULL));
  assert_error(TORC_ERR_SHAPE, "x must be [N, C, D, H, W]");
  assert_null(torc_conv3d(x5, w5, NULL, NULL));
  assert_error(TORC_ERR_SHAPE, "has 2 channels but the weight [4, 3, 2, 2, 2] "
                               "takes 3");
  torc_pool3d_params p = {{2, 2, 2}, {0}, {0}, {0}, 1, 0};
  assert_null(torc_max_pool3d(x5, &p));
  assert_error(TORC_ERR_UNSUPPORTED, "ceil_mode is not supported");
  p.ceil_mode = 0;
  p.padding[1] = 2;
  assert_null(torc_avg_pool3d(x5, &p));
  assert_error(TORC_ERR_INVALID, "more than half the kernel size");
  assert_null(torc_max_pool3d(x5, NULL));
  assert_error(TORC_ERR_INVALID, "the kernel size is required");
  p.padding[1] = 0;
  p.kernel[0] = 5;
  assert_null(torc_max_pool3d(x5, &p));
  assert_error(TORC_ERR_SHAPE, "larger than the padded input depth 3");
  torc_conv1d_params q = {1, 0, 1, 1};
  assert_null(torc_conv1d(x4, torc_zeros(TORC_SHAPE(2, 2, 3), TORC_F32,
                                         TORC_CPU), NULL, &q));
  assert_error(TORC_ERR_SHAPE, "x must be [N, C, L]");
  assert_null(torc_max_pool1d(x4, NULL));
  assert_error(TORC_ERR_SHAPE, "x must be [N, C, L]");
  torc_scope_end(scope);
}


/* 1 when a and b have one shape and agree within tol (relative). */
static int close_t(const torc_tensor *a, const torc_tensor *b, double tol) {
  if (a == NULL || b == NULL || torc_numel(a) != torc_numel(b) ||
      torc_ndim(a) != torc_ndim(b))
    return 0;
  double *x = host(a), *y = host(b);
  int ok = 1;
  for (int64_t i = 0; i < torc_numel(a); i++)
    ok &= fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i]));
  free(x);
  free(y);
  return ok;
}

/* Asserts m's repr (its first line: "conv1d(...)") is want. */
static void assert_repr(const torc_module *m, const char *want) {
  char *r = torc_module_repr(m);
  assert_non_null(r);
  if (strcmp(r, want) != 0) {
    print_error("repr \"%s\", want \"%s\"\n", r, want);
    free(r);
    fail();
  }
  free(r);
}

/* The layers: PyTorch's reprs (printed by torch 1.13 for the same
 * arguments), state-dict shapes, lazy in_channels, unbatched inputs, a
 * forward equal to the functional op, and the INI keys. */
static void test_layers(void **state) {
  (void)state;
  int scope = torc_scope_begin();
  torc_conv1d_params p1 = {2, 1, 2, 2};
  torc_module *c1 = torc_conv1d_new(0, 6, 3, &p1, 1);
  assert_non_null(c1);
  torc_tensor *x = rnd(TORC_SHAPE(2, 4, 11), 21, TORC_F32);
  torc_tensor *y = torc_module_forward(c1, x);
  assert_non_null(y);
  torc_tensor *w = torc_module_parameter(c1, "weight");
  assert_int_equal(torc_ndim(w), 3);
  assert_int_equal(torc_size(w, 1), 2);
  assert_repr(c1, "conv1d(4, 6, kernel_size=(3,), stride=(2,), "
                  "padding=(1,), dilation=(2,), groups=2)");
  torc_tensor *want = torc_conv1d(x, w, torc_module_parameter(c1, "bias"), &p1);
  assert_true(close_t(y, want, 0));
  /* one unbatched sample */
  torc_tensor *y1 = torc_module_forward(c1, torc_select(x, 0, 1));
  assert_non_null(y1);
  assert_true(close_t(y1, torc_select(want, 0, 1), 1e-6));
  assert_null(torc_module_forward(c1, rnd(TORC_SHAPE(2, 4, 3, 3), 1, TORC_F32)));
  assert_error(TORC_ERR_SHAPE, "conv1d: expected a 3-D input [N, C, L]");
  assert_null(torc_module_forward(c1, rnd(TORC_SHAPE(2, 5, 9), 1, TORC_F32)));
  assert_error(TORC_ERR_SHAPE, "input has 5 channels");
  torc_module_free(c1);

  int64_t k3[3] = {3, 2, 3};
  torc_conv3d_params p3 = {{0}, {1, 1, 1}, {0}, 0};
  torc_module *c3 = torc_conv3d_new(2, 4, k3, &p3, 0);
  assert_non_null(c3);
  assert_repr(c3, "conv3d(2, 4, kernel_size=(3, 2, 3), stride=(1, 1, 1), "
                  "padding=(1, 1, 1), bias=False)");
  assert_int_equal(torc_ndim(torc_module_parameter(c3, "weight")), 5);
  assert_null(torc_module_parameter(c3, "bias"));
  y = torc_module_forward(c3, rnd(TORC_SHAPE(1, 2, 4, 4, 4), 22, TORC_F32));
  assert_non_null(y);
  assert_int_equal(torc_size(y, 3), 5);
  torc_module_free(c3);
  torc_conv3d_params pg = {{0}, {0}, {0}, 2};
  assert_null(torc_conv3d_new(3, 4, k3, &pg, 1));
  assert_error(TORC_ERR_INVALID, "groups 2 must divide in_channels 3");
  assert_null(torc_conv1d_new(2, 4, 0, NULL, 1));
  assert_error(TORC_ERR_INVALID, "the kernel must be >= 1");

  torc_pool1d_params q1 = {3, 2, 1, 0, 0, 0};
  torc_module *mp1 = torc_maxpool1d_new(&q1), *ap1 = torc_avgpool1d_new(&q1);
  assert_repr(mp1, "maxpool1d(kernel_size=3, stride=2, padding=1, "
                   "dilation=1, ceil_mode=False)");
  assert_repr(ap1, "avgpool1d(kernel_size=(3,), stride=(2,), padding=(1,))");
  assert_true(close_t(torc_module_forward(mp1, x), torc_max_pool1d(x, &q1), 0));
  torc_module_free(mp1);
  torc_module_free(ap1);
  torc_pool3d_params q3 = {{2, 2, 2}, {0}, {0}, {0}, 0, 0};
  torc_module *mp3 = torc_maxpool3d_new(&q3);
  assert_repr(mp3, "maxpool3d(kernel_size=2, stride=2, padding=0, "
                   "dilation=1, ceil_mode=False)");
  torc_module_free(mp3);
  torc_pool3d_params q3b = {{2, 3, 2}, {1, 1, 1}, {0}, {0}, 0, 0};
  torc_module *ap3 = torc_avgpool3d_new(&q3b);
  assert_repr(ap3, "avgpool3d(kernel_size=(2, 3, 2), stride=1, padding=0)");
  torc_module_free(ap3);
  q3.ceil_mode = 1;
  assert_null(torc_maxpool3d_new(&q3));
  assert_error(TORC_ERR_UNSUPPORTED, "ceil_mode is not supported");
  q1.padding = 2;
  assert_null(torc_avgpool1d_new(&q1));
  assert_error(TORC_ERR_INVALID, "more than half the kernel size");
  torc_scope_end(scope);
}

/* The INI types: a 1-D and a 3-D model build and fit their samples; a bad
 * triple is one message naming the key. */
static void test_config(void **state) {
  (void)state;
  const char *ini1 =
      "[model]\ninput = 3,32\n"
      "[layer]\ntype = conv1d\nout_channels = 8\nkernel = 5\npadding = 2\n"
      "[layer]\ntype = relu\n"
      "[layer]\ntype = maxpool1d\nkernel = 2\n"
      "[layer]\ntype = avgpool1d\nkernel = 2\ncount_include_pad = no\n"
      "[layer]\ntype = flatten\n"
      "[layer]\ntype = linear\nout_features = 4\n";
  torc_config *cfg = torc_config_parse(ini1, "seq.ini");
  assert_non_null(cfg);
  torc_module *m = torc_module_from_config(cfg, NULL, NULL);
  torc_config_free(cfg);
  if (m == NULL) {
    print_error("%s\n", torc_last_error());
    fail();
  }
  torc_tensor *w = torc_module_parameter(torc_module_child(m, "5"), "weight");
  assert_int_equal(torc_size(w, 1), 8 * 8);
  torc_module_free(m);
  const char *ini3 =
      "[model]\ninput = 1,8,8,8\n"
      "[layer]\ntype = conv3d\nout_channels = 2\nkernel = 3,3,1\n"
      "padding = 1,1,0\n"
      "[layer]\ntype = maxpool3d\nkernel = 2\n"
      "[layer]\ntype = avgpool3d\nkernel = 2,2,1\nstride = 1\n"
      "[layer]\ntype = flatten\n";
  cfg = torc_config_parse(ini3, "vol.ini");
  assert_non_null(cfg);
  int64_t shape[TORC_MAX_DIMS];
  int nd = 0;
  m = torc_module_from_config(cfg, shape, &nd);
  torc_config_free(cfg);
  if (m == NULL) {
    print_error("%s\n", torc_last_error());
    fail();
  }
  torc_module_free(m);
  cfg = torc_config_parse("[model]\ninput = 1,8,8,8\n[layer]\ntype = conv3d\n"
                          "out_channels = 2\nkernel = 3,3\n", "bad.ini");
  assert_null(torc_module_from_config(cfg, NULL, NULL));
  assert_error(TORC_ERR_CONFIG, "key 'kernel' = '3,3' is not one integer >= 1 "
                                "or three separated by commas");
  torc_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_conv3d, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pool3d, setup, teardown),
      cmocka_unit_test_setup_teardown(test_1d, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gradients, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_layers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_config, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
