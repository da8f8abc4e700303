/* core/loss.c — losses (torc/optim.h): configured losses built from
 * key/value pairs and their forward with error context; and what the
 * optim files share: the owner-tracked registries of loss, optimizer and
 * scheduler types, key resolution and the spec splitter.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "optim_internal.h"

/* ---- registries ---- */

torc__oreg torc__loss_reg =
    TORC__OREG_INIT("loss type", "torc_loss_type_register");
torc__oreg torc__optimizer_reg =
    TORC__OREG_INIT("optimizer type", "torc_optimizer_type_register");
torc__oreg torc__scheduler_reg =
    TORC__OREG_INIT("scheduler type", "torc_scheduler_type_register");

static int valid_name(const char *name) {
  if (name == NULL || name[0] == '\0')
    return 0;
  for (const char *p = name; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_'))
      return 0;
  return 1;
}

static int entry_cmp(const void *a, const void *b) {
  return strcmp(((const torc__oreg_entry *)a)->name,
                ((const torc__oreg_entry *)b)->name);
}

/* Caller holds r->lock. */
static torc__oreg_entry *lookup_locked(torc__oreg *r, const char *name) {
  for (int i = 0; i < r->n; i++)
    if (strcmp(r->e[i].name, name) == 0)
      return &r->e[i];
  return NULL;
}

torc_status torc__oreg_add(torc__oreg *r, struct torc__plugin *owner,
                           const void *type, const char *name) {
  if (!valid_name(name))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: %s name '%s' is not valid; use letters, "
                          "digits and '_'",
                          r->fn, r->what, name ? name : "(null)");
  pthread_mutex_lock(&r->lock);
  torc_status st = TORC_OK;
  torc__oreg_entry *old = lookup_locked(r, name);
  if (old) {
    st = torc_set_error(TORC_ERR_INVALID,
                        "%s: %s '%s' is already registered (by %s); a "
                        "second type cannot replace it — give the new type "
                        "another name",
                        r->fn, r->what, name,
                        old->owner ? torc__plugin_name(old->owner)
                                   : "the program");
  } else if (r->n == r->cap) {
    int cap = r->cap ? r->cap * 2 : 32;
    torc__oreg_entry *p = realloc(r->e, (size_t)cap * sizeof *p);
    if (p == NULL)
      st = torc_set_error(TORC_ERR_OOM, "out of memory registering %s '%s'",
                          r->what, name);
    else
      r->e = p, r->cap = cap;
  }
  if (st == TORC_OK) {
    r->e[r->n].type = type;
    r->e[r->n].name = name;
    r->e[r->n].owner = owner;
    r->n++;
    qsort(r->e, (size_t)r->n, sizeof *r->e, entry_cmp);
  }
  pthread_mutex_unlock(&r->lock);
  return st;
}

void torc__oreg_remove_owner(torc__oreg *r, struct torc__plugin *owner) {
  if (owner == NULL)
    return;
  pthread_mutex_lock(&r->lock);
  int o = 0;
  for (int i = 0; i < r->n; i++)
    if (r->e[i].owner != owner)
      r->e[o++] = r->e[i];
  r->n = o;
  if (r->n == 0) { /* the last plugin went: give the memory back */
    free(r->e);
    r->e = NULL;
    r->cap = 0;
  }
  pthread_mutex_unlock(&r->lock);
}

const void *torc__oreg_find(torc__oreg *r, const char *name) {
  if (name == NULL)
    return NULL;
  pthread_mutex_lock(&r->lock);
  torc__oreg_entry *e = lookup_locked(r, name);
  const void *t = e ? e->type : NULL;
  pthread_mutex_unlock(&r->lock);
  return t;
}

int torc__oreg_count(torc__oreg *r) {
  pthread_mutex_lock(&r->lock);
  int n = r->n;
  pthread_mutex_unlock(&r->lock);
  return n;
}

const void *torc__oreg_at(torc__oreg *r, int i) {
  pthread_mutex_lock(&r->lock);
  const void *t = i >= 0 && i < r->n ? r->e[i].type : NULL;
  pthread_mutex_unlock(&r->lock);
  return t;
}

const void *torc__oreg_lookup(torc__oreg *r, const char *name,
                              const char *kind) {
  pthread_mutex_lock(&r->lock);
  torc__oreg_entry *e = lookup_locked(r, name);
  const void *t = e ? e->type : NULL;
  if (t == NULL) {
    const char **names = malloc((size_t)(r->n + 1) * sizeof *names);
    char list[700] = "", hint[96] = "";
    size_t len = 0;
    for (int i = 0; i < r->n; i++) {
      if (names)
        names[i] = r->e[i].name;
      if (len + 40 < sizeof list)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                i ? ", " : "", r->e[i].name);
    }
    if (names)
      torc__suggest(name, names, r->n, hint, sizeof hint);
    free(names);
    int none = r->n == 0;
    pthread_mutex_unlock(&r->lock);
    if (none)
      torc_set_error(TORC_ERR_INVALID,
                     "unknown %s type '%s': no %s types are registered; "
                     "load the plugin that provides them (\"%s\") first",
                     kind, name, kind,
                     strcmp(kind, "loss") == 0 ? "losses" : "optim");
    else
      torc_set_error(TORC_ERR_INVALID,
                     "unknown %s type '%s'%s; the types are: %s (a plugin "
                     "may add more: load it first)",
                     kind, name, hint, list);
    return NULL;
  }
  pthread_mutex_unlock(&r->lock);
  return t;
}

