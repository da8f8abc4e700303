/* core/safetensors.c — the safetensors format: open (a read-only mmap whose
 * JSON header jansson parses and this file validates completely before the
 * handle is returned), copying tensors out, and an atomic save that lays the
 * file out as the Python library (its Rust core) does.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "internal.h"
#include "torc/checked.h"
#include "torc/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format's byte order)"
#endif

/* The Python library refuses headers above 100 MB; so do we. */
#define ST_MAX_HEADER 100000000ull

typedef struct st_entry {
  char *name;
  torc_dtype dtype;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  uint64_t begin, end; /* relative to the data area */
} st_entry;

struct torc_safetensors {
  char *path;
  void *map;
  size_t map_size;
  const unsigned char *data; /* start of the data area in the mapping */
  uint64_t data_size;
  int n;
  st_entry *entries; /* sorted by name */
  int n_meta;
  char **meta_keys; /* sorted */
  char **meta_values;
};

/* The format's dtype names, indexed by torc_dtype. */
static const char *const st_dtype_names[TORC_DTYPE_COUNT] = {
    "F32", "F64", "F16", "BF16", "I32", "I64", "U8", "BOOL"};

/* Rank of a dtype in the Rust library's Dtype enum order (BOOL < U8 < F16
 * < BF16 < I32 < F32 < F64 < I64): its writer sorts by this, descending. */
static int st_dtype_rank(torc_dtype dt) {
  static const int rank[TORC_DTYPE_COUNT] = {
      [TORC_BOOL] = 0, [TORC_U8] = 1,  [TORC_F16] = 2, [TORC_BF16] = 3,
      [TORC_I32] = 4,  [TORC_F32] = 5, [TORC_F64] = 6, [TORC_I64] = 7};
  return rank[dt];
}

static int st_dtype_parse(const char *s, torc_dtype *out) {
  for (int i = 0; i < TORC_DTYPE_COUNT; i++)
    if (strcmp(s, st_dtype_names[i]) == 0) {
      *out = (torc_dtype)i;
      return 1;
    }
  return 0;
}

/* ---- reading ---- */

static void st_free(torc_safetensors *st) {
  if (st == NULL)
    return;
  for (int i = 0; i < st->n; i++)
    torc__free(st->entries[i].name);
  torc__free(st->entries);
  for (int i = 0; i < st->n_meta; i++) {
    torc__free(st->meta_keys[i]);
    torc__free(st->meta_values[i]);
  }
  torc__free(st->meta_keys);
  torc__free(st->meta_values);
  if (st->map)
    munmap(st->map, st->map_size);
  torc__free(st->path);
  torc__free(st);
}

