/* plugins/onednn/pool.c — "max_pool2d", "avg_pool2d" and their backwards
 * for f32; max_pool2d, its backward and avg_pool2d also for bf16 (the
 * backward summing each plane in f32). The 2x2, stride-2 max pool of most
 * CNNs has its own vector loop (oneDNN's plain-layout pooling, its NaN
 * scan and the index conversion took over twice its time). Elsewhere
 * oneDNN's pooling runs where its semantics are torc's (which are PyTorch's):
 *  - max_pool2d: always; its workspace (the argmax's position within the
 *    window, kh * kW + kw, in y's layout) becomes torc's i64 index
 *    ih * W + iw. Ties pick the first maximum, as ref. oneDNN's max
 *    ignores NaNs, which torc (as PyTorch) propagates: an input holding a
 *    NaN (one vectorised scan) runs the loops instead.
 *  - avg_pool2d: without divisor_override, and with count_include_pad only
 *    when no window reaches past the symmetric padding (ceil_mode can make
 *    the last one do so; PyTorch then divides by the clipped window, oneDNN
 *    by the whole kernel).
 * Other cases, and max_pool2d_backward (which gets torc's indices, not
 * oneDNN's workspace), run the plain loops here, parallel over planes.
 * Right paddings below 0 are clipped by viewing x as its first rows, as in
 * conv.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onednn_internal.h"

typedef struct pgeo {
  int64_t NC, N, C, H, W, OH, OW, Hv, Wv;
  int64_t K[2], S[2], PL[2], PR[2], D[2];
  const torc_pool_kparams *p;
  int32_t dt; /* TORC_F32, or TORC_BF16 (max_pool2d and its backward,
              * avg_pool2d through oneDNN) */
} pgeo;

static int pgeo_init(const torc_kernel_args *a, pgeo *g, const torc_ktensor *x,
                     const torc_ktensor *y, const torc_pool_kparams *p) {
  if (x->ndim != 4 || y->ndim != 4 || x->shape[0] != y->shape[0] ||
      x->shape[1] != y->shape[1] || !dnn_float_ok(x->dtype) ||
      y->dtype != x->dtype)
    return torc_dnn__set_error(TORC_ERR_SHAPE,
                               "onednn kernel '%s': input and output must "
                               "both be f32 (or bf16) [N, C, H, W] with "
                               "equal N and C",
                               a->op);
  memset(g, 0, sizeof *g);
  g->dt = x->dtype;
  g->N = x->shape[0], g->C = x->shape[1], g->NC = g->N * g->C;
  g->H = x->shape[2], g->W = x->shape[3];
  g->OH = y->shape[2], g->OW = y->shape[3];
  g->p = p;
  if (p == NULL)
    return TORC_OK;
  int64_t in[2] = {g->H, g->W}, o[2] = {g->OH, g->OW}, v[2];
  for (int i = 0; i < 2; i++) {
    g->K[i] = p->kernel[i], g->S[i] = p->stride[i], g->D[i] = p->dilation[i];
    g->PL[i] = p->padding[i];
    g->PR[i] = (o[i] - 1) * g->S[i] + (g->K[i] - 1) * g->D[i] + 1 - in[i] -
               g->PL[i];
    v[i] = in[i];
    if (g->PR[i] < 0) {
      v[i] = in[i] + g->PR[i];
      g->PR[i] = 0;
    }
  }
  g->Hv = v[0], g->Wv = v[1];
  return TORC_OK;
}

static const torc_pool_kparams *pool_params(const torc_kernel_args *a) {
  const torc_pool_kparams *p = a->params;
  if (p == NULL || a->params_size < sizeof *p) {
    torc_dnn__set_error(TORC_ERR_INTERNAL,
                        "onednn kernel '%s' got no pooling parameters", a->op);
    return NULL;
  }
  return p;
}

/* ---- the oneDNN path ---- */

typedef struct pool_ctx {
  const pgeo *g;
  dnnl_alg_kind_t alg;
  int backward;
} pool_ctx;

