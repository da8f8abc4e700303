/* plugins/data/csv.c — the "csv" source: a delimited text table parsed
 * whole at open into f32 features and targets (class indices of a label
 * column, or f32 regression columns). Errors carry FILE:LINE[:COLUMN].
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data_internal.h"

typedef struct csv_ds {
  int64_t n;          /* rows */
  int64_t n_features; /* F */
  int64_t n_targets;  /* k (regression) */
  int classification;
  float *features;    /* n * F */
  int64_t *classes;   /* n (classification) */
  float *targets;     /* n * k (regression) */
  int64_t n_classes;
  char **class_names; /* n_classes, in index order */
  char *describe;     /* one line */
} csv_ds;

/* One field of a line: its text (unquoted, trimmed) and where it began. */
typedef struct csv_field {
  char *text;   /* points into the line scratch buffer */
  int64_t col;  /* 1-based byte column in the line */
} csv_field;

/* A growing array of fields for one line, and the scratch text. */
typedef struct csv_line {
  csv_field *f;
  int64_t n, cap;
  char *buf;
  size_t buf_cap;
} csv_line;

static void csv_line_free(csv_line *l) {
  free(l->f);
  free(l->buf);
}

static int csv_is_space(char c, char delim) {
  return (c == ' ' || c == '\t') && c != delim;
}

/* Splits line [s, e) (no newline) into l's fields. Quoted fields ("a,b",
 * "say ""hi""") are unquoted; spaces around fields are trimmed. Returns
 * TORC_OK or an error naming FILE:LINE:COLUMN. */
static int csv_split(const char *path, int64_t lineno, const char *s,
                     const char *e, char delim, csv_line *l) {
  size_t need = (size_t)(e - s) + 1;
  if (l->buf_cap < need) {
    char *nb = realloc(l->buf, need);
    if (nb == NULL)
      return dsrc_oom("csv", need);
    l->buf = nb;
    l->buf_cap = need;
  }
  char *out = l->buf;
  l->n = 0;
  const char *p = s;
  for (;;) {
    while (p < e && csv_is_space(*p, delim))
      p++;
    if (l->n == l->cap) {
      int64_t ncap = l->cap ? l->cap * 2 : 16;
      csv_field *nf = realloc(l->f, sizeof *nf * (size_t)ncap);
      if (nf == NULL)
        return dsrc_oom("csv", sizeof *nf * (size_t)ncap);
      l->f = nf;
      l->cap = ncap;
    }
    csv_field *f = &l->f[l->n++];
    f->col = (int64_t)(p - s) + 1;
    f->text = out;
    if (p < e && *p == '"') {
      const char *q = p + 1;
      for (;;) {
        if (q >= e)
          return dsrc_error(TORC_ERR_IO,
                            "%s:%" PRId64 ":%" PRId64 ": a quoted field has "
                            "no closing quote (a quoted field cannot span "
                            "lines); close the quote",
                            path, lineno, f->col);
        if (*q == '"') {
          if (q + 1 < e && q[1] == '"') {
            *out++ = '"';
            q += 2;
            continue;
          }
          q++;
          break;
        }
        *out++ = *q++;
      }
      while (q < e && csv_is_space(*q, delim))
        q++;
      if (q < e && *q != delim)
        return dsrc_error(TORC_ERR_IO,
                          "%s:%" PRId64 ":%" PRId64 ": text after the "
                          "closing quote of a field; put the delimiter "
                          "right after the quote",
                          path, lineno, (int64_t)(q - s) + 1);
      p = q;
    } else {
      const char *start = p;
      while (p < e && *p != delim)
        p++;
      const char *end = p;
      while (end > start && csv_is_space(end[-1], delim))
        end--;
      memcpy(out, start, (size_t)(end - start));
      out += end - start;
    }
    *out++ = '\0';
    if (p >= e)
      break;
    p++; /* the delimiter */
  }
  return TORC_OK;
}

/* The next line of [*cur, end): sets [*ls, *le) without "\r\n", advances
 * *cur; returns 0 at the end. */
