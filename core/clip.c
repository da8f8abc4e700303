/* core/clip.c — gradient clipping (torc/optim.h): by the joint p-norm of
 * the gradients (clip_grad_norm_, with its non-finite handling) and by
 * value (clip_grad_value_), over tensors or a module's parameters; the
 * _t forms keep the norm on the device and read nothing back.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "optim_internal.h"
#include "torc/foreach.h"

/* One warning per process for a non-finite norm that is not an error. */
static atomic_int warned_nonfinite;

/* "parameter 2 ('fc.weight')" or "parameter 2". */
static const char *pname(const char *const *names, int i, char *buf,
                         size_t size) {
  if (names)
    snprintf(buf, size, "parameter %d ('%s')", i, names[i]);
  else
    snprintf(buf, size, "parameter %d", i);
  return buf;
}

static torc_status clip_norm(torc_tensor *const *params,
                             const char *const *names, int n, double max_norm,
                             double p, int error_if_nonfinite,
                             double *total_norm) {
  if (n < 0 || (n > 0 && params == NULL))
    return torc_set_error(TORC_ERR_NULL, "torc_clip_grad_norm: the parameter "
                                         "array is NULL");
  if (!(p == 1 || p == 2 || (isinf(p) && p > 0)))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_clip_grad_norm: norm order p = %g is not "
                          "supported; use 1, 2 or INFINITY",
                          p);
  if (!(max_norm >= 0) || isinf(max_norm))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_clip_grad_norm: max_norm = %g must be a "
                          "finite number >= 0",
                          max_norm);
  /* Per-tensor norms, then the norm of those (as PyTorch: torch.norm of
   * the stacked per-gradient norms), accumulated in double. */
  double total = 0;
  int bad = -1;
  double bad_norm = 0;
  torc_status st = TORC_OK;
  int scope = torc_scope_begin();
  torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
  for (int i = 0; i < n && st == TORC_OK; i++) {
    if (params[i] == NULL) {
      st = torc__null_input("torc_clip_grad_norm");
      break;
    }
    torc_tensor *g = torc_grad_of(params[i]);
    if (g == NULL || torc_numel(g) == 0)
      continue;
    double v = 0;
    torc_tensor *nt = torc_norm(g, p, NULL, 0, 0);
    st = nt ? torc_item(nt, &v) : torc_last_status();
    if (st)
      break;
    if (!isfinite(v) && bad < 0)
      bad = i, bad_norm = v;
    if (isinf(p))
      total = isnan(v) || isnan(total) ? NAN : fmax(total, v);
    else if (p == 1)
      total += v;
    else
      total += v * v;
  }
  if (p == 2)
    total = sqrt(total);
  if (st == TORC_OK && total_norm)
    *total_norm = total;
  if (st == TORC_OK && !isfinite(total)) {
    char w[200];
    if (error_if_nonfinite) {
      if (bad >= 0)
        st = torc_set_error(TORC_ERR_INVALID,
                            "torc_clip_grad_norm: the gradient of %s is not "
                            "finite (its %g-norm is %g), so the total norm "
                            "cannot be clipped; find where it comes from "
                            "(torc_set_anomaly_mode), or pass "
                            "error_if_nonfinite = 0 to leave the gradients "
                            "as they are",
                            pname(names, bad, w, sizeof w), p, bad_norm);
      else
        st = torc_set_error(TORC_ERR_INVALID,
                            "torc_clip_grad_norm: the total %g-norm of the "
                            "gradients is %g (too large to represent); "
                            "lower the loss scale or the learning rate",
                            p, total);
    } else if (atomic_exchange(&warned_nonfinite, 1) == 0) {
      torc_logf(TORC_LOG_WARN,
                "torc_clip_grad_norm: the total %g-norm of the gradients is "
                "%g (first non-finite: %s); the gradients were left "
                "unclipped (this warning is shown once)",
                p, total,
                bad >= 0 ? pname(names, bad, w, sizeof w) : "the total");
    }
  } else if (st == TORC_OK) {
    double coef = max_norm / (total + 1e-6);
    for (int i = 0; i < n && st == TORC_OK && coef < 1.0; i++) {
      torc_tensor *g = torc_grad_of(params[i]);
      if (g)
        st = torc_mul_scalar_(g, coef);
    }
  }
  torc_set_grad_mode(mode);
  torc_scope_end(scope);
  return st;
}