static int pool_mds(const pgeo *g, dnnl_memory_desc_t *x,
                    dnnl_memory_desc_t *y) {
  int64_t xd[4] = {g->N, g->C, g->Hv, g->Wv};
  int64_t xs[4] = {g->C * g->H * g->W, g->H * g->W, g->W, 1};
  int64_t yd[4] = {g->N, g->C, g->OH, g->OW};
  int64_t ys[4] = {g->C * g->OH * g->OW, g->OH * g->OW, g->OW, 1};
  int st = torc_dnn__md(x, 4, xd, xs, dnn_dt(g->dt));
  return st == TORC_OK ? torc_dnn__md(y, 4, yd, ys, dnn_dt(g->dt)) : st;
}

static int pool_build(dnn_entry *e, const void *vctx) {
  const pool_ctx *c = vctx;
  const pgeo *g = c->g;
  dnnl_memory_desc_t xm, ym;
  if (pool_mds(g, &xm, &ym) != TORC_OK)
    return torc_dnn__fail("pool", "describing the operands", 0);
  dnnl_dims_t S = {g->S[0], g->S[1]}, K = {g->K[0], g->K[1]};
  dnnl_dims_t D = {g->D[0] - 1, g->D[1] - 1};
  dnnl_dims_t PL = {g->PL[0], g->PL[1]}, PR = {g->PR[0], g->PR[1]};
  dnnl_primitive_attr_t attr;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s != dnnl_success)
    return torc_dnn__fail("pool", "creating an attribute", s);
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  dnnl_pooling_v2_desc_t pd;
  dnnl_primitive_desc_t hint = NULL;
  int is_max = c->alg == dnnl_pooling_max;
  if (s == dnnl_success)
    s = dnnl_pooling_v2_forward_desc_init(
        &pd, is_max ? dnnl_forward_training : dnnl_forward_inference, c->alg,
        &xm, &ym, S, K, D, PL, PR);
  if (s == dnnl_success && c->backward) {
    s = dnnl_primitive_desc_create(&hint, &pd, attr, torc_dnn__engine, NULL);
    if (s == dnnl_success)
      s = dnnl_pooling_v2_backward_desc_init(&pd, c->alg, &xm, &ym, S, K, D,
                                             PL, PR);
  }
  if (s == dnnl_success)
    s = dnnl_primitive_desc_create(&e->pd, &pd, attr, torc_dnn__engine, hint);
  if (hint)
    dnnl_primitive_desc_destroy(hint);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success)
    return TORC_ERR_UNSUPPORTED; /* the loops run it: no error recorded */
  int st;
  if (!c->backward) {
    st = torc_dnn__entry_arg(e, DNNL_ARG_SRC, &xm, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_DST, &ym, 1);
    if (st == TORC_OK && is_max) {
      /* The workspace must be y's dense layout in u8 or s32. */
      const dnnl_memory_desc_t *w =
          dnnl_primitive_desc_query_md(e->pd, dnnl_query_workspace_md, 0);
      dnnl_memory_desc_t want;
      int64_t yd[4] = {g->N, g->C, g->OH, g->OW};
      int64_t ys[4] = {g->C * g->OH * g->OW, g->OH * g->OW, g->OW, 1};
      if (w == NULL || (w->data_type != dnnl_u8 && w->data_type != dnnl_s32) ||
          torc_dnn__md(&want, 4, yd, ys, w->data_type) != TORC_OK ||
          !dnnl_memory_desc_equal(w, &want))
        return TORC_ERR_UNSUPPORTED;
      e->aux[0] = w->data_type == dnnl_u8 ? 1 : 4;
      st = torc_dnn__entry_arg(e, DNNL_ARG_WORKSPACE, NULL, 1);
    }
  } else {
    st = torc_dnn__entry_arg(e, DNNL_ARG_DIFF_DST, &ym, 0);
    if (st == TORC_OK)
      st = torc_dnn__entry_arg(e, DNNL_ARG_DIFF_SRC, &xm, 1);
  }
  return st == TORC_OK ? torc_dnn__entry_finish(e) : st;
}

/* Runs the oneDNN pooling; TORC_ERR_UNSUPPORTED (no error set) when oneDNN
 * has no primitive for it. The max's indices go to ix. */
