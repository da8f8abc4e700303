/* core/ops_fused.c — the fused ops of torc/ops_fused.def: cross-entropy (one
 * kernel forward, one backward, recorded as one CrossEntropyBackward
 * node) and the in-place SGD and Adam steps (no autograd). Each checks its
 * inputs with messages naming the shapes and dtypes involved, lays the
 * operands out as its kernel contract says (nn.h, optim.h: contiguous,
 * logits flattened to [N, C, S]) and calls the kernel.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "optim_internal.h"
#include "torc/nn.h"
#include "torc/optim.h"

#define SHP(t, buf) torc__shape_str((t)->shape, (t)->ndim, buf, sizeof buf)

_Static_assert(sizeof(torc_cross_entropy_params) <=
                   sizeof(((torc__node *)0)->params),
               "cross_entropy params too large for a node");

/* Releases every tensor of ts (NULL entries are fine). */
static void release_all(torc_tensor **ts, int n) {
  for (int i = 0; i < n; i++) {
    torc_release(ts[i]);
    ts[i] = NULL;
  }
}

/* t contiguous and viewed as `shape` (a new reference), or NULL. */
static torc_tensor *flat_view(const torc_tensor *t, const int64_t *shape,
                              int ndim) {
  torc_tensor *c = torc__contiguous(t);
  if (c == NULL)
    return NULL;
  torc_tensor *v = torc__reshape(c, shape, ndim, 0);
  torc_release(c);
  return v;
}

/* ---- cross_entropy ---- */

/* Saved: x [N, C, S], target [N, S], max, logsum, total_weight, weight or
 * NULL; params: torc_cross_entropy_params. */
static torc_status cross_entropy_bw(torc__node *n, torc_tensor *const *gout,
                                    torc_tensor **gin) {
  if (!torc__needs_grad(n, 0))
    return TORC_OK;
  torc_tensor *x = n->saved[0], *t = n->saved[1], *w = n->saved[5];
  torc_cross_entropy_params p;
  memcpy(&p, n->params, sizeof p); /* node params may be misaligned */
  torc_tensor *tmp[3] = {0};
  torc_status st = TORC_OK;
  const torc_tensor *g = gout[0];
  if (g->dtype != x->dtype && (g = tmp[0] = torc__cast(g, x->dtype)) == NULL)
    return torc_last_status();
  /* gy has the loss's shape: [] or the target's; the kernel takes [N, S]. */
  int gnd = p.reduction == TORC_REDUCTION_NONE ? 2 : 0;
  if ((tmp[1] = flat_view(g, t->shape, gnd)) == NULL ||
      (tmp[2] = torc__empty(x->shape, 3, x->dtype, x->storage->device)) ==
          NULL) {
    release_all(tmp, 3);
    return torc_last_status();
  }
  const torc_tensor *in[7] = {tmp[1],      x,           t, n->saved[2],
                              n->saved[3], n->saved[4], w};
  st = torc__kernel_call(TORC__OP_cross_entropy_backward, x->dtype, in,
                         w ? 7 : 6, &tmp[2], 1, &p, sizeof p);
  if (st == TORC_OK &&
      (gin[0] = torc__reshape(tmp[2], n->in[0].shape, n->in[0].ndim, 0)) ==
          NULL)
    st = torc_last_status();
  release_all(tmp, 3);
  return st;
}

