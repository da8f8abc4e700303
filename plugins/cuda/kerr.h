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
#include <stdio.h>

/* What went wrong (torc_cuda_kerr.code). */
#define TORC_CUDA_KERR_NONE 0
#define TORC_CUDA_KERR_INDEX 1 /* an index outside [lo, hi) */

/* The record. op is the host's pointer to the op's name (the core's
 * table, alive for the process), stored as a number by the device. */
typedef struct torc_cuda_kerr {
  int32_t code;
  int32_t dim; /* the dim the index runs along, or -1 */
  uint64_t op;
  int64_t value, lo, hi;
  int64_t element; /* the flat position of the bad value in its tensor */
} torc_cuda_kerr;

#ifdef __CUDACC__
/* Where a kernel records a bad value: the device's record and the op's
 * name (the host's pointer, printed by the host). Passed by value. */
struct torc_cuda_kerr_ctx {
  torc_cuda_kerr *e;
  const char *op;
};

/* The record of call a's device, into *k (torc_cuda__kerr of
 * cuda_internal.h, which the including file has included). */
static inline int torc_cuda_kerr_of(const torc_kernel_args *a,
                                    torc_cuda_kerr_ctx *k) {
  k->op = a->op;
  return torc_cuda__kerr(a, &k->e);
}

/* Claims the device's record for the first bad index found: value at
 * flat position `element` of the index tensor, along dim `dim` (-1: no
 * dim to name), expected in [lo, hi). Later finds are dropped (one
 * message names the first). e may be NULL: nothing is recorded. */
__device__ static inline void torc_cuda_kerr_index(torc_cuda_kerr *e,
                                                   const char *op,
                                                   int64_t value, int64_t lo,
                                                   int64_t hi,
                                                   int64_t element, int dim) {
  if (e == nullptr || atomicCAS(&e->code, 0, -1) != 0)
    return;
  e->op = (uint64_t)(uintptr_t)op;
  e->dim = dim;
  e->value = value;
  e->lo = lo;
  e->hi = hi;
  e->element = element;
  __threadfence_system();
  atomicExch(&e->code, TORC_CUDA_KERR_INDEX);
}
#endif

/* The message of a claimed record k of device `device` into buf: what
 * kerr_check in cuda.c reports (a plain function, so that a CPU test reads
 * its text). `op` is the op's name (the record's pointer, read by the
 * host). */
static inline void torc_cuda_kerr_message(char *buf, size_t size, int device,
                                          const char *op, int32_t dim,
                                          int64_t value, int64_t lo,
                                          int64_t hi, int64_t element) {
  char along[32] = "";
  if (dim >= 0)
    snprintf(along, sizeof along, " along dim %d", (int)dim);
  snprintf(buf, size,
           "cuda:%d: '%s': index %lld (element %lld of the index)%s is out "
           "of range: expected %lld to %lld; the kernel found it on the "
           "device and it is reported at this wait (run with "
           "TORC_CUDA_SYNC=1 to stop at the op, or check the indices on the "
           "cpu)",
           device, op ? op : "(an op)", (long long)value, (long long)element,
           along, (long long)lo, (long long)hi - 1);
}

#endif /* TORC_CUDA_KERR_H */
