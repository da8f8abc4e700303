/* plugins/cuda/nn_body.h — the per-row and per-element math of the cuda
 * plugin's normalisation layers (layer_norm, group_norm and their
 * backwards) and of the fused cross-entropy (forward and backward), as
 * inline functions callable from device code and from host C, so that
 * tests/test_cuda_nn_bodies.c runs the same formulas on the CPU against
 * the ref kernels. Each body comes in two forms: _f computes in f32 (the
 * f32, f16 and bf16 kernels: loads widen to f32, statistics accumulate in
 * f32) and _d in f64 (the f64 kernels).
 */
#ifndef TORC_CUDA_NN_BODY_H
#define TORC_CUDA_NN_BODY_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TORC_CUDA_NHD __host__ __device__
#else
#define TORC_CUDA_NHD
#endif

/* Threads per block of nn.cu's row kernels (one block per row of a norm,
 * torc_cuda_ce_lanes threads per row of cross-entropy). */
#define TORC_CUDA_NN_BLOCK 256

/* layer_norm's gw and gb: blocks of TX columns by TY threads, and
 * torc_cuda_ln_groups(R) row groups, whose partials fold in order. */
#define TORC_CUDA_LN_TX 32
#define TORC_CUDA_LN_TY 8
TORC_CUDA_NHD static inline int torc_cuda_ln_groups(int64_t R) {
  int64_t g = R / 64;
  return g < 1 ? 1 : g > 64 ? 64 : (int)g;
}

/* One set of bodies over the computing type T with its math functions
 * (sqrt, exp, log) and name suffix. */
#define TORC_CUDA_NN_BODIES(T, sfx, SQRT, EXP, LOG)                            \
  /* ---- layer_norm / group_norm: rows of K elements ---- */                  \
                                                                               \
  /* A row's mean from the sum of its K elements (0 for an empty row). */     \
  TORC_CUDA_NHD static inline T torc_cuda_norm_mean_##sfx(T sum, int64_t K) { \
    return K ? sum / (T)K : (T)0;                                              \
  }                                                                            \
  /* 1 / sqrt(var + eps) from the sum of squared deviations: the biased       \
   * variance (divided by K), eps inside the root, as ref. */                 \
  TORC_CUDA_NHD static inline T torc_cuda_norm_rstd_##sfx(T ssd, int64_t K,   \
                                                          T eps) {             \
    return (T)1 / SQRT((K ? ssd / (T)K : (T)0) + eps);                         \
  }                                                                            \
  /* An output element: (x - mean) * rstd * w + b. */                         \
  TORC_CUDA_NHD static inline T torc_cuda_norm_y_##sfx(T x, T mean, T rstd,   \
                                                       T w, T b) {             \
    return (x - mean) * rstd * w + b;                                          \
  }                                                                            \
  /* The input gradient of one element, from the row's s1 = sum gy * w and    \
   * s2 = sum gy * w * xhat: rstd * (gy w - s1 / K - xhat s2 / K). */         \
  TORC_CUDA_NHD static inline T torc_cuda_norm_gx_##sfx(                      \
      T gy, T x, T w, T mean, T rstd, T s1, T s2, int64_t K) {                 \
    T xh = (x - mean) * rstd, gh = gy * w;                                     \
    return rstd * (gh - s1 / (T)K - xh * s2 / (T)K);                           \
  }                                                                            \
                                                                               \
  /* ---- cross_entropy: rows of C logits ---- */                             \
                                                                               \
  /* The running maximum: NaN propagates (a NaN replaces it; once NaN no     \
   * comparison replaces it), as ref's loop. From -inf. */                    \
  TORC_CUDA_NHD static inline T torc_cuda_ce_max_##sfx(T m, T x) {            \
    return (x != x || x > m) ? x : m;                                          \
  }                                                                            \
  /* Whether the row's sum of e^(x - m) is needed: m finite. */               \
  TORC_CUDA_NHD static inline int torc_cuda_ce_finite_##sfx(T m) {            \
    return m == m && m - m == (T)0;                                            \
  }                                                                            \
  /* One term of the sum. */                                                  \
  TORC_CUDA_NHD static inline T torc_cuda_ce_exp_##sfx(T x, T m) {            \
    return EXP(x - m);                                                         \
  }                                                                            \
  /* logsum from the maximum and the sum of e^(x - m): log of the sum when   \
   * m is finite; NaN for m = +inf; 0 for m = -inf (a row of -inf or no       \
   * classes) and for m = NaN (the loss is NaN through m). */                 \
  TORC_CUDA_NHD static inline T torc_cuda_ce_logsum_##sfx(T m, T e) {         \
    if (torc_cuda_ce_finite_##sfx(m))                                          \
      return LOG(e);                                                           \
    return m == m && m > (T)0 ? (T)NAN : (T)0;                                 \
  }                                                                            \
  /* log-softmax of logit x of the row: (x - m) - logsum. */                  \
  TORC_CUDA_NHD static inline T torc_cuda_ce_logp_##sfx(T x, T m, T ls) {     \
    return (x - m) - ls;                                                       \
  }                                                                            \
  /* The row's loss for a target that is not ignored: -w[t] logp[t], then    \
   * with smoothing eps (1 - eps) of it plus eps / C * smooth, where smooth  \
   * = -sum_c w[c] logp[c] (ref's order). wt: w[t] (1 without weights). */    \
  TORC_CUDA_NHD static inline T torc_cuda_ce_loss_##sfx(                      \
      T logp_t, T wt, T eps, int64_t C, T smooth) {                            \
    T v = -wt * logp_t;                                                        \
    if (eps > (T)0)                                                            \
      v = ((T)1 - eps) * v + eps / (T)C * smooth;                              \
    return v;                                                                  \
  }                                                                            \
  /* The gradient of one logit of a row whose target is not ignored: gr *    \
   * ((1 - eps) w[t] (p - [c == t]) + eps / C (W p - w[c])), p the softmax  \
   * of the logit, W the sum of the class weights (C without weights). */     \
  TORC_CUDA_NHD static inline T torc_cuda_ce_grad_##sfx(                      \
      T x, T m, T ls, T gr, T wt, int is_t, T eps, int64_t C, T W, T wc) {     \
    T pc = EXP((x - m) - ls);                                                  \
    T d = ((T)1 - eps) * wt * (pc - (is_t ? (T)1 : (T)0));                     \
    if (eps > (T)0)                                                            \
      d += eps / (T)C * (W * pc - wc);                                         \
    return gr * d;                                                             \
  }

