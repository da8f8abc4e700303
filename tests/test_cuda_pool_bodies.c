/* tests/test_cuda_pool_bodies.c — the cuda plugin's own pooling and batch
 * norm steps (plugins/cuda/pool_body.h) run on the CPU as pool.cu's kernels
 * run them (one output or input position per thread; batch norm's
 * per-channel sums in a 256-thread block's order), against the ref kernels
 * on the same inputs, for f32, f64, f16 and bf16. Needs no GPU.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "torc/plugin.h"

#include "../plugins/cuda/pool_body.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

static const int dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
#define N_DT (sizeof dtypes / sizeof dtypes[0])

static torc_kernel_fn ref_kernel(const char *op, int dt) {
  return cuda_test_ref_kernel(op, dt);
}

static size_t esz(int dt) {
  return dt == TORC_F64 ? 8 : dt == TORC_I64 ? 8 : dt == TORC_F32 ? 4 : 2;
}

/* A contiguous tensor of dtype dt over fresh zeroed memory. */
static torc_ktensor mk(int dt, int nd, const int64_t *shape) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.ndim = nd;
  int64_t st = 1;
  for (int d = nd - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = st;
    st *= shape[d];
  }
  t.data = calloc((size_t)(st > 0 ? st : 1), esz(dt));
  assert_non_null(t.data);
  return t;
}

