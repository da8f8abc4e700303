/* plugins/cuda/ew.cu — the f32 elementwise kernels of the cuda plugin: one
 * grid-stride kernel per op over ew_body.h's bodies, a contiguous fast path
 * and a strided one (broadcast inputs have stride 0), on the device's
 * stream. Registered for device type "cuda", dtype f32.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_internal.h"
#include "ew_body.h"

namespace {

const int kBlock = 256;
const int64_t kMaxBlocks = 8192; /* the grid-stride loop covers the rest */

/* The walk of a strided call: the output's shape and, per operand (inputs
 * then the output), its strides in elements. */
struct walk {
  int32_t ndim;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t st[3][TORC_KERNEL_MAX_DIMS];
};

/* The offsets of element i (row-major over the shape) in each of the n
 * operands. */
__device__ inline void offsets(const walk &w, int64_t i, int n, int64_t *off) {
  for (int k = 0; k < n; k++)
    off[k] = 0;
  for (int d = w.ndim - 1; d >= 0; d--) {
    int64_t idx = i % w.shape[d];
    i /= w.shape[d];
    for (int k = 0; k < n; k++)
      off[k] += idx * w.st[k][d];
  }
}

__device__ inline int64_t first() {
  return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline int64_t step() { return (int64_t)blockDim.x * gridDim.x; }

/* Not __restrict__: an in-place op passes its input as the output. */
template <class F>
__global__ void k_unary(const float *x, float *y, int64_t n, F f) {
  for (int64_t i = first(); i < n; i += step())
    y[i] = f(x[i]);
}

template <class F>
__global__ void k_unary_strided(const float *x, float *y, int64_t n, walk w,
                                F f) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[2];
    offsets(w, i, 2, o);
    y[o[1]] = f(x[o[0]]);
  }
}

template <class F>
__global__ void k_binary(const float *a, const float *b, float *y, int64_t n,
                         F f) {
  for (int64_t i = first(); i < n; i += step())
    y[i] = f(a[i], b[i]);
}

template <class F>
__global__ void k_binary_strided(const float *a, const float *b, float *y,
                                 int64_t n, walk w, F f) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[3];
    offsets(w, i, 3, o);
    y[o[2]] = f(a[o[0]], b[o[1]]);
  }
}

/* One functor per body: the plain ones take the element(s), the _P ones
 * carry the op's params. */
#define UNARY_FN(name)                                                         \
  struct f_##name {                                                            \
    __device__ float operator()(float x) const {                               \
      return torc_cuda_b_##name(x);                                            \
    }                                                                          \
  };
#define UNARY_P_FN(name)                                                       \
  struct f_##name {                                                            \
    torc_cuda_sp p;                                                            \
    __device__ float operator()(float x) const {                               \
      return torc_cuda_b_##name(x, p);                                         \
    }                                                                          \
  };
#define BINARY_FN(name)                                                        \
  struct f_##name {                                                            \
    __device__ float operator()(float x, float y) const {                      \
      return torc_cuda_b_##name(x, y);                                         \
    }                                                                          \
  };
#define BINARY_P_FN(name)                                                      \
  struct f_##name {                                                            \
    torc_cuda_sp p;                                                            \
    __device__ float operator()(float x, float y) const {                      \
      return torc_cuda_b_##name(x, y, p);                                      \
    }                                                                          \
  };
TORC_CUDA_UNARY_OPS(UNARY_FN)
TORC_CUDA_UNARY_P_OPS(UNARY_P_FN)
TORC_CUDA_BINARY_OPS(BINARY_FN)
TORC_CUDA_BINARY_P_OPS(BINARY_P_FN)

int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

/* Row-major contiguous (dims of size 1 may have any stride). */
bool contiguous(const torc_ktensor *t) {
  int64_t want = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != want)
      return false;
    want *= t->shape[d];
  }
  return true;
}

float *base(const torc_ktensor *t) { return (float *)t->data + t->offset; }

/* The operands' count and dtype, the params when the op takes them, and
 * the shapes (each operand has the output's, as the core broadcast them):
 * anything else is a call the core never makes. */
int check(const torc_kernel_args *a, int n_in, bool params) {
  if (a->n_in != n_in || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': %d inputs and %d outputs, "
                                "expected %d and 1",
                                a->op, a->n_in, a->n_out, n_in);
  if (params && (a->params == NULL ||
                 a->params_size < sizeof(torc_scalar_params)))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': missing its params", a->op);
  const torc_ktensor *y = &a->out[0];
  for (int k = 0; k <= n_in; k++) {
    const torc_ktensor *t = k < n_in ? &a->in[k] : y;
    bool same = t->dtype == TORC_F32 && t->ndim == y->ndim;
    for (int32_t d = 0; same && d < y->ndim; d++)
      same = t->shape[d] == y->shape[d];
    if (!same)
      return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                  "cuda kernel '%s': operand %d is not an f32 "
                                  "tensor of the output's shape",
                                  a->op, k);
  }
  return TORC_OK;
}