static int entry_cmp_name(const void *a, const void *b) {
  return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int entry_cmp_begin(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a;
  const st_entry *y = *(const st_entry *const *)b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static int str_cmp_ptr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads one tensor entry `key` -> `val` into e; errors name path and key. */
static torc_status parse_entry(const char *path, const char *key, json_t *val,
                               uint64_t data_size, st_entry *e) {
  if (!json_is_object(val))
    return torc_set_error(TORC_ERR_INVALID,
                          "safetensors %s: tensor '%s': the entry must be an "
                          "object {\"dtype\", \"shape\", \"data_offsets\"}",
                          path, key);
  json_t *jd = json_object_get(val, "dtype");
  json_t *js = json_object_get(val, "shape");
  json_t *jo = json_object_get(val, "data_offsets");
  const char *missing = jd == NULL   ? "dtype"
                        : js == NULL ? "shape"
                        : jo == NULL ? "data_offsets"
                                     : NULL;
  if (missing)
    return torc_set_error(TORC_ERR_INVALID,
                          "safetensors %s: tensor '%s' has no \"%s\" (each "
                          "entry needs dtype, shape and data_offsets)",
                          path, key, missing);
  if (!json_is_string(jd) || !st_dtype_parse(json_string_value(jd), &e->dtype))
    return torc_set_error(
        TORC_ERR_INVALID,
        "safetensors %s: tensor '%s': dtype %s%s%s is not one torc supports "
        "(F32, F64, F16, BF16, I32, I64, U8, BOOL); convert the tensor "
        "before saving it",
        path, key, json_is_string(jd) ? "\"" : "",
        json_is_string(jd) ? json_string_value(jd) : "(not a string)",
        json_is_string(jd) ? "\"" : "");
  if (!json_is_array(js))
    return torc_set_error(TORC_ERR_INVALID,
                          "safetensors %s: tensor '%s': shape must be an array "
                          "of non-negative integers",
                          path, key);
  size_t nd = json_array_size(js);
  if (nd > TORC_MAX_DIMS)
    return torc_set_error(TORC_ERR_INVALID,
                          "safetensors %s: tensor '%s' has %zu dimensions; "
                          "torc supports at most %d",
                          path, key, nd, TORC_MAX_DIMS);
  e->ndim = (int)nd;
  for (size_t i = 0; i < nd; i++) {
    json_t *d = json_array_get(js, i);
    if (!json_is_integer(d) || json_integer_value(d) < 0) {
      char *txt = json_dumps(d, JSON_ENCODE_ANY | JSON_COMPACT);
      torc_status s = torc_set_error(
          TORC_ERR_INVALID,
          "safetensors %s: tensor '%s': shape[%zu] is %s; sizes must be "
          "non-negative integers",
          path, key, i, txt ? txt : "?");
      torc__json_free(txt);
      return s;
    }
    e->shape[i] = (int64_t)json_integer_value(d);
  }
  /* A torc tensor counts its elements in an int64_t; a zero dimension does
   * not excuse the others (torc_checked_numel). */
  char b[160];
  uint64_t numel = 0;
  int too_many =
      torc_checked_numel(e->shape, e->ndim, (uint64_t)INT64_MAX, &numel);
  int has_zero = 0;
  for (int i = 0; i < e->ndim; i++)
    has_zero |= e->shape[i] == 0;
  if (too_many && has_zero)
    return torc_set_error(
        TORC_ERR_INVALID,
        "safetensors %s: tensor '%s': shape %s has more than 2^63 elements "
        "besides its zero dimension; the file is corrupt",
        path, key, torc__shape_str(e->shape, e->ndim, b, sizeof b));
  if (!json_is_array(jo) || json_array_size(jo) != 2 ||
      !json_is_integer(json_array_get(jo, 0)) ||
      !json_is_integer(json_array_get(jo, 1)) ||
      json_integer_value(json_array_get(jo, 0)) < 0 ||
      json_integer_value(json_array_get(jo, 1)) <
          json_integer_value(json_array_get(jo, 0))) {
    char *txt = json_dumps(jo, JSON_ENCODE_ANY | JSON_COMPACT);
    torc_status s = torc_set_error(
        TORC_ERR_INVALID,
        "safetensors %s: tensor '%s': data_offsets is %s; expected [begin, "
        "end] with 0 <= begin <= end",
        path, key, txt ? txt : "?");
    torc__json_free(txt);
    return s;
  }
  e->begin = (uint64_t)json_integer_value(json_array_get(jo, 0));
  e->end = (uint64_t)json_integer_value(json_array_get(jo, 1));
  uint64_t es = torc_dtype_size(e->dtype);
  uint64_t need = 0;
  int overflow = too_many || torc_checked_bytes(numel, es, data_size, &need);
  if (overflow || e->end - e->begin != need) {
    if (overflow)
      return torc_set_error(
          TORC_ERR_INVALID,
          "safetensors %s: tensor '%s': shape %s of %s needs more bytes than "
          "the file's %llu-byte data area",
          path, key, torc__shape_str(e->shape, e->ndim, b, sizeof b),
          st_dtype_names[e->dtype], (unsigned long long)data_size);
    return torc_set_error(
        TORC_ERR_INVALID,
        "safetensors %s: tensor '%s': data_offsets [%llu, %llu] span %llu "
        "bytes, but shape %s of %s needs %llu",
        path, key, (unsigned long long)e->begin, (unsigned long long)e->end,
        (unsigned long long)(e->end - e->begin),
        torc__shape_str(e->shape, e->ndim, b, sizeof b),
        st_dtype_names[e->dtype], (unsigned long long)need);
  }
  if (e->end > data_size)
    return torc_set_error(
        TORC_ERR_INVALID,
        "safetensors %s: tensor '%s': data_offsets [%llu, %llu] run past the "
        "end of the data area (%llu bytes); the file is truncated or corrupt",
        path, key, (unsigned long long)e->begin, (unsigned long long)e->end,
        (unsigned long long)data_size);
  return TORC_OK;
}

/* Reads "__metadata__" into st (sorted keys). */
static torc_status parse_metadata(torc_safetensors *st, json_t *meta) {
  if (!json_is_object(meta))
    return torc_set_error(TORC_ERR_INVALID,
                          "safetensors %s: \"__metadata__\" must be an object "
                          "of strings",
                          st->path);
  size_t n = json_object_size(meta);
  st->meta_keys = torc__calloc(n ? n : 1, sizeof *st->meta_keys);
  st->meta_values = torc__calloc(n ? n : 1, sizeof *st->meta_values);
  if (st->meta_keys == NULL || st->meta_values == NULL)
    return torc_set_error(TORC_ERR_OOM, "safetensors %s: out of memory",
                          st->path);
  const char *k;
  json_t *v;
  json_object_foreach(meta, k, v) {
    if (!json_is_string(v)) {
      char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      torc_status s = torc_set_error(
          TORC_ERR_INVALID,
          "safetensors %s: metadata '%s' is %s; metadata values must be "
          "strings",
          st->path, k, txt ? txt : "?");
      torc__json_free(txt);
      return s;
    }
    st->meta_keys[st->n_meta] = torc__strdup(k);
    st->meta_values[st->n_meta] = torc__strdup(json_string_value(v));
    st->n_meta++;
    if (st->meta_keys[st->n_meta - 1] == NULL ||
        st->meta_values[st->n_meta - 1] == NULL)
      return torc_set_error(TORC_ERR_OOM, "safetensors %s: out of memory",
                            st->path);
  }
  /* Sort keys, carrying values: sort an index of pairs. */
  for (int i = 1; i < st->n_meta; i++) /* insertion sort: metadata is small */
    for (int j = i; j > 0 && strcmp(st->meta_keys[j - 1], st->meta_keys[j]) > 0;
         j--) {
      char *t = st->meta_keys[j];
      st->meta_keys[j] = st->meta_keys[j - 1];
      st->meta_keys[j - 1] = t;
      t = st->meta_values[j];
      st->meta_values[j] = st->meta_values[j - 1];
      st->meta_values[j - 1] = t;
    }
  return TORC_OK;
}

/* Parses and validates the header bytes into st. */
static torc_status parse_header(torc_safetensors *st, const char *hdr,
                                size_t len) {
  json_error_t jerr;
  torc__json_begin();
  json_t *root = json_loadb(hdr, len, JSON_REJECT_DUPLICATES, &jerr);
  int oom = torc__json_end();
  /* jansson reports running out of memory as a syntax error: ask. */
  if (root == NULL &&
      (oom || json_error_code(&jerr) == json_error_out_of_memory))
    return torc_set_error(TORC_ERR_OOM,
                          "safetensors %s: out of memory parsing the "
                          "%zu-byte JSON header",
                          st->path, len);
  if (root == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "safetensors %s: the JSON header is malformed at "
                          "line %d, column %d: %s",
                          st->path, jerr.line, jerr.column, jerr.text);
  torc_status s = TORC_OK;
  if (!json_is_object(root)) {
    s = torc_set_error(TORC_ERR_INVALID,
                       "safetensors %s: the JSON header must be an object "
                       "mapping tensor names to entries",
                       st->path);
    goto done;
  }
  size_t n = json_object_size(root);
  st->entries = torc__calloc(n ? n : 1, sizeof *st->entries);
  if (st->entries == NULL) {
    s = torc_set_error(TORC_ERR_OOM, "safetensors %s: out of memory", st->path);
    goto done;
  }
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0) {
      if ((s = parse_metadata(st, val)) != TORC_OK)
        goto done;
      continue;
    }
    st_entry *e = &st->entries[st->n];
    if ((s = parse_entry(st->path, key, val, st->data_size, e)) != TORC_OK)
      goto done;
    if ((e->name = torc__strdup(key)) == NULL) {
      s = torc_set_error(TORC_ERR_OOM, "safetensors %s: out of memory",
                         st->path);
      goto done;
    }
    st->n++;
  }
  /* Overlaps: sort by begin; a non-empty range must start at or after the
   * end of every non-empty range before it. */
  if (st->n > 1) {
    const st_entry **by = torc__malloc((size_t)st->n * sizeof *by);
    if (by == NULL) {
      s = torc_set_error(TORC_ERR_OOM, "safetensors %s: out of memory",
                         st->path);
      goto done;
    }
    for (int i = 0; i < st->n; i++)
      by[i] = &st->entries[i];
    qsort(by, (size_t)st->n, sizeof *by, entry_cmp_begin);
    const st_entry *last = NULL;
    for (int i = 0; i < st->n && s == TORC_OK; i++) {
      if (by[i]->begin == by[i]->end)
        continue;
      if (last && by[i]->begin < last->end)
        s = torc_set_error(
            TORC_ERR_INVALID,
            "safetensors %s: tensor '%s' (data_offsets [%llu, %llu]) overlaps "
            "tensor '%s' ([%llu, %llu]); each tensor needs its own bytes",
            st->path, by[i]->name, (unsigned long long)by[i]->begin,
            (unsigned long long)by[i]->end, last->name,
            (unsigned long long)last->begin, (unsigned long long)last->end);
      last = by[i];
    }
    torc__free(by);
    if (s)
      goto done;
  }
  if (st->n > 1)
    qsort(st->entries, (size_t)st->n, sizeof *st->entries, entry_cmp_name);
done:
  json_decref(root);
  return s;
}