torc_status torc_clip_grad_norm(torc_tensor *const *params, int n,
                                double max_norm, double p,
                                int error_if_nonfinite, double *total_norm) {
  return clip_norm(params, NULL, n, max_norm, p, error_if_nonfinite,
                   total_norm);
}

/* The joint p-norm and the clip, on the device: the per-gradient norms
 * gathered in f64 in the order the host's double sum takes, the clip
 * coefficient min(1, max_norm / (norm + 1e-6)) computed there (1 where
 * the norm is not finite: the gradients are left as they are), and every
 * gradient scaled by it. Nothing is read back. */
static torc_status clip_norm_t(torc_tensor *const *params, int n,
                               double max_norm, double p,
                               torc_tensor **total_norm) {
  if (total_norm)
    *total_norm = NULL;
  if (n < 0 || (n > 0 && params == NULL))
    return torc_set_error(TORC_ERR_NULL, "torc_clip_grad_norm_t: the "
                                         "parameter array is NULL");
  if (!(p == 1 || p == 2 || (isinf(p) && p > 0)))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_clip_grad_norm_t: norm order p = %g is not "
                          "supported; use 1, 2 or INFINITY",
                          p);
  if (!(max_norm >= 0) || isinf(max_norm))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_clip_grad_norm_t: max_norm = %g must be a "
                          "finite number >= 0",
                          max_norm);
  torc_status st = TORC_OK;
  int scope = torc_scope_begin();
  torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
  /* The gradients to clip, as one list. */
  torc_tensor **gs = torc__calloc((size_t)n + 1, sizeof *gs);
  int m = 0;
  if (gs == NULL)
    st = torc_set_error(TORC_ERR_OOM, "torc_clip_grad_norm_t: out of memory");
  for (int i = 0; i < n && st == TORC_OK; i++) {
    if (params[i] == NULL) {
      st = torc__null_input("torc_clip_grad_norm_t");
      break;
    }
    torc_tensor *g = torc_grad_of(params[i]);
    if (g && torc_numel(g) > 0)
      gs[m++] = g;
  }
  /* Their norms in one list op, then the total in f64: a running sum (in
   * order, as the host's double sum) or, for inf, a running maximum. */
  torc_tensor *total = NULL;
  if (st == TORC_OK && m == 0)
    total = torc_zeros(NULL, 0, TORC_F64, TORC_CPU);
  else if (st == TORC_OK) {
    torc_tensor *v = torc_to_dtype(
        torc_foreach_norm((const torc_tensor *const *)gs, m, p), TORC_F64);
    if (v && p == 2)
      v = torc_mul(v, v);
    if (v && isinf(p)) {
      total = torc_select(v, 0, 0);
      for (int i = 1; i < m && total; i++)
        total = torc_maximum(total, torc_select(v, 0, i));
    } else if (v) {
      total = torc_select(torc_cumsum(v, 0), 0, m - 1);
    }
    if (total && p == 2)
      total = torc_sqrt(total);
  }
  if (st == TORC_OK && total == NULL)
    st = torc_last_status();
  if (st == TORC_OK && m > 0) {
    torc_device dev = torc_device_of(total);
    torc_tensor *inf = torc_full(NULL, 0, INFINITY, TORC_F64, dev);
    torc_tensor *one = torc_ones(NULL, 0, TORC_F64, dev);
    torc_tensor *fin = inf ? torc_lt(torc_abs(total), inf) : NULL;
    torc_tensor *mx = torc_full(NULL, 0, max_norm, TORC_F64, dev);
    torc_tensor *den = torc_add_scalar(total, 1e-6);
    torc_tensor *coef = mx && den ? torc_div(mx, den) : NULL;
    coef = coef && one ? torc_minimum(coef, one) : NULL;
    coef = coef && fin ? torc_where(fin, coef, one) : NULL;
    coef = coef ? torc_to_dtype(coef, torc_dtype_of(gs[0])) : NULL;
    st = coef ? torc_foreach_mul_(gs, m, coef) : torc_last_status();
  }
  torc__free(gs);
  torc_set_grad_mode(mode);
  if (st == TORC_OK && total_norm)
    *total_norm = torc_scope_keep(total);
  torc_scope_end(scope);
  return st;
}

