/* plugins/ref/kernels_infer.c — the fused inference kernels "linear_act"
 * and "conv2d_act" (torc/plugin.h) as compositions of the reference
 * kernels they fuse: matmul, the bias add and the activation; conv2d, the
 * activation and max_pool2d. Each step rounds to the dtype as the separate
 * op would, so a planned forward on ref gives the eager forward's bits.
 */
#include <stdlib.h>
#include <string.h>

#include "ref_fused.h"

/* y[i] = act(y[i]) over n contiguous elements from y's offset. */
static void apply_act(const torc_ktensor *y, int64_t n, int32_t act) {
  if (act != TORC_ACT_RELU)
    return;
  for (int64_t i = 0; i < n; i++) {
    double v = nn_ld(y, i);
    if (!(v != v) && !(v > 0)) /* relu(NaN) = NaN */
      nn_st(y, i, 0.0);
  }
}

static int act_ok(const torc_kernel_args *a, int32_t act) {
  if (act == TORC_ACT_NONE || act == TORC_ACT_RELU)
    return TORC_OK;
  return ref_error(TORC_ERR_INVALID,
                   "ref kernel '%s': activation %d is not one of "
                   "TORC_ACT_NONE, TORC_ACT_RELU",
                   a->op, (int)act);
}

/* in x [M, K], w [K, N] (strided), optionally b [N]; out y [M, N]. */
int torc_ref_k_linear_act(const torc_kernel_args *a) {
  int st = ref_check_args(a, a->n_in == 3 ? 3 : 2, 1);
  const torc_linear_act_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  if ((st = act_ok(a, p->act)))
    return st;
  const torc_ktensor *y = &a->out[0];
  if (y->ndim != 2 || a->in[0].ndim != 2 || a->in[1].ndim != 2)
    return ref_error(TORC_ERR_SHAPE,
                     "ref kernel 'linear_act' takes 2-D x, w and y, got %d, "
                     "%d and %d dims",
                     a->in[0].ndim, a->in[1].ndim, y->ndim);
  int64_t M = y->shape[0], N = y->shape[1];
  if (a->n_in == 3) {
    const torc_ktensor *b = &a->in[2];
    if (b->ndim != 1 || b->shape[0] != N || b->dtype != y->dtype)
      return ref_error(TORC_ERR_SHAPE,
                       "ref kernel 'linear_act': the bias must be a %s "
                       "vector of %lld elements",
                       ref_dtype_name(y->dtype), (long long)N);
  }
  torc_kernel_args mm = *a;
  mm.op = "matmul";
  mm.n_in = 2;
  mm.params = NULL;
  mm.params_size = 0;
  if ((st = torc_ref_k_matmul(&mm)))
    return st;
  /* y is contiguous (the contract); the bias is read through its stride */
  for (int64_t m = 0; m < M && a->n_in == 3; m++)
    for (int64_t n = 0; n < N; n++) {
      const torc_ktensor *b = &a->in[2];
      double bv = ref_load_f(b->dtype,
                             ref_ptr(b, b->offset + n * b->strides[0]));
      nn_st(y, m * N + n, nn_ld(y, m * N + n) + bv);
    }
  apply_act(y, M * N, p->act);
  return TORC_OK;
}

/* Copies the contiguous [N, C, H, W] t's elements between torc's layout
 * and blocks of 16 channels (torc_conv_act_kparams): to blocks when
 * to_blocked, else from them; plain and blocked are byte buffers. */
static void reblock(const torc_ktensor *t, const char *src, char *dst,
                    int to_blocked) {
  size_t es = torc_dtype_size((torc_dtype)t->dtype);
  int64_t N = t->shape[0], C = t->shape[1], HW = t->shape[2] * t->shape[3];
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < HW; i++) {
        int64_t plain = (n * C + c) * HW + i;
        int64_t blocked = ((n * (C / 16) + c / 16) * HW + i) * 16 + c % 16;
        int64_t from = to_blocked ? plain : blocked;
        int64_t to = to_blocked ? blocked : plain;
        memcpy(dst + (size_t)to * es, src + (size_t)from * es, es);
      }
}

/* A copy of t in torc's layout (blocked: 1, t in blocks of 16 channels)
 * or in blocks (blocked: 0), in *buf (malloc'ed); t's own view
 * otherwise. */
static int relayout(const torc_ktensor *t, int from_blocked,
                    torc_ktensor *out, void **buf) {
  *out = *t;
  *buf = NULL;
  int64_t n = ref_numel(4, t->shape);
  size_t es = torc_dtype_size((torc_dtype)t->dtype);
  if (t->ndim != 4 || t->shape[1] % 16)
    return ref_error(TORC_ERR_SHAPE,
                     "ref kernel 'conv2d_act': a tensor in blocks of 16 "
                     "channels has %lld channels",
                     (long long)(t->ndim == 4 ? t->shape[1] : 0));
  if ((*buf = malloc((size_t)(n > 0 ? n : 1) * es)) == NULL)
    return ref_error(TORC_ERR_OOM, "ref kernel 'conv2d_act': out of memory "
                                   "for a copy in another layout");
  if (from_blocked)
    reblock(t, (const char *)ref_ptr(t, t->offset), *buf, 0);
  out->data = *buf;
  out->offset = 0;
  return TORC_OK;
}

