/* plugins/data/text.c — the "text" source: a UTF-8 text file (or a folder
 * of .txt files, in sorted name order) cut into windows of `context`
 * tokens for language models. A token is a byte (level = byte, a fixed
 * vocabulary of the 256 byte values) or a Unicode code point (level =
 * char, the vocabulary the distinct code points of the training text in
 * code point order, or read from a vocabulary file). Sample i is the
 * window starting at token i * stride: input i64 [context], target the
 * same window shifted by one token (i64 [context]), or with target = next
 * only the token after the window (i64 []); with encoding = onehot the
 * input is f32 [vocabulary, context] instead. split = train / test takes the
 * first / the last test_fraction of the tokens, so no window of one part
 * holds a token of the other.
 *
 * The vocabulary file (see docs/text.md): one token per line, ids in line
 * order; a line is one code point as UTF-8, or an escape (\n \t \r \\ \s
 * for a space, \uHHHH, \UHHHHHH), or <unk> for the unknown-char token;
 * vocab.c reads, writes and builds it (the csv source's text mode too).
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"
#include "vocab.h"

#define TEXT_MAX_BYTES "1G"          /* the text (all files together) */
#define TEXT_MAX_CONTEXT (1 << 20)   /* tokens per window */
#define TEXT_MAX_FILES 100000        /* .txt files in a folder */
#define TEXT_MAX_ONEHOT (1 << 26) /* elements of a one-hot input */

typedef struct text_ds {
  int level_char;    /* 0: bytes, 1: code points */
  int target_next;   /* 1: target = the token after the window */
  int onehot;        /* 1: input = f32 [vocab, context] one-hot columns */
  int32_t *tokens;   /* the part's tokens (char level) */
  uint8_t *bytes;    /* the part's tokens (byte level; inside `raw`) */
  char *raw;
  int64_t n_tokens;  /* in this part */
  int64_t total;     /* in the whole text */
  int64_t context, stride, windows;
  dvocab vocab;      /* char level (vocab.h) */
  int64_t vocab_size;
  int32_t unk;       /* the unk id or DVOCAB_NO_ID */
  const char *part;  /* "all", "train" or "test" */
  char saved[512];   /* the vocabulary file written, or "" */
} text_ds;

/* ---- reading the text ---- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Which files of a folder are read: names matching `files` and not
 * `exclude` (fnmatch globs; exclude NULL = none). */
typedef struct text_globs {
  const char *files, *exclude;
} text_globs;

static int wanted(const char *name, const text_globs *g) {
  return fnmatch(g->files, name, 0) == 0 &&
         (g->exclude == NULL || fnmatch(g->exclude, name, 0) != 0);
}

/* The sorted names in folder `path` that g selects into *names (*count of
 * them); names starting with '.' are never read. */
static int list_folder(const char *path, const text_globs *g, char ***names,
                       int *count) {
  *names = NULL;
  *count = 0;
  DIR *d = opendir(path);
  if (d == NULL)
    return dsrc_error(TORC_ERR_IO,
                      "text: path folder '%s' cannot be read: %s; check its "
                      "permissions",
                      path, strerror(errno));
  char **v = NULL;
  int n = 0, cap = 0, st = TORC_OK;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || !wanted(e->d_name, g))
      continue;
    if (n == TEXT_MAX_FILES) {
      st = dsrc_error(TORC_ERR_INVALID,
                      "text: path folder '%s' holds more than %d files "
                      "matching files = %s; join them into fewer files",
                      path, TEXT_MAX_FILES, g->files);
      break;
    }
    if (n == cap) {
      int nc = cap ? cap * 2 : 16;
      char **nv = realloc(v, sizeof *v * (size_t)nc);
      if (nv == NULL) {
        st = dsrc_oom("text", sizeof *v * (size_t)nc);
        break;
      }
      v = nv, cap = nc;
    }
    if ((v[n] = dsrc_strndup(e->d_name, strlen(e->d_name))) == NULL) {
      st = dsrc_oom("text", strlen(e->d_name) + 1);
      break;
    }
    n++;
  }
  closedir(d);
  if (st == TORC_OK && n == 0)
    st = dsrc_error(TORC_ERR_IO,
                    "text: path folder '%s' holds no file matching files = "
                    "%s%s%s; put the text in such files there, change the "
                    "pattern, or give a file",
                    path, g->files, g->exclude ? " and not exclude = " : "",
                    g->exclude ? g->exclude : "");
  if (st != TORC_OK) {
    for (int i = 0; i < n; i++)
      free(v[i]);
    free(v);
    return st;
  }
  qsort(v, (size_t)n, sizeof *v, cmp_str);
  *names = v;
  *count = n;
  return TORC_OK;
}

