/* tests/test_cuda_dnn_plan.c — the cuda plugin's cuDNN plan
 * (plugins/cuda/dnn_plan.h) on the CPU: the geometry of each convolution
 * op, checked by running the cross-correlation cuDNN computes for that
 * geometry (forward, backward data, backward filter, in double; the bias
 * by pool_body.h's channel index) against the ref kernels; the
 * output-size rule; the math and compute types per dtype and tf32; the
 * choice policy; the algorithm cache. Needs no GPU.
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

#include "../plugins/cuda/dnn_plan.h"
#include "../plugins/cuda/pool_body.h"
#include "../plugins/ref/ref_kernels.h"
#include "cuda_testutil.h"

static torc_kernel_fn ref_kernel(const char *op) {
  return cuda_test_ref_kernel(op, TORC_F64);
}

/* A contiguous f64 tensor of zeros (shape[0..nd)). */
static torc_ktensor mk(int nd, const int64_t *shape) {
  torc_ktensor t;
  memset(&t, 0, sizeof t);
  t.dtype = TORC_F64;
  t.ndim = nd;
  int64_t st = 1;
  for (int d = nd - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = st;
    st *= shape[d];
  }
  t.data = calloc((size_t)(st > 0 ? st : 1), sizeof(double));
  assert_non_null(t.data);
  return t;
}

static int64_t n_of(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

static uint64_t lcg = 777;
static void fill(torc_ktensor *t) {
  double *v = t->data;
  for (int64_t i = 0; i < n_of(t); i++) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = (double)(lcg >> 11) / 9007199254740992.0 * 2 - 1;
  }
}

/* ---- the convolution cuDNN computes for a geometry ---- */

/* For every product term of the cross-correlation of geometry g (x
 * [N, C, H, W], w [O, C/G, kH, kW], y [N, O, OH, OW], zero padding):
 * mode 0 y += x w (forward), 1 x += y w (backward data), 2 w += x y
 * (backward filter). */
static void model(const torc_cuda_conv_geo *g, int mode, double *x,
                  double *w, double *y) {
  int64_t Cg = g->C / g->G, Og = g->O / g->G;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t o = 0; o < g->O; o++)
      for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++)
          for (int64_t c = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < g->kH; kh++)
              for (int64_t kw = 0; kw < g->kW; kw++) {
                int64_t ih = oh * g->stride[0] - g->pad[0] + kh * g->dil[0];
                int64_t iw = ow * g->stride[1] - g->pad[1] + kw * g->dil[1];
                if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
                  continue;
                int64_t ic = (o / Og) * Cg + c;
                double *px = &x[((n * g->C + ic) * g->H + ih) * g->W + iw];
                double *pw = &w[((o * Cg + c) * g->kH + kh) * g->kW + kw];
                double *py = &y[((n * g->O + o) * g->OH + oh) * g->OW + ow];
                if (mode == 0)
                  *py += *px * *pw;
                else if (mode == 1)
                  *px += *py * *pw;
                else
                  *pw += *px * *py;
              }
}

/* One convolution case, in the terms of the op's own tensors. */
typedef struct conv_case {
  int64_t N, C, H, W, O, kH, kW, s0, s1, p0, p1, d0, d1, G;
} conv_case;

static const conv_case cases[] = {
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1},
    {1, 4, 9, 8, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2},
    {2, 6, 8, 8, 6, 3, 3, 1, 2, 2, 1, 2, 1, 3},
    {1, 4, 5, 5, 8, 1, 1, 2, 2, 0, 0, 1, 1, 4},
    {1, 2, 10, 3, 2, 4, 3, 3, 1, 1, 1, 1, 1, 1},
};

static torc_conv_kparams params_of(const conv_case *c) {
  torc_conv_kparams p;
  memset(&p, 0, sizeof p);
  p.stride[0] = c->s0, p.stride[1] = c->s1;
  p.padding[0] = c->p0, p.padding[1] = c->p1;
  p.dilation[0] = c->d0, p.dilation[1] = c->d1;
  p.groups = c->G;
  return p;
}

static void run_ref(const char *op, const torc_ktensor *in, int n_in,
                    const torc_ktensor *out, const torc_conv_kparams *p) {
  torc_kernel_args a;
  cuda_test_args(&a, op, in, n_in, out, 1, p, sizeof *p);
  assert_int_equal(ref_kernel(op)(&a), TORC_OK);
}

