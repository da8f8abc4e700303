/* plugins/cuda/reduce.cu — the reductions over a dims mask (sum, prod,
 * mean, amax, amin; two-pass: logsumexp, var, std, norm) and softmax /
 * log_softmax, max_dim / min_dim along a dim: f32/f16/bf16 accumulate in
 * f32, f64 in f64, integers and bool (sum, prod, amax, amin, max_dim,
 * min_dim) exactly in int64; one block per output (per line) in
 * reduce_body.h's order.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

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

/* An element type: its storage T, its accumulator A, its load to A
 * (exact) and its store from A (rounded to nearest even); put() writes a
 * result at y[o], the output being of dtype dt (the input's, for the
 * floating types). */
template <class E>
__device__ inline void put_same(void *y, int64_t o, typename E::A v) {
  ((typename E::T *)y)[o] = E::store(v);
}
struct e_f32 {
  typedef float T;
  typedef float A;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
  __device__ static void put(void *y, int, int64_t o, float v) {
    put_same<e_f32>(y, o, v);
  }
};
struct e_f16 {
  typedef uint16_t T;
  typedef float A;
  __device__ static float load(uint16_t v) {
    return __half2float(__ushort_as_half(v));
  }
  __device__ static uint16_t store(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
  __device__ static void put(void *y, int, int64_t o, float v) {
    put_same<e_f16>(y, o, v);
  }
};
struct e_bf16 {
  typedef uint16_t T;
  typedef float A;
  __device__ static float load(uint16_t v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
  __device__ static uint16_t store(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
  __device__ static void put(void *y, int, int64_t o, float v) {
    put_same<e_bf16>(y, o, v);
  }
};
struct e_f64 {
  typedef double T;
  typedef double A;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
  __device__ static void put(void *y, int, int64_t o, double v) {
    put_same<e_f64>(y, o, v);
  }
};

/* Integers and bool accumulate in int64; the result goes to the output's
 * dtype (i64 for sum and prod, the input's for amax and amin) keeping its
 * low bits, bool as nonzero, as ref's store. */
struct e_int {
  typedef int64_t A;
  __device__ static void put(void *y, int dt, int64_t o, int64_t v) {
    switch (dt) {
    case TORC_I32: ((uint32_t *)y)[o] = (uint32_t)(uint64_t)v; break;
    case TORC_U8: ((uint8_t *)y)[o] = (uint8_t)(uint64_t)v; break;
    case TORC_BOOL: ((uint8_t *)y)[o] = v != 0; break;
    default: ((int64_t *)y)[o] = v;
    }
  }
};
struct e_i32 : e_int {
  typedef int32_t T;
  __device__ static int64_t load(int32_t v) { return v; }
};
struct e_i64 : e_int {
  typedef int64_t T;
  __device__ static int64_t load(int64_t v) { return v; }
};
struct e_u8 : e_int {
  typedef uint8_t T;
  __device__ static int64_t load(uint8_t v) { return v; }
};
struct e_bool : e_int {
  typedef uint8_t T;
  __device__ static int64_t load(uint8_t v) { return v != 0; } /* any byte */
};

/* reduce_body.h's bodies by accumulator type: R<float> and R<double>
 * carry every step, R<int64_t> the exact ones (sum, prod, amax, amin and
 * max_dim / min_dim's pick). */
template <class A> struct R;
#define TORC_CUDA_R_TRAITS(T, SFX)                                             \
  template <> struct R<T> {                                                    \
    typedef torc_cuda_arg##SFX arg;                                            \
    __device__ static T init(int op) { return torc_cuda_r_init##SFX(op); }     \
    __device__ static T step(int op, T acc, T x) {                             \
      return torc_cuda_r_step##SFX(op, acc, x);                                \
    }                                                                          \
    __device__ static T final(int op, T acc, int64_t n) {                      \
      return torc_cuda_r_final##SFX(op, acc, n);                               \
    }                                                                          \
    __device__ static T first(int k, T x) {                                    \
      return torc_cuda_r2_first##SFX(k, x);                                    \
    }                                                                          \
    __device__ static T mid(int k, T r1, int64_t n) {                          \
      return torc_cuda_r2_mid##SFX(k, r1, n);                                  \
    }                                                                          \
    __device__ static int two_pass(int k, T mid) {                             \
      return torc_cuda_r2_two_pass##SFX(k, mid);                               \
    }                                                                          \
    __device__ static T second(int k, T x, T mid) {                            \
      return torc_cuda_r2_second##SFX(k, x, mid);                              \
    }                                                                          \
    __device__ static T final2(int k, T mid, T r2, int64_t n, double e) {      \
      return torc_cuda_r2_final##SFX(k, mid, r2, n, e);                        \
    }                                                                          \
    __device__ static T sm_exp(T x, T m) {                                     \
      return torc_cuda_sm_exp##SFX(x, m);                                      \
    }                                                                          \
    __device__ static T sm_out(T x, T m, T s, int lg) {                        \
      return torc_cuda_sm_out##SFX(x, m, s, lg);                               \
    }                                                                          \
    __device__ static arg pick(arg a, arg b, int is_min) {                     \
      return torc_cuda_arg_pick##SFX(a, b, is_min);                            \
    }                                                                          \
  };
TORC_CUDA_R_TRAITS(float, )
TORC_CUDA_R_TRAITS(double, _d)
#undef TORC_CUDA_R_TRAITS
template <> struct R<int64_t> {
  typedef torc_cuda_arg_i arg;
  __device__ static int64_t init(int op) { return torc_cuda_r_init_i(op); }
  __device__ static int64_t step(int op, int64_t acc, int64_t x) {
    return torc_cuda_r_step_i(op, acc, x);
  }
  __device__ static int64_t final(int, int64_t acc, int64_t) { return acc; }
  __device__ static arg pick(arg a, arg b, int is_min) {
    return torc_cuda_arg_pick_i(a, b, is_min);
  }
};

/* The shared-memory tree of reduce_body.h over v[0..kBlock); v[0] holds
 * the result for every thread on return. */
template <int OP, class A> __device__ inline A tree(A *v, A mine) {
  int t = threadIdx.x;
  v[t] = mine;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s)
      v[t] = R<A>::step(OP, v[t], v[t + s]);
    __syncthreads();
  }
  A r = v[0];
  __syncthreads(); /* v is reused by the next tree */
  return r;
}

/* tree() with the op chosen at run time (a kernel's constant). */
template <class A> __device__ inline A tree_op(A *v, A mine, int op) {
  return op == TORC_CUDA_R_AMAX ? tree<TORC_CUDA_R_AMAX>(v, mine)
                                : tree<TORC_CUDA_R_SUM>(v, mine);
}

/* outer: the output's positions (operands x, y); inner: the reduced set
 * (operand x); y is of dtype ydt. */
template <int OP, class E>
__global__ void k_reduce(const typename E::T *x, void *y, int ydt,
                         space outer, int64_t nout, space inner,
                         int64_t count) {
  typedef typename E::A A;
  __shared__ A v[kBlock];
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    int64_t off[2];
    at(outer, o, 2, off);
    A acc = R<A>::init(OP);
    for (int64_t i = threadIdx.x; i < count; i += kBlock)
      acc = R<A>::step(OP, acc, E::load(x[off[0] + at1(inner, i)]));
    A r = tree<OP>(v, acc);
    if (threadIdx.x == 0)
      E::put(y, ydt, off[1], R<A>::final(OP, r, count));
  }
}

/* The two-pass reductions of reduce_body.h, as k_reduce (floats only). */
template <int KIND, class E>
__global__ void k_reduce2(const typename E::T *x, typename E::T *y,
                          space outer, int64_t nout, space inner,
                          int64_t count, double extra) {
  typedef typename E::A A;
  typedef R<A> F;
  __shared__ A v[kBlock];
  const int op1 = torc_cuda_r2_op1(KIND);
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    int64_t off[2];
    at(outer, o, 2, off);
    A acc = F::init(op1);
    for (int64_t i = threadIdx.x; i < count; i += kBlock)
      acc = F::step(op1, acc,
                    F::first(KIND, E::load(x[off[0] + at1(inner, i)])));
    A mid = F::mid(KIND, tree_op(v, acc, op1), count);
    A r2 = 0;
    if (F::two_pass(KIND, mid)) { /* the same for the whole block */
      for (int64_t i = threadIdx.x; i < count; i += kBlock)
        r2 += F::second(KIND, E::load(x[off[0] + at1(inner, i)]), mid);
      r2 = tree<TORC_CUDA_R_SUM>(v, r2);
    }
    if (threadIdx.x == 0)
      y[off[1]] = E::store(F::final2(KIND, mid, r2, count, extra));
  }
}

