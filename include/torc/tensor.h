/* torc/tensor.h — tensors: reference counting and scopes, creation, views,
 * moving between devices, reading values, random numbers, printing.
 *
 * Ownership: every function that returns a tensor returns a new reference
 * the caller owns (release it with torc_release), unless a scope is open
 * (torc_scope_begin), in which case the scope owns it. Functions taking a
 * tensor borrow it. Functions returning a tensor return NULL on failure
 * and set torc_last_error(); given a NULL tensor they return NULL and keep
 * the first error, so a chain of calls needs one check at its end.
 */
#ifndef TORC_TENSOR_H
#define TORC_TENSOR_H

#include <stdint.h>
#include <stdio.h>

#include "torc/device.h"
#include "torc/dtype.h"
#include "torc/error.h"

TORC_BEGIN_DECLS

/* Most dimensions a tensor may have. */
#define TORC_MAX_DIMS 8

/* A tensor: an n-dimensional strided view of a reference-counted storage. */
typedef struct torc_tensor torc_tensor;

/* A random-number generator: Philox 4x32-10 keyed by a seed, with a
 * counter offset that advances as numbers are drawn. The same seed gives
 * the same numbers on every backend and every thread count. */
typedef struct torc_generator torc_generator;

/* `TORC_SHAPE(2, 3)` expands to the two arguments `shape, ndim` that every
 * creation and view function takes: `torc_zeros(TORC_SHAPE(2, 3), ...)`. */
