/* plugins/cpu/ew_kern.h — the cpu plugin's contiguous elementwise,
 * reduction and softmax loops, written once in plain C that the compiler
 * vectorises, and compiled once per ISA: ew_scalar.c, ew_avx2.c (-mavx2
 * -mfma) and ew_avx512.c (-mavx512f ...) include it after defining
 * CPU_ISA_NAME, so each file's flags apply only to its own copy and the
 * plugin picks one at run time (cpuid.c).
 *
 * f32 exp, log, tanh and sigmoid use branch-free polynomial forms (Cephes'
 * expf/logf/tanhf coefficients, within 1-2 ulp) so that they vectorise;
 * NaN, +-inf, 0 and denormals follow libm. f64 calls libm. bf16 runs go
 * through the f32 loops a block at a time (widened, then rounded back).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_internal.h"

#ifndef CPU_ISA_NAME
#error "define CPU_ISA_NAME before including ew_kern.h"
#endif

#define CPU_CAT2(a, b) a##b
#define CPU_CAT(a, b) CPU_CAT2(a, b)
#define FN(name) CPU_CAT(name##_, CPU_ISA_NAME)

/* The vector math below is forced inline: the build's CFLAGS (-O2 by
 * default) come after this file's -O3, and at -O2 GCC leaves v_tanhf and
 * the like out of line, a call per element that keeps the loops around
 * them scalar (gelu, tanh, sigmoid, silu, exp ran 3-10x slower than their
 * SSE2 build). */
#define CPU_INLINE static inline __attribute__((always_inline))

#if defined(__FMA__)
#define FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define FMAF(a, b, c) ((a) * (b) + (c))
#endif

static inline int32_t f2bits(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return i;
}
static inline float bits2f(int32_t i) {
  float f;
  memcpy(&f, &i, sizeof f);
  return f;
}

/* e^x: x = n ln2 + r, |r| <= ln2/2, e^r by Cephes' degree-7 form, times
 * 2^n applied in two halves so that overflow gives inf and underflow
 * denormals or 0. Rounding to n uses the 1.5*2^23 trick (no float to int
 * conversion, so NaN is harmless; it is passed through at the end). */
CPU_INLINE float v_expf(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float shifter = 12582912.0f; /* 1.5 * 2^23 */
  float t = FMAF(xc, 1.44269504088896341f, shifter);
  int32_t n = f2bits(t) - f2bits(shifter);
  float nf = t - shifter;
  float r = FMAF(nf, -0.693359375f, xc);
  r = FMAF(nf, 2.12194440e-4f, r);
  float p = 1.9875691500E-4f;
  p = FMAF(p, r, 1.3981999507E-3f);
  p = FMAF(p, r, 8.3334519073E-3f);
  p = FMAF(p, r, 4.1665795894E-2f);
  p = FMAF(p, r, 1.6666665459E-1f);
  p = FMAF(p, r, 5.0000001201E-1f);
  float rr = r * r;
  p = FMAF(p, rr, r) + 1.0f;
  int32_t n1 = n >> 1, n2 = n - n1;
  /* Unsigned shifts: for a NaN x, n is garbage and y is discarded, but a
   * signed shift of it would be undefined. */
  float y = p * bits2f((int32_t)((uint32_t)(n1 + 127) << 23)) *
            bits2f((int32_t)((uint32_t)(n2 + 127) << 23));
  return x != x ? x : y;
}

/* log x: x = m 2^e with m in [sqrt(1/2), sqrt 2), log(m) by Cephes' logf
 * polynomial; denormals scaled up first; x < 0 gives NaN, 0 -inf. */
