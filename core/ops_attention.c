/* core/ops_attention.c — attention and the masks it is built with: tril,
 * triu, masked_fill and scaled_dot_product_attention. Each op checks its
 * inputs (messages name the shapes involved), allocates the outputs, calls
 * the kernel and records its node (derivatives_attn.c).
 */
#include <math.h>
#include <stdio.h>

#include "attn_internal.h"

#define SHP(t, buf) torc__shape_str((t)->shape, (t)->ndim, buf, sizeof buf)

/* ---- tril, triu ---- */

static torc_tensor *tri(const char *fn, const torc_tensor *x,
                        int64_t diagonal, int upper, int track) {
  char bx[128];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (x->ndim < 2) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: x must have at least 2 dims (the matrix is the last "
                   "two), got shape %s; for a vector make a matrix with "
                   "torc_unsqueeze first",
                   fn, SHP(x, bx));
    return NULL;
  }
  torc_tensor *out = torc__empty(x->shape, x->ndim, x->dtype,
                                 x->storage->device);
  torc_scalar_params p = {0, 0, diagonal, 0, (uint32_t)upper, 0};
  if (out == NULL ||
      (torc__numel(x->shape, x->ndim) > 0 &&
       torc__kernel_call(upper ? TORC__OP_triu : TORC__OP_tril, x->dtype, &x,
                         1, &out, 1, &p, sizeof p)) ||
      (track && torc__attn_record(upper ? TORC__ATTN_TRIU : TORC__ATTN_TRIL,
                                  &x, 1, NULL, 0, &diagonal, sizeof diagonal,
                                  out))) {
    torc_release(out);
    return NULL;
  }
  return out;
}

torc_tensor *torc__tri(const torc_tensor *x, int64_t diagonal, int upper) {
  return tri(upper ? "torc_triu" : "torc_tril", x, diagonal, upper, 0);
}

torc_tensor *torc_tril(const torc_tensor *x, int64_t diagonal) {
  return torc__ret(tri("torc_tril", x, diagonal, 0, 1));
}

torc_tensor *torc_triu(const torc_tensor *x, int64_t diagonal) {
  return torc__ret(tri("torc_triu", x, diagonal, 1, 1));
}

/* ---- masked_fill ---- */

/* 1 if shape s (n dims) broadcasts to t (tn dims) without changing t. */
static int broadcasts_to(const int64_t *s, int n, const int64_t *t, int tn) {
  if (n > tn)
    return 0;
  for (int i = 0; i < n; i++) {
    int64_t a = s[n - 1 - i], b = t[tn - 1 - i];
    if (a != b && a != 1)
      return 0;
  }
  return 1;
}

static torc_tensor *masked_fill(const torc_tensor *x, const torc_tensor *mask,
                                double value, int track) {
  const char *fn = "torc_masked_fill";
  char bx[128], bm[128];
  if (x == NULL || mask == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (mask->dtype != TORC_BOOL) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the mask is %s; it must be bool (make one with a "
                   "comparison such as torc_gt, or cast with "
                   "torc_to_dtype(mask, TORC_BOOL))",
                   fn, torc_dtype_name(mask->dtype));
    return NULL;
  }
  if (!broadcasts_to(mask->shape, mask->ndim, x->shape, x->ndim)) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the mask %s does not broadcast to x %s; each of its "
                   "trailing dims must equal x's or be 1",
                   fn, SHP(mask, bm), SHP(x, bx));
    return NULL;
  }
  const torc_tensor *pair[2] = {x, mask};
  if (torc__same_device(fn, pair, 2))
    return NULL;
  if (!torc_dtype_is_float(x->dtype) && x->dtype != TORC_BOOL &&
      !(value >= -9.2e18 && value <= 9.2e18)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: value %g does not fit x's dtype %s; give a finite "
                   "value in its range",
                   fn, value, torc_dtype_name(x->dtype));
    return NULL;
  }
  torc_tensor *me = torc__expand(mask, x->shape, x->ndim);
  if (me == NULL)
    return NULL;
  torc_tensor *out = torc__empty(x->shape, x->ndim, x->dtype,
                                 x->storage->device);
  torc_fill_params p = {value, 0};
  p.ivalue = x->dtype == TORC_BOOL ? value != 0 : (int64_t)value;
  const torc_tensor *in[2] = {x, me};
  if (out == NULL ||
      (torc__numel(x->shape, x->ndim) > 0 &&
       torc__kernel_call(TORC__OP_masked_fill, x->dtype, in, 2, &out, 1, &p,
                         sizeof p)) ||
      (track && torc__attn_record(TORC__ATTN_MASKED_FILL, &x, 1, &in[1], 1,
                                  NULL, 0, out))) {
    torc_release(out);
    out = NULL;
  }
  torc_release(me);
  return out;
}

