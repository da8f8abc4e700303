/* plugins/cuda/ew_body.h — the per-element bodies of the cuda plugin's f32
 * elementwise kernels, one inline function per op, callable from device
 * code (under nvcc) and from host C, so that tests/test_cuda_bodies.c checks
 * every body against the ref kernels on a machine without a GPU.
 */
#ifndef TORC_CUDA_EW_BODY_H
#define TORC_CUDA_EW_BODY_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TORC_CUDA_HD __host__ __device__
#else
#define TORC_CUDA_HD
#endif

/* The scalar params of an op (torc_scalar_params) as the kernel holds
 * them: a and b rounded to f32, the flags as given. */
typedef struct torc_cuda_sp {
  float a, b;
  uint32_t flags;
} torc_cuda_sp;

/* The ops, for ew.cu's kernels and registrations and for the test:
 * UNARY f(x), UNARY_P f(x, params), BINARY f(x, y), BINARY_P f(x, y,
 * params). */
#define TORC_CUDA_UNARY_OPS(X)                                                 \
  X(neg) X(abs) X(sign) X(square) X(relu) X(exp) X(log) X(sqrt) X(sin)         \
  X(cos) X(tanh) X(sigmoid) X(reciprocal) X(log1p) X(rsqrt) X(silu)            \
  X(hardswish)
#define TORC_CUDA_UNARY_P_OPS(X)                                               \
  X(leaky_relu) X(elu) X(gelu) X(softplus) X(clamp)
#define TORC_CUDA_BINARY_OPS(X)                                                \
  X(add) X(sub) X(mul) X(div) X(pow) X(maximum) X(minimum) X(relu_backward)
#define TORC_CUDA_BINARY_P_OPS(X) X(gelu_backward)

/* x != x is NaN's test in C and in device code alike (no fast-math). */
#define TORC_CUDA_ISNAN(x) ((x) != (x))

#define TORC_CUDA_SQRT_2_OVER_PI 0.797884560802865355879892f
#define TORC_CUDA_SQRT1_2 0.707106781186547524400844f
#define TORC_CUDA_INV_SQRT_2PI 0.398942280401432677939946f

/* ---- unary ---- */

/* NaN propagates through neg, abs and relu (relu(NaN) = NaN, as ref);
 * sign is (0 < x) - (x < 0): sign(NaN) = 0, sign(-0) = 0. */
TORC_CUDA_HD static inline float torc_cuda_b_neg(float x) { return -x; }
TORC_CUDA_HD static inline float torc_cuda_b_abs(float x) { return fabsf(x); }
TORC_CUDA_HD static inline float torc_cuda_b_sign(float x) {
  return (float)((0.0f < x) - (x < 0.0f));
}
TORC_CUDA_HD static inline float torc_cuda_b_square(float x) { return x * x; }
TORC_CUDA_HD static inline float torc_cuda_b_relu(float x) {
  return TORC_CUDA_ISNAN(x) ? x : x > 0.0f ? x : 0.0f;
}
TORC_CUDA_HD static inline float torc_cuda_b_exp(float x) { return expf(x); }
TORC_CUDA_HD static inline float torc_cuda_b_log(float x) { return logf(x); }
TORC_CUDA_HD static inline float torc_cuda_b_sqrt(float x) { return sqrtf(x); }
TORC_CUDA_HD static inline float torc_cuda_b_sin(float x) { return sinf(x); }
TORC_CUDA_HD static inline float torc_cuda_b_cos(float x) { return cosf(x); }
TORC_CUDA_HD static inline float torc_cuda_b_tanh(float x) { return tanhf(x); }
/* The stable logistic: e^-x never overflows for x >= 0, e^x never for
 * x < 0 (ref's formula). */
TORC_CUDA_HD static inline float torc_cuda_b_sigmoid(float x) {
  if (x >= 0.0f)
    return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}
TORC_CUDA_HD static inline float torc_cuda_b_reciprocal(float x) {
  return 1.0f / x;
}
TORC_CUDA_HD static inline float torc_cuda_b_log1p(float x) {
  return log1pf(x);
}
/* 1 / sqrt(x), not rsqrtf (2 ulp on the device): 1 ulp from ref's. */
TORC_CUDA_HD static inline float torc_cuda_b_rsqrt(float x) {
  return 1.0f / sqrtf(x);
}
TORC_CUDA_HD static inline float torc_cuda_b_silu(float x) {
  return x * torc_cuda_b_sigmoid(x);
}
/* x * min(max(x + 3, 0), 6) / 6; NaN propagates. Where the clamp is 6
 * the result is x itself, as ref's double gives it (in f32, x * 6
 * overflows for x above FLT_MAX / 6). */
