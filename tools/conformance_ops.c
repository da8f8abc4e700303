/* tools/conformance_ops.c — the conformance suite's table: one row per
 * public op (or op variant) with its call, its operands' shapes per input
 * variant and how their values are made. The plain unary and binary rows
 * are derived from the op table; the runner is tools/conformance.c.
 */
#include "conformance_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

/* ---- input shapes ---- */

static void set_shape(shapes *o, int k, int nd, int64_t a, int64_t b,
                      int64_t c, int64_t d) {
  int64_t v[4] = {a, b, c, d};
  o->nd[k] = nd;
  for (int i = 0; i < nd; i++)
    o->s[k][i] = v[i];
}

/* Elementwise ops and reductions: [3,4]; broadcast operands [3,1], [1,4],
 * [4] (a single operand is [1,4] expanded to [3,4]); empty [0,4]; size-1
 * dims [1,3,1]. */
static int sh_elem(int variant, int n_in, shapes *o) {
  for (int k = 0; k < n_in; k++) {
    switch (variant) {
    case V_CONTIG:
    case V_NONCONTIG:
      set_shape(o, k, 2, 3, 4, 0, 0);
      break;
    case V_BROADCAST:
      if (n_in == 1) {
        set_shape(o, k, 2, 1, 4, 0, 0);
        o->exp_nd[k] = 2, o->exp[k][0] = 3, o->exp[k][1] = 4;
      } else if (k == 0) {
        set_shape(o, k, 2, 3, 1, 0, 0);
      } else if (k == 1) {
        set_shape(o, k, 2, 1, 4, 0, 0);
      } else {
        set_shape(o, k, 1, 4, 0, 0, 0);
      }
      break;
    case V_EMPTY:
      set_shape(o, k, 2, 0, 4, 0, 0);
      break;
    default:
      set_shape(o, k, 3, 1, 3, 1, 0);
    }
  }
  return 1;
}

/* matmul/linear operands a [M,K], b [K,N] (linear: weight [N,K], bias
 * [N]). */
static int sh_matmul(int variant, int n_in, shapes *o) {
  (void)n_in;
  switch (variant) {
  case V_CONTIG:
  case V_NONCONTIG:
    set_shape(o, 0, 2, 3, 4, 0, 0), set_shape(o, 1, 2, 4, 2, 0, 0);
    break;
  case V_BROADCAST:
    set_shape(o, 0, 3, 2, 3, 4, 0), set_shape(o, 1, 2, 4, 2, 0, 0);
    break;
  case V_EMPTY:
    set_shape(o, 0, 2, 0, 4, 0, 0), set_shape(o, 1, 2, 4, 2, 0, 0);
    break;
  default:
    set_shape(o, 0, 2, 1, 4, 0, 0), set_shape(o, 1, 2, 4, 1, 0, 0);
  }
  return 1;
}

static int sh_linear(int variant, int n_in, shapes *o) {
  (void)n_in;
  int64_t m = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 3;
  int64_t n = variant == V_SIZE1 ? 1 : 2;
  if (variant == V_BROADCAST)
    set_shape(o, 0, 3, 2, 3, 4, 0);
  else
    set_shape(o, 0, 2, m, 4, 0, 0);
  set_shape(o, 1, 2, n, 4, 0, 0);
  set_shape(o, 2, 1, n, 0, 0, 0);
  return 1;
}

/* NCHW ops: x [2,2,5,5] (size-1: [1,1,3,3]; empty: N = 0), conv weight
 * [3,2,3,3] and bias [3]. */
static int sh_nchw(int variant, int n_in, shapes *o) {
  if (variant == V_BROADCAST)
    return 0;
  int64_t nb = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 2;
  int64_t c = variant == V_SIZE1 ? 1 : 2, hw = variant == V_SIZE1 ? 3 : 5;
  int64_t oc = variant == V_SIZE1 ? 1 : 3;
  set_shape(o, 0, 4, nb, c, hw, hw);
  if (n_in > 1)
    set_shape(o, 1, 4, oc, c, 3, 3);
  if (n_in > 2)
    set_shape(o, 2, 1, oc, 0, 0, 0);
  return 1;
}

