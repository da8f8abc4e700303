/* plugins/cuda/dnn.c — the convolutions on cuDNN: conv2d (with its
 * optional bias), conv2d_backward_input, conv2d_backward_weight and
 * conv_transpose2d (the backward-data convolution with its input in gy's
 * place, plus a bias), f32 / f64 / f16 / bf16, groups and dilation. One
 * cuDNN handle per device, created on first use and bound to the call's
 * stream; the algorithm of each shape chosen once (cuDNN's heuristic, or
 * timed under [plugin.cuda] benchmark; only reproducible ones under
 * deterministic) and kept in a per-device cache. The geometry, types,
 * cache and policy are dnn_plan.h's. Also registers pool.cu's kernels.
 *
 * The legacy convolution API used here is marked deprecated in cuDNN 9
 * (it is still supported); the headers warn about it only when
 * CUDNN_WARN_DEPRECATED is defined, which this file does not do.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cudnn.h>

#include "cuda_internal.h"
#include "dnn_plan.h"

/* dnn_plan.h mirrors these cuDNN values. */
_Static_assert((int)CUDNN_DEFAULT_MATH == TORC_CUDA_MATH_DEFAULT, "math");
_Static_assert((int)CUDNN_TENSOR_OP_MATH == TORC_CUDA_MATH_TENSOR_OP, "math");
_Static_assert((int)CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ==
                   TORC_CUDA_MATH_TENSOR_OP_ALLOW_CONVERSION,
               "math");
_Static_assert((int)CUDNN_FMA_MATH == TORC_CUDA_MATH_FMA, "math");
_Static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 == 0, "algo");
_Static_assert(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 == 0, "algo");
_Static_assert(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 == 3, "algo");

/* Devices past this index get an error naming it. */
#define DNN_MAX_DEVICES 64

/* Candidates asked of cuDNN (more than any of its algorithm counts). */
#define DNN_MAX_ALGOS 16

static struct {
  cudnnHandle_t h[DNN_MAX_DEVICES];
  torc_cuda_algo_cache *cache[DNN_MAX_DEVICES];
  pthread_mutex_t lock;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *dtype_name(int dt) {
  switch (dt) {
  case TORC_F32: return "f32";
  case TORC_F64: return "f64";
  case TORC_F16: return "f16";
  case TORC_BF16: return "bf16";
  default: return "a non-float dtype";
  }
}

static size_t elem_size(int dt) {
  return dt == TORC_F64 ? 8 : dt == TORC_F32 ? 4 : 2;
}

static void shape_str(const torc_ktensor *t, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "[");
  for (int32_t d = 0; d < t->ndim && n < size; d++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "",
                          (long long)t->shape[d]);
  if (n < size)
    snprintf(buf + n, size - n, "]");
}

/* "f32 [2, 3, 8, 8], [4, 3, 3, 3] -> [2, 4, 6, 6], stride 1x1, padding
 * 0x0, dilation 1x1, groups 1", for messages. */
static void call_str(const torc_kernel_args *a, char *buf, size_t size) {
  char s[4][160];
  int n_in = a->n_in < 3 ? a->n_in : 3;
  for (int i = 0; i < 3; i++)
    s[i][0] = '\0';
  for (int i = 0; i < n_in; i++)
    shape_str(&a->in[i], s[i], sizeof s[i]);
  shape_str(&a->out[0], s[3], sizeof s[3]);
  const torc_conv_kparams *p = (const torc_conv_kparams *)a->params;
  snprintf(buf, size,
           "%s %s, %s%s%s -> %s, stride %lldx%lld, padding %lldx%lld, "
           "dilation %lldx%lld, groups %lld",
           dtype_name(a->in[0].dtype), s[0], s[1], n_in == 3 ? ", " : "",
           s[2], s[3], (long long)p->stride[0], (long long)p->stride[1],
           (long long)p->padding[0], (long long)p->padding[1],
           (long long)p->dilation[0], (long long)p->dilation[1],
           (long long)p->groups);
}

static int dnn_error(const torc_kernel_args *a, const char *what,
                     cudnnStatus_t s) {
  char c[800];
  call_str(a, c, sizeof c);
  return torc_cuda__set_error(
      s == CUDNN_STATUS_ALLOC_FAILED ? TORC_ERR_OOM : TORC_ERR_DEVICE,
      "cuda:%d: '%s' (%s): %s failed: %s%s", a->device_index, a->op, c, what,
      cudnnGetErrorString(s),
      s == CUDNN_STATUS_ALLOC_FAILED
          ? "; cuDNN could not allocate its memory: free device memory or "
            "use a smaller batch"
          : s == CUDNN_STATUS_NOT_SUPPORTED
              ? "; cuDNN has no algorithm for this case: try another dtype "
                "or layout, or turn deterministic off ([plugin.cuda] and "
                "[torc])"
              : "");
}