/* max_dim (IS_MIN 0) / min_dim (1): one line per block, as k_softmax;
 * out values at vo (stride 0 along the dim), indices at io. */
template <int IS_MIN, class E>
__global__ void k_extreme(const typename E::T *x, typename E::T *vals,
                          int64_t *idx, space lines, int64_t nlines,
                          int64_t len, int64_t sx) {
  typedef typename E::A A;
  typedef typename R<A>::arg arg;
  __shared__ A sv[kBlock];
  __shared__ int64_t si[kBlock];
  int t = threadIdx.x;
  for (int64_t l = blockIdx.x; l < nlines; l += gridDim.x) {
    int64_t off[3];
    at(lines, l, 3, off);
    arg best = {A(0), -1};
    for (int64_t k = t; k < len; k += kBlock) {
      arg c = {E::load(x[off[0] + k * sx]), k};
      best = R<A>::pick(best, c, IS_MIN);
    }
    sv[t] = best.v;
    si[t] = best.i;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s >>= 1) {
      if (t < s) {
        arg a = {sv[t], si[t]}, b = {sv[t + s], si[t + s]};
        arg r = R<A>::pick(a, b, IS_MIN);
        sv[t] = r.v;
        si[t] = r.i;
      }
      __syncthreads();
    }
    if (t == 0) {
      /* The input's element itself (a copy, not a rounded accumulator);
       * bool as 0 or 1, as ref stores it. */
      typename E::T pv = x[off[0] + si[0] * sx];
      if constexpr (std::is_same<E, e_bool>::value)
        pv = pv != 0;
      vals[off[1]] = pv;
      idx[off[2]] = si[0];
    }
    __syncthreads();
  }
}

