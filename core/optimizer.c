/* core/optimizer.c — optimizers (torc/optim.h): parameter groups with
 * their hyper-parameters and learning rates, per-parameter state tensors
 * and step counts, step / zero_grad, and the state dict.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "optim_internal.h"

/* ---- the registry ---- */

static int has_lr_key(const torc_module_key *keys) {
  for (int i = 0; keys && keys[i].name; i++)
    if (strcmp(keys[i].name, "lr") == 0)
      return 1;
  return 0;
}

torc_status torc__optimizer_type_register_owned(struct torc__plugin *owner,
                                                const torc_optimizer_type *t) {
  if (t == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_optimizer_type_register: the "
                                         "type is NULL");
  const char *name = t->name ? t->name : "(null)";
  if (t->struct_size < offsetof(torc_optimizer_type, user))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_optimizer_type_register: optimizer type '%s' "
                          "has struct_size %zu; set it to "
                          "sizeof(torc_optimizer_type)",
                          name, t->struct_size);
  if (t->update == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_optimizer_type_register: optimizer type '%s' "
                          "has no update; set it",
                          name);
  if (!has_lr_key(t->keys))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_optimizer_type_register: optimizer type '%s' "
                          "has no key 'lr'; every optimizer takes its "
                          "learning rate as 'lr' (schedulers change it)",
                          name);
  return torc__oreg_add(&torc__optimizer_reg, owner, t, t->name);
}

torc_status torc_optimizer_type_register(const torc_optimizer_type *type) {
  return torc__optimizer_type_register_owned(NULL, type);
}
const torc_optimizer_type *torc_optimizer_type_find(const char *name) {
  return torc__oreg_find(&torc__optimizer_reg, name);
}
int torc_optimizer_type_count(void) {
  return torc__oreg_count(&torc__optimizer_reg);
}
const torc_optimizer_type *torc_optimizer_type_at(int i) {
  return torc__oreg_at(&torc__optimizer_reg, i);
}

/* ---- the optimizer ---- */

typedef torc__oparam oparam;
typedef torc__ogroup ogroup;

static void free_strs(char **s, int n) {
  for (int i = 0; s && i < n; i++)
    torc__free(s[i]);
  torc__free(s);
}

static char **dup_strs(const char *const *s, int n) {
  char **d = torc__calloc((size_t)n + 1, sizeof *d);
  for (int i = 0; d && i < n; i++)
    if ((d[i] = torc__strdup(s[i])) == NULL) {
      free_strs(d, i);
      return NULL;
    }
  return d;
}

static void free_state(torc_tensor **state, int n) {
  for (int i = 0; state && i < n; i++)
    torc_release(state[i]);
  torc__free(state);
}

static void destroy_hyper(const torc_optimizer *opt, void *hyper) {
  if (hyper && opt->type->destroy)
    opt->type->destroy(hyper);
}

/* Parses hyper-parameters `vals` into *hyper and the lr into *lr. */
static torc_status make_hyper(const torc_optimizer *opt,
                              const char *const *vals, void **hyper,
                              double *lr) {
  const torc_optimizer_type *t = opt->type;
  torc_status st =
      torc__optim_parse_double(t->name, "lr", vals[opt->lr_key], lr);
  if (st == TORC_OK && !(*lr >= 0))
    st = torc_set_error(TORC_ERR_INVALID,
                        "%s: key 'lr' = %s is negative; give a learning "
                        "rate >= 0",
                        t->name, vals[opt->lr_key]);
  if (st)
    return st;
  *hyper = NULL;
  if (t->create == NULL)
    return TORC_OK;
  torc_clear_error();
  st = t->create(opt->keys, vals, opt->nk, t->user, hyper);
  if (st != TORC_OK && torc_last_status() == TORC_OK)
    torc_set_error(st, "%s: the optimizer's create failed without saying why",
                   t->name);
  if (st != TORC_OK)
    *hyper = NULL;
  return st;
}

