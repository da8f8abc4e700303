/* plugins/cuda/rand_body.h — the per-element bodies of the cuda plugin's
 * random ops (uniform_, normal_, randint_, dropout): element i is a pure
 * function of (seed, offset + i) through torc/philox.h, written as ref
 * computes it, for device code and host C alike
 * (tests/test_cuda_rand_bodies.c).
 */
#ifndef TORC_CUDA_RAND_BODY_H
#define TORC_CUDA_RAND_BODY_H

#include <math.h>
#include <stdint.h>

#include "torc/dtype.h"
#include "torc/philox.h"

/* Device code rounds every double product and sum on its own
 * (__dmul_rn/__dadd_rn are never fused into an FMA, which nvcc would
 * otherwise do and ref on the host does not), so the bits are ref's. */
#ifdef __CUDA_ARCH__
#define TORC_CUDA_DMUL(x, y) __dmul_rn((x), (y))
#define TORC_CUDA_DADD(x, y) __dadd_rn((x), (y))
#else
#define TORC_CUDA_DMUL(x, y) ((x) * (y))
#define TORC_CUDA_DADD(x, y) ((x) + (y))
#endif

/* uniform_ into f32: a + (b - a) * u in double from the f32 uniform,
 * rounded once to f32; a value that rounded onto b steps down below it
 * (at most 4 steps), so the result lies in [a, b). Bit-exact on any
 * device: integer arithmetic and correctly rounded operations. */
TORC_PHILOX_FN float torc_cuda_rand_uniform_f32(uint64_t seed, uint64_t n,
                                                double a, double b) {
  double u = (double)torc_philox_uniform_f32(seed, n);
  float v = (float)TORC_CUDA_DADD(a, TORC_CUDA_DMUL(b - a, u));
  for (int k = 0; k < 4 && (double)v >= b && b > a; k++)
    v = nextafterf(v, -INFINITY);
  return v;
}

/* uniform_ into f64: as f32, from the 53-bit uniform. */
TORC_PHILOX_FN double torc_cuda_rand_uniform_f64(uint64_t seed, uint64_t n,
                                                 double a, double b) {
  double u = torc_philox_uniform(seed, n);
  double v = TORC_CUDA_DADD(a, TORC_CUDA_DMUL(b - a, u));
  for (int k = 0; k < 4 && v >= b && b > a; k++)
    v = nextafter(v, -(double)INFINITY);
  return v;
}

/* normal_: mean + std * z in double, z from Box-Muller (torc/philox.h);
 * the f32 output rounds it once. z goes through log, cos and sqrt: on a
 * GPU its last bits are CUDA's libm's (within 1-2 ulp of glibc's). */
TORC_PHILOX_FN double torc_cuda_rand_normal(uint64_t seed, uint64_t n,
                                            double mean, double std) {
  return TORC_CUDA_DADD(mean, TORC_CUDA_DMUL(std, torc_philox_normal(seed, n)));
}

/* dropout's factor for element n: scale (1 / (1 - p), or 0 for p >= 1)
 * when the 53-bit uniform is >= p, else 0. The output is x * factor in
 * double, rounded once to x's dtype; the mask holds the factor. */
TORC_PHILOX_FN double torc_cuda_rand_keep(uint64_t seed, uint64_t n, double p,
                                          double scale) {
  return torc_philox_uniform(seed, n) >= p ? scale : 0.0;
}

/* ---- f16 and bf16 outputs: bits, rounded as ref rounds (double to f32
 * once, then to 16 bits, both to nearest even) ---- */

/* v as the 16-bit encoding of bf16 (bf16 != 0) or f16. */
TORC_PHILOX_FN uint16_t torc_cuda_rand_to16(double v, int bf16) {
  return bf16 ? torc_f32_to_bf16((float)v) : torc_f32_to_f16((float)v);
}

TORC_PHILOX_FN double torc_cuda_rand_from16(uint16_t b, int bf16) {
  return bf16 ? (double)torc_bf16_to_f32(b) : (double)torc_f16_to_f32(b);
}

/* The encoding of the next 16-bit value below v (encoded as b): positive
 * values step down, negative ones grow in magnitude, zero goes to the
 * smallest negative subnormal. */
TORC_PHILOX_FN uint16_t torc_cuda_rand_below16(uint16_t b, double v) {
  if (v > 0)
    return (uint16_t)(b - 1u);
  if (v == 0)
    return 0x8001u;
  return (uint16_t)(b + 1u);
}

/* uniform_ into f16/bf16: a + (b - a) * u from the f32 uniform, rounded
 * to the dtype; a value that rounded onto b steps down below it. */
TORC_PHILOX_FN uint16_t torc_cuda_rand_uniform_16(uint64_t seed, uint64_t n,
                                                  double a, double b,
                                                  int bf16) {
  double u = (double)torc_philox_uniform_f32(seed, n);
  uint16_t h = torc_cuda_rand_to16(TORC_CUDA_DADD(a, TORC_CUDA_DMUL(b - a, u)),
                                   bf16);
  double v = torc_cuda_rand_from16(h, bf16);
  for (int k = 0; k < 4 && v >= b && b > a; k++) {
    h = torc_cuda_rand_below16(h, v);
    v = torc_cuda_rand_from16(h, bf16);
  }
  return h;
}

#endif /* TORC_CUDA_RAND_BODY_H */
