/* tests/philox_cuda.cu — calls every function of torc/philox.h from a
 * __global__, so that nvcc proves TORC_PHILOX_FN makes them device code
 * (tests/test_philox_cuda.sh compiles it; nothing runs it). */
#include "torc/philox.h"

__global__ void philox_all(uint64_t seed, uint64_t off, double *d, float *f,
                           int64_t *k, uint32_t *w) {
  uint64_t i = off + blockIdx.x * blockDim.x + threadIdx.x;
  torc_philox_block b = torc_philox4x32((uint32_t)i, 0, 0, 0, 1u, 2u);
  torc_philox_block c = torc_philox_at(seed, i);
  w[i] = b.v[0] ^ c.v[3];
  d[2 * i] = torc_philox_uniform(seed, i);
  d[2 * i + 1] = torc_philox_normal(seed, i);
  f[i] = torc_philox_uniform_f32(seed, i);
  k[i] = torc_philox_randint(seed, i, -5, 17);
}

/* The host side of the same header in the same translation unit. */
double philox_host(uint64_t seed, uint64_t n) {
  return torc_philox_uniform(seed, n) + torc_philox_normal(seed, n);
}