static void assert_near(const torc_ktensor *a, const torc_ktensor *b,
                        const char *what) {
  const double *x = a->data, *y = b->data;
  assert_int_equal(n_of(a), n_of(b));
  for (int64_t i = 0; i < n_of(a); i++)
    if (fabs(x[i] - y[i]) > 1e-12 * (1 + fabs(y[i])))
      fail_msg("%s: element %lld is %.17g, ref %.17g", what, (long long)i,
               x[i], y[i]);
}

/* Adds bias [ch] to t [N, ch, H, W] as pool.cu's bias kernel does, by
 * pool_body.h's channel of each element. */
static void add_bias(torc_ktensor *t, const torc_ktensor *b) {
  double *v = t->data;
  const double *bv = b->data;
  int64_t plane = t->shape[2] * t->shape[3];
  for (int64_t i = 0; i < n_of(t); i++)
    v[i] += bv[torc_cuda_bias_channel(i, t->shape[1], plane)];
}

/* Each op of case c: geo_of accepts its tensors, and the model run with
 * the geometry (on the tensors dnn.c hands cuDNN as x, w, y) equals ref. */
static void check_case(const conv_case *c) {
  torc_conv_kparams p = params_of(c);
  int64_t OH = torc_cuda_conv_out(c->H, c->kH, c->s0, c->p0, c->d0);
  int64_t OW = torc_cuda_conv_out(c->W, c->kW, c->s1, c->p1, c->d1);
  int64_t xs[4] = {c->N, c->C, c->H, c->W};
  int64_t ws[4] = {c->O, c->C / c->G, c->kH, c->kW};
  int64_t ys[4] = {c->N, c->O, OH, OW};
  int64_t bo[1] = {c->O}, bc[1] = {c->C};
  torc_cuda_conv_geo g;
  const char *why;

  /* conv2d with a bias. */
  torc_ktensor in[3] = {mk(4, xs), mk(4, ws), mk(1, bo)};
  for (int i = 0; i < 3; i++)
    fill(&in[i]);
  torc_ktensor ref = mk(4, ys), got = mk(4, ys);
  run_ref("conv2d", in, 3, &ref, &p);
  assert_true(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 3, &ref, &p, &g,
                                    &why));
  assert_true(torc_cuda_conv_has_bias(TORC_CUDA_CONV_FWD, 3));
  model(&g, 0, in[0].data, in[1].data, got.data);
  add_bias(&got, &in[2]);
  assert_near(&got, &ref, "conv2d");
  assert_int_equal(torc_cuda_conv_numel_x(&g), n_of(&in[0]));
  assert_int_equal(torc_cuda_conv_numel_w(&g), n_of(&in[1]));
  assert_int_equal(torc_cuda_conv_numel_y(&g), n_of(&ref));
  free(ref.data), free(got.data), free(in[2].data);

  /* conv2d_backward_input: gy, w -> gx. */
  torc_ktensor bi[2] = {mk(4, ys), in[1]};
  fill(&bi[0]);
  ref = mk(4, xs), got = mk(4, xs);
  run_ref("conv2d_backward_input", bi, 2, &ref, &p);
  assert_true(torc_cuda_conv_geo_of(TORC_CUDA_CONV_BWD_DATA, bi, 2, &ref, &p,
                                    &g, &why));
  assert_int_equal(torc_cuda_conv_call(TORC_CUDA_CONV_BWD_DATA),
                   TORC_CUDA_CONV_BWD_DATA);
  model(&g, 1, got.data, bi[1].data, bi[0].data);
  assert_near(&got, &ref, "conv2d_backward_input");
  free(ref.data), free(got.data);

  /* conv2d_backward_weight: x, gy -> gw. */
  torc_ktensor bw[2] = {in[0], bi[0]};
  ref = mk(4, ws), got = mk(4, ws);
  run_ref("conv2d_backward_weight", bw, 2, &ref, &p);
  assert_true(torc_cuda_conv_geo_of(TORC_CUDA_CONV_BWD_FILTER, bw, 2, &ref,
                                    &p, &g, &why));
  assert_false(torc_cuda_conv_has_bias(TORC_CUDA_CONV_BWD_FILTER, 2));
  model(&g, 2, bw[0].data, got.data, bw[1].data);
  assert_near(&got, &ref, "conv2d_backward_weight");
  free(ref.data), free(got.data);

  /* conv_transpose2d: its x [N, C_in = O, OH, OW], w [C_in, C_out/G, kH,
   * kW], bias [C_out = C] -> [N, C_out, H, W]: backward data on cuDNN. */
  torc_ktensor tr[3] = {bi[0], in[1], mk(1, bc)};
  fill(&tr[2]);
  ref = mk(4, xs), got = mk(4, xs);
  run_ref("conv_transpose2d", tr, 3, &ref, &p);
  assert_true(torc_cuda_conv_geo_of(TORC_CUDA_CONV_TRANSPOSE, tr, 3, &ref, &p,
                                    &g, &why));
  assert_int_equal(torc_cuda_conv_call(TORC_CUDA_CONV_TRANSPOSE),
                   TORC_CUDA_CONV_BWD_DATA);
  assert_true(torc_cuda_conv_has_bias(TORC_CUDA_CONV_TRANSPOSE, 3));
  model(&g, 1, got.data, tr[1].data, tr[0].data);
  add_bias(&got, &tr[2]);
  assert_near(&got, &ref, "conv_transpose2d");
  free(ref.data), free(got.data), free(tr[2].data);
  free(in[0].data), free(in[1].data), free(bi[0].data);
}

