/* core/onnx_run.c — the ONNX graph interpreter: the nodes run in order,
 * values held by name, each operator one row of the table at the end (its
 * type, the opsets it covers and its function), every function written
 * with torc's public ops so autograd runs through a model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "onnx_internal.h"
#include "torc/indexing.h"
#include "torc/nn.h"
#include "torc/ops.h"

#define MAX_IO 64

/* One node being run: its inputs (NULL for an omitted optional one) and
 * the outputs it sets (tensors owned by the run's scope, or borrowed). */
typedef struct onode {
  const Onnx__NodeProto *nd;
  int64_t opset;
  int n_in, n_out;
  torc_tensor *in[MAX_IO];
  torc_tensor *out[MAX_IO];
  torc_status st; /* an attribute error, checked by the runner */
  int training;   /* run as a module in training mode (BatchNormalization's
                     batch statistics, Dropout's mask) */
} onode;

typedef torc_status (*onnx_fn)(onode *n);

/* ---- attributes ---- */

static const Onnx__AttributeProto *attr(onode *n, const char *name, int type) {
  for (size_t i = 0; i < n->nd->n_attribute; i++) {
    const Onnx__AttributeProto *a = n->nd->attribute[i];
    if (a->name && strcmp(a->name, name) == 0) {
      if (a->has_type && (int)a->type != type && n->st == TORC_OK)
        n->st = torc_set_error(TORC_ERR_INVALID,
                               "attribute '%s' has type %d, expected %d",
                               name, (int)a->type, type);
      return (a->has_type && (int)a->type != type) ? NULL : a;
    }
  }
  return NULL;
}

static int64_t attr_i(onode *n, const char *name, int64_t def) {
  const Onnx__AttributeProto *a =
      attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  return a ? a->i : def;
}
static double attr_f(onode *n, const char *name, double def) {
  const Onnx__AttributeProto *a =
      attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  return a ? a->f : def;
}
/* The ints of attribute `name` (NULL, *cnt 0 when absent). */
static const int64_t *attr_ints(onode *n, const char *name, size_t *cnt) {
  const Onnx__AttributeProto *a =
      attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  *cnt = a ? a->n_ints : 0;
  return a ? a->ints : NULL;
}
/* The string attribute into buf ("" when absent: def copied). */
static const char *attr_s(onode *n, const char *name, const char *def,
                          char *buf, size_t size) {
  const Onnx__AttributeProto *a =
      attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  if (!a || !a->has_s)
    snprintf(buf, size, "%s", def);
  else
    snprintf(buf, size, "%.*s", (int)(a->s.len < size ? a->s.len : size - 1),
             (const char *)a->s.data);
  return buf;
}

/* ---- helpers ---- */

static torc_status fail_null(void) {
  torc_status st = torc_last_status();
  return st == TORC_OK ? TORC_ERR_INTERNAL : st;
}
#define CHECK(t)                                                               \
  do {                                                                         \
    if (!(t))                                                                  \
      return fail_null();                                                      \
  } while (0)
#define NEED_IN(k)                                                             \
  do {                                                                         \
    if (n->n_in <= (k) || !n->in[k])                                           \
      return torc_set_error(TORC_ERR_INVALID, "input %d is required", (k));    \
  } while (0)

/* The values of an integer (or any) tensor as int64s: at most max. */
static torc_status tensor_ints(const torc_tensor *t, int64_t *buf, int max,
                               int *cnt) {
  int64_t numel = torc_numel(t);
  if (numel > max)
    return torc_set_error(TORC_ERR_INVALID,
                          "an index or shape input has %lld values, more than "
                          "the %d torc takes",
                          (long long)numel, max);
  torc_tensor *c = torc_to_dtype(t, TORC_I64);
  CHECK(c);
  torc_tensor *h = torc_to(c, TORC_CPU);
  CHECK(h);
  torc_status st = torc_to_host(h, buf, (size_t)numel * sizeof(int64_t));
  if (st != TORC_OK)
    return st;
  *cnt = (int)numel;
  return TORC_OK;
}

static torc_status scalar_of(const torc_tensor *t, double *v) {
  return torc_item(t, v);
}

/* A dim index normalised against ndim (negative from the end). */
static torc_status norm_axis(int64_t axis, int ndim, int *out) {
  *out = 0;
  if (axis < -ndim || axis >= (ndim ? ndim : 1))
    return torc_set_error(TORC_ERR_RANGE,
                          "axis %lld is out of range for a tensor of %d dims",
                          (long long)axis, ndim);
  *out = (int)(axis < 0 ? axis + ndim : axis);
  return TORC_OK;
}

static int64_t prod(const int64_t *s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++)
    p *= s[i];
  return p;
}

/* ---- elementwise ---- */

#define UNARY_ROW(fname, op)                                                   \
  static torc_status fname(onode *n) {                                         \
    NEED_IN(0);                                                                \
    CHECK(n->out[0] = op(n->in[0]));                                           \
    return TORC_OK;                                                            \
  }
UNARY_ROW(op_neg, torc_neg)
UNARY_ROW(op_abs, torc_abs)
UNARY_ROW(op_exp, torc_exp)
UNARY_ROW(op_log, torc_log)
UNARY_ROW(op_sqrt, torc_sqrt)
UNARY_ROW(op_relu, torc_relu)
UNARY_ROW(op_sigmoid, torc_sigmoid)
UNARY_ROW(op_tanh, torc_tanh)
UNARY_ROW(op_sin, torc_sin)
UNARY_ROW(op_cos, torc_cos)
UNARY_ROW(op_sign, torc_sign)
UNARY_ROW(op_reciprocal, torc_reciprocal)
UNARY_ROW(op_not, torc_logical_not)
UNARY_ROW(op_hardswish, torc_hardswish)
UNARY_ROW(op_erf, torc_erf)

#define BINARY_ROW(fname, op)                                                  \
  static torc_status fname(onode *n) {                                         \
    NEED_IN(0);                                                                \
    NEED_IN(1);                                                                \
    CHECK(n->out[0] = op(n->in[0], n->in[1]));                                 \
    return TORC_OK;                                                            \
  }
BINARY_ROW(op_add, torc_add)
BINARY_ROW(op_sub, torc_sub)
BINARY_ROW(op_mul, torc_mul)
BINARY_ROW(op_matmul, torc_matmul)
BINARY_ROW(op_equal, torc_eq)
BINARY_ROW(op_less, torc_lt)
BINARY_ROW(op_greater, torc_gt)
BINARY_ROW(op_less_equal, torc_le)
BINARY_ROW(op_greater_equal, torc_ge)
BINARY_ROW(op_and, torc_logical_and)
BINARY_ROW(op_or, torc_logical_or)
BINARY_ROW(op_xor, torc_ne)

/* Integer Div truncates (the C division ONNX's reference computes). */
static torc_status op_div(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  torc_tensor *q = torc_div(n->in[0], n->in[1]);
  CHECK(q);
  torc_dtype dt = torc_dtype_of(n->in[0]);
  if (!torc_dtype_is_float(dt))
    CHECK(q = torc_to_dtype(q, dt));
  n->out[0] = q;
  return TORC_OK;
}

/* The result keeps the base's type (the exponent may be another). */
static torc_status op_pow(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  torc_tensor *p = torc_pow(n->in[0], n->in[1]);
  CHECK(p);
  if (torc_dtype_of(p) != torc_dtype_of(n->in[0]))
    CHECK(p = torc_to_dtype(p, torc_dtype_of(n->in[0])));
  n->out[0] = p;
  return TORC_OK;
}

static torc_status op_isnan(onode *n) {
  NEED_IN(0);
  CHECK(n->out[0] = torc_ne(n->in[0], n->in[0]));
  return TORC_OK;
}

static torc_status op_isinf(onode *n) {
  NEED_IN(0);
  int pos = (int)attr_i(n, "detect_positive", 1);
  int neg = (int)attr_i(n, "detect_negative", 1);
  torc_dtype dt = torc_dtype_of(n->in[0]);
  torc_tensor *r = torc_zeros(NULL, 0, TORC_BOOL, TORC_CPU);
  CHECK(r);
  if (pos) {
    torc_tensor *inf = torc_full(NULL, 0, INFINITY, dt, TORC_CPU);
    CHECK(inf);
    CHECK(r = torc_logical_or(r, torc_eq(n->in[0], inf)));
  }
  if (neg) {
    torc_tensor *inf = torc_full(NULL, 0, -INFINITY, dt, TORC_CPU);
    CHECK(inf);
    CHECK(r = torc_logical_or(r, torc_eq(n->in[0], inf)));
  }
  CHECK(r = torc_expand(r, torc_shape(n->in[0]), torc_ndim(n->in[0])));
  CHECK(n->out[0] = torc_contiguous(r));
  return TORC_OK;
}

/* Max, Min, Sum, Mean: any number of inputs, broadcast. */
static torc_status fold(onode *n, torc_tensor *(*op)(const torc_tensor *,
                                                      const torc_tensor *)) {
  NEED_IN(0);
  torc_tensor *r = n->in[0];
  for (int i = 1; i < n->n_in; i++) {
    NEED_IN(i);
    CHECK(r = op(r, n->in[i]));
  }
  if (r == n->in[0])
    CHECK(r = torc_mul_scalar(r, 1));
  n->out[0] = r;
  return TORC_OK;
}
static torc_status op_max(onode *n) { return fold(n, torc_maximum); }
static torc_status op_min(onode *n) { return fold(n, torc_minimum); }
static torc_status op_sum(onode *n) { return fold(n, torc_add); }
static torc_status op_mean(onode *n) {
  torc_status st = fold(n, torc_add);
  if (st != TORC_OK)
    return st;
  CHECK(n->out[0] = torc_div_scalar(n->out[0], n->n_in));
  return TORC_OK;
}

/* ---- activations ---- */

static torc_status op_leaky_relu(onode *n) {
  NEED_IN(0);
  double a = attr_f(n, "alpha", 0.01);
  CHECK(n->out[0] = torc_leaky_relu(n->in[0], a));
  return TORC_OK;
}
static torc_status op_elu(onode *n) {
  NEED_IN(0);
  CHECK(n->out[0] = torc_elu(n->in[0], attr_f(n, "alpha", 1.0)));
  return TORC_OK;
}
/* gamma * elu(x, alpha). */
static torc_status op_selu(onode *n) {
  NEED_IN(0);
  double a = attr_f(n, "alpha", 1.67326319217681884765625);
  double g = attr_f(n, "gamma", 1.05070102214813232421875);
  torc_tensor *e = torc_elu(n->in[0], a);
  CHECK(e);
  CHECK(n->out[0] = torc_mul_scalar(e, g));
  return TORC_OK;
}
/* alpha * elu(x / alpha, 1). */
static torc_status op_celu(onode *n) {
  NEED_IN(0);
  double a = attr_f(n, "alpha", 1.0);
  torc_tensor *e = torc_elu(torc_div_scalar(n->in[0], a), 1.0);
  CHECK(e);
  CHECK(n->out[0] = torc_mul_scalar(e, a));
  return TORC_OK;
}
/* max(0, min(1, alpha x + beta)). */
static torc_status op_hard_sigmoid(onode *n) {
  NEED_IN(0);
  double a = attr_f(n, "alpha", 0.2), b = attr_f(n, "beta", 0.5);
  torc_tensor *y = torc_add_scalar(torc_mul_scalar(n->in[0], a), b);
  CHECK(y);
  CHECK(n->out[0] = torc_clamp(y, 1, 0.0, 1, 1.0));
  return TORC_OK;
}
static torc_status op_softplus(onode *n) {
  NEED_IN(0);
  /* log(1 + e^x); e^x beyond 2^-24 of x above 20 no longer matters in f32,
   * but PyTorch's threshold would cut it: no threshold here. */
  CHECK(n->out[0] = torc_softplus(n->in[0], 1.0, INFINITY));
  return TORC_OK;
}
/* x / (1 + |x|). */
static torc_status op_softsign(onode *n) {
  NEED_IN(0);
  CHECK(n->out[0] =
            torc_div(n->in[0], torc_add_scalar(torc_abs(n->in[0]), 1.0)));
  return TORC_OK;
}
/* x where x > alpha, else 0. */
static torc_status op_thresholded_relu(onode *n) {
  NEED_IN(0);
  double a = attr_f(n, "alpha", 1.0);
  torc_tensor *z = torc_zeros_like(n->in[0]);
  CHECK(z);
  torc_tensor *c = torc_gt(n->in[0], torc_full(NULL, 0, a,
                                               torc_dtype_of(n->in[0]),
                                               TORC_CPU));
  CHECK(c);
  CHECK(n->out[0] = torc_where(c, n->in[0], z));
  return TORC_OK;
}
/* slope * x where x < 0, else x (slope broadcast to x). */
static torc_status op_prelu(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  torc_tensor *slope = n->in[1];
  int nd = torc_ndim(n->in[0]);
  /* a slope of one value per channel [C] applies along dim 1 (the
   * exporters' per-channel PRelu) */
  if (torc_ndim(slope) == 1 && nd > 2 && torc_numel(slope) > 1 &&
      torc_numel(slope) == torc_size(n->in[0], 1)) {
    int64_t s[TORC_MAX_DIMS];
    s[0] = torc_numel(slope);
    for (int i = 1; i < nd - 1; i++)
      s[i] = 1;
    CHECK(slope = torc_reshape(slope, s, nd - 1));
  }
  torc_tensor *z = torc_zeros(NULL, 0, torc_dtype_of(n->in[0]), TORC_CPU);
  CHECK(z);
  torc_tensor *c = torc_lt(n->in[0], z);
  CHECK(c);
  CHECK(n->out[0] = torc_where(c, torc_mul(n->in[0], slope), n->in[0]));
  return TORC_OK;
}

