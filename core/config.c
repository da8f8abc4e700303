/* core/config.c — INI configuration files: parsing (inih, fed by our own
 * line reader), validation against a table-driven schema of sections and
 * keys, --set overrides, and applying [torc], [plugin.NAME] and [device].
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "internal.h"


#define MSG_MAX 1024
/* Configuration files larger than this are refused (not a config file). */
#define CFG_MAX_FILE (16u << 20)

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

/* ---- the schema registry ---- */

#define SCHEMA_MAX_TABLES 64

static const torc__config_row core_rows[] = {
    {"torc", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "process-wide settings: seed, threads, determinism, fallback"},
    {"torc", "seed", TORC__CFG_UINT, "0", NULL, 0,
     "one seed for init, shuffling, dropout and augmentation"},
    {"torc", "threads", TORC__CFG_INT, "1", "1..", 0,
     "CPU threads every plugin may use"},
    {"torc", "deterministic", TORC__CFG_BOOL, "no", NULL, 0,
     "same result run to run, whatever the number of workers"},
    {"torc", "fallback", TORC__CFG_ENUM, "error", "error|cpu", 0,
     "error: a missing kernel is an error; cpu: run it on the cpu with "
     "copies (logged once per op and device)"},
    {"plugins", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "where plugins are looked up"},
    {"plugins", "path", TORC__CFG_PATHS, NULL, NULL, 0,
     "colon-separated folders searched before TORC_PLUGIN_PATH and the "
     "install folder (relative to the INI file's folder)"},
    {"plugins", "allow_insecure", TORC__CFG_BOOL, "no", NULL, 0,
     "load plugins from files or folders other users can write"},
    {"plugin.*", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "loads one plugin; NAME is the name it is known by"},
    {"plugin.*", "module", TORC__CFG_MODULE, NULL, NULL, TORC__CFG_REQUIRED,
     "a plugin name looked up on the plugin path, or a path to its .so"},
    {"plugin.*", "required", TORC__CFG_BOOL, "yes", NULL, 0,
     "no: if the plugin cannot be loaded, warn and go on"},
    {"plugin.*", "priority", TORC__CFG_INT, "0", "-1000000..1000000", 0,
     "added to the priority of each kernel the plugin registers"},
    {"plugin.*", "*", TORC__CFG_ANY, NULL, NULL, 0,
     "any key the plugin declares (see `torc plugins`)"},
    {"device", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "the device the model runs on"},
    {"device", "type", TORC__CFG_STRING, "cpu",
     "a device such as cpu, sim:0 or cuda:0", 0,
     "cpu, sim:0, cuda:0 or any device a loaded plugin registers"},
    {NULL, NULL, TORC__CFG_SECTION, NULL, NULL, 0, NULL}};

/* [model] and [layer], in config_model.c. */
extern const torc__config_row torc__model_rows[];
/* [data.NAME], in data_config.c. */
extern const torc__config_row torc__data_rows[];
/* [loss], [optimizer], [scheduler], in optim_config.c. The trainer's
 * [train] and [checkpoint] join through torc_config_schema_add. */
extern const torc__config_row torc__optim_rows[];

static const torc__config_row *schema_tables[SCHEMA_MAX_TABLES] = {
    core_rows, torc__model_rows, torc__data_rows, torc__optim_rows};
static _Atomic int schema_n = 4;
static pthread_mutex_t schema_lock = PTHREAD_MUTEX_INITIALIZER;

/* Iterates every registered row, table by table:
 *   row_iter it;
 *   for (const torc__config_row *r = rows_first(&it); r; r = rows_next(&it))
 */
typedef struct row_iter {
  int t, n;
  const torc__config_row *r;
} row_iter;

static const torc__config_row *rows_skip_empty(row_iter *it) {
  while (it->r->section == NULL) {
    if (++it->t >= it->n)
      return NULL;
    it->r = schema_tables[it->t];
  }
  return it->r;
}

static const torc__config_row *rows_first(row_iter *it) {
  it->n = atomic_load_explicit(&schema_n, memory_order_acquire);
  it->t = 0;
  it->r = schema_tables[0];
  return rows_skip_empty(it);
}

static const torc__config_row *rows_next(row_iter *it) {
  it->r++;
  return rows_skip_empty(it);
}

#define ROWS_EACH(it, r)                                                       \
  const torc__config_row *r = rows_first(&it);                                 \
  r != NULL;                                                                   \
  r = rows_next(&it)

/* ---- small string helpers ---- */

static int is_name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static int is_blank(int c) {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static int eq_nocase(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (lower((unsigned char)*a) != lower((unsigned char)*b))
      return 0;
  return *a == *b;
}

static char *dup_range(const char *s, size_t n) {
  char *p = torc__malloc(n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
  return p;
}

static char *dup_str(const char *s) { return dup_range(s, strlen(s)); }

/* Appends printf-style text to buf (size n) at *len, truncating. */
TORC_PRINTF(4, 5)
static void append(char *buf, size_t n, size_t *len, const char *fmt, ...) {
  if (*len >= n)
    return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *len, n - *len, fmt, ap);
  va_end(ap);
  if (k > 0)
    *len = *len + (size_t)k < n ? *len + (size_t)k : n - 1;
}

/* Optimal string alignment distance (Damerau-Levenshtein where each
 * substring is edited once), ignoring case; long strings count as far. */
static size_t edit_distance(const char *a, const char *b) {
  enum { L = 64 };
  size_t la = strlen(a), lb = strlen(b);
  if (la >= L || lb >= L)
    return (size_t)-1;
  size_t d[L + 1][L + 1];
  for (size_t i = 0; i <= la; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= lb; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      int ca = lower((unsigned char)a[i - 1]),
          cb = lower((unsigned char)b[j - 1]);
      size_t cost = ca != cb;
      size_t v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v)
        v = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < v)
        v = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && ca == lower((unsigned char)b[j - 2]) &&
          lower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[la][lb];
}

/* The nearest candidate seen so far, if close enough to be a likely
 * misspelling of the word looked for. */
typedef struct nearest {
  size_t d;
  char word[128]; /* "" = none */
} nearest;

#define NEAREST_INIT                                                           \
  { (size_t) - 1, "" }

/* Considers `cand` for `word`; keeps `shown` (the way to print it, NULL =
 * cand itself) when it is the nearest so far. */
static void suggest(nearest *nr, const char *word, const char *cand,
                    const char *shown) {
  size_t len = strlen(cand);
  size_t limit = 1 + len / 4;
  if (limit > 3)
    limit = 3;
  size_t d = edit_distance(word, cand);
  if (d <= limit && d < len && d < nr->d) {
    nr->d = d;
    snprintf(nr->word, sizeof nr->word, "%s", shown ? shown : cand);
  }
}

/* ---- section patterns ---- */

