/* plugins/onednn/fused.c — the fused inference kernels "linear_act" and
 * "conv2d_act" (torc/plugin.h) for f32: a planned forward's linear layer
 * and its activation as one oneDNN matmul, and its convolution, activation
 * and max pool as one oneDNN chain that never leaves oneDNN's blocked
 * layout until the pooled (4x smaller) result.
 *
 * linear_act: y [M, N] = act(x [M, K] w [K, N] + b) through a cached
 * matmul primitive with the bias (oneDNN's brgemm kernels), x and w read
 * through their strides (a linear layer's weight [N, K] read transposed).
 * Where oneDNN would not run its brgemm kernels (no AVX-512) the kernel
 * declines, and the cpu plugin's GEMM serves linear_act.
 * Constant weights (TORC_FUSED_CONST_WEIGHTS: a frozen plan's) are packed
 * once into the primitive's own layout and kept with its cache entry,
 * repacked when another w or weights_id comes: one copy per entry.
 * oneDNN's relu post-op is max(v, 0), which turns NaN into 0; the relu op
 * keeps NaN, so the activation is a pass over y here, NaN kept (y is small
 * and still in cache).
 *
 * conv2d_act: y = maxpool(act(conv2d(x, w) + b)), the pool optional. Per
 * chunk of DNN_ACT_CHUNK images: the convolution writes oneDNN's blocked
 * layout (nChw16c here) with the bias, then the pool and the relu: with a
 * pool over that layout, direct.c's torc_dnn__pool_blocked, which keeps
 * NaN as torc's ops do (the "own pool" chain); otherwise (no pool, or
 * another layout, e.g. nChw8c on AVX2) the relu as a post-op, a oneDNN
 * pooling primitive, and one reorder to torc's NCHW y. The intermediates
 * live in the plugin's arena and, a chunk at a time, in cache. oneDNN's
 * relu post-op and max pooling both drop NaN (relu(NaN) = 0, a window's
 * NaN loses to its numbers), so for the second kind each chunk's x is
 * scanned just before its convolution (which then reads it from cache),
 * and a chunk holding a NaN or an infinity goes to direct.c's exact
 * kernel; where that kernel cannot serve the geometry (groups, O not a
 * multiple of 16) the call is declined after one scan, and ref's
 * composition serves it exactly. A w or b holding one is declined in any
 * case. Finite operands give NaN only through float overflow (inf - inf
 * in a sum), which the second kind may then lose.
 * A convolution with few input taps (C x kH x kW <= DNN_FEW_TAPS: a first
 * layer) goes to direct.c's kernel whole: there oneDNN is bound by the
 * memory its full-size intermediate takes, and the direct kernel keeps
 * everything in L1 up to the pooled result.
 * x and y may come in blocks of 16 channels (x_blocked, y_blocked: a plan
 * passing a tensor between two conv2d_act calls): x then needs no reorder
 * and the last primitive writes y itself.
 * Geometry (groups, stride, padding, dilation; the pool's kernel, stride,
 * padding, dilation and ceil_mode, through y's sizes) is conv.c's and
 * pool.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "onednn_internal.h"

/* Images one conv2d_act chain runs at a time: the blocked convolution and
 * pool outputs of a chunk (32 images of 32 x 28 x 28 f32 = 3.2 MB) then
 * stay in cache between the primitives. */
enum { DNN_ACT_CHUNK = 32 };

/* y[0, n) = relu(y) with the relu op's NaN rule (relu(NaN) = NaN). */
static void relu_keep_nan(float *y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; i++)
    y[i] = y[i] > 0 || y[i] != y[i] ? y[i] : 0.0f;
}

/* 1 when the contiguous x[0, n) holds a NaN or an infinity. */
static int has_nonfinite(const float *x, int64_t n) {
  int bad = 0;
#pragma omp parallel for simd schedule(static) reduction(| : bad) if (n > 32768)
  for (int64_t i = 0; i < n; i++)
    bad |= !(x[i] - x[i] == 0.0f); /* inf - inf and NaN are NaN */
  return bad;
}

static int act_known(int32_t act) {
  return act == TORC_ACT_NONE || act == TORC_ACT_RELU;
}

/* ---- linear_act ---- */

/* x [M, K] and w [K, N] with their element strides, b [N] (stride bs);
 * const_w: the weights are constant (TORC_FUSED_CONST_WEIGHTS), so the
 * primitive takes them in its own layout, packed once. */
typedef struct lgeo {
  int64_t M, K, N, xs[2], ws[2], bs;
  int bias, const_w;
} lgeo;

/* A constant weight packed into the matmul's layout: the reorder from
 * torc's w (wu) into buf (wp), and which w and weights_id buf holds. */
typedef struct packed_w {
  dnnl_memory_t wu, wp;
  dnnl_primitive_t re;
  void *buf;
  const void *src;
  uint64_t id;
} packed_w;

static void packed_free(void *v) {
  packed_w *pw = v;
  if (pw == NULL)
    return;
  if (pw->re)
    dnnl_primitive_destroy(pw->re);
  if (pw->wu)
    dnnl_memory_destroy(pw->wu);
  if (pw->wp)
    dnnl_memory_destroy(pw->wp);
  free(pw->buf);
  free(pw);
}

/* The packed weight of entry e for weights md wm (the primitive's own
 * layout pm): e->ext, made here. */