static int pool_dnn(const torc_kernel_args *a, const pgeo *g,
                    dnnl_alg_kind_t alg, int backward, void *src, void *dst,
                    const torc_ktensor *ix) {
  dnn_key key;
  memset(&key, 0, sizeof key);
  key.op = backward ? DNN_OP_POOL_BWD : DNN_OP_POOL_FWD;
  key.n_threads = torc_dnn__threads(a->n_threads);
  int64_t v[] = {g->N,     g->C,     g->H,     g->W,     g->OH,    g->OW,
                 g->Hv,    g->Wv,    g->K[0],  g->K[1],  g->S[0],  g->S[1],
                 g->PL[0], g->PL[1], g->PR[0], g->PR[1], g->D[0],  g->D[1],
                 (int64_t)alg, g->dt};
  memcpy(key.v, v, sizeof v);
  pool_ctx c = {g, alg, backward};
  torc_dnn__lock();
  dnn_entry *e = torc_dnn__cache_get(&key, pool_build, &c);
  int st = TORC_ERR_UNSUPPORTED;
  if (e && !e->unsupported) {
    void *ptrs[3] = {src, dst, NULL};
    st = torc_dnn__run(e, ptrs);
    if (st == TORC_OK && ix) {
      /* window position k -> ih * W + iw = the window's corner + off[k] */
      const void *ws = torc_dnn__arg_buffer(e, DNNL_ARG_WORKSPACE);
      int64_t *out = (int64_t *)ix->data + ix->offset;
      int64_t OH = g->OH, OW = g->OW, W = g->W, nk = g->K[0] * g->K[1];
      int64_t off_small[64], *off = off_small;
      if (nk > 64 && (off = malloc(sizeof *off * (size_t)nk)) == NULL)
        st = torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
      for (int64_t k = 0; off && k < nk; k++)
        off[k] = (k / g->K[1]) * g->D[0] * W + (k % g->K[1]) * g->D[1];
      int u8 = e->aux[0] == 1;
      int64_t sw = g->S[1];
#pragma omp parallel for schedule(static) if (off)
      for (int64_t nc = 0; nc < (off ? g->NC : 0); nc++)
        for (int64_t oh = 0; oh < OH; oh++) {
          int64_t base = (nc * OH + oh) * OW;
          int64_t corner = (oh * g->S[0] - g->PL[0]) * W - g->PL[1];
          int64_t *o = out + base;
          if (u8) {
            const uint8_t *k = (const uint8_t *)ws + base;
            for (int64_t ow = 0; ow < OW; ow++)
              o[ow] = corner + ow * sw + off[k[ow]];
          } else {
            const int32_t *k = (const int32_t *)ws + base;
            for (int64_t ow = 0; ow < OW; ow++)
              o[ow] = corner + ow * sw + off[k[ow]];
          }
        }
      if (off != off_small)
        free(off);
    }
  }
  torc_dnn__unlock();
  return st;
}

/* ---- the loops (ref's definitions, in float, parallel over planes) ---- */

static void max_loops(const pgeo *g, const float *x, float *y, int64_t *ix) {
  const torc_pool_kparams *p = g->p;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < g->NC; nc++)
    for (int64_t oh = 0; oh < g->OH; oh++)
      for (int64_t ow = 0; ow < g->OW; ow++) {
        float best = -INFINITY;
        int64_t bi = -1;
        for (int64_t kh = 0; kh < p->kernel[0]; kh++) {
          int64_t ih = oh * p->stride[0] - p->padding[0] + kh * p->dilation[0];
          if (ih < 0 || ih >= g->H)
            continue;
          for (int64_t kw = 0; kw < p->kernel[1]; kw++) {
            int64_t iw =
                ow * p->stride[1] - p->padding[1] + kw * p->dilation[1];
            if (iw < 0 || iw >= g->W)
              continue;
            float v = x[(nc * g->H + ih) * g->W + iw];
            if (bi < 0)
              bi = ih * g->W + iw;
            if (v > best || v != v) {
              best = v, bi = ih * g->W + iw;
              if (v != v)
                goto found;
            }
          }
        }
      found:;
        int64_t yi = (nc * g->OH + oh) * g->OW + ow;
        y[yi] = bi < 0 ? -INFINITY : best;
        ix[yi] = bi < 0 ? 0 : bi;
      }
}