/* Does `name` match `pat` ('*' = one NAME of letters, digits, '_', '-')? */
static int pattern_match(const char *pat, const char *name) {
  for (; *pat; pat++) {
    if (*pat == '*') {
      if (!is_name_char((unsigned char)*name))
        return 0;
      while (is_name_char((unsigned char)*name))
        name++;
      continue;
    }
    if (*name != *pat)
      return 0;
    name++;
  }
  return *name == '\0';
}

/* "[plugin.NAME]" for the pattern "plugin.*". */
static void pattern_show(const char *pat, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  append(buf, n, &len, "[");
  for (; *pat; pat++) {
    if (*pat == '*')
      append(buf, n, &len, "NAME");
    else
      append(buf, n, &len, "%c", *pat);
  }
  append(buf, n, &len, "]");
}

/* 1 if any row's pattern matches `section`; its section row (if any) and
 * flags. */
static int section_known(const char *section, unsigned *flags) {
  int known = 0;
  *flags = 0;
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (!pattern_match(r->section, section))
      continue;
    known = 1;
    if (r->key == NULL)
      *flags |= r->flags;
  }
  return known;
}

/* The row for `key` in `section`: an exact key, else a "*" row, else NULL. */
static const torc__config_row *find_row(const char *section, const char *key) {
  const torc__config_row *any = NULL;
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (r->key == NULL || !pattern_match(r->section, section))
      continue;
    if (strcmp(r->key, key) == 0)
      return r;
    if (strcmp(r->key, "*") == 0 && any == NULL)
      any = r;
  }
  return any;
}

/* ---- values ---- */

/* Parses an int64 in base 10; 0 ok, 1 not a number, 2 out of range. */
static int parse_i64(const char *s, int64_t *out) {
  if (*s == '\0' || is_blank((unsigned char)*s))
    return 1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0')
    return 1;
  if (errno == ERANGE)
    return 2;
  *out = v;
  return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
  const char *p = *s == '+' ? s + 1 : s;
  if (*s == '-') { /* a negative integer is a number, just out of range */
    int64_t v;
    return parse_i64(s, &v) == 1 ? 1 : 2;
  }
  if (!(*p >= '0' && *p <= '9'))
    return 1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(p, &end, 10);
  if (*end != '\0')
    return 1;
  if (errno == ERANGE)
    return 2;
  *out = v;
  return 0;
}

static int parse_f64(const char *s, double *out) {
  if (*s == '\0' || is_blank((unsigned char)*s))
    return 1;
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end != '\0')
    return 1;
  if (!isfinite(v)) /* "inf", "nan", or beyond the double range */
    return v != v ? 1 : 2;
  *out = v; /* an underflow to (nearly) zero is fine */
  return 0;
}

/* 0 no, 1 yes, -1 not a boolean. */
static int parse_bool(const char *s) {
  static const char *const yes[] = {"yes", "true", "on", "1"};
  static const char *const no[] = {"no", "false", "off", "0"};
  for (int i = 0; i < 4; i++) {
    if (eq_nocase(s, yes[i]))
      return 1;
    if (eq_nocase(s, no[i]))
      return 0;
  }
  return -1;
}

/* 4096, 512K, 1M, 1MiB, 2G, 1T (powers of 1024); 0 ok, 1 bad, 2 too big. */
static int parse_bytes(const char *s, uint64_t *out) {
  if (!(*s >= '0' && *s <= '9'))
    return 1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno == ERANGE)
    return 2;
  int shift = 0;
  switch (lower((unsigned char)*end)) {
  case 'k':
    shift = 10;
    end++;
    break;
  case 'm':
    shift = 20;
    end++;
    break;
  case 'g':
    shift = 30;
    end++;
    break;
  case 't':
    shift = 40;
    end++;
    break;
  default:
    break;
  }
  if (shift && (end[0] == 'i' || end[0] == 'I') &&
      (end[1] == 'B' || end[1] == 'b'))
    end += 2;
  else if (end[0] == 'B' || end[0] == 'b')
    end++;
  if (*end != '\0')
    return 1;
  if (shift && v > (UINT64_MAX >> shift))
    return 2;
  *out = (uint64_t)v << shift;
  return 0;
}

/* Parses "LO..HI" (either side optional) for INT/UINT/FLOAT; 0 ok. */
typedef struct range {
  int has_lo, has_hi;
  double lo_f, hi_f;
  int64_t lo_i, hi_i;
  uint64_t lo_u, hi_u;
} range;

static int parse_range(torc__config_type type, const char *acc, range *r) {
  memset(r, 0, sizeof *r);
  if (acc == NULL || *acc == '\0')
    return 0;
  const char *dots = strstr(acc, "..");
  if (dots == NULL)
    return -1;
  char lo[64], hi[64];
  size_t nl = (size_t)(dots - acc), nh = strlen(dots + 2);
  if (nl >= sizeof lo || nh >= sizeof hi)
    return -1;
  memcpy(lo, acc, nl);
  lo[nl] = '\0';
  memcpy(hi, dots + 2, nh + 1);
  r->has_lo = nl > 0;
  r->has_hi = nh > 0;
  int bad = 0;
  if (type == TORC__CFG_INT)
    bad = (r->has_lo && parse_i64(lo, &r->lo_i)) ||
          (r->has_hi && parse_i64(hi, &r->hi_i));
  else if (type == TORC__CFG_UINT)
    bad = (r->has_lo && parse_u64(lo, &r->lo_u)) ||
          (r->has_hi && parse_u64(hi, &r->hi_u));
  else if (type == TORC__CFG_FLOAT)
    bad = (r->has_lo && parse_f64(lo, &r->lo_f)) ||
          (r->has_hi && parse_f64(hi, &r->hi_f));
  else
    bad = 1;
  return bad ? -1 : 0;
}