torc_optimizer *torc_optimizer_create(const char *type, const char *const *keys,
                                      const char *const *values, int n) {
  if (type == NULL || n < 0 || (n > 0 && (keys == NULL || values == NULL))) {
    torc_set_error(TORC_ERR_NULL, "torc_optimizer_create: the type name (and "
                                  "the key and value arrays when n > 0) are "
                                  "required");
    return NULL;
  }
  const torc_optimizer_type *t =
      torc__oreg_lookup(&torc__optimizer_reg, type, "optimizer");
  if (t == NULL)
    return NULL;
  torc_optimizer *opt = torc__calloc(1, sizeof *opt);
  int nk = torc__keys_count(t->keys);
  const char **vv = torc__calloc((size_t)nk + 1, sizeof *vv);
  if (opt)
    opt->keys = torc__calloc((size_t)nk + 1, sizeof *opt->keys);
  if (opt == NULL || vv == NULL || opt->keys == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory building optimizer '%s'", type);
    goto fail;
  }
  opt->type = t;
  opt->nk = nk;
  for (int j = 0; j < nk; j++) {
    opt->keys[j] = t->keys[j].name;
    if (strcmp(t->keys[j].name, "lr") == 0)
      opt->lr_key = j;
  }
  while (t->state_names && t->state_names[opt->n_state])
    opt->n_state++;
  if (torc__keys_resolve(type, t->keys, NULL, keys, values, n, NULL, vv))
    goto fail;
  /* Build the hyper-parameters once now, so a bad value is reported here
   * rather than at the first group. */
  void *hyper;
  double lr;
  if (make_hyper(opt, vv, &hyper, &lr))
    goto fail;
  destroy_hyper(opt, hyper);
  if ((opt->defaults = dup_strs(vv, nk)) == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory building optimizer '%s'", type);
    goto fail;
  }
  torc__free(vv);
  return opt;
fail:
  torc__free(vv);
  torc_optimizer_free(opt);
  return NULL;
}

torc_optimizer *torc_optimizer_build(const char *type, const char *spec,
                                     torc_module *m) {
  torc__spec s;
  torc_status st = torc__spec_split(&s, type ? type : "optimizer", spec);
  torc_optimizer *opt = st ? NULL : torc_optimizer_create(type, s.k, s.v, s.n);
  torc__spec_free(&s);
  if (opt && m && torc_optimizer_add_module(opt, m, NULL, NULL) < 0) {
    torc_optimizer_free(opt);
    return NULL;
  }
  return opt;
}

void torc_optimizer_free(torc_optimizer *opt) {
  if (opt == NULL)
    return;
  for (int g = 0; g < opt->n_groups; g++) {
    ogroup *G = &opt->g[g];
    for (int i = 0; i < G->n; i++) {
      torc_release(G->p[i].t);
      torc__free(G->p[i].name);
      free_state(G->p[i].state, opt->n_state);
    }
    torc__free(G->p);
    destroy_hyper(opt, G->hyper);
    free_strs(G->vals, opt->nk);
  }
  torc__free(opt->g);
  free_strs(opt->defaults, opt->nk);
  torc__free(opt->keys);
  torc__free(opt);
}

/* Where parameter t already is, or -1. */
static int find_param(const torc_optimizer *opt, const torc_tensor *t,
                      int *index) {
  for (int g = 0; g < opt->n_groups; g++)
    for (int i = 0; i < opt->g[g].n; i++)
      if (opt->g[g].p[i].t == t) {
        if (index)
          *index = i;
        return g;
      }
  return -1;
}

/* "parameter 'fc.weight'" or "parameter 3 ([10, 4] f32)" into buf. */
static const char *param_desc(const oparam *p, int index, char *buf,
                              size_t size) {
  if (p->name) {
    snprintf(buf, size, "parameter '%s'", p->name);
    return buf;
  }
  int len = snprintf(buf, size, "parameter %d ([", index);
  int nd = torc_ndim(p->t);
  const int64_t *sh = torc_shape(p->t);
  for (int d = 0; d < nd && len > 0 && (size_t)len + 24 < size; d++)
    len += snprintf(buf + len, size - (size_t)len, "%s%lld", d ? ", " : "",
                    (long long)sh[d]);
  if (len > 0 && (size_t)len < size)
    snprintf(buf + len, size - (size_t)len, "] %s)",
             torc_dtype_name(torc_dtype_of(p->t)));
  return buf;
}

/* Adds a group of n parameters (names may be NULL) with the group's spec;
 * returns its index or -1. */
