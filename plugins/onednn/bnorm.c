/* plugins/onednn/bnorm.c — "batch_norm" and "batch_norm_backward" for f32
 * through oneDNN's batch normalization (x [N, C, *] seen as [N, C, S, 1]).
 *
 * torc saves the batch's mean and *inverse standard deviation*; oneDNN
 * produces and consumes the (biased) variance, so the forward converts
 * var -> invstd = 1 / sqrt(var + eps) and the backward converts back
 * var = 1 / invstd^2 - eps (in double; oneDNN then recomputes the same
 * 1 / sqrt(var + eps) to float precision). The running statistics are
 * updated here, as ref does: momentum, and the unbiased variance.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onednn_internal.h"

typedef struct bgeo {
  int64_t N, C, S;
  int training;
  float eps;
  int32_t dt; /* x and y: TORC_F32, or TORC_BF16 (inference only) */
} bgeo;

typedef struct bn_ctx {
  const bgeo *g;
  int backward;
} bn_ctx;

static int bn_build(dnn_entry *e, const void *vctx) {
  const bn_ctx *c = vctx;
  const bgeo *g = c->g;
  dnnl_memory_desc_t xm, cm;
  /* 4-D: oneDNN's vectorised plain-layout kernel (ncsp) wants 4 or 5 dims;
   * for 3 it runs its reference loops. */
  int64_t xd[4] = {g->N, g->C, g->S, 1}, xs[4] = {g->C * g->S, g->S, 1, 1};
  int64_t cd[1] = {g->C}, cs[1] = {1};
  if (torc_dnn__md(&xm, 4, xd, xs, dnn_dt(g->dt)) != TORC_OK ||
      torc_dnn__md(&cm, 1, cd, cs, dnnl_f32) != TORC_OK)
    return torc_dnn__fail("batch_norm", "describing the operands", 0);
  unsigned flags = dnnl_use_scale | dnnl_use_shift;
  if (!g->training)
    flags |= dnnl_use_global_stats;
  dnnl_primitive_attr_t attr;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s != dnnl_success)
    return torc_dnn__fail("batch_norm", "creating an attribute", s);
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_batch_normalization_desc_t bd;
  dnnl_primitive_desc_t hint = NULL;
  if (s == dnnl_success)
    s = dnnl_batch_normalization_forward_desc_init(
        &bd, g->training ? dnnl_forward_training : dnnl_forward_inference,
        &xm, g->eps, flags);
  if (s == dnnl_success && c->backward) {
    s = dnnl_primitive_desc_create(&hint, &bd, attr, torc_dnn__engine, NULL);
    if (s == dnnl_success)
      s = dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &xm,
                                                      &xm, g->eps, flags);
  }
  if (s == dnnl_success)
    s = dnnl_primitive_desc_create(&e->pd, &bd, attr, torc_dnn__engine, hint);
  if (hint)
    dnnl_primitive_desc_destroy(hint);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success)
    return torc_dnn__fail(c->backward ? "batch_norm_backward" : "batch_norm",
                          "creating the batch normalization", s);
  /* Argument order = the ptrs order of the callers. */
  static const int fwd[] = {DNNL_ARG_SRC,  DNNL_ARG_SCALE, DNNL_ARG_SHIFT,
                            DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DST};
  /* oneDNN 2.6's backward insists on a shift it does not read (it would
   * for a fused ReLU): the callers pass the weight there. */
  static const int bwd[] = {DNNL_ARG_DIFF_DST,   DNNL_ARG_SRC,
                            DNNL_ARG_SCALE,      DNNL_ARG_MEAN,
                            DNNL_ARG_VARIANCE,   DNNL_ARG_DIFF_SRC,
                            DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT,
                            DNNL_ARG_SHIFT};
  const int *args = c->backward ? bwd : fwd;
  int n = c->backward ? 9 : 6, st = TORC_OK;
  for (int i = 0; i < n && st == TORC_OK; i++) {
    int arg = args[i];
    int is_x = arg == DNNL_ARG_SRC || arg == DNNL_ARG_DST ||
               arg == DNNL_ARG_DIFF_DST || arg == DNNL_ARG_DIFF_SRC;
    int is_out = arg == DNNL_ARG_DST || arg == DNNL_ARG_DIFF_SRC ||
                 arg == DNNL_ARG_DIFF_SCALE || arg == DNNL_ARG_DIFF_SHIFT ||
                 (!c->backward && g->training &&
                  (arg == DNNL_ARG_MEAN || arg == DNNL_ARG_VARIANCE));
    st = torc_dnn__entry_arg(e, arg, is_x ? &xm : &cm, is_out);
  }
  return st == TORC_OK ? torc_dnn__entry_finish(e) : st;
}

