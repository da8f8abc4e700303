/* plugins/onednn/conv.c — "conv2d", "conv2d_backward_input" (and
 * "conv_transpose2d", the same computation plus a bias),
 * "conv2d_backward_weight" for f32 through oneDNN's convolution
 * primitives, with groups, stride, padding and dilation as the ref kernels.
 *
 * torc's tensors are plain NCHW / OIHW (GOIHW with groups). The primitive
 * may choose blocked layouts ([plugin.onednn] layout): the cached entry
 * then reorders to and from them around each call. The algorithm is
 * oneDNN's direct convolution, or with [plugin.onednn] algorithm = auto
 * whatever oneDNN picks (Winograd F(4x4, 3x3) for 3x3 stride-1 layers with
 * 16-multiple channels: ~1.7x faster forward here, with ~6x the rounding
 * error: 9e-5 against 1.5e-5 relative on a 32-channel layer).
 *
 * Forward and backward-data passes over more than DNN_CONV_CHUNK images
 * run in chunks of that many: the blocked copies (the shared arena) then
 * stay the size of a training batch's, not of an evaluation batch's (a
 * batch of 1000 28x28 images with 32 channels would need 100 MB more).
 * The weight gradient sums over the batch, so it runs whole.
 *
 * torc's output size floor((H + 2P - eff) / S) + 1 can leave the last
 * input rows outside every window; oneDNN describes that as a negative
 * right padding, which it accepts only above -stride. So the right padding
 * is clipped at 0 by describing x (or gx) as a view of its first
 * H + PR rows: those rows are never read (and get a zero gradient).
 */
#include <stdlib.h>
#include <string.h>

#include "onednn_internal.h"

/* Most images one forward or backward-data primitive runs at a time. */
enum { DNN_CONV_CHUNK = 64 };

typedef dnn_conv_geo geo;
typedef dnn_conv_mds mds;

int torc_dnn__conv_geo(const torc_kernel_args *a, geo *g, const torc_ktensor *x,
                       const torc_ktensor *w, const torc_ktensor *y) {
  const torc_conv_kparams *p = a->params;
  if (p == NULL || a->params_size < sizeof *p)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel '%s' got no convolution "
                               "parameters",
                               a->op);
  int64_t G = p->groups;
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || G < 1 ||
      x->shape[0] != y->shape[0] || x->shape[1] % G || w->shape[0] % G ||
      w->shape[1] * G != x->shape[1] || w->shape[0] != y->shape[1] ||
      !dnn_float_ok(x->dtype) || w->dtype != x->dtype ||
      y->dtype != x->dtype)
    return torc_dnn__set_error(TORC_ERR_SHAPE,
                               "onednn kernel '%s': operands of %d, %d and %d "
                               "dims with groups %lld do not fit an f32 (or "
                               "bf16) convolution",
                               a->op, x->ndim, w->ndim, y->ndim, (long long)G);
  memset(g, 0, sizeof *g);
  g->N = x->shape[0], g->C = x->shape[1], g->H = x->shape[2];
  g->W = x->shape[3], g->O = w->shape[0], g->kH = w->shape[2];
  g->kW = w->shape[3], g->OH = y->shape[2], g->OW = y->shape[3], g->G = G;
  g->dt = x->dtype;
  int64_t in[2] = {g->H, g->W}, k[2] = {g->kH, g->kW}, o[2] = {g->OH, g->OW};
  int64_t v[2];
  for (int i = 0; i < 2; i++) {
    g->S[i] = p->stride[i];
    g->D[i] = p->dilation[i];
    g->PL[i] = p->padding[i];
    g->PR[i] = (o[i] - 1) * g->S[i] + (k[i] - 1) * g->D[i] + 1 - in[i] -
               g->PL[i];
    v[i] = in[i];
    if (g->PR[i] < 0) {
      v[i] = in[i] + g->PR[i];
      g->PR[i] = 0;
    }
  }
  g->Hv = v[0], g->Wv = v[1];
  return TORC_OK;
}

/* 1 when some extent is 0: oneDNN is not called (the caller fills). */
static int geo_empty(const geo *g) {
  return g->N == 0 || g->C == 0 || g->O == 0 || g->OH == 0 || g->OW == 0 ||
         g->Hv <= 0 || g->Wv <= 0;
}

static void geo_key(dnn_key *k, int op, const geo *g, int n_threads) {
  memset(k, 0, sizeof *k);
  k->op = op;
  k->n_threads = n_threads;
  int64_t v[] = {g->N,    g->C,    g->H,    g->W,    g->O,    g->OH,
                 g->OW,   g->kH,   g->kW,   g->G,    g->Hv,   g->Wv,
                 g->S[0], g->S[1], g->PL[0], g->PL[1], g->PR[0], g->PR[1],
                 g->D[0], g->D[1], g->bias, g->dt};
  memcpy(k->v, v, sizeof v);
}

