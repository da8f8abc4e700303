/* torc/indexing.h — indexing and shape-building ops, as in PyTorch:
 * gather/scatter/index_select/index_add, one_hot, cat/stack/split/chunk,
 * pad, interpolate and topk. Each is differentiable (except one_hot and
 * topk's indices) and runs on the device of its inputs. Ownership and
 * errors as in ops.h: a new reference is returned (or owned by the open
 * scope), NULL on failure with torc_last_error() set.
 *
 * Index tensors are integer tensors (i64 or i32); an index outside
 * [0, size) of its dim is an error naming the index value, the dim and its
 * size (on an asynchronous device such as sim it is reported by the kernel
 * at the next synchronize, e.g. torc_to_host). The tensor indexed into
 * (and the input of split, chunk, topk) needs at least one dim: a 0-D one
 * is an error saying to reshape it to [1].
 *
 * Kernel contracts (op name: what a backend's kernel receives; the core
 * checks shapes and dtypes, allocates outputs and passes the params of
 * torc/plugin.h; every dim is already normalised to 0..ndim-1):
 *  - gather (torc_index_params): in[0] x, in[1] index (same ndim as x,
 *    integer dtype), out[0] index's shape in x's dtype:
 *    out[i][j] = x[index[i][j]][j] for dim 0, likewise for other dims.
 *  - scatter (torc_index_params; reduce 0 replaces, 1 adds): out[0] is the
 *    target, holding x's values (a copy, or x itself for the in-place
 *    forms; any strides), written in place; in[0] index,
 *    in[1] src (out's dtype, each dim at least index's size):
 *    out[index[i][j]][j] (=|+=) src[i][j] for dim 0.
 *  - index_select (torc_index_params): in[0] x, in[1] a 1-D index, out[0]
 *    x's shape with dim's size replaced by the index's length.
 *  - index_add (torc_index_params): out[0] the target holding x's values,
 *    in[0] a 1-D index, in[1] src (out's dtype, already scaled by alpha,
 *    x's shape with dim's size = the index's length): out[index[i]] +=
 *    src[i] along dim.
 *  - pad (torc_pad_params): in[0] x, out[0] x's shape grown by before +
 *    after on each dim (negative amounts crop, constant mode only).
 *  - pad_backward (torc_pad_params): in[0] the gradient of pad's output,
 *    out[0] the gradient of its input: the kernel zeroes it and adds each
 *    output element's gradient to the element it was read from.
 *  - interpolate (torc_interp_params): in[0] x [N, C, H, W] (floating),
 *    out[0] [N, C, OH, OW].
 *  - interpolate_backward (torc_interp_params): in[0] the gradient
 *    [N, C, OH, OW], out[0] the input's gradient [N, C, H, W], zeroed and
 *    accumulated by the kernel.
 *  - topk (torc_topk_params): in[0] x, out[0] values (x's dtype) and out[1]
 *    indices (i64), both x's shape with dim's size k; contiguous outputs.
 */
#ifndef TORC_INDEXING_H
#define TORC_INDEXING_H

#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* Padding modes of torc_pad (as torch.nn.functional.pad's). */
typedef enum torc_pad_mode {
  TORC_PAD_CONSTANT = 0,  /* fill with `value`; negative pads crop */
  TORC_PAD_REFLECT = 1,   /* mirror without repeating the edge: pad < size */
  TORC_PAD_REPLICATE = 2  /* repeat the edge element */
} torc_pad_mode;

/* Interpolation modes of torc_interpolate. */
typedef enum torc_interp_mode {
  TORC_INTERP_NEAREST = 0, /* PyTorch's "nearest": src = floor(dst * in/out) */
  TORC_INTERP_BILINEAR = 1
} torc_interp_mode;

/* ---- gather / scatter ---- */

/* out[i][j] = x[index[i][j]][j] (dim 0; likewise for other dims), as
 * torch.gather. index has x's ndim and, on every dim but `dim`, a size no
 * larger than x's; the result has index's shape and x's dtype.
 * Differentiable with respect to x. */
TORC_API torc_tensor *torc_gather(const torc_tensor *x, int dim,
                                  const torc_tensor *index);

/* A copy of x with out[index[i][j]][j] = src[i][j] (dim 0), as
 * torch.scatter (out of place). src has x's dtype and each of its dims is
 * at least index's; index's dims other than `dim` are at most x's. When an
 * index repeats, which write wins is unspecified (as in PyTorch).
 * Differentiable with respect to x and src. */
TORC_API torc_tensor *torc_scatter(const torc_tensor *x, int dim,
                                   const torc_tensor *index,
                                   const torc_tensor *src);

/* As torc_scatter but adding: out[index[i][j]][j] += src[i][j]. Repeated
 * indices accumulate. Differentiable with respect to x and src. */
TORC_API torc_tensor *torc_scatter_add(const torc_tensor *x, int dim,
                                       const torc_tensor *index,
                                       const torc_tensor *src);

/* In place: x.scatter_(dim, index, src) and x.scatter_add_(...), with
 * torc_scatter's rules. Bump x's version; as every in-place op, refused on
 * a leaf that requires grad (while grad mode is on) and on an expanded
 * (stride-0) target. */
TORC_API torc_status torc_scatter_(torc_tensor *x, int dim,
                                   const torc_tensor *index,
                                   const torc_tensor *src);
