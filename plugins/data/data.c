/* plugins/data/data.c — the "data" plugin: registers the built-in data
 * sources (idx, csv, npy, image_folder, synthetic, text), and the helpers they
 * share (errors, key and size-limit parsing, opening and reading files —
 * regular files only, within a size limit — and making sample tensors).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "torc/checked.h"

#include "data_internal.h"

const torc_host *dsrc_host;
const torc_api *dsrc_api;

int dsrc_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int st = dsrc_host->set_error_v(status, fmt, ap);
  va_end(ap);
  return st;
}

void dsrc_log(int level, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  dsrc_host->log(level, "%s", buf);
}

int dsrc_oom(const char *source, size_t nbytes) {
  return dsrc_error(TORC_ERR_OOM,
                    "%s: out of memory allocating %zu bytes; free memory or "
                    "use a smaller dataset",
                    source, nbytes);
}

const char *dsrc_value(const char *const *keys, const char *const *values,
                       int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(keys[i], key) == 0)
      return values[i];
  return NULL;
}

int dsrc_parse_int(const char *source, const char *key, const char *text,
                   int64_t min, int64_t max, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : 0;
  if (text != NULL && end != text)
    while (*end == ' ' || *end == '\t')
      end++;
  if (text == NULL || end == text || *end != '\0' || errno != 0 || v < min ||
      v > max)
    return dsrc_error(TORC_ERR_INVALID,
                      "%s: key '%s' = '%s' is not an integer in [%" PRId64
                      ", %" PRId64 "]; give one in that range",
                      source, key, text ? text : "", min, max);
  *out = (int64_t)v;
  return TORC_OK;
}

int dsrc_parse_bool(const char *source, const char *key, const char *text,
                    int *out) {
  static const char *const yes[] = {"yes", "true", "on", "1"};
  static const char *const no[] = {"no", "false", "off", "0"};
  for (size_t i = 0; text && i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(text, yes[i]) == 0) {
      *out = 1;
      return TORC_OK;
    }
    if (strcasecmp(text, no[i]) == 0) {
      *out = 0;
      return TORC_OK;
    }
  }
  return dsrc_error(TORC_ERR_INVALID,
                    "%s: key '%s' = '%s' is not yes or no; give yes or no",
                    source, key, text ? text : "");
}

int dsrc_parse_size(const char *source, const char *key, const char *text,
                    uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v =
      text && text[0] != '-' ? strtoull(text, &end, 10) : 0;
  uint64_t mult = 1;
  int ok = text != NULL && end != text && errno == 0;
  if (ok) {
    switch (*end) {
    case 'k': case 'K': mult = (uint64_t)1 << 10; end++; break;
    case 'm': case 'M': mult = (uint64_t)1 << 20; end++; break;
    case 'g': case 'G': mult = (uint64_t)1 << 30; end++; break;
    case 't': case 'T': mult = (uint64_t)1 << 40; end++; break;
    default: break;
    }
    while (*end == ' ' || *end == '\t')
      end++;
    ok = *end == '\0' && v > 0 && !torc_checked_mul(v, mult, out);
  }
  if (!ok)
    return dsrc_error(TORC_ERR_INVALID,
                      "%s: key '%s' = '%s' is not a positive size; give a "
                      "number, optionally with a K, M, G or T suffix (powers "
                      "of 1024), e.g. 512M",
                      source, key, text ? text : "");
  return TORC_OK;
}

int dsrc_limit(const char *source, const char *key, const char *const *keys,
               const char *const *values, int n, const char *fallback,
               uint64_t *out) {
  const char *v = dsrc_value(keys, values, n, key);
  return dsrc_parse_size(source, key, v ? v : fallback, out);
}

/* What a file that is not a regular file is, for the error. */
static const char *file_kind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a folder";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISSOCK(mode))
    return "a socket";
  return "a special file";
}