static int packed_new(dnn_entry *e, const dnnl_memory_desc_t *wm,
                      const dnnl_memory_desc_t *pm) {
  packed_w *pw = calloc(1, sizeof *pw);
  size_t bytes = dnnl_memory_desc_get_size(pm);
  if (pw)
    pw->buf = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (pw == NULL || pw->buf == NULL) {
    packed_free(pw);
    return torc_dnn__set_error(TORC_ERR_OOM,
                               "onednn kernel 'linear_act': out of memory "
                               "for a packed weight of %zu bytes",
                               bytes);
  }
  e->ext = pw;
  e->ext_free = packed_free;
  dnnl_primitive_desc_t rpd;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(
      &rpd, wm, torc_dnn__engine, pm, torc_dnn__engine, NULL);
  if (s == dnnl_success) {
    s = dnnl_primitive_create(&pw->re, rpd);
    dnnl_primitive_desc_destroy(rpd);
  }
  if (s == dnnl_success)
    s = dnnl_memory_create(&pw->wu, wm, torc_dnn__engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success)
    s = dnnl_memory_create(&pw->wp, pm, torc_dnn__engine, pw->buf);
  return s == dnnl_success ? TORC_OK : TORC_ERR_UNSUPPORTED;
}

/* Packs w (at w_ptr, weights_id id) into e's packed weight unless it
 * holds it already; the packed buffer's address. */
static void *packed_get(dnn_entry *e, const void *w_ptr, uint64_t id,
                        int *st) {
  packed_w *pw = e->ext;
  if (pw->src == w_ptr && pw->id == id)
    return pw->buf;
  dnnl_status_t s = dnnl_memory_set_data_handle_v2(pw->wu, (void *)w_ptr,
                                                   torc_dnn__stream);
  dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, pw->wu}, {DNNL_ARG_TO, pw->wp}};
  if (s == dnnl_success)
    s = dnnl_primitive_execute(pw->re, torc_dnn__stream, 2, ra);
  if (s == dnnl_success)
    s = dnnl_stream_wait(torc_dnn__stream);
  if (s != dnnl_success) {
    pw->src = NULL;
    *st = torc_dnn__fail("linear_act", "packing the weight", s);
    return NULL;
  }
  pw->src = w_ptr, pw->id = id;
  return pw->buf;
}

static int linear_build(dnn_entry *e, const void *vctx) {
  const lgeo *g = vctx;
  /* Size-1 dims get the strides oneDNN's plain-layout checks accept. */
  int64_t xs[2] = {g->xs[0], g->xs[1]}, ws[2] = {g->ws[0], g->ws[1]};
  int64_t bs = g->bs;
  if (g->K == 1)
    xs[1] = 1, ws[0] = g->N;
  if (g->M == 1)
    xs[0] = g->K * xs[1];
  if (g->N == 1)
    ws[1] = 1, bs = 1;
  int64_t xd[2] = {g->M, g->K}, wd[2] = {g->K, g->N}, yd[2] = {g->M, g->N};
  int64_t ys[2] = {g->N, 1}, bd[2] = {1, g->N}, bst[2] = {g->N * bs, bs};
  dnnl_memory_desc_t xm, wm, bm, ym;
  if (torc_dnn__md(&xm, 2, xd, xs, dnnl_f32) != TORC_OK ||
      torc_dnn__md(&wm, 2, wd, ws, dnnl_f32) != TORC_OK ||
      torc_dnn__md(&bm, 2, bd, bst, dnnl_f32) != TORC_OK ||
      torc_dnn__md(&ym, 2, yd, ys, dnnl_f32) != TORC_OK)
    return TORC_ERR_UNSUPPORTED;
  dnnl_primitive_attr_t attr;
  dnnl_status_t s = dnnl_primitive_attr_create(&attr);
  if (s != dnnl_success)
    return torc_dnn__fail("linear_act", "creating an attribute", s);
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  /* constant weights: in the layout the primitive likes best */
  dnnl_memory_desc_t wany = wm;
  dnnl_dims_t wdims = {g->K, g->N};
  if (s == dnnl_success && g->const_w)
    s = dnnl_memory_desc_init_by_tag(&wany, 2, wdims, dnnl_f32,
                                     dnnl_format_tag_any);
  dnnl_matmul_desc_t md;
  if (s == dnnl_success)
    s = dnnl_matmul_desc_init(&md, &xm, &wany, g->bias ? &bm : NULL, &ym);
  if (s == dnnl_success)
    s = dnnl_primitive_desc_create(&e->pd, &md, attr, torc_dnn__engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (s != dnnl_success)
    return TORC_ERR_UNSUPPORTED; /* declined: ref serves it */
  /* oneDNN's matmul is worth it where it runs its brgemm kernels
   * (AVX-512 and newer); elsewhere (an AVX2 machine, valgrind's CPU) the
   * cpu plugin's GEMM serves linear_act as fast or faster */
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(e->pd, dnnl_query_impl_info_str, 0, &impl) !=
          dnnl_success ||
      impl == NULL || strncmp(impl, "brg", 3) != 0)
    return TORC_ERR_UNSUPPORTED;
  const dnnl_memory_desc_t *pm =
      dnnl_primitive_desc_query_md(e->pd, dnnl_query_weights_md, 0);
  int st = TORC_OK;
  if (g->const_w && !dnnl_memory_desc_equal(pm, &wm))
    st = packed_new(e, &wm, pm); /* the weights arg is then the packed one */
  if (st == TORC_OK)
    st = torc_dnn__entry_arg(e, DNNL_ARG_SRC, &xm, 0);
  if (st == TORC_OK)
    st = torc_dnn__entry_arg(e, DNNL_ARG_WEIGHTS, e->ext ? pm : &wm, 0);
  if (st == TORC_OK && g->bias)
    st = torc_dnn__entry_arg(e, DNNL_ARG_BIAS, &bm, 0);
  if (st == TORC_OK)
    st = torc_dnn__entry_arg(e, DNNL_ARG_DST, &ym, 1);
  return st == TORC_OK ? torc_dnn__entry_finish(e) : st;
}