/* layer_norm: x [3,4], weight and bias [4]. */
static int sh_lastdim(int variant, int n_in, shapes *o) {
  if (variant == V_BROADCAST)
    return 0;
  int64_t m = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 3;
  set_shape(o, 0, 2, m, 4, 0, 0);
  for (int k = 1; k < n_in; k++)
    set_shape(o, k, 1, 4, 0, 0, 0);
  return 1;
}

/* gather: x [3,4], index [3,2] (values < 4, dim 1). */
static int sh_gather(int variant, int n_in, shapes *o) {
  (void)n_in;
  if (variant == V_BROADCAST)
    return 0;
  int64_t m = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 3;
  set_shape(o, 0, 2, m, 4, 0, 0);
  set_shape(o, 1, 2, m, 2, 0, 0);
  return 1;
}

/* index_select (dim 0): x [3,4], index [5] (values < 3). */
static int sh_select(int variant, int n_in, shapes *o) {
  (void)n_in;
  if (variant == V_BROADCAST)
    return 0;
  set_shape(o, 0, 2, variant == V_SIZE1 ? 3 : 3, variant == V_SIZE1 ? 1 : 4,
            0, 0);
  set_shape(o, 1, 1, variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 5, 0,
            0, 0);
  return 1;
}

/* embedding: indices [2,3] (values < 5), weight [5,4]. */
static int sh_embed(int variant, int n_in, shapes *o) {
  (void)n_in;
  if (variant == V_BROADCAST)
    return 0;
  int64_t m = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 2;
  set_shape(o, 0, 2, m, variant == V_SIZE1 ? 1 : 3, 0, 0);
  set_shape(o, 1, 2, 5, 4, 0, 0);
  return 1;
}

/* masked_fill: x [3,4], mask [3,4] (broadcast: [4]; size-1: [1,3,1]). */
static int sh_masked(int variant, int n_in, shapes *o) {
  sh_elem(variant == V_BROADCAST ? V_CONTIG : variant, n_in, o);
  if (variant == V_BROADCAST)
    set_shape(o, 1, 1, 4, 0, 0, 0);
  return 1;
}

/* attention: q [2,3,4], k [2,5,4], v [2,5,3] (+ a bool mask [3,5], which
 * broadcasts over the batch); empty: L = 0; size-1: [1,1,4], [1,1,4],
 * [1,1,1]. */
static int sh_attn(int variant, int n_in, shapes *o) {
  if (variant == V_BROADCAST)
    return 0;
  int one = variant == V_SIZE1;
  int64_t b = one ? 1 : 2, l = variant == V_EMPTY ? 0 : one ? 1 : 3;
  int64_t s = one ? 1 : 5, ev = one ? 1 : 3;
  set_shape(o, 0, 3, b, l, 4, 0);
  set_shape(o, 1, 3, b, s, 4, 0);
  set_shape(o, 2, 3, b, s, ev, 0);
  if (n_in > 3)
    set_shape(o, 3, 2, l, s, 0, 0);
  return 1;
}

/* The recurrent cells: N = 3 rows of H = 2 (empty: N = 0; size-1: N = H
 * = 1): lstm gates [N, 4H], c [N, H]; gru xg, hg [N, 3H], h [N, H]. No
 * broadcast variant. */
static int sh_cell(int variant, int n_in, shapes *o) {
  if (variant == V_BROADCAST)
    return 0;
  int64_t n = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 3;
  int64_t h = variant == V_SIZE1 ? 1 : 2, g = n_in == 2 ? 4 : 3;
  set_shape(o, 0, 2, n, g * h, 0, 0);
  set_shape(o, 1, 2, n, n_in == 2 ? h : g * h, 0, 0);
  if (n_in > 2)
    set_shape(o, 2, 2, n, h, 0, 0);
  return 1;
}

