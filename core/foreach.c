/* core/foreach.c — the multi-tensor ops (torc/foreach.h): add_, mul_,
 * norm and the SGD and Adam steps over lists, one kernel call per chunk
 * of a list, or one tensor at a time where the list kernel does not fit
 * (the host, mixed dtypes, strided tensors, autograd). */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "optim_internal.h"
#include "torc/foreach.h"
#include "torc/indexing.h"

/* Whether the list goes through the list kernel: off the host, every
 * tensor given, contiguous, non-empty, of the parameter's shape, one
 * floating dtype and one device, and no write autograd would refuse. The
 * single-tensor ops handle (and report) everything else. */
static int listable(torc_tensor *const *params, const torc_tensor *const *grads,
                    torc_tensor *const *const *states, int n_states, int n,
                    const torc_tensor *ok) {
  if (n < 1 || params == NULL || grads == NULL || params[0] == NULL)
    return 0;
  const torc_tensor *p0 = params[0];
  torc_device dev = p0->storage->device;
  if (torc_device_is_host(dev) || !torc_dtype_is_float(p0->dtype) ||
      (n < 2 && ok == NULL))
    return 0;
  if (ok &&
      (ok->dtype != TORC_BOOL || !torc_device_eq(ok->storage->device, dev) ||
       torc__numel(ok->shape, ok->ndim) != 1 || !torc_is_contiguous(ok)))
    return 0;
  for (int i = 0; i < n; i++) {
    const torc_tensor *p = params[i], *g = grads[i];
    if (p == NULL || g == NULL || p->dtype != p0->dtype ||
        g->dtype != p0->dtype || !torc_device_eq(p->storage->device, dev) ||
        !torc_device_eq(g->storage->device, dev) || !torc_is_contiguous(p) ||
        !torc_is_contiguous(g) || torc__numel(p->shape, p->ndim) == 0 ||
        g->ndim != p->ndim ||
        memcmp(g->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim))
      return 0;
    const torc_tensor *pair[1] = {p};
    if (torc__should_record(pair, 1))
      return 0;
    for (int j = 0; j < n_states; j++) {
      const torc_tensor *s = states[j] ? states[j][i] : NULL;
      if (s == NULL || s->dtype != p->dtype ||
          !torc_device_eq(s->storage->device, dev) || !torc_is_contiguous(s) ||
          s->ndim != p->ndim ||
          memcmp(s->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim))
        return 0;
      const torc_tensor *one[1] = {s};
      if (torc__should_record(one, 1))
        return 0;
    }
  }
  return 1;
}

/* The flag `ok` (NULL: none) where the list kernel cannot take it: read
 * (free on the host; elsewhere a blocking read, the price of a list the
 * kernel does not fit). *skip 1 when it holds false. */
static torc_status flag_on_host(const torc_tensor *ok, int *skip) {
  *skip = 0;
  if (ok == NULL)
    return TORC_OK;
  double v = 0;
  torc_status st = torc_item(ok, &v);
  *skip = st == TORC_OK && v == 0;
  return st;
}

/* Runs list op `op` over params[0..n) in chunks: in the chunk's grads,
 * out its params then each state list's chunk; `ok` (unless NULL) the
 * last input, read by the kernel. */
static torc_status run_lists(int op, torc_tensor *const *params,
                             const torc_tensor *const *grads,
                             torc_tensor *const *const *states, int n_states,
                             int n, const torc_tensor *ok, const void *kp,
                             size_t ks) {
  int per = 1 + n_states;
  int chunk = TORC__KCALL_MAX_OUT / per;
  if (chunk > TORC__KCALL_MAX_IN - 1) /* room for the flag */
    chunk = TORC__KCALL_MAX_IN - 1;
  const torc_tensor *in[TORC__KCALL_MAX_IN];
  torc_tensor *out[TORC__KCALL_MAX_OUT];
  torc_status st = TORC_OK;
  for (int at = 0; at < n && st == TORC_OK; at += chunk) {
    int c = n - at < chunk ? n - at : chunk;
    for (int k = 0; k < c; k++) {
      in[k] = grads[at + k];
      out[k] = params[at + k];
      for (int j = 0; j < n_states; j++)
        out[(j + 1) * c + k] = states[j][at + k];
    }
    if (ok)
      in[c] = ok;
    st = torc__kernel_call(op, params[at]->dtype, in, c + (ok != NULL), out,
                           c * per, kp, ks);
    for (int k = 0; k < c * per && st == TORC_OK; k++)
      torc__bump_version(out[k]);
  }
  return st;
}

