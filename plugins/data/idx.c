/* plugins/data/idx.c — the "idx" source: MNIST-style IDX files (images u8
 * [N, H, W], labels u8 [N]), gzip-compressed or raw. Both files are
 * validated and loaded whole at open, so get() only copies; a header's
 * declared size is checked against the file (raw) or the limit max_bytes
 * (gzip, whose buffer grows only as decoded bytes arrive) before any
 * allocation.
 *
 * Decompressing Fashion-MNIST's 26 MB of gzip takes most of a training
 * run's start-up, so a gzip file, once decoded and validated, is kept
 * uncompressed in a cache folder (TORC_DATA_CACHE, else
 * $XDG_CACHE_HOME/torc, else ~/.cache/torc; TORC_DATA_CACHE=off turns it
 * off), named by a hash of the file's path, size and modification time,
 * and later opens read that copy instead. The copy carries a CRC-32 of its
 * contents; one that is not a regular file, or has the wrong size, header
 * or checksum, is ignored and rewritten; a cache that cannot be written
 * only costs the speed-up.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "data_internal.h"
#include "torc/checked.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u

typedef struct idx_ds {
  int64_t n, h, w;
  int64_t classes;
  uint8_t *images; /* n * h * w */
  uint8_t *labels; /* n */
  uint8_t *cached[2]; /* the cache files read (images, labels), or NULL:
                         the data then lies inside, after the header */
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

/* A cache file is the IDX header, the data, then this 8-byte trailer:
 * "tIC1" and the CRC-32 (big-endian) of header and data. The copy is only
 * used when all of it checks out, so a damaged or foreign file is decoded
 * again and rewritten, never served. */
#define IDX_CACHE_TAG "tIC1"
#define IDX_CACHE_TRAILER 8

/* CRC-32 of n bytes, in chunks zlib's uInt lengths can take. */
static uint32_t idx_crc(uint32_t crc, const uint8_t *p, uint64_t n) {
  while (n > 0) {
    uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
    crc = (uint32_t)crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return crc;
}

static void idx_put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* Reads the cached copy of an IDX file whose header is head (head_len
 * bytes) with `total` data bytes into a malloc'd buffer (header, data,
 * trailer); NULL when there is none that fits: not a regular file, the
 * wrong size, header or checksum. (Read, not mapped: a mapped file that
 * someone truncates later would kill the process with SIGBUS.) */
static uint8_t *cache_load(const char *cpath, const uint8_t *head,
                           uint64_t head_len, uint64_t total) {
  uint64_t want = head_len + total + IDX_CACHE_TRAILER, size;
  int fd, err;
  const char *kind, *why = NULL;
  char *buf = NULL;
  int rc = dsrc_open_file(cpath, want, &fd, &size, &err, &kind);
  if (rc == DSRC_OPEN_ERRNO && err == ENOENT)
    return NULL; /* not cached yet */
  if (rc == DSRC_OPEN_NOT_REGULAR || rc == DSRC_OPEN_FOLDER)
    why = "not a regular file";
  else if (rc != DSRC_OPEN_OK)
    why = rc == DSRC_OPEN_TOO_LARGE ? "the wrong size" : strerror(err);
  else if (size != want)
    why = "the wrong size";
  else if (dsrc_read_all(fd, size, &buf) != 0)
    why = "cannot be read whole";
  if (rc == DSRC_OPEN_OK)
    close(fd);
  if (buf != NULL) {
    const uint8_t *b = (const uint8_t *)buf;
    uint8_t trailer[IDX_CACHE_TRAILER];
    memcpy(trailer, IDX_CACHE_TAG, 4);
    idx_put_be32(trailer + 4,
                 idx_crc((uint32_t)crc32(0, Z_NULL, 0), b, head_len + total));
    if (memcmp(b, head, (size_t)head_len) != 0)
      why = "a different header";
    else if (memcmp(b + head_len + total, trailer, IDX_CACHE_TRAILER) != 0)
      why = "a bad checksum (it is damaged)";
  }
  if (why != NULL) {
    dsrc_log(TORC_LOG_DEBUG,
             "idx: ignoring the cache file %s (%s); decoding again", cpath,
             why);
    free(buf);
    return NULL;
  }
  return (uint8_t *)buf;
}

/* Writes the decoded file (header, data, trailer) to the cache,
 * atomically (a temporary file renamed); failures are only logged. */
