/* torc/checked.h — size arithmetic that cannot wrap, for code that computes
 * sizes from numbers it read from a file (shapes, counts, offsets, image
 * dimensions). Header-only, so plugins use it without linking libtorc.
 *
 * Every helper returns 0 when the result is exact and within the limit, and
 * nonzero otherwise, leaving *out unspecified; compute a size with these
 * *before* comparing it with anything or allocating it.
 */
#ifndef TORC_CHECKED_H
#define TORC_CHECKED_H

#include <stddef.h>
#include <stdint.h>

/* *out = a * b; nonzero if the product does not fit in 64 bits. */
static inline int torc_checked_mul(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

/* *out = a + b; nonzero if the sum does not fit in 64 bits. */
static inline int torc_checked_add(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

/* *out = a * b as a size_t; nonzero if it does not fit (so the result can
 * be passed to malloc as it is). */
static inline int torc_checked_mul_size(size_t a, size_t b, size_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

/* The element count of a shape: the product of shape[0..ndim) (1 for
 * ndim == 0). Nonzero if a dimension is negative, ndim is negative, or the
 * product exceeds `limit` at any point of the multiplication — a zero
 * dimension gives 0 only after every other dimension was checked, so a
 * shape such as [0, 2^40, 2^40] is refused rather than read as empty. */
static inline int torc_checked_numel(const int64_t *shape, int ndim,
                                     uint64_t limit, uint64_t *out) {
  if (ndim < 0)
    return 1;
  uint64_t n = 1;
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return 1;
    if (shape[i] == 0) {
      zero = 1;
      continue;
    }
    if (torc_checked_mul(n, (uint64_t)shape[i], &n) || n > limit)
      return 1;
  }
  *out = zero ? 0 : n;
  return 0;
}

/* *out = count * itemsize bytes; nonzero if that overflows or exceeds
 * `limit`. */
static inline int torc_checked_bytes(uint64_t count, uint64_t itemsize,
                                     uint64_t limit, uint64_t *out) {
  return torc_checked_mul(count, itemsize, out) || *out > limit;
}

#endif