CPU_INLINE float v_logf(float x) {
  int den = x < 1.17549435e-38f;
  float xs = den ? x * 8388608.0f : x;
  int32_t b = f2bits(xs);
  float e = (float)(((b >> 23) & 0xff) - 126 - (den ? 23 : 0));
  float m = bits2f((b & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
  int lo = m < 0.707106781186547524f;
  e = lo ? e - 1.0f : e;
  m = lo ? m + m - 1.0f : m - 1.0f;
  float z = m * m;
  float y = 7.0376836292E-2f;
  y = FMAF(y, m, -1.1514610310E-1f);
  y = FMAF(y, m, 1.1676998740E-1f);
  y = FMAF(y, m, -1.2420140846E-1f);
  y = FMAF(y, m, 1.4249322787E-1f);
  y = FMAF(y, m, -1.6668057665E-1f);
  y = FMAF(y, m, 2.0000714765E-1f);
  y = FMAF(y, m, -2.4999993993E-1f);
  y = FMAF(y, m, 3.3333331174E-1f);
  y = y * m * z;
  y = FMAF(e, -2.12194440e-4f, y);
  y = FMAF(z, -0.5f, y);
  float r = m + y;
  r = FMAF(e, 0.693359375f, r);
  r = x == INFINITY ? x : r;
  r = x == 0.0f ? -INFINITY : r;
  r = x < 0.0f ? NAN : r;
  return x != x ? x : r;
}

/* tanh: Cephes' odd polynomial below |x| 0.625, else
 * sign(x) (1 - 2 / (e^{2|x|} + 1)). */
CPU_INLINE float v_tanhf(float x) {
  float ax = fabsf(x);
  float z = x * x;
  float p = -5.70498872745E-3f;
  p = FMAF(p, z, 2.06390887954E-2f);
  p = FMAF(p, z, -5.37397155531E-2f);
  p = FMAF(p, z, 1.33314422036E-1f);
  p = FMAF(p, z, -3.33332819422E-1f);
  float small = FMAF(p * z, x, x);
  float e = v_expf(2.0f * ax);
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  float r = ax < 0.625f ? small : big;
  return x != x ? x : r;
}

/* 1 / (1 + e^-x) through e = e^-|x| (never overflows). */
CPU_INLINE float v_sigmoidf(float x) {
  float e = v_expf(-fabsf(x));
  float d = 1.0f / (1.0f + e);
  return x >= 0.0f ? d : e * d;
}

/* erfc(z) for z >= 0 (NaN passes), and e^(-z^2) through *ez: Numerical
 * Recipes' erfcc, t e^(-z^2 + P(t)) with t = 1 / (1 + z/2) (fractional
 * error below 1.2e-7), z^2's rounding error folded back in (fma), so the
 * result keeps its relative accuracy far into the tail where 1 + erf(-z)
 * would cancel; 0 above z = 10 (below f32's denormals). ez may be NULL
 * (a constant at each inlined call, so the branch folds away). */
CPU_INLINE float v_erfc_posf(float z, float *ez) {
  float zc = z > 10.0f ? 10.0f : z;
  float t = 1.0f / FMAF(0.5f, zc, 1.0f);
  float p = 0.17087277f;
  p = FMAF(p, t, -0.82215223f);
  p = FMAF(p, t, 1.48851587f);
  p = FMAF(p, t, -1.13520398f);
  p = FMAF(p, t, 0.27886807f);
  p = FMAF(p, t, -0.18628806f);
  p = FMAF(p, t, 0.09678418f);
  p = FMAF(p, t, 0.37409196f);
  p = FMAF(p, t, 1.00002368f);
  p = FMAF(p, t, -1.26551223f);
  float z2 = zc * zc, lo = __builtin_fmaf(zc, zc, -z2);
  float r;
  if (ez) { /* both: e^(-z^2) e^P */
    float e = v_expf(-z2) * (1.0f - lo);
    r = t * e * v_expf(p);
    *ez = z > 10.0f ? 0.0f : e;
  } else {
    r = t * v_expf(p - z2) * (1.0f - lo);
  }
  return z != z ? z : z > 10.0f ? 0.0f : r;
}

static inline double s_sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

#define CPU_SQRT_2_OVER_PI 0.79788456080286535588
#define CPU_SQRT1_2 0.70710678118654752440

/* ---- unary ---- */

/* The simple ops as one expression E of v, for element type T. */
#define UNARY_SIMPLE(T, x, y, n, op, EXPF, LOGF, TANHF, SIGF, SQRTF, ABSF)     \
  switch (op) {                                                                \
  case CPU_U_NEG:                                                              \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = -x[i];                                                            \
    return;                                                                    \
  case CPU_U_ABS:                                                              \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = ABSF(x[i]);                                                       \
    return;                                                                    \
  case CPU_U_SIGN:                                                             \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = (T)((0 < x[i]) - (x[i] < 0));                                     \
    return;                                                                    \
  case CPU_U_SQUARE:                                                           \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = x[i] * x[i];                                                      \
    return;                                                                    \
  case CPU_U_RELU:                                                             \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = x[i] != x[i] ? x[i] : x[i] > 0 ? x[i] : (T)0;                     \
    return;                                                                    \
  case CPU_U_EXP:                                                              \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = EXPF(x[i]);                                                       \
    return;                                                                    \
  case CPU_U_LOG:                                                              \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = LOGF(x[i]);                                                       \
    return;                                                                    \
  case CPU_U_SQRT:                                                             \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = SQRTF(x[i]);                                                      \
    return;                                                                    \
  case CPU_U_TANH:                                                             \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = TANHF(x[i]);                                                      \
    return;                                                                    \
  case CPU_U_SIGMOID:                                                          \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = SIGF(x[i]);                                                       \
    return;                                                                    \
  case CPU_U_RECIPROCAL:                                                       \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = (T)1 / x[i];                                                      \
    return;                                                                    \
  case CPU_U_RSQRT:                                                            \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = (T)1 / SQRTF(x[i]);                                               \
    return;                                                                    \
  case CPU_U_SILU:                                                             \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = x[i] * SIGF(x[i]);                                                \
    return;                                                                    \
  default:                                                                     \
    break;                                                                     \
  }

/* The ops with torc_scalar_params (leaky_relu, gelu, clamp). */
#define UNARY_PARAM(T, x, y, n, op, p, TANHF)                                  \
  switch (op) {                                                                \
  case CPU_U_LEAKY_RELU: {                                                     \
    T s = (T)p->a;                                                             \
    for (int64_t i = 0; i < n; i++)                                            \
      y[i] = x[i] > 0 ? x[i] : x[i] * s;                                       \
    return;                                                                    \
  }                                                                            \
  case CPU_U_GELU:                                                             \
    if (p->flags & 1u) {                                                       \
      for (int64_t i = 0; i < n; i++) {                                        \
        T v = x[i];                                                            \
        T u = (T)CPU_SQRT_2_OVER_PI * (v + (T)0.044715 * v * v * v);           \
        y[i] = (T)0.5 * v * ((T)1 + TANHF(u));                                 \
      }                                                                        \
    } else {                                                                   \
      GELU_ERF(T, x, y, n);                                                    \
    }                                                                          \
    return;                                                                    \
  case CPU_U_CLAMP: {                                                          \
    /* NaN from x or from a bound propagates (ref's f_clamp). */               \
    int has_lo = (p->flags & 1u) != 0, has_hi = (p->flags & 2u) != 0;          \
    T lo = (T)p->a, hi = (T)p->b;                                              \
    if ((has_lo && lo != lo) || (has_hi && hi != hi)) {                        \
      T nan = has_lo && lo != lo ? lo : hi;                                    \
      for (int64_t i = 0; i < n; i++)                                          \
        y[i] = x[i] != x[i] ? x[i] : nan;                                      \
      return;                                                                  \
    }                                                                          \
    if (!has_lo)                                                               \
      lo = -(T)INFINITY;                                                       \
    if (!has_hi)                                                               \
      hi = (T)INFINITY;                                                        \
    for (int64_t i = 0; i < n; i++) {                                          \
      T v = x[i];                                                              \
      T r = v < lo ? lo : v;                                                   \
      r = r > hi ? hi : r;                                                     \
      y[i] = v != v ? v : r;                                                   \
    }                                                                          \
    return;                                                                    \
  }                                                                            \
  default:                                                                     \
    break;                                                                     \
  }

/* gelu's erf form x Phi(x): f32 through v_erfc_posf (vectorised,
 * accurate in the negative tail), f64 through libm's erf as ref. */
CPU_INLINE void gelu_erf_f32(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    float E = v_erfc_posf(fabsf(v) * (float)CPU_SQRT1_2, NULL);
    float cdf = v < 0 ? 0.5f * E : 1.0f - 0.5f * E;
    y[i] = v != v ? v : v * cdf;
  }
}
CPU_INLINE void gelu_erf_f64(const double *x, double *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = 0.5 * x[i] * (1 + erf(x[i] * CPU_SQRT1_2));
}
#define GELU_ERF(T, x, y, n)                                                   \
  _Generic((x), const float *: gelu_erf_f32, const double *: gelu_erf_f64)(    \
      x, y, n)

static double d_sqrt(double v) { return __builtin_sqrt(v); }
static float f_sqrt(float v) { return __builtin_sqrtf(v); }

static void unary_f32(int op, const float *x, float *y, int64_t n,
                      const torc_scalar_params *p) {
  /* y may alias x (in place) */
  UNARY_SIMPLE(float, x, y, n, op, v_expf, v_logf, v_tanhf, v_sigmoidf, f_sqrt,
               __builtin_fabsf)
  if (p)
    UNARY_PARAM(float, x, y, n, op, p, v_tanhf)
}

static void unary_f64(int op, const double *x, double *y, int64_t n,
                      const torc_scalar_params *p) {
  UNARY_SIMPLE(double, x, y, n, op, exp, log, tanh, s_sigmoid, d_sqrt,
               __builtin_fabs)
  if (p)
    UNARY_PARAM(double, x, y, n, op, p, tanh)
}

/* ---- bf16 through f32 ----
 * A bf16 run widens a block at a time to f32 (exact: a bf16 is the top
 * half of an f32), goes through the f32 loops and narrows back to the
 * nearest bf16, ties to even, NaN kept a quiet NaN (torc_f32_to_bf16).
 * For + - * / sqrt, relu, max, min and the comparisons the f32 loop's
 * result is the correctly rounded one, which is also what ref's double
 * result rounds to in f32 (53 bits >= 2 * 24 + 2: rounding twice is
 * innocuous), and ref narrows that f32 the same way: bit for bit ref's.
 * exp, log, tanh, sigmoid and the ops built on them are the f32
 * polynomials' (1-2 f32 ulp), which narrow to ref's bf16 but for a value
 * that close to a bf16 rounding boundary (one bf16 ulp off then). */
enum { BF_BLK = 512 };

CPU_INLINE void bf16_widen(const uint16_t *restrict x, float *restrict y,
                           int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u = (uint32_t)x[i] << 16;
    memcpy(y + i, &u, sizeof u);
  }
}