static void test_geometry_matches_ref(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_case(&cases[i]);
}

static void test_kinds(void **state) {
  (void)state;
  assert_int_equal(torc_cuda_conv_kind("conv2d"), TORC_CUDA_CONV_FWD);
  assert_int_equal(torc_cuda_conv_kind("conv2d_backward_input"),
                   TORC_CUDA_CONV_BWD_DATA);
  assert_int_equal(torc_cuda_conv_kind("conv2d_backward_weight"),
                   TORC_CUDA_CONV_BWD_FILTER);
  assert_int_equal(torc_cuda_conv_kind("conv_transpose2d"),
                   TORC_CUDA_CONV_TRANSPOSE);
  assert_int_equal(torc_cuda_conv_kind("max_pool2d"), -1);
}

/* The output size is the count of window starts whose dilated window
 * fits in the padded input. */
static void test_out_size(void **state) {
  (void)state;
  for (int64_t I = 1; I <= 12; I++)
    for (int64_t k = 1; k <= 4; k++)
      for (int64_t s = 1; s <= 3; s++)
        for (int64_t p = 0; p <= 2; p++)
          for (int64_t d = 1; d <= 3; d++) {
            int64_t count = 0;
            for (int64_t o = 0; o * s + d * (k - 1) <= I + 2 * p - 1; o++)
              count++;
            assert_int_equal(torc_cuda_conv_out(I, k, s, p, d), count);
          }
}

/* Shapes, params and sizes geo_of refuses, with the reason. */
static void test_geo_refusals(void **state) {
  (void)state;
  int64_t xs[4] = {1, 4, 8, 8}, ws[4] = {6, 2, 3, 3}, ys[4] = {1, 6, 6, 6};
  torc_ktensor in[3], out[1];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  torc_conv_kparams p;
  memset(&p, 0, sizeof p);
  p.stride[0] = p.stride[1] = 1;
  p.dilation[0] = p.dilation[1] = 1;
  p.groups = 2;
  in[0].ndim = in[1].ndim = out[0].ndim = 4;
  memcpy(in[0].shape, xs, sizeof xs);
  memcpy(in[1].shape, ws, sizeof ws);
  memcpy(out[0].shape, ys, sizeof ys);
  torc_cuda_conv_geo g;
  const char *why;
  assert_true(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 2, out, &p, &g,
                                    &why));
  assert_null(why);
  assert_int_equal(g.G, 2);
  out[0].shape[2] = 7; /* not the output-size rule's */
  assert_false(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 2, out, &p, &g,
                                     &why));
  assert_string_equal(why, "shape");
  out[0].shape[2] = 6;
  p.groups = 3; /* does not divide C = 4 */
  assert_false(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 2, out, &p, &g,
                                     &why));
  assert_string_equal(why, "shape");
  p.groups = 2;
  in[2].ndim = 1, in[2].shape[0] = 4; /* a bias of C, not O, channels */
  assert_false(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 3, out, &p, &g,
                                     &why));
  assert_string_equal(why, "shape");
  in[2].shape[0] = 6;
  assert_true(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 3, out, &p, &g,
                                    &why));
  p.stride[1] = 0;
  assert_false(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 2, out, &p, &g,
                                     &why));
  assert_string_equal(why, "params");
  p.stride[1] = 1;
  p.padding[0] = -1;
  assert_false(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 2, out, &p, &g,
                                     &why));
  assert_string_equal(why, "params");
  p.padding[0] = 0;
  /* 2^31 elements: past cuDNN's int strides. */
  in[0].shape[0] = out[0].shape[0] = (int64_t)1 << 26;
  assert_false(torc_cuda_conv_geo_of(TORC_CUDA_CONV_FWD, in, 2, out, &p, &g,
                                     &why));
  assert_string_equal(why, "size");
}

