/* plugins/cuda/pool_body.h — the per-output and per-input steps of the cuda
 * plugin's own pooling kernels (max_pool2d with indices, avg_pool2d,
 * adaptive_avg_pool2d and their backwards) and batch norm's per-channel
 * statistics and per-element steps, accumulating in double as ref does.
 * Inline functions callable from device code (pool.cu) and from host C, so
 * that tests/test_cuda_pool_bodies.c runs them on the CPU against ref.
 *
 * The backwards are gathers: each input position sums the outputs whose
 * window holds it, in the row-major order of the outputs (ref's order of
 * its scatter), so no atomics are needed and the results are
 * reproducible.
 */
#ifndef TORC_CUDA_POOL_BODY_H
#define TORC_CUDA_POOL_BODY_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "torc/dtype.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define TORC_CUDA_PHD __host__ __device__
#else
#define TORC_CUDA_PHD
#endif

/* Element i of the tensor whose first element is at p, of dtype dt (f32,
 * f64, f16 or bf16), as a double (exact). */
TORC_CUDA_PHD static inline double torc_cuda_p_ld(const void *p, int dt,
                                                  int64_t i) {
  switch (dt) {
  case TORC_F64: return ((const double *)p)[i];
  case TORC_F16: {
    uint16_t h = ((const uint16_t *)p)[i];
#ifdef __CUDA_ARCH__
    return (double)__half2float(__ushort_as_half(h));
#else
    return (double)torc_f16_to_f32(h);
#endif
  }
  case TORC_BF16: {
    uint16_t b = ((const uint16_t *)p)[i];
#ifdef __CUDA_ARCH__
    return (double)__bfloat162float(__ushort_as_bfloat16(b));
#else
    return (double)torc_bf16_to_f32(b);
#endif
  }
  default: return (double)((const float *)p)[i];
  }
}

/* Stores v into element i as ref does: f64 as is, the others through f32
 * (rounded to nearest even at each step). */