/* ---- the calls ---- */

static torc_tensor *c_matmul(torc_tensor *const *in) {
  return torc_matmul(in[0], in[1]);
}

/* The plain ops' rows and calls come from the op table (torc/ops.def):
 * one per UNARY / BINARY fn row, with the inputs of its test column and
 * gradients wherever it has a backward. */
#define TORC_CONF_CALL_UNARY(op)                                               \
  static torc_tensor *c_##op(torc_tensor *const *in) { return torc_##op(in[0]); }
#define TORC_CONF_CALL_BINARY(op)                                              \
  static torc_tensor *c_##op(torc_tensor *const *in) {                         \
    return torc_##op(in[0], in[1]);                                            \
  }
#define TORC_CONF_CALL_UNARY_API(op) TORC_CONF_CALL_UNARY(op)
#define TORC_CONF_CALL_BINARY_API(op) TORC_CONF_CALL_BINARY(op)
#define TORC_CONF_CALL_OWN(op)
#define TORC_CONF_CALL_NONE(op)
#define TORC_OP(name, kind, rule, fn, ...) TORC_CONF_CALL_##fn(name)
#include "torc/ops.def"
#undef TORC_OP

static torc_tensor *c_leaky_relu(torc_tensor *const *in) {
  return torc_leaky_relu(in[0], 0.1);
}
static torc_tensor *c_elu(torc_tensor *const *in) {
  return torc_elu(in[0], 1.0);
}
static torc_tensor *c_gelu(torc_tensor *const *in) {
  return torc_gelu(in[0], 0);
}
static torc_tensor *c_gelu_tanh(torc_tensor *const *in) {
  return torc_gelu(in[0], 1);
}
static torc_tensor *c_softplus(torc_tensor *const *in) {
  return torc_softplus(in[0], 1.0, 20.0);
}
static torc_tensor *c_clamp(torc_tensor *const *in) {
  return torc_clamp(in[0], 1, -1.0, 1, 1.5);
}
static torc_tensor *c_where(torc_tensor *const *in) {
  return torc_where(in[0], in[1], in[2]);
}
static torc_tensor *c_add_scalar(torc_tensor *const *in) {
  return torc_add_scalar(in[0], 2.0);
}
static torc_tensor *c_sub_scalar(torc_tensor *const *in) {
  return torc_sub_scalar(in[0], 3.0);
}
static torc_tensor *c_mul_scalar(torc_tensor *const *in) {
  return torc_mul_scalar(in[0], -1.5);
}
static torc_tensor *c_div_scalar(torc_tensor *const *in) {
  return torc_div_scalar(in[0], 4.0);
}
static torc_tensor *c_pow_scalar(torc_tensor *const *in) {
  return torc_pow_scalar(in[0], 3.0);
}

static const int dim_last[1] = {-1};
#define REDUCE(op)                                                             \
  static torc_tensor *c_##op##_all(torc_tensor *const *in) {                   \
    return torc_##op(in[0], NULL, 0, 0);                                       \
  }                                                                            \
  static torc_tensor *c_##op##_dim(torc_tensor *const *in) {                   \
    return torc_##op(in[0], dim_last, 1, 1);                                   \
  }
#define REDUCE_CORR(op)                                                        \
  static torc_tensor *c_##op##_all(torc_tensor *const *in) {                   \
    return torc_##op(in[0], NULL, 0, 1.0, 0);                                  \
  }                                                                            \
  static torc_tensor *c_##op##_dim(torc_tensor *const *in) {                   \
    return torc_##op(in[0], dim_last, 1, 1.0, 1);                              \
  }
REDUCE(sum)
REDUCE(mean)
REDUCE(prod)
REDUCE(amax)
REDUCE(amin)
REDUCE_CORR(var)
REDUCE_CORR(std)
REDUCE(logsumexp)
#undef REDUCE
#undef REDUCE_CORR

