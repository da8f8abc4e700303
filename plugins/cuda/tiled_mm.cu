/* plugins/cuda/tiled_mm.cu — a tiled "matmul" on cuda for what cuBLAS
 * does not serve: the integer dtypes (i32, i64, u8), and the floating
 * ones (f32, f64, f16, bf16) in layouts cuBLAS cannot express (neither
 * rows nor columns of an operand contiguous) or sizes past its int
 * arguments — cuBLAS's kernel declines those and this one, registered
 * below it, takes them. Each block computes a TILE x TILE patch of one
 * batch's output, staging TILE-wide strips of x and w in shared memory;
 * integers accumulate in a wrapping int64, floats in double in ref's
 * order (tiled_mm_body.h), so the result is ref's bit for bit. Any
 * strides; the grid's z dimension walks the batch.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_internal.h"
#include "tiled_mm_body.h"

namespace {

const int T = TORC_CUDA_IMM_TILE;
const int64_t kMaxZ = 65535; /* the grid's z limit: more batches loop */

struct mm_args {
  int64_t M, N, K, batches;
  int64_t xs_m, xs_k, ws_k, ws_n, ys_m, ys_n;
  torc_cuda_imm_batch bw;
};

/* The element types: V as stored, A the accumulator, ref's conversions
 * and sum step. */
template <class V> struct el_int {
  typedef V T;
  typedef int64_t A;
  __device__ static A load(V v) { return (int64_t)v; }
  __device__ static A step(A acc, A x, A w) {
    return torc_cuda_imm_fma(acc, x, w);
  }
};
struct el_i32 : el_int<int32_t> {
  __device__ static int32_t store(int64_t v) { return torc_cuda_imm_to_i32(v); }
};
struct el_i64 : el_int<int64_t> {
  __device__ static int64_t store(int64_t v) { return v; }
};
struct el_u8 : el_int<uint8_t> {
  __device__ static uint8_t store(int64_t v) { return torc_cuda_imm_to_u8(v); }
};
template <class V> struct el_float {
  typedef V T;
  typedef double A;
  __device__ static A step(A acc, A x, A w) {
    return torc_cuda_mm_dfma(acc, x, w);
  }
};
struct el_f32 : el_float<float> {
  __device__ static double load(float v) { return (double)v; }
  __device__ static float store(double v) { return (float)v; }
};
struct el_f64 : el_float<double> {
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};
struct el_f16 : el_float<uint16_t> {
  __device__ static double load(uint16_t v) {
    return (double)torc_f16_to_f32(v);
  }
  __device__ static uint16_t store(double v) {
    return torc_f32_to_f16((float)v);
  }
};
struct el_bf16 : el_float<uint16_t> {
  __device__ static double load(uint16_t v) {
    return (double)torc_bf16_to_f32(v);
  }
  __device__ static uint16_t store(double v) {
    return torc_f32_to_bf16((float)v);
  }
};