static int64_t n_of(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

static torc_ktensor copy_of(const torc_ktensor *t) {
  torc_ktensor c = mk(t->dtype, t->ndim, t->shape);
  memcpy(c.data, t->data, (size_t)n_of(t) * esz(t->dtype));
  return c;
}

static uint64_t lcg = 12345;
static double uniform(double lo, double hi) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* Random values; coarse ones (multiples of 1/4 in [-2, 2]) make ties. */
static void fill(torc_ktensor *t, int coarse) {
  for (int64_t i = 0; i < n_of(t); i++)
    torc_cuda_p_st(t->data, t->dtype, i,
                   coarse ? floor(uniform(-8, 9)) / 4 : uniform(-2, 2));
}

static void run_ref(const char *op, torc_ktensor *in, int n_in,
                    torc_ktensor *out, int n_out, const void *p,
                    size_t psize) {
  torc_kernel_args a;
  cuda_test_args(&a, op, in, n_in, out, n_out, p, psize);
  assert_int_equal(ref_kernel(op, in[0].dtype)(&a), TORC_OK);
}

/* Elements of a and b (float dtype dt) equal bit for bit, NaN to NaN. */
static void assert_same(const torc_ktensor *a, const torc_ktensor *b,
                        const char *what) {
  for (int64_t i = 0; i < n_of(a); i++) {
    double x = torc_cuda_p_ld(a->data, a->dtype, i);
    double y = torc_cuda_p_ld(b->data, b->dtype, i);
    if (!(x == y || (x != x && y != y)))
      fail_msg("%s dtype %d: element %lld is %.17g, ref %.17g", what,
               a->dtype, (long long)i, x, y);
  }
}

/* Elements within the rounding of dtype dt (values of nearly equal
 * doubles summed in another order, rounded once). */
static void assert_close(const torc_ktensor *a, const torc_ktensor *b,
                         const char *what) {
  double rel = a->dtype == TORC_F64   ? 1e-12
               : a->dtype == TORC_F32 ? 3e-7
               : a->dtype == TORC_F16 ? 1e-3
                                      : 8e-3;
  for (int64_t i = 0; i < n_of(a); i++) {
    double x = torc_cuda_p_ld(a->data, a->dtype, i);
    double y = torc_cuda_p_ld(b->data, b->dtype, i);
    if (x != x && y != y)
      continue;
    if (!(fabs(x - y) <= rel * fabs(y) + 1e-9))
      fail_msg("%s dtype %d: element %lld is %.17g, ref %.17g", what,
               a->dtype, (long long)i, x, y);
  }
}

static void free_all(torc_ktensor *t, int n) {
  for (int i = 0; i < n; i++)
    free(t[i].data);
}

/* ---- pooling ---- */

/* One pooling geometry: input N, C, H, W; window, stride, padding,
 * dilation (the same for height and width unless *_w set), ceil_mode,
 * count_include_pad, divisor. */
typedef struct case_ {
  int64_t N, C, H, W, k, s, p, d, kw;
  int ceil_mode, count_include_pad;
  int64_t divisor;
} case_;

static const case_ cases[] = {
    {2, 3, 7, 6, 2, 2, 0, 1, 0, 0, 0, 0},
    {1, 2, 9, 8, 3, 2, 1, 1, 0, 0, 1, 0},
    {1, 2, 9, 8, 3, 2, 1, 1, 0, 1, 0, 0},
    {1, 2, 9, 8, 3, 2, 1, 1, 0, 1, 1, 0},
    {2, 1, 10, 7, 3, 3, 1, 1, 2, 1, 0, 0},
    {1, 3, 8, 8, 3, 1, 1, 2, 0, 0, 0, 0},
    {1, 1, 11, 9, 2, 3, 1, 3, 0, 1, 0, 0},
    {2, 2, 5, 5, 5, 1, 2, 1, 0, 0, 1, 0},
    {1, 2, 6, 7, 3, 2, 1, 1, 0, 0, 0, 5},
    {1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0},
};

/* The output size along one dim, as the core's pooling shape rule. */
static int64_t out_size(int64_t I, int64_t k, int64_t s, int64_t p,
                        int64_t d, int ceil_mode) {
  int64_t num = I + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = num / s + 1;
  if (ceil_mode && (o - 1) * s >= I + p)
    o--;
  return o;
}

static torc_pool_kparams params_of(const case_ *c, int with_dilation) {
  torc_pool_kparams p;
  memset(&p, 0, sizeof p);
  p.kernel[0] = c->k, p.kernel[1] = c->kw ? c->kw : c->k;
  p.stride[0] = p.stride[1] = c->s;
  p.padding[0] = p.padding[1] = c->p;
  p.dilation[0] = p.dilation[1] = with_dilation ? c->d : 1;
  p.ceil_mode = c->ceil_mode;
  p.count_include_pad = c->count_include_pad;
  p.divisor = c->divisor;
  return p;
}

static torc_cuda_pool_geo geo_of(const torc_ktensor *x, const torc_ktensor *y,
                                 const torc_pool_kparams *p) {
  torc_cuda_pool_geo g;
  memset(&g, 0, sizeof g);
  g.H = x->shape[2], g.W = x->shape[3], g.OH = y->shape[2],
  g.OW = y->shape[3];
  if (p) {
    for (int d = 0; d < 2; d++) {
      g.k[d] = p->kernel[d], g.s[d] = p->stride[d];
      g.p[d] = p->padding[d], g.d[d] = p->dilation[d];
    }
    g.count_include_pad = p->count_include_pad;
    g.divisor = p->divisor;
  }
  return g;
}

enum { MAXP, AVGP, ADAP };

/* pool.cu's forward grid on the CPU: one output element per thread. */
static void body_fwd(int kind, const torc_cuda_pool_geo *g,
                     const torc_ktensor *x, torc_ktensor *y,
                     torc_ktensor *ind) {
  int64_t po = g->OH * g->OW, pi = g->H * g->W, n = n_of(y);
  for (int64_t i = 0; i < n; i++) {
    int64_t nc = i / po, o = i % po, oh = o / g->OW, ow = o % g->OW;
    const char *px = (const char *)x->data + nc * pi * esz(x->dtype);
    double v;
    if (kind == MAXP) {
      int64_t k;
      v = torc_cuda_maxpool_at(g, px, x->dtype, oh, ow, &k);
      ((int64_t *)ind->data)[i] = k;
    } else if (kind == AVGP) {
      v = torc_cuda_avgpool_at(g, px, x->dtype, oh, ow);
    } else {
      v = torc_cuda_adaptive_at(g, px, x->dtype, oh, ow);
    }
    torc_cuda_p_st(y->data, y->dtype, i, v);
  }
}

/* pool.cu's backward grid on the CPU: one input element per thread. */
static void body_bwd(int kind, const torc_cuda_pool_geo *g,
                     const torc_ktensor *gy, const torc_ktensor *ind,
                     torc_ktensor *gx) {
  int64_t po = g->OH * g->OW, pi = g->H * g->W, n = n_of(gx);
  for (int64_t i = 0; i < n; i++) {
    int64_t nc = i / pi, q = i % pi, ih = q / g->W, iw = q % g->W;
    const char *pg = (const char *)gy->data + nc * po * esz(gy->dtype);
    double v;
    if (kind == MAXP)
      v = torc_cuda_maxpool_grad_at(
          g, pg, gy->dtype, (const int64_t *)ind->data + nc * po, ih, iw);
    else if (kind == AVGP)
      v = torc_cuda_avgpool_grad_at(g, pg, gy->dtype, ih, iw);
    else
      v = torc_cuda_adaptive_grad_at(g, pg, gy->dtype, ih, iw);
    torc_cuda_p_st(gx->data, gx->dtype, i, v);
  }
}

/* One forward and backward of `kind` over x [N, C, H, W] -> [.., OH, OW]
 * against ref: bit-identical (the same double sums in the same order). */
static void check_pool(int kind, int dt, const int64_t xs[4],
                       const int64_t ys[4], const torc_pool_kparams *p,
                       int coarse, int nan_at) {
  static const char *fw[] = {"max_pool2d", "avg_pool2d",
                             "adaptive_avg_pool2d"};
  static const char *bw[] = {"max_pool2d_backward", "avg_pool2d_backward",
                             "adaptive_avg_pool2d_backward"};
  torc_ktensor x = mk(dt, 4, xs);
  fill(&x, coarse);
  if (nan_at >= 0 && nan_at < n_of(&x))
    torc_cuda_p_st(x.data, dt, nan_at, NAN);
  torc_ktensor out[2] = {mk(dt, 4, ys), mk(TORC_I64, 4, ys)};
  torc_ktensor got[2] = {mk(dt, 4, ys), mk(TORC_I64, 4, ys)};
  size_t psz = p ? sizeof *p : 0;
  run_ref(fw[kind], &x, 1, out, kind == MAXP ? 2 : 1, p, psz);
  torc_cuda_pool_geo g = geo_of(&x, &out[0], p);
  body_fwd(kind, &g, &x, &got[0], &got[1]);
  assert_same(&got[0], &out[0], fw[kind]);
  if (kind == MAXP)
    assert_memory_equal(got[1].data, out[1].data,
                        (size_t)n_of(&out[1]) * sizeof(int64_t));

  torc_ktensor gin[2] = {mk(dt, 4, ys), copy_of(&out[1])};
  fill(&gin[0], 0);
  torc_ktensor gx = mk(dt, 4, xs), gxb = mk(dt, 4, xs);
  run_ref(bw[kind], gin, kind == MAXP ? 2 : 1, &gx, 1, p, psz);
  body_bwd(kind, &g, &gin[0], &gin[1], &gxb);
  assert_same(&gxb, &gx, bw[kind]);
  free_all(&x, 1);
  free_all(out, 2);
  free_all(got, 2);
  free_all(gin, 2);
  free_all(&gx, 1);
  free_all(&gxb, 1);
}

static void test_max_pool(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t t = 0; t < N_DT; t++) {
      const case_ *k = &cases[c];
      torc_pool_kparams p = params_of(k, 1);
      int64_t xs[4] = {k->N, k->C, k->H, k->W};
      int64_t ys[4] = {k->N, k->C,
                       out_size(k->H, p.kernel[0], k->s, k->p, k->d,
                                k->ceil_mode),
                       out_size(k->W, p.kernel[1], k->s, k->p, k->d,
                                k->ceil_mode)};
      check_pool(MAXP, dtypes[t], xs, ys, &p, 1, -1);
      check_pool(MAXP, dtypes[t], xs, ys, &p, 0, (int)(c * 7) % 23);
    }
}

