/* core/module_params.c — a module tree's parameters and buffers by dotted
 * name (PyTorch's order), their counts, the check that all are on one
 * device, and freezing by name pattern (torc/module.h). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"

/* ---- enumeration ---- */

typedef struct nlist {
  torc_named_tensor *v;
  int n, cap;
  int oom;
} nlist;

static void nlist_add(nlist *l, const char *prefix, const char *name,
                      torc_tensor *t) {
  if (l->oom)
    return;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 32;
    torc_named_tensor *p = torc__realloc(l->v, (size_t)cap * sizeof *p);
    if (p == NULL) {
      l->oom = 1;
      return;
    }
    l->v = p;
    l->cap = cap;
  }
  size_t n = strlen(prefix) + strlen(name) + 2;
  char *s = torc__malloc(n);
  if (s == NULL) {
    l->oom = 1;
    return;
  }
  snprintf(s, n, "%s%s%s", prefix, prefix[0] ? "." : "", name);
  l->v[l->n].name = s;
  l->v[l->n].tensor = t;
  l->n++;
}

static void walk_named(const torc_module *m, const char *prefix, int params,
                       int persistent_only, nlist *l) {
  if (params)
    for (int i = 0; i < m->n_params; i++)
      nlist_add(l, prefix, m->params[i].name, m->params[i].t);
  else
    for (int i = 0; i < m->n_bufs; i++)
      if (!persistent_only || m->bufs[i].persistent)
        nlist_add(l, prefix, m->bufs[i].name, m->bufs[i].t);
  for (int i = 0; i < m->n_kids && !l->oom; i++) {
    size_t n = strlen(prefix) + strlen(m->kids[i].name) + 2;
    char *p = torc__malloc(n);
    if (p == NULL) {
      l->oom = 1;
      return;
    }
    snprintf(p, n, "%s%s%s", prefix, prefix[0] ? "." : "", m->kids[i].name);
    walk_named(m->kids[i].m, p, params, persistent_only, l);
    torc__free(p);
  }
}

static int named(const torc_module *m, int params, int persistent_only,
                 torc_named_tensor **out) {
  if (out)
    *out = NULL;
  if (m == NULL || out == NULL) {
    torc__null_input("torc_module_named_parameters");
    return -1;
  }
  nlist l = {0};
  walk_named(m, "", params, persistent_only, &l);
  if (l.oom) {
    torc_named_tensors_free(l.v, l.n);
    torc_set_error(TORC_ERR_OOM, "out of memory listing the tensors of a "
                                 "module");
    return -1;
  }
  *out = l.v;
  return l.n;
}

int torc_module_named_parameters(const torc_module *m,
                                 torc_named_tensor **out) {
  return named(m, 1, 0, out);
}

int torc_module_named_buffers(const torc_module *m, int persistent_only,
                              torc_named_tensor **out) {
  return named(m, 0, persistent_only, out);
}

void torc_named_tensors_free(torc_named_tensor *list, int n) {
  if (list == NULL)
    return;
  for (int i = 0; i < n; i++)
    torc__free(list[i].name);
  torc__free(list);
}

static void count_params(const torc_module *m, int trainable, int64_t *n) {
  for (int i = 0; i < m->n_params; i++) {
    const torc_tensor *t = m->params[i].t;
    if (!trainable || t->requires_grad)
      *n += torc__numel(t->shape, t->ndim);
  }
  for (int i = 0; i < m->n_kids; i++)
    count_params(m->kids[i].m, trainable, n);
}

int64_t torc_module_parameter_count(const torc_module *m, int trainable_only) {
  int64_t n = 0;
  if (m)
    count_params(m, trainable_only, &n);
  return n;
}

/* ---- device check, freezing ---- */

torc_status torc_module_check_device(const torc_module *m, torc_device dev) {
  if (m == NULL)
    return torc__null_input("torc_module_check_device");
  torc_named_tensor *p = NULL, *b = NULL;
  int np = torc_module_named_parameters(m, &p);
  int nb = torc_module_named_buffers(m, 0, &b);
  if (np < 0 || nb < 0) {
    torc_named_tensors_free(p, np);
    torc_named_tensors_free(b, nb);
    return torc_last_status();
  }
  char list[700] = "";
  size_t len = 0;
  int bad = 0, shown = 0;
  char dn[32], tn[32];
  torc_device_str(dev, dn, sizeof dn);
  for (int i = 0; i < np + nb; i++) {
    torc_named_tensor *e = i < np ? &p[i] : &b[i - np];
    torc_device d = e->tensor->storage->device;
    if (torc_device_eq(d, dev))
      continue;
    bad++;
    torc_device_str(d, tn, sizeof tn);
    int w = snprintf(NULL, 0, "%s%s on %s", shown ? ", " : "", e->name, tn);
    if (len + (size_t)w + 20 < sizeof list) {
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s on %s",
                              shown ? ", " : "", e->name, tn);
      shown++;
    }
  }
  torc_status st = TORC_OK;
  if (bad) {
    char more[40] = "";
    if (bad > shown)
      snprintf(more, sizeof more, " and %d more", bad - shown);
    st = torc_set_error(TORC_ERR_DEVICE,
                        "%d tensor%s of the model %s not on %s: %s%s; move "
                        "the whole model with torc_module_to(model, %s)",
                        bad, bad == 1 ? "" : "s", bad == 1 ? "is" : "are", dn,
                        list, more, dn);
  }
  torc_named_tensors_free(p, np);
  torc_named_tensors_free(b, nb);
  return st;
}

int torc_module_freeze(torc_module *m, const char *pattern, int freeze) {
  if (m == NULL || pattern == NULL) {
    torc__null_input("torc_module_freeze");
    return -1;
  }
  torc_named_tensor *p = NULL;
  int np = torc_module_named_parameters(m, &p);
  if (np < 0)
    return -1;
  int hits = 0;
  for (int i = 0; i < np; i++)
    if (fnmatch(pattern, p[i].name, 0) == 0)
      hits++;
  if (hits == 0) {
    char list[600] = "";
    size_t len = 0;
    int i = 0;
    for (; i < np && len + 60 < sizeof list; i++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                              i ? ", " : "", p[i].name);
    if (i < np)
      snprintf(list + len, sizeof list - len, ", ... (%d in all)", np);
    torc_set_error(TORC_ERR_INVALID,
                   "torc_module_%s: pattern '%s' matches no parameter; the "
                   "parameters are: %s",
                   freeze ? "freeze" : "unfreeze", pattern,
                   np ? list : "(none)");
    torc_named_tensors_free(p, np);
    return -1;
  }
  for (int i = 0; i < np; i++)
    if (fnmatch(pattern, p[i].name, 0) == 0)
      torc_set_requires_grad(p[i].tensor, !freeze);
  torc_named_tensors_free(p, np);
  return hits;
}