static torc_tensor *c_norm2(torc_tensor *const *in) {
  return torc_norm(in[0], 2.0, dim_last, 1, 0);
}
static torc_tensor *c_norm1(torc_tensor *const *in) {
  return torc_norm(in[0], 1.0, NULL, 0, 0);
}
static torc_tensor *c_cumsum(torc_tensor *const *in) {
  return torc_cumsum(in[0], -1);
}
static torc_tensor *c_softmax(torc_tensor *const *in) {
  return torc_softmax(in[0], -1);
}
static torc_tensor *c_log_softmax(torc_tensor *const *in) {
  return torc_log_softmax(in[0], -1);
}
static torc_tensor *c_argmax(torc_tensor *const *in) {
  return torc_argmax(in[0], dim_last, 0);
}
static torc_tensor *c_argmin(torc_tensor *const *in) {
  return torc_argmin(in[0], NULL, 0);
}

/* The two outputs of max_dim/min_dim/topk, each a row of its own. */
static torc_tensor *pick(torc_status st, torc_tensor *values,
                         torc_tensor *indices, int want_indices) {
  if (st != TORC_OK)
    return NULL;
  return want_indices ? indices : values; /* both owned by the scope */
}
static torc_tensor *c_max_dim_v(torc_tensor *const *in) {
  torc_tensor *v = NULL, *i = NULL;
  torc_status st = torc_max_dim(in[0], -1, 0, &v, &i);
  return pick(st, v, i, 0);
}
static torc_tensor *c_max_dim_i(torc_tensor *const *in) {
  torc_tensor *v = NULL, *i = NULL;
  torc_status st = torc_max_dim(in[0], -1, 0, &v, &i);
  return pick(st, v, i, 1);
}
static torc_tensor *c_min_dim_v(torc_tensor *const *in) {
  torc_tensor *v = NULL, *i = NULL;
  torc_status st = torc_min_dim(in[0], -1, 1, &v, &i);
  return pick(st, v, i, 0);
}
static torc_tensor *c_topk_v(torc_tensor *const *in) {
  torc_tensor *v = NULL, *i = NULL;
  int64_t k = torc_ndim(in[0]) > 0 && torc_size(in[0], -1) < 2
                  ? torc_size(in[0], -1)
                  : 2;
  torc_status st = torc_topk(in[0], k, -1, 1, 1, &v, &i);
  return pick(st, v, i, 0);
}
static torc_tensor *c_topk_i(torc_tensor *const *in) {
  torc_tensor *v = NULL, *i = NULL;
  int64_t k = torc_ndim(in[0]) > 0 && torc_size(in[0], -1) < 2
                  ? torc_size(in[0], -1)
                  : 2;
  torc_status st = torc_topk(in[0], k, -1, 1, 1, &v, &i);
  return pick(st, v, i, 1);
}
static torc_tensor *c_linear(torc_tensor *const *in) {
  return torc_linear(in[0], in[1], in[2]);
}
static torc_tensor *c_conv2d(torc_tensor *const *in) {
  torc_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, {0, 0}, 1};
  return torc_conv2d(in[0], in[1], in[2], &p);
}
static torc_tensor *c_max_pool2d(torc_tensor *const *in) {
  torc_pool2d_params p = {{2, 2}, {1, 1}, {0, 0}, {1, 1}, 0, 0, 0};
  return torc_max_pool2d(in[0], &p);
}
static torc_tensor *c_avg_pool2d(torc_tensor *const *in) {
  torc_pool2d_params p = {{3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, 0, 0};
  return torc_avg_pool2d(in[0], &p);
}
static torc_tensor *c_adaptive_avg_pool2d(torc_tensor *const *in) {
  return torc_adaptive_avg_pool2d(in[0], 2, 2);
}
static torc_tensor *c_layer_norm(torc_tensor *const *in) {
  const int64_t ns[1] = {4};
  return torc_layer_norm(in[0], ns, 1, in[1], in[2], 1e-5);
}
static torc_tensor *c_tril(torc_tensor *const *in) {
  return torc_tril(in[0], 1);
}
static torc_tensor *c_triu(torc_tensor *const *in) {
  return torc_triu(in[0], -1);
}
static torc_tensor *c_masked_fill(torc_tensor *const *in) {
  return torc_masked_fill(in[0], in[1], -0.5);
}
static torc_tensor *c_sdpa(torc_tensor *const *in) {
  return torc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, 0, 0,
                                           NULL);
}
static torc_tensor *c_sdpa_causal(torc_tensor *const *in) {
  return torc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, 1,
                                           0.3, NULL);
}
/* a bool mask with the diagonal always taking part (S >= L here): no row
 * is all -inf */
