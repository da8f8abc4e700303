/* core/config.c — the parsed configuration: its sections and keys in file
 * order (with an index of the keys of a long section), and the getters
 * that read it, typed or as text, with the file and line for messages.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/* ---- building a configuration ---- */

static void section_free(cfg_section *s) {
  for (int j = 0; j < s->n; j++) {
    torc__free(s->e[j].key);
    torc__free(s->e[j].value);
    torc__free(s->e[j].resolved);
  }
  torc__free(s->e);
  torc__free(s->ix);
  torc__free(s->name);
}

void torc_config_free(torc_config *cfg) {
  if (cfg == NULL)
    return;
  for (int i = 0; i < cfg->n; i++)
    section_free(&cfg->s[i]);
  torc__free(cfg->s);
  torc__free(cfg->path);
  torc__free(cfg->dir);
  torc__free(cfg);
}

/* Adds a section occurrence; its index, or -1 when memory ran out. */
int add_section(torc_config *cfg, const char *name, size_t len, int line) {
  if (cfg->n == cfg->cap) {
    int cap = cfg->cap ? cfg->cap * 2 : 8;
    cfg_section *s = torc__realloc(cfg->s, sizeof *s * (size_t)cap);
    if (s == NULL)
      return -1;
    cfg->s = s;
    cfg->cap = cap;
  }
  cfg_section *s = &cfg->s[cfg->n];
  memset(s, 0, sizeof *s);
  s->name = dup_range(name, len);
  if (s->name == NULL)
    return -1;
  s->line = line;
  return cfg->n++;
}

/* A section with more than KEYS_SCAN keys indexes them, so that reading
 * a section of n keys (each checked against those before it) stays linear
 * in n: open addressing over s->slots slots, each an entry's position or
 * -1. Fewer keys, or no memory for the index, are searched in order. */
#define KEYS_SCAN 8

/* The steps of the searches whose length grows with the file (key and
 * section name comparisons), on this thread: torc__config_work. */
static _Thread_local uint64_t work;
uint64_t torc__config_work(void) { return work; }

static size_t key_hash(const char *key) {
  uint64_t h = 14695981039346656037ull; /* FNV-1a */
  for (const char *p = key; *p; p++) {
    h ^= (unsigned char)*p;
    h *= 1099511628211ull;
  }
  return (size_t)h;
}

cfg_entry *find_entry(const cfg_section *s, const char *key) {
  if (s->ix) {
    size_t mask = s->slots - 1;
    for (size_t i = key_hash(key) & mask; s->ix[i] >= 0; i = (i + 1) & mask)
      if (work++, strcmp(s->e[s->ix[i]].key, key) == 0)
        return &s->e[s->ix[i]];
    return NULL;
  }
  for (int j = 0; j < s->n; j++)
    if (work++, strcmp(s->e[j].key, key) == 0)
      return &s->e[j];
  return NULL;
}

static void index_put(cfg_section *s, int j) {
  size_t mask = s->slots - 1;
  size_t i = key_hash(s->e[j].key) & mask;
  while (s->ix[i] >= 0)
    i = (i + 1) & mask;
  s->ix[i] = j;
}

/* Records entry j, just added, in the index of s (building or growing
 * it); without memory for it, s goes back to searching in order. */
static void index_added(cfg_section *s, int j) {
  size_t n = (size_t)s->n;
  if (n <= KEYS_SCAN)
    return;
  if (s->ix && 2 * n <= s->slots) {
    index_put(s, j);
    return;
  }
  size_t slots = 4 * KEYS_SCAN;
  while (slots < 4 * n)
    slots *= 2;
  torc__free(s->ix);
  s->ix = torc__malloc(slots * sizeof *s->ix);
  if (s->ix == NULL)
    return;
  s->slots = slots;
  for (size_t i = 0; i < slots; i++)
    s->ix[i] = -1;
  for (int k = 0; k < s->n; k++)
    index_put(s, k);
}

/* Appends an entry taking ownership of value; NULL when memory ran out
 * (value is then freed). */
