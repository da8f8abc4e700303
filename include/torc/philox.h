/* torc/philox.h — the Philox 4x32-10 counter-based generator (Salmon et al.,
 * "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11) and the mapping
 * from its output to the numbers torc's random ops produce. Header-only so
 * that every backend computes exactly the same bits: element i of a tensor
 * drawn at generator offset `off` with seed `s` is a pure function of
 * (s, off + i), whatever the device or the thread that computes it.
 *
 * Every function is TORC_PHILOX_FN, so a CUDA kernel (a `__global__` or
 * `__device__` function compiled by nvcc) calls the same code as the host.
 * The block, the uniforms and randint are integer arithmetic and exact
 * conversions: bit-exact on any device. torc_philox_normal goes through
 * sqrt, log and cos, so its last bits are those of the device's math
 * library (CUDA's double log and cos are within 1-2 ulp of glibc's).
 */
#ifndef TORC_PHILOX_H
#define TORC_PHILOX_H

#include <math.h>
#include <stdint.h>

/* The storage class of every function here: plain `static inline` for C
 * compilers, host-and-device for nvcc (which defines __CUDACC__), so the
 * same definitions compile into CPU code and CUDA kernels. */
#ifdef __CUDACC__
#define TORC_PHILOX_FN __host__ __device__ static inline
#else
#define TORC_PHILOX_FN static inline
#endif

/* One Philox 4x32-10 block: 128 bits of output for a 128-bit counter and a
 * 64-bit key. */
typedef struct torc_philox_block {
  uint32_t v[4];
} torc_philox_block;

/* Philox 4x32-10 of counter (c0..c3) under key (k0, k1). */
TORC_PHILOX_FN torc_philox_block torc_philox4x32(uint32_t c0, uint32_t c1,
                                                 uint32_t c2, uint32_t c3,
                                                 uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = (uint32_t)p0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  torc_philox_block b = {{c0, c1, c2, c3}};
  return b;
}

/* The block for element counter `n` under `seed`: the counter is
 * (lo(n), hi(n), 0, 0) and the key (lo(seed), hi(seed)). */
TORC_PHILOX_FN torc_philox_block torc_philox_at(uint64_t seed, uint64_t n) {
  return torc_philox4x32((uint32_t)n, (uint32_t)(n >> 32), 0, 0,
                         (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Uniform double in [0, 1) for element index `n`: 53 bits from the block's
 * first two words. */
TORC_PHILOX_FN double torc_philox_uniform(uint64_t seed, uint64_t n) {
  torc_philox_block b = torc_philox_at(seed, n);
  uint64_t bits = ((uint64_t)b.v[0] << 21) ^ (uint64_t)(b.v[1] >> 11);
  return (double)(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* Uniform float in [0, 1) for element index `n`: 24 bits of the first
 * word, so the value is exact in f32, f16 rounding aside. */
TORC_PHILOX_FN float torc_philox_uniform_f32(uint64_t seed, uint64_t n) {
  torc_philox_block b = torc_philox_at(seed, n);
  return (float)(b.v[0] >> 8) * (1.0f / 16777216.0f);
}

/* Standard normal double for element index `n` (Box-Muller on the block's
 * words: u1 in (0, 1], u2 in [0, 1)). */
TORC_PHILOX_FN double torc_philox_normal(uint64_t seed, uint64_t n) {
  torc_philox_block b = torc_philox_at(seed, n);
  uint64_t a = ((uint64_t)b.v[0] << 21) ^ (uint64_t)(b.v[1] >> 11);
  uint64_t c = ((uint64_t)b.v[2] << 21) ^ (uint64_t)(b.v[3] >> 11);
  double u1 = ((double)(a & ((1ull << 53) - 1)) + 1.0) *
              (1.0 / 9007199254740992.0);
  double u2 = (double)(c & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Integer uniform in [low, high) for element index `n` (high > low): 64
 * bits reduced modulo the range (bias below 2^-32 for ranges < 2^32). */
TORC_PHILOX_FN int64_t torc_philox_randint(uint64_t seed, uint64_t n,
                                           int64_t low, int64_t high) {
  torc_philox_block b = torc_philox_at(seed, n);
  uint64_t bits = ((uint64_t)b.v[0] << 32) | b.v[1];
  uint64_t range = (uint64_t)high - (uint64_t)low;
  return (int64_t)((uint64_t)low + bits % range);
}

#endif /* TORC_PHILOX_H */
