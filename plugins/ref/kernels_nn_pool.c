/* plugins/ref/kernels_nn_pool.c — 2-D pooling: "max_pool2d" (with the
 * argmax indices), "avg_pool2d", "adaptive_avg_pool2d" and their backwards,
 * as PyTorch's CPU kernels define them (NaN wins a max; the average's
 * divisor with and without padding, ceil_mode windows clipped).
 */
#include <stdlib.h>

#include "ref_nn.h"

static int pool_shapes_ok(const torc_kernel_args *a, const torc_ktensor *x,
                          const torc_ktensor *y) {
  if (x->ndim != 4 || y->ndim != 4 || x->shape[0] != y->shape[0] ||
      x->shape[1] != y->shape[1]) {
    char s1[128], s2[128];
    return ref_error(TORC_ERR_SHAPE,
                     "ref kernel '%s': input %s and output %s must both be "
                     "[N, C, H, W] with equal N and C",
                     a->op, ref_shape_str(x, s1, sizeof s1),
                     ref_shape_str(y, s2, sizeof s2));
  }
  return TORC_OK;
}

/* in x; out y, indices (i64, ih * W + iw). */
int torc_ref_k_max_pool2d(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 2);
  const torc_pool_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0], *ix = &a->out[1];
  if ((st = pool_shapes_ok(a, x, y)))
    return st;
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t OH = y->shape[2], OW = y->shape[3];
  for (int64_t nc = 0; nc < NC; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        double best = -INFINITY;
        int64_t bi = -1;
        for (int64_t kh = 0; kh < p->kernel[0]; kh++) {
          int64_t ih = oh * p->stride[0] - p->padding[0] + kh * p->dilation[0];
          if (ih < 0 || ih >= H)
            continue;
          for (int64_t kw = 0; kw < p->kernel[1]; kw++) {
            int64_t iw =
                ow * p->stride[1] - p->padding[1] + kw * p->dilation[1];
            if (iw < 0 || iw >= W)
              continue;
            double v = nn_ld(x, (nc * H + ih) * W + iw);
            if (bi < 0)
              bi = ih * W + iw;
            if (v > best || v != v) {
              best = v, bi = ih * W + iw;
              if (v != v)
                goto found;
            }
          }
        }
      found:;
        int64_t yi = (nc * OH + oh) * OW + ow;
        nn_st(y, yi, bi < 0 ? -INFINITY : best);
        nn_sti(ix, yi, bi < 0 ? 0 : bi);
      }
  return TORC_OK;
}

/* in gy, indices; out gx (zeroed, then each gy added at its index). */
int torc_ref_k_max_pool2d_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  if (st)
    return st;
  const torc_ktensor *gy = &a->in[0], *ix = &a->in[1], *gx = &a->out[0];
  if ((st = pool_shapes_ok(a, gx, gy)))
    return st;
  int64_t NC = gx->shape[0] * gx->shape[1], HW = gx->shape[2] * gx->shape[3];
  int64_t OHW = gy->shape[2] * gy->shape[3];
  double *acc = calloc((size_t)(NC * HW > 0 ? NC * HW : 1), sizeof(double));
  if (acc == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel '%s': out of memory", a->op);
  for (int64_t nc = 0; nc < NC; nc++)
    for (int64_t o = 0; o < OHW; o++) {
      int64_t k = nn_ldi(ix, nc * OHW + o);
      if (k < 0 || k >= HW) {
        free(acc);
        return ref_error(TORC_ERR_RANGE,
                         "ref kernel '%s': index %lld outside the %lld "
                         "positions of a plane",
                         a->op, (long long)k, (long long)HW);
      }
      acc[nc * HW + k] += nn_ld(gy, nc * OHW + o);
    }
  for (int64_t i = 0; i < NC * HW; i++)
    nn_st(gx, i, acc[i]);
  free(acc);
  return TORC_OK;
}

/* The window of output (oh, ow) as PyTorch's avg_pool2d: the start and
 * end rows/cols clipped to the input, and the divisor. */
