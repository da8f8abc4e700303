/* plugins/cuda/index.cu — the indexing and shape ops of the cuda plugin:
 * gather, scatter (replace or add), index_select, index_add, embedding
 * and its backward, cumsum, topk, pad and its backward, interpolate and
 * its backward, over index_body.h's index arithmetic, for every dtype ref
 * registers. Every accumulation runs in ref's order (a stable sort of the
 * sources by destination, then one thread per destination), so results
 * are deterministic and equal ref's. A bad index is skipped and recorded
 * in the device's error record (kerr.h); the next wait reports it with
 * the op, the value, the dim and the range, and the device stays usable.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cub/cub.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_internal.h"
#include "index_body.h"
#include "kerr.h"

namespace {

const int kBlock = 256;
const int64_t kMaxBlocks = 65535; /* the grid-stride loops cover the rest */

typedef torc_cuda_ix_walk walk;

__device__ inline int64_t first() {
  return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ inline int64_t step() { return (int64_t)blockDim.x * gridDim.x; }

unsigned blocks(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  return (unsigned)(b < 1 ? 1 : b < kMaxBlocks ? b : kMaxBlocks);
}

/* ---- element types: storage, load/store as double and as int64 ---- */

struct e_f32 {
  typedef float T;
  static const bool is_float = true;
  __device__ static double ld(float v) { return v; }
  __device__ static float st(double v) { return (float)v; }
  __device__ static int64_t ldi(float v) { return (int64_t)v; }
  __device__ static float sti(int64_t v) { return (float)v; }
};
struct e_f64 {
  typedef double T;
  static const bool is_float = true;
  __device__ static double ld(double v) { return v; }
  __device__ static double st(double v) { return v; }
  __device__ static int64_t ldi(double v) { return (int64_t)v; }
  __device__ static double sti(int64_t v) { return (double)v; }
};
struct e_f16 {
  typedef uint16_t T;
  static const bool is_float = true;
  __device__ static double ld(uint16_t v) {
    return __half2float(__ushort_as_half(v));
  }
  __device__ static uint16_t st(double v) {
    return __half_as_ushort(__float2half_rn((float)v));
  }
  __device__ static int64_t ldi(uint16_t v) { return (int64_t)ld(v); }
  __device__ static uint16_t sti(int64_t v) { return st((double)(float)v); }
};
struct e_bf16 {
  typedef uint16_t T;
  static const bool is_float = true;
  __device__ static double ld(uint16_t v) {
    return __bfloat162float(__ushort_as_bfloat16(v));
  }
  __device__ static uint16_t st(double v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
  }
  __device__ static int64_t ldi(uint16_t v) { return (int64_t)ld(v); }
  __device__ static uint16_t sti(int64_t v) { return st((double)(float)v); }
};
/* Integers keep the low bits of their width; bool is v != 0. */
template <class S, bool IS_BOOL> struct e_int {
  typedef S T;
  static const bool is_float = false;
  __device__ static double ld(S v) { return IS_BOOL ? v != 0 : (double)v; }
  __device__ static S st(double v) {
    return IS_BOOL ? (S)(v != 0) : (S)(int64_t)v;
  }
  __device__ static int64_t ldi(S v) {
    return IS_BOOL ? (int64_t)(v != 0) : (int64_t)v;
  }
  __device__ static S sti(int64_t v) {
    return IS_BOOL ? (S)(v != 0) : (S)(uint64_t)v;
  }
};
typedef e_int<int32_t, false> e_i32;
typedef e_int<int64_t, false> e_i64;
typedef e_int<uint8_t, false> e_u8;
typedef e_int<uint8_t, true> e_bool;

/* *dst += src as ref's add_elem: floats in double rounded to the dtype,
 * integers wrapping. */
template <class E>
__device__ inline typename E::T add_elem(typename E::T acc, typename E::T x) {
  if (E::is_float)
    return E::st(torc_cuda_ix_addf(E::ld(acc), E::ld(x)));
  return E::sti(torc_cuda_ix_addi(E::ldi(acc), E::ldi(x)));
}

template <class T> T *base(const torc_ktensor *t) {
  return (T *)t->data + t->offset;
}

/* ---- a bad index: recorded for the next wait (kerr.h) ---- */

enum { OP_GATHER, OP_SCATTER, OP_INDEX_SELECT, OP_INDEX_ADD, OP_EMBEDDING,
       OP_EMBEDDING_BACKWARD };

typedef torc_cuda_kerr_ctx kerr_ctx;


/* Records index v (element el of the index tensor, along dim `dim`)
 * outside [0, size); the caller skips the element. */
__device__ void bad_index(const kerr_ctx &k, int64_t v, int dim, int64_t size,
                          int64_t el) {
  torc_cuda_kerr_index(k.e, k.op, v, 0, size, el, dim);
}

/* ---- gather, index_select, embedding: one thread per output ---- */

/* w: y's shape; operands idx, y, x (x's stride 0 at dim d). */
template <class T, class IT>
__global__ void k_gather(const T *x, const IT *idx, T *y, walk w, int64_t n,
                         int d, int64_t size, int64_t sd, kerr_ctx k) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[3];
    torc_cuda_ix_at(&w, i, 3, o, NULL);
    int64_t v = (int64_t)idx[o[0]];
    if (v < 0 || v >= size)
      bad_index(k, v, d, size, i);
    else
      y[o[1]] = x[o[2] + v * sd];
  }
}

/* w: y's shape; operands y, x (x's stride 0 at dim d); the index is 1-D
 * (stride is) or 0-D (is 0). */
template <class T, class IT>
__global__ void k_index_select(const T *x, const IT *idx, int64_t is, T *y,
                               walk w, int64_t n, int d, int64_t size,
                               int64_t sd, kerr_ctx k) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[2], c[TORC_CUDA_IX_MAX_DIMS];
    torc_cuda_ix_at(&w, i, 2, o, c);
    int64_t v = (int64_t)idx[c[d] * is];
    if (v < 0 || v >= size)
      bad_index(k, v, d, size, c[d]);
    else
      y[o[0]] = x[o[1] + v * sd];
  }
}

/* Contiguous: y[i, :] = w[idx[i], :], D elements a row. */
template <class T, class IT>
__global__ void k_embedding(const IT *idx, const T *wt, T *y, int64_t n,
                            int64_t D, int64_t num, kerr_ctx k) {
  for (int64_t e = first(); e < n * D; e += step()) {
    int64_t i = e / D, c = e % D;
    int64_t v = (int64_t)idx[i];
    if (v < 0 || v >= num)
      bad_index(k, v, -1, num, i);
    else
      y[e] = wt[v * D + c];
  }
}

/* ---- the sorted sources of scatter, index_add, embedding_backward ---- */

/* w: the index's walk, operands idx and the line number (stride 0 at dim
 * d); key of source i: line * size + its value; vals[i]: its position
 * along d. */
