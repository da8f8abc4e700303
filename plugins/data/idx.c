/* plugins/data/idx.c — the "idx" source: MNIST-style IDX files (images u8
 * [N, H, W], labels u8 [N]), gzip-compressed or raw (zlib reads both). Both
 * files are validated and loaded whole at open, so get() only copies.
 *
 * Decompressing Fashion-MNIST's 26 MB of gzip takes most of a training
 * run's start-up, so a gzip file, once decoded and validated, is kept
 * uncompressed in a cache folder (TORC_DATA_CACHE, else
 * $XDG_CACHE_HOME/torc, else ~/.cache/torc; TORC_DATA_CACHE=off turns it
 * off), named by a hash of the file's path, size and modification time,
 * and later opens map that copy instead. A cached copy of the wrong size
 * or magic is ignored and rewritten; a cache that cannot be written only
 * costs the speed-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "data_internal.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u

typedef struct idx_ds {
  int64_t n, h, w;
  int64_t classes;
  uint8_t *images; /* n * h * w */
  uint8_t *labels; /* n */
  void *map[2];    /* the cached copies mapped (images, labels), or NULL */
  size_t map_len[2];
} idx_ds;

/* ---- the decoded-data cache ---- */

/* The cache file for `path` into out (size), or 0 when caching is off or
 * the file cannot be identified. */
static int cache_path(const char *path, char *out, size_t size) {
  const char *dir = getenv("TORC_DATA_CACHE");
  char base[1024];
  if (dir && (strcmp(dir, "off") == 0 || strcmp(dir, "0") == 0 || !*dir))
    return 0;
  if (dir) {
    snprintf(base, sizeof base, "%s", dir);
  } else if (getenv("XDG_CACHE_HOME") && *getenv("XDG_CACHE_HOME")) {
    snprintf(base, sizeof base, "%s/torc", getenv("XDG_CACHE_HOME"));
  } else if (getenv("HOME") && *getenv("HOME")) {
    snprintf(base, sizeof base, "%s/.cache/torc", getenv("HOME"));
  } else {
    return 0;
  }
  char real[4096];
  struct stat sb;
  if (realpath(path, real) == NULL || stat(real, &sb) != 0)
    return 0;
  uint64_t h = 1469598103934665603u; /* FNV-1a of path, size, mtime */
  for (const char *c = real; *c; c++)
    h = (h ^ (uint8_t)*c) * 1099511628211u;
  uint64_t v[3] = {(uint64_t)sb.st_size, (uint64_t)sb.st_mtim.tv_sec,
                   (uint64_t)sb.st_mtim.tv_nsec};
  for (int i = 0; i < 3; i++)
    for (int b = 0; b < 8; b++)
      h = (h ^ ((v[i] >> (8 * b)) & 0xff)) * 1099511628211u;
  const char *name = strrchr(real, '/');
  snprintf(out, size, "%s/idx-%016" PRIx64 "-%s.raw", base, h,
           name ? name + 1 : real);
  return 1;
}

/* Maps the cached copy of an IDX file whose header is head (head_len
 * bytes) with `total` data bytes; NULL when there is none that fits. */
static void *cache_map(const char *cpath, const uint8_t *head,
                       int64_t head_len, int64_t total, size_t *len) {
  int fd = open(cpath, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat sb;
  void *p = NULL;
  if (fstat(fd, &sb) == 0 && sb.st_size == head_len + total) {
    p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED || memcmp(p, head, (size_t)head_len) != 0) {
      if (p != MAP_FAILED)
        munmap(p, (size_t)sb.st_size);
      p = NULL;
    } else {
      *len = (size_t)sb.st_size;
    }
  }
  close(fd);
  return p;
}

/* Writes the decoded file (header and data) to the cache, atomically (a
 * temporary file renamed); failures are only logged. */