static void avg_window(const torc_pool_kparams *p, int64_t H, int64_t W,
                       int64_t oh, int64_t ow, int64_t *h0, int64_t *h1,
                       int64_t *w0, int64_t *w1, double *div) {
  int64_t hs = oh * p->stride[0] - p->padding[0];
  int64_t ws = ow * p->stride[1] - p->padding[1];
  int64_t he = hs + p->kernel[0], we = ws + p->kernel[1];
  if (he > H + p->padding[0])
    he = H + p->padding[0];
  if (we > W + p->padding[1])
    we = W + p->padding[1];
  int64_t pool = (he - hs) * (we - ws);
  *h0 = hs < 0 ? 0 : hs, *w0 = ws < 0 ? 0 : ws;
  *h1 = he > H ? H : he, *w1 = we > W ? W : we;
  if (p->divisor)
    *div = (double)p->divisor;
  else if (p->count_include_pad)
    *div = (double)pool;
  else
    *div = (double)((*h1 - *h0) * (*w1 - *w0));
}

int torc_ref_k_avg_pool2d(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  const torc_pool_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  if ((st = pool_shapes_ok(a, x, y)))
    return st;
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t OH = y->shape[2], OW = y->shape[3];
  for (int64_t nc = 0; nc < NC; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0, h1, w0, w1;
        double div, sum = 0;
        avg_window(p, H, W, oh, ow, &h0, &h1, &w0, &w1, &div);
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++)
            sum += nn_ld(x, (nc * H + ih) * W + iw);
        nn_st(y, (nc * OH + oh) * OW + ow, sum / div);
      }
  return TORC_OK;
}

int torc_ref_k_avg_pool2d_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 1, 1);
  const torc_pool_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *gy = &a->in[0], *gx = &a->out[0];
  if ((st = pool_shapes_ok(a, gx, gy)))
    return st;
  int64_t NC = gx->shape[0] * gx->shape[1], H = gx->shape[2], W = gx->shape[3];
  int64_t OH = gy->shape[2], OW = gy->shape[3];
  double *acc = calloc((size_t)(NC * H * W > 0 ? NC * H * W : 1), sizeof(double));
  if (acc == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel '%s': out of memory", a->op);
  for (int64_t nc = 0; nc < NC; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0, h1, w0, w1;
        double div;
        avg_window(p, H, W, oh, ow, &h0, &h1, &w0, &w1, &div);
        double g = nn_ld(gy, (nc * OH + oh) * OW + ow) / div;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++)
            acc[(nc * H + ih) * W + iw] += g;
      }
  for (int64_t i = 0; i < NC * H * W; i++)
    nn_st(gx, i, acc[i]);
  free(acc);
  return TORC_OK;
}

/* Adaptive windows: rows floor(o*I/O) .. ceil((o+1)*I/O). */
static int64_t ad_start(int64_t o, int64_t I, int64_t O) { return o * I / O; }
static int64_t ad_end(int64_t o, int64_t I, int64_t O) {
  return ((o + 1) * I + O - 1) / O;
}

static int adaptive(const torc_kernel_args *a, int backward) {
  int st = ref_check_args(a, 1, 1);
  if (st)
    return st;
  const torc_ktensor *x = backward ? &a->out[0] : &a->in[0];
  const torc_ktensor *y = backward ? &a->in[0] : &a->out[0];
  if ((st = pool_shapes_ok(a, x, y)))
    return st;
  int64_t NC = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t OH = y->shape[2], OW = y->shape[3];
  double *acc = NULL;
  if (backward &&
      (acc = calloc((size_t)(NC * H * W > 0 ? NC * H * W : 1),
                    sizeof(double))) == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel '%s': out of memory", a->op);
  for (int64_t nc = 0; nc < NC; nc++)
    for (int64_t oh = 0; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++) {
        int64_t h0 = ad_start(oh, H, OH), h1 = ad_end(oh, H, OH);
        int64_t w0 = ad_start(ow, W, OW), w1 = ad_end(ow, W, OW);
        double div = (double)((h1 - h0) * (w1 - w0)), sum = 0;
        int64_t yi = (nc * OH + oh) * OW + ow;
        double g = backward ? nn_ld(y, yi) / div : 0;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++) {
            int64_t xi = (nc * H + ih) * W + iw;
            if (backward)
              acc[xi] += g;
            else
              sum += nn_ld(x, xi);
          }
        if (!backward)
          nn_st(y, yi, sum / div);
      }
  if (backward) {
    for (int64_t i = 0; i < NC * H * W; i++)
      nn_st(x, i, acc[i]);
    free(acc);
  }
  return TORC_OK;
}

int torc_ref_k_adaptive_avg_pool2d(const torc_kernel_args *a) {
  return adaptive(a, 0);
}

int torc_ref_k_adaptive_avg_pool2d_backward(const torc_kernel_args *a) {
  return adaptive(a, 1);
}