/* A window with no in-range element (dilation stepping over a 1-wide
 * input): -inf and index 0, whose gradient lands on position 0. */
static void test_max_pool_empty_window(void **state) {
  (void)state;
  torc_pool_kparams p;
  memset(&p, 0, sizeof p);
  p.kernel[0] = 1, p.kernel[1] = 2;
  p.stride[0] = p.stride[1] = 1;
  p.padding[0] = 0, p.padding[1] = 1;
  p.dilation[0] = 1, p.dilation[1] = 2;
  int64_t xs[4] = {1, 2, 2, 1}, ys[4] = {1, 2, 2, 2};
  for (size_t t = 0; t < N_DT; t++)
    check_pool(MAXP, dtypes[t], xs, ys, &p, 0, -1);
  /* The same along the height. */
  p.kernel[0] = 2, p.kernel[1] = 1;
  p.padding[0] = 1, p.padding[1] = 0;
  p.dilation[0] = 2, p.dilation[1] = 1;
  int64_t xh[4] = {1, 2, 1, 3}, yh[4] = {1, 2, 2, 3};
  for (size_t t = 0; t < N_DT; t++)
    check_pool(MAXP, dtypes[t], xh, yh, &p, 0, -1);
}

static void test_avg_pool(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (size_t t = 0; t < N_DT; t++) {
      const case_ *k = &cases[c];
      torc_pool_kparams p = params_of(k, 0);
      int64_t xs[4] = {k->N, k->C, k->H, k->W};
      int64_t ys[4] = {
          k->N, k->C,
          out_size(k->H, p.kernel[0], k->s, k->p, 1, k->ceil_mode),
          out_size(k->W, p.kernel[1], k->s, k->p, 1, k->ceil_mode)};
      check_pool(AVGP, dtypes[t], xs, ys, &p, 0, -1);
    }
}