TORC_CUDA_PHD static inline void torc_cuda_p_st(void *p, int dt, int64_t i,
                                               double v) {
  switch (dt) {
  case TORC_F64: ((double *)p)[i] = v; break;
  case TORC_F16:
#ifdef __CUDA_ARCH__
    ((uint16_t *)p)[i] = __half_as_ushort(__float2half_rn((float)v));
#else
    ((uint16_t *)p)[i] = torc_f32_to_f16((float)v);
#endif
    break;
  case TORC_BF16:
#ifdef __CUDA_ARCH__
    ((uint16_t *)p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
#else
    ((uint16_t *)p)[i] = torc_f32_to_bf16((float)v);
#endif
    break;
  default: ((float *)p)[i] = (float)v;
  }
}

/* One plane's pooling geometry: input H x W, output OH x OW, the window
 * (kernel, stride, padding, dilation per {height, width}) and avg_pool2d's
 * count_include_pad and divisor override (0 none). */
typedef struct torc_cuda_pool_geo {
  int64_t H, W, OH, OW;
  int64_t k[2], s[2], p[2], d[2];
  int32_t count_include_pad;
  int64_t divisor;
} torc_cuda_pool_geo;

/* Max pool of output (oh, ow) over the plane x (dtype dt): the largest
 * in-range element (the first NaN wins at once; ties keep the first in
 * row-major window order), its index ih * W + iw in *idx; -inf and index 0
 * for a window with no in-range element. */
TORC_CUDA_PHD static inline double
torc_cuda_maxpool_at(const torc_cuda_pool_geo *g, const void *x, int dt,
                     int64_t oh, int64_t ow, int64_t *idx) {
  double best = -INFINITY;
  int64_t bi = -1;
  for (int64_t kh = 0; kh < g->k[0]; kh++) {
    int64_t ih = oh * g->s[0] - g->p[0] + kh * g->d[0];
    if (ih < 0 || ih >= g->H)
      continue;
    for (int64_t kw = 0; kw < g->k[1]; kw++) {
      int64_t iw = ow * g->s[1] - g->p[1] + kw * g->d[1];
      if (iw < 0 || iw >= g->W)
        continue;
      double v = torc_cuda_p_ld(x, dt, ih * g->W + iw);
      if (bi < 0)
        bi = ih * g->W + iw;
      if (v > best || v != v) {
        best = v, bi = ih * g->W + iw;
        if (v != v) {
          *idx = bi;
          return v;
        }
      }
    }
  }
  *idx = bi < 0 ? 0 : bi;
  return bi < 0 ? -INFINITY : best;
}

/* The outputs along one dim whose window (start o * s - p, taps every d,
 * k of them) can hold input position i: [*lo, *hi). */
TORC_CUDA_PHD static inline void torc_cuda_pool_range(int64_t i, int64_t k,
                                                     int64_t s, int64_t p,
                                                     int64_t d, int64_t O,
                                                     int64_t *lo,
                                                     int64_t *hi) {
  int64_t first = i + p - (k - 1) * d; /* o * s >= first */
  *lo = first <= 0 ? 0 : (first + s - 1) / s;
  *hi = (i + p) / s + 1; /* o * s <= i + p */
  if (*hi > O)
    *hi = O;
}

/* Whether output o's window along one dim (taps o * s - p + j * d, j <
 * k) has no tap inside [0, I). */
TORC_CUDA_PHD static inline int torc_cuda_pool_no_tap(int64_t o, int64_t k,
                                                     int64_t s, int64_t p,
                                                     int64_t d, int64_t I) {
  for (int64_t j = 0; j < k; j++) {
    int64_t i = o * s - p + j * d;
    if (i >= 0 && i < I)
      return 0;
  }
  return 1;
}

/* max_pool2d_backward at input (ih, iw) of one plane: the sum, in output
 * order, of gy over the outputs whose index names it. Those are outputs
 * whose window holds it and, for position 0 only, the outputs whose window
 * has no in-range element (max_pool2d gives them index 0). (An index
 * naming a position outside its output's window otherwise, which
 * max_pool2d never writes, adds nothing.) */
TORC_CUDA_PHD static inline double
torc_cuda_maxpool_grad_at(const torc_cuda_pool_geo *g, const void *gy, int dt,
                          const int64_t *ind, int64_t ih, int64_t iw) {
  int64_t h0, h1, w0, w1, me = ih * g->W + iw;
  torc_cuda_pool_range(ih, g->k[0], g->s[0], g->p[0], g->d[0], g->OH, &h0,
                       &h1);
  torc_cuda_pool_range(iw, g->k[1], g->s[1], g->p[1], g->d[1], g->OW, &w0,
                       &w1);
  double acc = 0;
  if (me == 0) {
    int col_empty = 0; /* some column's windows are all empty */
    for (int64_t ow = 0; ow < g->OW && !col_empty; ow++)
      col_empty =
          torc_cuda_pool_no_tap(ow, g->k[1], g->s[1], g->p[1], g->d[1], g->W);
    for (int64_t oh = 0; oh < g->OH; oh++) {
      int row_in = oh >= h0 && oh < h1;
      int row_empty =
          torc_cuda_pool_no_tap(oh, g->k[0], g->s[0], g->p[0], g->d[0], g->H);
      if (!row_in && !row_empty && !col_empty)
        continue;
      for (int64_t ow = 0; ow < g->OW; ow++) {
        int64_t o = oh * g->OW + ow;
        int holds = row_in && ow >= w0 && ow < w1;
        if ((holds || row_empty ||
             torc_cuda_pool_no_tap(ow, g->k[1], g->s[1], g->p[1], g->d[1],
                                   g->W)) &&
            ind[o] == 0)
          acc += torc_cuda_p_ld(gy, dt, o);
      }
    }
    return acc;
  }
  for (int64_t oh = h0; oh < h1; oh++)
    for (int64_t ow = w0; ow < w1; ow++) {
      int64_t o = oh * g->OW + ow;
      if (ind[o] == me)
        acc += torc_cuda_p_ld(gy, dt, o);
    }
  return acc;
}

/* avg_pool2d's window of output (oh, ow), as PyTorch's: rows [*h0, *h1)
 * and columns [*w0, *w1) clipped to the input, and the divisor (the
 * override, else the padded window clipped at the far padding edge when
 * count_include_pad, else the in-range count). */
TORC_CUDA_PHD static inline double
torc_cuda_avg_window(const torc_cuda_pool_geo *g, int64_t oh, int64_t ow,
                     int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1) {
  int64_t hs = oh * g->s[0] - g->p[0], ws = ow * g->s[1] - g->p[1];
  int64_t he = hs + g->k[0], we = ws + g->k[1];
  if (he > g->H + g->p[0])
    he = g->H + g->p[0];
  if (we > g->W + g->p[1])
    we = g->W + g->p[1];
  int64_t pool = (he - hs) * (we - ws);
  *h0 = hs < 0 ? 0 : hs, *w0 = ws < 0 ? 0 : ws;
  *h1 = he > g->H ? g->H : he, *w1 = we > g->W ? g->W : we;
  if (g->divisor)
    return (double)g->divisor;
  if (g->count_include_pad)
    return (double)pool;
  return (double)((*h1 - *h0) * (*w1 - *w0));
}

/* avg_pool2d of output (oh, ow) over the plane x. */
TORC_CUDA_PHD static inline double
torc_cuda_avgpool_at(const torc_cuda_pool_geo *g, const void *x, int dt,
                     int64_t oh, int64_t ow) {
  int64_t h0, h1, w0, w1;
  double div = torc_cuda_avg_window(g, oh, ow, &h0, &h1, &w0, &w1), sum = 0;
  for (int64_t ih = h0; ih < h1; ih++)
    for (int64_t iw = w0; iw < w1; iw++)
      sum += torc_cuda_p_ld(x, dt, ih * g->W + iw);
  return sum / div;
}

/* avg_pool2d_backward at input (ih, iw) of one plane: the sum, in output
 * order, of gy / divisor over the outputs whose clipped window holds it. */
TORC_CUDA_PHD static inline double
torc_cuda_avgpool_grad_at(const torc_cuda_pool_geo *g, const void *gy, int dt,
                          int64_t ih, int64_t iw) {
  int64_t a0, a1, b0, b1;
  torc_cuda_pool_range(ih, g->k[0], g->s[0], g->p[0], 1, g->OH, &a0, &a1);
  torc_cuda_pool_range(iw, g->k[1], g->s[1], g->p[1], 1, g->OW, &b0, &b1);
  double acc = 0;
  for (int64_t oh = a0; oh < a1; oh++)
    for (int64_t ow = b0; ow < b1; ow++) {
      int64_t h0, h1, w0, w1;
      double div = torc_cuda_avg_window(g, oh, ow, &h0, &h1, &w0, &w1);
      if (ih >= h0 && ih < h1 && iw >= w0 && iw < w1)
        acc += torc_cuda_p_ld(gy, dt, oh * g->OW + ow) / div;
    }
  return acc;
}

/* Adaptive windows (PyTorch's): output o of O over I inputs spans
 * [floor(o * I / O), ceil((o + 1) * I / O)). */
TORC_CUDA_PHD static inline int64_t torc_cuda_ad_start(int64_t o, int64_t I,
                                                      int64_t O) {
  return o * I / O;
}
TORC_CUDA_PHD static inline int64_t torc_cuda_ad_end(int64_t o, int64_t I,
                                                    int64_t O) {
  return ((o + 1) * I + O - 1) / O;
}

/* adaptive_avg_pool2d of output (oh, ow) over the plane x (g->k, s, p, d
 * unused). */
TORC_CUDA_PHD static inline double
torc_cuda_adaptive_at(const torc_cuda_pool_geo *g, const void *x, int dt,
                      int64_t oh, int64_t ow) {
  int64_t h0 = torc_cuda_ad_start(oh, g->H, g->OH);
  int64_t h1 = torc_cuda_ad_end(oh, g->H, g->OH);
  int64_t w0 = torc_cuda_ad_start(ow, g->W, g->OW);
  int64_t w1 = torc_cuda_ad_end(ow, g->W, g->OW);
  double sum = 0;
  for (int64_t ih = h0; ih < h1; ih++)
    for (int64_t iw = w0; iw < w1; iw++)
      sum += torc_cuda_p_ld(x, dt, ih * g->W + iw);
  return sum / (double)((h1 - h0) * (w1 - w0));
}

/* The outputs along one dim whose adaptive window can hold input i: a
 * superset of [floor(i * O / I), ceil((i + 1) * O / I)), each checked
 * exactly by the caller. */
TORC_CUDA_PHD static inline void torc_cuda_ad_range(int64_t i, int64_t I,
                                                   int64_t O, int64_t *lo,
                                                   int64_t *hi) {
  *lo = i * O / I - 1;
  *hi = ((i + 1) * O + I - 1) / I + 1;
  if (*lo < 0)
    *lo = 0;
  if (*hi > O)
    *hi = O;
}

/* adaptive_avg_pool2d_backward at input (ih, iw): the sum, in output order,
 * of gy / window size over the outputs whose window holds it. */
TORC_CUDA_PHD static inline double
torc_cuda_adaptive_grad_at(const torc_cuda_pool_geo *g, const void *gy,
                           int dt, int64_t ih, int64_t iw) {
  int64_t a0, a1, b0, b1;
  torc_cuda_ad_range(ih, g->H, g->OH, &a0, &a1);
  torc_cuda_ad_range(iw, g->W, g->OW, &b0, &b1);
  double acc = 0;
  for (int64_t oh = a0; oh < a1; oh++) {
    int64_t h0 = torc_cuda_ad_start(oh, g->H, g->OH);
    int64_t h1 = torc_cuda_ad_end(oh, g->H, g->OH);
    if (ih < h0 || ih >= h1)
      continue;
    for (int64_t ow = b0; ow < b1; ow++) {
      int64_t w0 = torc_cuda_ad_start(ow, g->W, g->OW);
      int64_t w1 = torc_cuda_ad_end(ow, g->W, g->OW);
      if (iw >= w0 && iw < w1)
        acc += torc_cuda_p_ld(gy, dt, oh * g->OW + ow) /
               (double)((h1 - h0) * (w1 - w0));
    }
  }
  return acc;
}

/* ---- the convolutions' bias ---- */

/* The channel of flat element i of an NCHW tensor of C channels of plane
 * elements each: the bias element dnn.c's bias add adds to it. */
TORC_CUDA_PHD static inline int64_t torc_cuda_bias_channel(int64_t i,
                                                          int64_t C,
                                                          int64_t plane) {
  return (i / plane) % C;
}

/* ---- batch norm ---- */

/* Batch norm of x [N, C, S...] is per channel c over its M = N * S
 * elements, element j of the channel (n = j / S, i = j % S) at flat index
 * (n * C + c) * S + i. */
TORC_CUDA_PHD static inline int64_t torc_cuda_bn_index(int64_t c, int64_t j,
                                                      int64_t C, int64_t S) {
  return ((j / S) * C + c) * S + j % S;
}

/* One channel's statistics: the mean and invstd it normalises with, and
 * (when has_running) the running mean and var after the update. */
typedef struct torc_cuda_bn_stats {
  double mean, invstd, run_mean, run_var;
} torc_cuda_bn_stats;

/* The statistics of a channel from the sum of its M elements and the sum
 * of their squared deviations from the mean (training), or from the
 * running mean and var (eval): training updates the running stats with
 * momentum and the unbiased variance (NaN for M = 1), as PyTorch. */
TORC_CUDA_PHD static inline torc_cuda_bn_stats
torc_cuda_bn_finalize(int training, double sum, double ssd, int64_t M,
                      double run_mean, double run_var, double momentum,
                      double eps) {
  torc_cuda_bn_stats r;
  r.run_mean = run_mean, r.run_var = run_var;
  double var;
  if (training) {
    r.mean = M ? sum / (double)M : 0;
    var = M ? ssd / (double)M : 0;
    double unb = M > 1 ? ssd / (double)(M - 1) : NAN;
    r.run_mean = (1 - momentum) * run_mean + momentum * r.mean;
    r.run_var = (1 - momentum) * run_var + momentum * unb;
  } else {
    r.mean = run_mean;
    var = run_var;
  }
  r.invstd = 1.0 / sqrt(var + eps);
  return r;
}

/* y of one element: (x - mean) * invstd * w + b. */
TORC_CUDA_PHD static inline double torc_cuda_bn_y(double x, double mean,
                                                 double invstd, double w,
                                                 double b) {
  return (x - mean) * invstd * w + b;
}

/* gx of one element from its gy and x, the channel's w, mean, invstd and
 * the channel sums sg = sum gy and sgx = sum gy * xhat over M elements
 * (training: through the batch statistics; eval: gy * w * invstd). */
TORC_CUDA_PHD static inline double
torc_cuda_bn_gx(int training, double g, double x, double mean, double invstd,
                double w, double sg, double sgx, int64_t M) {
  if (!training)
    return g * w * invstd;
  double xh = (x - mean) * invstd;
  return w * invstd * (g - sg / (double)M - xh * sgx / (double)M);
}

#endif /* TORC_CUDA_POOL_BODY_H */
