/* core/state.c — state dicts: ordered name -> tensor maps with string
 * metadata, a module's state dict in PyTorch's order, and reading and
 * writing them as safetensors files. Loading into modules is in
 * state_load.c, checkpoints in checkpoint.c.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "state_internal.h"
#include "torc/safetensors.h"

/* ------------------------------------------------------------------------
 * The map
 * ---------------------------------------------------------------------- */

/* FNV-1a. */
static uint64_t str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ull;
  }
  return h;
}

/* Index of `name`, or -1. */
int torc__sd_find(const torc_state_dict *sd, const char *name) {
  if (sd->n_slots == 0)
    return -1;
  size_t mask = sd->n_slots - 1;
  for (size_t i = (size_t)str_hash(name) & mask;; i = (i + 1) & mask) {
    int k = sd->slots[i];
    if (k < 0)
      return -1;
    if (strcmp(sd->names[k], name) == 0)
      return k;
  }
}

static void sd_slot_put(torc_state_dict *sd, int k) {
  size_t mask = sd->n_slots - 1;
  size_t i = (size_t)str_hash(sd->names[k]) & mask;
  while (sd->slots[i] >= 0)
    i = (i + 1) & mask;
  sd->slots[i] = k;
}

/* Makes room for one more entry; 0 on OOM (nothing changed then). */
static int sd_reserve(torc_state_dict *sd) {
  if (sd->n < sd->cap)
    return 1;
  int cap = sd->cap ? sd->cap * 2 : 16;
  char **names = torc__realloc(sd->names, (size_t)cap * sizeof *names);
  if (names == NULL)
    return 0;
  sd->names = names;
  torc_tensor **ts = torc__realloc(sd->tensors, (size_t)cap * sizeof *ts);
  if (ts == NULL)
    return 0;
  sd->tensors = ts;
  size_t n_slots = (size_t)cap * 2;
  int *slots = torc__malloc(n_slots * sizeof *slots);
  if (slots == NULL)
    return 0;
  torc__free(sd->slots);
  sd->slots = slots;
  sd->n_slots = n_slots;
  for (size_t i = 0; i < n_slots; i++)
    slots[i] = -1;
  for (int k = 0; k < sd->n; k++)
    sd_slot_put(sd, k);
  sd->cap = cap;
  return 1;
}

torc_state_dict *torc_state_dict_new(void) {
  torc_state_dict *sd = torc__calloc(1, sizeof *sd);
  if (sd == NULL)
    torc_set_error(TORC_ERR_OOM, "torc_state_dict_new: out of memory");
  return sd;
}

void torc_state_dict_free(torc_state_dict *sd) {
  if (sd == NULL)
    return;
  for (int i = 0; i < sd->n; i++) {
    torc__free(sd->names[i]);
    torc_release(sd->tensors[i]);
  }
  for (int i = 0; i < sd->n_meta; i++) {
    torc__free(sd->meta_keys[i]);
    torc__free(sd->meta_values[i]);
  }
  torc__free(sd->names);
  torc__free(sd->tensors);
  torc__free(sd->slots);
  torc__free(sd->meta_keys);
  torc__free(sd->meta_values);
  torc__free(sd);
}

torc_status torc_state_dict_set(torc_state_dict *sd, const char *name,
                                torc_tensor *t) {
  const char *fn = "torc_state_dict_set";
  if (t == NULL)
    return torc__null_input(fn);
  if (sd == NULL || name == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the %s is NULL", fn,
                          sd ? "name" : "state dict");
  if (name[0] == '\0')
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the name is empty; every tensor needs a "
                          "non-empty name",
                          fn);
  if (strcmp(name, "__metadata__") == 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the name \"__metadata__\" is reserved for the "
                          "safetensors metadata; rename the tensor",
                          fn);
  if (torc__sd_find(sd, name) >= 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: '%s' is already in the state dict; a key "
                          "collision is never resolved silently: use another "
                          "name (a prefix such as \"model.\") or another dict",
                          fn, name);
  char *copy = torc__strdup(name);
  if (copy == NULL || !sd_reserve(sd)) {
    torc__free(copy);
    return torc_set_error(TORC_ERR_OOM, "%s: out of memory adding '%s'", fn,
                          name);
  }
  sd->names[sd->n] = copy;
  sd->tensors[sd->n] = torc_retain(t);
  sd_slot_put(sd, sd->n);
  sd->n++;
  return TORC_OK;
}

int torc_state_dict_count(const torc_state_dict *sd) { return sd ? sd->n : 0; }

const char *torc_state_dict_name(const torc_state_dict *sd, int i) {
  return sd && i >= 0 && i < sd->n ? sd->names[i] : NULL;
}

torc_tensor *torc_state_dict_tensor(const torc_state_dict *sd, int i) {
  return sd && i >= 0 && i < sd->n ? sd->tensors[i] : NULL;
}

torc_tensor *torc_state_dict_get(const torc_state_dict *sd, const char *name) {
  if (sd == NULL || name == NULL)
    return NULL;
  int k = torc__sd_find(sd, name);
  return k >= 0 ? sd->tensors[k] : NULL;
}

