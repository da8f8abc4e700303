/* plugins/cuda/pool.cu — the cuda plugin's own pooling and batch norm
 * kernels: max_pool2d (values and ref's i64 indices ih * W + iw, which
 * cuDNN's pooling does not give), avg_pool2d (count_include_pad, ceil_mode
 * windows, divisor override), adaptive_avg_pool2d (cuDNN has none), their
 * backwards as gathers, and batch_norm / batch_norm_backward (ref's
 * contract: the running stats updated in place with the unbiased variance,
 * the mean and invstd as outputs), and the convolutions' bias add. f32,
 * f64, f16 and bf16, accumulating in double; the per-element steps are
 * pool_body.h's.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "pool_body.h"

namespace {

const int kBlock = 256;
const int64_t kMaxBlocks = 1 << 20; /* grid-stride loops cover the rest */

unsigned blocks_for(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

size_t esize(int dt) {
  return dt == TORC_F64 ? 8 : dt == TORC_F32 ? 4 : 2;
}

/* The first element of t, as bytes. */
char *base(const torc_ktensor *t) {
  return (char *)t->data + t->offset * (int64_t)esize(t->dtype);
}

int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

bool is_float(int dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

const char *dtype_name(int dt) {
  switch (dt) {
  case TORC_F32: return "f32";
  case TORC_F64: return "f64";
  case TORC_F16: return "f16";
  case TORC_BF16: return "bf16";
  case TORC_I64: return "i64";
  default: return "another dtype";
  }
}

/* Appends "f32 [2, 3, 4]" for t to buf (n bytes used of size). */
size_t tensor_str(const torc_ktensor *t, char *buf, size_t n, size_t size) {
  if (n < size)
    n += (size_t)snprintf(buf + n, size - n, "%s [", dtype_name(t->dtype));
  for (int32_t d = 0; d < t->ndim && n < size; d++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "",
                          (long long)t->shape[d]);
  if (n < size)
    n += (size_t)snprintf(buf + n, size - n, "]");
  return n;
}

/* An internal error (the core checks the op's shapes and params before
 * the call): what was expected, and the call's tensors. */
int bad(const torc_kernel_args *a, const char *what) {
  char c[1024];
  size_t n = 0;
  c[0] = '\0';
  for (int i = 0; i < a->n_in && i < 5 && n < sizeof c; i++) {
    if (i)
      n += (size_t)snprintf(c + n, sizeof c - n, ", ");
    n = tensor_str(&a->in[i], c, n, sizeof c);
  }
  if (n < sizeof c)
    n += (size_t)snprintf(c + n, sizeof c - n, " -> ");
  for (int i = 0; i < a->n_out && i < 3 && n < sizeof c; i++) {
    if (i)
      n += (size_t)snprintf(c + n, sizeof c - n, ", ");
    n = tensor_str(&a->out[i], c, n, sizeof c);
  }
  return torc_cuda__set_error(TORC_ERR_INTERNAL,
                              "cuda kernel '%s': %s; it got %d inputs and %d "
                              "outputs: %s",
                              a->op, what, a->n_in, a->n_out, c);
}

enum { K_MAX = 0, K_AVG = 1, K_ADAPTIVE = 2 };

/* Forward pooling: one thread per output element of NC planes. */
template <int KIND>
__global__ void k_pool_fwd(const char *x, int dx, char *y, int dy,
                           int64_t *ind, torc_cuda_pool_geo g, int64_t nout) {
  int64_t plane_out = g.OH * g.OW, plane_in = g.H * g.W;
  size_t ex = dx == TORC_F64 ? 8 : dx == TORC_F32 ? 4 : 2;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nout;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t nc = i / plane_out, o = i % plane_out;
    int64_t oh = o / g.OW, ow = o % g.OW;
    const char *px = x + (size_t)(nc * plane_in) * ex;
    double v;
    if (KIND == K_MAX) {
      int64_t k;
      v = torc_cuda_maxpool_at(&g, px, dx, oh, ow, &k);
      ind[i] = k;
    } else if (KIND == K_AVG) {
      v = torc_cuda_avgpool_at(&g, px, dx, oh, ow);
    } else {
      v = torc_cuda_adaptive_at(&g, px, dx, oh, ow);
    }
    torc_cuda_p_st(y, dy, i, v);
  }
}

/* Backward pooling: one thread per input element, gathering gy. */
template <int KIND>
__global__ void k_pool_bwd(const char *gy, int dgy, const int64_t *ind,
                           char *gx, int dgx, torc_cuda_pool_geo g,
                           int64_t nin) {
  int64_t plane_out = g.OH * g.OW, plane_in = g.H * g.W;
  size_t ey = dgy == TORC_F64 ? 8 : dgy == TORC_F32 ? 4 : 2;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nin;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t nc = i / plane_in, q = i % plane_in;
    int64_t ih = q / g.W, iw = q % g.W;
    const char *pg = gy + (size_t)(nc * plane_out) * ey;
    double v;
    if (KIND == K_MAX)
      v = torc_cuda_maxpool_grad_at(&g, pg, dgy, ind + nc * plane_out, ih,
                                    iw);
    else if (KIND == K_AVG)
      v = torc_cuda_avgpool_grad_at(&g, pg, dgy, ih, iw);
    else
      v = torc_cuda_adaptive_grad_at(&g, pg, dgy, ih, iw);
    torc_cuda_p_st(gx, dgx, i, v);
  }
}