static int add_group(torc_optimizer *opt, torc_tensor *const *params,
                     const char *const *names, int n, const char *spec) {
  const char *tn = opt->type->name;
  torc__spec s;
  const char **vv = torc__calloc((size_t)opt->nk + 1, sizeof *vv);
  ogroup G = {0};
  torc_status st = vv ? TORC_OK
                      : torc_set_error(TORC_ERR_OOM, "out of memory adding "
                                                     "a group");
  if (st == TORC_OK)
    st = torc__spec_split(&s, tn, spec);
  else
    memset(&s, 0, sizeof s);
  if (st == TORC_OK)
    st = torc__keys_resolve(tn, opt->type->keys, NULL, s.k, s.v, s.n,
                             (const char *const *)opt->defaults, vv);
  if (st == TORC_OK)
    st = make_hyper(opt, vv, &G.hyper, &G.lr);
  if (st == TORC_OK && (G.vals = dup_strs(vv, opt->nk)) == NULL)
    st = torc_set_error(TORC_ERR_OOM, "out of memory adding a group");
  torc__spec_free(&s);
  torc__free(vv);
  if (st == TORC_OK && (G.p = torc__calloc((size_t)n + 1, sizeof *G.p)) == NULL)
    st = torc_set_error(TORC_ERR_OOM, "out of memory adding a group");
  for (int i = 0; i < n && st == TORC_OK; i++) {
    if (names && (G.p[i].name = torc__strdup(names[i])) == NULL)
      st = torc_set_error(TORC_ERR_OOM, "out of memory adding a group");
    G.p[i].t = torc_retain(params[i]);
    G.n = i + 1;
  }
  ogroup *ng =
      st ? NULL : torc__realloc(opt->g, (size_t)(opt->n_groups + 1) * sizeof *ng);
  if (st == TORC_OK && ng == NULL)
    st = torc_set_error(TORC_ERR_OOM, "out of memory adding a group");
  if (st != TORC_OK) {
    for (int i = 0; i < G.n; i++) {
      torc_release(G.p[i].t);
      torc__free(G.p[i].name);
    }
    torc__free(G.p);
    destroy_hyper(opt, G.hyper);
    free_strs(G.vals, opt->nk);
    return -1;
  }
  opt->g = ng;
  opt->g[opt->n_groups] = G;
  return opt->n_groups++;
}

int torc_optimizer_add_params(torc_optimizer *opt, torc_tensor *const *params,
                              int n, const char *spec) {
  if (opt == NULL || n < 0 || (n > 0 && params == NULL)) {
    torc_set_error(TORC_ERR_NULL, "torc_optimizer_add_params: the optimizer "
                                  "(and the array when n > 0) are required");
    return -1;
  }
  const char *tn = opt->type->name;
  if (n == 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "optimizer '%s': a group needs at least "
                   "one parameter",
                   tn);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (params[i] == NULL) {
      torc__null_input("torc_optimizer_add_params");
      return -1;
    }
    char w[160];
    oparam tmp = {params[i], NULL, NULL, 0};
    int gi = find_param(opt, params[i], NULL);
    int dup = 0;
    for (int j = 0; j < i; j++)
      dup |= params[j] == params[i];
    if (gi >= 0 || dup) {
      char where[48] = "given twice";
      if (gi >= 0)
        snprintf(where, sizeof where, "already in group %d", gi);
      torc_set_error(TORC_ERR_INVALID,
                     "optimizer '%s': %s is %s; a parameter may be in one "
                     "group only, once",
                     tn, param_desc(&tmp, i, w, sizeof w), where);
      return -1;
    }
    if (!torc_dtype_is_float(torc_dtype_of(params[i])) ||
        !torc_is_leaf(params[i])) {
      torc_set_error(TORC_ERR_INVALID,
                     "optimizer '%s': %s is %s; an optimizer updates "
                     "floating leaf tensors (parameters)",
                     tn, param_desc(&tmp, i, w, sizeof w),
                     torc_is_leaf(params[i]) ? "not floating"
                                             : "the result of an op, not a "
                                               "leaf");
      return -1;
    }
  }
  return add_group(opt, params, NULL, n, spec);
}

int torc_optimizer_add_module(torc_optimizer *opt, torc_module *m,
                              const char *pattern, const char *spec) {
  if (opt == NULL || m == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_optimizer_add_module: the optimizer "
                                  "and the module are required");
    return -1;
  }
  const char *tn = opt->type->name;
  const char *lazy[4];
  int nl = torc__module_lazy_paths(m, lazy, 4);
  if (nl > 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "optimizer '%s': the module has parameters not created "
                   "yet (lazy sizes, in '%s'%s); run one forward first "
                   "(e.g. torc_module_summary with an example input)",
                   tn, lazy[0][0] ? lazy[0] : "the root",
                   nl > 1 ? ", ..." : "");
    return -1;
  }
  torc_named_tensor *all = NULL;
  int na = torc_module_named_parameters(m, &all);
  if (na < 0)
    return -1;
  torc_tensor **ps = torc__calloc((size_t)na + 1, sizeof *ps);
  const char **names = torc__calloc((size_t)na + 1, sizeof *names);
  int n = 0, r = -1;
  if (ps == NULL || names == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory adding a group");
    goto out;
  }
  for (int i = 0; i < na; i++)
    if ((pattern == NULL || fnmatch(pattern, all[i].name, 0) == 0) &&
        find_param(opt, all[i].tensor, NULL) < 0) {
      ps[n] = all[i].tensor;
      names[n++] = all[i].name;
    }
  if (n == 0) {
    char list[700] = "";
    size_t len = 0;
    for (int i = 0; i < na && len + 60 < sizeof list; i++) {
      int gi = find_param(opt, all[i].tensor, NULL);
      char in[32] = "";
      if (gi >= 0)
        snprintf(in, sizeof in, " (in group %d)", gi);
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s",
                              i ? ", " : "", all[i].name, in);
    }
    if (na == 0)
      torc_set_error(TORC_ERR_INVALID,
                     "optimizer '%s': the module has no parameters to "
                     "optimize",
                     tn);
    else
      torc_set_error(TORC_ERR_INVALID,
                     "optimizer '%s': pattern '%s' matches no parameter that "
                     "is not in a group yet; the parameters are: %s",
                     tn, pattern ? pattern : "*", list);
    goto out;
  }
  r = add_group(opt, ps, names, n, spec);