static void test_empty_sum(void **state) {
  (void)state;
  torc_cuda_conv_geo g;
  memset(&g, 0, sizeof g);
  g.N = 2, g.C = 0, g.H = 4, g.W = 4, g.O = 3, g.kH = g.kW = 1, g.OH = 4,
  g.OW = 4, g.G = 1;
  assert_true(torc_cuda_conv_empty_sum(TORC_CUDA_CONV_FWD, &g));
  g.C = 2, g.N = 0;
  assert_true(torc_cuda_conv_empty_sum(TORC_CUDA_CONV_BWD_FILTER, &g));
  g.N = 2;
  assert_false(torc_cuda_conv_empty_sum(TORC_CUDA_CONV_FWD, &g));
  assert_false(torc_cuda_conv_empty_sum(TORC_CUDA_CONV_BWD_DATA, &g));
  assert_false(torc_cuda_conv_empty_sum(TORC_CUDA_CONV_BWD_FILTER, &g));
}

/* TF32 only for f32 with tf32 on; tensor ops for f16 and bf16; f32
 * accumulation but for f64. */
static void test_math_types(void **state) {
  (void)state;
  assert_int_equal(torc_cuda_conv_math(TORC_F32, 0), TORC_CUDA_MATH_FMA);
  assert_int_equal(torc_cuda_conv_math(TORC_F32, 1), TORC_CUDA_MATH_DEFAULT);
  assert_int_equal(torc_cuda_conv_math(TORC_F16, 0),
                   TORC_CUDA_MATH_TENSOR_OP);
  assert_int_equal(torc_cuda_conv_math(TORC_BF16, 1),
                   TORC_CUDA_MATH_TENSOR_OP);
  assert_int_equal(torc_cuda_conv_math(TORC_F64, 1), TORC_CUDA_MATH_DEFAULT);
  assert_int_equal(torc_cuda_conv_compute(TORC_F64), TORC_F64);
  assert_int_equal(torc_cuda_conv_compute(TORC_F32), TORC_F32);
  assert_int_equal(torc_cuda_conv_compute(TORC_F16), TORC_F32);
  assert_int_equal(torc_cuda_conv_compute(TORC_BF16), TORC_F32);
  /* Under FMA nothing but FMA; never the f16 conversion. */
  assert_true(torc_cuda_math_allowed(TORC_CUDA_MATH_FMA, TORC_CUDA_MATH_FMA));
  assert_false(
      torc_cuda_math_allowed(TORC_CUDA_MATH_FMA, TORC_CUDA_MATH_DEFAULT));
  assert_false(
      torc_cuda_math_allowed(TORC_CUDA_MATH_FMA, TORC_CUDA_MATH_TENSOR_OP));
  assert_true(
      torc_cuda_math_allowed(TORC_CUDA_MATH_DEFAULT, TORC_CUDA_MATH_FMA));
  assert_false(torc_cuda_math_allowed(TORC_CUDA_MATH_DEFAULT,
                                      TORC_CUDA_MATH_TENSOR_OP));
  assert_true(torc_cuda_math_allowed(TORC_CUDA_MATH_TENSOR_OP,
                                     TORC_CUDA_MATH_DEFAULT));
  for (int m = 0; m < 4; m++)
    assert_false(torc_cuda_math_allowed(
        m, TORC_CUDA_MATH_TENSOR_OP_ALLOW_CONVERSION));
}

/* The policy's pick of c[0..n) and the math type it sets. */
static int pick(const torc_cuda_algo_cand *c, int n, int call, int math,
                int det, size_t limit, int *got_math) {
  *got_math = -1;
  return torc_cuda_algo_pick(c, n, call, math, det, limit, got_math);
}

