/* plugins/cuda/ew2.cu — the elementwise kernels of the cuda plugin that
 * write another dtype than they read, or move bits: the comparisons (eq ne
 * lt le gt ge) and logical_and / logical_or / logical_not into bool, copy
 * (any dtype to any, strided on both sides), fill_ and where, for every
 * dtype ref has (ALL; copy as one TORC_DTYPE_ANY kernel). The per-element
 * logic is ew_body.h's, the kernels ew_launch.h's. Device type "cuda".
 */
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "cuda_internal.h"
#include "ew_body.h"
#include "ew_launch.h"

using namespace torc_cuda_ew;

namespace {

/* ---- comparisons and logical ops: bool out ---- */

#define CMP_FN(name, set)                                                      \
  struct f_##name {                                                            \
    __device__ int64_t operator()(float x, float y) const {                    \
      return torc_cuda_b_##name(x, y);                                         \
    }                                                                          \
    __device__ int64_t operator()(double x, double y) const {                  \
      return torc_cuda_bd_##name(x, y);                                        \
    }                                                                          \
    __device__ int64_t operator()(int64_t x, int64_t y) const {                \
      return torc_cuda_bi_##name(x, y);                                        \
    }                                                                          \
  };
#define LNOT_FN(name, set)                                                     \
  struct f_##name {                                                            \
    __device__ int64_t operator()(float x) const {                             \
      return torc_cuda_b_##name(x);                                            \
    }                                                                          \
    __device__ int64_t operator()(double x) const {                            \
      return torc_cuda_bd_##name(x);                                           \
    }                                                                          \
    __device__ int64_t operator()(int64_t x) const {                           \
      return torc_cuda_bi_##name(x);                                           \
    }                                                                          \
  };
TORC_CUDA_CMP_OPS(CMP_FN)
TORC_CUDA_LNOT_OPS(LNOT_FN)

/* The kernel of (op F, input dtype DT): a bool output. */
template <class F, int DT> int k_cmp(const torc_kernel_args *a) {
  return launch<el<DT>, el<TORC_BOOL>, F, 2>(a, F(), DT, TORC_BOOL, 0);
}
template <class F, int DT> int k_lnot(const torc_kernel_args *a) {
  return launch<el<DT>, el<TORC_BOOL>, F, 1>(a, F(), DT, TORC_BOOL, 0);
}

/* ---- copy ---- */

/* The identity, for copy's conversions. */
struct f_id {
  template <class V> __device__ V operator()(V v) const { return v; }
};

/* A dtype's bits as they are (copy within one dtype, bit-exact). */
template <class U> struct raw {
  typedef U T;
  __device__ static U load(U v) { return v; }
  __device__ static U store(U v) { return v; }
};
/* Copy's source: floats load as double, integers and bool as int64 (ref's
 * copy), so that every conversion rounds once. */
template <class E> struct from {
  typedef typename E::T T;
  typedef typename std::conditional<E::is_float, double, int64_t>::type C;
  __device__ static C load(T v) { return (C)E::load(v); }
};
/* Copy's destination: from double as ref's store_f (round to f32, then to
 * f16/bf16; truncate, NaN 0, saturate and wrap to integers; bool v != 0),
 * from int64 as its store_i. */
template <class E> struct to {
  typedef typename E::T T;
  __device__ static T store(double v) { return E::store_f(v); }
  __device__ static T store(int64_t v) { return E::store_i(v); }
};

/* The kernel of copy S -> D: the bits within one dtype (bool through
 * its load and store, so that any nonzero byte becomes 1, as ref's). */
template <int S, int D> int k_copy_to(const torc_kernel_args *a) {
  if constexpr (S == D && S != TORC_BOOL) {
    typedef typename el<S>::T U;
    return launch<raw<U>, raw<U>, f_id, 1>(a, f_id(), S, D, 0);
  } else {
    return launch<from<el<S>>, to<el<D>>, f_id, 1>(a, f_id(), S, D, 0);
  }
}

#define COPY_ROW(S)                                                            \
  {k_copy_to<S, TORC_F32>, k_copy_to<S, TORC_F64>,  k_copy_to<S, TORC_F16>,    \
   k_copy_to<S, TORC_BF16>, k_copy_to<S, TORC_I32>, k_copy_to<S, TORC_I64>,    \
   k_copy_to<S, TORC_U8>,  k_copy_to<S, TORC_BOOL>}
