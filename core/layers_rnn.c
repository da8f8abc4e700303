/* core/layers_rnn.c — the recurrent layers (nn.LSTM, nn.GRU, nn.RNN) and
 * last_step: per layer and direction one matmul projects the whole input
 * sequence, then each step adds the hidden state's matmul with weight_hh
 * and applies the cell (PyTorch's equations and gate order). The LSTM and
 * GRU cells run as the fused ops torc_lstm_cell and torc_gru_cell (one
 * kernel and one autograd node per step, ops_rnn_cell.c) wherever the
 * device has their kernels, and are composed from public ops (sigmoid,
 * tanh, mul, add: ~10 ops and nodes a step) where it has not. Variable
 * lengths mask the state update, as pack_padded_sequence does.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "layers_internal.h"
#include "torc/indexing.h"

/* The largest input_size and hidden_size (so 4 * hidden * in cannot
 * overflow). */
#define RNN_MAX_SIZE ((int64_t)1 << 31)

enum { CELL_LSTM, CELL_GRU, CELL_RNN_TANH, CELL_RNN_RELU };

/* What torc_rnn_forward hands the forward of module `m`, and where it
 * takes the final states from (torc_module_forward runs with none). One
 * per thread, so that threads may run one module's forward at once. */
typedef struct rnn_request {
  const torc_module *m;
  const torc_tensor *h0, *c0, *lengths;
  torc_tensor *h_n, *c_n;
} rnn_request;

static _Thread_local rnn_request *tl_req;

typedef struct rnn_state {
  torc__layer_head head;
  int cell;
  int64_t in, hidden; /* in 0 until inferred */
  int layers, bias, batch_first, bidir;
  double dropout;
} rnn_state;

static const char *cell_type(const rnn_state *s) {
  return s->cell == CELL_LSTM ? "lstm" : s->cell == CELL_GRU ? "gru" : "rnn";
}

static int cell_gates(const rnn_state *s) {
  return s->cell == CELL_LSTM ? 4 : s->cell == CELL_GRU ? 3 : 1;
}

static int n_dirs(const rnn_state *s) { return s->bidir ? 2 : 1; }

/* "weight_ih_l0_reverse" for kind "weight_ih", layer 0, direction 1. */
static void param_name(char *buf, size_t size, const char *kind, int layer,
                       int dir) {
  snprintf(buf, size, "%s_l%d%s", kind, layer, dir ? "_reverse" : "");
}

static torc_tensor *param(const torc_module *m, const char *kind, int layer,
                          int dir) {
  char name[64];
  param_name(name, sizeof name, kind, layer, dir);
  return torc_module_parameter(m, name);
}

/* PyTorch's reset_parameters: every parameter U(-1/sqrt(hidden),
 * 1/sqrt(hidden)), whatever the scheme. */
static torc_status rnn_reset(torc_module *m, const char *scheme,
                             torc_generator *gen) {
  (void)scheme;
  rnn_state *s = torc_module_state(m);
  double k = 1 / sqrt((double)s->hidden);
  static const char *const kinds[] = {"weight_ih", "weight_hh", "bias_ih",
                                      "bias_hh"};
  for (int l = 0; l < s->layers; l++)
    for (int d = 0; d < n_dirs(s); d++)
      for (int i = 0; i < 4; i++) {
        torc_tensor *p = param(m, kinds[i], l, d);
        if (p && torc_init_uniform_(p, -k, k, gen))
          return torc_last_status();
      }
  return TORC_OK;
}

/* Registers every parameter in PyTorch's order (per layer, per direction:
 * weight_ih, weight_hh, bias_ih, bias_hh) and initialises them. */
