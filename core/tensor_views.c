/* core/tensor_views.c — views of a tensor that share its storage (no
 * copies): reshape/view, permute/transpose, narrow/slice/select, expand,
 * squeeze/unsqueeze, flatten and detach; the view ops are recorded for
 * autograd.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tensor_internal.h"
#include "torc/checked.h"

/* ---- views ---- */

/* PyTorch's computeStride: strides for viewing (shape, strides) as
 * new_shape without copying, or 0 if impossible. */
static int view_strides(const int64_t *shape, const int64_t *strides, int ndim,
                        const int64_t *nshape, int nndim, int64_t *nstrides) {
  if (torc__numel(shape, ndim) == 0 || ndim == 0) {
    torc__contiguous_strides(nshape, nndim, nstrides);
    return 1;
  }
  int view_d = nndim - 1;
  int64_t chunk_base = strides[ndim - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    tensor_numel *= shape[d];
    if (d == 0 ||
        (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || nshape[view_d] == 1)) {
        nstrides[view_d] = view_numel * chunk_base;
        view_numel *= nshape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel)
        return 0;
      if (d > 0) {
        chunk_base = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

/* Resolves a -1 in shape against numel; errors name fn and both shapes. */
static torc_status infer_shape(const torc_tensor *t, const int64_t *shape,
                               int ndim, const char *fn, int64_t *out) {
  if (ndim < 0 || ndim > TORC_MAX_DIMS || (ndim > 0 && shape == NULL))
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: %d dimensions requested; torc supports 0 to %d",
                          fn, ndim, TORC_MAX_DIMS);
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == -1) {
      if (infer >= 0)
        return torc_set_error(TORC_ERR_SHAPE,
                              "%s: only one dimension can be -1 (dims %d and "
                              "%d are)",
                              fn, infer, i);
      infer = i;
    } else if (shape[i] < 0) {
      return torc_set_error(TORC_ERR_SHAPE, "%s: invalid size %lld at dim %d",
                            fn, (long long)shape[i], i);
    }
    out[i] = shape[i];
  }
  char a[128], b[128];
  /* The known dims' product, refused when it overflows (also past a zero
   * dim, so that no later stride computation can overflow). */
  int64_t rest[TORC_MAX_DIMS];
  int n_rest = 0;
  for (int i = 0; i < ndim; i++)
    if (i != infer)
      rest[n_rest++] = shape[i];
  uint64_t prod;
  if (torc_checked_numel(rest, n_rest, INT64_MAX, &prod))
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: shape %s has more elements than a tensor can "
                          "hold (over 2^63); pass the shape you meant",
                          fn, torc__shape_str(shape, ndim, a, sizeof a));
  known = (int64_t)prod;
  int64_t numel = torc__numel(t->shape, t->ndim);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return torc_set_error(
          TORC_ERR_SHAPE, "%s: shape %s is invalid for a tensor of shape %s "
                          "(%lld elements)",
          fn, torc__shape_str(shape, ndim, a, sizeof a),
          torc__shape_str(t->shape, t->ndim, b, sizeof b), (long long)numel);
    out[infer] = numel / known;
  } else if (known != numel) {
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: shape %s (%lld elements) is invalid for a tensor "
                          "of shape %s (%lld elements)",
                          fn, torc__shape_str(shape, ndim, a, sizeof a),
                          (long long)known,
                          torc__shape_str(t->shape, t->ndim, b, sizeof b),
                          (long long)numel);
  }
  return TORC_OK;
}

torc_tensor *torc__reshape(const torc_tensor *t, const int64_t *shape, int ndim,
                           int allow_copy) {
  const char *fn = allow_copy ? "torc_reshape" : "torc_view";
  int64_t nshape[TORC_MAX_DIMS], nstrides[TORC_MAX_DIMS];
  if (infer_shape(t, shape, ndim, fn, nshape))
    return NULL;
  if (view_strides(t->shape, t->strides, t->ndim, nshape, ndim, nstrides))
    return torc__view_of(t, nshape, nstrides, ndim, t->offset);
  if (!allow_copy) {
    char a[128], b[128];
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_view: a tensor of shape %s with these strides cannot "
                   "be viewed as %s without a copy; call torc_contiguous() "
                   "first or use torc_reshape()",
                   torc__shape_str(t->shape, t->ndim, a, sizeof a),
                   torc__shape_str(nshape, ndim, b, sizeof b));
    return NULL;
  }
  torc_tensor *c = torc__contiguous(t);
  if (c == NULL)
    return NULL;
  int64_t cs[TORC_MAX_DIMS];
  torc__contiguous_strides(nshape, ndim, cs);
  torc_tensor *v = torc__view_of(c, nshape, cs, ndim, c->offset);
  if (v)
    v->is_view = 0; /* c was a private copy */
  torc_release(c);
  return v;
}