torc_safetensors *torc_safetensors_open(const char *path) {
  if (path == NULL) {
    torc__null_input("torc_safetensors_open");
    return NULL;
  }
  torc_safetensors *st = torc__calloc(1, sizeof *st);
  if (st == NULL || (st->path = torc__strdup(path)) == NULL) {
    torc__free(st);
    torc_set_error(TORC_ERR_OOM, "torc_safetensors_open: out of memory");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    torc_set_error(TORC_ERR_IO, "safetensors %s: cannot open: %s", path,
                   strerror(errno));
    st_free(st);
    return NULL;
  }
  struct stat sb;
  memset(&sb, 0, sizeof sb);
  errno = 0;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    torc_set_error(TORC_ERR_IO, "safetensors %s: cannot read: %s", path,
                   S_ISDIR(sb.st_mode) ? "it is a folder"
                   : errno             ? strerror(errno)
                                       : "not a regular file");
    close(fd);
    st_free(st);
    return NULL;
  }
  if (sb.st_size < 8) {
    torc_set_error(TORC_ERR_IO,
                   "safetensors %s: the file has %lld bytes; a safetensors "
                   "file starts with an 8-byte header length",
                   path, (long long)sb.st_size);
    close(fd);
    st_free(st);
    return NULL;
  }
  st->map_size = (size_t)sb.st_size;
  void *m = mmap(NULL, st->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  close(fd);
  if (m == MAP_FAILED) {
    torc_set_error(TORC_ERR_IO, "safetensors %s: cannot map the file: %s", path,
                   strerror(map_errno));
    st_free(st);
    return NULL;
  }
  st->map = m;
  const unsigned char *p = m;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = (hlen << 8) | p[i];
  uint64_t avail = (uint64_t)st->map_size - 8;
  if (hlen > ST_MAX_HEADER || hlen > avail) {
    torc_set_error(TORC_ERR_IO,
                   "safetensors %s: the header length is %llu bytes, %s (the "
                   "file has %llu bytes after the length); the file is "
                   "truncated or not a safetensors file",
                   path, (unsigned long long)hlen,
                   hlen > avail ? "past the end of the file"
                                : "above the 100 MB limit",
                   (unsigned long long)avail);
    st_free(st);
    return NULL;
  }
  st->data = p + 8 + hlen;
  st->data_size = avail - hlen;
  if (parse_header(st, (const char *)p + 8, (size_t)hlen) != TORC_OK) {
    st_free(st);
    return NULL;
  }
  return st;
}

