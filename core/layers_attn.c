/* core/layers_attn.c — multihead attention, the transformer encoder and
 * decoder layers (nn.MultiheadAttention, nn.TransformerEncoderLayer,
 * nn.TransformerDecoderLayer) and positional embeddings, composed from
 * public ops (the attention itself is torc_scaled_dot_product_attention)
 * with PyTorch's names, layouts, init and equations. Masks follow
 * MultiheadAttention's rule (bool true = ignore), turned into one additive
 * mask. Under an incremental decode (decode_internal.h) causal
 * self-attention keeps its keys and values, and positions start after the
 * tokens already seen.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "layers_internal.h"
#include "torc/indexing.h"
#include "torc/init.h"

/* The largest embed_dim, kdim, vdim, d_model, dim_feedforward, max_len. */
#define ATTN_MAX_SIZE ((int64_t)1 << 31)

static char *shape_of(const torc_tensor *x, char *buf, size_t size) {
  return torc__shape_str(torc_shape(x), torc_ndim(x), buf, size);
}

/* ======================================================================
 * multihead_attention
 * ==================================================================== */

typedef struct mha_state {
  torc__layer_head head;
  int64_t e, heads, kdim, vdim;
  double dropout;
  int bias, batch_first, causal;
} mha_state;

/* What torc_mha_forward hands the forward of module `m` (one per thread;
 * torc_module_forward runs with none). */
typedef struct mha_request {
  const torc_module *m;
  const torc_tensor *kpm, *mask;
  int is_causal, want_weights;
  torc_tensor *weights;
} mha_request;

static _Thread_local mha_request *tl_mha;

static int same_dims(const mha_state *s) {
  return s->kdim == s->e && s->vdim == s->e;
}

/* PyTorch's _reset_parameters: xavier_uniform_ on the projection weights,
 * in_proj_bias and out_proj.bias zero (out_proj.weight keeps a linear's
 * init). torc_module_init resets out_proj after this, as a linear. */
static torc_status mha_reset(torc_module *m, const char *scheme,
                             torc_generator *gen) {
  (void)scheme;
  static const char *const w[] = {"in_proj_weight", "q_proj_weight",
                                  "k_proj_weight", "v_proj_weight"};
  for (int i = 0; i < 4; i++) {
    torc_tensor *p = torc_module_parameter(m, w[i]);
    if (p && torc_init_xavier_uniform_(p, 1.0, gen))
      return torc_last_status();
  }
  torc_tensor *b = torc_module_parameter(m, "in_proj_bias");
  if (b && torc_init_zeros_(b))
    return torc_last_status();
  torc_module *op = torc_module_child(m, "out_proj");
  b = op ? torc_module_parameter(op, "bias") : NULL;
  if (b && torc_init_zeros_(b))
    return torc_last_status();
  return TORC_OK;
}

/* A mask by MultiheadAttention's rule (bool: true = ignore; floating:
 * added) as an additive mask of dtype dt. */
static torc_tensor *additive_mask(const torc_tensor *mask, torc_dtype dt,
                                  const char *what) {
  torc_dtype md = torc_dtype_of(mask);
  if (md == TORC_BOOL)
    return torc_masked_fill(
        torc_zeros(torc_shape(mask), torc_ndim(mask), dt,
                   torc_device_of(mask)),
        mask, -INFINITY);
  if (torc_dtype_is_float(md))
    return md == dt ? torc_detach(mask) : torc_to_dtype(mask, dt);
  torc_set_error(TORC_ERR_DTYPE,
                 "multihead_attention: %s is %s; it must be bool (true: "
                 "ignore the key) or floating (added to the scores)",
                 what, torc_dtype_name(md));
  return NULL;
}

/* The causal mask [L, S] of q's dtype: -inf where key j > query i +
 * offset (top-left aligned, as is_causal). */
static torc_tensor *causal_mask(int64_t L, int64_t S, int64_t offset,
                                torc_dtype dt, torc_device dev) {
  torc_tensor *up =
      torc_triu(torc_ones(TORC_SHAPE(L, S), TORC_BOOL, dev), offset + 1);
  return torc_masked_fill(torc_zeros(TORC_SHAPE(L, S), dt, dev), up,
                          -INFINITY);
}

static torc_tensor *add_mask(torc_tensor *acc, torc_tensor *m, int *err) {
  if (m == NULL) {
    *err = 1;
    return acc;
  }
  return acc ? torc_add(acc, m) : m;
}

/* [N, T, E] -> [N, heads, T, E / heads] (a view). */
static torc_tensor *split_heads(const torc_tensor *x, int64_t heads) {
  int64_t n = torc_size(x, 0), t = torc_size(x, 1), e = torc_size(x, 2);
  return torc_transpose(torc_reshape(x, TORC_SHAPE(n, t, heads, e / heads)),
                        1, 2);
}

/* Checks one of query/key/value: 2-D or 3-D like the query, `feat`
 * features. */
