/* plugins/cuda/kerr.h — errors that a kernel finds in the data (an index
 * out of range) and the host reports at the next wait, as CUDA's device
 * asserts but without losing the context: each device has one record in
 * mapped pinned memory; the first kernel thread to find a bad value claims
 * it and writes the value and its bound, and synchronize, copy_to_host and
 * event_synchronize turn a claimed record into one message naming the op,
 * then clear it. Included by the .cu files (device code) and cuda.c.
 */
#ifndef TORC_CUDA_KERR_H
#define TORC_CUDA_KERR_H

#include <stdint.h>

/* What went wrong (torc_cuda_kerr.code). */
#define TORC_CUDA_KERR_NONE 0
#define TORC_CUDA_KERR_INDEX 1 /* an index outside [lo, hi) */

/* The record. op is the host's pointer to the op's name (the core's
 * table, alive for the process), stored as a number by the device. */
typedef struct torc_cuda_kerr {
  int32_t code;
  int32_t pad;
  uint64_t op;
  int64_t value, lo, hi;
  int64_t element; /* the flat position of the bad value in its tensor */
} torc_cuda_kerr;

#ifdef __CUDACC__
/* Claims the device's record for the first bad index found: value at
 * flat position `element`, expected in [lo, hi). Later finds are dropped
 * (one message names the first). e may be NULL: nothing is recorded. */
__device__ static inline void torc_cuda_kerr_index(torc_cuda_kerr *e,
                                                   const char *op,
                                                   int64_t value, int64_t lo,
                                                   int64_t hi,
                                                   int64_t element) {
  if (e == nullptr || atomicCAS(&e->code, 0, -1) != 0)
    return;
  e->op = (uint64_t)(uintptr_t)op;
  e->value = value;
  e->lo = lo;
  e->hi = hi;
  e->element = element;
  __threadfence_system();
  atomicExch(&e->code, TORC_CUDA_KERR_INDEX);
}
#endif

#endif /* TORC_CUDA_KERR_H */