int dsrc_open_file(const char *path, uint64_t max_bytes, int *fd,
                   uint64_t *size, int *err, const char **kind) {
  *fd = -1;
  *size = 0;
  *err = 0;
  *kind = NULL;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; the check
   * below refuses it before anything is read. */
  int d = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (d < 0) {
    *err = errno;
    return DSRC_OPEN_ERRNO;
  }
  struct stat sb;
  if (fstat(d, &sb) != 0) {
    *err = errno;
    close(d);
    return DSRC_OPEN_ERRNO;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(d);
    *kind = file_kind(sb.st_mode);
    return S_ISDIR(sb.st_mode) ? DSRC_OPEN_FOLDER : DSRC_OPEN_NOT_REGULAR;
  }
  *size = sb.st_size < 0 ? 0 : (uint64_t)sb.st_size;
  if (*size > max_bytes) {
    close(d);
    return DSRC_OPEN_TOO_LARGE;
  }
  /* Reads block again from here on (a regular file never waits). */
  int fl = fcntl(d, F_GETFL);
  if (fl >= 0)
    fcntl(d, F_SETFL, fl & ~O_NONBLOCK);
  *fd = d;
  return DSRC_OPEN_OK;
}

int dsrc_open_regular(const char *source, const char *key, const char *path,
                      uint64_t max_bytes, const char *limit_key, int *fd,
                      uint64_t *size) {
  *fd = -1;
  *size = 0;
  if (path == NULL || path[0] == '\0')
    return dsrc_error(TORC_ERR_INVALID,
                      "%s: key '%s' is empty; give the path of a file",
                      source, key);
  int e;
  const char *kind;
  switch (dsrc_open_file(path, max_bytes, fd, size, &e, &kind)) {
  case DSRC_OPEN_OK:
    return TORC_OK;
  case DSRC_OPEN_FOLDER:
    return dsrc_error(TORC_ERR_IO,
                      "%s: %s '%s' is a folder; key '%s' takes a file",
                      source, key, path, key);
  case DSRC_OPEN_NOT_REGULAR:
    return dsrc_error(TORC_ERR_IO,
                      "%s: %s file '%s' is %s, not a regular file; key '%s' "
                      "takes a regular file (a device or pipe has no size "
                      "and could be read without end)",
                      source, key, path, kind, key);
  case DSRC_OPEN_TOO_LARGE:
    return dsrc_error(TORC_ERR_IO,
                      "%s: %s file '%s' is %" PRIu64 " bytes, over the limit "
                      "of %" PRIu64 " bytes (key '%s'); if the file is meant "
                      "to be this large, raise %s (e.g. %s = %" PRIu64 "M)",
                      source, key, path, *size, max_bytes, limit_key,
                      limit_key, limit_key, (*size >> 20) + 1);
  default:
    break;
  }
  if (e == ENOENT || e == ENOTDIR)
    return dsrc_error(TORC_ERR_IO,
                      "%s: %s file '%s' does not exist; check the path "
                      "(key '%s')",
                      source, key, path, key);
  if (e == EACCES || e == EPERM)
    return dsrc_error(TORC_ERR_IO,
                      "%s: %s file '%s' is not readable (permission "
                      "denied); make it readable (chmod u+r) or run as its "
                      "owner",
                      source, key, path);
  return dsrc_error(TORC_ERR_IO, "%s: cannot open %s file '%s': %s", source,
                    key, path, strerror(e));
}

int dsrc_read_all(int fd, uint64_t size, char **data) {
  *data = NULL;
  if (size > SIZE_MAX - 1)
    return ENOMEM;
  char *buf = malloc((size_t)size + 1);
  if (buf == NULL)
    return ENOMEM;
  size_t n = 0;
  while (n < size) {
    ssize_t got = read(fd, buf + n, (size_t)size - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int e = errno;
      free(buf);
      return e;
    }
    if (got == 0)
      break;
    n += (size_t)got;
  }
  char extra;
  ssize_t more = n == size ? read(fd, &extra, 1) : 0;
  if (n != size || more > 0) {
    free(buf);
    return ESTALE;
  }
  buf[n] = '\0';
  *data = buf;
  return 0;
}

int dsrc_read_fd(const char *source, const char *key, const char *path,
                 int fd, uint64_t size, char **data) {
  int e = dsrc_read_all(fd, size, data);
  if (e == ENOMEM)
    return dsrc_oom(source, (size_t)(size + 1));
  if (e == ESTALE)
    return dsrc_error(TORC_ERR_IO,
                      "%s: %s file '%s' changed size while it was read "
                      "(%" PRIu64 " bytes when opened); read it again once "
                      "nothing writes to it",
                      source, key, path, size);
  if (e != 0)
    return dsrc_error(TORC_ERR_IO, "%s: reading %s file '%s' failed: %s",
                      source, key, path, strerror(e));
  return TORC_OK;
}