static int check_input(const mha_state *s, const char *what,
                       const torc_tensor *t, int nd, int64_t feat,
                       const char *feat_name) {
  char a[96];
  if (torc_ndim(t) != nd) {
    torc_set_error(TORC_ERR_SHAPE,
                   "multihead_attention: the query is %d-D but the %s has "
                   "shape %s; give query, key and value all batched (3-D) "
                   "or all unbatched (2-D)",
                   nd, what, shape_of(t, a, sizeof a));
    return 0;
  }
  if (!torc_dtype_is_float(torc_dtype_of(t))) {
    torc_set_error(TORC_ERR_DTYPE,
                   "multihead_attention: the %s is %s; it must be floating "
                   "(convert it with torc_to_dtype)",
                   what, torc_dtype_name(torc_dtype_of(t)));
    return 0;
  }
  if (torc_size(t, -1) != feat) {
    torc_set_error(TORC_ERR_SHAPE,
                   "multihead_attention: the %s has shape %s: its last dim "
                   "%lld is not %s %lld; project it to %lld features or "
                   "build the module with %s = %lld",
                   what, shape_of(t, a, sizeof a),
                   (long long)torc_size(t, -1), feat_name, (long long)feat,
                   (long long)feat, feat_name, (long long)torc_size(t, -1));
    return 0;
  }
  (void)s;
  return 1;
}

/* The layout name of a 3-D input, for messages. */
static const char *layout(const mha_state *s) {
  return s->batch_first ? "[N, L, E] (batch_first)" : "[L, N, E]";
}

/* The attention: q [.., L, E], k [.., S, kdim], v [.., S, vdim] in the
 * module's layout. */