static torc_tensor *c_sdpa_mask(torc_tensor *const *in) {
  torc_tensor *diag = torc_tril(torc_triu(torc_ones_like(in[3]), 0), 0);
  torc_tensor *keep = diag ? torc_logical_or(in[3], diag) : NULL;
  torc_tensor *out = keep ? torc_scaled_dot_product_attention(
                                in[0], in[1], in[2], keep, 0, 0, 0, NULL)
                          : NULL;
  return out;
}
static torc_tensor *c_gather(torc_tensor *const *in) {
  return torc_gather(in[0], 1, in[1]);
}
static torc_tensor *c_index_select(torc_tensor *const *in) {
  return torc_index_select(in[0], 0, in[1]);
}
static torc_tensor *c_embedding(torc_tensor *const *in) {
  return torc_embedding(in[0], in[1]);
}

/* ---- fused ops (torc/ops_fused.def) ---- */

/* lstm_cell: h' and c' side by side, so both outputs' gradients count. */
static torc_tensor *c_lstm_cell(torc_tensor *const *in) {
  torc_tensor *o[2] = {NULL, NULL};
  if (torc_lstm_cell(in[0], in[1], &o[0], &o[1]) != TORC_OK)
    return NULL;
  return torc_cat((const torc_tensor *const *)o, 2, 1);
}
static torc_tensor *c_gru_cell(torc_tensor *const *in) {
  return torc_gru_cell(in[0], in[1], in[2]);
}

/* cross_entropy: logits [3,4] (empty: N = 0; size-1: [1,4]), class
 * indices [3] below 4, class weights [4]; no broadcast variant. */
static int sh_ce(int variant, int n_in, shapes *o) {
  if (variant == V_BROADCAST)
    return 0;
  int64_t m = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 3;
  set_shape(o, 0, 2, m, 4, 0, 0);
  set_shape(o, 1, 1, m, 0, 0, 0);
  if (n_in > 2)
    set_shape(o, 2, 1, 4, 0, 0, 0);
  return 1;
}

/* cross_entropy over [N, C, d]: logits [2,4,3] (empty: N = 0; size-1:
 * [1,4,1]), class indices [2,3]. */
static int sh_ce_nd(int variant, int n_in, shapes *o) {
  (void)n_in;
  if (variant == V_BROADCAST)
    return 0;
  int64_t m = variant == V_EMPTY ? 0 : variant == V_SIZE1 ? 1 : 2;
  int64_t d = variant == V_SIZE1 ? 1 : 3;
  set_shape(o, 0, 3, m, 4, d, 0);
  set_shape(o, 1, 2, m, d, 0, 0);
  return 1;
}

static torc_tensor *c_cross_entropy(torc_tensor *const *in) {
  return torc_cross_entropy(in[0], in[1], NULL, NULL);
}
static torc_tensor *c_cross_entropy_sum_ls(torc_tensor *const *in) {
  torc_cross_entropy_params p = {2, 0.1, TORC_REDUCTION_SUM, 0};
  return torc_cross_entropy(in[0], in[1], NULL, &p);
}
static torc_tensor *c_cross_entropy_w_none(torc_tensor *const *in) {
  torc_cross_entropy_params p = {-100, 0.2, TORC_REDUCTION_NONE, 0};
  return torc_cross_entropy(in[0], in[1], in[2], &p);
}
static torc_tensor *c_cross_entropy_w_mean(torc_tensor *const *in) {
  torc_cross_entropy_params p = {0, 0.0, TORC_REDUCTION_MEAN, 0};
  return torc_cross_entropy(in[0], in[1], in[2], &p);
}

