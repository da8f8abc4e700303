/* plugins/cuda/ew.cu — the arithmetic elementwise kernels of the cuda
 * plugin: the unary, unary-with-params, binary and backward ops of
 * ew_body.h, each for every dtype its ref kernel has (f32 f64 f16 bf16,
 * and i32 i64 u8 bool where ref has them), one grid-stride kernel per
 * (op, dtype) over the body, with a vectorised contiguous path and a
 * strided one (broadcast inputs have stride 0), on the call's stream.
 * Device type "cuda".
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_internal.h"
#include "ew_body.h"
#include "ew_launch.h"

using namespace torc_cuda_ew;

namespace {

/* One functor per op: a float (f32, f16, bf16), a double (f64) and, for
 * the ops integers have, an int64 (i32 i64 u8 bool) overload; the _P
 * ones carry the op's params in each compute type's form. */
#define UNARY_FN(name, set)                                                    \
  struct f_##name {                                                            \
    __device__ float operator()(float x) const {                               \
      return torc_cuda_b_##name(x);                                            \
    }                                                                          \
    __device__ double operator()(double x) const {                             \
      return torc_cuda_bd_##name(x);                                           \
    }                                                                          \
    TORC_CUDA_INT_##set(__device__ int64_t operator()(int64_t x) const {       \
      return torc_cuda_bi_##name(x);                                           \
    })                                                                         \
  };
#define UNARY_P_FN(name, set)                                                  \
  struct f_##name {                                                            \
    torc_cuda_sp p;                                                            \
    torc_cuda_spd pd;                                                          \
    torc_cuda_spi pi;                                                          \
    __device__ float operator()(float x) const {                               \
      return torc_cuda_b_##name(x, p);                                         \
    }                                                                          \
    __device__ double operator()(double x) const {                             \
      return torc_cuda_bd_##name(x, pd);                                       \
    }                                                                          \
    TORC_CUDA_INT_##set(__device__ int64_t operator()(int64_t x) const {       \
      return torc_cuda_bi_##name(x, pi);                                       \
    })                                                                         \
  };
#define BINARY_FN(name, set)                                                   \
  struct f_##name {                                                            \
    __device__ float operator()(float x, float y) const {                      \
      return torc_cuda_b_##name(x, y);                                         \
    }                                                                          \
    __device__ double operator()(double x, double y) const {                   \
      return torc_cuda_bd_##name(x, y);                                        \
    }                                                                          \
    TORC_CUDA_INT_##set(                                                       \
        __device__ int64_t operator()(int64_t x, int64_t y) const {            \
          return torc_cuda_bi_##name(x, y);                                    \
        })                                                                     \
  };
#define BINARY_P_FN(name, set)                                                 \
  struct f_##name {                                                            \
    torc_cuda_sp p;                                                            \
    torc_cuda_spd pd;                                                          \
    torc_cuda_spi pi;                                                          \
    __device__ float operator()(float x, float y) const {                      \
      return torc_cuda_b_##name(x, y, p);                                      \
    }                                                                          \
    __device__ double operator()(double x, double y) const {                   \
      return torc_cuda_bd_##name(x, y, pd);                                    \
    }                                                                          \
  };
TORC_CUDA_UNARY_OPS(UNARY_FN)
TORC_CUDA_UNARY_P_OPS(UNARY_P_FN)
TORC_CUDA_BINARY_OPS(BINARY_FN)
TORC_CUDA_BINARY_P_OPS(BINARY_P_FN)

/* The params of a call in the three forms the functors hold. */
template <class F> F with_params(const torc_kernel_args *a) {
  const torc_scalar_params *p = (const torc_scalar_params *)a->params;
  F f;
  f.p.a = (float)p->a;
  f.p.b = (float)p->b;
  f.p.flags = p->flags;
  f.pd.a = p->a;
  f.pd.b = p->b;
  f.pd.flags = p->flags;
  f.pi.ia = p->ia;
  f.pi.ib = p->ib;
  f.pi.flags = p->flags;
  return f;
}

/* The kernel of (op F, dtype DT): out of DT, as every input. */
template <class F, int DT> int k_unary(const torc_kernel_args *a) {
  return launch<el<DT>, el<DT>, F, 1>(a, F(), DT, DT, 0);
}
template <class F, int DT> int k_binary(const torc_kernel_args *a) {
  return launch<el<DT>, el<DT>, F, 2>(a, F(), DT, DT, 0);
}
/* With params: checked before they are read. */
template <class F, int DT> int k_unary_p(const torc_kernel_args *a) {
  int st = check(a, 1, DT, DT, sizeof(torc_scalar_params));
  return st != TORC_OK ? st
                       : launch<el<DT>, el<DT>, F, 1>(
                             a, with_params<F>(a), DT, DT,
                             sizeof(torc_scalar_params));
}
template <class F, int DT> int k_binary_p(const torc_kernel_args *a) {
  int st = check(a, 2, DT, DT, sizeof(torc_scalar_params));
  return st != TORC_OK ? st
                       : launch<el<DT>, el<DT>, F, 2>(
                             a, with_params<F>(a), DT, DT,
                             sizeof(torc_scalar_params));
}

#define ROW_U(name, set) {#name, TORC_CUDA_FNS_##set(k_unary, f_##name)},
#define ROW_UP(name, set) {#name, TORC_CUDA_FNS_##set(k_unary_p, f_##name)},
#define ROW_B(name, set) {#name, TORC_CUDA_FNS_##set(k_binary, f_##name)},
#define ROW_BP(name, set) {#name, TORC_CUDA_FNS_##set(k_binary_p, f_##name)},
const op_row ew_rows[] = {
    TORC_CUDA_UNARY_OPS(ROW_U) TORC_CUDA_UNARY_P_OPS(ROW_UP)
        TORC_CUDA_BINARY_OPS(ROW_B) TORC_CUDA_BINARY_P_OPS(ROW_BP)};

} // namespace

extern "C" int torc_cuda__register_ew(const torc_host *host,
                                      torc_plugin *self) {
  return reg_rows(host, self, ew_rows, sizeof ew_rows / sizeof ew_rows[0]);
}