void torc_safetensors_close(torc_safetensors *st) { st_free(st); }

int torc_safetensors_count(const torc_safetensors *st) {
  return st ? st->n : 0;
}

const char *torc_safetensors_name(const torc_safetensors *st, int i) {
  if (st == NULL) {
    torc__null_input("torc_safetensors_name");
    return NULL;
  }
  if (i < 0 || i >= st->n) {
    torc_set_error(TORC_ERR_RANGE,
                   "torc_safetensors_name: index %d is out of range; %s has "
                   "%d tensors",
                   i, st->path, st->n);
    return NULL;
  }
  return st->entries[i].name;
}

/* The entry named `name`, or NULL with an error listing some names. */
static const st_entry *find_entry(const torc_safetensors *st, const char *name,
                                  const char *fn) {
  if (st == NULL || name == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  st_entry key = {.name = (char *)name};
  /* bsearch's array must not be NULL, even for a count of 0. */
  const st_entry *e =
      st->n > 0 ? bsearch(&key, st->entries, (size_t)st->n, sizeof key,
                          entry_cmp_name)
                : NULL;
  if (e)
    return e;
  char list[512];
  size_t len = 0;
  list[0] = '\0';
  for (int i = 0; i < st->n && len < sizeof list - 64; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'",
                            i ? ", " : "", st->entries[i].name);
  if (len >= sizeof list - 64 && st->n > 0)
    snprintf(list + len, sizeof list - len, ", ...");
  torc_set_error(TORC_ERR_INVALID,
                 "%s: %s has no tensor named '%s' (it has %d: %s)", fn,
                 st->path, name, st->n, st->n ? list : "none");
  return NULL;
}

torc_status torc_safetensors_info(const torc_safetensors *st, const char *name,
                                  torc_dtype *dtype, int *ndim,
                                  int64_t *shape) {
  const st_entry *e = find_entry(st, name, "torc_safetensors_info");
  if (e == NULL)
    return torc_last_status();
  if (dtype)
    *dtype = e->dtype;
  if (ndim)
    *ndim = e->ndim;
  if (shape)
    for (int i = 0; i < e->ndim; i++)
      shape[i] = e->shape[i];
  return TORC_OK;
}

torc_tensor *torc_safetensors_get(const torc_safetensors *st, const char *name,
                                  torc_device dev) {
  const st_entry *e = find_entry(st, name, "torc_safetensors_get");
  if (e == NULL)
    return NULL;
  const unsigned char *src = st->data + e->begin;
  if (e->dtype == TORC_BOOL)
    for (uint64_t i = 0; i < e->end - e->begin; i++)
      if (src[i] > 1) {
        torc_set_error(TORC_ERR_INVALID,
                       "torc_safetensors_get: %s: BOOL tensor '%s' holds the "
                       "byte %u at element %llu; booleans must be 0 or 1",
                       st->path, name, src[i], (unsigned long long)i);
        return NULL;
      }
  return torc_from_host(src, e->shape, e->ndim, e->dtype, dev);
}

const char *torc_safetensors_metadata(const torc_safetensors *st,
                                      const char *key) {
  /* A file without "__metadata__" (every plain state dict) has no key
   * array at all: bsearch must not be given it. */
  if (st == NULL || key == NULL || st->n_meta == 0)
    return NULL;
  char *const *k = bsearch(&key, st->meta_keys, (size_t)st->n_meta,
                           sizeof *st->meta_keys, str_cmp_ptr);
  return k ? st->meta_values[k - st->meta_keys] : NULL;
}

int torc_safetensors_metadata_count(const torc_safetensors *st) {
  return st ? st->n_meta : 0;
}

const char *torc_safetensors_metadata_key(const torc_safetensors *st, int i) {
  if (st == NULL) {
    torc__null_input("torc_safetensors_metadata_key");
    return NULL;
  }
  if (i < 0 || i >= st->n_meta) {
    torc_set_error(TORC_ERR_RANGE,
                   "torc_safetensors_metadata_key: index %d is out of range; "
                   "%s has %d metadata entries",
                   i, st->path, st->n_meta);
    return NULL;
  }
  return st->meta_keys[i];
}

/* ---- writing ---- */

/* For tests: when set (1), save fails after writing and syncing the
 * temporary file, before the rename — as a crash there would — so that
 * tests can check the previous file survives and no temporary file is
 * left. With 2 the process stops itself there (SIGSTOP) so that a parent
 * that forked it can kill it with SIGKILL: a real crash at that point, the
 * temporary file left behind. Exported for the tests (test_safetensors.c,
 * test_state.c) only; not part of the API. */
TORC_API void torc__safetensors_fail_before_rename(int on);
static _Atomic int fail_before_rename;
void torc__safetensors_fail_before_rename(int on) { fail_before_rename = on; }

/* ---- stale temporary files ---- */

/* When this library was loaded (about when this process started). */
static struct timespec loaded_at;
__attribute__((constructor)) static void note_load_time(void) {
  clock_gettime(CLOCK_REALTIME, &loaded_at);
}

/* Whether `d` is a run of decimal digits fitting a long; its value in *out. */
static int parse_digits(const char *d, size_t n, long *out) {
  if (n == 0 || n > 18)
    return 0;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (d[i] < '0' || d[i] > '9')
      return 0;
    v = v * 10 + (d[i] - '0');
  }
  *out = v;
  return 1;
}