static torc_tensor *mha_run(torc_module *m, const torc_tensor *q,
                            const torc_tensor *k, const torc_tensor *v,
                            mha_request *rq) {
  mha_state *s = torc_module_state(m);
  char a[96], b[96], c[96];
  int nd = torc_ndim(q);
  if (nd != 2 && nd != 3) {
    torc_set_error(TORC_ERR_SHAPE,
                   "multihead_attention: expected a 3-D query %s (or one "
                   "unbatched sequence [L, E]), got shape %s",
                   layout(s), shape_of(q, a, sizeof a));
    return NULL;
  }
  if (!check_input(s, "query", q, nd, s->e, "embed_dim") ||
      !check_input(s, "key", k, nd, s->kdim, "kdim") ||
      !check_input(s, "value", v, nd, s->vdim, "vdim"))
    return NULL;
  int unbatched = nd == 2;
  /* batch-major [N, T, F] */
  const torc_tensor *qb = unbatched ? torc_unsqueeze(q, 0)
                          : s->batch_first ? q
                                           : torc_transpose(q, 0, 1);
  const torc_tensor *kb = unbatched ? torc_unsqueeze(k, 0)
                          : s->batch_first ? k
                                           : torc_transpose(k, 0, 1);
  const torc_tensor *vb = unbatched ? torc_unsqueeze(v, 0)
                          : s->batch_first ? v
                                           : torc_transpose(v, 0, 1);
  if (qb == NULL || kb == NULL || vb == NULL)
    return NULL;
  int64_t n = torc_size(qb, 0), L = torc_size(qb, 1);
  if (torc_size(kb, 0) != n || torc_size(vb, 0) != n ||
      torc_size(kb, 1) != torc_size(vb, 1)) {
    torc_set_error(TORC_ERR_SHAPE,
                   "multihead_attention: query %s, key %s and value %s "
                   "(layout %s) must have one batch size N, and key and "
                   "value one length S",
                   shape_of(q, a, sizeof a), shape_of(k, b, sizeof b),
                   shape_of(v, c, sizeof c),
                   unbatched ? "[L, E]" : layout(s));
    return NULL;
  }
  if (torc_dtype_of(k) != torc_dtype_of(q) ||
      torc_dtype_of(v) != torc_dtype_of(q)) {
    torc_set_error(TORC_ERR_DTYPE,
                   "multihead_attention: query %s, key %s and value %s must "
                   "have one dtype",
                   torc_dtype_name(torc_dtype_of(q)),
                   torc_dtype_name(torc_dtype_of(k)),
                   torc_dtype_name(torc_dtype_of(v)));
    return NULL;
  }
  torc_dtype dt = torc_dtype_of(q);
  torc_device dev = torc_device_of(q);
  int64_t E = s->e, H = s->heads;
  /* the projections */
  torc_tensor *wq, *wk, *wv, *bq = NULL, *bk = NULL, *bv = NULL;
  if (same_dims(s)) {
    torc_tensor *w = torc_module_parameter(m, "in_proj_weight");
    wq = torc_narrow(w, 0, 0, E);
    wk = torc_narrow(w, 0, E, E);
    wv = torc_narrow(w, 0, 2 * E, E);
  } else {
    wq = torc_module_parameter(m, "q_proj_weight");
    wk = torc_module_parameter(m, "k_proj_weight");
    wv = torc_module_parameter(m, "v_proj_weight");
  }
  torc_tensor *ib = torc_module_parameter(m, "in_proj_bias");
  if (ib) {
    bq = torc_narrow(ib, 0, 0, E);
    bk = torc_narrow(ib, 0, E, E);
    bv = torc_narrow(ib, 0, 2 * E, E);
  }
  torc_tensor *qh = split_heads(torc_linear(qb, wq, bq), H);
  torc_tensor *kh = split_heads(torc_linear(kb, wk, bk), H);
  torc_tensor *vh = split_heads(torc_linear(vb, wv, bv), H);
  if (qh == NULL || kh == NULL || vh == NULL)
    return NULL;
  const torc_tensor *kpm = rq ? rq->kpm : NULL, *am = rq ? rq->mask : NULL;
  int causal = s->causal || (rq && rq->is_causal);
  /* the decode cache: causal self-attention appends this step's keys and
   * values to the earlier steps' */
  torc__decode *d = torc__decode_active();
  int64_t past = 0;
  if (d && k == q && v == q) {
    if (!causal)
      torc__decode_uncacheable(d, m, "attention that is not causal sees "
                                     "later tokens");
    else if (am)
      torc__decode_uncacheable(d, m, "an attn_mask given under a decode "
                                     "(only the causal mask is kept up)");
    else {
      torc_tensor *pk = torc__decode_get(d, m, 0),
                  *pv = torc__decode_get(d, m, 1);
      if (pk && pv) {
        if (torc_size(pk, 0) != n || torc_dtype_of(pk) != dt) {
          torc_set_error(TORC_ERR_SHAPE,
                         "multihead_attention: the decode cached keys %s %s "
                         "but this step's batch is %lld %s; clear the "
                         "decode to start new sequences",
                         shape_of(pk, a, sizeof a),
                         torc_dtype_name(torc_dtype_of(pk)), (long long)n,
                         torc_dtype_name(dt));
          return NULL;
        }
        past = torc_size(pk, 2);
        const torc_tensor *ks[2] = {pk, kh}, *vs[2] = {pv, vh};
        kh = torc_cat(ks, 2, 2);
        vh = torc_cat(vs, 2, 2);
      }
      if (kh == NULL || vh == NULL || torc__decode_put(d, m, 0, kh) ||
          torc__decode_put(d, m, 1, vh))
        return NULL;
    }
  }
  int64_t S = torc_size(kh, 2);
  /* one additive mask [N or 1, H or 1, L, S] */
  torc_tensor *mask = NULL;
  int err = 0;
  if (am) {
    int ok = 0;
    if (torc_ndim(am) == 2)
      ok = torc_size(am, 0) == L && torc_size(am, 1) == S;
    else if (torc_ndim(am) == 3)
      ok = torc_size(am, 0) == (unbatched ? H : n * H) &&
           torc_size(am, 1) == L && torc_size(am, 2) == S;
    if (!ok) {
      if (unbatched)
        torc_set_error(TORC_ERR_SHAPE,
                       "multihead_attention: attn_mask has shape %s but "
                       "must be [L, S] = [%lld, %lld] or [num_heads, L, S] "
                       "= [%lld, %lld, %lld] for the query %s and key %s",
                       shape_of(am, a, sizeof a), (long long)L, (long long)S,
                       (long long)H, (long long)L, (long long)S,
                       shape_of(q, b, sizeof b), shape_of(k, c, sizeof c));
      else
        torc_set_error(TORC_ERR_SHAPE,
                       "multihead_attention: attn_mask has shape %s but "
                       "must be [L, S] = [%lld, %lld] or [N * num_heads, L, "
                       "S] = [%lld, %lld, %lld] for the query %s and key %s",
                       shape_of(am, a, sizeof a), (long long)L, (long long)S,
                       (long long)(n * H), (long long)L, (long long)S,
                       shape_of(q, b, sizeof b), shape_of(k, c, sizeof c));
      return NULL;
    }
    torc_tensor *f = additive_mask(am, dt, "attn_mask");
    if (f && torc_ndim(am) == 3)
      f = torc_reshape(f, TORC_SHAPE(unbatched ? 1 : n, H, L, S));
    mask = add_mask(mask, f, &err);
  }
  if (kpm) {
    int ok = unbatched ? torc_ndim(kpm) == 1 && torc_size(kpm, 0) == S
                       : torc_ndim(kpm) == 2 && torc_size(kpm, 0) == n &&
                             torc_size(kpm, 1) == S;
    if (!ok) {
      if (unbatched)
        torc_set_error(TORC_ERR_SHAPE,
                       "multihead_attention: key_padding_mask has shape %s "
                       "but must be [S] = [%lld] for the unbatched key %s",
                       shape_of(kpm, a, sizeof a), (long long)S,
                       shape_of(k, b, sizeof b));
      else
        torc_set_error(TORC_ERR_SHAPE,
                       "multihead_attention: key_padding_mask has shape %s "
                       "but must be [N, S] = [%lld, %lld] for the key %s "
                       "(layout %s)",
                       shape_of(kpm, a, sizeof a), (long long)n, (long long)S,
                       shape_of(k, b, sizeof b), layout(s));
      return NULL;
    }
    torc_tensor *f = additive_mask(kpm, dt, "key_padding_mask");
    if (f)
      f = torc_reshape(f, TORC_SHAPE(unbatched ? 1 : n, 1, 1, S));
    mask = add_mask(mask, f, &err);
  }
  if (err)
    return NULL;
  /* the causal mask: past > 0 shifts it (query t sees keys 0 .. past + t);
   * a single new query sees every key */
  int want_w = rq && rq->want_weights;
  int sdpa_causal = 0;
  if (causal && !(past > 0 && L == 1)) {
    if (mask || want_w || past > 0) {
      mask = add_mask(mask, causal_mask(L, S, past, dt, dev), &err);
      if (err)
        return NULL;
    } else
      sdpa_causal = 1;
  }
  double p = torc_module_is_training(m) ? s->dropout : 0;
  torc_tensor *o =
      torc_scaled_dot_product_attention(qh, kh, vh, mask, p, sdpa_causal, 0,
                                        NULL);
  /* [N, H, L, hd] -> [N, L, E] -> out_proj */
  torc_module *op = torc_module_child(m, "out_proj");
  o = torc_linear(torc_reshape(torc_transpose(o, 1, 2), TORC_SHAPE(n, L, E)),
                  torc_module_parameter(op, "weight"),
                  torc_module_parameter(op, "bias"));
  if (o == NULL)
    return NULL;
  if (want_w) {
    /* softmax(q k^T / sqrt(hd) + mask), averaged over the heads */
    torc_tensor *sc = torc_mul_scalar(
        torc_matmul(qh, torc_transpose(kh, 2, 3)), 1 / sqrt((double)(E / H)));
    if (mask)
      sc = torc_add(sc, mask);
    int hd = 1;
    torc_tensor *w = torc_mean(torc_softmax(sc, 3), &hd, 1, 0);
    if (w && unbatched)
      w = torc_squeeze(w, 0);
    if (w == NULL)
      return NULL;
    rq->weights = torc_scope_keep(w);
  }
  return unbatched ? torc_squeeze(o, 0)
         : s->batch_first ? o
                          : torc_transpose(o, 0, 1);
}