torc_cuda_sp sp_of(const torc_kernel_args *a) {
  const torc_scalar_params *p = (const torc_scalar_params *)a->params;
  torc_cuda_sp s;
  s.a = (float)p->a;
  s.b = (float)p->b;
  s.flags = p->flags;
  return s;
}

unsigned blocks(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

walk walk_of(const torc_kernel_args *a, int n_in) {
  walk w;
  const torc_ktensor *y = &a->out[0];
  w.ndim = y->ndim;
  for (int32_t d = 0; d < y->ndim; d++) {
    w.shape[d] = y->shape[d];
    for (int k = 0; k <= n_in; k++)
      w.st[k][d] = (k < n_in ? &a->in[k] : y)->strides[d];
  }
  return w;
}

template <class F>
int run_unary(const torc_kernel_args *a, F f, bool params) {
  int st = check(a, 1, params);
  if (st != TORC_OK)
    return st;
  int64_t n = numel(&a->out[0]);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if (contiguous(x) && contiguous(y))
    k_unary<<<blocks(n), kBlock, 0, s>>>(base(x), base(y), n, f);
  else
    k_unary_strided<<<blocks(n), kBlock, 0, s>>>(base(x), base(y), n,
                                                 walk_of(a, 1), f);
  return torc_cuda__after_launch(a->device_index, a->op);
}

template <class F>
int run_binary(const torc_kernel_args *a, F f, bool params) {
  int st = check(a, 2, params);
  if (st != TORC_OK)
    return st;
  int64_t n = numel(&a->out[0]);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const torc_ktensor *x = &a->in[0], *z = &a->in[1], *y = &a->out[0];
  if (contiguous(x) && contiguous(z) && contiguous(y))
    k_binary<<<blocks(n), kBlock, 0, s>>>(base(x), base(z), base(y), n, f);
  else
    k_binary_strided<<<blocks(n), kBlock, 0, s>>>(base(x), base(z), base(y),
                                                  n, walk_of(a, 2), f);
  return torc_cuda__after_launch(a->device_index, a->op);
}

#define UNARY_K(name)                                                          \
  int k_##name(const torc_kernel_args *a) {                                    \
    return run_unary(a, f_##name(), false);                                    \
  }
#define UNARY_P_K(name)                                                        \
  int k_##name(const torc_kernel_args *a) {                                    \
    int st = check(a, 1, true);                                                \
    return st != TORC_OK ? st : run_unary(a, f_##name{sp_of(a)}, true);        \
  }
#define BINARY_K(name)                                                         \
  int k_##name(const torc_kernel_args *a) {                                    \
    return run_binary(a, f_##name(), false);                                   \
  }
#define BINARY_P_K(name)                                                       \
  int k_##name(const torc_kernel_args *a) {                                    \
    int st = check(a, 2, true);                                                \
    return st != TORC_OK ? st : run_binary(a, f_##name{sp_of(a)}, true);       \
  }
TORC_CUDA_UNARY_OPS(UNARY_K)
TORC_CUDA_UNARY_P_OPS(UNARY_P_K)
TORC_CUDA_BINARY_OPS(BINARY_K)
TORC_CUDA_BINARY_P_OPS(BINARY_P_K)

struct ew_kernel {
  const char *op;
  torc_kernel_fn fn;
};

#define ROW(name) {#name, k_##name},
const ew_kernel ew_kernels[] = {
    TORC_CUDA_UNARY_OPS(ROW) TORC_CUDA_UNARY_P_OPS(ROW)
        TORC_CUDA_BINARY_OPS(ROW) TORC_CUDA_BINARY_P_OPS(ROW)};

} // namespace

extern "C" int torc_cuda__register_ew(const torc_host *host,
                                      torc_plugin *self) {
  for (size_t i = 0; i < sizeof ew_kernels / sizeof ew_kernels[0]; i++) {
    torc_kernel_reg reg = {};
    reg.struct_size = sizeof reg;
    reg.device_type = "cuda";
    reg.op = ew_kernels[i].op;
    reg.dtype = TORC_F32;
    reg.priority = 0;
    reg.fn = ew_kernels[i].fn;
    reg.data = NULL;
    reg.flags = 0;
    int st = host->register_kernel(self, &reg);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