static void cache_store(const char *cpath, const uint8_t *head,
                        int64_t head_len, const uint8_t *data,
                        int64_t total) {
  char dir[4096], tmp[4200];
  snprintf(dir, sizeof dir, "%s", cpath);
  char *slash = strrchr(dir, '/');
  if (slash == NULL)
    return;
  *slash = '\0';
  for (char *c = dir + 1; *c; c++)
    if (*c == '/') {
      *c = '\0';
      mkdir(dir, 0755);
      *c = '/';
    }
  mkdir(dir, 0755);
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", cpath, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  int ok = f && fwrite(head, 1, (size_t)head_len, f) == (size_t)head_len &&
           fwrite(data, 1, (size_t)total, f) == (size_t)total;
  if (f && fclose(f) != 0)
    ok = 0;
  if (ok && rename(tmp, cpath) == 0) {
    dsrc_log(TORC_LOG_DEBUG, "idx: cached the decoded data in %s", cpath);
    return;
  }
  remove(tmp);
  dsrc_log(TORC_LOG_DEBUG, "idx: cannot write the cache file %s: %s", cpath,
           strerror(errno));
}

/* Reads exactly n bytes; returns the number read (< n at the end of the
 * data, -1 on a zlib error). */
static int64_t idx_read(gzFile gz, uint8_t *dst, int64_t n) {
  int64_t done = 0;
  while (done < n) {
    int64_t chunk = n - done;
    if (chunk > (1 << 30))
      chunk = 1 << 30;
    int got = gzread(gz, dst + done, (unsigned)chunk);
    if (got < 0)
      return -1;
    if (got == 0)
      break;
    done += got;
  }
  return done;
}

/* After a short or failed read: an error saying why (truncated gzip
 * stream, corrupt gzip data, or a file shorter than its header says). */
static int idx_short(gzFile gz, const char *key, const char *path,
                     const char *what, int64_t got, int64_t want) {
  int zerr = Z_OK;
  const char *zmsg = gzerror(gz, &zerr);
  if (zerr == Z_BUF_ERROR)
    return dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' is a truncated gzip stream (%s "
                      "while reading %s); the download was cut short: fetch "
                      "the file again",
                      key, path, zmsg, what);
  if (zerr != Z_OK && zerr != Z_STREAM_END)
    return dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' is corrupt gzip data (%s while "
                      "reading %s); fetch the file again",
                      key, path, zmsg, what);
  return dsrc_error(TORC_ERR_IO,
                    "idx: %s file '%s' is truncated: %s needs %" PRId64
                    " bytes but only %" PRId64 " are there; fetch the file "
                    "again",
                    key, path, what, want, got < 0 ? 0 : got);
}

/* Loads one IDX file whose magic must be `magic` (ndim dims of u8) into
 * dims and *data: malloc'd, or (a gzip file cached before) inside the
 * mapping *map of *map_len bytes. */