template <class IT>
__global__ void k_keys(const IT *idx, walk w, int64_t n, int d, int64_t size,
                       uint64_t bad, uint64_t *keys, int64_t *vals, int op,
                       kerr_ctx k) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[2], c[TORC_CUDA_IX_MAX_DIMS];
    torc_cuda_ix_at(&w, i, 2, o, c);
    int64_t v = (int64_t)idx[o[0]];
    keys[i] = torc_cuda_ix_key(o[1], v, size, bad);
    vals[i] = c[d];
    if (v < 0 || v >= size)
      bad_index(k, v, op == OP_EMBEDDING_BACKWARD ? -1 : d, size, i);
  }
}

/* The line of the index that destination coordinates c fall in (-1 when
 * outside the index's shape): lst holds the lines' row-major strides (0
 * at dim d), ish the index's shape. */
struct lines_of {
  int32_t ndim, d;
  int64_t ish[TORC_CUDA_IX_MAX_DIMS];
  int64_t lst[TORC_CUDA_IX_MAX_DIMS];
};

__device__ inline int64_t line_at(const lines_of &l, const int64_t *c) {
  int64_t line = 0;
  for (int e = 0; e < l.ndim; e++) {
    if (e == l.d)
      continue;
    if (c[e] >= l.ish[e])
      return -1;
    line += c[e] * l.lst[e];
  }
  return line;
}

/* scatter (ADD 0: the last source wins; 1: every source adds, in order)
 * and index_add (its lines_of has one line): w: y's shape, operands y and
 * src (stride 0 at d); src's stride along d is sd. */
template <class E, int ADD>
__global__ void k_scatter(const typename E::T *src, typename E::T *y, walk w,
                          int64_t n, lines_of l, int64_t size, int64_t sd,
                          const uint64_t *keys, const int64_t *vals,
                          int64_t nkeys) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[2], c[TORC_CUDA_IX_MAX_DIMS];
    torc_cuda_ix_at(&w, i, 2, o, c);
    int64_t line = line_at(l, c);
    if (line < 0)
      continue;
    uint64_t key = (uint64_t)line * (uint64_t)size + (uint64_t)c[l.d];
    int64_t lo = torc_cuda_ix_lower_bound(keys, nkeys, key);
    int64_t hi = torc_cuda_ix_lower_bound(keys, nkeys, key + 1);
    if (lo == hi)
      continue;
    if (!ADD) {
      y[o[0]] = src[o[1] + vals[hi - 1] * sd];
      continue;
    }
    typename E::T acc = y[o[0]];
    for (int64_t p = lo; p < hi; p++)
      acc = add_elem<E>(acc, src[o[1] + vals[p] * sd]);
    y[o[0]] = acc;
  }
}

/* Contiguous: gw[k, c] = the sum in double of gy[i, c] over the i with
 * idx[i] == k, in order, rounded once (0 for a row no index names). */
template <class E>
__global__ void k_embedding_backward(const typename E::T *gy,
                                     typename E::T *gw, int64_t num,
                                     int64_t D, const uint64_t *keys,
                                     const int64_t *vals, int64_t nkeys) {
  for (int64_t e = first(); e < num * D; e += step()) {
    int64_t k = e / D, c = e % D;
    int64_t lo = torc_cuda_ix_lower_bound(keys, nkeys, (uint64_t)k);
    int64_t hi = torc_cuda_ix_lower_bound(keys, nkeys, (uint64_t)k + 1);
    double acc = 0;
    for (int64_t p = lo; p < hi; p++)
      acc = torc_cuda_ix_addf(acc, E::ld(gy[vals[p] * D + c]));
    gw[e] = E::st(acc);
  }
}

/* ---- cumsum: one thread per line, or one block per line ---- */

/* w: the lines (operands x, y, the dim dropped); len elements at strides
 * sx, sy. Floats: EO is EI; integers and bool: EO is i64. */
template <class EI, class EO>
__global__ void k_cumsum(const typename EI::T *x, typename EO::T *y, walk w,
                         int64_t nlines, int64_t len, int64_t sx,
                         int64_t sy) {
  for (int64_t l = first(); l < nlines; l += step()) {
    int64_t o[2];
    torc_cuda_ix_at(&w, l, 2, o, NULL);
    double f = 0;
    int64_t s = 0;
    for (int64_t k = 0; k < len; k++) {
      typename EI::T v = x[o[0] + k * sx];
      if (EI::is_float) {
        f = torc_cuda_ix_addf(f, EI::ld(v));
        y[o[1] + k * sy] = EO::st(f);
      } else {
        s = torc_cuda_ix_addi(s, EI::ldi(v));
        y[o[1] + k * sy] = EO::sti(s);
      }
    }
  }
}

/* Few long lines: one block per line in index_body.h's segment order. */
template <class EI, class EO>
__global__ void k_cumsum_block(const typename EI::T *x, typename EO::T *y,
                               walk w, int64_t nlines, int64_t len,
                               int64_t sx, int64_t sy) {
  __shared__ double fpart[TORC_CUDA_CS_BLOCK];
  __shared__ int64_t ipart[TORC_CUDA_CS_BLOCK];
  int t = threadIdx.x;
  int64_t lo, hi;
  torc_cuda_cumsum_seg(len, t, &lo, &hi);
  for (int64_t l = blockIdx.x; l < nlines; l += gridDim.x) {
    int64_t o[2];
    torc_cuda_ix_at(&w, l, 2, o, NULL);
    double f = 0;
    int64_t s = 0;
    for (int64_t k = lo; k < hi; k++) {
      typename EI::T v = x[o[0] + k * sx];
      if (EI::is_float)
        f = torc_cuda_ix_addf(f, EI::ld(v));
      else
        s = torc_cuda_ix_addi(s, EI::ldi(v));
    }
    fpart[t] = f;
    ipart[t] = s;
    __syncthreads();
    if (t == 0) {
      double fc = 0;
      int64_t ic = 0;
      for (int u = 0; u < TORC_CUDA_CS_BLOCK; u++) {
        double fn = torc_cuda_ix_addf(fc, fpart[u]);
        int64_t in = torc_cuda_ix_addi(ic, ipart[u]);
        fpart[u] = fc;
        ipart[u] = ic;
        fc = fn;
        ic = in;
      }
    }
    __syncthreads();
    f = fpart[t];
    s = ipart[t];
    for (int64_t k = lo; k < hi; k++) {
      typename EI::T v = x[o[0] + k * sx];
      if (EI::is_float) {
        f = torc_cuda_ix_addf(f, EI::ld(v));
        y[o[1] + k * sy] = EO::st(f);
      } else {
        s = torc_cuda_ix_addi(s, EI::ldi(v));
        y[o[1] + k * sy] = EO::sti(s);
      }
    }
    __syncthreads(); /* the parts are reused by the next line */
  }
}

/* ---- pad ---- */

struct pad_geo {
  int32_t mode, ndim;
  int64_t before[TORC_CUDA_IX_MAX_DIMS];
  int64_t xsh[TORC_CUDA_IX_MAX_DIMS]; /* the unpadded side's shape */
  int64_t xst[TORC_CUDA_IX_MAX_DIMS]; /* and its strides */
  int64_t ysh[TORC_CUDA_IX_MAX_DIMS]; /* the padded side's shape */
  int64_t yst[TORC_CUDA_IX_MAX_DIMS]; /* and its strides */
};

