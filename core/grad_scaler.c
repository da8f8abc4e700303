/* core/grad_scaler.c — the gradient scaler of torc/amp.h, as
 * torch.amp.GradScaler: the scale, the run of good steps and the count of
 * skipped steps live on the parameters' device, and every decision (skip
 * the step, back off, grow) is taken there, so a training step reads
 * nothing back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "optim_internal.h"
#include "torc/amp.h"
#include "torc/autograd.h"
#include "torc/foreach.h"

/* Where an optimizer is in the current step (PyTorch's OptState). */
typedef enum stage { STAGE_READY = 0, STAGE_UNSCALED, STAGE_STEPPED } stage;

/* One optimizer's record for the current step: cleared by update. */
typedef struct opt_record {
  const torc_optimizer *opt;
  stage stage;
  torc_tensor *found_inf; /* 0-d bool on the scaler's device, or NULL */
} opt_record;

struct torc_grad_scaler {
  torc_grad_scaler_params p;
  torc_device dev;
  /* 0-d tensors on dev, NULL when disabled: */
  torc_tensor *scale;    /* f32 */
  torc_tensor *tracker;  /* i64: good steps in a row since the last change */
  torc_tensor *skipped;  /* i64: optimizer steps skipped so far */
  torc_tensor *zero;     /* i64 0, constant */
  torc_tensor *interval; /* i64 growth_interval, constant */
  torc_tensor *inf;      /* f32 +inf, constant */
  opt_record *rec;       /* the optimizers seen since the last update */
  int n_rec, cap_rec;
};

/* Lists of gradients longer than this go to the list ops in pieces
 * (torc_foreach_norm takes at most 2048 tensors). */
#define LIST_CHUNK 1024

void torc_grad_scaler_params_default(torc_grad_scaler_params *p) {
  if (p == NULL)
    return;
  p->init_scale = 65536.0;
  p->growth_factor = 2.0;
  p->backoff_factor = 0.5;
  p->growth_interval = 2000;
  p->enabled = 1;
}

/* The settings' checks, shared by create and load_state_dict; `fn` and
 * `what` say who asks ("torc_grad_scaler_create", "" or " in the state
 * dict"). */
static torc_status check_params(const torc_grad_scaler_params *p,
                                const char *fn, const char *what) {
  if (!(p->init_scale > 0) || isinf(p->init_scale))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: init_scale = %g%s must be a finite number > 0; "
                          "use a power of two (PyTorch's default is 65536 = "
                          "2^16) so that scaling is exact",
                          fn, p->init_scale, what);
  if (!(p->growth_factor > 1) || isinf(p->growth_factor))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: growth_factor = %g%s must be a finite number "
                          "> 1 (the scale grows by it after growth_interval "
                          "good steps); PyTorch's default is 2",
                          fn, p->growth_factor, what);
  if (!(p->backoff_factor > 0 && p->backoff_factor < 1))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: backoff_factor = %g%s must be in (0, 1) (the "
                          "scale shrinks by it after a non-finite step); "
                          "PyTorch's default is 0.5",
                          fn, p->backoff_factor, what);
  if (p->growth_interval < 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: growth_interval = %lld%s must be >= 1 (good "
                          "steps in a row before the scale grows); PyTorch's "
                          "default is 2000",
                          fn, (long long)p->growth_interval, what);
  return TORC_OK;
}

/* Replaces *slot by t (a reference the caller gives up, or NULL). */
static void put(torc_tensor **slot, torc_tensor *t) {
  torc_release(*slot);
  *slot = t;
}

/* Drops the per-step records (what update and a load end). */
static void clear_records(torc_grad_scaler *gs) {
  for (int i = 0; i < gs->n_rec; i++)
    torc_release(gs->rec[i].found_inf);
  gs->n_rec = 0;
}

void torc_grad_scaler_free(torc_grad_scaler *gs) {
  if (gs == NULL)
    return;
  clear_records(gs);
  torc__free(gs->rec);
  torc_release(gs->scale);
  torc_release(gs->tracker);
  torc_release(gs->skipped);
  torc_release(gs->zero);
  torc_release(gs->interval);
  torc_release(gs->inf);
  torc__free(gs);
}