out:
  torc__free(ps);
  torc__free(names);
  torc_named_tensors_free(all, na);
  return r;
}

/* 1 if state tensor i is used with these hyper-parameters. */
static int state_used(const torc_optimizer *opt, void *hyper, int i) {
  const torc_optimizer_type *t = opt->type;
  if (!TORC_HAS_SLOT(t, torc_optimizer_type, state_used) ||
      t->state_used == NULL)
    return 1;
  return t->state_used(hyper, i) != 0;
}

/* The state tensors of a parameter, zeros like it, created on first use
 * (only those its group's hyper-parameters use; the others stay NULL). */
torc_status torc__optimizer_ensure_state(torc_optimizer *opt, void *hyper,
                                        oparam *p) {
  if (opt->n_state == 0)
    return TORC_OK;
  torc_tensor **s = p->state;
  if (s == NULL && (s = torc__calloc((size_t)opt->n_state, sizeof *s)) == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory for optimizer state");
  int scope = torc_scope_begin();
  torc_status st = TORC_OK;
  for (int i = 0; i < opt->n_state && st == TORC_OK; i++) {
    if (s[i] || !state_used(opt, hyper, i))
      continue;
    /* Our own reference: the scope drops its one at the end (keeping it
     * would hand it to the caller's scope, if one is open). */
    s[i] = torc_retain(torc_zeros_like(p->t));
    if (s[i] == NULL)
      st = torc_last_status() ? torc_last_status() : TORC_ERR_OOM;
  }
  torc_scope_end(scope);
  if (st && p->state == NULL) {
    free_state(s, opt->n_state);
    return st;
  }
  p->state = s;
  return st;
}

torc_status torc_optimizer_step(torc_optimizer *opt) {
  if (opt == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_optimizer_step: the optimizer "
                                         "is NULL");
  return torc__optimizer_step(opt, NULL);
}

torc_status torc__optimizer_step(torc_optimizer *opt, const torc_tensor *ok) {
  torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
  torc_status st = TORC_OK;
  int index = 0;
  for (int g = 0; g < opt->n_groups && st == TORC_OK; g++) {
    ogroup *G = &opt->g[g];
    int fused = 0; /* the whole group in one list step (optimizer_foreach.c) */
    if ((st = torc__optimizer_step_fused(opt, G, g, ok, &fused)) || fused) {
      index += G->n;
      continue;
    }
    for (int i = 0; i < G->n && st == TORC_OK; i++, index++) {
      oparam *p = &G->p[i];
      torc_tensor *grad = torc_grad_of(p->t);
      if (!torc_requires_grad(p->t) || grad == NULL)
        continue;
      st = torc__optimizer_ensure_state(opt, G->hyper, p);
      if (st)
        break;
      p->step++;
      int scope = torc_scope_begin();
      torc_clear_error();
      torc_tensor *was = ok ? torc_clone(p->t) : NULL; /* put back unless ok */
      if (ok && was == NULL)
        st = torc_last_status();
      else
        st = opt->type->update(G->hyper, G->lr, p->t, grad, p->state,
                               p->step);
      if (st == TORC_OK && was)
        st = torc__put_back_unless(p->t, was, ok);
      torc_scope_end(scope);
      if (st != TORC_OK) {
        p->step--;
        char w[160];
        const char *e = torc_last_error();
        torc_set_error(st, "%s (in optimizer '%s', %s of group %d)",
                       e[0] ? e : "the update failed without saying why",
                       opt->type->name, param_desc(p, index, w, sizeof w), g);
      }
    }
  }
  torc_set_grad_mode(mode);
  if (st == TORC_OK)
    opt->steps++;
  return st;
}

torc_status torc_optimizer_zero_grad(torc_optimizer *opt, int set_to_none) {
  if (opt == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_optimizer_zero_grad: the "
                                         "optimizer is NULL");
  for (int g = 0; g < opt->n_groups; g++)
    for (int i = 0; i < opt->g[g].n; i++) {
      torc_status st = torc_zero_grad(opt->g[g].p[i].t, set_to_none);
      if (st)
        return st;
    }
  return TORC_OK;
}

int torc_optimizer_group_count(const torc_optimizer *opt) {
  return opt ? opt->n_groups : 0;
}

static torc_status check_group(const torc_optimizer *opt, int group,
                               const char *fn) {
  if (opt == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the optimizer is NULL", fn);
  if (group < 0 || group >= opt->n_groups)
    return torc_set_error(TORC_ERR_RANGE,
                          "%s: group %d does not exist; the optimizer has %d "
                          "group%s",
                          fn, group, opt->n_groups,
                          opt->n_groups == 1 ? "" : "s");
  return TORC_OK;
}

double torc_optimizer_get_lr(const torc_optimizer *opt, int group) {
  if (check_group(opt, group, "torc_optimizer_get_lr"))
    return NAN;
  return opt->g[group].lr;
}

torc_status torc_optimizer_set_lr(torc_optimizer *opt, int group, double lr) {
  torc_status st = check_group(opt, group, "torc_optimizer_set_lr");
  if (st)
    return st;
  if (!(lr >= 0) || isinf(lr))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_optimizer_set_lr: lr %g for group %d is not "
                          "a finite number >= 0",
                          lr, group);
  opt->g[group].lr = lr;
  return TORC_OK;
}

int64_t torc_optimizer_steps(const torc_optimizer *opt) {
  return opt ? opt->steps : 0;
}

/* The index of hyper-parameter `key` in the type's keys, or -1. */
static int hyper_index(const torc_optimizer *opt, const char *key) {
  for (int j = 0; opt && key && j < opt->nk; j++)
    if (strcmp(opt->keys[j], key) == 0)
      return j;
  return -1;
}

const char *torc_optimizer_name(const torc_optimizer *opt) {
  return opt ? opt->type->name : "";
}

int torc_optimizer_has_hyper(const torc_optimizer *opt, const char *key) {
  return hyper_index(opt, key) >= 0;
}

/* The index of `key` (not the lr) in group `group`, or -1 with an error. */
static int check_hyper(const torc_optimizer *opt, int group, const char *key,
                       const char *fn) {
  if (check_group(opt, group, fn))
    return -1;
  int j = hyper_index(opt, key);
  if (j < 0)
    torc_set_error(TORC_ERR_INVALID,
                   "%s: optimizer '%s' has no hyper-parameter '%s'", fn,
                   opt->type->name, key ? key : "(null)");
  else if (j == opt->lr_key)
    torc_set_error(TORC_ERR_INVALID,
                   "%s: the lr is not set as text; use "
                   "torc_optimizer_get_lr / torc_optimizer_set_lr",
                   fn);
  return j == opt->lr_key ? -1 : j;
}

const char *torc_optimizer_get_hyper(const torc_optimizer *opt, int group,
                                     const char *key) {
  int j = check_hyper(opt, group, key, "torc_optimizer_get_hyper");
  return j < 0 ? NULL : opt->g[group].vals[j];
}

torc_status torc_optimizer_set_hyper(torc_optimizer *opt, int group,
                                     const char *key, const char *value) {
  int j = check_hyper(opt, group, key, "torc_optimizer_set_hyper");
  if (j < 0)
    return torc_last_status();
  if (value == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_optimizer_set_hyper: the "
                                         "value is NULL");
  ogroup *G = &opt->g[group];
  char *copy = torc__strdup(value);
  const char **vv = torc__calloc((size_t)opt->nk + 1, sizeof *vv);
  if (copy == NULL || vv == NULL) {
    torc__free(copy), torc__free(vv);
    return torc_set_error(TORC_ERR_OOM, "out of memory setting '%s'", key);
  }
  for (int k = 0; k < opt->nk; k++)
    vv[k] = k == j ? copy : G->vals[k];
  void *hyper;
  double ignored;
  torc_status st = make_hyper(opt, vv, &hyper, &ignored);
  torc__free(vv);
  if (st != TORC_OK) {
    torc__free(copy);
    return st;
  }
  destroy_hyper(opt, G->hyper);
  G->hyper = hyper;
  torc__free(G->vals[j]);
  G->vals[j] = copy;
  return TORC_OK;
}

/* ---- the state dict ---- */

static void key_of(char *buf, size_t size, const char *prefix, const char *fmt,
                   ...) TORC_PRINTF(4, 5);
static void key_of(char *buf, size_t size, const char *prefix, const char *fmt,
                   ...) {
  int n = snprintf(buf, size, "%s", prefix ? prefix : "");
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < size)
    vsnprintf(buf + n, size - (size_t)n, fmt, ap);
  va_end(ap);
}