TORC_CUDA_NN_BODIES(float, f, sqrtf, expf, logf)
TORC_CUDA_NN_BODIES(double, d, sqrt, exp, log)

/* The lanes of a warp that share one row of cross-entropy: 1 when the
 * logits of a row lie S > 1 apart and are few (C <= 1024: one thread per
 * row reads neighbouring rows' logits side by side), else 32 (contiguous
 * rows, and long ones, which one thread would walk alone). */
TORC_CUDA_NHD static inline int torc_cuda_ce_lanes(int64_t C, int64_t S) {
  return S > 1 && C <= 1024 ? 1 : 32;
}

/* A target the row's loss counts: not ignore_index. */
TORC_CUDA_NHD static inline int torc_cuda_ce_counted(int64_t t,
                                                     int64_t ignore) {
  return t != ignore;
}
/* A counted target outside [0, C): the kernel's device-side error. */
TORC_CUDA_NHD static inline int torc_cuda_ce_bad(int64_t t, int64_t ignore,
                                                 int64_t C) {
  return t != ignore && (t < 0 || t >= C);
}

/* The affine parameter of flat element i of a norm: w[(i / div) % mod]
 * (layer_norm: div 1, mod K; group_norm: div the spatial size, mod C). */
TORC_CUDA_NHD static inline int64_t torc_cuda_norm_q(int64_t i, int64_t div,
                                                     int64_t mod) {
  return div == 1 ? i % mod : (i / div) % mod;
}

/* The same for element j of row `row` of K elements: j itself for
 * layer_norm (div 1, mod K), without a division. */
TORC_CUDA_NHD static inline int64_t torc_cuda_norm_qrow(int64_t row,
                                                        int64_t j, int64_t K,
                                                        int64_t div,
                                                        int64_t mod) {
  return div == 1 && mod == K ? j : torc_cuda_norm_q(row * K + j, div, mod);
}

/* Element k of the set of flat indices whose affine parameter is q (the
 * elements gw[q] and gb[q] sum over): k = a * div + s gives
 * a * mod * div + q * div + s. */
TORC_CUDA_NHD static inline int64_t torc_cuda_norm_qset(int64_t k, int64_t q,
                                                        int64_t div,
                                                        int64_t mod) {
  int64_t a = k / div, s = k - a * div;
  return a * mod * div + q * div + s;
}

#endif /* TORC_CUDA_NN_BODY_H */