/* What a row accepts, as words: "an integer >= 1", "one of: error, cpu". */
static void describe(const torc__config_row *r, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  range rg;
  const char *what = r->type == TORC__CFG_FLOAT ? "a number" : "an integer";
  switch (r->type) {
  case TORC__CFG_INT:
  case TORC__CFG_UINT:
  case TORC__CFG_FLOAT: {
    if (parse_range(r->type, r->accepted, &rg) != 0)
      rg.has_lo = rg.has_hi = 0;
    char lo[40] = "", hi[40] = "";
    if (r->type == TORC__CFG_INT) {
      snprintf(lo, sizeof lo, "%lld", (long long)rg.lo_i);
      snprintf(hi, sizeof hi, "%lld", (long long)rg.hi_i);
    } else if (r->type == TORC__CFG_UINT) {
      if (!rg.has_lo) {
        rg.has_lo = 1; /* unsigned: say where it starts */
        rg.lo_u = 0;
      }
      if (!rg.has_hi) {
        rg.has_hi = 1;
        rg.hi_u = UINT64_MAX;
      }
      snprintf(lo, sizeof lo, "%llu", (unsigned long long)rg.lo_u);
      snprintf(hi, sizeof hi, "%llu", (unsigned long long)rg.hi_u);
    } else {
      snprintf(lo, sizeof lo, "%g", rg.lo_f);
      snprintf(hi, sizeof hi, "%g", rg.hi_f);
    }
    if (rg.has_lo && rg.has_hi)
      append(buf, n, &len, "%s from %s to %s", what, lo, hi);
    else if (rg.has_lo)
      append(buf, n, &len, "%s >= %s", what, lo);
    else if (rg.has_hi)
      append(buf, n, &len, "%s <= %s", what, hi);
    else
      append(buf, n, &len, "%s", what);
    break;
  }
  case TORC__CFG_BOOL:
    append(buf, n, &len, "yes or no (true/false, on/off, 1/0 also work)");
    break;
  case TORC__CFG_ENUM: {
    append(buf, n, &len, "one of: ");
    for (const char *p = r->accepted; *p; p++) {
      if (*p == '|')
        append(buf, n, &len, ", ");
      else
        append(buf, n, &len, "%c", *p);
    }
    break;
  }
  case TORC__CFG_STRING:
    append(buf, n, &len, "%s", r->accepted ? r->accepted : "a value");
    break;
  case TORC__CFG_PATH:
    append(buf, n, &len, "a path (relative to the INI file's folder)");
    break;
  case TORC__CFG_PATHS:
    append(buf, n, &len,
           "folders separated by ':' (relative to the INI "
           "file's folder)");
    break;
  case TORC__CFG_BYTES:
    append(buf, n, &len,
           "a size in bytes: a whole number with an optional "
           "K, M, G or T suffix (powers of 1024), e.g. 4096, "
           "512K, 1M");
    break;
  case TORC__CFG_MODULE:
    append(buf, n, &len,
           "a plugin name (letters, digits, '_', '-') looked "
           "up on the plugin path, or a path to the plugin's "
           ".so file (containing '/')");
    break;
  case TORC__CFG_ANY:
  case TORC__CFG_SECTION:
    append(buf, n, &len, "any value");
    break;
  }
}

/* `value` resolved against `dir` (NULL dir or absolute value: a copy). */
static char *resolve_path(const char *value, size_t n, const char *dir) {
  if (dir == NULL || n == 0 || value[0] == '/')
    return dup_range(value, n);
  size_t ld = strlen(dir);
  int slash = ld > 0 && dir[ld - 1] == '/';
  char *p = torc__malloc(ld + 1 + n + 1);
  if (p == NULL)
    return NULL;
  memcpy(p, dir, ld);
  if (!slash)
    p[ld++] = '/';
  memcpy(p + ld, value, n);
  p[ld + n] = '\0';
  return p;
}

/* Checks `value` against row r. On success, path types with a folder get
 * *resolved (malloc'd); other types leave it NULL. On failure, the reason
 * ("'two' is not an integer; expected an integer >= 1") goes to why and
 * TORC_ERR_CONFIG is returned; TORC_ERR_OOM if memory ran out. */
static torc_status check_value(const torc__config_row *r, const char *value,
                               const char *dir, char **resolved, char *why,
                               size_t n) {
  char expect[320];
  size_t len = 0;
  *resolved = NULL;
  why[0] = '\0';
  describe(r, expect, sizeof expect);
  if (r->type == TORC__CFG_ANY)
    return TORC_OK;
  if (value[0] == '\0') {
    append(why, n, &len, "the value is empty; expected %s", expect);
    return TORC_ERR_CONFIG;
  }
  int bad = 0; /* 1: wrong kind, 2: out of range */
  const char *kind = "";
  range rg;
  if (r->type == TORC__CFG_INT || r->type == TORC__CFG_UINT ||
      r->type == TORC__CFG_FLOAT) {
    if (parse_range(r->type, r->accepted, &rg) != 0)
      memset(&rg, 0, sizeof rg);
  }
  switch (r->type) {
  case TORC__CFG_INT: {
    int64_t v = 0;
    kind = "an integer";
    bad = parse_i64(value, &v);
    if (!bad && ((rg.has_lo && v < rg.lo_i) || (rg.has_hi && v > rg.hi_i)))
      bad = 2;
    break;
  }
  case TORC__CFG_UINT: {
    uint64_t v = 0;
    kind = "an integer";
    bad = parse_u64(value, &v);
    if (!bad && ((rg.has_lo && v < rg.lo_u) || (rg.has_hi && v > rg.hi_u)))
      bad = 2;
    break;
  }
  case TORC__CFG_FLOAT: {
    double v = 0;
    kind = "a number";
    bad = parse_f64(value, &v);
    if (!bad && ((rg.has_lo && v < rg.lo_f) || (rg.has_hi && v > rg.hi_f)))
      bad = 2;
    break;
  }
  case TORC__CFG_BOOL:
    kind = "a boolean";
    bad = parse_bool(value) < 0;
    break;
  case TORC__CFG_BYTES: {
    uint64_t v;
    kind = "a size";
    bad = parse_bytes(value, &v);
    break;
  }
  case TORC__CFG_ENUM: {
    nearest nr = NEAREST_INIT;
    char cand[128];
    for (const char *p = r->accepted; *p;) {
      const char *bar = strchr(p, '|');
      size_t l = bar ? (size_t)(bar - p) : strlen(p);
      if (l == strlen(value) && strncmp(p, value, l) == 0)
        return TORC_OK;
      if (l < sizeof cand) {
        memcpy(cand, p, l);
        cand[l] = '\0';
        suggest(&nr, value, cand, NULL);
      }
      p += l + (bar != NULL);
    }
    append(why, n, &len, "'%s' is not %s", value, expect);
    if (nr.word[0])
      append(why, n, &len, " (did you mean '%s'?)", nr.word);
    return TORC_ERR_CONFIG;
  }
  case TORC__CFG_MODULE:
    if (strchr(value, '/') == NULL) {
      for (const char *p = value; *p; p++)
        if (!is_name_char((unsigned char)*p)) {
          kind = "a plugin name or path";
          bad = 1;
          break;
        }
      break;
    }
    *resolved = resolve_path(value, strlen(value), dir);
    return *resolved ? TORC_OK : TORC_ERR_OOM;
  case TORC__CFG_PATH:
    *resolved = resolve_path(value, strlen(value), dir);
    return *resolved ? TORC_OK : TORC_ERR_OOM;
  case TORC__CFG_PATHS: {
    if (dir == NULL) {
      *resolved = dup_str(value);
      return *resolved ? TORC_OK : TORC_ERR_OOM;
    }
    /* Resolve each folder; the result is never longer than
     * (count of entries) * (dir + 1) + value. */
    size_t entries = 1;
    for (const char *p = value; *p; p++)
      entries += *p == ':';
    size_t cap = strlen(value) + entries * (strlen(dir) + 1) + 1;
    char *out = torc__malloc(cap);
    if (out == NULL)
      return TORC_ERR_OOM;
    size_t o = 0;
    for (const char *p = value;;) {
      const char *colon = strchr(p, ':');
      size_t l = colon ? (size_t)(colon - p) : strlen(p);
      if (l > 0) {
        char *one = resolve_path(p, l, dir);
        if (one == NULL) {
          torc__free(out);
          return TORC_ERR_OOM;
        }
        if (o > 0)
          out[o++] = ':';
        size_t lo = strlen(one);
        memcpy(out + o, one, lo);
        o += lo;
        torc__free(one);
      }
      if (colon == NULL)
        break;
      p = colon + 1;
    }
    out[o] = '\0';
    *resolved = out;
    return TORC_OK;
  }
  case TORC__CFG_STRING:
  case TORC__CFG_ANY:
  case TORC__CFG_SECTION:
    break;
  }
  if (bad == 1)
    append(why, n, &len, "'%s' is not %s; expected %s", value, kind, expect);
  else if (bad == 2)
    append(why, n, &len, "'%s' is out of range; expected %s", value, expect);
  return bad ? TORC_ERR_CONFIG : TORC_OK;
}