static void cache_store(const char *cpath, const uint8_t *head,
                        uint64_t head_len, const uint8_t *data,
                        uint64_t total) {
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
  uint8_t trailer[IDX_CACHE_TRAILER];
  memcpy(trailer, IDX_CACHE_TAG, 4);
  uint32_t crc = idx_crc((uint32_t)crc32(0, Z_NULL, 0), head, head_len);
  idx_put_be32(trailer + 4, idx_crc(crc, data, total));
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", cpath, (long)getpid());
  FILE *f = fopen(tmp, "wbx");
  int ok = f && fwrite(head, 1, (size_t)head_len, f) == (size_t)head_len &&
           fwrite(data, 1, (size_t)total, f) == (size_t)total &&
           fwrite(trailer, 1, sizeof trailer, f) == sizeof trailer;
  if (f && fclose(f) != 0)
    ok = 0;
  if (ok && rename(tmp, cpath) == 0) {
    dsrc_log(TORC_LOG_DEBUG, "idx: cached the decoded data in %s", cpath);
    return;
  }
  int e = errno;
  if (f)
    remove(tmp);
  dsrc_log(TORC_LOG_DEBUG, "idx: cannot write the cache file %s: %s", cpath,
           strerror(e));
}

/* ---- reading an IDX file, raw or gzip ---- */

/* The bytes of one IDX file: the file itself, or what its gzip members
 * inflate to. zlib's inflate is used directly (not gzread) so that bytes
 * after the last gzip member are an error rather than silently ignored. */
typedef struct idx_in {
  const char *key, *path;
  int fd;
  uint64_t file_size;
  uint64_t file_pos; /* bytes of the file read so far */
  int gzip;
  int zinit;         /* z is initialised */
  int zend;          /* gzip: the last member ended and the file with it */
  int member_done;   /* gzip: a member ended; another or the end follows */
  z_stream z;
  uint8_t buf[1 << 16];
} idx_in;

enum {
  IDX_IN_OK = 0,   /* got < n only at the end of the data */
  IDX_IN_TRUNC,    /* the gzip stream stops before its end */
  IDX_IN_CORRUPT,  /* zlib found bad data (or the CRC does not match) */
  IDX_IN_GARBAGE,  /* bytes after the last gzip member */
  IDX_IN_IOERR     /* read() failed; errno is set */
};

/* Fills buf from the file; returns the bytes read, 0 at its end, -1. */
static ssize_t idx_fill(idx_in *in, uint8_t *dst, size_t n) {
  for (;;) {
    ssize_t got = read(in->fd, dst, n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got > 0)
      in->file_pos += (uint64_t)got;
    return got;
  }
}

/* Reads up to n bytes into dst; *got is how many. */
static int idx_in_read(idx_in *in, uint8_t *dst, uint64_t n, uint64_t *got) {
  *got = 0;
  if (!in->gzip) {
    while (*got < n) {
      uint64_t chunk = n - *got > (1u << 30) ? (1u << 30) : n - *got;
      ssize_t r = idx_fill(in, dst + *got, (size_t)chunk);
      if (r < 0)
        return IDX_IN_IOERR;
      if (r == 0)
        break;
      *got += (uint64_t)r;
    }
    return IDX_IN_OK;
  }
  while (*got < n && !in->zend) {
    if (in->z.avail_in == 0) {
      ssize_t r = idx_fill(in, in->buf, sizeof in->buf);
      if (r < 0)
        return IDX_IN_IOERR;
      if (r == 0) {
        if (in->member_done) {
          in->zend = 1;
          break;
        }
        return IDX_IN_TRUNC;
      }
      in->z.next_in = in->buf;
      in->z.avail_in = (uInt)r;
    }
    if (in->member_done) {
      /* Another gzip member (as gzip and zlib's gzread accept) or
       * garbage. */
      if (in->z.next_in[0] != 0x1f)
        return IDX_IN_GARBAGE;
      if (inflateReset(&in->z) != Z_OK)
        return IDX_IN_CORRUPT;
      in->member_done = 0;
    }
    uint64_t room = n - *got > (1u << 30) ? (1u << 30) : n - *got;
    in->z.next_out = dst + *got;
    in->z.avail_out = (uInt)room;
    uInt had_in = in->z.avail_in;
    int ret = inflate(&in->z, Z_NO_FLUSH);
    uint64_t made = room - in->z.avail_out;
    *got += made;
    if (ret == Z_STREAM_END)
      in->member_done = 1;
    else if ((ret != Z_OK && ret != Z_BUF_ERROR) ||
             (made == 0 && in->z.avail_in == had_in))
      return IDX_IN_CORRUPT; /* an error, or no progress with input left */
  }
  return IDX_IN_OK;
}

/* The error for a read that stopped (status st, got of want bytes of
 * `what`). */