/* One line per block: lines spans the other dims (x, y); len elements
 * along the dim at strides sx, sy (floats only). */
template <int LOG, class E>
__global__ void k_softmax(const typename E::T *x, typename E::T *y,
                          space lines, int64_t nlines, int64_t len,
                          int64_t sx, int64_t sy) {
  typedef typename E::A A;
  typedef R<A> F;
  __shared__ A v[kBlock];
  for (int64_t l = blockIdx.x; l < nlines; l += gridDim.x) {
    int64_t off[2];
    at(lines, l, 2, off);
    const typename E::T *px = x + off[0];
    A m = F::init(TORC_CUDA_R_AMAX);
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      m = F::step(TORC_CUDA_R_AMAX, m, E::load(px[k * sx]));
    m = tree<TORC_CUDA_R_AMAX>(v, m);
    A s = 0;
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      s = F::step(TORC_CUDA_R_SUM, s, F::sm_exp(E::load(px[k * sx]), m));
    s = tree<TORC_CUDA_R_SUM>(v, s);
    for (int64_t k = threadIdx.x; k < len; k += kBlock)
      y[off[1] + k * sy] = E::store(F::sm_out(E::load(px[k * sx]), m, s, LOG));
  }
}

/* Calls f with the element type of dtype dt (a value of it, for its
 * type): the floating dtypes always, the integers and bool when INTS.
 * False for a dtype outside the set. */