/* ---- registering schemas ---- */

/* Checks one row of a table being added; a reason in `why` if bad. */
static int row_bad(const torc__config_row *r, char *why, size_t n) {
  const char *p = r->section;
  if (*p == '\0') {
    snprintf(why, n, "empty section name");
    return 1;
  }
  for (; *p; p++) {
    if (*p == '*') {
      if (p[1] != '\0' && p[1] != '.') {
        snprintf(why, n, "'*' must end the pattern or precede '.'");
        return 1;
      }
    } else if (!is_name_char((unsigned char)*p) && *p != '.') {
      snprintf(why, n, "section pattern has character '%c'", *p);
      return 1;
    }
  }
  if ((r->key == NULL) != (r->type == TORC__CFG_SECTION)) {
    snprintf(why, n,
             "a section row has key NULL and type "
             "TORC__CFG_SECTION, a key row neither");
    return 1;
  }
  if (r->type > TORC__CFG_ANY) {
    snprintf(why, n, "unknown type %d", (int)r->type);
    return 1;
  }
  if (r->key == NULL)
    return 0;
  if ((strcmp(r->key, "*") == 0) != (r->type == TORC__CFG_ANY)) {
    snprintf(why, n, "key \"*\" goes with TORC__CFG_ANY, and only it");
    return 1;
  }
  if (r->key[0] == '\0') {
    snprintf(why, n, "empty key");
    return 1;
  }
  if (r->type == TORC__CFG_ENUM &&
      (r->accepted == NULL || r->accepted[0] == '\0')) {
    snprintf(why, n, "an enum needs its accepted values (\"a|b\")");
    return 1;
  }
  range rg;
  if ((r->type == TORC__CFG_INT || r->type == TORC__CFG_UINT ||
       r->type == TORC__CFG_FLOAT) &&
      parse_range(r->type, r->accepted, &rg) != 0) {
    snprintf(why, n, "bad range '%s' (expected LO..HI)", r->accepted);
    return 1;
  }
  if (r->def) {
    char *res = NULL;
    char reason[MSG_MAX];
    torc_status st = check_value(r, r->def, NULL, &res, reason, sizeof reason);
    torc__free(res);
    if (st != TORC_OK) {
      size_t len = 0;
      append(why, n, &len, "default: %s", reason);
      return 1;
    }
  }
  if ((r->flags & TORC__CFG_REQUIRED) && r->def) {
    snprintf(why, n, "a required key has no default");
    return 1;
  }
  return 0;
}

static int same_row_id(const torc__config_row *a, const torc__config_row *b) {
  if (strcmp(a->section, b->section) != 0)
    return 0;
  if (a->key == NULL || b->key == NULL)
    return 0; /* several tables may describe the same section */
  return strcmp(a->key, b->key) == 0;
}