/* y[i] += b[channel of i] over the n elements of an NCHW tensor. */
__global__ void k_bias_add(char *y, int dy, const char *b, int db, int64_t C,
                           int64_t plane, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    torc_cuda_p_st(y, dy, i,
                   torc_cuda_p_ld(y, dy, i) +
                       torc_cuda_p_ld(b, db,
                                      torc_cuda_bias_channel(i, C, plane)));
}

/* The shared-memory sum of every thread's `mine` (v holds kBlock
 * doubles); every thread gets the total. */
__device__ double block_sum(double *v, double mine) {
  int t = threadIdx.x;
  v[t] = mine;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s)
      v[t] += v[t + s];
    __syncthreads();
  }
  double r = v[0];
  __syncthreads();
  return r;
}

/* Batch norm statistics: one block per channel of x [N, C, S]. Training:
 * the two-pass mean and squared deviations over the channel's M = N * S
 * elements, the running stats (rm, rv; NULL when absent) updated in place;
 * eval: the running ones. Writes the mean and invstd outputs and, in
 * double, st[2c] and st[2c + 1] for k_bn_y. */
__global__ void k_bn_stats(const char *x, int dx, char *rm, char *rv,
                           int drun, char *mo, int dmo, char *io, int dio,
                           double *st, int64_t C, int64_t S, int64_t M,
                           int training, double momentum, double eps) {
  __shared__ double v[kBlock];
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double sum = 0, ssd = 0;
    if (training) {
      double mine = 0;
      for (int64_t j = threadIdx.x; j < M; j += kBlock)
        mine += torc_cuda_p_ld(x, dx, torc_cuda_bn_index(c, j, C, S));
      sum = block_sum(v, mine);
      double mean = M ? sum / (double)M : 0;
      mine = 0;
      for (int64_t j = threadIdx.x; j < M; j += kBlock) {
        double d = torc_cuda_p_ld(x, dx, torc_cuda_bn_index(c, j, C, S)) -
                   mean;
        mine += d * d;
      }
      ssd = block_sum(v, mine);
    }
    if (threadIdx.x == 0) {
      double r0 = rm ? torc_cuda_p_ld(rm, drun, c) : 0;
      double r1 = rv ? torc_cuda_p_ld(rv, drun, c) : 0;
      torc_cuda_bn_stats r =
          torc_cuda_bn_finalize(training, sum, ssd, M, r0, r1, momentum, eps);
      if (training && rm) {
        torc_cuda_p_st(rm, drun, c, r.run_mean);
        torc_cuda_p_st(rv, drun, c, r.run_var);
      }
      torc_cuda_p_st(mo, dmo, c, r.mean);
      torc_cuda_p_st(io, dio, c, r.invstd);
      st[2 * c] = r.mean;
      st[2 * c + 1] = r.invstd;
    }
  }
}