static int bn_run(const torc_kernel_args *a, const bgeo *g, int backward,
                  void *const *ptrs) {
  dnn_key key;
  memset(&key, 0, sizeof key);
  key.op = backward ? DNN_OP_BN_BWD : DNN_OP_BN_FWD;
  key.n_threads = torc_dnn__threads(a->n_threads);
  float eps = g->eps;
  int32_t eb;
  memcpy(&eb, &eps, sizeof eb);
  int64_t v[] = {g->N, g->C, g->S, g->training, eb, g->dt};
  memcpy(key.v, v, sizeof v);
  bn_ctx c = {g, backward};
  torc_dnn__lock();
  dnn_entry *e = torc_dnn__cache_get(&key, bn_build, &c);
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

static int bgeo_init(const torc_kernel_args *a, bgeo *g, const torc_ktensor *x,
                     const torc_ktensor *w, const torc_ktensor *b) {
  const torc_norm_kparams *p = a->params;
  if (p == NULL || a->params_size < sizeof *p)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel '%s' got no norm parameters",
                               a->op);
  /* f32 parameters of a bf16 x (mixed precision): another provider's */
  if (x->dtype == TORC_BF16 && (w->dtype != x->dtype || b->dtype != x->dtype))
    return TORC_KERNEL_DECLINED;
  if (x->ndim < 2 || !dnn_float_ok(x->dtype) || w->dtype != x->dtype ||
      b->dtype != x->dtype || dnn_numel(w, 0) != x->shape[1] ||
      dnn_numel(b, 0) != x->shape[1])
    return torc_dnn__set_error(TORC_ERR_SHAPE,
                               "onednn kernel '%s': x must be f32 (or bf16) "
                               "[N, C, *] with [C] weight and bias of its "
                               "dtype",
                               a->op);
  g->dt = x->dtype;
  g->N = x->shape[0], g->C = x->shape[1], g->S = dnn_numel(x, 2);
  g->training = p->training != 0;
  g->eps = (float)p->eps;
  return TORC_OK;
}

#define ld dnn_ld
#define st_ dnn_st

/* batch_norm in bf16, eval mode: x, y bf16; oneDNN takes the weight,
 * bias and statistics in f32, converted here. Training (batch statistics
 * in bf16) is ref's. */
static int batch_norm_bf16(const torc_kernel_args *a, const bgeo *g) {
  const torc_ktensor *rm = a->n_in == 5 ? &a->in[3] : NULL;
  const torc_ktensor *rv = a->n_in == 5 ? &a->in[4] : NULL;
  const torc_ktensor *mo = &a->out[1], *io = &a->out[2];
  const torc_norm_kparams *p = a->params;
  if (g->training || rm == NULL || g->N * g->S == 0)
    return TORC_KERNEL_DECLINED;
  int64_t C = g->C;
  for (int i = 0; i < 4; i++) {
    const torc_ktensor *t = i == 0 ? rm : i == 1 ? rv : i == 2 ? mo : io;
    if (t->dtype != TORC_F32 && t->dtype != TORC_F64 && t->dtype != TORC_BF16)
      return TORC_KERNEL_DECLINED;
  }
  float *buf = malloc(sizeof(float) * (size_t)C * 4);
  if (buf == NULL)
    return torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
  float *wf = buf, *bf = buf + C, *mean = buf + 2 * C, *var = buf + 3 * C;
  for (int64_t c = 0; c < C; c++) {
    wf[c] = (float)ld(&a->in[1], c), bf[c] = (float)ld(&a->in[2], c);
    mean[c] = (float)ld(rm, c), var[c] = (float)ld(rv, c);
  }
  void *ptrs[6] = {dnn_at(&a->in[0], 0), wf, bf, mean, var,
                   dnn_at(&a->out[0], 0)};
  int st = bn_run(a, g, 0, ptrs);
  for (int64_t c = 0; st == TORC_OK && c < C; c++) {
    st_(mo, c, mean[c]);
    st_(io, c, 1.0 / sqrt((double)var[c] + p->eps));
  }
  free(buf);
  return st;
}

/* in x [N, C, *], w, b [C] (+ running mean, var [C]); out y, mean,
 * invstd [C]. */