void torc__optim_types_unregister_owner(struct torc__plugin *owner) {
  torc__oreg_remove_owner(&torc__loss_reg, owner);
  torc__oreg_remove_owner(&torc__optimizer_reg, owner);
  torc__oreg_remove_owner(&torc__scheduler_reg, owner);
}

torc_status torc__loss_type_register_owned(struct torc__plugin *owner,
                                           const torc_loss_type *t) {
  if (t == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_loss_type_register: the type "
                                         "is NULL");
  if (t->struct_size < offsetof(torc_loss_type, user))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_loss_type_register: loss type '%s' has "
                          "struct_size %zu; set it to sizeof(torc_loss_type)",
                          t->name ? t->name : "(null)", t->struct_size);
  if (t->forward == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_loss_type_register: loss type '%s' has no "
                          "forward; set it",
                          t->name ? t->name : "(null)");
  return torc__oreg_add(&torc__loss_reg, owner, t, t->name);
}

torc_status torc_loss_type_register(const torc_loss_type *type) {
  return torc__loss_type_register_owned(NULL, type);
}

const torc_loss_type *torc_loss_type_find(const char *name) {
  return torc__oreg_find(&torc__loss_reg, name);
}
int torc_loss_type_count(void) { return torc__oreg_count(&torc__loss_reg); }
const torc_loss_type *torc_loss_type_at(int i) {
  return torc__oreg_at(&torc__loss_reg, i);
}

/* ---- keys ---- */

int torc__optim_nkeys(const torc_module_key *keys) {
  int n = 0;
  while (keys && keys[n].name)
    n++;
  return n;
}

torc_status torc__optim_resolve(const char *type, const torc_module_key *keys,
                                const torc_module_key *extra,
                                const char *const *k, const char *const *v,
                                int n, const char *const *base,
                                const char **out) {
  int n1 = torc__optim_nkeys(keys), nk = n1 + torc__optim_nkeys(extra);
  const char **names = calloc((size_t)nk + 1, sizeof *names);
  if (names == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory building a '%s'", type);
  for (int j = 0; j < nk; j++) {
    names[j] = j < n1 ? keys[j].name : extra[j - n1].name;
    out[j] = NULL;
  }
  torc_status st = TORC_OK;
  for (int i = 0; i < n && st == TORC_OK; i++) {
    if (k[i] == NULL || v[i] == NULL) {
      st =
          torc_set_error(TORC_ERR_NULL, "%s: key or value %d is NULL", type, i);
      break;
    }
    int j = 0;
    while (j < nk && strcmp(k[i], names[j]) != 0)
      j++;
    if (j == nk) {
      char list[600] = "", hint[96] = "";
      size_t len = 0;
      for (int q = 0; q < nk && len + 40 < sizeof list; q++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                q ? ", " : "", names[q]);
      torc__suggest(k[i], names, nk, hint, sizeof hint);
      st = torc_set_error(TORC_ERR_INVALID,
                          "%s: unknown key '%s'%s; its keys are: %s", type,
                          k[i], hint, nk ? list : "(none)");
    } else if (out[j]) {
      st = torc_set_error(TORC_ERR_INVALID,
                          "%s: key '%s' is given twice ('%s' and '%s'); "
                          "keep one",
                          type, k[i], out[j], v[i]);
    } else {
      out[j] = v[i];
    }
  }
  for (int j = 0; j < nk && st == TORC_OK; j++) {
    const torc_module_key *key = j < n1 ? &keys[j] : &extra[j - n1];
    if (out[j] == NULL)
      out[j] = base ? base[j] : key->default_value;
    if (out[j] == NULL)
      st =
          torc_set_error(TORC_ERR_INVALID, "%s: key '%s' is required (%s)",
                         type, key->name, key->help ? key->help : "no default");
  }
  free(names);
  return st;
}

torc_status torc__spec_split(torc__spec *s, const char *type,
                             const char *spec) {
  memset(s, 0, sizeof *s);
  if (spec == NULL || spec[0] == '\0')
    return TORC_OK;
  s->buf = strdup(spec);
  if (s->buf == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory parsing '%s'", spec);
  for (char *save = NULL, *tok = strtok_r(s->buf, ", \t", &save); tok;
       tok = strtok_r(NULL, ", \t", &save)) {
    char *eq = strchr(tok, '=');
    if (eq == NULL) {
      if (s->n == 0)
        return torc_set_error(TORC_ERR_INVALID,
                              "%s: '%s' in \"%s\" is not key=value", type, tok,
                              spec);
      size_t l = strlen(s->v[s->n - 1]) + strlen(tok) + 2;
      char *nv = malloc(l);
      if (nv == NULL)
        return torc_set_error(TORC_ERR_OOM, "out of memory parsing '%s'", spec);
      snprintf(nv, l, "%s,%s", s->v[s->n - 1], tok);
      free(s->owned[s->n - 1]);
      s->owned[s->n - 1] = nv;
      s->v[s->n - 1] = nv;
      continue;
    }
    if (s->n == TORC__SPEC_MAX)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: more than %d keys in "
                            "\"%s\"",
                            type, TORC__SPEC_MAX, spec);
    *eq = '\0';
    if (tok[0] == '\0')
      return torc_set_error(TORC_ERR_INVALID, "%s: an empty key in \"%s\"",
                            type, spec);
    s->k[s->n] = tok;
    s->v[s->n] = eq + 1;
    s->n++;
  }
  return TORC_OK;
}

void torc__spec_free(torc__spec *s) {
  for (int i = 0; i < s->n; i++)
    free(s->owned[i]);
  free(s->buf);
  memset(s, 0, sizeof *s);
}

torc_status torc__optim_parse_double(const char *type, const char *key,
                                     const char *v, double *out) {
  char *end;
  errno = 0;
  double x = v ? strtod(v, &end) : 0;
  if (v == NULL || end == v || *end != '\0' || errno == ERANGE)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: key '%s' = '%s' is not a number; give one "
                          "such as 0.01 or 1e-3",
                          type, key, v ? v : "(null)");
  *out = x;
  return TORC_OK;
}

