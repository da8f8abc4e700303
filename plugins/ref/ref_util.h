/* plugins/ref/ref_util.h — what every reference kernel shares: a strided
 * N-d index iterator, per-dtype element loads and stores (as double or as
 * int64), the error helper, argument checks and the kernels' declarations.
 * Private to plugins/ref (the sim plugin sees only ref_kernels.h).
 *
 * Numeric policy of the reference backend (every kernel follows it):
 *  - floating dtypes (f32 f64 f16 bf16) are loaded as double, computed in
 *    double and rounded once when stored (f16/bf16 go double -> float ->
 *    half, as PyTorch's float-computed half kernels do). For + - * / and
 *    sqrt, double then round gives exactly the f32 (and f16-through-float)
 *    result, since double has more than 2*24+2 bits; for exp, pow, tanh,
 *    ... it is the more accurate answer, which is what an oracle wants.
 *  - integer dtypes (i32 i64 u8) and bool are loaded as int64 and computed
 *    exactly in int64 with two's-complement wraparound (done in uint64, so
 *    no signed-overflow UB); the store keeps the low bits of the target
 *    width, so i32 and u8 wrap exactly as C's fixed-width types (and
 *    PyTorch) do. Bool stores v != 0.
 *  - a floating value stored into an integer dtype truncates toward zero;
 *    NaN gives 0 and values outside int64 saturate before wrapping (C
 *    leaves those cases undefined; here they are defined and harmless).
 *    An integer stored into a floating dtype rounds once (i64 -> f32 too,
 *    see ref_i64_to_f32), then f32 -> f16/bf16 as PyTorch does.
 */
#ifndef TORC_REF_UTIL_H
#define TORC_REF_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ref_kernels.h"
#include "torc/dtype.h"
#include "torc/plugin.h"

/* ---- errors ---- */

/* Formats a message and records it through torc_ref_set_error (when a
 * plugin has set it); returns status, so kernels `return ref_error(...)`. */
static inline int ref_error(int status, const char *fmt, ...)
    TORC_PRINTF(2, 3);
static inline int ref_error(int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (torc_ref_set_error != NULL)
    torc_ref_set_error(status, "%s", msg);
  return status;
}

/* The short name of a dtype, as torc_dtype_name (which a plugin cannot
 * call: it links nothing of libtorc). */
static inline const char *ref_dtype_name(int dt) {
  static const char *const names[TORC_DTYPE_COUNT] = {
      "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};
  return torc_dtype_valid((torc_dtype)dt) ? names[dt] : "invalid";
}

/* ---- shapes ---- */

/* Writes "[2, 3]" for a ktensor's shape into buf; returns buf. */
static inline const char *ref_shape_str(const torc_ktensor *t, char *buf,
                                        size_t size) {
  size_t n = 0;
  int nd = t->ndim < 0 ? 0 : t->ndim > TORC_KERNEL_MAX_DIMS
                                 ? TORC_KERNEL_MAX_DIMS
                                 : t->ndim;
  n += (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < nd && n < size; d++)
    n += (size_t)snprintf(buf + n, size - n, d ? ", %lld" : "%lld",
                          (long long)t->shape[d]);
  if (n < size)
    snprintf(buf + n, size - n, "]");
  return buf;
}

/* Number of elements of a shape (1 for ndim 0, 0 if any size is 0). */
static inline int64_t ref_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++)
    n *= shape[d];
  return n;
}

/* 1 if the two tensors have the same ndim and sizes. */
static inline int ref_same_shape(const torc_ktensor *a,
                                 const torc_ktensor *b) {
  if (a->ndim != b->ndim)
    return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d])
      return 0;
  return 1;
}

/* Checks what every kernel may rely on: the op's input and output counts,
 * valid dtypes, 0 <= ndim <= 8 and non-negative sizes. A failure here is a
 * core bug (the core validates user input), reported, never a crash. */
static inline int ref_check_args(const torc_kernel_args *a, int n_in,
                                 int n_out) {
  const char *op = a->op ? a->op : "?";
  if (a->n_in != n_in || a->n_out != n_out)
    return ref_error(TORC_ERR_INTERNAL,
                     "ref kernel '%s' expects %d input(s) and %d output(s), "
                     "got %d and %d",
                     op, n_in, n_out, (int)a->n_in, (int)a->n_out);
  for (int i = 0; i < n_in + n_out; i++) {
    const torc_ktensor *t = i < n_in ? &a->in[i] : &a->out[i - n_in];
    if (!torc_dtype_valid((torc_dtype)t->dtype) || t->ndim < 0 ||
        t->ndim > TORC_KERNEL_MAX_DIMS)
      return ref_error(TORC_ERR_INTERNAL,
                       "ref kernel '%s': %s %d has dtype %d and ndim %d "
                       "(expected a valid dtype and 0..%d dims)",
                       op, i < n_in ? "input" : "output",
                       i < n_in ? i : i - n_in, (int)t->dtype, (int)t->ndim,
                       TORC_KERNEL_MAX_DIMS);
    for (int d = 0; d < t->ndim; d++)
      if (t->shape[d] < 0)
        return ref_error(TORC_ERR_INTERNAL,
                         "ref kernel '%s': negative size %lld in dim %d", op,
                         (long long)t->shape[d], d);
  }
  return TORC_OK;
}

