/* core/graph_params.c — a graph node's params bytes as text: the fields of
 * the op's params struct (torc/plugin.h; which op takes which is the
 * params column of torc/ops.def) by name, for printing graphs and for the
 * messages of torc_trace_check; and the struct's size, which loading a
 * graph checks. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph_internal.h"
#include "torc/nn.h"
#include "torc/optim.h"

typedef torc__gnode gnode;

/* The params type of each op, as written in its table row. */
static const char *const op_params[TORC__OP_COUNT] = {
#define TORC_OP(name, kind, rule, fn, io, params, ...) #params,
#include "torc/ops.def"
#undef TORC_OP
};

/* Text appended to a bounded buffer. */
typedef struct {
  char *buf;
  size_t size, len;
} text;

static void put(text *t, const char *fmt, ...) TORC_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...) {
  if (t->len + 1 >= t->size)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
  va_end(ap);
  if (n > 0)
    t->len = t->len + (size_t)n < t->size ? t->len + (size_t)n : t->size - 1;
}

static void put_ints(text *t, const char *name, const int64_t *v, int n) {
  put(t, "%s%s=[", t->len ? " " : "", name);
  for (int i = 0; i < n; i++)
    put(t, "%s%" PRId64, i ? "," : "", v[i]);
  put(t, "]");
}

/* The dims whose bit is set in mask, as a list. */
static void put_mask(text *t, const char *name, uint32_t mask) {
  int64_t dims[32];
  int n = 0;
  for (int d = 0; d < 32; d++)
    if ((mask >> d) & 1)
      dims[n++] = d;
  put_ints(t, name, dims, n);
}

static void put_f(text *t, const char *name, double x) {
  put(t, "%s%s=%.9g", t->len ? " " : "", name, x);
}

static void put_i(text *t, const char *name, int64_t x) {
  put(t, "%s%s=%" PRId64, t->len ? " " : "", name, x);
}

static int is_op(const gnode *n, const char *name) {
  return strcmp(torc__ops[n->op].name, name) == 0;
}

static int is_float(torc_dtype dt) {
  return dt == TORC_F32 || dt == TORC_F64 || dt == TORC_F16 ||
         dt == TORC_BF16;
}

static void reduce_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_reduce_params p;
  memcpy(&p, n->params, sizeof p);
  put_mask(t, "dims", p.dims_mask);
  if (is_op(n, "var") || is_op(n, "std"))
    put_f(t, "correction", p.correction);
}

static void fill_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_fill_params p;
  memcpy(&p, n->params, sizeof p);
  if (is_float(n->kdtype))
    put_f(t, "value", p.value);
  else
    put_i(t, "value", p.ivalue);
}

static void random_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_random_params p;
  memcpy(&p, n->params, sizeof p);
  put(t, "seed=%" PRIu64 " offset=%" PRIu64, p.seed, p.offset);
  if (is_op(n, "randint_")) {
    put_i(t, "low", p.low);
    put_i(t, "high", p.high);
  } else {
    put_f(t, is_op(n, "normal_") ? "mean" : "low", p.a);
    put_f(t, is_op(n, "normal_") ? "std" : "high", p.b);
  }
}

static void scalar_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_scalar_params p;
  memcpy(&p, n->params, sizeof p);
  if (is_op(n, "leaky_relu")) {
    put_f(t, "negative_slope", p.a);
  } else if (is_op(n, "elu")) {
    put_f(t, "alpha", p.a);
  } else if (is_op(n, "gelu") || is_op(n, "gelu_backward")) {
    put(t, "approximate=%s", p.flags & 1 ? "tanh" : "none");
  } else if (is_op(n, "softplus")) {
    put_f(t, "beta", p.a);
    put_f(t, "threshold", p.b);
  } else if (is_op(n, "clamp")) {
    int fl = is_float(n->kdtype);
    if (p.flags & 1)
      fl ? put_f(t, "min", p.a) : put_i(t, "min", p.ia);
    if (p.flags & 2)
      fl ? put_f(t, "max", p.b) : put_i(t, "max", p.ib);
  } else {
    put_f(t, "a", p.a);
    put_f(t, "b", p.b);
    put_i(t, "ia", p.ia);
    put_i(t, "ib", p.ib);
    put_i(t, "flags", p.flags);
  }
}

static void dim_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_dim_params p;
  memcpy(&p, n->params, sizeof p);
  put_i(t, "dim", p.dim);
}

static void norm_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_norm_params p;
  memcpy(&p, n->params, sizeof p);
  put_mask(t, "dims", p.dims_mask);
  put_f(t, "p", p.p);
}

static void index_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_index_params p;
  memcpy(&p, n->params, sizeof p);
  put_i(t, "dim", p.dim);
  if (is_op(n, "scatter"))
    put(t, " reduce=%s", p.reduce == 1 ? "add" : "none");
}

static void pad_str(text *t, const gnode *n, int ndim) {
  torc_pad_params p;
  memcpy(&p, n->params, sizeof p);
  static const char *const modes[] = {"constant", "reflect", "replicate"};
  if (p.mode >= 0 && p.mode < 3)
    put(t, "mode=%s", modes[p.mode]);
  else
    put_i(t, "mode", p.mode);
  if (p.mode == 0)
    put_f(t, "value", p.value);
  if (ndim < 0 || ndim > TORC_KERNEL_MAX_DIMS)
    ndim = TORC_KERNEL_MAX_DIMS;
  put_ints(t, "before", p.before, ndim);
  put_ints(t, "after", p.after, ndim);
}

