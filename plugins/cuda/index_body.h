/* plugins/cuda/index_body.h — the index arithmetic of the cuda plugin's
 * indexing and shape ops (index.cu): element offsets of a strided walk,
 * the sorted-key search that orders accumulations, pad's source index per
 * mode and its inverse, interpolate's source coordinates and weights and
 * their inverse, topk's order as a sort key, the cumulative and
 * accumulating steps. Inline functions callable from device code and from
 * host C, so that tests/test_cuda_index_bodies.c replays each kernel's
 * order on the CPU against the ref kernels.
 */
#ifndef TORC_CUDA_INDEX_BODY_H
#define TORC_CUDA_INDEX_BODY_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TORC_CUDA_IHD __host__ __device__
#else
#define TORC_CUDA_IHD
#endif

/* A double product and sum rounded on their own, never fused into one
 * fma (nvcc contracts a * b + c by default; ref rounds twice). */
#ifdef __CUDA_ARCH__
#define TORC_CUDA_IX_MUL(a, b) __dmul_rn((a), (b))
#define TORC_CUDA_IX_ADD(a, b) __dadd_rn((a), (b))
#else
#define TORC_CUDA_IX_MUL(a, b) ((a) * (b))
#define TORC_CUDA_IX_ADD(a, b) ((a) + (b))
#endif

#define TORC_CUDA_IX_MAX_DIMS 8

/* ---- a strided walk: row-major over shape, per operand its strides ---- */

typedef struct torc_cuda_ix_walk {
  int32_t ndim;
  int64_t shape[TORC_CUDA_IX_MAX_DIMS];
  int64_t st[4][TORC_CUDA_IX_MAX_DIMS];
} torc_cuda_ix_walk;

/* The offsets of element i of the walk in its first n operands and, when
 * coord is not NULL, its coordinates. */
TORC_CUDA_IHD static inline void torc_cuda_ix_at(const torc_cuda_ix_walk *w,
                                                 int64_t i, int n,
                                                 int64_t *off,
                                                 int64_t *coord) {
  for (int k = 0; k < n; k++)
    off[k] = 0;
  for (int d = w->ndim - 1; d >= 0; d--) {
    int64_t c = w->shape[d] > 0 ? i % w->shape[d] : 0;
    i = w->shape[d] > 0 ? i / w->shape[d] : 0;
    if (coord)
      coord[d] = c;
    for (int k = 0; k < n; k++)
      off[k] += c * w->st[k][d];
  }
}

/* ---- accumulation in ref's order: sorted (key, position) pairs ----
 * The ops that add (scatter with reduce 1, index_add, embedding_backward)
 * and scatter's last-write-wins replace run one thread per destination
 * element. Each source gets a key naming its destination (which line and
 * which index along the dim); a stable sort by key keeps the sources of
 * one destination in ref's order (their position ascending); the thread
 * finds its range of the sorted keys with two lower bounds and walks it.
 * A bad index gets the key `bad` (one past every valid key). */

