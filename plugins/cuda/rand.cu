/* plugins/cuda/rand.cu — the random ops of the cuda plugin: uniform_ and
 * normal_ (f32, f64, f16, bf16), randint_ (every non-bool dtype) and
 * dropout (f32, f64, f16, bf16), one
 * grid-stride kernel each over rand_body.h's bodies, so that element i
 * gets ref's value for the same seed and offset. Device type "cuda".
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_internal.h"
#include "rand_body.h"

namespace {

const int kBlock = 256;
const int64_t kMaxBlocks = 8192; /* the grid-stride loop covers the rest */

/* The output's shape and strides: element i (row-major) lives at
 * offset(i); a contiguous output skips the walk. */
struct out_walk {
  int32_t ndim;
  bool contiguous;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t st[TORC_KERNEL_MAX_DIMS];
};

__device__ inline int64_t offset(const out_walk &w, int64_t i) {
  if (w.contiguous)
    return i;
  int64_t off = 0;
  for (int d = w.ndim - 1; d >= 0; d--) {
    off += (i % w.shape[d]) * w.st[d];
    i /= w.shape[d];
  }
  return off;
}

__device__ inline int64_t first() {
  return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline int64_t step() { return (int64_t)blockDim.x * gridDim.x; }

/* The op's draw for element counter n, as the output's type. */
template <class T> struct uniform_fn;
template <> struct uniform_fn<float> {
  __device__ static float at(const torc_random_params &p, uint64_t n) {
    return torc_cuda_rand_uniform_f32(p.seed, n, p.a, p.b);
  }
};
template <> struct uniform_fn<double> {
  __device__ static double at(const torc_random_params &p, uint64_t n) {
    return torc_cuda_rand_uniform_f64(p.seed, n, p.a, p.b);
  }
};
template <class T> struct normal_fn {
  __device__ static T at(const torc_random_params &p, uint64_t n) {
    return (T)torc_cuda_rand_normal(p.seed, n, p.a, p.b);
  }
};
template <class T> struct randint_fn {
  __device__ static T at(const torc_random_params &p, uint64_t n) {
    /* i32 and u8 keep the low bits, as ref's store. */
    return (T)(uint64_t)torc_philox_randint(p.seed, n, p.low, p.high);
  }
};
template <> struct randint_fn<float> {
  __device__ static float at(const torc_random_params &p, uint64_t n) {
    return torc_i64_to_f32(torc_philox_randint(p.seed, n, p.low, p.high));
  }
};
template <> struct randint_fn<double> {
  __device__ static double at(const torc_random_params &p, uint64_t n) {
    return (double)torc_philox_randint(p.seed, n, p.low, p.high);
  }
};

/* 16-bit outputs, stored as their bits: BF is 1 for bf16, 0 for f16. */
template <int BF> struct uniform16_fn {
  __device__ static uint16_t at(const torc_random_params &p, uint64_t n) {
    return torc_cuda_rand_uniform_16(p.seed, n, p.a, p.b, BF);
  }
};
template <int BF> struct normal16_fn {
  __device__ static uint16_t at(const torc_random_params &p, uint64_t n) {
    return torc_cuda_rand_to16(torc_cuda_rand_normal(p.seed, n, p.a, p.b), BF);
  }
};
template <int BF> struct randint16_fn {
  __device__ static uint16_t at(const torc_random_params &p, uint64_t n) {
    float f =
        torc_i64_to_f32(torc_philox_randint(p.seed, n, p.low, p.high));
    return BF ? torc_f32_to_bf16(f) : torc_f32_to_f16(f);
  }
};

template <class T, class F>
__global__ void k_draw(T *y, int64_t n, out_walk w, torc_random_params p) {
  for (int64_t i = first(); i < n; i += step())
    y[offset(w, i)] = F::at(p, p.offset + (uint64_t)i);
}

template <class T>
__global__ void k_dropout(const T *x, T *y, T *mask, int64_t n, uint64_t seed,
                          uint64_t off, double p, double scale) {
  for (int64_t i = first(); i < n; i += step()) {
    double k = torc_cuda_rand_keep(seed, off + (uint64_t)i, p, scale);
    mask[i] = (T)k;
    y[i] = (T)((double)x[i] * k);
  }
}

int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

bool contiguous(const torc_ktensor *t) {
  int64_t want = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->strides[d] != want)
      return false;
    want *= t->shape[d];
  }
  return true;
}

