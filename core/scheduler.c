/* core/scheduler.c — learning-rate schedulers (torc/optim.h): the
 * scheduler object over an optimizer's groups, the generic linear warm-up
 * every type gets (PyTorch's SequentialLR of a LinearLR and the schedule),
 * and its state dict.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "optim_internal.h"

/* ---- the registry ---- */

torc_status torc__scheduler_type_register_owned(struct torc__plugin *owner,
                                                const torc_scheduler_type *t) {
  if (t == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_scheduler_type_register: the "
                                         "type is NULL");
  const char *name = t->name ? t->name : "(null)";
  if (t->struct_size < offsetof(torc_scheduler_type, user))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_scheduler_type_register: scheduler type '%s' "
                          "has struct_size %zu; set it to "
                          "sizeof(torc_scheduler_type)",
                          name, t->struct_size);
  if (t->lr == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_scheduler_type_register: scheduler type '%s' "
                          "has no lr function; set it",
                          name);
  if (t->name && strcmp(t->name, "none") == 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_scheduler_type_register: 'none' is reserved "
                          "([scheduler] type = none means no scheduler); "
                          "pick another name");
  return torc__oreg_add(&torc__scheduler_reg, owner, t, t->name);
}

torc_status torc_scheduler_type_register(const torc_scheduler_type *type) {
  return torc__scheduler_type_register_owned(NULL, type);
}
const torc_scheduler_type *torc_scheduler_type_find(const char *name) {
  return torc__oreg_find(&torc__scheduler_reg, name);
}
int torc_scheduler_type_count(void) {
  return torc__oreg_count(&torc__scheduler_reg);
}
const torc_scheduler_type *torc_scheduler_type_at(int i) {
  return torc__oreg_at(&torc__scheduler_reg, i);
}

/* ---- the scheduler ---- */

/* The keys the core adds to every type. */
static const torc_module_key warmup_keys[] = {
    {"warmup",
     "steps of linear warm-up before the schedule starts (0 = "
     "none)",
     "0"},
    {"warmup_start_factor",
     "the warm-up starts at this fraction of each group's lr (0 < f <= 1)",
     "0.1"},
    {NULL, NULL, NULL}};

struct torc_scheduler {
  const torc_scheduler_type *type;
  void *state;
  torc_optimizer *opt;
  int n_groups;
  double *initial; /* each group's lr when the scheduler was built */
  int64_t t;
  int64_t warmup;
  double start_factor;
  /* The optimizer's hyper-parameter the schedule cycles ("momentum" or
   * "betas", whose first number is beta1), or NULL. */
  const char *mom_key;
};

/* The type's momentum function, or NULL (types built before it existed
 * have a shorter struct). */
static double (*type_momentum(const torc_scheduler_type *t))(void *, int,
                                                             int64_t) {
  if (t->struct_size < offsetof(torc_scheduler_type, momentum_betas) +
                           sizeof t->momentum_betas)
    return NULL;
  return t->momentum;
}

/* Sets group g's momentum (or beta1) to the schedule's value at step t. */
static torc_status set_momentum(torc_scheduler *s, int g, int64_t t) {
  if (s->mom_key == NULL)
    return TORC_OK;
  torc_clear_error();
  double m = s->type->momentum(s->state, g, t);
  if (torc_last_status() != TORC_OK)
    return torc_last_status();
  if (isnan(m))
    return TORC_OK;
  char text[256];
  if (strcmp(s->mom_key, "betas") == 0) {
    const char *old = torc_optimizer_get_hyper(s->opt, g, "betas");
    const char *rest = old ? strchr(old, ',') : NULL;
    if (rest == NULL)
      return torc_set_error(TORC_ERR_INVALID,
                            "scheduler '%s': group %d's betas '%s' have no "
                            "second number; give betas=beta1,beta2",
                            s->type->name, g, old ? old : "");
    snprintf(text, sizeof text, "%.17g%s", m, rest);
  } else {
    snprintf(text, sizeof text, "%.17g", m);
  }
  torc_status st = torc_optimizer_set_hyper(s->opt, g, s->mom_key, text);
  if (st != TORC_OK)
    torc_set_error(st,
                   "%s (scheduler '%s' cycles the %s from base_momentum to "
                   "max_momentum; choose values the optimizer accepts, or "
                   "set cycle_momentum = no)",
                   torc_last_error(), s->type->name,
                   strcmp(s->mom_key, "betas") == 0 ? "betas' beta1"
                                                    : "momentum");
  return st;
}

/* Picks the hyper-parameter a momentum-cycling schedule drives, as
 * PyTorch does: "momentum" when the optimizer has it, else (OneCycleLR)
 * beta1 of "betas"; neither is an error naming the fix. */