static int csv_next_line(const char **cur, const char *end, const char **ls,
                         const char **le) {
  if (*cur >= end)
    return 0;
  const char *s = *cur;
  const char *nl = memchr(s, '\n', (size_t)(end - s));
  const char *e = nl ? nl : end;
  *cur = nl ? nl + 1 : end;
  if (e > s && e[-1] == '\r')
    e--;
  *ls = s;
  *le = e;
  return 1;
}

static int csv_blank(const char *s, const char *e) {
  for (; s < e; s++)
    if (*s != ' ' && *s != '\t')
      return 0;
  return 1;
}

/* Parses a number field: 1 for a finite number, -1 for inf or nan, 0 for
 * anything else (empty too). */
static int csv_number(const char *text, double *out) {
  if (text[0] == '\0')
    return 0;
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || *end != '\0')
    return 0;
  if (!isfinite(v))
    return -1;
  *out = v;
  return 1;
}

/* How a delimiter is written in messages. */
static const char *csv_delim_name(char d, char *buf, size_t size) {
  if (d == '\t')
    return "tab";
  snprintf(buf, size, "'%c'", d);
  return buf;
}

/* Resolves a column spec (a header name, a 0-based index, "last") to an
 * index. */
static int csv_column(const char *path, const char *key, const char *spec,
                      char **names, int64_t n_cols, int64_t *out) {
  if (strcmp(spec, "last") == 0) {
    *out = n_cols - 1;
    return TORC_OK;
  }
  for (int64_t i = 0; names && i < n_cols; i++)
    if (strcmp(names[i], spec) == 0) {
      *out = i;
      return TORC_OK;
    }
  char *end = NULL;
  errno = 0;
  long long v = strtoll(spec, &end, 10);
  if (end != spec && *end == '\0' && errno == 0 && v >= 0 && v < n_cols) {
    *out = v;
    return TORC_OK;
  }
  char list[512];
  size_t len = 0;
  list[0] = '\0';
  for (int64_t i = 0; names && i < n_cols && len < sizeof list - 8; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'",
                            i ? ", " : "", names[i]);
  return dsrc_error(TORC_ERR_INVALID,
                    "csv: key '%s': '%s' is not a column of '%s'; give a "
                    "column name%s%s%s, a 0-based index below %" PRId64
                    " or last",
                    key, spec, path, names ? " (" : "", names ? list : "",
                    names ? ")" : "", n_cols);
}

/* Resolves a comma-separated list of column specs. */
static int csv_columns(const char *path, const char *key, const char *spec,
                       char **names, int64_t n_cols, int64_t **out,
                       int64_t *n_out) {
  *out = NULL;
  *n_out = 0;
  int64_t cap = 1;
  for (const char *p = spec; *p; p++)
    cap += *p == ',';
  int64_t *idx = malloc(sizeof *idx * (size_t)cap);
  if (idx == NULL)
    return dsrc_oom("csv", sizeof *idx * (size_t)cap);
  int64_t n = 0;
  const char *p = spec;
  for (;;) {
    const char *c = strchr(p, ',');
    const char *e = c ? c : p + strlen(p);
    while (p < e && isspace((unsigned char)*p))
      p++;
    while (e > p && isspace((unsigned char)e[-1]))
      e--;
    char one[256];
    snprintf(one, sizeof one, "%.*s", (int)(e - p), p);
    if (one[0] != '\0') {
      int st = csv_column(path, key, one, names, n_cols, &idx[n]);
      if (st != TORC_OK) {
        free(idx);
        return st;
      }
      for (int64_t j = 0; j < n; j++)
        if (idx[j] == idx[n]) {
          free(idx);
          return dsrc_error(TORC_ERR_INVALID,
                            "csv: key '%s' names column '%s' twice; give "
                            "each column once",
                            key, one);
        }
      n++;
    }
    if (c == NULL)
      break;
    p = c + 1;
  }
  *out = idx;
  *n_out = n;
  return TORC_OK;
}

