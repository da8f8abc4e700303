/* torc/safetensors.h — reading and writing safetensors files, the format
 * PyTorch users exchange weights in (huggingface.co/docs/safetensors): an
 * 8-byte little-endian header length N, N bytes of JSON describing each
 * tensor (dtype, shape, data_offsets) plus an optional "__metadata__" map
 * of strings, then the raw little-endian data.
 *
 * Reading maps the file read-only and validates the whole header at open,
 * so a handle that opened is never half-loaded; tensors are copied out of
 * the mapping onto the device asked for. Writing is atomic: a temporary
 * file in the destination's folder, fsync, rename, fsync of the folder.
 */
#ifndef TORC_SAFETENSORS_H
#define TORC_SAFETENSORS_H

#include <stdint.h>

#include "torc/device.h"
#include "torc/dtype.h"
#include "torc/error.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* An open safetensors file: its validated header and a read-only mapping of
 * its bytes. Opaque; one handle may be read from several threads at once
 * (nothing in it changes after open). */
typedef struct torc_safetensors torc_safetensors;

/* Opens and validates `path`. The whole header is checked before the
 * handle is returned: the 8-byte length, the JSON (jansson's line and
 * column are given when it is malformed, duplicate keys are rejected),
 * every tensor entry (dtype one of F32 F64 F16 BF16 I32 I64 U8 BOOL,
 * shape of at most TORC_MAX_DIMS non-negative integers, data_offsets
 * [begin, end] with end - begin = numel * element size, inside the data
 * area and overlapping no other tensor) and "__metadata__" (an object of
 * strings). Returns a handle the caller frees with torc_safetensors_close,
 * or NULL with TORC_ERR_IO (cannot open, read or map; file shorter than 8
 * bytes; header past the end of the file) or TORC_ERR_INVALID (anything
 * wrong in the header), the message naming the path and the offending key
 * and value. Files are read as little-endian (the format's byte order). */
TORC_API torc_safetensors *torc_safetensors_open(const char *path);

/* Unmaps the file and frees the handle. Tensors returned by
 * torc_safetensors_get stay valid (they are copies). NULL is ignored. */
TORC_API void torc_safetensors_close(torc_safetensors *st);

/* Number of tensors in the file (0 for NULL). */
TORC_API int torc_safetensors_count(const torc_safetensors *st);

/* Name of tensor i (0 <= i < count), in sorted (byte-wise) order, as the
 * Python library's keys() lists them. The string belongs to the handle
 * and lives until torc_safetensors_close. NULL (and TORC_ERR_RANGE) when i
 * is out of range; NULL (TORC_ERR_NULL) when st is NULL. */
TORC_API const char *torc_safetensors_name(const torc_safetensors *st, int i);

/* Describes tensor `name` without reading its data: its dtype, number of
 * dims and sizes (shape must hold TORC_MAX_DIMS entries). Any output
 * pointer may be NULL. Errors: TORC_ERR_NULL (st or name NULL),
 * TORC_ERR_INVALID (no such tensor; the message lists some names). */
TORC_API torc_status torc_safetensors_info(const torc_safetensors *st,
                                           const char *name, torc_dtype *dtype,
                                           int *ndim, int64_t *shape);

/* A new contiguous tensor on `dev` holding a copy of tensor `name` (a copy
 * even on cpu: it never aliases the mapping, so it outlives the handle).
 * Ownership as in tensor.h (a new reference, or the open scope's). NULL on
 * failure: TORC_ERR_NULL, TORC_ERR_INVALID (no such tensor, or a BOOL
 * tensor holding a byte other than 0 or 1), TORC_ERR_DEVICE, TORC_ERR_OOM. */
TORC_API torc_tensor *torc_safetensors_get(const torc_safetensors *st,
                                           const char *name, torc_device dev);

/* The value of metadata key `key` ("__metadata__" in the header), or NULL
 * when the file has no such key (no error is recorded then). The string
 * belongs to the handle and lives until torc_safetensors_close. */
TORC_API const char *torc_safetensors_metadata(const torc_safetensors *st,
                                               const char *key);

/* Number of metadata entries (0 for NULL or a file without metadata). */
TORC_API int torc_safetensors_metadata_count(const torc_safetensors *st);

/* Key of metadata entry i, in sorted order; NULL when i is out of range
 * (TORC_ERR_RANGE). Owned by the handle. */
TORC_API const char *torc_safetensors_metadata_key(const torc_safetensors *st,
                                                   int i);

/* Writes n tensors (names[i] -> tensors[i], on any device: they are read
 * with torc_to_host) and n_meta metadata strings (meta_keys[i] ->
 * meta_values[i]; both arrays may be NULL when n_meta is 0) to `path`, in
 * the layout of the Python library: tensors ordered by dtype size
 * (largest first, keeping every tensor aligned to its element size) then
 * by name, compact JSON with "__metadata__" first (omitted when n_meta is
 * 0), the header padded with spaces to a multiple of 8 bytes. Atomic: the
 * bytes go to a temporary file in path's folder, which is fsync'ed and
 * renamed over path, and the folder is fsync'ed; on any failure the
 * temporary file is removed and a previous file at path is left as it
 * was. The new file's mode is 0666 less the umask. Borrowed arguments;
 * nothing is retained. Errors: TORC_ERR_NULL (a NULL name, tensor, key or
 * value; a NULL tensor keeps the first error), TORC_ERR_INVALID (n or
 * n_meta negative, a name used twice, the name "__metadata__", a key used
 * twice), TORC_ERR_IO (cannot create, write, sync or rename; the message
 * names the file and the system's reason), and any error of torc_to_host. */
TORC_API torc_status torc_safetensors_save(const char *path,
                                           const char *const *names,
                                           const torc_tensor *const *tensors,
                                           int n, const char *const *meta_keys,
                                           const char *const *meta_values,
                                           int n_meta);

/* Removes from `dir` ("" or NULL: the current folder) the temporary files
 * that torc_safetensors_save calls killed before their rename left,
 * ".NAME.tmp.PID.N" (regular files only), whose NAME `want(NAME, user)`
 * accepts (returns non-zero for), last changed before this process
 * started, and whose process is gone: never a file of another pattern, nor
 * one a live process may still be writing. Each removal is logged at
 * TORC_LOG_INFO. For a program that saves into a folder of its own (the
 * trainer's checkpoints). A folder that cannot be read is left alone. */
TORC_API void torc_safetensors_remove_stale_temps(
    const char *dir, int (*want)(const char *name, void *user), void *user);

TORC_END_DECLS

#endif /* TORC_SAFETENSORS_H */