/* The n updated tensors of a step, flattened and concatenated. */
static torc_tensor *step_result(torc_status st, torc_tensor *const *ts,
                                int n) {
  if (st != TORC_OK)
    return NULL;
  torc_tensor *flat[4];
  for (int i = 0; i < n; i++) {
    const int64_t all[1] = {torc_numel(ts[i])};
    if ((flat[i] = torc_reshape(ts[i], all, 1)) == NULL)
      return NULL;
  }
  return torc_cat((const torc_tensor *const *)flat, n, 0);
}

/* Two steps (the first-step path, then the next) of SGD on param in[0]
 * with grad in[1] and momentum buffer in[2], updated in place. */
static torc_tensor *sgd_two(torc_tensor *const *in, torc_sgd_step_params p) {
  p.first_step = 1;
  torc_status st = torc_sgd_step_(in[0], in[1], in[2], &p);
  p.first_step = 0;
  if (st == TORC_OK)
    st = torc_sgd_step_(in[0], in[1], in[2], &p);
  torc_tensor *ts[2] = {in[0], in[2]};
  return step_result(st, ts, p.momentum != 0 ? 2 : 1);
}
static torc_tensor *c_sgd_step(torc_tensor *const *in) {
  torc_sgd_step_params p = {0.1, 0.9, 0.1, 0.01, 0, 0, 0, 0};
  return sgd_two(in, p);
}
static torc_tensor *c_sgd_step_nesterov(torc_tensor *const *in) {
  torc_sgd_step_params p = {0.05, 0.8, 0, 0, 1, 1, 0, 0};
  return sgd_two(in, p);
}
static torc_tensor *c_sgd_step_plain(torc_tensor *const *in) {
  torc_sgd_step_params p = {0.1, 0, 0, 0.5, 0, 0, 0, 0};
  return sgd_two(in, p);
}

/* Two Adam steps on param in[0], grad in[1], exp_avg in[2], exp_avg_sq
 * in[3] (and, with amsgrad, a max_exp_avg_sq of 1.5 in[3]). */
static torc_tensor *adam_two(torc_tensor *const *in,
                             torc_adam_step_params p) {
  torc_tensor *vmax = p.amsgrad ? torc_mul_scalar(in[3], 1.5) : NULL;
  if (p.amsgrad && vmax == NULL)
    return NULL;
  torc_status st = TORC_OK;
  for (p.step = 1; p.step <= 2 && st == TORC_OK; p.step++)
    st = torc_adam_step_(in[0], in[1], in[2], in[3], vmax, &p);
  torc_tensor *ts[4] = {in[0], in[2], in[3], vmax};
  return step_result(st, ts, p.amsgrad ? 4 : 3);
}
static torc_tensor *c_adam_step(torc_tensor *const *in) {
  torc_adam_step_params p = {0.01, 0.9, 0.999, 1e-8, 0.1, 1, 0, 0, 0, 0};
  return adam_two(in, p);
}
static torc_tensor *c_adamw_step_amsgrad(torc_tensor *const *in) {
  torc_adam_step_params p = {0.02, 0.8, 0.99, 1e-6, 0.05, 1, 1, 1, 1, 0};
  return adam_two(in, p);
}

/* ---- the table ---- */

#define U(name, fn, kind, diff)                                                \
  { name, fn, sh_elem, 1, {kind}, 0, diff }