CPU_INLINE void bf16_narrow(const float *restrict x, uint16_t *restrict y,
                            int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    y[i] = cpu_bf16_round(u);
  }
}

/* y may alias x. */
static void unary_bf16(int op, const uint16_t *x, uint16_t *y, int64_t n,
                       const torc_scalar_params *p) {
  float b[BF_BLK];
  for (int64_t i = 0; i < n; i += BF_BLK) {
    int64_t m = n - i < BF_BLK ? n - i : BF_BLK;
    bf16_widen(x + i, b, m);
    unary_f32(op, b, b, m, p);
    bf16_narrow(b, y + i, m);
  }
}

static void FN(unary)(int32_t dt, int op, const void *xv, void *yv, int64_t n,
                      const void *pv) {
  if (dt == TORC_F32)
    unary_f32(op, xv, yv, n, pv);
  else if (dt == TORC_BF16)
    unary_bf16(op, xv, yv, n, pv);
  else
    unary_f64(op, xv, yv, n, pv);
}

/* ---- binary ---- */

/* One op in its three layouts (both contiguous, b broadcast, a
 * broadcast); E uses u and v for the operands. */
#define BIN_LOOPS(TY, E)                                                       \
  do {                                                                         \
    if (sa && sb)                                                              \
      for (int64_t i = 0; i < n; i++) {                                        \
        T u = a[i], v = b[i];                                                  \
        y[i] = (TY)(E);                                                        \
      }                                                                        \
    else if (sa) {                                                             \
      T v = b[0];                                                              \
      for (int64_t i = 0; i < n; i++) {                                        \
        T u = a[i];                                                            \
        y[i] = (TY)(E);                                                        \
      }                                                                        \
    } else {                                                                   \
      T u = a[0];                                                              \
      for (int64_t i = 0; i < n; i++) {                                        \
        T v = b[i];                                                            \
        y[i] = (TY)(E);                                                        \
      }                                                                        \
    }                                                                          \
  } while (0)

