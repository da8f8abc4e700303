/* plugins/cpu/nn_kern.h — the per-ISA loops of the cpu plugin's nn
 * kernels (nn.c, attention.c): the Philox keep mask of dropout and its
 * bf16 product, gelu's backward, and one row of layer_norm and of its
 * backward. Plain C that
 * the compiler vectorises, included by ew_kern.h so that each ISA build
 * (ew_scalar.c, ew_avx2.c, ew_avx512.c) gets its own copy.
 */
#ifndef CPU_ISA_NAME
#error "nn_kern.h is included by ew_kern.h"
#endif

/* ---- the Philox keep mask ----
 * keep[i] = 1 when torc_philox_uniform(seed, off + i) >= p, for i < n:
 * that uniform is bits * 2^-53 with bits the block's 53 bits, exact in
 * double, so the comparison is bits >= thresh = ceil(p 2^53) in integers
 * (the caller's torc_cpu__keep_threshold). The rounds are torc/philox.h's,
 * written out per lane so that they vectorise (32 x 32 -> 64-bit products);
 * tests compare the mask with ref's bit for bit. */
static void FN(philox_keep)(uint64_t seed, uint64_t off, uint64_t thresh,
                            uint8_t *restrict keep, int64_t n) {
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int64_t i = 0; i < n; i++) {
    uint64_t c = off + (uint64_t)i;
    uint32_t c0 = (uint32_t)c, c1 = (uint32_t)(c >> 32), c2 = 0, c3 = 0;
    uint32_t a0 = k0, a1 = k1;
    /* unrolled whatever the -O level: the lane loop then vectorises */
#pragma GCC unroll 10
    for (int r = 0; r < 10; r++) {
      uint64_t p0 = (uint64_t)0xD2511F53u * c0;
      uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
      uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ a0;
      uint32_t n1 = (uint32_t)p1;
      uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ a1;
      uint32_t n3 = (uint32_t)p0;
      c0 = n0, c1 = n1, c2 = n2, c3 = n3;
      a0 += 0x9E3779B9u;
      a1 += 0xBB67AE85u;
    }
    uint64_t bits =
        (((uint64_t)c0 << 21) ^ (uint64_t)(c1 >> 11)) & ((1ull << 53) - 1);
    keep[i] = bits >= thresh;
  }
}

/* ---- dropout's bf16 product ----
 * y[i] = x[i] k[i] and m[i] = k[i], k[i] = keep[i] scale, for i < n: the
 * product in double, rounded to f32 then bf16 as ref rounds it (scale =
 * 1 / (1 - p) is rarely an f32, so an f32 product would round
 * differently); keep[i] is 0 or 1, so k[i] is exactly 0 or scale, and the
 * loop has no branch to mispredict on a random mask. */
static void FN(drop_bf16)(const uint8_t *restrict keep,
                          const uint16_t *restrict x, double scale,
                          uint16_t *restrict y, uint16_t *restrict m,
                          int64_t n) {
  uint16_t ms = cpu_bf16_round((uint32_t)f2bits((float)scale));
  for (int64_t i = 0; i < n; i++) {
    float xf = bits2f((int32_t)((uint32_t)x[i] << 16));
    float yf = (float)((double)xf * ((double)keep[i] * scale));
    y[i] = cpu_bf16_round((uint32_t)f2bits(yf));
    m[i] = (uint16_t)(ms & (0u - keep[i]));
  }
}

/* ---- attention's exponentials ----
 * y[i] = e^(x[i] - m), exactly 0 where x[i] is -inf (a masked key), for
 * i < n (y may be x); returns the sum of the y in double (RL lanes, a
 * fixed order). */