torc_tensor *torc__masked_fill(const torc_tensor *x, const torc_tensor *mask,
                               double value) {
  return masked_fill(x, mask, value, 0);
}

torc_tensor *torc_masked_fill(const torc_tensor *x, const torc_tensor *mask,
                              double value) {
  return torc__ret(masked_fill(x, mask, value, 1));
}

/* ---- scaled_dot_product_attention ---- */

/* q, k, v: one floating dtype, the same rank >= 2 and batch dims, q's and
 * k's last dims equal, k's and v's sequence lengths equal. */
static torc_status check_qkv(const char *fn, const torc_tensor *q,
                             const torc_tensor *k, const torc_tensor *v) {
  char bq[128], bk[128], bv[128];
  if (!torc_dtype_is_float(q->dtype) || k->dtype != q->dtype ||
      v->dtype != q->dtype)
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: q, k and v are %s, %s and %s; they must have "
                          "one floating dtype (cast with torc_to_dtype)",
                          fn, torc_dtype_name(q->dtype),
                          torc_dtype_name(k->dtype),
                          torc_dtype_name(v->dtype));
  const torc_tensor *all[3] = {q, k, v};
  torc_status st = torc__same_device(fn, all, 3);
  if (st)
    return st;
  int nd = q->ndim;
  if (nd < 2 || k->ndim != nd || v->ndim != nd ||
      memcmp(q->shape, k->shape, sizeof(int64_t) * (size_t)(nd - 2)) ||
      memcmp(q->shape, v->shape, sizeof(int64_t) * (size_t)(nd - 2)))
    return torc_set_error(
        TORC_ERR_SHAPE,
        "%s: q %s, k %s and v %s must be [..., L, E], [..., S, E] and "
        "[..., S, Ev] with the same number of dims (at least 2) and the "
        "same batch dims",
        fn, SHP(q, bq), SHP(k, bk), SHP(v, bv));
  if (q->shape[nd - 1] != k->shape[nd - 1])
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: q %s and k %s must have the same last dim "
                          "(the embedding E: %lld vs %lld)",
                          fn, SHP(q, bq), SHP(k, bk),
                          (long long)q->shape[nd - 1],
                          (long long)k->shape[nd - 1]);
  if (k->shape[nd - 2] != v->shape[nd - 2])
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: k %s and v %s must have the same sequence "
                          "length S (dim -2: %lld vs %lld)",
                          fn, SHP(k, bk), SHP(v, bv),
                          (long long)k->shape[nd - 2],
                          (long long)v->shape[nd - 2]);
  return TORC_OK;
}

/* The mask: bool or q's dtype, broadcastable to [B..., L, S] (ss). */
static torc_status check_mask(const char *fn, const torc_tensor *m,
                              const torc_tensor *q, const int64_t *ss,
                              int nd) {
  char bm[128], bs[128];
  if (m->dtype != TORC_BOOL && m->dtype != q->dtype)
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: attn_mask is %s; it must be bool (true: the "
                          "key takes part) or q's dtype %s (added to the "
                          "scores)",
                          fn, torc_dtype_name(m->dtype),
                          torc_dtype_name(q->dtype));
  if (!broadcasts_to(m->shape, m->ndim, ss, nd))
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: attn_mask %s does not broadcast to the "
                          "scores' shape %s ([..., L, S])",
                          fn, SHP(m, bm), torc__shape_str(ss, nd, bs,
                                                          sizeof bs));
  const torc_tensor *pair[2] = {q, m};
  return torc__same_device(fn, pair, 2);
}

