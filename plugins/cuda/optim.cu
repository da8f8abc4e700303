/* plugins/cuda/optim.cu — the optimizer steps (sgd_step_, adam_step_) and
 * the multi-tensor ops (foreach_add_, foreach_mul_, foreach_norm,
 * foreach_sgd_step_, foreach_adam_step_) of the cuda plugin, for f32, f64,
 * f16 and bf16. A list call runs in as few launches as its tensors take:
 * each launch carries the pointers and sizes of up to a few dozen tensors
 * in its by-value (__grid_constant__) argument and splits every tensor
 * into chunks of kChunk elements, one block each (optim_body.h's plan); a
 * single-tensor step is a list of one, so both give the same bits. The
 * updates are optim_body.h's, whose operations are never fused, so they
 * give ref's bits. foreach_norm folds each chunk in f64 into a partial in
 * the workspace, then each tensor's partials in chunk order: no atomics,
 * the same result every run.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_internal.h"
#include "optim_body.h"
#include "torc/optim.h"

namespace {

const int kBlock = 256;
const int64_t kChunk = 16384;          /* elements per block */
const int64_t kMaxLaunchBlocks = 1 << 30; /* well inside gridDim.x */

/* An element type: storage T, computing type A, the dtype, load (exact)
 * and store (rounded to nearest even). */