/* If `file` is named as torc_safetensors_save names its temporary files,
 * ".NAME.tmp.PID.N", copies NAME into name (NUL-terminated) and returns
 * the PID; otherwise returns 0. */
static long temp_name_parse(const char *file, char *name, size_t size) {
  size_t len = strlen(file);
  if (len < 10 || file[0] != '.')
    return 0;
  const char *n_dot = strrchr(file, '.');
  long n, pid;
  if (n_dot == file || !parse_digits(n_dot + 1, len - (size_t)(n_dot + 1 - file), &n))
    return 0;
  const char *p_dot = n_dot - 1;
  while (p_dot > file && *p_dot != '.')
    p_dot--;
  if (!parse_digits(p_dot + 1, (size_t)(n_dot - p_dot - 1), &pid) || pid <= 0)
    return 0;
  size_t tl = strlen(".tmp");
  if ((size_t)(p_dot - file) < 1 + 1 + tl ||
      strncmp(p_dot - tl, ".tmp", tl) != 0)
    return 0;
  size_t nl = (size_t)(p_dot - tl - (file + 1));
  if (nl + 1 > size)
    return 0;
  memcpy(name, file + 1, nl);
  name[nl] = '\0';
  return pid;
}

/* Whether a temporary file of process `pid`, last changed at `mtime`, may
 * still be being written. A file changed since this process started may be
 * (by a process on another machine sharing the folder, whose PID means
 * nothing here); an older one is stale when it bears this process's own PID
 * (an earlier process had it) or that of no live process. */