static torc_status rnn_create(torc_module *m, rnn_state *s) {
  int64_t gh = cell_gates(s) * s->hidden;
  char name[64];
  for (int l = 0; l < s->layers; l++) {
    int64_t in = l == 0 ? s->in : s->hidden * n_dirs(s);
    for (int d = 0; d < n_dirs(s); d++) {
      param_name(name, sizeof name, "weight_ih", l, d);
      if (torc__layer_param(m, name, TORC_SHAPE(gh, in)) == NULL)
        return torc_last_status();
      param_name(name, sizeof name, "weight_hh", l, d);
      if (torc__layer_param(m, name, TORC_SHAPE(gh, s->hidden)) == NULL)
        return torc_last_status();
      if (!s->bias)
        continue;
      param_name(name, sizeof name, "bias_ih", l, d);
      if (torc__layer_param(m, name, TORC_SHAPE(gh)) == NULL)
        return torc_last_status();
      param_name(name, sizeof name, "bias_hh", l, d);
      if (torc__layer_param(m, name, TORC_SHAPE(gh)) == NULL)
        return torc_last_status();
    }
  }
  torc__module_set_lazy(m, 0);
  return rnn_reset(m, torc__module_init_scheme(m), NULL);
}

static char *shape_of(const torc_tensor *x, char *buf, size_t size) {
  return torc__shape_str(torc_shape(x), torc_ndim(x), buf, size);
}

/* 1 if the device of x has kernels for fused cell op `op` and its
 * backward in x's dtype: ref serves the cpu and sim in every floating
 * dtype; cuda has none yet, so its steps stay composed. */
static int fused_cell(const torc_tensor *x, int op, int op_bw) {
  int dt = torc_device_of(x).type;
  return torc__kernel_rank(dt, op, torc_dtype_of(x)) != INT_MIN &&
         torc__kernel_rank(dt, op_bw, torc_dtype_of(x)) != INT_MIN;
}

/* One step of the cell: xp the input's projection at this step [N, G*H],
 * h (and c) the state [N, H]; writes the new state to *h_out (*c_out). */
static void cell_step(const torc_module *m, const rnn_state *s, int l, int d,
                      const torc_tensor *xp, const torc_tensor *h,
                      const torc_tensor *c, torc_tensor **h_out,
                      torc_tensor **c_out) {
  torc_tensor *hp = torc_linear(h, param(m, "weight_hh", l, d),
                                param(m, "bias_hh", l, d));
  if (s->cell == CELL_LSTM) {
    if (xp &&
        fused_cell(xp, TORC__OP_lstm_cell, TORC__OP_lstm_cell_backward)) {
      if (torc_lstm_cell(torc_add(xp, hp), c, h_out, c_out))
        *h_out = *c_out = NULL;
      return;
    }
    torc_tensor *g[4] = {NULL, NULL, NULL, NULL};
    if (torc_chunk(torc_add(xp, hp), 4, 1, g, 4) != 4) {
      *h_out = *c_out = NULL;
      return;
    }
    torc_tensor *c2 = torc_add(torc_mul(torc_sigmoid(g[1]), c),
                               torc_mul(torc_sigmoid(g[0]), torc_tanh(g[2])));
    *c_out = c2;
    *h_out = torc_mul(torc_sigmoid(g[3]), torc_tanh(c2));
    return;
  }
  if (s->cell == CELL_GRU) {
    if (xp && fused_cell(xp, TORC__OP_gru_cell, TORC__OP_gru_cell_backward)) {
      *h_out = torc_gru_cell(xp, hp, h);
      return;
    }
    torc_tensor *xg[3] = {NULL, NULL, NULL}, *hg[3] = {NULL, NULL, NULL};
    if (torc_chunk(xp, 3, 1, xg, 3) != 3 || torc_chunk(hp, 3, 1, hg, 3) != 3) {
      *h_out = NULL;
      return;
    }
    torc_tensor *r = torc_sigmoid(torc_add(xg[0], hg[0]));
    torc_tensor *z = torc_sigmoid(torc_add(xg[1], hg[1]));
    torc_tensor *nn = torc_tanh(torc_add(xg[2], torc_mul(r, hg[2])));
    /* (1 - z) * n + z * h = n + z * (h - n) */
    *h_out = torc_add(nn, torc_mul(z, torc_sub(h, nn)));
    return;
  }
  torc_tensor *a = torc_add(xp, hp);
  *h_out = s->cell == CELL_RNN_RELU ? torc_relu(a) : torc_tanh(a);
}