static torc_status ce_check(const char *fn, const torc_tensor *x,
                            const torc_tensor *t, const torc_tensor *w,
                            const torc_cross_entropy_params *p) {
  char bx[128], bt[128], bw[128];
  if (!(p->label_smoothing >= 0 && p->label_smoothing <= 1))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: label_smoothing %g must be in [0, 1]", fn,
                          p->label_smoothing);
  if (p->reduction < TORC_REDUCTION_MEAN || p->reduction > TORC_REDUCTION_NONE)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: reduction %d is none of TORC_REDUCTION_MEAN "
                          "(0), _SUM (1), _NONE (2)",
                          fn, (int)p->reduction);
  if (x->ndim < 1)
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: the logits must be [N, C], [N, C, d...] or "
                          "[C]; got a scalar",
                          fn);
  if (!torc_dtype_is_float(x->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: the logits %s are %s; they must be floating: "
                          "cast with torc_to_dtype(x, TORC_F32)",
                          fn, SHP(x, bx), torc_dtype_name(x->dtype));
  int cd = x->ndim == 1 ? 0 : 1, ok = t->ndim == x->ndim - 1;
  for (int i = 0, k = 0; ok && i < x->ndim; i++)
    if (i != cd)
      ok = x->shape[i] == t->shape[k++];
  if (!ok) {
    int64_t want[TORC_MAX_DIMS];
    for (int i = 0, k = 0; i < x->ndim; i++)
      if (i != cd)
        want[k++] = x->shape[i];
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: the target %s does not fit the logits %s; "
                          "class indices must have the logits' shape without "
                          "the class dim %d: %s",
                          fn, SHP(t, bt), SHP(x, bx), cd,
                          torc__shape_str(want, x->ndim - 1, bw, sizeof bw));
  }
  if (t->dtype != TORC_I64)
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: the target %s is %s; class indices must be "
                          "i64: convert with torc_to_dtype(target, TORC_I64)",
                          fn, SHP(t, bt), torc_dtype_name(t->dtype));
  const torc_tensor *all[3] = {x, t, w};
  torc_status st = torc__same_device(fn, all, w ? 3 : 2);
  if (st)
    return st;
  if (w) {
    if (w->dtype != x->dtype)
      return torc_set_error(TORC_ERR_DTYPE,
                            "%s: the class weight is %s but the logits are "
                            "%s; give them one dtype (torc_to_dtype)",
                            fn, torc_dtype_name(w->dtype),
                            torc_dtype_name(x->dtype));
    if (w->ndim != 1 || w->shape[0] != x->shape[cd])
      return torc_set_error(TORC_ERR_SHAPE,
                            "%s: the class weight %s must be [%lld], one "
                            "value per class of the logits %s (dim %d)",
                            fn, SHP(w, bw), (long long)x->shape[cd],
                            SHP(x, bx), cd);
    if (w->requires_grad && torc_get_grad_mode() == TORC_GRAD_ENABLED)
      return torc_set_error(TORC_ERR_AUTOGRAD,
                            "%s: the class weight requires grad, but the "
                            "loss has no gradient for it (as in PyTorch); "
                            "detach it (torc_detach)",
                            fn);
  }
  return TORC_OK;
}

static torc_tensor *cross_entropy(const torc_tensor *x, const torc_tensor *t,
                                  const torc_tensor *w,
                                  const torc_cross_entropy_params *pp) {
  const char *fn = "torc_cross_entropy";
  if (x == NULL || t == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  torc_cross_entropy_params p = TORC_CROSS_ENTROPY_DEFAULTS;
  if (pp)
    p = *pp;
  p.reserved = 0;
  if (ce_check(fn, x, t, w, &p))
    return NULL;
  int cd = x->ndim == 1 ? 0 : 1;
  int64_t N = cd ? x->shape[0] : 1, C = x->shape[cd];
  int64_t S = x->ndim > 2 ? torc__numel(x->shape + 2, x->ndim - 2) : 1;
  int64_t xs[3] = {N, C, S}, ts[2] = {N, S};
  int none = p.reduction == TORC_REDUCTION_NONE;
  torc_device dev = x->storage->device;
  torc_dtype sdt = x->dtype == TORC_F64 ? TORC_F64 : TORC_F32;
  /* ops: x3, t2, w contiguous; out: loss, max, logsum, total_weight */
  torc_tensor *ops[3] = {flat_view(x, xs, 3), flat_view(t, ts, 2),
                         w ? torc__contiguous(w) : NULL};
  torc_tensor *out[4] = {torc__empty(ts, none ? 2 : 0, x->dtype, dev),
                         torc__empty(ts, 2, sdt, dev),
                         torc__empty(ts, 2, sdt, dev),
                         torc__empty(NULL, 0, sdt, dev)};
  torc_tensor *res = NULL;
  if (ops[0] && ops[1] && (ops[2] || !w) && out[0] && out[1] && out[2] &&
      out[3] &&
      torc__kernel_call(TORC__OP_cross_entropy, x->dtype,
                        (const torc_tensor *const *)ops, w ? 3 : 2, out, 4,
                        &p, sizeof p) == TORC_OK)
    res = none ? torc__reshape(out[0], t->shape, t->ndim, 0)
               : torc_retain(out[0]);
  if (res && torc__should_record(&x, 1)) {
    torc__node *nd = torc__node_new("CrossEntropyBackward", "cross_entropy",
                                    cross_entropy_bw, &x, 1);
    torc_status st = nd ? TORC_OK : torc_last_status();
    if (nd)
      memcpy(nd->params, &p, sizeof p);
    const torc_tensor *save[6] = {ops[0], ops[1], out[1],
                                  out[2], out[3], ops[2]};
    for (int i = 0; i < 6 && st == TORC_OK; i++)
      st = torc__node_save(nd, save[i]);
    if (st == TORC_OK) {
      torc__node_attach(nd, &res, 1);
    } else {
      if (nd)
        torc__node_release(nd);
      torc_release(res);
      res = NULL;
    }
  }
  release_all(ops, 3);
  release_all(out, 4);
  return res;
}

torc_tensor *torc_cross_entropy(const torc_tensor *logits,
                                const torc_tensor *target,
                                const torc_tensor *weight,
                                const torc_cross_entropy_params *p) {
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &logits, &target, &weight);
  torc_tensor *r = cross_entropy(logits, target, weight, p);
  TORC__AC_END();
  return torc__ret(r);
}

