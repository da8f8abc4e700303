/* plugins/cpu/conv.c — "conv2d" (im2col + GEMM), "conv2d_backward_input"
 * and "conv_transpose2d" (GEMM + col2im) and "conv2d_backward_weight"
 * (im2col + GEMM) for f32/f64, with groups, stride, padding and dilation
 * as the ref kernels. Registered with TORC_KERNEL_CONTIGUOUS.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* The geometry: x [N, C, H, W] (the convolution's input), w [O, Cg, kH,
 * kW], y [N, O, OH, OW]; the column matrix of one image and group is
 * [Cg kH kW, OH OW]. */
typedef struct geo {
  int64_t N, C, H, W, O, OH, OW, kH, kW, G, Cg, Og;
  int64_t rows, cols; /* of the column matrix */
  torc_conv_kparams p;
} geo;

static int geo_init(const torc_kernel_args *a, geo *g, const torc_ktensor *x,
                    const torc_ktensor *w, const torc_ktensor *y) {
  const torc_conv_kparams *p = a->params;
  if (p == NULL || a->params_size < sizeof *p)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel '%s' got no convolution "
                               "parameters",
                               a->op);
  int64_t G = p->groups;
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || G < 1 ||
      x->shape[0] != y->shape[0] || x->shape[1] % G || w->shape[0] % G ||
      w->shape[1] * G != x->shape[1] || w->shape[0] != y->shape[1] ||
      x->dtype != w->dtype || x->dtype != y->dtype ||
      (x->dtype != TORC_F32 && x->dtype != TORC_F64))
    return torc_cpu__set_error(TORC_ERR_SHAPE,
                               "cpu kernel '%s': operands of %d, %d and %d "
                               "dims with groups %lld do not fit a f32/f64 "
                               "convolution",
                               a->op, x->ndim, w->ndim, y->ndim, (long long)G);
  g->N = x->shape[0], g->C = x->shape[1], g->H = x->shape[2];
  g->W = x->shape[3], g->O = w->shape[0], g->kH = w->shape[2];
  g->kW = w->shape[3], g->OH = y->shape[2], g->OW = y->shape[3];
  g->G = G, g->Cg = g->C / G, g->Og = g->O / G;
  g->rows = g->Cg * g->kH * g->kW, g->cols = g->OH * g->OW;
  g->p = *p;
  torc_cpu__threads(a->n_threads);
  return TORC_OK;
}

/* 1 when the column matrix is the input itself (1x1, stride 1, no
 * padding). */
static int is_pointwise(const geo *g) {
  return g->kH == 1 && g->kW == 1 && g->p.stride[0] == 1 &&
         g->p.stride[1] == 1 && g->p.padding[0] == 0 && g->p.padding[1] == 0 &&
         g->OH == g->H && g->OW == g->W;
}

/* im2col: col[(c kH + kh) kW + kw][oh OW + ow] = x[c][ih][iw] (0 outside).
 * col2im: the adjoint, x[c][ih][iw] += col[...]. One image, one group. */
#define DEFINE_COLS(T, SUF)                                                    \
  static void im2col_##SUF(const geo *g, const T *x, T *col) {                 \
    int64_t sh = g->p.stride[0], sw = g->p.stride[1];                          \
    int64_t ph = g->p.padding[0], pw = g->p.padding[1];                        \
    int64_t dh = g->p.dilation[0], dw = g->p.dilation[1];                      \
    for (int64_t c = 0; c < g->Cg; c++)                                        \
      for (int64_t kh = 0; kh < g->kH; kh++)                                   \
        for (int64_t kw = 0; kw < g->kW; kw++) {                               \
          T *row = col + ((c * g->kH + kh) * g->kW + kw) * g->cols;            \
          const T *plane = x + c * g->H * g->W;                                \
          for (int64_t oh = 0; oh < g->OH; oh++) {                             \
            T *dst = row + oh * g->OW;                                         \
            int64_t ih = oh * sh - ph + kh * dh;                               \
            if (ih < 0 || ih >= g->H) {                                        \
              memset(dst, 0, sizeof(T) * (size_t)g->OW);                       \
              continue;                                                        \
            }                                                                  \
            const T *src = plane + ih * g->W;                                  \
            int64_t iw = kw * dw - pw;                                         \
            for (int64_t ow = 0; ow < g->OW; ow++, iw += sw)                   \
              dst[ow] = iw >= 0 && iw < g->W ? src[iw] : (T)0;                 \
          }                                                                    \
        }                                                                      \
  }                                                                            \
  static void col2im_##SUF(const geo *g, const T *col, T *x) {                 \
    int64_t sh = g->p.stride[0], sw = g->p.stride[1];                          \
    int64_t ph = g->p.padding[0], pw = g->p.padding[1];                        \
    int64_t dh = g->p.dilation[0], dw = g->p.dilation[1];                      \
    for (int64_t c = 0; c < g->Cg; c++)                                        \
      for (int64_t kh = 0; kh < g->kH; kh++)                                   \
        for (int64_t kw = 0; kw < g->kW; kw++) {                               \
          const T *row = col + ((c * g->kH + kh) * g->kW + kw) * g->cols;      \
          T *plane = x + c * g->H * g->W;                                      \
          for (int64_t oh = 0; oh < g->OH; oh++) {                             \
            int64_t ih = oh * sh - ph + kh * dh;                               \
            if (ih < 0 || ih >= g->H)                                          \
              continue;                                                        \
            const T *src = row + oh * g->OW;                                   \
            T *dst = plane + ih * g->W;                                        \
            int64_t iw = kw * dw - pw;                                         \
            for (int64_t ow = 0; ow < g->OW; ow++, iw += sw)                   \
              if (iw >= 0 && iw < g->W)                                        \
                dst[iw] += src[ow];                                            \
          }                                                                    \
        }                                                                      \
  }                                                                            \
  /* t[n][ch][...] += bias[ch] over planes of `plane` elements. */             \
  static void add_bias_##SUF(T *t, const T *bias, int64_t n, int64_t ch,       \
                             int64_t plane) {                                  \
    for (int64_t i = 0; i < n; i++)                                            \
      for (int64_t c = 0; c < ch; c++) {                                       \
        T *p = t + (i * ch + c) * plane, b = bias[c];                          \
        for (int64_t j = 0; j < plane; j++)                                    \
          p[j] += b;                                                           \
      }                                                                        \
  }