const torc_kernel_fn copy_fns[TORC_DTYPE_COUNT][TORC_DTYPE_COUNT] = {
    COPY_ROW(TORC_F32), COPY_ROW(TORC_F64), COPY_ROW(TORC_F16),
    COPY_ROW(TORC_BF16), COPY_ROW(TORC_I32), COPY_ROW(TORC_I64),
    COPY_ROW(TORC_U8),  COPY_ROW(TORC_BOOL)};

/* copy: out = in converted to out's dtype (C-cast semantics as ref's),
 * any two dtypes, both sides strided. */
int k_copy(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'copy': %d inputs and %d "
                                "outputs, expected 1 and 1",
                                a->n_in, a->n_out);
  int s = a->in[0].dtype, d = a->out[0].dtype;
  if (!torc_dtype_valid((torc_dtype)s) || !torc_dtype_valid((torc_dtype)d))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'copy': dtypes %d -> %d, "
                                "expected two of 0..%d",
                                s, d, TORC_DTYPE_COUNT - 1);
  return copy_fns[s][d](a);
}

/* ---- fill_ ---- */

/* y[i] = v for a contiguous y (16-byte packs when aligned, then the
 * tail), or along a strided walk of one operand. */
template <class U>
__global__ void k_fill_contig(U *y, int64_t n, int vec, U v) {
  constexpr int W = TORC_CUDA_VEC_BYTES / (int)sizeof(U);
  int64_t done = 0;
  if (vec) {
    pack<U, W> p;
#pragma unroll
    for (int j = 0; j < W; j++)
      p.v[j] = v;
    pack<U, W> *vy = reinterpret_cast<pack<U, W> *>(y);
    int64_t nv = n / W;
    for (int64_t i = first(); i < nv; i += step())
      vy[i] = p;
    done = nv * W;
  }
  for (int64_t i = done + first(); i < n; i += step())
    y[i] = v;
}

template <class U>
__global__ void k_fill_strided(U *y, int64_t n,
                               const __grid_constant__ torc_cuda_walk w, U v) {
  int64_t o[1];
  for (int64_t i = first(); i < n; i += step()) {
    if (n < ((int64_t)1 << 31))
      torc_cuda_walk_at32(&w, 1, (uint32_t)i, o);
    else
      torc_cuda_walk_at(&w, 1, i, o);
    y[o[0]] = v;
  }
}

template <class U> int fill_as(const torc_kernel_args *a, U v, int64_t n) {
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  U *y = base<U>(&a->out[0]);
  torc_cuda_walk w = walk_of(a, 0);
  if (torc_cuda_walk_contiguous(&w)) {
    uintptr_t addr = (uintptr_t)y;
    size_t es = sizeof(U);
    int width = torc_cuda_vec_width(sizeof(U));
    int vec = torc_cuda_vec_ok(n, width, 1, &addr, &es);
    k_fill_contig<U><<<blocks(vec ? n / width : n), kBlock, 0, s>>>(y, n, vec,
                                                                    v);
  } else {
    k_fill_strided<U><<<blocks(n), kBlock, 0, s>>>(y, n, w, v);
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* fill_: every element of out set to params' value as ref stores it
 * (torc_cuda_fill_bits), any dtype. */
int k_fill(const torc_kernel_args *a) {
  if (a->n_in != 0 || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'fill_': %d inputs and %d "
                                "outputs, expected 0 and 1",
                                a->n_in, a->n_out);
  if (a->params == NULL || a->params_size < sizeof(torc_fill_params))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'fill_': %zu bytes of params, "
                                "expected %zu",
                                a->params ? a->params_size : 0,
                                sizeof(torc_fill_params));
  const torc_ktensor *y = &a->out[0];
  if (!torc_dtype_valid((torc_dtype)y->dtype) || y->ndim < 0 ||
      y->ndim > TORC_KERNEL_MAX_DIMS)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'fill_': an output of dtype %d "
                                "and %d dims, expected a valid dtype and 0 "
                                "to %d dims",
                                (int)y->dtype, (int)y->ndim,
                                TORC_KERNEL_MAX_DIMS);
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  const torc_fill_params *p = (const torc_fill_params *)a->params;
  uint64_t bits = torc_cuda_fill_bits(y->dtype, p->value, p->ivalue);
  switch (torc_dtype_size((torc_dtype)y->dtype)) {
  case 1: return fill_as<uint8_t>(a, (uint8_t)bits, n);
  case 2: return fill_as<uint16_t>(a, (uint16_t)bits, n);
  case 4: return fill_as<uint32_t>(a, (uint32_t)bits, n);
  default: return fill_as<uint64_t>(a, bits, n);
  }
}

/* ---- where ---- */