cfg_entry *add_entry(cfg_section *s, const char *key, char *value, int line) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    cfg_entry *e = torc__realloc(s->e, sizeof *e * (size_t)cap);
    if (e == NULL) {
      torc__free(value);
      return NULL;
    }
    s->e = e;
    s->cap = cap;
  }
  cfg_entry *e = &s->e[s->n];
  e->key = dup_str(key);
  if (e->key == NULL) {
    torc__free(value);
    return NULL;
  }
  e->value = value;
  e->resolved = NULL;
  e->line = line;
  s->n++;
  index_added(s, s->n - 1);
  return e;
}

typedef struct name_at {
  const char *name;
  int i;
} name_at;

static int by_name_then_place(const void *a, const void *b) {
  const name_at *x = a, *y = b;
  int d = (work++, strcmp(x->name, y->name));
  return d ? d : (x->i > y->i) - (x->i < y->i);
}

/* For each section occurrence, the index of the first one with its name
 * (by sorting: a file of n sections is checked for repeats in n log n, not
 * by comparing each with those before it). NULL when memory ran out. */
int *first_occurrences(const torc_config *cfg) {
  int *first = torc__malloc(((size_t)cfg->n + 1) * sizeof *first);
  name_at *v = torc__malloc(((size_t)cfg->n + 1) * sizeof *v);
  if (first == NULL || v == NULL) {
    torc__free(first);
    torc__free(v);
    return NULL;
  }
  for (int i = 0; i < cfg->n; i++)
    v[i] = (name_at){cfg->s[i].name, i};
  qsort(v, (size_t)cfg->n, sizeof *v, by_name_then_place);
  for (int k = 0; k < cfg->n; k++)
    first[v[k].i] =
        k > 0 && strcmp(v[k - 1].name, v[k].name) == 0 ? first[v[k - 1].i]
                                                        : v[k].i;
  torc__free(v);
  return first;
}

/* ---- reading ---- */

const cfg_entry *entry_at(const torc_config *cfg, int i, const char *key) {
  if (cfg == NULL || key == NULL || i < 0 || i >= cfg->n)
    return NULL;
  return find_entry(&cfg->s[i], key);
}

const char *entry_value(const cfg_entry *e) {
  return e == NULL ? NULL : e->resolved ? e->resolved : e->value;
}

int torc__config_find(const torc_config *cfg, const char *section) {
  if (cfg == NULL || section == NULL)
    return -1;
  for (int i = 0; i < cfg->n; i++)
    if (strcmp(cfg->s[i].name, section) == 0)
      return i;
  return -1;
}

const char *torc_config_get(const torc_config *cfg, const char *section,
                            const char *key) {
  return entry_value(entry_at(cfg, torc__config_find(cfg, section), key));
}

int torc_config_line(const torc_config *cfg, const char *section,
                     const char *key) {
  const cfg_entry *e = entry_at(cfg, torc__config_find(cfg, section), key);
  return e ? e->line : 0;
}

const char *torc_config_path(const torc_config *cfg) {
  return cfg ? cfg->path : NULL;
}

/* The folder relative values resolve against (NULL: the current one);
 * data_config.c resolves a data source's path keys with it. */
const char *torc__config_dir(const torc_config *cfg) {
  return cfg ? cfg->dir : NULL;
}

int torc_config_section_count(const torc_config *cfg) {
  return cfg ? cfg->n : 0;
}

const char *torc_config_section_name(const torc_config *cfg, int i) {
  if (cfg == NULL || i < 0 || i >= cfg->n)
    return NULL;
  return cfg->s[i].name;
}

const char *torc_config_section_get(const torc_config *cfg, int i,
                                    const char *key) {
  return entry_value(entry_at(cfg, i, key));
}

int torc_config_section_key_count(const torc_config *cfg, int i) {
  if (cfg == NULL || i < 0 || i >= cfg->n)
    return 0;
  return cfg->s[i].n;
}

const char *torc_config_section_key(const torc_config *cfg, int i, int j) {
  if (cfg == NULL || i < 0 || i >= cfg->n || j < 0 || j >= cfg->s[i].n)
    return NULL;
  return cfg->s[i].e[j].key;
}

int torc__config_section_line(const torc_config *cfg, int i) {
  if (cfg == NULL || i < 0 || i >= cfg->n)
    return 0;
  return cfg->s[i].line;
}