static torc_status pick_momentum(torc_scheduler *s) {
  const torc_scheduler_type *t = s->type;
  if (type_momentum(t) == NULL)
    return TORC_OK;
  torc_clear_error();
  double m0 = t->momentum(s->state, 0, 0);
  if (torc_last_status() != TORC_OK)
    return torc_last_status();
  if (isnan(m0)) /* cycle_momentum = no */
    return TORC_OK;
  if (torc_optimizer_has_hyper(s->opt, "momentum"))
    s->mom_key = "momentum";
  else if (t->momentum_betas && torc_optimizer_has_hyper(s->opt, "betas"))
    s->mom_key = "betas";
  else
    return torc_set_error(
        TORC_ERR_INVALID,
        "%s: cycle_momentum = yes needs an optimizer with momentum%s, but "
        "optimizer '%s' has none; set cycle_momentum = no, or use %s",
        t->name, t->momentum_betas ? " or betas" : "",
        torc_optimizer_name(s->opt),
        t->momentum_betas ? "sgd, rmsprop, adam or adamw" : "sgd or rmsprop");
  return TORC_OK;
}

static torc_status grow_groups(torc_scheduler *s) {
  int n = torc_optimizer_group_count(s->opt);
  if (n <= s->n_groups)
    return TORC_OK;
  double *p = torc__realloc(s->initial, (size_t)n * sizeof *p);
  if (p == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory in scheduler '%s'",
                          s->type->name);
  s->initial = p;
  /* Groups added after the scheduler was built start from their lr then. */
  for (int g = s->n_groups; g < n; g++)
    s->initial[g] = torc_optimizer_get_lr(s->opt, g);
  s->n_groups = n;
  return TORC_OK;
}

/* The schedule's lr for group g at its step 0 into *out (left as it is
 * when the type gives nothing usable). */
static torc_status schedule_at_zero(torc_scheduler *s, int g, double *out) {
  torc_clear_error();
  double lr = s->type->lr(s->state, g, s->initial[g], s->initial[g], 0, NAN);
  if (torc_last_status() != TORC_OK)
    return torc_last_status();
  if (lr >= 0 && !isinf(lr))
    *out = lr;
  return TORC_OK;
}

torc_scheduler *torc_scheduler_create(const char *type, const char *const *keys,
                                      const char *const *values, int n,
                                      torc_optimizer *opt) {
  if (type == NULL || opt == NULL || n < 0 ||
      (n > 0 && (keys == NULL || values == NULL))) {
    torc_set_error(TORC_ERR_NULL, "torc_scheduler_create: the type name and "
                                  "the optimizer (and the key and value "
                                  "arrays when n > 0) are required");
    return NULL;
  }
  const torc_scheduler_type *t =
      torc__oreg_lookup(&torc__scheduler_reg, type, "scheduler");
  if (t == NULL)
    return NULL;
  int nt = torc__keys_count(t->keys);
  const char **vv = torc__calloc((size_t)nt + 3, sizeof *vv);
  const char **kk = torc__calloc((size_t)nt + 1, sizeof *kk);
  torc_scheduler *s = torc__calloc(1, sizeof *s);
  torc_status st = TORC_OK;
  if (vv == NULL || kk == NULL || s == NULL)
    st = torc_set_error(TORC_ERR_OOM, "out of memory building scheduler '%s'",
                        type);
  if (st == TORC_OK)
    st = torc__keys_resolve(type, t->keys, warmup_keys, keys, values, n, NULL,
                             vv);
  if (st == TORC_OK) {
    s->type = t;
    s->opt = opt;
    char *end;
    long long w = strtoll(vv[nt], &end, 10);
    if (end == vv[nt] || *end != '\0' || w < 0)
      st = torc_set_error(TORC_ERR_INVALID,
                          "%s: key 'warmup' = '%s' is not a step count; give "
                          "an integer >= 0 (0 = no warm-up)",
                          type, vv[nt]);
    s->warmup = w;
  }
  if (st == TORC_OK)
    st = torc__optim_parse_double(type, "warmup_start_factor", vv[nt + 1],
                                  &s->start_factor);
  if (st == TORC_OK && !(s->start_factor > 0 && s->start_factor <= 1))
    st = torc_set_error(TORC_ERR_INVALID,
                        "%s: key 'warmup_start_factor' = %s is out of range; "
                        "give a factor in (0, 1] (0.1 starts at a tenth of "
                        "the lr)",
                        type, vv[nt + 1]);
  if (st == TORC_OK)
    st = grow_groups(s);
  if (st == TORC_OK && t->create) {
    for (int j = 0; j < nt; j++)
      kk[j] = t->keys[j].name;
    torc_clear_error();
    st = t->create(kk, vv, nt, t->user, &s->state);
    if (st != TORC_OK && torc_last_status() == TORC_OK)
      torc_set_error(st,
                     "%s: the scheduler's create failed without saying "
                     "why",
                     type);
    if (st != TORC_OK)
      s->state = NULL;
  }
  torc__free(vv), torc__free(kk);
  if (st == TORC_OK)
    st = pick_momentum(s);
  if (st != TORC_OK) {
    torc_scheduler_free(s);
    return NULL;
  }
  /* As PyTorch at construction: the warm-up's first lr (LinearLR), or the
   * schedule's lr at step 0 (OneCycleLR starts at max_lr / div_factor;
   * the closed forms give the initial lr). */
  for (int g = 0; g < s->n_groups; g++) {
    double lr0 = s->initial[g];
    if (s->warmup > 0)
      lr0 = s->initial[g] * s->start_factor;
    else if (strcmp(t->name, "plateau") != 0 &&
             schedule_at_zero(s, g, &lr0) != TORC_OK) {
      torc_scheduler_free(s);
      return NULL;
    }
    /* The momentum at step 0 (max_momentum), also before a warm-up: the
     * schedule sets it when PyTorch builds it, inside SequentialLR too. */
    if (set_momentum(s, g, 0) != TORC_OK) {
      torc_scheduler_free(s);
      return NULL;
    }
    torc_optimizer_set_lr(opt, g, lr0);
  }
  return s;
}