torc_grad_scaler *torc_grad_scaler_create(const torc_grad_scaler_params *p,
                                          torc_device dev) {
  const char *fn = "torc_grad_scaler_create";
  torc_grad_scaler_params d;
  torc_grad_scaler_params_default(&d);
  if (p == NULL)
    p = &d;
  if (check_params(p, fn, ""))
    return NULL;
  torc_grad_scaler *gs = torc__calloc(1, sizeof *gs);
  if (gs == NULL) {
    torc_set_error(TORC_ERR_OOM, "%s: out of memory", fn);
    return NULL;
  }
  gs->p = *p;
  gs->p.enabled = p->enabled != 0;
  gs->dev = dev;
  if (!gs->p.enabled) /* nothing on the device: every call passes through */
    return gs;
  /* Our own scope: the caller's would take the tensors at its end. */
  int scope = torc_scope_begin();
  torc_tensor *t[6] = {
      torc_full(NULL, 0, p->init_scale, TORC_F32, dev),
      torc_zeros(NULL, 0, TORC_I64, dev),
      torc_zeros(NULL, 0, TORC_I64, dev),
      torc_zeros(NULL, 0, TORC_I64, dev),
      torc_full(NULL, 0, (double)p->growth_interval, TORC_I64, dev),
      torc_full(NULL, 0, INFINITY, TORC_F32, dev),
  };
  int ok = 1;
  for (int i = 0; i < 6; i++)
    ok = ok && t[i] != NULL;
  if (ok) {
    gs->scale = torc_retain(t[0]);
    gs->tracker = torc_retain(t[1]);
    gs->skipped = torc_retain(t[2]);
    gs->zero = torc_retain(t[3]);
    gs->interval = torc_retain(t[4]);
    gs->inf = torc_retain(t[5]);
  }
  torc_scope_end(scope);
  if (!ok) {
    char b[64];
    torc_status st = torc_last_status() ? torc_last_status() : TORC_ERR_OOM;
    torc_set_error(st, "%s: cannot make the scale on %s: %s", fn,
                   torc_device_str(dev, b, sizeof b), torc_last_error());
    torc_grad_scaler_free(gs);
    return NULL;
  }
  return gs;
}

torc_tensor *torc_grad_scaler_scale(torc_grad_scaler *gs,
                                    const torc_tensor *loss) {
  const char *fn = "torc_grad_scaler_scale";
  if (gs == NULL || loss == NULL) {
    if (gs == NULL)
      torc_set_error(TORC_ERR_NULL, "%s: the scaler is NULL", fn);
    else
      torc__null_input(fn);
    return NULL;
  }
  if (!gs->p.enabled)
    return torc__ret(torc_retain((torc_tensor *)loss));
  if (!torc_dtype_is_float(torc_dtype_of(loss))) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the loss is %s; scale a floating loss (the value "
                   "backward starts from)",
                   fn, torc_dtype_name(torc_dtype_of(loss)));
    return NULL;
  }
  if (!torc_device_eq(torc_device_of(loss), gs->dev)) {
    char a[64], b[64];
    torc_set_error(TORC_ERR_DEVICE,
                   "%s: the loss is on %s but the scaler's scale on %s; "
                   "create the scaler on the device of the model",
                   fn, torc_device_str(torc_device_of(loss), a, sizeof a),
                   torc_device_str(gs->dev, b, sizeof b));
    return NULL;
  }
  /* A tensor product, so autograd carries the scale into every gradient;
   * the types promote as torch's (a 0-d bf16 loss gives f32). */
  return torc_mul(loss, gs->scale);
}

/* The record of opt for this step, added when it has none: NULL on OOM. */
static opt_record *record_of(torc_grad_scaler *gs, const torc_optimizer *opt) {
  for (int i = 0; i < gs->n_rec; i++)
    if (gs->rec[i].opt == opt)
      return &gs->rec[i];
  if (gs->n_rec == gs->cap_rec) {
    int cap = gs->cap_rec ? 2 * gs->cap_rec : 4;
    opt_record *r = torc__realloc(gs->rec, (size_t)cap * sizeof *r);
    if (r == NULL) {
      torc_set_error(TORC_ERR_OOM, "torc_grad_scaler: out of memory");
      return NULL;
    }
    gs->rec = r;
    gs->cap_rec = cap;
  }
  opt_record *r = &gs->rec[gs->n_rec++];
  r->opt = opt;
  r->stage = STAGE_READY;
  r->found_inf = NULL;
  return r;
}

/* "parameter 2 ('fc.weight')" or "parameter 2". */
static const char *pdesc(const torc__oparam *p, int index, char *buf,
                         size_t size) {
  if (p->name)
    snprintf(buf, size, "parameter %d ('%s')", index, p->name);
  else
    snprintf(buf, size, "parameter %d", index);
  return buf;
}