/* The initial state of layer l, direction d from h0 ([layers*dirs, N, H],
 * or NULL: zeros). */
static torc_tensor *initial(const rnn_state *s, const torc_tensor *h0,
                            int l, int d, int64_t n, const torc_tensor *x) {
  if (h0)
    return torc_select(h0, 0, (int64_t)l * n_dirs(s) + d);
  return torc_zeros(TORC_SHAPE(n, s->hidden), torc_dtype_of(x), torc_device_of(x));
}

/* Runs one direction of one layer over seq [L, N, in]; returns the
 * outputs [L, N, H] and the final states. masks[t] ([N, 1] of x's dtype, 1
 * while t < length) is NULL without lengths. */
static torc_tensor *run_direction(const torc_module *m, const rnn_state *s,
                                  int l, int d, const torc_tensor *seq,
                                  torc_tensor *const *masks,
                                  const torc_tensor *h0, const torc_tensor *c0,
                                  torc_tensor **h_fin, torc_tensor **c_fin) {
  int64_t L = torc_size(seq, 0), n = torc_size(seq, 1);
  torc_tensor *xp = torc_linear(seq, param(m, "weight_ih", l, d),
                                param(m, "bias_ih", l, d));
  torc_tensor *h = initial(s, h0, l, d, n, seq);
  torc_tensor *c =
      s->cell == CELL_LSTM ? initial(s, c0, l, d, n, seq) : NULL;
  torc_tensor **outs = torc__calloc((size_t)L, sizeof *outs);
  if (outs == NULL) {
    torc_set_error(TORC_ERR_OOM, "%s: out of memory for %lld steps",
                   cell_type(s), (long long)L);
    return NULL;
  }
  torc_tensor *y = NULL;
  for (int64_t i = 0; i < L; i++) {
    int64_t t = d ? L - 1 - i : i;
    torc_tensor *h2 = NULL, *c2 = NULL;
    cell_step(m, s, l, d, torc_select(xp, 0, t), h, c, &h2, &c2);
    if (h2 == NULL || (s->cell == CELL_LSTM && c2 == NULL))
      goto done;
    if (masks) { /* past a sequence's end: keep the state, output zeros */
      torc_tensor *keep = torc_sub_scalar(torc_neg(masks[t]), -1.0);
      h2 = torc_add(torc_mul(h2, masks[t]), torc_mul(h, keep));
      if (c2)
        c2 = torc_add(torc_mul(c2, masks[t]), torc_mul(c, keep));
      outs[t] = torc_mul(h2, masks[t]);
    } else
      outs[t] = h2;
    h = h2;
    c = c2;
    if (outs[t] == NULL || h == NULL)
      goto done;
  }
  y = torc_stack((const torc_tensor *const *)outs, (int)L, 0);
  *h_fin = h;
  *c_fin = c;
done:
  torc__free(outs);
  return y;
}

/* Checks a state tensor against [layers*dirs, N, H] (unbatched: without
 * N). */
static torc_status check_state(const rnn_state *s, const char *what,
                               const torc_tensor *t, int64_t n,
                               int unbatched, const torc_tensor *x) {
  int64_t want[3] = {(int64_t)s->layers * n_dirs(s), n, s->hidden};
  int64_t w2[2] = {want[0], want[2]};
  const int64_t *w = unbatched ? w2 : want;
  int nd = unbatched ? 2 : 3;
  int ok = torc_ndim(t) == nd;
  for (int i = 0; ok && i < nd; i++)
    ok = torc_size(t, i) == w[i];
  if (ok && torc_dtype_of(t) == torc_dtype_of(x))
    return TORC_OK;
  char a[96], b[96], c[96];
  if (!ok)
    return torc_set_error(
        TORC_ERR_SHAPE,
        "%s: %s has shape %s but must be %s (num_layers * directions, %s"
        "hidden_size) for the input of shape %s",
        cell_type(s), what, shape_of(t, a, sizeof a),
        torc__shape_str(w, nd, b, sizeof b), unbatched ? "" : "batch, ",
        shape_of(x, c, sizeof c));
  return torc_set_error(TORC_ERR_DTYPE,
                        "%s: %s is %s but the input is %s; convert it "
                        "(torc_to_dtype)",
                        cell_type(s), what, torc_dtype_name(torc_dtype_of(t)),
                        torc_dtype_name(torc_dtype_of(x)));
}