/* y = (x - mean) * invstd * w + b per element, the channel's statistics
 * from st (double). */
__global__ void k_bn_y(const char *x, int dx, const char *w, int dw,
                       const char *b, int db, char *y, int dy,
                       const double *st, int64_t C, int64_t S, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = (i / S) % C;
    torc_cuda_p_st(y, dy, i,
                   torc_cuda_bn_y(torc_cuda_p_ld(x, dx, i), st[2 * c],
                                  st[2 * c + 1], torc_cuda_p_ld(w, dw, c),
                                  torc_cuda_p_ld(b, db, c)));
  }
}

/* Batch norm backward sums: one block per channel, sg = sum gy and
 * sgx = sum gy * (x - mean) * invstd; writes gb = sg, gw = sgx and, in
 * double, sums[2c], sums[2c + 1] for k_bn_gx. */
__global__ void k_bn_sums(const char *gy, int dgy, const char *x, int dx,
                          const char *mt, int dm, const char *it, int di,
                          char *gw, int dgw, char *gb, int dgb, double *sums,
                          int64_t C, int64_t S, int64_t M) {
  __shared__ double v[kBlock];
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double mean = torc_cuda_p_ld(mt, dm, c), inv = torc_cuda_p_ld(it, di, c);
    double a = 0, b = 0;
    for (int64_t j = threadIdx.x; j < M; j += kBlock) {
      int64_t k = torc_cuda_bn_index(c, j, C, S);
      double g = torc_cuda_p_ld(gy, dgy, k);
      a += g;
      b += g * (torc_cuda_p_ld(x, dx, k) - mean) * inv;
    }
    double sg = block_sum(v, a), sgx = block_sum(v, b);
    if (threadIdx.x == 0) {
      torc_cuda_p_st(gb, dgb, c, sg);
      torc_cuda_p_st(gw, dgw, c, sgx);
      sums[2 * c] = sg;
      sums[2 * c + 1] = sgx;
    }
  }
}

/* gx per element from the channel sums (pool_body.h's torc_cuda_bn_gx). */
__global__ void k_bn_gx(const char *gy, int dgy, const char *x, int dx,
                        const char *w, int dw, const char *mt, int dm,
                        const char *it, int di, char *gx, int dgx,
                        const double *sums, int64_t C, int64_t S, int64_t M,
                        int training, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = (i / S) % C;
    torc_cuda_p_st(
        gx, dgx, i,
        torc_cuda_bn_gx(training, torc_cuda_p_ld(gy, dgy, i),
                        torc_cuda_p_ld(x, dx, i), torc_cuda_p_ld(mt, dm, c),
                        torc_cuda_p_ld(it, di, c), torc_cuda_p_ld(w, dw, c),
                        sums[2 * c], sums[2 * c + 1], M));
  }
}

/* ---- the kernel calls ---- */

/* An internal error for a stride or dilation below 1 (the core checks
 * them), naming them. */
int bad_window(const torc_kernel_args *a, const torc_pool_kparams *p) {
  return torc_cuda__set_error(
      TORC_ERR_INTERNAL,
      "cuda kernel '%s': stride %lldx%lld and dilation %lldx%lld must be "
      ">= 1",
      a->op, (long long)p->stride[0], (long long)p->stride[1],
      (long long)p->dilation[0], (long long)p->dilation[1]);
}

/* Checks x and y are [N, C, H, W] floats with equal N and C (x the
 * pooling's input, y its output, whichever is the call's in or out). */
int pool_shapes(const torc_kernel_args *a, const torc_ktensor *x,
                const torc_ktensor *y) {
  if (x->ndim != 4 || y->ndim != 4 || x->shape[0] != y->shape[0] ||
      x->shape[1] != y->shape[1] || !is_float(x->dtype) ||
      !is_float(y->dtype))
    return bad(a, "expected float [N, C, H, W] input and output with equal "
                  "N and C");
  return TORC_OK;
}