/* Appends file `file` to *buf (*len bytes used of *cap, NUL-terminated),
 * keeping the total within max_bytes. */
static int append_file(const char *file, uint64_t max_bytes, char **buf,
                       size_t *len, size_t *cap) {
  int fd;
  uint64_t size;
  uint64_t room = max_bytes - *len;
  int st = dsrc_open_regular("text", "path", file, room, "max_bytes", &fd,
                             &size);
  if (st != TORC_OK) {
    if (*len > 0 && dsrc_open_file(file, UINT64_MAX, &fd, &size, &(int){0},
                                   &(const char *){NULL}) == DSRC_OPEN_OK) {
      close(fd);
      st = dsrc_error(TORC_ERR_IO,
                      "text: the files up to '%s' hold %" PRIu64
                      " bytes, more than max_bytes = %" PRIu64 "; raise "
                      "max_bytes or read fewer files",
                      file, (uint64_t)*len + size, max_bytes);
    }
    return st;
  }
  char *data;
  st = dsrc_read_fd("text", "path", file, fd, size, &data);
  close(fd);
  if (st != TORC_OK)
    return st;
  if (*buf == NULL) { /* the first file: its buffer is the text's */
    *buf = data;
    *len = (size_t)size;
    *cap = (size_t)size + 1;
    return TORC_OK;
  }
  size_t need = *len + (size_t)size + 1;
  if (need > *cap) {
    /* Doubling: a folder of many small files is copied O(total) times,
     * not once per file. */
    size_t nc = *cap * 2 > need ? *cap * 2 : need;
    char *nb = realloc(*buf, nc);
    if (nb == NULL) {
      free(data);
      return dsrc_oom("text", nc);
    }
    *buf = nb;
    *cap = nc;
  }
  memcpy(*buf + *len, data, (size_t)size);
  free(data);
  *len += (size_t)size;
  (*buf)[*len] = '\0';
  return TORC_OK;
}

/* Which file byte `off` of the concatenated text lies in (for messages):
 * its path into buf and the offset within it into *in_file. */
typedef struct text_files {
  char **paths;
  size_t *starts;
  int n;
} text_files;

static const char *file_of(const text_files *f, size_t off, size_t *in_file) {
  int i = f->n - 1;
  while (i > 0 && f->starts[i] > off)
    i--;
  *in_file = off - f->starts[i];
  return f->paths[i];
}

static void files_free(text_files *f) {
  for (int i = 0; i < f->n; i++)
    free(f->paths[i]);
  free(f->paths);
  free(f->starts);
  memset(f, 0, sizeof *f);
}

/* Reads `path` (a file, or the files of a folder that g selects) into
 * *buf. */