/* One label while building the mapping. */
typedef struct csv_label {
  const char *s;
  double v;
  int numeric; /* every label is a number: order by v first */
  int64_t row;
} csv_label;

/* Label order: numerically when every label is a number (so "10" comes
 * after "9"), else byte order. */
static int csv_label_cmp(const void *a, const void *b) {
  const csv_label *x = a, *y = b;
  if (x->numeric) {
    if (x->v < y->v)
      return -1;
    if (x->v > y->v)
      return 1;
  }
  int c = strcmp(x->s, y->s);
  if (c)
    return c;
  return x->row < y->row ? -1 : x->row > y->row;
}

static void csv_close(void *handle) {
  csv_ds *ds = handle;
  if (ds == NULL)
    return;
  free(ds->features);
  free(ds->classes);
  free(ds->targets);
  for (int64_t i = 0; ds->class_names && i < ds->n_classes; i++)
    free(ds->class_names[i]);
  free(ds->class_names);
  free(ds->describe);
  free(ds);
}

static int csv_delimiter(const char *text, char *out) {
  static const struct {
    const char *name;
    char c;
  } names[] = {{"comma", ','}, {"tab", '\t'}, {"\\t", '\t'},
               {"semicolon", ';'}, {"space", ' '}, {"pipe", '|'}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcasecmp(text, names[i].name) == 0) {
      *out = names[i].c;
      return TORC_OK;
    }
  if (strlen(text) == 1 && text[0] != '"' && text[0] != '\n' &&
      text[0] != '\r') {
    *out = text[0];
    return TORC_OK;
  }
  return dsrc_error(TORC_ERR_INVALID,
                    "csv: key 'delimiter' = '%s' is not one character; give "
                    "one character or comma, tab, semicolon, space or pipe",
                    text);
}

/* The column's display name for messages. */
static void csv_colname(char *buf, size_t size, char **names, int64_t i) {
  if (names)
    snprintf(buf, size, "column '%s'", names[i]);
  else
    snprintf(buf, size, "column %" PRId64, i);
}

/* Builds the label mapping: sorted distinct labels -> class indices. */
static int csv_map_labels(csv_ds *ds, char **labels, const char *path,
                          const char *colname, int *numeric_out) {
  size_t n = (size_t)ds->n;
  csv_label *items = malloc(sizeof *items * n);
  ds->classes = malloc(sizeof *ds->classes * n);
  if (items == NULL || ds->classes == NULL) {
    free(items);
    return dsrc_oom("csv", sizeof *items * n);
  }
  int numeric = 1;
  for (size_t i = 0; i < n; i++) {
    items[i].s = labels[i];
    items[i].row = (int64_t)i;
    items[i].v = 0;
    if (numeric && csv_number(labels[i], &items[i].v) != 1)
      numeric = 0;
  }
  for (size_t i = 0; i < n; i++)
    items[i].numeric = numeric;
  qsort(items, n, sizeof *items, csv_label_cmp);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || strcmp(items[i - 1].s, items[i].s) != 0)
      k++;
    ds->classes[items[i].row] = (int64_t)k - 1;
  }
  ds->class_names = calloc(k, sizeof *ds->class_names);
  if (ds->class_names == NULL) {
    free(items);
    return dsrc_oom("csv", sizeof *ds->class_names * k);
  }
  ds->n_classes = (int64_t)k;
  for (size_t i = 0, c = 0; i < n; i++) {
    if (i > 0 && strcmp(items[i - 1].s, items[i].s) == 0)
      continue;
    ds->class_names[c] = dsrc_strndup(items[i].s, strlen(items[i].s));
    if (ds->class_names[c] == NULL) {
      size_t len = strlen(items[i].s) + 1;
      free(items);
      return dsrc_oom("csv", len);
    }
    c++;
  }
  free(items);
  *numeric_out = numeric;
  char map[1024];
  size_t len = 0;
  map[0] = '\0';
  for (size_t i = 0; i < k && len < sizeof map - 16; i++)
    len += (size_t)snprintf(map + len, sizeof map - len, "%s%zu = %s",
                            i ? ", " : "", i, ds->class_names[i]);
  if (len >= sizeof map - 16)
    snprintf(map + sizeof map - 16, 16, ", ...");
  dsrc_log(TORC_LOG_INFO, "csv: %s: %zu classes from %s, in %s order: %s",
           path, k, colname, numeric ? "numeric" : "sorted (byte)", map);
  return TORC_OK;
}