/* In place: x.scatter_add_(dim, index, src), as described above. */
TORC_API torc_status torc_scatter_add_(torc_tensor *x, int dim,
                                       const torc_tensor *index,
                                       const torc_tensor *src);

/* ---- index_select / index_add ---- */

/* The slices x[..., index[i], ...] of `dim` stacked along `dim`, as
 * torch.index_select. index is 1-D (or 0-D: one index). Differentiable
 * with respect to x. */
TORC_API torc_tensor *torc_index_select(const torc_tensor *x, int dim,
                                        const torc_tensor *index);

/* A copy of x where slice index[i] of `dim` gets alpha * (slice i of src)
 * added, as torch.index_add (out of place). src has x's shape except on
 * `dim`, where its size is index's length; src has x's dtype. Repeated
 * indices accumulate. Differentiable with respect to x and src. */
TORC_API torc_tensor *torc_index_add(const torc_tensor *x, int dim,
                                     const torc_tensor *index,
                                     const torc_tensor *src, double alpha);

/* In place: x.index_add_(dim, index, src, alpha=alpha); rules as
 * torc_index_add and torc_scatter_. */
TORC_API torc_status torc_index_add_(torc_tensor *x, int dim,
                                     const torc_tensor *index,
                                     const torc_tensor *src, double alpha);

/* ---- one_hot ---- */

/* An i64 tensor of indices' shape plus a last dim of num_classes, with 1
 * at each index and 0 elsewhere, as torch.nn.functional.one_hot.
 * num_classes -1 means max(indices) + 1. Indices must lie in
 * [0, num_classes). Not differentiable. */
TORC_API torc_tensor *torc_one_hot(const torc_tensor *indices,
                                   int64_t num_classes);

/* ---- cat / stack / split / chunk ---- */

/* The n tensors joined along `dim`, as torch.cat: all have the same ndim
 * and sizes except on `dim`; the result dtype is their promoted type (as
 * torch.result_type over the inputs); all must be on one device. As in
 * PyTorch, 1-D tensors of size 0 are skipped whatever the other shapes.
 * Differentiable with respect to every input. */
TORC_API torc_tensor *torc_cat(const torc_tensor *const *ts, int n, int dim);

/* The n tensors (all of one shape) joined along a new dim `dim` (0 ..
 * ndim; negative counts from the end of the result), as torch.stack. */
TORC_API torc_tensor *torc_stack(const torc_tensor *const *ts, int n,
                                 int dim);

/* Splits x along `dim` into views of split_size elements (the last may be
 * smaller), as torch.split. Writes up to `max` new references into out
 * (out may be NULL with max 0 to ask for the count) and returns the number
 * of pieces, or -1 on error (split_size < 1, or more pieces than `max`:
 * nothing is written then). A dim of size 0 gives one empty piece. */
TORC_API int torc_split(const torc_tensor *x, int64_t split_size, int dim,
                        torc_tensor **out, int max);

/* Splits x along `dim` into at most `chunks` views of ceil(size / chunks)
 * elements each, as torch.chunk (which may give fewer than `chunks`).
 * Output and return value as torc_split. */
TORC_API int torc_chunk(const torc_tensor *x, int chunks, int dim,
                        torc_tensor **out, int max);

/* ---- pad / interpolate ---- */

/* Pads x as torch.nn.functional.pad: pads holds n_pads (even) amounts in
 * PyTorch's order, last dim first: {last_before, last_after,
 * second_last_before, ...}, covering n_pads / 2 <= ndim trailing dims.
 * Constant mode fills with `value` (cast to x's dtype) and accepts
 * negative amounts (cropping); reflect needs each amount < the dim's size;
 * replicate needs a non-empty dim. Differentiable with respect to x. */
TORC_API torc_tensor *torc_pad(const torc_tensor *x, const int64_t *pads,
                               int n_pads, torc_pad_mode mode, double value);

/* Resizes the last two dims of a floating x [N, C, H, W] to
 * [N, C, out_h, out_w], as torch.nn.functional.interpolate with `size`:
 * nearest takes src = floor(dst * H / out_h); bilinear follows
 * align_corners (1: the corner pixels' centres line up; 0: the corners'
 * edges do, with source coordinates clamped at 0). align_corners must be 0
 * for nearest. Differentiable with respect to x. */
TORC_API torc_tensor *torc_interpolate(const torc_tensor *x, int64_t out_h,
                                       int64_t out_w, torc_interp_mode mode,
                                       int align_corners);

/* ---- topk ---- */

/* The k largest (or smallest, when !largest) elements of x along `dim`,
 * as torch.topk: *values (x's dtype) and *indices (i64), both of x's shape
 * with dim's size k, are set to new references (or scope-owned tensors);
 * either pointer may be NULL when not wanted. NaN counts as larger than
 * every number. Order: by value (descending for largest) when `sorted`;
 * torc always sorts, so `sorted` 0 gives the same result. Ties are broken
 * by the lower index first — PyTorch leaves the order of equal elements
 * unspecified (its CPU topk gives indices [2, 4] for the two largest of
 * [1, 3, 3, 2, 3, 1]; torc gives [1, 2]). 0 <= k <= the dim's size.
 * values is differentiable with respect to x. */
TORC_API torc_status torc_topk(const torc_tensor *x, int64_t k, int dim,
                               int largest, int sorted, torc_tensor **values,
                               torc_tensor **indices);

TORC_END_DECLS

#endif /* TORC_INDEXING_H */