static void test_adaptive_pool(void **state) {
  (void)state;
  static const int64_t sizes[][4] = {{7, 6, 3, 2},  {5, 5, 5, 5},
                                     {4, 9, 7, 4},  {1, 1, 3, 2},
                                     {10, 3, 1, 1}, {13, 11, 5, 7},
                                     {3, 8, 6, 16}};
  for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++)
    for (size_t t = 0; t < N_DT; t++) {
      int64_t xs[4] = {2, 2, sizes[c][0], sizes[c][1]};
      int64_t ys[4] = {2, 2, sizes[c][2], sizes[c][3]};
      check_pool(ADAP, dtypes[t], xs, ys, NULL, 0, -1);
    }
}

/* ---- batch norm ---- */

#define B 256

/* pool.cu's block sum of the channel's values v[0..M) on the CPU. */
static double block_sum(const double *v, int64_t M) {
  double acc[B];
  for (int t = 0; t < B; t++) {
    acc[t] = 0;
    for (int64_t j = t; j < M; j += B)
      acc[t] += v[j];
  }
  for (int s = B / 2; s > 0; s >>= 1)
    for (int t = 0; t < s; t++)
      acc[t] += acc[t + s];
  return acc[0];
}

/* pool.cu's batch_norm: the statistics kernel per channel, then y. */
static void body_bn(int training, double momentum, double eps,
                    const torc_ktensor *x, const torc_ktensor *w,
                    const torc_ktensor *b, torc_ktensor *rm, torc_ktensor *rv,
                    torc_ktensor *y, torc_ktensor *mo, torc_ktensor *io) {
  int64_t C = x->shape[1], S = 1;
  for (int d = 2; d < x->ndim; d++)
    S *= x->shape[d];
  int64_t M = x->shape[0] * S;
  double *v = malloc(sizeof(double) * (size_t)(M ? M : 1));
  double *st = malloc(sizeof(double) * (size_t)(2 * C));
  assert_true(v && st);
  for (int64_t c = 0; c < C; c++) {
    double sum = 0, ssd = 0;
    if (training) {
      for (int64_t j = 0; j < M; j++)
        v[j] = torc_cuda_p_ld(x->data, x->dtype, torc_cuda_bn_index(c, j, C, S));
      sum = block_sum(v, M);
      double mean = M ? sum / (double)M : 0;
      for (int64_t j = 0; j < M; j++)
        v[j] = (v[j] - mean) * (v[j] - mean);
      ssd = block_sum(v, M);
    }
    double r0 = rm ? torc_cuda_p_ld(rm->data, rm->dtype, c) : 0;
    double r1 = rv ? torc_cuda_p_ld(rv->data, rv->dtype, c) : 0;
    torc_cuda_bn_stats r =
        torc_cuda_bn_finalize(training, sum, ssd, M, r0, r1, momentum, eps);
    if (training && rm) {
      torc_cuda_p_st(rm->data, rm->dtype, c, r.run_mean);
      torc_cuda_p_st(rv->data, rv->dtype, c, r.run_var);
    }
    torc_cuda_p_st(mo->data, mo->dtype, c, r.mean);
    torc_cuda_p_st(io->data, io->dtype, c, r.invstd);
    st[2 * c] = r.mean, st[2 * c + 1] = r.invstd;
  }
  for (int64_t i = 0; i < n_of(x); i++) {
    int64_t c = (i / S) % C;
    torc_cuda_p_st(y->data, y->dtype, i,
                   torc_cuda_bn_y(torc_cuda_p_ld(x->data, x->dtype, i),
                                  st[2 * c], st[2 * c + 1],
                                  torc_cuda_p_ld(w->data, w->dtype, c),
                                  torc_cuda_p_ld(b->data, b->dtype, c)));
  }
  free(v);
  free(st);
}