torc_cuda_pool_geo geo_of(const torc_ktensor *x, const torc_ktensor *y,
                          const torc_pool_kparams *p) {
  torc_cuda_pool_geo g;
  memset(&g, 0, sizeof g);
  g.H = x->shape[2], g.W = x->shape[3];
  g.OH = y->shape[2], g.OW = y->shape[3];
  if (p != NULL) {
    for (int d = 0; d < 2; d++) {
      g.k[d] = p->kernel[d], g.s[d] = p->stride[d];
      g.p[d] = p->padding[d], g.d[d] = p->dilation[d];
    }
    g.count_include_pad = p->count_include_pad;
    g.divisor = p->divisor;
  }
  return g;
}

/* A forward pooling call of KIND: in x; out y (and the indices for max). */
template <int KIND> int run_pool_fwd(const torc_kernel_args *a) {
  int n_out = KIND == K_MAX ? 2 : 1;
  if (a->n_in != 1 || a->n_out != n_out)
    return bad(a, KIND == K_MAX ? "expected 1 input and 2 outputs"
                                : "expected 1 input and 1 output");
  const torc_pool_kparams *p = NULL;
  if (KIND != K_ADAPTIVE) {
    if (a->params == NULL || a->params_size < sizeof *p)
      return bad(a, "missing its torc_pool_kparams");
    p = (const torc_pool_kparams *)a->params;
    if (p->stride[0] < 1 || p->stride[1] < 1 || p->dilation[0] < 1 ||
        p->dilation[1] < 1)
      return bad_window(a, p);
  }
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int st = pool_shapes(a, x, y);
  if (st)
    return st;
  if (KIND == K_MAX && a->out[1].dtype != TORC_I64)
    return bad(a, "expected i64 indices");
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  torc_cuda_pool_geo g = geo_of(x, y, p);
  int64_t *ind = KIND == K_MAX ? (int64_t *)a->out[1].data + a->out[1].offset
                               : NULL;
  k_pool_fwd<KIND><<<blocks_for(n), kBlock, 0, s>>>(
      base(x), x->dtype, base(y), y->dtype, ind, g, n);
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* A backward pooling call of KIND: in gy (and the indices for max); out
 * gx. */
template <int KIND> int run_pool_bwd(const torc_kernel_args *a) {
  int n_in = KIND == K_MAX ? 2 : 1;
  if (a->n_in != n_in || a->n_out != 1)
    return bad(a, KIND == K_MAX ? "expected 2 inputs and 1 output"
                                : "expected 1 input and 1 output");
  const torc_pool_kparams *p = NULL;
  if (KIND != K_ADAPTIVE) {
    if (a->params == NULL || a->params_size < sizeof *p)
      return bad(a, "missing its torc_pool_kparams");
    p = (const torc_pool_kparams *)a->params;
    if (p->stride[0] < 1 || p->stride[1] < 1 || p->dilation[0] < 1 ||
        p->dilation[1] < 1)
      return bad_window(a, p);
  }
  const torc_ktensor *gy = &a->in[0], *gx = &a->out[0];
  int st = pool_shapes(a, gx, gy);
  if (st)
    return st;
  const int64_t *ind = NULL;
  if (KIND == K_MAX) {
    const torc_ktensor *it = &a->in[1];
    if (it->dtype != TORC_I64 || it->ndim != 4 ||
        memcmp(it->shape, gy->shape, 4 * sizeof(int64_t)) != 0)
      return bad(a, "expected i64 indices of gy's shape");
    ind = (const int64_t *)it->data + it->offset;
  }
  int64_t n = numel(gx);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  torc_cuda_pool_geo g = geo_of(gx, gy, p);
  k_pool_bwd<KIND><<<blocks_for(n), kBlock, 0, s>>>(
      base(gy), gy->dtype, ind, base(gx), gx->dtype, g, n);
  return torc_cuda__after_launch(a->device_index, a->op);
}

int k_max_pool2d(const torc_kernel_args *a) { return run_pool_fwd<K_MAX>(a); }
int k_avg_pool2d(const torc_kernel_args *a) { return run_pool_fwd<K_AVG>(a); }
int k_adaptive(const torc_kernel_args *a) {
  return run_pool_fwd<K_ADAPTIVE>(a);
}
int k_max_pool2d_bw(const torc_kernel_args *a) {
  return run_pool_bwd<K_MAX>(a);
}
int k_avg_pool2d_bw(const torc_kernel_args *a) {
  return run_pool_bwd<K_AVG>(a);
}
int k_adaptive_bw(const torc_kernel_args *a) {
  return run_pool_bwd<K_ADAPTIVE>(a);
}

/* x [N, C, *]: C, the inner size S and M = N * S; 0 for fewer than 2
 * dims. */
bool bn_dims(const torc_ktensor *x, int64_t *C, int64_t *S, int64_t *M) {
  if (x->ndim < 2)
    return false;
  *C = x->shape[1];
  *S = 1;
  for (int d = 2; d < x->ndim; d++)
    *S *= x->shape[d];
  *M = x->shape[0] * *S;
  return true;
}

/* Every tensor of the call a float and each [C] one of C elements. */
bool bn_tensors_ok(const torc_kernel_args *a, const int *per_channel_in,
                   const int *per_channel_out, int64_t C) {
  for (int i = 0; i < a->n_in; i++)
    if (!is_float(a->in[i].dtype) ||
        (per_channel_in[i] && numel(&a->in[i]) != C))
      return false;
  for (int i = 0; i < a->n_out; i++)
    if (!is_float(a->out[i].dtype) ||
        (per_channel_out[i] && numel(&a->out[i]) != C))
      return false;
  return true;
}

/* "batch_norm": in x, w, b (+ running mean, var); out y, mean, invstd. */
int k_batch_norm(const torc_kernel_args *a) {
  if ((a->n_in != 3 && a->n_in != 5) || a->n_out != 3)
    return bad(a, "expected 3 or 5 inputs and 3 outputs");
  if (a->params == NULL || a->params_size < sizeof(torc_norm_kparams))
    return bad(a, "missing its torc_norm_kparams");
  const torc_norm_kparams *p = (const torc_norm_kparams *)a->params;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int64_t C, S, M;
  static const int pin[5] = {0, 1, 1, 1, 1}, pout[3] = {0, 1, 1};
  if (!bn_dims(x, &C, &S, &M) || numel(y) != numel(x) ||
      !bn_tensors_ok(a, pin, pout, C))
    return bad(a, "expected float x [N, C, *], y of x's size and w, b, "
                  "running mean, var, mean, invstd of C elements");
  if (!p->training && a->n_in != 5)
    return bad(a, "eval mode needs the running mean and var");
  if (C == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  void *ws = NULL;
  int st = torc_cuda__workspace(a, (size_t)(2 * C) * sizeof(double), &ws);
  if (st)
    return st;
  char *rm = a->n_in == 5 ? base(&a->in[3]) : NULL;
  char *rv = a->n_in == 5 ? base(&a->in[4]) : NULL;
  int drun = a->n_in == 5 ? a->in[3].dtype : TORC_F32;
  if (a->n_in == 5 && a->in[4].dtype != drun) {
    torc_cuda__workspace_done(a, ws);
    return bad(a, "expected the running mean and var of one dtype");
  }
  k_bn_stats<<<blocks_for(C * kBlock), kBlock, 0, s>>>(
      base(x), x->dtype, rm, rv, drun, base(&a->out[1]), a->out[1].dtype,
      base(&a->out[2]), a->out[2].dtype, (double *)ws, C, S, M, p->training,
      p->momentum, p->eps);
  int64_t n = numel(x);
  if (n > 0)
    k_bn_y<<<blocks_for(n), kBlock, 0, s>>>(
        base(x), x->dtype, base(&a->in[1]), a->in[1].dtype, base(&a->in[2]),
        a->in[2].dtype, base(y), y->dtype, (const double *)ws, C, S, n);
  torc_cuda__workspace_done(a, ws);
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* "batch_norm_backward": in gy, x, w, mean, invstd; out gx, gw, gb. */
int k_batch_norm_bw(const torc_kernel_args *a) {
  if (a->n_in != 5 || a->n_out != 3)
    return bad(a, "expected 5 inputs and 3 outputs");
  if (a->params == NULL || a->params_size < sizeof(torc_norm_kparams))
    return bad(a, "missing its torc_norm_kparams");
  const torc_norm_kparams *p = (const torc_norm_kparams *)a->params;
  const torc_ktensor *gy = &a->in[0], *x = &a->in[1], *gx = &a->out[0];
  int64_t C, S, M;
  static const int pin[5] = {0, 0, 1, 1, 1}, pout[3] = {0, 1, 1};
  if (!bn_dims(x, &C, &S, &M) || numel(gy) != numel(x) ||
      numel(gx) != numel(x) || !bn_tensors_ok(a, pin, pout, C))
    return bad(a, "expected float gy, x, gx [N, C, *] and w, mean, invstd, "
                  "gw, gb of C elements");
  if (C == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  void *ws = NULL;
  int st = torc_cuda__workspace(a, (size_t)(2 * C) * sizeof(double), &ws);
  if (st)
    return st;
  const torc_ktensor *w = &a->in[2], *mt = &a->in[3], *it = &a->in[4];
  k_bn_sums<<<blocks_for(C * kBlock), kBlock, 0, s>>>(
      base(gy), gy->dtype, base(x), x->dtype, base(mt), mt->dtype, base(it),
      it->dtype, base(&a->out[1]), a->out[1].dtype, base(&a->out[2]),
      a->out[2].dtype, (double *)ws, C, S, M);
  int64_t n = numel(x);
  if (n > 0)
    k_bn_gx<<<blocks_for(n), kBlock, 0, s>>>(
        base(gy), gy->dtype, base(x), x->dtype, base(w), w->dtype, base(mt),
        mt->dtype, base(it), it->dtype, base(gx), gx->dtype,
        (const double *)ws, C, S, M, p->training, n);
  torc_cuda__workspace_done(a, ws);
  return torc_cuda__after_launch(a->device_index, a->op);
}

struct pool_kernel {
  const char *op;
  torc_kernel_fn fn;
};

const pool_kernel pool_kernels[] = {
    {"max_pool2d", k_max_pool2d},
    {"max_pool2d_backward", k_max_pool2d_bw},
    {"avg_pool2d", k_avg_pool2d},
    {"avg_pool2d_backward", k_avg_pool2d_bw},
    {"adaptive_avg_pool2d", k_adaptive},
    {"adaptive_avg_pool2d_backward", k_adaptive_bw},
    {"batch_norm", k_batch_norm},
    {"batch_norm_backward", k_batch_norm_bw},
};

} // namespace

extern "C" int torc_cuda__bias_add(const torc_kernel_args *a,
                                   cudaStream_t s, const torc_ktensor *y,
                                   const torc_ktensor *b) {
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  int64_t C = y->shape[1], plane = y->shape[2] * y->shape[3];
  k_bias_add<<<blocks_for(n), kBlock, 0, s>>>(base(y), y->dtype, base(b),
                                              b->dtype, C, plane, n);
  return torc_cuda__after_launch(a->device_index, a->op);
}

extern "C" int torc_cuda__register_pool(const torc_host *host,
                                        torc_plugin *self) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
  const size_t n_ops = sizeof pool_kernels / sizeof pool_kernels[0];
  for (size_t i = 0; i < n_ops; i++)
    for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; j++) {
      int st = torc_cuda__register(host, self, pool_kernels[i].op,
                                   dtypes[j], pool_kernels[i].fn, 0,
                                   TORC_KERNEL_CONTIGUOUS);
      if (st != TORC_OK)
        return st;
    }
  return TORC_OK;
}
