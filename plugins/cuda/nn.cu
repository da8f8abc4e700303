/* plugins/cuda/nn.cu — the normalisation layers (layer_norm, group_norm and
 * their backwards) and the fused cross-entropy (forward and backward) of
 * the cuda plugin, for f32, f64, f16 and bf16 (f16 and bf16 load to f32
 * and accumulate in f32, f64 in f64), over nn_body.h's formulas. Every
 * reduction folds in a fixed order (per-thread strided runs, then a tree
 * or a warp's butterfly), so results are deterministic. A target outside
 * [0, C) that is not ignore_index is recorded in the device's error
 * record (kerr.h) and its row counts as ignored; the next wait reports it.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_internal.h"
#include "kerr.h"
#include "nn_body.h"
#include "torc/nn.h"

namespace {

const int kBlock = TORC_CUDA_NN_BLOCK;
static_assert(TORC_CUDA_LN_TX * TORC_CUDA_LN_TY == TORC_CUDA_NN_BLOCK,
              "layer_norm's parameter tiles are one block");
const int64_t kMaxBlocks = 65535; /* the block-stride loops cover the rest */

/* An element type: its storage T, its computing type A (also the
 * statistics' storage), load to A (exact) and store from A (rounded to
 * nearest even). */
struct e_f32 {
  typedef float T;
  typedef float A;
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
struct e_f64 {
  typedef double T;
  typedef double A;
  __device__ static double load(double v) { return v; }
  __device__ static double store(double v) { return v; }
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
};

/* The bodies of nn_body.h by computing type. */
struct m_f {
  __device__ static float mean(float s, int64_t k) {
    return torc_cuda_norm_mean_f(s, k);
  }
  __device__ static float rstd(float s, int64_t k, float e) {
    return torc_cuda_norm_rstd_f(s, k, e);
  }
  __device__ static float y(float x, float m, float r, float w, float b) {
    return torc_cuda_norm_y_f(x, m, r, w, b);
  }
  __device__ static float gx(float g, float x, float w, float m, float r,
                             float s1, float s2, int64_t k) {
    return torc_cuda_norm_gx_f(g, x, w, m, r, s1, s2, k);
  }
  __device__ static float cmax(float m, float x) {
    return torc_cuda_ce_max_f(m, x);
  }
  __device__ static int finite(float m) { return torc_cuda_ce_finite_f(m); }
  __device__ static float cexp(float x, float m) {
    return torc_cuda_ce_exp_f(x, m);
  }
  __device__ static float logsum(float m, float e) {
    return torc_cuda_ce_logsum_f(m, e);
  }
  __device__ static float logp(float x, float m, float l) {
    return torc_cuda_ce_logp_f(x, m, l);
  }
  __device__ static float loss(float lp, float wt, float eps, int64_t c,
                               float sm) {
    return torc_cuda_ce_loss_f(lp, wt, eps, c, sm);
  }
  __device__ static float grad(float x, float m, float l, float gr, float wt,
                               int is_t, float eps, int64_t c, float W,
                               float wc) {
    return torc_cuda_ce_grad_f(x, m, l, gr, wt, is_t, eps, c, W, wc);
  }
};
struct m_d {
  __device__ static double mean(double s, int64_t k) {
    return torc_cuda_norm_mean_d(s, k);
  }
  __device__ static double rstd(double s, int64_t k, double e) {
    return torc_cuda_norm_rstd_d(s, k, e);
  }
  __device__ static double y(double x, double m, double r, double w,
                             double b) {
    return torc_cuda_norm_y_d(x, m, r, w, b);
  }
  __device__ static double gx(double g, double x, double w, double m,
                              double r, double s1, double s2, int64_t k) {
    return torc_cuda_norm_gx_d(g, x, w, m, r, s1, s2, k);
  }
  __device__ static double cmax(double m, double x) {
    return torc_cuda_ce_max_d(m, x);
  }
  __device__ static int finite(double m) { return torc_cuda_ce_finite_d(m); }
  __device__ static double cexp(double x, double m) {
    return torc_cuda_ce_exp_d(x, m);
  }
  __device__ static double logsum(double m, double e) {
    return torc_cuda_ce_logsum_d(m, e);
  }
  __device__ static double logp(double x, double m, double l) {
    return torc_cuda_ce_logp_d(x, m, l);
  }
  __device__ static double loss(double lp, double wt, double eps, int64_t c,
                                double sm) {
    return torc_cuda_ce_loss_d(lp, wt, eps, c, sm);
  }
  __device__ static double grad(double x, double m, double l, double gr,
                                double wt, int is_t, double eps, int64_t c,
                                double W, double wc) {
    return torc_cuda_ce_grad_d(x, m, l, gr, wt, is_t, eps, c, W, wc);
  }
};
template <class A> struct math_of;
template <> struct math_of<float> { typedef m_f M; };
template <> struct math_of<double> { typedef m_d M; };

/* The block's sum of every thread's `mine`, in shared memory v: for s =
 * BLOCK/2 .. 1, v[t] += v[t + s]. Every thread gets the result. */
template <class A> __device__ inline A tree_sum(A *v, A mine) {
  int t = threadIdx.x;
  v[t] = mine;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s)
      v[t] = v[t] + v[t + s];
    __syncthreads();
  }
  A r = v[0];
  __syncthreads(); /* v is reused by the next tree */
  return r;
}