/* ---- optimizer steps ---- */

/* Tensor `t` (named `what`) must match the parameter: its device and
 * shape, and its dtype when same_dtype (a gradient is cast instead). */
static torc_status step_operand(const char *fn, const char *what,
                                const torc_tensor *t,
                                const torc_tensor *param, int same_dtype) {
  char b1[128], b2[128];
  if (t == NULL)
    return torc__null_input(fn);
  const torc_tensor *pair[2] = {param, t};
  torc_status st = torc__same_device(fn, pair, 2);
  if (st)
    return st;
  if (t->ndim != param->ndim ||
      memcmp(t->shape, param->shape, sizeof(int64_t) * (size_t)t->ndim))
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: %s has shape %s but the parameter has %s; "
                          "they must be equal",
                          fn, what, SHP(t, b1), SHP(param, b2));
  if (same_dtype && t->dtype != param->dtype)
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: %s is %s but the parameter is %s; they must "
                          "have one dtype",
                          fn, what, torc_dtype_name(t->dtype),
                          torc_dtype_name(param->dtype));
  return TORC_OK;
}

/* Runs step kernel `op` on the n in-place tensors outs (checked) from
 * grad: grad cast to their dtype, everything contiguous (non-contiguous
 * targets through copies written back), versions bumped. */
static torc_status run_step(int op, const char *fn, torc_tensor **outs,
                            int n, const torc_tensor *grad, const void *kp,
                            size_t ks) {
  torc_tensor *param = outs[0];
  if (!torc_dtype_is_float(param->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: the parameter is %s; optimizers update "
                          "floating tensors",
                          fn, torc_dtype_name(param->dtype));
  if (torc__should_record((const torc_tensor *const *)outs, n))
    return torc_set_error(TORC_ERR_AUTOGRAD,
                          "%s: a tensor it updates requires grad, and grad "
                          "mode is on; an optimizer step is not tracked by "
                          "autograd: run it under no-grad "
                          "(torc_set_grad_mode(TORC_NO_GRAD))",
                          fn);
  for (int i = 0; i < n; i++)
    for (int d = 0; d < outs[i]->ndim; d++)
      if (outs[i]->strides[d] == 0 && outs[i]->shape[d] > 1)
        return torc_set_error(TORC_ERR_INVALID,
                              "%s: tensor %d it updates is an expanded view "
                              "(dim %d has stride 0); clone it first",
                              fn, i, d);
  if (torc__numel(param->shape, param->ndim) == 0)
    return TORC_OK;
  torc_tensor *tmp[5] = {0}, *k_out[4];
  torc_status st = TORC_OK;
  const torc_tensor *g = grad;
  if (g->dtype != param->dtype || !torc_is_contiguous(g))
    if ((g = tmp[4] = torc__cast(g, param->dtype)) == NULL)
      return torc_last_status();
  for (int i = 0; i < n && st == TORC_OK; i++) {
    k_out[i] = outs[i];
    if (!torc_is_contiguous(outs[i])) {
      if ((k_out[i] = tmp[i] = torc__contiguous(outs[i])) == NULL)
        st = torc_last_status();
    }
  }
  if (st == TORC_OK)
    st = torc__kernel_call(op, param->dtype, &g, 1, k_out, n, kp, ks);
  for (int i = 0; i < n && st == TORC_OK; i++)
    if (tmp[i])
      st = torc_copy_(outs[i], tmp[i]);
    else
      torc__bump_version(outs[i]);
  release_all(tmp, 5);
  return st;
}

torc_status torc_sgd_step_(torc_tensor *param, const torc_tensor *grad,
                           torc_tensor *momentum_buffer,
                           const torc_sgd_step_params *p) {
  const char *fn = "torc_sgd_step_";
  if (param == NULL || grad == NULL)
    return torc__null_input(fn);
  if (p == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "%s: the params are NULL; lr is required", fn);
  if (p->nesterov && (p->momentum <= 0 || p->dampening != 0))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: nesterov needs momentum > 0 and dampening 0; "
                          "got momentum %g, dampening %g",
                          fn, p->momentum, p->dampening);
  torc_status st = step_operand(fn, "the gradient", grad, param, 0);
  int n = 1;
  torc_tensor *outs[2] = {param, momentum_buffer};
  if (st == TORC_OK && p->momentum != 0) {
    if (momentum_buffer == NULL)
      return torc_set_error(TORC_ERR_NULL,
                            "%s: momentum is %g but momentum_buffer is NULL; "
                            "give a tensor of the parameter's shape (zeros)",
                            fn, p->momentum);
    st = step_operand(fn, "momentum_buffer", momentum_buffer, param, 1);
    n = 2;
  }
  if (st)
    return st;
  torc_sgd_step_params k = *p;
  k.reserved = 0;
  return run_step(TORC__OP_sgd_step_, fn, outs, n, grad, &k, sizeof k);
}

