/* torc/dtype.h — element types, their sizes and names, PyTorch's type
 * promotion, and exact f16/bf16 <-> f32 conversions usable by plugins.
 *
 * The numeric values of torc_dtype are part of the plugin ABI: append only.
 */
#ifndef TORC_DTYPE_H
#define TORC_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "torc/error.h"

TORC_BEGIN_DECLS

/* The element types. TORC_DTYPE_ANY is only used when registering a kernel
 * that handles every dtype itself (copy/cast kernels). */
typedef enum torc_dtype {
  TORC_F32 = 0,
  TORC_F64 = 1,
  TORC_F16 = 2,
  TORC_BF16 = 3,
  TORC_I32 = 4,
  TORC_I64 = 5,
  TORC_U8 = 6,
  TORC_BOOL = 7,
  TORC_DTYPE_COUNT = 8,
  TORC_DTYPE_ANY = -1
} torc_dtype;

/* Bytes per element (bool is one byte); 0 for an invalid dtype. */
static inline size_t torc_dtype_size(torc_dtype dt) {
  static const unsigned char sizes[TORC_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1, 1};
  return (dt >= 0 && dt < TORC_DTYPE_COUNT) ? sizes[dt] : 0;
}

/* 1 for f32, f64, f16 and bf16; 0 otherwise. */
static inline int torc_dtype_is_float(torc_dtype dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 || dt == TORC_BF16;
}

/* 1 for i32, i64 and u8; 0 otherwise (bool is its own category). */
static inline int torc_dtype_is_int(torc_dtype dt) {
  return dt == TORC_I32 || dt == TORC_I64 || dt == TORC_U8;
}

/* 1 if dt names one of the eight element types. */
static inline int torc_dtype_valid(torc_dtype dt) {
  return dt >= 0 && dt < TORC_DTYPE_COUNT;
}

/* The short name of a dtype: "f32", "f64", "f16", "bf16", "i32", "i64",
 * "u8", "bool"; "any" for TORC_DTYPE_ANY and "invalid" otherwise. */
TORC_API const char *torc_dtype_name(torc_dtype dt);

/* Parses a dtype name. Accepts the short names above and PyTorch's
 * ("float32", "float", "double", "half", "bfloat16", "int32", "int",
 * "int64", "long", "uint8", "bool"). Returns TORC_OK or TORC_ERR_DTYPE
 * (with the accepted names in torc_last_error()). */
TORC_API torc_status torc_dtype_parse(const char *name, torc_dtype *out);

/* PyTorch's promotion of two dtypes (torch.promote_types): bool < integer
 * < floating; within a category the wider type; u8 with i32 gives i32;
 * f16 with bf16 gives f32. Returns TORC_DTYPE_ANY for an invalid input. */
TORC_API torc_dtype torc_promote_types(torc_dtype a, torc_dtype b);

/* ---- f16 / bf16 conversions (exact; round to nearest even) ----
 * TORC_DTYPE_FN: under nvcc these compile for the host and the device, so
 * a CUDA kernel converts with the very bits the host does. */
#ifdef __CUDACC__
#define TORC_DTYPE_FN __host__ __device__ static inline
#else
#define TORC_DTYPE_FN static inline
#endif

/* IEEE binary16 bits to float. */
TORC_DTYPE_FN float torc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13); /* inf / nan */
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    do {
      e++;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* float to IEEE binary16 bits, rounding to nearest even; overflow gives inf,
 * NaN stays NaN. */
TORC_DTYPE_FN uint16_t torc_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow */
    return (uint16_t)(sign | 0x7c00u);
  if (ax < 0x38800000u) { /* below the smallest normal half: subnormal */
    if (ax < 0x33000000u) /* below half the smallest subnormal */
      return (uint16_t)sign;
    uint32_t e = ax >> 23;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u)))
      half++;
    return (uint16_t)(sign | half);
  }
  uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u); /* round to nearest even */
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

/* bfloat16 bits to float (exact). */
TORC_DTYPE_FN float torc_bf16_to_f32(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* float to bfloat16 bits, rounding to nearest even; NaN stays NaN. */
TORC_DTYPE_FN uint16_t torc_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* An int64 to the nearest float (ties to even) in one rounding: the
 * magnitude is rounded to 24 significant bits in integer arithmetic, after
 * which the conversion is exact. (A plain (float)v does the same on x86,
 * but valgrind emulates it through double, which rounds twice: 2^60 +
 * 2^36 + 1 would become 2^60, not 2^60 + 2^37.) */
TORC_DTYPE_FN float torc_i64_to_f32(int64_t v) {
  uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  int bits = 0;
  while (bits < 64 && (m >> bits) != 0)
    bits++;
  if (bits > 24) {
    int drop = bits - 24;
    uint64_t keep = m >> drop, rem = m & ((UINT64_C(1) << drop) - 1);
    uint64_t half = UINT64_C(1) << (drop - 1);
    if (rem > half || (rem == half && (keep & 1)))
      keep++;
    m = keep << drop; /* <= 2^63: m was at most 2^63 */
  }
  float f = (float)(double)m;
  return v < 0 ? -f : f;
}

TORC_END_DECLS

#endif /* TORC_DTYPE_H */