torc_status torc_clip_grad_norm_t(torc_tensor *const *params, int n,
                                  double max_norm, double p,
                                  torc_tensor **total_norm) {
  return clip_norm_t(params, n, max_norm, p, total_norm);
}

torc_status torc_clip_grad_value(torc_tensor *const *params, int n,
                                 double clip) {
  if (n < 0 || (n > 0 && params == NULL))
    return torc_set_error(TORC_ERR_NULL, "torc_clip_grad_value: the "
                                         "parameter array is NULL");
  if (!(clip >= 0))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_clip_grad_value: clip = %g must be >= 0 "
                          "(gradients are clamped to [-clip, clip])",
                          clip);
  torc_status st = TORC_OK;
  torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
  for (int i = 0; i < n && st == TORC_OK; i++) {
    if (params[i] == NULL) {
      st = torc__null_input("torc_clip_grad_value");
      break;
    }
    torc_tensor *g = torc_grad_of(params[i]);
    if (g && torc_numel(g) > 0)
      st = torc_clamp_(g, 1, -clip, 1, clip);
  }
  torc_set_grad_mode(mode);
  return st;
}

/* The module's parameters as arrays (names for messages). */
static int module_params(torc_module *m, const char *fn,
                         torc_named_tensor **all, torc_tensor ***ps,
                         const char ***names) {
  if (m == NULL) {
    torc_set_error(TORC_ERR_NULL, "%s: the module is NULL", fn);
    return -1;
  }
  int n = torc_module_named_parameters(m, all);
  if (n < 0)
    return -1;
  *ps = torc__calloc((size_t)n + 1, sizeof **ps);
  *names = torc__calloc((size_t)n + 1, sizeof **names);
  if (*ps == NULL || *names == NULL) {
    torc__free(*ps), torc__free(*names);
    torc_named_tensors_free(*all, n);
    torc_set_error(TORC_ERR_OOM, "%s: out of memory", fn);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    (*ps)[i] = (*all)[i].tensor;
    (*names)[i] = (*all)[i].name;
  }
  return n;
}

torc_status torc_module_clip_grad_norm(torc_module *m, double max_norm,
                                       double p, int error_if_nonfinite,
                                       double *total_norm) {
  torc_named_tensor *all;
  torc_tensor **ps;
  const char **names;
  int n = module_params(m, "torc_module_clip_grad_norm", &all, &ps, &names);
  if (n < 0)
    return torc_last_status();
  torc_status st =
      clip_norm(ps, names, n, max_norm, p, error_if_nonfinite, total_norm);
  torc__free(ps), torc__free(names);
  torc_named_tensors_free(all, n);
  return st;
}

torc_status torc_module_clip_grad_norm_t(torc_module *m, double max_norm,
                                         double p, torc_tensor **total_norm) {
  torc_named_tensor *all;
  torc_tensor **ps;
  const char **names;
  if (total_norm)
    *total_norm = NULL;
  int n = module_params(m, "torc_module_clip_grad_norm_t", &all, &ps, &names);
  if (n < 0)
    return torc_last_status();
  torc_status st = clip_norm_t(ps, n, max_norm, p, total_norm);
  torc__free(ps), torc__free(names);
  torc_named_tensors_free(all, n);
  return st;
}

torc_status torc_module_clip_grad_value(torc_module *m, double clip) {
  torc_named_tensor *all;
  torc_tensor **ps;
  const char **names;
  int n = module_params(m, "torc_module_clip_grad_value", &all, &ps, &names);
  if (n < 0)
    return torc_last_status();
  torc_status st = torc_clip_grad_value(ps, n, clip);
  torc__free(ps), torc__free(names);
  torc_named_tensors_free(all, n);
  return st;
}