/* The step masks from lengths (i64 [N] on the cpu, 1 .. L): masks[t] is
 * [N, 1], 1 where t < length. NULL after an error. */
static torc_tensor **length_masks(const rnn_state *s, const torc_tensor *len,
                                  int64_t L, int64_t n, const torc_tensor *x) {
  char a[96], dv[64];
  if (torc_dtype_of(len) != TORC_I64 || torc_ndim(len) != 1 ||
      torc_size(len, 0) != n || torc_device_of(len).type != TORC_CPU.type) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: lengths must be an i64 tensor [%lld] on the cpu (one "
                   "length per sequence), got %s %s on %s",
                   cell_type(s), (long long)n, torc_dtype_name(torc_dtype_of(len)),
                   shape_of(len, a, sizeof a),
                   torc_device_str(torc_device_of(len), dv, sizeof dv));
    return NULL;
  }
  int64_t *v = torc__calloc((size_t)(n > 0 ? n : 1), sizeof *v);
  float *f = torc__calloc((size_t)(n > 0 ? n : 1), sizeof *f);
  torc_tensor **masks = torc__calloc((size_t)L, sizeof *masks);
  if (v == NULL || f == NULL || masks == NULL) {
    torc_set_error(TORC_ERR_OOM, "%s: out of memory for the lengths",
                   cell_type(s));
    goto fail;
  }
  if (torc_to_host(len, v, sizeof *v * (size_t)n))
    goto fail;
  for (int64_t i = 0; i < n; i++)
    if (v[i] < 1 || v[i] > L) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: lengths[%lld] is %lld; every length must be from 1 "
                     "to the sequence length %lld",
                     cell_type(s), (long long)i, (long long)v[i],
                     (long long)L);
      goto fail;
    }
  for (int64_t t = 0; t < L; t++) {
    for (int64_t i = 0; i < n; i++)
      f[i] = t < v[i] ? 1.0f : 0.0f;
    masks[t] = torc_to_dtype(
        torc_to(torc_from_host(f, TORC_SHAPE(n, 1), TORC_F32, TORC_CPU),
                 torc_device_of(x)),
        torc_dtype_of(x));
    if (masks[t] == NULL)
      goto fail;
  }
  torc__free(v);
  torc__free(f);
  return masks;
fail:
  torc__free(v);
  torc__free(f);
  torc__free(masks);
  return NULL;
}

/* The forward: x [L, N, in] (batch_first: [N, L, in]; unbatched [L, in]).
 * With a request, its initial states and lengths are used and the final
 * states handed back through it. */