/* 1 when t is an f32 matrix whose dims of more than one element have
 * positive strides (what a oneDNN memory descriptor can say), or an empty
 * one (never read). */
static int matrix_ok(const torc_ktensor *t) {
  if (t->ndim != 2 || t->dtype != TORC_F32)
    return 0;
  if (t->shape[0] == 0 || t->shape[1] == 0)
    return 1;
  for (int d = 0; d < 2; d++)
    if (t->shape[d] > 1 && t->strides[d] < 1)
      return 0;
  return 1;
}

/* in x [M, K], w [K, N] (strided), optionally b [N]; out y [M, N]
 * (contiguous). Anything else is declined: ref's kernel serves it, or
 * reports what is wrong. */
int torc_dnn__k_linear_act(const torc_kernel_args *a) {
  const torc_linear_act_kparams *p = a->params;
  if ((a->n_in != 2 && a->n_in != 3) || a->n_out != 1 || p == NULL ||
      a->params_size < sizeof *p || !act_known(p->act))
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  const torc_ktensor *b = a->n_in == 3 ? &a->in[2] : NULL;
  if (!matrix_ok(x) || !matrix_ok(w) || y->ndim != 2 || y->dtype != TORC_F32)
    return TORC_KERNEL_DECLINED;
  lgeo g = {.M = y->shape[0], .K = x->shape[1], .N = y->shape[1]};
  if (x->shape[0] != g.M || w->shape[0] != g.K || w->shape[1] != g.N ||
      (g.M > 1 && y->strides[0] != g.N) || (g.N > 1 && y->strides[1] != 1))
    return TORC_KERNEL_DECLINED;
  if (b && (b->ndim != 1 || b->dtype != TORC_F32 || b->shape[0] != g.N ||
            (g.N > 1 && b->strides[0] < 1)))
    return TORC_KERNEL_DECLINED;
  if (g.M == 0 || g.N == 0)
    return TORC_OK;
  float *yp = dnn_f32(y, 0);
  int n_threads = torc_dnn__threads(a->n_threads);
  if (g.K == 0) { /* an empty sum: y = b (or 0) */
    for (int64_t m = 0; m < g.M; m++)
      for (int64_t n = 0; n < g.N; n++)
        yp[m * g.N + n] = b ? *dnn_f32(b, n * b->strides[0]) : 0.0f;
  } else {
    g.xs[0] = x->strides[0], g.xs[1] = x->strides[1];
    g.ws[0] = w->strides[0], g.ws[1] = w->strides[1];
    g.bs = b ? b->strides[0] : 0;
    g.bias = b != NULL;
    g.const_w = (p->flags & TORC_FUSED_CONST_WEIGHTS) != 0;
    dnn_key key;
    memset(&key, 0, sizeof key);
    key.op = DNN_OP_LINEAR_ACT;
    key.n_threads = n_threads;
    int64_t v[] = {g.M,     g.K,     g.N,  g.xs[0], g.xs[1],
                   g.ws[0], g.ws[1], g.bs, g.bias,  g.const_w};
    memcpy(key.v, v, sizeof v);
    torc_dnn__lock();
    dnn_entry *e = torc_dnn__cache_get(&key, linear_build, &g);
    void *ptrs[4] = {dnn_f32(x, 0), dnn_f32(w, 0), b ? dnn_f32(b, 0) : yp, yp};
    int st = e == NULL        ? TORC_ERR_PLUGIN
             : e->unsupported ? TORC_KERNEL_DECLINED
                              : TORC_OK;
    if (st == TORC_OK && e->ext)
      ptrs[1] = packed_get(e, ptrs[1], p->weights_id, &st);
    if (st == TORC_OK)
      st = torc_dnn__run(e, ptrs);
    torc_dnn__unlock();
    if (st != TORC_OK)
      return st;
  }
  if (p->act == TORC_ACT_RELU)
    relu_keep_nan(yp, g.M * g.N);
  return TORC_OK;
}

/* ---- conv2d_act ---- */

typedef dnn_act_geo cgeo;

/* A cached chain: reorders of x and w into the convolution's layouts
 * (NULL when it takes torc's), the convolution, the pool (or NULL) and
 * the reorder of its output to torc's y. The buffers of the chain sit in
 * the arena at the offsets below; the two primitives share one
 * scratchpad region. */