/* The 2x2, stride-2 max pool whose windows all lie in the image (the
 * nn.MaxPool2d(2) of nearly every CNN), four outputs at a time in vectors
 * (GCC's and clang's vector extensions): each output's four taps in ref's
 * order and with its NaN rule, selected without branches; a row's last
 * outputs are its last four again (overlapping), or, in a row under four,
 * come from a padded copy. */
typedef float mp_f4 __attribute__((vector_size(16)));
typedef int32_t mp_i4 __attribute__((vector_size(16)));

static inline void mp_take(mp_f4 *best, mp_i4 *k, mp_f4 v, int32_t kv) {
  mp_i4 t = (*best == *best) & ((v > *best) | (v != v));
  mp_i4 kvv = {kv, kv, kv, kv};
  *best = (mp_f4)(((mp_i4)v & t) | ((mp_i4)*best & ~t));
  *k = (kvv & t) | (*k & ~t);
}

/* Eight elements of a row as two f32 vectors: f32, or bf16 widened
 * (exact: its bits are an f32's upper half). */
typedef uint16_t mp_h4 __attribute__((vector_size(8)));
typedef uint32_t mp_u4 __attribute__((vector_size(16)));

static inline void mp_load8(const void *r, int bf, mp_f4 *lo, mp_f4 *hi) {
  if (!bf) {
    memcpy(lo, r, 16), memcpy(hi, (const float *)r + 4, 16);
    return;
  }
  mp_h4 a, b;
  memcpy(&a, r, 8), memcpy(&b, (const uint16_t *)r + 4, 8);
  *lo = (mp_f4)(__builtin_convertvector(a, mp_u4) << 16);
  *hi = (mp_f4)(__builtin_convertvector(b, mp_u4) << 16);
}

/* Four outputs to y (f32, or bf16: each a tap, so its upper half is
 * exact). */
static inline void mp_store4(void *y, int bf, mp_f4 v) {
  if (!bf) {
    memcpy(y, &v, 16);
    return;
  }
  mp_h4 h = __builtin_convertvector((mp_u4)v >> 16, mp_h4);
  memcpy(y, &h, 8);
}

/* outputs [0, 4) of the windows whose rows start at r0 and r1 (8
 * elements each, f32 or bf16); the winners' taps (0, 1, W, W + 1) in k. */
static inline mp_f4 mp_four(const void *r0, const void *r1, int bf,
                            int32_t W, mp_i4 *k) {
  mp_f4 t0, t1, b0, b1;
  mp_load8(r0, bf, &t0, &t1);
  mp_load8(r1, bf, &b0, &b1);
  mp_f4 best = __builtin_shufflevector(t0, t1, 0, 2, 4, 6);
  *k = (mp_i4){0, 0, 0, 0};
  mp_take(&best, k, __builtin_shufflevector(t0, t1, 1, 3, 5, 7), 1);
  mp_take(&best, k, __builtin_shufflevector(b0, b1, 0, 2, 4, 6), W);
  mp_take(&best, k, __builtin_shufflevector(b0, b1, 1, 3, 5, 7), W + 1);
  return best;
}

/* x, y: f32, or bf16 (g->dt). */
static void max_2x2(const pgeo *g, const void *xv, void *yv, int64_t *ix) {
  const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW;
  const int bf = g->dt == TORC_BF16;
  const size_t es = bf ? 2 : 4;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t nc = 0; nc < g->NC; nc++)
    for (int64_t oh = 0; oh < OH; oh++) {
      const char *x0 = (const char *)xv + (size_t)((nc * H + 2 * oh) * W) * es;
      const char *x1 = x0 + (size_t)W * es;
      char *yr = (char *)yv + (size_t)((nc * OH + oh) * OW) * es;
      int64_t *ir = ix + (nc * OH + oh) * OW, corner = 2 * oh * W;
      mp_i4 k;
      mp_f4 best;
      if (OW >= 4) {
        for (int64_t ow = 0; ow < OW; ow += 4) {
          int64_t o = ow + 4 <= OW ? ow : OW - 4; /* the last four again */
          best = mp_four(x0 + (size_t)(2 * o) * es, x1 + (size_t)(2 * o) * es,
                         bf, (int32_t)W, &k);
          mp_store4(yr + (size_t)o * es, bf, best);
          for (int l = 0; l < 4; l++)
            ir[o + l] = corner + 2 * (o + l) + k[l];
        }
      } else {
        char p0[32] = {0}, p1[32] = {0}, yp[16];
        memcpy(p0, x0, (size_t)(2 * OW) * es);
        memcpy(p1, x1, (size_t)(2 * OW) * es);
        best = mp_four(p0, p1, bf, (int32_t)W, &k);
        mp_store4(yp, bf, best);
        memcpy(yr, yp, (size_t)OW * es);
        for (int64_t l = 0; l < OW; l++)
          ir[l] = corner + 2 * l + k[l];
      }
    }
}