static int read_text(const char *path, const text_globs *g,
                     uint64_t max_bytes, char **buf,
                     size_t *len, text_files *files) {
  *buf = NULL;
  *len = 0;
  size_t cap = 0;
  memset(files, 0, sizeof *files);
  int fd = -1, e;
  uint64_t size;
  const char *kind;
  if (path != NULL && path[0] != '\0' &&
      dsrc_open_file(path, UINT64_MAX, &fd, &size, &e, &kind) ==
          DSRC_OPEN_FOLDER) {
    char **names;
    int n;
    int st = list_folder(path, g, &names, &n);
    if (st != TORC_OK)
      return st;
    files->paths = calloc((size_t)n, sizeof *files->paths);
    files->starts = calloc((size_t)n, sizeof *files->starts);
    if (files->paths == NULL || files->starts == NULL)
      st = dsrc_oom("text", sizeof(char *) * (size_t)n);
    for (int i = 0; i < n && st == TORC_OK; i++) {
      size_t pl = strlen(path) + strlen(names[i]) + 2;
      files->paths[i] = malloc(pl);
      if (files->paths[i] == NULL) {
        st = dsrc_oom("text", pl);
        break;
      }
      snprintf(files->paths[i], pl, "%s/%s", path, names[i]);
      files->n = i + 1;
      files->starts[i] = *len;
      st = append_file(files->paths[i], max_bytes, buf, len, &cap);
    }
    for (int i = 0; i < n; i++)
      free(names[i]);
    free(names);
    return st;
  }
  if (fd >= 0)
    close(fd);
  files->paths = calloc(1, sizeof *files->paths);
  files->starts = calloc(1, sizeof *files->starts);
  if (files->paths == NULL || files->starts == NULL ||
      (files->paths[0] = dsrc_strndup(path ? path : "", path ? strlen(path)
                                                             : 0)) == NULL)
    return dsrc_oom("text", 64);
  files->n = 1;
  return append_file(path, max_bytes, buf, len, &cap);
}

/* ---- open ---- */

static void text_close(void *handle) {
  text_ds *ds = handle;
  if (ds == NULL)
    return;
  free(ds->tokens);
  free(ds->raw);
  dvocab_free(&ds->vocab);
  free(ds);
}

/* Decodes the whole text into code points (*cps, *n); an invalid sequence
 * is an error naming the file and byte offset. */
static int decode_text(const char *buf, size_t len, const text_files *files,
                       uint32_t **cps, int64_t *n) {
  uint32_t *v = malloc(sizeof *v * (len ? len : 1));
  if (v == NULL)
    return dsrc_oom("text", sizeof *v * len);
  int64_t k = 0;
  for (size_t p = 0; p < len;) {
    int l = dvocab_utf8_decode((const uint8_t *)buf + p, len - p, &v[k]);
    if (l == 0) {
      size_t off;
      const char *file = file_of(files, p, &off);
      free(v);
      return dsrc_error(TORC_ERR_IO,
                        "text: path file '%s' is not valid UTF-8 at byte "
                        "offset %zu (byte 0x%02X); convert it to UTF-8 "
                        "(iconv -t UTF-8) or use level = byte",
                        file, off, (unsigned)(uint8_t)buf[p]);
    }
    p += (size_t)l;
    k++;
  }
  *cps = v;
  *n = k;
  return TORC_OK;
}

/* The first token of the part and its count, from the whole text's. */
static void part_range(const text_ds *ds, double frac, int64_t total,
                       int64_t *first, int64_t *count) {
  int64_t n_test = (int64_t)((double)total * frac);
  if (strcmp(ds->part, "train") == 0)
    *first = 0, *count = total - n_test;
  else if (strcmp(ds->part, "test") == 0)
    *first = total - n_test, *count = n_test;
  else
    *first = 0, *count = total;
}