static int csv_parse(csv_ds *ds, const char *path, char *text, size_t size,
                     int header, char delim, const char *label_spec,
                     int classification, const char *target_spec,
                     const char *feature_spec) {
  const char *cur = text, *end = text + size;
  /* A UTF-8 byte-order mark (spreadsheet exports) is not data. */
  if (size >= 3 && memcmp(cur, "\xEF\xBB\xBF", 3) == 0)
    cur += 3;
  csv_line line = {0};
  char **names = NULL;
  int64_t n_cols = 0, *feat = NULL, *targ = NULL, n_targ = 0, n_feat = 0;
  char **labels = NULL;
  int64_t cap = 0, first_line = 0, n_labels = 0;
  int numeric = 0;
  char dn[8];
  const char *ls = NULL, *le = NULL;
  int64_t lineno = 0;
  int st = TORC_OK;
  /* The first non-blank line: the header, or the first row. */
  while (csv_next_line(&cur, end, &ls, &le)) {
    lineno++;
    if (!csv_blank(ls, le))
      break;
    ls = NULL;
  }
  if (lineno == 0 || ls == NULL) {
    st = dsrc_error(TORC_ERR_IO,
                    "csv: file '%s' is empty; give a CSV file with %s rows",
                    path, header ? "a header and" : "data");
    goto done;
  }
  if ((st = csv_split(path, lineno, ls, le, delim, &line)) != TORC_OK)
    goto done;
  n_cols = line.n;
  first_line = lineno;
  if (n_cols < 2) {
    st = dsrc_error(TORC_ERR_IO,
                    "%s:%" PRId64 ": the %s has 1 field; a CSV needs a "
                    "target and at least one feature: check the delimiter "
                    "(key 'delimiter' is %s)",
                    path, lineno, header ? "header" : "first row",
                    csv_delim_name(delim, dn, sizeof dn));
    goto done;
  }
  if (header) {
    names = calloc((size_t)n_cols, sizeof *names);
    if (names == NULL) {
      st = dsrc_oom("csv", sizeof *names * (size_t)n_cols);
      goto done;
    }
    for (int64_t i = 0; i < n_cols; i++) {
      names[i] = dsrc_strndup(line.f[i].text, strlen(line.f[i].text));
      if (names[i] == NULL) {
        st = dsrc_oom("csv", strlen(line.f[i].text) + 1);
        goto done;
      }
    }
  }
  /* Targets, then features. */
  if (classification || target_spec[0] == '\0') {
    targ = malloc(sizeof *targ);
    if (targ == NULL) {
      st = dsrc_oom("csv", sizeof *targ);
      goto done;
    }
    n_targ = 1;
    st = csv_column(path, "label_column", label_spec, names, n_cols, targ);
  } else {
    st = csv_columns(path, "target_columns", target_spec, names, n_cols,
                     &targ, &n_targ);
  }
  if (st != TORC_OK)
    goto done;
  if (feature_spec[0] == '\0') {
    feat = malloc(sizeof *feat * (size_t)n_cols);
    if (feat == NULL) {
      st = dsrc_oom("csv", sizeof *feat * (size_t)n_cols);
      goto done;
    }
    for (int64_t i = 0; i < n_cols; i++) {
      int is_t = 0;
      for (int64_t j = 0; j < n_targ; j++)
        is_t |= targ[j] == i;
      if (!is_t)
        feat[n_feat++] = i;
    }
  } else {
    st = csv_columns(path, "feature_columns", feature_spec, names, n_cols,
                     &feat, &n_feat);
    if (st != TORC_OK)
      goto done;
    for (int64_t i = 0; i < n_feat; i++)
      for (int64_t j = 0; j < n_targ; j++)
        if (feat[i] == targ[j]) {
          char cn[300];
          csv_colname(cn, sizeof cn, names, feat[i]);
          st = dsrc_error(TORC_ERR_INVALID,
                          "csv: %s of '%s' is both a feature and a target; "
                          "remove it from feature_columns",
                          cn, path);
          goto done;
        }
  }
  if (n_feat == 0 || n_targ == 0) {
    st = dsrc_error(TORC_ERR_INVALID,
                    "csv: '%s' leaves no %s column; give %s",
                    path, n_feat == 0 ? "feature" : "target",
                    n_feat == 0 ? "feature_columns" : "target_columns");
    goto done;
  }
  ds->n_features = n_feat;
  ds->n_targets = classification ? 0 : n_targ;
  ds->classification = classification;

  /* The data rows. The first line is one when there is no header. */
  int64_t n = 0;
  int pending = !header;
  for (;;) {
    if (pending) {
      pending = 0;
      lineno = first_line;
    } else {
      if (!csv_next_line(&cur, end, &ls, &le))
        break;
      lineno++;
      if (csv_blank(ls, le))
        continue;
      if ((st = csv_split(path, lineno, ls, le, delim, &line)) != TORC_OK)
        goto done;
    }
    if (line.n != n_cols) {
      st = dsrc_error(TORC_ERR_IO,
                      "%s:%" PRId64 ": row has %" PRId64 " field%s, the %s "
                      "has %" PRId64 "; give every row the same fields "
                      "(quote fields that contain the delimiter, %s)",
                      path, lineno, line.n, line.n == 1 ? "" : "s",
                      header ? "header" : "first row", n_cols,
                      csv_delim_name(delim, dn, sizeof dn));
      goto done;
    }
    if (n == cap) {
      int64_t ncap = cap ? cap * 2 : 1024;
      float *nf = realloc(ds->features,
                          sizeof *nf * (size_t)(ncap * n_feat));
      if (nf == NULL) {
        st = dsrc_oom("csv", sizeof *nf * (size_t)(ncap * n_feat));
        goto done;
      }
      ds->features = nf;
      if (classification) {
        char **nl = realloc(labels, sizeof *nl * (size_t)ncap);
        if (nl == NULL) {
          st = dsrc_oom("csv", sizeof *nl * (size_t)ncap);
          goto done;
        }
        labels = nl;
      } else {
        float *nt = realloc(ds->targets,
                            sizeof *nt * (size_t)(ncap * n_targ));
        if (nt == NULL) {
          st = dsrc_oom("csv", sizeof *nt * (size_t)(ncap * n_targ));
          goto done;
        }
        ds->targets = nt;
      }
      cap = ncap;
    }
    for (int64_t j = 0; j < n_feat + (classification ? 0 : n_targ); j++) {
      int64_t c = j < n_feat ? feat[j] : targ[j - n_feat];
      const csv_field *f = &line.f[c];
      double v = 0;
      int kind = csv_number(f->text, &v);
      if (kind != 1) {
        char cn[300];
        csv_colname(cn, sizeof cn, names, c);
        st = dsrc_error(TORC_ERR_IO,
                        "%s:%" PRId64 ":%" PRId64 ": '%s' is not a %snumber "
                        "(%s); it is a %s: fix the value%s",
                        path, lineno, f->col, f->text,
                        kind < 0 ? "finite " : "", cn,
                        j < n_feat ? "feature" : "regression target",
                        j < n_feat ? " or leave the column out with "
                                     "feature_columns"
                                   : "");
        goto done;
      }
      if (j < n_feat)
        ds->features[n * n_feat + j] = (float)v;
      else
        ds->targets[n * n_targ + (j - n_feat)] = (float)v;
    }
    if (classification) {
      const csv_field *f = &line.f[targ[0]];
      if (f->text[0] == '\0') {
        char cn[300];
        csv_colname(cn, sizeof cn, names, targ[0]);
        st = dsrc_error(TORC_ERR_IO,
                        "%s:%" PRId64 ":%" PRId64 ": the label (%s) is "
                        "empty; give every row a label",
                        path, lineno, f->col, cn);
        goto done;
      }
      labels[n] = dsrc_strndup(f->text, strlen(f->text));
      if (labels[n] == NULL) {
        st = dsrc_oom("csv", strlen(f->text) + 1);
        goto done;
      }
      n_labels = n + 1;
    }
    n++;
  }
  ds->n = n;
  if (n == 0) {
    st = dsrc_error(TORC_ERR_IO, "csv: file '%s' has a header but no data "
                                 "rows; give a file with data",
                    path);
    goto done;
  }
  char tcol[300];
  csv_colname(tcol, sizeof tcol, names, targ[0]);
  if (classification &&
      (st = csv_map_labels(ds, labels, path, tcol, &numeric)) != TORC_OK)
    goto done;
  /* The description. */
  char buf[512];
  size_t len = 0;
  buf[0] = '\0';
  if (classification) {
    dsrc_appendf(buf, sizeof buf, &len,
                 "%" PRId64 " samples, input [%" PRId64 "] f32, %" PRId64
                 " classes (%s, %s order:",
                 n, n_feat, ds->n_classes, tcol,
                 numeric ? "numeric" : "sorted");
    int64_t shown = 0;
    for (; shown < ds->n_classes && len < 400; shown++)
      dsrc_appendf(buf, sizeof buf, &len, "%s %s", shown ? "," : "",
                   ds->class_names[shown]);
    if (shown < ds->n_classes)
      dsrc_appendf(buf, sizeof buf, &len, ", ...");
    dsrc_appendf(buf, sizeof buf, &len, ")");
  } else {
    dsrc_appendf(buf, sizeof buf, &len,
                 "%" PRId64 " samples, input [%" PRId64 "] f32, "
                 "regression targets [%" PRId64 "] f32 (",
                 n, n_feat, n_targ);
    for (int64_t i = 0; i < n_targ && len < 400; i++) {
      char cn[300];
      csv_colname(cn, sizeof cn, names, targ[i]);
      dsrc_appendf(buf, sizeof buf, &len, "%s%s", i ? ", " : "", cn);
    }
    dsrc_appendf(buf, sizeof buf, &len, ")");
  }
  ds->describe = dsrc_strndup(buf, strlen(buf));
  if (ds->describe == NULL)
    st = dsrc_oom("csv", strlen(buf) + 1);
done:
  for (int64_t i = 0; i < n_labels; i++)
    free(labels[i]);
  free(labels);
  for (int64_t i = 0; names && i < n_cols; i++)
    free(names[i]);
  free(names);
  free(feat);
  free(targ);
  csv_line_free(&line);
  return st;
}

