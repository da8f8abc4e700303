/* core/foreach.c — the multi-tensor optimizer steps (torc/foreach.h):
 * torc_sgd_step_ and torc_adam_step_ over a list of parameters in one
 * kernel call per chunk of the list, or one parameter at a time where
 * the list kernel does not fit (the host, mixed dtypes, strided tensors).
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "torc/foreach.h"

/* Whether the list goes through the list kernel: off the host, every
 * tensor given, contiguous, non-empty, of the parameter's shape, one
 * floating dtype and one device, and no write autograd would refuse. The
 * single-tensor ops handle (and report) everything else. */
static int listable(torc_tensor *const *params,
                    const torc_tensor *const *grads,
                    torc_tensor *const *const *states, int n_states, int n,
                    const torc_tensor *ok) {
  if (n < 1 || params == NULL || grads == NULL || params[0] == NULL)
    return 0;
  const torc_tensor *p0 = params[0];
  torc_device dev = p0->storage->device;
  if (torc_device_is_host(dev) || !torc_dtype_is_float(p0->dtype) ||
      (n < 2 && ok == NULL))
    return 0;
  if (ok && (ok->dtype != TORC_BOOL || !torc_device_eq(ok->storage->device, dev) ||
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
  if ((!mom || bufs) && !(p->nesterov && (p->momentum <= 0 ||
                                          p->dampening != 0)) &&
      listable(params, grads, states, mom, n, ok)) {
    torc_sgd_step_params k = *p;
    k.reserved = 0;
    return run_lists(TORC__OP_foreach_sgd_step_, params, grads, states, mom,
                     n, ok, &k, sizeof k);
  }
  int skip = 0;
  torc_status st0 = flag_on_host(ok, &skip);
  if (st0 || skip)
    return st0;
  for (int i = 0; i < n; i++) {
    torc_status st = torc_sgd_step_(params[i], grads[i],
                                    bufs ? bufs[i] : NULL, p);
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
    /* As torc_adam_step_ computes them (torch.optim.Adam's single-tensor
     * code). */
    torc_adam_step_kparams k;
    memset(&k, 0, sizeof k);
    k.p = *p;
    k.p.reserved = 0;
    double bc1 = 1 - pow(p->beta1, (double)p->step);
    double bc2 = 1 - pow(p->beta2, (double)p->step);
    k.step_size = p->lr / bc1;
    k.bias_correction2_sqrt = sqrt(bc2);
    return run_lists(TORC__OP_foreach_adam_step_, params, grads, states, ns,
                     n, ok, &k, sizeof k);
  }
  int skip = 0;
  torc_status st0 = flag_on_host(ok, &skip);
  if (st0 || skip)
    return st0;
  for (int i = 0; i < n; i++) {
    torc_status st = torc_adam_step_(
        params[i], grads[i], exp_avg ? exp_avg[i] : NULL,
        exp_avg_sq ? exp_avg_sq[i] : NULL,
        max_exp_avg_sq ? max_exp_avg_sq[i] : NULL, p);
    if (st) {
      char why[1024];
      snprintf(why, sizeof why, "%s", torc_last_error());
      return torc_set_error(st, "torc_foreach_adam_step_: parameter %d: %s",
                            i, why);
    }
  }
  return TORC_OK;
}