/* w: y's shape, operand y; each output reads its source or the fill. */
template <class T>
__global__ void k_pad(const T *x, T *y, walk w, int64_t n, pad_geo g,
                      T fill) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[1], c[TORC_CUDA_IX_MAX_DIMS];
    torc_cuda_ix_at(&w, i, 1, o, c);
    int64_t pos = 0;
    bool in = true;
    for (int k = 0; k < g.ndim && in; k++) {
      int64_t s = torc_cuda_pad_source(g.mode, c[k], g.before[k], g.xsh[k]);
      in = s >= 0;
      pos += s * g.xst[k];
    }
    y[o[0]] = in ? x[pos] : fill;
  }
}

/* w: gx's shape, operand gx; each input gradient sums the gradients of
 * the outputs that read it, in their row-major order, rounding each step
 * to the dtype as ref. */
template <class E>
__global__ void k_pad_backward(const typename E::T *g, typename E::T *gx,
                               walk w, int64_t n, pad_geo geo) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[1], c[TORC_CUDA_IX_MAX_DIMS];
    torc_cuda_ix_at(&w, i, 1, o, c);
    torc_cuda_pad_ranges r[TORC_CUDA_IX_MAX_DIMS];
    int ri[TORC_CUDA_IX_MAX_DIMS];
    int64_t cur[TORC_CUDA_IX_MAX_DIMS];
    bool any = true;
    for (int k = 0; k < geo.ndim; k++) {
      torc_cuda_pad_sources(geo.mode, c[k], geo.before[k], geo.xsh[k],
                            geo.ysh[k], &r[k]);
      any = any && r[k].n > 0;
    }
    typename E::T acc = E::st(0.0);
    if (any) {
      torc_cuda_pad_first(geo.ndim, r, ri, cur);
      do {
        int64_t pos = 0;
        for (int k = 0; k < geo.ndim; k++)
          pos += cur[k] * geo.yst[k];
        acc = E::st(torc_cuda_ix_addf(E::ld(acc), E::ld(g[pos])));
      } while (torc_cuda_pad_next(geo.ndim, r, ri, cur));
    }
    gx[o[0]] = acc;
  }
}

/* ---- interpolate over the last two dims ---- */

struct interp_geo {
  int32_t mode, align;
  int64_t H, W, OH, OW;
};

/* w: y's shape, operands y and x (stride 0 at dims 2, 3); x's strides
 * there xh, xw. */
template <class E>
__global__ void k_interp(const typename E::T *x, typename E::T *y, walk w,
                         int64_t n, interp_geo g, int64_t xh, int64_t xw) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[2], c[TORC_CUDA_IX_MAX_DIMS];
    torc_cuda_ix_at(&w, i, 2, o, c);
    int64_t h0, h1, w0, w1;
    double lh, lw, wt[4];
    torc_cuda_interp_source(g.mode, g.align, c[2], g.H, g.OH, &h0, &h1, &lh);
    torc_cuda_interp_source(g.mode, g.align, c[3], g.W, g.OW, &w0, &w1, &lw);
    torc_cuda_interp_weights(lh, lw, wt);
    int64_t pos[4] = {h0 * xh + w0 * xw, h0 * xh + w1 * xw,
                      h1 * xh + w0 * xw, h1 * xh + w1 * xw};
    double v = 0;
    for (int k = 0; k < 4; k++)
      if (wt[k] != 0)
        v = TORC_CUDA_IX_ADD(v,
                             TORC_CUDA_IX_MUL(wt[k], E::ld(x[o[1] + pos[k]])));
    y[o[0]] = E::st(v);
  }
}

/* w: gx's shape, operands gx and gy (stride 0 at dims 2, 3); gy's
 * strides there yh, yw. Each input gradient walks the outputs whose taps
 * touch it (oh, then ow, then the tap, ref's order), rounding each step. */
template <class E>
__global__ void k_interp_backward(const typename E::T *gy,
                                  typename E::T *gx, walk w, int64_t n,
                                  interp_geo g, int64_t yh, int64_t yw) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[2], c[TORC_CUDA_IX_MAX_DIMS];
    torc_cuda_ix_at(&w, i, 2, o, c);
    int64_t h = c[2], x = c[3];
    int64_t oh0 = torc_cuda_interp_lower_bound(g.mode, g.align, h - 1, g.H,
                                               g.OH);
    int64_t oh1 = torc_cuda_interp_lower_bound(g.mode, g.align, h + 1, g.H,
                                               g.OH);
    int64_t ow0 = torc_cuda_interp_lower_bound(g.mode, g.align, x - 1, g.W,
                                               g.OW);
    int64_t ow1 = torc_cuda_interp_lower_bound(g.mode, g.align, x + 1, g.W,
                                               g.OW);
    typename E::T acc = E::st(0.0);
    for (int64_t oh = oh0; oh < oh1; oh++) {
      int64_t h0, h1;
      double lh;
      torc_cuda_interp_source(g.mode, g.align, oh, g.H, g.OH, &h0, &h1, &lh);
      for (int64_t ow = ow0; ow < ow1; ow++) {
        int64_t w0, w1;
        double lw, wt[4];
        torc_cuda_interp_source(g.mode, g.align, ow, g.W, g.OW, &w0, &w1,
                                &lw);
        torc_cuda_interp_weights(lh, lw, wt);
        int64_t th[4] = {h0, h0, h1, h1}, tw[4] = {w0, w1, w0, w1};
        double gv = E::ld(gy[o[1] + oh * yh + ow * yw]);
        for (int k = 0; k < 4; k++)
          if (wt[k] != 0 && th[k] == h && tw[k] == x)
            acc = E::st(
                TORC_CUDA_IX_ADD(E::ld(acc), TORC_CUDA_IX_MUL(wt[k], gv)));
      }
    }
    gx[o[0]] = acc;
  }
}

/* ---- topk: a stable segmented sort of each row's keys ---- */

/* w: rows then the dim (x's walk, the dim last), operand x; keys of
 * element i = row * len + j, vals[i] = j; offs[r] = r * len. */
template <class E>
__global__ void k_topk_keys(const typename E::T *x, walk w, int64_t n,
                            int64_t len, int largest, uint64_t *keys,
                            int64_t *vals, int64_t *offs, int64_t nrows) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[1];
    torc_cuda_ix_at(&w, i, 1, o, NULL);
    typename E::T v = x[o[0]];
    keys[i] = E::is_float ? torc_cuda_topk_key_f(E::ld(v), largest)
                          : torc_cuda_topk_key_i(E::ldi(v), largest);
    vals[i] = i % len;
  }
  for (int64_t r = first(); r <= nrows; r += step())
    offs[r] = r * len;
}

/* w: rows then k (the dim last), operands x (stride 0 along k), v, ix. */
template <class T>
__global__ void k_topk_out(const T *x, T *v, int64_t *ix, walk w, int64_t n,
                           int64_t k, int64_t len, int64_t sx,
                           const int64_t *vals) {
  for (int64_t i = first(); i < n; i += step()) {
    int64_t o[3];
    torc_cuda_ix_at(&w, i, 3, o, NULL);
    int64_t at = vals[(i / k) * len + i % k];
    v[o[1]] = x[o[0] + at * sx];
    ix[o[2]] = at;
  }
}

