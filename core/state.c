/* core/state.c — state dicts (ordered name -> tensor maps with string
 * metadata), loading them into modules all-or-nothing with PyTorch's
 * strict / non-strict rules, and checkpoints: a tagged state dict holding
 * the model, RNG states and counters, saved atomically as safetensors.
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
#include "torc/safetensors.h"

/* ------------------------------------------------------------------------
 * The map
 * ---------------------------------------------------------------------- */

struct torc_state_dict {
  int n, cap;
  char **names;
  torc_tensor **tensors; /* one reference each */
  int *slots;            /* open addressing over names: index or -1 */
  size_t n_slots;        /* a power of two, 2 * cap; 0 before the first set */
  int n_meta, meta_cap;
  char **meta_keys, **meta_values;
};

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
static int sd_find(const torc_state_dict *sd, const char *name) {
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
  if (sd_find(sd, name) >= 0)
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
  int k = sd_find(sd, name);
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
static char *join3(const char *a, const char *b, const char *c) {
  size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
  char *s = torc__malloc(la + lb + lc + 1);
  if (s) {
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
  }
  return s;
}

static int starts_with(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

/* Adds m's own entries of a listing (names without a dot: those below m's
 * children have one) under pfx. */
static torc_status add_own(torc_state_dict *out, const char *pfx,
                           torc_named_tensor *list, int n) {
  torc_status s = TORC_OK;
  for (int i = 0; i < n && s == TORC_OK; i++) {
    if (strchr(list[i].name, '.'))
      continue;
    char *name = join3(pfx, list[i].name, "");
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
static torc_status walk(const torc_module *m, const char *pfx,
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
    char *cp = join3(pfx, torc_module_child_name(m, i), ".");
    s = cp ? walk(torc_module_child_at(m, i), cp, out)
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
  torc_status s = walk(m, prefix ? prefix : "", tmp);
  for (int i = 0; s == TORC_OK && i < tmp->n; i++)
    if (sd_find(sd, tmp->names[i]) >= 0)
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
static torc_state_dict *load_handle(const torc_safetensors *st,
                                    torc_device dev) {
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
  torc_state_dict *sd = load_handle(st, dev);
  torc_safetensors_close(st);
  return sd;
}

/* ------------------------------------------------------------------------
 * Loading into a module
 * ---------------------------------------------------------------------- */

void torc_load_report_clear(torc_load_report *r) {
  if (r == NULL)
    return;
  for (int i = 0; i < r->n_missing; i++)
    torc__free(r->missing[i]);
  for (int i = 0; i < r->n_unexpected; i++)
    torc__free(r->unexpected[i]);
  for (int i = 0; i < r->n_mismatched; i++)
    torc__free(r->mismatched[i]);
  torc__free(r->missing);
  torc__free(r->unexpected);
  torc__free(r->mismatched);
  memset(r, 0, sizeof *r);
}

/* A growable list of malloc'ed strings. */
typedef struct strlist {
  int n, cap;
  char **v;
} strlist;

static int strlist_add(strlist *l, char *s) { /* takes s; 0 on OOM */
  if (s == NULL)
    return 0;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 8;
    char **v = torc__realloc(l->v, (size_t)cap * sizeof *v);
    if (v == NULL) {
      torc__free(s);
      return 0;
    }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = s;
  return 1;
}

static void strlist_free(strlist *l) {
  for (int i = 0; i < l->n; i++)
    torc__free(l->v[i]);
  torc__free(l->v);
  memset(l, 0, sizeof *l);
}

static char *xprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? torc__malloc((size_t)n + 1) : NULL;
  if (s) {
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  return s;
}

/* "title (n): a, b, c" within `budget` characters: items that do not fit
 * become ", ... and K more". Written to buf (at least budget + 1 bytes);
 * returns 1 if something was left out. */
static int render_list(char *buf, size_t budget, const char *title,
                       const strlist *l) {
  size_t len = (size_t)snprintf(buf, budget + 1, "%s (%d): ", title, l->n);
  if (len > budget)
    len = budget;
  size_t full = len;
  for (int i = 0; i < l->n; i++)
    full += strlen(l->v[i]) + (i ? 2 : 0);
  if (full <= budget) {
    for (int i = 0; i < l->n; i++)
      len += (size_t)snprintf(buf + len, budget + 1 - len, "%s%s",
                              i ? ", " : "", l->v[i]);
    return 0;
  }
  for (int i = 0; i < l->n; i++) {
    size_t item = strlen(l->v[i]) + (i ? 2 : 0);
    /* Room to say how many are left out, unless this is the last one. */
    size_t tail = i + 1 < l->n ? 32 : 0;
    if (len + item + tail > budget) {
      snprintf(buf + len, budget + 1 - len, "%s... and %d more", i ? ", " : "",
               l->n - i);
      return 1;
    }
    len += (size_t)snprintf(buf + len, budget + 1 - len, "%s%s", i ? ", " : "",
                            l->v[i]);
  }
  return 0;
}

static size_t list_len(const char *title, const strlist *l) {
  size_t len = strlen(title) + 16;
  for (int i = 0; i < l->n; i++)
    len += strlen(l->v[i]) + 2;
  return len;
}

/* The message is one sentence in torc_last_error (1024 bytes): the three
 * lists share what the fixed parts leave, shorter lists first so that the
 * space one does not use goes to the others. */
#define MSG_MAX 1000

static torc_status load_error(const char *what, const torc_module *m,
                              const strlist *missing, const strlist *unexpected,
                              const strlist *mismatched, int module_hint,
                              int any_dtype, int any_shape) {
  char fix[512];
  size_t fl = 0;
  fix[0] = '\0';
  if (module_hint)
    fl += (size_t)snprintf(
        fix + fl, sizeof fix - fl,
        " The unexpected keys start with \"module.\" (a state dict saved "
        "from DataParallel / DistributedDataParallel): set "
        "torc_load_opts.strip_module_prefix = 1 to strip it.");
  else if (missing->n || unexpected->n)
    fl += (size_t)snprintf(fix + fl, sizeof fix - fl,
                           " Load a state dict of the same architecture, or "
                           "set torc_load_opts.non_strict = 1 to load only "
                           "the keys that match.");
  if (any_dtype & 1)
    fl += (size_t)snprintf(fix + fl, sizeof fix - fl,
                           " Set torc_load_opts.allow_dtype_cast = 1 to "
                           "convert floating tensors.");
  if (any_dtype & 2)
    fl += (size_t)snprintf(fix + fl, sizeof fix - fl,
                           " Integer and bool tensors are never cast: convert "
                           "them in the state dict (torc_to_dtype).");
  if (any_shape)
    snprintf(fix + fl, sizeof fix - fl,
             " A shape mismatch is an error even with non_strict: the "
             "architectures differ.");
  char head[256];
  snprintf(head, sizeof head,
           "%s: the state dict does not fit the %s module "
           "(nothing was loaded): ",
           what, torc_module_type_name(m));
  const char *titles[3] = {"missing", "unexpected", "mismatched"};
  const strlist *lists[3] = {missing, unexpected, mismatched};
  size_t want[3], give[3] = {0, 0, 0};
  int order[3] = {0, 1, 2};
  for (int i = 0; i < 3; i++)
    want[i] = lists[i]->n ? list_len(titles[i], lists[i]) : 0;
  for (int i = 1; i < 3; i++) /* sort by want */
    for (int j = i; j > 0 && want[order[j - 1]] > want[order[j]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  size_t fixed = strlen(head) + strlen(fix) + 64;
  size_t room = fixed < MSG_MAX ? MSG_MAX - fixed : 0;
  int left = (lists[0]->n > 0) + (lists[1]->n > 0) + (lists[2]->n > 0);
  for (int i = 0; i < 3; i++) {
    int j = order[i];
    if (!lists[j]->n)
      continue;
    size_t share = room / (size_t)left--;
    give[j] = want[j] < share ? want[j] : share;
    room -= give[j];
  }
  char parts[3][MSG_MAX + 1];
  int cut = 0;
  for (int i = 0; i < 3; i++) {
    parts[i][0] = '\0';
    if (lists[i]->n)
      cut |= render_list(parts[i], give[i], titles[i], lists[i]);
  }
  char body[3 * (MSG_MAX + 1) + 8];
  size_t bl = 0;
  body[0] = '\0';
  for (int i = 0; i < 3; i++)
    if (parts[i][0])
      bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s%s",
                             bl ? "; " : "", parts[i]);
  return torc_set_error(TORC_ERR_INVALID, "%s%s%s.%s", head, body,
                        cut ? " (every key is in the torc_load_report)" : "",
                        fix);
}

/* Copies a strlist into report arrays (taking the strings). */
static void give_list(strlist *l, int *n, char ***v) {
  *n = l->n;
  *v = l->v;
  memset(l, 0, sizeof *l);
}

/* The loader behind every load: `what` names the caller (and file) in
 * messages. */
static torc_status load_into(torc_module *m, const torc_state_dict *sd,
                             const torc_load_opts *opts,
                             torc_load_report *report, const char *what) {
  torc_load_opts o = {0};
  if (opts)
    o = *opts;
  if (report)
    memset(report, 0, sizeof *report);
  if (m == NULL)
    return torc_last_status()
               ? torc_last_status()
               : torc_set_error(TORC_ERR_NULL, "%s: the module is NULL", what);
  if (sd == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the state dict is NULL", what);

  /* Lazy parameters: nothing to load them into yet. */
  const char *lazy[8] = {NULL};
  int n_lazy = torc__module_lazy_paths(m, lazy, 8);
  if (n_lazy > 0) {
    char list[512];
    size_t len = 0;
    list[0] = '\0';
    for (int i = 0; i < 8 && lazy[i]; i++)
      len +=
          (size_t)snprintf(list + len, sizeof list - len, "%s'%s'",
                           i ? ", " : "", lazy[i][0] ? lazy[i] : "(the root)");
    if (len >= sizeof list)
      strcpy(list + sizeof list - 5, "...");
    else if (n_lazy > 8)
      snprintf(list + len, sizeof list - len, " and %d more", n_lazy - 8);
    return torc_set_error(
        TORC_ERR_INVALID,
        "%s: the %s module has layers whose parameters are created at the "
        "first forward (lazy: %s) and do not exist yet; run one forward "
        "first (e.g. torc_module_summary(m, example_batch)), then load",
        what, torc_module_type_name(m), len ? list : "some layer");
  }

  torc_state_dict *model = torc_state_dict_new();
  torc_state_dict *cand = torc_state_dict_new();
  int *orig = torc__malloc((size_t)(sd->n ? sd->n : 1) * sizeof *orig);
  char *used = torc__calloc((size_t)(sd->n ? sd->n : 1), 1);
  int *pair = NULL; /* pair[j]: candidate loaded into model entry j, or -1 */
  strlist missing = {0}, unexpected = {0}, mismatched = {0};
  torc_status s = TORC_OK;
  if (model == NULL || cand == NULL || orig == NULL || used == NULL) {
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
    goto out;
  }
  if ((s = walk(m, "", model)) != TORC_OK)
    goto out;
  if ((pair = torc__malloc((size_t)(model->n ? model->n : 1) * sizeof *pair)) ==
      NULL) {
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
    goto out;
  }

  /* The keys considered, with the prefixes removed. */
  size_t plen = o.prefix ? strlen(o.prefix) : 0;
  for (int i = 0; i < sd->n; i++) {
    const char *name = sd->names[i];
    if (o.prefix && !starts_with(name, o.prefix))
      continue;
    name += plen;
    if (o.strip_module_prefix && starts_with(name, "module."))
      name += 7;
    int k = sd_find(cand, name);
    if (k >= 0) {
      s = torc_set_error(TORC_ERR_INVALID,
                         "%s: the keys '%s' and '%s' both become '%s' once "
                         "the prefix is removed, so which to load is "
                         "ambiguous; remove one of them from the state dict",
                         what, sd->names[orig[k]], sd->names[i], name);
      goto out;
    }
    if (name[0] == '\0') /* the prefix itself: nothing in a module */
      continue;
    if ((s = torc_state_dict_set(cand, name, sd->tensors[i])) != TORC_OK)
      goto out;
    orig[cand->n - 1] = i;
  }

  /* Match. */
  int any_dtype = 0, any_shape = 0, ok = 1;
  for (int j = 0; j < model->n && ok; j++) {
    pair[j] = -1;
    const torc_tensor *t = model->tensors[j];
    int k = sd_find(cand, model->names[j]);
    if (k < 0) {
      ok = strlist_add(&missing, torc__strdup(model->names[j]));
      continue;
    }
    used[k] = 1;
    const torc_tensor *f = cand->tensors[k];
    int same_shape = torc_ndim(f) == torc_ndim(t);
    for (int d = 0; same_shape && d < torc_ndim(t); d++)
      same_shape = torc_shape(f)[d] == torc_shape(t)[d];
    torc_dtype fd = torc_dtype_of(f), td = torc_dtype_of(t);
    int same_dtype =
        fd == td || (o.allow_dtype_cast && torc_dtype_is_float(fd) &&
                     torc_dtype_is_float(td));
    if (same_shape && same_dtype) {
      pair[j] = k;
      continue;
    }
    any_shape |= !same_shape;
    if (!same_dtype)
      any_dtype |= torc_dtype_is_float(fd) && torc_dtype_is_float(td) ? 1 : 2;
    char b1[160], b2[160];
    ok = strlist_add(
        &mismatched,
        xprintf("%s: %s %s in the file, %s %s in the model", model->names[j],
                torc__shape_str(torc_shape(f), torc_ndim(f), b1, sizeof b1),
                torc_dtype_name(fd),
                torc__shape_str(torc_shape(t), torc_ndim(t), b2, sizeof b2),
                torc_dtype_name(td)));
  }
  /* A "module." prefix explains the unexpected keys when every one has it
   * and, stripped, some name a missing parameter. */
  int module_hint = 0, n_unexpected = 0, n_fixed = 0, all_module = 1;
  for (int k = 0; k < cand->n && ok; k++) {
    if (used[k])
      continue;
    n_unexpected++;
    const char *name = cand->names[k];
    if (!starts_with(name, "module."))
      all_module = 0;
    else if (sd_find(model, name + 7) >= 0 && sd_find(cand, name + 7) < 0)
      n_fixed++;
    ok = strlist_add(&unexpected, torc__strdup(sd->names[orig[k]]));
  }
  if (!ok) {
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
    goto out;
  }
  module_hint =
      !o.strip_module_prefix && n_unexpected > 0 && all_module && n_fixed > 0;
  int fail = mismatched.n > 0 || module_hint ||
             (!o.non_strict && (missing.n > 0 || unexpected.n > 0));
  if (fail) {
    s = load_error(what, m, &missing, &unexpected, &mismatched, module_hint,
                   any_dtype, any_shape);
    goto out;
  }

  /* Stage every converted tensor before anything in the module changes. */
  int scope = torc_scope_begin();
  torc_tensor **staged =
      torc__calloc((size_t)(model->n ? model->n : 1), sizeof *staged);
  if (staged == NULL)
    s = torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
  for (int j = 0; j < model->n && s == TORC_OK; j++) {
    if (pair[j] < 0)
      continue;
    torc_tensor *t = model->tensors[j];
    torc_tensor *x = cand->tensors[pair[j]];
    if (x == t) /* a module's own state dict loaded into it */
      continue;
    if (torc_dtype_of(x) != torc_dtype_of(t))
      x = torc_to_dtype(x, torc_dtype_of(t));
    x = torc_contiguous(torc_to(x, torc_device_of(t)));
    if (x == NULL) {
      char dn[64], msg[700];
      snprintf(msg, sizeof msg, "%s", torc_last_error());
      s = torc_set_error(
          torc_last_status() ? torc_last_status() : TORC_ERR_DEVICE,
          "%s: copying '%s' onto %s failed, so nothing was "
          "loaded: %s",
          what, model->names[j],
          torc_device_str(torc_device_of(t), dn, sizeof dn), msg);
    }
    staged[j] = x;
  }
  if (s == TORC_OK) {
    /* Parameters are leaves that require grad: write them as the
     * optimizer does, without recording. The copies are on the same
     * device with the same shape and dtype, so they do not fail short of
     * a device fault. */
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    for (int j = 0; j < model->n && s == TORC_OK; j++) {
      if (pair[j] < 0)
        continue;
      if (staged[j])
        s = torc_copy_(model->tensors[j], staged[j]);
      if (s == TORC_OK && report)
        report->n_loaded++;
    }
    torc_set_grad_mode(gm);
    if (s != TORC_OK && report)
      report->n_loaded = 0;
  }
  torc__free(staged);
  torc_scope_end(scope);

out:
  if (report && s != TORC_ERR_OOM) {
    give_list(&missing, &report->n_missing, &report->missing);
    give_list(&unexpected, &report->n_unexpected, &report->unexpected);
    give_list(&mismatched, &report->n_mismatched, &report->mismatched);
  }
  strlist_free(&missing);
  strlist_free(&unexpected);
  strlist_free(&mismatched);
  torc__free(pair);
  torc__free(used);
  torc__free(orig);
  torc_state_dict_free(cand);
  torc_state_dict_free(model);
  return s;
}

torc_status torc_module_load_state_dict(torc_module *m,
                                        const torc_state_dict *sd,
                                        const torc_load_opts *opts,
                                        torc_load_report *report) {
  return load_into(m, sd, opts, report, "torc_module_load_state_dict");
}

torc_status torc_module_save(const torc_module *m, const char *path) {
  if (path == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_module_save: the path is NULL");
  torc_state_dict *sd = torc_state_dict_new();
  if (sd == NULL)
    return TORC_ERR_OOM;
  torc_status s = torc_module_state_dict(m, NULL, sd);
  /* The tag the Python library's save_model writes, which Hugging Face
   * loaders check. */
  if (s == TORC_OK)
    s = torc_state_dict_set_meta(sd, "format", "pt");
  if (s == TORC_OK)
    s = torc_state_dict_save(sd, path);
  torc_state_dict_free(sd);
  return s;
}

static int is_checkpoint(const torc_state_dict *sd) {
  const char *f = torc_state_dict_meta(sd, "torc.format");
  return f && strcmp(f, "checkpoint") == 0;
}

/* Loads sd's "model." part (then opts->prefix within it) into m. */
static torc_status load_model_part(torc_module *m, const torc_state_dict *sd,
                                   const torc_load_opts *opts,
                                   torc_load_report *report, const char *what) {
  torc_load_opts o = {0};
  if (opts)
    o = *opts;
  char *pfx = join3("model.", o.prefix ? o.prefix : "", "");
  if (pfx == NULL)
    return torc_set_error(TORC_ERR_OOM, "%s: out of memory", what);
  o.prefix = pfx;
  torc_status s = load_into(m, sd, &o, report, what);
  torc__free(pfx);
  return s;
}

torc_status torc_module_load(torc_module *m, const char *path,
                             const torc_load_opts *opts,
                             torc_load_report *report) {
  if (report)
    memset(report, 0, sizeof *report);
  if (m == NULL)
    return torc_last_status()
               ? torc_last_status()
               : torc_set_error(TORC_ERR_NULL, "torc_module_load: the module "
                                               "is NULL");
  if (path == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_module_load: the path is NULL");
  torc_state_dict *sd = torc_state_dict_load(path, torc_module_device(m));
  if (sd == NULL)
    return torc_last_status() ? torc_last_status() : TORC_ERR_IO;
  char *what = xprintf("torc_module_load %s", path);
  torc_status s;
  if (what == NULL)
    s = torc_set_error(TORC_ERR_OOM, "torc_module_load: out of memory");
  else if (is_checkpoint(sd))
    s = load_model_part(m, sd, opts, report, what);
  else
    s = load_into(m, sd, opts, report, what);
  torc__free(what);
  torc_state_dict_free(sd);
  return s;
}

/* ------------------------------------------------------------------------
 * Checkpoints
 * ---------------------------------------------------------------------- */

torc_state_dict *torc_checkpoint_new(void) {
  torc_state_dict *ck = torc_state_dict_new();
  if (ck &&
      (torc_state_dict_set_meta(ck, "torc.format", "checkpoint") ||
       torc_state_dict_set_meta(ck, "torc.version", torc_version_string()))) {
    torc_state_dict_free(ck);
    return NULL;
  }
  return ck;
}

torc_status torc_checkpoint_add_module(torc_state_dict *ck,
                                       const torc_module *m) {
  return torc_module_state_dict(m, "model.", ck);
}

/* Checks an RNG state name. */
static torc_status rng_name_ok(const char *fn, const torc_state_dict *ck,
                               const char *name) {
  if (ck == NULL || name == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the %s is NULL", fn,
                          ck ? "name" : "checkpoint");
  if (name[0] == '\0' || strchr(name, '.'))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the RNG state name '%s' must be non-empty and "
                          "without '.' (e.g. \"default\", \"loader\")",
                          fn, name);
  return TORC_OK;
}

torc_status torc_checkpoint_add_rng(torc_state_dict *ck, const char *name,
                                    const torc_generator *gen) {
  const char *fn = "torc_checkpoint_add_rng";
  torc_status s = rng_name_ok(fn, ck, name);
  if (s)
    return s;
  uint64_t seed = 0, offset = 0;
  torc_generator_get_state(gen, &seed, &offset);
  char key[256], val[32];
  snprintf(key, sizeof key, "rng.%s.seed", name);
  snprintf(val, sizeof val, "%" PRIu64, seed);
  s = torc_state_dict_set_meta(ck, key, val);
  snprintf(key, sizeof key, "rng.%s.offset", name);
  snprintf(val, sizeof val, "%" PRIu64, offset);
  return s ? s : torc_state_dict_set_meta(ck, key, val);
}

/* Parses metadata `key` as a u64 into *out; 0 when absent or malformed. */
static int meta_u64(const torc_state_dict *ck, const char *key, uint64_t *out,
                    const char **raw) {
  const char *v = torc_state_dict_meta(ck, key);
  *raw = v;
  if (v == NULL || v[0] < '0' || v[0] > '9')
    return 0;
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end != '\0' || errno == ERANGE)
    return 0;
  *out = (uint64_t)x;
  return 1;
}

torc_status torc_checkpoint_restore_rng(const torc_state_dict *ck,
                                        const char *name, torc_generator *gen) {
  const char *fn = "torc_checkpoint_restore_rng";
  torc_status s = rng_name_ok(fn, ck, name);
  if (s)
    return s;
  char ks[256], ko[256];
  snprintf(ks, sizeof ks, "rng.%s.seed", name);
  snprintf(ko, sizeof ko, "rng.%s.offset", name);
  uint64_t seed = 0, offset = 0;
  const char *rs = NULL, *ro = NULL;
  int have_s = meta_u64(ck, ks, &seed, &rs);
  int have_o = meta_u64(ck, ko, &offset, &ro);
  if (rs == NULL || ro == NULL) {
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int i = 0; i < ck->n_meta && len + 8 < sizeof list; i++) {
      const char *k = ck->meta_keys[i];
      size_t kl = strlen(k);
      if (starts_with(k, "rng.") && kl > 9 && strcmp(k + kl - 5, ".seed") == 0)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s'%.*s'",
                                len ? ", " : "", (int)(kl - 9), k + 4);
    }
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the checkpoint has no RNG state '%s' (no "
                          "metadata %s); it has %s; record it with "
                          "torc_checkpoint_add_rng before saving",
                          fn, name, rs ? ko : ks, len ? list : "none");
  }
  if (!have_s || !have_o)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: metadata '%s' is \"%s\", not an unsigned "
                          "decimal integer; the checkpoint is corrupt",
                          fn, have_s ? ko : ks, have_s ? ro : rs);
  torc_generator_set_state(gen, seed, offset);
  return TORC_OK;
}

torc_state_dict *torc_checkpoint_load(const char *path, torc_device dev) {
  if (path == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_checkpoint_load: the path is NULL");
    return NULL;
  }
  torc_safetensors *st = torc_safetensors_open(path);
  if (st == NULL)
    return NULL;
  const char *f = torc_safetensors_metadata(st, "torc.format");
  if (f == NULL || strcmp(f, "checkpoint") != 0) {
    if (f == NULL)
      torc_set_error(TORC_ERR_INVALID,
                     "torc_checkpoint_load: %s is a plain state dict (its "
                     "metadata has no \"torc.format\": \"checkpoint\"); load "
                     "it into a module with torc_module_load, or read it "
                     "with torc_state_dict_load",
                     path);
    else
      torc_set_error(TORC_ERR_INVALID,
                     "torc_checkpoint_load: %s has \"torc.format\" = \"%s\"; "
                     "a checkpoint has \"checkpoint\" (read the file with "
                     "torc_state_dict_load)",
                     path, f);
    torc_safetensors_close(st);
    return NULL;
  }
  torc_state_dict *ck = load_handle(st, dev);
  torc_safetensors_close(st);
  return ck;
}

torc_status torc_checkpoint_load_module(const torc_state_dict *ck,
                                        torc_module *m,
                                        const torc_load_opts *opts,
                                        torc_load_report *report) {
  const char *fn = "torc_checkpoint_load_module";
  if (report)
    memset(report, 0, sizeof *report);
  if (ck == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the checkpoint is NULL", fn);
  if (!is_checkpoint(ck))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the state dict is not a checkpoint (no "
                          "\"torc.format\": \"checkpoint\" metadata); load "
                          "it with torc_module_load_state_dict",
                          fn);
  return load_model_part(m, ck, opts, report, fn);
}