/* pool.cu's batch_norm_backward: the channel sums, then gx. */
static void body_bn_bw(int training, const torc_ktensor *in, torc_ktensor *out) {
  const torc_ktensor *gy = &in[0], *x = &in[1], *w = &in[2], *mt = &in[3],
                     *it = &in[4];
  int64_t C = x->shape[1], S = 1;
  for (int d = 2; d < x->ndim; d++)
    S *= x->shape[d];
  int64_t M = x->shape[0] * S;
  double *va = malloc(sizeof(double) * (size_t)(M ? M : 1));
  double *vb = malloc(sizeof(double) * (size_t)(M ? M : 1));
  double *sums = malloc(sizeof(double) * (size_t)(2 * C));
  assert_true(va && vb && sums);
  for (int64_t c = 0; c < C; c++) {
    double mean = torc_cuda_p_ld(mt->data, mt->dtype, c);
    double inv = torc_cuda_p_ld(it->data, it->dtype, c);
    for (int64_t j = 0; j < M; j++) {
      int64_t k = torc_cuda_bn_index(c, j, C, S);
      double g = torc_cuda_p_ld(gy->data, gy->dtype, k);
      va[j] = g;
      vb[j] = g * (torc_cuda_p_ld(x->data, x->dtype, k) - mean) * inv;
    }
    sums[2 * c] = block_sum(va, M);
    sums[2 * c + 1] = block_sum(vb, M);
    torc_cuda_p_st(out[2].data, out[2].dtype, c, sums[2 * c]);
    torc_cuda_p_st(out[1].data, out[1].dtype, c, sums[2 * c + 1]);
  }
  for (int64_t i = 0; i < n_of(x); i++) {
    int64_t c = (i / S) % C;
    torc_cuda_p_st(
        out[0].data, out[0].dtype, i,
        torc_cuda_bn_gx(training, torc_cuda_p_ld(gy->data, gy->dtype, i),
                        torc_cuda_p_ld(x->data, x->dtype, i),
                        torc_cuda_p_ld(mt->data, mt->dtype, c),
                        torc_cuda_p_ld(it->data, it->dtype, c),
                        torc_cuda_p_ld(w->data, w->dtype, c), sums[2 * c],
                        sums[2 * c + 1], M));
  }
  free(va);
  free(vb);
  free(sums);
}

/* batch_norm (training with and without running stats, eval) and its
 * backward on x of shape xs against ref, within dtype rounding. */