typedef struct chain {
  int y_direct; /* the last primitive writes y itself (no yre) */
  /* The convolution writes nChw16c without the relu, and direct.c's
   * torc_dnn__pool_blocked pools it (relu after, NaN kept) into y: no
   * pool primitive, no yre, and no scan of x needed. */
  int own_pool;
  dnnl_primitive_t xre, wre, conv, pool, yre;
  dnnl_memory_t xu, xp, wu, wp, b, cd, pd, yu, cscr, pscr;
  size_t x_off, w_off, cd_off, pd_off, scr_off, bytes;
} chain;

static void chain_free(void *v) {
  chain *c = v;
  if (c == NULL)
    return;
  dnnl_primitive_t prims[] = {c->xre, c->wre, c->conv, c->pool, c->yre};
  for (size_t i = 0; i < sizeof prims / sizeof prims[0]; i++)
    if (prims[i])
      dnnl_primitive_destroy(prims[i]);
  dnnl_memory_t mems[] = {c->xu, c->xp, c->wu, c->wp,   c->b,
                          c->cd, c->pd, c->yu, c->cscr, c->pscr};
  for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
    if (mems[i])
      dnnl_memory_destroy(mems[i]);
  free(c);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* A memory of md in the arena at the chain's next offset (*off). */
static dnnl_status_t arena_mem(chain *c, dnnl_memory_t *m,
                               const dnnl_memory_desc_t *md, size_t *off) {
  *off = c->bytes;
  c->bytes += align64(dnnl_memory_desc_get_size(md));
  return dnnl_memory_create(m, md, torc_dnn__engine, DNNL_MEMORY_NONE);
}

/* A reorder src -> dst into *r. */
static dnnl_status_t reorder(dnnl_primitive_t *r, const dnnl_memory_desc_t *src,
                             const dnnl_memory_desc_t *dst) {
  dnnl_primitive_desc_t rpd;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(
      &rpd, src, torc_dnn__engine, dst, torc_dnn__engine, NULL);
  if (s == dnnl_success) {
    s = dnnl_primitive_create(r, rpd);
    dnnl_primitive_desc_destroy(rpd);
  }
  return s;
}

/* An attribute with a user scratchpad and, for relu, the relu post-op. */
static dnnl_status_t act_attr(dnnl_primitive_attr_t *attr, int relu) {
  dnnl_status_t s = dnnl_primitive_attr_create(attr);
  if (s != dnnl_success)
    return s;
  s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success && relu) {
    dnnl_post_ops_t po;
    s = dnnl_post_ops_create(&po);
    if (s == dnnl_success) {
      s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
      if (s == dnnl_success)
        s = dnnl_primitive_attr_set_post_ops(*attr, po);
      dnnl_post_ops_destroy(po);
    }
  }
  if (s != dnnl_success)
    dnnl_primitive_attr_destroy(*attr);
  return s;
}

/* The convolution's pd, its source in layout src (torc's or "any"), its
 * weights and destination in whatever oneDNN prefers. */
static dnnl_status_t conv_act_pd(dnnl_primitive_desc_t *pd, const cgeo *cg,
                                 const dnn_conv_mds *user,
                                 const dnnl_memory_desc_t *src, int relu) {
  const dnn_conv_geo *g = &cg->g;
  dnnl_memory_desc_t wany, dany;
  dnnl_memory_desc_init_by_tag(&wany, user->w.ndims, user->w.dims, dnnl_f32,
                               dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&dany, 4, user->y.dims, dnnl_f32,
                               dnnl_format_tag_any);
  dnnl_dims_t S = {g->S[0], g->S[1]}, D = {g->D[0] - 1, g->D[1] - 1};
  dnnl_dims_t PL = {g->PL[0], g->PL[1]}, PR = {g->PR[0], g->PR[1]};
  dnnl_alg_kind_t alg =
      torc_dnn__conv_auto ? dnnl_convolution_auto : dnnl_convolution_direct;
  /* forward_training although nothing trains: for it oneDNN 2.6 picks
   * its jit nChw16c kernels here, for inference brgconv in NHWC, which
   * measured slower (conv 1 -> 32 on 28x28: 16 against 12 ms a batch of
   * 1000 with the pool). No workspace either way. */
  dnnl_convolution_desc_t cd;
  dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(
      &cd, dnnl_forward_training, alg, src, &wany, g->bias ? &user->b : NULL,
      &dany, S, D, PL, PR);
  dnnl_primitive_attr_t attr;
  if (s == dnnl_success &&
      (s = act_attr(&attr, relu)) == dnnl_success) {
    s = dnnl_primitive_desc_create(pd, &cd, attr, torc_dnn__engine, NULL);
    dnnl_primitive_attr_destroy(attr);
  }
  return s;
}

/* The pool's pd over the convolution's output layout cmd. */
static dnnl_status_t pool_act_pd(dnnl_primitive_desc_t *pd, const cgeo *cg,
                                 const dnnl_memory_desc_t *cmd) {
  dnnl_memory_desc_t dany;
  dnnl_dims_t yd = {cg->g.N, cg->g.O, cg->PH, cg->PW};
  dnnl_memory_desc_init_by_tag(&dany, 4, yd, dnnl_f32, dnnl_format_tag_any);
  dnnl_dims_t S = {cg->S[0], cg->S[1]}, K = {cg->K[0], cg->K[1]};
  dnnl_dims_t D = {cg->D[0] - 1, cg->D[1] - 1};
  dnnl_dims_t PL = {cg->PL[0], cg->PL[1]}, PR = {cg->PR[0], cg->PR[1]};
  dnnl_pooling_v2_desc_t d;
  dnnl_status_t s = dnnl_pooling_v2_forward_desc_init(
      &d, dnnl_forward_inference, dnnl_pooling_max, cmd, &dany, S, K, D, PL,
      PR);
  dnnl_primitive_attr_t attr;
  if (s == dnnl_success && (s = act_attr(&attr, 0)) == dnnl_success) {
    s = dnnl_primitive_desc_create(pd, &d, attr, torc_dnn__engine, NULL);
    dnnl_primitive_attr_destroy(attr);
  }
  return s;
}