/* Softmax and LogSoftmax: before opset 13 over the 2-D flattening at
 * `axis` (default 1); from 13 along `axis` (default -1). */
static torc_status softmax_like(onode *n,
                                torc_tensor *(*fn)(const torc_tensor *, int)) {
  NEED_IN(0);
  torc_tensor *x = n->in[0];
  int nd = torc_ndim(x), ax;
  torc_status st =
      norm_axis(attr_i(n, "axis", n->opset < 13 ? 1 : -1), nd, &ax);
  if (st != TORC_OK)
    return st;
  if (nd == 0)
    return torc_set_error(TORC_ERR_SHAPE, "the input is 0-dim");
  if (n->opset >= 13) {
    CHECK(n->out[0] = fn(x, ax));
    return TORC_OK;
  }
  const int64_t *s = torc_shape(x);
  int64_t two[2] = {prod(s, 0, ax), prod(s, ax, nd)};
  torc_tensor *f = torc_reshape(x, two, 2);
  CHECK(f);
  CHECK(f = fn(f, 1));
  CHECK(n->out[0] = torc_reshape(f, s, nd));
  return TORC_OK;
}
static torc_status op_softmax(onode *n) {
  return softmax_like(n, torc_softmax);
}
static torc_status op_log_softmax(onode *n) {
  return softmax_like(n, torc_log_softmax);
}

/* ---- linear algebra ---- */

/* alpha A' B' + beta C, A' = A^T when transA, B' likewise. */
static torc_status op_gemm(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  torc_tensor *a = n->in[0], *b = n->in[1];
  if (torc_ndim(a) != 2 || torc_ndim(b) != 2)
    return torc_set_error(TORC_ERR_SHAPE, "A and B must be 2-D (got %d and %d "
                          "dims)", torc_ndim(a), torc_ndim(b));
  if (attr_i(n, "transA", 0))
    CHECK(a = torc_transpose(a, 0, 1));
  if (attr_i(n, "transB", 0))
    CHECK(b = torc_transpose(b, 0, 1));
  double alpha = attr_f(n, "alpha", 1.0), beta = attr_f(n, "beta", 1.0);
  torc_tensor *y = torc_matmul(a, b);
  CHECK(y);
  if (alpha != 1.0)
    CHECK(y = torc_mul_scalar(y, alpha));
  if (n->n_in > 2 && n->in[2]) {
    torc_tensor *c = n->in[2];
    if (beta != 1.0)
      CHECK(c = torc_mul_scalar(c, beta));
    CHECK(y = torc_add(y, c));
  }
  n->out[0] = y;
  return TORC_OK;
}

/* ---- convolution and pooling ---- */

/* The geometry of a 1-D or 2-D window op, read from the attributes and
 * the input's spatial sizes: kernel, stride, dilation, and the pads
 * before and after each spatial dim (auto_pad resolved). */
typedef struct geom {
  int nsp; /* 1 or 2 */
  int64_t k[2], s[2], d[2], pb[2], pe[2];
  int ceil;
} geom;

static torc_status read_geom(onode *n, const torc_tensor *x,
                             const int64_t *kernel, geom *g) {
  int nd = torc_ndim(x);
  if (nd != 3 && nd != 4)
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "torc runs this operator on 1-D and 2-D windows "
                          "(inputs of 3 or 4 dims), not %d dims",
                          nd);
  g->nsp = nd - 2;
  size_t nk, ns, ndl, np;
  const int64_t *ks = attr_ints(n, "kernel_shape", &nk);
  const int64_t *ss = attr_ints(n, "strides", &ns);
  const int64_t *ds = attr_ints(n, "dilations", &ndl);
  const int64_t *ps = attr_ints(n, "pads", &np);
  if ((ks && nk != (size_t)g->nsp) || (ss && ns != (size_t)g->nsp) ||
      (ds && ndl != (size_t)g->nsp) || (ps && np != 2 * (size_t)g->nsp))
    return torc_set_error(TORC_ERR_INVALID,
                          "kernel_shape, strides, dilations (%d values each) "
                          "or pads (%d) do not match the input's %d spatial "
                          "dims",
                          g->nsp, 2 * g->nsp, g->nsp);
  char ap[32];
  attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
  const int64_t *sp = torc_shape(x) + 2;
  for (int i = 0; i < g->nsp; i++) {
    g->k[i] = ks ? ks[i] : (kernel ? kernel[i] : 0);
    g->s[i] = ss ? ss[i] : 1;
    g->d[i] = ds ? ds[i] : 1;
    g->pb[i] = ps ? ps[i] : 0;
    g->pe[i] = ps ? ps[i + g->nsp] : 0;
    if (g->k[i] < 1 || g->s[i] < 1 || g->d[i] < 1 || g->pb[i] < 0 ||
        g->pe[i] < 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "kernel %lld, stride %lld, dilation %lld must be "
                            ">= 1 and pads %lld, %lld >= 0",
                            (long long)g->k[i], (long long)g->s[i],
                            (long long)g->d[i], (long long)g->pb[i],
                            (long long)g->pe[i]);
    if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
      int64_t out = (sp[i] + g->s[i] - 1) / g->s[i];
      int64_t tot = (out - 1) * g->s[i] + (g->k[i] - 1) * g->d[i] + 1 - sp[i];
      if (tot < 0)
        tot = 0;
      g->pb[i] = ap[5] == 'U' ? tot / 2 : tot - tot / 2;
      g->pe[i] = tot - g->pb[i];
    } else if (strcmp(ap, "VALID") == 0) {
      g->pb[i] = g->pe[i] = 0;
    } else if (strcmp(ap, "NOTSET") != 0) {
      return torc_set_error(TORC_ERR_INVALID,
                            "auto_pad '%s' is not one of NOTSET, SAME_UPPER, "
                            "SAME_LOWER, VALID",
                            ap);
    }
  }
  g->ceil = (int)attr_i(n, "ceil_mode", 0);
  if (g->nsp == 1) {
    g->k[1] = g->s[1] = g->d[1] = 1;
    g->pb[1] = g->pe[1] = 0;
    g->nsp = 2;
    /* the 1-D case runs as 2-D with the length in the last dim */
    g->k[1] = g->k[0], g->s[1] = g->s[0], g->d[1] = g->d[0];
    g->pb[1] = g->pb[0], g->pe[1] = g->pe[0];
    g->k[0] = g->s[0] = g->d[0] = 1;
    g->pb[0] = g->pe[0] = 0;
  }
  return TORC_OK;
}

static int symmetric(const geom *g) {
  return g->pb[0] == g->pe[0] && g->pb[1] == g->pe[1];
}

/* x padded explicitly with `value` by the geometry's pads (2-D view). */
static torc_tensor *pad_explicit(const torc_tensor *x, const geom *g,
                                 double value) {
  int64_t pads[4] = {g->pb[1], g->pe[1], g->pb[0], g->pe[0]};
  return torc_pad(x, pads, 4, TORC_PAD_CONSTANT, value);
}

/* 3-D windows (inputs [N, C, D, H, W]) through torc__window3d_run, which
 * takes uneven pads. */
static torc_status window3d(onode *n, int kind) {
  torc_tensor *x = n->in[0], *w = kind == TORC__W3_CONV ? n->in[1] : NULL;
  if (w && torc_ndim(w) != 5)
    return torc_set_error(TORC_ERR_SHAPE, "W has %d dims, X 5",
                          torc_ndim(w));
  size_t nk, ns, ndl, np;
  const int64_t *ks = attr_ints(n, "kernel_shape", &nk);
  const int64_t *ss = attr_ints(n, "strides", &ns);
  const int64_t *ds = attr_ints(n, "dilations", &ndl);
  const int64_t *ps = attr_ints(n, "pads", &np);
  if ((ks && nk != 3) || (ss && ns != 3) || (ds && ndl != 3) ||
      (ps && np != 6) || (!ks && !w))
    return torc_set_error(TORC_ERR_INVALID,
                          "kernel_shape, strides, dilations (3 values each) "
                          "or pads (6) do not match the input's 3 spatial "
                          "dims");
  char ap[32];
  attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
  if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0)
    return torc_set_error(TORC_ERR_UNSUPPORTED, "auto_pad %s on 3-D windows",
                          ap);
  if (attr_i(n, "ceil_mode", 0) || n->n_out > 1)
    return torc_set_error(TORC_ERR_UNSUPPORTED, "ceil_mode or Indices on 3-D "
                          "windows");
  int64_t k[3], st[3], dl[3], pb[3], pe[3];
  const int64_t *sp = torc_shape(x) + 2;
  for (int i = 0; i < 3; i++) {
    k[i] = ks ? ks[i] : torc_size(w, 2 + i);
    st[i] = ss ? ss[i] : 1;
    dl[i] = ds ? ds[i] : 1;
    pb[i] = ps && ap[0] == 'N' ? ps[i] : 0;
    pe[i] = ps && ap[0] == 'N' ? ps[i + 3] : 0;
    if (k[i] < 1 || st[i] < 1 || dl[i] < 1 || pb[i] < 0 || pe[i] < 0 ||
        k[i] > sp[i] + pb[i] + pe[i])
      return torc_set_error(TORC_ERR_INVALID,
                            "dim %d: kernel %lld, stride %lld, dilation %lld "
                            "must be >= 1, pads %lld, %lld >= 0, and the "
                            "window fit the padded size",
                            i, (long long)k[i], (long long)st[i],
                            (long long)dl[i], (long long)pb[i],
                            (long long)pe[i]);
  }
  torc__window3d g;
  memset(&g, 0, sizeof g);
  for (int i = 0; i < 3; i++) {
    g.k[i] = k[i], g.s[i] = st[i], g.d[i] = dl[i];
    g.pb[i] = pb[i], g.pe[i] = pe[i];
  }
  g.groups = attr_i(n, "group", 1);
  g.exclude_pad = !attr_i(n, "count_include_pad", 0);
  torc_tensor *y = torc__window3d_run(
      x, w, kind == TORC__W3_CONV && n->n_in > 2 ? n->in[2] : NULL, kind, &g);
  CHECK(y);
  n->out[0] = y;
  return TORC_OK;
}