/* The sum and the maximum (NaN propagating) over a team of L lanes of a
 * warp (L = 32: a butterfly, every lane gets the same bits, as addition
 * commutes; L = 1: the thread's own). */
template <int L, class A> __device__ inline A team_sum(A v) {
  for (int o = L / 2; o > 0; o >>= 1)
    v = v + __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <int L, class A> __device__ inline A team_max(A v) {
  typedef typename math_of<A>::M M;
  for (int o = L / 2; o > 0; o >>= 1)
    v = M::cmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* ---- layer_norm / group_norm: R rows of K contiguous elements, the
 * affine parameter of flat element i at torc_cuda_norm_q(i, div, mod) ---- */

template <class E>
__global__ void k_norm_fwd(const typename E::T *x, const typename E::T *w,
                           const typename E::T *b, typename E::T *y,
                           typename E::A *mo, typename E::A *ro, int64_t R,
                           int64_t K, int64_t div, int64_t mod,
                           typename E::A eps) {
  typedef typename E::A A;
  typedef typename math_of<A>::M M;
  __shared__ A v[kBlock];
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const typename E::T *px = x + row * K;
    A s = 0;
    for (int64_t j = threadIdx.x; j < K; j += kBlock)
      s += E::load(px[j]);
    A mean = M::mean(tree_sum(v, s), K);
    A ss = 0;
    for (int64_t j = threadIdx.x; j < K; j += kBlock) {
      A d = E::load(px[j]) - mean;
      ss += d * d;
    }
    A rstd = M::rstd(tree_sum(v, ss), K, eps);
    for (int64_t j = threadIdx.x; j < K; j += kBlock) {
      int64_t q = torc_cuda_norm_qrow(row, j, K, div, mod);
      y[row * K + j] = E::store(
          M::y(E::load(px[j]), mean, rstd, E::load(w[q]), E::load(b[q])));
    }
    if (threadIdx.x == 0) {
      mo[row] = mean;
      ro[row] = rstd;
    }
  }
}

/* gx of each row: s1 = sum gy w, s2 = sum gy w xhat, then the formula. */
template <class E>
__global__ void k_norm_bw_rows(const typename E::T *gy, const typename E::T *x,
                               const typename E::T *w, const typename E::A *mt,
                               const typename E::A *rt, typename E::T *gx,
                               int64_t R, int64_t K, int64_t div,
                               int64_t mod) {
  typedef typename E::A A;
  typedef typename math_of<A>::M M;
  __shared__ A v[kBlock];
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    A mean = mt[row], rstd = rt[row], s1 = 0, s2 = 0;
    for (int64_t j = threadIdx.x; j < K; j += kBlock) {
      int64_t i = row * K + j, q = torc_cuda_norm_qrow(row, j, K, div, mod);
      A gh = E::load(gy[i]) * E::load(w[q]);
      s1 += gh;
      s2 += gh * ((E::load(x[i]) - mean) * rstd);
    }
    s1 = tree_sum(v, s1);
    s2 = tree_sum(v, s2);
    for (int64_t j = threadIdx.x; j < K; j += kBlock) {
      int64_t i = row * K + j, q = torc_cuda_norm_qrow(row, j, K, div, mod);
      gx[i] = E::store(M::gx(E::load(gy[i]), E::load(x[i]), E::load(w[q]),
                             mean, rstd, s1, s2, K));
    }
  }
}

/* gw[q] = sum gy xhat and gb[q] = sum gy over the elements of parameter q
 * (torc_cuda_norm_qset), one block per q: group_norm's (a channel's
 * elements are runs of the spatial size). */