#define BIN_ARITH(T)                                                           \
  do {                                                                         \
    T *y = yv;                                                                 \
    switch (op) {                                                              \
    case CPU_B_ADD:                                                            \
      BIN_LOOPS(T, u + v);                                                     \
      return;                                                                  \
    case CPU_B_SUB:                                                            \
      BIN_LOOPS(T, u - v);                                                     \
      return;                                                                  \
    case CPU_B_MUL:                                                            \
      BIN_LOOPS(T, u *v);                                                      \
      return;                                                                  \
    case CPU_B_DIV:                                                            \
      BIN_LOOPS(T, u / v);                                                     \
      return;                                                                  \
    case CPU_B_MAX:                                                            \
      BIN_LOOPS(T, u != u || v != v ? u + v : u > v ? u : v);                  \
      return;                                                                  \
    case CPU_B_MIN:                                                            \
      BIN_LOOPS(T, u != u || v != v ? u + v : u < v ? u : v);                  \
      return;                                                                  \
    case CPU_B_RELU_BW:                                                        \
      BIN_LOOPS(T, v <= 0 ? (T)0 : u);                                         \
      return;                                                                  \
    default:                                                                   \
      break;                                                                   \
    }                                                                          \
  } while (0)

#define BIN_CMP(T)                                                             \
  do {                                                                         \
    uint8_t *y = yv;                                                           \
    switch (op) {                                                              \
    case CPU_B_EQ:                                                             \
      BIN_LOOPS(uint8_t, u == v);                                              \
      return;                                                                  \
    case CPU_B_NE:                                                             \
      BIN_LOOPS(uint8_t, u != v);                                              \
      return;                                                                  \
    case CPU_B_LT:                                                             \
      BIN_LOOPS(uint8_t, u < v);                                               \
      return;                                                                  \
    case CPU_B_LE:                                                             \
      BIN_LOOPS(uint8_t, u <= v);                                              \
      return;                                                                  \
    case CPU_B_GT:                                                             \
      BIN_LOOPS(uint8_t, u > v);                                               \
      return;                                                                  \
    case CPU_B_GE:                                                             \
      BIN_LOOPS(uint8_t, u >= v);                                              \
      return;                                                                  \
    default:                                                                   \
      break;                                                                   \
    }                                                                          \
  } while (0)