DEFINE_COLS(float, f32)
DEFINE_COLS(double, f64)
#undef DEFINE_COLS

static void im2col(int32_t dt, const geo *g, const void *x, void *col) {
  if (dt == TORC_F64)
    im2col_f64(g, x, col);
  else
    im2col_f32(g, x, col);
}

static void col2im(int32_t dt, const geo *g, const void *col, void *x) {
  if (dt == TORC_F64)
    col2im_f64(g, col, x);
  else
    col2im_f32(g, col, x);
}

static void add_bias(int32_t dt, void *t, const torc_ktensor *bias, int64_t n,
                     int64_t ch, int64_t plane) {
  if (dt == TORC_F64)
    add_bias_f64(t, cpu_ptr(bias, 0), n, ch, plane);
  else
    add_bias_f32(t, cpu_ptr(bias, 0), n, ch, plane);
}

/* The column buffer, or NULL for a pointwise convolution (which needs
 * none); *st is set on failure. */
static void *col_alloc(const torc_kernel_args *a, const geo *g, int32_t dt,
                       int *st) {
  *st = TORC_OK;
  if (is_pointwise(g))
    return NULL;
  size_t n = (size_t)(g->rows * g->cols > 0 ? g->rows * g->cols : 1);
  void *col = malloc(n * cpu_esize(dt));
  if (col == NULL)
    *st = torc_cpu__set_error(TORC_ERR_OOM,
                              "cpu kernel '%s': out of memory for a %lld x "
                              "%lld column buffer",
                              a->op, (long long)g->rows, (long long)g->cols);
  return col;
}

static int check_bias(const torc_kernel_args *a, const torc_ktensor *bias,
                      int64_t ch, int32_t dt) {
  if (bias->ndim != 1 || bias->shape[0] != ch || bias->dtype != dt)
    return torc_cpu__set_error(TORC_ERR_SHAPE,
                               "cpu kernel '%s': the bias must be [%lld] of "
                               "the input's dtype",
                               a->op, (long long)ch);
  return TORC_OK;
}

/* in x, w (, bias); out y: y[n, group] = w_g [Og, rows] col(x[n, g]). */
int torc_cpu__k_conv2d(const torc_kernel_args *a) {
  if ((a->n_in != 2 && a->n_in != 3) || a->n_out != 1)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel 'conv2d' got %d inputs and %d "
                               "outputs (expected 2 or 3, and 1)",
                               a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  geo g;
  int st = geo_init(a, &g, x, w, y);
  if (st == TORC_OK && a->n_in == 3)
    st = check_bias(a, &a->in[2], g.O, y->dtype);
  if (st != TORC_OK)
    return st;
  int32_t dt = y->dtype;
  size_t es = cpu_esize(dt);
  if (g.N == 0 || g.cols == 0 || g.O == 0)
    return TORC_OK;
  char *yp = cpu_ptr(y, 0);
  if (g.rows == 0) {
    memset(yp, 0, (size_t)(g.N * g.O * g.cols) * es);
  } else {
    void *col = col_alloc(a, &g, dt, &st);
    if (st != TORC_OK)
      return st;
    const char *xp = cpu_ptr(x, 0), *wp = cpu_ptr(w, 0);
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t gr = 0; gr < g.G; gr++) {
        const char *xg = xp + (size_t)((n * g.C + gr * g.Cg) * g.H * g.W) * es;
        const void *src = xg;
        if (col) {
          im2col(dt, &g, xg, col);
          src = col;
        }
        torc_cpu__gemm(
            dt, 0, 0, g.Og, g.cols, g.rows, 1.0,
            wp + (size_t)(gr * g.Og * g.rows) * es, g.rows, src, g.cols, 0.0,
            yp + (size_t)((n * g.O + gr * g.Og) * g.cols) * es, g.cols);
      }
    free(col);
  }
  if (a->n_in == 3)
    add_bias(dt, yp, &a->in[2], g.N, g.O, g.cols);
  return TORC_OK;
}

