/* core/optimizer_foreach.c — torc_optimizer_step's multi-tensor path: a
 * group whose type describes its update as a fused SGD or Adam step is
 * updated with one list step (torc/foreach.h), not one call per parameter.
 */
#include <stddef.h>
#include <stdio.h>

#include "internal.h"
#include "optim_internal.h"
#include "torc/foreach.h"

/* The type's fused hook, when its struct has the slot. */
static int (*fused_fn(const torc_optimizer_type *t))(void *, double, int64_t,
                                                     torc_optimizer_fused *) {
  if (t->struct_size < offsetof(torc_optimizer_type, fused) + sizeof t->fused)
    return NULL;
  return t->fused;
}

torc_status torc__optimizer_step_fused(torc_optimizer *opt, torc__ogroup *G,
                                       int g, const torc_tensor *ok,
                                       int *done) {
  *done = 0;
  int (*fn)(void *, double, int64_t, torc_optimizer_fused *) =
      fused_fn(opt->type);
  if (fn == NULL || G->n < 2)
    return TORC_OK;
  /* The parameters to update (frozen ones and those without a gradient
   * are skipped, as the per-parameter loop does), all at one step. */
  int n = 0;
  int64_t step = -1;
  for (int i = 0; i < G->n; i++) {
    torc__oparam *p = &G->p[i];
    if (!torc_requires_grad(p->t) || torc_grad_of(p->t) == NULL)
      continue;
    if (step >= 0 && p->step != step)
      return TORC_OK;
    step = p->step;
    n++;
  }
  torc_optimizer_fused f = {0};
  if (n < 2 || fn(G->hyper, G->lr, step + 1, &f) != 1 ||
      (f.kind != TORC_OPTIMIZER_FUSED_SGD &&
       f.kind != TORC_OPTIMIZER_FUSED_ADAM) ||
      opt->n_state < (f.kind == TORC_OPTIMIZER_FUSED_SGD ? 1 : 3))
    return TORC_OK;
  torc_tensor **ps = torc__calloc((size_t)n * 5, sizeof *ps);
  if (ps == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory for an optimizer "
                                        "step");
  torc_tensor **gs = ps + n, **s0 = ps + 2 * n, **s1 = ps + 3 * n,
              **s2 = ps + 4 * n;
  torc_status st = TORC_OK;
  int k = 0;
  for (int i = 0; i < G->n && st == TORC_OK; i++) {
    torc__oparam *p = &G->p[i];
    torc_tensor *grad = torc_grad_of(p->t);
    if (!torc_requires_grad(p->t) || grad == NULL)
      continue;
    if ((st = torc__optimizer_ensure_state(opt, G->hyper, p)))
      break;
    ps[k] = p->t;
    gs[k] = grad;
    s0[k] = p->state ? p->state[0] : NULL;
    s1[k] = p->state && opt->n_state > 1 ? p->state[1] : NULL;
    s2[k] = p->state && opt->n_state > 2 ? p->state[2] : NULL;
    k++;
  }
  if (st == TORC_OK) {
    int scope = torc_scope_begin();
    torc_clear_error();
    const torc_tensor *const *cg = (const torc_tensor *const *)gs;
    if (f.kind == TORC_OPTIMIZER_FUSED_SGD)
      st = torc_foreach_sgd_step_(ps, cg, f.sgd.momentum != 0 ? s0 : NULL, n,
                                  &f.sgd, ok);
    else
      st = torc_foreach_adam_step_(ps, cg, s0, s1, f.adam.amsgrad ? s2 : NULL,
                                   n, &f.adam, ok);
    torc_scope_end(scope);
    if (st != TORC_OK) {
      const char *e = torc_last_error();
      char why[1024];
      snprintf(why, sizeof why, "%s",
               e[0] ? e : "the update failed without saying why");
      torc_set_error(st, "%s (in optimizer '%s', group %d)", why,
                     opt->type->name, g);
    }
  }
  if (st == TORC_OK) {
    for (int i = 0; i < G->n; i++) {
      torc__oparam *p = &G->p[i];
      if (torc_requires_grad(p->t) && torc_grad_of(p->t) != NULL)
        p->step++;
    }
    *done = 1;
  }
  torc__free(ps);
  return st;
}

torc_status torc__put_back_unless(torc_tensor *t, const torc_tensor *was,
                                  const torc_tensor *ok) {
  int scope = torc_scope_begin();
  torc_tensor *keep = torc_where(ok, t, was);
  torc_status st = keep ? torc_copy_(t, keep) : torc_last_status();
  torc_scope_end(scope);
  return st;
}

torc_status torc_optimizer_step_if(torc_optimizer *opt, const torc_tensor *ok) {
  if (opt == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_optimizer_step_if: the "
                                         "optimizer is NULL");
  if (ok == NULL)
    return torc_optimizer_step(opt);
  if (torc_dtype_of(ok) != TORC_BOOL || torc_numel(ok) != 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_optimizer_step_if: the flag must be a 0-d "
                          "(or one-element) bool tensor; give the result of "
                          "a comparison, e.g. torc_lt(torc_abs(loss), inf)");
  /* On the host the flag is read: free there, and nothing to undo. */
  if (torc_device_is_host(torc_device_of(ok))) {
    double v = 0;
    torc_status st = torc_item(ok, &v);
    return st ? st : v != 0 ? torc_optimizer_step(opt) : TORC_OK;
  }
  return torc__optimizer_step(opt, ok);
}