torc_adam_step_kparams torc__adam_kparams(const torc_adam_step_params *p) {
  torc_adam_step_kparams k;
  memset(&k, 0, sizeof k);
  k.p = *p;
  k.p.reserved = 0;
  double bc1 = 1 - pow(p->beta1, (double)p->step);
  double bc2 = 1 - pow(p->beta2, (double)p->step);
  k.step_size = p->lr / bc1;
  k.bias_correction2_sqrt = sqrt(bc2);
  return k;
}

torc_status torc_adam_step_(torc_tensor *param, const torc_tensor *grad,
                            torc_tensor *exp_avg, torc_tensor *exp_avg_sq,
                            torc_tensor *max_exp_avg_sq,
                            const torc_adam_step_params *p) {
  const char *fn = "torc_adam_step_";
  if (param == NULL || grad == NULL || exp_avg == NULL || exp_avg_sq == NULL)
    return torc__null_input(fn);
  if (p == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "%s: the params are NULL; lr, betas, eps and the "
                          "step are required",
                          fn);
  /* The other hyper-parameters are taken as given (as torch.optim's
   * functional code does; its constructors check them, here the optim
   * plugin's keys). These keep the bias corrections away from 0. */
  if (!(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1) ||
      p->step < 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: beta1 %g and beta2 %g must be in [0, 1) and "
                          "the step %lld >= 1",
                          fn, p->beta1, p->beta2, (long long)p->step);
  torc_status st = step_operand(fn, "the gradient", grad, param, 0);
  if (st == TORC_OK)
    st = step_operand(fn, "exp_avg", exp_avg, param, 1);
  if (st == TORC_OK)
    st = step_operand(fn, "exp_avg_sq", exp_avg_sq, param, 1);
  if (st == TORC_OK && p->amsgrad) {
    if (max_exp_avg_sq == NULL)
      return torc_set_error(TORC_ERR_NULL,
                            "%s: amsgrad is on but max_exp_avg_sq is NULL; "
                            "give a tensor of the parameter's shape (zeros)",
                            fn);
    st = step_operand(fn, "max_exp_avg_sq", max_exp_avg_sq, param, 1);
  }
  if (st)
    return st;
  torc_adam_step_kparams k = torc__adam_kparams(p);
  torc_tensor *outs[4] = {param, exp_avg, exp_avg_sq, max_exp_avg_sq};
  return run_step(TORC__OP_adam_step_, fn, outs, p->amsgrad ? 4 : 3, grad,
                  &k, sizeof k);
}
