/* plugins/cuda/imatmul.cu — "matmul" for the integer dtypes (i32, i64,
 * u8) on cuda: cuBLAS multiplies floating types only. A tiled kernel: each
 * block computes a TILE x TILE patch of one batch's output, staging
 * TILE-wide strips of x and w in shared memory; products accumulate in a
 * wrapping int64 as ref's (imatmul_body.h). Any strides; the grid's z
 * dimension walks the batch.
 */
#include <stddef.h>
#include <stdint.h>

#include "cuda_internal.h"
#include "imatmul_body.h"

namespace {

const int T = TORC_CUDA_IMM_TILE;
const int64_t kMaxZ = 65535; /* the grid's z limit: more batches loop */

struct mm_args {
  int64_t M, N, K, batches;
  int64_t xs_m, xs_k, ws_k, ws_n, ys_m, ys_n;
  torc_cuda_imm_batch bw;
};

template <class V> __device__ inline int64_t widen(V v) { return (int64_t)v; }

template <class V> __device__ inline V narrow(int64_t v);
template <> __device__ inline int32_t narrow<int32_t>(int64_t v) {
  return torc_cuda_imm_to_i32(v);
}
template <> __device__ inline int64_t narrow<int64_t>(int64_t v) { return v; }
template <> __device__ inline uint8_t narrow<uint8_t>(int64_t v) {
  return torc_cuda_imm_to_u8(v);
}

template <class V>
__global__ void k_imatmul(const V *x, const V *w, V *y, mm_args a) {
  __shared__ int64_t sx[T][T];
  __shared__ int64_t sw[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t m = (int64_t)blockIdx.y * T + ty, n = (int64_t)blockIdx.x * T + tx;
  for (int64_t b = blockIdx.z; b < a.batches; b += gridDim.z) {
    int64_t off[3];
    torc_cuda_imm_batch_offsets(&a.bw, b, off);
    int64_t acc = 0;
    for (int64_t k0 = 0; k0 < a.K; k0 += T) {
      int64_t kx = k0 + tx, kw = k0 + ty;
      sx[ty][tx] = m < a.M && kx < a.K
                       ? widen(x[off[0] + m * a.xs_m + kx * a.xs_k])
                       : 0;
      sw[ty][tx] = kw < a.K && n < a.N
                       ? widen(w[off[1] + kw * a.ws_k + n * a.ws_n])
                       : 0;
      __syncthreads();
      for (int k = 0; k < T; k++)
        acc = torc_cuda_imm_fma(acc, sx[ty][k], sw[k][tx]);
      __syncthreads();
    }
    if (m < a.M && n < a.N)
      y[off[2] + m * a.ys_m + n * a.ys_n] = narrow<V>(acc);
  }
}

template <class V> int run(const torc_kernel_args *a) {
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
                                "M, N] of one integer dtype");
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
  k_imatmul<V><<<grid, block, 0, s>>>((const V *)x->data + x->offset,
                                      (const V *)w->data + w->offset,
                                      (V *)y->data + y->offset, m);
  return torc_cuda__after_launch(a->device_index, a->op);
}

} // namespace

extern "C" int torc_cuda__register_imatmul(const torc_host *host,
                                           torc_plugin *self) {
  static const struct {
    int32_t dtype;
    torc_kernel_fn fn;
  } regs[] = {{TORC_I32, run<int32_t>},
              {TORC_I64, run<int64_t>},
              {TORC_U8, run<uint8_t>}};
  for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++) {
    torc_kernel_reg reg = {};
    reg.struct_size = sizeof reg;
    reg.device_type = "cuda";
    reg.op = "matmul";
    reg.dtype = regs[i].dtype;
    reg.priority = 0;
    reg.fn = regs[i].fn;
    reg.data = NULL;
    reg.flags = 0;
    int st = host->register_kernel(self, &reg);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
