/* core/config_schema.c — the schema a configuration is checked against:
 * the registry of section and key tables, section patterns, the value
 * types and the checks of values, and the `torc help config` reference.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

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

static const torc__config_row *rows_skip_empty(row_iter *it) {
  while (it->r->section == NULL) {
    if (++it->t >= it->n)
      return NULL;
    it->r = schema_tables[it->t];
  }
  return it->r;
}

const torc__config_row *rows_first(row_iter *it) {
  it->n = atomic_load_explicit(&schema_n, memory_order_acquire);
  it->t = 0;
  it->r = schema_tables[0];
  return rows_skip_empty(it);
}

const torc__config_row *rows_next(row_iter *it) {
  it->r++;
  return rows_skip_empty(it);
}

/* ---- the nearest known word ("did you mean") ---- */

/* Considers `cand` for `word`; keeps `shown` (the way to print it, NULL =
 * cand itself) when it is the nearest so far. */
static void suggest(nearest *nr, const char *word, const char *cand,
                    const char *shown) {
  size_t len = strlen(cand);
  size_t limit = 1 + len / 4;
  if (limit > 3)
    limit = 3;
  size_t d = torc_edit_distance(word, cand);
  if (d <= limit && d < len && d < nr->d) {
    nr->d = d;
    snprintf(nr->word, sizeof nr->word, "%s", shown ? shown : cand);
  }
}

/* ---- section patterns ---- */

/* Does `name` match `pat` ('*' = one NAME of letters, digits, '_', '-')? */
int pattern_match(const char *pat, const char *name) {
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
void pattern_show(const char *pat, char *buf, size_t n) {
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
int section_known(const char *section, unsigned *flags) {
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
const torc__config_row *find_row(const char *section, const char *key) {
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
int parse_i64(const char *s, int64_t *out) {
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

int parse_u64(const char *s, uint64_t *out) {
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

int parse_f64(const char *s, double *out) {
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
int parse_bool(const char *s) {
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
int parse_bytes(const char *s, uint64_t *out) {
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
void describe(const torc__config_row *r, char *buf, size_t n) {
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
torc_status check_value(const torc__config_row *r, const char *value,
                        const char *dir, char **resolved, char *why, size_t n) {
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
void known_sections(char *buf, size_t n, const char *name, nearest *nr) {
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
void known_keys(const char *section, const char *key, char *buf, size_t n,
                nearest *nr) {
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
    const char *rk = r->key;
    if (torc__key_alias(section, key, &rk, 1, NULL) == 0) {
      nr->d = 0; /* a PyTorch name for this key: the best suggestion */
      snprintf(nr->word, sizeof nr->word, "%s", r->key);
    }
  }
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
      size_t l = (size_t)snprintf(line, sizeof line, "  %-20s %s\n",
                                  "(other keys)", r->help ? r->help : "");
      if (strcmp(r->section, "layer") == 0 && l < sizeof line)
        aliases_line(line + l, sizeof line - l);
    } else {
      describe(r, acc, sizeof acc);
      const char *alias = torc_config_key_alias(r->section, r->key);
      char shown[96];
      snprintf(shown, sizeof shown, "%s%s%s%s", r->key, alias ? " (or " : "",
               alias ? alias : "", alias ? ")" : "");
      char dflt[160] = "";
      if (r->flags & TORC__CFG_REQUIRED)
        snprintf(dflt, sizeof dflt, "; required");
      else if (r->def)
        snprintf(dflt, sizeof dflt, "; default %s", r->def);
      snprintf(line, sizeof line, "  %-20s %s\n  %-20s (%s%s)\n", shown,
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