torc_tensor *torc_reshape(const torc_tensor *t, const int64_t *shape, int ndim) {
  CHECK_IN(t, "torc_reshape");
  return torc__ret(torc__record_view(torc__reshape(t, shape, ndim, 1), t,
                                     TORC__VIEW_RESHAPE, NULL, 0));
}

torc_tensor *torc_view(const torc_tensor *t, const int64_t *shape, int ndim) {
  CHECK_IN(t, "torc_view");
  return torc__ret(torc__record_view(torc__reshape(t, shape, ndim, 0), t,
                                     TORC__VIEW_RESHAPE, NULL, 0));
}

torc_tensor *torc_permute(const torc_tensor *t, const int *dims, int ndim) {
  CHECK_IN(t, "torc_permute");
  if (ndim != t->ndim || (ndim > 0 && dims == NULL)) {
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_permute: %d dims given for a %d-dimensional tensor; "
                   "give each dim exactly once",
                   ndim, t->ndim);
    return NULL;
  }
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  int seen[TORC_MAX_DIMS] = {0};
  int64_t pd[TORC_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int d = 0;
    if (torc__wrap_dim(dims[i], ndim, "torc_permute", &d))
      return NULL;
    if (seen[d]++) {
      torc_set_error(TORC_ERR_SHAPE,
                     "torc_permute: dim %d appears twice; give each dim "
                     "exactly once",
                     d);
      return NULL;
    }
    shape[i] = t->shape[d];
    strides[i] = t->strides[d];
    pd[i] = d;
  }
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, strides, ndim, t->offset), t,
      TORC__VIEW_PERMUTE, pd, ndim));
}

torc_tensor *torc_transpose(const torc_tensor *t, int dim0, int dim1) {
  CHECK_IN(t, "torc_transpose");
  int a = 0, b = 0;
  if (torc__wrap_dim(dim0, t->ndim, "torc_transpose", &a) ||
      torc__wrap_dim(dim1, t->ndim, "torc_transpose", &b))
    return NULL;
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(strides, t->strides, sizeof strides);
  if (t->ndim > 0) {
    shape[a] = t->shape[b], shape[b] = t->shape[a];
    strides[a] = t->strides[b], strides[b] = t->strides[a];
  }
  int64_t p[2] = {a, b};
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, strides, t->ndim, t->offset), t,
      TORC__VIEW_TRANSPOSE, p, 2));
}

torc_tensor *torc_narrow(const torc_tensor *t, int dim, int64_t start,
                         int64_t length) {
  CHECK_IN(t, "torc_narrow");
  int d = 0;
  if (t->ndim == 0) {
    torc_set_error(TORC_ERR_RANGE, "torc_narrow: cannot narrow a scalar");
    return NULL;
  }
  if (torc__wrap_dim(dim, t->ndim, "torc_narrow", &d))
    return NULL;
  int64_t size = t->shape[d];
  if (start < 0)
    start += size;
  if (start < 0 || length < 0 || start > size || length > size - start) {
    char b[128];
    torc_set_error(TORC_ERR_RANGE,
                   "torc_narrow: start %lld, length %lld is out of range for "
                   "dim %d of size %lld (shape %s)",
                   (long long)start, (long long)length, d, (long long)size,
                   torc__shape_str(t->shape, t->ndim, b, sizeof b));
    return NULL;
  }
  int64_t shape[TORC_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[d] = length;
  int64_t p[4] = {d, start, start + length, 1};
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, t->strides, t->ndim,
                    t->offset + start * t->strides[d]),
      t, TORC__VIEW_SLICE, p, 4));
}