template <class E>
__global__ void k_norm_bw_params(const typename E::T *gy,
                                 const typename E::T *x,
                                 const typename E::A *mt,
                                 const typename E::A *rt, typename E::T *gw,
                                 typename E::T *gb, int64_t K, int64_t div,
                                 int64_t mod, int64_t per) {
  typedef typename E::A A;
  __shared__ A v[kBlock];
  for (int64_t q = blockIdx.x; q < mod; q += gridDim.x) {
    A aw = 0, ab = 0;
    for (int64_t k = threadIdx.x; k < per; k += kBlock) {
      int64_t i = torc_cuda_norm_qset(k, q, div, mod), row = i / K;
      A g = E::load(gy[i]);
      aw += g * ((E::load(x[i]) - mt[row]) * rt[row]);
      ab += g;
    }
    aw = tree_sum(v, aw);
    ab = tree_sum(v, ab);
    if (threadIdx.x == 0) {
      gw[q] = E::store(aw);
      gb[q] = E::store(ab);
    }
  }
}

/* layer_norm's gw and gb, coalesced: block (x, y) of 32 x 8 threads
 * takes columns 32 x .. 32 x + 31, thread (tx, ty) folds rows
 * y * 8 + ty, step 8 * G (G = gridDim.y, torc_cuda_ln_groups), a tree
 * over ty folds the 8, and row group y's partials go to pw, pb [G][K]. */
template <class E>
__global__ void k_ln_params_tile(const typename E::T *gy,
                                 const typename E::T *x,
                                 const typename E::A *mt,
                                 const typename E::A *rt, typename E::A *pw,
                                 typename E::A *pb, int64_t R, int64_t K) {
  typedef typename E::A A;
  __shared__ A sw[TORC_CUDA_LN_TY][TORC_CUDA_LN_TX];
  __shared__ A sb[TORC_CUDA_LN_TY][TORC_CUDA_LN_TX];
  int tx = threadIdx.x % TORC_CUDA_LN_TX, ty = threadIdx.x / TORC_CUDA_LN_TX;
  int64_t q = (int64_t)blockIdx.x * TORC_CUDA_LN_TX + tx;
  int64_t step = (int64_t)TORC_CUDA_LN_TY * gridDim.y;
  A aw = 0, ab = 0;
  if (q < K)
    for (int64_t r = (int64_t)blockIdx.y * TORC_CUDA_LN_TY + ty; r < R;
         r += step) {
      A g = E::load(gy[r * K + q]);
      aw += g * ((E::load(x[r * K + q]) - mt[r]) * rt[r]);
      ab += g;
    }
  sw[ty][tx] = aw;
  sb[ty][tx] = ab;
  __syncthreads();
  for (int h = TORC_CUDA_LN_TY / 2; h > 0; h >>= 1) {
    if (ty < h) {
      sw[ty][tx] = sw[ty][tx] + sw[ty + h][tx];
      sb[ty][tx] = sb[ty][tx] + sb[ty + h][tx];
    }
    __syncthreads();
  }
  if (ty == 0 && q < K) {
    pw[(int64_t)blockIdx.y * K + q] = sw[0][tx];
    pb[(int64_t)blockIdx.y * K + q] = sb[0][tx];
  }
}

/* gw[q], gb[q]: the G row groups' partials folded in order. */
template <class E>
__global__ void k_ln_params_fold(const typename E::A *pw,
                                 const typename E::A *pb, typename E::T *gw,
                                 typename E::T *gb, int64_t K, int G) {
  typedef typename E::A A;
  int64_t step = (int64_t)blockDim.x * gridDim.x;
  for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < K;
       q += step) {
    A aw = 0, ab = 0;
    for (int y = 0; y < G; y++) {
      aw += pw[(int64_t)y * K + q];
      ab += pb[(int64_t)y * K + q];
    }
    gw[q] = E::store(aw);
    gb[q] = E::store(ab);
  }
}

template <class T> T *base(const torc_ktensor *t) {
  return (T *)t->data + t->offset;
}