static torc_status op_conv(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  if (torc_ndim(n->in[0]) == 5)
    return window3d(n, TORC__W3_CONV);
  torc_tensor *x = n->in[0], *w = n->in[1];
  const torc_tensor *b = n->n_in > 2 ? n->in[2] : NULL;
  int one_d = torc_ndim(x) == 3;
  if (torc_ndim(w) != torc_ndim(x))
    return torc_set_error(TORC_ERR_SHAPE, "W has %d dims, X %d", torc_ndim(w),
                          torc_ndim(x));
  geom g;
  torc_status st = read_geom(n, x, torc_shape(w) + 2, &g);
  if (st != TORC_OK)
    return st;
  if (one_d) {
    CHECK(x = torc_unsqueeze(x, 2));
    CHECK(w = torc_unsqueeze(w, 2));
  }
  torc_conv2d_params p = {0};
  for (int i = 0; i < 2; i++) {
    p.stride[i] = g.s[i];
    p.dilation[i] = g.d[i];
    p.padding[i] = symmetric(&g) ? g.pb[i] : 0;
  }
  p.groups = attr_i(n, "group", 1);
  if (!symmetric(&g))
    CHECK(x = pad_explicit(x, &g, 0.0));
  torc_tensor *y = torc_conv2d(x, w, b, &p);
  CHECK(y);
  if (one_d)
    CHECK(y = torc_squeeze(y, 2));
  n->out[0] = y;
  return TORC_OK;
}

/* Computed with no padding (the full output), then cropped by the pads
 * and grown by output_padding; the bias added last, over the whole
 * output. */
static torc_status op_conv_transpose(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  torc_tensor *x = n->in[0], *w = n->in[1];
  const torc_tensor *b = n->n_in > 2 ? n->in[2] : NULL;
  int one_d = torc_ndim(x) == 3;
  if (torc_ndim(w) != torc_ndim(x))
    return torc_set_error(TORC_ERR_SHAPE, "W has %d dims, X %d", torc_ndim(w),
                          torc_ndim(x));
  char ap[32];
  attr_s(n, "auto_pad", "NOTSET", ap, sizeof ap);
  geom g;
  torc_status st = read_geom(n, x, torc_shape(w) + 2, &g);
  if (st != TORC_OK)
    return st;
  size_t nop, nos;
  const int64_t *op = attr_ints(n, "output_padding", &nop);
  const int64_t *os = attr_ints(n, "output_shape", &nos);
  int nsp = torc_ndim(x) - 2;
  if ((op && nop != (size_t)nsp) || (os && nos != (size_t)nsp))
    return torc_set_error(TORC_ERR_INVALID,
                          "output_padding and output_shape need %d values",
                          nsp);
  if (one_d) {
    CHECK(x = torc_unsqueeze(x, 2));
    CHECK(w = torc_unsqueeze(w, 2));
  }
  int64_t opad[2] = {0, 0};
  const int64_t *in_sp = torc_shape(x) + 2;
  for (int i = 0; i < nsp; i++) {
    int j = one_d ? 1 : i;
    opad[j] = op ? op[i] : 0;
    int64_t full = (in_sp[j] - 1) * g.s[j] + (g.k[j] - 1) * g.d[j] + 1;
    if (os || strncmp(ap, "SAME", 4) == 0) {
      int64_t want = os ? os[i] : in_sp[j] * g.s[j];
      int64_t tot = full + opad[j] - want;
      if (tot < 0)
        return torc_set_error(TORC_ERR_UNSUPPORTED,
                              "output_shape %lld is larger than the full "
                              "output %lld",
                              (long long)want, (long long)(full + opad[j]));
      g.pb[j] = strcmp(ap, "SAME_UPPER") == 0 ? tot / 2 : tot - tot / 2;
      g.pe[j] = tot - g.pb[j];
    } else if (strcmp(ap, "VALID") == 0) {
      g.pb[j] = g.pe[j] = 0;
    }
  }
  torc_conv2d_params p = {0};
  for (int i = 0; i < 2; i++) {
    p.stride[i] = g.s[i];
    p.dilation[i] = g.d[i];
  }
  p.groups = attr_i(n, "group", 1);
  torc_tensor *y = torc_conv_transpose2d(x, w, NULL, &p);
  CHECK(y);
  int64_t pads[4] = {-g.pb[1], -g.pe[1] + opad[1], -g.pb[0],
                     -g.pe[0] + opad[0]};
  if (pads[0] || pads[1] || pads[2] || pads[3])
    CHECK(y = torc_pad(y, pads, 4, TORC_PAD_CONSTANT, 0.0));
  if (b) {
    int64_t bs[3] = {torc_numel(b), 1, 1};
    CHECK(y = torc_add(y, torc_reshape(b, bs, 3)));
  }
  if (one_d)
    CHECK(y = torc_squeeze(y, 2));
  n->out[0] = y;
  return TORC_OK;
}

static torc_status pool(onode *n, int is_max) {
  NEED_IN(0);
  if (torc_ndim(n->in[0]) == 5)
    return window3d(n, is_max ? TORC__W3_MAX : TORC__W3_AVG);
  torc_tensor *x = n->in[0];
  int one_d = torc_ndim(x) == 3;
  geom g;
  torc_status st = read_geom(n, x, NULL, &g);
  if (st != TORC_OK)
    return st;
  if (one_d)
    CHECK(x = torc_unsqueeze(x, 2));
  torc_pool2d_params p;
  memset(&p, 0, sizeof p);
  int include_pad = (int)attr_i(n, "count_include_pad", 0);
  int sym = symmetric(&g);
  for (int i = 0; i < 2; i++) {
    p.kernel[i] = g.k[i];
    p.stride[i] = g.s[i];
    p.dilation[i] = g.d[i];
    p.padding[i] = sym ? g.pb[i] : 0;
    /* torc takes a padding of at most half the window */
    if (sym && 2 * g.pb[i] > (g.k[i] - 1) * g.d[i] + 1)
      sym = 0;
  }
  p.ceil_mode = g.ceil;
  p.exclude_pad = !include_pad;
  if (!sym) {
    if (!is_max && !include_pad)
      return torc_set_error(TORC_ERR_UNSUPPORTED,
                            "AveragePool with pads %lld,%lld,%lld,%lld that "
                            "are uneven or larger than half the window and "
                            "count_include_pad 0",
                            (long long)g.pb[0], (long long)g.pb[1],
                            (long long)g.pe[0], (long long)g.pe[1]);
    if (n->n_out > 1 && n->out[1] == NULL && is_max)
      return torc_set_error(TORC_ERR_UNSUPPORTED,
                            "MaxPool's Indices with uneven pads");
    p.padding[0] = p.padding[1] = 0;
    CHECK(x = pad_explicit(x, &g, is_max ? -INFINITY : 0.0));
  }
  torc_tensor *y, *idx = NULL;
  if (is_max && n->n_out > 1) {
    if (attr_i(n, "storage_order", 0))
      return torc_set_error(TORC_ERR_UNSUPPORTED,
                            "MaxPool's storage_order 1 (column major)");
    CHECK(y = torc_max_pool2d_with_indices(x, &p, &idx));
    /* ONNX counts indices over the whole flattened tensor */
    const int64_t *s = torc_shape(x);
    CHECK(idx = torc_add(idx, torc_reshape(torc_mul_scalar(torc_arange(0, (double)(s[0] * s[1]), 1, TORC_I64, TORC_CPU), (double)(s[2] * s[3])), (int64_t[]){s[0], s[1], 1, 1}, 4)));
  } else if (is_max && !torc_dtype_is_float(torc_dtype_of(x))) {
    /* integers pooled exactly in f64 */
    CHECK(y = torc_max_pool2d(torc_to_dtype(x, TORC_F64), &p));
    CHECK(y = torc_to_dtype(y, torc_dtype_of(x)));
  } else if (is_max) {
    CHECK(y = torc_max_pool2d(x, &p));
  } else {
    CHECK(y = torc_avg_pool2d(x, &p));
  }
  if (one_d) {
    CHECK(y = torc_squeeze(y, 2));
    if (idx)
      CHECK(idx = torc_squeeze(idx, 2));
  }
  n->out[0] = y;
  if (idx)
    n->out[1] = idx;
  return TORC_OK;
}
static torc_status op_max_pool(onode *n) { return pool(n, 1); }
static torc_status op_avg_pool(onode *n) { return pool(n, 0); }

static torc_status global_pool(onode *n, int is_max) {
  NEED_IN(0);
  int nd = torc_ndim(n->in[0]);
  if (nd < 3)
    return torc_set_error(TORC_ERR_SHAPE, "the input needs >= 3 dims, has %d",
                          nd);
  int dims[TORC_MAX_DIMS];
  for (int i = 2; i < nd; i++)
    dims[i - 2] = i;
  CHECK(n->out[0] = is_max ? torc_amax(n->in[0], dims, nd - 2, 1)
                           : torc_mean(n->in[0], dims, nd - 2, 1));
  return TORC_OK;
}
static torc_status op_global_avg_pool(onode *n) { return global_pool(n, 0); }
static torc_status op_global_max_pool(onode *n) { return global_pool(n, 1); }

/* ---- normalisation ---- */

/* In inference, the running statistics normalise. A module in training
 * mode (torc_onnx_module_new) normalises with the batch's statistics and
 * updates the running ones in place, as torch.nn.BatchNorm2d: ONNX's
 * momentum m (running = running * m + batch * (1 - m)) is PyTorch's
 * 1 - m. */
static torc_status op_batch_norm(onode *n) {
  for (int i = 0; i < 5; i++)
    NEED_IN(i);
  if (n->n_out > 1)
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "BatchNormalization in training mode (running "
                          "statistics as outputs); export the model in eval "
                          "mode");
  if (attr_i(n, "training_mode", 0) && !n->training)
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "BatchNormalization with training_mode 1 outside "
                          "a module in training mode; export the model in "
                          "eval mode, or import it with "
                          "torc_onnx_module_new");
  double eps = attr_f(n, "epsilon", 1e-5);
  double momentum = attr_f(n, "momentum", 0.9);
  if (!(momentum >= 0 && momentum <= 1))
    return torc_set_error(TORC_ERR_INVALID,
                          "momentum %g; ONNX's momentum is between 0 and 1 "
                          "(0.9 is PyTorch's 0.1)",
                          momentum);
  CHECK(n->out[0] = torc_batch_norm(n->in[0], n->in[3], n->in[4], n->in[1],
                                    n->in[2], n->training, 1 - momentum, eps));
  return TORC_OK;
}

/* Each (sample, channel) normalised: group_norm with one channel a
 * group. */
static torc_status op_instance_norm(onode *n) {
  for (int i = 0; i < 3; i++)
    NEED_IN(i);
  double eps = attr_f(n, "epsilon", 1e-5);
  if (torc_ndim(n->in[0]) < 2)
    return torc_set_error(TORC_ERR_SHAPE, "the input needs >= 2 dims");
  CHECK(n->out[0] = torc_group_norm(n->in[0], torc_size(n->in[0], 1),
                                    n->in[1], n->in[2], eps));
  return TORC_OK;
}

static torc_status op_layer_norm(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  if (n->n_out > 1)
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "LayerNormalization's Mean and InvStdDev outputs");
  int nd = torc_ndim(n->in[0]), ax;
  torc_status st = norm_axis(attr_i(n, "axis", -1), nd, &ax);
  if (st != TORC_OK)
    return st;
  double eps = attr_f(n, "epsilon", 1e-5);
  torc_tensor *y = torc_layer_norm(n->in[0], torc_shape(n->in[0]) + ax,
                                   nd - ax, NULL, NULL, eps);
  CHECK(y);
  CHECK(y = torc_mul(y, n->in[1]));
  if (n->n_in > 2 && n->in[2])
    CHECK(y = torc_add(y, n->in[2]));
  n->out[0] = y;
  return TORC_OK;
}