static int csv_open(const char *const *keys, const char *const *values, int n,
                    void *user, void **handle) {
  (void)user;
  *handle = NULL;
  const char *path = dsrc_value(keys, values, n, "path");
  const char *header_s = dsrc_value(keys, values, n, "header");
  const char *delim_s = dsrc_value(keys, values, n, "delimiter");
  const char *label = dsrc_value(keys, values, n, "label_column");
  const char *task = dsrc_value(keys, values, n, "task");
  const char *targets = dsrc_value(keys, values, n, "target_columns");
  const char *features = dsrc_value(keys, values, n, "feature_columns");
  int header = 1, classification = 1;
  char delim = ',';
  int st = dsrc_parse_bool("csv", "header", header_s ? header_s : "yes",
                           &header);
  if (st == TORC_OK)
    st = csv_delimiter(delim_s ? delim_s : ",", &delim);
  if (st != TORC_OK)
    return st;
  if (task == NULL || strcmp(task, "classification") == 0)
    classification = 1;
  else if (strcmp(task, "regression") == 0)
    classification = 0;
  else
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: key 'task' = '%s' is not a task; give "
                      "classification or regression",
                      task);
  if (classification && targets && targets[0] != '\0')
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: key 'target_columns' = '%s' is for task = "
                      "regression; for classification give label_column",
                      targets);
  uint64_t max_bytes;
  st = dsrc_limit("csv", "max_bytes", keys, values, n, DSRC_CSV_MAX_BYTES,
                  &max_bytes);
  if (st != TORC_OK)
    return st;
  char *text;
  size_t size;
  st = dsrc_read_file("csv", "path", path, max_bytes, "max_bytes", &text,
                      &size);
  if (st != TORC_OK)
    return st;
  csv_ds *ds = calloc(1, sizeof *ds);
  if (ds == NULL) {
    free(text);
    return dsrc_oom("csv", sizeof *ds);
  }
  st = csv_parse(ds, path, text, size, header, delim,
                 label && label[0] ? label : "last", classification,
                 targets ? targets : "", features ? features : "");
  free(text);
  if (st != TORC_OK) {
    csv_close(ds);
    return st;
  }
  *handle = ds;
  return TORC_OK;
}