static int temp_in_use(long pid, struct timespec mtime) {
  if (mtime.tv_sec > loaded_at.tv_sec ||
      (mtime.tv_sec == loaded_at.tv_sec && mtime.tv_nsec >= loaded_at.tv_nsec))
    return 1;
  if (pid == (long)getpid())
    return 0;
  if (kill((pid_t)pid, 0) == 0)
    return 1;
  return errno != ESRCH;
}

/* Removes from `dir` the temporary files of saves killed before their
 * rename, ".NAME.tmp.PID.N" (regular files only), whose NAME `want`
 * accepts, last changed before this process started, whose process is
 * gone — never a file of another pattern, nor one a live process may still
 * be writing. Public as torc_safetensors_remove_stale_temps (st_temps.c). */
void torc__safetensors_remove_stale_temps(const char *dir,
                                          int (*want)(const char *name,
                                                      void *user),
                                          void *user);
void torc__safetensors_remove_stale_temps(const char *dir,
                                          int (*want)(const char *name,
                                                      void *user),
                                          void *user) {
  DIR *d = opendir(dir && *dir ? dir : ".");
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char name[256];
    long pid = temp_name_parse(e->d_name, name, sizeof name);
    if (pid == 0 || !want(name, user))
      continue;
    struct stat sb;
    if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(sb.st_mode) || temp_in_use(pid, sb.st_mtim))
      continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0)
      torc_logf(TORC_LOG_INFO,
                "removed %s/%s, a temporary file left by process %ld, which "
                "is gone",
                dir && *dir ? dir : ".", e->d_name, pid);
  }
  closedir(d);
}

static int same_name(const char *name, void *user) {
  return strcmp(name, (const char *)user) == 0;
}

typedef struct save_item {
  const char *name;
  const torc_tensor *t;
} save_item;

/* The Python library's order: dtype (in its enum order) descending, then
 * name, so each tensor starts aligned to its element size. */
