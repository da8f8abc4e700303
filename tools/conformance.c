/* tools/conformance.c — the backend conformance suite (DESIGN §13): a table
 * with one row per public op; each row x dtype x input variant runs on the
 * device under test and on the cpu (ref), outputs and gradients compared,
 * plus a gradcheck in f64 on the device for every differentiable op.
 *
 * Oracle: every non-cpu device type is compared with cpu, whose kernels
 * ref serves. Future work: a fast cpu plugin registers for "cpu" too, so
 * certifying it needs ref's kernels reachable under another name (or a
 * "run with provider" switch); today `torc test-backend` only checks the
 * non-cpu device types a plugin registers.
 *
 * Tolerances: integers and bool must be equal. Floats pass when
 * |dev - cpu| <= atol + rtol |cpu| with (atol, rtol) = (1e-12, 1e-10) for
 * f64, (1e-5, 1e-5) for f32, (1e-2, 1e-2) for f16, (2e-2, 2e-2) for bf16:
 * a backend may sum in another order or use its own transcendental
 * functions, which moves f32 results by a few ulps on these small inputs
 * (at most 12 elements summed), and f16/bf16 by about one ulp of their
 * 11/8-bit mantissas. NaN equals NaN, an infinity equals the same one.
 */
#include "conformance.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

/* ---- input variants and shapes ---- */

enum { V_CONTIG, V_NONCONTIG, V_BROADCAST, V_EMPTY, V_SIZE1, V_COUNT };
static const char *const variant_names[V_COUNT] = {
    "contiguous", "non-contiguous", "broadcast", "empty", "size-1"};

/* How an operand's values are made: the dtype under test in [-2, 2]
 * (integers -8..8), the dtype under test and positive, an i64 index below
 * the row's range, a bool mask, or (O_CONST) positive values of the dtype
 * under test that never require grad (class weights). */
enum { O_DATA, O_POS, O_INDEX, O_BOOL, O_CONST };

enum { MAXIN = 4, MAXD = 4 };

typedef struct shapes {
  int nd[MAXIN];
  int64_t s[MAXIN][MAXD];
  int exp_nd[MAXIN]; /* > 0: expand operand to exp[] (stride 0) */
  int64_t exp[MAXIN][MAXD];
} shapes;

typedef int (*shape_fn)(int variant, int n_in, shapes *o);

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

/* ---- the calls ---- */

typedef torc_tensor *(*call_fn)(torc_tensor *const *in);

#define UNARY(op)                                                              \
  static torc_tensor *c_##op(torc_tensor *const *in) { return torc_##op(in[0]); }
#define BINARY(op)                                                             \
  static torc_tensor *c_##op(torc_tensor *const *in) {                         \
    return torc_##op(in[0], in[1]);                                            \
  }
UNARY(neg)
UNARY(abs)
UNARY(sign)
UNARY(square)
UNARY(relu)
UNARY(exp)
UNARY(log)
UNARY(sqrt)
UNARY(sin)
UNARY(cos)
UNARY(tanh)
UNARY(sigmoid)
UNARY(reciprocal)
UNARY(log1p)
UNARY(rsqrt)
UNARY(silu)
UNARY(logical_not)
BINARY(add)
BINARY(sub)
BINARY(mul)
BINARY(div)
BINARY(pow)
BINARY(maximum)
BINARY(minimum)
BINARY(eq)
BINARY(ne)
BINARY(lt)
BINARY(le)
BINARY(gt)
BINARY(ge)
BINARY(logical_and)
BINARY(logical_or)
BINARY(matmul)
#undef UNARY
#undef BINARY

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
static torc_tensor *c_gather(torc_tensor *const *in) {
  return torc_gather(in[0], 1, in[1]);
}
static torc_tensor *c_index_select(torc_tensor *const *in) {
  return torc_index_select(in[0], 0, in[1]);
}
static torc_tensor *c_embedding(torc_tensor *const *in) {
  return torc_embedding(in[0], in[1]);
}