static void test_pick(void **state) {
  (void)state;
  const size_t L = 1000;
  int m;
  /* algo, ok, deterministic, math, memory */
  torc_cuda_algo_cand c[] = {
      {5, 0, 1, TORC_CUDA_MATH_DEFAULT, 0},    /* failed */
      {4, 1, 1, TORC_CUDA_MATH_DEFAULT, 5000}, /* too much workspace */
      {0, 1, 0, TORC_CUDA_MATH_DEFAULT, 10},   /* not deterministic */
      {3, 1, 1, TORC_CUDA_MATH_TENSOR_OP, 10}, /* tensor cores */
      {1, 1, 1, TORC_CUDA_MATH_FMA, 20},
  };
  int n = (int)(sizeof c / sizeof c[0]);
  int call = TORC_CUDA_CONV_FWD;
  assert_int_equal(pick(c, n, call, TORC_CUDA_MATH_DEFAULT, 0, L, &m), 2);
  assert_int_equal(m, TORC_CUDA_MATH_DEFAULT);
  /* Deterministic: past the non-deterministic one and the tensor-op one
   * (not allowed under the default math), to the FMA one. */
  assert_int_equal(pick(c, n, call, TORC_CUDA_MATH_DEFAULT, 1, L, &m), 4);
  assert_int_equal(m, TORC_CUDA_MATH_FMA);
  assert_int_equal(pick(c, n, call, TORC_CUDA_MATH_TENSOR_OP, 1, L, &m), 3);
  assert_int_equal(m, TORC_CUDA_MATH_TENSOR_OP);
  assert_int_equal(pick(c, n, call, TORC_CUDA_MATH_FMA, 0, L, &m), 4);
  assert_int_equal(m, TORC_CUDA_MATH_FMA);
  assert_int_equal(pick(c, n, call, TORC_CUDA_MATH_DEFAULT, 0, 10000, &m), 1);
  assert_int_equal(pick(c, 2, call, TORC_CUDA_MATH_DEFAULT, 0, L, &m), -1);
  /* Only math types the call does not allow: the first fitting one runs
   * under the call's math type (never a conversion, never tensor cores
   * under FMA). */
  torc_cuda_algo_cand t[] = {
      {7, 1, 1, TORC_CUDA_MATH_TENSOR_OP_ALLOW_CONVERSION, 0},
      {2, 1, 1, TORC_CUDA_MATH_DEFAULT, 0},
  };
  assert_int_equal(pick(t, 2, call, TORC_CUDA_MATH_FMA, 0, L, &m), 0);
  assert_int_equal(m, TORC_CUDA_MATH_FMA);
  assert_int_equal(pick(t, 2, call, TORC_CUDA_MATH_DEFAULT, 0, L, &m), 1);
  assert_int_equal(m, TORC_CUDA_MATH_DEFAULT);
  /* The algorithms documented as non-deterministic are skipped under
   * deterministic whatever their perf result says. */
  torc_cuda_algo_cand f[] = {{3, 1, 1, TORC_CUDA_MATH_FMA, 0},
                             {0, 1, 1, TORC_CUDA_MATH_FMA, 0},
                             {1, 1, 1, TORC_CUDA_MATH_FMA, 0}};
  assert_int_equal(
      pick(f, 3, TORC_CUDA_CONV_BWD_FILTER, TORC_CUDA_MATH_FMA, 1, L, &m), 2);
  assert_int_equal(
      pick(f, 3, TORC_CUDA_CONV_BWD_FILTER, TORC_CUDA_MATH_FMA, 0, L, &m), 0);
  assert_int_equal(
      pick(f + 1, 2, TORC_CUDA_CONV_BWD_DATA, TORC_CUDA_MATH_FMA, 1, L, &m),
      1);
  assert_int_equal(
      pick(f + 1, 1, TORC_CUDA_CONV_FWD, TORC_CUDA_MATH_FMA, 1, L, &m), 0);
  assert_true(torc_cuda_algo_nondeterministic(TORC_CUDA_CONV_BWD_DATA, 0));
  assert_false(torc_cuda_algo_nondeterministic(TORC_CUDA_CONV_BWD_DATA, 1));
  assert_false(torc_cuda_algo_nondeterministic(TORC_CUDA_CONV_FWD, 0));
}