/* in gy [N, O, OH, OW], w (, bias [C] for conv_transpose2d); out gx
 * [N, C, H, W]: col = w_g^T gy[n, g], then col2im into gx[n, g]. */
int torc_cpu__k_conv2d_backward_input(const torc_kernel_args *a) {
  if ((a->n_in != 2 && a->n_in != 3) || a->n_out != 1)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel '%s' got %d inputs and %d outputs "
                               "(expected 2 or 3, and 1)",
                               a->op, a->n_in, a->n_out);
  const torc_ktensor *gy = &a->in[0], *w = &a->in[1], *gx = &a->out[0];
  geo g;
  int st = geo_init(a, &g, gx, w, gy);
  if (st == TORC_OK && a->n_in == 3)
    st = check_bias(a, &a->in[2], g.C, gx->dtype);
  if (st != TORC_OK)
    return st;
  int32_t dt = gx->dtype;
  size_t es = cpu_esize(dt);
  int64_t nx = g.N * g.C * g.H * g.W;
  if (nx == 0)
    return TORC_OK;
  char *xp = cpu_ptr(gx, 0);
  memset(xp, 0, (size_t)nx * es);
  if (g.rows > 0 && g.cols > 0 && g.Og > 0) {
    int pointwise = is_pointwise(&g);
    void *col = col_alloc(a, &g, dt, &st);
    if (st != TORC_OK)
      return st;
    const char *yp = cpu_ptr(gy, 0), *wp = cpu_ptr(w, 0);
    for (int64_t n = 0; n < g.N; n++)
      for (int64_t gr = 0; gr < g.G; gr++) {
        char *xg = xp + (size_t)((n * g.C + gr * g.Cg) * g.H * g.W) * es;
        /* A pointwise convolution's columns are gx itself. */
        torc_cpu__gemm(dt, 1, 0, g.rows, g.cols, g.Og, 1.0,
                       wp + (size_t)(gr * g.Og * g.rows) * es, g.rows,
                       yp + (size_t)((n * g.O + gr * g.Og) * g.cols) * es,
                       g.cols, 0.0, pointwise ? (void *)xg : col, g.cols);
        if (!pointwise)
          col2im(dt, &g, col, xg);
      }
    free(col);
  }
  if (a->n_in == 3)
    add_bias(dt, xp, &a->in[2], g.N, g.C, g.H * g.W);
  return TORC_OK;
}

/* in x, gy; out gw [O, Cg, kH, kW]: gw_g = sum_n gy[n, g] col(x[n, g])^T. */
int torc_cpu__k_conv2d_backward_weight(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return torc_cpu__set_error(TORC_ERR_INTERNAL,
                               "cpu kernel 'conv2d_backward_weight' got %d "
                               "inputs and %d outputs (expected 2 and 1)",
                               a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *gy = &a->in[1], *gw = &a->out[0];
  geo g;
  int st = geo_init(a, &g, x, gw, gy);
  if (st != TORC_OK)
    return st;
  int32_t dt = gw->dtype;
  size_t es = cpu_esize(dt);
  int64_t nw = g.O * g.rows;
  if (nw == 0)
    return TORC_OK;
  char *wp = cpu_ptr(gw, 0);
  if (g.N == 0 || g.cols == 0) {
    memset(wp, 0, (size_t)nw * es);
    return TORC_OK;
  }
  void *col = col_alloc(a, &g, dt, &st);
  if (st != TORC_OK)
    return st;
  const char *xp = cpu_ptr(x, 0), *yp = cpu_ptr(gy, 0);
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t gr = 0; gr < g.G; gr++) {
      const char *xg = xp + (size_t)((n * g.C + gr * g.Cg) * g.H * g.W) * es;
      const void *src = xg;
      if (col) {
        im2col(dt, &g, xg, col);
        src = col;
      }
      torc_cpu__gemm(dt, 0, 1, g.Og, g.rows, g.cols, 1.0,
                     yp + (size_t)((n * g.O + gr * g.Og) * g.cols) * es, g.cols,
                     src, g.cols, n == 0 ? 0.0 : 1.0,
                     wp + (size_t)(gr * g.Og * g.rows) * es, g.rows);
    }
  free(col);
  return TORC_OK;
}
