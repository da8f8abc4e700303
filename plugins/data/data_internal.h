/* plugins/data/data_internal.h — what the data plugin's sources share: the
 * host and api tables, key lookup and parsing, file opening and reading
 * (regular files only, within a size limit) with errors a user can act on,
 * and making the sample tensors. Internal to the plugin;
 * every symbol is hidden (the plugin exports only torc_plugin_entry).
 */
#ifndef TORC_DATA_PLUGIN_INTERNAL_H
#define TORC_DATA_PLUGIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "torc/data.h"
#include "torc/plugin.h"
#include "torc/plugin_api.h"

/* Set by the plugin's init; valid until the plugin is unloaded. */
extern const torc_host *dsrc_host;
extern const torc_api *dsrc_api;

/* The source types (one per file). */
extern const torc_data_source_type dsrc_idx_type;
extern const torc_data_source_type dsrc_csv_type;
extern const torc_data_source_type dsrc_npy_type;
extern const torc_data_source_type dsrc_image_folder_type;
extern const torc_data_source_type dsrc_synthetic_type;
extern const torc_data_source_type dsrc_text_type;

/* Records an error for the calling thread (host->set_error); returns st. */
int dsrc_error(int status, const char *fmt, ...) TORC_PRINTF(2, 3);

/* Logs a line at `level` (TORC_LOG_*). */
void dsrc_log(int level, const char *fmt, ...) TORC_PRINTF(2, 3);

/* TORC_ERR_OOM naming the source and the bytes asked for. */
int dsrc_oom(const char *source, size_t nbytes);

/* The value of `key` among the n pairs (the core passes every key, with
 * defaults filled in), or NULL. */
const char *dsrc_value(const char *const *keys, const char *const *values,
                       int n, const char *key);

/* Parses an integer in [min, max] from key `key` of source `source`;
 * TORC_ERR_INVALID naming both and the accepted range otherwise. */
int dsrc_parse_int(const char *source, const char *key, const char *text,
                   int64_t min, int64_t max, int64_t *out);

/* Parses yes|no (also true/false, 1/0, on/off) into *out. */
int dsrc_parse_bool(const char *source, const char *key, const char *text,
                    int *out);

/* The default limits (the defaults of each source's limit keys; see
 * docs/data-limits.md): a file larger than its limit is refused before it
 * is read, so a wrong path (a device, a huge file) cannot exhaust memory. */
#define DSRC_CSV_MAX_BYTES "1G"   /* csv: the text file */
#define DSRC_NPY_MAX_BYTES "8G"   /* npy: each .npy file */
#define DSRC_IDX_MAX_BYTES "4G"   /* idx: each file, and its decoded data */
#define DSRC_IMG_MAX_BYTES "256M" /* image_folder: each image file */
#define DSRC_IMG_MAX_PIXELS "64M" /* image_folder: width * height */

/* Parses a size: a positive integer with an optional K, M, G or T suffix
 * (powers of 1024), e.g. "4G"; TORC_ERR_INVALID naming source and key
 * otherwise. */
int dsrc_parse_size(const char *source, const char *key, const char *text,
                    uint64_t *out);

/* The size limit in key `key` (every source's limits are keys with
 * defaults; `fallback` when the key is absent). */
int dsrc_limit(const char *source, const char *key, const char *const *keys,
               const char *const *values, int n, const char *fallback,
               uint64_t *out);

/* What dsrc_open_file found. */
enum {
  DSRC_OPEN_OK = 0,
  DSRC_OPEN_ERRNO,       /* open or fstat failed: *err is the errno */
  DSRC_OPEN_FOLDER,      /* a folder */
  DSRC_OPEN_NOT_REGULAR, /* a device, FIFO or socket: *kind says which */
  DSRC_OPEN_TOO_LARGE    /* a regular file of *size > max_bytes bytes */
};

/* The one way the plugin opens a data file: open (never blocking on a
 * FIFO), fstat, refuse anything but a regular file, and refuse one over
 * max_bytes. DSRC_OPEN_OK with *fd (the caller closes it) and *size, or
 * the reason (*kind: "a character device", "a FIFO (named pipe)", ...).
 * Sets no error; dsrc_open_regular is the same with the message. */
int dsrc_open_file(const char *path, uint64_t max_bytes, int *fd,
                   uint64_t *size, int *err, const char **kind);

/* Opens `path` (the value of key `key`) for reading: *fd on a regular file
 * of *size bytes, at most max_bytes. On failure TORC_ERR_INVALID (empty
 * path) or TORC_ERR_IO with a message saying what is wrong and how to fix
 * it: missing, unreadable, a folder, not a regular file (a device, FIFO or
 * socket, which could be read without end), or over the limit (naming the
 * size, the limit and limit_key, the key that raises it). Never blocks on
 * a FIFO. */
