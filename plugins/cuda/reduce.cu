/* plugins/cuda/reduce.cu — the reductions over a dims mask (sum, prod,
 * mean, amax, amin; two-pass: logsumexp, var, std, norm) and softmax /
 * log_softmax, max_dim / min_dim along a dim, f32/f16/bf16 with f32
 * accumulation: one block per output (per line) in reduce_body.h's order.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
  int64_t st[3][TORC_KERNEL_MAX_DIMS];
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

void space_add3(space *s, int64_t size, const int64_t *strides) {
  space_add(s, 3, size, strides);
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

/* An element type: its storage, its load to f32 (exact) and its store
 * from f32 (rounded to nearest even). */
struct e_f32 {
  typedef float T;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
struct e_f16 {
  typedef uint16_t T;
  __device__ static float load(uint16_t v) {
    return __half2float(__ushort_as_half(v));
  }
  __device__ static uint16_t store(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};
struct e_bf16 {
  typedef uint16_t T;
  __device__ static float load(uint16_t v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
  __device__ static uint16_t store(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};

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

/* tree() with the op chosen at run time (a kernel's constant). */
__device__ inline float tree_op(float *v, float mine, int op) {
  return op == TORC_CUDA_R_AMAX ? tree<TORC_CUDA_R_AMAX>(v, mine)
                                : tree<TORC_CUDA_R_SUM>(v, mine);
}

/* outer: the output's positions (operands x, y); inner: the reduced set
 * (operand x). */
template <int OP, class E>
__global__ void k_reduce(const typename E::T *x, typename E::T *y,
                         space outer, int64_t nout, space inner,
                         int64_t count) {
  __shared__ float v[kBlock];
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    int64_t off[2];
    at(outer, o, 2, off);
    float acc = torc_cuda_r_init(OP);
    for (int64_t i = threadIdx.x; i < count; i += kBlock)
      acc = torc_cuda_r_step(OP, acc, E::load(x[off[0] + at1(inner, i)]));
    float r = tree<OP>(v, acc);
    if (threadIdx.x == 0)
      y[off[1]] = E::store(torc_cuda_r_final(OP, r, count));
  }
}

/* The two-pass reductions of reduce_body.h, as k_reduce. */
template <int KIND, class E>
__global__ void k_reduce2(const typename E::T *x, typename E::T *y,
                          space outer, int64_t nout, space inner,
                          int64_t count, double extra) {
  __shared__ float v[kBlock];
  const int op1 = torc_cuda_r2_op1(KIND);
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    int64_t off[2];
    at(outer, o, 2, off);
    float acc = torc_cuda_r_init(op1);
    for (int64_t i = threadIdx.x; i < count; i += kBlock)
      acc = torc_cuda_r_step(
          op1, acc, torc_cuda_r2_first(KIND, E::load(x[off[0] + at1(inner, i)])));
    float mid = torc_cuda_r2_mid(KIND, tree_op(v, acc, op1), count);
    float r2 = 0.0f;
    if (torc_cuda_r2_two_pass(KIND, mid)) { /* the same for the whole block */
      for (int64_t i = threadIdx.x; i < count; i += kBlock)
        r2 += torc_cuda_r2_second(KIND, E::load(x[off[0] + at1(inner, i)]),
                                  mid);
      r2 = tree<TORC_CUDA_R_SUM>(v, r2);
    }
    if (threadIdx.x == 0)
      y[off[1]] = E::store(torc_cuda_r2_final(KIND, mid, r2, count, extra));
  }
}

/* max_dim (IS_MIN 0) / min_dim (1): one line per block, as k_softmax;
 * out values at vo (stride 0 along the dim), indices at io. */
template <int IS_MIN, class E>
__global__ void k_extreme(const typename E::T *x, typename E::T *vals,
                          int64_t *idx, space lines, int64_t nlines,
                          int64_t len, int64_t sx) {
  __shared__ float sv[kBlock];
  __shared__ int64_t si[kBlock];
  int t = threadIdx.x;
  for (int64_t l = blockIdx.x; l < nlines; l += gridDim.x) {
    int64_t off[3];
    at(lines, l, 3, off);
    torc_cuda_arg best = {0.0f, -1};
    for (int64_t k = t; k < len; k += kBlock) {
      torc_cuda_arg c = {E::load(x[off[0] + k * sx]), k};
      best = torc_cuda_arg_pick(best, c, IS_MIN);
    }
    sv[t] = best.v;
    si[t] = best.i;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s >>= 1) {
      if (t < s) {
        torc_cuda_arg a = {sv[t], si[t]}, b = {sv[t + s], si[t + s]};
        torc_cuda_arg r = torc_cuda_arg_pick(a, b, IS_MIN);
        sv[t] = r.v;
        si[t] = r.i;
      }
      __syncthreads();
    }
    if (t == 0) {
      /* The input's element itself (a copy, not a rounded f32). */
      vals[off[1]] = x[off[0] + si[0] * sx];
      idx[off[2]] = si[0];
    }
    __syncthreads();
  }
}

/* One line per block: lines spans the other dims (x, y); len elements
 * along the dim at strides sx, sy. */
template <int LOG, class E>
__global__ void k_softmax(const typename E::T *x, typename E::T *y,
                          space lines, int64_t nlines, int64_t len,
                          int64_t sx, int64_t sy) {
  __shared__ float v[kBlock];
  for (int64_t l = blockIdx.x; l < nlines; l += gridDim.x) {
    int64_t off[2];
    at(lines, l, 2, off);
    const typename E::T *px = x + off[0];
    float m = -INFINITY;
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      m = torc_cuda_r_step(TORC_CUDA_R_AMAX, m, E::load(px[k * sx]));
    m = tree<TORC_CUDA_R_AMAX>(v, m);
    float s = 0.0f;
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      s = torc_cuda_r_step(TORC_CUDA_R_SUM, s,
                           torc_cuda_sm_exp(E::load(px[k * sx]), m));
    s = tree<TORC_CUDA_R_SUM>(v, s);
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      y[off[1] + k * sy] =
          E::store(torc_cuda_sm_out(E::load(px[k * sx]), m, s, LOG));
  }
}

template <class T> T *base(const torc_ktensor *t) {
  return (T *)t->data + t->offset;
}

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
  int dt = a->in[0].dtype;
  if ((dt != TORC_F32 && dt != TORC_F16 && dt != TORC_BF16) ||
      a->out[0].dtype != dt || a->in[0].ndim != a->out[0].ndim)
    return bad(a, "expected f32, f16 or bf16 tensors of one dtype and rank");
  return TORC_OK;
}