static torc_tensor *mha_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  if (n_in != 1 && n_in != 3) {
    torc_set_error(TORC_ERR_INVALID,
                   "multihead_attention: given %d inputs; it takes 1 "
                   "(self-attention: query = key = value) or 3 (query, key, "
                   "value)",
                   n_in);
    return NULL;
  }
  mha_request *rq = tl_mha && tl_mha->m == m ? tl_mha : NULL;
  const torc_tensor *q = in[0];
  return mha_run(m, q, n_in == 3 ? in[1] : q, n_in == 3 ? in[2] : q, rq);
}

static const torc_module_vtable mha_vt = {sizeof(torc_module_vtable),
                                          mha_forward, torc__layer_destroy,
                                          NULL, mha_reset};

torc_mha_options torc_mha_options_default(int64_t embed_dim,
                                          int64_t num_heads) {
  torc_mha_options o;
  memset(&o, 0, sizeof o);
  o.embed_dim = embed_dim;
  o.num_heads = num_heads;
  o.bias = 1;
  return o;
}

torc_module *torc_multihead_attention_new(const torc_mha_options *o) {
  if (o == NULL) {
    torc_set_error(TORC_ERR_NULL,
                   "multihead_attention: the options are NULL; start from "
                   "torc_mha_options_default(embed_dim, num_heads)");
    return NULL;
  }
  if (o->embed_dim < 1 || o->embed_dim > ATTN_MAX_SIZE) {
    torc_set_error(TORC_ERR_INVALID,
                   "multihead_attention: embed_dim is %lld; it must be from "
                   "1 to 2^31",
                   (long long)o->embed_dim);
    return NULL;
  }
  if (o->num_heads < 1 || o->embed_dim % o->num_heads != 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "multihead_attention: num_heads is %lld; it must be >= 1 "
                   "and divide embed_dim %lld (each head gets embed_dim / "
                   "num_heads features)",
                   (long long)o->num_heads, (long long)o->embed_dim);
    return NULL;
  }
  if (o->kdim < 0 || o->vdim < 0 || o->kdim > ATTN_MAX_SIZE ||
      o->vdim > ATTN_MAX_SIZE) {
    torc_set_error(TORC_ERR_INVALID,
                   "multihead_attention: kdim %lld and vdim %lld; each must "
                   "be from 1 to 2^31, or 0 for embed_dim",
                   (long long)o->kdim, (long long)o->vdim);
    return NULL;
  }
  if (!(o->dropout >= 0 && o->dropout < 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "multihead_attention: dropout is %g; it must be from 0 "
                   "to below 1",
                   o->dropout);
    return NULL;
  }
  mha_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->e = o->embed_dim;
    s->heads = o->num_heads;
    s->kdim = o->kdim ? o->kdim : o->embed_dim;
    s->vdim = o->vdim ? o->vdim : o->embed_dim;
    s->dropout = o->dropout;
    s->bias = o->bias != 0;
    s->batch_first = o->batch_first != 0;
    s->causal = o->causal != 0;
  }
  torc_module *m = torc__layer_new("multihead_attention", &mha_vt, s);
  if (m == NULL)
    return NULL;
  int64_t E = s->e;
  int ok = 1;
  if (same_dims(s))
    ok = torc__layer_param(m, "in_proj_weight", TORC_SHAPE(3 * E, E)) != NULL;
  else
    ok = torc__layer_param(m, "q_proj_weight", TORC_SHAPE(E, E)) &&
         torc__layer_param(m, "k_proj_weight", TORC_SHAPE(E, s->kdim)) &&
         torc__layer_param(m, "v_proj_weight", TORC_SHAPE(E, s->vdim));
  if (ok && s->bias)
    ok = torc__layer_param(m, "in_proj_bias", TORC_SHAPE(3 * E)) != NULL;
  if (!ok || torc_module_add_child(m, "out_proj",
                                   torc_linear_new(E, E, s->bias)) ||
      mha_reset(m, "default", NULL)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

/* Points the thread's request at rq around one torc_module_forward_n. */
static torc_tensor *mha_call(torc_module *m, const torc_tensor *q,
                             const torc_tensor *k, const torc_tensor *v,
                             mha_request *rq) {
  mha_request *outer = tl_mha;
  tl_mha = rq;
  torc_tensor *y = (k == q && v == q)
                       ? torc_module_forward(m, q)
                       : torc_module_forward_n(
                             m, (const torc_tensor *const[]){q, k, v}, 3);
  tl_mha = outer;
  return y;
}

/* Hands y to *out (or releases it), as torc_rnn_forward does. */
static void hand_out(torc_tensor *y, torc_tensor **out) {
  if (out)
    *out = y;
  else
    torc_release(torc_scope_keep(y));
}

torc_status torc_mha_forward(torc_module *m, const torc_tensor *query,
                             const torc_tensor *key, const torc_tensor *value,
                             const torc_tensor *key_padding_mask,
                             const torc_tensor *attn_mask, int is_causal,
                             torc_tensor **out, torc_tensor **weights) {
  if (out)
    *out = NULL;
  if (weights)
    *weights = NULL;
  if (m == NULL || query == NULL || key == NULL || value == NULL)
    return torc__null_input("torc_mha_forward");
  if (m->vt != &mha_vt)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_mha_forward: the module given is a %s, not a "
                          "multihead_attention",
                          torc_module_type_name(m));
  mha_request rq = {m, key_padding_mask, attn_mask, is_causal != 0,
                    weights != NULL, NULL};
  torc_tensor *y = mha_call(m, query, key, value, &rq);
  if (y == NULL) {
    if (rq.weights)
      torc_release(torc_scope_keep(rq.weights));
    return torc_last_status();
  }
  hand_out(y, out);
  if (weights)
    *weights = rq.weights;
  return TORC_OK;
}