#define TORC_SHAPE(...)                                                        \
  (const int64_t[]){__VA_ARGS__},                                              \
      (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* "To the end of the dimension", for torc_slice's `end`. */
#define TORC_END INT64_MAX

/* ---- references and scopes ---- */

/* Adds a reference to `t` and returns `t`. NULL is returned unchanged. */
TORC_API torc_tensor *torc_retain(torc_tensor *t);

/* Drops a reference; the tensor (and its storage, when no view is left) is
 * freed at zero. NULL is ignored. Do not release a tensor owned by an open
 * scope unless you took it out with torc_scope_keep. */
TORC_API void torc_release(torc_tensor *t);

/* Opens a scope on this thread: until the matching torc_scope_end, every
 * tensor returned to this thread is owned by the scope. Scopes nest.
 * Returns a token to pass to torc_scope_end. A helper function that may be
 * called inside its caller's scope and wants its temporaries gone opens a
 * scope of its own rather than releasing them by hand. */
TORC_API int torc_scope_begin(void);

/* Closes the scope `token` (and any inner scope left open), releasing every
 * tensor it owns except those taken out with torc_scope_keep. */
TORC_API void torc_scope_end(int token);

/* Takes `t` out of the innermost scope that owns it: the caller now owns
 * the reference (or the enclosing scope does, if one is open). Returns t.
 * A tensor not owned by a scope is returned unchanged. */
TORC_API torc_tensor *torc_scope_keep(torc_tensor *t);

/* Number of live tensor objects in this process; for leak tests. */
TORC_API int64_t torc_tensor_live_count(void);

/* ---- properties ---- */

/* Number of dimensions (0 for a scalar). */
TORC_API int torc_ndim(const torc_tensor *t);

/* The sizes, `torc_ndim(t)` of them; valid while t lives. */
TORC_API const int64_t *torc_shape(const torc_tensor *t);

/* Size of dimension `dim`; negative dims count from the end. Returns -1 and
 * sets TORC_ERR_RANGE when dim is out of range. */
TORC_API int64_t torc_size(const torc_tensor *t, int dim);

/* The strides in elements, `torc_ndim(t)` of them. */
TORC_API const int64_t *torc_strides(const torc_tensor *t);

/* Offset of the first element in the storage, in elements. */
TORC_API int64_t torc_storage_offset(const torc_tensor *t);

/* Number of elements (1 for a scalar). */
TORC_API int64_t torc_numel(const torc_tensor *t);

/* Element type. */
TORC_API torc_dtype torc_dtype_of(const torc_tensor *t);

/* Device the storage lives on. */
TORC_API torc_device torc_device_of(const torc_tensor *t);

/* 1 if the elements are laid out densely in row-major order. */
TORC_API int torc_is_contiguous(const torc_tensor *t);

/* 1 if a and b view the same storage. */
TORC_API int torc_shares_storage(const torc_tensor *a, const torc_tensor *b);

/* The version counter, shared by every view of one storage (and by
 * detached tensors); incremented by each in-place write. */
TORC_API uint64_t torc_version(const torc_tensor *t);

/* Pointer to the first element, for tensors on the cpu device only (NULL
 * and TORC_ERR_DEVICE otherwise: use torc_to_host). Respect the strides. */
TORC_API void *torc_data(const torc_tensor *t);

/* ---- creation ---- */

/* Uninitialised tensor. Shapes take `shape, ndim`; see TORC_SHAPE. */
TORC_API torc_tensor *torc_empty(const int64_t *shape, int ndim,
                                 torc_dtype dtype, torc_device dev);

/* Tensor of zeros. */
TORC_API torc_tensor *torc_zeros(const int64_t *shape, int ndim,
                                 torc_dtype dtype, torc_device dev);

/* Tensor of ones. */
TORC_API torc_tensor *torc_ones(const int64_t *shape, int ndim,
                                torc_dtype dtype, torc_device dev);

/* Tensor filled with `value` (converted to dtype as a cast would). */
TORC_API torc_tensor *torc_full(const int64_t *shape, int ndim, double value,
                                torc_dtype dtype, torc_device dev);

/* Tensors shaped like `like`, on its device, with its dtype. */
TORC_API torc_tensor *torc_empty_like(const torc_tensor *like);
/* Zeros shaped like `like`. */
TORC_API torc_tensor *torc_zeros_like(const torc_tensor *like);
/* Ones shaped like `like`. */
TORC_API torc_tensor *torc_ones_like(const torc_tensor *like);

/* 1-D tensor start, start+step, ... < end (> end for a negative step), as
 * torch.arange. Errors: step 0, or a range with the wrong sign. */
TORC_API torc_tensor *torc_arange(double start, double end, double step,
                                  torc_dtype dtype, torc_device dev);

/* 1-D tensor of `steps` values evenly spaced from start to end inclusive,
 * as torch.linspace (steps >= 0). */
TORC_API torc_tensor *torc_linspace(double start, double end, int64_t steps,
                                    torc_dtype dtype, torc_device dev);

/* n x m identity matrix (m < 0 means m = n). */
TORC_API torc_tensor *torc_eye(int64_t n, int64_t m, torc_dtype dtype,
                               torc_device dev);

/* A contiguous tensor holding a copy of `data`, which holds
 * numel(shape) elements of `dtype` in row-major order. */
TORC_API torc_tensor *torc_from_host(const void *data, const int64_t *shape,
                                     int ndim, torc_dtype dtype,
                                     torc_device dev);

/* An uninitialised cpu tensor in pinned host memory from `for_dev`'s
 * plugin, so copies to that device can run asynchronously (as
 * pin_memory=True). On devices with no pinned memory it is plain memory. */
TORC_API torc_tensor *torc_empty_pinned(const int64_t *shape, int ndim,
                                        torc_dtype dtype, torc_device for_dev);

/* 1 if t's storage is pinned host memory. */
TORC_API int torc_is_pinned(const torc_tensor *t);

/* ---- random numbers (Philox 4x32-10; gen NULL = the default generator) ---- */

/* Seeds the default generator (and resets its offset). */
TORC_API void torc_manual_seed(uint64_t seed);

/* A new generator with its own seed. Free with torc_generator_free. */
TORC_API torc_generator *torc_generator_new(uint64_t seed);

/* Frees a generator. NULL is ignored. */
TORC_API void torc_generator_free(torc_generator *gen);

/* Reads a generator's state (seed, offset), e.g. for a checkpoint. */
TORC_API void torc_generator_get_state(const torc_generator *gen,
                                       uint64_t *seed, uint64_t *offset);

/* Restores a generator's state. */
TORC_API void torc_generator_set_state(torc_generator *gen, uint64_t seed,
                                       uint64_t offset);

/* Uniform samples in [0, 1) (floating dtypes). */
TORC_API torc_tensor *torc_rand(const int64_t *shape, int ndim,
                                torc_dtype dtype, torc_device dev,
                                torc_generator *gen);

/* Standard normal samples (floating dtypes; Box-Muller). */
TORC_API torc_tensor *torc_randn(const int64_t *shape, int ndim,
                                 torc_dtype dtype, torc_device dev,
                                 torc_generator *gen);

/* Integers uniform in [low, high) (any non-bool dtype; high > low). */
TORC_API torc_tensor *torc_randint(int64_t low, int64_t high,
                                   const int64_t *shape, int ndim,
                                   torc_dtype dtype, torc_device dev,
                                   torc_generator *gen);

/* 1 with probability p[i], else 0, in p's dtype and on p's device
 * (torch.bernoulli). p must be floating; values below 0 act as 0 and above
 * 1 as 1. */
TORC_API torc_tensor *torc_bernoulli(const torc_tensor *p, torc_generator *gen);

/* ---- views (share storage; no copy) ---- */

/* Same elements, new shape; one size may be -1 (inferred). A view when the
 * strides allow it, otherwise a copy (as torch.reshape). */
TORC_API torc_tensor *torc_reshape(const torc_tensor *t, const int64_t *shape,
                                   int ndim);

/* As torc_reshape, but an error when no view is possible (as torch.view);
 * the message says to call torc_contiguous or torc_reshape. */
TORC_API torc_tensor *torc_view(const torc_tensor *t, const int64_t *shape,
                                int ndim);

/* Reorders dimensions: output dim i is input dim dims[i]. */
TORC_API torc_tensor *torc_permute(const torc_tensor *t, const int *dims,
                                   int ndim);

/* Swaps two dimensions. */
TORC_API torc_tensor *torc_transpose(const torc_tensor *t, int dim0, int dim1);

/* Elements start .. start+length-1 of `dim` (errors when out of range). */
TORC_API torc_tensor *torc_narrow(const torc_tensor *t, int dim, int64_t start,
                                  int64_t length);

/* Elements start, start+step, ... < end of `dim`, as t[start:end:step].
 * Negative start/end count from the end; TORC_END means the end. Unlike
 * Python, a start or end outside [-size, size] is an error, not clamped:
 * such slices are almost always bugs. step must be >= 1. */
TORC_API torc_tensor *torc_slice(const torc_tensor *t, int dim, int64_t start,
                                 int64_t end, int64_t step);

/* Index `index` of `dim`, removing that dim (as t[..., index, ...]). */
TORC_API torc_tensor *torc_select(const torc_tensor *t, int dim, int64_t index);

/* Broadcasts size-1 dims (and new leading dims) to `shape`; -1 keeps a
 * size. The result has stride 0 on broadcast dims: do not write to it. */
TORC_API torc_tensor *torc_expand(const torc_tensor *t, const int64_t *shape,
                                  int ndim);

/* Removes dimension `dim` if its size is 1 (else returns a view of t). */
TORC_API torc_tensor *torc_squeeze(const torc_tensor *t, int dim);

/* Removes every size-1 dimension. */
TORC_API torc_tensor *torc_squeeze_all(const torc_tensor *t);

/* Inserts a size-1 dimension at `dim` (-1 appends). */
TORC_API torc_tensor *torc_unsqueeze(const torc_tensor *t, int dim);

/* Flattens dims start_dim..end_dim into one (a view when possible). */
TORC_API torc_tensor *torc_flatten(const torc_tensor *t, int start_dim,
                                   int end_dim);

/* A view sharing storage and version counter, cut from autograd. Writing
 * to it in place bumps the shared version, so a value autograd saved and
 * that changed is caught at backward, not silently wrong. */
TORC_API torc_tensor *torc_detach(const torc_tensor *t);

/* ---- copies ---- */

/* t itself (a new reference) if contiguous, else a contiguous copy. */
TORC_API torc_tensor *torc_contiguous(const torc_tensor *t);

/* A contiguous copy with its own storage. */
TORC_API torc_tensor *torc_clone(const torc_tensor *t);

/* t on device `dev`: t itself (new reference) if already there, else a
 * contiguous copy. Copies between accelerators go through the host. */
TORC_API torc_tensor *torc_to(const torc_tensor *t, torc_device dev);

/* t converted to `dtype` (t itself if it has that dtype). */
TORC_API torc_tensor *torc_to_dtype(const torc_tensor *t, torc_dtype dtype);

/* Copies src into dst in place (broadcasting src to dst's shape, casting
 * to dst's dtype). dst and src must be on the same device. */
TORC_API torc_status torc_copy_(torc_tensor *dst, const torc_tensor *src);

/* Sets every element of t to value. */
TORC_API torc_status torc_fill_(torc_tensor *t, double value);

/* Sets every element of t to zero. */
TORC_API torc_status torc_zero_(torc_tensor *t);

/* Copies the elements of t, in row-major order and t's dtype, to host
 * memory `dst` of `nbytes` bytes (which must equal numel * element size).
 * Waits for the device. */
TORC_API torc_status torc_to_host(const torc_tensor *t, void *dst,
                                  size_t nbytes);

/* The value of a one-element tensor as a double. Errors: more than one
 * element (the message gives the shape). */
TORC_API torc_status torc_item(const torc_tensor *t, double *out);

/* The value of a one-element integer or bool tensor, exactly. */
TORC_API torc_status torc_item_i64(const torc_tensor *t, int64_t *out);

/* ---- printing ---- */

/* Writes t as PyTorch prints it ("tensor([[1.0000, 2.5000], ...])"), with
 * dtype and device suffixes, and "..." summaries beyond 1000 elements. */
TORC_API torc_status torc_fprint(FILE *f, const torc_tensor *t);

/* torc_fprint to stdout, followed by a newline. */
TORC_API torc_status torc_print(const torc_tensor *t);

/* The text torc_fprint writes, as a malloc'd string the caller frees with
 * free(). NULL on failure. */
TORC_API char *torc_to_string(const torc_tensor *t);

/* Short description, e.g. "f32[2, 3] on sim:0", into buf; returns buf. */
TORC_API char *torc_describe(const torc_tensor *t, char *buf, size_t size);

TORC_END_DECLS

#endif /* TORC_TENSOR_H */