/* ---- shapes ---- */

static torc_status op_identity(onode *n) {
  NEED_IN(0);
  n->out[0] = n->in[0];
  return TORC_OK;
}

/* Identity in inference; in a module in training mode each element is
 * zeroed with probability `ratio` (input 1 from opset 12, else the
 * attribute; 0.5 by default) and the rest scaled by 1 / (1 - ratio), as
 * torch.nn.Dropout. The graph's own training_mode input is overridden by
 * the module's mode. */
static torc_status op_dropout(onode *n) {
  NEED_IN(0);
  torc_status st;
  if (n->n_in > 2 && n->in[2] && !n->training) {
    double t;
    if ((st = scalar_of(n->in[2], &t)) != TORC_OK)
      return st;
    if (t != 0)
      return torc_set_error(TORC_ERR_UNSUPPORTED,
                            "Dropout with training_mode true outside a "
                            "module in training mode (torc_onnx_run is "
                            "inference; import the model with "
                            "torc_onnx_module_new to train it)");
  }
  double ratio = attr_f(n, "ratio", 0.5);
  if (n->opset >= 12 && n->n_in > 1 && n->in[1] &&
      (st = scalar_of(n->in[1], &ratio)) != TORC_OK)
    return st;
  if (!n->training || ratio == 0) {
    n->out[0] = n->in[0];
    if (n->n_out > 1)
      CHECK(n->out[1] = torc_ones(torc_shape(n->in[0]), torc_ndim(n->in[0]),
                                  TORC_BOOL, torc_device_of(n->in[0])));
    return TORC_OK;
  }
  if (!(ratio >= 0 && ratio < 1))
    return torc_set_error(TORC_ERR_INVALID,
                          "ratio %g; Dropout's ratio is in [0, 1)", ratio);
  CHECK(n->out[0] = torc_dropout(n->in[0], ratio, 1, NULL));
  if (n->n_out > 1) {
    /* kept: a nonzero output, or a zero input (kept or not, it reads 0) */
    torc_tensor *z = torc_zeros(torc_shape(n->in[0]), torc_ndim(n->in[0]),
                                torc_dtype_of(n->in[0]),
                                torc_device_of(n->in[0]));
    CHECK(z);
    CHECK(n->out[1] = torc_logical_or(torc_ne(n->out[0], z),
                                      torc_eq(n->in[0], z)));
  }
  return TORC_OK;
}

static torc_status op_flatten(onode *n) {
  NEED_IN(0);
  int nd = torc_ndim(n->in[0]), ax;
  int64_t a = attr_i(n, "axis", 1);
  if (a < -nd || a > nd)
    return torc_set_error(TORC_ERR_RANGE, "axis %lld is out of range for %d "
                          "dims", (long long)a, nd);
  ax = (int)(a < 0 ? a + nd : a);
  const int64_t *s = torc_shape(n->in[0]);
  int64_t two[2] = {prod(s, 0, ax), prod(s, ax, nd)};
  CHECK(n->out[0] = torc_reshape(n->in[0], two, 2));
  return TORC_OK;
}