torc_status torc_foreach_sgd_step_(torc_tensor *const *params,
                                   const torc_tensor *const *grads,
                                   torc_tensor *const *bufs, int n,
                                   const torc_sgd_step_params *p,
                                   const torc_tensor *ok) {
  if (n < 0 || (n > 0 && (params == NULL || grads == NULL)))
    return torc_set_error(TORC_ERR_NULL, "torc_foreach_sgd_step_: the "
                                         "parameter or gradient list is NULL");
  if (p == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_foreach_sgd_step_: the params "
                                         "are NULL; lr is required");
  int mom = p->momentum != 0;
  torc_tensor *const *states[1] = {bufs};
  if ((!mom || bufs) &&
      !(p->nesterov && (p->momentum <= 0 || p->dampening != 0)) &&
      listable(params, grads, states, mom, n, ok)) {
    torc_sgd_step_params k = *p;
    k.reserved = 0;
    return run_lists(TORC__OP_foreach_sgd_step_, params, grads, states, mom, n,
                     ok, &k, sizeof k);
  }
  int skip = 0;
  torc_status st0 = flag_on_host(ok, &skip);
  if (st0 || skip)
    return st0;
  for (int i = 0; i < n; i++) {
    torc_status st =
        torc_sgd_step_(params[i], grads[i], bufs ? bufs[i] : NULL, p);
    if (st) {
      char why[1024];
      snprintf(why, sizeof why, "%s", torc_last_error());
      return torc_set_error(st, "torc_foreach_sgd_step_: parameter %d: %s", i,
                            why);
    }
  }
  return TORC_OK;
}

torc_status torc_foreach_adam_step_(torc_tensor *const *params,
                                    const torc_tensor *const *grads,
                                    torc_tensor *const *exp_avg,
                                    torc_tensor *const *exp_avg_sq,
                                    torc_tensor *const *max_exp_avg_sq, int n,
                                    const torc_adam_step_params *p,
                                    const torc_tensor *ok) {
  if (n < 0 || (n > 0 && (params == NULL || grads == NULL)))
    return torc_set_error(TORC_ERR_NULL, "torc_foreach_adam_step_: the "
                                         "parameter or gradient list is NULL");
  if (p == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "torc_foreach_adam_step_: the params are NULL; lr, "
                          "betas, eps and the step are required");
  torc_tensor *const *states[3] = {exp_avg, exp_avg_sq, max_exp_avg_sq};
  int ns = p->amsgrad ? 3 : 2;
  if (exp_avg && exp_avg_sq && (!p->amsgrad || max_exp_avg_sq) &&
      p->beta1 >= 0 && p->beta1 < 1 && p->beta2 >= 0 && p->beta2 < 1 &&
      p->step >= 1 && listable(params, grads, states, ns, n, ok)) {
    torc_adam_step_kparams k = torc__adam_kparams(p);
    return run_lists(TORC__OP_foreach_adam_step_, params, grads, states, ns, n,
                     ok, &k, sizeof k);
  }
  int skip = 0;
  torc_status st0 = flag_on_host(ok, &skip);
  if (st0 || skip)
    return st0;
  for (int i = 0; i < n; i++) {
    torc_status st =
        torc_adam_step_(params[i], grads[i], exp_avg ? exp_avg[i] : NULL,
                        exp_avg_sq ? exp_avg_sq[i] : NULL,
                        max_exp_avg_sq ? max_exp_avg_sq[i] : NULL, p);
    if (st) {
      char why[1024];
      snprintf(why, sizeof why, "%s", torc_last_error());
      return torc_set_error(st, "torc_foreach_adam_step_: parameter %d: %s", i,
                            why);
    }
  }
  return TORC_OK;
}