/* The handle of device `index`, bound to stream s; NULL after set_error. */
static cudnnHandle_t handle(const torc_kernel_args *a, cudaStream_t s) {
  int i = a->device_index;
  if (i < 0 || i >= DNN_MAX_DEVICES) {
    torc_cuda__set_error(TORC_ERR_DEVICE,
                         "cuda:%d: cuDNN handles are kept for devices 0 to "
                         "%d only; set CUDA_VISIBLE_DEVICES to fewer devices",
                         i, DNN_MAX_DEVICES - 1);
    return NULL;
  }
  pthread_mutex_lock(&g.lock);
  cudnnHandle_t h = g.h[i];
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const char *what = "cudnnCreate";
  if (h == NULL) {
    st = cudnnCreate(&h); /* on the current device: the stream set it */
    g.h[i] = st == CUDNN_STATUS_SUCCESS ? h : NULL;
  }
  pthread_mutex_unlock(&g.lock);
  if (st == CUDNN_STATUS_SUCCESS) {
    what = "cudnnSetStream";
    st = cudnnSetStream(h, s);
  }
  if (st != CUDNN_STATUS_SUCCESS) {
    dnn_error(a, what, st);
    return NULL;
  }
  return h;
}

void torc_cuda__dnn_shutdown(void) {
  pthread_mutex_lock(&g.lock);
  for (int i = 0; i < DNN_MAX_DEVICES; i++) {
    if (g.h[i] != NULL) {
      (void)cudaSetDevice(i);
      (void)cudnnDestroy(g.h[i]);
      g.h[i] = NULL;
    }
    free(g.cache[i]);
    g.cache[i] = NULL;
  }
  pthread_mutex_unlock(&g.lock);
}

/* The cached choice for key k on device i: 1 and *out, or 0. */
static int cache_find(int i, const torc_cuda_algo_key *k,
                      torc_cuda_algo_choice *out) {
  pthread_mutex_lock(&g.lock);
  int hit = g.cache[i] != NULL && torc_cuda_algo_find(g.cache[i], k, out);
  pthread_mutex_unlock(&g.lock);
  return hit;
}

/* Caches k -> ch on device i (the cache made on first use; a failed
 * allocation only forgoes caching). */
static void cache_insert(int i, const torc_cuda_algo_key *k,
                         const torc_cuda_algo_choice *ch) {
  pthread_mutex_lock(&g.lock);
  if (g.cache[i] == NULL)
    g.cache[i] = calloc(1, sizeof *g.cache[i]);
  if (g.cache[i] != NULL)
    torc_cuda_algo_insert(g.cache[i], k, ch);
  pthread_mutex_unlock(&g.lock);
}

static cudnnDataType_t data_type(int dt) {
  switch (dt) {
  case TORC_F64: return CUDNN_DATA_DOUBLE;
  case TORC_F16: return CUDNN_DATA_HALF;
  case TORC_BF16: return CUDNN_DATA_BFLOAT16;
  default: return CUDNN_DATA_FLOAT;
  }
}

/* One call's descriptors: x and y (NCHW tensors), w (an NCHW filter), the
 * convolution. */
typedef struct descs {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t c;
} descs;

static void descs_destroy(descs *d) {
  if (d->x)
    (void)cudnnDestroyTensorDescriptor(d->x);
  if (d->y)
    (void)cudnnDestroyTensorDescriptor(d->y);
  if (d->w)
    (void)cudnnDestroyFilterDescriptor(d->w);
  if (d->c)
    (void)cudnnDestroyConvolutionDescriptor(d->c);
}

/* Creates and sets the descriptors of geometry gm; the failing call's
 * name in *what. */
