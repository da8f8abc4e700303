/* plugins/data/data_internal.h — what the data plugin's sources share: the
 * host and api tables, key lookup and parsing, file opening with errors a
 * user can act on, and making the sample tensors. Internal to the plugin;
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

/* Opens `path` (the value of key `key`) for reading in binary mode. On
 * failure: TORC_ERR_IO with a message saying what is wrong (missing,
 * unreadable, a folder) and which key to fix. */
int dsrc_fopen(const char *source, const char *key, const char *path,
               FILE **out);

/* Reads the whole file into a malloc'd buffer (one extra NUL byte after
 * *size bytes, so text parsers may treat it as a string). */
int dsrc_read_file(const char *source, const char *key, const char *path,
                   char **data, size_t *size);

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

/* Identifies the file by its signature and reads its header only: format
 * (DSRC_IMG_*), width and height. Returns 0, or -1 with the reason (one
 * phrase, e.g. "PNG: IHDR: CRC error") in why. Thread-safe. */
int dsrc_image_probe(const char *path, int *format, uint32_t *w, uint32_t *h,
                     char *why, size_t why_size);

/* Decodes the whole image to a malloc'd u8 [h, w, channels] (channels 3:
 * gray is replicated, alpha dropped; 1: ITU-R 601 luma). Returns 0, or -1
 * with the reason in why (corrupt or truncated data included).
 * Thread-safe. */
int dsrc_image_decode(const char *path, int channels, uint8_t **pixels,
                      uint32_t *w, uint32_t *h, char *why, size_t why_size);

#endif /* TORC_DATA_PLUGIN_INTERNAL_H */