template <class E>
__global__ void k_tiled_mm(const typename E::T *x, const typename E::T *w,
                           typename E::T *y, mm_args a) {
  typedef typename E::A A;
  __shared__ A sx[T][T];
  __shared__ A sw[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t m = (int64_t)blockIdx.y * T + ty, n = (int64_t)blockIdx.x * T + tx;
  for (int64_t b = blockIdx.z; b < a.batches; b += gridDim.z) {
    int64_t off[3];
    torc_cuda_imm_batch_offsets(&a.bw, b, off);
    A acc = 0;
    for (int64_t k0 = 0; k0 < a.K; k0 += T) {
      int64_t kx = k0 + tx, kw = k0 + ty;
      sx[ty][tx] = m < a.M && kx < a.K
                       ? E::load(x[off[0] + m * a.xs_m + kx * a.xs_k])
                       : (A)0;
      sw[ty][tx] = kw < a.K && n < a.N
                       ? E::load(w[off[1] + kw * a.ws_k + n * a.ws_n])
                       : (A)0;
      __syncthreads();
      /* Only the strip's real k: the sum sees exactly ref's terms, in
       * ref's order. */
      int kn = a.K - k0 < T ? (int)(a.K - k0) : T;
      for (int k = 0; k < kn; k++)
        acc = E::step(acc, sx[ty][k], sw[k][tx]);
      __syncthreads();
    }
    if (m < a.M && n < a.N)
      y[off[2] + m * a.ys_m + n * a.ys_n] = E::store(acc);
  }
}

template <class E> int run(const torc_kernel_args *a) {
  typedef typename E::T V;
  if (a->n_in != 2 || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'matmul': %d inputs and %d "
                                "outputs, expected 2 and 1",
                                a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int nd = y->ndim;
  bool ok = nd >= 2 && x->ndim == nd && w->ndim == nd &&
            x->dtype == y->dtype && w->dtype == y->dtype;
  for (int d = 0; ok && d < nd - 2; d++)
    ok = x->shape[d] == y->shape[d] && w->shape[d] == y->shape[d];
  if (ok)
    ok = x->shape[nd - 2] == y->shape[nd - 2] &&
         w->shape[nd - 1] == y->shape[nd - 1] &&
         x->shape[nd - 1] == w->shape[nd - 2];
  if (!ok)
    return torc_cuda__set_error(TORC_ERR_SHAPE,
                                "cuda kernel 'matmul' got operands that are "
                                "not [B..., M, K] x [B..., K, N] -> [B..., "
                                "M, N] of one dtype");
  mm_args m;
  m.M = y->shape[nd - 2];
  m.N = y->shape[nd - 1];
  m.K = x->shape[nd - 1];
  m.xs_m = x->strides[nd - 2];
  m.xs_k = x->strides[nd - 1];
  m.ws_k = w->strides[nd - 2];
  m.ws_n = w->strides[nd - 1];
  m.ys_m = y->strides[nd - 2];
  m.ys_n = y->strides[nd - 1];
  m.bw.nb = nd - 2;
  m.batches = 1;
  for (int d = 0; d < nd - 2; d++) {
    m.bw.shape[d] = y->shape[d];
    m.bw.st[0][d] = x->strides[d];
    m.bw.st[1][d] = w->strides[d];
    m.bw.st[2][d] = y->strides[d];
    m.batches *= y->shape[d];
  }
  if (m.M == 0 || m.N == 0 || m.batches == 0)
    return TORC_OK;
  int64_t gx = torc_cuda_imm_tiles(m.N), gy = torc_cuda_imm_tiles(m.M);
  if (gx > INT32_MAX || gy > 65535)
    return TORC_KERNEL_DECLINED; /* past the grid: the cpu fallback */
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  dim3 grid((unsigned)gx, (unsigned)gy,
            (unsigned)(m.batches < kMaxZ ? m.batches : kMaxZ));
  dim3 block(T, T);
  /* K == 0 runs too: every output is the empty sum, 0. */
  k_tiled_mm<E><<<grid, block, 0, s>>>((const V *)x->data + x->offset,
                                       (const V *)w->data + w->offset,
                                       (V *)y->data + y->offset, m);
  return torc_cuda__after_launch(a->device_index, a->op);
}

} // namespace

extern "C" int torc_cuda__register_tiled_mm(const torc_host *host,
                                           torc_plugin *self) {
  /* Integers: the only cuda kernel. Floats: below cuBLAS's (priority 0),
   * reached when it declines. */
  static const struct {
    int32_t dtype, priority;
    torc_kernel_fn fn;
  } regs[] = {{TORC_I32, 0, run<el_i32>},   {TORC_I64, 0, run<el_i64>},
              {TORC_U8, 0, run<el_u8>},     {TORC_F32, -10, run<el_f32>},
              {TORC_F64, -10, run<el_f64>}, {TORC_F16, -10, run<el_f16>},
              {TORC_BF16, -10, run<el_bf16>}};
  for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++) {
    int st = torc_cuda__register(host, self, "matmul", regs[i].dtype,
                                 regs[i].fn, regs[i].priority, 0);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