static cudnnStatus_t descs_make(descs *d, const torc_cuda_conv_geo *gm,
                                int dt, int math, const char **what) {
  cudnnDataType_t t = data_type(dt);
  cudnnStatus_t st;
  memset(d, 0, sizeof *d);
  *what = "cudnnCreateTensorDescriptor";
  if ((st = cudnnCreateTensorDescriptor(&d->x)) ||
      (st = cudnnCreateTensorDescriptor(&d->y)))
    return st;
  *what = "cudnnCreateFilterDescriptor";
  if ((st = cudnnCreateFilterDescriptor(&d->w)))
    return st;
  *what = "cudnnCreateConvolutionDescriptor";
  if ((st = cudnnCreateConvolutionDescriptor(&d->c)))
    return st;
  *what = "cudnnSetTensor4dDescriptor";
  if ((st = cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, t, (int)gm->N,
                                       (int)gm->C, (int)gm->H, (int)gm->W)) ||
      (st = cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, t, (int)gm->N,
                                       (int)gm->O, (int)gm->OH,
                                       (int)gm->OW)))
    return st;
  *what = "cudnnSetFilter4dDescriptor";
  if ((st = cudnnSetFilter4dDescriptor(d->w, t, CUDNN_TENSOR_NCHW, (int)gm->O,
                                       (int)(gm->C / gm->G), (int)gm->kH,
                                       (int)gm->kW)))
    return st;
  *what = "cudnnSetConvolution2dDescriptor";
  cudnnDataType_t ct = torc_cuda_conv_compute(dt) == TORC_F64
                           ? CUDNN_DATA_DOUBLE
                           : CUDNN_DATA_FLOAT;
  if ((st = cudnnSetConvolution2dDescriptor(
           d->c, (int)gm->pad[0], (int)gm->pad[1], (int)gm->stride[0],
           (int)gm->stride[1], (int)gm->dil[0], (int)gm->dil[1],
           CUDNN_CROSS_CORRELATION, ct)))
    return st;
  *what = "cudnnSetConvolutionGroupCount";
  if ((st = cudnnSetConvolutionGroupCount(d->c, (int)gm->G)))
    return st;
  *what = "cudnnSetConvolutionMathType";
  return cudnnSetConvolutionMathType(d->c, (cudnnMathType_t)math);
}

/* The device pointers of one call: the convolution's x, w and y. */
typedef struct ptrs {
  void *x, *w, *y;
} ptrs;

/* cuDNN's candidates for `call` (heuristic, or timed when ws != NULL) as
 * dnn_plan.h's, in cuDNN's order: their count, or -1 with *st set. */
static int candidates(cudnnHandle_t h, int call, const descs *d,
                      const ptrs *p, void *ws, size_t ws_size, int timed,
                      torc_cuda_algo_cand *out, cudnnStatus_t *st,
                      const char **what) {
  int n = 0;
  if (call == TORC_CUDA_CONV_FWD) {
    cudnnConvolutionFwdAlgoPerf_t r[DNN_MAX_ALGOS];
    *what = timed ? "cudnnFindConvolutionForwardAlgorithmEx"
                  : "cudnnGetConvolutionForwardAlgorithm_v7";
    *st = timed ? cudnnFindConvolutionForwardAlgorithmEx(
                      h, d->x, p->x, d->w, p->w, d->c, d->y, p->y,
                      DNN_MAX_ALGOS, &n, r, ws, ws_size)
                : cudnnGetConvolutionForwardAlgorithm_v7(
                      h, d->x, d->w, d->c, d->y, DNN_MAX_ALGOS, &n, r);
    for (int i = 0; *st == CUDNN_STATUS_SUCCESS && i < n; i++)
      out[i] = (torc_cuda_algo_cand){(int)r[i].algo,
                                     r[i].status == CUDNN_STATUS_SUCCESS,
                                     r[i].determinism == CUDNN_DETERMINISTIC,
                                     (int)r[i].mathType, r[i].memory};
  } else if (call == TORC_CUDA_CONV_BWD_DATA) {
    cudnnConvolutionBwdDataAlgoPerf_t r[DNN_MAX_ALGOS];
    *what = timed ? "cudnnFindConvolutionBackwardDataAlgorithmEx"
                  : "cudnnGetConvolutionBackwardDataAlgorithm_v7";
    *st = timed ? cudnnFindConvolutionBackwardDataAlgorithmEx(
                      h, d->w, p->w, d->y, p->y, d->c, d->x, p->x,
                      DNN_MAX_ALGOS, &n, r, ws, ws_size)
                : cudnnGetConvolutionBackwardDataAlgorithm_v7(
                      h, d->w, d->y, d->c, d->x, DNN_MAX_ALGOS, &n, r);
    for (int i = 0; *st == CUDNN_STATUS_SUCCESS && i < n; i++)
      out[i] = (torc_cuda_algo_cand){(int)r[i].algo,
                                     r[i].status == CUDNN_STATUS_SUCCESS,
                                     r[i].determinism == CUDNN_DETERMINISTIC,
                                     (int)r[i].mathType, r[i].memory};
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t r[DNN_MAX_ALGOS];
    *what = timed ? "cudnnFindConvolutionBackwardFilterAlgorithmEx"
                  : "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
    *st = timed ? cudnnFindConvolutionBackwardFilterAlgorithmEx(
                      h, d->x, p->x, d->y, p->y, d->c, d->w, p->w,
                      DNN_MAX_ALGOS, &n, r, ws, ws_size)
                : cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                      h, d->x, d->y, d->c, d->w, DNN_MAX_ALGOS, &n, r);
    for (int i = 0; *st == CUDNN_STATUS_SUCCESS && i < n; i++)
      out[i] = (torc_cuda_algo_cand){(int)r[i].algo,
                                     r[i].status == CUDNN_STATUS_SUCCESS,
                                     r[i].determinism == CUDNN_DETERMINISTIC,
                                     (int)r[i].mathType, r[i].memory};
  }
  return *st == CUDNN_STATUS_SUCCESS ? n : -1;
}