static int save_item_cmp(const void *a, const void *b) {
  const save_item *x = a, *y = b;
  int rx = st_dtype_rank(torc_dtype_of(x->t)),
      ry = st_dtype_rank(torc_dtype_of(y->t));
  if (rx != ry)
    return ry - rx;
  return strcmp(x->name, y->name);
}

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The header (padded JSON) for items in order, as a malloc'd buffer. */
static char *build_header(const save_item *items, int n,
                          const char *const *meta_keys,
                          const char *const *meta_values, int n_meta,
                          size_t *len_out) {
  torc__json_begin();
  json_t *root = json_object();
  int ok = root != NULL;
  if (ok && n_meta > 0) {
    /* Sorted keys, so equal inputs give equal bytes. */
    const char **ks = torc__malloc((size_t)n_meta * sizeof *ks);
    json_t *meta = json_object();
    ok = ks && meta;
    if (!ok)
      json_decref(meta); /* json_object_set_new takes it, even failing */
    ok = ok && json_object_set_new(root, "__metadata__", meta) == 0;
    for (int i = 0; ok && i < n_meta; i++)
      ks[i] = meta_keys[i];
    if (ok)
      qsort(ks, (size_t)n_meta, sizeof *ks, str_cmp_ptr);
    for (int i = 0; ok && i < n_meta; i++) {
      int j = 0;
      while (meta_keys[j] != ks[i])
        j++;
      ok = json_object_set_new(meta, ks[i], json_string(meta_values[j])) == 0;
    }
    torc__free(ks);
  }
  uint64_t off = 0;
  for (int i = 0; ok && i < n; i++) {
    const torc_tensor *t = items[i].t;
    uint64_t nb = (uint64_t)torc_numel(t) * torc_dtype_size(torc_dtype_of(t));
    json_t *shape = json_array();
    json_t *offs = json_array();
    json_t *e = json_object();
    ok = shape && offs && e;
    for (int d = 0; ok && d < torc_ndim(t); d++)
      ok = json_array_append_new(shape, json_integer(torc_shape(t)[d])) == 0;
    ok = ok &&
         json_array_append_new(offs, json_integer((json_int_t)off)) == 0 &&
         json_array_append_new(offs, json_integer((json_int_t)(off + nb))) == 0;
    /* Field order as serde writes TensorInfo: dtype, shape, data_offsets. */
    ok = ok &&
         json_object_set_new(
             e, "dtype", json_string(st_dtype_names[torc_dtype_of(t)])) == 0;
    ok = ok && json_object_set(e, "shape", shape) == 0 &&
         json_object_set(e, "data_offsets", offs) == 0 &&
         json_object_set(root, items[i].name, e) == 0;
    json_decref(shape);
    json_decref(offs);
    json_decref(e);
    off += nb;
  }
  char *txt = ok ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  if (torc__json_end() && txt) {
    /* jansson ignores a failure writing an object key and goes on: the
     * text may lack one, so it must not be written. */
    torc__json_free(txt);
    txt = NULL;
  }
  json_decref(root);
  if (txt == NULL)
    return NULL;
  size_t len = strlen(txt);
  size_t padded = (len + 7) / 8 * 8;
  char *out = torc__malloc(8 + padded);
  if (out) {
    for (int i = 0; i < 8; i++)
      out[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
    memcpy(out + 8, txt, len);
    memset(out + 8 + len, ' ', padded - len);
    *len_out = 8 + padded;
  }
  torc__json_free(txt);
  return out;
}

/* Checks save's arguments; errors name the offending index and value. */
static torc_status check_save_args(const char *path, const char *const *names,
                                   const torc_tensor *const *tensors, int n,
                                   const char *const *meta_keys,
                                   const char *const *meta_values, int n_meta) {
  const char *fn = "torc_safetensors_save";
  if (path == NULL)
    return torc__null_input(fn);
  if (n < 0 || n_meta < 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s %s: n is %d and n_meta %d; "
                          "counts must be >= 0",
                          fn, path, n, n_meta);
  if (n > 0 && (names == NULL || tensors == NULL))
    return torc_set_error(TORC_ERR_NULL,
                          "%s %s: names or tensors is NULL "
                          "with n = %d",
                          fn, path, n);
  if (n_meta > 0 && (meta_keys == NULL || meta_values == NULL))
    return torc_set_error(TORC_ERR_NULL,
                          "%s %s: meta_keys or meta_values is "
                          "NULL with n_meta = %d",
                          fn, path, n_meta);
  for (int i = 0; i < n; i++) {
    if (tensors[i] == NULL)
      return torc__null_input(fn);
    if (names[i] == NULL)
      return torc_set_error(TORC_ERR_NULL, "%s %s: names[%d] is NULL", fn, path,
                            i);
    if (strcmp(names[i], "__metadata__") == 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s %s: names[%d] is \"__metadata__\", the key "
                            "the format reserves for metadata; rename it",
                            fn, path, i);
    for (int j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0)
        return torc_set_error(TORC_ERR_INVALID,
                              "%s %s: the name '%s' is used twice (names[%d] "
                              "and names[%d])",
                              fn, path, names[i], j, i);
  }
  for (int i = 0; i < n_meta; i++) {
    if (meta_keys[i] == NULL || meta_values[i] == NULL)
      return torc_set_error(TORC_ERR_NULL, "%s %s: meta_%s[%d] is NULL", fn,
                            path, meta_keys[i] ? "values" : "keys", i);
    for (int j = 0; j < i; j++)
      if (strcmp(meta_keys[i], meta_keys[j]) == 0)
        return torc_set_error(TORC_ERR_INVALID,
                              "%s %s: the metadata key '%s' is used twice "
                              "(meta_keys[%d] and meta_keys[%d])",
                              fn, path, meta_keys[i], j, i);
  }
  return TORC_OK;
}

/* Writes the header and each tensor's bytes (read back with torc_to_host,
 * one at a time) to fd. */
static torc_status write_body(int fd, const char *tmp, const char *hdr,
                              size_t hlen, const save_item *items, int n) {
  if (write_all(fd, hdr, hlen) != 0)
    return torc_set_error(TORC_ERR_IO, "torc_safetensors_save: writing %s: %s",
                          tmp, strerror(errno));
  for (int i = 0; i < n; i++) {
    const torc_tensor *t = items[i].t;
    size_t nb = (size_t)torc_numel(t) * torc_dtype_size(torc_dtype_of(t));
    if (nb == 0)
      continue;
    void *buf = torc__malloc(nb);
    if (buf == NULL)
      return torc_set_error(TORC_ERR_OOM,
                            "torc_safetensors_save: out of host memory for "
                            "tensor '%s' (%zu bytes)",
                            items[i].name, nb);
    torc_status s = torc_to_host(t, buf, nb);
    if (s == TORC_OK && write_all(fd, buf, nb) != 0)
      s = torc_set_error(TORC_ERR_IO, "torc_safetensors_save: writing %s: %s",
                         tmp, strerror(errno));
    torc__free(buf);
    if (s)
      return s;
  }
  return TORC_OK;
}

torc_status torc_safetensors_save(const char *path, const char *const *names,
                                  const torc_tensor *const *tensors, int n,
                                  const char *const *meta_keys,
                                  const char *const *meta_values, int n_meta) {
  static _Atomic unsigned tmp_counter;
  torc_status s =
      check_save_args(path, names, tensors, n, meta_keys, meta_values, n_meta);
  if (s)
    return s;
  save_item *items = torc__malloc((size_t)(n > 0 ? n : 1) * sizeof *items);
  if (items == NULL)
    return torc_set_error(TORC_ERR_OOM, "torc_safetensors_save: out of memory");
  for (int i = 0; i < n; i++)
    items[i] = (save_item){names[i], tensors[i]};
  qsort(items, (size_t)n, sizeof *items, save_item_cmp);
  size_t hlen = 0;
  char *hdr = build_header(items, n, meta_keys, meta_values, n_meta, &hlen);
  /* The temporary file: ".NAME.tmp.PID.N" next to path, so rename(2) stays
   * within one file system. */
  const char *slash = strrchr(path, '/');
  size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
  size_t tcap = strlen(path) + 64;
  char *tmp = torc__malloc(tcap);
  char *dir = torc__malloc(dlen + 2);
  if (hdr == NULL || tmp == NULL || dir == NULL) {
    torc__free(hdr);
    torc__free(tmp);
    torc__free(dir);
    torc__free(items);
    return torc_set_error(TORC_ERR_OOM,
                          "torc_safetensors_save: out of memory "
                          "building the header of %s",
                          path);
  }
  if (dlen) {
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
  } else {
    strcpy(dir, ".");
  }
  /* A save killed before its rename leaves its temporary file: remove
   * those of this file's name whose process is gone. */
  torc__safetensors_remove_stale_temps(dir, same_name, (void *)(path + dlen));
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 100; tries++) {
    snprintf(tmp, tcap, "%.*s.%s.tmp.%ld.%u", (int)dlen, path, path + dlen,
             (long)getpid(), atomic_fetch_add(&tmp_counter, 1));
    /* 0666: the kernel applies the umask, as for any new file. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    s = torc_set_error(TORC_ERR_IO,
                       "torc_safetensors_save: cannot create the temporary "
                       "file %s next to %s: %s",
                       tmp, path, strerror(errno));
    goto out;
  }
  s = write_body(fd, tmp, hdr, hlen, items, n);
  if (s == TORC_OK && fsync(fd) != 0)
    s = torc_set_error(TORC_ERR_IO, "torc_safetensors_save: fsync of %s: %s",
                       tmp, strerror(errno));
  if (close(fd) != 0 && s == TORC_OK)
    s = torc_set_error(TORC_ERR_IO, "torc_safetensors_save: closing %s: %s",
                       tmp, strerror(errno));
  if (s == TORC_OK && fail_before_rename == 2)
    raise(SIGSTOP);
  if (s == TORC_OK && fail_before_rename)
    s = torc_set_error(TORC_ERR_IO,
                       "torc_safetensors_save: simulated failure before "
                       "renaming %s to %s",
                       tmp, path);
  if (s == TORC_OK && rename(tmp, path) != 0)
    s = torc_set_error(TORC_ERR_IO,
                       "torc_safetensors_save: cannot rename %s to %s: %s", tmp,
                       path, strerror(errno));
  if (s != TORC_OK) {
    unlink(tmp);
    goto out;
  }
  /* Make the rename itself durable. */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0)
    s = torc_set_error(TORC_ERR_IO,
                       "torc_safetensors_save: %s was written, but syncing its "
                       "folder %s failed: %s",
                       path, dir, strerror(errno));
  if (dfd >= 0)
    close(dfd);
out:
  torc__free(hdr);
  torc__free(tmp);
  torc__free(dir);
  torc__free(items);
  return s;
}