/* ---- elementwise and norm over lists ---- */

/* Whether xs (and ys, unless NULL, shaped alike) go through a list kernel:
 * off the host, every tensor given and contiguous, one floating dtype and
 * one device, and nothing autograd would track. */
static int list_ok(const torc_tensor *const *xs, const torc_tensor *const *ys,
                   int n) {
  if (n < 1 || xs == NULL || xs[0] == NULL)
    return 0;
  const torc_tensor *x0 = xs[0];
  torc_device dev = x0->storage->device;
  if (torc_device_is_host(dev) || !torc_dtype_is_float(x0->dtype))
    return 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < (ys ? 2 : 1); j++) {
      const torc_tensor *t = j ? ys[i] : xs[i];
      if (t == NULL || t->dtype != x0->dtype ||
          !torc_device_eq(t->storage->device, dev) || !torc_is_contiguous(t))
        return 0;
      if (j &&
          (t->ndim != xs[i]->ndim ||
           memcmp(t->shape, xs[i]->shape, sizeof(int64_t) * (size_t)t->ndim)))
        return 0;
      const torc_tensor *one[1] = {t};
      if (torc__should_record(one, 1))
        return 0;
    }
  return 1;
}

torc_status torc_foreach_add_(torc_tensor *const *xs,
                              const torc_tensor *const *ys, int n) {
  if (n < 0 || (n > 0 && (xs == NULL || ys == NULL)))
    return torc_set_error(TORC_ERR_NULL, "torc_foreach_add_: a list is NULL");
  if (!list_ok((const torc_tensor *const *)xs, ys, n)) {
    for (int i = 0; i < n; i++) {
      torc_status st = torc_add_(xs[i], ys[i]);
      if (st)
        return st;
    }
    return TORC_OK;
  }
  torc_status st = TORC_OK;
  for (int at = 0; at < n && st == TORC_OK; at += TORC__KCALL_MAX_IN) {
    int c = n - at < TORC__KCALL_MAX_IN ? n - at : TORC__KCALL_MAX_IN;
    st = torc__kernel_call(TORC__OP_foreach_add_, xs[at]->dtype, ys + at, c,
                           xs + at, c, NULL, 0);
    for (int k = 0; k < c && st == TORC_OK; k++)
      torc__bump_version(xs[at + k]);
  }
  return st;
}

torc_status torc_foreach_mul_(torc_tensor *const *xs, int n,
                              const torc_tensor *s) {
  if (n < 0 || (n > 0 && xs == NULL) || s == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "torc_foreach_mul_: the list or the factor is NULL");
  const torc_tensor *one[1] = {s};
  if (!list_ok((const torc_tensor *const *)xs, NULL, n) ||
      s->dtype != xs[0]->dtype || torc__numel(s->shape, s->ndim) != 1 ||
      !torc_device_eq(s->storage->device, xs[0]->storage->device) ||
      torc__should_record(one, 1)) {
    for (int i = 0; i < n; i++) {
      torc_status st = torc_mul_(xs[i], s);
      if (st)
        return st;
    }
    return TORC_OK;
  }
  torc_status st = TORC_OK;
  for (int at = 0; at < n && st == TORC_OK; at += TORC__KCALL_MAX_OUT) {
    int c = n - at < TORC__KCALL_MAX_OUT ? n - at : TORC__KCALL_MAX_OUT;
    st = torc__kernel_call(TORC__OP_foreach_mul_, xs[at]->dtype, &s, 1, xs + at,
                           c, NULL, 0);
    for (int k = 0; k < c && st == TORC_OK; k++)
      torc__bump_version(xs[at + k]);
  }
  return st;
}