/* The workspace algorithm `algo` of `call` needs under the descriptors'
 * current math type. */
static cudnnStatus_t ws_size_of(cudnnHandle_t h, int call, const descs *d,
                                int algo, size_t *size) {
  if (call == TORC_CUDA_CONV_FWD)
    return cudnnGetConvolutionForwardWorkspaceSize(
        h, d->x, d->w, d->c, d->y, (cudnnConvolutionFwdAlgo_t)algo, size);
  if (call == TORC_CUDA_CONV_BWD_DATA)
    return cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, d->w, d->y, d->c, d->x, (cudnnConvolutionBwdDataAlgo_t)algo, size);
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(
      h, d->x, d->y, d->c, d->w, (cudnnConvolutionBwdFilterAlgo_t)algo, size);
}

/* The algorithm for this call: the cache's, else chosen now by the
 * policy over cuDNN's heuristic (or, under benchmark, over the timed
 * candidates, with workspace for the largest the heuristic allows) and
 * cached. Leaves the convolution descriptor set to the choice's math
 * type. TORC_OK or an error after set_error. */
static int choose(const torc_kernel_args *a, cudnnHandle_t h, int call,
                  const descs *d, const ptrs *p, const torc_cuda_conv_geo *gm,
                  int dt, int math, torc_cuda_algo_choice *out) {
  /* The settings of this call: [torc] deterministic may have turned
   * deterministic on since the plugin loaded. */
  torc_cuda_settings now = torc_cuda__settings;
  now.deterministic = torc_cuda__deterministic();
  const torc_cuda_settings *s = &now;
  torc_cuda_algo_key key = torc_cuda_algo_key_of(call, dt, gm, math,
                                                 s->deterministic,
                                                 s->benchmark);
  cudnnStatus_t st;
  const char *what;
  if (cache_find(a->device_index, &key, out)) {
    st = cudnnSetConvolutionMathType(d->c, (cudnnMathType_t)out->math);
    return st ? dnn_error(a, "cudnnSetConvolutionMathType", st) : TORC_OK;
  }
  torc_cuda_algo_cand c[DNN_MAX_ALGOS], t[DNN_MAX_ALGOS];
  int n = candidates(h, call, d, p, NULL, 0, 0, c, &st, &what);
  if (n < 0)
    return dnn_error(a, what, st);
  int best_math = math;
  int i = torc_cuda_algo_pick(c, n, call, math, s->deterministic,
                              TORC_CUDA_DNN_WS_LIMIT, &best_math);
  torc_cuda_algo_cand best = i >= 0 ? c[i] : (torc_cuda_algo_cand){0};
  if (i >= 0 && s->benchmark) {
    size_t ws_size = 0;
    for (int k = 0; k < n; k++)
      if (c[k].ok && c[k].memory <= TORC_CUDA_DNN_WS_LIMIT &&
          c[k].memory > ws_size)
        ws_size = c[k].memory;
    void *ws = NULL;
    int rc = torc_cuda__workspace(a, ws_size, &ws);
    if (rc != TORC_OK)
      return rc;
    int m = candidates(h, call, d, p, ws, ws_size, 1, t, &st, &what);
    torc_cuda__workspace_done(a, ws);
    if (m < 0)
      return dnn_error(a, what, st);
    int tm = math;
    int j = torc_cuda_algo_pick(t, m, call, math, s->deterministic, ws_size,
                                &tm);
    if (j >= 0)
      best = t[j], best_math = tm;
  }
  if (i < 0) {
    char cs[800];
    call_str(a, cs, sizeof cs);
    return torc_cuda__set_error(
        TORC_ERR_DEVICE,
        "cuda:%d: '%s' (%s): cuDNN offers no algorithm that %s within %zu "
        "MiB of workspace; %s",
        a->device_index, a->op, cs,
        s->deterministic ? "succeeds and is deterministic" : "succeeds",
        TORC_CUDA_DNN_WS_LIMIT >> 20,
        s->deterministic ? "turn deterministic off ([plugin.cuda] and "
                           "[torc]), or use another dtype"
                         : "use another dtype, or smaller sizes");
  }
  if ((st = cudnnSetConvolutionMathType(d->c, (cudnnMathType_t)best_math)))
    return dnn_error(a, "cudnnSetConvolutionMathType", st);
  size_t need = 0;
  if ((st = ws_size_of(h, call, d, best.algo, &need)))
    return dnn_error(a, "cudnnGetConvolution*WorkspaceSize", st);
  out->algo = best.algo;
  out->math = best_math;
  out->workspace = need > best.memory ? need : best.memory;
  cache_insert(a->device_index, &key, out);
  return TORC_OK;
}

