/* plugins/cuda/ew_body.h — the per-element bodies of the cuda plugin's
 * elementwise kernels (ew.cu, ew2.cu) and the host-side helpers they
 * share: one inline function per op and compute type, the dtypes each op
 * is registered for, the conversions of copy and fill_, the strided walk
 * and the vector path's eligibility. Everything here is valid C and C++
 * and callable from device code (under nvcc) and from host C, so that
 * tests/test_cuda_bodies.c and tests/test_cuda_ew2_bodies.c check it
 * against the ref kernels on a machine without a GPU.
 *
 * Compute types, as ref's numeric policy: f32, f16 and bf16 load to float
 * and compute in float (the f16/bf16 kernels round the result back to
 * nearest even); f64 computes in double; i32, i64, u8 and bool load to
 * int64 and compute in int64 with two's-complement wraparound, the store
 * keeping the low bits of the width (bool stores v != 0).
 */
#ifndef TORC_CUDA_EW_BODY_H
#define TORC_CUDA_EW_BODY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "torc/dtype.h"

#ifdef __CUDACC__
#define TORC_CUDA_HD __host__ __device__
#else
#define TORC_CUDA_HD
#endif

/* The scalar params of an op (torc_scalar_params) as the kernel holds
 * them: for the float bodies a and b rounded to f32, for the double ones
 * as given, for the integer ones ia and ib; the flags as given. */
typedef struct torc_cuda_sp {
  float a, b;
  uint32_t flags;
} torc_cuda_sp;
typedef struct torc_cuda_spd {
  double a, b;
  uint32_t flags;
} torc_cuda_spd;
typedef struct torc_cuda_spi {
  int64_t ia, ib;
  uint32_t flags;
} torc_cuda_spi;

/* ---- the ops and their dtypes ----
 * X(name, set): set is the dtypes the op is registered for, the same as
 * its ref kernel's (torc/ops.def): FLOATS (f32 f64 f16 bf16), NUMERIC
 * (FLOATS and i32 i64 u8) or ALL (NUMERIC and bool).
 * UNARY f(x), UNARY_P f(x, params), BINARY f(x, y), BINARY_P f(x, y,
 * params); CMP f(x, y) and LNOT f(x) write bool. */
#define TORC_CUDA_UNARY_OPS(X)                                                 \
  X(neg, NUMERIC) X(abs, NUMERIC) X(sign, NUMERIC) X(square, NUMERIC)          \
  X(relu, NUMERIC) X(exp, FLOATS) X(log, FLOATS) X(sqrt, FLOATS)               \
  X(sin, FLOATS) X(cos, FLOATS) X(tanh, FLOATS) X(sigmoid, FLOATS)             \
  X(reciprocal, FLOATS) X(log1p, FLOATS) X(rsqrt, FLOATS) X(silu, FLOATS)      \
  X(hardswish, FLOATS) X(hardsigmoid, FLOATS) X(softsign, FLOATS)             \
  X(selu, FLOATS) X(mish, FLOATS) X(erf, FLOATS)
#define TORC_CUDA_UNARY_P_OPS(X)                                               \
  X(leaky_relu, FLOATS) X(elu, FLOATS) X(gelu, FLOATS) X(softplus, FLOATS)     \
  X(clamp, NUMERIC)
#define TORC_CUDA_BINARY_OPS(X)                                                \
  X(add, ALL) X(sub, NUMERIC) X(mul, ALL) X(div, FLOATS) X(pow, NUMERIC)       \
  X(maximum, ALL) X(minimum, ALL) X(relu_backward, FLOATS)
#define TORC_CUDA_BINARY_P_OPS(X) X(gelu_backward, FLOATS)
#define TORC_CUDA_CMP_OPS(X)                                                   \
  X(eq, ALL) X(ne, ALL) X(lt, ALL) X(le, ALL) X(gt, ALL) X(ge, ALL)            \
  X(logical_and, ALL) X(logical_or, ALL)