int torc__config_key_line(const torc_config *cfg, int i, const char *key) {
  const cfg_entry *e = entry_at(cfg, i, key);
  return e ? e->line : 0;
}

const char *torc__config_value(const torc_config *cfg, int i, const char *key) {
  const cfg_entry *e = entry_at(cfg, i, key);
  if (e)
    return entry_value(e);
  if (cfg == NULL || key == NULL || i < 0 || i >= cfg->n)
    return NULL;
  const torc__config_row *r = find_row(cfg->s[i].name, key);
  return r ? r->def : NULL;
}

/* "FILE:LINE", or "--set" for a line of 0, into buf. */
const char *where(const torc_config *cfg, int line, char *buf, size_t n) {
  if (line > 0)
    snprintf(buf, n, "%s:%d", cfg->path, line);
  else
    snprintf(buf, n, "%s (--set)", cfg->path);
  return buf;
}

torc_status torc__config_error(const torc_config *cfg, int i, const char *key,
                               torc_status status, const char *fmt, ...) {
  char msg[MSG_MAX], loc[MSG_MAX / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cfg == NULL || i < 0 || i >= cfg->n)
    return torc_set_error(status, "%s", msg);
  const cfg_entry *e = key ? entry_at(cfg, i, key) : NULL;
  int line = e ? e->line : cfg->s[i].line;
  where(cfg, line, loc, sizeof loc);
  if (key)
    return torc_set_error(status, "%s: key '%s' in [%s]: %s", loc, key,
                          cfg->s[i].name, msg);
  return torc_set_error(status, "%s: [%s]: %s", loc, cfg->s[i].name, msg);
}

/* The value for a typed read, or an error when absent with no default. */
static const char *typed_value(const torc_config *cfg, int i, const char *key,
                               const char *fn, torc_status *st) {
  const char *v = torc__config_value(cfg, i, key);
  *st = TORC_OK;
  if (v == NULL)
    *st = torc__config_error(cfg, i, key, TORC_ERR_CONFIG,
                             "%s: the key is not set and has no default", fn);
  return v;
}

torc_status torc__config_int(const torc_config *cfg, int i, const char *key,
                             int64_t *out) {
  torc_status st;
  const char *v = typed_value(cfg, i, key, "torc__config_int", &st);
  if (v && parse_i64(v, out) != 0)
    st = torc__config_error(cfg, i, key, TORC_ERR_CONFIG,
                            "'%s' is not an integer", v);
  return st;
}

torc_status torc__config_uint(const torc_config *cfg, int i, const char *key,
                              uint64_t *out) {
  torc_status st;
  const char *v = typed_value(cfg, i, key, "torc__config_uint", &st);
  if (v && parse_u64(v, out) != 0)
    st = torc__config_error(cfg, i, key, TORC_ERR_CONFIG,
                            "'%s' is not an integer from 0 to %llu", v,
                            (unsigned long long)UINT64_MAX);
  return st;
}

torc_status torc__config_float(const torc_config *cfg, int i, const char *key,
                               double *out) {
  torc_status st;
  const char *v = typed_value(cfg, i, key, "torc__config_float", &st);
  if (v && parse_f64(v, out) != 0)
    st = torc__config_error(cfg, i, key, TORC_ERR_CONFIG,
                            "'%s' is not a finite number", v);
  return st;
}

torc_status torc__config_bool(const torc_config *cfg, int i, const char *key,
                              int *out) {
  torc_status st;
  const char *v = typed_value(cfg, i, key, "torc__config_bool", &st);
  if (v) {
    int b = parse_bool(v);
    if (b < 0)
      return torc__config_error(cfg, i, key, TORC_ERR_CONFIG,
                                "'%s' is not yes or no", v);
    *out = b;
  }
  return st;
}

torc_status torc__config_bytes(const torc_config *cfg, int i, const char *key,
                               uint64_t *out) {
  torc_status st;
  const char *v = typed_value(cfg, i, key, "torc__config_bytes", &st);
  if (v && parse_bytes(v, out) != 0)
    st = torc__config_error(cfg, i, key, TORC_ERR_CONFIG,
                            "'%s' is not a size in bytes", v);
  return st;
}
