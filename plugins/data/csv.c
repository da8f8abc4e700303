/* plugins/data/csv.c — the "csv" source: a delimited text table parsed
 * whole at open into f32 features and targets (class indices of a label
 * column, or f32 regression columns). Errors carry FILE:LINE[:COLUMN].
 * With text_column the input is instead one column's text as padded i64
 * token ids (char or byte level, the vocabulary of vocab.c with <pad> at
 * id 0), for sequence classification.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data_internal.h"
#include "vocab.h"

#define CSV_MAX_LEN (1 << 20) /* text mode: tokens per sample */

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
  /* Text mode (text_column): the first max_len tokens of each row's text,
   * row i's at ids[start[i] .. start[i + 1]); get pads them to max_len. */
  int text;
  int level_char;     /* 1: code points (vocab), 0: bytes (id = byte + 1) */
  int pad_left;       /* padding_side = left */
  int64_t max_len;
  int32_t *ids;
  int64_t *start;     /* n + 1 */
  int64_t n_ids;
  int64_t vocab_size;
  dvocab vocab;       /* char level */
  int64_t shortest, longest, n_cut; /* texts' token counts, before cutting */
  char saved[512];    /* the vocabulary file written, or "" */
} csv_ds;

/* The text mode's keys, as csv_open read them. */
typedef struct csv_text_opts {
  const char *column;     /* text_column; NULL: no text mode */
  int level_char, pad_left, unk;
  int64_t max_len;
  const char *vocab_path; /* vocab, or NULL */
  const char *save_path;  /* save_vocab, or NULL */
  uint64_t max_bytes;     /* the vocab file's limit */
} csv_text_opts;