int torc_dnn__k_batch_norm(const torc_kernel_args *a) {
  if ((a->n_in != 3 && a->n_in != 5) || a->n_out != 3)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel 'batch_norm' got %d inputs and "
                               "%d outputs (expected 3 or 5, and 3)",
                               a->n_in, a->n_out);
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *b = &a->in[2];
  const torc_ktensor *rm = a->n_in == 5 ? &a->in[3] : NULL;
  const torc_ktensor *rv = a->n_in == 5 ? &a->in[4] : NULL;
  const torc_ktensor *y = &a->out[0], *mo = &a->out[1], *io = &a->out[2];
  const torc_norm_kparams *p = a->params;
  bgeo g;
  int st = bgeo_init(a, &g, x, w, b);
  if (st != TORC_OK)
    return st;
  if (g.dt == TORC_BF16)
    return batch_norm_bf16(a, &g);
  if ((rm && ((rm->dtype != TORC_F32 && rm->dtype != TORC_F64) ||
              (rv->dtype != TORC_F32 && rv->dtype != TORC_F64))) ||
      mo->dtype != TORC_F32 || io->dtype != TORC_F32 ||
      (!g.training && rm == NULL))
    return torc_dnn__set_error(TORC_ERR_DTYPE,
                               "onednn kernel 'batch_norm': the running "
                               "statistics must be f32 or f64 (and given in "
                               "eval mode), the saved ones f32");
  int64_t C = g.C, M = g.N * g.S;
  if (C == 0)
    return TORC_OK;
  float *var = malloc(sizeof(float) * (size_t)C * 2);
  if (var == NULL)
    return torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
  float *mean = var + C; /* eval mode: the running mean in f32 */
  float *mp = dnn_f32(mo, 0), *ip = dnn_f32(io, 0);
  if (M == 0) { /* nothing to normalise: the statistics only */
    for (int64_t c = 0; c < C; c++) {
      mp[c] = g.training ? 0.0f : (float)ld(rm, c);
      ip[c] = (float)(1.0 / sqrt((g.training ? 0.0 : ld(rv, c)) + p->eps));
    }
    free(var);
    return TORC_OK;
  }
  if (!g.training)
    for (int64_t c = 0; c < C; c++)
      mean[c] = (float)ld(rm, c), var[c] = (float)ld(rv, c);
  void *ptrs[6] = {dnn_f32(x, 0), dnn_f32(w, 0), dnn_f32(b, 0),
                   g.training ? mp : mean, var, dnn_f32(y, 0)};
  st = bn_run(a, &g, 0, ptrs);
  if (st == TORC_OK)
    for (int64_t c = 0; c < C; c++) {
      if (g.training) {
        if (rm) {
          double unb = M > 1 ? (double)var[c] * (double)M / (double)(M - 1)
                             : NAN;
          st_(rm, c, (1 - p->momentum) * ld(rm, c) + p->momentum * mp[c]);
          st_(rv, c, (1 - p->momentum) * ld(rv, c) + p->momentum * unb);
        }
      } else {
        mp[c] = mean[c];
      }
      ip[c] = (float)(1.0 / sqrt((double)var[c] + p->eps));
    }
  free(var);
  return st;
}

/* in gy, x, w, mean, invstd; out gx, gw, gb. */
int torc_dnn__k_batch_norm_backward(const torc_kernel_args *a) {
  if (a->n_in != 5 || a->n_out != 3)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel 'batch_norm_backward' got %d "
                               "inputs and %d outputs (expected 5 and 3)",
                               a->n_in, a->n_out);
  const torc_ktensor *gy = &a->in[0], *x = &a->in[1], *w = &a->in[2];
  const torc_ktensor *mt = &a->in[3], *it = &a->in[4];
  const torc_ktensor *gx = &a->out[0], *gw = &a->out[1], *gb = &a->out[2];
  bgeo g;
  int st = bgeo_init(a, &g, x, w, w);
  if (st != TORC_OK)
    return st;
  if (x->dtype != TORC_F32 || mt->dtype != TORC_F32 || it->dtype != TORC_F32 ||
      gy->dtype != TORC_F32 || gw->dtype != TORC_F32 || gb->dtype != TORC_F32)
    return torc_dnn__set_error(TORC_ERR_DTYPE,
                               "onednn kernel 'batch_norm_backward': every "
                               "operand must be f32");
  const torc_norm_kparams *p = a->params;
  int64_t C = g.C;
  if (C == 0)
    return TORC_OK;
  if (g.N * g.S == 0) {
    memset(dnn_f32(gw, 0), 0, sizeof(float) * (size_t)C);
    memset(dnn_f32(gb, 0), 0, sizeof(float) * (size_t)C);
    return TORC_OK;
  }
  float *var = malloc(sizeof(float) * (size_t)C);
  if (var == NULL)
    return torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
  const float *ip = dnn_f32(it, 0);
  for (int64_t c = 0; c < C; c++) {
    double inv = ip[c];
    var[c] = (float)(1.0 / (inv * inv) - p->eps);
  }
  void *ptrs[9] = {dnn_f32(gy, 0), dnn_f32(x, 0),  dnn_f32(w, 0),
                   dnn_f32(mt, 0), var,            dnn_f32(gx, 0),
                   dnn_f32(gw, 0), dnn_f32(gb, 0), dnn_f32(w, 0)};
  st = bn_run(a, &g, 1, ptrs);
  free(var);
  return st;
}