static torc_tensor *rnn_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  rnn_state *s = torc_module_state(m);
  rnn_request *rq = tl_req && tl_req->m == m ? tl_req : NULL;
  const torc_tensor *x = in[0];
  char a[96];
  int nd = torc_ndim(x);
  if (nd != 2 && nd != 3) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: expected a 3-D input %s (or one unbatched sequence "
                   "[L, input_size]), got shape %s",
                   cell_type(s),
                   s->batch_first ? "[N, L, input_size] (batch_first)"
                                  : "[L, N, input_size]",
                   shape_of(x, a, sizeof a));
    return NULL;
  }
  if (!torc_dtype_is_float(torc_dtype_of(x))) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the input is %s; it must be floating (convert it "
                   "with torc_to_dtype)",
                   cell_type(s), torc_dtype_name(torc_dtype_of(x)));
    return NULL;
  }
  int64_t f = torc_size(x, -1);
  if (s->in == 0) {
    if (f == 0 || f > RNN_MAX_SIZE) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: cannot infer input_size from an input with %lld "
                     "features (shape %s); it must be from 1 to 2^31",
                     cell_type(s), (long long)f, shape_of(x, a, sizeof a));
      return NULL;
    }
    s->in = f;
    if (rnn_create(m, s)) {
      s->in = 0;
      return NULL;
    }
  } else if (f != s->in) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: input has %lld features (shape %s) but input_size "
                   "is %lld; set input_size to %lld, or to 0 to infer it at "
                   "the first forward",
                   cell_type(s), (long long)f, shape_of(x, a, sizeof a),
                   (long long)s->in, (long long)f);
    return NULL;
  }
  int unbatched = nd == 2;
  /* time-major [L, N, in] */
  const torc_tensor *seq = unbatched ? torc_unsqueeze(x, 1)
                           : s->batch_first ? torc_transpose(x, 0, 1)
                                            : x;
  if (seq == NULL)
    return NULL;
  int64_t L = torc_size(seq, 0), n = torc_size(seq, 1);
  const torc_tensor *h0 = rq ? rq->h0 : NULL, *c0 = rq ? rq->c0 : NULL;
  if (c0 && s->cell != CELL_LSTM) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: given c0, but only an lstm has a cell state; pass "
                   "NULL for c0",
                   cell_type(s));
    return NULL;
  }
  if (h0 && check_state(s, "h0", h0, n, unbatched, x))
    return NULL;
  if (c0 && check_state(s, "c0", c0, n, unbatched, x))
    return NULL;
  if (unbatched) {
    h0 = h0 ? torc_unsqueeze(h0, 1) : NULL;
    c0 = c0 ? torc_unsqueeze(c0, 1) : NULL;
  }
  /* an incremental decode: start from the final states the last step
   * kept (unless given others), keep this step's */
  torc__decode *dec = torc__decode_active();
  int cache = 0;
  if (dec && s->bidir)
    torc__decode_uncacheable(dec, m, "a bidirectional layer reads the "
                                     "sequence backwards from its end");
  else if (dec && rq && rq->lengths)
    torc__decode_uncacheable(dec, m, "lengths given under a decode");
  else if (dec) {
    cache = 1;
    torc_tensor *ph = torc__decode_get(dec, m, 0);
    if (ph && h0 == NULL) {
      if (torc_size(ph, 1) != n || torc_dtype_of(ph) != torc_dtype_of(x)) {
        torc_set_error(TORC_ERR_SHAPE,
                       "%s: the decode kept states %s %s but this step's "
                       "batch is %lld %s; clear the decode to start new "
                       "sequences",
                       cell_type(s), shape_of(ph, a, sizeof a),
                       torc_dtype_name(torc_dtype_of(ph)), (long long)n,
                       torc_dtype_name(torc_dtype_of(x)));
        return NULL;
      }
      h0 = ph;
      if (s->cell == CELL_LSTM && c0 == NULL)
        c0 = torc__decode_get(dec, m, 1);
    }
  }
  if (L == 0) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the input has no time steps (shape %s)", cell_type(s),
                   shape_of(x, a, sizeof a));
    return NULL;
  }
  torc_tensor **masks = NULL;
  if (rq && rq->lengths &&
      (masks = length_masks(s, rq->lengths, L, n, x)) == NULL)
    return NULL;
  int dirs = n_dirs(s), n_st = s->layers * dirs;
  torc_tensor **hs = torc__calloc((size_t)n_st * 2, sizeof *hs);
  torc_tensor *y = NULL;
  if (hs == NULL) {
    torc_set_error(TORC_ERR_OOM, "%s: out of memory for the states",
                   cell_type(s));
    goto done;
  }
  torc_tensor **cs = hs + n_st;
  const torc_tensor *cur = seq;
  for (int l = 0; l < s->layers; l++) {
    torc_tensor *ys[2] = {NULL, NULL};
    for (int d = 0; d < dirs; d++) {
      ys[d] = run_direction(m, s, l, d, cur, masks, h0, c0,
                            &hs[l * dirs + d], &cs[l * dirs + d]);
      if (ys[d] == NULL)
        goto done;
    }
    torc_tensor *o =
        dirs == 2 ? torc_cat((const torc_tensor *const *)ys, 2, 2) : ys[0];
    if (o && l + 1 < s->layers && s->dropout > 0)
      o = torc_dropout(o, s->dropout, torc_module_is_training(m), NULL);
    if (o == NULL)
      goto done;
    cur = o;
  }
  y = (torc_tensor *)cur;
  y = unbatched ? torc_squeeze(y, 1)
      : s->batch_first ? torc_transpose(y, 0, 1)
                       : y;
  if (y && (rq || cache)) {
    torc_tensor *hn = torc_stack((const torc_tensor *const *)hs, n_st, 0);
    torc_tensor *cn = s->cell == CELL_LSTM
                          ? torc_stack((const torc_tensor *const *)cs, n_st, 0)
                          : NULL;
    if (cache && (hn == NULL || torc__decode_put(dec, m, 0, hn) ||
                  (cn && torc__decode_put(dec, m, 1, cn)))) {
      y = NULL;
      goto done;
    }
    if (!rq)
      goto done;
    if (unbatched) {
      hn = torc_squeeze(hn, 1);
      cn = cn ? torc_squeeze(cn, 1) : NULL;
    }
    if (hn == NULL || (s->cell == CELL_LSTM && cn == NULL))
      y = NULL;
    else {
      rq->h_n = torc_scope_keep(hn);
      rq->c_n = cn ? torc_scope_keep(cn) : NULL;
    }
  }