/* 1 when max_2x2 computes g's pool. */
static int is_2x2(const pgeo *g) {
  return g->K[0] == 2 && g->K[1] == 2 && g->S[0] == 2 &&
         g->S[1] == 2 && g->D[0] == 1 && g->D[1] == 1 && g->PL[0] == 0 &&
         g->PL[1] == 0 && 2 * g->OH <= g->H && 2 * g->OW <= g->W &&
         g->W < INT32_MAX;
}

/* PyTorch's avg_pool2d window of output (oh, ow), clipped, and divisor. */
static void avg_window(const torc_pool_kparams *p, int64_t H, int64_t W,
                       int64_t oh, int64_t ow, int64_t *h0, int64_t *h1,
                       int64_t *w0, int64_t *w1, float *div) {
  int64_t hs = oh * p->stride[0] - p->padding[0];
  int64_t ws = ow * p->stride[1] - p->padding[1];
  int64_t he = hs + p->kernel[0], we = ws + p->kernel[1];
  if (he > H + p->padding[0])
    he = H + p->padding[0];
  if (we > W + p->padding[1])
    we = W + p->padding[1];
  int64_t pool = (he - hs) * (we - ws);
  *h0 = hs < 0 ? 0 : hs, *w0 = ws < 0 ? 0 : ws;
  *h1 = he > H ? H : he, *w1 = we > W ? W : we;
  if (p->divisor)
    *div = (float)p->divisor;
  else if (p->count_include_pad)
    *div = (float)pool;
  else
    *div = (float)((*h1 - *h0) * (*w1 - *w0));
}

static void avg_loops(const pgeo *g, const float *x, float *y) {
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < g->NC; nc++)
    for (int64_t oh = 0; oh < g->OH; oh++)
      for (int64_t ow = 0; ow < g->OW; ow++) {
        int64_t h0, h1, w0, w1;
        float div, sum = 0;
        avg_window(g->p, g->H, g->W, oh, ow, &h0, &h1, &w0, &w1, &div);
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++)
            sum += x[(nc * g->H + ih) * g->W + iw];
        y[(nc * g->OH + oh) * g->OW + ow] = sum / div;
      }
}

static void avg_bw_loops(const pgeo *g, const float *gy, float *gx) {
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < g->NC; nc++) {
    float *plane = gx + nc * g->H * g->W;
    memset(plane, 0, sizeof(float) * (size_t)(g->H * g->W));
    for (int64_t oh = 0; oh < g->OH; oh++)
      for (int64_t ow = 0; ow < g->OW; ow++) {
        int64_t h0, h1, w0, w1;
        float div;
        avg_window(g->p, g->H, g->W, oh, ow, &h0, &h1, &w0, &w1, &div);
        float v = gy[(nc * g->OH + oh) * g->OW + ow] / div;
        for (int64_t ih = h0; ih < h1; ih++)
          for (int64_t iw = w0; iw < w1; iw++)
            plane[ih * g->W + iw] += v;
      }
  }
}

/* ---- the kernels ---- */

static int check_io(const torc_kernel_args *a, int n_in, int n_out) {
  if (a->n_in != n_in || a->n_out != n_out)
    return torc_dnn__set_error(TORC_ERR_INTERNAL,
                               "onednn kernel '%s' got %d inputs and %d "
                               "outputs (expected %d and %d)",
                               a->op, a->n_in, a->n_out, n_in, n_out);
  return TORC_OK;
}

/* 1 when x[0, n) holds a NaN. */
static int has_nan(const float *x, int64_t n) {
  int nan = 0;
#pragma omp parallel for simd schedule(static) reduction(| : nan)
  for (int64_t i = 0; i < n; i++)
    nan |= x[i] != x[i];
  return nan;
}