torc_tensor *torc_slice(const torc_tensor *t, int dim, int64_t start,
                        int64_t end, int64_t step) {
  CHECK_IN(t, "torc_slice");
  int d = 0;
  if (t->ndim == 0) {
    torc_set_error(TORC_ERR_RANGE, "torc_slice: cannot slice a scalar");
    return NULL;
  }
  if (torc__wrap_dim(dim, t->ndim, "torc_slice", &d))
    return NULL;
  int64_t size = t->shape[d];
  char b[128];
  if (step < 1) {
    torc_set_error(TORC_ERR_RANGE,
                   "torc_slice: step %lld must be >= 1 (to reverse, there is "
                   "no negative step: use a flip)",
                   (long long)step);
    return NULL;
  }
  int64_t s = start, e = end;
  if (e == TORC_END)
    e = size;
  if (s < -size || s > size || e < -size || e > size) {
    torc_set_error(TORC_ERR_RANGE,
                   "torc_slice: [%lld:%lld] is out of range for dim %d of "
                   "size %lld (shape %s); indices must lie in [-%lld, %lld], "
                   "or use TORC_END for the end",
                   (long long)start, (long long)end, d, (long long)size,
                   torc__shape_str(t->shape, t->ndim, b, sizeof b),
                   (long long)size, (long long)size);
    return NULL;
  }
  if (s < 0)
    s += size;
  if (e < 0)
    e += size;
  int64_t len = e > s ? (e - s + step - 1) / step : 0;
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(strides, t->strides, sizeof strides);
  shape[d] = len;
  strides[d] = t->strides[d] * step;
  int64_t p[4] = {d, s, e, step};
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, strides, t->ndim,
                    t->offset + (len ? s * t->strides[d] : 0)),
      t, TORC__VIEW_SLICE, p, 4));
}

torc_tensor *torc_select(const torc_tensor *t, int dim, int64_t index) {
  CHECK_IN(t, "torc_select");
  int d = 0;
  if (t->ndim == 0) {
    torc_set_error(TORC_ERR_RANGE, "torc_select: cannot index a scalar");
    return NULL;
  }
  if (torc__wrap_dim(dim, t->ndim, "torc_select", &d))
    return NULL;
  int64_t size = t->shape[d];
  if (index < -size || index >= size) {
    char b[128];
    torc_set_error(TORC_ERR_RANGE,
                   "torc_select: index %lld is out of range for dim %d of "
                   "size %lld (shape %s)",
                   (long long)index, d, (long long)size,
                   torc__shape_str(t->shape, t->ndim, b, sizeof b));
    return NULL;
  }
  if (index < 0)
    index += size;
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != d) {
      shape[n] = t->shape[i];
      strides[n++] = t->strides[i];
    }
  int64_t p[2] = {d, index};
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, strides, n, t->offset + index * t->strides[d]),
      t, TORC__VIEW_SELECT, p, 2));
}

torc_tensor *torc__expand_or_self(const torc_tensor *t, const int64_t *shape,
                                  int ndim) {
  if (ndim == t->ndim &&
      memcmp(shape, t->shape, (size_t)ndim * sizeof *shape) == 0)
    return torc_retain((torc_tensor *)t);
  return torc__expand(t, shape, ndim);
}

torc_tensor *torc__expand(const torc_tensor *t, const int64_t *shape, int ndim) {
  char a[128], b[128];
  if (ndim < t->ndim || ndim > TORC_MAX_DIMS) {
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_expand: cannot expand shape %s to %s: the target "
                   "needs at least as many dims",
                   torc__shape_str(t->shape, t->ndim, a, sizeof a),
                   torc__shape_str(shape, ndim > TORC_MAX_DIMS ? 0 : ndim, b,
                                   sizeof b));
    return NULL;
  }
  int64_t nshape[TORC_MAX_DIMS], nstrides[TORC_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t want = shape[i];
    if (i < lead) {
      if (want < 0) {
        torc_set_error(TORC_ERR_SHAPE,
                       "torc_expand: -1 is not allowed for the new leading "
                       "dim %d",
                       i);
        return NULL;
      }
      nshape[i] = want;
      nstrides[i] = 0;
      continue;
    }
    int64_t have = t->shape[i - lead];
    if (want == -1)
      want = have;
    if (have == want) {
      nshape[i] = have;
      nstrides[i] = t->strides[i - lead];
    } else if (have == 1 && want >= 0) {
      nshape[i] = want;
      nstrides[i] = 0;
    } else {
      torc_set_error(TORC_ERR_SHAPE,
                     "torc_expand: cannot expand shape %s to %s: dim %d has "
                     "size %lld, which is not 1",
                     torc__shape_str(t->shape, t->ndim, a, sizeof a),
                     torc__shape_str(shape, ndim, b, sizeof b), i,
                     (long long)have);
      return NULL;
    }
  }
  return torc__view_of(t, nshape, nstrides, ndim, t->offset);
}