unsigned blocks(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

template <class T> T *base(const torc_ktensor *t) {
  return (T *)t->data + t->offset;
}

template <class T, class F> int run_draw(const torc_kernel_args *a) {
  if (a->n_in != 0 || a->n_out != 1 || a->params == NULL ||
      a->params_size < sizeof(torc_random_params))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': expected no inputs, one "
                                "output and torc_random_params",
                                a->op);
  const torc_random_params *p = (const torc_random_params *)a->params;
  if (a->op[0] == 'r' && p->high <= p->low)
    return torc_cuda__set_error(TORC_ERR_INVALID,
                                "randint_ needs low < high; got low %lld, "
                                "high %lld",
                                (long long)p->low, (long long)p->high);
  const torc_ktensor *y = &a->out[0];
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  out_walk w;
  w.ndim = y->ndim;
  w.contiguous = contiguous(y);
  for (int32_t d = 0; d < y->ndim; d++) {
    w.shape[d] = y->shape[d];
    w.st[d] = y->strides[d];
  }
  k_draw<T, F><<<blocks(n), kBlock, 0, s>>>(base<T>(y), n, w, *p);
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* dropout over 16-bit floats: x widened exactly, x * factor in double,
 * rounded once to f32 and then to 16 bits, as ref's store. */
template <int BF>
__global__ void k_dropout16(const uint16_t *x, uint16_t *y, uint16_t *mask,
                            int64_t n, uint64_t seed, uint64_t off, double p,
                            double scale) {
  for (int64_t i = first(); i < n; i += step()) {
    double k = torc_cuda_rand_keep(seed, off + (uint64_t)i, p, scale);
    mask[i] = torc_cuda_rand_to16(k, BF);
    y[i] = torc_cuda_rand_to16(torc_cuda_rand_from16(x[i], BF) * k, BF);
  }
}

/* The dropout kernel of storage type T (16-bit types: BF chooses). */
template <class T, int BF> struct dropout_launch {
  static void go(unsigned nb, cudaStream_t s, const T *x, T *y, T *m,
                 int64_t n, uint64_t seed, uint64_t off, double p,
                 double scale) {
    k_dropout<T><<<nb, kBlock, 0, s>>>(x, y, m, n, seed, off, p, scale);
  }
};
template <int BF> struct dropout_launch<uint16_t, BF> {
  static void go(unsigned nb, cudaStream_t s, const uint16_t *x, uint16_t *y,
                 uint16_t *m, int64_t n, uint64_t seed, uint64_t off,
                 double p, double scale) {
    k_dropout16<BF><<<nb, kBlock, 0, s>>>(x, y, m, n, seed, off, p, scale);
  }
};

template <class T, int BF = 0> int run_dropout(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out != 2 || a->params == NULL ||
      a->params_size < sizeof(torc_dropout_kparams))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'dropout': expected 1 input, 2 "
                                "outputs and torc_dropout_kparams");
  const torc_ktensor *x = &a->in[0], *y = &a->out[0], *m = &a->out[1];
  if (!contiguous(x) || !contiguous(y) || !contiguous(m))
    return TORC_KERNEL_DECLINED; /* registered contiguous: not reached */
  const torc_dropout_kparams *p = (const torc_dropout_kparams *)a->params;
  int64_t n = numel(x);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  double scale = p->p >= 1 ? 0 : 1.0 / (1.0 - p->p); /* as ref */
  dropout_launch<T, BF>::go(blocks(n), s, base<T>(x), base<T>(y), base<T>(m),
                            n, p->seed, p->offset, p->p, scale);
  return torc_cuda__after_launch(a->device_index, a->op);
}

struct rand_kernel {
  const char *op;
  int32_t dtype;
  torc_kernel_fn fn;
  uint32_t flags;
};

const rand_kernel rand_kernels[] = {
    {"uniform_", TORC_F32, run_draw<float, uniform_fn<float>>, 0},
    {"uniform_", TORC_F64, run_draw<double, uniform_fn<double>>, 0},
    {"normal_", TORC_F32, run_draw<float, normal_fn<float>>, 0},
    {"normal_", TORC_F64, run_draw<double, normal_fn<double>>, 0},
    {"uniform_", TORC_F16, run_draw<uint16_t, uniform16_fn<0>>, 0},
    {"uniform_", TORC_BF16, run_draw<uint16_t, uniform16_fn<1>>, 0},
    {"normal_", TORC_F16, run_draw<uint16_t, normal16_fn<0>>, 0},
    {"normal_", TORC_BF16, run_draw<uint16_t, normal16_fn<1>>, 0},
    {"randint_", TORC_I32, run_draw<int32_t, randint_fn<int32_t>>, 0},
    {"randint_", TORC_I64, run_draw<int64_t, randint_fn<int64_t>>, 0},
    {"randint_", TORC_U8, run_draw<uint8_t, randint_fn<uint8_t>>, 0},
    {"randint_", TORC_F32, run_draw<float, randint_fn<float>>, 0},
    {"randint_", TORC_F64, run_draw<double, randint_fn<double>>, 0},
    {"randint_", TORC_F16, run_draw<uint16_t, randint16_fn<0>>, 0},
    {"randint_", TORC_BF16, run_draw<uint16_t, randint16_fn<1>>, 0},
    {"dropout", TORC_F32, run_dropout<float>, TORC_KERNEL_CONTIGUOUS},
    {"dropout", TORC_F64, run_dropout<double>, TORC_KERNEL_CONTIGUOUS},
    {"dropout", TORC_F16, run_dropout<uint16_t, 0>, TORC_KERNEL_CONTIGUOUS},
    {"dropout", TORC_BF16, run_dropout<uint16_t, 1>, TORC_KERNEL_CONTIGUOUS},
};

} // namespace

extern "C" int torc_cuda__register_rand(const torc_host *host,
                                        torc_plugin *self) {
  for (size_t i = 0; i < sizeof rand_kernels / sizeof rand_kernels[0]; i++) {
    int st = torc_cuda__register(host, self, rand_kernels[i].op,
                                 rand_kernels[i].dtype, rand_kernels[i].fn, 0,
                                 rand_kernels[i].flags);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
