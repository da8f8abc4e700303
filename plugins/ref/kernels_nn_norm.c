/* plugins/ref/kernels_nn_norm.c — normalisation: "batch_norm" (batch or
 * running statistics; running stats updated in place with momentum and the
 * unbiased variance, as PyTorch), "layer_norm", "group_norm", and their
 * backwards, accumulating in double.
 */
#include <stdlib.h>

#include "ref_nn.h"

/* in x [N, C, *], w, b [C] (+ running mean, var [C]); out y, mean, invstd. */
int torc_ref_k_batch_norm(const torc_kernel_args *a) {
  int st = ref_check_args(a, a->n_in == 5 ? 5 : 3, 3);
  const torc_norm_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *b = &a->in[2];
  const torc_ktensor *rm = a->n_in == 5 ? &a->in[3] : NULL;
  const torc_ktensor *rv = a->n_in == 5 ? &a->in[4] : NULL;
  const torc_ktensor *y = &a->out[0], *mo = &a->out[1], *io = &a->out[2];
  if (x->ndim < 2)
    return ref_error(TORC_ERR_SHAPE, "ref kernel 'batch_norm': x has %d dims",
                     (int)x->ndim);
  int64_t N = x->shape[0], C = x->shape[1];
  int64_t S = ref_numel(x->ndim - 2, x->shape + 2), M = N * S;
  for (int64_t c = 0; c < C; c++) {
    double mean, var;
    if (p->training) {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < S; i++)
          s += nn_ld(x, (n * C + c) * S + i);
      mean = M ? s / (double)M : 0;
      for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < S; i++) {
          double d = nn_ld(x, (n * C + c) * S + i) - mean;
          ss += d * d;
        }
      var = M ? ss / (double)M : 0;
      if (rm) {
        double unb = M > 1 ? ss / (double)(M - 1) : NAN;
        nn_st(rm, c, (1 - p->momentum) * nn_ld(rm, c) + p->momentum * mean);
        nn_st(rv, c, (1 - p->momentum) * nn_ld(rv, c) + p->momentum * unb);
      }
    } else {
      mean = nn_ld(rm, c);
      var = nn_ld(rv, c);
    }
    double inv = 1.0 / sqrt(var + p->eps), wc = nn_ld(w, c), bc = nn_ld(b, c);
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < S; i++) {
        int64_t k = (n * C + c) * S + i;
        nn_st(y, k, (nn_ld(x, k) - mean) * inv * wc + bc);
      }
    nn_st(mo, c, mean);
    nn_st(io, c, inv);
  }
  return TORC_OK;
}

/* in gy, x, w, mean, invstd; out gx, gw, gb. */
int torc_ref_k_batch_norm_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 5, 3);
  const torc_norm_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *gy = &a->in[0], *x = &a->in[1], *w = &a->in[2];
  const torc_ktensor *mt = &a->in[3], *it = &a->in[4];
  const torc_ktensor *gx = &a->out[0], *gw = &a->out[1], *gb = &a->out[2];
  int64_t N = x->shape[0], C = x->shape[1];
  int64_t S = ref_numel(x->ndim - 2, x->shape + 2), M = N * S;
  for (int64_t c = 0; c < C; c++) {
    double mean = nn_ld(mt, c), inv = nn_ld(it, c), wc = nn_ld(w, c);
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < S; i++) {
        int64_t k = (n * C + c) * S + i;
        double g = nn_ld(gy, k);
        sg += g;
        sgx += g * (nn_ld(x, k) - mean) * inv;
      }
    nn_st(gb, c, sg);
    nn_st(gw, c, sgx);
    for (int64_t n = 0; n < N; n++)
      for (int64_t i = 0; i < S; i++) {
        int64_t k = (n * C + c) * S + i;
        double g = nn_ld(gy, k), v;
        if (p->training) {
          double xh = (nn_ld(x, k) - mean) * inv;
          v = wc * inv * (g - sg / (double)M - xh * sgx / (double)M);
        } else {
          v = g * wc * inv;
        }
        nn_st(gx, k, v);
      }
  }
  return TORC_OK;
}

/* Shared by layer_norm and group_norm: x is R rows of K contiguous
 * elements; the affine parameter of flat element i is w[(i / div) % mod]. */
typedef struct rows {
  int64_t R, K, div, mod;
} rows;