/* ======================================================================
 * transformer_encoder_layer, transformer_decoder_layer
 * ==================================================================== */

typedef struct tfm_state {
  torc__layer_head head;
  int decoder;
  int64_t d, nhead, ff;
  double dropout, eps;
  int gelu, batch_first, norm_first, bias, causal;
} tfm_state;

/* What the layers' C calls hand their forward (one per thread). */
typedef struct tfm_request {
  const torc_module *m;
  const torc_tensor *mask, *kpm;         /* the self-attention's */
  const torc_tensor *mem_mask, *mem_kpm; /* the decoder's memory's */
  int is_causal, mem_causal;
} tfm_request;

static _Thread_local tfm_request *tl_tfm;

static torc_tensor *child(torc_module *m, const char *name,
                          const torc_tensor *x) {
  return torc_module_forward(torc_module_child(m, name), x);
}

/* dropout_k(attn(x, mem, mem)) with the request's masks (self: mem = x). */
static torc_tensor *attn_block(torc_module *m, const char *attn,
                               const char *drop, const torc_tensor *x,
                               const torc_tensor *mem, const torc_tensor *mask,
                               const torc_tensor *kpm, int causal) {
  if (x == NULL)
    return NULL;
  if (mem == NULL)
    mem = x;
  mha_request rq = {torc_module_child(m, attn), kpm, mask, causal, 0, NULL};
  torc_tensor *y = mha_call(torc_module_child(m, attn), x, mem, mem, &rq);
  return y ? child(m, drop, y) : NULL;
}

/* dropout_last(linear2(dropout(act(linear1(x))))) */
static torc_tensor *ff_block(torc_module *m, const tfm_state *s,
                             const char *drop, const torc_tensor *x) {
  torc_tensor *h = child(m, "linear1", x);
  h = s->gelu ? torc_gelu(h, 0) : torc_relu(h);
  if (h == NULL)
    return NULL;
  h = child(m, "linear2", child(m, "dropout", h));
  return h ? child(m, drop, h) : NULL;
}

static int check_seq(const tfm_state *s, const char *what,
                     const torc_tensor *x) {
  char a[96];
  int nd = torc_ndim(x);
  if ((nd == 2 || nd == 3) && torc_size(x, -1) == s->d)
    return 1;
  torc_set_error(TORC_ERR_SHAPE,
                 "%s: %s has shape %s; expected %s (or unbatched [L, "
                 "d_model]) with d_model = %lld",
                 s->decoder ? "transformer_decoder_layer"
                            : "transformer_encoder_layer",
                 what, shape_of(x, a, sizeof a),
                 s->batch_first ? "[N, L, d_model] (batch_first)"
                                : "[L, N, d_model]",
                 (long long)s->d);
  return 0;
}