static char *base(const torc_ktensor *t) {
  return (char *)t->data + t->offset * (int64_t)elem_size(t->dtype);
}

/* One convolution call (call_lock held): the op's kind from its name. */
static int conv_call(const torc_kernel_args *a) {
  int kind = torc_cuda_conv_kind(a->op);
  int n_in_ok = kind == TORC_CUDA_CONV_BWD_FILTER
                    ? a->n_in == 2
                    : (a->n_in == 2 || a->n_in == 3);
  if (kind < 0 || !n_in_ok || a->n_out != 1)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': %d inputs and %d outputs "
                                "do not fit a convolution op",
                                a->op, a->n_in, a->n_out);
  if (a->params == NULL || a->params_size < sizeof(torc_conv_kparams))
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel '%s': missing its "
                                "torc_conv_kparams",
                                a->op);
  const torc_conv_kparams *p = (const torc_conv_kparams *)a->params;
  int dt = a->out[0].dtype;
  for (int i = 0; i < a->n_in; i++)
    if (a->in[i].dtype != dt)
      return torc_cuda__set_error(
          TORC_ERR_INTERNAL,
          "cuda kernel '%s': input %d is %s, the output %s; a convolution "
          "takes one dtype",
          a->op, i, dtype_name(a->in[i].dtype), dtype_name(dt));
  if (dt != TORC_F32 && dt != TORC_F64 && dt != TORC_F16 && dt != TORC_BF16)
    return TORC_KERNEL_DECLINED;
  torc_cuda_conv_geo gm;
  const char *why;
  if (!torc_cuda_conv_geo_of(kind, a->in, a->n_in, a->out, p, &gm, &why)) {
    if (strcmp(why, "size") == 0)
      return TORC_KERNEL_DECLINED; /* past cuDNN's int sizes */
    char cs[800];
    call_str(a, cs, sizeof cs);
    return torc_cuda__set_error(
        strcmp(why, "shape") == 0 ? TORC_ERR_SHAPE : TORC_ERR_INVALID,
        "cuda kernel '%s': %s do not form a convolution (its %s): expected "
        "x [N, C, H, W], w [O, C/groups, kH, kW], y [N, O, OH, OW] with OH "
        "= (H + 2 padding - dilation (kH - 1) - 1) / stride + 1, strides "
        "and dilations >= 1, groups >= 1 dividing C and O",
        a->op, cs, why);
  }
  int call = torc_cuda_conv_call(kind);
  const torc_ktensor *o = &a->out[0];
  int64_t n_out = 1;
  for (int d = 0; d < o->ndim; d++)
    n_out *= o->shape[d];
  if (n_out == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  cudnnHandle_t h = handle(a, s);
  if (h == NULL)
    return TORC_ERR_DEVICE;

  int has_bias = torc_cuda_conv_has_bias(kind, a->n_in);
  int math = torc_cuda_conv_math(dt, torc_cuda__settings.tf32);
  int xi, wi, yi;
  torc_cuda_conv_roles(kind, &xi, &wi, &yi);
  ptrs pt = {base(xi >= 8 ? &a->out[xi - 8] : &a->in[xi]),
             base(wi >= 8 ? &a->out[wi - 8] : &a->in[wi]),
             base(yi >= 8 ? &a->out[yi - 8] : &a->in[yi])};
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const void *one = dt == TORC_F64 ? (const void *)&one_d
                                   : (const void *)&one_f;
  const void *zero = dt == TORC_F64 ? (const void *)&zero_d
                                    : (const void *)&zero_f;
  int empty = torc_cuda_conv_empty_sum(kind, &gm);
  descs d;
  const char *what;
  cudnnStatus_t st;
  if (empty) {
    /* An empty sum: zeros (the output is contiguous), then the bias. */
    cudaError_t e =
        cudaMemsetAsync(base(o), 0, (size_t)n_out * elem_size(dt), s);
    if (e != cudaSuccess)
      return torc_cuda__set_error(TORC_ERR_DEVICE,
                                  "cuda:%d: '%s' with an empty sum: "
                                  "cudaMemsetAsync failed: %s",
                                  a->device_index, a->op,
                                  cudaGetErrorString(e));
    /* The bias is an add kernel of pool.cu (it covers every dtype). */
    return has_bias ? torc_cuda__bias_add(a, s, o, &a->in[2])
                    : torc_cuda__after_launch(a->device_index, a->op);
  }

  if ((st = descs_make(&d, &gm, dt, math, &what))) {
    descs_destroy(&d);
    return dnn_error(a, what, st);
  }
  torc_cuda_algo_choice ch;
  int rc = choose(a, h, call, &d, &pt, &gm, dt, math, &ch);
  if (rc != TORC_OK) {
    descs_destroy(&d);
    return rc;
  }
  void *ws = NULL;
  if ((rc = torc_cuda__workspace(a, ch.workspace, &ws)) != TORC_OK) {
    descs_destroy(&d);
    return rc;
  }
  if (call == TORC_CUDA_CONV_FWD) {
    what = "cudnnConvolutionForward";
    st = cudnnConvolutionForward(h, one, d.x, pt.x, d.w, pt.w, d.c,
                                 (cudnnConvolutionFwdAlgo_t)ch.algo, ws,
                                 ch.workspace, zero, d.y, pt.y);
  } else if (call == TORC_CUDA_CONV_BWD_DATA) {
    what = "cudnnConvolutionBackwardData";
    st = cudnnConvolutionBackwardData(h, one, d.w, pt.w, d.y, pt.y, d.c,
                                      (cudnnConvolutionBwdDataAlgo_t)ch.algo,
                                      ws, ch.workspace, zero, d.x, pt.x);
  } else {
    what = "cudnnConvolutionBackwardFilter";
    st = cudnnConvolutionBackwardFilter(
        h, one, d.x, pt.x, d.y, pt.y, d.c,
        (cudnnConvolutionBwdFilterAlgo_t)ch.algo, ws, ch.workspace, zero, d.w,
        pt.w);
  }
  torc_cuda__workspace_done(a, ws);
  descs_destroy(&d);
  if (st != CUDNN_STATUS_SUCCESS)
    return dnn_error(a, what, st);
  /* The bias (conv2d's on y, the backward-data kinds' on x, the output
   * either way), by pool.cu's add kernel. */
  return has_bias ? torc_cuda__bias_add(a, s, o, &a->in[2])
                  : torc_cuda__after_launch(a->device_index, a->op);
}

/* Held from binding a handle to the call's stream until the call's work
 * is queued: a handle has one stream at a time, and two host threads may
 * run convolutions on different streams (as blas.c's products). */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;

static int k_conv(const torc_kernel_args *a) {
  pthread_mutex_lock(&call_lock);
  int rc = conv_call(a);
  pthread_mutex_unlock(&call_lock);
  return rc;
}

int torc_cuda__register_dnn(const torc_host *host, torc_plugin *self) {
  static const char *const ops[] = {"conv2d", "conv2d_backward_input",
                                    "conv2d_backward_weight",
                                    "conv_transpose2d"};
  static const int dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    for (size_t j = 0; j < sizeof dtypes / sizeof dtypes[0]; j++) {
      int st = torc_cuda__register(host, self, ops[i], dtypes[j],
                                   k_conv, 0, TORC_KERNEL_CONTIGUOUS);
      if (st != TORC_OK)
        return st;
    }
  return torc_cuda__register_pool(host, self);
}