torc_status torc_optimizer_state_dict(const torc_optimizer *opt,
                                      const char *prefix, torc_state_dict *sd) {
  if (opt == NULL || sd == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_optimizer_state_dict: the "
                                         "optimizer and the state dict are "
                                         "required");
  char key[512], val[64];
  /* Tensor names first: a collision must add nothing. */
  int index = 0;
  for (int g = 0; g < opt->n_groups; g++)
    for (int i = 0; i < opt->g[g].n; i++, index++)
      for (int s = 0; opt->g[g].p[i].state && s < opt->n_state; s++) {
        if (opt->g[g].p[i].state[s] == NULL) /* not used: not saved */
          continue;
        key_of(key, sizeof key, prefix, "state.%d.%s", index,
               opt->type->state_names[s]);
        if (torc_state_dict_get(sd, key))
          return torc_set_error(TORC_ERR_INVALID,
                                "torc_optimizer_state_dict: the state dict "
                                "already has '%s'; use another prefix",
                                key);
      }
  torc_status st = TORC_OK;
#define META(...)                                                              \
  do {                                                                         \
    key_of(key, sizeof key, prefix, __VA_ARGS__);                              \
    if (st == TORC_OK)                                                         \
      st = torc_state_dict_set_meta(sd, key, val);                             \
  } while (0)
  snprintf(val, sizeof val, "%s", opt->type->name);
  META("type");
  snprintf(val, sizeof val, "%lld", (long long)opt->steps);
  META("steps");
  index = 0;
  for (int g = 0; g < opt->n_groups; g++) {
    const ogroup *G = &opt->g[g];
    snprintf(val, sizeof val, "%d", G->n);
    META("group.%d.params", g);
    for (int j = 0; j < opt->nk; j++) {
      if (j == opt->lr_key) {
        snprintf(val, sizeof val, "%.17g", G->lr);
        META("group.%d.lr", g);
      } else {
        key_of(key, sizeof key, prefix, "group.%d.%s", g, opt->keys[j]);
        if (st == TORC_OK)
          st = torc_state_dict_set_meta(sd, key, G->vals[j]);
      }
    }
    for (int i = 0; i < G->n; i++, index++) {
      const oparam *p = &G->p[i];
      if (p->state == NULL && p->step == 0)
        continue;
      snprintf(val, sizeof val, "%lld", (long long)p->step);
      META("state.%d.step", index);
      for (int s = 0; p->state && s < opt->n_state && st == TORC_OK; s++) {
        if (p->state[s] == NULL)
          continue;
        key_of(key, sizeof key, prefix, "state.%d.%s", index,
               opt->type->state_names[s]);
        st = torc_state_dict_set(sd, key, p->state[s]);
      }
    }
  }
#undef META
  return st;
}