/* y = c ? x : z element by element (c bool, nonzero is true), the bits of
 * x or z as they are; contiguous, or along a walk of the four operands. */
template <class U>
__global__ void k_where_contig(const uint8_t *c, const U *x, const U *z, U *y,
                               int64_t n) {
  for (int64_t i = first(); i < n; i += step())
    y[i] = c[i] ? x[i] : z[i];
}

template <class U>
__global__ void k_where_strided(const uint8_t *c, const U *x, const U *z,
                                U *y, int64_t n,
                                const __grid_constant__ torc_cuda_walk w) {
  int64_t o[4];
  for (int64_t i = first(); i < n; i += step()) {
    if (n < ((int64_t)1 << 31))
      torc_cuda_walk_at32(&w, 4, (uint32_t)i, o);
    else
      torc_cuda_walk_at(&w, 4, i, o);
    y[o[3]] = c[o[0]] ? x[o[1]] : z[o[2]];
  }
}

template <class U> int where_as(const torc_kernel_args *a, int64_t n) {
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const uint8_t *c = base<uint8_t>(&a->in[0]);
  const U *x = base<U>(&a->in[1]), *z = base<U>(&a->in[2]);
  U *y = base<U>(&a->out[0]);
  torc_cuda_walk w = walk_of(a, 3);
  if (torc_cuda_walk_contiguous(&w))
    k_where_contig<U><<<blocks(n), kBlock, 0, s>>>(c, x, z, y, n);
  else
    k_where_strided<U><<<blocks(n), kBlock, 0, s>>>(c, x, z, y, n, w);
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* where: in[0] bool, in[1], in[2] and out of one dtype, all of out's
 * shape (broadcast with stride 0). */
int k_where(const torc_kernel_args *a) {
  if (a->n_in != 3 || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'where': %d inputs and %d "
                                "outputs, expected 3 and 1",
                                a->n_in, a->n_out);
  const torc_ktensor *y = &a->out[0];
  bool ok = y->ndim >= 0 && y->ndim <= TORC_KERNEL_MAX_DIMS &&
            a->in[0].dtype == TORC_BOOL && a->in[1].dtype == y->dtype &&
            a->in[2].dtype == y->dtype &&
            torc_dtype_valid((torc_dtype)y->dtype);
  for (int k = 0; ok && k < 3; k++) {
    ok = a->in[k].ndim == y->ndim;
    for (int32_t d = 0; ok && d < y->ndim; d++)
      ok = a->in[k].shape[d] == y->shape[d];
  }
  if (!ok)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'where': dtypes %s, %s, %s -> %s "
                                "and ranks %d, %d, %d -> %d; expected bool and "
                                "three equal dtypes, all of the output's shape",
                                dtype_name(a->in[0].dtype),
                                dtype_name(a->in[1].dtype),
                                dtype_name(a->in[2].dtype),
                                dtype_name(y->dtype), (int)a->in[0].ndim,
                                (int)a->in[1].ndim, (int)a->in[2].ndim,
                                (int)y->ndim);
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  switch (torc_dtype_size((torc_dtype)y->dtype)) {
  case 1: return where_as<uint8_t>(a, n);
  case 2: return where_as<uint16_t>(a, n);
  case 4: return where_as<uint32_t>(a, n);
  default: return where_as<uint64_t>(a, n);
  }
}

/* One kernel serving every dtype of an op (fill_, where). */
#define SAME_FN(fn) {fn, fn, fn, fn, fn, fn, fn, fn}

#define ROW_CMP(name, set) {#name, TORC_CUDA_FNS_##set(k_cmp, f_##name)},
#define ROW_LNOT(name, set) {#name, TORC_CUDA_FNS_##set(k_lnot, f_##name)},
const op_row ew2_rows[] = {
    TORC_CUDA_CMP_OPS(ROW_CMP) TORC_CUDA_LNOT_OPS(ROW_LNOT){"fill_",
                                                          SAME_FN(k_fill)},
    {"where", SAME_FN(k_where)}};

} // namespace

extern "C" int torc_cuda__register_ew2(const torc_host *host,
                                       torc_plugin *self) {
  int st = reg_rows(host, self, ew2_rows, sizeof ew2_rows / sizeof ew2_rows[0]);
  if (st == TORC_OK && torc_cuda_ew_dtypes("copy") != TORC_CUDA_DT_ANY)
    st = torc_cuda__set_error(TORC_ERR_INTERNAL,
                              "cuda plugin: copy's dtype set is not ANY");
  if (st == TORC_OK)
    st = reg(host, self, "copy", TORC_DTYPE_ANY, k_copy);
  return st;
}