/* Parses the keys into ds; *frac the test fraction. */
static int text_keys(text_ds *ds, const char *const *keys,
                     const char *const *values, int n, double *frac,
                     int *unk) {
  const char *level = dsrc_value(keys, values, n, "level");
  const char *split = dsrc_value(keys, values, n, "split");
  const char *target = dsrc_value(keys, values, n, "target");
  const char *tf = dsrc_value(keys, values, n, "test_fraction");
  if (level == NULL || (strcmp(level, "byte") && strcmp(level, "char")))
    return dsrc_error(TORC_ERR_INVALID,
                      "text: key 'level' = '%s' is not byte or char; give "
                      "byte (tokens are the 256 byte values) or char "
                      "(Unicode code points)",
                      level ? level : "");
  ds->level_char = strcmp(level, "char") == 0;
  if (split == NULL || (strcmp(split, "all") && strcmp(split, "train") &&
                        strcmp(split, "test")))
    return dsrc_error(TORC_ERR_INVALID,
                      "text: key 'split' = '%s' is not all, train or test; "
                      "give one of them",
                      split ? split : "");
  ds->part = strcmp(split, "train") == 0  ? "train"
             : strcmp(split, "test") == 0 ? "test"
                                          : "all";
  if (target == NULL || (strcmp(target, "sequence") && strcmp(target, "next")))
    return dsrc_error(TORC_ERR_INVALID,
                      "text: key 'target' = '%s' is not sequence or next; "
                      "give sequence (the window shifted by one token) or "
                      "next (the token after the window)",
                      target ? target : "");
  ds->target_next = strcmp(target, "next") == 0;
  const char *enc = dsrc_value(keys, values, n, "encoding");
  if (enc == NULL || (strcmp(enc, "ids") && strcmp(enc, "onehot")))
    return dsrc_error(TORC_ERR_INVALID,
                      "text: key 'encoding' = '%s' is not ids or onehot; "
                      "give ids (i64 token ids [context]) or onehot (f32 "
                      "[vocabulary, context])",
                      enc ? enc : "");
  ds->onehot = strcmp(enc, "onehot") == 0;
  char *end = NULL;
  *frac = tf ? strtod(tf, &end) : -1;
  if (tf == NULL || end == tf || *end != '\0' || !(*frac > 0 && *frac < 1))
    return dsrc_error(TORC_ERR_INVALID,
                      "text: key 'test_fraction' = '%s' is not a number "
                      "between 0 and 1 (exclusive); give e.g. 0.1",
                      tf ? tf : "");
  int st = dsrc_parse_int("text", "context",
                          dsrc_value(keys, values, n, "context"), 1,
                          TEXT_MAX_CONTEXT, &ds->context);
  const char *stride = dsrc_value(keys, values, n, "stride");
  if (st == TORC_OK && stride && stride[0] && strcmp(stride, "0"))
    st = dsrc_parse_int("text", "stride", stride, 1, (int64_t)1 << 40,
                        &ds->stride);
  else
    ds->stride = ds->context;
  if (st == TORC_OK)
    st = dsrc_parse_bool("text", "unk", dsrc_value(keys, values, n, "unk"),
                         unk);
  return st;
}

/* Maps the part's code points to ids through the lookup table. */
static int map_tokens(text_ds *ds, uint32_t *cps, int64_t first,
                      const char *vocab_path,
                      const text_files *files, const char *buf) {
  /* In place: token i is written where code point first + i was. */
  ds->tokens = (int32_t *)cps;
  for (int64_t i = 0; i < ds->n_tokens; i++) {
    uint32_t cp = cps[first + i];
    int32_t id = dvocab_lookup(&ds->vocab, cp);
    if (id == DVOCAB_NO_ID)
      id = ds->unk;
    if (id == DVOCAB_NO_ID) {
      /* The byte offset: re-walk the text up to the char (only here). */
      size_t p = 0;
      for (int64_t k = 0; k < first + i; k++) {
        uint32_t dummy;
        p += (size_t)dvocab_utf8_decode((const uint8_t *)buf + p, SIZE_MAX, &dummy);
      }
      size_t off;
      const char *file = file_of(files, p, &off);
      char name[16];
      dvocab_token_name(cp, name);
      return dsrc_error(TORC_ERR_INVALID,
                        "text: path file '%s' has char '%s' (U+%04X) at byte "
                        "offset %zu, which the vocabulary%s%s%s does not "
                        "hold; add it to the vocabulary, or build it with "
                        "unk = yes so that unknown chars map to <unk>",
                        file, name, (unsigned)cp, off,
                        vocab_path ? " '" : " of the train part",
                        vocab_path ? vocab_path : "", vocab_path ? "'" : "");
    }
    ds->tokens[i] = id;
  }
  return TORC_OK;
}

