/* plugins/cuda/reduce.cu — the f32 reductions over a dims mask (sum, prod,
 * mean, amax, amin) and softmax / log_softmax along a dim: one block per
 * output (per line), in the order reduce_body.h states, any strides.
 * Registered for device type "cuda", dtype f32.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cuda_internal.h"
#include "reduce_body.h"

namespace {

const int kBlock = TORC_CUDA_R_BLOCK;
const int64_t kMaxBlocks = 65535; /* the block-stride loop covers the rest */

/* An index space (row-major over shape) and, per operand, its strides in
 * elements: dims of size 1 dropped, neighbours every operand steps through
 * as one dim merged (a contiguous reduction becomes one dim). */
struct space {
  int32_t n;
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  int64_t st[2][TORC_KERNEL_MAX_DIMS];
};

void space_add(space *s, int n_ops, int64_t size, const int64_t *strides) {
  if (size == 1)
    return;
  if (s->n > 0) {
    bool merge = true;
    for (int k = 0; k < n_ops; k++)
      merge = merge && s->st[k][s->n - 1] == strides[k] * size;
    if (merge) {
      s->shape[s->n - 1] *= size;
      for (int k = 0; k < n_ops; k++)
        s->st[k][s->n - 1] = strides[k];
      return;
    }
  }
  s->shape[s->n] = size;
  for (int k = 0; k < n_ops; k++)
    s->st[k][s->n] = strides[k];
  s->n++;
}

/* The offsets of element i of s in its first n operands. */
__device__ inline void at(const space &s, int64_t i, int n, int64_t *off) {
  for (int k = 0; k < n; k++)
    off[k] = 0;
  for (int d = s.n - 1; d >= 0; d--) {
    int64_t idx = i % s.shape[d];
    i /= s.shape[d];
    for (int k = 0; k < n; k++)
      off[k] += idx * s.st[k][d];
  }
}

__device__ inline int64_t at1(const space &s, int64_t i) {
  if (s.n == 1)
    return i * s.st[0][0];
  int64_t o[1];
  at(s, i, 1, o);
  return o[0];
}

/* The shared-memory tree of reduce_body.h over v[0..kBlock); v[0] holds
 * the result for every thread on return. */
template <int OP> __device__ inline float tree(float *v, float mine) {
  int t = threadIdx.x;
  v[t] = mine;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s)
      v[t] = torc_cuda_r_step(OP, v[t], v[t + s]);
    __syncthreads();
  }
  float r = v[0];
  __syncthreads(); /* v is reused by the next tree */
  return r;
}

/* outer: the output's positions (operands x, y); inner: the reduced set
 * (operand x). */
template <int OP>
__global__ void k_reduce(const float *x, float *y, space outer, int64_t nout,
                         space inner, int64_t count) {
  __shared__ float v[kBlock];
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    int64_t off[2];
    at(outer, o, 2, off);
    float acc = torc_cuda_r_init(OP);
    for (int64_t i = threadIdx.x; i < count; i += kBlock)
      acc = torc_cuda_r_step(OP, acc, x[off[0] + at1(inner, i)]);
    float r = tree<OP>(v, acc);
    if (threadIdx.x == 0)
      y[off[1]] = torc_cuda_r_final(OP, r, count);
  }
}

/* One line per block: lines spans the other dims (x, y); len elements
 * along the dim at strides sx, sy. */
template <int LOG>
__global__ void k_softmax(const float *x, float *y, space lines,
                          int64_t nlines, int64_t len, int64_t sx,
                          int64_t sy) {
  __shared__ float v[kBlock];
  for (int64_t l = blockIdx.x; l < nlines; l += gridDim.x) {
    int64_t off[2];
    at(lines, l, 2, off);
    const float *px = x + off[0];
    float m = -INFINITY;
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      m = torc_cuda_r_step(TORC_CUDA_R_AMAX, m, px[k * sx]);
    m = tree<TORC_CUDA_R_AMAX>(v, m);
    float s = 0.0f;
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      s = torc_cuda_r_step(TORC_CUDA_R_SUM, s, torc_cuda_sm_exp(px[k * sx], m));
    s = tree<TORC_CUDA_R_SUM>(v, s);
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      y[off[1] + k * sy] = torc_cuda_sm_out(px[k * sx], m, s, LOG);
  }
}

float *base(const torc_ktensor *t) { return (float *)t->data + t->offset; }

unsigned blocks(int64_t n) { return (unsigned)(n < kMaxBlocks ? n : kMaxBlocks); }

int bad(const torc_kernel_args *a, const char *what) {
  return torc_cuda__set_error(TORC_ERR_INTERNAL, "cuda kernel '%s': %s",
                              a->op, what);
}