static int conv2d_act_plain(const torc_kernel_args *a,
                            const torc_conv_act_kparams *p);

/* in x, w (, b); out y: max_pool2d(act(conv2d(x, w) + b)), pool optional;
 * x or y in blocks of 16 channels as the params say. */
int torc_ref_k_conv2d_act(const torc_kernel_args *a) {
  int st = ref_check_args(a, a->n_in == 3 ? 3 : 2, 1);
  const torc_conv_act_kparams *p = ref_params(a, sizeof *p);
  if (st || p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  if (!p->x_blocked && !p->y_blocked)
    return conv2d_act_plain(a, p);
  torc_ktensor in[3], out;
  void *xbuf = NULL, *ybuf = NULL;
  memcpy(in, a->in, (size_t)a->n_in * sizeof in[0]);
  out = a->out[0];
  if (p->x_blocked)
    st = relayout(&a->in[0], 1, &in[0], &xbuf);
  if (st == TORC_OK && p->y_blocked)
    st = relayout(&a->out[0], 0, &out, &ybuf);
  if (st == TORC_OK) {
    torc_kernel_args c = *a;
    c.in = in;
    c.out = &out;
    st = conv2d_act_plain(&c, p);
  }
  if (st == TORC_OK && p->y_blocked)
    reblock(&a->out[0], ybuf, (char *)ref_ptr(&a->out[0], a->out[0].offset),
            1);
  free(xbuf), free(ybuf);
  return st;
}

/* conv2d_act in torc's layouts. */
static int conv2d_act_plain(const torc_kernel_args *a,
                            const torc_conv_act_kparams *p) {
  int st;
  if ((st = act_ok(a, p->act)))
    return st;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
    return ref_error(TORC_ERR_SHAPE,
                     "ref kernel 'conv2d_act' takes 4-D x, w and y, got %d, "
                     "%d and %d dims",
                     x->ndim, w->ndim, y->ndim);
  torc_kernel_args c = *a;
  c.op = "conv2d";
  c.params = &p->conv;
  c.params_size = sizeof p->conv;
  if (!p->has_pool) {
    if ((st = torc_ref_k_conv2d(&c)))
      return st;
    apply_act(y, ref_numel(4, y->shape), p->act);
    return TORC_OK;
  }
  /* The convolution's output size, as conv2d's shape rule gives it. */
  torc_ktensor mid = *y;
  for (int d = 0; d < 2; d++) {
    int64_t eff = p->conv.dilation[d] * (w->shape[2 + d] - 1) + 1;
    int64_t span = x->shape[2 + d] + 2 * p->conv.padding[d] - eff;
    if (span < 0 || p->conv.stride[d] < 1)
      return ref_error(TORC_ERR_SHAPE,
                       "ref kernel 'conv2d_act': the convolution leaves no "
                       "output in dim %d",
                       2 + d);
    mid.shape[2 + d] = span / p->conv.stride[d] + 1;
  }
  mid.shape[1] = w->shape[0];
  mid.offset = 0;
  mid.strides[3] = 1;
  for (int d = 2; d >= 0; d--)
    mid.strides[d] = mid.strides[d + 1] * mid.shape[d + 1];
  int64_t n_mid = ref_numel(4, mid.shape);
  torc_ktensor ix = *y;
  ix.dtype = TORC_I64;
  ix.offset = 0;
  size_t esize = torc_dtype_size((torc_dtype)y->dtype);
  mid.data = malloc((size_t)(n_mid > 0 ? n_mid : 1) * esize);
  ix.data = malloc((size_t)(ref_numel(4, y->shape) + 1) * sizeof(int64_t));
  if (mid.data == NULL || ix.data == NULL) {
    free(mid.data), free(ix.data);
    return ref_error(TORC_ERR_OOM,
                     "ref kernel 'conv2d_act': out of memory for the "
                     "convolution's %lld elements",
                     (long long)n_mid);
  }
  c.out = &mid;
  st = torc_ref_k_conv2d(&c);
  if (st == TORC_OK) {
    apply_act(&mid, n_mid, p->act);
    torc_ktensor outs[2] = {*y, ix};
    torc_kernel_args pl = *a;
    pl.op = "max_pool2d";
    pl.n_in = 1;
    pl.in = &mid;
    pl.n_out = 2;
    pl.out = outs;
    pl.params = &p->pool;
    pl.params_size = sizeof p->pool;
    st = torc_ref_k_max_pool2d(&pl);
  }
  free(mid.data), free(ix.data);
  return st;
}
