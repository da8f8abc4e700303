/* core/config_internal.h — what the configuration files (config.c,
 * config_schema.c, config_names.c, config_read.c, config_apply.c) share
 * beyond include/torc/config.h and internal.h: the parsed configuration's
 * layout, the row iterator, the string helpers and the schema's checks.
 * Not installed.
 */
#ifndef TORC_CONFIG_INTERNAL_H
#define TORC_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define MSG_MAX 1024

/* ---- the parsed configuration ---- */

typedef struct cfg_entry {
  char *key;
  char *value;    /* as written */
  char *resolved; /* path types with a folder to resolve against, or NULL */
  int line;       /* 0 = set with torc_config_set */
} cfg_entry;

typedef struct cfg_section {
  char *name;
  int line; /* of the [name] header; 0 = added by torc_config_set */
  int n, cap;
  cfg_entry *e;
  int *ix;      /* index of the keys once there are many (see find_entry) */
  size_t slots; /* its size, a power of two */
} cfg_section;

struct torc_config {
  char *path; /* as given, for messages */
  char *dir;  /* folder relative values resolve against; NULL = cwd */
  int n, cap;
  cfg_section *s;
};

/* Adds a section occurrence; its index, or -1 when memory ran out. */
int add_section(torc_config *cfg, const char *name, size_t len, int line);

/* The entry of `key` in s, or NULL. */
cfg_entry *find_entry(const cfg_section *s, const char *key);

/* Appends an entry taking ownership of value; NULL when memory ran out
 * (value is then freed). */
cfg_entry *add_entry(cfg_section *s, const char *key, char *value, int line);

/* For each section occurrence, the index of the first one with its name;
 * NULL when memory ran out. */
int *first_occurrences(const torc_config *cfg);

/* The entry of `key` in section occurrence i, or NULL; its value (the
 * resolved path for path types), or NULL for no entry. */
const cfg_entry *entry_at(const torc_config *cfg, int i, const char *key);
const char *entry_value(const cfg_entry *e);

/* "FILE:LINE", or "FILE (--set)" for a line of 0, into buf. */
const char *where(const torc_config *cfg, int line, char *buf, size_t n);

/* ---- the schema (config_schema.c) ---- */

/* Iterates every registered row, table by table:
 *   row_iter it;
 *   for (const torc__config_row *r = rows_first(&it); r; r = rows_next(&it))
 */
typedef struct row_iter {
  int t, n;
  const torc__config_row *r;
} row_iter;

const torc__config_row *rows_first(row_iter *it);
const torc__config_row *rows_next(row_iter *it);

#define ROWS_EACH(it, r)                                                       \
  const torc__config_row *r = rows_first(&it);                                 \
  r != NULL;                                                                   \
  r = rows_next(&it)

/* The nearest candidate seen so far, if close enough to be a likely
 * misspelling of the word looked for. */
typedef struct nearest {
  size_t d;
  char word[128]; /* "" = none */
} nearest;

#define NEAREST_INIT                                                           \
  { (size_t) - 1, "" }

/* Does `name` match `pat` ('*' = one NAME of letters, digits, '_', '-')? */
int pattern_match(const char *pat, const char *name);

/* "[plugin.NAME]" for the pattern "plugin.*". */
void pattern_show(const char *pat, char *buf, size_t n);

/* 1 if any row's pattern matches `section`; the flags of its section
 * rows. */
int section_known(const char *section, unsigned *flags);

/* The key of `section`'s rows that `name` is PyTorch's accepted name for
 * ("workers" for "num_workers" in [data.train]), or NULL (also when
 * `name` is a key of the section itself). */
const char *section_alias(const char *section, const char *name);

/* "    PyTorch's names ...: kernel_size for kernel, ..." (every accepted
 * alias of a type's key, each once, and a newline) into buf: for `torc
 * help config`. */
void aliases_line(char *buf, size_t n);

/* The row for `key` in `section`: an exact key, else a "*" row, else NULL. */
const torc__config_row *find_row(const char *section, const char *key);

/* The values of the types: int64, uint64 and finite double in base 10
 * (0 ok, 1 not a number, 2 out of range); a boolean (0 no, 1 yes, -1
 * not one); a size in bytes with a K/M/G/T suffix (0 ok, 1 bad, 2 too
 * big). */
int parse_i64(const char *s, int64_t *out);
int parse_u64(const char *s, uint64_t *out);
int parse_f64(const char *s, double *out);
int parse_bool(const char *s);
int parse_bytes(const char *s, uint64_t *out);

/* What a row accepts, as words: "an integer >= 1", "one of: error, cpu". */
void describe(const torc__config_row *r, char *buf, size_t n);

/* Checks `value` against row r, resolving path types against `dir` into
 * *resolved (malloc'd, else NULL). TORC_ERR_CONFIG with the reason in
 * why, TORC_ERR_OOM when memory ran out. */
torc_status check_value(const torc__config_row *r, const char *value,
                        const char *dir, char **resolved, char *why, size_t n);

/* The known sections ("[torc], [plugins], ...") and the keys of `section`
 * ("seed, threads, ...") into buf, with the nearest to `name` / `key` in
 * *nr. */
void known_sections(char *buf, size_t n, const char *name, nearest *nr);
void known_keys(const char *section, const char *key, char *buf, size_t n,
                nearest *nr);

/* ---- small string helpers ---- */

static inline int is_name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static inline int is_blank(int c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

static inline int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static inline int eq_nocase(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (lower((unsigned char)*a) != lower((unsigned char)*b))
      return 0;
  return *a == *b;
}

static inline char *dup_range(const char *s, size_t n) {
  char *p = torc__malloc(n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

static inline char *dup_str(const char *s) { return dup_range(s, strlen(s)); }

/* Appends printf-style text to buf (size n) at *len, truncating. */
TORC_PRINTF(4, 5)
static inline void append(char *buf, size_t n, size_t *len, const char *fmt,
                          ...) {
  if (*len >= n)
    return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *len, n - *len, fmt, ap);
  va_end(ap);
  if (k > 0)
    *len = *len + (size_t)k < n ? *len + (size_t)k : n - 1;
}

#endif /* TORC_CONFIG_INTERNAL_H */