static int64_t csv_length(void *handle) { return ((csv_ds *)handle)->n; }

static int csv_get(void *handle, int64_t index, torc_tensor **input,
                   torc_tensor **target) {
  const csv_ds *ds = handle;
  const int64_t fshape[1] = {ds->n_features};
  int st = dsrc_tensor(ds->features + index * ds->n_features, fshape, 1,
                       TORC_F32, input);
  if (st != TORC_OK)
    return st;
  if (ds->classification) {
    st = dsrc_class_target(ds->classes[index], target);
  } else {
    const int64_t tshape[1] = {ds->n_targets};
    st = dsrc_tensor(ds->targets + index * ds->n_targets, tshape, 1,
                     TORC_F32, target);
  }
  if (st != TORC_OK) {
    dsrc_api->release(*input);
    *input = NULL;
  }
  return st;
}

static int csv_describe(void *handle, char *buf, size_t size) {
  snprintf(buf, size, "%s", ((csv_ds *)handle)->describe);
  return TORC_OK;
}

static int64_t csv_num_classes(void *handle) {
  const csv_ds *ds = handle;
  return ds->classification ? ds->n_classes : 0;
}

static int csv_class_name(void *handle, int64_t i, char *buf, size_t size) {
  const csv_ds *ds = handle;
  if (!ds->classification || i < 0 || i >= ds->n_classes)
    return dsrc_error(TORC_ERR_RANGE,
                      "csv: class %" PRId64 " is out of range [0, %" PRId64
                      ")",
                      i, ds->classification ? ds->n_classes : 0);
  snprintf(buf, size, "%s", ds->class_names[i]);
  return TORC_OK;
}