template <bool INTS, class F> bool by_dtype(int dt, F f) {
  switch (dt) {
  case TORC_F32: f(e_f32()); return true;
  case TORC_F16: f(e_f16()); return true;
  case TORC_BF16: f(e_bf16()); return true;
  case TORC_F64: f(e_f64()); return true;
  default: break;
  }
  if constexpr (INTS) {
    switch (dt) {
    case TORC_I32: f(e_i32()); return true;
    case TORC_I64: f(e_i64()); return true;
    case TORC_U8: f(e_u8()); return true;
    case TORC_BOOL: f(e_bool()); return true;
    default: break;
    }
  }
  return false;
}

bool is_float_dt(int dt) {
  return dt == TORC_F32 || dt == TORC_F16 || dt == TORC_BF16 || dt == TORC_F64;
}
bool is_int_dt(int dt) {
  return dt == TORC_I32 || dt == TORC_I64 || dt == TORC_U8 || dt == TORC_BOOL;
}

template <class T> T *base(const torc_ktensor *t) {
  return (T *)t->data + t->offset;
}

/* t's first element, of whatever dtype. */
void *any_base(const torc_ktensor *t) {
  return (char *)t->data +
         t->offset * (int64_t)torc_dtype_size((torc_dtype)t->dtype);
}

unsigned blocks(int64_t n) {
  return (unsigned)(n < kMaxBlocks ? n : kMaxBlocks);
}

int bad(const torc_kernel_args *a, const char *what) {
  return torc_cuda__set_error(TORC_ERR_INTERNAL, "cuda kernel '%s': %s",
                              a->op, what);
}

/* One input and one output of its rank: a floating input with an output
 * of its dtype, or (when ints) an integer or bool input with an integer
 * or bool output (i64 for sum and prod, the input's for amax, amin). */