static torc_status op_reshape(onode *n) {
  NEED_IN(0);
  int64_t shape[TORC_MAX_DIMS];
  int cnt = 0;
  torc_status st;
  if (n->opset < 5) {
    size_t k;
    const int64_t *v = attr_ints(n, "shape", &k);
    if (!attr(n, "shape", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
      return torc_set_error(TORC_ERR_INVALID, "Reshape of opset %d has no "
                            "'shape' attribute; give it one (opset 5 and "
                            "later take the shape as input 1)", (int)n->opset);
    if (k > TORC_MAX_DIMS)
      return torc_set_error(TORC_ERR_INVALID, "shape has %zu dims", k);
    if (k)
      memcpy(shape, v, k * sizeof *v);
    cnt = (int)k;
  } else {
    NEED_IN(1);
    if ((st = tensor_ints(n->in[1], shape, TORC_MAX_DIMS, &cnt)) != TORC_OK)
      return st;
  }
  int allowzero = (int)attr_i(n, "allowzero", 0);
  for (int i = 0; i < cnt; i++)
    if (shape[i] == 0 && !allowzero) {
      if (i >= torc_ndim(n->in[0]))
        return torc_set_error(TORC_ERR_SHAPE,
                              "shape[%d] is 0 (copy the dim) but the input "
                              "has %d dims",
                              i, torc_ndim(n->in[0]));
      shape[i] = torc_size(n->in[0], i);
    }
  CHECK(n->out[0] = torc_reshape(n->in[0], shape, cnt));
  return TORC_OK;
}

static torc_status op_transpose(onode *n) {
  NEED_IN(0);
  int nd = torc_ndim(n->in[0]);
  size_t k;
  const int64_t *perm = attr_ints(n, "perm", &k);
  int dims[TORC_MAX_DIMS];
  if (perm && k != (size_t)nd)
    return torc_set_error(TORC_ERR_INVALID, "perm has %zu values for %d dims",
                          k, nd);
  for (int i = 0; i < nd; i++) {
    if (perm && (perm[i] < 0 || perm[i] >= nd))
      return torc_set_error(TORC_ERR_INVALID, "perm[%d] = %lld is out of "
                            "range", i, (long long)perm[i]);
    dims[i] = perm ? (int)perm[i] : nd - 1 - i;
  }
  CHECK(n->out[0] = torc_permute(n->in[0], dims, nd));
  return TORC_OK;
}

static torc_status op_concat(onode *n) {
  NEED_IN(0);
  int ax;
  torc_status st = norm_axis(attr_i(n, "axis", 0), torc_ndim(n->in[0]), &ax);
  if (st != TORC_OK)
    return st;
  for (int i = 0; i < n->n_in; i++)
    NEED_IN(i);
  CHECK(n->out[0] = torc_cat((const torc_tensor *const *)n->in, n->n_in, ax));
  return TORC_OK;
}

static torc_status op_split(onode *n) {
  NEED_IN(0);
  int ax;
  torc_status st = norm_axis(attr_i(n, "axis", 0), torc_ndim(n->in[0]), &ax);
  if (st != TORC_OK)
    return st;
  int64_t parts[MAX_IO];
  int cnt = 0;
  if (n->opset < 13) {
    size_t k;
    const int64_t *v = attr_ints(n, "split", &k);
    if (k > MAX_IO)
      return torc_set_error(TORC_ERR_INVALID, "split has %zu values", k);
    if (v)
      memcpy(parts, v, k * sizeof *v);
    cnt = (int)k;
  } else if (n->n_in > 1 && n->in[1]) {
    if ((st = tensor_ints(n->in[1], parts, MAX_IO, &cnt)) != TORC_OK)
      return st;
  }
  int64_t dim = torc_size(n->in[0], ax);
  if (cnt == 0) {
    int64_t each = (dim + n->n_out - 1) / n->n_out;
    for (int i = 0; i < n->n_out; i++) {
      int64_t left = dim - each * i;
      parts[i] = left < each ? (left < 0 ? 0 : left) : each;
    }
    cnt = n->n_out;
  }
  if (cnt != n->n_out)
    return torc_set_error(TORC_ERR_INVALID,
                          "split has %d sizes for %d outputs", cnt, n->n_out);
  int64_t at = 0;
  for (int i = 0; i < cnt; i++) {
    if (parts[i] < 0 || at + parts[i] > dim)
      return torc_set_error(TORC_ERR_SHAPE,
                            "split sizes do not add up to the dim's %lld",
                            (long long)dim);
    CHECK(n->out[i] = torc_narrow(n->in[0], ax, at, parts[i]));
    at += parts[i];
  }
  return TORC_OK;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The axes of Squeeze/Unsqueeze/Reduce*: an attribute before `from`, an
 * input (index k) from it. *cnt -1 when none are given. */
static torc_status axes_of(onode *n, int64_t from, int k, int64_t *ax,
                           int *cnt) {
  *cnt = -1;
  if (n->opset < from) {
    size_t c;
    const int64_t *v = attr_ints(n, "axes", &c);
    if (c > TORC_MAX_DIMS)
      return torc_set_error(TORC_ERR_INVALID, "axes has %zu values", c);
    if (v) {
      memcpy(ax, v, c * sizeof *v);
      *cnt = (int)c;
    }
    return TORC_OK;
  }
  if (n->n_in > k && n->in[k])
    return tensor_ints(n->in[k], ax, TORC_MAX_DIMS, cnt);
  return TORC_OK;
}

static torc_status op_squeeze(onode *n) {
  NEED_IN(0);
  int64_t ax[TORC_MAX_DIMS];
  int cnt, nd = torc_ndim(n->in[0]);
  torc_status st = axes_of(n, 13, 1, ax, &cnt);
  if (st != TORC_OK)
    return st;
  if (cnt < 0) {
    CHECK(n->out[0] = torc_squeeze_all(n->in[0]));
    return TORC_OK;
  }
  for (int i = 0; i < cnt; i++) {
    int a;
    if ((st = norm_axis(ax[i], nd, &a)) != TORC_OK)
      return st;
    if (torc_size(n->in[0], a) != 1)
      return torc_set_error(TORC_ERR_SHAPE, "dim %d has size %lld, not 1", a,
                            (long long)torc_size(n->in[0], a));
    ax[i] = a;
  }
  qsort(ax, (size_t)cnt, sizeof *ax, cmp_i64);
  torc_tensor *y = n->in[0];
  for (int i = cnt - 1; i >= 0; i--)
    CHECK(y = torc_squeeze(y, (int)ax[i]));
  if (y == n->in[0])
    CHECK(y = torc_reshape(y, torc_shape(y), torc_ndim(y)));
  n->out[0] = y;
  return TORC_OK;
}

static torc_status op_unsqueeze(onode *n) {
  NEED_IN(0);
  int64_t ax[TORC_MAX_DIMS];
  int cnt;
  torc_status st = axes_of(n, 13, 1, ax, &cnt);
  if (st != TORC_OK)
    return st;
  if (cnt < 0)
    return torc_set_error(TORC_ERR_INVALID, "axes are required");
  int out_nd = torc_ndim(n->in[0]) + cnt;
  for (int i = 0; i < cnt; i++) {
    int a;
    if ((st = norm_axis(ax[i], out_nd, &a)) != TORC_OK)
      return st;
    ax[i] = a;
  }
  qsort(ax, (size_t)cnt, sizeof *ax, cmp_i64);
  torc_tensor *y = n->in[0];
  for (int i = 0; i < cnt; i++)
    CHECK(y = torc_unsqueeze(y, (int)ax[i]));
  n->out[0] = y;
  return TORC_OK;
}

/* Negative indices counted from the end of a dim of size `dim`. */
static torc_tensor *wrap_indices(const torc_tensor *idx, int64_t dim) {
  torc_tensor *i = torc_to_dtype(idx, TORC_I64);
  torc_tensor *z = torc_zeros(NULL, 0, TORC_I64, TORC_CPU);
  return torc_where(torc_lt(i, z), torc_add_scalar(i, (double)dim), i);
}

static torc_status op_gather(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  torc_tensor *x = n->in[0], *idx = n->in[1];
  int nd = torc_ndim(x), ax;
  torc_status st = norm_axis(attr_i(n, "axis", 0), nd, &ax);
  if (st != TORC_OK)
    return st;
  int ni = torc_ndim(idx);
  if (nd - 1 + ni > TORC_MAX_DIMS)
    return torc_set_error(TORC_ERR_UNSUPPORTED, "the result would have %d "
                          "dims", nd - 1 + ni);
  torc_tensor *flat = torc_reshape(wrap_indices(idx, torc_size(x, ax)),
                                   (int64_t[]){-1}, 1);
  CHECK(flat);
  torc_tensor *y = torc_index_select(x, ax, flat);
  CHECK(y);
  int64_t shape[TORC_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < ax; i++)
    shape[k++] = torc_size(x, i);
  for (int i = 0; i < ni; i++)
    shape[k++] = torc_size(idx, i);
  for (int i = ax + 1; i < nd; i++)
    shape[k++] = torc_size(x, i);
  CHECK(n->out[0] = torc_reshape(y, shape, k));
  return TORC_OK;
}

static torc_status op_gather_elements(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  int ax;
  torc_status st = norm_axis(attr_i(n, "axis", 0), torc_ndim(n->in[0]), &ax);
  if (st != TORC_OK)
    return st;
  torc_tensor *idx = wrap_indices(n->in[1], torc_size(n->in[0], ax));
  CHECK(idx);
  CHECK(n->out[0] = torc_gather(n->in[0], ax, idx));
  return TORC_OK;
}

static torc_status op_shape(onode *n) {
  NEED_IN(0);
  int nd = torc_ndim(n->in[0]);
  int64_t start = attr_i(n, "start", 0), end = attr_i(n, "end", nd);
  if (start < 0)
    start += nd;
  if (end < 0)
    end += nd;
  start = start < 0 ? 0 : start > nd ? nd : start;
  end = end < 0 ? 0 : end > nd ? nd : end;
  int64_t len = end > start ? end - start : 0;
  CHECK(n->out[0] = torc_from_host(torc_shape(n->in[0]) + start, &len, 1,
                                   TORC_I64, TORC_CPU));
  return TORC_OK;
}

static torc_status op_size(onode *n) {
  NEED_IN(0);
  int64_t v = torc_numel(n->in[0]);
  CHECK(n->out[0] = torc_from_host(&v, NULL, 0, TORC_I64, TORC_CPU));
  return TORC_OK;
}

static torc_status op_constant(onode *n) {
  const Onnx__AttributeProto *a;
  torc_status st;
  if ((a = attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)) &&
      a->t) {
    torc_tensor *t;
    if ((st = torc__onnx_tensor(a->t, "Constant", &t)) != TORC_OK)
      return st;
    n->out[0] = t; /* owned by the run's scope: see run_node */
    return TORC_OK;
  }
  if ((a = attr(n, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT))) {
    float v = a->f;
    CHECK(n->out[0] = torc_from_host(&v, NULL, 0, TORC_F32, TORC_CPU));
    return TORC_OK;
  }
  if ((a = attr(n, "value_int", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT))) {
    int64_t v = a->i;
    CHECK(n->out[0] = torc_from_host(&v, NULL, 0, TORC_I64, TORC_CPU));
    return TORC_OK;
  }
  if ((a = attr(n, "value_floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))) {
    int64_t len = (int64_t)a->n_floats;
    CHECK(n->out[0] = len ? torc_from_host(a->floats, &len, 1, TORC_F32, TORC_CPU)
                          : torc_zeros(&len, 1, TORC_F32, TORC_CPU));
    return TORC_OK;
  }
  if ((a = attr(n, "value_ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))) {
    int64_t len = (int64_t)a->n_ints;
    CHECK(n->out[0] = len ? torc_from_host(a->ints, &len, 1, TORC_I64, TORC_CPU)
                          : torc_zeros(&len, 1, TORC_I64, TORC_CPU));
    return TORC_OK;
  }
  if (n->st != TORC_OK)
    return n->st;
  return torc_set_error(TORC_ERR_UNSUPPORTED,
                        "a Constant that is not value, value_float(s) or "
                        "value_int(s) (strings and sparse tensors)");
}

static torc_status op_constant_of_shape(onode *n) {
  NEED_IN(0);
  int64_t shape[TORC_MAX_DIMS];
  int cnt;
  torc_status st = tensor_ints(n->in[0], shape, TORC_MAX_DIMS, &cnt);
  if (st != TORC_OK)
    return st;
  double v = 0;
  torc_dtype dt = TORC_F32;
  const Onnx__AttributeProto *a =
      attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  if (a && a->t) {
    torc_tensor *t;
    if ((st = torc__onnx_tensor(a->t, "ConstantOfShape", &t)) != TORC_OK)
      return st;
    dt = torc_dtype_of(t);
    st = torc_item(t, &v);
    if (st != TORC_OK)
      return st;
  }
  for (int i = 0; i < cnt; i++)
    if (shape[i] < 0)
      return torc_set_error(TORC_ERR_SHAPE, "shape[%d] is negative (%lld)", i,
                            (long long)shape[i]);
  CHECK(n->out[0] = torc_full(shape, cnt, v, dt, TORC_CPU));
  return TORC_OK;
}

static torc_status op_expand(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  int64_t shape[TORC_MAX_DIMS], out[TORC_MAX_DIMS];
  int cnt;
  torc_status st = tensor_ints(n->in[1], shape, TORC_MAX_DIMS, &cnt);
  if (st != TORC_OK)
    return st;
  /* bidirectional: the broadcast of the input's shape and `shape` */
  int nd = torc_ndim(n->in[0]);
  int on = nd > cnt ? nd : cnt;
  for (int i = 0; i < on; i++) {
    int64_t a = i - (on - nd) >= 0 ? torc_size(n->in[0], i - (on - nd)) : 1;
    int64_t b = i - (on - cnt) >= 0 ? shape[i - (on - cnt)] : 1;
    if (a != b && a != 1 && b != 1)
      return torc_set_error(TORC_ERR_SHAPE,
                            "shape %lld does not broadcast with the input's "
                            "%lld at dim %d",
                            (long long)b, (long long)a, i);
    out[i] = a == 1 ? b : a;
  }
  torc_tensor *y = torc_expand(n->in[0], out, on);
  CHECK(y);
  CHECK(n->out[0] = torc_contiguous(y));
  return TORC_OK;
}

/* x [d0, d1, ...] -> [1, d0, 1, d1, ...] expanded to [r0, d0, r1, d1, ...]
 * -> [r0 d0, r1 d1, ...]. */
static torc_status op_tile(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  int64_t reps[TORC_MAX_DIMS];
  int cnt, nd = torc_ndim(n->in[0]);
  torc_status st = tensor_ints(n->in[1], reps, TORC_MAX_DIMS, &cnt);
  if (st != TORC_OK)
    return st;
  if (cnt != nd)
    return torc_set_error(TORC_ERR_SHAPE, "repeats has %d values for %d dims",
                          cnt, nd);
  if (2 * nd > TORC_MAX_DIMS)
    return torc_set_error(TORC_ERR_UNSUPPORTED, "Tile of more than %d dims",
                          TORC_MAX_DIMS / 2);
  int64_t s1[TORC_MAX_DIMS], s2[TORC_MAX_DIMS], s3[TORC_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    if (reps[i] < 0)
      return torc_set_error(TORC_ERR_INVALID, "repeats[%d] is negative", i);
    s1[2 * i] = 1, s1[2 * i + 1] = torc_size(n->in[0], i);
    s2[2 * i] = reps[i], s2[2 * i + 1] = s1[2 * i + 1];
    if (__builtin_mul_overflow(reps[i], s1[2 * i + 1], &s3[i]))
      return torc_set_error(TORC_ERR_SHAPE,
                            "repeats[%d] = %lld times dim %d of size %lld "
                            "overflows 64 bits",
                            i, (long long)reps[i], i,
                            (long long)s1[2 * i + 1]);
  }
  torc_tensor *y = torc_reshape(n->in[0], s1, 2 * nd);
  CHECK(y);
  CHECK(y = torc_contiguous(torc_expand(y, s2, 2 * nd)));
  CHECK(n->out[0] = torc_reshape(y, s3, nd));
  return TORC_OK;
}

static torc_status op_slice(onode *n) {
  NEED_IN(0);
  torc_tensor *x = n->in[0];
  int nd = torc_ndim(x);
  int64_t st_[TORC_MAX_DIMS], en[TORC_MAX_DIMS], ax[TORC_MAX_DIMS],
      sp[TORC_MAX_DIMS];
  int ns = 0, ne = 0, na = -1, nsp = -1;
  torc_status st;
  if (n->opset < 10) {
    size_t a, b, c;
    const int64_t *s = attr_ints(n, "starts", &a), *e = attr_ints(n, "ends", &b),
                  *x_ = attr_ints(n, "axes", &c);
    if (a > TORC_MAX_DIMS || b != a || (x_ && c != a))
      return torc_set_error(TORC_ERR_INVALID, "starts, ends and axes differ "
                            "in length");
    if (a) {
      memcpy(st_, s, a * 8);
      memcpy(en, e, a * 8);
    }
    ns = ne = (int)a;
    if (x_) {
      memcpy(ax, x_, c * 8);
      na = (int)c;
    }
  } else {
    NEED_IN(1);
    NEED_IN(2);
    if ((st = tensor_ints(n->in[1], st_, TORC_MAX_DIMS, &ns)) != TORC_OK ||
        (st = tensor_ints(n->in[2], en, TORC_MAX_DIMS, &ne)) != TORC_OK)
      return st;
    if (n->n_in > 3 && n->in[3] &&
        (st = tensor_ints(n->in[3], ax, TORC_MAX_DIMS, &na)) != TORC_OK)
      return st;
    if (n->n_in > 4 && n->in[4] &&
        (st = tensor_ints(n->in[4], sp, TORC_MAX_DIMS, &nsp)) != TORC_OK)
      return st;
  }
  if (ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
    return torc_set_error(TORC_ERR_INVALID,
                          "starts (%d), ends (%d), axes and steps differ in "
                          "length",
                          ns, ne);
  torc_tensor *y = x;
  for (int i = 0; i < ns; i++) {
    int a;
    if ((st = norm_axis(na >= 0 ? ax[i] : i, nd, &a)) != TORC_OK)
      return st;
    int64_t dim = torc_size(x, a), step = nsp >= 0 ? sp[i] : 1;
    int64_t s = st_[i], e = en[i];
    if (step == 0)
      return torc_set_error(TORC_ERR_INVALID, "step %d is 0", i);
    if (s < 0)
      s += dim;
    if (e < 0 && e > INT64_MIN / 2)
      e += dim;
    if (step > 0) {
      s = s < 0 ? 0 : s > dim ? dim : s;
      e = e < 0 ? 0 : e > dim ? dim : e;
    } else {
      s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    }
    if (step > 0 && e <= s) {
      CHECK(y = torc_narrow(y, a, 0, 0));
    } else if (step > 0) {
      CHECK(y = torc_slice(y, a, s, e, step));
    } else if (e >= s) {
      CHECK(y = torc_narrow(y, a, 0, 0));
    } else {
      torc_tensor *idx = torc_arange((double)s, (double)e, (double)step,
                                     TORC_I64, TORC_CPU);
      CHECK(idx);
      CHECK(y = torc_index_select(y, a, idx));
    }
  }
  if (y == x)
    CHECK(y = torc_reshape(x, torc_shape(x), nd));
  n->out[0] = y;
  return TORC_OK;
}

static torc_status op_pad(onode *n) {
  NEED_IN(0);
  int nd = torc_ndim(n->in[0]);
  int64_t pads[2 * TORC_MAX_DIMS];
  int cnt = 0;
  double value = 0;
  torc_status st;
  char mode[32];
  attr_s(n, "mode", "constant", mode, sizeof mode);
  if (n->opset < 11) {
    size_t k;
    const int64_t *p = attr_ints(n, n->opset < 2 ? "paddings" : "pads", &k);
    if (k > 2 * TORC_MAX_DIMS)
      return torc_set_error(TORC_ERR_INVALID, "pads has %zu values", k);
    if (p)
      memcpy(pads, p, k * 8);
    cnt = (int)k;
    value = attr_f(n, "value", 0.0);
  } else {
    NEED_IN(1);
    if ((st = tensor_ints(n->in[1], pads, 2 * TORC_MAX_DIMS, &cnt)) != TORC_OK)
      return st;
    if (n->n_in > 2 && n->in[2] && (st = scalar_of(n->in[2], &value)) != TORC_OK)
      return st;
    if (n->n_in > 3 && n->in[3])
      return torc_set_error(TORC_ERR_UNSUPPORTED, "Pad's axes input");
  }
  if (cnt != 2 * nd)
    return torc_set_error(TORC_ERR_INVALID, "pads has %d values for %d dims",
                          cnt, nd);
  torc_pad_mode pm;
  if (strcmp(mode, "constant") == 0)
    pm = TORC_PAD_CONSTANT;
  else if (strcmp(mode, "reflect") == 0)
    pm = TORC_PAD_REFLECT;
  else if (strcmp(mode, "edge") == 0)
    pm = TORC_PAD_REPLICATE;
  else
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "Pad mode '%s' (torc has constant, reflect, edge)",
                          mode);
  int64_t tp[2 * TORC_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    tp[2 * (nd - 1 - i)] = pads[i];
    tp[2 * (nd - 1 - i) + 1] = pads[i + nd];
  }
  CHECK(n->out[0] = torc_pad(n->in[0], tp, 2 * nd, pm, value));
  return TORC_OK;
}

static torc_status op_clip(onode *n) {
  NEED_IN(0);
  int has_lo = 0, has_hi = 0;
  double lo = 0, hi = 0;
  torc_status st;
  if (n->opset < 11) {
    lo = attr_f(n, "min", -INFINITY);
    hi = attr_f(n, "max", INFINITY);
    has_lo = has_hi = 1;
  } else {
    if (n->n_in > 1 && n->in[1]) {
      if ((st = scalar_of(n->in[1], &lo)) != TORC_OK)
        return st;
      has_lo = 1;
    }
    if (n->n_in > 2 && n->in[2]) {
      if ((st = scalar_of(n->in[2], &hi)) != TORC_OK)
        return st;
      has_hi = 1;
    }
  }
  if (!has_lo && !has_hi) {
    n->out[0] = n->in[0];
    return TORC_OK;
  }
  CHECK(n->out[0] = torc_clamp(n->in[0], has_lo, lo, has_hi, hi));
  return TORC_OK;
}

static torc_status op_where(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  NEED_IN(2);
  CHECK(n->out[0] = torc_where(n->in[0], n->in[1], n->in[2]));
  return TORC_OK;
}


/* Trilu(x, k = 0): the upper (upper = 1, the default) or lower triangle of
 * the last two dims. */
static torc_status op_trilu(onode *n) {
  NEED_IN(0);
  double k = 0;
  if (n->n_in > 1 && n->in[1]) {
    torc_status st = scalar_of(n->in[1], &k);
    if (st != TORC_OK)
      return st;
  }
  if (!(k >= -9e18 && k <= 9e18))
    return torc_set_error(TORC_ERR_RANGE, "Trilu's k %g is out of range", k);
  int upper = attr_i(n, "upper", 1) != 0;
  CHECK(n->out[0] = upper ? torc_triu(n->in[0], (int64_t)k)
                          : torc_tril(n->in[0], (int64_t)k));
  return TORC_OK;
}

/* OneHot(indices, depth, values = [off, on]), a new dim of size depth at
 * axis: on where the index (wrapped once when negative) equals the
 * position, off elsewhere, also for an index out of range. */
static torc_status op_one_hot(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  NEED_IN(2);
  double depth_d;
  torc_status st = scalar_of(n->in[1], &depth_d);
  if (st != TORC_OK)
    return st;
  if (!(depth_d >= 1 && depth_d <= (double)(1 << 24)))
    return torc_set_error(TORC_ERR_RANGE,
                          "OneHot's depth %g is not between 1 and %d",
                          depth_d, 1 << 24);
  int64_t depth = (int64_t)depth_d;
  if (torc_numel(n->in[2]) != 2)
    return torc_set_error(TORC_ERR_SHAPE,
                          "OneHot's values has %lld elements; it takes 2 "
                          "(off, on)",
                          (long long)torc_numel(n->in[2]));
  int nd = torc_ndim(n->in[0]);
  if (nd + 1 > TORC_MAX_DIMS)
    return torc_set_error(TORC_ERR_SHAPE, "OneHot of a %d-dim tensor", nd);
  int axis;
  st = norm_axis(attr_i(n, "axis", -1), nd + 1, &axis);
  if (st != TORC_OK)
    return st;
  torc_device dev = torc_device_of(n->in[0]);
  torc_tensor *idx = torc_to_dtype(n->in[0], TORC_I64);
  CHECK(idx);
  torc_tensor *neg = torc_lt(idx, torc_zeros(NULL, 0, TORC_I64, dev));
  CHECK(neg);
  torc_tensor *wrapped = torc_add(idx, torc_full(NULL, 0, (double)depth,
                                                 TORC_I64, dev));
  CHECK(wrapped);
  CHECK(idx = torc_where(neg, wrapped, idx));
  CHECK(idx = torc_unsqueeze(idx, axis));
  int64_t shape[TORC_MAX_DIMS];
  for (int i = 0; i <= nd; i++)
    shape[i] = i == axis ? depth : 1;
  torc_tensor *pos = torc_arange(0, (double)depth, 1, TORC_I64, dev);
  CHECK(pos);
  CHECK(pos = torc_reshape(pos, shape, nd + 1));
  torc_tensor *hit = torc_eq(idx, pos);
  CHECK(hit);
  torc_tensor *vals = torc_reshape(n->in[2], (int64_t[]){2}, 1);
  CHECK(vals);
  torc_tensor *off = torc_select(vals, 0, 0), *on = torc_select(vals, 0, 1);
  CHECK(off);
  CHECK(on);
  CHECK(n->out[0] = torc_contiguous(torc_where(hit, on, off)));
  return TORC_OK;
}

static torc_status op_cast(onode *n) {
  NEED_IN(0);
  int64_t to = attr_i(n, "to", -1);
  torc_dtype dt;
  if (!torc__onnx_dtype(to, &dt))
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "Cast to ONNX type %lld, which torc lacks", (long long)to);
  CHECK(n->out[0] = torc_to_dtype(n->in[0], dt));
  return TORC_OK;
}

static torc_status op_cast_like(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  CHECK(n->out[0] = torc_to_dtype(n->in[0], torc_dtype_of(n->in[1])));
  return TORC_OK;
}

/* ---- reductions ---- */

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_SUMSQ, R_L1, R_L2, R_LOGSUM,
       R_LOGSUMEXP };

static torc_status reduce(onode *n, int kind) {
  NEED_IN(0);
  torc_tensor *x = n->in[0];
  int nd = torc_ndim(x);
  int64_t ax[TORC_MAX_DIMS];
  int cnt;
  torc_status st = axes_of(n, kind == R_SUM ? 13 : 18, 1, ax, &cnt);
  if (st != TORC_OK)
    return st;
  int keep = (int)attr_i(n, "keepdims", 1);
  if (cnt <= 0 && attr_i(n, "noop_with_empty_axes", 0)) {
    n->out[0] = x;
    return TORC_OK;
  }
  int dims[TORC_MAX_DIMS];
  if (cnt <= 0) {
    for (int i = 0; i < nd; i++)
      dims[i] = i;
    cnt = nd;
  } else {
    for (int i = 0; i < cnt; i++)
      if ((st = norm_axis(ax[i], nd, &dims[i])) != TORC_OK)
        return st;
  }
  torc_dtype dt = torc_dtype_of(x);
  torc_tensor *y;
  if (nd == 0) {
    CHECK(y = torc_mul_scalar(x, 1));
    if (kind == R_SUMSQ)
      CHECK(y = torc_mul(x, x));
    else if (kind == R_L1 || kind == R_L2)
      CHECK(y = torc_abs(x));
    else if (kind == R_LOGSUM || kind == R_LOGSUMEXP)
      CHECK(y = kind == R_LOGSUM ? torc_log(x) : torc_mul_scalar(x, 1));
    n->out[0] = y;
    return TORC_OK;
  }
  switch (kind) {
  case R_SUM: y = torc_sum(x, dims, cnt, keep); break;
  case R_MEAN: y = torc_mean(x, dims, cnt, keep); break;
  case R_MAX: y = torc_amax(x, dims, cnt, keep); break;
  case R_MIN: y = torc_amin(x, dims, cnt, keep); break;
  case R_PROD: y = torc_prod(x, dims, cnt, keep); break;
  case R_SUMSQ: y = torc_sum(torc_mul(x, x), dims, cnt, keep); break;
  case R_L1: y = torc_sum(torc_abs(x), dims, cnt, keep); break;
  case R_L2: y = torc_sqrt(torc_sum(torc_mul(x, x), dims, cnt, keep)); break;
  case R_LOGSUM: y = torc_log(torc_sum(x, dims, cnt, keep)); break;
  default: y = torc_logsumexp(x, dims, cnt, keep); break;
  }
  CHECK(y);
  if (torc_dtype_of(y) != dt)
    CHECK(y = torc_to_dtype(y, dt));
  n->out[0] = y;
  return TORC_OK;
}
static torc_status op_reduce_sum(onode *n) { return reduce(n, R_SUM); }
static torc_status op_reduce_mean(onode *n) { return reduce(n, R_MEAN); }
static torc_status op_reduce_max(onode *n) { return reduce(n, R_MAX); }
static torc_status op_reduce_min(onode *n) { return reduce(n, R_MIN); }
static torc_status op_reduce_prod(onode *n) { return reduce(n, R_PROD); }
static torc_status op_reduce_sumsq(onode *n) { return reduce(n, R_SUMSQ); }
static torc_status op_reduce_l1(onode *n) { return reduce(n, R_L1); }
static torc_status op_reduce_l2(onode *n) { return reduce(n, R_L2); }
static torc_status op_reduce_logsum(onode *n) { return reduce(n, R_LOGSUM); }
static torc_status op_reduce_logsumexp(onode *n) {
  return reduce(n, R_LOGSUMEXP);
}

static torc_status arg(onode *n, int is_max) {
  NEED_IN(0);
  int ax;
  torc_status st = norm_axis(attr_i(n, "axis", 0), torc_ndim(n->in[0]), &ax);
  if (st != TORC_OK)
    return st;
  if (attr_i(n, "select_last_index", 0))
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "select_last_index 1 (torc gives the first index)");
  int keep = (int)attr_i(n, "keepdims", 1);
  CHECK(n->out[0] = is_max ? torc_argmax(n->in[0], &ax, keep)
                           : torc_argmin(n->in[0], &ax, keep));
  return TORC_OK;
}
static torc_status op_argmax(onode *n) { return arg(n, 1); }
static torc_status op_argmin(onode *n) { return arg(n, 0); }

static torc_status op_topk(onode *n) {
  NEED_IN(0);
  int64_t k;
  if (n->opset < 10) {
    k = attr_i(n, "k", -1);
  } else {
    NEED_IN(1);
    int64_t v[1];
    int cnt;
    torc_status st = tensor_ints(n->in[1], v, 1, &cnt);
    if (st != TORC_OK)
      return st;
    if (cnt != 1)
      return torc_set_error(TORC_ERR_INVALID, "K must hold one value");
    k = v[0];
  }
  int ax;
  torc_status st = norm_axis(attr_i(n, "axis", -1), torc_ndim(n->in[0]), &ax);
  if (st != TORC_OK)
    return st;
  int largest = (int)attr_i(n, "largest", 1), sorted = (int)attr_i(n, "sorted", 1);
  torc_tensor *v = NULL, *i = NULL;
  if ((st = torc_topk(n->in[0], k, ax, largest, sorted, &v, &i)) != TORC_OK)
    return st;
  n->out[0] = v;
  if (n->n_out > 1)
    n->out[1] = i;
  return TORC_OK;
}

static torc_status op_cumsum(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  if (attr_i(n, "exclusive", 0) || attr_i(n, "reverse", 0))
    return torc_set_error(TORC_ERR_UNSUPPORTED,
                          "CumSum's exclusive and reverse modes");
  int64_t v[1];
  int cnt, ax;
  torc_status st = tensor_ints(n->in[1], v, 1, &cnt);
  if (st != TORC_OK)
    return st;
  if ((st = norm_axis(v[0], torc_ndim(n->in[0]), &ax)) != TORC_OK)
    return st;
  torc_tensor *y = torc_cumsum(n->in[0], ax);
  CHECK(y);
  if (torc_dtype_of(y) != torc_dtype_of(n->in[0]))
    CHECK(y = torc_to_dtype(y, torc_dtype_of(n->in[0])));
  n->out[0] = y;
  return TORC_OK;
}

static torc_status op_range(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  NEED_IN(2);
  double s, e, d;
  torc_status st;
  if ((st = scalar_of(n->in[0], &s)) != TORC_OK ||
      (st = scalar_of(n->in[1], &e)) != TORC_OK ||
      (st = scalar_of(n->in[2], &d)) != TORC_OK)
    return st;
  torc_dtype dt = torc_dtype_of(n->in[0]);
  double cnt = ceil((e - s) / d);
  if (!(cnt > 0)) {
    int64_t z = 0;
    CHECK(n->out[0] = torc_zeros(&z, 1, dt, TORC_CPU));
    return TORC_OK;
  }
  if (cnt > 1e9)
    return torc_set_error(TORC_ERR_INVALID, "Range of %g elements", cnt);
  /* start + i * delta for i < cnt, computed in f64 then cast */
  torc_tensor *i = torc_arange(0, cnt, 1, TORC_F64, TORC_CPU);
  CHECK(i);
  CHECK(n->out[0] = torc_to_dtype(torc_add_scalar(torc_mul_scalar(i, d), s), dt));
  return TORC_OK;
}

/* DepthToSpace / SpaceToDepth: a reshape, a permute and a reshape. */
static torc_status depth_space(onode *n, int to_space) {
  NEED_IN(0);
  if (torc_ndim(n->in[0]) != 4)
    return torc_set_error(TORC_ERR_SHAPE, "the input must have 4 dims");
  int64_t bs = attr_i(n, "blocksize", 0);
  const int64_t *s = torc_shape(n->in[0]);
  int64_t b = s[0], c = s[1], h = s[2], w = s[3];
  if (bs < 1)
    return torc_set_error(TORC_ERR_INVALID, "blocksize %lld must be >= 1",
                          (long long)bs);
  char mode[8];
  attr_s(n, "mode", "DCR", mode, sizeof mode);
  torc_tensor *y;
  if (to_space) {
    if (c % (bs * bs))
      return torc_set_error(TORC_ERR_SHAPE, "channels %lld are not a "
                            "multiple of blocksize^2", (long long)c);
    int crd = strcmp(mode, "CRD") == 0;
    int64_t s6[6] = {b, bs, bs, c / (bs * bs), h, w};
    int p[6] = {0, 3, 4, 1, 5, 2};
    if (crd) {
      int64_t t[6] = {b, c / (bs * bs), bs, bs, h, w};
      int q[6] = {0, 1, 4, 2, 5, 3};
      memcpy(s6, t, sizeof t);
      memcpy(p, q, sizeof q);
    }
    CHECK(y = torc_permute(torc_reshape(n->in[0], s6, 6), p, 6));
    int64_t o[4] = {b, c / (bs * bs), h * bs, w * bs};
    CHECK(n->out[0] = torc_reshape(y, o, 4));
  } else {
    if (h % bs || w % bs)
      return torc_set_error(TORC_ERR_SHAPE, "height and width are not "
                            "multiples of blocksize %lld", (long long)bs);
    int64_t s6[6] = {b, c, h / bs, bs, w / bs, bs};
    int p[6] = {0, 3, 5, 1, 2, 4};
    CHECK(y = torc_permute(torc_reshape(n->in[0], s6, 6), p, 6));
    int64_t o[4] = {b, c * bs * bs, h / bs, w / bs};
    CHECK(n->out[0] = torc_reshape(y, o, 4));
  }
  return TORC_OK;
}
static torc_status op_depth_to_space(onode *n) { return depth_space(n, 1); }
static torc_status op_space_to_depth(onode *n) { return depth_space(n, 0); }

/* ---- losses ---- */

/* NegativeLogLikelihoodLoss on log-probabilities x [N, C, d1..dk] and
 * targets t [N, d1..dk]: loss = -x[n, t, d] * weight[t], 0 where t is
 * ignore_index; reduction "none", "sum" or "mean" (the sum over the
 * weights of the targets counted), as torch.nn.NLLLoss. */
static torc_status nll_loss(onode *n, torc_tensor *x, torc_tensor *t,
                            torc_tensor *w, torc_tensor **out) {
  char red[16];
  attr_s(n, "reduction", "mean", red, sizeof red);
  int mode = strcmp(red, "none") == 0 ? 0 : strcmp(red, "sum") == 0 ? 1
             : strcmp(red, "mean") == 0 ? 2 : -1;
  if (mode < 0)
    return torc_set_error(TORC_ERR_INVALID, "reduction '%s' is not one of "
                          "none, sum, mean", red);
  int nd = torc_ndim(x);
  if (nd < 2 || torc_ndim(t) != nd - 1 || torc_size(t, 0) != torc_size(x, 0))
    return torc_set_error(TORC_ERR_SHAPE, "input has %d dims and target %d; "
                          "the input is [N, C, d1..dk] and the target "
                          "[N, d1..dk]", nd, torc_ndim(t));
  for (int i = 2; i < nd; i++)
    if (torc_size(t, i - 1) != torc_size(x, i))
      return torc_set_error(TORC_ERR_SHAPE, "target dim %d is %lld, input "
                            "dim %d is %lld", i - 1,
                            (long long)torc_size(t, i - 1), i,
                            (long long)torc_size(x, i));
  int64_t c = torc_size(x, 1);
  if (w && (torc_ndim(w) != 1 || torc_size(w, 0) != c))
    return torc_set_error(TORC_ERR_SHAPE, "weight must be [%lld] (C)",
                          (long long)c);
  CHECK(t = torc_to_dtype(t, TORC_I64));
  const Onnx__AttributeProto *ia =
      attr(n, "ignore_index", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  torc_tensor *keep = NULL, *zero = torc_zeros(NULL, 0, TORC_I64, TORC_CPU);
  CHECK(zero);
  if (ia) {
    torc_tensor *ii = torc_full(NULL, 0, (double)ia->i, TORC_I64, TORC_CPU);
    CHECK(ii);
    CHECK(keep = torc_ne(t, ii));
    CHECK(t = torc_where(keep, t, zero));
  }
  /* Every target counted must name a class. */
  torc_tensor *lo = torc_lt(t, zero), *hi = torc_ge(t, torc_full(
      NULL, 0, (double)c, TORC_I64, TORC_CPU));
  CHECK(lo && hi);
  double bad = 0;
  torc_tensor *any = torc_sum(torc_logical_or(lo, hi), NULL, 0, 0);
  CHECK(any);
  torc_status st = torc_item(any, &bad);
  if (st != TORC_OK)
    return st;
  if (bad > 0)
    return torc_set_error(TORC_ERR_RANGE, "%.0f targets are outside the "
                          "%lld classes [0, %lld)", bad, (long long)c,
                          (long long)c);
  torc_tensor *g = torc_gather(x, 1, torc_unsqueeze(t, 1));
  CHECK(g);
  CHECK(g = torc_neg(torc_squeeze(g, 1)));
  torc_tensor *wt = NULL;
  if (w) {
    torc_tensor *flat = torc_reshape(t, (int64_t[]){-1}, 1);
    CHECK(flat);
    CHECK(wt = torc_index_select(w, 0, flat));
    CHECK(wt = torc_reshape(wt, torc_shape(t), torc_ndim(t)));
  }
  if (keep) {
    torc_tensor *k = torc_to_dtype(keep, torc_dtype_of(x));
    CHECK(k);
    CHECK(wt = wt ? torc_mul(wt, k) : k);
  }
  if (wt)
    CHECK(g = torc_mul(g, wt));
  if (mode == 0)
    *out = g;
  else if (mode == 1 || !wt)
    CHECK(*out = mode == 1 ? torc_sum(g, NULL, 0, 0) : torc_mean(g, NULL, 0, 0));
  else
    CHECK(*out = torc_div(torc_sum(g, NULL, 0, 0), torc_sum(wt, NULL, 0, 0)));
  return TORC_OK;
}

static torc_status op_nll_loss(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  return nll_loss(n, n->in[0], n->in[1], n->n_in > 2 ? n->in[2] : NULL,
                  &n->out[0]);
}

/* SoftmaxCrossEntropyLoss: log_softmax over dim 1, then the NLL loss;
 * the second output, when asked for, is the log-probabilities. */
static torc_status op_softmax_cross_entropy(onode *n) {
  NEED_IN(0);
  NEED_IN(1);
  if (torc_ndim(n->in[0]) < 2)
    return torc_set_error(TORC_ERR_SHAPE, "scores have %d dims; they are "
                          "[N, C, d1..dk]", torc_ndim(n->in[0]));
  torc_tensor *lp = torc_log_softmax(n->in[0], 1);
  CHECK(lp);
  torc_status st = nll_loss(n, lp, n->in[1], n->n_in > 2 ? n->in[2] : NULL,
                            &n->out[0]);
  if (st == TORC_OK && n->n_out > 1)
    n->out[1] = lp;
  return st;
}

/* ---- the table ---- */

typedef struct op_row {
  const char *op_type;
  int64_t since, until; /* opsets covered: since <= opset <= until */
  onnx_fn fn;
} op_row;

#define ANY 1, 99
static const op_row op_table[] = {
    {"Abs", ANY, op_abs},
    {"Add", ANY, op_add},
    {"And", ANY, op_and},
    {"ArgMax", ANY, op_argmax},
    {"ArgMin", ANY, op_argmin},
    {"AveragePool", ANY, op_avg_pool},
    {"BatchNormalization", ANY, op_batch_norm},
    {"Cast", 6, 99, op_cast},
    {"CastLike", ANY, op_cast_like},
    {"Celu", ANY, op_celu},
    {"Clip", ANY, op_clip},
    {"Concat", ANY, op_concat},
    {"Constant", ANY, op_constant},
    {"ConstantOfShape", ANY, op_constant_of_shape},
    {"Conv", ANY, op_conv},
    {"ConvTranspose", ANY, op_conv_transpose},
    {"Cos", ANY, op_cos},
    {"CumSum", ANY, op_cumsum},
    {"DepthToSpace", ANY, op_depth_to_space},
    {"Div", ANY, op_div},
    {"Dropout", ANY, op_dropout},
    {"Elu", ANY, op_elu},
    {"Erf", ANY, op_erf},
    {"Equal", ANY, op_equal},
    {"Exp", ANY, op_exp},
    {"Expand", ANY, op_expand},
    {"Flatten", ANY, op_flatten},
    {"Gather", ANY, op_gather},
    {"GatherElements", ANY, op_gather_elements},
    {"Gemm", ANY, op_gemm},
    {"GlobalAveragePool", ANY, op_global_avg_pool},
    {"GlobalMaxPool", ANY, op_global_max_pool},
    {"Greater", ANY, op_greater},
    {"GreaterOrEqual", ANY, op_greater_equal},
    {"HardSigmoid", ANY, op_hard_sigmoid},
    {"HardSwish", ANY, op_hardswish},
    {"Identity", ANY, op_identity},
    {"InstanceNormalization", ANY, op_instance_norm},
    {"IsInf", ANY, op_isinf},
    {"IsNaN", ANY, op_isnan},
    {"LayerNormalization", ANY, op_layer_norm},
    {"LeakyRelu", ANY, op_leaky_relu},
    {"Less", ANY, op_less},
    {"LessOrEqual", ANY, op_less_equal},
    {"Log", ANY, op_log},
    {"LogSoftmax", ANY, op_log_softmax},
    {"NegativeLogLikelihoodLoss", 12, 99, op_nll_loss},
    {"MatMul", ANY, op_matmul},
    {"Max", ANY, op_max},
    {"MaxPool", ANY, op_max_pool},
    {"Mean", ANY, op_mean},
    {"Min", ANY, op_min},
    {"Mul", ANY, op_mul},
    {"Neg", ANY, op_neg},
    {"Not", ANY, op_not},
    {"OneHot", ANY, op_one_hot},
    {"Or", ANY, op_or},
    {"Pad", ANY, op_pad},
    {"Pow", ANY, op_pow},
    {"PRelu", ANY, op_prelu},
    {"Range", ANY, op_range},
    {"Reciprocal", ANY, op_reciprocal},
    {"ReduceL1", ANY, op_reduce_l1},
    {"ReduceL2", ANY, op_reduce_l2},
    {"ReduceLogSum", ANY, op_reduce_logsum},
    {"ReduceLogSumExp", ANY, op_reduce_logsumexp},
    {"ReduceMax", ANY, op_reduce_max},
    {"ReduceMean", ANY, op_reduce_mean},
    {"ReduceMin", ANY, op_reduce_min},
    {"ReduceProd", ANY, op_reduce_prod},
    {"ReduceSum", ANY, op_reduce_sum},
    {"ReduceSumSquare", ANY, op_reduce_sumsq},
    {"Relu", ANY, op_relu},
    {"Reshape", ANY, op_reshape},
    {"Selu", ANY, op_selu},
    {"Shape", ANY, op_shape},
    {"Sigmoid", ANY, op_sigmoid},
    {"Sign", ANY, op_sign},
    {"Sin", ANY, op_sin},
    {"Size", ANY, op_size},
    {"Slice", ANY, op_slice},
    {"Softmax", ANY, op_softmax},
    {"SoftmaxCrossEntropyLoss", 12, 99, op_softmax_cross_entropy},
    {"Softplus", ANY, op_softplus},
    {"Softsign", ANY, op_softsign},
    {"SpaceToDepth", ANY, op_space_to_depth},
    {"Split", ANY, op_split},
    {"Sqrt", ANY, op_sqrt},
    {"Squeeze", ANY, op_squeeze},
    {"Sub", ANY, op_sub},
    {"Sum", ANY, op_sum},
    {"Tanh", ANY, op_tanh},
    {"ThresholdedRelu", ANY, op_thresholded_relu},
    {"Tile", 6, 99, op_tile},
    {"TopK", ANY, op_topk},
    {"Transpose", ANY, op_transpose},
    {"Trilu", ANY, op_trilu},
    {"Unsqueeze", ANY, op_unsqueeze},
    {"Where", ANY, op_where},
    {"Xor", ANY, op_xor},
};

static const op_row *find_op(const char *op_type, int64_t opset) {
  for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
    if (strcmp(op_table[i].op_type, op_type) == 0 &&
        opset >= op_table[i].since && opset <= op_table[i].until)
      return &op_table[i];
  return NULL;
}

int torc__onnx_op_supported(const char *op_type, int64_t opset) {
  return find_op(op_type, opset) != NULL;
}

/* ---- running ---- */

typedef struct value {
  const char *name;
  torc_tensor *t;
} value;

typedef struct values {
  value *v;
  size_t n, cap;
} values;

static torc_tensor *lookup(const values *vs, const char *name) {
  for (size_t i = vs->n; i-- > 0;)
    if (strcmp(vs->v[i].name, name) == 0)
      return vs->v[i].t;
  return NULL;
}

static int define(values *vs, const char *name, torc_tensor *t) {
  if (vs->n == vs->cap) {
    size_t cap = vs->cap ? vs->cap * 2 : 64;
    value *nv = realloc(vs->v, cap * sizeof *nv);
    if (!nv)
      return 0;
    vs->v = nv;
    vs->cap = cap;
  }
  vs->v[vs->n].name = name;
  vs->v[vs->n].t = t;
  vs->n++;
  return 1;
}

static int is_known(const torc_onnx_model *m, const Onnx__GraphProto *g,
                    size_t upto, const char *name) {
  for (int i = 0; i < m->n_inits; i++)
    if (strcmp(m->init_names[i], name) == 0)
      return 1;
  for (int i = 0; i < m->n_inputs; i++)
    if (strcmp(m->inputs[i], name) == 0)
      return 1;
  for (size_t i = 0; i < upto; i++)
    for (size_t j = 0; j < g->node[i]->n_output; j++)
      if (strcmp(g->node[i]->output[j], name) == 0)
        return 1;
  return 0;
}

static const char *node_name(const Onnx__NodeProto *nd, size_t i, char *buf,
                             size_t size) {
  if (nd->name && nd->name[0])
    return nd->name;
  snprintf(buf, size, "#%zu", i);
  return buf;
}

static const char *dom_of(const Onnx__NodeProto *nd) {
  return nd->domain && strcmp(nd->domain, "ai.onnx") ? nd->domain : "";
}

int torc_onnx_unsupported(const torc_onnx_model *m, char *buf, size_t size) {
  if (buf && size)
    buf[0] = 0;
  if (!m)
    return 0;
  const Onnx__GraphProto *g = m->proto->graph;
  size_t len = 0;
  int n_bad = 0;
  char nb[32];
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    const char *dom = dom_of(nd);
    if (!dom[0] && find_op(nd->op_type, m->opset))
      continue;
    /* each op type once, with all its nodes, where it first appears */
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++)
      seen = strcmp(g->node[j]->op_type, nd->op_type) == 0 &&
             strcmp(dom_of(g->node[j]), dom) == 0;
    if (seen)
      continue;
    for (size_t j = i; j < g->n_node; j++) {
      const Onnx__NodeProto *o = g->node[j];
      if (strcmp(o->op_type, nd->op_type) || strcmp(dom_of(o), dom))
        continue;
      if (buf && len + 1 < size) {
        int k = snprintf(buf + len, size - len, "%s%s%s%s (node %s)",
                         n_bad ? ", " : "", dom, dom[0] ? "." : "",
                         o->op_type, node_name(o, j, nb, sizeof nb));
        if (k > 0)
          len += (size_t)k < size - len ? (size_t)k : size - len - 1;
      }
      n_bad++;
    }
  }
  return n_bad;
}

torc_status torc_onnx_check(const torc_onnx_model *m) {
  if (!m)
    return torc__null_input("torc_onnx_check");
  const Onnx__GraphProto *g = m->proto->graph;
  char nb[32], list[1024];
  if (torc_onnx_unsupported(m, list, sizeof list))
    return torc_set_error(
        TORC_ERR_UNSUPPORTED,
        "%s: unsupported ONNX operators at opset %lld: %s (docs/onnx.md lists "
        "what torc runs)",
        m->name, (long long)m->opset, list);
  for (size_t i = 0; i < g->n_node; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    if (nd->n_input > MAX_IO || nd->n_output > MAX_IO)
      return torc_set_error(TORC_ERR_UNSUPPORTED,
                            "%s: node %s has %zu inputs and %zu outputs, more "
                            "than torc's %d",
                            m->name, node_name(nd, i, nb, sizeof nb),
                            nd->n_input, nd->n_output, MAX_IO);
    for (size_t j = 0; j < nd->n_input; j++)
      if (nd->input[j][0] && !is_known(m, g, i, nd->input[j]))
        return torc_set_error(
            TORC_ERR_INVALID,
            "%s: node %s (%s) reads '%s', which no earlier node, initializer "
            "or graph input defines (the nodes must be in topological order)",
            m->name, node_name(nd, i, nb, sizeof nb), nd->op_type,
            nd->input[j]);
  }
  for (int i = 0; i < m->n_outputs; i++)
    if (!is_known(m, g, g->n_node, m->outputs[i]))
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: graph output '%s' is not defined by any node",
                            m->name, m->outputs[i]);
  return TORC_OK;
}

torc_status torc_onnx_run(const torc_onnx_model *m,
                          const torc_tensor *const *inputs, int n_inputs,
                          torc_tensor *const *params, torc_tensor **outputs,
                          int n_outputs) {
  return torc__onnx_run_mode(m, inputs, n_inputs, params, outputs, n_outputs,
                             0, 0);
}

torc_status torc__onnx_run_mode(const torc_onnx_model *m,
                                const torc_tensor *const *inputs, int n_inputs,
                                torc_tensor *const *params,
                                torc_tensor **outputs, int n_outputs,
                                int training, int checked) {
  if (!m || (n_inputs && !inputs) || (n_outputs && !outputs))
    return torc__null_input("torc_onnx_run");
  if (n_inputs != m->n_inputs || n_outputs != m->n_outputs)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the model takes %d inputs and gives %d outputs, "
                          "called with %d and %d",
                          m->name, m->n_inputs, m->n_outputs, n_inputs,
                          n_outputs);
  for (int i = 0; i < n_inputs; i++)
    if (!inputs[i])
      return torc__null_input("torc_onnx_run");
  torc_status st = checked ? TORC_OK : torc_onnx_check(m);
  if (st != TORC_OK)
    return st;
  const Onnx__GraphProto *g = m->proto->graph;
  values vs = {0};
  int scope = torc_scope_begin();
  for (int i = 0; i < m->n_inits && st == TORC_OK; i++)
    if (!define(&vs, m->init_names[i],
                params && params[i] ? params[i] : m->inits[i]))
      st = torc_set_error(TORC_ERR_OOM, "out of memory");
  for (int i = 0; i < n_inputs && st == TORC_OK; i++)
    if (!define(&vs, m->inputs[i], (torc_tensor *)inputs[i]))
      st = torc_set_error(TORC_ERR_OOM, "out of memory");
  onode *n = calloc(1, sizeof *n);
  if (!n && st == TORC_OK)
    st = torc_set_error(TORC_ERR_OOM, "out of memory");
  for (size_t i = 0; i < g->n_node && st == TORC_OK; i++) {
    const Onnx__NodeProto *nd = g->node[i];
    memset(n, 0, sizeof *n);
    n->nd = nd;
    n->opset = m->opset;
    n->training = training;
    n->n_in = (int)nd->n_input;
    n->n_out = (int)nd->n_output;
    for (int j = 0; j < n->n_in; j++)
      n->in[j] = nd->input[j][0] ? lookup(&vs, nd->input[j]) : NULL;
    /* an omitted trailing output is an empty name */
    while (n->n_out > 1 && !nd->output[n->n_out - 1][0])
      n->n_out--;
    st = find_op(nd->op_type, m->opset)->fn(n);
    if (st == TORC_OK && n->st != TORC_OK)
      st = n->st;
    for (int j = 0; j < n->n_out && st == TORC_OK; j++) {
      if (!nd->output[j][0])
        continue;
      if (!n->out[j]) {
        st = torc_set_error(TORC_ERR_UNSUPPORTED, "output %d is not computed",
                            j);
        break;
      }
      if (!define(&vs, nd->output[j], n->out[j]))
        st = torc_set_error(TORC_ERR_OOM, "out of memory");
    }
    if (st != TORC_OK) {
      char nb[32], *prev = strdup(torc_last_error());
      st = torc_set_error(st, "%s: node %s (%s): %s", m->name,
                          node_name(nd, i, nb, sizeof nb), nd->op_type,
                          prev ? prev : "");
      free(prev);
    }
  }
  if (st == TORC_OK)
    for (int i = 0; i < n_outputs; i++)
      outputs[i] = torc_retain(lookup(&vs, m->outputs[i]));
  free(n);
  free(vs.v);
  torc_scope_end(scope);
  return st;
}