/* The scratchpad size of pd (0 when it needs none). */
static size_t scratch_size(dnnl_primitive_desc_t pd,
                           const dnnl_memory_desc_t **md) {
  *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  return *md && (*md)->ndims > 0 ? dnnl_memory_desc_get_size(*md) : 0;
}

static int conv_act_build(dnn_entry *e, const void *vctx) {
  const cgeo *cg = vctx;
  const dnn_conv_geo *g = &cg->g;
  chain *c = calloc(1, sizeof *c);
  if (c == NULL)
    return torc_dnn__set_error(TORC_ERR_OOM, "onednn: out of memory");
  e->ext = c;
  e->ext_free = chain_free;
  dnn_conv_mds user;
  if (torc_dnn__conv_mds(g, &user) != TORC_OK)
    return TORC_ERR_UNSUPPORTED;
  if (cg->x_blocked) {
    dnnl_dims_t xd = {g->N, g->C, g->H, g->W};
    if (dnnl_memory_desc_init_by_tag(&user.x, 4, xd, dnnl_f32,
                                     dnnl_nChw16c) != dnnl_success)
      return TORC_ERR_UNSUPPORTED;
  }
  /* x in the layout oneDNN prefers (a reorder per chunk), else torc's. */
  dnnl_memory_desc_t xany;
  dnnl_memory_desc_init_by_tag(&xany, 4, user.x.dims, dnnl_f32,
                               dnnl_format_tag_any);
  /* With a pool over 16-channel blocks: the convolution alone, its
   * output pooled by torc_dnn__pool_blocked where it comes in nChw16c. */
  dnnl_status_t s = dnnl_invalid_arguments;
  if (cg->has_pool && g->O % 16 == 0 &&
      (s = conv_act_pd(&e->pd, cg, &user, &xany, 0)) == dnnl_success) {
    dnnl_memory_desc_t b16;
    dnnl_dims_t cdims = {g->N, g->O, g->OH, g->OW};
    c->own_pool =
        dnnl_memory_desc_init_by_tag(&b16, 4, cdims, dnnl_f32, dnnl_nChw16c) ==
            dnnl_success &&
        dnnl_memory_desc_equal(
            dnnl_primitive_desc_query_md(e->pd, dnnl_query_dst_md, 0), &b16);
    if (!c->own_pool) {
      dnnl_primitive_desc_destroy(e->pd);
      e->pd = NULL;
      s = dnnl_invalid_arguments;
    }
  }
  int relu = cg->act == TORC_ACT_RELU;
  if (s != dnnl_success)
    s = conv_act_pd(&e->pd, cg, &user, &xany, relu);
  if (s != dnnl_success)
    s = conv_act_pd(&e->pd, cg, &user, &user.x, relu);
  if (s != dnnl_success)
    return TORC_ERR_UNSUPPORTED; /* declined: ref serves it */
  dnnl_primitive_desc_query(e->pd, dnnl_query_impl_info_str, 0, &e->impl);
  const dnnl_memory_desc_t *xmd =
      dnnl_primitive_desc_query_md(e->pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *wmd =
      dnnl_primitive_desc_query_md(e->pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *cmd =
      dnnl_primitive_desc_query_md(e->pd, dnnl_query_dst_md, 0);
  dnnl_primitive_desc_t ppd = NULL;
  if (cg->has_pool && !c->own_pool && pool_act_pd(&ppd, cg, cmd) != dnnl_success)
    return TORC_ERR_UNSUPPORTED;
  const dnnl_memory_desc_t *omd =
      ppd ? dnnl_primitive_desc_query_md(ppd, dnnl_query_dst_md, 0) : cmd;
  dnnl_memory_desc_t ymd;
  int64_t yd[4] = {g->N, g->O, cg->PH, cg->PW};
  int64_t ys[4] = {g->O * cg->PH * cg->PW, cg->PH * cg->PW, cg->PW, 1};
  if (torc_dnn__md(&ymd, 4, yd, ys, dnnl_f32) != TORC_OK)
    s = dnnl_invalid_arguments;
  dnnl_dims_t ydims = {g->N, g->O, cg->PH, cg->PW};
  if (s == dnnl_success && cg->y_blocked)
    s = dnnl_memory_desc_init_by_tag(&ymd, 4, ydims, dnnl_f32, dnnl_nChw16c);
  /* y in the layout the last primitive writes: it writes y itself */
  c->y_direct = s == dnnl_success && !c->own_pool &&
                dnnl_memory_desc_equal(omd, &ymd);
  /* The user-side memories (handles set per run), then the arena's. */
  if (s == dnnl_success)
    s = dnnl_memory_create(&c->xu, &user.x, torc_dnn__engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success)
    s = dnnl_memory_create(&c->wu, &user.w, torc_dnn__engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success)
    s = dnnl_memory_create(&c->b, &user.b, torc_dnn__engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success)
    s = dnnl_memory_create(&c->yu, &ymd, torc_dnn__engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success && !dnnl_memory_desc_equal(xmd, &user.x) &&
      (s = arena_mem(c, &c->xp, xmd, &c->x_off)) == dnnl_success)
    s = reorder(&c->xre, &user.x, xmd);
  if (s == dnnl_success && !dnnl_memory_desc_equal(wmd, &user.w) &&
      (s = arena_mem(c, &c->wp, wmd, &c->w_off)) == dnnl_success)
    s = reorder(&c->wre, &user.w, wmd);
  if (s == dnnl_success)
    s = arena_mem(c, &c->cd, cmd, &c->cd_off);
  if (s == dnnl_success && ppd)
    s = arena_mem(c, &c->pd, omd, &c->pd_off);
  if (s == dnnl_success && !c->y_direct && !c->own_pool)
    s = reorder(&c->yre, omd, &ymd);
  /* One scratchpad region, the larger of the two primitives'. */
  const dnnl_memory_desc_t *csm = NULL, *psm = NULL;
  size_t cs = scratch_size(e->pd, &csm), ps = ppd ? scratch_size(ppd, &psm) : 0;
  c->scr_off = c->bytes;
  c->bytes += align64(cs > ps ? cs : ps);
  if (s == dnnl_success && cs)
    s = dnnl_memory_create(&c->cscr, csm, torc_dnn__engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success && ps)
    s = dnnl_memory_create(&c->pscr, psm, torc_dnn__engine, DNNL_MEMORY_NONE);
  if (s == dnnl_success)
    s = dnnl_primitive_create(&c->conv, e->pd);
  if (s == dnnl_success && ppd)
    s = dnnl_primitive_create(&c->pool, ppd);
  if (ppd)
    dnnl_primitive_desc_destroy(ppd);
  if (s != dnnl_success)
    return torc_dnn__fail("conv2d_act", "creating the primitives", s);
  e->arena_bytes = c->bytes;
  return TORC_OK;
}

/* Sets m's handle to p (m NULL: nothing to do). */
static dnnl_status_t handle(dnnl_memory_t m, void *p) {
  return m ? dnnl_memory_set_data_handle_v2(m, p, torc_dnn__stream)
           : dnnl_success;
}

static dnnl_status_t exec(dnnl_primitive_t p, int n,
                          const dnnl_exec_arg_t *args) {
  return dnnl_primitive_execute(p, torc_dnn__stream, n, args);
}

/* Runs chain e over images [n0, n0 + chunks * e's N) of x into y; w's
 * reorder runs first, once. With direct (direct.c's scratch bytes, 0 when
 * it cannot serve cg) each chunk's x is scanned first, in cache for the
 * convolution after, and a chunk holding a NaN or an infinity goes to
 * direct.c's exact kernel instead. */
static int chain_run(const dnn_entry *e, const cgeo *cg, const float *x,
                     const float *w, const float *b, float *y, int64_t n0,
                     int64_t chunks, size_t direct) {
  const chain *c = e->ext;
  char *ar = torc_dnn__arena(c->bytes + direct);
  if (ar == NULL)
    return TORC_ERR_OOM;
  const dnn_conv_geo *g = &cg->g;
  dnnl_status_t s = handle(c->wu, (void *)w);
  if (s == dnnl_success)
    s = handle(c->wp, ar + c->w_off);
  if (s == dnnl_success)
    s = handle(c->b, (void *)(b ? b : w));
  if (s == dnnl_success)
    s = handle(c->xp, ar + c->x_off);
  if (s == dnnl_success)
    s = handle(c->cd, ar + c->cd_off);
  if (s == dnnl_success)
    s = handle(c->pd, ar + c->pd_off);
  if (s == dnnl_success)
    s = handle(c->cscr, ar + c->scr_off);
  if (s == dnnl_success)
    s = handle(c->pscr, ar + c->scr_off);
  if (s == dnnl_success && c->wre)
    s = exec(c->wre, 2,
             (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, c->wu}, {DNNL_ARG_TO, c->wp}});
  int64_t xn = g->C * g->H * g->W, yn = g->O * cg->PH * cg->PW;
  for (int64_t k = 0; k < chunks && s == dnnl_success; k++) {
    int64_t n = n0 + k * g->N;
    if (direct && !c->own_pool && has_nonfinite(x + n * xn, g->N * xn)) {
      torc_dnn__direct_run(cg, x, w, b, y, n, g->N, ar + c->bytes);
      continue;
    }
    s = handle(c->xu, (void *)(x + n * xn));
    if (s == dnnl_success)
      s = handle(c->yu, y + n * yn);
    if (s == dnnl_success && c->y_direct)
      s = handle(c->pool ? c->pd : c->cd, y + n * yn);
    if (s == dnnl_success && c->xre)
      s = exec(
          c->xre, 2,
          (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, c->xu}, {DNNL_ARG_TO, c->xp}});
    dnnl_exec_arg_t ca[5] = {{DNNL_ARG_SRC, c->xp ? c->xp : c->xu},
                             {DNNL_ARG_WEIGHTS, c->wp ? c->wp : c->wu},
                             {DNNL_ARG_DST, c->cd}};
    int nc = 3;
    if (g->bias)
      ca[nc++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, c->b};
    if (c->cscr)
      ca[nc++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->cscr};
    if (s == dnnl_success)
      s = exec(c->conv, nc, ca);
    if (s == dnnl_success && c->own_pool) {
      /* oneDNN's stream is in order on the calling thread: the
       * convolution is done when execute returns (a CPU engine) */
      s = dnnl_stream_wait(torc_dnn__stream);
      if (s == dnnl_success)
        torc_dnn__pool_blocked(cg, (const float *)(ar + c->cd_off), y, n,
                               g->N);
      continue;
    }
    if (s == dnnl_success && c->pool) {
      dnnl_exec_arg_t pa[3] = {{DNNL_ARG_SRC, c->cd},
                               {DNNL_ARG_DST, c->pd},
                               {DNNL_ARG_SCRATCHPAD, c->pscr}};
      s = exec(c->pool, c->pscr ? 3 : 2, pa);
    }
    if (s == dnnl_success && !c->y_direct)
      s = exec(c->yre, 2,
               (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, c->pool ? c->pd : c->cd},
                                   {DNNL_ARG_TO, c->yu}});
  }
  if (s == dnnl_success)
    s = dnnl_stream_wait(torc_dnn__stream);
  return s == dnnl_success
             ? TORC_OK
             : torc_dnn__fail("conv2d_act", "executing the chain", s);
}