static void check_bn(int dt, int nd, const int64_t *xs, int training,
                     int running) {
  int64_t cs[1] = {xs[1]};
  torc_norm_kparams p;
  memset(&p, 0, sizeof p);
  p.eps = 1e-5;
  p.momentum = 0.1;
  p.training = training;
  torc_ktensor in[5] = {mk(dt, nd, xs), mk(dt, 1, cs), mk(dt, 1, cs),
                        mk(dt, 1, cs), mk(dt, 1, cs)};
  for (int i = 0; i < 5; i++)
    fill(&in[i], 0);
  for (int64_t c = 0; c < cs[0]; c++) /* a positive running var */
    torc_cuda_p_st(in[4].data, dt, c, 0.5 + uniform(0, 1));
  torc_ktensor mine[2] = {copy_of(&in[3]), copy_of(&in[4])};
  torc_ktensor out[3] = {mk(dt, nd, xs), mk(dt, 1, cs), mk(dt, 1, cs)};
  torc_ktensor got[3] = {mk(dt, nd, xs), mk(dt, 1, cs), mk(dt, 1, cs)};
  run_ref("batch_norm", in, running ? 5 : 3, out, 3, &p, sizeof p);
  body_bn(training, p.momentum, p.eps, &in[0], &in[1], &in[2],
          running ? &mine[0] : NULL, running ? &mine[1] : NULL, &got[0],
          &got[1], &got[2]);
  assert_close(&got[0], &out[0], "batch_norm y");
  assert_close(&got[1], &out[1], "batch_norm mean");
  assert_close(&got[2], &out[2], "batch_norm invstd");
  if (running) {
    assert_close(&mine[0], &in[3], "batch_norm running mean");
    assert_close(&mine[1], &in[4], "batch_norm running var");
  }

  torc_ktensor bin[5] = {mk(dt, nd, xs), copy_of(&in[0]), copy_of(&in[1]),
                         copy_of(&out[1]), copy_of(&out[2])};
  fill(&bin[0], 0);
  torc_ktensor bout[3] = {mk(dt, nd, xs), mk(dt, 1, cs), mk(dt, 1, cs)};
  torc_ktensor bgot[3] = {mk(dt, nd, xs), mk(dt, 1, cs), mk(dt, 1, cs)};
  run_ref("batch_norm_backward", bin, 5, bout, 3, &p, sizeof p);
  body_bn_bw(training, bin, bgot);
  assert_close(&bgot[0], &bout[0], "batch_norm_backward gx");
  assert_close(&bgot[1], &bout[1], "batch_norm_backward gw");
  assert_close(&bgot[2], &bout[2], "batch_norm_backward gb");
  free_all(in, 5);
  free_all(mine, 2);
  free_all(out, 3);
  free_all(got, 3);
  free_all(bin, 5);
  free_all(bout, 3);
  free_all(bgot, 3);
}

static void test_batch_norm(void **state) {
  (void)state;
  static const int64_t s4[4] = {3, 4, 5, 7}, s2[2] = {300, 3},
                       s3[3] = {2, 5, 333};
  for (size_t t = 0; t < N_DT; t++) {
    check_bn(dtypes[t], 4, s4, 1, 1);
    check_bn(dtypes[t], 4, s4, 1, 0);
    check_bn(dtypes[t], 4, s4, 0, 1);
    check_bn(dtypes[t], 2, s2, 1, 1);
    check_bn(dtypes[t], 3, s3, 1, 1);
    check_bn(dtypes[t], 3, s3, 0, 1);
  }
}

/* One element per channel: the unbiased variance is NaN, as ref's. */
static void test_batch_norm_single(void **state) {
  (void)state;
  torc_cuda_bn_stats r = torc_cuda_bn_finalize(1, 2.0, 0.0, 1, 0.0, 1.0,
                                               0.1, 1e-5);
  assert_true(r.mean == 2.0);
  assert_true(isnan(r.run_var));
  assert_true(fabs(r.run_mean - 0.2) < 1e-15);
  static const int64_t s[2] = {1, 3};
  check_bn(TORC_F32, 2, s, 1, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_max_pool),
      cmocka_unit_test(test_max_pool_empty_window),
      cmocka_unit_test(test_avg_pool),
      cmocka_unit_test(test_adaptive_pool),
      cmocka_unit_test(test_batch_norm),
      cmocka_unit_test(test_batch_norm_single),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