static double FN(exp_sum)(int32_t dt, const void *xv, void *yv, int64_t n,
                          double m) {
  double l[RL] = {0}, s = 0;
  int64_t i = 0;
  if (dt == TORC_F32) {
    const float *x = xv;
    float *y = yv, mf = (float)m;
    for (; i + RL <= n; i += RL)
      for (int q = 0; q < RL; q++) {
        float v = x[i + q], e = v_expf(v - mf);
        e = v == -INFINITY ? 0.0f : e;
        y[i + q] = e;
        l[q] += (double)e;
      }
    for (; i < n; i++) {
      float v = x[i], e = v == -INFINITY ? 0.0f : v_expf(v - mf);
      y[i] = e;
      s += (double)e;
    }
  } else {
    const double *x = xv;
    double *y = yv;
    for (; i < n; i++) {
      y[i] = exp(x[i] - m);
      s += y[i];
    }
  }
  for (int q = 0; q < RL; q++)
    s += l[q];
  return s;
}

/* ---- gelu's backward ----
 * y = g gelu'(x). erf form: Phi(x) + x phi(x), Phi through v_erfc_posf
 * (ew_kern.h) and phi(x) = e^(-x^2/2) / sqrt(2 pi) from the same
 * exponential; tanh form: PyTorch's GeluBackward for approximate='tanh'
 * (ref's formulas, kernels_unary.c). f64 calls libm as ref does. */
static void FN(gelu_bw)(int32_t dt, int tanh_form, const void *gv,
                        const void *xv, void *yv, int64_t n) {
  const double k = CPU_SQRT_2_OVER_PI, c = 0.044715;
  if (dt == TORC_F32) {
    const float *g = gv, *x = xv;
    float *y = yv;
    if (tanh_form) {
      const float kf = (float)k, cf = (float)c, c3 = (float)(3 * c);
      for (int64_t i = 0; i < n; i++) {
        float v = x[i], v2 = v * v;
        float t = v_tanhf(kf * (v + cf * v2 * v)), s = 1.0f - t * t;
        /* s is 0 once |x| > ~10: the second term is 0 there (ref's, in
         * double), not 0 times v^2 = inf for huge x; NaN for x = +-inf,
         * as ref */
        float d = 0.5f * (1.0f + t) +
                  (s != 0 ? 0.5f * v * s * kf * (1.0f + c3 * v2) : 0.0f * v);
        y[i] = g[i] * d;
      }
    } else {
      for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        float e, E = v_erfc_posf(fabsf(v) * (float)CPU_SQRT1_2, &e);
        float cdf = v < 0 ? 0.5f * E : 1.0f - 0.5f * E;
        float d = cdf + v * e * 0.39894228040143267794f;
        y[i] = g[i] * (v != v ? v : d);
      }
    }
  } else {
    const double *g = gv, *x = xv;
    double *y = yv;
    for (int64_t i = 0; i < n; i++) {
      double v = x[i], d;
      if (tanh_form) {
        double t = tanh(k * (v + c * v * v * v));
        d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
      } else {
        double cdf = 0.5 * (1 + erf(v * CPU_SQRT1_2));
        d = cdf + v * exp(-0.5 * v * v) * 0.39894228040143267794;
      }
      y[i] = g[i] * d;
    }
  }
}

/* ---- layer_norm: one row of K elements ----
 * mean and the biased variance in double (RL lanes, a fixed order), then
 * y = (x - mean) rstd w + b in the dtype (mean split into the dtype's
 * value and its remainder, so x - mean keeps its bits for f32 rows far
 * from 0).
 * Returns mean and rstd = 1 / sqrt(var + eps) through *mean, *rstd. */