static torc_cuda_conv_geo geo_n(int64_t n) {
  torc_cuda_conv_geo g;
  memset(&g, 0, sizeof g);
  g.N = n, g.C = 3, g.H = 8, g.W = 8, g.O = 4, g.kH = g.kW = 3;
  g.OH = g.OW = 6, g.G = 1;
  g.stride[0] = g.stride[1] = g.dil[0] = g.dil[1] = 1;
  return g;
}

static void test_cache(void **state) {
  (void)state;
  torc_cuda_algo_cache *c = calloc(1, sizeof *c);
  assert_non_null(c);
  torc_cuda_conv_geo g = geo_n(2);
  torc_cuda_algo_key k = torc_cuda_algo_key_of(TORC_CUDA_CONV_FWD, TORC_F32,
                                               &g, TORC_CUDA_MATH_FMA, 0, 0);
  torc_cuda_algo_choice ch = {6, TORC_CUDA_MATH_FMA, 4096}, out;
  assert_false(torc_cuda_algo_find(c, &k, &out));
  torc_cuda_algo_insert(c, &k, &ch);
  assert_true(torc_cuda_algo_find(c, &k, &out));
  assert_int_equal(out.algo, 6);
  assert_int_equal(out.workspace, 4096);
  /* Every field of the key tells keys apart. */
  torc_cuda_algo_key v[8];
  for (int i = 0; i < 8; i++)
    v[i] = k;
  v[0].call = TORC_CUDA_CONV_BWD_DATA;
  v[1].dtype = TORC_F16;
  v[2].math = TORC_CUDA_MATH_DEFAULT;
  v[3].deterministic = 1;
  v[4].benchmark = 1;
  v[5].geo.pad[1] = 1;
  v[6].geo.G = 3;
  v[7].geo.dil[0] = 2;
  for (int i = 0; i < 8; i++)
    assert_false(torc_cuda_algo_find(c, &v[i], &out));
  /* Replacing an entry keeps one entry. */
  ch.algo = 2;
  torc_cuda_algo_insert(c, &k, &ch);
  assert_int_equal(c->count, 1);
  assert_true(torc_cuda_algo_find(c, &k, &out));
  assert_int_equal(out.algo, 2);
  /* Many shapes: all found until the cache empties itself past 3/4. */
  int lim = TORC_CUDA_ALGO_CACHE_SIZE * 3 / 4;
  for (int64_t n = 100; c->count < lim; n++) {
    torc_cuda_conv_geo gn = geo_n(n);
    torc_cuda_algo_key kn = torc_cuda_algo_key_of(
        TORC_CUDA_CONV_FWD, TORC_F32, &gn, TORC_CUDA_MATH_FMA, 0, 0);
    torc_cuda_algo_choice cn = {(int)(n % 7), TORC_CUDA_MATH_FMA,
                                (size_t)n};
    torc_cuda_algo_insert(c, &kn, &cn);
  }
  for (int64_t n = 100; n < 100 + lim - 1; n++) {
    torc_cuda_conv_geo gn = geo_n(n);
    torc_cuda_algo_key kn = torc_cuda_algo_key_of(
        TORC_CUDA_CONV_FWD, TORC_F32, &gn, TORC_CUDA_MATH_FMA, 0, 0);
    assert_true(torc_cuda_algo_find(c, &kn, &out));
    assert_int_equal(out.workspace, (size_t)n);
  }
  assert_true(torc_cuda_algo_find(c, &k, &out));
  assert_int_equal(c->flushes, 0);
  torc_cuda_conv_geo gx = geo_n(99999);
  torc_cuda_algo_key kx = torc_cuda_algo_key_of(
      TORC_CUDA_CONV_FWD, TORC_F32, &gx, TORC_CUDA_MATH_FMA, 0, 0);
  torc_cuda_algo_insert(c, &kx, &ch);
  assert_int_equal(c->flushes, 1);
  assert_int_equal(c->count, 1);
  assert_true(torc_cuda_algo_find(c, &kx, &out));
  assert_false(torc_cuda_algo_find(c, &k, &out));
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_geometry_matches_ref),
      cmocka_unit_test(test_kinds),
      cmocka_unit_test(test_out_size),
      cmocka_unit_test(test_geo_refusals),
      cmocka_unit_test(test_empty_sum),
      cmocka_unit_test(test_math_types),
      cmocka_unit_test(test_pick),
      cmocka_unit_test(test_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