static int text_open(const char *const *keys, const char *const *values,
                     int n, void *user, void **handle) {
  (void)user;
  *handle = NULL;
  const char *path = dsrc_value(keys, values, n, "path");
  const char *vocab_path = dsrc_value(keys, values, n, "vocab");
  const char *save_path = dsrc_value(keys, values, n, "save_vocab");
  text_globs globs = {dsrc_value(keys, values, n, "files"),
                      dsrc_value(keys, values, n, "exclude")};
  if (globs.files == NULL || !globs.files[0])
    globs.files = "*.txt";
  if (globs.exclude && !globs.exclude[0])
    globs.exclude = NULL;
  if (vocab_path && !vocab_path[0])
    vocab_path = NULL;
  if (save_path && !save_path[0])
    save_path = NULL;
  uint64_t max_bytes;
  int st = dsrc_limit("text", "max_bytes", keys, values, n, TEXT_MAX_BYTES,
                      &max_bytes);
  if (st != TORC_OK)
    return st;
  text_ds *ds = calloc(1, sizeof *ds);
  if (ds == NULL)
    return dsrc_oom("text", sizeof *ds);
  double frac = 0.1;
  int unk = 0;
  char *buf = NULL;
  size_t len = 0;
  uint32_t *cps = NULL;
  text_files files = {0};
  st = text_keys(ds, keys, values, n, &frac, &unk);
  if (st == TORC_OK && !ds->level_char && (vocab_path || save_path || unk))
    st = dsrc_error(TORC_ERR_INVALID,
                    "text: key '%s' is for level = char; level = byte has "
                    "the fixed vocabulary of the 256 byte values: leave it "
                    "out",
                    vocab_path ? "vocab" : save_path ? "save_vocab" : "unk");
  if (st == TORC_OK && vocab_path && unk)
    st = dsrc_error(TORC_ERR_INVALID,
                    "text: key 'unk' builds a vocabulary, but key 'vocab' "
                    "reads one; leave unk out (a vocabulary file has <unk> "
                    "as a line of its own)");
  if (st == TORC_OK)
    st = read_text(path, &globs, max_bytes, &buf, &len, &files);
  if (st == TORC_OK && len == 0)
    st = dsrc_error(TORC_ERR_IO,
                    "text: path '%s' holds no text (0 bytes); give a file "
                    "with text in it",
                    path);
  if (st != TORC_OK)
    goto fail;
  int64_t first;
  if (!ds->level_char) {
    ds->total = (int64_t)len;
    part_range(ds, frac, ds->total, &first, &ds->n_tokens);
    ds->raw = buf;
    buf = NULL;
    ds->bytes = (uint8_t *)ds->raw + first;
    ds->vocab_size = 256;
    ds->unk = DVOCAB_NO_ID;
  } else {
    if ((st = decode_text(buf, len, &files, &cps, &ds->total)) != TORC_OK)
      goto fail;
    part_range(ds, frac, ds->total, &first, &ds->n_tokens);
    if (vocab_path) {
      st = dvocab_read(&ds->vocab, "text", vocab_path, max_bytes, 0);
    } else {
      /* The training text: the whole text, or its train part. */
      int64_t tf, tn;
      const char *part = ds->part;
      ds->part = strcmp(part, "all") ? "train" : "all";
      part_range(ds, frac, ds->total, &tf, &tn);
      ds->part = part;
      st = dvocab_build(&ds->vocab, "text", cps + tf, tn, 0, unk);
    }
    if (st == TORC_OK) {
      ds->vocab_size = ds->vocab.size;
      ds->unk = ds->vocab.unk;
      st = map_tokens(ds, cps, first, vocab_path, &files, buf);
      cps = NULL; /* ds->tokens now */
    }
    if (st == TORC_OK && save_path) {
      st = dvocab_save(&ds->vocab, "text", save_path);
      if (st == TORC_OK) {
        snprintf(ds->saved, sizeof ds->saved, "%s", save_path);
        dsrc_log(TORC_LOG_INFO,
                 "text: vocabulary of %" PRId64 " tokens written to '%s'",
                 ds->vocab_size, save_path);
      }
    }
    if (st != TORC_OK)
      goto fail;
  }
  int64_t need = ds->context + 1;
  if (ds->n_tokens < need) {
    char what[64] = "";
    if (strcmp(ds->part, "all"))
      snprintf(what, sizeof what, "the %s part of ", ds->part);
    st = dsrc_error(TORC_ERR_SHAPE,
                    "text: %s'%s' has %" PRId64 " tokens (of %" PRId64
                    " in all), fewer than context + 1 = %" PRId64
                    " (a window and its next token); give a smaller "
                    "context or more text",
                    what, path, ds->n_tokens, ds->total, need);
    goto fail;
  }
  if (ds->onehot && ds->vocab_size * ds->context > TEXT_MAX_ONEHOT) {
    st = dsrc_error(TORC_ERR_INVALID,
                    "text: encoding = onehot makes inputs of vocabulary %"
                    PRId64 " x context %" PRId64 " = %" PRId64 " elements, "
                    "more than %d; give a smaller context, or encoding = "
                    "ids with an embedding layer",
                    ds->vocab_size, ds->context,
                    ds->vocab_size * ds->context, TEXT_MAX_ONEHOT);
    goto fail;
  }
  ds->windows = (ds->n_tokens - need) / ds->stride + 1;
  free(buf);
  free(cps);
  files_free(&files);
  *handle = ds;
  return TORC_OK;
fail:
  free(buf);
  free(cps);
  files_free(&files);
  text_close(ds);
  return st;
}