/* The table's plain ops first (in table order), then the rest. */
#define BW(node, fn_, save_) 1
#define OWNBW 1
#define NOBW 0
#define DATA O_DATA
#define POS O_POS
#define IN(...) (__VA_ARGS__)
#define KINDS(...) {__VA_ARGS__}
#define TORC_CONF_ROW_UNARY(op, diff, in)                                      \
  {#op, c_##op, sh_elem, 1, KINDS in, 0, diff},
#define TORC_CONF_ROW_BINARY(op, diff, in)                                     \
  {#op, c_##op, sh_elem, 2, KINDS in, 0, diff},
#define TORC_CONF_ROW_UNARY_API(op, diff, in) TORC_CONF_ROW_UNARY(op, diff, in)
#define TORC_CONF_ROW_BINARY_API(op, diff, in) TORC_CONF_ROW_BINARY(op, diff, in)
#define TORC_CONF_ROW_OWN(op, diff, in)
#define TORC_CONF_ROW_NONE(op, diff, in)
#define TORC_OP(name, kind, rule, fn, io, params, ref, backward, test, ...)    \
  TORC_CONF_ROW_##fn(name, backward, test)
const op_row conf_rows[] = {
#include "torc/ops.def"
#undef TORC_OP
    U("leaky_relu", c_leaky_relu, O_DATA, 1),
    U("elu", c_elu, O_DATA, 1),
    U("gelu", c_gelu, O_DATA, 1),
    U("gelu(tanh)", c_gelu_tanh, O_DATA, 1),
    U("softplus", c_softplus, O_DATA, 1),
    U("clamp", c_clamp, O_DATA, 1),
    U("add_scalar", c_add_scalar, O_DATA, 1),
    U("sub_scalar", c_sub_scalar, O_DATA, 1),
    U("mul_scalar", c_mul_scalar, O_DATA, 1),
    U("div_scalar", c_div_scalar, O_DATA, 1),
    U("pow_scalar", c_pow_scalar, O_DATA, 1),
    {"where", c_where, sh_elem, 3, {O_BOOL, O_DATA, O_DATA}, 0, 1},
    U("sum", c_sum_all, O_DATA, 1),
    U("sum(dim)", c_sum_dim, O_DATA, 1),
    U("mean", c_mean_all, O_DATA, 1),
    U("mean(dim)", c_mean_dim, O_DATA, 1),
    U("prod", c_prod_all, O_DATA, 1),
    U("prod(dim)", c_prod_dim, O_DATA, 1),
    U("amax", c_amax_all, O_DATA, 1),
    U("amax(dim)", c_amax_dim, O_DATA, 1),
    U("amin", c_amin_all, O_DATA, 1),
    U("amin(dim)", c_amin_dim, O_DATA, 1),
    U("var", c_var_all, O_DATA, 1),
    U("var(dim)", c_var_dim, O_DATA, 1),
    U("std", c_std_all, O_DATA, 1),
    U("std(dim)", c_std_dim, O_DATA, 1),
    U("logsumexp", c_logsumexp_all, O_DATA, 1),
    U("logsumexp(dim)", c_logsumexp_dim, O_DATA, 1),
    U("norm(p=2,dim)", c_norm2, O_DATA, 1),
    U("norm(p=1)", c_norm1, O_DATA, 1),
    U("cumsum", c_cumsum, O_DATA, 1),
    U("softmax", c_softmax, O_DATA, 1),
    U("log_softmax", c_log_softmax, O_DATA, 1),
    U("max_dim.values", c_max_dim_v, O_DATA, 1),
    U("max_dim.indices", c_max_dim_i, O_DATA, 0),
    U("min_dim.values", c_min_dim_v, O_DATA, 1),
    U("argmax", c_argmax, O_DATA, 0),
    U("argmin", c_argmin, O_DATA, 0),
    U("topk.values", c_topk_v, O_DATA, 1),
    U("topk.indices", c_topk_i, O_DATA, 0),
    {"matmul", c_matmul, sh_matmul, 2, {O_DATA, O_DATA}, 0, 1},
    {"linear", c_linear, sh_linear, 3, {O_DATA, O_DATA, O_DATA}, 0, 1},
    {"conv2d", c_conv2d, sh_nchw, 3, {O_DATA, O_DATA, O_DATA}, 0, 1},
    {"max_pool2d", c_max_pool2d, sh_nchw, 1, {O_DATA}, 0, 1},
    {"avg_pool2d", c_avg_pool2d, sh_nchw, 1, {O_DATA}, 0, 1},
    {"adaptive_avg_pool2d", c_adaptive_avg_pool2d, sh_nchw, 1, {O_DATA}, 0,
     1},
    {"layer_norm", c_layer_norm, sh_lastdim, 3, {O_DATA, O_DATA, O_DATA}, 0,
     1},
    {"tril", c_tril, sh_elem, 1, {O_DATA}, 0, 1},
    {"triu", c_triu, sh_elem, 1, {O_DATA}, 0, 1},
    {"masked_fill", c_masked_fill, sh_masked, 2, {O_DATA, O_BOOL}, 0, 1},
    {"scaled_dot_product_attention", c_sdpa, sh_attn, 3,
     {O_DATA, O_DATA, O_DATA}, 0, 1},
    {"scaled_dot_product_attention(causal,scale)", c_sdpa_causal, sh_attn, 3,
     {O_DATA, O_DATA, O_DATA}, 0, 1},
    {"scaled_dot_product_attention(bool mask)", c_sdpa_mask, sh_attn, 4,
     {O_DATA, O_DATA, O_DATA, O_BOOL}, 0, 1},
    {"gather", c_gather, sh_gather, 2, {O_DATA, O_INDEX}, 4, 1},
    {"index_select", c_index_select, sh_select, 2, {O_DATA, O_INDEX}, 3, 1},
    {"embedding", c_embedding, sh_embed, 2, {O_INDEX, O_DATA}, 5, 1},
    {"cross_entropy", c_cross_entropy, sh_ce, 2, {O_DATA, O_INDEX}, 4, 1},
    {"cross_entropy(sum,smoothing,ignore)", c_cross_entropy_sum_ls, sh_ce, 2,
     {O_DATA, O_INDEX}, 4, 1},
    {"cross_entropy(weight,smoothing,none)", c_cross_entropy_w_none, sh_ce,
     3, {O_DATA, O_INDEX, O_CONST}, 4, 1},
    {"cross_entropy(weight,ignore,mean)", c_cross_entropy_w_mean, sh_ce, 3,
     {O_DATA, O_INDEX, O_CONST}, 4, 1},
    {"cross_entropy([N,C,d])", c_cross_entropy, sh_ce_nd, 2,
     {O_DATA, O_INDEX}, 4, 1},
    {"lstm_cell", c_lstm_cell, sh_cell, 2, {O_DATA, O_DATA}, 0, 1},
    {"gru_cell", c_gru_cell, sh_cell, 3, {O_DATA, O_DATA, O_DATA}, 0, 1},
    {"sgd_step_", c_sgd_step, sh_elem, 3, {O_DATA, O_DATA, O_DATA}, 0, 0},
    {"sgd_step_(nesterov,maximize)", c_sgd_step_nesterov, sh_elem, 3,
     {O_DATA, O_DATA, O_DATA}, 0, 0},
    {"sgd_step_(no momentum)", c_sgd_step_plain, sh_elem, 2,
     {O_DATA, O_DATA}, 0, 0},
    {"adam_step_", c_adam_step, sh_elem, 4, {O_DATA, O_DATA, O_DATA, O_POS},
     0, 0},
    {"adam_step_(adamw,amsgrad,maximize)", c_adamw_step_amsgrad, sh_elem, 4,
     {O_DATA, O_DATA, O_DATA, O_POS}, 0, 0},
};
#undef U
#undef BW
#undef OWNBW
#undef NOBW
#undef DATA
#undef POS
#undef IN
#undef KINDS

const size_t conf_n_rows = sizeof conf_rows / sizeof conf_rows[0];