struct e_f32 {
  typedef float T;
  typedef float A;
  static const int dt = TORC_F32;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
struct e_f64 {
  typedef double T;
  typedef double A;
  static const int dt = TORC_F64;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
};
struct e_f16 {
  typedef uint16_t T;
  typedef float A;
  static const int dt = TORC_F16;
  __device__ static float load(uint16_t v) {
    return __half2float(__ushort_as_half(v));
  }
  __device__ static uint16_t store(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};
struct e_bf16 {
  typedef uint16_t T;
  typedef float A;
  static const int dt = TORC_BF16;
  __device__ static float load(uint16_t v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
  __device__ static uint16_t store(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};

/* The updates of optim_body.h by computing type. */
__device__ inline float sgd_of(int dt, const torc_cuda_sgd_k *k, float p,
                               float g, float *b) {
  return torc_cuda_sgd_f(dt, k, p, g, b);
}
__device__ inline double sgd_of(int dt, const torc_cuda_sgd_k *k, double p,
                                double g, double *b) {
  return torc_cuda_sgd_d(dt, k, p, g, b);
}
__device__ inline float adam_of(int dt, const torc_cuda_adam_k *k, float p,
                                float g, float *m, float *v, float *vm) {
  return torc_cuda_adam_f(dt, k, p, g, m, v, vm);
}
__device__ inline double adam_of(int dt, const torc_cuda_adam_k *k, double p,
                                 double g, double *m, double *v, double *vm) {
  return torc_cuda_adam_d(dt, k, p, g, m, v, vm);
}
__device__ inline float add_of(int dt, float x, float y) {
  return torc_cuda_fe_add_f(dt, x, y);
}
__device__ inline double add_of(int dt, double x, double y) {
  return torc_cuda_fe_add_d(dt, x, y);
}
__device__ inline float mul_of(int dt, float x, float s) {
  return torc_cuda_fe_mul_f(dt, x, s);
}
__device__ inline double mul_of(int dt, double x, double s) {
  return torc_cuda_fe_mul_d(dt, x, s);
}

/* One launch's tensors: D lists of pointers (list j of tensor e), each
 * tensor's element count, the first chunk and first block of its entry. */
template <int D> struct mt_args {
  enum { NT = 2304 / (8 * D + 16) };
  void *ptr[D][NT];
  int64_t numel[NT];
  int64_t chunk0[NT];
  int32_t bstart[NT];
  int32_t n;
};

/* The one-element flag of a step (NULL: always step): false skips it. */
__device__ inline bool flag_on(const void *flag, int dt) {
  if (flag == NULL)
    return true;
  switch (dt) {
  case TORC_F32: return *(const float *)flag != 0.0f;
  case TORC_F64: return *(const double *)flag != 0.0;
  default: return *(const uint8_t *)flag != 0;
  }
}

/* The element range of this block: its entry e and [*lo, *hi). */
template <int D>
__device__ inline int mt_range(const mt_args<D> &a, int64_t *lo,
                               int64_t *hi) {
  int e = torc_cuda_mt_locate(a.bstart, a.n, (int32_t)blockIdx.x);
  int64_t chunk = a.chunk0[e] + ((int64_t)blockIdx.x - a.bstart[e]);
  *lo = chunk * kChunk;
  *hi = *lo + kChunk < a.numel[e] ? *lo + kChunk : a.numel[e];
  return e;
}

/* Every element of the launch's chunks through op(a, e, i). */
template <int D, class Op>
__global__ void k_mt(const __grid_constant__ mt_args<D> a,
                     const __grid_constant__ Op op) {
  if (!flag_on(op.flag, op.flag_dt))
    return;
  int64_t lo, hi;
  int e = mt_range(a, &lo, &hi);
  for (int64_t i = lo + threadIdx.x; i < hi; i += kBlock)
    op(a, e, i);
}

/* foreach_add_: lists y (in), x (out): x += y. */
template <class E> struct op_add {
  const void *flag;
  int flag_dt;
  __device__ void operator()(const mt_args<2> &a, int e, int64_t i) const {
    typedef typename E::T T;
    T *x = (T *)a.ptr[1][e];
    x[i] = E::store(
        add_of(E::dt, E::load(x[i]), E::load(((const T *)a.ptr[0][e])[i])));
  }
};

/* foreach_mul_: list x (out), s one element on the device: x *= s. */
template <class E> struct op_mul {
  const void *flag;
  int flag_dt;
  const typename E::T *s;
  __device__ void operator()(const mt_args<1> &a, int e, int64_t i) const {
    typedef typename E::T T;
    T *x = (T *)a.ptr[0][e];
    x[i] = E::store(mul_of(E::dt, E::load(x[i]), E::load(s[0])));
  }
};

/* The steps: lists grad, param (and buf) / grad, param, m, v (and vmax). */
template <class E, int D> struct op_sgd {
  const void *flag;
  int flag_dt;
  torc_cuda_sgd_k k;
  __device__ void operator()(const mt_args<D> &a, int e, int64_t i) const {
    typedef typename E::T T;
    typedef typename E::A A;
    T *p = (T *)a.ptr[1][e];
    A g = E::load(((const T *)a.ptr[0][e])[i]), b = 0;
    if (D == 3)
      b = E::load(((T *)a.ptr[D - 1][e])[i]);
    A np = sgd_of(E::dt, &k, E::load(p[i]), g, &b);
    if (D == 3)
      ((T *)a.ptr[D - 1][e])[i] = E::store(b);
    p[i] = E::store(np);
  }
};

template <class E, int D> struct op_adam {
  const void *flag;
  int flag_dt;
  torc_cuda_adam_k k;
  __device__ void operator()(const mt_args<D> &a, int e, int64_t i) const {
    typedef typename E::T T;
    typedef typename E::A A;
    T *p = (T *)a.ptr[1][e], *m = (T *)a.ptr[2][e], *v = (T *)a.ptr[3][e];
    A g = E::load(((const T *)a.ptr[0][e])[i]);
    A mm = E::load(m[i]), vv = E::load(v[i]), vm = 0;
    if (D == 5)
      vm = E::load(((T *)a.ptr[D - 1][e])[i]);
    A np = adam_of(E::dt, &k, E::load(p[i]), g, &mm, &vv, &vm);
    m[i] = E::store(mm);
    v[i] = E::store(vv);
    if (D == 5)
      ((T *)a.ptr[D - 1][e])[i] = E::store(vm);
    p[i] = E::store(np);
  }
};

/* The shared-memory tree of the norm's partials, folding with kind. */
__device__ inline double tree_fn(double *v, double mine, int kind) {
  int t = threadIdx.x;
  v[t] = mine;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s)
      v[t] = torc_cuda_fn_step(kind, v[t], v[t + s]);
    __syncthreads();
  }
  double r = v[0];
  __syncthreads();
  return r;
}

/* foreach_norm's chunk fold: partial pbase[e] + chunk of the call gets the
 * chunk's fold of torc_cuda_fn_term (scale: per tensor tidx[e] of the
 * call, f64's second round; NULL otherwise). */
struct norm_extra {
  int32_t pbase[mt_args<1>::NT];
  int32_t tidx[mt_args<1>::NT];
  int kind;
  const double *scale;
  double *partials;
};

template <class E>
__global__ void k_norm_chunks(const __grid_constant__ mt_args<1> a,
                              const __grid_constant__ norm_extra x) {
  __shared__ double v[kBlock];
  int64_t lo, hi;
  int e = mt_range(a, &lo, &hi);
  const typename E::T *p = (const typename E::T *)a.ptr[0][e];
  double sc = x.scale ? x.scale[x.tidx[e]] : 0.0;
  int fold = x.kind == 1 || x.kind == 2 ? x.kind : 0;
  double acc = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kBlock)
    acc = torc_cuda_fn_step(fold, acc,
                            torc_cuda_fn_term(x.kind, (double)E::load(p[i]),
                                              sc));
  acc = tree_fn(v, acc, fold);
  if (threadIdx.x == 0)
    x.partials[x.pbase[e] + lo / kChunk] = acc;
}

/* The tensors [k0, k0 + n) of the call: their partials [cb[k], cb[k + 1])
 * (k from 0 here) fold in order into the norm, written to out[k0 + k] or,
 * for f64's first round, to scale_out[k0 + k]. */
enum { kFoldTensors = 256 };
struct fold_args {
  int32_t cb[kFoldTensors + 1];
  int32_t n, k0, kind, scaled;
  const double *partials;
  const double *scale;
  double *scale_out;
  void *out;
};

template <class E>
__global__ void k_norm_fold(const __grid_constant__ fold_args f) {
  __shared__ double v[kBlock];
  int fold = f.kind == 1 || f.kind == 2 ? f.kind : 0;
  if (f.scale_out != NULL)
    fold = 0;
  for (int k = blockIdx.x; k < f.n; k += gridDim.x) {
    double acc = 0;
    for (int32_t j = f.cb[k] + threadIdx.x; j < f.cb[k + 1]; j += kBlock)
      acc = torc_cuda_fn_step(fold, acc, f.partials[j]);
    acc = tree_fn(v, acc, fold);
    if (threadIdx.x == 0) {
      if (f.scale_out != NULL)
        f.scale_out[f.k0 + k] = acc;
      else
        ((typename E::T *)f.out)[f.k0 + k] = E::store(
            (typename E::A)torc_cuda_fn_final(
                f.kind, acc, f.scaled, f.scaled ? f.scale[f.k0 + k] : 0.0));
    }
  }
}

int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

int bad(const torc_kernel_args *a, const char *what) {
  return torc_cuda__set_error(TORC_ERR_INTERNAL, "cuda kernel '%s': %s",
                              a->op, what);
}

/* A call's lists: list j of tensor k is in[j * n + k] for the first n_in
 * lists, else out[(j - n_in) * n + k]. */
struct lists {
  const torc_kernel_args *a;
  int n, n_in;
  const torc_ktensor *at(int j, int k) const {
    return j < n_in ? &a->in[j * n + k] : &a->out[(j - n_in) * n + k];
  }
};

/* Checks that the D lists have one dtype (dt) and, per tensor, one size;
 * the sizes go to numel[n] (malloc'd, freed by the caller). */
int lists_check(const lists &L, int D, int dt, int64_t **numel_out) {
  *numel_out = NULL;
  int64_t *nu = (int64_t *)malloc(sizeof(int64_t) * (size_t)(L.n ? L.n : 1));
  if (nu == NULL)
    return torc_cuda__set_error(TORC_ERR_OOM,
                                "cuda kernel '%s': out of host memory for a "
                                "list of %d tensors",
                                L.a->op, L.n);
  for (int k = 0; k < L.n; k++) {
    nu[k] = numel(L.at(0, k));
    for (int j = 0; j < D; j++)
      if (L.at(j, k)->dtype != dt || numel(L.at(j, k)) != nu[k]) {
        free(nu);
        return bad(L.a, "the lists' tensors differ in dtype or size");
      }
  }
  *numel_out = nu;
  return TORC_OK;
}

/* The element pointer of a tensor, by its dtype's size. */
void *elem_base(const torc_ktensor *t) {
  size_t sz;
  switch (t->dtype) {
  case TORC_F64:
  case TORC_I64: sz = 8; break;
  case TORC_F32:
  case TORC_I32: sz = 4; break;
  case TORC_F16:
  case TORC_BF16: sz = 2; break;
  default: sz = 1; /* bool, u8 */
  }
  return (char *)t->data + (size_t)t->offset * sz;
}

/* Runs op over every element of the lists, launch by launch. */
template <int D, class Op>
int run_lists(const lists &L, const int64_t *nu, const Op &op,
              cudaStream_t s) {
  typedef mt_args<D> args_t;
  torc_cuda_mt_entry ent[args_t::NT];
  int ct = 0;
  int64_t cc = 0;
  int ne;
  while ((ne = torc_cuda_mt_next(nu, L.n, kChunk, args_t::NT,
                                 kMaxLaunchBlocks, &ct, &cc, ent)) > 0) {
    args_t a;
    memset(&a, 0, sizeof a);
    int64_t b = 0;
    for (int e = 0; e < ne; e++) {
      for (int j = 0; j < D; j++)
        a.ptr[j][e] = elem_base(L.at(j, ent[e].tensor));
      a.numel[e] = nu[ent[e].tensor];
      a.chunk0[e] = ent[e].chunk0;
      a.bstart[e] = (int32_t)b;
      b += ent[e].nchunks;
    }
    a.n = ne;
    k_mt<D, Op><<<(unsigned)b, kBlock, 0, s>>>(a, op);
    int st = torc_cuda__after_launch(L.a->device_index, L.a->op);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}

bool is_float(int dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

/* ---- foreach_add_, foreach_mul_ ---- */

template <class E> int add_launch(const lists &L, const int64_t *nu,
                                  cudaStream_t s) {
  op_add<E> op = {NULL, 0};
  return run_lists<2>(L, nu, op, s);
}

int k_foreach_add(const torc_kernel_args *a) {
  if (a->n_in < 1 || a->n_out != a->n_in)
    return bad(a, "expected n inputs (ys) and n outputs (xs)");
  lists L = {a, a->n_in, 1};
  int dt = a->out[0].dtype;
  int64_t *nu;
  if (!is_float(dt))
    return bad(a, "the list is not f32, f64, f16 or bf16");
  int st = lists_check(L, 2, dt, &nu);
  if (st != TORC_OK)
    return st;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    st = TORC_ERR_DEVICE;
  else if (dt == TORC_F64)
    st = add_launch<e_f64>(L, nu, s);
  else if (dt == TORC_F16)
    st = add_launch<e_f16>(L, nu, s);
  else if (dt == TORC_BF16)
    st = add_launch<e_bf16>(L, nu, s);
  else
    st = add_launch<e_f32>(L, nu, s);
  free(nu);
  return st;
}

template <class E> int mul_launch(const lists &L, const int64_t *nu,
                                  const torc_ktensor *sc, cudaStream_t s) {
  op_mul<E> op = {NULL, 0, (const typename E::T *)elem_base(sc)};
  return run_lists<1>(L, nu, op, s);
}

int k_foreach_mul(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out < 1)
    return bad(a, "expected 1 input (the factor) and n outputs (xs)");
  lists L = {a, a->n_out, 0};
  int dt = a->out[0].dtype;
  int64_t *nu;
  if (!is_float(dt) || a->in[0].dtype != dt || numel(&a->in[0]) != 1)
    return bad(a, "expected an f32, f64, f16 or bf16 list and a one-element "
                  "factor of its dtype");
  int st = lists_check(L, 1, dt, &nu);
  if (st != TORC_OK)
    return st;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    st = TORC_ERR_DEVICE;
  else if (dt == TORC_F64)
    st = mul_launch<e_f64>(L, nu, &a->in[0], s);
  else if (dt == TORC_F16)
    st = mul_launch<e_f16>(L, nu, &a->in[0], s);
  else if (dt == TORC_BF16)
    st = mul_launch<e_bf16>(L, nu, &a->in[0], s);
  else
    st = mul_launch<e_f32>(L, nu, &a->in[0], s);
  free(nu);
  return st;
}

/* ---- the steps ---- */

/* A step's lists: n grads (and a flag) in; per lists of n out. */
int step_lists(const torc_kernel_args *a, int per, lists *L,
               const torc_ktensor **flag) {
  int n = per > 0 ? a->n_out / per : 0;
  if (n < 1 || a->n_out != n * per || (a->n_in != n && a->n_in != n + 1))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': %d inputs and %d outputs; "
                                "expected n grads (and a flag) and %d lists "
                                "of n",
                                a->op, (int)a->n_in, (int)a->n_out, per);
  L->a = a;
  L->n = n;
  L->n_in = 1;
  *flag = a->n_in == n + 1 ? &a->in[n] : NULL;
  if (*flag != NULL && numel(*flag) != 1)
    return bad(a, "the flag is not one element");
  return TORC_OK;
}

template <class E>
int sgd_launch(const lists &L, const int64_t *nu, const torc_ktensor *flag,
               const torc_sgd_step_params *p, cudaStream_t s) {
  torc_cuda_sgd_k k = torc_cuda_sgd_k_of(E::dt, p);
  const void *fp = flag ? elem_base(flag) : NULL;
  int fdt = flag ? flag->dtype : 0;
  if (k.has_buf) {
    op_sgd<E, 3> op = {fp, fdt, k};
    return run_lists<3>(L, nu, op, s);
  }
  op_sgd<E, 2> op = {fp, fdt, k};
  return run_lists<2>(L, nu, op, s);
}

template <class E>
int adam_launch(const lists &L, const int64_t *nu, const torc_ktensor *flag,
                const torc_adam_step_kparams *p, cudaStream_t s) {
  torc_cuda_adam_k k = torc_cuda_adam_k_of(E::dt, p);
  const void *fp = flag ? elem_base(flag) : NULL;
  int fdt = flag ? flag->dtype : 0;
  if (k.amsgrad) {
    op_adam<E, 5> op = {fp, fdt, k};
    return run_lists<5>(L, nu, op, s);
  }
  op_adam<E, 4> op = {fp, fdt, k};
  return run_lists<4>(L, nu, op, s);
}

/* The flag's element: bool, u8, f32 or f64. */
bool flag_dtype_ok(const torc_ktensor *f) {
  return f == NULL || f->dtype == TORC_BOOL || f->dtype == TORC_U8 ||
         f->dtype == TORC_F32 || f->dtype == TORC_F64;
}

/* What an optimizer step over `per` lists (plus the params list) and a
 * flag checks before its launch: the lists, one floating dtype, the
 * flag's dtype, the sizes (*nu: free it) and the stream. TORC_OK, or an
 * error after set_error with nothing left to free. */
int step_prepare(const torc_kernel_args *a, int per, lists *L,
                 const torc_ktensor **flag, int64_t **nu, cudaStream_t *s) {
  int st = step_lists(a, per, L, flag);
  if (st != TORC_OK)
    return st;
  int dt = a->out[0].dtype;
  if (!is_float(dt) || !flag_dtype_ok(*flag))
    return bad(a, "expected an f32, f64, f16 or bf16 list (and a bool "
                  "flag)");
  if ((st = lists_check(*L, per + 1, dt, nu)) != TORC_OK)
    return st;
  if ((*s = torc_cuda__kstream(a)) == NULL) {
    free(*nu);
    return TORC_ERR_DEVICE;
  }
  return TORC_OK;
}

int k_sgd_step(const torc_kernel_args *a) {
  if (a->params == NULL || a->params_size < sizeof(torc_sgd_step_params))
    return bad(a, "missing its params");
  const torc_sgd_step_params *p = (const torc_sgd_step_params *)a->params;
  lists L;
  const torc_ktensor *flag;
  int64_t *nu;
  cudaStream_t s;
  int st = step_prepare(a, p->momentum != 0 ? 2 : 1, &L, &flag, &nu, &s);
  if (st != TORC_OK)
    return st;
  switch (a->out[0].dtype) {
  case TORC_F64: st = sgd_launch<e_f64>(L, nu, flag, p, s); break;
  case TORC_F16: st = sgd_launch<e_f16>(L, nu, flag, p, s); break;
  case TORC_BF16: st = sgd_launch<e_bf16>(L, nu, flag, p, s); break;
  default: st = sgd_launch<e_f32>(L, nu, flag, p, s); break;
  }
  free(nu);
  return st;
}

int k_adam_step(const torc_kernel_args *a) {
  if (a->params == NULL || a->params_size < sizeof(torc_adam_step_kparams))
    return bad(a, "missing its params");
  const torc_adam_step_kparams *p = (const torc_adam_step_kparams *)a->params;
  lists L;
  const torc_ktensor *flag;
  int64_t *nu;
  cudaStream_t s;
  int st = step_prepare(a, p->p.amsgrad ? 4 : 3, &L, &flag, &nu, &s);
  if (st != TORC_OK)
    return st;
  switch (a->out[0].dtype) {
  case TORC_F64: st = adam_launch<e_f64>(L, nu, flag, p, s); break;
  case TORC_F16: st = adam_launch<e_f16>(L, nu, flag, p, s); break;
  case TORC_BF16: st = adam_launch<e_bf16>(L, nu, flag, p, s); break;
  default: st = adam_launch<e_f32>(L, nu, flag, p, s); break;
  }
  free(nu);
  return st;
}

/* ---- foreach_norm ---- */

/* One round: every chunk's partial (kind, scale per tensor or NULL), then
 * each tensor's fold into out (or, for f64's first round, scale_out). */
template <class E>
int norm_round(const lists &L, const int64_t *nu, const int32_t *cb,
               int kind, const double *scale, double *scale_out,
               double *partials, void *out, cudaStream_t s) {
  typedef mt_args<1> args_t;
  torc_cuda_mt_entry ent[args_t::NT];
  int ct = 0;
  int64_t cc = 0;
  int ne;
  while ((ne = torc_cuda_mt_next(nu, L.n, kChunk, args_t::NT,
                                 kMaxLaunchBlocks, &ct, &cc, ent)) > 0) {
    args_t a;
    norm_extra x;
    memset(&a, 0, sizeof a);
    memset(&x, 0, sizeof x);
    int64_t b = 0;
    for (int e = 0; e < ne; e++) {
      a.ptr[0][e] = elem_base(L.at(0, ent[e].tensor));
      a.numel[e] = nu[ent[e].tensor];
      a.chunk0[e] = ent[e].chunk0;
      a.bstart[e] = (int32_t)b;
      x.pbase[e] = cb[ent[e].tensor];
      x.tidx[e] = ent[e].tensor;
      b += ent[e].nchunks;
    }
    a.n = ne;
    x.kind = scale_out != NULL ? 0 : kind;
    x.scale = scale;
    x.partials = partials;
    k_norm_chunks<E><<<(unsigned)b, kBlock, 0, s>>>(a, x);
    int st = torc_cuda__after_launch(L.a->device_index, L.a->op);
    if (st != TORC_OK)
      return st;
  }
  for (int k0 = 0; k0 < L.n; k0 += kFoldTensors) {
    fold_args f;
    memset(&f, 0, sizeof f);
    f.n = L.n - k0 < kFoldTensors ? L.n - k0 : kFoldTensors;
    f.k0 = k0;
    for (int k = 0; k <= f.n; k++)
      f.cb[k] = cb[k0 + k];
    f.kind = kind;
    f.scaled = scale != NULL;
    f.partials = partials;
    f.scale = scale;
    f.scale_out = scale_out;
    f.out = out;
    k_norm_fold<E><<<(unsigned)f.n, kBlock, 0, s>>>(f);
    int st = torc_cuda__after_launch(L.a->device_index, L.a->op);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}

template <class E>
int norm_launch(const torc_kernel_args *a, const lists &L, const int64_t *nu,
                int kind, cudaStream_t s) {
  int32_t *cb = (int32_t *)malloc(sizeof(int32_t) * (size_t)(L.n + 1));
  if (cb == NULL)
    return torc_cuda__set_error(TORC_ERR_OOM,
                                "cuda kernel 'foreach_norm': out of host "
                                "memory for %d tensors",
                                L.n);
  int64_t total = 0;
  for (int k = 0; k < L.n; k++) {
    cb[k] = (int32_t)total;
    total += torc_cuda_mt_chunks(nu[k], kChunk);
  }
  cb[L.n] = (int32_t)total;
  if (total > INT32_MAX) {
    free(cb);
    return bad(a, "the list has more than 2^31 chunks");
  }
  bool two = E::dt == TORC_F64 && kind == 2;
  void *ws = NULL;
  size_t nbytes = sizeof(double) * ((size_t)total + (two ? (size_t)L.n : 0));
  int st = torc_cuda__workspace(a, nbytes, &ws);
  if (st == TORC_OK) {
    double *partials = (double *)ws, *scale = partials + total;
    void *out = elem_base(&a->out[0]);
    if (two) {
      st = norm_round<E>(L, nu, cb, kind, NULL, scale, partials, out, s);
      if (st == TORC_OK)
        st = norm_round<E>(L, nu, cb, kind, scale, NULL, partials, out, s);
    } else {
      st = norm_round<E>(L, nu, cb, kind, NULL, NULL, partials, out, s);
    }
    torc_cuda__workspace_done(a, ws);
  }
  free(cb);
  return st;
}

int k_foreach_norm(const torc_kernel_args *a) {
  if (a->params == NULL || a->params_size < sizeof(torc_norm_params))
    return bad(a, "missing its params");
  double p = ((const torc_norm_params *)a->params)->p;
  int kind = p == 1 ? 1 : p == 2 ? 2 : (isinf(p) && p > 0) ? 0 : -1;
  if (kind < 0)
    return torc_cuda__set_error(TORC_ERR_INVALID,
                                "foreach_norm of order p = %g: the cuda "
                                "kernel takes p = 1, 2 or inf",
                                p);
  if (a->n_in < 1 || a->n_out != 1 || numel(&a->out[0]) != a->n_in)
    return bad(a, "expected n inputs and one output of n elements");
  lists L = {a, a->n_in, 1};
  int dt = a->in[0].dtype;
  if (!is_float(dt) || a->out[0].dtype != dt)
    return bad(a, "expected an f32, f64, f16 or bf16 list and an output of "
                  "its dtype");
  int64_t *nu;
  int st = lists_check(L, 1, dt, &nu);
  if (st != TORC_OK)
    return st;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    st = TORC_ERR_DEVICE;
  else if (dt == TORC_F64)
    st = norm_launch<e_f64>(a, L, nu, kind, s);
  else if (dt == TORC_F16)
    st = norm_launch<e_f16>(a, L, nu, kind, s);
  else if (dt == TORC_BF16)
    st = norm_launch<e_bf16>(a, L, nu, kind, s);
  else
    st = norm_launch<e_f32>(a, L, nu, kind, s);
  free(nu);
  return st;
}

struct optim_kernel {
  const char *op;
  torc_kernel_fn fn;
};

const optim_kernel optim_kernels[] = {
    {"sgd_step_", k_sgd_step},
    {"adam_step_", k_adam_step},
    {"foreach_sgd_step_", k_sgd_step},
    {"foreach_adam_step_", k_adam_step},
    {"foreach_add_", k_foreach_add},
    {"foreach_mul_", k_foreach_mul},
    {"foreach_norm", k_foreach_norm}};

} // namespace

extern "C" int torc_cuda__register_optim(const torc_host *host,
                                         torc_plugin *self) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
  for (size_t i = 0; i < sizeof optim_kernels / sizeof optim_kernels[0]; i++)
    for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; j++) {
      int st = torc_cuda__register(host, self, optim_kernels[i].op,
                                   dtypes[j], optim_kernels[i].fn, 0,
                                   TORC_KERNEL_CONTIGUOUS);
      if (st != TORC_OK)
        return st;
    }
  return TORC_OK;
}