static int64_t text_length(void *handle) {
  return ((text_ds *)handle)->windows;
}

static int64_t token_at(const text_ds *ds, int64_t i) {
  return ds->level_char ? ds->tokens[i] : ds->bytes[i];
}

static int text_get(void *handle, int64_t index, torc_tensor **input,
                    torc_tensor **target) {
  const text_ds *ds = handle;
  int64_t L = ds->context, start = index * ds->stride;
  int64_t *v = malloc(sizeof *v * (size_t)(L + 1));
  if (v == NULL)
    return dsrc_oom("text", sizeof *v * (size_t)(L + 1));
  for (int64_t i = 0; i <= L; i++)
    v[i] = token_at(ds, start + i);
  const int64_t shape[1] = {L};
  int st;
  if (ds->onehot) {
    /* Column t is the one-hot of token t: [vocab, context], so that a
     * conv1d reads the vocabulary as its channels. */
    size_t nel = (size_t)(ds->vocab_size * L);
    float *oh = calloc(nel, sizeof *oh);
    if (oh == NULL) {
      free(v);
      return dsrc_oom("text", nel * sizeof *oh);
    }
    for (int64_t t = 0; t < L; t++)
      oh[v[t] * L + t] = 1.0f;
    const int64_t oshape[2] = {ds->vocab_size, L};
    st = dsrc_tensor(oh, oshape, 2, TORC_F32, input);
    free(oh);
  } else {
    st = dsrc_tensor(v, shape, 1, TORC_I64, input);
  }
  if (st == TORC_OK)
    st = ds->target_next ? dsrc_class_target(v[L], target)
                         : dsrc_tensor(v + 1, shape, 1, TORC_I64, target);
  if (st != TORC_OK && *input) {
    dsrc_api->release(*input);
    *input = NULL;
  }
  free(v);
  return st;
}

static int text_describe(void *handle, char *buf, size_t size) {
  const text_ds *ds = handle;
  size_t len = 0;
  buf[0] = '\0';
  if (ds->onehot)
    dsrc_appendf(buf, size, &len,
                 "%" PRId64 " windows, input [%" PRId64 ", %" PRId64
                 "] f32 (one-hot), target ",
                 ds->windows, ds->vocab_size, ds->context);
  else
    dsrc_appendf(buf, size, &len,
                 "%" PRId64 " windows, input [%" PRId64 "] i64, target ",
                 ds->windows, ds->context);
  if (ds->target_next)
    dsrc_appendf(buf, size, &len, "the next token");
  else
    dsrc_appendf(buf, size, &len, "[%" PRId64 "] i64", ds->context);
  dsrc_appendf(buf, size, &len,
               ", stride %" PRId64 ", vocabulary %" PRId64 " (%s), %" PRId64
               " tokens",
               ds->stride, ds->vocab_size, ds->level_char ? "char" : "byte",
               ds->n_tokens);
  if (strcmp(ds->part, "all"))
    dsrc_appendf(buf, size, &len, " (%s part of %" PRId64 ")", ds->part,
                 ds->total);
  if (ds->saved[0])
    dsrc_appendf(buf, size, &len,
                 "; vocabulary written to '%s' (give it as vocab = for "
                 "evaluation and generation)",
                 ds->saved);
  return TORC_OK;
}