#define LN_FWD_BODY(T)                                                         \
  do {                                                                         \
    const T *x = xv, *w = wv, *b = bv;                                         \
    T *y = yv;                                                                 \
    double l[RL] = {0}, s = 0;                                                 \
    int64_t j = 0;                                                             \
    for (; j + RL <= K; j += RL)                                               \
      for (int q = 0; q < RL; q++)                                             \
        l[q] += (double)x[j + q];                                              \
    for (int q = 0; q < RL; q++)                                               \
      s += l[q];                                                               \
    for (; j < K; j++)                                                         \
      s += (double)x[j];                                                       \
    double m = K ? s / (double)K : 0, ss = 0;                                  \
    for (int q = 0; q < RL; q++)                                               \
      l[q] = 0;                                                                \
    for (j = 0; j + RL <= K; j += RL)                                          \
      for (int q = 0; q < RL; q++) {                                           \
        double d = (double)x[j + q] - m;                                       \
        l[q] += d * d;                                                         \
      }                                                                        \
    for (int q = 0; q < RL; q++)                                               \
      ss += l[q];                                                              \
    for (; j < K; j++) {                                                       \
      double d = (double)x[j] - m;                                             \
      ss += d * d;                                                             \
    }                                                                          \
    double r = 1.0 / sqrt((K ? ss / (double)K : 0) + eps);                     \
    T mt = (T)m, ml = (T)(m - (double)mt), rt = (T)r;                          \
    for (j = 0; j < K; j++)                                                    \
      y[j] = ((x[j] - mt) - ml) * rt * w[j] + b[j];                            \
    *mean = m;                                                                 \
    *rstd = r;                                                                 \
  } while (0)

static void FN(ln_row)(int32_t dt, const void *xv, const void *wv,
                       const void *bv, void *yv, int64_t K, double eps,
                       double *mean, double *rstd) {
  if (dt == TORC_F32)
    LN_FWD_BODY(float);
  else
    LN_FWD_BODY(double);
}

/* The backward of one row: with xh = (x - mean) rstd and gh = gy w,
 * gx = rstd (gh - mean(gh) - xh mean(gh xh)) (ref's rows_backward); the
 * row's gy xh and gy are added into aw[K] and ab[K] (double; NULL: not
 * wanted). */
#define LN_BWD_BODY(T)                                                         \
  do {                                                                         \
    const T *gy = gv, *x = xv, *w = wv;                                        \
    T *gx = gxv;                                                               \
    T mt = (T)mean, ml = (T)(mean - (double)mt), rt = (T)rstd;                 \
    double l1[RL] = {0}, l2[RL] = {0}, s1 = 0, s2 = 0;                         \
    int64_t j = 0;                                                             \
    for (; j + RL <= K; j += RL)                                               \
      for (int q = 0; q < RL; q++) {                                           \
        T xh = ((x[j + q] - mt) - ml) * rt, gh = gy[j + q] * w[j + q];         \
        l1[q] += (double)gh;                                                   \
        l2[q] += (double)(gh * xh);                                            \
      }                                                                        \
    for (int q = 0; q < RL; q++)                                               \
      s1 += l1[q], s2 += l2[q];                                                \
    for (; j < K; j++) {                                                       \
      T xh = ((x[j] - mt) - ml) * rt, gh = gy[j] * w[j];                       \
      s1 += (double)gh;                                                        \
      s2 += (double)(gh * xh);                                                 \
    }                                                                          \
    T a1 = (T)(K ? s1 / (double)K : 0), a2 = (T)(K ? s2 / (double)K : 0);      \
    for (j = 0; j < K; j++) {                                                  \
      T xh = ((x[j] - mt) - ml) * rt, gh = gy[j] * w[j];                       \
      gx[j] = rt * (gh - a1 - xh * a2);                                        \
    }                                                                          \
    if (aw)                                                                    \
      for (j = 0; j < K; j++)                                                  \
        aw[j] += (double)(gy[j] * (((x[j] - mt) - ml) * rt));                  \
    if (ab)                                                                    \
      for (j = 0; j < K; j++)                                                  \
        ab[j] += (double)gy[j];                                                \
  } while (0)

static void FN(ln_row_bw)(int32_t dt, const void *gv, const void *xv,
                          const void *wv, double mean, double rstd, void *gxv,
                          int64_t K, double *aw, double *ab) {
  if (dt == TORC_F32)
    LN_BWD_BODY(float);
  else
    LN_BWD_BODY(double);
}