/* 1 when the bf16 x[0, n) holds a NaN. */
static int has_nan_bf16(const uint16_t *x, int64_t n) {
  int nan = 0;
#pragma omp parallel for simd schedule(static) reduction(| : nan)
  for (int64_t i = 0; i < n; i++)
    nan |= (x[i] & 0x7fff) > 0x7f80;
  return nan;
}

/* in x; out y, indices (i64, ih * W + iw). */
int torc_dnn__k_max_pool2d(const torc_kernel_args *a) {
  int st = check_io(a, 1, 2);
  const torc_pool_kparams *p = st ? NULL : pool_params(a);
  if (p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0], *ix = &a->out[1];
  pgeo g;
  if ((st = pgeo_init(a, &g, x, y, p)) != TORC_OK)
    return st;
  if (ix->dtype != TORC_I64 || dnn_numel(ix, 0) != dnn_numel(y, 0))
    return torc_dnn__set_error(TORC_ERR_SHAPE,
                               "onednn kernel 'max_pool2d': the indices must "
                               "be i64 of y's shape");
  if (dnn_numel(y, 0) == 0)
    return TORC_OK;
  torc_dnn__threads(a->n_threads);
  if (is_2x2(&g)) {
    max_2x2(&g, dnn_at(x, 0), dnn_at(y, 0), (int64_t *)ix->data + ix->offset);
    return TORC_OK;
  }
  int nan = g.dt == TORC_BF16 ? has_nan_bf16(dnn_at(x, 0), dnn_numel(x, 0))
                              : has_nan(dnn_f32(x, 0), dnn_numel(x, 0));
  if (g.Hv > 0 && g.Wv > 0 && !nan) {
    st = pool_dnn(a, &g, dnnl_pooling_max, 0, dnn_at(x, 0), dnn_at(y, 0),
                  ix);
    if (st != TORC_ERR_UNSUPPORTED)
      return st;
  }
  if (g.dt == TORC_BF16) /* the loops are f32's: ref serves the rest */
    return TORC_KERNEL_DECLINED;
  max_loops(&g, dnn_f32(x, 0), dnn_f32(y, 0), (int64_t *)ix->data + ix->offset);
  return TORC_OK;
}

/* The largest plane max_pool2d_backward sums on the stack in bf16. */
enum { MP_PLANE = 4096 };

/* in gy, indices; out gx (zeroed, then each gy added at its index). */
int torc_dnn__k_max_pool2d_backward(const torc_kernel_args *a) {
  int st = check_io(a, 2, 1);
  if (st != TORC_OK)
    return st;
  const torc_ktensor *gy = &a->in[0], *ix = &a->in[1], *gx = &a->out[0];
  pgeo g;
  if ((st = pgeo_init(a, &g, gx, gy, NULL)) != TORC_OK)
    return st;
  if (ix->dtype != TORC_I64 || dnn_numel(ix, 0) != dnn_numel(gy, 0))
    return torc_dnn__set_error(TORC_ERR_SHAPE,
                               "onednn kernel 'max_pool2d_backward': the "
                               "indices must be i64 of gy's shape");
  int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  const int64_t *ip = (const int64_t *)ix->data + ix->offset;
  int bad = 0;
  torc_dnn__threads(a->n_threads);
  if (g.dt == TORC_BF16) {
    /* bf16: each plane summed in f32 (windows may overlap), rounded once */
    const uint16_t *gyp = dnn_at(gy, 0);
    uint16_t *gxp = dnn_at(gx, 0);
    int oom = 0;
#pragma omp parallel for schedule(static) reduction(| : bad, oom)
    for (int64_t nc = 0; nc < g.NC; nc++) {
      float small[MP_PLANE];
      float *plane =
          HW <= MP_PLANE ? small : malloc(sizeof(float) * (size_t)HW);
      if (plane == NULL) {
        oom = 1;
        continue;
      }
      memset(plane, 0, sizeof(float) * (size_t)HW);
      for (int64_t o = 0; o < OHW; o++) {
        int64_t k = ip[nc * OHW + o];
        if (k < 0 || k >= HW)
          bad = 1;
        else
          plane[k] += dnn_bf16_to_f32(gyp[nc * OHW + o]);
      }
      uint16_t *out = gxp + nc * HW;
      for (int64_t i = 0; i < HW; i++)
        out[i] = dnn_f32_to_bf16(plane[i]);
      if (plane != small)
        free(plane);
    }
    if (oom)
      return torc_dnn__set_error(TORC_ERR_OOM,
                                 "onednn kernel 'max_pool2d_backward': out "
                                 "of memory for a plane of %lld",
                                 (long long)HW);
  } else {
    const float *gyp = dnn_f32(gy, 0);
    float *gxp = dnn_f32(gx, 0);
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (int64_t nc = 0; nc < g.NC; nc++) {
      float *plane = gxp + nc * HW;
      memset(plane, 0, sizeof(float) * (size_t)HW);
      for (int64_t o = 0; o < OHW; o++) {
        int64_t k = ip[nc * OHW + o];
        if (k < 0 || k >= HW)
          bad = 1;
        else
          plane[k] += gyp[nc * OHW + o];
      }
    }
  }
  if (bad)
    return torc_dnn__set_error(TORC_ERR_RANGE,
                               "onednn kernel 'max_pool2d_backward': an "
                               "index lies outside the %lld positions of a "
                               "plane",
                               (long long)HW);
  return TORC_OK;
}