unsigned blocks(int64_t n) {
  return (unsigned)(n < 1 ? 1 : n < kMaxBlocks ? n : kMaxBlocks);
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

bool is_float(int dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

int stat_dtype(int dt) { return dt == TORC_F64 ? TORC_F64 : TORC_F32; }

/* A norm's rows: layer_norm's K = numel(w) and R = numel(x) / K (div 1,
 * mod K); group_norm's (n, group) rows of C / groups * spatial elements
 * (div spatial, mod C). */
struct norm_geo {
  int64_t R, K, div, mod, total;
};

int norm_geo_of(const torc_kernel_args *a, const torc_ktensor *x,
                const torc_ktensor *w, bool group, norm_geo *g) {
  const torc_norm_kparams *p = (const torc_norm_kparams *)a->params;
  g->total = numel(x);
  if (!group) {
    g->K = numel(w);
    g->R = g->K ? g->total / g->K : 0;
    g->div = 1;
    g->mod = g->K;
    return TORC_OK;
  }
  if (x->ndim < 2 || p->groups < 1 || x->shape[1] % p->groups)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': groups %lld do not divide "
                                "the %lld channels of x",
                                a->op, (long long)p->groups,
                                (long long)(x->ndim >= 2 ? x->shape[1] : 0));
  int64_t N = x->shape[0], C = x->shape[1], S = 1;
  for (int32_t d = 2; d < x->ndim; d++)
    S *= x->shape[d];
  g->R = N * p->groups;
  g->K = C / p->groups * S;
  g->div = S ? S : 1;
  g->mod = C;
  return TORC_OK;
}

/* The operand checks of a norm call: counts, params, one floating dtype,
 * the statistics in f32 (f64 for f64). */
int norm_check(const torc_kernel_args *a, int n_in, int x_at) {
  if (a->n_in != n_in || a->n_out != 3)
    return bad(a, n_in == 3 ? "expected 3 inputs (x, w, b) and 3 outputs"
                            : "expected 5 inputs (gy, x, w, mean, rstd) and "
                              "3 outputs");
  if (a->params == NULL || a->params_size < sizeof(torc_norm_kparams))
    return bad(a, "missing its params");
  int dt = a->in[x_at].dtype, sd = stat_dtype(dt);
  if (!is_float(dt))
    return bad(a, "x is not f32, f64, f16 or bf16");
  for (int k = 0; k < n_in; k++) {
    bool stat = n_in == 5 && k >= 3;
    if (a->in[k].dtype != (stat ? sd : dt))
      return bad(a, "the inputs' dtypes differ from x's (statistics: f32, "
                    "f64 for f64)");
  }
  for (int k = 0; k < 3; k++) {
    bool stat = n_in == 3 && k >= 1;
    if (a->out[k].dtype != (stat ? sd : dt))
      return bad(a, "the outputs' dtypes differ from x's (statistics: f32, "
                    "f64 for f64)");
  }
  return TORC_OK;
}

template <class E>
void launch_norm_fwd(const torc_kernel_args *a, const norm_geo &g, double eps,
                     cudaStream_t s) {
  typedef typename E::T T;
  typedef typename E::A A;
  k_norm_fwd<E><<<blocks(g.R), kBlock, 0, s>>>(
      base<T>(&a->in[0]), base<T>(&a->in[1]), base<T>(&a->in[2]),
      base<T>(&a->out[0]), base<A>(&a->out[1]), base<A>(&a->out[2]), g.R,
      g.K, g.div, g.mod, (A)eps);
}

template <bool GROUP> int k_norm(const torc_kernel_args *a) {
  int st = norm_check(a, 3, 0);
  norm_geo g;
  if (st == TORC_OK)
    st = norm_geo_of(a, &a->in[0], &a->in[1], GROUP, &g);
  if (st != TORC_OK)
    return st;
  if (numel(&a->out[0]) != g.total || numel(&a->out[1]) != g.R ||
      numel(&a->out[2]) != g.R || numel(&a->in[1]) != g.mod ||
      numel(&a->in[2]) != g.mod)
    return bad(a, "operand sizes do not fit x's rows");
  if (g.R == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  double eps = ((const torc_norm_kparams *)a->params)->eps;
  switch (a->in[0].dtype) {
  case TORC_F64: launch_norm_fwd<e_f64>(a, g, eps, s); break;
  case TORC_F16: launch_norm_fwd<e_f16>(a, g, eps, s); break;
  case TORC_BF16: launch_norm_fwd<e_bf16>(a, g, eps, s); break;
  default: launch_norm_fwd<e_f32>(a, g, eps, s);
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

template <class E>
int launch_norm_bw(const torc_kernel_args *a, const norm_geo &g,
                   cudaStream_t s) {
  typedef typename E::T T;
  typedef typename E::A A;
  const T *gy = base<T>(&a->in[0]), *x = base<T>(&a->in[1]);
  const A *mt = base<A>(&a->in[3]), *rt = base<A>(&a->in[4]);
  if (g.R > 0 && g.K > 0) {
    k_norm_bw_rows<E><<<blocks(g.R), kBlock, 0, s>>>(
        gy, x, base<T>(&a->in[2]), mt, rt, base<T>(&a->out[0]), g.R, g.K,
        g.div, g.mod);
    int st = torc_cuda__after_launch(a->device_index, a->op);
    if (st != TORC_OK)
      return st;
  }
  if (g.mod == 0)
    return TORC_OK;
  if (g.div == 1 && g.mod == g.K && g.R > 0) { /* layer_norm */
    int G = torc_cuda_ln_groups(g.R);
    void *ws = NULL;
    int st = torc_cuda__workspace(
        a, sizeof(A) * 2 * (size_t)G * (size_t)g.K, &ws);
    if (st != TORC_OK)
      return st;
    A *pw = (A *)ws, *pb = pw + (int64_t)G * g.K;
    dim3 grid((unsigned)((g.K + TORC_CUDA_LN_TX - 1) / TORC_CUDA_LN_TX),
              (unsigned)G);
    k_ln_params_tile<E><<<grid, kBlock, 0, s>>>(gy, x, mt, rt, pw, pb, g.R,
                                                g.K);
    st = torc_cuda__after_launch(a->device_index, a->op);
    if (st == TORC_OK) {
      k_ln_params_fold<E><<<blocks((g.K + kBlock - 1) / kBlock), kBlock, 0,
                            s>>>(pw, pb, base<T>(&a->out[1]),
                                 base<T>(&a->out[2]), g.K, G);
      st = torc_cuda__after_launch(a->device_index, a->op);
    }
    torc_cuda__workspace_done(a, ws);
    return st;
  }
  k_norm_bw_params<E><<<blocks(g.mod), kBlock, 0, s>>>(
      gy, x, mt, rt, base<T>(&a->out[1]), base<T>(&a->out[2]), g.K, g.div,
      g.mod, g.total / g.mod);
  return torc_cuda__after_launch(a->device_index, a->op);
}

template <bool GROUP> int k_norm_backward(const torc_kernel_args *a) {
  int st = norm_check(a, 5, 1);
  norm_geo g;
  if (st == TORC_OK)
    st = norm_geo_of(a, &a->in[1], &a->in[2], GROUP, &g);
  if (st != TORC_OK)
    return st;
  if (numel(&a->in[0]) != g.total || numel(&a->out[0]) != g.total ||
      numel(&a->in[3]) != g.R || numel(&a->in[4]) != g.R ||
      numel(&a->in[2]) != g.mod || numel(&a->out[1]) != g.mod ||
      numel(&a->out[2]) != g.mod)
    return bad(a, "operand sizes do not fit x's rows");
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  switch (a->in[1].dtype) {
  case TORC_F64: return launch_norm_bw<e_f64>(a, g, s);
  case TORC_F16: return launch_norm_bw<e_f16>(a, g, s);
  case TORC_BF16: return launch_norm_bw<e_bf16>(a, g, s);
  default: return launch_norm_bw<e_f32>(a, g, s);
  }
}

/* ---- cross_entropy: rows r = n * S + s of C logits at stride S ---- */

/* A target outside [0, C) that is not ignore_index (row r): recorded in
 * the device's error record (kerr.h) for the next wait, by one thread of
 * the row (`say`); the caller treats the row as ignored. */
__device__ void ce_bad_target(const torc_cuda_kerr_ctx &k, int64_t t,
                              int64_t r, int64_t C, bool say) {
  if (say)
    torc_cuda_kerr_index(k.e, k.op, t, 0, C, r, -1);
}


/* A team of L lanes per row (torc_cuda_ce_lanes): max, logsum, the row's
 * loss and weight (into rowv, roww for the fold) and, with reduction
 * none, the loss itself. */
template <class E, int L>
__global__ void k_ce_fwd(const typename E::T *x, const int64_t *tg,
                         const typename E::T *w, typename E::T *loss,
                         typename E::A *mo, typename E::A *lo, double *rowv,
                         double *roww, int64_t R, int64_t C, int64_t S,
                         int64_t ignore, typename E::A eps, int none,
                         torc_cuda_kerr_ctx k) {
  typedef typename E::A A;
  typedef typename math_of<A>::M M;
  int lane = threadIdx.x % L;
  int64_t nteams = (int64_t)gridDim.x * (blockDim.x / L);
  for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / L;
       r < R; r += nteams) {
    int64_t n = r / S, base = n * C * S + (r - n * S);
    A m = -INFINITY;
    for (int64_t c = lane; c < C; c += L)
      m = M::cmax(m, E::load(x[base + c * S]));
    m = team_max<L>(m);
    A e = 0;
    if (M::finite(m)) {
      for (int64_t c = lane; c < C; c += L)
        e += M::cexp(E::load(x[base + c * S]), m);
      e = team_sum<L>(e);
    }
    A ls = M::logsum(m, e);
    int64_t t = tg[r];
    bool bad_t = torc_cuda_ce_bad(t, ignore, C);
    if (bad_t)
      ce_bad_target(k, t, r, C, lane == 0);
    A v = 0, wt = 0;
    if (!bad_t && torc_cuda_ce_counted(t, ignore)) {
      wt = w ? E::load(w[t]) : (A)1;
      A smooth = 0;
      if (eps > (A)0) {
        A acc = 0;
        for (int64_t c = lane; c < C; c += L)
          acc += (w ? E::load(w[c]) : (A)1) *
                 M::logp(E::load(x[base + c * S]), m, ls);
        smooth = -team_sum<L>(acc);
      }
      v = M::loss(M::logp(E::load(x[base + t * S]), m, ls), wt, eps, C,
                  smooth);
    }
    if (lane == 0) {
      mo[r] = m;
      lo[r] = ls;
      if (none)
        loss[r] = E::store(v);
      rowv[r] = (double)v;
      roww[r] = (double)wt;
    }
  }
}

/* One block folds the rows' losses and weights (in f64, in a fixed order)
 * into total_weight and, unless none, the reduced loss. */
template <class E>
__global__ void k_ce_total(const double *rowv, const double *roww, int64_t R,
                           typename E::T *loss, typename E::A *total,
                           int reduction) {
  __shared__ double v[kBlock];
  double sv = 0, sw = 0;
  for (int64_t r = threadIdx.x; r < R; r += kBlock) {
    sv += rowv[r];
    sw += roww[r];
  }
  sv = tree_sum(v, sv);
  sw = tree_sum(v, sw);
  if (threadIdx.x == 0) {
    total[0] = (typename E::A)sw;
    if (reduction != TORC_REDUCTION_NONE)
      loss[0] = E::store(
          (typename E::A)(reduction == TORC_REDUCTION_MEAN ? sv / sw : sv));
  }
}

/* The sum of the class weights, W, into *out (one block). */
template <class E>
__global__ void k_ce_wsum(const typename E::T *w, int64_t C,
                          typename E::A *out) {
  typedef typename E::A A;
  __shared__ A v[kBlock];
  A s = 0;
  for (int64_t c = threadIdx.x; c < C; c += kBlock)
    s += E::load(w[c]);
  s = tree_sum(v, s);
  if (threadIdx.x == 0)
    out[0] = s;
}

/* One thread per logit: gx = the gradient body, 0 on ignored rows. */
template <class E>
__global__ void k_ce_bw(const typename E::T *gy, const typename E::T *x,
                        const int64_t *tg, const typename E::A *mt,
                        const typename E::A *lt, const typename E::A *tw,
                        const typename E::T *w, const typename E::A *wsum,
                        typename E::T *gx, int64_t total, int64_t C,
                        int64_t S, int64_t ignore, typename E::A eps,
                        int reduction, torc_cuda_kerr_ctx k) {
  typedef typename E::A A;
  typedef typename math_of<A>::M M;
  int64_t step = (int64_t)blockDim.x * gridDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += step) {
    int64_t n = i / (C * S), rem = i - n * C * S, c = rem / S;
    int64_t r = n * S + (rem - c * S), t = tg[r];
    if (!torc_cuda_ce_counted(t, ignore)) {
      gx[i] = E::store((A)0);
      continue;
    }
    if (torc_cuda_ce_bad(t, ignore, C)) {
      ce_bad_target(k, t, r, C, c == 0);
      gx[i] = E::store((A)0);
      continue;
    }
    A gr;
    if (reduction == TORC_REDUCTION_NONE)
      gr = E::load(gy[r]);
    else if (reduction == TORC_REDUCTION_MEAN)
      gr = E::load(gy[0]) / tw[0];
    else
      gr = E::load(gy[0]);
    A wt = w ? E::load(w[t]) : (A)1, wc = w ? E::load(w[c]) : (A)1;
    A W = wsum ? wsum[0] : (A)C;
    gx[i] = E::store(M::grad(E::load(x[i]), mt[r], lt[r], gr, wt, c == t, eps,
                             C, W, wc));
  }
}

/* The operand checks of a cross-entropy call: x [N, C, S], target i64
 * [N, S], the weight [C] of x's dtype, statistics f32 (f64 for f64). */
int ce_check(const torc_kernel_args *a, int n_fixed, int n_out, int x_at) {
  if ((a->n_in != n_fixed && a->n_in != n_fixed + 1) || a->n_out != n_out)
    return bad(a, n_fixed == 2
                      ? "expected x, target (and weight) in, 4 outputs"
                      : "expected gy, x, target, max, logsum, total (and "
                        "weight) in, 1 output");
  if (a->params == NULL ||
      a->params_size < sizeof(torc_cross_entropy_params))
    return bad(a, "missing its params");
  const torc_ktensor *x = &a->in[x_at], *t = &a->in[x_at + 1];
  if (x->ndim != 3 || !is_float(x->dtype) || t->dtype != TORC_I64 ||
      numel(t) != x->shape[0] * x->shape[2])
    return bad(a, "expected floating logits [N, C, S] and an i64 target "
                  "[N, S]");
  if (a->n_in == n_fixed + 1) {
    const torc_ktensor *w = &a->in[n_fixed];
    if (w->dtype != x->dtype || numel(w) != x->shape[1])
      return bad(a, "the weight is not [C] of the logits' dtype");
  }
  return TORC_OK;
}

template <class E>
int launch_ce_fwd(const torc_kernel_args *a, cudaStream_t s) {
  typedef typename E::T T;
  typedef typename E::A A;
  const torc_cross_entropy_params *p =
      (const torc_cross_entropy_params *)a->params;
  const torc_ktensor *x = &a->in[0];
  int64_t N = x->shape[0], C = x->shape[1], S = x->shape[2], R = N * S;
  const T *w = a->n_in == 3 ? base<T>(&a->in[2]) : NULL;
  int none = p->reduction == TORC_REDUCTION_NONE;
  void *ws = NULL;
  int st = torc_cuda__workspace(a, (size_t)R * 2 * sizeof(double), &ws);
  if (st != TORC_OK)
    return st;
  double *rowv = (double *)ws, *roww = rowv + R;
  torc_cuda_kerr_ctx k;
  if (R > 0 && torc_cuda_kerr_of(a, &k) != TORC_OK) {
    torc_cuda__workspace_done(a, ws);
    return TORC_ERR_DEVICE;
  }
  if (R > 0) {
    int L = torc_cuda_ce_lanes(C, S);
    int64_t nb = (R + kBlock / L - 1) / (kBlock / L);
    const T *px = base<T>(x);
    const int64_t *pt = base<int64_t>(&a->in[1]);
    T *pl = base<T>(&a->out[0]);
    A *pm = base<A>(&a->out[1]), *ps = base<A>(&a->out[2]);
    A eps = (A)p->label_smoothing;
    if (L == 32)
      k_ce_fwd<E, 32><<<blocks(nb), kBlock, 0, s>>>(
          px, pt, w, pl, pm, ps, rowv, roww, R, C, S, p->ignore_index, eps,
          none, k);
    else
      k_ce_fwd<E, 1><<<blocks(nb), kBlock, 0, s>>>(
          px, pt, w, pl, pm, ps, rowv, roww, R, C, S, p->ignore_index, eps,
          none, k);
    st = torc_cuda__after_launch(a->device_index, a->op);
  }
  if (st == TORC_OK) {
    k_ce_total<E><<<1, kBlock, 0, s>>>(rowv, roww, R, base<T>(&a->out[0]),
                                       base<A>(&a->out[3]), p->reduction);
    st = torc_cuda__after_launch(a->device_index, a->op);
  }
  torc_cuda__workspace_done(a, ws);
  return st;
}

int k_cross_entropy(const torc_kernel_args *a) {
  int st = ce_check(a, 2, 4, 0);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0];
  int sd = stat_dtype(x->dtype);
  int64_t R = x->shape[0] * x->shape[2];
  const torc_cross_entropy_params *p =
      (const torc_cross_entropy_params *)a->params;
  int64_t nloss = p->reduction == TORC_REDUCTION_NONE ? R : 1;
  if (a->out[0].dtype != x->dtype || numel(&a->out[0]) != nloss ||
      a->out[1].dtype != sd || a->out[2].dtype != sd ||
      a->out[3].dtype != sd || numel(&a->out[1]) != R ||
      numel(&a->out[2]) != R || numel(&a->out[3]) != 1)
    return bad(a, "outputs are not loss, max [N, S], logsum [N, S], total []");
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  switch (x->dtype) {
  case TORC_F64: return launch_ce_fwd<e_f64>(a, s);
  case TORC_F16: return launch_ce_fwd<e_f16>(a, s);
  case TORC_BF16: return launch_ce_fwd<e_bf16>(a, s);
  default: return launch_ce_fwd<e_f32>(a, s);
  }
}

template <class E>
int launch_ce_bw(const torc_kernel_args *a, cudaStream_t s) {
  typedef typename E::T T;
  typedef typename E::A A;
  const torc_cross_entropy_params *p =
      (const torc_cross_entropy_params *)a->params;
  const torc_ktensor *x = &a->in[1];
  int64_t C = x->shape[1], S = x->shape[2], total = numel(x);
  if (total == 0)
    return TORC_OK;
  const T *w = a->n_in == 7 ? base<T>(&a->in[6]) : NULL;
  void *ws = NULL;
  int st = TORC_OK;
  if (w != NULL && p->label_smoothing > 0) {
    st = torc_cuda__workspace(a, sizeof(A), &ws);
    if (st != TORC_OK)
      return st;
    k_ce_wsum<E><<<1, kBlock, 0, s>>>(w, C, (A *)ws);
    st = torc_cuda__after_launch(a->device_index, a->op);
  }
  torc_cuda_kerr_ctx k;
  if (st == TORC_OK)
    st = torc_cuda_kerr_of(a, &k);
  if (st == TORC_OK) {
    int64_t nb = (total + kBlock - 1) / kBlock;
    k_ce_bw<E><<<blocks(nb), kBlock, 0, s>>>(
        base<T>(&a->in[0]), base<T>(x), base<int64_t>(&a->in[2]),
        base<A>(&a->in[3]), base<A>(&a->in[4]), base<A>(&a->in[5]), w,
        (const A *)ws, base<T>(&a->out[0]), total, C, S, p->ignore_index,
        (A)p->label_smoothing, p->reduction, k);
    st = torc_cuda__after_launch(a->device_index, a->op);
  }
  torc_cuda__workspace_done(a, ws);
  return st;
}

int k_cross_entropy_backward(const torc_kernel_args *a) {
  int st = ce_check(a, 6, 1, 1);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[1];
  int sd = stat_dtype(x->dtype);
  int64_t R = x->shape[0] * x->shape[2];
  const torc_cross_entropy_params *p =
      (const torc_cross_entropy_params *)a->params;
  int64_t ngy = p->reduction == TORC_REDUCTION_NONE ? R : 1;
  if (a->in[0].dtype != x->dtype || numel(&a->in[0]) != ngy ||
      a->in[3].dtype != sd || a->in[4].dtype != sd || a->in[5].dtype != sd ||
      numel(&a->in[3]) != R || numel(&a->in[4]) != R ||
      numel(&a->in[5]) != 1 || a->out[0].dtype != x->dtype ||
      numel(&a->out[0]) != numel(x))
    return bad(a, "operands are not gy, x, target, max, logsum, total in "
                  "and gx (x's shape) out");
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  switch (x->dtype) {
  case TORC_F64: return launch_ce_bw<e_f64>(a, s);
  case TORC_F16: return launch_ce_bw<e_f16>(a, s);
  case TORC_BF16: return launch_ce_bw<e_bf16>(a, s);
  default: return launch_ce_bw<e_f32>(a, s);
  }
}

struct nn_kernel {
  const char *op;
  torc_kernel_fn fn;
};

const nn_kernel nn_kernels[] = {
    {"layer_norm", k_norm<false>},
    {"layer_norm_backward", k_norm_backward<false>},
    {"group_norm", k_norm<true>},
    {"group_norm_backward", k_norm_backward<true>},
    {"cross_entropy", k_cross_entropy},
    {"cross_entropy_backward", k_cross_entropy_backward}};

} // namespace

extern "C" int torc_cuda__register_nn(const torc_host *host,
                                      torc_plugin *self) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
  for (size_t i = 0; i < sizeof nn_kernels / sizeof nn_kernels[0]; i++)
    for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; j++) {
      int st = torc_cuda__register(host, self, nn_kernels[i].op, dtypes[j],
                                   nn_kernels[i].fn, 0, TORC_KERNEL_CONTIGUOUS);
      if (st != TORC_OK)
        return st;
    }
  return TORC_OK;
}
