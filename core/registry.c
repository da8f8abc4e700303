/* core/registry.c — the registries of named types (module types, data
 * sources, losses, optimizers, schedulers): a name-ordered, owner-tracked
 * table with "did you mean" lookups, the resolution of key/value pairs
 * against a type's keys, and the "key=value, ..." spec splitter.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "registry.h"

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
                                   : r->nobody);
  } else if (r->n == r->cap) {
    int cap = r->cap ? r->cap * 2 : 32;
    torc__oreg_entry *p = torc__realloc(r->e, (size_t)cap * sizeof *p);
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
    torc__free(r->e);
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
    const char **names = torc__malloc((size_t)(r->n + 1) * sizeof *names);
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
    torc__free(names);
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

/* ---- keys and specs ---- */

int torc__keys_count(const torc_module_key *keys) {
  int n = 0;
  while (keys && keys[n].name)
    n++;
  return n;
}

torc_status torc__keys_resolve(const char *type, const torc_module_key *keys,
                                const torc_module_key *extra,
                                const char *const *k, const char *const *v,
                                int n, const char *const *base,
                                const char **out) {
  int n1 = torc__keys_count(keys), nk = n1 + torc__keys_count(extra);
  /* names[j]: key j; names[nk + j]: the name it was given as; then the
   * candidates for "did you mean": the names and PyTorch's for them */
  const char **names = torc__calloc(4 * (size_t)nk + 1, sizeof *names);
  if (names == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory building a '%s'", type);
  const char **given = names + nk, **cands = names + 2 * nk;
  int nc = 0;
  for (int j = 0; j < nk; j++) {
    names[j] = j < n1 ? keys[j].name : extra[j - n1].name;
    out[j] = NULL;
    cands[nc++] = names[j];
  }
  for (int j = 0; j < nk; j++) {
    const char *alias = torc_config_key_alias(type, names[j]);
    if (alias)
      cands[nc++] = alias;
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
    int accepted = 0, near = j < nk ? -1
                                    : torc__key_alias(type, k[i], names, nk,
                                                      &accepted);
    if (near >= 0 && accepted)
      j = near; /* PyTorch's name for the key */
    if (j == nk) {
      char list[600] = "", hint[96] = "";
      size_t len = 0;
      for (int q = 0; q < nk && len + 40 < sizeof list; q++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                q ? ", " : "", names[q]);
      if (near >= 0)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", names[near]);
      else
        torc__suggest(k[i], cands, nc, hint, sizeof hint);
      st = torc_set_error(TORC_ERR_INVALID,
                          "%s: unknown key '%s'%s; its keys are: %s", type,
                          k[i], hint, nk ? list : "(none)");
    } else if (out[j] && strcmp(given[j], k[i]) != 0) {
      int first_alias = strcmp(given[j], names[j]) != 0;
      st = torc_set_error(TORC_ERR_INVALID,
                          "%s: key '%s' is given twice, as '%s = %s' and as "
                          "'%s = %s' ('%s' is PyTorch's name for it); keep "
                          "one",
                          type, names[j], given[j], out[j], k[i], v[i],
                          first_alias ? given[j] : k[i]);
    } else if (out[j]) {
      st = torc_set_error(TORC_ERR_INVALID,
                          "%s: key '%s' is given twice ('%s' and '%s'); "
                          "keep one",
                          type, k[i], out[j], v[i]);
    } else {
      out[j] = v[i];
      given[j] = k[i];
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
  torc__free(names);
  return st;
}

torc_status torc__spec_split(torc__spec *s, const char *type,
                             const char *spec) {
  memset(s, 0, sizeof *s);
  if (spec == NULL || spec[0] == '\0')
    return TORC_OK;
  s->buf = torc__strdup(spec);
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
      char *nv = torc__malloc(l);
      if (nv == NULL)
        return torc_set_error(TORC_ERR_OOM, "out of memory parsing '%s'", spec);
      snprintf(nv, l, "%s,%s", s->v[s->n - 1], tok);
      torc__free(s->owned[s->n - 1]);
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
    torc__free(s->owned[i]);
  torc__free(s->buf);
  memset(s, 0, sizeof *s);
}