int torc_dnn__conv_mds(const geo *g, dnn_conv_mds *m) {
  int64_t xd[4] = {g->N, g->C, g->Hv, g->Wv};
  int64_t xs[4] = {g->C * g->H * g->W, g->H * g->W, g->W, 1};
  int64_t yd[4] = {g->N, g->O, g->OH, g->OW};
  int64_t ys[4] = {g->O * g->OH * g->OW, g->OH * g->OW, g->OW, 1};
  int64_t Og = g->O / g->G, Cg = g->C / g->G;
  int64_t wd[5] = {g->G, Og, Cg, g->kH, g->kW};
  int64_t ws[5] = {Og * Cg * g->kH * g->kW, Cg * g->kH * g->kW,
                   g->kH * g->kW, g->kW, 1};
  int64_t bd[1] = {g->O}, bs[1] = {1};
  dnnl_data_type_t dt = dnn_dt(g->dt);
  int st = torc_dnn__md(&m->x, 4, xd, xs, dt);
  if (st == TORC_OK)
    st = torc_dnn__md(&m->y, 4, yd, ys, dt);
  if (st == TORC_OK)
    st = g->G == 1 ? torc_dnn__md(&m->w, 4, wd + 1, ws + 1, dt)
                   : torc_dnn__md(&m->w, 5, wd, ws, dt);
  if (st == TORC_OK)
    st = torc_dnn__md(&m->b, 1, bd, bs, dnnl_f32);
  return st;
}

/* The same dims with format "any" (the primitive chooses). */
static void any_md(dnnl_memory_desc_t *out, const dnnl_memory_desc_t *in) {
  dnnl_memory_desc_init_by_tag(out, in->ndims, in->dims, in->data_type,
                               dnnl_format_tag_any);
}

typedef struct conv_ctx {
  const geo *g;
  int op;             /* DNN_OP_CONV_* */
  const char *name;   /* the torc op, for messages */
} conv_ctx;

/* Makes the op descriptor for `op` with layouts m (user or any). */
static dnnl_status_t conv_desc(dnnl_convolution_desc_t *cd, int op,
                               const geo *g, const mds *m, int with_bias) {
  dnnl_dims_t S = {g->S[0], g->S[1]}, D = {g->D[0] - 1, g->D[1] - 1};
  dnnl_dims_t PL = {g->PL[0], g->PL[1]}, PR = {g->PR[0], g->PR[1]};
  dnnl_alg_kind_t alg = torc_dnn__conv_auto ? dnnl_convolution_auto
                                            : dnnl_convolution_direct;
  switch (op) {
  case DNN_OP_CONV_FWD:
    return dnnl_dilated_convolution_forward_desc_init(
        cd, dnnl_forward_training, alg, &m->x, &m->w,
        with_bias ? &m->b : NULL, &m->y, S, D, PL, PR);
  case DNN_OP_CONV_BWD_DATA:
    return dnnl_dilated_convolution_backward_data_desc_init(
        cd, alg, &m->x, &m->w, &m->y, S, D, PL, PR);
  default:
    return dnnl_dilated_convolution_backward_weights_desc_init(
        cd, alg, &m->x, &m->w, NULL, &m->y, S, D, PL, PR);
  }
}

/* Creates the pd of `op` (with a forward hint for the backward ones) in
 * the layouts `m`. */
static dnnl_status_t conv_pd(dnnl_primitive_desc_t *pd, int op, const geo *g,
                             const mds *m) {
  dnnl_primitive_attr_t attr;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s != dnnl_success)
    return s;
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_primitive_desc_t hint = NULL;
  dnnl_convolution_desc_t cd;
  if (s == dnnl_success && op != DNN_OP_CONV_FWD) {
    s = conv_desc(&cd, DNN_OP_CONV_FWD, g, m, 0);
    if (s == dnnl_success)
      s = dnnl_primitive_desc_create(&hint, &cd, attr, torc_dnn__engine,
                                     NULL);
  }
  if (s == dnnl_success)
    s = conv_desc(&cd, op, g, m, op == DNN_OP_CONV_FWD && g->bias);
  if (s == dnnl_success)
    s = dnnl_primitive_desc_create(pd, &cd, attr, torc_dnn__engine, hint);
  if (hint)
    dnnl_primitive_desc_destroy(hint);
  dnnl_primitive_attr_destroy(attr);
  return s;
}