/* ---- metadata ---- */

static int meta_find(const torc_state_dict *sd, const char *key) {
  for (int i = 0; i < sd->n_meta; i++)
    if (strcmp(sd->meta_keys[i], key) == 0)
      return i;
  return -1;
}

torc_status torc_state_dict_set_meta(torc_state_dict *sd, const char *key,
                                     const char *value) {
  const char *fn = "torc_state_dict_set_meta";
  if (sd == NULL || key == NULL || value == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the %s is NULL", fn,
                          sd == NULL    ? "state dict"
                          : key == NULL ? "key"
                                        : "value");
  if (key[0] == '\0')
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the key is empty; give the metadata a name", fn);
  char *v = torc__strdup(value);
  if (v == NULL)
    return torc_set_error(TORC_ERR_OOM, "%s: out of memory for '%s'", fn, key);
  int i = meta_find(sd, key);
  if (i >= 0) {
    torc__free(sd->meta_values[i]);
    sd->meta_values[i] = v;
    return TORC_OK;
  }
  char *k = torc__strdup(key);
  if (k == NULL)
    goto oom;
  if (sd->n_meta == sd->meta_cap) {
    int cap = sd->meta_cap ? sd->meta_cap * 2 : 8;
    char **ks = torc__realloc(sd->meta_keys, (size_t)cap * sizeof *ks);
    if (ks == NULL)
      goto oom;
    sd->meta_keys = ks;
    char **vs = torc__realloc(sd->meta_values, (size_t)cap * sizeof *vs);
    if (vs == NULL)
      goto oom;
    sd->meta_values = vs;
    sd->meta_cap = cap;
  }
  sd->meta_keys[sd->n_meta] = k;
  sd->meta_values[sd->n_meta] = v;
  sd->n_meta++;
  return TORC_OK;
oom:
  torc__free(k);
  torc__free(v);
  return torc_set_error(TORC_ERR_OOM, "%s: out of memory for '%s'", fn, key);
}

const char *torc_state_dict_meta(const torc_state_dict *sd, const char *key) {
  if (sd == NULL || key == NULL)
    return NULL;
  int i = meta_find(sd, key);
  return i >= 0 ? sd->meta_values[i] : NULL;
}

int torc_state_dict_meta_count(const torc_state_dict *sd) {
  return sd ? sd->n_meta : 0;
}

const char *torc_state_dict_meta_key(const torc_state_dict *sd, int i) {
  return sd && i >= 0 && i < sd->n_meta ? sd->meta_keys[i] : NULL;
}

torc_status torc_state_dict_set_i64(torc_state_dict *sd, const char *key,
                                    int64_t value) {
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRId64, value);
  return torc_state_dict_set_meta(sd, key, buf);
}

/* Some metadata keys of sd for a message ("a, b, c" or "none"). */
static const char *meta_key_list(const torc_state_dict *sd, char *buf,
                                 size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < sd->n_meta && len + 8 < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
                            sd->meta_keys[i]);
  if (len >= size - 8 && size > 8)
    strcpy(buf + size - 8, ", ...");
  return sd->n_meta ? buf : "none";
}

torc_status torc_state_dict_get_i64(const torc_state_dict *sd, const char *key,
                                    int64_t *out) {
  const char *fn = "torc_state_dict_get_i64";
  if (sd == NULL || key == NULL || out == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the %s is NULL", fn,
                          sd == NULL    ? "state dict"
                          : key == NULL ? "key"
                                        : "output pointer");
  const char *v = torc_state_dict_meta(sd, key);
  if (v == NULL) {
    char list[256];
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: no metadata key '%s' (the dict has: %s)", fn,
                          key, meta_key_list(sd, list, sizeof list));
  }
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (v[0] == '\0' || *end != '\0' || errno == ERANGE || v[0] == ' ')
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: metadata '%s' is \"%s\", not a 64-bit decimal "
                          "integer",
                          fn, key, v);
  *out = (int64_t)x;
  return TORC_OK;
}

/* ------------------------------------------------------------------------
 * A module's state dict
 * ---------------------------------------------------------------------- */

/* a + b + c, malloc'ed. */
char *torc__sd_join3(const char *a, const char *b, const char *c) {
  size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
  char *s = torc__malloc(la + lb + lc + 1);
  if (s) {
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
  }
  return s;
}

/* Adds m's own entries of a listing (names without a dot: those below m's
 * children have one) under pfx. */
static torc_status add_own(torc_state_dict *out, const char *pfx,
                           torc_named_tensor *list, int n) {
  torc_status s = TORC_OK;
  for (int i = 0; i < n && s == TORC_OK; i++) {
    if (strchr(list[i].name, '.'))
      continue;
    char *name = torc__sd_join3(pfx, list[i].name, "");
    s = name ? torc_state_dict_set(out, name, list[i].tensor)
             : torc_set_error(TORC_ERR_OOM, "torc_module_state_dict: out of "
                                            "memory");
    torc__free(name);
  }
  return s;
}