/* Appends "; " and a formatted problem to a bounded list. */
static void add_problem(char *buf, size_t size, int *count, const char *fmt,
                        ...) TORC_PRINTF(4, 5);
static void add_problem(char *buf, size_t size, int *count, const char *fmt,
                        ...) {
  size_t len = strlen(buf);
  (*count)++;
  if (len + 8 >= size)
    return;
  if (*count > 1)
    len += (size_t)snprintf(buf + len, size - len, "; ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, size - len, fmt, ap);
  va_end(ap);
}

static int parse_i64(const char *s, int64_t *out) {
  if (s == NULL || *s == '\0')
    return -1;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (*end != '\0')
    return -1;
  *out = v;
  return 0;
}

static int same_shape(const torc_tensor *a, const torc_tensor *b) {
  if (torc_ndim(a) != torc_ndim(b))
    return 0;
  for (int d = 0; d < torc_ndim(a); d++)
    if (torc_shape(a)[d] != torc_shape(b)[d])
      return 0;
  return 1;
}

static void shape_str(const torc_tensor *t, char *buf, size_t size) {
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < torc_ndim(t) && len + 24 < size; d++)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? ", " : "",
                            (long long)torc_shape(t)[d]);
  snprintf(buf + len, size - len, "]");
}

/* What a load prepares before changing anything. */
typedef struct pending {
  void **hyper;         /* per group: new hyper, or NULL to keep */
  char ***vals;         /* per group: new values, or NULL to keep */
  double *lr;           /* per group */
  torc_tensor ***state; /* per parameter: new state or NULL */
  int64_t *step;        /* per parameter */
} pending;