static void cgeo_key(dnn_key *k, const cgeo *cg, int n_threads) {
  const dnn_conv_geo *g = &cg->g;
  memset(k, 0, sizeof *k);
  k->op = DNN_OP_CONV_ACT;
  k->n_threads = n_threads;
  int64_t v[] = {g->N,     g->C,         g->H,      g->W,     g->O,
                 g->kH,    g->kW,        g->G,      g->S[0],  g->S[1],
                 g->PL[0], g->PL[1],     g->D[0],   g->D[1],  g->bias,
                 cg->act,  cg->has_pool, cg->K[0],  cg->K[1], cg->S[0],
                 cg->S[1], cg->PL[0],    cg->PL[1], cg->D[0], cg->D[1],
                 cg->PH,   cg->PW,       cg->x_blocked, cg->y_blocked};
  memcpy(k->v, v, sizeof v);
}

/* Fills cg's pool from params q for the convolution's output OH x OW and
 * y's PH x PW; 0 when oneDNN cannot be asked for it. The right padding
 * follows from y's sizes (ceil_mode only changed them), as in pool.c. */
static int pool_geo(cgeo *cg, const torc_pool_kparams *q) {
  int64_t in[2] = {cg->g.OH, cg->g.OW}, o[2] = {cg->PH, cg->PW};
  for (int i = 0; i < 2; i++) {
    if (q->kernel[i] < 1 || q->stride[i] < 1 || q->dilation[i] < 1 ||
        q->padding[i] < 0 || q->kernel[i] > 4096 || q->dilation[i] > 4096 ||
        q->padding[i] > 4096 || q->stride[i] > 4096)
      return 0;
    cg->K[i] = q->kernel[i], cg->S[i] = q->stride[i];
    cg->D[i] = q->dilation[i], cg->PL[i] = q->padding[i];
    int64_t span = (cg->K[i] - 1) * cg->D[i] + 1;
    int64_t room = in[i] + 2 * cg->PL[i] - span;
    /* y's size lies between the floor- and ceil-mode sizes */
    if (room < 0 || o[i] < room / cg->S[i] + 1 ||
        o[i] > (room + cg->S[i] - 1) / cg->S[i] + 1)
      return 0;
    cg->PR[i] = (o[i] - 1) * cg->S[i] + span - in[i] - cg->PL[i];
  }
  return 1;
}