TORC_CUDA_HD static inline float torc_cuda_b_hardswish(float x) {
  float t = x + 3.0f;
  t = t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t;
  return t == 6.0f ? x : x * t / 6.0f;
}

/* ---- unary with params ---- */

TORC_CUDA_HD static inline float torc_cuda_b_leaky_relu(float x,
                                                        torc_cuda_sp p) {
  return x > 0.0f ? x : x * p.a;
}
TORC_CUDA_HD static inline float torc_cuda_b_elu(float x, torc_cuda_sp p) {
  return x > 0.0f ? x : p.a * expm1f(x);
}
/* flags bit 0: the tanh form; else the erf form. */
TORC_CUDA_HD static inline float torc_cuda_b_gelu(float x, torc_cuda_sp p) {
  if (p.flags & 1u) {
    float u = TORC_CUDA_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
  return 0.5f * x * (1.0f + erff(x * TORC_CUDA_SQRT1_2));
}
/* log(1 + e^(beta x)) / beta, linear above the threshold; a = beta,
 * b = threshold. */
TORC_CUDA_HD static inline float torc_cuda_b_softplus(float x,
                                                      torc_cuda_sp p) {
  float bx = x * p.a;
  return bx > p.b ? x : log1pf(expf(bx)) / p.a;
}
/* min(max(x, a), b) for the bounds set in flags (bit 0 a, bit 1 b); NaN
 * propagates from x and from a bound. */
TORC_CUDA_HD static inline float torc_cuda_b_clamp(float x, torc_cuda_sp p) {
  if (TORC_CUDA_ISNAN(x))
    return x;
  if (p.flags & 1u)
    x = TORC_CUDA_ISNAN(p.a) ? p.a : x < p.a ? p.a : x;
  if (p.flags & 2u)
    x = TORC_CUDA_ISNAN(p.b) ? p.b : x > p.b ? p.b : x;
  return x;
}

/* ---- binary ---- */

TORC_CUDA_HD static inline float torc_cuda_b_add(float x, float y) {
  return x + y;
}
TORC_CUDA_HD static inline float torc_cuda_b_sub(float x, float y) {
  return x - y;
}
TORC_CUDA_HD static inline float torc_cuda_b_mul(float x, float y) {
  return x * y;
}
TORC_CUDA_HD static inline float torc_cuda_b_div(float x, float y) {
  return x / y;
}
TORC_CUDA_HD static inline float torc_cuda_b_pow(float x, float y) {
  return powf(x, y);
}
/* NaN propagates from either side (torch.maximum), unlike fmaxf. */
TORC_CUDA_HD static inline float torc_cuda_b_maximum(float x, float y) {
  return TORC_CUDA_ISNAN(x) || TORC_CUDA_ISNAN(y) ? x + y : x > y ? x : y;
}
TORC_CUDA_HD static inline float torc_cuda_b_minimum(float x, float y) {
  return TORC_CUDA_ISNAN(x) || TORC_CUDA_ISNAN(y) ? x + y : x < y ? x : y;
}
/* x = the gradient g, y = relu's output: 0 where y <= 0, else g (a NaN
 * output passes g, as PyTorch's threshold_backward). */
TORC_CUDA_HD static inline float torc_cuda_b_relu_backward(float g, float y) {
  return y <= 0.0f ? 0.0f : g;
}

/* ---- binary with params ---- */

/* g * gelu'(x): erf form Phi(x) + x phi(x); tanh form PyTorch's. */
TORC_CUDA_HD static inline float torc_cuda_b_gelu_backward(float g, float x,
                                                           torc_cuda_sp p) {
  float d;
  if (p.flags & 1u) {
    const float k = TORC_CUDA_SQRT_2_OVER_PI, c = 0.044715f;
    float u = k * (x + c * x * x * x), t = tanhf(u), s = 1.0f - t * t;
    /* s is 0 where tanh saturates; for a finite x (x - x is 0) the other
     * factor may then be inf in f32 only (x^2 overflows): 0 * inf must not
     * make a NaN that ref's double does not. */
    d = 0.5f * (1.0f + t) +
        (s == 0.0f && x - x == 0.0f
             ? 0.0f
             : 0.5f * x * s * k * (1.0f + 3.0f * c * x * x));
  } else {
    float cdf = 0.5f * (1.0f + erff(x * TORC_CUDA_SQRT1_2));
    float pdf = expf(-0.5f * x * x) * TORC_CUDA_INV_SQRT_2PI;
    d = cdf + x * pdf;
  }
  return g * d;
}

#endif /* TORC_CUDA_EW_BODY_H */