/* The first p in [0, n) with keys[p] >= key (n when there is none). */
TORC_CUDA_IHD static inline int64_t
torc_cuda_ix_lower_bound(const uint64_t *keys, int64_t n, uint64_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The key of a source of line `line` with index value v into a dim of
 * `size`: line * size + v, or bad (= lines * size) when v is outside
 * [0, size). */
TORC_CUDA_IHD static inline uint64_t torc_cuda_ix_key(int64_t line,
                                                      int64_t v, int64_t size,
                                                      uint64_t bad) {
  if (v < 0 || v >= size)
    return bad;
  return (uint64_t)line * (uint64_t)size + (uint64_t)v;
}

/* The number of low bits the keys up to `bad` take (what the radix sort
 * sorts on). */
TORC_CUDA_IHD static inline int torc_cuda_ix_key_bits(uint64_t bad) {
  int bits = 1;
  while (bits < 64 && (bad >> bits) != 0)
    bits++;
  return bits;
}

/* One accumulating step as ref's add_elem: floats in double, rounded to
 * the dtype by the caller after each step; integers wrap in 64 bits
 * (the caller keeps the low bits of the dtype, bool keeps v != 0). */
TORC_CUDA_IHD static inline double torc_cuda_ix_addf(double acc, double x) {
  return TORC_CUDA_IX_ADD(acc, x);
}
TORC_CUDA_IHD static inline int64_t torc_cuda_ix_addi(int64_t acc,
                                                      int64_t x) {
  uint64_t u = (uint64_t)acc + (uint64_t)x;
  int64_t v;
  memcpy(&v, &u, sizeof v);
  return v;
}

/* ---- pad: mode 0 constant, 1 reflect, 2 replicate ---- */

/* The input coordinate output coordinate o reads in a dim of `size` with
 * `before` added in front, or -1 (constant mode, outside the input). */
TORC_CUDA_IHD static inline int64_t torc_cuda_pad_source(int mode, int64_t o,
                                                         int64_t before,
                                                         int64_t size) {
  int64_t s = o - before;
  switch (mode) {
  case 1: /* reflect (the core checked pads < size) */
    if (s < 0)
      s = -s;
    if (s >= size)
      s = 2 * (size - 1) - s;
    return s;
  case 2: /* replicate */
    return s < 0 ? 0 : s >= size ? size - 1 : s;
  default: return s >= 0 && s < size ? s : -1;
  }
}

/* The output coordinates that read input coordinate s (the inverse of
 * torc_cuda_pad_source over [0, out)): up to 3 disjoint ranges [lo, hi),
 * ascending. */
typedef struct torc_cuda_pad_ranges {
  int n;
  int64_t lo[3], hi[3];
} torc_cuda_pad_ranges;

TORC_CUDA_IHD static inline void torc_cuda_pad_range_add(
    torc_cuda_pad_ranges *r, int64_t lo, int64_t hi, int64_t out) {
  if (lo < 0)
    lo = 0;
  if (hi > out)
    hi = out;
  if (lo < hi) {
    r->lo[r->n] = lo;
    r->hi[r->n] = hi;
    r->n++;
  }
}

TORC_CUDA_IHD static inline void
torc_cuda_pad_sources(int mode, int64_t s, int64_t before, int64_t size,
                      int64_t out, torc_cuda_pad_ranges *r) {
  r->n = 0;
  int64_t o = before + s;
  switch (mode) {
  case 1: /* reflect: before - s, before + s, before + 2 (size - 1) - s */
    if (s > 0)
      torc_cuda_pad_range_add(r, before - s, before - s + 1, out);
    torc_cuda_pad_range_add(r, o, o + 1, out);
    if (s < size - 1)
      torc_cuda_pad_range_add(r, before + 2 * (size - 1) - s,
                              before + 2 * (size - 1) - s + 1, out);
    return;
  case 2: /* replicate: the edges take every coordinate beyond them */
    torc_cuda_pad_range_add(r, s == 0 ? 0 : o, s == size - 1 ? out : o + 1,
                            out);
    return;
  default: torc_cuda_pad_range_add(r, o, o + 1, out); return;
  }
}

/* The walk over the product of every dim's ranges in row-major order
 * (the order ref adds pad_backward's gradients in): ri[k] is the range of
 * dim k now, cur[k] its coordinate. pad_first starts it (every dim has at
 * least one range); pad_next steps it, 0 once past the end. */
TORC_CUDA_IHD static inline void
torc_cuda_pad_first(int nd, const torc_cuda_pad_ranges *r, int *ri,
                    int64_t *cur) {
  for (int k = 0; k < nd; k++) {
    ri[k] = 0;
    cur[k] = r[k].lo[0];
  }
}

TORC_CUDA_IHD static inline int
torc_cuda_pad_next(int nd, const torc_cuda_pad_ranges *r, int *ri,
                   int64_t *cur) {
  for (int k = nd - 1; k >= 0; k--) {
    if (++cur[k] < r[k].hi[ri[k]])
      return 1;
    if (++ri[k] < r[k].n) {
      cur[k] = r[k].lo[ri[k]];
      return 1;
    }
    ri[k] = 0;
    cur[k] = r[k].lo[0];
  }
  return 0;
}

/* ---- interpolate over the last two dims: mode 0 nearest, 1 bilinear ---- */

/* Where output coordinate o reads, as ref (PyTorch's upsample kernels):
 * *i0, *i1 and the weight *l1 of i1 (nearest: i1 = i0, l1 = 0). */
TORC_CUDA_IHD static inline void
torc_cuda_interp_source(int mode, int align_corners, int64_t o, int64_t in,
                        int64_t out, int64_t *i0, int64_t *i1, double *l1) {
  if (mode == 0) {
    /* floor(o * (in / out)) with the scale in float */
    float scale = (float)in / (float)out;
    int64_t s = out == in ? o : (int64_t)floorf((float)o * scale);
    *i0 = *i1 = s < in - 1 ? s : in - 1;
    *l1 = 0;
    return;
  }
  double src;
  if (align_corners) {
    src = out > 1 ? TORC_CUDA_IX_MUL((double)(in - 1) / (double)(out - 1),
                                     (double)o)
                  : 0.0;
  } else {
    src = TORC_CUDA_IX_MUL((double)in / (double)out, (double)o + 0.5) - 0.5;
    if (src < 0)
      src = 0;
  }
  int64_t h0 = (int64_t)src;
  if (h0 > in - 1)
    h0 = in - 1;
  *i0 = h0;
  *i1 = h0 < in - 1 ? h0 + 1 : h0;
  *l1 = src - (double)h0;
}

/* The four taps of output (oh, ow) in ref's order: (h0, w0), (h0, w1),
 * (h1, w0), (h1, w1), with their weights. */
TORC_CUDA_IHD static inline void torc_cuda_interp_weights(double lh,
                                                          double lw,
                                                          double *wt) {
  wt[0] = (1 - lh) * (1 - lw);
  wt[1] = (1 - lh) * lw;
  wt[2] = lh * (1 - lw);
  wt[3] = lh * lw;
}

/* The first output coordinate o in [0, out) whose i0 is >= t (out when
 * none): i0 grows with o, so the outputs whose taps touch input
 * coordinate t are [lb(t - 1), lb(t + 1)). */
TORC_CUDA_IHD static inline int64_t
torc_cuda_interp_lower_bound(int mode, int align_corners, int64_t t,
                             int64_t in, int64_t out) {
  int64_t lo = 0, hi = out;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2, i0, i1;
    double l1;
    torc_cuda_interp_source(mode, align_corners, mid, in, out, &i0, &i1, &l1);
    if (i0 < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* ---- topk: the output order as an unsigned sort key ----
 * A stable ascending sort by key, of positions pre-set ascending, gives
 * ref's order: largest: descending with NaN first; smallest: ascending
 * with NaN last; equal values (-0 and +0 included, every NaN alike) by
 * lower position. */

TORC_CUDA_IHD static inline uint64_t torc_cuda_topk_key_f(double v,
                                                          int largest) {
  if (v != v)
    return largest ? 0 : UINT64_MAX;
  if (v == 0)
    v = 0; /* -0 sorts as +0 */
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  /* ascending numbers -> ascending unsigned keys */
  b = (b >> 63) ? ~b : b | (UINT64_C(1) << 63);
  return largest ? ~b : b;
}

TORC_CUDA_IHD static inline uint64_t torc_cuda_topk_key_i(int64_t v,
                                                          int largest) {
  uint64_t b = (uint64_t)v ^ (UINT64_C(1) << 63);
  return largest ? ~b : b;
}

/* ---- cumsum ----
 * Floats fold in double from 0 and store each prefix rounded to the
 * dtype; integers and bool fold with torc_cuda_ix_addi from 0 into i64.
 * Many short lines: one thread per line, in order, exactly ref's sums.
 * Few long lines: one block of TORC_CUDA_CS_BLOCK threads per line;
 * thread t takes the contiguous segment torc_cuda_cumsum_seg gives it and
 * sums it from 0; thread 0 folds the segment sums left to right into each
 * segment's carry (the sum of the segments before it); thread t then
 * folds its segment again from its carry, storing every prefix. Integer
 * results equal ref's (wrapping adds associate); float ones differ from
 * ref's sequential double sum only by the double rounding of the
 * regrouping (then rounded to the dtype). */
#define TORC_CUDA_CS_BLOCK 256

/* Thread t's segment [*lo, *hi) of a line of len elements. */
TORC_CUDA_IHD static inline void torc_cuda_cumsum_seg(int64_t len, int t,
                                                      int64_t *lo,
                                                      int64_t *hi) {
  int64_t seg = (len + TORC_CUDA_CS_BLOCK - 1) / TORC_CUDA_CS_BLOCK;
  int64_t a = (int64_t)t * seg, b = a + seg;
  *lo = a < len ? a : len;
  *hi = b < len ? b : len;
}

/* Whether a cumsum of nlines lines of len takes the block path. */
TORC_CUDA_IHD static inline int torc_cuda_cumsum_blocked(int64_t nlines,
                                                         int64_t len) {
  return len >= TORC_CUDA_CS_BLOCK && nlines < 65536;
}

#endif /* TORC_CUDA_INDEX_BODY_H */