static void binary_f32(int op, const float *a, int sa, const float *b, int sb,
                       void *yv, int64_t n) {
  typedef float T;
  if (op < CPU_B_EQ)
    BIN_ARITH(T);
  else
    BIN_CMP(T);
}

static void binary_f64(int op, const double *a, int sa, const double *b, int sb,
                       void *yv, int64_t n) {
  typedef double T;
  if (op < CPU_B_EQ)
    BIN_ARITH(T);
  else
    BIN_CMP(T);
}

/* bf16 operands through binary_f32 a block at a time (a broadcast one
 * widened as its one element); comparisons write their bools directly.
 * y may alias a or b. */
static void binary_bf16(int op, const uint16_t *a, int sa, const uint16_t *b,
                        int sb, void *yv, int64_t n) {
  float fa[BF_BLK], fb[BF_BLK], fy[BF_BLK];
  for (int64_t i = 0; i < n; i += BF_BLK) {
    int64_t m = n - i < BF_BLK ? n - i : BF_BLK;
    bf16_widen(sa ? a + i : a, fa, sa ? m : 1);
    bf16_widen(sb ? b + i : b, fb, sb ? m : 1);
    if (op >= CPU_B_EQ) {
      binary_f32(op, fa, sa, fb, sb, (uint8_t *)yv + i, m);
    } else {
      binary_f32(op, fa, sa, fb, sb, fy, m);
      bf16_narrow(fy, (uint16_t *)yv + i, m);
    }
  }
}

static void FN(binary)(int32_t dt, int op, const void *av, int sa,
                       const void *bv, int sb, void *yv, int64_t n) {
  if (dt == TORC_F32)
    binary_f32(op, av, sa, bv, sb, yv, n);
  else if (dt == TORC_BF16)
    binary_bf16(op, av, sa, bv, sb, yv, n);
  else
    binary_f64(op, av, sa, bv, sb, yv, n);
}

/* ---- reductions ---- */

enum { RL = 16 }; /* independent lanes: the compiler keeps them in vectors */

#define REDUCE_BODY(T)                                                         \
  do {                                                                         \
    const T *x = xv;                                                           \
    int64_t i = 0;                                                             \
    if (op == CPU_R_SUM) {                                                     \
      double l[RL] = {0};                                                      \
      for (; i + RL <= n; i += RL)                                             \
        for (int j = 0; j < RL; j++)                                           \
          l[j] += (double)x[i + j];                                            \
      double s = 0;                                                            \
      for (int j = 0; j < RL; j++)                                             \
        s += l[j];                                                             \
      for (; i < n; i++)                                                       \
        s += (double)x[i];                                                     \
      *acc += s;                                                               \
      return;                                                                  \
    }                                                                          \
    int mx = op == CPU_R_MAX;                                                  \
    T l[RL];                                                                   \
    for (int j = 0; j < RL; j++)                                               \
      l[j] = (T)*acc;                                                          \
    if (mx)                                                                    \
      for (; i + RL <= n; i += RL)                                             \
        for (int j = 0; j < RL; j++) {                                         \
          T v = x[i + j];                                                      \
          l[j] = v != v || v > l[j] ? v : l[j];                                \
        }                                                                      \
    else                                                                       \
      for (; i + RL <= n; i += RL)                                             \
        for (int j = 0; j < RL; j++) {                                         \
          T v = x[i + j];                                                      \
          l[j] = v != v || v < l[j] ? v : l[j];                                \
        }                                                                      \
    double r = *acc;                                                           \
    for (int j = 0; j < RL; j++) {                                             \
      double v = l[j];                                                         \
      r = r != r ? r : v != v || (mx ? v > r : v < r) ? v : r;                 \
    }                                                                          \
    for (; i < n; i++) {                                                       \
      double v = x[i];                                                         \
      r = r != r ? r : v != v || (mx ? v > r : v < r) ? v : r;                 \
    }                                                                          \
    *acc = r;                                                                  \
  } while (0)