static torc_tensor *tfm_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  tfm_state *s = torc_module_state(m);
  if (n_in != (s->decoder ? 2 : 1)) {
    if (s->decoder)
      torc_set_error(TORC_ERR_INVALID,
                     "transformer_decoder_layer: given %d inputs; it takes 2 "
                     "(tgt, memory): run it with torc_module_forward_n or "
                     "torc_transformer_decoder_layer_forward",
                     n_in);
    else
      torc__layer_one_input(m, n_in);
    return NULL;
  }
  tfm_request *rq = tl_tfm && tl_tfm->m == m ? tl_tfm : NULL;
  tfm_request none = {m, NULL, NULL, NULL, NULL, 0, 0};
  if (rq == NULL)
    rq = &none;
  const torc_tensor *x = in[0];
  const torc_tensor *mem = s->decoder ? in[1] : NULL;
  if (!check_seq(s, s->decoder ? "tgt" : "src", x) ||
      (mem && !check_seq(s, "memory", mem)))
    return NULL;
  int causal = s->causal || rq->is_causal;
  const char *ffd = s->decoder ? "dropout3" : "dropout2";
  const char *ffn = s->decoder ? "norm3" : "norm2";
  torc_tensor *y = (torc_tensor *)x;
  if (s->norm_first) {
    y = torc_add(y, attn_block(m, "self_attn", "dropout1",
                               child(m, "norm1", y), NULL, rq->mask, rq->kpm,
                               causal));
    if (y && mem)
      y = torc_add(y, attn_block(m, "multihead_attn", "dropout2",
                                 child(m, "norm2", y), mem, rq->mem_mask,
                                 rq->mem_kpm, rq->mem_causal));
    if (y)
      y = torc_add(y, ff_block(m, s, ffd, child(m, ffn, y)));
  } else {
    y = child(m, "norm1", torc_add(y, attn_block(m, "self_attn", "dropout1",
                                                 y, NULL, rq->mask, rq->kpm,
                                                 causal)));
    if (y && mem)
      y = child(m, "norm2",
                torc_add(y, attn_block(m, "multihead_attn", "dropout2", y,
                                       mem, rq->mem_mask, rq->mem_kpm,
                                       rq->mem_causal)));
    if (y)
      y = child(m, ffn, torc_add(y, ff_block(m, s, ffd, y)));
  }
  return y;
}

static const torc_module_vtable tfm_vt = {sizeof(torc_module_vtable),
                                          tfm_forward, torc__layer_destroy,
                                          NULL, NULL};

torc_transformer_layer_options
torc_transformer_layer_options_default(int64_t d_model, int64_t nhead) {
  torc_transformer_layer_options o;
  memset(&o, 0, sizeof o);
  o.d_model = d_model;
  o.nhead = nhead;
  o.dim_feedforward = 2048;
  o.dropout = 0.1;
  o.layer_norm_eps = 1e-5;
  o.bias = 1;
  return o;
}

static torc_module *tfm_new(const char *type, int decoder,
                            const torc_transformer_layer_options *o) {
  if (o == NULL) {
    torc_set_error(TORC_ERR_NULL,
                   "%s: the options are NULL; start from "
                   "torc_transformer_layer_options_default(d_model, nhead)",
                   type);
    return NULL;
  }
  if (o->d_model < 1 || o->d_model > ATTN_MAX_SIZE ||
      o->dim_feedforward < 1 || o->dim_feedforward > ATTN_MAX_SIZE) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: d_model %lld and dim_feedforward %lld; each must be "
                   "from 1 to 2^31",
                   type, (long long)o->d_model, (long long)o->dim_feedforward);
    return NULL;
  }
  if (o->nhead < 1 || o->d_model % o->nhead != 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: nhead is %lld; it must be >= 1 and divide d_model "
                   "%lld",
                   type, (long long)o->nhead, (long long)o->d_model);
    return NULL;
  }
  if (!(o->dropout >= 0 && o->dropout < 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: dropout is %g; it must be from 0 to below 1", type,
                   o->dropout);
    return NULL;
  }
  if (!(o->layer_norm_eps > 0)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: layer_norm_eps is %g; it must be > 0", type,
                   o->layer_norm_eps);
    return NULL;
  }
  int gelu = 0;
  if (o->activation && strcmp(o->activation, "relu") != 0) {
    if (strcmp(o->activation, "gelu") != 0) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: activation '%s' is not relu or gelu", type,
                     o->activation);
      return NULL;
    }
    gelu = 1;
  }
  tfm_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->decoder = decoder;
    s->d = o->d_model;
    s->nhead = o->nhead;
    s->ff = o->dim_feedforward;
    s->dropout = o->dropout;
    s->eps = o->layer_norm_eps;
    s->gelu = gelu;
    s->batch_first = o->batch_first != 0;
    s->norm_first = o->norm_first != 0;
    s->bias = o->bias != 0;
    s->causal = o->causal != 0;
  }
  torc_module *m = torc__layer_new(type, &tfm_vt, s);
  if (m == NULL)
    return NULL;
  torc_mha_options a = torc_mha_options_default(o->d_model, o->nhead);
  a.dropout = o->dropout;
  a.bias = s->bias;
  a.batch_first = s->batch_first;
  int64_t d = s->d;
  /* PyTorch's registration order */
  int bad = torc_module_add_child(m, "self_attn",
                                  torc_multihead_attention_new(&a));
  if (!bad && decoder)
    bad = torc_module_add_child(m, "multihead_attn",
                                torc_multihead_attention_new(&a));
  if (!bad)
    bad = torc_module_add_child(m, "linear1",
                                torc_linear_new(d, s->ff, s->bias)) ||
          torc_module_add_child(m, "dropout", torc_dropout_new(s->dropout)) ||
          torc_module_add_child(m, "linear2",
                                torc_linear_new(s->ff, d, s->bias));
  for (int i = 1; !bad && i <= (decoder ? 3 : 2); i++) {
    char name[16];
    snprintf(name, sizeof name, "norm%d", i);
    bad = torc_module_add_child(m, name, torc_layernorm_new(&d, 1, s->eps, 1));
  }
  for (int i = 1; !bad && i <= (decoder ? 3 : 2); i++) {
    char name[16];
    snprintf(name, sizeof name, "dropout%d", i);
    bad = torc_module_add_child(m, name, torc_dropout_new(s->dropout));
  }
  if (bad) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