static int idx_in_error(const idx_in *in, int st, const char *what,
                        uint64_t got, uint64_t want) {
  const char *key = in->key, *path = in->path;
  switch (st) {
  case IDX_IN_TRUNC:
    return dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' is a truncated gzip stream (it "
                      "ends while reading %s); the download was cut short: "
                      "fetch the file again",
                      key, path, what);
  case IDX_IN_CORRUPT:
    return dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' is corrupt gzip data (%s while "
                      "reading %s); fetch the file again",
                      key, path, in->z.msg ? in->z.msg : "bad data", what);
  case IDX_IN_GARBAGE:
    return dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' has %" PRIu64 " bytes of garbage "
                      "after its gzip stream; the file is damaged: fetch it "
                      "again",
                      key, path,
                      in->file_size - (in->file_pos - in->z.avail_in));
  case IDX_IN_IOERR:
    return dsrc_error(TORC_ERR_IO, "idx: reading %s file '%s' failed: %s",
                      key, path, strerror(errno));
  default:
    return dsrc_error(TORC_ERR_IO,
                      "idx: %s file '%s' is truncated: %s needs %" PRIu64
                      " bytes but only %" PRIu64 " are there; fetch the file "
                      "again",
                      key, path, what, want, got);
  }
}

/* Reads exactly n bytes of `what`, or sets the error. */
static int idx_in_exact(idx_in *in, uint8_t *dst, uint64_t n,
                        const char *what) {
  uint64_t got;
  int st = idx_in_read(in, dst, n, &got);
  if (st != IDX_IN_OK || got != n)
    return idx_in_error(in, st, what, got, n);
  return TORC_OK;
}

/* Reads `total` bytes of gzip data into a malloc'd *out. The buffer grows
 * geometrically as bytes arrive, up to `total`, so a header claiming far
 * more than the stream holds costs at most twice what is really there. */
static int idx_in_gzip_data(idx_in *in, uint64_t total, const char *what,
                            uint8_t **out) {
  *out = NULL;
  uint64_t cap = total < (1u << 20) ? total : (1u << 20), have = 0;
  uint8_t *buf = malloc((size_t)cap);
  if (buf == NULL)
    return dsrc_oom("idx", (size_t)cap);
  while (have < total) {
    if (have == cap) {
      uint64_t ncap = cap * 2 < total ? cap * 2 : total;
      uint8_t *nb = realloc(buf, (size_t)ncap);
      if (nb == NULL) {
        free(buf);
        return dsrc_oom("idx", (size_t)ncap);
      }
      buf = nb;
      cap = ncap;
    }
    uint64_t got, asked = cap - have;
    int st = idx_in_read(in, buf + have, asked, &got);
    have += got;
    if (st != IDX_IN_OK || got < asked) {
      free(buf);
      return idx_in_error(in, st, what, have, total);
    }
  }
  *out = buf;
  return TORC_OK;
}

/* Loads one IDX file whose magic must be `magic` (ndim dims of u8) into
 * dims and *data: malloc'd, or (a gzip file cached before) inside the
 * cache file read whole into *cached. Nothing larger than max_bytes is read
 * or allocated, and nothing is allocated before the header's size was
 * checked against the file (raw) or against max_bytes (gzip). */