static int64_t text_num_classes(void *handle) {
  return ((text_ds *)handle)->vocab_size;
}

/* Token i's name: as the vocabulary file writes it (byte level: a
 * printable ASCII byte, else \xHH). */
static int text_class_name(void *handle, int64_t i, char *buf, size_t size) {
  const text_ds *ds = handle;
  char name[16];
  if (ds->level_char)
    dvocab_token_name(ds->vocab.cps[i], name);
  else if (i > 0x20 && i < 0x7F && i != '\\')
    snprintf(name, sizeof name, "%c", (int)i);
  else if (i == '\\')
    strcpy(name, "\\\\");
  else if (i == ' ')
    strcpy(name, "\\s");
  else
    snprintf(name, sizeof name, "\\x%02X", (unsigned)i);
  snprintf(buf, size, "%s", name);
  return TORC_OK;
}

static const torc_data_key text_keys_table[] = {
    {"path", "a UTF-8 text file, or a folder whose files (those `files` "
             "matches) are read in sorted name order (joined as they are)",
     NULL, 1},
    {"files", "in a path folder, the names read: a glob (fnmatch: * ? [a-z])",
     "*.txt", 0},
    {"exclude", "in a path folder, names not read even when `files` matches "
                "them: a glob; empty = none (e.g. *.* with files = * "
                "reads the names without a dot)",
     "", 0},
    {"level", "byte (tokens: the 256 byte values) or char (Unicode code "
              "points; the vocabulary: the distinct ones of the training "
              "text, in code point order)",
     "char", 0},
    {"context", "tokens per window (the input's length), 1 to 1048576", NULL,
     0},
    {"stride", "tokens between window starts; 0 = context", "0", 0},
    {"target", "sequence (the window shifted by one token, i64 [context]) "
               "or next (the token after the window, i64 [])",
     "sequence", 0},
    {"encoding", "ids (input i64 token ids [context], for an embedding) "
                 "or onehot (input f32 [vocabulary, context], one-hot "
                 "columns, for conv1d layers over the vocabulary)",
     "ids", 0},
    {"split", "all, train (the first 1 - test_fraction of the tokens) or "
              "test (the last test_fraction)",
     "all", 0},
    {"test_fraction", "the share of the tokens that split = test takes, "
                      "between 0 and 1",
     "0.1", 0},
    {"vocab", "level = char: a vocabulary file to read (one token per "
              "line, see save_vocab); empty = build it from the training "
              "text",
     "", 1},
    {"save_vocab", "level = char: write the vocabulary to this file (one "
                   "token per line: the char, \\n \\t \\r \\\\ \\s "
                   "\\uHHHH escapes, <unk>); empty = do not",
     "", 1},
    {"unk", "level = char, building the vocabulary: add an <unk> token "
            "(the last id) that chars outside it map to",
     "no", 0},
    {"max_bytes", "the most text read (all files together, and the vocab "
                  "file; K, M, G suffixes); more, or a device or pipe, is "
                  "refused before reading",
     TEXT_MAX_BYTES, 0},
    {NULL, NULL, NULL, 0},
};

const torc_data_source_type dsrc_text_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "text",
    .description = "a UTF-8 text in windows of byte or char token ids, for "
                   "language models",
    .keys = text_keys_table,
    .open = text_open,
    .length = text_length,
    .get = text_get,
    .close = text_close,
    .describe = text_describe,
    .num_classes = text_num_classes,
    .class_name = text_class_name,
    .user = NULL,
};
