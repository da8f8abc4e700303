/* plugins/cuda/ew_launch.h — what the elementwise kernels of ew.cu and
 * ew2.cu share (C++, nvcc only): the element types (storage, load to the
 * compute type, rounded store), one contiguous grid-stride kernel (with a
 * 128-bit vector path) and one strided kernel over 1 or 2 inputs and a
 * functor, and the checks and launch of a call on the core's stream.
 */
#ifndef TORC_CUDA_EW_LAUNCH_H
#define TORC_CUDA_EW_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_internal.h"
#include "ew_body.h"

namespace torc_cuda_ew {

const int kBlock = 256;
const int64_t kMaxBlocks = 8192; /* the grid-stride loop covers the rest */

__device__ inline int64_t first() {
  return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline int64_t step() { return (int64_t)blockDim.x * gridDim.x; }

/* ---- element types: T the storage, C the compute type; load is exact,
 * store rounds to nearest even (floats) or keeps the low bits (integers);
 * store_f and store_i are copy's conversions from double and int64 ---- */

template <int DT> struct el;
template <> struct el<TORC_F32> {
  typedef float T;
  typedef float C;
  static const bool is_float = true;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
  __device__ static float store_f(double v) { return (float)v; }
  __device__ static float store_i(int64_t v) { return torc_cuda_i2f(v); }
};
template <> struct el<TORC_F64> {
  typedef double T;
  typedef double C;
  static const bool is_float = true;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
  __device__ static double store_f(double v) { return v; }
  __device__ static double store_i(int64_t v) { return (double)v; }
};
template <> struct el<TORC_F16> {
  typedef uint16_t T;
  typedef float C;
  static const bool is_float = true;
  __device__ static float load(uint16_t v) {
    return __half2float(__ushort_as_half(v));
  }
  __device__ static uint16_t store(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
  __device__ static uint16_t store_f(double v) { return store((float)v); }
  __device__ static uint16_t store_i(int64_t v) {
    return store(torc_cuda_i2f(v));
  }
};
template <> struct el<TORC_BF16> {
  typedef uint16_t T;
  typedef float C;
  static const bool is_float = true;
  __device__ static float load(uint16_t v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
  __device__ static uint16_t store(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
  __device__ static uint16_t store_f(double v) { return store((float)v); }
  __device__ static uint16_t store_i(int64_t v) {
    return store(torc_cuda_i2f(v));
  }
};
template <> struct el<TORC_I32> {
  typedef int32_t T;
  typedef int64_t C;
  static const bool is_float = false;
  __device__ static int64_t load(int32_t v) { return v; }
  __device__ static int32_t store(int64_t v) { return torc_cuda_to_i32(v); }
  __device__ static int32_t store_f(double v) {
    return store(torc_cuda_f2i(v));
  }
  __device__ static int32_t store_i(int64_t v) { return store(v); }
};
template <> struct el<TORC_I64> {
  typedef int64_t T;
  typedef int64_t C;
  static const bool is_float = false;
  __device__ static int64_t load(int64_t v) { return v; }
  __device__ static int64_t store(int64_t v) { return v; }
  __device__ static int64_t store_f(double v) { return torc_cuda_f2i(v); }
  __device__ static int64_t store_i(int64_t v) { return v; }
};
template <> struct el<TORC_U8> {
  typedef uint8_t T;
  typedef int64_t C;
  static const bool is_float = false;
  __device__ static int64_t load(uint8_t v) { return v; }
  __device__ static uint8_t store(int64_t v) { return torc_cuda_to_u8(v); }
  __device__ static uint8_t store_f(double v) {
    return store(torc_cuda_f2i(v));
  }
  __device__ static uint8_t store_i(int64_t v) { return store(v); }
};
/* bool: any nonzero byte loads as 1; NaN stores as true (v != 0). */
template <> struct el<TORC_BOOL> {
  typedef uint8_t T;
  typedef int64_t C;
  static const bool is_float = false;
  __device__ static int64_t load(uint8_t v) { return v != 0; }
  __device__ static uint8_t store(int64_t v) { return torc_cuda_to_bool(v); }
  __device__ static uint8_t store_f(double v) { return v != 0; }
  __device__ static uint8_t store_i(int64_t v) { return v != 0; }
};

/* ---- the kernels ---- */

/* W elements of T, loaded and stored as one 16-byte (or narrower)
 * access. */
template <class T, int W> struct alignas(sizeof(T) * W) pack {
  T v[W];
};

/* The functor over the loaded inputs (b unused when NIN is 1). */
template <class EI, class F, int NIN>
__device__ inline auto call(const F &f, typename EI::T a, typename EI::T b) {
  if constexpr (NIN == 1) {
    (void)b;
    return f(EI::load(a));
  } else {
    return f(EI::load(a), EI::load(b));
  }
}

/* y[i] = f(a[i] (, b[i])) for contiguous operands: with vec, each thread
 * moves W elements per step as packs (pointers aligned, see
 * torc_cuda_vec_ok), then the scalar tail. Not __restrict__: an in-place
 * op passes its input as the output. */
template <class EI, class EO, class F, int NIN>
__global__ void k_contig(const typename EI::T *a, const typename EI::T *b,
                         typename EO::T *y, int64_t n, int vec, F f) {
  typedef typename EI::T TI;
  typedef typename EO::T TO;
  constexpr int W = TORC_CUDA_VEC_BYTES /
                    (int)(sizeof(TI) > sizeof(TO) ? sizeof(TI) : sizeof(TO));
  int64_t done = 0;
  if (vec) {
    int64_t nv = n / W;
    const pack<TI, W> *va = reinterpret_cast<const pack<TI, W> *>(a);
    const pack<TI, W> *vb = reinterpret_cast<const pack<TI, W> *>(b);
    pack<TO, W> *vy = reinterpret_cast<pack<TO, W> *>(y);
    for (int64_t v = first(); v < nv; v += step()) {
      pack<TI, W> pa = va[v], pb;
      if constexpr (NIN == 2)
        pb = vb[v];
      else
        pb = pa;
      pack<TO, W> r;
#pragma unroll
      for (int j = 0; j < W; j++)
        r.v[j] = EO::store(call<EI, F, NIN>(f, pa.v[j], pb.v[j]));
      vy[v] = r;
    }
    done = nv * W;
  }
  for (int64_t i = done + first(); i < n; i += step())
    y[i] = EO::store(call<EI, F, NIN>(f, a[i], NIN == 2 ? b[i] : a[i]));
}

/* The same over a strided walk (inputs, then the output): the index
 * arithmetic in 32 bits when n < 2^31. */
template <class EI, class EO, class F, int NIN>
__global__ void k_strided(const typename EI::T *a, const typename EI::T *b,
                          typename EO::T *y, int64_t n,
                          const __grid_constant__ torc_cuda_walk w, F f) {
  int64_t o[NIN + 1];
  if (n < ((int64_t)1 << 31)) {
    for (int64_t i = first(); i < n; i += step()) {
      torc_cuda_walk_at32(&w, NIN + 1, (uint32_t)i, o);
      y[o[NIN]] = EO::store(
          call<EI, F, NIN>(f, a[o[0]], NIN == 2 ? b[o[NIN - 1]] : a[o[0]]));
    }
  } else {
    for (int64_t i = first(); i < n; i += step()) {
      torc_cuda_walk_at(&w, NIN + 1, i, o);
      y[o[NIN]] = EO::store(
          call<EI, F, NIN>(f, a[o[0]], NIN == 2 ? b[o[NIN - 1]] : a[o[0]]));
    }
  }
}

/* ---- the host side of a call ---- */

inline const char *dtype_name(int dt) {
  static const char *const names[TORC_DTYPE_COUNT] = {
      "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};
  return dt >= 0 && dt < TORC_DTYPE_COUNT ? names[dt] : "invalid";
}

inline int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

inline unsigned blocks(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  return (unsigned)(b < 1 ? 1 : b < kMaxBlocks ? b : kMaxBlocks);
}

/* The first element of t, as a T pointer. */
template <class T> inline T *base(const torc_ktensor *t) {
  return (T *)t->data + t->offset;
}

/* The operands' counts, each input of dtype din and the output of dout,
 * every operand of the output's shape (the core broadcast them), and the
 * params when the op takes them: anything else is a call the core never
 * makes. */
inline int check(const torc_kernel_args *a, int n_in, int din, int dout,
                 size_t params_size) {
  if (a->n_in != n_in || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': %d inputs and %d outputs, "
                                "expected %d and 1",
                                a->op, a->n_in, a->n_out, n_in);
  if (params_size > 0 && (a->params == NULL || a->params_size < params_size))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': %zu bytes of params, "
                                "expected %zu",
                                a->op, a->params ? a->params_size : 0,
                                params_size);
  const torc_ktensor *y = &a->out[0];
  if (y->ndim < 0 || y->ndim > TORC_KERNEL_MAX_DIMS)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': the output has %d dims, "
                                "expected 0 to %d",
                                a->op, (int)y->ndim, TORC_KERNEL_MAX_DIMS);
  for (int k = 0; k <= n_in; k++) {
    const torc_ktensor *t = k < n_in ? &a->in[k] : y;
    int want = k < n_in ? din : dout;
    bool same = t->dtype == want && t->ndim == y->ndim;
    for (int32_t d = 0; same && d < y->ndim; d++)
      same = t->shape[d] == y->shape[d];
    if (!same)
      return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                  "cuda kernel '%s': operand %d is a %s tensor "
                                  "of %d dims; expected %s of the output's "
                                  "shape (%d dims)",
                                  a->op, k, dtype_name(t->dtype), (int)t->ndim,
                                  dtype_name(want), (int)y->ndim);
  }
  return TORC_OK;
}

/* The walk of a call's n_in inputs and its output over the output's
 * shape. */
inline torc_cuda_walk walk_of(const torc_kernel_args *a, int n_in) {
  const int64_t *st[TORC_CUDA_WALK_OPS];
  for (int k = 0; k < n_in; k++)
    st[k] = a->in[k].strides;
  st[n_in] = a->out[0].strides;
  torc_cuda_walk w;
  torc_cuda_walk_init(&w, a->out[0].ndim, a->out[0].shape, n_in + 1, st);
  return w;
}

/* Checks a call of NIN inputs of dtype din into an output of dtype dout,
 * and queues y = f(inputs) on the call's stream: the contiguous kernel
 * (vectorised when torc_cuda_vec_ok) when the walk collapses to one
 * stride-1 dim, else the strided one. */
template <class EI, class EO, class F, int NIN>
int launch(const torc_kernel_args *a, const F &f, int din, int dout,
           size_t params_size) {
  typedef typename EI::T TI;
  typedef typename EO::T TO;
  int st = check(a, NIN, din, dout, params_size);
  if (st != TORC_OK)
    return st;
  int64_t n = numel(&a->out[0]);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const TI *pa = base<TI>(&a->in[0]);
  const TI *pb = NIN == 2 ? base<TI>(&a->in[NIN - 1]) : pa;
  TO *py = base<TO>(&a->out[0]);
  torc_cuda_walk w = walk_of(a, NIN);
  if (torc_cuda_walk_contiguous(&w)) {
    uintptr_t addr[3] = {(uintptr_t)pa, (uintptr_t)pb, (uintptr_t)py};
    size_t es[3] = {sizeof(TI), sizeof(TI), sizeof(TO)};
    int width = torc_cuda_vec_width(sizeof(TI) > sizeof(TO) ? sizeof(TI)
                                                            : sizeof(TO));
    int vec = torc_cuda_vec_ok(n, width, 3, addr, es);
    k_contig<EI, EO, F, NIN>
        <<<blocks(vec ? n / width : n), kBlock, 0, s>>>(pa, pb, py, n, vec, f);
  } else {
    k_strided<EI, EO, F, NIN><<<blocks(n), kBlock, 0, s>>>(pa, pb, py, n, w,
                                                           f);
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* Registers fn for (op, dtype) on device type "cuda". */
inline int reg(const torc_host *host, torc_plugin *self, const char *op,
               int dtype, torc_kernel_fn fn) {
  torc_kernel_reg r = {};
  r.struct_size = sizeof r;
  r.device_type = "cuda";
  r.op = op;
  r.dtype = dtype;
  r.priority = 0;
  r.fn = fn;
  r.data = NULL;
  r.flags = 0;
  return host->register_kernel(self, &r);
}

/* One op's kernels by dtype (NULL where it has none), registered where
 * the op's mask (torc_cuda_ew_dtypes) has the dtype; a table and a mask
 * that disagree are an internal error. */
struct op_row {
  const char *op;
  torc_kernel_fn fn[TORC_DTYPE_COUNT];
};

inline int reg_rows(const torc_host *host, torc_plugin *self,
                    const op_row *rows, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t mask = torc_cuda_ew_dtypes(rows[i].op);
    for (int dt = 0; dt < TORC_DTYPE_COUNT; dt++) {
      bool want = (mask >> dt) & 1u, have = rows[i].fn[dt] != NULL;
      if (want != have)
        return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                    "cuda plugin: op '%s' %s a kernel for "
                                    "dtype %s that its dtype set %s",
                                    rows[i].op, have ? "has" : "lacks",
                                    dtype_name(dt),
                                    have ? "leaves out" : "names");
      if (have) {
        int st = reg(host, self, rows[i].op, dt, rows[i].fn[dt]);
        if (st != TORC_OK)
          return st;
      }
    }
  }
  return TORC_OK;
}

/* The kernels of an op by dtype set: R<F, DT> for each dtype of the set. */
#define TORC_CUDA_FNS_FLOATS(R, F)                                             \
  {R<F, TORC_F32>, R<F, TORC_F64>, R<F, TORC_F16>, R<F, TORC_BF16>,            \
   NULL,           NULL,           NULL,           NULL}
#define TORC_CUDA_FNS_NUMERIC(R, F)                                            \
  {R<F, TORC_F32>, R<F, TORC_F64>, R<F, TORC_F16>, R<F, TORC_BF16>,            \
   R<F, TORC_I32>, R<F, TORC_I64>, R<F, TORC_U8>,  NULL}
#define TORC_CUDA_FNS_ALL(R, F)                                                \
  {R<F, TORC_F32>, R<F, TORC_F64>, R<F, TORC_F16>, R<F, TORC_BF16>,            \
   R<F, TORC_I32>, R<F, TORC_I64>, R<F, TORC_U8>,  R<F, TORC_BOOL>}

/* The integer overload of a functor, for the sets that have integers. */
#define TORC_CUDA_INT_FLOATS(decl)
#define TORC_CUDA_INT_NUMERIC(decl) decl
#define TORC_CUDA_INT_ALL(decl) decl

} // namespace torc_cuda_ew

#endif /* TORC_CUDA_EW_LAUNCH_H */
