/* core/config_get.c — the configuration calls of torc/config.h that code
 * above the core builds with: finding a section, reading its keys typed
 * (the schema's defaults applied), errors with the file and line, and
 * adding sections to the schema; each over config.c's own.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "torc/config.h"

int torc_config_find(const torc_config *cfg, const char *section) {
  return torc__config_find(cfg, section);
}

const char *torc_config_value(const torc_config *cfg, int i, const char *key) {
  return torc__config_value(cfg, i, key);
}

/* The checks every typed read starts with: the arguments, and a key that
 * is set or has a default. */
static torc_status typed_ok(const torc_config *cfg, int i, const char *key,
                            const void *out, const char *fn) {
  if (cfg == NULL || key == NULL || out == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: %s is NULL", fn,
                          cfg == NULL   ? "cfg"
                          : key == NULL ? "key"
                                        : "out");
  if (torc__config_value(cfg, i, key) == NULL)
    return torc__config_error(cfg, i, key, TORC_ERR_CONFIG,
                              "%s: the key is not set and has no default", fn);
  return TORC_OK;
}

torc_status torc_config_get_int(const torc_config *cfg, int i, const char *key,
                                int64_t *out) {
  torc_status st = typed_ok(cfg, i, key, out, "torc_config_get_int");
  return st ? st : torc__config_int(cfg, i, key, out);
}

torc_status torc_config_get_double(const torc_config *cfg, int i,
                                   const char *key, double *out) {
  torc_status st = typed_ok(cfg, i, key, out, "torc_config_get_double");
  return st ? st : torc__config_float(cfg, i, key, out);
}

torc_status torc_config_get_bool(const torc_config *cfg, int i, const char *key,
                                 int *out) {
  torc_status st = typed_ok(cfg, i, key, out, "torc_config_get_bool");
  return st ? st : torc__config_bool(cfg, i, key, out);
}

torc_status torc_config_error(const torc_config *cfg, int i, const char *key,
                              torc_status status, const char *fmt, ...) {
  char msg[1024] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
  }
  return torc__config_error(cfg, i, key, status, "%s", msg);
}

/* ---- schema tables ----
 * The public rows are copied into the core's own row type, into a static
 * pool (no allocation: tables are registered from library constructors,
 * before TORC_FAIL_ALLOC could be told apart from a real failure). The
 * registry holds 64 tables; the pool has room for as many rows as the
 * sections of a large program. */

_Static_assert((int)TORC_CONFIG_SECTION == (int)TORC__CFG_SECTION &&
                   (int)TORC_CONFIG_INT == (int)TORC__CFG_INT &&
                   (int)TORC_CONFIG_UINT == (int)TORC__CFG_UINT &&
                   (int)TORC_CONFIG_FLOAT == (int)TORC__CFG_FLOAT &&
                   (int)TORC_CONFIG_BOOL == (int)TORC__CFG_BOOL &&
                   (int)TORC_CONFIG_ENUM == (int)TORC__CFG_ENUM &&
                   (int)TORC_CONFIG_STRING == (int)TORC__CFG_STRING &&
                   (int)TORC_CONFIG_PATH == (int)TORC__CFG_PATH &&
                   (int)TORC_CONFIG_PATHS == (int)TORC__CFG_PATHS &&
                   (int)TORC_CONFIG_BYTES == (int)TORC__CFG_BYTES &&
                   (int)TORC_CONFIG_MODULE == (int)TORC__CFG_MODULE &&
                   (int)TORC_CONFIG_ANY == (int)TORC__CFG_ANY,
               "torc_config_type and torc__config_type differ");
_Static_assert((unsigned)TORC_CONFIG_REQUIRED == (unsigned)TORC__CFG_REQUIRED &&
                   (unsigned)TORC_CONFIG_REPEAT == (unsigned)TORC__CFG_REPEAT,
               "the schema row flags differ");

#define POOL_ROWS 2048
#define POOL_TABLES 64

static torc__config_row pool[POOL_ROWS];
static size_t pool_used;
static const torc_config_row *added[POOL_TABLES]; /* the callers' tables */
static int n_added;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

torc_status torc_config_schema_add(const torc_config_row *rows) {
  if (rows == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_config_schema_add: rows is NULL");
  pthread_mutex_lock(&pool_lock);
  torc_status st = TORC_OK;
  for (int t = 0; t < n_added; t++)
    if (added[t] == rows)
      goto out;
  size_t n = 0;
  while (rows[n].section != NULL && n < POOL_ROWS)
    n++;
  if (n_added == POOL_TABLES || n + 1 > POOL_ROWS - pool_used) {
    st = torc_set_error(TORC_ERR_INVALID,
                        "torc_config_schema_add: the schema has room for %d "
                        "tables of %d rows in all, and this table of %zu "
                        "rows does not fit",
                        POOL_TABLES, POOL_ROWS, n);
    goto out;
  }
  torc__config_row *t = pool + pool_used;
  for (size_t i = 0; i < n; i++)
    t[i] = (torc__config_row){
        rows[i].section, rows[i].key,      (torc__config_type)rows[i].type,
        rows[i].def,     rows[i].accepted, rows[i].flags,
        rows[i].help};
  memset(&t[n], 0, sizeof t[n]);
  st = torc__config_schema_add(t);
  if (st == TORC_OK) {
    pool_used += n + 1;
    added[n_added++] = rows;
  } else {
    /* The registry names itself; say the function the caller called. */
    char msg[1024];
    const char *m = torc_last_error();
    const char *own = "torc__config_schema_add";
    snprintf(msg, sizeof msg, "%s", m);
    if (strncmp(msg, own, strlen(own)) == 0)
      torc_set_error(st, "torc_config_schema_add%s", msg + strlen(own));
  }
out:
  pthread_mutex_unlock(&pool_lock);
  return st;
}