static int conv_build(dnn_entry *e, const void *vctx) {
  const conv_ctx *c = vctx;
  const geo *g = c->g;
  mds user, any;
  int st = torc_dnn__conv_mds(g, &user);
  if (st != TORC_OK)
    return torc_dnn__fail(c->name, "describing the operands", 0);
  any = user;
  any_md(&any.x, &user.x);
  any_md(&any.w, &user.w);
  any_md(&any.y, &user.y);
  /* The preferred layouts first, the others when that has no primitive. */
  int plain = torc_dnn__use_plain(g->C, g->O, c->op == DNN_OP_CONV_FWD);
  dnnl_status_t s = conv_pd(&e->pd, c->op, g, plain ? &user : &any);
  if (s != dnnl_success)
    s = conv_pd(&e->pd, c->op, g, plain ? &any : &user);
  if (s != dnnl_success)
    return torc_dnn__fail(c->name, "creating the convolution", s);
  switch (c->op) {
  case DNN_OP_CONV_FWD:
    st = torc_dnn__entry_arg(e, DNNL_ARG_SRC, &user.x, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_WEIGHTS, &user.w, 0);
    if (st == TORC_OK && g->bias)
      st = torc_dnn__entry_arg(e, DNNL_ARG_BIAS, &user.b, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_DST, &user.y, 1);
    break;
  case DNN_OP_CONV_BWD_DATA:
    st = torc_dnn__entry_arg(e, DNNL_ARG_DIFF_DST, &user.y, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_WEIGHTS, &user.w, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_DIFF_SRC, &user.x, 1);
    break;
  default:
    st = torc_dnn__entry_arg(e, DNNL_ARG_SRC, &user.x, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_DIFF_DST, &user.y, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_DIFF_WEIGHTS, &user.w, 1);
  }
  return st == TORC_OK ? torc_dnn__entry_finish(e) : st;
}

/* Looks up (or builds) the primitive for op and runs it on ptrs. */
static int conv_run(const torc_kernel_args *a, int op, const geo *g,
                    void *const *ptrs) {
  torc_dnn__lock();
  dnn_key key;
  geo_key(&key, op, g, torc_dnn__threads(a->n_threads));
  conv_ctx c = {g, op, a->op};
  dnn_entry *e = torc_dnn__cache_get(&key, conv_build, &c);
  int st = e == NULL ? TORC_ERR_PLUGIN
           : e->unsupported
               ? torc_dnn__set_error(TORC_ERR_UNSUPPORTED,
                                     "onednn kernel '%s': oneDNN has no "
                                     "primitive for this geometry",
                                     a->op)
               : torc_dnn__run(e, ptrs);
  torc_dnn__unlock();
  return st;
}

/* t[n][c][...] += bias[c] over planes of `plane` elements. */
static void add_bias(float *t, const float *bias, int64_t n, int64_t ch,
                     int64_t plane) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n * ch; i++) {
    float *p = t + i * plane, b = bias[i % ch];
    for (int64_t j = 0; j < plane; j++)
      p[j] += b;
  }
}

static int check_bias(const torc_kernel_args *a, const torc_ktensor *b,
                      int64_t ch, int32_t dt) {
  if (b->ndim != 1 || b->shape[0] != ch || b->dtype != dt)
    return torc_dnn__set_error(TORC_ERR_SHAPE,
                               "onednn kernel '%s': the bias must be %s "
                               "[%lld]",
                               a->op, dt == TORC_BF16 ? "bf16" : "f32",
                               (long long)ch);
  return TORC_OK;
}

static int check_io(const torc_kernel_args *a) {
  if ((a->n_in != 2 && a->n_in != 3) || a->n_out != 1)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel '%s' got %d inputs and %d "
                               "outputs (expected 2 or 3, and 1)",
                               a->op, a->n_in, a->n_out);
  return TORC_OK;
}

/* conv2d in bf16 (x, w, y bf16; oneDNN accumulates in f32 and takes the
 * bias in f32, converted here). No input channels: ref serves it. */
static int conv2d_bf16(const torc_kernel_args *a, const geo *g) {
  if (geo_empty(g))
    return TORC_KERNEL_DECLINED;
  float *bias = NULL;
  if (g->bias) {
    if ((bias = malloc(sizeof *bias * (size_t)g->O)) == NULL)
      return torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
    for (int64_t o = 0; o < g->O; o++)
      bias[o] = (float)dnn_ld(&a->in[2], o);
  }
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  int st = TORC_OK;
  for (int64_t n0 = 0; n0 < g->N && st == TORC_OK; n0 += DNN_CONV_CHUNK) {
    geo gc = *g;
    gc.N = g->N - n0 < DNN_CONV_CHUNK ? g->N - n0 : DNN_CONV_CHUNK;
    void *xp = dnn_at(x, n0 * g->C * g->H * g->W);
    void *yp = dnn_at(y, n0 * g->O * g->OH * g->OW);
    void *ptrs[4] = {xp, dnn_at(w, 0), bias ? (void *)bias : yp, yp};
    st = conv_run(a, DNN_OP_CONV_FWD, &gc, ptrs);
  }
  free(bias);
  return st;
}