static void rows_forward(const rows *r, double eps, const torc_ktensor *x,
                         const torc_ktensor *w, const torc_ktensor *b,
                         const torc_ktensor *y, const torc_ktensor *mo,
                         const torc_ktensor *ro) {
  for (int64_t row = 0; row < r->R; row++) {
    double s = 0, ss = 0;
    for (int64_t j = 0; j < r->K; j++)
      s += nn_ld(x, row * r->K + j);
    double mean = r->K ? s / (double)r->K : 0;
    for (int64_t j = 0; j < r->K; j++) {
      double d = nn_ld(x, row * r->K + j) - mean;
      ss += d * d;
    }
    double rstd = 1.0 / sqrt((r->K ? ss / (double)r->K : 0) + eps);
    for (int64_t j = 0; j < r->K; j++) {
      int64_t i = row * r->K + j, q = (i / r->div) % r->mod;
      nn_st(y, i, (nn_ld(x, i) - mean) * rstd * nn_ld(w, q) + nn_ld(b, q));
    }
    nn_st(mo, row, mean);
    nn_st(ro, row, rstd);
  }
}

static int rows_backward(const torc_kernel_args *a, const rows *r) {
  const torc_ktensor *gy = &a->in[0], *x = &a->in[1], *w = &a->in[2];
  const torc_ktensor *mt = &a->in[3], *rt = &a->in[4];
  const torc_ktensor *gx = &a->out[0], *gw = &a->out[1], *gb = &a->out[2];
  double *aw = calloc((size_t)(2 * r->mod + 1), sizeof(double));
  if (aw == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel '%s': out of memory", a->op);
  double *ab = aw + r->mod;
  for (int64_t row = 0; row < r->R; row++) {
    double mean = nn_ld(mt, row), rstd = nn_ld(rt, row), s1 = 0, s2 = 0;
    for (int64_t j = 0; j < r->K; j++) {
      int64_t i = row * r->K + j, q = (i / r->div) % r->mod;
      double g = nn_ld(gy, i), xh = (nn_ld(x, i) - mean) * rstd;
      double gh = g * nn_ld(w, q);
      s1 += gh, s2 += gh * xh;
      aw[q] += g * xh, ab[q] += g;
    }
    for (int64_t j = 0; j < r->K; j++) {
      int64_t i = row * r->K + j, q = (i / r->div) % r->mod;
      double xh = (nn_ld(x, i) - mean) * rstd;
      double gh = nn_ld(gy, i) * nn_ld(w, q);
      nn_st(gx, i,
            rstd * (gh - s1 / (double)r->K - xh * s2 / (double)r->K));
    }
  }
  for (int64_t q = 0; q < r->mod; q++) {
    nn_st(gw, q, aw[q]);
    nn_st(gb, q, ab[q]);
  }
  free(aw);
  return TORC_OK;
}

/* layer_norm: K = numel(w); R = numel(x) / K. */
static void layer_rows(const torc_ktensor *x, const torc_ktensor *w, rows *r) {
  r->K = ref_numel(w->ndim, w->shape);
  r->R = r->K ? ref_numel(x->ndim, x->shape) / r->K : 0;
  r->div = 1, r->mod = r->K ? r->K : 1;
}

/* group_norm: x [N, C, *]; rows are (n, group), K = C/G * spatial. */
static void group_rows(const torc_ktensor *x, int64_t G, rows *r) {
  int64_t N = x->shape[0], C = x->shape[1];
  int64_t S = ref_numel(x->ndim - 2, x->shape + 2);
  r->R = N * G, r->K = C / G * S, r->div = S ? S : 1, r->mod = C;
}

int torc_ref_k_layer_norm(const torc_kernel_args *a) {
  int st = ref_check_args(a, 3, 3);
  const torc_norm_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  rows r;
  layer_rows(&a->in[0], &a->in[1], &r);
  rows_forward(&r, p->eps, &a->in[0], &a->in[1], &a->in[2], &a->out[0],
               &a->out[1], &a->out[2]);
  return TORC_OK;
}

int torc_ref_k_layer_norm_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 5, 3);
  if (st)
    return st;
  rows r;
  layer_rows(&a->in[1], &a->in[2], &r);
  return rows_backward(a, &r);
}

int torc_ref_k_group_norm(const torc_kernel_args *a) {
  int st = ref_check_args(a, 3, 3);
  const torc_norm_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  if (a->in[0].ndim < 2 || p->groups < 1 || a->in[0].shape[1] % p->groups)
    return ref_error(TORC_ERR_SHAPE, "ref kernel 'group_norm': bad groups");
  rows r;
  group_rows(&a->in[0], p->groups, &r);
  rows_forward(&r, p->eps, &a->in[0], &a->in[1], &a->in[2], &a->out[0],
               &a->out[1], &a->out[2]);
  return TORC_OK;
}

int torc_ref_k_group_norm_backward(const torc_kernel_args *a) {
  int st = ref_check_args(a, 5, 3);
  const torc_norm_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  if (a->in[1].ndim < 2 || p->groups < 1 || a->in[1].shape[1] % p->groups)
    return ref_error(TORC_ERR_SHAPE,
                     "ref kernel 'group_norm_backward': bad groups");
  rows r;
  group_rows(&a->in[1], p->groups, &r);
  return rows_backward(a, &r);
}