torc_status torc_optimizer_load_state_dict(torc_optimizer *opt,
                                           const torc_state_dict *sd,
                                           const char *prefix) {
  if (opt == NULL || sd == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_optimizer_load_state_dict: "
                                         "the optimizer and the state dict "
                                         "are required");
  const char *pre = prefix ? prefix : "";
  const char *tn = opt->type->name;
  char key[512];
  key_of(key, sizeof key, pre, "type");
  const char *saved_type = torc_state_dict_meta(sd, key);
  if (saved_type == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "optimizer '%s': the state dict has no optimizer "
                          "state under '%s' (no '%s'); save it with "
                          "torc_optimizer_state_dict and the same prefix",
                          tn, pre, key);
  if (strcmp(saved_type, tn) != 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "optimizer '%s': the state dict holds the state of "
                          "a '%s' optimizer; build a '%s' optimizer to load "
                          "it, or start this one afresh",
                          tn, saved_type, saved_type);
  int saved_groups = 0;
  for (;;) {
    key_of(key, sizeof key, pre, "group.%d.lr", saved_groups);
    if (torc_state_dict_meta(sd, key) == NULL)
      break;
    saved_groups++;
  }
  if (saved_groups != opt->n_groups)
    return torc_set_error(TORC_ERR_INVALID,
                          "optimizer '%s': the state dict has %d parameter "
                          "group%s, this optimizer %d; add the same groups "
                          "in the same order before loading",
                          tn, saved_groups, saved_groups == 1 ? "" : "s",
                          opt->n_groups);
  int total = 0;
  for (int g = 0; g < opt->n_groups; g++) {
    int64_t np;
    key_of(key, sizeof key, pre, "group.%d.params", g);
    if (parse_i64(torc_state_dict_meta(sd, key), &np) || np != opt->g[g].n)
      return torc_set_error(TORC_ERR_INVALID,
                            "optimizer '%s': group %d has %s parameters in "
                            "the state dict and %d here; give each group the "
                            "same parameters as when it was saved",
                            tn, g,
                            torc_state_dict_meta(sd, key)
                                ? torc_state_dict_meta(sd, key)
                                : "an unknown number of",
                            opt->g[g].n);
    total += opt->g[g].n;
  }
  int64_t steps;
  key_of(key, sizeof key, pre, "steps");
  if (parse_i64(torc_state_dict_meta(sd, key), &steps) || steps < 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "optimizer '%s': '%s' = '%s' in the state dict is "
                          "not a step count",
                          tn, key,
                          torc_state_dict_meta(sd, key)
                              ? torc_state_dict_meta(sd, key)
                              : "(absent)");

  pending P = {0};
  int ng = opt->n_groups;
  P.hyper = torc__calloc((size_t)ng + 1, sizeof *P.hyper);
  P.vals = torc__calloc((size_t)ng + 1, sizeof *P.vals);
  P.lr = torc__calloc((size_t)ng + 1, sizeof *P.lr);
  P.state = torc__calloc((size_t)total + 1, sizeof *P.state);
  P.step = torc__calloc((size_t)total + 1, sizeof *P.step);
  const char **vv = torc__calloc((size_t)opt->nk + 1, sizeof *vv);
  char problems[1500] = "";
  int n_problems = 0;
  torc_status st = TORC_OK;
  if (!P.hyper || !P.vals || !P.lr || !P.state || !P.step || !vv) {
    st = torc_set_error(TORC_ERR_OOM, "out of memory loading optimizer "
                                      "state");
    goto done;
  }

  /* Hyper-parameters: the saved ones replace the group's (PyTorch's
   * load_state_dict restores param_groups); keys missing keep theirs. */
  for (int g = 0; g < ng && st == TORC_OK; g++) {
    ogroup *G = &opt->g[g];
    int changed = 0;
    for (int j = 0; j < opt->nk; j++) {
      key_of(key, sizeof key, pre, "group.%d.%s", g, opt->keys[j]);
      const char *v = j == opt->lr_key ? NULL : torc_state_dict_meta(sd, key);
      vv[j] = v ? v : G->vals[j];
      changed |= v && strcmp(v, G->vals[j]) != 0;
    }
    key_of(key, sizeof key, pre, "group.%d.lr", g);
    st = torc__optim_parse_double(tn, key, torc_state_dict_meta(sd, key),
                                  &P.lr[g]);
    if (st == TORC_OK && changed) {
      double ignored;
      st = make_hyper(opt, vv, &P.hyper[g], &ignored);
      if (st == TORC_OK && (P.vals[g] = dup_strs(vv, opt->nk)) == NULL)
        st = torc_set_error(TORC_ERR_OOM, "out of memory loading optimizer "
                                          "state");
      if (st == TORC_OK) /* the group's configured lr stays its own */
        torc__free(P.vals[g][opt->lr_key]),
            P.vals[g][opt->lr_key] = torc__strdup(G->vals[opt->lr_key]);
      if (st == TORC_OK && P.vals[g][opt->lr_key] == NULL)
        st = torc_set_error(TORC_ERR_OOM, "out of memory");
    }
  }
  if (st)
    goto done;

  /* Per-parameter state, converted onto each parameter's device. */
  int index = 0;
  int scope = torc_scope_begin();
  for (int g = 0; g < ng; g++) {
    for (int i = 0; i < opt->g[g].n; i++, index++) {
      const oparam *p = &opt->g[g].p[i];
      char w[160];
      key_of(key, sizeof key, pre, "state.%d.step", index);
      const char *sv = torc_state_dict_meta(sd, key);
      if (sv == NULL)
        continue;
      if (parse_i64(sv, &P.step[index]) || P.step[index] < 0) {
        add_problem(problems, sizeof problems, &n_problems,
                    "'%s' = '%s' is not a step count", key, sv);
        continue;
      }
      if (opt->n_state == 0)
        continue;
      P.state[index] = torc__calloc((size_t)opt->n_state, sizeof **P.state);
      if (P.state[index] == NULL) {
        st = torc_set_error(TORC_ERR_OOM, "out of memory");
        break;
      }
      void *hyper = P.hyper[g] ? P.hyper[g] : opt->g[g].hyper;
      for (int s = 0; s < opt->n_state; s++) {
        key_of(key, sizeof key, pre, "state.%d.%s", index,
               opt->type->state_names[s]);
        torc_tensor *t = torc_state_dict_get(sd, key);
        char a[96], b[96];
        if (t == NULL && !state_used(opt, hyper, s))
          continue; /* not used with these hyper-parameters */
        if (t == NULL) {
          add_problem(problems, sizeof problems, &n_problems, "'%s' is missing",
                      key);
          continue;
        }
        if (!same_shape(t, p->t)) {
          shape_str(t, a, sizeof a);
          shape_str(p->t, b, sizeof b);
          add_problem(problems, sizeof problems, &n_problems,
                      "'%s' is %s but %s is %s", key, a,
                      param_desc(p, index, w, sizeof w), b);
          continue;
        }
        torc_tensor *c = torc_to(t, torc_device_of(p->t));
        c = c ? torc_to_dtype(c, torc_dtype_of(p->t)) : NULL;
        c = c ? torc_clone(c) : NULL;
        if (c == NULL) {
          st = torc_last_status() ? torc_last_status() : TORC_ERR_OOM;
          break;
        }
        P.state[index][s] = torc_retain(c); /* the scope keeps its own */
      }
      if (st)
        break;
    }
    if (st)
      break;
  }
  torc_scope_end(scope);
  /* State tensors that belong to no parameter or state name. */
  char spre[512];
  key_of(spre, sizeof spre, pre, "state.");
  size_t sl = strlen(spre);
  for (int k = 0; st == TORC_OK && k < torc_state_dict_count(sd); k++) {
    const char *name = torc_state_dict_name(sd, k);
    if (strncmp(name, spre, sl) != 0)
      continue;
    char *end;
    long idx = strtol(name + sl, &end, 10);
    int ok = end != name + sl && *end == '.' && idx >= 0 && idx < total &&
             P.state[idx] != NULL;
    for (int s = 0; ok && s < opt->n_state; s++)
      if (strcmp(end + 1, opt->type->state_names[s]) == 0)
        ok = 2;
    if (ok != 2)
      add_problem(problems, sizeof problems, &n_problems,
                  "'%s' is not state of this optimizer", name);
  }
  if (st == TORC_OK && n_problems)
    st = torc_set_error(TORC_ERR_INVALID,
                        "optimizer '%s': cannot load its state (%d "
                        "problem%s): %s",
                        tn, n_problems, n_problems == 1 ? "" : "s", problems);

done:
  if (st == TORC_OK) { /* commit */
    index = 0;
    for (int g = 0; g < ng; g++) {
      ogroup *G = &opt->g[g];
      G->lr = P.lr[g];
      if (P.hyper[g] || P.vals[g]) {
        destroy_hyper(opt, G->hyper);
        free_strs(G->vals, opt->nk);
        G->hyper = P.hyper[g];
        G->vals = P.vals[g];
        P.hyper[g] = NULL;
        P.vals[g] = NULL;
      }
      for (int i = 0; i < G->n; i++, index++) {
        free_state(G->p[i].state, opt->n_state);
        G->p[i].state = P.state[index];
        G->p[i].step = P.step[index];
        P.state[index] = NULL;
      }
    }
    opt->steps = steps;
  }
  for (int g = 0; P.hyper && g < ng; g++) {
    destroy_hyper(opt, P.hyper[g]);
    if (P.vals)
      free_strs(P.vals[g], opt->nk);
  }
  for (int i = 0; P.state && i < total; i++)
    free_state(P.state[i], opt->n_state);
  torc__free(P.hyper), torc__free(P.vals), torc__free(P.lr), torc__free(P.state), torc__free(P.step);
  torc__free(vv);
  return st;
}