/* One field of a line: its text (unquoted, trimmed) and where it began. */
typedef struct csv_field {
  char *text;   /* points into the line scratch buffer */
  size_t len;   /* its bytes (a text may hold NUL bytes) */
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
    f->len = (size_t)(out - f->text);
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
  free(ds->ids);
  free(ds->start);
  dvocab_free(&ds->vocab);
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

/* ---- text mode ---- */

/* Appends row `lineno`'s text (field f, column cn) to ds->ids: its first
 * max_len tokens, as ids when the vocabulary is known now (byte level, or
 * read from a file), else as code points that csv_text_finish maps. The
 * whole text is decoded, so a bad byte past max_len is an error too. */
static int csv_text_row(csv_ds *ds, const csv_text_opts *o, const char *path,
                        int64_t lineno, const csv_field *f, const char *cn,
                        int64_t *cap) {
  /* A token is at least a byte: the row adds at most min(len, max_len). */
  int64_t room = (int64_t)f->len < ds->max_len ? (int64_t)f->len : ds->max_len;
  if (ds->n_ids + room > *cap) {
    int64_t nc = *cap ? *cap : 4096;
    while (nc < ds->n_ids + room)
      nc *= 2;
    int32_t *ni = realloc(ds->ids, sizeof *ni * (size_t)nc);
    if (ni == NULL)
      return dsrc_oom("csv", sizeof *ni * (size_t)nc);
    ds->ids = ni;
    *cap = nc;
  }
  const uint8_t *s = (const uint8_t *)f->text;
  /* (no ids yet while every row so far was empty: nothing is written) */
  int32_t *out = room > 0 ? ds->ids + ds->n_ids : NULL;
  int64_t total = 0;
  if (!ds->level_char) {
    for (size_t i = 0; i < f->len && (int64_t)i < ds->max_len; i++)
      out[i] = (int32_t)s[i] + 1; /* id 0 is <pad> */
    total = (int64_t)f->len;
  } else {
    for (size_t p = 0; p < f->len; total++) {
      uint32_t cp;
      int l = dvocab_utf8_decode(s + p, f->len - p, &cp);
      if (l == 0)
        return dsrc_error(TORC_ERR_IO,
                          "%s:%" PRId64 ":%" PRId64 ": the text (%s) is not "
                          "valid UTF-8 at byte offset %zu of the field "
                          "(byte 0x%02X); convert the file to UTF-8 (iconv "
                          "-t UTF-8) or give level = byte",
                          path, lineno, f->col, cn, p, (unsigned)s[p]);
      if (total < ds->max_len) {
        int32_t id = (int32_t)cp; /* a code point until csv_text_finish */
        if (o->vocab_path) {
          id = dvocab_lookup(&ds->vocab, cp);
          if (id == DVOCAB_NO_ID)
            id = ds->vocab.unk;
          if (id == DVOCAB_NO_ID) {
            char name[DVOCAB_NAME_SIZE];
            dvocab_token_name(cp, name);
            return dsrc_error(TORC_ERR_INVALID,
                              "%s:%" PRId64 ":%" PRId64 ": the text (%s) "
                              "has char '%s' (U+%04X) at byte offset %zu of "
                              "the field, which the vocabulary '%s' does not "
                              "hold; add it to the vocabulary, or build the "
                              "vocabulary with unk = yes so that unknown "
                              "chars map to <unk>",
                              path, lineno, f->col, cn, name, (unsigned)cp, p,
                              o->vocab_path);
          }
        }
        out[total] = id;
      }
      p += (size_t)l;
    }
  }
  int64_t kept = total < ds->max_len ? total : ds->max_len;
  ds->n_ids += kept;
  ds->n_cut += total > ds->max_len;
  if (ds->n == 0 || total < ds->shortest)
    ds->shortest = total;
  if (total > ds->longest)
    ds->longest = total;
  return TORC_OK;
}

/* After the rows: builds the vocabulary from the kept tokens (char level
 * without a vocab file) and maps them to ids; writes save_vocab. */
static int csv_text_finish(csv_ds *ds, const csv_text_opts *o,
                           const char *path, const char *cn) {
  if (!ds->level_char) {
    ds->vocab_size = 257; /* <pad>, then byte b as id b + 1 */
    return TORC_OK;
  }
  if (o->vocab_path == NULL) {
    /* int32 and uint32 may alias: the code points are mapped in place. */
    uint32_t *cps = (uint32_t *)ds->ids;
    int st = dvocab_build(&ds->vocab, "csv", cps, ds->n_ids, 1, o->unk);
    if (st != TORC_OK)
      return st;
    for (int64_t i = 0; i < ds->n_ids; i++)
      ds->ids[i] = dvocab_lookup(&ds->vocab, cps[i]);
  }
  ds->vocab_size = ds->vocab.size;
  if (o->save_path) {
    int st = dvocab_save(&ds->vocab, "csv", o->save_path);
    if (st != TORC_OK)
      return st;
    snprintf(ds->saved, sizeof ds->saved, "%s", o->save_path);
  }
  char unk[64] = "";
  if (ds->vocab.unk != DVOCAB_NO_ID)
    snprintf(unk, sizeof unk, ", <unk> = %d", (int)ds->vocab.unk);
  dsrc_log(TORC_LOG_INFO,
           "csv: %s: the chars of %s: vocabulary %" PRId64 " (<pad> = 0%s)"
           "%s%s%s; give the embedding num_embeddings = %" PRId64
           " and padding_idx = 0",
           path, cn, ds->vocab_size, unk,
           o->vocab_path ? ", read from '" : o->save_path ? ", written to '"
                                                          : "",
           o->vocab_path ? o->vocab_path : o->save_path ? o->save_path : "",
           o->vocab_path || o->save_path ? "'" : "", ds->vocab_size);
  return TORC_OK;
}

static int csv_parse(csv_ds *ds, const char *path, char *text, size_t size,
                     int header, char delim, const char *label_spec,
                     int classification, const char *target_spec,
                     const char *feature_spec, const csv_text_opts *to) {
  const char *cur = text, *end = text + size;
  /* A UTF-8 byte-order mark (spreadsheet exports) is not data. */
  if (size >= 3 && memcmp(cur, "\xEF\xBB\xBF", 3) == 0)
    cur += 3;
  csv_line line = {0};
  char **names = NULL;
  int64_t n_cols = 0, *feat = NULL, *targ = NULL, n_targ = 0, n_feat = 0;
  int64_t tcol = -1, ids_cap = 0;
  char tname[300] = "";
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
  if (to->column) {
    /* Text mode: the input is this column's tokens; other columns are
     * not read. */
    st = csv_column(path, "text_column", to->column, names, n_cols, &tcol);
    if (st != TORC_OK)
      goto done;
    csv_colname(tname, sizeof tname, names, tcol);
    for (int64_t j = 0; j < n_targ; j++)
      if (targ[j] == tcol) {
        st = dsrc_error(TORC_ERR_INVALID,
                        "csv: %s of '%s' is both the text and the %s; give "
                        "%s another column",
                        tname, path, classification ? "label" : "target",
                        classification ? "label_column" : "target_columns");
        goto done;
      }
  } else if (feature_spec[0] == '\0') {
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
  if ((n_feat == 0 && tcol < 0) || n_targ == 0) {
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
      if (n_feat > 0) {
        float *nf = realloc(ds->features,
                            sizeof *nf * (size_t)(ncap * n_feat));
        if (nf == NULL) {
          st = dsrc_oom("csv", sizeof *nf * (size_t)(ncap * n_feat));
          goto done;
        }
        ds->features = nf;
      } else {
        int64_t *ns = realloc(ds->start, sizeof *ns * (size_t)(ncap + 1));
        if (ns == NULL) {
          st = dsrc_oom("csv", sizeof *ns * (size_t)(ncap + 1));
          goto done;
        }
        ds->start = ns;
        ds->start[0] = 0;
      }
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
    if (tcol >= 0) {
      ds->n = n; /* for csv_text_row's statistics */
      st = csv_text_row(ds, to, path, lineno, &line.f[tcol], tname, &ids_cap);
      if (st != TORC_OK)
        goto done;
      ds->start[n + 1] = ds->n_ids;
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
  char lcol[300];
  csv_colname(lcol, sizeof lcol, names, targ[0]);
  if (classification &&
      (st = csv_map_labels(ds, labels, path, lcol, &numeric)) != TORC_OK)
    goto done;
  if (tcol >= 0 && (st = csv_text_finish(ds, to, path, tname)) != TORC_OK)
    goto done;
  /* The description. */
  char buf[512], input[400];
  size_t len = 0, ilen = 0;
  buf[0] = input[0] = '\0';
  if (tcol >= 0) {
    dsrc_appendf(input, sizeof input, &ilen,
                 "[%" PRId64 "] i64 (the %s ids of %s, vocabulary %" PRId64
                 ", <pad> = 0 at the %s",
                 ds->max_len, ds->level_char ? "char" : "byte", tname,
                 ds->vocab_size, ds->pad_left ? "start" : "end");
    if (ds->level_char && ds->vocab.unk != DVOCAB_NO_ID)
      dsrc_appendf(input, sizeof input, &ilen, ", <unk> = %d",
                   (int)ds->vocab.unk);
    if (!ds->level_char)
      dsrc_appendf(input, sizeof input, &ilen, ", byte b = b + 1");
    dsrc_appendf(input, sizeof input, &ilen,
                 "; texts of %" PRId64 " to %" PRId64 " tokens, %" PRId64
                 " cut)",
                 ds->shortest, ds->longest, ds->n_cut);
  } else {
    dsrc_appendf(input, sizeof input, &ilen, "[%" PRId64 "] f32", n_feat);
  }
  if (classification) {
    dsrc_appendf(buf, sizeof buf, &len,
                 "%" PRId64 " samples, input %s, %" PRId64
                 " classes (%s, %s order:",
                 n, input, ds->n_classes, lcol,
                 numeric ? "numeric" : "sorted");
    int64_t shown = 0;
    /* The core keeps 512 bytes: text mode leaves room for its notes. */
    size_t list_end = tcol >= 0 ? 250 : 400;
    for (; shown < ds->n_classes && len < list_end; shown++)
      dsrc_appendf(buf, sizeof buf, &len, "%s %s", shown ? "," : "",
                   ds->class_names[shown]);
    if (shown < ds->n_classes)
      dsrc_appendf(buf, sizeof buf, &len, ", ...");
    dsrc_appendf(buf, sizeof buf, &len, ")");
  } else {
    dsrc_appendf(buf, sizeof buf, &len,
                 "%" PRId64 " samples, input %s, "
                 "regression targets [%" PRId64 "] f32 (",
                 n, input, n_targ);
    for (int64_t i = 0; i < n_targ && len < 400; i++) {
      char cn[300];
      csv_colname(cn, sizeof cn, names, targ[i]);
      dsrc_appendf(buf, sizeof buf, &len, "%s%s", i ? ", " : "", cn);
    }
    dsrc_appendf(buf, sizeof buf, &len, ")");
  }
  if (ds->saved[0])
    dsrc_appendf(buf, sizeof buf, &len,
                 "; vocabulary written to '%s' (give it as vocab = to the "
                 "test data)",
                 ds->saved);
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

/* The value of key `key`, NULL when absent or empty. */
static const char *csv_set(const char *const *keys, const char *const *values,
                           int n, const char *key) {
  const char *v = dsrc_value(keys, values, n, key);
  return v && v[0] ? v : NULL;
}

/* Reads the text mode's keys into *o (o->column NULL: no text mode, and
 * then none of its keys may be given). */
static int csv_text_keys(const char *const *keys, const char *const *values,
                         int n, const char *features, csv_text_opts *o) {
  static const char *const text_only[] = {"level", "max_len",
                                          "padding_side", "vocab",
                                          "save_vocab", "unk"};
  memset(o, 0, sizeof *o);
  o->column = csv_set(keys, values, n, "text_column");
  if (o->column == NULL) {
    for (size_t i = 0; i < sizeof text_only / sizeof text_only[0]; i++)
      if (csv_set(keys, values, n, text_only[i]))
        return dsrc_error(TORC_ERR_INVALID,
                          "csv: key '%s' is for a text column; give "
                          "text_column (the column holding the text) or "
                          "leave %s out",
                          text_only[i], text_only[i]);
    return TORC_OK;
  }
  if (features && features[0])
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: key 'feature_columns' = '%s' picks numeric "
                      "features, but with text_column the input is the "
                      "text's token ids; leave feature_columns out",
                      features);
  const char *level = csv_set(keys, values, n, "level");
  if (level && strcmp(level, "char") && strcmp(level, "byte"))
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: key 'level' = '%s' is not char or byte; give "
                      "char (Unicode code points) or byte (the 256 byte "
                      "values)",
                      level);
  o->level_char = level == NULL || strcmp(level, "char") == 0;
  const char *side = csv_set(keys, values, n, "padding_side");
  if (side && strcmp(side, "right") && strcmp(side, "left"))
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: key 'padding_side' = '%s' is not right or left; "
                      "give right (pads after the text, as pad_sequence) or "
                      "left (pads before it, so the last step is the "
                      "text's)",
                      side);
  o->pad_left = side && strcmp(side, "left") == 0;
  const char *ml = csv_set(keys, values, n, "max_len");
  if (ml == NULL)
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: text_column = '%s' needs max_len, the tokens per "
                      "sample (longer texts are cut, shorter ones padded); "
                      "give an integer in [1, %d]",
                      o->column, CSV_MAX_LEN);
  int st = dsrc_parse_int("csv", "max_len", ml, 1, CSV_MAX_LEN, &o->max_len);
  if (st != TORC_OK)
    return st;
  const char *unk = csv_set(keys, values, n, "unk");
  if (unk && (st = dsrc_parse_bool("csv", "unk", unk, &o->unk)) != TORC_OK)
    return st;
  o->vocab_path = csv_set(keys, values, n, "vocab");
  o->save_path = csv_set(keys, values, n, "save_vocab");
  if (!o->level_char && (o->vocab_path || o->save_path || o->unk))
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: key '%s' is for level = char; level = byte has "
                      "the fixed vocabulary of <pad> and the 256 byte "
                      "values: leave it out",
                      o->vocab_path ? "vocab"
                      : o->save_path ? "save_vocab"
                                     : "unk");
  if (o->vocab_path && o->unk)
    return dsrc_error(TORC_ERR_INVALID,
                      "csv: key 'unk' builds a vocabulary, but key 'vocab' "
                      "reads one; leave unk out (a vocabulary file has <unk> "
                      "as a line of its own)");
  return TORC_OK;
}