torc_status torc__config_schema_add(const torc__config_row *rows) {
  if (rows == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc__config_schema_add: rows is NULL");
  char why[MSG_MAX];
  pthread_mutex_lock(&schema_lock);
  int n = atomic_load(&schema_n);
  torc_status st = TORC_OK;
  for (int t = 0; t < n; t++)
    if (schema_tables[t] == rows)
      goto out;
  for (int i = 0; rows[i].section != NULL; i++) {
    const torc__config_row *r = &rows[i];
    const char *bad = NULL;
    if (row_bad(r, why, sizeof why))
      bad = why;
    for (int j = 0; bad == NULL && j < i; j++)
      if (same_row_id(&rows[j], r))
        bad = "defined twice in this table";
    for (int t = 0; bad == NULL && t < n; t++)
      for (const torc__config_row *o = schema_tables[t]; o->section; o++)
        if (same_row_id(o, r)) {
          bad = "already defined by another table";
          break;
        }
    if (bad) {
      st = torc_set_error(TORC_ERR_INVALID,
                          "torc__config_schema_add: row %d ([%s] %s): %s", i,
                          r->section, r->key ? r->key : "(section)", bad);
      goto out;
    }
  }
  if (n >= SCHEMA_MAX_TABLES) {
    st = torc_set_error(TORC_ERR_INVALID,
                        "torc__config_schema_add: %d tables already "
                        "registered, the most there can be",
                        SCHEMA_MAX_TABLES);
    goto out;
  }
  schema_tables[n] = rows;
  atomic_store_explicit(&schema_n, n + 1, memory_order_release);
out:
  pthread_mutex_unlock(&schema_lock);
  return st;
}

const torc__config_row *torc__config_schema_row(int i) {
  if (i < 0)
    return NULL;
  row_iter it;
  for (ROWS_EACH(it, r))
    if (i-- == 0)
      return r;
  return NULL;
}

/* "[torc], [plugins], [plugin.NAME], [device]" into buf. */
static void known_sections(char *buf, size_t n, const char *name, nearest *nr) {
  size_t len = 0;
  buf[0] = '\0';
  int first = 1;
  row_iter it;
  for (ROWS_EACH(it, r)) {
    /* each pattern once, at its first row */
    int seen = 0;
    row_iter it2;
    for (ROWS_EACH(it2, o)) {
      if (o == r)
        break;
      if (strcmp(o->section, r->section) == 0) {
        seen = 1;
        break;
      }
    }
    if (seen)
      continue;
    char shown[128];
    pattern_show(r->section, shown, sizeof shown);
    append(buf, n, &len, "%s%s", first ? "" : ", ", shown);
    first = 0;
    /* compare without the brackets */
    size_t ls = strlen(shown);
    char bare[128];
    snprintf(bare, sizeof bare, "%.*s", (int)(ls - 2), shown + 1);
    suggest(nr, name, bare, shown);
    /* [plugin] for [plugin.NAME]: compare with the part before ".NAME" */
    size_t lb = strlen(r->section);
    if (lb > 2 && strcmp(r->section + lb - 2, ".*") == 0) {
      snprintf(bare, sizeof bare, "%.*s", (int)(lb - 2), r->section);
      suggest(nr, name, bare, shown);
    }
  }
}

/* "seed, threads, deterministic, fallback" for `section`, and the nearest
 * to `key` in *best. */
static void known_keys(const char *section, const char *key, char *buf,
                       size_t n, nearest *nr) {
  size_t len = 0;
  int first = 1;
  buf[0] = '\0';
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (r->key == NULL || r->type == TORC__CFG_ANY ||
        !pattern_match(r->section, section))
      continue;
    append(buf, n, &len, "%s%s", first ? "" : ", ", r->key);
    first = 0;
    suggest(nr, key, r->key, NULL);
  }
}

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
static int add_section(torc_config *cfg, const char *name, size_t len,
                       int line) {
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

static cfg_entry *find_entry(const cfg_section *s, const char *key) {
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
static cfg_entry *add_entry(cfg_section *s, const char *key, char *value,
                            int line) {
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

/* ---- parsing ---- */

typedef struct parse_ctx {
  torc_config *cfg;
  const char *p, *end; /* the text not read yet */
  int line;            /* of the line handed to inih last */
  int cur;             /* current section occurrence, -1 before any */
  int skip;            /* ignore keys until the next good header */
  int max_line;        /* inih's buffer size, from the reader's `num` */
  int oom;
  int *first; /* per section occurrence: the first one of that name */
  int err_line; /* 0: no error yet */
  torc_status err_status;
  char err[MSG_MAX];
} parse_ctx;

/* Records an error at `line` if it comes before the one kept so far (ties:
 * the first recorded). The message gets the "FILE:LINE: " prefix. */
TORC_PRINTF(3, 4)
static void perr(parse_ctx *c, int line, const char *fmt, ...) {
  if (c->err_line != 0 && c->err_line <= line)
    return;
  char tmp[MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  size_t len = 0;
  append(c->err, sizeof c->err, &len, "%s:%d: %s", c->cfg->path, line, tmp);
  c->err_line = line;
  c->err_status = TORC_ERR_CONFIG;
}

/* Does the stripped line [s, e) have '=' or ':' before any inline comment
 * (inih's rule: ';' after whitespace)? */
static int has_assignment(const char *s, const char *e) {
  for (const char *p = s; p < e; p++) {
    if (*p == '=' || *p == ':')
      return 1;
    if (*p == ';' && p > s && is_blank((unsigned char)p[-1]))
      return 0;
  }
  return 0;
}

/* Handles a "[name]" line [s, e): opens a new section occurrence. */
static void section_header(parse_ctx *c, const char *s, const char *e) {
  const char *close = memchr(s, ']', (size_t)(e - s));
  c->skip = 1;
  if (close == NULL) {
    perr(c, c->line,
         "section header '%.*s' has no closing ']'; write "
         "[name]",
         (int)(e - s > 80 ? 80 : e - s), s);
    return;
  }
  const char *a = s + 1, *b = close;
  while (a < b && is_blank((unsigned char)*a))
    a++;
  while (b > a && is_blank((unsigned char)b[-1]))
    b--;
  if (a == b) {
    perr(c, c->line, "empty section name '[]'; write [name], e.g. [torc]");
    return;
  }
  const char *rest = close + 1;
  while (rest < e && is_blank((unsigned char)*rest))
    rest++;
  if (rest < e && *rest != ';' && *rest != '#')
    perr(c, c->line,
         "unexpected text '%.*s' after [%.*s]; a comment starts "
         "with ';'",
         (int)(e - rest > 60 ? 60 : e - rest), rest, (int)(b - a), a);
  int i = add_section(c->cfg, a, (size_t)(b - a), c->line);
  if (i < 0) {
    c->oom = 1;
    return;
  }
  c->cur = i;
  c->skip = 0;
}

/* inih's line source: hands out one line per call so that c->line is the
 * line inih works on; strips leading blanks (an indented line would be a
 * continuation of the previous value for inih: we do not accept
 * multi-line values) and CRs; detects section headers, over-long lines and
 * NUL bytes. */
static char *reader(char *str, int num, void *stream) {
  parse_ctx *c = stream;
  if (c->p >= c->end || num < 3)
    return NULL;
  c->max_line = num;
  const char *s = c->p;
  const char *nl = memchr(s, '\n', (size_t)(c->end - s));
  const char *e = nl ? nl : c->end;
  c->p = nl ? nl + 1 : c->end;
  c->line++;
  if (e > s && e[-1] == '\r')
    e--;
  if (c->line == 1 && e - s >= 3 && (unsigned char)s[0] == 0xEF &&
      (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
    s += 3;
  size_t raw = (size_t)(e - s);
  int indented = s < e && is_blank((unsigned char)*s);
  while (s < e && is_blank((unsigned char)*s))
    s++;
  str[0] = '\n';
  str[1] = '\0';
  if (memchr(s, '\0', (size_t)(e - s)) != NULL) {
    perr(c, c->line, "the line contains a NUL byte; is this a text file?");
    return str;
  }
  if (s == e || *s == ';' || *s == '#')
    return str; /* blank or comment: comments may be of any length */
  size_t limit = (size_t)num - 2; /* room for '\n' and NUL */
  if (raw > limit) {
    perr(c, c->line,
         "line longer than %zu characters (it has %zu); "
         "shorten it (comment lines may be longer)",
         limit, raw);
    return str;
  }
  if (*s == '[') {
    section_header(c, s, e);
  } else if (!has_assignment(s, e)) {
    perr(c, c->line,
         "cannot parse this line: '%.*s'; expected [section] or "
         "key = value%s",
         (int)(e - s > 80 ? 80 : e - s), s,
         indented ? " (a value cannot continue on an indented line)" : "");
    return str;
  }
  memcpy(str, s, (size_t)(e - s));
  str[e - s] = '\n';
  str[e - s + 1] = '\0';
  return str;
}

static int handler(void *user, const char *section, const char *name,
                   const char *value) {
  parse_ctx *c = user;
  (void)section; /* ours is c->cur: inih truncates names to 49 bytes */
  if (c->oom || c->skip)
    return 1;
  if (c->cur < 0) {
    perr(c, c->line,
         "key '%s' comes before any [section]; put it under "
         "the section it belongs to, e.g. [torc]",
         name);
    return 1;
  }
  cfg_section *s = &c->cfg->s[c->cur];
  if (name[0] == '\0') {
    perr(c, c->line,
         "[%s]: '=' with no key name before it; write key = "
         "value",
         s->name);
    return 1;
  }
  cfg_entry *old = find_entry(s, name);
  if (old) {
    perr(c, c->line,
         "key '%s' in [%s]: given twice in this section (first "
         "at line %d); keep one",
         name, s->name, old->line);
    return 1;
  }
  char *v = dup_str(value);
  if (v == NULL || add_entry(s, name, v, c->line) == NULL)
    c->oom = 1;
  return 1;
}

/* Validates one section occurrence: known section, repeat rule, each key
 * and value (resolving paths), required keys. */
static void validate_section(parse_ctx *c, int i) {
  torc_config *cfg = c->cfg;
  cfg_section *s = &cfg->s[i];
  unsigned flags;
  char list[MSG_MAX], why[MSG_MAX];
  if (!section_known(s->name, &flags)) {
    nearest nr = NEAREST_INIT;
    known_sections(list, sizeof list, s->name, &nr);
    /* a NAME pattern whose prefix matches: the NAME part is wrong */
    row_iter it;
    for (ROWS_EACH(it, r)) {
      const char *star = strchr(r->section, '*');
      size_t pl = star ? (size_t)(star - r->section) : 0;
      if (star && strncmp(s->name, r->section, pl) == 0) {
        char shown[128];
        pattern_show(r->section, shown, sizeof shown);
        perr(c, s->line,
             "section [%s]: the NAME in %s may contain only "
             "letters, digits, '_' and '-'",
             s->name, shown);
        return;
      }
    }
    if (strcmp(s->name, "export") == 0) { /* reserved: not built yet */
      perr(c, s->line,
           "[export]: torc cannot export models yet (ONNX export is "
           "planned; `torc export` is reserved); remove the section. The "
           "checkpoints of [checkpoint] dir hold the trained weights");
      return;
    }
    char hint[160] = "";
    if (nr.word[0])
      snprintf(hint, sizeof hint, "did you mean %s? ", nr.word);
    perr(c, s->line, "unknown section [%s]; %sknown sections: %s", s->name,
         hint, list);
    return;
  }
  if (!(flags & TORC__CFG_REPEAT) && c->first[i] != i)
    perr(c, s->line,
         "section [%s] given twice (first at line %d); it "
         "may appear once: merge the two",
         s->name, cfg->s[c->first[i]].line);
  for (int k = 0; k < s->n; k++) {
    cfg_entry *e = &s->e[k];
    const torc__config_row *r = find_row(s->name, e->key);
    if (r == NULL) {
      nearest nr = NEAREST_INIT;
      known_keys(s->name, e->key, list, sizeof list, &nr);
      char hint[160] = "";
      if (nr.word[0])
        snprintf(hint, sizeof hint, "did you mean '%s'? ", nr.word);
      perr(c, e->line, "key '%s' in [%s]: unknown key; %s[%s] accepts: %s",
           e->key, s->name, hint, s->name, list);
      continue;
    }
    torc_status st =
        check_value(r, e->value, cfg->dir, &e->resolved, why, sizeof why);
    if (st == TORC_ERR_OOM)
      c->oom = 1;
    else if (st != TORC_OK)
      perr(c, e->line, "key '%s' in [%s]: %s", e->key, s->name, why);
  }
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (r->key == NULL || !(r->flags & TORC__CFG_REQUIRED) ||
        !pattern_match(r->section, s->name) || find_entry(s, r->key))
      continue;
    describe(r, list, sizeof list);
    perr(c, s->line, "section [%s] has no '%s' key; add '%s = ...' with %s",
         s->name, r->key, r->key, list);
  }
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
static int *first_occurrences(const torc_config *cfg) {
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

/* Folder of `path` (NULL when it has none: the current directory). */
static char *folder_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    return NULL;
  if (slash == path)
    return dup_str("/");
  return dup_range(path, (size_t)(slash - path));
}

/* Parses and validates text [text, text+len) named `name`; relative paths
 * resolve against the folder of `name` when from_file. */
static torc_config *parse_text(const char *text, size_t len, const char *name,
                               int from_file) {
  torc__ensure_init();
  torc_config *cfg = torc__calloc(1, sizeof *cfg);
  parse_ctx c;
  memset(&c, 0, sizeof c);
  if (cfg == NULL)
    goto oom;
  cfg->path = dup_str(name);
  if (cfg->path == NULL)
    goto oom;
  if (from_file && strchr(name, '/')) {
    cfg->dir = folder_of(name);
    if (cfg->dir == NULL)
      goto oom;
  }
  c.cfg = cfg;
  c.p = text;
  c.end = text + len;
  c.cur = -1;
  int r = ini_parse_stream(reader, &c, handler, &c);
  if (c.oom || r == -2)
    goto oom;
  if (r > 0) /* inih's own complaint; ours at that line, if any, wins */
    perr(&c, r,
         "cannot parse this line: expected [section] or key = "
         "value");
  c.first = first_occurrences(cfg);
  if (c.first == NULL)
    goto oom;
  for (int i = 0; i < cfg->n && !c.oom; i++)
    validate_section(&c, i);
  torc__free(c.first);
  if (c.oom)
    goto oom;
  if (c.err_line) {
    torc_set_error(c.err_status, "%s", c.err);
    torc_config_free(cfg);
    return NULL;
  }
  return cfg;
oom:
  torc_config_free(cfg);
  torc_set_error(TORC_ERR_OOM, "out of memory reading configuration '%s'",
                 name);
  return NULL;
}

torc_config *torc_config_parse(const char *text, const char *name) {
  if (text == NULL) {
    torc_set_error(TORC_ERR_INVALID, "torc_config_parse: text is NULL");
    return NULL;
  }
  return parse_text(text, strlen(text), name ? name : "<string>", 0);
}

torc_config *torc_config_load(const char *path) {
  if (path == NULL) {
    torc_set_error(TORC_ERR_INVALID, "torc_config_load: path is NULL");
    return NULL;
  }
  /* O_NONBLOCK: opening a FIFO must not wait for a writer. Only a regular
   * file is read (a device or FIFO could feed it forever). */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    torc_set_error(TORC_ERR_IO, "cannot open configuration file '%s': %s", path,
                   strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    torc_set_error(TORC_ERR_IO, "cannot read configuration file '%s': %s",
                   path, strerror(e));
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    torc_set_error(TORC_ERR_IO,
                   "configuration file '%s' is %s, not a regular file; give "
                   "the path of an INI file",
                   path,
                   S_ISDIR(sb.st_mode)    ? "a directory"
                   : S_ISFIFO(sb.st_mode) ? "a FIFO"
                   : S_ISCHR(sb.st_mode)  ? "a character device"
                   : S_ISBLK(sb.st_mode)  ? "a block device"
                   : S_ISSOCK(sb.st_mode) ? "a socket"
                                          : "a special file");
    return NULL;
  }
  FILE *f = fdopen(fd, "rb");
  if (f == NULL) {
    close(fd);
    torc_set_error(TORC_ERR_IO, "cannot open configuration file '%s': %s", path,
                   strerror(errno));
    return NULL;
  }
  size_t cap = 4096, len = 0;
  char *buf = torc__malloc(cap);
  int err = 0;
  while (buf) {
    if (len == cap) {
      if (cap >= CFG_MAX_FILE)
        break;
      char *nb = torc__realloc(buf, cap * 2);
      if (nb == NULL) {
        torc__free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f))
        err = errno ? errno : EIO;
      break;
    }
  }
  fclose(f);
  if (buf == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory reading '%s'", path);
    return NULL;
  }
  if (err) {
    torc__free(buf);
    torc_set_error(TORC_ERR_IO, "cannot read configuration file '%s': %s", path,
                   strerror(err));
    return NULL;
  }
  if (len == cap) {
    torc__free(buf);
    torc_set_error(TORC_ERR_CONFIG,
                   "configuration file '%s' is larger than "
                   "%u MiB; is it really an INI file?",
                   path, CFG_MAX_FILE >> 20);
    return NULL;
  }
  torc_config *cfg = parse_text(buf, len, path, 1);
  torc__free(buf);
  return cfg;
}

/* ---- reading ---- */

static const cfg_entry *entry_at(const torc_config *cfg, int i,
                                 const char *key) {
  if (cfg == NULL || key == NULL || i < 0 || i >= cfg->n)
    return NULL;
  return find_entry(&cfg->s[i], key);
}

static const char *entry_value(const cfg_entry *e) {
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
static const char *where(const torc_config *cfg, int line, char *buf,
                         size_t n) {
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

/* ---- --set overrides ---- */

torc_status torc_config_set(torc_config *cfg, const char *assignment) {
  if (cfg == NULL || assignment == NULL)
    return torc_set_error(TORC_ERR_INVALID, "torc_config_set: %s is NULL",
                          cfg == NULL ? "cfg" : "assignment");
  const char *eq = strchr(assignment, '=');
  const char *a = assignment, *b = eq ? eq : assignment;
  while (*a && is_blank((unsigned char)*a))
    a++;
  while (b > a && is_blank((unsigned char)b[-1]))
    b--;
  const char *dot = NULL;
  for (const char *p = a; p < b; p++)
    if (*p == '.')
      dot = p;
  if (eq == NULL || dot == NULL || dot == a || dot + 1 == b)
    return torc_set_error(TORC_ERR_CONFIG,
                          "--set '%s': expected section.key=value, e.g. "
                          "torc.threads=4 or plugin.sim.memory=1M",
                          assignment);
  char section[256], key[256];
  if ((size_t)(dot - a) >= sizeof section ||
      (size_t)(b - dot - 1) >= sizeof key)
    return torc_set_error(TORC_ERR_CONFIG,
                          "--set '%s': section or key name "
                          "too long",
                          assignment);
  snprintf(section, sizeof section, "%.*s", (int)(dot - a), a);
  snprintf(key, sizeof key, "%.*s", (int)(b - dot - 1), dot + 1);
  const char *v = eq + 1, *ve = v + strlen(v);
  while (*v && is_blank((unsigned char)*v))
    v++;
  while (ve > v && is_blank((unsigned char)ve[-1]))
    ve--;
  char *value = dup_range(v, (size_t)(ve - v));
  if (value == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory in torc_config_set");

  char prefix[600], why[MSG_MAX], list[MSG_MAX];
  nearest nr = NEAREST_INIT;
  snprintf(prefix, sizeof prefix, "--set %s.%s=%s", section, key, value);
  unsigned flags;
  if (!section_known(section, &flags)) {
    known_sections(list, sizeof list, section, &nr);
    char hint[160] = "";
    if (nr.word[0])
      snprintf(hint, sizeof hint, "did you mean %s? ", nr.word);
    torc__free(value);
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: unknown section [%s]; %sknown "
                          "sections: %s",
                          prefix, section, hint, list);
  }
  const torc__config_row *r = find_row(section, key);
  if (r == NULL) {
    known_keys(section, key, list, sizeof list, &nr);
    char hint[160] = "";
    if (nr.word[0])
      snprintf(hint, sizeof hint, "did you mean '%s'? ", nr.word);
    torc__free(value);
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: key '%s' in [%s]: unknown "
                          "key; %s[%s] accepts: %s",
                          prefix, key, section, hint, section, list);
  }
  /* Values given on the command line are relative to the current folder. */
  char *resolved = NULL;
  torc_status st = check_value(r, value, NULL, &resolved, why, sizeof why);
  if (st != TORC_OK) {
    torc__free(value);
    torc__free(resolved);
    if (st == TORC_ERR_OOM)
      return torc_set_error(st, "out of memory in torc_config_set");
    return torc_set_error(st, "%s: key '%s' in [%s]: %s", prefix, key, section,
                          why);
  }
  int i = torc__config_find(cfg, section);
  if (i < 0 && (i = add_section(cfg, section, strlen(section), 0)) < 0) {
    torc__free(value);
    torc__free(resolved);
    return torc_set_error(TORC_ERR_OOM, "out of memory in torc_config_set");
  }
  cfg_entry *e = find_entry(&cfg->s[i], key);
  if (e == NULL) {
    e = add_entry(&cfg->s[i], key, value, 0);
    if (e == NULL) {
      torc__free(resolved);
      return torc_set_error(TORC_ERR_OOM, "out of memory in torc_config_set");
    }
  } else {
    torc__free(e->value);
    torc__free(e->resolved);
    e->value = value;
    e->line = 0;
  }
  e->resolved = resolved;
  return TORC_OK;
}

/* ---- applying ---- */

/* Rewrites the last error as "FILE:LINE: <it>" unless it already starts
 * with the file name; keeps its status. */
static torc_status prefix_error(const torc_config *cfg, int line,
                                torc_status st) {
  const char *msg = torc_last_error();
  size_t lp = strlen(cfg->path);
  if (strncmp(msg, cfg->path, lp) == 0 && msg[lp] == ':')
    return st;
  char loc[MSG_MAX / 2];
  return torc_set_error(st, "%s: %s", where(cfg, line, loc, sizeof loc), msg);
}

/* Loads the plugin of section occurrence i. */
static torc_status apply_plugin(const torc_config *cfg, int i,
                                const char *search_path, int allow_insecure) {
  const cfg_section *s = &cfg->s[i];
  const char *name = s->name + strlen("plugin.");
  const char *module = torc__config_value(cfg, i, "module");
  char loc[MSG_MAX / 2];
  if (module == NULL)
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: section [%s] has no "
                          "'module' key; add module = NAME (or --set %s."
                          "module=NAME)",
                          where(cfg, s->line, loc, sizeof loc), s->name,
                          s->name);
  int required = 1;
  int64_t priority = 0;
  torc_status st = torc__config_bool(cfg, i, "required", &required);
  if (st == TORC_OK)
    st = torc__config_int(cfg, i, "priority", &priority);
  if (st != TORC_OK)
    return st;

  const char **keys = torc__malloc(sizeof *keys * (size_t)(s->n + 1));
  const char **values = torc__malloc(sizeof *values * (size_t)(s->n + 1));
  int *lines = torc__malloc(sizeof *lines * (size_t)(s->n + 1));
  if (keys == NULL || values == NULL || lines == NULL) {
    torc__free(keys);
    torc__free(values);
    torc__free(lines);
    return torc_set_error(TORC_ERR_OOM, "out of memory loading [%s]", s->name);
  }
  int n = 0;
  for (int k = 0; k < s->n; k++) {
    const cfg_entry *e = &s->e[k];
    if (strcmp(e->key, "module") == 0 || strcmp(e->key, "required") == 0 ||
        strcmp(e->key, "priority") == 0)
      continue;
    keys[n] = e->key;
    values[n] = entry_value(e);
    lines[n] = e->line;
    n++;
  }
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.name = name;
  opts.search_path = search_path;
  opts.priority = (int)priority;
  opts.allow_insecure = allow_insecure;
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = n;
  /* Sections added by --set have no line: the loader gets no file then. */
  opts.file = s->line > 0 ? cfg->path : NULL;
  opts.line = s->line;
  opts.key_lines = lines;
  st = torc_plugin_load(module, &opts);
  torc__free(keys);
  torc__free(values);
  torc__free(lines);
  if (st == TORC_OK)
    return TORC_OK;
  if (!required) {
    torc_logf(TORC_LOG_WARN,
              "%s: [%s] has required = no and was not "
              "loaded; going on without it: %s",
              where(cfg, s->line, loc, sizeof loc), s->name, torc_last_error());
    torc_clear_error(); /* handled: must not look like a pending failure */
    return TORC_OK;
  }
  return prefix_error(cfg, s->line, st);
}

torc_status torc_config_apply(const torc_config *cfg) {
  if (cfg == NULL)
    return torc_set_error(TORC_ERR_INVALID, "torc_config_apply: cfg is NULL");
  torc__ensure_init();
  torc_status st = TORC_OK;
  int t = torc__config_find(cfg, "torc");
  if (t >= 0) {
    /* Only keys present: one left out keeps the library's setting. */
    if (entry_at(cfg, t, "threads")) {
      int64_t n;
      if ((st = torc__config_int(cfg, t, "threads", &n)) != TORC_OK)
        return st;
      if (n > INT_MAX)
        return torc__config_error(cfg, t, "threads", TORC_ERR_CONFIG,
                                  "%lld threads is more than the %d torc "
                                  "can use",
                                  (long long)n, INT_MAX);
      if ((st = torc_set_num_threads((int)n)) != TORC_OK)
        return prefix_error(cfg, torc__config_key_line(cfg, t, "threads"), st);
    }
    if (entry_at(cfg, t, "seed")) {
      uint64_t seed;
      if ((st = torc__config_uint(cfg, t, "seed", &seed)) != TORC_OK)
        return st;
      torc_manual_seed(seed);
    }
    const char *fb = entry_value(entry_at(cfg, t, "fallback"));
    if (fb)
      torc__set_fallback(strcmp(fb, "cpu") == 0);
  }
  int p = torc__config_find(cfg, "plugins");
  const char *search_path = p >= 0 ? torc__config_value(cfg, p, "path") : NULL;
  int insecure = 0;
  if (p >= 0 &&
      (st = torc__config_bool(cfg, p, "allow_insecure", &insecure)) != TORC_OK)
    return st;
  for (int i = 0; i < cfg->n; i++) {
    if (strncmp(cfg->s[i].name, "plugin.", 7) != 0)
      continue;
    if ((st = apply_plugin(cfg, i, search_path, insecure)) != TORC_OK)
      return st;
  }
  return TORC_OK;
}

torc_status torc_config_device(const torc_config *cfg, torc_device *out) {
  if (cfg == NULL || out == NULL)
    return torc_set_error(TORC_ERR_INVALID, "torc_config_device: %s is NULL",
                          cfg == NULL ? "cfg" : "out");
  torc__ensure_init();
  int d = torc__config_find(cfg, "device");
  const char *type = d >= 0 ? entry_value(entry_at(cfg, d, "type")) : NULL;
  if (type == NULL) {
    *out = TORC_CPU;
    return TORC_OK;
  }
  torc_device dev;
  torc_status st = torc_device_parse(type, &dev);
  if (st != TORC_OK) {
    char loc[MSG_MAX / 2];
    return torc_set_error(
        st, "%s: key 'type' in [device]: %s",
        where(cfg, torc__config_key_line(cfg, d, "type"), loc, sizeof loc),
        torc_last_error());
  }
  *out = dev;
  return TORC_OK;
}

/* ---- the reference of every section and key (`torc help config`) ---- */

char *torc_config_help(void) {
  size_t cap = 8192, len = 0;
  char *out = torc__malloc(cap);
  if (out == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for the configuration help");
    return NULL;
  }
  out[0] = '\0';
  char acc[MSG_MAX], line[2 * MSG_MAX];
  row_iter it;
  for (ROWS_EACH(it, r)) {
    if (r->key == NULL) {
      char shown[128];
      pattern_show(r->section, shown, sizeof shown);
      snprintf(line, sizeof line, "%s%s%s\n    %s\n", len ? "\n" : "", shown,
               (r->flags & TORC__CFG_REPEAT) ? " (may repeat)" : "",
               r->help ? r->help : "");
    } else if (strcmp(r->key, "*") == 0) {
      snprintf(line, sizeof line, "  %-20s %s\n", "(other keys)",
               r->help ? r->help : "");
    } else {
      describe(r, acc, sizeof acc);
      char dflt[160] = "";
      if (r->flags & TORC__CFG_REQUIRED)
        snprintf(dflt, sizeof dflt, "; required");
      else if (r->def)
        snprintf(dflt, sizeof dflt, "; default %s", r->def);
      snprintf(line, sizeof line, "  %-20s %s\n  %-20s (%s%s)\n", r->key,
               r->help ? r->help : "", "", acc, dflt);
    }
    size_t n = strlen(line);
    if (len + n + 1 > cap) {
      while (len + n + 1 > cap)
        cap *= 2;
      char *p = torc__realloc(out, cap);
      if (p == NULL) {
        torc__free(out);
        torc_set_error(TORC_ERR_OOM, "out of memory for the configuration "
                                     "help");
        return NULL;
      }
      out = p;
    }
    memcpy(out + len, line, n + 1);
    len += n;
  }
  return out;
}