static void reduce_f32(int op, const void *xv, int64_t n, double *acc) {
  REDUCE_BODY(float);
}

static void reduce_f64(int op, const void *xv, int64_t n, double *acc) {
  REDUCE_BODY(double);
}

/* bf16 through reduce_f32 a block at a time: the sum accumulates in
 * double as f32's does (the caller rounds it once). */
static void reduce_bf16(int op, const uint16_t *x, int64_t n, double *acc) {
  float b[BF_BLK];
  for (int64_t i = 0; i < n; i += BF_BLK) {
    int64_t m = n - i < BF_BLK ? n - i : BF_BLK;
    bf16_widen(x + i, b, m);
    reduce_f32(op, b, m, acc);
  }
}

static void FN(reduce)(int32_t dt, int op, const void *xv, int64_t n,
                       double *acc) {
  if (dt == TORC_F32)
    reduce_f32(op, xv, n, acc);
  else if (dt == TORC_BF16)
    reduce_bf16(op, xv, n, acc);
  else
    reduce_f64(op, xv, n, acc);
}

#define COLREDUCE_BODY(T)                                                      \
  do {                                                                         \
    const T *x = xv;                                                           \
    if (op == CPU_R_SUM)                                                       \
      for (int64_t j = 0; j < n; j++)                                          \
        acc[j] += (double)x[j];                                                \
    else if (op == CPU_R_MAX)                                                  \
      for (int64_t j = 0; j < n; j++) {                                        \
        double v = x[j], r = acc[j];                                           \
        acc[j] = r != r ? r : v != v || v > r ? v : r;                         \
      }                                                                        \
    else                                                                       \
      for (int64_t j = 0; j < n; j++) {                                        \
        double v = x[j], r = acc[j];                                           \
        acc[j] = r != r ? r : v != v || v < r ? v : r;                         \
      }                                                                        \
  } while (0)

static void colreduce_f32(int op, const void *xv, int64_t n, double *acc) {
  COLREDUCE_BODY(float);
}

static void colreduce_f64(int op, const void *xv, int64_t n, double *acc) {
  COLREDUCE_BODY(double);
}

static void colreduce_bf16(int op, const uint16_t *x, int64_t n, double *acc) {
  float b[BF_BLK];
  for (int64_t i = 0; i < n; i += BF_BLK) {
    int64_t m = n - i < BF_BLK ? n - i : BF_BLK;
    bf16_widen(x + i, b, m);
    colreduce_f32(op, b, m, acc + i);
  }
}

static void FN(colreduce)(int32_t dt, int op, const void *xv, int64_t n,
                          double *acc) {
  if (dt == TORC_F32)
    colreduce_f32(op, xv, n, acc);
  else if (dt == TORC_BF16)
    colreduce_bf16(op, xv, n, acc);
  else
    colreduce_f64(op, xv, n, acc);
}

/* ---- softmax of one contiguous row ----
 * m = max (NaN wins), s = sum e^(x - m), then e^(x - m) / s or
 * (x - m) - log s, as ref. f32 accumulates s in double. */