done:
  torc__free(hs);
  torc__free(masks);
  return y;
}

/* PyTorch's RNNBase.extra_repr. */
static int rnn_describe(const torc_module *m, char *buf, size_t size) {
  const rnn_state *s = torc_module_state(m);
  char nl[32] = "", bias[16] = "", bf[24] = "", dr[48] = "", bd[24] = "";
  char p[32];
  if (s->layers != 1)
    snprintf(nl, sizeof nl, ", num_layers=%d", s->layers);
  if (!s->bias)
    snprintf(bias, sizeof bias, ", bias=False");
  if (s->batch_first)
    snprintf(bf, sizeof bf, ", batch_first=True");
  if (s->dropout != 0)
    snprintf(dr, sizeof dr, ", dropout=%s",
             torc__pyfloat(p, sizeof p, s->dropout));
  if (s->bidir)
    snprintf(bd, sizeof bd, ", bidirectional=True");
  return snprintf(buf, size, "%lld, %lld%s%s%s%s%s", (long long)s->in,
                  (long long)s->hidden, nl, bias, bf, dr, bd);
}

static const torc_module_vtable rnn_vt = {sizeof(torc_module_vtable),
                                          rnn_forward, torc__layer_destroy,
                                          rnn_describe, rnn_reset};

torc_rnn_options torc_rnn_options_default(int64_t hidden_size) {
  torc_rnn_options o;
  memset(&o, 0, sizeof o);
  o.hidden_size = hidden_size;
  o.num_layers = 1;
  o.bias = 1;
  return o;
}