/* The output's positions and the reduced set of a dims-mask reduction. */
struct reduce_geo {
  space outer, inner;
  int64_t nout, count;
};

int geo_of(const torc_kernel_args *a, uint32_t mask, reduce_geo *g) {
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim;
  if (nd < 32 && (mask >> nd) != 0)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': dims mask 0x%x names a dim "
                                "past the input's %d",
                                a->op, (unsigned)mask, nd);
  memset(g, 0, sizeof *g);
  g->nout = 1;
  g->count = 1;
  for (int d = 0; d < nd; d++) {
    bool reduced = (mask >> d) & 1u;
    if (y->shape[d] != (reduced ? 1 : x->shape[d]))
      return bad(a, "output shape is not the input's reduced over the mask");
    if (reduced) {
      g->count *= x->shape[d];
      space_add(&g->inner, 1, x->shape[d], &x->strides[d]);
    } else {
      g->nout *= x->shape[d];
      int64_t s2[2] = {x->strides[d], y->strides[d]};
      space_add(&g->outer, 2, x->shape[d], s2);
    }
  }
  return TORC_OK;
}

template <int OP> int run_reduce(const torc_kernel_args *a) {
  int st = check_1_1(a, sizeof(torc_reduce_params));
  reduce_geo g;
  if (st == TORC_OK)
    st = geo_of(a, ((const torc_reduce_params *)a->params)->dims_mask, &g);
  if (st != TORC_OK)
    return st;
  if (g.nout == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  unsigned nb = blocks(g.nout);
  switch (x->dtype) {
  case TORC_F16:
    k_reduce<OP, e_f16><<<nb, kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(y), g.outer, g.nout, g.inner,
        g.count);
    break;
  case TORC_BF16:
    k_reduce<OP, e_bf16><<<nb, kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(y), g.outer, g.nout, g.inner,
        g.count);
    break;
  default:
    k_reduce<OP, e_f32><<<nb, kBlock, 0, s>>>(base<float>(x), base<float>(y),
                                              g.outer, g.nout, g.inner,
                                              g.count);
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

template <int KIND>
int launch2(const torc_kernel_args *a, const reduce_geo &g, double extra,
            cudaStream_t s) {
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  unsigned nb = blocks(g.nout);
  switch (x->dtype) {
  case TORC_F16:
    k_reduce2<KIND, e_f16><<<nb, kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(y), g.outer, g.nout, g.inner,
        g.count, extra);
    break;
  case TORC_BF16:
    k_reduce2<KIND, e_bf16><<<nb, kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(y), g.outer, g.nout, g.inner,
        g.count, extra);
    break;
  default:
    k_reduce2<KIND, e_f32><<<nb, kBlock, 0, s>>>(
        base<float>(x), base<float>(y), g.outer, g.nout, g.inner, g.count,
        extra);
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* logsumexp, var, std (torc_reduce_params) and norm (torc_norm_params:
 * p is 1, 2 or inf). */
template <int KIND> int run_reduce2(const torc_kernel_args *a) {
  bool is_norm = KIND == TORC_CUDA_R2_NORM1;
  int st = check_1_1(a, is_norm ? sizeof(torc_norm_params)
                                : sizeof(torc_reduce_params));
  if (st != TORC_OK)
    return st;
  uint32_t mask;
  double extra = 0;
  int kind = KIND;
  if (is_norm) {
    const torc_norm_params *p = (const torc_norm_params *)a->params;
    mask = p->dims_mask;
    if (p->p == 1)
      kind = TORC_CUDA_R2_NORM1;
    else if (p->p == 2)
      kind = TORC_CUDA_R2_NORM2;
    else if (isinf(p->p) && p->p > 0)
      kind = TORC_CUDA_R2_NORMINF;
    else
      return torc_cuda__set_error(TORC_ERR_INVALID,
                                  "norm of order p = %g: the cuda kernel "
                                  "takes p = 1, 2 or inf",
                                  p->p);
  } else {
    const torc_reduce_params *p = (const torc_reduce_params *)a->params;
    mask = p->dims_mask;
    extra = p->correction;
  }
  reduce_geo g;
  st = geo_of(a, mask, &g);
  if (st != TORC_OK)
    return st;
  if (g.nout == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  switch (kind) {
  case TORC_CUDA_R2_LSE: return launch2<TORC_CUDA_R2_LSE>(a, g, extra, s);
  case TORC_CUDA_R2_VAR: return launch2<TORC_CUDA_R2_VAR>(a, g, extra, s);
  case TORC_CUDA_R2_STD: return launch2<TORC_CUDA_R2_STD>(a, g, extra, s);
  case TORC_CUDA_R2_NORM1: return launch2<TORC_CUDA_R2_NORM1>(a, g, extra, s);
  case TORC_CUDA_R2_NORM2: return launch2<TORC_CUDA_R2_NORM2>(a, g, extra, s);
  default: return launch2<TORC_CUDA_R2_NORMINF>(a, g, extra, s);
  }
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
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  int64_t sx = x->strides[dim], sy = y->strides[dim];
  switch (x->dtype) {
  case TORC_F16:
    k_softmax<LOG, e_f16><<<blocks(nlines), kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(y), lines, nlines, len, sx, sy);
    break;
  case TORC_BF16:
    k_softmax<LOG, e_bf16><<<blocks(nlines), kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(y), lines, nlines, len, sx, sy);
    break;
  default:
    k_softmax<LOG, e_f32><<<blocks(nlines), kBlock, 0, s>>>(
        base<float>(x), base<float>(y), lines, nlines, len, sx, sy);
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

template <int IS_MIN> int run_extreme(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out != 2 || a->params == NULL ||
      a->params_size < sizeof(torc_dim_params))
    return bad(a, "expected 1 input, 2 outputs and torc_dim_params");
  const torc_ktensor *x = &a->in[0], *v = &a->out[0], *ix = &a->out[1];
  int dt = x->dtype, nd = x->ndim;
  if ((dt != TORC_F32 && dt != TORC_F16 && dt != TORC_BF16) ||
      v->dtype != dt || ix->dtype != TORC_I64 || v->ndim != nd ||
      ix->ndim != nd)
    return bad(a, "expected float values of the input's dtype and i64 "
                  "indices");
  int dim = ((const torc_dim_params *)a->params)->dim;
  dim = dim < 0 ? dim + nd : dim;
  if (nd == 0 || dim < 0 || dim >= nd || x->shape[dim] == 0)
    return bad(a, "the dim is outside the input or empty");
  space lines;
  memset(&lines, 0, sizeof lines);
  int64_t nlines = 1;
  for (int d = 0; d < nd; d++) {
    int64_t want = d == dim ? 1 : x->shape[d];
    if (v->shape[d] != want || ix->shape[d] != want)
      return bad(a, "outputs are not the input's shape with size 1 at dim");
    if (d == dim)
      continue;
    nlines *= x->shape[d];
    int64_t s3[3] = {x->strides[d], v->strides[d], ix->strides[d]};
    space_add3(&lines, x->shape[d], s3);
  }
  if (nlines == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  int64_t len = x->shape[dim], sx = x->strides[dim];
  unsigned nb = blocks(nlines);
  int64_t *pi = base<int64_t>(ix);
  switch (dt) {
  case TORC_F16:
    k_extreme<IS_MIN, e_f16><<<nb, kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(v), pi, lines, nlines, len, sx);
    break;
  case TORC_BF16:
    k_extreme<IS_MIN, e_bf16><<<nb, kBlock, 0, s>>>(
        base<uint16_t>(x), base<uint16_t>(v), pi, lines, nlines, len, sx);
    break;
  default:
    k_extreme<IS_MIN, e_f32><<<nb, kBlock, 0, s>>>(
        base<float>(x), base<float>(v), pi, lines, nlines, len, sx);
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

int k_max_dim(const torc_kernel_args *a) { return run_extreme<0>(a); }
int k_min_dim(const torc_kernel_args *a) { return run_extreme<1>(a); }

#define REDUCE_K(name, id)                                                     \
  int k_##name(const torc_kernel_args *a) { return run_reduce<id>(a); }
TORC_CUDA_REDUCE_OPS(REDUCE_K)

int k_logsumexp(const torc_kernel_args *a) {
  return run_reduce2<TORC_CUDA_R2_LSE>(a);
}
int k_var(const torc_kernel_args *a) { return run_reduce2<TORC_CUDA_R2_VAR>(a); }
int k_std(const torc_kernel_args *a) { return run_reduce2<TORC_CUDA_R2_STD>(a); }
int k_norm(const torc_kernel_args *a) {
  return run_reduce2<TORC_CUDA_R2_NORM1>(a); /* p chooses the kind */
}
int k_softmax_op(const torc_kernel_args *a) { return run_softmax<0>(a); }
int k_log_softmax_op(const torc_kernel_args *a) { return run_softmax<1>(a); }

struct reduce_kernel {
  const char *op;
  torc_kernel_fn fn;
};

#define ROW(name, id) {#name, k_##name},
const reduce_kernel reduce_kernels[] = {TORC_CUDA_REDUCE_OPS(ROW){
                                            "softmax", k_softmax_op},
                                        {"log_softmax", k_log_softmax_op},
                                        {"logsumexp", k_logsumexp},
                                        {"var", k_var},
                                        {"std", k_std},
                                        {"norm", k_norm},
                                        {"max_dim", k_max_dim},
                                        {"min_dim", k_min_dim}};

} // namespace

extern "C" int torc_cuda__register_reduce(const torc_host *host,
                                          torc_plugin *self) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F16, TORC_BF16};
  const size_t n_ops = sizeof reduce_kernels / sizeof reduce_kernels[0];
  for (size_t i = 0; i < n_ops; i++)
    for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; j++) {
      torc_kernel_reg reg = {};
      reg.struct_size = sizeof reg;
      reg.device_type = "cuda";
      reg.op = reduce_kernels[i].op;
      reg.dtype = dtypes[j];
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