/* The gradients of opt's parameters (those that have one with elements),
 * into a new array *out of *n (torc__free it), after checking each is a
 * floating tensor on the scaler's device. */
static torc_status collect_grads(const torc_grad_scaler *gs,
                                 const torc_optimizer *opt, const char *fn,
                                 torc_tensor ***out, int *n) {
  *out = NULL;
  *n = 0;
  int total = 0;
  for (int g = 0; g < opt->n_groups; g++)
    total += opt->g[g].n;
  torc_tensor **gr = torc__calloc((size_t)total + 1, sizeof *gr);
  if (gr == NULL)
    return torc_set_error(TORC_ERR_OOM, "%s: out of memory", fn);
  int m = 0, index = 0;
  for (int g = 0; g < opt->n_groups; g++)
    for (int i = 0; i < opt->g[g].n; i++, index++) {
      const torc__oparam *p = &opt->g[g].p[i];
      torc_tensor *grad = torc_grad_of(p->t);
      if (grad == NULL || torc_numel(grad) == 0)
        continue;
      char w[160], a[64], b[64];
      if (!torc_dtype_is_float(torc_dtype_of(grad))) {
        torc__free(gr);
        return torc_set_error(TORC_ERR_DTYPE,
                              "%s: the gradient of %s is %s; only floating "
                              "gradients can be unscaled",
                              fn, pdesc(p, index, w, sizeof w),
                              torc_dtype_name(torc_dtype_of(grad)));
      }
      if (!torc_device_eq(torc_device_of(grad), gs->dev)) {
        torc__free(gr);
        return torc_set_error(
            TORC_ERR_DEVICE,
            "%s: the gradient of %s is on %s but the scaler on %s; create "
            "the scaler on the parameters' device",
            fn, pdesc(p, index, w, sizeof w),
            torc_device_str(torc_device_of(grad), a, sizeof a),
            torc_device_str(gs->dev, b, sizeof b));
      }
      gr[m++] = grad;
    }
  *out = gr;
  *n = m;
  return TORC_OK;
}

/* found |= any(!isfinite(xs)) over the n tensors (one dtype): their
 * inf-norms, then the largest; NaN propagates through both, so the
 * comparison with +inf is false exactly when some element is not finite.
 * Tensors in the caller's scope. */
static torc_tensor *or_nonfinite(const torc_grad_scaler *gs, torc_tensor *found,
                                 torc_tensor *const *xs, int n) {
  torc_tensor *norms =
      torc_foreach_norm((const torc_tensor *const *)xs, n, INFINITY);
  torc_tensor *m = torc_amax(norms, NULL, 0, 0);
  torc_tensor *bad = torc_logical_not(torc_lt(m, gs->inf));
  return torc_logical_or(found, bad);
}

/* Unscales opt's gradients and sets r's found_inf (unscale_ without the
 * stage checks). */
static torc_status unscale(torc_grad_scaler *gs, torc_optimizer *opt,
                           opt_record *r, const char *fn) {
  torc_tensor **gr;
  int n;
  torc_status st = collect_grads(gs, opt, fn, &gr, &n);
  if (st)
    return st;
  int scope = torc_scope_begin();
  torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
  /* inv_scale in f64 rounded to f32, as PyTorch's
   * scale.double().reciprocal().float(). */
  torc_tensor *inv = torc_to_dtype(
      torc_reciprocal(torc_to_dtype(gs->scale, TORC_F64)), TORC_F32);
  torc_tensor *found = torc_zeros(NULL, 0, TORC_BOOL, gs->dev);
  static const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16};
  torc_tensor **sub = torc__calloc((size_t)n + 1, sizeof *sub);
  if (sub == NULL)
    st = torc_set_error(TORC_ERR_OOM, "%s: out of memory", fn);
  if (st == TORC_OK && (inv == NULL || found == NULL))
    st = torc_last_status();
  for (int d = 0; d < 4 && st == TORC_OK; d++) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if (torc_dtype_of(gr[i]) == dts[d])
        sub[k++] = gr[i];
    /* Finiteness first, of the gradients as backward left them (as
     * PyTorch's _amp_foreach_non_finite_check_and_unscale_). */
    for (int at = 0; at < k && found; at += LIST_CHUNK)
      found = or_nonfinite(gs, found, sub + at,
                           k - at < LIST_CHUNK ? k - at : LIST_CHUNK);
    if (found == NULL) {
      st = torc_last_status();
      break;
    }
    if (k == 0)
      continue;
    if (dts[d] == TORC_F32 || dts[d] == TORC_F64) {
      torc_tensor *f = torc_to_dtype(inv, dts[d]); /* exact */
      for (int at = 0; at < k && st == TORC_OK; at += LIST_CHUNK)
        st = f ? torc_foreach_mul_(sub + at,
                                   k - at < LIST_CHUNK ? k - at : LIST_CHUNK, f)
               : torc_last_status();
    } else {
      /* Half gradients are multiplied in f32 and rounded once (PyTorch's
       * opmath): inv_scale itself may be below their range. */
      for (int i = 0; i < k && st == TORC_OK; i++) {
        torc_tensor *y = torc_mul(torc_to_dtype(sub[i], TORC_F32), inv);
        st = y ? torc_copy_(sub[i], y) : torc_last_status();
      }
    }
  }
  if (st == TORC_OK) {
    put(&r->found_inf, torc_retain(found));
    r->stage = STAGE_UNSCALED;
  }
  torc_set_grad_mode(mode);
  torc_scope_end(scope);
  torc__free(sub);
  torc__free(gr);
  return st;
}