static int idx_load(const char *key, const char *path, uint32_t magic,
                    uint64_t max_bytes, int64_t *dims, uint8_t **data,
                    uint8_t **cached) {
  *data = NULL;
  *cached = NULL;
  int fd;
  uint64_t fsize;
  int st = dsrc_open_regular("idx", key, path, max_bytes, "max_bytes", &fd,
                             &fsize);
  if (st != TORC_OK)
    return st;
  idx_in *in = calloc(1, sizeof *in);
  if (in == NULL) {
    close(fd);
    return dsrc_oom("idx", sizeof *in);
  }
  in->key = key;
  in->path = path;
  in->fd = fd;
  in->file_size = fsize;
  uint8_t sig[2];
  in->gzip = fsize >= 2 && pread(fd, sig, 2, 0) == 2 && sig[0] == 0x1f &&
             sig[1] == 0x8b;
  if (in->gzip) {
    if (inflateInit2(&in->z, 15 + 16) != Z_OK) { /* gzip wrapper only */
      st = dsrc_oom("idx", sizeof in->z);
      goto done;
    }
    in->zinit = 1;
  }

  int ndim = (int)(magic & 0xff);
  uint8_t head[4 + 4 * 3];
  uint64_t head_len = 4 + 4 * (uint64_t)ndim;
  st = idx_in_exact(in, head, 4, "the 4-byte IDX magic");
  if (st != TORC_OK)
    goto done;
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
  st = idx_in_exact(in, head + 4, head_len - 4,
                    "the IDX header's dimensions");
  if (st != TORC_OK)
    goto done;
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
  }
  char what[128], shape[96];
  dsrc_shape_str(shape, sizeof shape, dims, ndim);
  snprintf(what, sizeof what, "the data of its header's shape %s", shape);
  /* The size is computed checked, then held against the limit before
   * anything is allocated. */
  uint64_t total;
  if (torc_checked_numel(dims, ndim, UINT64_MAX, &total)) {
    st = dsrc_error(TORC_ERR_IO,
                    "idx: %s file '%s' has an implausible header (shape %s "
                    "has more elements than can be counted); the file is "
                    "corrupt",
                    key, path, shape);
    goto done;
  }
  if (!in->gzip) {
    /* A raw file's length is known: it must be header plus data. */
    if (fsize != head_len + total) {
      if (fsize < head_len + total)
        st = dsrc_error(TORC_ERR_IO,
                        "idx: %s file '%s' is truncated: %s needs %" PRIu64
                        " bytes but only %" PRIu64 " are there; fetch the "
                        "file again",
                        key, path, what, total, fsize - head_len);
      else
        st = dsrc_error(TORC_ERR_IO,
                        "idx: %s file '%s' has %" PRIu64 " bytes after the "
                        "%" PRIu64 " its header's shape %s needs; the header "
                        "does not match the data: give an unmodified IDX "
                        "file",
                        key, path, fsize - head_len - total, total, shape);
      goto done;
    }
    char *buf;
    st = dsrc_read_fd("idx", key, path, fd, total, &buf);
    *data = (uint8_t *)buf;
    goto done;
  }
  /* gzip: the declared size against the limit (a raw file's was held
   * against its real length, itself within the limit). */
  if (total > max_bytes) {
    st = dsrc_error(TORC_ERR_IO,
                    "idx: %s file '%s' declares %" PRIu64 " bytes of data "
                    "(shape %s), over the limit of %" PRIu64 " bytes (key "
                    "'max_bytes'); if the data is meant to be this large, "
                    "raise max_bytes (e.g. max_bytes = %" PRIu64 "M), else "
                    "the header is corrupt",
                    key, path, total, shape, max_bytes, (total >> 20) + 1);
    goto done;
  }
  /* gzip input: use the decoded copy of an earlier open if there is one. */
  char cpath[4200];
  int cacheable = cache_path(path, cpath, sizeof cpath);
  if (cacheable &&
      (*cached = cache_load(cpath, head, head_len, total)) != NULL) {
    *data = *cached + head_len;
    st = TORC_OK;
    goto done;
  }
  st = idx_in_gzip_data(in, total, what, data);
  if (st != TORC_OK)
    goto done;
  /* Nothing may follow the data, and the stream must end (its CRC and
   * length checked by inflate). A bomb's excess is counted up to a cap. */
  uint8_t extra[4096];
  uint64_t more = 0, got;
  int rs;
  do {
    rs = idx_in_read(in, extra, sizeof extra, &got);
    more += got;
  } while (rs == IDX_IN_OK && got > 0 && more < (1u << 20));
  if (more > 0) {
    st = dsrc_error(TORC_ERR_IO,
                    "idx: %s file '%s' has %" PRIu64 "%s bytes after the "
                    "%" PRIu64 " its header's shape %s needs; the header "
                    "does not match the data: give an unmodified IDX file",
                    key, path, more, rs == IDX_IN_OK && got == 0 ? "" : "+",
                    total, shape);
    goto done;
  }
  if (rs != IDX_IN_OK) {
    st = idx_in_error(in, rs, "the gzip trailer", 0, 0);
    goto done;
  }
  st = TORC_OK;
  if (cacheable)
    cache_store(cpath, head, head_len, *data, total);
done:
  if (in->zinit)
    inflateEnd(&in->z);
  free(in);
  close(fd);
  if (st != TORC_OK) {
    if (*cached == NULL)
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
    if (ds->cached[i])
      free(ds->cached[i]);
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
  uint64_t max_bytes;
  int st = dsrc_limit("idx", "max_bytes", keys, values, n, DSRC_IDX_MAX_BYTES,
                      &max_bytes);
  if (st == TORC_OK)
    st = idx_load("images", images, IDX_MAGIC_IMAGES, max_bytes, idims,
                  &ds->images, &ds->cached[0]);
  if (st == TORC_OK)
    st = idx_load("labels", labels, IDX_MAGIC_LABELS, max_bytes, ldims,
                  &ds->labels, &ds->cached[1]);
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
    {"max_bytes", "the largest IDX file read, and the most data its header "
                  "may declare, each of images and labels (K, M, G "
                  "suffixes); a device or pipe is refused",
     DSRC_IDX_MAX_BYTES, 0},
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