/* ---- host side ---- */

int bad(const torc_kernel_args *a, const char *what) {
  return torc_cuda__set_error(TORC_ERR_INTERNAL, "cuda kernel '%s': %s",
                              a->op, what);
}

int64_t numel(const torc_ktensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    n *= t->shape[d];
  return n;
}

/* A walk over shape[0..nd) with the operands' strides (NULL: zeros). */
walk make_walk(int nd, const int64_t *shape, int nops,
               const int64_t *const *strides) {
  walk w;
  memset(&w, 0, sizeof w);
  w.ndim = nd;
  for (int d = 0; d < nd; d++) {
    w.shape[d] = shape[d];
    for (int k = 0; k < nops; k++)
      w.st[k][d] = strides[k] ? strides[k][d] : 0;
  }
  return w;
}

/* The strides of t with dim d set to 0. */
void strides_but(const torc_ktensor *t, int d, int64_t *out) {
  memcpy(out, t->strides, sizeof(int64_t) * TORC_KERNEL_MAX_DIMS);
  if (d >= 0 && d < TORC_KERNEL_MAX_DIMS)
    out[d] = 0;
}

/* The element size of a dtype the plugin serves (0 for others). */
size_t esize(int dt) {
  switch (dt) {
  case TORC_F64:
  case TORC_I64: return 8;
  case TORC_F32:
  case TORC_I32: return 4;
  case TORC_F16:
  case TORC_BF16: return 2;
  case TORC_U8:
  case TORC_BOOL: return 1;
  default: return 0;
  }
}

const torc_index_params *index_params(const torc_kernel_args *a, int ndim) {
  if (a->n_in != 2 || a->n_out != 1 || a->params == NULL ||
      a->params_size < sizeof(torc_index_params)) {
    bad(a, "expected 2 inputs, 1 output and torc_index_params");
    return NULL;
  }
  const torc_index_params *p = (const torc_index_params *)a->params;
  if (p->dim < 0 || p->dim >= ndim) {
    torc_cuda__set_error(TORC_ERR_INTERNAL,
                         "cuda kernel '%s': dim %d for a tensor of %d dims",
                         a->op, (int)p->dim, ndim);
    return NULL;
  }
  return p;
}

/* A CUDA call of the op (a sort, a memset) failed: the error, named. */
int sort_failed(const torc_kernel_args *a, cudaError_t e) {
  return torc_cuda__set_error(TORC_ERR_DEVICE, "cuda kernel '%s': %s (%s)",
                              a->op, cudaGetErrorString(e),
                              cudaGetErrorName(e));
}

/* n > 0 indices into a dim of size 0: each is out of range, which the
 * host knows without reading one. */
int empty_dim(const torc_kernel_args *a, int64_t n, int dim) {
  return torc_cuda__set_error(TORC_ERR_RANGE,
                              "torc_%s (cuda): the index has %lld elements "
                              "but dim %d has size 0 (the dim is empty: no "
                              "index is valid)",
                              a->op, (long long)n, dim);
}

bool is_index_dtype(int dt) { return dt == TORC_I32 || dt == TORC_I64; }

/* Runs the statement (the macro's rest) with T the storage type of
 * dtype dt's size: the plain copies move bits, whatever the dtype. */
#define BY_SIZE(dt, ...)                                                       \
  switch (esize(dt)) {                                                         \
  case 8: { typedef uint64_t T; __VA_ARGS__; } break;                          \
  case 4: { typedef uint32_t T; __VA_ARGS__; } break;                          \
  case 2: { typedef uint16_t T; __VA_ARGS__; } break;                          \
  default: { typedef uint8_t T; __VA_ARGS__; } break;                          \
  }

/* Runs the statement with E the element type of dtype dt (any dtype). */
#define BY_DTYPE(dt, ...)                                                      \
  switch (dt) {                                                                \
  case TORC_F64: { typedef e_f64 E; __VA_ARGS__; } break;                      \
  case TORC_F16: { typedef e_f16 E; __VA_ARGS__; } break;                      \
  case TORC_BF16: { typedef e_bf16 E; __VA_ARGS__; } break;                    \
  case TORC_I32: { typedef e_i32 E; __VA_ARGS__; } break;                      \
  case TORC_I64: { typedef e_i64 E; __VA_ARGS__; } break;                      \
  case TORC_U8: { typedef e_u8 E; __VA_ARGS__; } break;                        \
  case TORC_BOOL: { typedef e_bool E; __VA_ARGS__; } break;                    \
  default: { typedef e_f32 E; __VA_ARGS__; } break;                            \
  }

/* Runs the statement with E the element type of float dtype dt. */
#define BY_FLOAT(dt, ...)                                                      \
  switch (dt) {                                                                \
  case TORC_F64: { typedef e_f64 E; __VA_ARGS__; } break;                      \
  case TORC_F16: { typedef e_f16 E; __VA_ARGS__; } break;                      \
  case TORC_BF16: { typedef e_bf16 E; __VA_ARGS__; } break;                    \
  default: { typedef e_f32 E; __VA_ARGS__; } break;                            \
  }

/* Runs the statement with IT the index dtype's type (i32 or i64). */
#define BY_INDEX(dt, ...)                                                      \
  if ((dt) == TORC_I32) {                                                      \
    typedef int32_t IT;                                                        \
    __VA_ARGS__;                                                               \
  } else {                                                                     \
    typedef int64_t IT;                                                        \
    __VA_ARGS__;                                                               \
  }

int k_gather_op(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return bad(a, "expected 2 inputs and 1 output");
  const torc_ktensor *x = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
  const torc_index_params *p = index_params(a, x->ndim);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  if (!is_index_dtype(idx->dtype) || y->dtype != x->dtype ||
      esize(x->dtype) == 0 || idx->ndim != y->ndim || y->ndim != x->ndim)
    return bad(a, "expected an i32/i64 index of the output's shape and an "
                  "output of the input's dtype and rank");
  for (int k = 0; k < y->ndim; k++)
    if (idx->shape[k] != y->shape[k])
      return bad(a, "the index and the output differ in shape");
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  if (x->shape[p->dim] == 0)
    return empty_dim(a, n, p->dim);
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  int d = p->dim;
  int64_t xs[TORC_KERNEL_MAX_DIMS];
  strides_but(x, d, xs);
  const int64_t *st[3] = {idx->strides, y->strides, xs};
  walk w = make_walk(y->ndim, y->shape, 3, st);
  kerr_ctx k;
  if (torc_cuda_kerr_of(a, &k) != TORC_OK)
    return TORC_ERR_DEVICE;
  BY_SIZE(x->dtype, BY_INDEX(idx->dtype,
      k_gather<T, IT><<<blocks(n), kBlock, 0, s>>>(
          base<T>(x), base<IT>(idx), base<T>(y), w, n, d, x->shape[d],
          x->strides[d], k)));
  return torc_cuda__after_launch(a->device_index, a->op);
}