torc_module *
torc_transformer_encoder_layer_new(const torc_transformer_layer_options *o) {
  return tfm_new("transformer_encoder_layer", 0, o);
}

torc_module *
torc_transformer_decoder_layer_new(const torc_transformer_layer_options *o) {
  return tfm_new("transformer_decoder_layer", 1, o);
}

static torc_status tfm_call(torc_module *m, const char *fn, int decoder,
                            const torc_tensor *x, const torc_tensor *mem,
                            tfm_request *rq, torc_tensor **out) {
  if (out)
    *out = NULL;
  if (m == NULL || x == NULL || (decoder && mem == NULL))
    return torc__null_input(fn);
  if (m->vt != &tfm_vt ||
      ((tfm_state *)torc_module_state(m))->decoder != decoder)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the module given is a %s, not a %s", fn,
                          torc_module_type_name(m),
                          decoder ? "transformer_decoder_layer"
                                  : "transformer_encoder_layer");
  tfm_request *outer = tl_tfm;
  tl_tfm = rq;
  torc_tensor *y =
      decoder ? torc_module_forward_n(m, (const torc_tensor *const[]){x, mem},
                                      2)
              : torc_module_forward(m, x);
  tl_tfm = outer;
  if (y == NULL)
    return torc_last_status();
  hand_out(y, out);
  return TORC_OK;
}

torc_status torc_transformer_encoder_layer_forward(
    torc_module *m, const torc_tensor *src, const torc_tensor *src_mask,
    const torc_tensor *src_key_padding_mask, int is_causal,
    torc_tensor **out) {
  tfm_request rq = {m,    src_mask, src_key_padding_mask, NULL, NULL,
                    is_causal != 0, 0};
  return tfm_call(m, "torc_transformer_encoder_layer_forward", 0, src, NULL,
                  &rq, out);
}

torc_status torc_transformer_decoder_layer_forward(
    torc_module *m, const torc_tensor *tgt, const torc_tensor *memory,
    const torc_tensor *tgt_mask, const torc_tensor *memory_mask,
    const torc_tensor *tgt_key_padding_mask,
    const torc_tensor *memory_key_padding_mask, int tgt_is_causal,
    int memory_is_causal, torc_tensor **out) {
  tfm_request rq = {m,
                    tgt_mask,
                    tgt_key_padding_mask,
                    memory_mask,
                    memory_key_padding_mask,
                    tgt_is_causal != 0,
                    memory_is_causal != 0};
  return tfm_call(m, "torc_transformer_decoder_layer_forward", 1, tgt, memory,
                  &rq, out);
}

/* ======================================================================
 * positional_embedding
 * ==================================================================== */

typedef struct pos_state {
  torc__layer_head head;
  int sinusoidal;
  int64_t max_len, d;
  double dropout;
} pos_state;

/* The sinusoid table [max_len, d] in double, then m's dtype. */
static torc_tensor *sinusoid_table(int64_t len, int64_t d, torc_dtype dt,
                                   torc_device dev) {
  double *t = torc__calloc((size_t)(len * d), sizeof *t);
  if (t == NULL) {
    torc_set_error(TORC_ERR_OOM,
                   "positional_embedding: out of memory for a %lld x %lld "
                   "table",
                   (long long)len, (long long)d);
    return NULL;
  }
  for (int64_t p = 0; p < len; p++)
    for (int64_t i = 0; i < d; i += 2) {
      double a = (double)p * exp(-(double)i * log(10000.0) / (double)d);
      t[p * d + i] = sin(a);
      if (i + 1 < d)
        t[p * d + i + 1] = cos(a);
    }
  torc_tensor *r = torc_to_dtype(
      torc_from_host(t, TORC_SHAPE(len, d), TORC_F64, TORC_CPU), dt);
  torc__free(t);
  return r && dev.type != TORC_CPU.type ? torc_to(r, dev) : r;
}