static void FN(softmax)(int32_t dt, int log_form, const void *xv, void *yv,
                        int64_t n) {
  if (n <= 0)
    return;
  double m = -INFINITY;
  if (n >= 4 * RL) {
    FN(reduce)(dt, CPU_R_MAX, xv, n, &m);
  } else { /* short rows (class scores): no lane set-up */
    for (int64_t i = 0; i < n && m == m; i++) {
      double v = dt == TORC_F32 ? (double)((const float *)xv)[i]
                                : ((const double *)xv)[i];
      m = v != v || v > m ? v : m;
    }
  }
  if (dt == TORC_F32) {
    const float *x = xv;
    float *y = yv;
    float mf = (float)m;
    double l[RL] = {0};
    int64_t i = 0;
    if (log_form) {
      for (; i + RL <= n; i += RL)
        for (int j = 0; j < RL; j++)
          l[j] += (double)v_expf(x[i + j] - mf);
    } else {
      for (; i + RL <= n; i += RL)
        for (int j = 0; j < RL; j++) {
          float e = v_expf(x[i + j] - mf);
          y[i + j] = e;
          l[j] += (double)e;
        }
    }
    if (i < n) { /* the tail as one padded lane block: e^-inf = 0 */
      float t[RL];
      int64_t r = n - i;
      for (int j = 0; j < RL; j++)
        t[j] = -INFINITY;
      for (int64_t j = 0; j < r; j++)
        t[j] = x[i + j] - mf;
      for (int j = 0; j < RL; j++) {
        t[j] = v_expf(t[j]);
        l[j] += (double)t[j];
      }
      if (!log_form)
        for (int64_t j = 0; j < r; j++)
          y[i + j] = t[j];
    }
    double s = 0;
    for (int j = 0; j < RL; j++)
      s += l[j];
    if (log_form) {
      float ls = (float)log(s);
      for (i = 0; i < n; i++)
        y[i] = (x[i] - mf) - ls;
    } else {
      float inv = (float)(1.0 / s);
      for (i = 0; i < n; i++)
        y[i] *= inv;
    }
  } else {
    const double *x = xv;
    double *y = yv;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
      double e = exp(x[i] - m);
      if (!log_form)
        y[i] = e;
      s += e;
    }
    if (log_form) {
      double ls = log(s);
      for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] - m) - ls;
    } else {
      for (int64_t i = 0; i < n; i++)
        y[i] /= s;
    }
  }
}

/* ---- recurrent cells (torc_lstm_cell, torc_gru_cell) ----
 * One loop over a row's H columns per body, so that the f32 forms
 * (v_sigmoidf, v_tanhf) vectorise across columns; equations as ref's
 * kernels_rnn_cell.c, computed in the dtype. */