torc_scheduler *torc_scheduler_build(const char *type, const char *spec,
                                     torc_optimizer *opt) {
  torc__spec sp;
  torc_status st = torc__spec_split(&sp, type ? type : "scheduler", spec);
  torc_scheduler *s =
      st ? NULL : torc_scheduler_create(type, sp.k, sp.v, sp.n, opt);
  torc__spec_free(&sp);
  return s;
}

void torc_scheduler_free(torc_scheduler *s) {
  if (s == NULL)
    return;
  if (s->state && s->type && s->type->destroy)
    s->type->destroy(s->state);
  torc__free(s->initial);
  torc__free(s);
}

torc_status torc_scheduler_step(torc_scheduler *s, double metric) {
  if (s == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_scheduler_step: the scheduler "
                                         "is NULL");
  const char *tn = s->type->name;
  if (isnan(metric) && strcmp(tn, "plateau") == 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "scheduler 'plateau' needs the monitored metric "
                          "(the validation loss, say) at every step; pass it "
                          "to torc_scheduler_step instead of NaN");
  torc_status st = grow_groups(s);
  if (st)
    return st;
  double *lr = torc__calloc((size_t)s->n_groups + 1, sizeof *lr);
  if (lr == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory in scheduler '%s'", tn);
  int64_t t = s->t + 1, W = s->warmup;
  double f = s->start_factor;
  for (int g = 0; g < s->n_groups && st == TORC_OK; g++) {
    double last = torc_optimizer_get_lr(s->opt, g);
    if (t < W) /* LinearLR's recursive form, as PyTorch computes it */
      lr[g] = last *
              (1.0 + (1.0 - f) / ((double)W * f + (double)(t - 1) * (1.0 - f)));
    else if (t == W) { /* SequentialLR's milestone: the schedule at 0 */
      lr[g] = s->initial[g];
      if (strcmp(tn, "plateau") != 0)
        st = schedule_at_zero(s, g, &lr[g]);
    }
    else {
      torc_clear_error();
      lr[g] = s->type->lr(s->state, g, s->initial[g], last, t - W, metric);
      if (torc_last_status() != TORC_OK)
        st = torc_last_status();
      else if (!(lr[g] >= 0) || isinf(lr[g]))
        st = torc_set_error(TORC_ERR_INVALID,
                            "scheduler '%s' gave lr %g for group %d at step "
                            "%lld; check its keys",
                            tn, lr[g], g, (long long)(t - W));
    }
  }
  /* The momentum follows the lr's step: none during a warm-up. */
  for (int g = 0; g < s->n_groups && st == TORC_OK && t >= W; g++)
    st = set_momentum(s, g, t - W);
  if (st == TORC_OK) {
    for (int g = 0; g < s->n_groups; g++)
      torc_optimizer_set_lr(s->opt, g, lr[g]);
    s->t = t;
  } else {
    const char *e = torc_last_error();
    if (strstr(e, "scheduler '") == NULL)
      torc_set_error(st, "%s (in scheduler '%s')", e, tn);
  }
  torc__free(lr);
  return st;
}

int64_t torc_scheduler_steps(const torc_scheduler *s) { return s ? s->t : 0; }

static void skey(char *buf, size_t size, const char *prefix, const char *k) {
  snprintf(buf, size, "%s%s", prefix ? prefix : "", k);
}

torc_status torc_scheduler_state_dict(const torc_scheduler *s,
                                      const char *prefix, torc_state_dict *sd) {
  if (s == NULL || sd == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_scheduler_state_dict: the "
                                         "scheduler and the state dict are "
                                         "required");
  char key[512], val[64];
  torc_status st;
  skey(key, sizeof key, prefix, "type");
  if ((st = torc_state_dict_set_meta(sd, key, s->type->name)))
    return st;
  skey(key, sizeof key, prefix, "steps");
  if ((st = torc_state_dict_set_i64(sd, key, s->t)))
    return st;
  for (int g = 0; g < s->n_groups; g++) {
    char k[64];
    snprintf(k, sizeof k, "group.%d.initial_lr", g);
    skey(key, sizeof key, prefix, k);
    snprintf(val, sizeof val, "%.17g", s->initial[g]);
    if ((st = torc_state_dict_set_meta(sd, key, val)))
      return st;
  }
  if (s->type->save == NULL)
    return TORC_OK;
  char small[512], *buf = small;
  int r = s->type->save(s->state, small, sizeof small);
  if (r >= (int)sizeof small) {
    buf = torc__malloc((size_t)r + 1);
    if (buf == NULL)
      return torc_set_error(TORC_ERR_OOM,
                            "out of memory saving scheduler "
                            "'%s'",
                            s->type->name);
    r = s->type->save(s->state, buf, (size_t)r + 1);
  }
  if (r < 0)
    st = torc_last_status() ? torc_last_status()
                            : torc_set_error(TORC_ERR_INTERNAL,
                                             "scheduler '%s' could not save "
                                             "its state",
                                             s->type->name);
  else {
    skey(key, sizeof key, prefix, "state");
    st = torc_state_dict_set_meta(sd, key, buf);
  }
  if (buf != small)
    torc__free(buf);
  return st;
}

torc_status torc_scheduler_load_state_dict(torc_scheduler *s,
                                           const torc_state_dict *sd,
                                           const char *prefix) {
  if (s == NULL || sd == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_scheduler_load_state_dict: "
                                         "the scheduler and the state dict "
                                         "are required");
  const char *tn = s->type->name, *pre = prefix ? prefix : "";
  char key[512];
  skey(key, sizeof key, pre, "type");
  const char *saved = torc_state_dict_meta(sd, key);
  if (saved == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "scheduler '%s': the state dict has no scheduler "
                          "state under '%s' (no '%s'); save it with "
                          "torc_scheduler_state_dict and the same prefix",
                          tn, pre, key);
  if (strcmp(saved, tn) != 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "scheduler '%s': the state dict holds the state of "
                          "a '%s' scheduler; build a '%s' scheduler to load "
                          "it",
                          tn, saved, saved);
  int64_t t;
  skey(key, sizeof key, pre, "steps");
  torc_status st = torc_state_dict_get_i64(sd, key, &t);
  if (st == TORC_OK && t < 0)
    st = torc_set_error(TORC_ERR_INVALID,
                        "scheduler '%s': '%s' = %lld is "
                        "negative",
                        tn, key, (long long)t);
  if (st == TORC_OK)
    st = grow_groups(s);
  if (st)
    return st;
  double *init = torc__calloc((size_t)s->n_groups + 1, sizeof *init);
  if (init == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory loading scheduler");
  for (int g = 0; g < s->n_groups && st == TORC_OK; g++) {
    char k[64];
    snprintf(k, sizeof k, "group.%d.initial_lr", g);
    skey(key, sizeof key, pre, k);
    const char *v = torc_state_dict_meta(sd, key);
    init[g] = s->initial[g];
    if (v)
      st = torc__optim_parse_double(tn, key, v, &init[g]);
  }
  /* The type's state last: it is the one part that cannot be undone. */
  skey(key, sizeof key, pre, "state");
  const char *text = torc_state_dict_meta(sd, key);
  if (st == TORC_OK && text && s->type->load == NULL)
    st = torc_set_error(TORC_ERR_INVALID,
                        "scheduler '%s': the state dict has saved state "
                        "('%s') but this type cannot load it",
                        tn, key);
  if (st == TORC_OK && text == NULL && s->type->load && s->type->save)
    st = torc_set_error(TORC_ERR_INVALID,
                        "scheduler '%s': the state dict lacks '%s', the "
                        "type's saved state; load a checkpoint saved from "
                        "this type",
                        tn, key);
  if (st == TORC_OK && text) {
    torc_clear_error();
    st = s->type->load(s->state, text);
    if (st != TORC_OK && torc_last_status() == TORC_OK)
      torc_set_error(st,
                     "scheduler '%s': its state '%s' could not be "
                     "loaded",
                     tn, text);
  }
  if (st == TORC_OK) {
    memcpy(s->initial, init, (size_t)s->n_groups * sizeof *init);
    s->t = t;
  }
  torc__free(init);
  return st;
}