/* in x, w (, bias); out y. */
int torc_dnn__k_conv2d(const torc_kernel_args *a) {
  int st = check_io(a);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  geo g;
  if ((st = torc_dnn__conv_geo(a, &g, x, w, y)) != TORC_OK ||
      (a->n_in == 3 &&
       (st = check_bias(a, &a->in[2], g.O, g.dt)) != TORC_OK))
    return st;
  g.bias = a->n_in == 3;
  int64_t ny = g.N * g.O * g.OH * g.OW;
  if (ny == 0)
    return TORC_OK;
  if (g.dt == TORC_BF16)
    return conv2d_bf16(a, &g);
  if (geo_empty(&g)) { /* no input channels: y = bias or 0 */
    memset(dnn_f32(y, 0), 0, sizeof(float) * (size_t)ny);
    if (g.bias)
      add_bias(dnn_f32(y, 0), dnn_f32(&a->in[2], 0), g.N, g.O, g.OH * g.OW);
    return TORC_OK;
  }
  for (int64_t n0 = 0; n0 < g.N && st == TORC_OK; n0 += DNN_CONV_CHUNK) {
    geo gc = g;
    gc.N = g.N - n0 < DNN_CONV_CHUNK ? g.N - n0 : DNN_CONV_CHUNK;
    float *xp = dnn_f32(x, n0 * g.C * g.H * g.W);
    float *yp = dnn_f32(y, n0 * g.O * g.OH * g.OW);
    void *ptrs[4] = {xp, dnn_f32(w, 0), NULL, NULL};
    if (g.bias)
      ptrs[2] = dnn_f32(&a->in[2], 0), ptrs[3] = yp;
    else
      ptrs[2] = yp;
    st = conv_run(a, DNN_OP_CONV_FWD, &gc, ptrs);
  }
  return st;
}

/* in gy [N, O, OH, OW], w (, bias [C] for conv_transpose2d); out gx
 * [N, C, H, W]. */
int torc_dnn__k_conv2d_backward_input(const torc_kernel_args *a) {
  int st = check_io(a);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *gy = &a->in[0], *w = &a->in[1], *gx = &a->out[0];
  geo g;
  if ((st = torc_dnn__conv_geo(a, &g, gx, w, gy)) != TORC_OK)
    return st;
  /* conv_transpose2d's bias in bf16: ref serves it */
  if (a->n_in == 3 && g.dt == TORC_BF16)
    return TORC_KERNEL_DECLINED;
  if (a->n_in == 3 &&
      (st = check_bias(a, &a->in[2], g.C, TORC_F32)) != TORC_OK)
    return st;
  int64_t nx = g.N * g.C * g.H * g.W;
  if (nx == 0)
    return TORC_OK;
  /* f32, or bf16 (oneDNN accumulates in f32) */
  if (geo_empty(&g) || g.Hv < g.H || g.Wv < g.W)
    memset(dnn_at(gx, 0), 0, dnn_esize(g.dt) * (size_t)nx);
  for (int64_t n0 = 0; !geo_empty(&g) && n0 < g.N; n0 += DNN_CONV_CHUNK) {
    geo gc = g;
    gc.N = g.N - n0 < DNN_CONV_CHUNK ? g.N - n0 : DNN_CONV_CHUNK;
    void *ptrs[3] = {dnn_at(gy, n0 * g.O * g.OH * g.OW), dnn_at(w, 0),
                     dnn_at(gx, n0 * g.C * g.H * g.W)};
    if ((st = conv_run(a, DNN_OP_CONV_BWD_DATA, &gc, ptrs)) != TORC_OK)
      return st;
  }
  if (a->n_in == 3)
    add_bias(dnn_f32(gx, 0), dnn_f32(&a->in[2], 0), g.N, g.C, g.H * g.W);
  return TORC_OK;
}

/* in x, gy; out gw [O, C / groups, kH, kW]. */
int torc_dnn__k_conv2d_backward_weight(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel 'conv2d_backward_weight' got %d "
                               "inputs and %d outputs (expected 2 and 1)",
                               a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *gy = &a->in[1], *gw = &a->out[0];
  geo g;
  int st = torc_dnn__conv_geo(a, &g, x, gw, gy);
  if (st != TORC_OK)
    return st;
  int64_t nw = dnn_numel(gw, 0);
  if (nw == 0)
    return TORC_OK;
  if (geo_empty(&g)) {
    memset(dnn_at(gw, 0), 0, dnn_esize(g.dt) * (size_t)nw);
    return TORC_OK;
  }
  /* f32, or bf16 (oneDNN accumulates in f32 and rounds gw once) */
  void *ptrs[3] = {dnn_at(x, 0), dnn_at(gy, 0), dnn_at(gw, 0)};
  return conv_run(a, DNN_OP_CONV_BWD_WEIGHTS, &g, ptrs);
}