#define CELL_BODIES(T, SIG, TANH)                                              \
  static void lstm_row_##T(const T *restrict gt, const T *restrict c,         \
                           T *restrict h2, T *restrict c2, T *restrict act,   \
                           T *restrict tc, int64_t H) {                       \
    for (int64_t j = 0; j < H; j++) {                                          \
      T i = SIG(gt[j]), f = SIG(gt[H + j]);                                    \
      T g = TANH(gt[2 * H + j]), o = SIG(gt[3 * H + j]);                       \
      T cn = f * c[j] + i * g, t = TANH(cn);                                   \
      act[j] = i;                                                              \
      act[H + j] = f;                                                          \
      act[2 * H + j] = g;                                                      \
      act[3 * H + j] = o;                                                      \
      c2[j] = cn;                                                              \
      tc[j] = t;                                                               \
      h2[j] = o * t;                                                           \
    }                                                                          \
  }                                                                            \
  static void lstm_bw_row_##T(const T *restrict gh, const T *restrict gc,     \
                              const T *restrict act, const T *restrict c,     \
                              const T *restrict tc, T *restrict gg,           \
                              T *restrict gcp, int64_t H) {                   \
    for (int64_t j = 0; j < H; j++) {                                          \
      T i = act[j], f = act[H + j], g = act[2 * H + j], o = act[3 * H + j];   \
      T t = tc[j], dh = gh[j];                                                 \
      T dc = gc[j] + dh * o * ((T)1 - t * t);                                  \
      gg[j] = dc * g * i * ((T)1 - i);                                         \
      gg[H + j] = dc * c[j] * f * ((T)1 - f);                                  \
      gg[2 * H + j] = dc * i * ((T)1 - g * g);                                 \
      gg[3 * H + j] = dh * t * o * ((T)1 - o);                                 \
      gcp[j] = dc * f;                                                         \
    }                                                                          \
  }                                                                            \
  static void gru_row_##T(const T *restrict xg, const T *restrict hg,         \
                          const T *restrict h, T *restrict h2,                \
                          T *restrict act, int64_t H) {                       \
    for (int64_t j = 0; j < H; j++) {                                          \
      T r = SIG(xg[j] + hg[j]), z = SIG(xg[H + j] + hg[H + j]);                \
      T n = TANH(xg[2 * H + j] + r * hg[2 * H + j]);                           \
      act[j] = r;                                                              \
      act[H + j] = z;                                                          \
      act[2 * H + j] = n;                                                      \
      h2[j] = ((T)1 - z) * n + z * h[j];                                       \
    }                                                                          \
  }                                                                            \
  static void gru_bw_row_##T(const T *restrict gh, const T *restrict act,     \
                             const T *restrict hg, const T *restrict h,       \
                             T *restrict gx, T *restrict ghg,                 \
                             T *restrict ghp, int64_t H) {                    \
    for (int64_t j = 0; j < H; j++) {                                          \
      T r = act[j], z = act[H + j], n = act[2 * H + j], d = gh[j];             \
      T dn = d * ((T)1 - z) * ((T)1 - n * n);                                  \
      T dz = d * (h[j] - n) * z * ((T)1 - z);                                  \
      T dr = dn * hg[2 * H + j] * r * ((T)1 - r);                              \
      gx[j] = dr;                                                              \
      gx[H + j] = dz;                                                          \
      gx[2 * H + j] = dn;                                                      \
      ghg[j] = dr;                                                             \
      ghg[H + j] = dz;                                                         \
      ghg[2 * H + j] = dn * r;                                                 \
      ghp[j] = d * z;                                                          \
    }                                                                          \
  }                                                                            \
  static void cell_rows_##T(int op, void *const *p, int64_t r0, int64_t r1,   \
                            int64_t H) {                                       \
    for (int64_t r = r0; r < r1; r++) {                                        \
      int64_t o1 = r * H, o3 = 3 * r * H, o4 = 4 * r * H;                      \
      switch (op) {                                                            \
      case CPU_CELL_LSTM:                                                      \
        lstm_row_##T((const T *)p[0] + o4, (const T *)p[1] + o1,               \
                     (T *)p[2] + o1, (T *)p[3] + o1, (T *)p[4] + o4,           \
                     (T *)p[5] + o1, H);                                       \
        break;                                                                 \
      case CPU_CELL_LSTM_BW:                                                   \
        lstm_bw_row_##T((const T *)p[0] + o1, (const T *)p[1] + o1,            \
                        (const T *)p[2] + o4, (const T *)p[3] + o1,            \
                        (const T *)p[4] + o1, (T *)p[5] + o4,                  \
                        (T *)p[6] + o1, H);                                    \
        break;                                                                 \
      case CPU_CELL_GRU:                                                       \
        gru_row_##T((const T *)p[0] + o3, (const T *)p[1] + o3,                \
                    (const T *)p[2] + o1, (T *)p[3] + o1, (T *)p[4] + o3, H);  \
        break;                                                                 \
      default:                                                                 \
        gru_bw_row_##T((const T *)p[0] + o1, (const T *)p[1] + o3,             \
                       (const T *)p[2] + o3, (const T *)p[3] + o1,             \
                       (T *)p[4] + o3, (T *)p[5] + o3, (T *)p[6] + o1, H);     \
        break;                                                                 \
      }                                                                        \
    }                                                                          \
  }

CELL_BODIES(float, v_sigmoidf, v_tanhf)
CELL_BODIES(double, s_sigmoid, tanh)

static void FN(cell)(int32_t dt, int op, void *const *p, int64_t r0,
                     int64_t r1, int64_t H) {
  if (dt == TORC_F32)
    cell_rows_float(op, p, r0, r1, H);
  else
    cell_rows_double(op, p, r0, r1, H);
}

#include "nn_kern.h"
#include "bn_kern.h"
#include "mp_kern.h"

const cpu_isa CPU_CAT(torc_cpu__isa_, CPU_ISA_NAME) = {
    .name = CPU_ISA_STRING,
    .unary = FN(unary),
    .binary = FN(binary),
    .reduce = FN(reduce),
    .colreduce = FN(colreduce),
    .softmax = FN(softmax),
    .cell = FN(cell),
    .philox_keep = FN(philox_keep),
    .drop_bf16 = FN(drop_bf16),
    .gelu_bw = FN(gelu_bw),
    .exp_sum = FN(exp_sum),
    .ln_row = FN(ln_row),
    .ln_row_bw = FN(ln_row_bw),
    .bn_stat = FN(bn_stat),
    .bn_apply = FN(bn_apply),
    .bn_bw_sums = FN(bn_bw_sums),
    .bn_bw_apply = FN(bn_bw_apply),
    .mp2_row_bf16 = FN(mp2_row_bf16),
};
