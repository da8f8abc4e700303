/* plugins/ref/kernels_nn_conv.c — 2-D convolution: "conv2d" (direct loops),
 * "conv2d_backward_input" (= "conv_transpose2d", with an optional bias),
 * "conv2d_backward_weight". Plain loops accumulating in double: the oracle
 * for oneDNN/cuDNN.
 */
#include <stdlib.h>

#include "ref_nn.h"

static int conv_shapes_ok(const torc_kernel_args *a, const torc_ktensor *x,
                          const torc_ktensor *w, const torc_ktensor *y,
                          int64_t groups) {
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || groups < 1 ||
      x->shape[0] != y->shape[0] || x->shape[1] % groups ||
      w->shape[0] % groups || w->shape[1] * groups != x->shape[1] ||
      w->shape[0] != y->shape[1]) {
    char s1[128], s2[128], s3[128];
    return ref_error(TORC_ERR_SHAPE,
                     "ref kernel '%s': shapes x %s, w %s, y %s, groups %lld "
                     "do not fit a convolution",
                     a->op, ref_shape_str(x, s1, sizeof s1),
                     ref_shape_str(w, s2, sizeof s2),
                     ref_shape_str(y, s3, sizeof s3), (long long)groups);
  }
  return TORC_OK;
}

/* The convolution geometry shared by the three kernels: x [N, C, H, W]
 * (the convolution's input), w [O, C/G, kH, kW], y [N, O, OH, OW]. For
 * each (n, o, oh, ow, c, kh, kw) with an in-range input position, `fn`
 * gets the flat indices of x, w and y. */
typedef struct conv_geo {
  int64_t N, C, H, W, O, OH, OW, kH, kW, G, Cg, Og;
  torc_conv_kparams p;
} conv_geo;

static void geo_init(conv_geo *g, const torc_ktensor *x,
                     const torc_ktensor *w, const torc_ktensor *y,
                     const torc_conv_kparams *p) {
  g->N = x->shape[0], g->C = x->shape[1], g->H = x->shape[2];
  g->W = x->shape[3], g->O = w->shape[0], g->kH = w->shape[2];
  g->kW = w->shape[3], g->OH = y->shape[2], g->OW = y->shape[3];
  g->G = p->groups, g->Cg = g->C / g->G, g->Og = g->O / g->G;
  g->p = *p;
}

/* Visits every product term: the callback form keeps the index arithmetic
 * in one place. mode 0: y += x*w; 1: x += y*w; 2: w += x*y. */
static void conv_walk(const conv_geo *g, int mode, const torc_ktensor *xt,
                      const torc_ktensor *wt, const torc_ktensor *yt,
                      double *acc) {
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t o = 0; o < g->O; o++) {
      int64_t grp = o / g->Og;
      for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow = 0; ow < g->OW; ow++) {
          int64_t yi = ((n * g->O + o) * g->OH + oh) * g->OW + ow;
          double yv = mode == 0 ? 0 : nn_ld(yt, yi), sum = 0;
          for (int64_t c = 0; c < g->Cg; c++) {
            int64_t ic = grp * g->Cg + c;
            for (int64_t kh = 0; kh < g->kH; kh++) {
              int64_t ih = oh * g->p.stride[0] - g->p.padding[0] +
                           kh * g->p.dilation[0];
              if (ih < 0 || ih >= g->H)
                continue;
              for (int64_t kw = 0; kw < g->kW; kw++) {
                int64_t iw = ow * g->p.stride[1] - g->p.padding[1] +
                             kw * g->p.dilation[1];
                if (iw < 0 || iw >= g->W)
                  continue;
                int64_t xi = ((n * g->C + ic) * g->H + ih) * g->W + iw;
                int64_t wi = ((o * g->Cg + c) * g->kH + kh) * g->kW + kw;
                if (mode == 0)
                  sum += nn_ld(xt, xi) * nn_ld(wt, wi);
                else if (mode == 1)
                  acc[xi] += yv * nn_ld(wt, wi);
                else
                  acc[wi] += yv * nn_ld(xt, xi);
              }
            }
          }
          if (mode == 0)
            acc[yi] += sum;
        }
    }
}

static double *zeros_d(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  if (p == NULL)
    ref_error(TORC_ERR_OOM, "ref nn kernel: out of memory for %lld doubles",
              (long long)n);
  return p;
}

/* Stores acc (+ bias per channel when given) into t. */
static void store_acc(const torc_ktensor *t, const double *acc,
                      const torc_ktensor *bias) {
  int64_t n = ref_numel(t->ndim, t->shape);
  int64_t plane = t->shape[2] * t->shape[3], ch = t->shape[1];
  for (int64_t i = 0; i < n; i++)
    nn_st(t, i, acc[i] + (bias ? nn_ld(bias, (i / plane) % ch) : 0.0));
}

int torc_ref_k_conv2d(const torc_kernel_args *a) {
  int st = ref_check_args(a, a->n_in == 3 ? 3 : 2, 1);
  const torc_conv_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  if ((st = conv_shapes_ok(a, x, w, y, p->groups)))
    return st;
  conv_geo g;
  geo_init(&g, x, w, y, p);
  double *acc = zeros_d(ref_numel(4, y->shape));
  if (acc == NULL)
    return TORC_ERR_OOM;
  conv_walk(&g, 0, x, w, NULL, acc);
  store_acc(y, acc, a->n_in == 3 ? &a->in[2] : NULL);
  free(acc);
  return TORC_OK;
}

/* in gy [N, O, OH, OW], w [O, C/G, kH, kW] (and a bias [C] for
 * conv_transpose2d); out gx [N, C, H, W]. */
int torc_ref_k_conv2d_backward_input(const torc_kernel_args *a) {
  int st = ref_check_args(a, a->n_in == 3 ? 3 : 2, 1);
  const torc_conv_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *gy = &a->in[0], *w = &a->in[1], *gx = &a->out[0];
  if ((st = conv_shapes_ok(a, gx, w, gy, p->groups)))
    return st;
  conv_geo g;
  geo_init(&g, gx, w, gy, p);
  double *acc = zeros_d(ref_numel(4, gx->shape));
  if (acc == NULL)
    return TORC_ERR_OOM;
  conv_walk(&g, 1, NULL, w, gy, acc);
  store_acc(gx, acc, a->n_in == 3 ? &a->in[2] : NULL);
  free(acc);
  return TORC_OK;
}

/* in x [N, C, H, W], gy [N, O, OH, OW]; out gw [O, C/G, kH, kW]. */
int torc_ref_k_conv2d_backward_weight(const torc_kernel_args *a) {
  int st = ref_check_args(a, 2, 1);
  const torc_conv_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *gy = &a->in[1], *gw = &a->out[0];
  if ((st = conv_shapes_ok(a, x, gw, gy, p->groups)))
    return st;
  conv_geo g;
  geo_init(&g, x, gw, gy, p);
  int64_t n = ref_numel(4, gw->shape);
  double *acc = zeros_d(n);
  if (acc == NULL)
    return TORC_ERR_OOM;
  conv_walk(&g, 2, x, NULL, gy, acc);
  for (int64_t i = 0; i < n; i++)
    nn_st(gw, i, acc[i]);
  free(acc);
  return TORC_OK;
}