static const torc_data_key csv_keys[] = {
    {"path", "the CSV file", NULL, 1},
    {"header", "yes: the first line names the columns; no: it is data",
     "yes", 0},
    {"delimiter", "one character, or comma, tab, semicolon, space, pipe",
     "comma", 0},
    {"label_column", "the target column: a header name, a 0-based index, "
                     "or last",
     "last", 0},
    {"task", "classification (labels become class indices, in sorted "
             "order; numeric order when all are numbers) | regression",
     "classification", 0},
    {"target_columns", "regression: the target columns (names or 0-based "
                       "indices, comma-separated); empty = label_column",
     "", 0},
    {"feature_columns", "the feature columns (names or 0-based indices, "
                        "comma-separated); empty = every other column",
     "", 0},
    {"max_bytes", "the largest CSV file read (K, M, G suffixes); a larger "
                  "one, or a device or pipe, is refused before reading",
     DSRC_CSV_MAX_BYTES, 0},
    {NULL, NULL, NULL, 0},
};

const torc_data_source_type dsrc_csv_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "csv",
    .description = "a CSV table: input f32 [features], target a class index "
                   "(classification) or f32 [k] (regression)",
    .keys = csv_keys,
    .open = csv_open,
    .length = csv_length,
    .get = csv_get,
    .close = csv_close,
    .describe = csv_describe,
    .num_classes = csv_num_classes,
    .class_name = csv_class_name,
    .user = NULL,
};