int dsrc_open_regular(const char *source, const char *key, const char *path,
                      uint64_t max_bytes, const char *limit_key, int *fd,
                      uint64_t *size);

/* Reads exactly `size` bytes of fd into a new malloc'd buffer with one NUL
 * byte after them; sets no error: returns 0, ENOMEM, ESTALE (the file is
 * shorter or longer than `size`: it changed since it was opened) or the
 * errno of a failed read. */
int dsrc_read_all(int fd, uint64_t size, char **data);

/* Reads exactly `size` bytes of fd (from dsrc_open_regular) into a new
 * malloc'd buffer with one NUL byte after them; TORC_ERR_IO when the file
 * is shorter or longer than that (it changed since it was opened). */
int dsrc_read_fd(const char *source, const char *key, const char *path,
                 int fd, uint64_t size, char **data);

/* dsrc_open_regular, then the whole file into a malloc'd buffer (one extra
 * NUL byte after *size bytes, so text parsers may treat it as a string). */
int dsrc_read_file(const char *source, const char *key, const char *path,
                   uint64_t max_bytes, const char *limit_key, char **data,
                   size_t *size);

/* Appends printf-style text to buf (size bytes, *len of them used),
 * truncating at the end of buf; *len never exceeds size - 1. */
void dsrc_appendf(char *buf, size_t size, size_t *len, const char *fmt, ...)
    TORC_PRINTF(4, 5);

/* "[1, 28, 28]" into buf. */
void dsrc_shape_str(char *buf, size_t size, const int64_t *shape, int ndim);

/* "u8", "f32", ... */
const char *dsrc_dtype_str(torc_dtype dt);

/* A new cpu tensor holding a copy of data (api->from_host); returns TORC_OK
 * or the status of the error recorded by the core. */
int dsrc_tensor(const void *data, const int64_t *shape, int ndim,
                torc_dtype dtype, torc_tensor **out);

/* A new i64 0-dim class index tensor. */
int dsrc_class_target(int64_t cls, torc_tensor **out);

/* Copies s (n bytes) into a new NUL-terminated string; NULL when out of
 * memory. */
char *dsrc_strndup(const char *s, size_t n);

/* ---- images (image_decode.c) ---- */

enum { DSRC_IMG_PNG = 1, DSRC_IMG_JPEG = 2 };

/* What an image may cost: its file's size (key max_bytes) and its decoded
 * pixels, width * height (key max_pixels). The decoder's own working
 * memory is capped from max_pixels too (see image_decode.c). */
typedef struct dsrc_img_limits {
  uint64_t max_bytes;
  uint64_t max_pixels;
} dsrc_img_limits;

/* The most scans a progressive JPEG may have (each scan is a pass over the
 * whole coefficient buffer; libjpeg-turbo's tools suggest this bound). */
#define DSRC_JPEG_MAX_SCANS 1000

/* The results of the image functions: 0, or -1 when the file is corrupt,
 * truncated or not an image, or -2 when it is over a limit (the reason
 * then names the key that raises it). */
enum { DSRC_IMG_CORRUPT = -1, DSRC_IMG_TOO_LARGE = -2 };

/* Identifies the file by its signature and reads its header only: format
 * (DSRC_IMG_*), width and height, checked against `lim`. Returns 0 or
 * DSRC_IMG_CORRUPT / DSRC_IMG_TOO_LARGE with the reason (one phrase, e.g.
 * "PNG: IHDR: CRC error") in why. Thread-safe. */
int dsrc_image_probe(const char *path, const dsrc_img_limits *lim,
                     int *format, uint32_t *w, uint32_t *h, char *why,
                     size_t why_size);

/* Decodes the whole image to a malloc'd u8 [h, w, channels] (channels 3:
 * gray is replicated, alpha dropped; 1: ITU-R 601 luma). Returns 0 or
 * DSRC_IMG_CORRUPT / DSRC_IMG_TOO_LARGE with the reason in why; corrupt
 * or truncated data (anything libjpeg warns about, a bad PNG data stream)
 * is an error, never a partial image. Thread-safe. */
int dsrc_image_decode(const char *path, int channels,
                      const dsrc_img_limits *lim, uint8_t **pixels,
                      uint32_t *w, uint32_t *h, char *why, size_t why_size);

#endif /* TORC_DATA_PLUGIN_INTERNAL_H */