/* in x [N, C, H, W], w [O, C / groups, kH, kW] (, b [O]); out y [N, O,
 * PH, PW] (the pool's sizes, or the convolution's). Contiguous (the
 * registration asks). What this kernel cannot run exactly is declined:
 * ref's composition serves it, or reports what is wrong. */
int torc_dnn__k_conv2d_act(const torc_kernel_args *a) {
  const torc_conv_act_kparams *p = a->params;
  if ((a->n_in != 2 && a->n_in != 3) || a->n_out != 1 || p == NULL ||
      a->params_size < sizeof *p || !act_known(p->act) ||
      (p->has_pool != 0 && p->has_pool != 1))
    return TORC_KERNEL_DECLINED;
  const torc_ktensor *x = &a->in[0], *w = &a->in[1], *y = &a->out[0];
  const torc_ktensor *b = a->n_in == 3 ? &a->in[2] : NULL;
  int64_t G = p->conv.groups;
  if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || G < 1 ||
      x->dtype != TORC_F32 || w->dtype != TORC_F32 || y->dtype != TORC_F32 ||
      x->shape[1] % G || w->shape[0] % G || w->shape[1] * G != x->shape[1] ||
      y->shape[0] != x->shape[0] || y->shape[1] != w->shape[0] ||
      (b &&
       (b->ndim != 1 || b->dtype != TORC_F32 || b->shape[0] != w->shape[0])))
    return TORC_KERNEL_DECLINED;
  /* The convolution's output sizes, as conv2d's shape rule gives them. */
  torc_ktensor mid = *y;
  for (int d = 0; d < 2; d++) {
    const torc_conv_kparams *q = &p->conv;
    if (q->stride[d] < 1 || q->dilation[d] < 1 || q->padding[d] < 0)
      return TORC_KERNEL_DECLINED;
    int64_t eff = q->dilation[d] * (w->shape[2 + d] - 1) + 1;
    int64_t span = x->shape[2 + d] + 2 * q->padding[d] - eff;
    if (span < 0)
      return TORC_KERNEL_DECLINED;
    mid.shape[2 + d] = span / q->stride[d] + 1;
  }
  if (!p->has_pool &&
      (mid.shape[2] != y->shape[2] || mid.shape[3] != y->shape[3]))
    return TORC_KERNEL_DECLINED;
  cgeo cg;
  memset(&cg, 0, sizeof cg);
  if (torc_dnn__conv_geo(a, &cg.g, x, w, &mid) != TORC_OK)
    return TORC_ERR_SHAPE; /* (checked above: not reached) */
  cg.g.bias = b != NULL;
  cg.act = p->act;
  cg.has_pool = p->has_pool;
  cg.x_blocked = p->x_blocked != 0, cg.y_blocked = p->y_blocked != 0;
  /* blocks of 16 channels over whole images only (no clipped rows) */
  if ((cg.x_blocked && (cg.g.C % 16 || cg.g.Hv != cg.g.H ||
                        cg.g.Wv != cg.g.W)) ||
      (cg.y_blocked && cg.g.O % 16))
    return TORC_KERNEL_DECLINED;
  cg.PH = y->shape[2], cg.PW = y->shape[3];
  if (cg.has_pool && !pool_geo(&cg, &p->pool))
    return TORC_KERNEL_DECLINED;
  if (dnn_numel(y, 0) == 0)
    return TORC_OK;
  if (cg.g.C == 0 || cg.g.Hv <= 0 || cg.g.Wv <= 0)
    return TORC_KERNEL_DECLINED; /* nothing to convolve: ref fills y */
  int n_threads = torc_dnn__threads(a->n_threads);
  const float *xp = dnn_f32(x, 0), *wp = dnn_f32(w, 0);
  const float *bp = b ? dnn_f32(b, 0) : NULL;
  float *yp = dnn_f32(y, 0);
  /* NaN/inf (see the file's comment): in w or b, declined (the direct
   * kernel multiplies the padding by w, where ref skips it); in x, per
   * chunk to direct.c's kernel, or declined where it cannot serve. */
  if (has_nonfinite(wp, dnn_numel(w, 0)) || (bp && has_nonfinite(bp, cg.g.O)))
    return TORC_KERNEL_DECLINED;
  size_t direct = torc_dnn__direct_bytes(&cg);
  if (direct && !cg.x_blocked &&
      cg.g.C * cg.g.kH * cg.g.kW <= DNN_FEW_TAPS) {
    /* a first layer's few input taps: direct.c's kernel (NaN kept) */
    torc_dnn__lock();
    void *scratch = torc_dnn__arena(direct);
    if (scratch)
      torc_dnn__direct_run(&cg, xp, wp, bp, yp, 0, cg.g.N, scratch);
    torc_dnn__unlock();
    return scratch ? TORC_OK : TORC_ERR_OOM;
  }
  /* The whole chunks, then the rest: both chains are looked up first, so
   * that neither is built after the other ran (a decline then still has
   * written nothing). */
  int64_t N = cg.g.N, full = N / DNN_ACT_CHUNK, rest = N % DNN_ACT_CHUNK;
  cgeo cf = cg, cr = cg;
  cf.g.N = DNN_ACT_CHUNK, cr.g.N = rest;
  dnn_key kf, kr;
  cgeo_key(&kf, &cf, n_threads);
  cgeo_key(&kr, &cr, n_threads);
  torc_dnn__lock();
  dnn_entry *ef = full ? torc_dnn__cache_get(&kf, conv_act_build, &cf) : NULL;
  dnn_entry *er = rest && (full == 0 || ef)
                      ? torc_dnn__cache_get(&kr, conv_act_build, &cr)
                      : NULL;
  int st = TORC_OK;
  if ((full && ef == NULL) || (rest && er == NULL))
    st = TORC_ERR_PLUGIN;
  else if ((ef && ef->unsupported) || (er && er->unsupported))
    st = TORC_KERNEL_DECLINED;
  /* x holding NaN or an infinity where no chain keeps it and direct.c's
   * kernel cannot take its chunks: declined, before anything is written */
  int keeps = st == TORC_OK &&
              (ef == NULL || ((const chain *)ef->ext)->own_pool) &&
              (er == NULL || ((const chain *)er->ext)->own_pool);
  if (st == TORC_OK && !keeps && direct == 0 &&
      has_nonfinite(xp, dnn_numel(x, 0)))
    st = TORC_KERNEL_DECLINED;
  if (st == TORC_OK && ef)
    st = chain_run(ef, &cf, xp, wp, bp, yp, 0, full, direct);
  if (st == TORC_OK && er)
    st = chain_run(er, &cr, xp, wp, bp, yp, full * DNN_ACT_CHUNK, 1, direct);
  torc_dnn__unlock();
  return st;
}