/* The oneDNN algorithm for avg_pool2d, or 0 when its divisor differs. */
static dnnl_alg_kind_t avg_alg(const pgeo *g) {
  const torc_pool_kparams *p = g->p;
  if (p->divisor || g->Hv <= 0 || g->Wv <= 0)
    return (dnnl_alg_kind_t)0;
  if (!p->count_include_pad)
    return dnnl_pooling_avg_exclude_padding;
  if (g->PR[0] > g->PL[0] || g->PR[1] > g->PL[1])
    return (dnnl_alg_kind_t)0;
  return dnnl_pooling_avg_include_padding;
}

int torc_dnn__k_avg_pool2d(const torc_kernel_args *a) {
  int st = check_io(a, 1, 1);
  const torc_pool_kparams *p = st ? NULL : pool_params(a);
  if (p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *x = &a->in[0], *y = &a->out[0];
  pgeo g;
  if ((st = pgeo_init(a, &g, x, y, p)) != TORC_OK)
    return st;
  if (dnn_numel(y, 0) == 0)
    return TORC_OK;
  dnnl_alg_kind_t alg = avg_alg(&g);
  if (alg) {
    st = pool_dnn(a, &g, alg, 0, dnn_at(x, 0), dnn_at(y, 0), NULL);
    if (st != TORC_ERR_UNSUPPORTED)
      return st;
  }
  if (g.dt == TORC_BF16)
    return TORC_KERNEL_DECLINED;
  torc_dnn__threads(a->n_threads);
  avg_loops(&g, dnn_f32(x, 0), dnn_f32(y, 0));
  return TORC_OK;
}

int torc_dnn__k_avg_pool2d_backward(const torc_kernel_args *a) {
  int st = check_io(a, 1, 1);
  const torc_pool_kparams *p = st ? NULL : pool_params(a);
  if (p == NULL)
    return st ? st : TORC_ERR_INTERNAL;
  const torc_ktensor *gy = &a->in[0], *gx = &a->out[0];
  pgeo g;
  if ((st = pgeo_init(a, &g, gx, gy, p)) != TORC_OK)
    return st;
  int64_t nx = dnn_numel(gx, 0);
  if (nx == 0)
    return TORC_OK;
  dnnl_alg_kind_t alg = dnn_numel(gy, 0) ? avg_alg(&g) : (dnnl_alg_kind_t)0;
  if (alg) {
    if (g.Hv < g.H || g.Wv < g.W)
      memset(dnn_f32(gx, 0), 0, sizeof(float) * (size_t)nx);
    st = pool_dnn(a, &g, alg, 1, dnn_f32(gy, 0), dnn_f32(gx, 0), NULL);
    if (st != TORC_ERR_UNSUPPORTED)
      return st;
  }
  torc_dnn__threads(a->n_threads);
  avg_bw_loops(&g, dnn_f32(gy, 0), dnn_f32(gx, 0));
  return TORC_OK;
}