static torc_module *rnn_new(const char *type, int cell,
                            const torc_rnn_options *o) {
  if (o == NULL) {
    torc_set_error(TORC_ERR_NULL,
                   "%s: the options are NULL; start from "
                   "torc_rnn_options_default(hidden_size)",
                   type);
    return NULL;
  }
  if (o->input_size < 0 || o->hidden_size < 1 ||
      o->input_size > RNN_MAX_SIZE || o->hidden_size > RNN_MAX_SIZE) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: input_size %lld and hidden_size %lld; hidden_size "
                   "must be from 1 to 2^31 and input_size from 1 to 2^31 "
                   "(or 0 to infer it at the first forward)",
                   type, (long long)o->input_size, (long long)o->hidden_size);
    return NULL;
  }
  if (o->num_layers < 1) {
    torc_set_error(TORC_ERR_INVALID, "%s: num_layers is %d; it must be >= 1",
                   type, o->num_layers);
    return NULL;
  }
  if (!(o->dropout >= 0 && o->dropout <= 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: dropout is %g; it must be from 0 to 1", type,
                   o->dropout);
    return NULL;
  }
  if (cell == CELL_RNN_TANH && o->nonlinearity &&
      strcmp(o->nonlinearity, "tanh") != 0) {
    if (strcmp(o->nonlinearity, "relu") != 0) {
      torc_set_error(TORC_ERR_INVALID,
                     "rnn: nonlinearity '%s' is not tanh or relu",
                     o->nonlinearity);
      return NULL;
    }
    cell = CELL_RNN_RELU;
  }
  rnn_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->cell = cell;
    s->in = o->input_size;
    s->hidden = o->hidden_size;
    s->layers = o->num_layers;
    s->bias = o->bias != 0;
    s->batch_first = o->batch_first != 0;
    s->dropout = o->dropout;
    s->bidir = o->bidirectional != 0;
  }
  torc_module *m = torc__layer_new(type, &rnn_vt, s);
  if (m == NULL)
    return NULL;
  if (o->input_size == 0)
    torc__module_set_lazy(m, 1);
  else if (rnn_create(m, s)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

torc_module *torc_lstm_new(const torc_rnn_options *o) {
  return rnn_new("lstm", CELL_LSTM, o);
}

torc_module *torc_gru_new(const torc_rnn_options *o) {
  return rnn_new("gru", CELL_GRU, o);
}

torc_module *torc_rnn_new(const torc_rnn_options *o) {
  return rnn_new("rnn", CELL_RNN_TANH, o);
}

torc_status torc_rnn_forward(torc_module *m, const torc_tensor *x,
                             const torc_tensor *h0, const torc_tensor *c0,
                             const torc_tensor *lengths, torc_tensor **out,
                             torc_tensor **h_n, torc_tensor **c_n) {
  if (out)
    *out = NULL;
  if (h_n)
    *h_n = NULL;
  if (c_n)
    *c_n = NULL;
  if (m == NULL || x == NULL) {
    torc__null_input("torc_rnn_forward");
    return torc_last_status();
  }
  if (m->vt != &rnn_vt)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_rnn_forward: the module given is a %s, not "
                          "an lstm, gru or rnn; run it with "
                          "torc_module_forward",
                          torc_module_type_name(m));
  rnn_request rq = {m, h0, c0, lengths, NULL, NULL};
  rnn_request *outer = tl_req;
  tl_req = &rq;
  torc_tensor *y = torc_module_forward(m, x);
  tl_req = outer;
  if (y == NULL)
    return torc_last_status();
  if (out)
    *out = y;
  else
    torc_release(torc_scope_keep(y));
  if (h_n)
    *h_n = rq.h_n;
  else
    torc_release(torc_scope_keep(rq.h_n));
  if (c_n)
    *c_n = rq.c_n;
  else if (rq.c_n)
    torc_release(torc_scope_keep(rq.c_n));
  return TORC_OK;
}

/* ---- last_step ---- */

static torc_tensor *last_step_forward(torc_module *m,
                                      const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  const torc_tensor *x = in[0];
  char a[96];
  int nd = torc_ndim(x);
  if ((nd != 2 && nd != 3) || torc_size(x, nd - 2) == 0) {
    torc_set_error(TORC_ERR_SHAPE,
                   "last_step: expected [N, L, F] (or [L, F]) with L >= 1, "
                   "got shape %s; give the recurrent layer before it "
                   "batch_first = yes",
                   shape_of(x, a, sizeof a));
    return NULL;
  }
  return torc_select(x, nd - 2, torc_size(x, nd - 2) - 1);
}

static const torc_module_vtable last_step_vt = {
    sizeof(torc_module_vtable), last_step_forward, torc__layer_destroy, NULL,
    NULL};

torc_module *torc_last_step_new(void) {
  return torc__layer_new("last_step", &last_step_vt,
                         torc__calloc(1, sizeof(torc__layer_head)));
}