int k_index_select_op(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return bad(a, "expected 2 inputs and 1 output");
  const torc_ktensor *x = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
  const torc_index_params *p = index_params(a, x->ndim);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  if (!is_index_dtype(idx->dtype) || idx->ndim > 1 || y->dtype != x->dtype ||
      esize(x->dtype) == 0 || y->ndim != x->ndim)
    return bad(a, "expected a 1-D i32/i64 index and an output of the "
                  "input's dtype and rank");
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  if (x->shape[p->dim] == 0)
    return empty_dim(a, numel(idx), p->dim);
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  int d = p->dim;
  int64_t xs[TORC_KERNEL_MAX_DIMS];
  strides_but(x, d, xs);
  const int64_t *st[2] = {y->strides, xs};
  walk w = make_walk(y->ndim, y->shape, 2, st);
  int64_t is = idx->ndim ? idx->strides[0] : 0;
  kerr_ctx k;
  if (torc_cuda_kerr_of(a, &k) != TORC_OK)
    return TORC_ERR_DEVICE;
  BY_SIZE(x->dtype, BY_INDEX(idx->dtype,
      k_index_select<T, IT><<<blocks(n), kBlock, 0, s>>>(
          base<T>(x), base<IT>(idx), is, base<T>(y), w, n, d, x->shape[d],
          x->strides[d], k)));
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* The sources' keys sorted (stably) into *keys / *vals in workspace *ws,
 * nkeys of them: idx walked over ishape with line strides lst (0 at d),
 * keys line * size + value. The caller gives *ws back. */
int sort_sources(const torc_kernel_args *a, cudaStream_t s,
                 const torc_ktensor *idx, int nd, const int64_t *ishape,
                 const int64_t *istrides, const int64_t *lst, int d,
                 int64_t nkeys, int64_t size, uint64_t nlines, int op,
                 void **ws, const uint64_t **keys, const int64_t **vals) {
  uint64_t badkey = nlines * (uint64_t)size;
  int bits = torc_cuda_ix_key_bits(badkey);
  size_t temp = 0;
  if (cub::DeviceRadixSort::SortPairs(NULL, temp, (const uint64_t *)NULL,
                                      (uint64_t *)NULL,
                                      (const int64_t *)NULL, (int64_t *)NULL,
                                      nkeys, 0, bits, s) != cudaSuccess)
    return torc_cuda__set_error(TORC_ERR_DEVICE,
                                "cuda kernel '%s': the sort of %lld indices "
                                "could not be planned",
                                a->op, (long long)nkeys);
  size_t arr = ((size_t)nkeys * 8 + 255) / 256 * 256;
  int st = torc_cuda__workspace(a, 4 * arr + temp, ws);
  if (st != TORC_OK)
    return st;
  char *p = (char *)*ws;
  uint64_t *k_in = (uint64_t *)p, *k_out = (uint64_t *)(p + arr);
  int64_t *v_in = (int64_t *)(p + 2 * arr), *v_out = (int64_t *)(p + 3 * arr);
  const int64_t *str[2] = {istrides, lst};
  walk w = make_walk(nd, ishape, 2, str);
  kerr_ctx k;
  if (torc_cuda_kerr_of(a, &k) != TORC_OK)
    return TORC_ERR_DEVICE;
  BY_INDEX(idx->dtype,
      k_keys<IT><<<blocks(nkeys), kBlock, 0, s>>>(
          base<IT>(idx), w, nkeys, d, size, badkey, k_in, v_in, op, k));
  st = torc_cuda__after_launch(a->device_index, a->op);
  if (st != TORC_OK)
    return st;
  cudaError_t e = cub::DeviceRadixSort::SortPairs(
      p + 4 * arr, temp, k_in, k_out, v_in, v_out, nkeys, 0, bits, s);
  if (e != cudaSuccess)
    return sort_failed(a, e);
  *keys = k_out;
  *vals = v_out;
  return TORC_OK;
}

/* scatter (in index, src; out y, already holding the input) and
 * index_add (the same with a 1-D index along dim). */
int run_scatter(const torc_kernel_args *a, bool is_index_add) {
  if (a->n_in != 2 || a->n_out != 1)
    return bad(a, "expected 2 inputs and 1 output");
  const torc_ktensor *idx = &a->in[0], *src = &a->in[1], *y = &a->out[0];
  const torc_index_params *p = index_params(a, y->ndim);
  if (p == NULL)
    return TORC_ERR_INTERNAL;
  int d = p->dim, nd = y->ndim;
  bool add = is_index_add || p->reduce;
  if (!is_index_dtype(idx->dtype) || src->dtype != y->dtype ||
      esize(y->dtype) == 0 || src->ndim != nd ||
      (is_index_add ? idx->ndim > 1 : idx->ndim != nd))
    return bad(a, "expected an i32/i64 index and src of the output's dtype "
                  "and rank");
  /* The index's walk: its own shape (index_add: src's length along d). */
  int64_t ish[TORC_KERNEL_MAX_DIMS], ist[TORC_KERNEL_MAX_DIMS];
  int64_t lst[TORC_KERNEL_MAX_DIMS];
  memset(lst, 0, sizeof lst);
  lines_of l;
  memset(&l, 0, sizeof l);
  l.ndim = nd;
  l.d = d;
  uint64_t nlines = 1;
  if (is_index_add) {
    for (int k = 0; k < nd; k++) {
      if (k != d && src->shape[k] != y->shape[k])
        return bad(a, "src and the output differ outside dim");
      l.ish[k] = y->shape[k];
    }
    int64_t len = idx->ndim ? idx->shape[0] : 1;
    if (len != src->shape[d])
      return bad(a, "the index's length is not src's size at dim");
    ish[0] = len;
    ist[0] = idx->ndim ? idx->strides[0] : 0;
  } else {
    for (int k = nd - 1; k >= 0; k--) {
      if (idx->shape[k] > src->shape[k] ||
          (k != d && idx->shape[k] > y->shape[k]))
        return bad(a, "the index is larger than src or the output");
      ish[k] = idx->shape[k];
      ist[k] = idx->strides[k];
      l.ish[k] = idx->shape[k];
      if (k != d) {
        lst[k] = (int64_t)nlines;
        nlines *= (uint64_t)idx->shape[k];
      }
    }
    memcpy(l.lst, lst, sizeof lst);
  }
  int64_t nkeys = is_index_add ? ish[0] : numel(idx), n = numel(y);
  if (nkeys == 0)
    return TORC_OK;
  if (y->shape[d] == 0)
    return empty_dim(a, nkeys, d);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  void *ws = NULL;
  const uint64_t *keys = NULL;
  const int64_t *vals = NULL;
  int64_t zero[TORC_KERNEL_MAX_DIMS] = {0};
  int st = sort_sources(a, s, idx, is_index_add ? 1 : nd, ish, ist,
                        is_index_add ? zero : lst, is_index_add ? 0 : d,
                        nkeys, y->shape[d], nlines,
                        is_index_add ? OP_INDEX_ADD : OP_SCATTER, &ws, &keys,
                        &vals);
  if (st == TORC_OK) {
    int64_t ss[TORC_KERNEL_MAX_DIMS];
    strides_but(src, d, ss);
    const int64_t *str[2] = {y->strides, ss};
    walk w = make_walk(nd, y->shape, 2, str);
    if (add) {
      BY_DTYPE(y->dtype, k_scatter<E, 1><<<blocks(n), kBlock, 0, s>>>(
                             base<typename E::T>(src), base<typename E::T>(y),
                             w, n, l, y->shape[d], src->strides[d], keys,
                             vals, nkeys));
    } else {
      BY_DTYPE(y->dtype, k_scatter<E, 0><<<blocks(n), kBlock, 0, s>>>(
                             base<typename E::T>(src), base<typename E::T>(y),
                             w, n, l, y->shape[d], src->strides[d], keys,
                             vals, nkeys));
    }
    st = torc_cuda__after_launch(a->device_index, a->op);
  }
  torc_cuda__workspace_done(a, ws);
  return st;
}

int k_scatter_op(const torc_kernel_args *a) { return run_scatter(a, false); }
int k_index_add_op(const torc_kernel_args *a) { return run_scatter(a, true); }

/* embedding: in idx (contiguous, any shape), w [num, D]; out [idx..., D]. */
int k_embedding_op(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return bad(a, "expected 2 inputs and 1 output");
  const torc_ktensor *idx = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  if (!is_index_dtype(idx->dtype) || w->ndim != 2 || y->dtype != w->dtype ||
      esize(w->dtype) == 0 || numel(y) != numel(idx) * w->shape[1])
    return bad(a, "expected an i32/i64 index, a weight [num, D] and an "
                  "output [index..., D] of its dtype");
  int64_t n = numel(idx), D = w->shape[1];
  if (n > 0 && w->shape[0] == 0)
    return empty_dim(a, n, 0);
  if (n * D == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  kerr_ctx k;
  if (torc_cuda_kerr_of(a, &k) != TORC_OK)
    return TORC_ERR_DEVICE;
  BY_SIZE(w->dtype, BY_INDEX(idx->dtype,
      k_embedding<T, IT><<<blocks(n * D), kBlock, 0, s>>>(
          base<IT>(idx), base<T>(w), base<T>(y), n, D, w->shape[0], k)));
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* embedding_backward: in gy [idx..., D], idx (contiguous); out gw. */
int k_embedding_backward_op(const torc_kernel_args *a) {
  if (a->n_in != 2 || a->n_out != 1)
    return bad(a, "expected 2 inputs and 1 output");
  const torc_ktensor *gy = &a->in[0], *idx = &a->in[1], *gw = &a->out[0];
  if (!is_index_dtype(idx->dtype) || gw->ndim != 2 || gy->dtype != gw->dtype ||
      esize(gw->dtype) == 0 || numel(gy) != numel(idx) * gw->shape[1])
    return bad(a, "expected gy [index..., D], an i32/i64 index and gw "
                  "[num, D] of gy's dtype");
  int64_t n = numel(idx), num = gw->shape[0], D = gw->shape[1];
  if (n > 0 && num == 0)
    return empty_dim(a, n, 0);
  if (num * D == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  if (n == 0) {
    cudaError_t e = cudaMemsetAsync(base<char>(gw), 0,
                                    (size_t)(num * D) * esize(gw->dtype), s);
    return e == cudaSuccess ? TORC_OK : sort_failed(a, e);
  }
  void *ws = NULL;
  const uint64_t *keys = NULL;
  const int64_t *vals = NULL;
  int64_t ish[1] = {n}, ist[1] = {1}, lst[1] = {0};
  int st = sort_sources(a, s, idx, 1, ish, ist, lst, 0, n, num, 1,
                        OP_EMBEDDING_BACKWARD, &ws, &keys, &vals);
  if (st == TORC_OK) {
    BY_FLOAT(gw->dtype, k_embedding_backward<E>
             <<<blocks(num * D), kBlock, 0, s>>>(
                 base<typename E::T>(gy), base<typename E::T>(gw), num, D,
                 keys, vals, n));
    st = torc_cuda__after_launch(a->device_index, a->op);
  }
  torc_cuda__workspace_done(a, ws);
  return st;
}

/* cumsum: floats keep their dtype; integers and bool give i64. */
int k_cumsum_op(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out != 1 || a->params == NULL ||
      a->params_size < sizeof(torc_dim_params))
    return bad(a, "expected 1 input, 1 output and torc_dim_params");
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int nd = x->ndim, d = ((const torc_dim_params *)a->params)->dim;
  bool isf = x->dtype == TORC_F32 || x->dtype == TORC_F64 ||
             x->dtype == TORC_F16 || x->dtype == TORC_BF16;
  if (esize(x->dtype) == 0 || y->ndim != nd ||
      y->dtype != (isf ? x->dtype : TORC_I64) ||
      (nd > 0 ? d < 0 || d >= nd : d != 0))
    return bad(a, "expected an output of the input's shape (i64 for "
                  "integers) and a dim inside the input");
  for (int k = 0; k < nd; k++)
    if (x->shape[k] != y->shape[k])
      return bad(a, "the input and output shapes differ");
  int64_t lsh[TORC_KERNEL_MAX_DIMS], xs[TORC_KERNEL_MAX_DIMS],
      ys[TORC_KERNEL_MAX_DIMS];
  int ln = 0;
  int64_t nlines = 1;
  for (int k = 0; k < nd; k++) {
    if (k == d)
      continue;
    lsh[ln] = x->shape[k];
    xs[ln] = x->strides[k];
    ys[ln] = y->strides[k];
    nlines *= x->shape[k];
    ln++;
  }
  int64_t len = nd ? x->shape[d] : 1;
  int64_t sx = nd ? x->strides[d] : 0, sy = nd ? y->strides[d] : 0;
  if (nlines == 0 || len == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const int64_t *str[2] = {xs, ys};
  walk w = make_walk(ln, lsh, 2, str);
  if (torc_cuda_cumsum_blocked(nlines, len)) {
    unsigned nb = (unsigned)(nlines < kMaxBlocks ? nlines : kMaxBlocks);
    if (isf) {
      BY_FLOAT(x->dtype, k_cumsum_block<E, E>
               <<<nb, TORC_CUDA_CS_BLOCK, 0, s>>>(
                   base<typename E::T>(x), base<typename E::T>(y), w, nlines,
                   len, sx, sy));
    } else {
      BY_DTYPE(x->dtype, k_cumsum_block<E, e_i64>
               <<<nb, TORC_CUDA_CS_BLOCK, 0, s>>>(
                   base<typename E::T>(x), base<int64_t>(y), w, nlines, len,
                   sx, sy));
    }
  } else if (isf) {
    BY_FLOAT(x->dtype, k_cumsum<E, E><<<blocks(nlines), kBlock, 0, s>>>(
                           base<typename E::T>(x), base<typename E::T>(y), w,
                           nlines, len, sx, sy));
  } else {
    BY_DTYPE(x->dtype, k_cumsum<E, e_i64><<<blocks(nlines), kBlock, 0, s>>>(
                           base<typename E::T>(x), base<int64_t>(y), w,
                           nlines, len, sx, sy));
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* pad's fill value as the dtype's bits (ref's store of a double). */
uint64_t fill_bits(int dt, double v) {
  uint64_t b = 0;
  switch (dt) {
  case TORC_F32: {
    float f = (float)v;
    memcpy(&b, &f, 4);
    break;
  }
  case TORC_F64: memcpy(&b, &v, 8); break;
  case TORC_F16: b = __half_as_ushort(__float2half_rn((float)v)); break;
  case TORC_BF16:
    b = __bfloat16_as_ushort(__float2bfloat16_rn((float)v));
    break;
  case TORC_BOOL: b = v != 0; break;
  default: {
    int64_t i = v != v                             ? 0
                : v >= 9223372036854775808.0       ? INT64_MAX
                : v < -9223372036854775808.0       ? INT64_MIN
                                                   : (int64_t)v;
    b = (uint64_t)i;
    if (dt == TORC_I32)
      b &= 0xffffffffu;
    else if (dt == TORC_U8)
      b &= 0xffu;
  }
  }
  return b;
}

/* The padded side y and the unpadded side x of pad / pad_backward. */
int pad_geo_of(const torc_kernel_args *a, const torc_ktensor *x,
               const torc_ktensor *y, pad_geo *g) {
  if (a->n_in != 1 || a->n_out != 1 || a->params == NULL ||
      a->params_size < sizeof(torc_pad_params))
    return bad(a, "expected 1 input, 1 output and torc_pad_params");
  const torc_pad_params *p = (const torc_pad_params *)a->params;
  if (x->ndim != y->ndim || x->dtype != y->dtype || esize(x->dtype) == 0 ||
      p->mode < 0 || p->mode > 2)
    return bad(a, "expected tensors of one dtype and rank and mode 0, 1 or 2");
  memset(g, 0, sizeof *g);
  g->mode = p->mode;
  g->ndim = x->ndim;
  for (int k = 0; k < x->ndim; k++) {
    if (y->shape[k] != x->shape[k] + p->before[k] + p->after[k])
      return torc_cuda__set_error(
          TORC_ERR_INTERNAL,
          "cuda kernel '%s': dim %d of size %lld padded by (%lld, %lld) "
          "does not give %lld",
          a->op, k, (long long)x->shape[k], (long long)p->before[k],
          (long long)p->after[k], (long long)y->shape[k]);
    g->before[k] = p->before[k];
    g->xsh[k] = x->shape[k];
    g->xst[k] = x->strides[k];
    g->ysh[k] = y->shape[k];
    g->yst[k] = y->strides[k];
  }
  return TORC_OK;
}

int k_pad_op(const torc_kernel_args *a) {
  pad_geo g;
  int st = pad_geo_of(a, &a->in[0], &a->out[0], &g);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  int64_t n = numel(y);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const int64_t *str[1] = {y->strides};
  walk w = make_walk(y->ndim, y->shape, 1, str);
  uint64_t fb =
      fill_bits(y->dtype, ((const torc_pad_params *)a->params)->value);
  BY_SIZE(y->dtype, k_pad<T><<<blocks(n), kBlock, 0, s>>>(
                        base<T>(x), base<T>(y), w, n, g, (T)fb));
  return torc_cuda__after_launch(a->device_index, a->op);
}

int k_pad_backward_op(const torc_kernel_args *a) {
  pad_geo g;
  /* in: the padded output's gradient; out: the input's. */
  int st = pad_geo_of(a, &a->out[0], &a->in[0], &g);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *gy = &a->in[0], *gx = &a->out[0];
  int64_t n = numel(gx);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  const int64_t *str[1] = {gx->strides};
  walk w = make_walk(gx->ndim, gx->shape, 1, str);
  BY_FLOAT(gx->dtype, k_pad_backward<E><<<blocks(n), kBlock, 0, s>>>(
                          base<typename E::T>(gy), base<typename E::T>(gx), w,
                          n, g));
  return torc_cuda__after_launch(a->device_index, a->op);
}

/* interpolate (backward 0: in x, out y) and its backward (1: in gy, out
 * gx); x / gx is the [N, C, H, W] side. */
int run_interp(const torc_kernel_args *a, int backward) {
  if (a->n_in != 1 || a->n_out != 1 || a->params == NULL ||
      a->params_size < sizeof(torc_interp_params))
    return bad(a, "expected 1 input, 1 output and torc_interp_params");
  const torc_interp_params *p = (const torc_interp_params *)a->params;
  const torc_ktensor *x = backward ? &a->out[0] : &a->in[0];
  const torc_ktensor *y = backward ? &a->in[0] : &a->out[0];
  if (x->ndim != 4 || y->ndim != 4 || x->shape[0] != y->shape[0] ||
      x->shape[1] != y->shape[1] || x->shape[2] < 1 || x->shape[3] < 1 ||
      p->mode < 0 || p->mode > 1 || x->dtype != y->dtype)
    return bad(a, "expected [N, C, H, W] -> [N, C, OH, OW] of one dtype and "
                  "mode 0 or 1");
  interp_geo g = {p->mode, p->align_corners, x->shape[2], x->shape[3],
                  y->shape[2], y->shape[3]};
  const torc_ktensor *walked = backward ? x : y, *other = backward ? y : x;
  int64_t n = numel(walked);
  if (n == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  int64_t os[TORC_KERNEL_MAX_DIMS] = {other->strides[0], other->strides[1], 0,
                                      0};
  const int64_t *str[2] = {walked->strides, os};
  walk w = make_walk(4, walked->shape, 2, str);
  if (!backward) {
    BY_FLOAT(x->dtype, k_interp<E><<<blocks(n), kBlock, 0, s>>>(
                           base<typename E::T>(x), base<typename E::T>(y), w,
                           n, g, x->strides[2], x->strides[3]));
  } else {
    BY_FLOAT(x->dtype, k_interp_backward<E><<<blocks(n), kBlock, 0, s>>>(
                           base<typename E::T>(y), base<typename E::T>(x), w,
                           n, g, y->strides[2], y->strides[3]));
  }
  return torc_cuda__after_launch(a->device_index, a->op);
}

int k_interpolate_op(const torc_kernel_args *a) { return run_interp(a, 0); }
int k_interpolate_backward_op(const torc_kernel_args *a) {
  return run_interp(a, 1);
}

/* topk: in x; out values (x's dtype) and i64 indices, k along dim. */
int k_topk_op(const torc_kernel_args *a) {
  if (a->n_in != 1 || a->n_out != 2 || a->params == NULL ||
      a->params_size < sizeof(torc_topk_params))
    return bad(a, "expected 1 input, 2 outputs and torc_topk_params");
  const torc_topk_params *p = (const torc_topk_params *)a->params;
  const torc_ktensor *x = &a->in[0], *v = &a->out[0], *ix = &a->out[1];
  int d = p->dim, nd = x->ndim;
  if (d < 0 || d >= nd || p->k < 0 || p->k > x->shape[d] ||
      ix->dtype != TORC_I64 || v->dtype != x->dtype || esize(x->dtype) == 0 ||
      x->dtype == TORC_BOOL || v->ndim != nd || ix->ndim != nd)
    return torc_cuda__set_error(TORC_ERR_INTERNAL,
                                "cuda kernel 'topk': bad arguments (dim %d, "
                                "k %lld)",
                                d, (long long)p->k);
  int64_t k = p->k, len = x->shape[d];
  /* The rows (every dim but d), then d last. */
  int64_t sh[TORC_KERNEL_MAX_DIMS], shk[TORC_KERNEL_MAX_DIMS];
  int64_t xs[TORC_KERNEL_MAX_DIMS], x0[TORC_KERNEL_MAX_DIMS];
  int64_t vs[TORC_KERNEL_MAX_DIMS], is[TORC_KERNEL_MAX_DIMS];
  int j = 0;
  int64_t nrows = 1;
  for (int e = 0; e < nd; e++) {
    if (e == d)
      continue;
    if (v->shape[e] != x->shape[e] || ix->shape[e] != x->shape[e])
      return bad(a, "outputs are not the input's shape with k at dim");
    sh[j] = shk[j] = x->shape[e];
    xs[j] = x0[j] = x->strides[e];
    vs[j] = v->strides[e];
    is[j] = ix->strides[e];
    nrows *= x->shape[e];
    j++;
  }
  if (v->shape[d] != k || ix->shape[d] != k)
    return bad(a, "outputs are not the input's shape with k at dim");
  sh[j] = len;
  shk[j] = k;
  xs[j] = x->strides[d];
  x0[j] = 0;
  vs[j] = v->strides[d];
  is[j] = ix->strides[d];
  int64_t n = nrows * len, nk = nrows * k;
  if (nk == 0)
    return TORC_OK;
  cudaStream_t s = torc_cuda__kstream(a);
  if (s == NULL)
    return TORC_ERR_DEVICE;
  size_t temp = 0;
  if (cub::DeviceSegmentedSort::StableSortPairs(
          NULL, temp, (const uint64_t *)NULL, (uint64_t *)NULL,
          (const int64_t *)NULL, (int64_t *)NULL, n, nrows,
          (const int64_t *)NULL, (const int64_t *)NULL, s) != cudaSuccess)
    return torc_cuda__set_error(TORC_ERR_DEVICE,
                                "cuda kernel 'topk': the sort of %lld rows "
                                "of %lld could not be planned",
                                (long long)nrows, (long long)len);
  size_t arr = ((size_t)n * 8 + 255) / 256 * 256;
  size_t offs = ((size_t)(nrows + 1) * 8 + 255) / 256 * 256;
  void *ws = NULL;
  int st = torc_cuda__workspace(a, 4 * arr + offs + temp, &ws);
  if (st != TORC_OK)
    return st;
  char *q = (char *)ws;
  uint64_t *k_in = (uint64_t *)q, *k_out = (uint64_t *)(q + arr);
  int64_t *v_in = (int64_t *)(q + 2 * arr), *v_out = (int64_t *)(q + 3 * arr);
  int64_t *off = (int64_t *)(q + 4 * arr);
  const int64_t *str1[1] = {xs};
  walk w = make_walk(nd, sh, 1, str1);
  int64_t nb = n > nrows + 1 ? n : nrows + 1;
  switch (x->dtype) {
  case TORC_F64: k_topk_keys<e_f64><<<blocks(nb), kBlock, 0, s>>>(
      base<double>(x), w, n, len, p->largest, k_in, v_in, off, nrows); break;
  case TORC_F16: k_topk_keys<e_f16><<<blocks(nb), kBlock, 0, s>>>(
      base<uint16_t>(x), w, n, len, p->largest, k_in, v_in, off, nrows); break;
  case TORC_BF16: k_topk_keys<e_bf16><<<blocks(nb), kBlock, 0, s>>>(
      base<uint16_t>(x), w, n, len, p->largest, k_in, v_in, off, nrows); break;
  case TORC_I32: k_topk_keys<e_i32><<<blocks(nb), kBlock, 0, s>>>(
      base<int32_t>(x), w, n, len, p->largest, k_in, v_in, off, nrows); break;
  case TORC_I64: k_topk_keys<e_i64><<<blocks(nb), kBlock, 0, s>>>(
      base<int64_t>(x), w, n, len, p->largest, k_in, v_in, off, nrows); break;
  case TORC_U8: k_topk_keys<e_u8><<<blocks(nb), kBlock, 0, s>>>(
      base<uint8_t>(x), w, n, len, p->largest, k_in, v_in, off, nrows); break;
  default: k_topk_keys<e_f32><<<blocks(nb), kBlock, 0, s>>>(
      base<float>(x), w, n, len, p->largest, k_in, v_in, off, nrows);
  }
  st = torc_cuda__after_launch(a->device_index, a->op);
  if (st == TORC_OK) {
    cudaError_t e = cub::DeviceSegmentedSort::StableSortPairs(
        q + 4 * arr + offs, temp, k_in, k_out, v_in, v_out, n, nrows,
        (const int64_t *)off, (const int64_t *)off + 1, s);
    if (e != cudaSuccess)
      st = sort_failed(a, e);
  }
  if (st == TORC_OK) {
    const int64_t *str3[3] = {x0, vs, is};
    walk wk = make_walk(nd, shk, 3, str3);
    BY_SIZE(x->dtype, k_topk_out<T><<<blocks(nk), kBlock, 0, s>>>(
                          base<T>(x), base<T>(v), base<int64_t>(ix), wk, nk,
                          k, len, x->strides[d], v_out));
    st = torc_cuda__after_launch(a->device_index, a->op);
  }
  torc_cuda__workspace_done(a, ws);
  return st;
}

struct index_kernel {
  const char *op;
  torc_kernel_fn fn;
  int set; /* 0 every dtype, 1 floats, 2 all but bool */
  uint32_t flags;
};

const index_kernel index_kernels[] = {
    {"gather", k_gather_op, 0, 0},
    {"scatter", k_scatter_op, 0, 0},
    {"index_select", k_index_select_op, 0, 0},
    {"index_add", k_index_add_op, 0, 0},
    {"cumsum", k_cumsum_op, 0, 0},
    {"pad", k_pad_op, 0, 0},
    {"pad_backward", k_pad_backward_op, 1, 0},
    {"interpolate", k_interpolate_op, 1, 0},
    {"interpolate_backward", k_interpolate_backward_op, 1, 0},
    {"topk", k_topk_op, 2, 0},
    {"embedding", k_embedding_op, 1, TORC_KERNEL_CONTIGUOUS},
    {"embedding_backward", k_embedding_backward_op, 1,
     TORC_KERNEL_CONTIGUOUS}};

} // namespace

extern "C" int torc_cuda__register_index(const torc_host *host,
                                         torc_plugin *self) {
  static const int32_t dtypes[] = {TORC_F32, TORC_F64, TORC_F16, TORC_BF16,
                                   TORC_I32, TORC_I64, TORC_U8,  TORC_BOOL};
  const size_t n_ops = sizeof index_kernels / sizeof index_kernels[0];
  for (size_t i = 0; i < n_ops; i++) {
    size_t n_dt = index_kernels[i].set == 1   ? 4
                  : index_kernels[i].set == 2 ? 7
                                              : 8;
    for (size_t j = 0; j < n_dt; j++) {
      int st = torc_cuda__register(host, self, index_kernels[i].op,
                                   dtypes[j], index_kernels[i].fn, 0,
                                   index_kernels[i].flags);
      if (st != TORC_OK)
        return st;
    }
  }
  return TORC_OK;
}