/* ---- losses ---- */

struct torc_loss {
  const torc_loss_type *type;
  void *state;
};

torc_loss *torc_loss_create(const char *type, const char *const *keys,
                            const char *const *values, int n) {
  if (type == NULL || n < 0 || (n > 0 && (keys == NULL || values == NULL))) {
    torc_set_error(TORC_ERR_NULL, "torc_loss_create: the type name (and the "
                                  "key and value arrays when n > 0) are "
                                  "required");
    return NULL;
  }
  const torc_loss_type *t = torc__oreg_lookup(&torc__loss_reg, type, "loss");
  if (t == NULL)
    return NULL;
  int nk = torc__optim_nkeys(t->keys);
  const char **vv = calloc((size_t)nk + 1, sizeof *vv);
  const char **kk = calloc((size_t)nk + 1, sizeof *kk);
  torc_loss *loss = calloc(1, sizeof *loss);
  torc_status st = TORC_OK;
  if (vv == NULL || kk == NULL || loss == NULL)
    st = torc_set_error(TORC_ERR_OOM, "out of memory building loss '%s'", type);
  if (st == TORC_OK)
    st = torc__optim_resolve(type, t->keys, NULL, keys, values, n, NULL, vv);
  if (st == TORC_OK) {
    for (int j = 0; j < nk; j++)
      kk[j] = t->keys[j].name;
    loss->type = t;
    if (t->create) {
      torc_clear_error();
      st = t->create(kk, vv, nk, t->user, &loss->state);
      if (st != TORC_OK && torc_last_status() == TORC_OK)
        torc_set_error(st, "%s: the loss's create failed without saying why",
                       type);
    }
  }
  free(vv), free(kk);
  if (st != TORC_OK) {
    free(loss);
    return NULL;
  }
  return loss;
}

torc_loss *torc_loss_build(const char *type, const char *spec) {
  torc__spec s;
  torc_status st = torc__spec_split(&s, type ? type : "loss", spec);
  torc_loss *loss = st ? NULL : torc_loss_create(type, s.k, s.v, s.n);
  torc__spec_free(&s);
  return loss;
}

void torc_loss_free(torc_loss *loss) {
  if (loss == NULL)
    return;
  if (loss->type->destroy && loss->state)
    loss->type->destroy(loss->state);
  free(loss);
}

const char *torc_loss_name(const torc_loss *loss) {
  return loss ? loss->type->name : NULL;
}

torc_tensor *torc_loss_forward(torc_loss *loss, const torc_tensor *input,
                               const torc_tensor *target) {
  if (input == NULL || target == NULL) {
    torc__null_input("torc_loss_forward");
    return NULL;
  }
  if (loss == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_loss_forward: the loss is NULL; "
                                  "check the torc_loss_build that made it");
    return NULL;
  }
  /* The type's temporaries go with a scope of its own. */
  int scope = torc_scope_begin();
  torc_tensor *out = loss->type->forward(loss->state, input, target);
  if (out)
    torc_scope_keep(out);
  torc_scope_end(scope);
  if (out == NULL) {
    torc_status st = torc_last_status();
    if (st == TORC_OK)
      st = TORC_ERR_INTERNAL;
    torc_set_error(st, "%s (in loss '%s')",
                   torc_last_error()[0] ? torc_last_error()
                                        : "the loss failed without saying "
                                          "why",
                   loss->type->name);
  }
  return out;
}