/* Checks that tensor `t` has the shape of `like` (elementwise contracts). */
static inline int ref_check_same_shape(const torc_kernel_args *a,
                                       const torc_ktensor *t,
                                       const torc_ktensor *like) {
  if (ref_same_shape(t, like))
    return TORC_OK;
  char s1[128], s2[128];
  return ref_error(TORC_ERR_SHAPE,
                   "ref kernel '%s': operand shape %s differs from output "
                   "shape %s (the core should have broadcast it)",
                   a->op ? a->op : "?", ref_shape_str(t, s1, sizeof s1),
                   ref_shape_str(like, s2, sizeof s2));
}

/* Returns the op's params when at least `size` bytes were given, else
 * NULL after recording an error. */
static inline const void *ref_params(const torc_kernel_args *a, size_t size) {
  if (a->params == NULL || a->params_size < size) {
    ref_error(TORC_ERR_INTERNAL,
              "ref kernel '%s' needs %zu bytes of parameters, got %zu",
              a->op ? a->op : "?", size, a->params ? a->params_size : 0);
    return NULL;
  }
  return a->params;
}

/* ---- the strided N-d iterator ----
 * Walks every index of `shape` in row-major order, keeping for each of up
 * to REF_ITER_MAX operands the element position offset + sum(idx*stride).
 *
 *   ref_iter it;
 *   ref_iter_init(&it, out->ndim, out->shape);
 *   ref_iter_add(&it, x->offset, x->strides);   // operand 0
 *   ref_iter_add(&it, out->offset, out->strides); // operand 1
 *   for (; !ref_iter_done(&it); ref_iter_next(&it))
 *     ... it.pos[0], it.pos[1] ...
 */
#define REF_ITER_MAX 4

typedef struct ref_iter {
  int ndim, n_ops;
  int64_t remaining; /* elements left, the current one included */
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t idx[TORC_KERNEL_MAX_DIMS];
  int64_t strides[REF_ITER_MAX][TORC_KERNEL_MAX_DIMS];
  int64_t pos[REF_ITER_MAX];
} ref_iter;

static inline void ref_iter_init(ref_iter *it, int ndim, const int64_t *shape) {
  it->ndim = ndim;
  it->n_ops = 0;
  it->remaining = ref_numel(ndim, shape);
  for (int d = 0; d < ndim; d++) {
    it->shape[d] = shape[d];
    it->idx[d] = 0;
  }
}

/* Adds an operand starting at element `offset` with `strides` (ndim of
 * them, in elements); returns its operand number. */
static inline int ref_iter_add(ref_iter *it, int64_t offset,
                               const int64_t *strides) {
  int k = it->n_ops++;
  it->pos[k] = offset;
  for (int d = 0; d < it->ndim; d++)
    it->strides[k][d] = strides[d];
  return k;
}

/* Adds a ktensor (its offset and strides) as the next operand. */
static inline int ref_iter_add_t(ref_iter *it, const torc_ktensor *t) {
  return ref_iter_add(it, t->offset, t->strides);
}

static inline int ref_iter_done(const ref_iter *it) {
  return it->remaining <= 0;
}

/* Moves to the next index: the last dim runs fastest; a dim that wraps
 * rewinds every operand by size * stride and carries into the one before. */
static inline void ref_iter_next(ref_iter *it) {
  if (--it->remaining <= 0)
    return;
  for (int d = it->ndim - 1; d >= 0; d--) {
    for (int k = 0; k < it->n_ops; k++)
      it->pos[k] += it->strides[k][d];
    if (++it->idx[d] < it->shape[d])
      return;
    for (int k = 0; k < it->n_ops; k++)
      it->pos[k] -= it->strides[k][d] * it->shape[d];
    it->idx[d] = 0;
  }
}

/* ---- elements ---- */