torc_status torc_grad_scaler_unscale_(torc_grad_scaler *gs,
                                      torc_optimizer *opt) {
  const char *fn = "torc_grad_scaler_unscale_";
  if (gs == NULL || opt == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "%s: the scaler and the optimizer are required", fn);
  if (!gs->p.enabled)
    return TORC_OK;
  opt_record *r = record_of(gs, opt);
  if (r == NULL)
    return torc_last_status();
  if (r->stage == STAGE_UNSCALED)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: unscale_ has already been called on this "
                          "optimizer since the last update; call it at most "
                          "once per step (torc_grad_scaler_update ends the "
                          "step)",
                          fn);
  if (r->stage == STAGE_STEPPED)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: unscale_ is being called after step; call "
                          "torc_grad_scaler_update to end the step first",
                          fn);
  return unscale(gs, opt, r, fn);
}

torc_status torc_grad_scaler_step(torc_grad_scaler *gs, torc_optimizer *opt) {
  return torc_grad_scaler_step_if(gs, opt, NULL);
}

torc_status torc_grad_scaler_step_if(torc_grad_scaler *gs, torc_optimizer *opt,
                                     const torc_tensor *also) {
  const char *fn = also ? "torc_grad_scaler_step_if" : "torc_grad_scaler_step";
  if (gs == NULL || opt == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "%s: the scaler and the optimizer are required", fn);
  if (also && (torc_dtype_of(also) != TORC_BOOL || torc_numel(also) != 1))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the flag is %s with %lld elements; give a "
                          "one-element bool tensor (a comparison's result)",
                          fn, torc_dtype_name(torc_dtype_of(also)),
                          (long long)torc_numel(also));
  if (!gs->p.enabled)
    return torc_optimizer_step_if(opt, also);
  opt_record *r = record_of(gs, opt);
  if (r == NULL)
    return torc_last_status();
  if (r->stage == STAGE_STEPPED)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: step has already been called on this "
                          "optimizer since the last update; call "
                          "torc_grad_scaler_update once per step",
                          fn);
  torc_status st = TORC_OK;
  if (r->stage == STAGE_READY && (st = unscale(gs, opt, r, fn)))
    return st;
  int scope = torc_scope_begin();
  torc_tensor *ok = torc_logical_not(r->found_inf);
  if (ok && also)
    ok = torc_logical_and(ok, also);
  st = ok ? torc_optimizer_step_if(opt, ok) : torc_last_status();
  torc_tensor *skipped =
      st ? NULL : torc_add(gs->skipped, torc_to_dtype(r->found_inf, TORC_I64));
  if (st == TORC_OK && skipped == NULL)
    st = torc_last_status();
  if (st == TORC_OK) {
    put(&gs->skipped, torc_retain(skipped));
    r->stage = STAGE_STEPPED;
  }
  torc_scope_end(scope);
  return st;
}