int dsrc_read_file(const char *source, const char *key, const char *path,
                   uint64_t max_bytes, const char *limit_key, char **data,
                   size_t *size) {
  *data = NULL;
  *size = 0;
  int fd;
  uint64_t sz;
  int st = dsrc_open_regular(source, key, path, max_bytes, limit_key, &fd,
                             &sz);
  if (st != TORC_OK)
    return st;
  st = dsrc_read_fd(source, key, path, fd, sz, data);
  close(fd);
  if (st == TORC_OK)
    *size = (size_t)sz;
  return st;
}

void dsrc_appendf(char *buf, size_t size, size_t *len, const char *fmt, ...) {
  if (size == 0 || *len >= size - 1)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, size - *len, fmt, ap);
  va_end(ap);
  if (n > 0)
    *len = *len + (size_t)n < size - 1 ? *len + (size_t)n : size - 1;
}

void dsrc_shape_str(char *buf, size_t size, const int64_t *shape, int ndim) {
  size_t len = 0;
  if (size == 0)
    return;
  buf[0] = '\0';
  len += (size_t)snprintf(buf + len, size - len, "[");
  for (int i = 0; i < ndim && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%" PRId64,
                            i ? ", " : "", shape[i]);
  if (len < size)
    snprintf(buf + len, size - len, "]");
}

const char *dsrc_dtype_str(torc_dtype dt) {
  switch (dt) {
  case TORC_F32: return "f32";
  case TORC_F64: return "f64";
  case TORC_F16: return "f16";
  case TORC_BF16: return "bf16";
  case TORC_I32: return "i32";
  case TORC_I64: return "i64";
  case TORC_U8: return "u8";
  case TORC_BOOL: return "bool";
  default: return "?";
  }
}

int dsrc_tensor(const void *data, const int64_t *shape, int ndim,
                torc_dtype dtype, torc_tensor **out) {
  *out = dsrc_api->from_host(data, shape, ndim, dtype, TORC_CPU);
  return *out ? TORC_OK : (int)dsrc_api->last_status();
}

int dsrc_class_target(int64_t cls, torc_tensor **out) {
  return dsrc_tensor(&cls, NULL, 0, TORC_I64, out);
}

char *dsrc_strndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

/* ---- the plugin ---- */

static int data_init(const torc_host *host, torc_plugin *self) {
  if (!TORC_HAS_SLOT(host, torc_host, register_data_source) ||
      host->register_data_source == NULL || host->api == NULL ||
      !TORC_API_HAS(host->api, from_host))
    return host->set_error(TORC_ERR_ABI,
                           "data: this torc (ABI %u.%u) cannot take data "
                           "sources from plugins; it needs ABI 1.2 or newer: "
                           "upgrade torc",
                           (unsigned)host->abi_major,
                           (unsigned)host->abi_minor);
  dsrc_host = host;
  dsrc_api = host->api;
  const torc_data_source_type *types[] = {
      &dsrc_idx_type, &dsrc_csv_type, &dsrc_npy_type,
      &dsrc_image_folder_type, &dsrc_synthetic_type, &dsrc_text_type};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    int st = host->register_data_source(self, types[i]);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}

static const torc_plugin_info data_info = {
    .struct_size = sizeof(torc_plugin_info),
    .abi_major = TORC_ABI_MAJOR,
    .abi_minor = TORC_ABI_MINOR,
    .name = "data",
    .version = "0.1.0",
    .description = "data sources: idx (MNIST, gzip or raw), csv, npy, "
                   "image_folder (PNG, JPEG), synthetic, text",
    .provides = TORC_PROVIDES_DATA,
    .flags = 0,
    .keys = NULL,
    .init = data_init,
    .fini = NULL,
};

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void);

TORC_PLUGIN_EXPORT const torc_plugin_info *torc_plugin_entry(void) {
  return &data_info;
}