int check_1_1(const torc_kernel_args *a, size_t params_size) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad(a, "expected 1 input and 1 output");
  if (a->params == NULL || a->params_size < params_size)
    return bad(a, "missing its params");
  if (a->in[0].dtype != TORC_F32 || a->out[0].dtype != TORC_F32 ||
      a->in[0].ndim != a->out[0].ndim)
    return bad(a, "expected f32 tensors of one rank");
  return TORC_OK;
}

template <int OP> int run_reduce(const torc_kernel_args *a) {
  int st = check_1_1(a, sizeof(torc_reduce_params));
  if (st != TORC_OK)
    return st;
  const torc_reduce_params *p = (const torc_reduce_params *)a->params;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim;
  if (nd < 32 && (p->dims_mask >> nd) != 0)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': dims mask 0x%x names a dim "
                                "past the input's %d",
                                a->op, (unsigned)p->dims_mask, nd);
  space outer, inner;
  memset(&outer, 0, sizeof outer);
  memset(&inner, 0, sizeof inner);
  int64_t nout = 1, count = 1;
  for (int d = 0; d < nd; d++) {
    bool reduced = (p->dims_mask >> d) & 1u;
    if (y->shape[d] != (reduced ? 1 : x->shape[d]))
      return bad(a, "output shape is not the input's reduced over the mask");
    if (reduced) {
      count *= x->shape[d];
      space_add(&inner, 1, x->shape[d], &x->strides[d]);
    } else {
      nout *= x->shape[d];
      int64_t s2[2] = {x->strides[d], y->strides[d]};
      space_add(&outer, 2, x->shape[d], s2);
    }
  }
  if (nout == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__stream(a->device_index);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  k_reduce<OP><<<blocks(nout), kBlock, 0, s>>>(base(x), base(y), outer, nout,
                                               inner, count);
  return torc_cuda__after_launch(a->device_index, a->op);
}

template <int LOG> int run_softmax(const torc_kernel_args *a) {
  int st = check_1_1(a, sizeof(torc_dim_params));
  if (st != TORC_OK)
    return st;
  const torc_dim_params *p = (const torc_dim_params *)a->params;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim;
  int dim = p->dim < 0 ? p->dim + nd : p->dim;
  if (nd == 0 || dim < 0 || dim >= nd)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': dim %d is outside a tensor "
                                "of rank %d",
                                a->op, p->dim, nd);
  space lines;
  memset(&lines, 0, sizeof lines);
  int64_t nlines = 1;
  for (int d = 0; d < nd; d++) {
    if (x->shape[d] != y->shape[d])
      return bad(a, "input and output shapes differ");
    if (d == dim)
      continue;
    nlines *= x->shape[d];
    int64_t s2[2] = {x->strides[d], y->strides[d]};
    space_add(&lines, 2, x->shape[d], s2);
  }
  int64_t len = x->shape[dim];
  if (nlines == 0 || len == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__stream(a->device_index);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  k_softmax<LOG><<<blocks(nlines), kBlock, 0, s>>>(
      base(x), base(y), lines, nlines, len, x->strides[dim], y->strides[dim]);
  return torc_cuda__after_launch(a->device_index, a->op);
}

#define REDUCE_K(name, id)                                                     \
  int k_##name(const torc_kernel_args *a) { return run_reduce<id>(a); }
TORC_CUDA_REDUCE_OPS(REDUCE_K)

int k_softmax_op(const torc_kernel_args *a) { return run_softmax<0>(a); }
int k_log_softmax_op(const torc_kernel_args *a) { return run_softmax<1>(a); }

struct reduce_kernel {
  const char *op;
  torc_kernel_fn fn;
};

#define ROW(name, id) {#name, k_##name},
const reduce_kernel reduce_kernels[] = {TORC_CUDA_REDUCE_OPS(ROW){
                                            "softmax", k_softmax_op},
                                        {"log_softmax", k_log_softmax_op}};

} // namespace

extern "C" int torc_cuda__register_reduce(const torc_host *host,
                                          torc_plugin *self) {
  for (size_t i = 0; i < sizeof reduce_kernels / sizeof reduce_kernels[0];
       i++) {
    torc_kernel_reg reg = {};
    reg.struct_size = sizeof reg;
    reg.device_type = "cuda";
    reg.op = reduce_kernels[i].op;
    reg.dtype = TORC_F32;
    reg.priority = 0;
    reg.fn = reduce_kernels[i].fn;
    reg.data = NULL;
    reg.flags = 0;
    int st = host->register_kernel(self, &reg);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