int check_1_1(const torc_kernel_args *a, size_t params_size, bool ints) {
  if (a->n_in != 1 || a->n_out != 1)
    return bad(a, "expected 1 input and 1 output");
  if (a->params == NULL || a->params_size < params_size)
    return bad(a, "missing its params");
  int dt = a->in[0].dtype, ot = a->out[0].dtype;
  bool ok = is_float_dt(dt) ? ot == dt
                            : ints && is_int_dt(dt) && is_int_dt(ot);
  if (!ok || a->in[0].ndim != a->out[0].ndim)
    return bad(a, ints ? "expected a floating input and output of one dtype, "
                         "or integer or bool ones, of one rank"
                       : "expected floating tensors of one dtype and rank");
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

/* sum, prod, mean, amax, amin over the dims mask (mean: floats only). */
template <int OP> int run_reduce(const torc_kernel_args *a) {
  int st = check_1_1(a, sizeof(torc_reduce_params), OP != TORC_CUDA_R_MEAN);
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
  auto go = [&](auto e) {
    typedef decltype(e) E;
    k_reduce<OP, E><<<nb, kBlock, 0, s>>>(base<typename E::T>(x), any_base(y),
                                          y->dtype, g.outer, g.nout, g.inner,
                                          g.count);
  };
  if constexpr (OP == TORC_CUDA_R_MEAN)
    by_dtype<false>(x->dtype, go);
  else
    by_dtype<true>(x->dtype, go);
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* One two-pass kind's launch, by the input's (floating) dtype. */
template <int KIND>
int launch2(const torc_kernel_args *a, const reduce_geo &g, double extra,
            cudaStream_t s) {
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  unsigned nb = blocks(g.nout);
  by_dtype<false>(x->dtype, [&](auto e) {
    typedef typename decltype(e)::T T;
    k_reduce2<KIND, decltype(e)><<<nb, kBlock, 0, s>>>(
        base<T>(x), base<T>(y), g.outer, g.nout, g.inner, g.count, extra);
  });
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* logsumexp, var, std (torc_reduce_params) and norm (torc_norm_params:
 * p is 1, 2 or inf). */
template <int KIND> int run_reduce2(const torc_kernel_args *a) {
  bool is_norm = KIND == TORC_CUDA_R2_NORM1;
  int st = check_1_1(a,
                     is_norm ? sizeof(torc_norm_params)
                             : sizeof(torc_reduce_params),
                     false);
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

/* softmax (LOG 0) / log_softmax (1) along the dim, floats only. */
template <int LOG> int run_softmax(const torc_kernel_args *a) {
  int st = check_1_1(a, sizeof(torc_dim_params), false);
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
  by_dtype<false>(x->dtype, [&](auto e) {
    typedef typename decltype(e)::T T;
    k_softmax<LOG, decltype(e)><<<blocks(nlines), kBlock, 0, s>>>(
        base<T>(x), base<T>(y), lines, nlines, len, sx, sy);
  });
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* max_dim (IS_MIN 0) / min_dim (1): values and first indices along the
 * dim, every dtype. */
template <int IS_MIN> int run_extreme(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out != 2 || a->params == NULL ||
      a->params_size < sizeof(torc_dim_params))
    return bad(a, "expected 1 input, 2 outputs and torc_dim_params");
  const torc_ktensor *x = &a->in[0], *v = &a->out[0], *ix = &a->out[1];
  int dt = x->dtype, nd = x->ndim;
  if (!(is_float_dt(dt) || is_int_dt(dt)) || v->dtype != dt ||
      ix->dtype != TORC_I64 || v->ndim != nd || ix->ndim != nd)
    return bad(a, "expected values of the input's dtype and i64 indices");
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
  by_dtype<true>(dt, [&](auto e) {
    typedef typename decltype(e)::T T;
    k_extreme<IS_MIN, decltype(e)><<<nb, kBlock, 0, s>>>(
        base<T>(x), base<T>(v), pi, lines, nlines, len, sx);
  });
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
int k_var(const torc_kernel_args *a) {
  return run_reduce2<TORC_CUDA_R2_VAR>(a);
}
int k_std(const torc_kernel_args *a) {
  return run_reduce2<TORC_CUDA_R2_STD>(a);
}
int k_norm(const torc_kernel_args *a) {
  return run_reduce2<TORC_CUDA_R2_NORM1>(a); /* p chooses the kind */
}
int k_softmax_op(const torc_kernel_args *a) { return run_softmax<0>(a); }
int k_log_softmax_op(const torc_kernel_args *a) { return run_softmax<1>(a); }

/* An op, its kernel and whether it takes integers and bool as well as
 * the floating dtypes (as ref: REF(ALL) against REF(FLOATS)). */
struct reduce_kernel {
  const char *op;
  torc_kernel_fn fn;
  bool ints;
};

#define ROW(name, id) {#name, k_##name, id != TORC_CUDA_R_MEAN},
const reduce_kernel reduce_kernels[] = {
    TORC_CUDA_REDUCE_OPS(ROW){"softmax", k_softmax_op, false},
    {"log_softmax", k_log_softmax_op, false},
    {"logsumexp", k_logsumexp, false},
    {"var", k_var, false},
    {"std", k_std, false},
    {"norm", k_norm, false},
    {"max_dim", k_max_dim, true},
    {"min_dim", k_min_dim, true}};
#undef ROW

} // namespace

/* Registers every reduction for the floating dtypes, and those that take
 * them for i32, i64, u8 and bool too. */
extern "C" int torc_cuda__register_reduce(const torc_host *host,
                                          torc_plugin *self) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F16, TORC_BF16, TORC_F64,
                                   TORC_I32, TORC_I64, TORC_U8,   TORC_BOOL};
  const size_t n_ops = sizeof reduce_kernels / sizeof reduce_kernels[0];
  for (size_t i = 0; i < n_ops; i++)
    for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; j++) {
      if (!reduce_kernels[i].ints && !is_float_dt(dtypes[j]))
        continue;
      int st = torc_cuda__register(host, self, reduce_kernels[i].op, dtypes[j],
                                   reduce_kernels[i].fn, 0, 0);
      if (st != TORC_OK)
        return st;
    }
  return TORC_OK;
}