torc_status torc_grad_scaler_update(torc_grad_scaler *gs) {
  const char *fn = "torc_grad_scaler_update";
  if (gs == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the scaler is NULL", fn);
  if (!gs->p.enabled)
    return TORC_OK;
  int scope = torc_scope_begin();
  torc_tensor *found = NULL;
  int n_found = 0;
  for (int i = 0; i < gs->n_rec; i++) {
    if (gs->rec[i].found_inf == NULL)
      continue;
    found = n_found++ ? torc_logical_or(found, gs->rec[i].found_inf)
                      : gs->rec[i].found_inf;
  }
  if (n_found == 0) {
    torc_scope_end(scope);
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: no inf checks were recorded prior to update; "
                          "call torc_grad_scaler_step (or unscale_) with the "
                          "optimizer before torc_grad_scaler_update",
                          fn);
  }
  /* PyTorch's _amp_update_scale_: after a non-finite step scale *=
   * backoff and the run restarts; else the run grows by one, and when it
   * reaches growth_interval scale *= growth (kept only if finite) and
   * the run restarts. The factors are applied in f64, as its kernel. */
  torc_tensor *s64 = torc_to_dtype(gs->scale, TORC_F64);
  torc_tensor *backed =
      torc_to_dtype(torc_mul_scalar(s64, gs->p.backoff_factor), TORC_F32);
  torc_tensor *grown =
      torc_to_dtype(torc_mul_scalar(s64, gs->p.growth_factor), TORC_F32);
  torc_tensor *run = torc_add_scalar(gs->tracker, 1);
  torc_tensor *full = torc_eq(run, gs->interval);
  torc_tensor *grow = torc_logical_and(full, torc_lt(grown, gs->inf));
  torc_tensor *scale =
      torc_where(found, backed, torc_where(grow, grown, gs->scale));
  torc_tensor *tracker =
      torc_where(found, gs->zero, torc_where(full, gs->zero, run));
  torc_status st = TORC_OK;
  if (scale == NULL || tracker == NULL)
    st = torc_last_status();
  else {
    put(&gs->scale, torc_retain(scale));
    put(&gs->tracker, torc_retain(tracker));
    clear_records(gs);
  }
  torc_scope_end(scope);
  return st;
}

double torc_grad_scaler_get_scale(torc_grad_scaler *gs) {
  if (gs == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_grad_scaler_get_scale: the scaler is "
                                  "NULL");
    return NAN;
  }
  if (!gs->p.enabled)
    return 1.0;
  double v;
  return torc_item(gs->scale, &v) ? NAN : v;
}

int64_t torc_grad_scaler_skipped(torc_grad_scaler *gs) {
  if (gs == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_grad_scaler_skipped: the scaler is "
                                  "NULL");
    return -1;
  }
  if (!gs->p.enabled)
    return 0;
  int64_t v;
  return torc_item_i64(gs->skipped, &v) ? -1 : v;
}

/* ---- state dicts ---- */

/* PREFIX + name into buf. */
static void key_of(char *buf, size_t size, const char *prefix,
                   const char *name) {
  snprintf(buf, size, "%s%s", prefix ? prefix : "", name);
}

static const char *const tensor_names[3] = {"scale", "growth_tracker",
                                            "skipped"};

torc_status torc_grad_scaler_state_dict(const torc_grad_scaler *gs,
                                        const char *prefix,
                                        torc_state_dict *sd) {
  const char *fn = "torc_grad_scaler_state_dict";
  if (gs == NULL || sd == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "%s: the scaler and the state dict are required", fn);
  char key[512], val[64];
  /* Tensor names first: a collision must add nothing. */
  for (int i = 0; gs->p.enabled && i < 3; i++) {
    key_of(key, sizeof key, prefix, tensor_names[i]);
    if (torc_state_dict_get(sd, key))
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: the state dict already has '%s'; use "
                            "another prefix",
                            fn, key);
  }
  torc_status st = TORC_OK;
  if (gs->p.enabled) {
    /* Copies: the saved values are those of now, not of later steps. */
    int scope = torc_scope_begin();
    torc_tensor *t[3] = {torc_clone(gs->scale), torc_clone(gs->tracker),
                         torc_clone(gs->skipped)};
    if (!t[0] || !t[1] || !t[2])
      st = torc_last_status();
    for (int i = 0; i < 3 && st == TORC_OK; i++) {
      key_of(key, sizeof key, prefix, tensor_names[i]);
      st = torc_state_dict_set(sd, key, t[i]);
    }
    torc_scope_end(scope);
  }
#define META(name, ...)                                                        \
  do {                                                                         \
    snprintf(val, sizeof val, __VA_ARGS__);                                    \
    key_of(key, sizeof key, prefix, name);                                     \
    if (st == TORC_OK)                                                         \
      st = torc_state_dict_set_meta(sd, key, val);                             \
  } while (0)
  META("enabled", "%d", gs->p.enabled);
  META("init_scale", "%.17g", gs->p.init_scale);
  META("growth_factor", "%.17g", gs->p.growth_factor);
  META("backoff_factor", "%.17g", gs->p.backoff_factor);
  META("growth_interval", "%lld", (long long)gs->p.growth_interval);