/* ---- fused ops (core/ops_fused.def) ---- */

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

typedef struct op_row {
  const char *name;
  call_fn call;
  shape_fn shape;
  int n_in;
  unsigned char kind[MAXIN];
  int64_t index_range; /* O_INDEX values are below this */
  int diff;            /* differentiable: gradients compared, gradcheck */
} op_row;

#define U(name, fn, kind, diff)                                                \
  { name, fn, sh_elem, 1, {kind}, 0, diff }
#define B(name, fn, k0, k1, diff)                                              \
  { name, fn, sh_elem, 2, {k0, k1}, 0, diff }

static const op_row rows[] = {
    U("neg", c_neg, O_DATA, 1),
    U("abs", c_abs, O_DATA, 1),
    U("sign", c_sign, O_DATA, 1),
    U("square", c_square, O_DATA, 1),
    U("relu", c_relu, O_DATA, 1),
    U("exp", c_exp, O_DATA, 1),
    U("log", c_log, O_POS, 1),
    U("sqrt", c_sqrt, O_POS, 1),
    U("sin", c_sin, O_DATA, 1),
    U("cos", c_cos, O_DATA, 1),
    U("tanh", c_tanh, O_DATA, 1),
    U("sigmoid", c_sigmoid, O_DATA, 1),
    U("reciprocal", c_reciprocal, O_POS, 1),
    U("log1p", c_log1p, O_POS, 1),
    U("rsqrt", c_rsqrt, O_POS, 1),
    U("silu", c_silu, O_DATA, 1),
    U("leaky_relu", c_leaky_relu, O_DATA, 1),
    U("elu", c_elu, O_DATA, 1),
    U("gelu", c_gelu, O_DATA, 1),
    U("gelu(tanh)", c_gelu_tanh, O_DATA, 1),
    U("softplus", c_softplus, O_DATA, 1),
    U("clamp", c_clamp, O_DATA, 1),
    U("logical_not", c_logical_not, O_DATA, 0),
    U("add_scalar", c_add_scalar, O_DATA, 1),
    U("sub_scalar", c_sub_scalar, O_DATA, 1),
    U("mul_scalar", c_mul_scalar, O_DATA, 1),
    U("div_scalar", c_div_scalar, O_DATA, 1),
    U("pow_scalar", c_pow_scalar, O_DATA, 1),
    B("add", c_add, O_DATA, O_DATA, 1),
    B("sub", c_sub, O_DATA, O_DATA, 1),
    B("mul", c_mul, O_DATA, O_DATA, 1),
    B("div", c_div, O_DATA, O_POS, 1),
    B("pow", c_pow, O_POS, O_POS, 1),
    B("maximum", c_maximum, O_DATA, O_DATA, 1),
    B("minimum", c_minimum, O_DATA, O_DATA, 1),
    B("eq", c_eq, O_DATA, O_DATA, 0),
    B("ne", c_ne, O_DATA, O_DATA, 0),
    B("lt", c_lt, O_DATA, O_DATA, 0),
    B("le", c_le, O_DATA, O_DATA, 0),
    B("gt", c_gt, O_DATA, O_DATA, 0),
    B("ge", c_ge, O_DATA, O_DATA, 0),
    B("logical_and", c_logical_and, O_DATA, O_DATA, 0),
    B("logical_or", c_logical_or, O_DATA, O_DATA, 0),
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
#undef B

static const torc_dtype dtypes[] = {TORC_F32, TORC_F64,  TORC_F16, TORC_BF16,
                                    TORC_I32, TORC_I64,  TORC_U8,  TORC_BOOL};

/* ---- building inputs ---- */

static int is_float(torc_dtype dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

static int64_t shape_numel(const int64_t *s, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= s[i];
  return n;
}

/* Value i of operand k: distinct within an operand (7 is prime to 17, and
 * operands hold at most 17 elements... or repeat harmlessly beyond), never
 * 0 for floats, the two operands of a binary op never tied. */
static double value(int kind, torc_dtype dt, int k, int64_t i, int64_t range) {
  int64_t m = (i * 7 + k * 5 + 3) % 17;
  switch (kind) {
  case O_INDEX:
    return (double)((i * 5 + k + 1) % (range > 0 ? range : 1));
  case O_BOOL:
    return (double)((i * 3 + 1) % 2);
  case O_POS:
  case O_CONST:
    if (is_float(dt))
      return 0.5 + (double)m * 0.25 + 0.05 * k;
    return dt == TORC_BOOL ? 1.0 : (double)(1 + m % 5);
  default:
    if (is_float(dt))
      return (double)(m - 8) * 0.25 + 0.1 * (k + 1);
    if (dt == TORC_BOOL)
      return (double)((i + k) % 2);
    return dt == TORC_U8 ? (double)m : (double)(m - 8);
  }
}

/* A contiguous cpu tensor of shape s with operand k's values. */
static torc_tensor *make_base(int kind, torc_dtype dt, int k, const int64_t *s,
                              int nd, int64_t range) {
  int64_t n = shape_numel(s, nd);
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  if (v == NULL)
    return NULL;
  for (int64_t i = 0; i < n; i++)
    v[i] = value(kind, dt, k, i, range);
  torc_tensor *t = torc_from_host(v, s, nd, TORC_F64, TORC_CPU);
  free(v);
  torc_dtype want = kind == O_INDEX ? TORC_I64
                    : kind == O_BOOL ? TORC_BOOL
                                     : dt;
  return t ? torc_to_dtype(t, want) : NULL;
}

/* ---- comparing ---- */

static double *host_f64(const torc_tensor *t, int64_t *n) {
  torc_tensor *c = torc_to(t, TORC_CPU);
  c = c ? torc_to_dtype(c, TORC_F64) : NULL;
  c = c ? torc_contiguous(c) : NULL;
  if (c == NULL)
    return NULL;
  *n = torc_numel(c);
  double *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
  if (v && torc_to_host(c, v, sizeof *v * (size_t)*n) != TORC_OK) {
    free(v);
    return NULL;
  }
  return v;
}

static void tolerance(torc_dtype dt, double *atol, double *rtol) {
  switch (dt) {
  case TORC_F64:
    *atol = 1e-12, *rtol = 1e-10;
    break;
  case TORC_F32:
    *atol = 1e-5, *rtol = 1e-5;
    break;
  case TORC_F16:
    *atol = 1e-2, *rtol = 1e-2;
    break;
  case TORC_BF16:
    *atol = 2e-2, *rtol = 2e-2;
    break;
  default:
    *atol = 0, *rtol = 0;
  }
}

/* Compares device tensor d with cpu tensor c; 0 if equal within the
 * tolerance of their dtype. *dev receives the largest |d - c|; why, a
 * message on mismatch. */
static int compare(const torc_tensor *d, const torc_tensor *c, double *dev,
                   char *why, size_t size) {
  *dev = 0;
  if (torc_dtype_of(d) != torc_dtype_of(c)) {
    snprintf(why, size, "dtype %s, cpu gives %s",
             torc_dtype_name(torc_dtype_of(d)),
             torc_dtype_name(torc_dtype_of(c)));
    return 1;
  }
  int same = torc_ndim(d) == torc_ndim(c);
  for (int i = 0; same && i < torc_ndim(d); i++)
    same = torc_size(d, i) == torc_size(c, i);
  if (!same) {
    char a[128], b[128];
    torc_describe(d, a, sizeof a), torc_describe(c, b, sizeof b);
    snprintf(why, size, "shape differs: %s, cpu gives %s", a, b);
    return 1;
  }
  int64_t nd = 0, nc = 0;
  double *vd = host_f64(d, &nd), *vc = host_f64(c, &nc);
  if (vd == NULL || vc == NULL || nd != nc) {
    snprintf(why, size, "cannot read the result back: %s", torc_last_error());
    free(vd), free(vc);
    return 1;
  }
  double atol, rtol;
  tolerance(torc_dtype_of(c), &atol, &rtol);
  int bad = 0;
  for (int64_t i = 0; i < nd; i++) {
    double a = vd[i], b = vc[i];
    if ((isnan(a) && isnan(b)) || a == b)
      continue;
    double e = fabs(a - b);
    if (isnan(e) || isinf(e))
      e = INFINITY;
    if (e > *dev)
      *dev = e;
    if (!(e <= atol + rtol * fabs(b)) && !bad) {
      bad = 1;
      snprintf(why, size, "element %lld: %.9g, cpu gives %.9g", (long long)i,
               a, b);
    }
  }
  free(vd), free(vc);
  return bad;
}

/* ---- running ---- */

typedef struct suite {
  const char *type;
  torc_device dev;
  int verbose;
  FILE *out;
  torc_conformance_result *res;
  const char *pin; /* a cpu provider certified against ref, or NULL */
  /* Per row: bit d set when dtypes[d] had no kernel forward; LACK_BACKWARD
   * when the backward or the gradcheck had none. */
  uint32_t *lacks;
} suite;

#define LACK_BACKWARD (1u << 31)

/* The dispatcher's provider pin (core/dispatch.c; exported for tools). */
TORC_API void torc__dispatch_pin(const char *provider);

/* Before a reference computation: ref's kernels; before the candidate's:
 * the pinned provider's (no-ops when no provider is pinned). */
static void as_reference(const suite *s) {
  if (s->pin)
    torc__dispatch_pin("ref");
}
static void as_candidate(const suite *s) {
  if (s->pin)
    torc__dispatch_pin(s->pin);
}
static void unpin(const suite *s) {
  if (s->pin)
    torc__dispatch_pin(NULL);
}

static void report(suite *s, int verdict, const char *op, const char *dtype,
                   const char *variant, const char *what, double dev,
                   const char *why) {
  static const char *const names[] = {"PASS", "FAIL", "SKIP"};
  if (verdict == 0)
    s->res->passed++;
  else if (verdict == 1)
    s->res->failed++;
  else
    s->res->skipped++;
  if (!s->verbose && verdict != 1)
    return;
  if (verdict == 2)
    fprintf(s->out, "SKIP: %s %s %s on %s (%s): %s\n", op, dtype, variant,
            s->type, what, why);
  else
    fprintf(s->out, "%s: %s %s %s on %s (%s): max deviation %.3g%s%s\n",
            names[verdict], op, dtype, variant, s->type, what, dev,
            why && *why ? "; " : "", why ? why : "");
}

/* First line of the last error, short enough for one report line. */
static void last_error(char *buf, size_t size) {
  snprintf(buf, size, "%s", torc_last_error());
  char *nl = strchr(buf, '\n');
  if (nl)
    *nl = '\0';
}

/* The operands of a case on one device: bases (leaves) and the views the
 * op receives. */
static int build_inputs(const op_row *r, torc_dtype dt, int variant,
                        const shapes *sh, torc_device dev, int grad,
                        torc_tensor **base, torc_tensor **in) {
  for (int k = 0; k < r->n_in; k++) {
    int64_t s[MAXD];
    int nd = sh->nd[k];
    memcpy(s, sh->s[k], sizeof s);
    int transpose = variant == V_NONCONTIG && nd >= 2;
    if (transpose) {
      int64_t t = s[nd - 1];
      s[nd - 1] = s[nd - 2], s[nd - 2] = t;
    }
    torc_tensor *b = make_base(r->kind[k], dt, k, s, nd, r->index_range);
    if (b && !torc_device_eq(dev, TORC_CPU))
      b = torc_to(b, dev);
    if (b == NULL)
      return -1;
    if (grad && is_float(torc_dtype_of(b)) && r->kind[k] != O_CONST &&
        torc_set_requires_grad(b, 1) != TORC_OK)
      return -1;
    torc_tensor *v = b;
    if (transpose)
      v = torc_transpose(v, nd - 2, nd - 1);
    if (v && sh->exp_nd[k] > 0)
      v = torc_expand(v, sh->exp[k], sh->exp_nd[k]);
    if (v == NULL)
      return -1;
    base[k] = b;
    in[k] = v;
  }
  return 0;
}

/* sum(out * w) with fixed weights w, backward; 0 or a status. */
static torc_status backward_weighted(torc_tensor *out) {
  int64_t n = torc_numel(out);
  double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  if (v == NULL)
    return TORC_ERR_OOM;
  for (int64_t i = 0; i < n; i++)
    v[i] = 0.5 + (double)((i * 3) % 7) * 0.25;
  torc_tensor *w =
      torc_from_host(v, torc_shape(out), torc_ndim(out), TORC_F64, TORC_CPU);
  free(v);
  w = w ? torc_to_dtype(w, torc_dtype_of(out)) : NULL;
  w = w ? torc_to(w, torc_device_of(out)) : NULL;
  torc_tensor *loss = w ? torc_sum(torc_mul(out, w), NULL, 0, 0) : NULL;
  if (loss == NULL)
    return torc_last_status();
  return torc_backward(loss, NULL, 0);
}

/* Records a case skipped for want of a kernel, for the summary. */
static void note_lack(suite *s, const op_row *r, torc_dtype dt, int backward) {
  uint32_t bit = LACK_BACKWARD;
  if (backward && (s->lacks[r - rows] & 1u << 1) && dt == TORC_F64)
    return; /* gradcheck in f64 where the forward has no f64 kernel */
  if (!backward)
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
      if (dtypes[d] == dt)
        bit = 1u << d;
  s->lacks[r - rows] |= bit;
}

/* The summary's second line: the ops whose cases were skipped because the
 * backend has no kernel for them, each with the dtypes it lacks. */
static void print_lacks(const suite *s) {
  int n = 0;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    n += s->lacks[i] != 0;
  if (n == 0)
    return;
  fprintf(s->out, "ops with no kernel on %s (%d; their cases are skipped):",
          s->pin ? s->pin : s->type, n);
  const char *sep = " ";
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    if (s->lacks[i] == 0)
      continue;
    fprintf(s->out, "%s%s (", sep, rows[i].name);
    const char *dsep = "";
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
      if (s->lacks[i] & (1u << d)) {
        fprintf(s->out, "%s%s", dsep, torc_dtype_name(dtypes[d]));
        dsep = ", ";
      }
    if (s->lacks[i] & LACK_BACKWARD)
      fprintf(s->out, "%sbackward", dsep);
    fputc(')', s->out);
    sep = ", ";
  }
  fputc('\n', s->out);
}

static void run_case(suite *s, const op_row *r, torc_dtype dt, int variant) {
  const char *dname = torc_dtype_name(dt), *vname = variant_names[variant];
  shapes sh;
  memset(&sh, 0, sizeof sh);
  if (!r->shape(variant, r->n_in, &sh))
    return; /* the variant does not apply to this op's inputs */
  int grad = r->diff && is_float(dt);
  char msg_c[512], msg_d[512], why[600];
  int scope = torc_scope_begin();
  torc_tensor *base_c[MAXIN] = {0}, *base_d[MAXIN] = {0};
  torc_tensor *in_c[MAXIN] = {0}, *in_d[MAXIN] = {0};
  if (build_inputs(r, dt, variant, &sh, TORC_CPU, grad, base_c, in_c) ||
      build_inputs(r, dt, variant, &sh, s->dev, grad, base_d, in_d)) {
    last_error(msg_d, sizeof msg_d);
    snprintf(why, sizeof why, "cannot build the inputs: %s", msg_d);
    report(s, 1, r->name, dname, vname, "forward", 0, why);
    torc_scope_end(scope);
    return;
  }
  torc_clear_error();
  as_reference(s);
  torc_tensor *out_c = r->call(in_c);
  torc_status st_c = out_c ? TORC_OK : torc_last_status();
  last_error(msg_c, sizeof msg_c);
  torc_clear_error();
  as_candidate(s);
  torc_tensor *out_d = r->call(in_d);
  unpin(s);
  torc_status st_d = out_d ? TORC_OK : torc_last_status();
  last_error(msg_d, sizeof msg_d);

  if (st_c != TORC_OK && st_d != TORC_OK) {
    snprintf(why, sizeof why, "not defined here (cpu ref refuses too: %s)",
             msg_c);
    report(s, 2, r->name, dname, vname, "forward", 0, why);
  } else if (st_c != TORC_OK) {
    snprintf(why, sizeof why, "succeeds where cpu ref refuses: %s", msg_c);
    report(s, 1, r->name, dname, vname, "forward", 0, why);
  } else if (st_d == TORC_ERR_NO_KERNEL) {
    snprintf(why, sizeof why, "no kernel: %s", msg_d);
    report(s, 2, r->name, dname, vname, "forward", 0, why);
    note_lack(s, r, dt, 0);
  } else if (st_d != TORC_OK) {
    snprintf(why, sizeof why, "%s: %s", torc_status_name(st_d), msg_d);
    report(s, 1, r->name, dname, vname, "forward", 0, why);
  } else {
    double dev = 0;
    why[0] = '\0';
    int bad = compare(out_d, out_c, &dev, why, sizeof why);
    if (!bad && !torc_device_eq(torc_device_of(out_d), s->dev)) {
      char a[64];
      snprintf(why, sizeof why, "the result is on %s, not on the device",
               torc_device_str(torc_device_of(out_d), a, sizeof a));
      bad = 1;
    }
    report(s, bad, r->name, dname, vname, "forward", dev, why);
    if (!bad && grad && torc_requires_grad(out_c)) {
      as_reference(s);
      torc_status bc = backward_weighted(out_c);
      last_error(msg_c, sizeof msg_c);
      as_candidate(s);
      torc_status bd = bc == TORC_OK ? backward_weighted(out_d) : TORC_OK;
      unpin(s);
      last_error(msg_d, sizeof msg_d);
      if (bc != TORC_OK) {
        snprintf(why, sizeof why, "backward fails on cpu ref too: %s", msg_c);
        report(s, 2, r->name, dname, vname, "backward", 0, why);
      } else if (bd == TORC_ERR_NO_KERNEL) {
        snprintf(why, sizeof why, "no kernel: %s", msg_d);
        report(s, 2, r->name, dname, vname, "backward", 0, why);
        note_lack(s, r, dt, 1);
      } else if (bd != TORC_OK) {
        snprintf(why, sizeof why, "%s: %s", torc_status_name(bd), msg_d);
        report(s, 1, r->name, dname, vname, "backward", 0, why);
      } else {
        double worst = 0;
        int gbad = 0;
        why[0] = '\0';
        for (int k = 0; k < r->n_in && !gbad; k++) {
          torc_tensor *gc = torc_grad_of(base_c[k]);
          torc_tensor *gd = torc_grad_of(base_d[k]);
          if ((gc == NULL) != (gd == NULL)) {
            snprintf(why, sizeof why, "input %d: gradient %s on the device",
                     k, gd ? "present" : "missing");
            gbad = 1;
          } else if (gc) {
            double e = 0;
            char w2[500];
            gbad = compare(gd, gc, &e, w2, sizeof w2);
            if (gbad)
              snprintf(why, sizeof why, "gradient of input %d: %s", k, w2);
            if (e > worst)
              worst = e;
          }
        }
        report(s, gbad, r->name, dname, vname, "backward", worst, why);
      }
    }
  }
  torc_scope_end(scope);
  torc_clear_error();
}

/* gradcheck's function: the row's call, its temporaries released. */
static torc_tensor *gc_call(torc_tensor *const *in, int n, void *user) {
  (void)n;
  const op_row *r = user;
  int scope = torc_scope_begin();
  torc_tensor *out = r->call(in);
  if (out)
    out = torc_scope_keep(out);
  torc_scope_end(scope);
  return out;
}

static void run_gradcheck(suite *s, const op_row *r) {
  shapes sh;
  memset(&sh, 0, sizeof sh);
  r->shape(V_CONTIG, r->n_in, &sh);
  torc_tensor *base[MAXIN] = {0}, *in[MAXIN] = {0};
  char msg[512], why[600];
  int scope = torc_scope_begin();
  int st = build_inputs(r, TORC_F64, V_CONTIG, &sh, s->dev, 0, base, in);
  for (int k = 0; st == 0 && k < r->n_in; k++) {
    in[k] = torc_scope_keep(base[k]);
    if (r->kind[k] != O_INDEX && r->kind[k] != O_BOOL &&
        r->kind[k] != O_CONST &&
        torc_set_requires_grad(in[k], 1) != TORC_OK)
      st = -1;
  }
  torc_scope_end(scope);
  if (st == 0) {
    torc_clear_error();
    as_candidate(s);
    torc_status gs = torc_gradcheck(gc_call, (void *)r, in, r->n_in, 1e-6,
                                    1e-7, 1e-5);
    unpin(s);
    last_error(msg, sizeof msg);
    if (gs == TORC_ERR_NO_KERNEL) {
      snprintf(why, sizeof why, "no kernel: %s", msg);
      report(s, 2, r->name, "f64", "contiguous", "gradcheck", 0, why);
      note_lack(s, r, TORC_F64, 1);
    } else {
      snprintf(why, sizeof why, "%s", gs == TORC_OK ? "" : msg);
      report(s, gs != TORC_OK, r->name, "f64", "contiguous", "gradcheck", 0,
             why);
    }
  } else {
    last_error(msg, sizeof msg);
    snprintf(why, sizeof why, "cannot build the inputs: %s", msg);
    report(s, 1, r->name, "f64", "contiguous", "gradcheck", 0, why);
  }
  for (int k = 0; k < r->n_in; k++)
    torc_release(in[k]);
  torc_clear_error();
}

static int run_suite(const char *device_type, const char *pin, int verbose,
                     FILE *out, torc_conformance_result *res) {
  static uint32_t lacks[sizeof rows / sizeof rows[0]];
  memset(lacks, 0, sizeof lacks);
  suite s = {device_type, {0, 0}, verbose, out, res, pin, lacks};
  memset(res, 0, sizeof *res);
  char name[64];
  snprintf(name, sizeof name, "%s:0", device_type);
  int count = torc_device_count(device_type);
  if (count <= 0 || torc_device_parse(name, &s.dev) != TORC_OK) {
    fprintf(stderr,
            "torc test-backend: device type '%s' has no usable device "
            "(%s)\n",
            device_type,
            count < 0 ? "not registered" : count == 0 ? "no hardware found"
                                                      : torc_last_error());
    return -1;
  }
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
      for (int v = 0; v < V_COUNT; v++)
        run_case(&s, &rows[i], dtypes[d], v);
    if (rows[i].diff)
      run_gradcheck(&s, &rows[i]);
  }
  if (pin)
    fprintf(out, "conformance of %s on cpu (against ref): %d passed, %d "
                 "failed, %d skipped\n",
            pin, res->passed, res->failed, res->skipped);
  else
    fprintf(out, "conformance on %s: %d passed, %d failed, %d skipped\n",
            device_type, res->passed, res->failed, res->skipped);
  print_lacks(&s);
  return 0;
}

int torc_conformance_run(const char *device_type, int verbose, FILE *out,
                         torc_conformance_result *res) {
  return run_suite(device_type, NULL, verbose, out, res);
}

int torc_conformance_run_provider(const char *provider, int verbose,
                                  FILE *out, torc_conformance_result *res) {
  return run_suite("cpu", provider, verbose, out, res);
}