torc_status torc_foreach_mul_scalar_(torc_tensor *const *xs, int n, double c) {
  if (n < 0 || (n > 0 && xs == NULL))
    return torc_set_error(TORC_ERR_NULL, "torc_foreach_mul_scalar_: the list "
                                         "is NULL");
  if (!list_ok((const torc_tensor *const *)xs, NULL, n)) {
    for (int i = 0; i < n; i++) {
      torc_status st = torc_mul_scalar_(xs[i], c);
      if (st)
        return st;
    }
    return TORC_OK;
  }
  /* The scalar in the tensors' dtype, as torc_mul_scalar_ makes it. */
  torc_tensor *s = torc__scalar(c, xs[0]->dtype, xs[0]->storage->device);
  torc_status st = s ? torc_foreach_mul_(xs, n, s) : torc_last_status();
  torc_release(s);
  return st;
}

static torc_tensor *foreach_norm(const torc_tensor *const *xs, int n,
                                 double p) {
  const char *fn = "torc_foreach_norm";
  if (n < 1 || xs == NULL) {
    torc_set_error(TORC_ERR_INVALID, "%s: expected a non-empty list, got %d%s",
                   fn, n, xs ? "" : " (NULL)");
    return NULL;
  }
  if (!(p == 1 || p == 2 || (isinf(p) && p > 0))) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: norm order p = %g is not supported; use 1, 2 or "
                   "INFINITY",
                   fn, p);
    return NULL;
  }
  int scope = torc_scope_begin();
  torc_tensor *out = NULL;
  if (!list_ok(xs, NULL, n)) {
    torc_tensor **ns = torc__calloc((size_t)n, sizeof *ns);
    int i = 0;
    for (; ns && i < n && (ns[i] = torc_norm(xs[i], p, NULL, 0, 0)); i++)
      ;
    if (ns == NULL)
      torc_set_error(TORC_ERR_OOM, "%s: out of memory", fn);
    else if (i == n) /* ours, not the scope's */
      out = torc_retain(torc_stack((const torc_tensor *const *)ns, n, 0));
    torc__free(ns);
  } else {
    /* One [c] result per kernel call, joined when there are several. */
    int chunks = (n + TORC__KCALL_MAX_IN - 1) / TORC__KCALL_MAX_IN;
    torc_tensor *part[64];
    torc_norm_params np = {0, 0, p};
    int k = 0, ok = chunks <= 64;
    for (int at = 0; ok && at < n; at += TORC__KCALL_MAX_IN, k++) {
      int c = n - at < TORC__KCALL_MAX_IN ? n - at : TORC__KCALL_MAX_IN;
      int64_t shape[1] = {c};
      part[k] = torc__empty(shape, 1, xs[0]->dtype, xs[0]->storage->device);
      ok = part[k] != NULL &&
           torc__kernel_call(TORC__OP_foreach_norm, xs[0]->dtype, xs + at, c,
                             &part[k], 1, &np, sizeof np) == TORC_OK;
    }
    if (!ok && chunks > 64)
      torc_set_error(TORC_ERR_INVALID,
                     "%s: a list of %d tensors is too long "
                     "(at most %d)",
                     fn, n, 64 * TORC__KCALL_MAX_IN);
    if (ok) /* ours, not the scope's */
      out = torc_retain(
          k == 1 ? part[0] : torc_cat((const torc_tensor *const *)part, k, 0));
    for (int i = 0; i < k; i++)
      torc_release(part[i]);
  }
  torc_scope_end(scope);
  return out;
}

torc_tensor *torc_foreach_norm(const torc_tensor *const *xs, int n, double p) {
  return torc__ret(foreach_norm(xs, n, p));
}