static torc_tensor *sdpa(const torc_tensor *q, const torc_tensor *k,
                         const torc_tensor *v, const torc_tensor *mask,
                         double dropout_p, int is_causal, double scale,
                         torc_generator *gen) {
  const char *fn = "torc_scaled_dot_product_attention";
  if (q == NULL || k == NULL || v == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (check_qkv(fn, q, k, v))
    return NULL;
  int nd = q->ndim;
  int64_t L = q->shape[nd - 2], E = q->shape[nd - 1], S = k->shape[nd - 2];
  int64_t ss[TORC_MAX_DIMS], os[TORC_MAX_DIMS];
  memcpy(ss, q->shape, sizeof(int64_t) * (size_t)nd);
  ss[nd - 1] = S;
  memcpy(os, q->shape, sizeof(int64_t) * (size_t)nd);
  os[nd - 1] = v->shape[nd - 1];
  if (mask && is_causal) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: attn_mask and is_causal are both set; give one of "
                   "them (as PyTorch): fold the causal mask into attn_mask "
                   "with torc_tril, or pass attn_mask NULL",
                   fn);
    return NULL;
  }
  if (mask && check_mask(fn, mask, q, ss, nd))
    return NULL;
  if (!(dropout_p >= 0 && dropout_p <= 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: dropout_p is %g; it must be in [0, 1]", fn,
                   dropout_p);
    return NULL;
  }
  if (isnan(scale) || isinf(scale)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: scale is %g; give a finite factor, or 0 for the "
                   "default 1/sqrt(E)",
                   fn, scale);
    return NULL;
  }
  torc_attention_kparams p;
  memset(&p, 0, sizeof p);
  p.scale = scale != 0 ? scale : 1.0 / sqrt((double)E);
  p.dropout_p = dropout_p;
  p.is_causal = is_causal != 0;
  p.has_mask = mask != NULL;
  int64_t B = torc__numel(q->shape, nd - 2);
  if (dropout_p > 0)
    torc__generator_take(gen, (uint64_t)(B * L * S), &p.seed, &p.offset);
  torc_dtype ldt = q->dtype == TORC_F64 ? TORC_F64 : TORC_F32;
  torc_device dev = q->storage->device;
  /* q, k, v row-major (views such as a [B, L, H, E] transposed to heads
   * first are copied: linear in L and S), the mask expanded with stride 0
   * and left as it is */
  torc_tensor *qc = torc__contiguous(q), *kc = torc__contiguous(k);
  torc_tensor *vc = torc__contiguous(v);
  torc_tensor *me = mask ? torc__expand(mask, ss, nd) : NULL;
  torc_tensor *out[2] = {torc__empty(os, nd, q->dtype, dev),
                         torc__empty(os, nd - 1, ldt, dev)};
  const torc_tensor *in[4] = {qc, kc, vc, me};
  torc_status st = !qc || !kc || !vc || (mask && !me) || !out[0] || !out[1]
                       ? torc_last_status()
                       : TORC_OK;
  if (st == TORC_OK && torc__numel(os, nd) + torc__numel(os, nd - 1) > 0)
    st = torc__kernel_call(TORC__OP_scaled_dot_product_attention, q->dtype,
                           in, mask ? 4 : 3, out, 2, &p, sizeof p);
  if (st == TORC_OK) {
    const torc_tensor *edges[3] = {q, k, v};
    const torc_tensor *save[6] = {qc, kc, vc, out[0], out[1], me};
    st = torc__attn_record(TORC__ATTN_SDPA, edges, 3, save, mask ? 6 : 5, &p,
                           sizeof p, out[0]);
  }
  torc_release(qc);
  torc_release(kc);
  torc_release(vc);
  torc_release(me);
  torc_release(out[1]);
  if (st) {
    torc_release(out[0]);
    return NULL;
  }
  return out[0];
}

torc_tensor *torc_scaled_dot_product_attention(
    const torc_tensor *q, const torc_tensor *k, const torc_tensor *v,
    const torc_tensor *attn_mask, double dropout_p, int is_causal,
    double scale, torc_generator *gen) {
  TORC__AC_BEGIN(TORC_AUTOCAST_LOWER, &q, &k, &v);
  torc_tensor *r = sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, gen);
  TORC__AC_END();
  return torc__ret(r);
}