torc_tensor *torc_expand(const torc_tensor *t, const int64_t *shape, int ndim) {
  CHECK_IN(t, "torc_expand");
  return torc__ret(torc__record_view(torc__expand(t, shape, ndim), t,
                                     TORC__VIEW_EXPAND, NULL, 0));
}

torc_tensor *torc_squeeze(const torc_tensor *t, int dim) {
  CHECK_IN(t, "torc_squeeze");
  int d = 0;
  if (torc__wrap_dim(dim, t->ndim, "torc_squeeze", &d))
    return NULL;
  if (t->ndim == 0 || t->shape[d] != 1)
    return torc__ret(torc__record_view(
        torc__view_of(t, t->shape, t->strides, t->ndim, t->offset), t,
        TORC__VIEW_RESHAPE, NULL, 0));
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != d) {
      shape[n] = t->shape[i];
      strides[n++] = t->strides[i];
    }
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, strides, n, t->offset), t, TORC__VIEW_RESHAPE,
      NULL, 0));
}

torc_tensor *torc_squeeze_all(const torc_tensor *t) {
  CHECK_IN(t, "torc_squeeze_all");
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] != 1) {
      shape[n] = t->shape[i];
      strides[n++] = t->strides[i];
    }
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, strides, n, t->offset), t, TORC__VIEW_RESHAPE,
      NULL, 0));
}

torc_tensor *torc_unsqueeze(const torc_tensor *t, int dim) {
  CHECK_IN(t, "torc_unsqueeze");
  if (t->ndim >= TORC_MAX_DIMS) {
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_unsqueeze: the tensor already has %d dims, the most "
                   "torc supports",
                   t->ndim);
    return NULL;
  }
  int d = 0;
  if (torc__wrap_dim(dim, t->ndim + 1, "torc_unsqueeze", &d))
    return NULL;
  int64_t shape[TORC_MAX_DIMS], strides[TORC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i <= t->ndim; i++) {
    if (i == d) {
      shape[n] = 1;
      strides[n++] = (i < t->ndim) ? t->strides[i] * t->shape[i] : 1;
    }
    if (i < t->ndim) {
      shape[n] = t->shape[i];
      strides[n++] = t->strides[i];
    }
  }
  return torc__ret(torc__record_view(
      torc__view_of(t, shape, strides, n, t->offset), t, TORC__VIEW_RESHAPE,
      NULL, 0));
}

torc_tensor *torc_flatten(const torc_tensor *t, int start_dim, int end_dim) {
  CHECK_IN(t, "torc_flatten");
  if (t->ndim == 0) {
    int64_t one = 1;
    return torc__ret(torc__record_view(torc__reshape(t, &one, 1, 1), t,
                                       TORC__VIEW_RESHAPE, NULL, 0));
  }
  int s = 0, e = 0;
  if (torc__wrap_dim(start_dim, t->ndim, "torc_flatten", &s) ||
      torc__wrap_dim(end_dim, t->ndim, "torc_flatten", &e))
    return NULL;
  if (s > e) {
    torc_set_error(TORC_ERR_RANGE,
                   "torc_flatten: start_dim %d comes after end_dim %d", s, e);
    return NULL;
  }
  int64_t shape[TORC_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < s; i++)
    shape[n++] = t->shape[i];
  int64_t m = 1;
  for (int i = s; i <= e; i++)
    m *= t->shape[i];
  shape[n++] = m;
  for (int i = e + 1; i < t->ndim; i++)
    shape[n++] = t->shape[i];
  return torc__ret(torc__record_view(torc__reshape(t, shape, n, 1), t,
                                     TORC__VIEW_RESHAPE, NULL, 0));
}

torc_tensor *torc_detach(const torc_tensor *t) {
  CHECK_IN(t, "torc_detach");
  return torc__ret(torc__view_of(t, t->shape, t->strides, t->ndim, t->offset));
}