/* Address of element `pos` (in elements from the storage base) of t. */
static inline void *ref_ptr(const torc_ktensor *t, int64_t pos) {
  return (char *)t->data + pos * (int64_t)torc_dtype_size((torc_dtype)t->dtype);
}

/* A floating value to int64: truncation toward zero; NaN gives 0 and
 * values beyond int64 saturate (both undefined for a plain C cast). */
static inline int64_t ref_f2i(double v) {
  if (v != v)
    return 0;
  if (v >= 9223372036854775808.0)
    return INT64_MAX;
  if (v < -9223372036854775808.0)
    return INT64_MIN;
  return (int64_t)v;
}

/* Wrapping int64 arithmetic (two's complement, no UB). */
static inline int64_t ref_wrap(uint64_t u) {
  int64_t v;
  memcpy(&v, &u, sizeof v);
  return v;
}
static inline int64_t ref_iadd(int64_t a, int64_t b) {
  return ref_wrap((uint64_t)a + (uint64_t)b);
}
static inline int64_t ref_isub(int64_t a, int64_t b) {
  return ref_wrap((uint64_t)a - (uint64_t)b);
}
static inline int64_t ref_imul(int64_t a, int64_t b) {
  return ref_wrap((uint64_t)a * (uint64_t)b);
}

/* An int64 to the nearest float in one rounding (torc/dtype.h). */
static inline float ref_i64_to_f32(int64_t v) { return torc_i64_to_f32(v); }

/* Element at p (of dtype dt) as a double. */
static inline double ref_load_f(int dt, const void *p) {
  switch (dt) {
  case TORC_F32: return *(const float *)p;
  case TORC_F64: return *(const double *)p;
  case TORC_F16: return torc_f16_to_f32(*(const uint16_t *)p);
  case TORC_BF16: return torc_bf16_to_f32(*(const uint16_t *)p);
  case TORC_I32: return *(const int32_t *)p;
  case TORC_I64: return (double)*(const int64_t *)p;
  case TORC_U8: return *(const uint8_t *)p;
  case TORC_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

/* Element at p (of dtype dt) as an int64 (floats truncate, see ref_f2i). */
static inline int64_t ref_load_i(int dt, const void *p) {
  switch (dt) {
  case TORC_I32: return *(const int32_t *)p;
  case TORC_I64: return *(const int64_t *)p;
  case TORC_U8: return *(const uint8_t *)p;
  case TORC_BOOL: return *(const uint8_t *)p != 0;
  default: return ref_f2i(ref_load_f(dt, p));
  }
}

/* Stores an int64 into p (of dtype dt): integers keep the low bits of
 * their width, bool stores v != 0, floats round the integer once. */
static inline void ref_store_i(int dt, void *p, int64_t v) {
  switch (dt) {
  case TORC_I32: *(uint32_t *)p = (uint32_t)(uint64_t)v; break;
  case TORC_I64: *(int64_t *)p = v; break;
  case TORC_U8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
  case TORC_BOOL: *(uint8_t *)p = v != 0; break;
  case TORC_F32: *(float *)p = ref_i64_to_f32(v); break;
  case TORC_F64: *(double *)p = (double)v; break;
  case TORC_F16: *(uint16_t *)p = torc_f32_to_f16(ref_i64_to_f32(v)); break;
  case TORC_BF16: *(uint16_t *)p = torc_f32_to_bf16(ref_i64_to_f32(v)); break;
  default: break;
  }
}

/* Stores a double into p (of dtype dt), rounding once to f32 (and from
 * there to f16/bf16); integer dtypes go through ref_f2i, bool is v != 0
 * (so NaN is true, as a C cast). */
static inline void ref_store_f(int dt, void *p, double v) {
  switch (dt) {
  case TORC_F32: *(float *)p = (float)v; break;
  case TORC_F64: *(double *)p = v; break;
  case TORC_F16: *(uint16_t *)p = torc_f32_to_f16((float)v); break;
  case TORC_BF16: *(uint16_t *)p = torc_f32_to_bf16((float)v); break;
  case TORC_BOOL: *(uint8_t *)p = v != 0; break;
  default: ref_store_i(dt, p, ref_f2i(v)); break;
  }
}

/* ---- the kernels (one definition each, in kernels_*.c): the ref column
 * of the op table, torc/ops.def (a kernel serving two ops is declared
 * twice, which C allows) ---- */

#define REF(set, kernel) int torc_ref_k_##kernel(const torc_kernel_args *a);
#define NOREF
#define TORC_OP(name, kind, rule, fn, io, params, ref, ...) ref
#include "torc/ops.def"
#undef TORC_OP
#undef REF
#undef NOREF

#endif /* TORC_REF_UTIL_H */