/* PyTorch's state_dict order: for each module depth first, its own
 * parameters (in registration order), then its own persistent buffers,
 * then its children. (The two listings of module.h each run over the whole
 * tree, so they are filtered to m's own entries here.) */
torc_status torc__sd_walk(const torc_module *m, const char *pfx,
                          torc_state_dict *out) {
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(m, &list);
  if (n < 0)
    return torc_set_error(TORC_ERR_OOM, "torc_module_state_dict: out of "
                                        "memory listing parameters");
  torc_status s = add_own(out, pfx, list, n);
  torc_named_tensors_free(list, n);
  if (s)
    return s;
  list = NULL;
  n = torc_module_named_buffers(m, 1, &list);
  if (n < 0)
    return torc_set_error(TORC_ERR_OOM, "torc_module_state_dict: out of "
                                        "memory listing buffers");
  s = add_own(out, pfx, list, n);
  torc_named_tensors_free(list, n);
  for (int i = 0; s == TORC_OK && i < torc_module_child_count(m); i++) {
    char *cp = torc__sd_join3(pfx, torc_module_child_name(m, i), ".");
    s = cp ? torc__sd_walk(torc_module_child_at(m, i), cp, out)
           : torc_set_error(TORC_ERR_OOM, "torc_module_state_dict: out of "
                                          "memory");
    torc__free(cp);
  }
  return s;
}

torc_status torc_module_state_dict(const torc_module *m, const char *prefix,
                                   torc_state_dict *sd) {
  const char *fn = "torc_module_state_dict";
  if (m == NULL) /* keeps a constructor's error */
    return torc_last_status()
               ? torc_last_status()
               : torc_set_error(TORC_ERR_NULL, "%s: the module is NULL", fn);
  if (sd == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the state dict is NULL", fn);
  torc_state_dict *tmp = torc_state_dict_new();
  if (tmp == NULL)
    return TORC_ERR_OOM;
  torc_status s = torc__sd_walk(m, prefix ? prefix : "", tmp);
  for (int i = 0; s == TORC_OK && i < tmp->n; i++)
    if (torc__sd_find(sd, tmp->names[i]) >= 0)
      s = torc_set_error(TORC_ERR_INVALID,
                         "%s: '%s' of the %s module is already in the state "
                         "dict; nothing was added (use another prefix, or "
                         "another dict)",
                         fn, tmp->names[i], torc_module_type_name(m));
  int added = 0;
  for (int i = 0; s == TORC_OK && i < tmp->n; i++)
    if ((s = torc_state_dict_set(sd, tmp->names[i], tmp->tensors[i])) ==
        TORC_OK)
      added++;
  if (s != TORC_OK && added > 0) { /* out of memory midway: take it back */
    for (int k = sd->n - added; k < sd->n; k++) {
      torc__free(sd->names[k]);
      torc_release(sd->tensors[k]);
    }
    sd->n -= added;
    for (size_t j = 0; j < sd->n_slots; j++)
      sd->slots[j] = -1;
    for (int k = 0; k < sd->n; k++)
      sd_slot_put(sd, k);
  }
  torc_state_dict_free(tmp);
  return s;
}

/* ------------------------------------------------------------------------
 * Files
 * ---------------------------------------------------------------------- */

torc_status torc_state_dict_save(const torc_state_dict *sd, const char *path) {
  if (sd == NULL || path == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_state_dict_save: the %s is NULL",
                          sd ? "path" : "state dict");
  return torc_safetensors_save(path, (const char *const *)sd->names,
                               (const torc_tensor *const *)sd->tensors, sd->n,
                               (const char *const *)sd->meta_keys,
                               (const char *const *)sd->meta_values,
                               sd->n_meta);
}

/* Every tensor and metadata entry of an open file, tensors on dev. */
torc_state_dict *torc__sd_read(const torc_safetensors *st, torc_device dev) {
  torc_state_dict *sd = torc_state_dict_new();
  if (sd == NULL)
    return NULL;
  torc_status s = TORC_OK;
  for (int i = 0; s == TORC_OK && i < torc_safetensors_metadata_count(st);
       i++) {
    const char *k = torc_safetensors_metadata_key(st, i);
    s = torc_state_dict_set_meta(sd, k, torc_safetensors_metadata(st, k));
  }
  /* The copies belong to this scope; the dict holds its own references. */
  int scope = torc_scope_begin();
  for (int i = 0; s == TORC_OK && i < torc_safetensors_count(st); i++) {
    const char *name = torc_safetensors_name(st, i);
    torc_tensor *t = torc_safetensors_get(st, name, dev);
    s = t ? torc_state_dict_set(sd, name, t) : torc_last_status();
  }
  torc_scope_end(scope);
  if (s != TORC_OK) {
    torc_state_dict_free(sd);
    return NULL;
  }
  return sd;
}

torc_state_dict *torc_state_dict_load(const char *path, torc_device dev) {
  if (path == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_state_dict_load: the path is NULL");
    return NULL;
  }
  torc_safetensors *st = torc_safetensors_open(path);
  if (st == NULL)
    return NULL;
  torc_state_dict *sd = torc__sd_read(st, dev);
  torc_safetensors_close(st);
  return sd;
}