#define TORC_CUDA_LNOT_OPS(X) X(logical_not, ALL)
/* The ops with kernels of their own (ew2.cu): copy (any dtype to any, one
 * TORC_DTYPE_ANY registration, as ref's), fill_ and where (ALL). */
#define TORC_CUDA_OWN_OPS(X) X(copy, ANY) X(fill_, ALL) X(where, ALL)

/* The dtype sets as masks of 1 << dtype; ANY is its own bit. */
#define TORC_CUDA_DT_FLOATS                                                    \
  ((1u << TORC_F32) | (1u << TORC_F64) | (1u << TORC_F16) | (1u << TORC_BF16))
#define TORC_CUDA_DT_NUMERIC                                                   \
  (TORC_CUDA_DT_FLOATS | (1u << TORC_I32) | (1u << TORC_I64) | (1u << TORC_U8))
#define TORC_CUDA_DT_ALL (TORC_CUDA_DT_NUMERIC | (1u << TORC_BOOL))
#define TORC_CUDA_DT_ANY (1u << 31)

/* The mask of the dtypes op is registered for; 0 for an op this family
 * does not serve. */
static inline uint32_t torc_cuda_ew_dtypes(const char *op) {
#define TORC_CUDA_DT_ROW(name, set)                                            \
  if (strcmp(op, #name) == 0)                                                  \
    return TORC_CUDA_DT_##set;
  TORC_CUDA_UNARY_OPS(TORC_CUDA_DT_ROW)
  TORC_CUDA_UNARY_P_OPS(TORC_CUDA_DT_ROW)
  TORC_CUDA_BINARY_OPS(TORC_CUDA_DT_ROW)
  TORC_CUDA_BINARY_P_OPS(TORC_CUDA_DT_ROW)
  TORC_CUDA_CMP_OPS(TORC_CUDA_DT_ROW)
  TORC_CUDA_LNOT_OPS(TORC_CUDA_DT_ROW)
  TORC_CUDA_OWN_OPS(TORC_CUDA_DT_ROW)
#undef TORC_CUDA_DT_ROW
  return 0;
}

/* x != x is NaN's test in C and in device code alike (no fast-math). */
#define TORC_CUDA_ISNAN(x) ((x) != (x))

#define TORC_CUDA_SQRT_2_OVER_PI 0.797884560802865355879892
#define TORC_CUDA_SQRT1_2 0.707106781186547524400844
#define TORC_CUDA_INV_SQRT_2PI 0.398942280401432677939946

/* The math function of a compute type: expf for float, exp for double. */
#define TORC_CUDA_MF(fn) fn##f
#define TORC_CUDA_MD(fn) fn

/* The floating bodies, written once for a type T: P is the functions'
 * prefix, M the math-function macro, SP the params struct. Instantiated
 * below for float (torc_cuda_b_NAME) and double (torc_cuda_bd_NAME).
 *
 * Unary: NaN propagates through neg, abs and relu (relu(NaN) = NaN, as
 * ref); sign is (0 < x) - (x < 0): sign(NaN) = 0, sign(-0) = 0. sigmoid is
 * the stable logistic (e^-x never overflows for x >= 0, e^x never for
 * x < 0: ref's formula). rsqrt is 1 / sqrt(x), not the device's rsqrtf
 * (2 ulp): 1 ulp from ref's. hardswish is x * min(max(x + 3, 0), 6) / 6
 * with NaN propagating; where the clamp is 6 the result is x itself, as
 * ref's double gives it (in f32, x * 6 overflows above FLT_MAX / 6).
 * hardsigmoid is min(max(x + 3, 0), 6) / 6; selu PyTorch's scale and
 * alpha over x or expm1(x); mish x tanh(log1p(e^x)), PyTorch's formula.
 *
 * With params: gelu's flags bit 0 picks the tanh form, else the erf form;
 * softplus is log(1 + e^(beta x)) / beta, linear above the threshold
 * (a = beta, b = threshold); clamp is min(max(x, a), b) for the bounds set
 * in flags (bit 0 a, bit 1 b), NaN propagating from x and from a bound.
 *
 * Binary: maximum and minimum propagate NaN from either side
 * (torch.maximum), unlike fmax; relu_backward's x is the gradient g, y
 * relu's output: 0 where y <= 0, else g (a NaN output passes g, as
 * PyTorch's threshold_backward); gelu_backward is g * gelu'(x), the erf
 * form Phi(x) + x phi(x), the tanh form PyTorch's. The comparisons are
 * IEEE's (NaN is unequal to everything) and write 0 or 1; logical_and,
 * logical_or and logical_not take nonzero as true (NaN too). */
#define TORC_CUDA_FLOAT_BODIES(P, T, M, SP)                                    \
  TORC_CUDA_HD static inline T P##_neg(T x) { return -x; }                     \
  TORC_CUDA_HD static inline T P##_abs(T x) { return M(fabs)(x); }             \
  TORC_CUDA_HD static inline T P##_sign(T x) {                                 \
    return (T)((0 < x) - (x < 0));                                             \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_square(T x) { return x * x; }               \
  TORC_CUDA_HD static inline T P##_relu(T x) {                                 \
    return TORC_CUDA_ISNAN(x) ? x : x > 0 ? x : (T)0;                          \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_exp(T x) { return M(exp)(x); }              \
  TORC_CUDA_HD static inline T P##_log(T x) { return M(log)(x); }              \
  TORC_CUDA_HD static inline T P##_sqrt(T x) { return M(sqrt)(x); }            \
  TORC_CUDA_HD static inline T P##_sin(T x) { return M(sin)(x); }              \
  TORC_CUDA_HD static inline T P##_cos(T x) { return M(cos)(x); }              \
  TORC_CUDA_HD static inline T P##_tanh(T x) { return M(tanh)(x); }            \
  TORC_CUDA_HD static inline T P##_sigmoid(T x) {                              \
    if (x >= 0)                                                                \
      return (T)1 / ((T)1 + M(exp)(-x));                                       \
    T e = M(exp)(x);                                                           \
    return e / ((T)1 + e);                                                     \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_reciprocal(T x) { return (T)1 / x; }        \
  TORC_CUDA_HD static inline T P##_log1p(T x) { return M(log1p)(x); }          \
  TORC_CUDA_HD static inline T P##_rsqrt(T x) { return (T)1 / M(sqrt)(x); }    \
  TORC_CUDA_HD static inline T P##_silu(T x) { return x * P##_sigmoid(x); }    \
  TORC_CUDA_HD static inline T P##_hardswish(T x) {                            \
    T t = x + (T)3;                                                            \
    t = t < 0 ? (T)0 : t > 6 ? (T)6 : t;                                       \
    return t == 6 ? x : x * t / (T)6;                                          \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_hardsigmoid(T x) {                          \
    T t = x + (T)3;                                                            \
    t = t < 0 ? (T)0 : t > 6 ? (T)6 : t;                                       \
    return t / (T)6;                                                           \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_erf(T x) { return M(erf)(x); }              \
  TORC_CUDA_HD static inline T P##_softsign(T x) {                             \
    return x / ((T)1 + M(fabs)(x));                                            \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_selu(T x) {                                 \
    return (T)1.0507009873554804934193349852946 *                             \
           (x > 0 ? x : (T)1.6732632423543772848170429916717 * M(expm1)(x));  \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_mish(T x) {                                 \
    return x * M(tanh)(M(log1p)(M(exp)(x)));                                   \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_leaky_relu(T x, SP p) {                     \
    return x > 0 ? x : x * p.a;                                                \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_elu(T x, SP p) {                            \
    return x > 0 ? x : p.a * M(expm1)(x);                                      \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_gelu(T x, SP p) {                           \
    if (p.flags & 1u) {                                                        \
      T u = (T)TORC_CUDA_SQRT_2_OVER_PI * (x + (T)0.044715 * x * x * x);       \
      return (T)0.5 * x * ((T)1 + M(tanh)(u));                                 \
    }                                                                          \
    return (T)0.5 * x * ((T)1 + M(erf)(x * (T)TORC_CUDA_SQRT1_2));             \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_softplus(T x, SP p) {                       \
    T bx = x * p.a;                                                            \
    return bx > p.b ? x : M(log1p)(M(exp)(bx)) / p.a;                          \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_clamp(T x, SP p) {                          \
    if (TORC_CUDA_ISNAN(x))                                                    \
      return x;                                                                \
    if (p.flags & 1u)                                                          \
      x = TORC_CUDA_ISNAN(p.a) ? p.a : x < p.a ? p.a : x;                      \
    if (p.flags & 2u)                                                          \
      x = TORC_CUDA_ISNAN(p.b) ? p.b : x > p.b ? p.b : x;                      \
    return x;                                                                  \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_add(T x, T y) { return x + y; }             \
  TORC_CUDA_HD static inline T P##_sub(T x, T y) { return x - y; }             \
  TORC_CUDA_HD static inline T P##_mul(T x, T y) { return x * y; }             \
  TORC_CUDA_HD static inline T P##_div(T x, T y) { return x / y; }             \
  TORC_CUDA_HD static inline T P##_pow(T x, T y) { return M(pow)(x, y); }      \
  TORC_CUDA_HD static inline T P##_maximum(T x, T y) {                         \
    return TORC_CUDA_ISNAN(x) || TORC_CUDA_ISNAN(y) ? x + y : x > y ? x : y;   \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_minimum(T x, T y) {                         \
    return TORC_CUDA_ISNAN(x) || TORC_CUDA_ISNAN(y) ? x + y : x < y ? x : y;   \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_relu_backward(T g, T y) {                   \
    return y <= 0 ? (T)0 : g;                                                  \
  }                                                                            \
  TORC_CUDA_HD static inline T P##_gelu_backward(T g, T x, SP p) {             \
    T d;                                                                       \
    if (p.flags & 1u) {                                                        \
      const T k = (T)TORC_CUDA_SQRT_2_OVER_PI, c = (T)0.044715;                \
      T u = k * (x + c * x * x * x), t = M(tanh)(u), s = (T)1 - t * t;         \
      T ep = (T)1 + t;                                                         \
      /* In float tanh(u) rounds to -1 below u = -9 where 1 + tanh(u) is       \
       * still 2 e^(2u) (relative error e^(2u), under 2^-25): keep that        \
       * and s = (1 - t)(1 + t) = 2 (1 + t), as ref's double has them. */      \
      if (sizeof(T) == sizeof(float) && ep == 0 && u < 0) {                    \
        ep = (T)2 * M(exp)((T)2 * u);                                          \
        s = (T)2 * ep;                                                         \
      }                                                                        \
      /* s is 0 where tanh saturates; for a finite x (x - x is 0) the          \
       * other factor may then be inf in f32 only (x^2 overflows): 0 * inf     \
       * must not make a NaN that ref's double does not. In double the         \
       * formula is ref's, NaN included. */                                    \
      d = (T)0.5 * ep +                                                        \
          (sizeof(T) == sizeof(float) && s == 0 && x - x == 0                  \
               ? (T)0                                                          \
               : (T)0.5 * x * s * k * ((T)1 + (T)3 * c * x * x));              \
    } else {                                                                   \
      T cdf = (T)0.5 * ((T)1 + M(erf)(x * (T)TORC_CUDA_SQRT1_2));              \
      T pdf = M(exp)((T)-0.5 * x * x) * (T)TORC_CUDA_INV_SQRT_2PI;             \
      d = cdf + x * pdf;                                                       \
    }                                                                          \
    return g * d;                                                              \
  }                                                                            \
  TORC_CUDA_HD static inline int64_t P##_eq(T x, T y) { return x == y; }       \
  TORC_CUDA_HD static inline int64_t P##_ne(T x, T y) { return x != y; }       \
  TORC_CUDA_HD static inline int64_t P##_lt(T x, T y) { return x < y; }        \
  TORC_CUDA_HD static inline int64_t P##_le(T x, T y) { return x <= y; }       \
  TORC_CUDA_HD static inline int64_t P##_gt(T x, T y) { return x > y; }        \
  TORC_CUDA_HD static inline int64_t P##_ge(T x, T y) { return x >= y; }       \
  TORC_CUDA_HD static inline int64_t P##_logical_and(T x, T y) {               \
    return x != 0 && y != 0;                                                   \
  }                                                                            \
  TORC_CUDA_HD static inline int64_t P##_logical_or(T x, T y) {                \
    return x != 0 || y != 0;                                                   \
  }                                                                            \
  TORC_CUDA_HD static inline int64_t P##_logical_not(T x) { return x == 0; }

TORC_CUDA_FLOAT_BODIES(torc_cuda_b, float, TORC_CUDA_MF, torc_cuda_sp)
TORC_CUDA_FLOAT_BODIES(torc_cuda_bd, double, TORC_CUDA_MD, torc_cuda_spd)

/* ---- the integer bodies (i32 i64 u8 bool, loaded as int64) ----
 * Exact in int64, wrapping (done in uint64: no signed-overflow UB); the
 * store keeps the low bits, which equals wrapping in i32 or u8 (mod 2^k
 * is a ring homomorphism). neg and abs of the most negative value give it
 * back; u8 loads as 0..255, so neg stores 256 - x. bool operands are 0/1
 * and the bool store is v != 0: add is or, mul and, maximum or, minimum
 * and (PyTorch's bool semantics). */

/* The int64 of a uint64's bits (two's complement). */
TORC_CUDA_HD static inline int64_t torc_cuda_wrap(uint64_t u) {
  return u <= (uint64_t)INT64_MAX ? (int64_t)u
                                  : -(int64_t)(~u) - 1; /* u - 2^64 */
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_neg(int64_t x) {
  return torc_cuda_wrap(0 - (uint64_t)x);
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_abs(int64_t x) {
  return x < 0 ? torc_cuda_wrap(0 - (uint64_t)x) : x;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_sign(int64_t x) {
  return (0 < x) - (x < 0);
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_square(int64_t x) {
  return torc_cuda_wrap((uint64_t)x * (uint64_t)x);
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_relu(int64_t x) {
  return x > 0 ? x : 0;
}
/* The bounds set in flags, in this order: ia (bit 0), then ib (bit 1). */
TORC_CUDA_HD static inline int64_t torc_cuda_bi_clamp(int64_t x,
                                                      torc_cuda_spi p) {
  if ((p.flags & 1u) && x < p.ia)
    x = p.ia;
  if ((p.flags & 2u) && x > p.ib)
    x = p.ib;
  return x;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_add(int64_t x, int64_t y) {
  return torc_cuda_wrap((uint64_t)x + (uint64_t)y);
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_sub(int64_t x, int64_t y) {
  return torc_cuda_wrap((uint64_t)x - (uint64_t)y);
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_mul(int64_t x, int64_t y) {
  return torc_cuda_wrap((uint64_t)x * (uint64_t)y);
}
/* PyTorch's integer power (ATen powi): square and multiply, wrapping; a
 * negative exponent gives 1 for base 1, +-1 for base -1 and 0 otherwise. */
TORC_CUDA_HD static inline int64_t torc_cuda_bi_pow(int64_t x, int64_t y) {
  if (y < 0)
    return x == 1 ? 1 : x == -1 ? (y % 2 != 0 ? -1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)x;
  while (y > 0) {
    if (y & 1)
      r *= b;
    y >>= 1;
    if (y > 0)
      b *= b;
  }
  return torc_cuda_wrap(r);
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_maximum(int64_t x,
                                                        int64_t y) {
  return x > y ? x : y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_minimum(int64_t x,
                                                        int64_t y) {
  return x < y ? x : y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_eq(int64_t x, int64_t y) {
  return x == y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_ne(int64_t x, int64_t y) {
  return x != y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_lt(int64_t x, int64_t y) {
  return x < y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_le(int64_t x, int64_t y) {
  return x <= y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_gt(int64_t x, int64_t y) {
  return x > y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_ge(int64_t x, int64_t y) {
  return x >= y;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_logical_and(int64_t x,
                                                            int64_t y) {
  return x != 0 && y != 0;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_logical_or(int64_t x,
                                                           int64_t y) {
  return x != 0 || y != 0;
}
TORC_CUDA_HD static inline int64_t torc_cuda_bi_logical_not(int64_t x) {
  return x == 0;
}

/* ---- conversions (copy, and the integer stores) ---- */

/* The low bits of v as each integer dtype stores them, and bool's v != 0. */
TORC_CUDA_HD static inline int32_t torc_cuda_to_i32(int64_t v) {
  uint32_t u = (uint32_t)(uint64_t)v;
  return u <= (uint32_t)INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1;
}
TORC_CUDA_HD static inline uint8_t torc_cuda_to_u8(int64_t v) {
  return (uint8_t)(uint64_t)v;
}
TORC_CUDA_HD static inline uint8_t torc_cuda_to_bool(int64_t v) {
  return v != 0;
}

/* A floating value to int64, as ref's copy: truncation toward zero; NaN
 * gives 0 and values beyond int64 saturate (a plain cast leaves both
 * undefined). The integer dtype then keeps the low bits, so -1.0 to u8 is
 * 255. */
TORC_CUDA_HD static inline int64_t torc_cuda_f2i(double v) {
  if (v != v)
    return 0;
  if (v >= 9223372036854775808.0)
    return INT64_MAX;
  if (v < -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

/* An int64 to the nearest float (ties to even) in one rounding, as ref's
 * copy: on the device the hardware conversion, on the host the magnitude
 * rounded to 24 significant bits in integer arithmetic first (a plain
 * (float)v through double would round twice under valgrind). */
TORC_CUDA_HD static inline float torc_cuda_i2f(int64_t v) {
#ifdef __CUDA_ARCH__
  return __ll2float_rn(v);
#else
  return torc_i64_to_f32(v);
#endif
}

/* fill_'s value as the bits dtype dt stores (in the low bytes): floating
 * dtypes round `value` once to f32 and from there to f16/bf16 (f64 keeps
 * it), integers keep the low bits of `ivalue`, bool is ivalue != 0 — what
 * ref's fill_ writes. Host only (the kernel fills with the bits). */
static inline uint64_t torc_cuda_fill_bits(int dt, double value,
                                           int64_t ivalue) {
  switch (dt) {
  case TORC_F32: {
    float f = (float)value;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
  }
  case TORC_F64: {
    uint64_t u;
    memcpy(&u, &value, sizeof u);
    return u;
  }
  case TORC_F16: return torc_f32_to_f16((float)value);
  case TORC_BF16: return torc_f32_to_bf16((float)value);
  case TORC_I32: return (uint32_t)(uint64_t)ivalue;
  case TORC_I64: return (uint64_t)ivalue;
  case TORC_U8: return (uint8_t)(uint64_t)ivalue;
  case TORC_BOOL: return ivalue != 0;
  default: return 0;
  }
}

/* ---- the strided walk ----
 * A call's operands (inputs, then the output) over the output's shape,
 * each with its strides in elements; element i is row-major over the
 * shape. torc_cuda_walk_init drops the dims of size 1 and merges each
 * pair of neighbouring dims that every operand walks as one (outer stride
 * = inner stride * inner size), so that a contiguous call becomes one dim
 * of stride 1 and a broadcast one its fewest dims. */
#define TORC_CUDA_WALK_OPS 4
#define TORC_CUDA_WALK_DIMS 8

typedef struct torc_cuda_walk {
  int32_t ndim, n_ops;
  int64_t shape[TORC_CUDA_WALK_DIMS];
  int64_t st[TORC_CUDA_WALK_OPS][TORC_CUDA_WALK_DIMS];
} torc_cuda_walk;

/* Fills w for n_ops operands (at most TORC_CUDA_WALK_OPS) over shape
 * (ndim <= TORC_CUDA_WALK_DIMS), strides[k] operand k's, collapsing as
 * above. Host only. */
static inline void torc_cuda_walk_init(torc_cuda_walk *w, int ndim,
                                       const int64_t *shape, int n_ops,
                                       const int64_t *const *strides) {
  memset(w, 0, sizeof *w);
  w->n_ops = n_ops;
  int nd = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1)
      continue;
    int merge = nd > 0;
    for (int k = 0; merge && k < n_ops; k++)
      merge = w->st[k][nd - 1] == strides[k][d] * shape[d];
    if (merge) {
      w->shape[nd - 1] *= shape[d];
      for (int k = 0; k < n_ops; k++)
        w->st[k][nd - 1] = strides[k][d];
      continue;
    }
    w->shape[nd] = shape[d];
    for (int k = 0; k < n_ops; k++)
      w->st[k][nd] = strides[k][d];
    nd++;
  }
  w->ndim = nd;
}

/* 1 when every operand of w is contiguous: at most one dim, stride 1. */
static inline int torc_cuda_walk_contiguous(const torc_cuda_walk *w) {
  if (w->ndim == 0)
    return 1;
  if (w->ndim > 1)
    return 0;
  for (int k = 0; k < w->n_ops; k++)
    if (w->st[k][0] != 1)
      return 0;
  return 1;
}

/* The offsets of element i in the first n operands of w, into
 * off[0..n) (n is a constant at each call site, so that the compiler
 * keeps off in registers). */
TORC_CUDA_HD static inline void torc_cuda_walk_at(const torc_cuda_walk *w,
                                                  int n, int64_t i,
                                                  int64_t *off) {
  for (int k = 0; k < n; k++)
    off[k] = 0;
  for (int d = w->ndim - 1; d >= 0; d--) {
    int64_t idx = i % w->shape[d];
    i /= w->shape[d];
    for (int k = 0; k < n; k++)
      off[k] += idx * w->st[k][d];
  }
}

/* The same for a walk of fewer than 2^31 elements: the index arithmetic
 * (every size is below 2^31 too) in 32 bits, the offsets in 64. */
TORC_CUDA_HD static inline void torc_cuda_walk_at32(const torc_cuda_walk *w,
                                                    int n, uint32_t i,
                                                    int64_t *off) {
  for (int k = 0; k < n; k++)
    off[k] = 0;
  for (int d = w->ndim - 1; d >= 0; d--) {
    uint32_t s = (uint32_t)w->shape[d];
    uint32_t idx = i % s;
    i /= s;
    for (int k = 0; k < n; k++)
      off[k] += (int64_t)idx * w->st[k][d];
  }
}

/* ---- the vector path ----
 * A contiguous call moves TORC_CUDA_VEC_BYTES of its widest operand per
 * thread and step (float4 for f32, 8 halves for f16/bf16), then a scalar
 * tail. */
#define TORC_CUDA_VEC_BYTES 16
/* Below this many elements the scalar loop is as fast (one partial wave). */
#define TORC_CUDA_VEC_MIN_N 1024

/* The elements per vector step for a widest element of `widest` bytes. */
static inline int torc_cuda_vec_width(size_t widest) {
  return widest == 0 || widest > TORC_CUDA_VEC_BYTES
             ? 1
             : (int)(TORC_CUDA_VEC_BYTES / widest);
}

/* 1 when a contiguous call of n elements takes the vector path of width
 * `width`: width > 1, n >= TORC_CUDA_VEC_MIN_N, and each operand's first
 * element, at byte address addr[k] with elements of esize[k] bytes,
 * aligned to width * esize[k] bytes. */
static inline int torc_cuda_vec_ok(int64_t n, int width, int n_ops,
                                   const uintptr_t *addr,
                                   const size_t *esize) {
  if (width <= 1 || n < TORC_CUDA_VEC_MIN_N)
    return 0;
  for (int k = 0; k < n_ops; k++)
    if (addr[k] % ((uintptr_t)width * esize[k]) != 0)
      return 0;
  return 1;
}

#endif /* TORC_CUDA_EW_BODY_H */