static int idx_load(const char *key, const char *path, uint32_t magic,
                    int64_t *dims, uint8_t **data, void **map,
                    size_t *map_len) {
  *data = NULL;
  *map = NULL;
  FILE *f;
  int st = dsrc_fopen("idx", key, path, &f);
  if (st != TORC_OK)
    return st;
  /* zlib takes its own descriptor; the stream f closes ours. */
  int fd = dup(fileno(f));
  fclose(f);
  gzFile gz = fd >= 0 ? gzdopen(fd, "rb") : NULL;
  if (gz == NULL) {
    if (fd >= 0)
      close(fd);
    return dsrc_error(TORC_ERR_IO, "idx: cannot open %s file '%s': %s", key,
                      path, strerror(errno));
  }
  gzbuffer(gz, 1 << 17);

  int ndim = (int)(magic & 0xff);
  uint8_t head[4 + 4 * 3];
  int64_t head_len = 4 + 4 * (int64_t)ndim;
  int64_t got = idx_read(gz, head, 4);
  if (got != 4) {
    st = idx_short(gz, key, path, "the 4-byte IDX magic", got, 4);
    goto done;
  }
  uint32_t m = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 |
               (uint32_t)head[2] << 8 | head[3];
  if (m != magic) {
    const char *hint = "";
    if (m == (magic == IDX_MAGIC_IMAGES ? IDX_MAGIC_LABELS : IDX_MAGIC_IMAGES))
      hint = magic == IDX_MAGIC_IMAGES
                 ? " (it is a labels file: are images and labels swapped?)"
                 : " (it is an images file: are images and labels swapped?)";
    else if (head[0] != 0 || head[1] != 0)
      hint = " (not an IDX file)";
    else if (head[2] != 0x08)
      hint = " (an IDX file of another element type: only unsigned bytes, "
             "type 0x08, are supported)";
    st = dsrc_error(TORC_ERR_IO,
                    "idx: %s file '%s' has the wrong IDX magic 0x%08" PRIx32
                    "%s; expected 0x%08" PRIx32 " (%s); give an IDX %s file",
                    key, path, m, hint, magic,
                    magic == IDX_MAGIC_IMAGES ? "u8 images [N, H, W]"
                                              : "u8 labels [N]",
                    magic == IDX_MAGIC_IMAGES ? "images" : "labels");
    goto done;
  }
  got = idx_read(gz, head + 4, head_len - 4);
  if (got != head_len - 4) {
    st = idx_short(gz, key, path, "the IDX header's dimensions", got,
                   head_len - 4);
    goto done;
  }
  int64_t total = 1;
  for (int i = 0; i < ndim; i++) {
    const uint8_t *p = head + 4 + 4 * i;
    dims[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                        (uint32_t)p[2] << 8 | p[3]);
    if (dims[i] == 0) {
      st = dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' has a dimension of size 0 in its "
                      "header; it holds no samples: give a non-empty file",
                      key, path);
      goto done;
    }
    total *= dims[i];
    if (total > ((int64_t)1 << 40)) {
      st = dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' has an implausible header (more "
                      "than 2^40 elements); the file is corrupt",
                      key, path);
      goto done;
    }
  }
  /* gzip input: use the decoded copy of an earlier open if there is one
   * (gzdirect: zlib passes plain files through). */
  char cpath[4200];
  int cacheable = !gzdirect(gz) && cache_path(path, cpath, sizeof cpath);
  if (cacheable &&
      (*map = cache_map(cpath, head, head_len, total, map_len)) != NULL) {
    *data = (uint8_t *)*map + head_len;
    st = TORC_OK;
    goto done;
  }
  *data = malloc((size_t)total);
  if (*data == NULL) {
    st = dsrc_oom("idx", (size_t)total);
    goto done;
  }
  char what[128], shape[96];
  dsrc_shape_str(shape, sizeof shape, dims, ndim);
  snprintf(what, sizeof what, "the data of its header's shape %s", shape);
  got = idx_read(gz, *data, total);
  if (got != total) {
    st = idx_short(gz, key, path, what, got, total);
    goto done;
  }
  /* Nothing may follow the data (reading on also checks the gzip CRC). */
  uint8_t extra[256];
  got = idx_read(gz, extra, sizeof extra);
  int zerr = Z_OK;
  gzerror(gz, &zerr);
  if (got < 0 || (got == 0 && zerr != Z_OK && zerr != Z_STREAM_END)) {
    st = idx_short(gz, key, path, "the gzip trailer", got, 0);
    goto done;
  }
  if (got > 0) {
    int64_t more = got;
    while ((got = idx_read(gz, extra, sizeof extra)) > 0)
      more += got;
    st = dsrc_error(TORC_ERR_IO,
                    "idx: %s file '%s' has %" PRId64 "%s bytes after the "
                    "%" PRId64 " its header's shape %s needs; the header "
                    "does not match the data: give an unmodified IDX file",
                    key, path, more, got < 0 ? "+" : "", total, shape);
    goto done;
  }
  st = TORC_OK;
  if (cacheable)
    cache_store(cpath, head, head_len, *data, total);
done:
  gzclose_r(gz);
  if (st != TORC_OK) {
    if (*map == NULL)
      free(*data);
    *data = NULL;
  }
  return st;
}