#undef META
  return st;
}

/* Reads the floating metadata PREFIX+name into *out (left as it is when
 * absent); an error naming the key and value when it is not a number. */
static torc_status meta_double(const torc_state_dict *sd, const char *prefix,
                               const char *name, double *out) {
  char key[512];
  key_of(key, sizeof key, prefix, name);
  const char *v = torc_state_dict_meta(sd, key);
  if (v == NULL)
    return TORC_OK;
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end != '\0')
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_grad_scaler_load_state_dict: '%s' = '%s' in "
                          "the state dict is not a number",
                          key, v);
  *out = d;
  return TORC_OK;
}

torc_status torc_grad_scaler_load_state_dict(torc_grad_scaler *gs,
                                             const torc_state_dict *sd,
                                             const char *prefix) {
  const char *fn = "torc_grad_scaler_load_state_dict";
  if (gs == NULL || sd == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "%s: the scaler and the state dict are required", fn);
  if (!gs->p.enabled) /* as PyTorch: a disabled scaler loads nothing */
    return TORC_OK;
  const char *pre = prefix ? prefix : "";
  char key[512];
  key_of(key, sizeof key, pre, "enabled");
  const char *en = torc_state_dict_meta(sd, key);
  if (en && strcmp(en, "0") == 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the state dict under '%s' was saved from a "
                          "disabled scaler and holds no scale; start this "
                          "one afresh instead of loading",
                          fn, pre);
  /* The settings, checked as create checks them. */
  torc_grad_scaler_params p = gs->p;
  torc_status st = meta_double(sd, pre, "init_scale", &p.init_scale);
  if (st == TORC_OK)
    st = meta_double(sd, pre, "growth_factor", &p.growth_factor);
  if (st == TORC_OK)
    st = meta_double(sd, pre, "backoff_factor", &p.backoff_factor);
  key_of(key, sizeof key, pre, "growth_interval");
  if (st == TORC_OK && torc_state_dict_meta(sd, key))
    st = torc_state_dict_get_i64(sd, key, &p.growth_interval);
  if (st == TORC_OK)
    st = check_params(&p, fn, " in the state dict");
  if (st)
    return st;
  /* The tensors: present, one element, of our dtypes. */
  static const torc_dtype want[3] = {TORC_F32, TORC_I64, TORC_I64};
  torc_tensor *src[3];
  for (int i = 0; i < 3; i++) {
    key_of(key, sizeof key, pre, tensor_names[i]);
    src[i] = torc_state_dict_get(sd, key);
    if (src[i] == NULL)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: the state dict has no '%s'; save it with "
                            "torc_grad_scaler_state_dict and the same prefix",
                            fn, key);
    if (torc_numel(src[i]) != 1 || torc_dtype_of(src[i]) != want[i]) {
      char s[96];
      return torc_set_error(
          TORC_ERR_INVALID,
          "%s: '%s' is %s %s in the state dict, expected one element of %s; "
          "was it saved by torc_grad_scaler_state_dict?",
          fn, key, torc_dtype_name(torc_dtype_of(src[i])),
          torc__shape_str(torc_shape(src[i]), torc_ndim(src[i]), s, sizeof s),
          torc_dtype_name(want[i]));
    }
  }
  /* Copies of our own on our device, made before anything changes. */
  int scope = torc_scope_begin();
  torc_tensor *t[4];
  for (int i = 0; i < 3; i++)
    t[i] = torc_clone(torc_reshape(torc_to(src[i], gs->dev), NULL, 0));
  t[3] = p.growth_interval == gs->p.growth_interval
             ? gs->interval
             : torc_full(NULL, 0, (double)p.growth_interval, TORC_I64, gs->dev);
  for (int i = 0; i < 4 && st == TORC_OK; i++)
    if (t[i] == NULL)
      st = torc_last_status() ? torc_last_status() : TORC_ERR_OOM;
  if (st == TORC_OK) {
    /* Retained before the old ones go: t[3] may be gs->interval itself. */
    for (int i = 0; i < 4; i++)
      torc_retain(t[i]);
    put(&gs->scale, t[0]);
    put(&gs->tracker, t[1]);
    put(&gs->skipped, t[2]);
    put(&gs->interval, t[3]);
  }
  if (st == TORC_OK) {
    gs->p = p;
    clear_records(gs);
  }
  torc_scope_end(scope);
  return st;
}