/* Reads the vocab file into ds->vocab; <pad> must be its first line. */
static int csv_read_vocab(csv_ds *ds, const csv_text_opts *o) {
  int st = dvocab_read(&ds->vocab, "csv", o->vocab_path, o->max_bytes, 1);
  if (st != TORC_OK)
    return st;
  if (ds->vocab.pad == DVOCAB_NO_ID)
    return dsrc_error(TORC_ERR_IO,
                      "csv: vocab file '%s' has no <pad> line; a text "
                      "column is padded with id 0: make <pad> its first "
                      "line (a csv source's save_vocab writes it so)",
                      o->vocab_path);
  if (ds->vocab.pad != 0)
    return dsrc_error(TORC_ERR_IO,
                      "csv: vocab file '%s' has <pad> on line %d; it must "
                      "be line 1 (id 0, the embedding's padding_idx): move "
                      "it to the top",
                      o->vocab_path, (int)ds->vocab.pad + 1);
  return TORC_OK;
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
  csv_text_opts to;
  if ((st = csv_text_keys(keys, values, n, features, &to)) != TORC_OK)
    return st;
  uint64_t max_bytes;
  st = dsrc_limit("csv", "max_bytes", keys, values, n, DSRC_CSV_MAX_BYTES,
                  &max_bytes);
  if (st != TORC_OK)
    return st;
  to.max_bytes = max_bytes;
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
  ds->text = to.column != NULL;
  ds->level_char = to.level_char;
  ds->pad_left = to.pad_left;
  ds->max_len = to.max_len;
  if (to.vocab_path)
    st = csv_read_vocab(ds, &to);
  if (st == TORC_OK)
    st = csv_parse(ds, path, text, size, header, delim,
                   label && label[0] ? label : "last", classification,
                   targets ? targets : "", features ? features : "", &to);
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
  int st;
  if (ds->text) {
    /* ids: the row's tokens, then <pad> = 0 (right) or the other way. */
    int64_t L = ds->max_len, a = ds->start[index];
    int64_t k = ds->start[index + 1] - a, off = ds->pad_left ? L - k : 0;
    int64_t *ids = calloc((size_t)L, sizeof *ids);
    if (ids == NULL)
      return dsrc_oom("csv", sizeof *ids * (size_t)L);
    for (int64_t i = 0; i < k; i++)
      ids[off + i] = ds->ids[a + i];
    const int64_t shape[1] = {L};
    st = dsrc_tensor(ids, shape, 1, TORC_I64, input);
    free(ids);
  } else {
    const int64_t fshape[1] = {ds->n_features};
    st = dsrc_tensor(ds->features + index * ds->n_features, fshape, 1,
                     TORC_F32, input);
  }
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
    {"text_column", "the column holding a text (a header name or a 0-based "
                    "index): the input is then its token ids, i64 "
                    "[max_len]; empty = numeric features",
     "", 0},
    {"level", "text_column: char (Unicode code points, <pad> = 0 and the "
              "vocabulary's chars) or byte (<pad> = 0, byte b = b + 1); "
              "empty = char",
     "", 0},
    {"max_len", "text_column (required): tokens per sample, 1 to 1048576; "
                "longer texts are cut, shorter ones padded with <pad> = 0",
     "", 0},
    {"padding_side", "text_column: right (pad after the text, as "
                     "pad_sequence) or left; empty = right",
     "", 0},
    {"vocab", "text_column, level = char: a vocabulary file to read (<pad> "
              "on line 1, see save_vocab); empty = build it from the texts",
     "", 1},
    {"save_vocab", "text_column, level = char: write the vocabulary to this "
                   "file (the text source's format: <pad>, the chars, "
                   "<unk>); empty = do not",
     "", 1},
    {"unk", "text_column, level = char, building the vocabulary: add an "
            "<unk> token (the last id) that chars outside it map to; empty "
            "= no",
     "", 0},
    {"max_bytes", "the largest CSV file (and vocab file) read (K, M, G "
                  "suffixes); a larger one, or a device or pipe, is refused "
                  "before reading",
     DSRC_CSV_MAX_BYTES, 0},
    {NULL, NULL, NULL, 0},
};

const torc_data_source_type dsrc_csv_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "csv",
    .description = "a CSV table: input f32 [features] (or a text column's "
                   "i64 token ids [max_len]), target a class index "
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