static void idx_close(void *handle) {
  idx_ds *ds = handle;
  if (ds == NULL)
    return;
  uint8_t *data[2] = {ds->images, ds->labels};
  for (int i = 0; i < 2; i++) {
    if (ds->map[i])
      munmap(ds->map[i], ds->map_len[i]);
    else
      free(data[i]);
  }
  free(ds);
}

static int idx_open(const char *const *keys, const char *const *values, int n,
                    void *user, void **handle) {
  (void)user;
  *handle = NULL;
  const char *images = dsrc_value(keys, values, n, "images");
  const char *labels = dsrc_value(keys, values, n, "labels");
  idx_ds *ds = calloc(1, sizeof *ds);
  if (ds == NULL)
    return dsrc_oom("idx", sizeof *ds);
  int64_t idims[3], ldims[1];
  int st = idx_load("images", images, IDX_MAGIC_IMAGES, idims, &ds->images,
                    &ds->map[0], &ds->map_len[0]);
  if (st == TORC_OK)
    st = idx_load("labels", labels, IDX_MAGIC_LABELS, ldims, &ds->labels,
                  &ds->map[1], &ds->map_len[1]);
  if (st == TORC_OK && idims[0] != ldims[0])
    st = dsrc_error(TORC_ERR_SHAPE,
                    "idx: images file '%s' has %" PRId64 " samples but "
                    "labels file '%s' has %" PRId64 "; give the labels that "
                    "belong to these images (train with train, t10k with "
                    "t10k)",
                    images, idims[0], labels, ldims[0]);
  if (st != TORC_OK) {
    idx_close(ds);
    return st;
  }
  ds->n = idims[0];
  ds->h = idims[1];
  ds->w = idims[2];
  int max = 0;
  for (int64_t i = 0; i < ds->n; i++)
    if (ds->labels[i] > max)
      max = ds->labels[i];
  ds->classes = max + 1;
  *handle = ds;
  return TORC_OK;
}

static int64_t idx_length(void *handle) { return ((idx_ds *)handle)->n; }

static int idx_get(void *handle, int64_t index, torc_tensor **input,
                   torc_tensor **target) {
  const idx_ds *ds = handle;
  const int64_t shape[3] = {1, ds->h, ds->w};
  int st = dsrc_tensor(ds->images + index * ds->h * ds->w, shape, 3, TORC_U8,
                       input);
  if (st != TORC_OK)
    return st;
  st = dsrc_class_target(ds->labels[index], target);
  if (st != TORC_OK) {
    dsrc_api->release(*input);
    *input = NULL;
  }
  return st;
}

static int idx_describe(void *handle, char *buf, size_t size) {
  const idx_ds *ds = handle;
  snprintf(buf, size,
           "%" PRId64 " samples, input [1, %" PRId64 ", %" PRId64
           "] u8, %" PRId64 " classes",
           ds->n, ds->h, ds->w, ds->classes);
  return TORC_OK;
}

static int64_t idx_num_classes(void *handle) {
  return ((idx_ds *)handle)->classes;
}

static const torc_data_key idx_keys[] = {
    {"images", "IDX images file, u8 [N, H, W] (magic 0x00000803), gzip or "
               "raw, e.g. train-images-idx3-ubyte.gz",
     NULL, 1},
    {"labels", "IDX labels file, u8 [N] (magic 0x00000801), gzip or raw, "
               "e.g. train-labels-idx1-ubyte.gz",
     NULL, 1},
    {NULL, NULL, NULL, 0},
};

const torc_data_source_type dsrc_idx_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "idx",
    .description = "MNIST-style IDX images and labels (gzip or raw): input "
                   "u8 [1, H, W], target the class index",
    .keys = idx_keys,
    .open = idx_open,
    .length = idx_length,
    .get = idx_get,
    .close = idx_close,
    .describe = idx_describe,
    .num_classes = idx_num_classes,
    .class_name = NULL,
    .user = NULL,
};