static void interp_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_interp_params p;
  memcpy(&p, n->params, sizeof p);
  if (p.mode == 0 || p.mode == 1)
    put(t, "mode=%s", p.mode ? "bilinear" : "nearest");
  else
    put_i(t, "mode", p.mode);
  put_i(t, "align_corners", p.align_corners);
}

static void topk_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_topk_params p;
  memcpy(&p, n->params, sizeof p);
  put_i(t, "k", p.k);
  put_i(t, "dim", p.dim);
  put_i(t, "largest", p.largest);
}

static void conv_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_conv_kparams p;
  memcpy(&p, n->params, sizeof p);
  put_ints(t, "stride", p.stride, 2);
  put_ints(t, "padding", p.padding, 2);
  put_ints(t, "dilation", p.dilation, 2);
  put_i(t, "groups", p.groups);
}

static void pool_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_pool_kparams p;
  memcpy(&p, n->params, sizeof p);
  put_ints(t, "kernel", p.kernel, 2);
  put_ints(t, "stride", p.stride, 2);
  put_ints(t, "padding", p.padding, 2);
  int avg = strncmp(torc__ops[n->op].name, "avg", 3) == 0;
  if (!avg)
    put_ints(t, "dilation", p.dilation, 2);
  put_i(t, "ceil_mode", p.ceil_mode);
  if (avg) {
    put_i(t, "count_include_pad", p.count_include_pad);
    put_i(t, "divisor", p.divisor);
  }
}

static void normk_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_norm_kparams p;
  memcpy(&p, n->params, sizeof p);
  put_f(t, "eps", p.eps);
  if (strncmp(torc__ops[n->op].name, "batch_norm", 10) == 0) {
    put_f(t, "momentum", p.momentum);
    put_i(t, "training", p.training);
  }
  if (strncmp(torc__ops[n->op].name, "group_norm", 10) == 0)
    put_i(t, "groups", p.groups);
}

static void dropout_str(text *t, const gnode *n, int ndim) {
  (void)ndim;
  torc_dropout_kparams p;
  memcpy(&p, n->params, sizeof p);
  put_f(t, "p", p.p);
  put(t, " seed=%" PRIu64 " offset=%" PRIu64, p.seed, p.offset);
}

/* The params structs by the name ops.def gives them: size and writer
 * (NULL: shown as hex). */
static const struct {
  const char *name;
  size_t size;
  void (*str)(text *t, const gnode *n, int ndim);
} structs[] = {
    {"void", 0, NULL},
    {"torc_reduce_params", sizeof(torc_reduce_params), reduce_str},
    {"torc_fill_params", sizeof(torc_fill_params), fill_str},
    {"torc_random_params", sizeof(torc_random_params), random_str},
    {"torc_scalar_params", sizeof(torc_scalar_params), scalar_str},
    {"torc_dim_params", sizeof(torc_dim_params), dim_str},
    {"torc_norm_params", sizeof(torc_norm_params), norm_str},
    {"torc_index_params", sizeof(torc_index_params), index_str},
    {"torc_pad_params", sizeof(torc_pad_params), pad_str},
    {"torc_interp_params", sizeof(torc_interp_params), interp_str},
    {"torc_topk_params", sizeof(torc_topk_params), topk_str},
    {"torc_conv_kparams", sizeof(torc_conv_kparams), conv_str},
    {"torc_pool_kparams", sizeof(torc_pool_kparams), pool_str},
    {"torc_norm_kparams", sizeof(torc_norm_kparams), normk_str},
    {"torc_dropout_kparams", sizeof(torc_dropout_kparams), dropout_str},
    {"torc_cross_entropy_params", sizeof(torc_cross_entropy_params), NULL},
    {"torc_sgd_step_params", sizeof(torc_sgd_step_params), NULL},
    {"torc_adam_step_kparams", sizeof(torc_adam_step_kparams), NULL},
};

static int struct_of(int op) {
  if (op < 0 || op >= TORC__OP_COUNT)
    return -1;
  for (size_t i = 0; i < sizeof structs / sizeof *structs; i++)
    if (strcmp(structs[i].name, op_params[op]) == 0)
      return (int)i;
  return -1;
}

size_t torc__graph_params_size(int op) {
  int s = struct_of(op);
  return s < 0 ? (size_t)-1 : structs[s].size;
}

const char *torc__graph_params_struct(int op) {
  return op >= 0 && op < TORC__OP_COUNT ? op_params[op] : "";
}

void torc__graph_params_str(const torc_graph *g, const gnode *n, char *buf,
                            size_t size) {
  text t = {buf, size, 0};
  if (size == 0)
    return;
  buf[0] = '\0';
  int s = struct_of(n->op);
  if (s >= 0 && structs[s].str && n->params_size == structs[s].size) {
    int ndim = n->n_in > 0 && g ? g->values[n->in[0]].ndim : -1;
    structs[s].str(&t, n, ndim);
    return;
  }
  for (size_t b = 0; b < n->params_size; b++)
    put(&t, "%02x", ((const unsigned char *)n->params)[b]);
}