static torc_status pos_reset(torc_module *m, const char *scheme,
                             torc_generator *gen) {
  (void)scheme;
  torc_tensor *w = torc_module_parameter(m, "weight");
  return w ? torc_init_normal_(w, 0, 1, gen) : TORC_OK;
}

static torc_tensor *pos_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  pos_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  char a[96];
  int nd = torc_ndim(x);
  if ((nd != 2 && nd != 3) || torc_size(x, -1) != s->d) {
    torc_set_error(TORC_ERR_SHAPE,
                   "positional_embedding: expected [N, L, d_model] (or "
                   "unbatched [L, d_model]) with d_model = %lld, got shape "
                   "%s",
                   (long long)s->d, shape_of(x, a, sizeof a));
    return NULL;
  }
  if (!torc_dtype_is_float(torc_dtype_of(x))) {
    torc_set_error(TORC_ERR_DTYPE,
                   "positional_embedding: the input is %s; it must be "
                   "floating (an embedding's output)",
                   torc_dtype_name(torc_dtype_of(x)));
    return NULL;
  }
  int64_t L = torc_size(x, nd - 2);
  int64_t past = torc__decode_past(torc__decode_active());
  if (past + L > s->max_len) {
    if (past)
      torc_set_error(TORC_ERR_SHAPE,
                     "positional_embedding: positions %lld .. %lld (after "
                     "%lld decoded tokens) go past max_len %lld; build it "
                     "with a larger max_len or decode fewer tokens",
                     (long long)past, (long long)(past + L - 1),
                     (long long)past, (long long)s->max_len);
    else
      torc_set_error(TORC_ERR_SHAPE,
                     "positional_embedding: the sequence has %lld positions "
                     "(input %s) but max_len is %lld; build it with max_len "
                     ">= %lld or cut the sequence",
                     (long long)L, shape_of(x, a, sizeof a),
                     (long long)s->max_len, (long long)L);
    return NULL;
  }
  torc_tensor *table = s->sinusoidal ? torc_module_buffer(m, "pe")
                                     : torc_module_parameter(m, "weight");
  torc_tensor *y = torc_add(x, torc_narrow(table, 0, past, L));
  if (y && s->dropout > 0)
    y = torc_dropout(y, s->dropout, torc_module_is_training(m), NULL);
  return y;
}

static int pos_describe(const torc_module *m, char *buf, size_t size) {
  const pos_state *s = torc_module_state(m);
  char p[32] = "";
  if (s->dropout > 0) {
    char f[24];
    snprintf(p, sizeof p, ", dropout=%s",
             torc__pyfloat(f, sizeof f, s->dropout));
  }
  return snprintf(buf, size, "%s, %lld, %lld%s",
                  s->sinusoidal ? "sinusoidal" : "learned",
                  (long long)s->max_len, (long long)s->d, p);
}

static const torc_module_vtable pos_vt = {sizeof(torc_module_vtable),
                                          pos_forward, torc__layer_destroy,
                                          pos_describe, pos_reset};

torc_module *torc_positional_embedding_new(const char *kind, int64_t max_len,
                                           int64_t d_model, double dropout) {
  int sin_ = 0;
  if (kind == NULL || (strcmp(kind, "learned") != 0 &&
                       !(sin_ = strcmp(kind, "sinusoidal") == 0))) {
    torc_set_error(TORC_ERR_INVALID,
                   "positional_embedding: kind '%s' is not learned or "
                   "sinusoidal",
                   kind ? kind : "(NULL)");
    return NULL;
  }
  if (max_len < 1 || d_model < 1 || max_len > ATTN_MAX_SIZE ||
      d_model > ATTN_MAX_SIZE) {
    torc_set_error(TORC_ERR_INVALID,
                   "positional_embedding: max_len %lld and d_model %lld; "
                   "each must be from 1 to 2^31",
                   (long long)max_len, (long long)d_model);
    return NULL;
  }
  if (!(dropout >= 0 && dropout < 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "positional_embedding: dropout is %g; it must be from 0 "
                   "to below 1",
                   dropout);
    return NULL;
  }
  pos_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->sinusoidal = sin_;
    s->max_len = max_len;
    s->d = d_model;
    s->dropout = dropout;
  }
  torc_module *m = torc__layer_new("positional_embedding", &pos_vt, s);
  if (m == NULL)
    return NULL;
  if (sin_) {
    /* a scope of its own: the table's temporaries go, the module keeps
     * its reference */
    int scope = torc_scope_begin();
    torc_tensor *pe = sinusoid_table(max_len, d_model, torc_module_dtype(m),
                                     torc_module_device(m));
    torc_status st = pe ? torc_module_register_buffer(m, "pe", pe, 0)
                        : torc_last_status();
    torc_scope_end(scope);
    if (st) {
      torc_module_free(m);
      return NULL;
    }
  } else {
    torc_tensor *w =
        torc__layer_param(m, "weight", TORC_SHAPE(max_len, d_model));
    if (w == NULL || pos_reset(m, "default", NULL)) {
      torc_module_free(m);
      return NULL;
    }
  }
  return m;
}
