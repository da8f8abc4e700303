/* core/layers_simple.c — the layers without parameters: nn.Dropout, the
 * pools (MaxPool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool2d), nn.Flatten,
 * nn.Identity, and one module per activation op of torc/ops.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers_internal.h"

static char *shape_of(const torc_tensor *x, char *buf, size_t size) {
  return torc__shape_str(torc_shape(x), torc_ndim(x), buf, size);
}

/* An image input: [N, C, H, W] or one unbatched [C, H, W]. */
static int image_input(const torc_module *m, const torc_tensor *x) {
  int nd = torc_ndim(x);
  if (nd == 3 || nd == 4)
    return 1;
  char b[128];
  torc_set_error(TORC_ERR_SHAPE,
                 "%s: expected a 4-D input [N, C, H, W] (or one unbatched "
                 "image [C, H, W]), got shape %s",
                 torc_module_type_name(m), shape_of(x, b, sizeof b));
  return 0;
}

/* ---- nn.Dropout ---- */

typedef struct dropout_state {
  torc__layer_head head;
  double p;
} dropout_state;

static torc_tensor *dropout_forward(torc_module *m,
                                    const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  const dropout_state *s = torc_module_state(m);
  return torc_dropout(in[0], s->p, torc_module_is_training(m), NULL);
}

static int dropout_describe(const torc_module *m, char *buf, size_t size) {
  const dropout_state *s = torc_module_state(m);
  char p[40];
  return snprintf(buf, size, "p=%s, inplace=False",
                  torc__pyfloat(p, sizeof p, s->p));
}

static const torc_module_vtable dropout_vt = {
    sizeof(torc_module_vtable), dropout_forward, torc__layer_destroy,
    dropout_describe, NULL};

torc_module *torc_dropout_new(double p) {
  if (!(p >= 0 && p <= 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "dropout: p is %g; the probability of an element being "
                   "zeroed must be between 0 and 1",
                   p);
    return NULL;
  }
  dropout_state *s = torc__calloc(1, sizeof *s);
  if (s)
    s->p = p;
  return torc__layer_new("dropout", &dropout_vt, s);
}

/* ---- pools ---- */

typedef struct pool_state {
  torc__layer_head head;
  int max;
  torc_pool2d_params p; /* with the defaults filled in */
} pool_state;

static torc_tensor *pool_apply(torc_module *m, const torc_tensor *x) {
  const pool_state *s = torc_module_state(m);
  return s->max ? torc_max_pool2d(x, &s->p) : torc_avg_pool2d(x, &s->p);
}

static torc_tensor *pool_forward(torc_module *m, const torc_tensor *const *in,
                                 int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  if (!image_input(m, in[0]))
    return NULL;
  return torc__layer_image(m, in[0], pool_apply);
}

/* PyTorch's MaxPool2d / AvgPool2d extra_repr (sizes given as one number
 * print as one). */
static int pool_describe(const torc_module *m, char *buf, size_t size) {
  const pool_state *s = torc_module_state(m);
  const torc_pool2d_params *p = &s->p;
  char k[48], st[48], pad[48], dil[48];
  torc__pair_str(k, sizeof k, p->kernel, 0);
  torc__pair_str(st, sizeof st, p->stride, 0);
  torc__pair_str(pad, sizeof pad, p->padding, 0);
  if (s->max)
    return snprintf(buf, size,
                    "kernel_size=%s, stride=%s, padding=%s, dilation=%s, "
                    "ceil_mode=%s",
                    k, st, pad, torc__pair_str(dil, sizeof dil, p->dilation, 0),
                    torc__pybool(p->ceil_mode));
  return snprintf(buf, size, "kernel_size=%s, stride=%s, padding=%s", k, st,
                  pad);
}

static const torc_module_vtable maxpool_vt = {
    sizeof(torc_module_vtable), pool_forward, torc__layer_destroy,
    pool_describe, NULL};
static const torc_module_vtable avgpool_vt = {
    sizeof(torc_module_vtable), pool_forward, torc__layer_destroy,
    pool_describe, NULL};

int torc__layer_maxpool2d(const torc_module *m, torc_pool2d_params *p) {
  if (torc__module_vtable(m) != &maxpool_vt)
    return 0;
  *p = ((const pool_state *)torc_module_state(m))->p;
  return 1;
}

static torc_module *pool_new(int max, const torc_pool2d_params *p) {
  const char *t = max ? "maxpool2d" : "avgpool2d";
  if (p == NULL || p->kernel[0] < 1 || p->kernel[1] < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: the kernel size is %s; set kernel to sizes >= 1",
                   t, p ? "below 1" : "missing (params NULL)");
    return NULL;
  }
  torc_pool2d_params q = *p;
  for (int j = 0; j < 2; j++) {
    if (q.stride[j] < 0 || q.padding[j] < 0 || q.dilation[j] < 0) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: stride (%lld, %lld), padding (%lld, %lld) and "
                     "dilation (%lld, %lld) must not be negative",
                     t, (long long)q.stride[0], (long long)q.stride[1],
                     (long long)q.padding[0], (long long)q.padding[1],
                     (long long)q.dilation[0], (long long)q.dilation[1]);
      return NULL;
    }
    if (q.stride[j] == 0)
      q.stride[j] = q.kernel[j];
    if (q.dilation[j] == 0)
      q.dilation[j] = 1;
    if (!max && q.dilation[j] != 1) {
      torc_set_error(TORC_ERR_INVALID,
                     "avgpool2d: dilation (%lld, %lld) is not supported; "
                     "average pooling has no dilation (leave it 1)",
                     (long long)q.dilation[0], (long long)q.dilation[1]);
      return NULL;
    }
    int64_t eff = q.dilation[j] * (q.kernel[j] - 1) + 1;
    if (q.padding[j] > eff / 2) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: padding %lld is more than half the kernel size "
                     "%lld; use padding <= %lld",
                     t, (long long)q.padding[j], (long long)eff,
                     (long long)(eff / 2));
      return NULL;
    }
  }
  if (q.divisor_override < 0 || (max && q.divisor_override)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: divisor_override %lld; it must be >= 0 (0 = none) "
                   "and is for avgpool2d only",
                   t, (long long)q.divisor_override);
    return NULL;
  }
  pool_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->max = max;
    s->p = q;
  }
  return torc__layer_new(t, max ? &maxpool_vt : &avgpool_vt, s);
}

torc_module *torc_maxpool2d_new(const torc_pool2d_params *p) {
  return pool_new(1, p);
}

torc_module *torc_avgpool2d_new(const torc_pool2d_params *p) {
  return pool_new(0, p);
}

/* ---- nn.MaxPool1d, nn.AvgPool1d, nn.MaxPool3d, nn.AvgPool3d ---- */

typedef struct poolnd_state {
  torc__layer_head head;
  int dims; /* 1 or 3 */
  int max;
  torc_pool1d_params p1;
  torc_pool3d_params p3;
} poolnd_state;

static const char *poolnd_type(int dims, int max) {
  return dims == 1 ? (max ? "maxpool1d" : "avgpool1d")
                   : (max ? "maxpool3d" : "avgpool3d");
}

static torc_tensor *poolnd_apply(const poolnd_state *s, const torc_tensor *x) {
  if (s->dims == 1)
    return s->max ? torc_max_pool1d(x, &s->p1) : torc_avg_pool1d(x, &s->p1);
  return s->max ? torc_max_pool3d(x, &s->p3) : torc_avg_pool3d(x, &s->p3);
}

static torc_tensor *poolnd_forward(torc_module *m,
                                   const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  const poolnd_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  int nd = torc_ndim(x), want = s->dims + 2;
  if (nd == want)
    return poolnd_apply(s, x);
  if (nd != want - 1) {
    char b[128];
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: expected a %d-D input %s (or one unbatched %s), got "
                   "shape %s",
                   poolnd_type(s->dims, s->max), want,
                   s->dims == 1 ? "[N, C, L]" : "[N, C, D, H, W]",
                   s->dims == 1 ? "[C, L]" : "[C, D, H, W]",
                   shape_of(x, b, sizeof b));
    return NULL;
  }
  int scope = torc_scope_begin();
  torc_tensor *y = poolnd_apply(s, torc_unsqueeze(x, 0));
  if (y)
    y = torc_scope_keep(torc_squeeze(y, 0));
  torc_scope_end(scope);
  return y;
}

/* n ints as PyTorch prints what it was given: one int when all are equal,
 * else a tuple; `tuple` forces the tuple ("(3,)"), as AvgPool1d does. */
static char *ints_str(char *buf, size_t size, const int64_t *v, int n,
                      int tuple) {
  int same = 1;
  for (int i = 1; i < n; i++)
    same &= v[i] == v[0];
  if (tuple && n == 1)
    snprintf(buf, size, "(%lld,)", (long long)v[0]);
  else if (same && !tuple)
    snprintf(buf, size, "%lld", (long long)v[0]);
  else
    snprintf(buf, size, "(%lld, %lld, %lld)", (long long)v[0],
             (long long)v[1], (long long)v[2]);
  return buf;
}

static int poolnd_describe(const torc_module *m, char *buf, size_t size) {
  const poolnd_state *s = torc_module_state(m);
  int n = s->dims, tuple = n == 1 && !s->max;
  int64_t k[3], st[3], pad[3], dil[3];
  if (n == 1) {
    k[0] = s->p1.kernel, st[0] = s->p1.stride, pad[0] = s->p1.padding;
    dil[0] = s->p1.dilation;
  } else {
    memcpy(k, s->p3.kernel, sizeof k);
    memcpy(st, s->p3.stride, sizeof st);
    memcpy(pad, s->p3.padding, sizeof pad);
    memcpy(dil, s->p3.dilation, sizeof dil);
  }
  char a[48], b[48], c[48], d[48];
  ints_str(a, sizeof a, k, n, tuple);
  ints_str(b, sizeof b, st, n, tuple);
  ints_str(c, sizeof c, pad, n, tuple);
  if (s->max)
    return snprintf(buf, size,
                    "kernel_size=%s, stride=%s, padding=%s, dilation=%s, "
                    "ceil_mode=%s",
                    a, b, c, ints_str(d, sizeof d, dil, n, 0),
                    torc__pybool(n == 1 ? s->p1.ceil_mode : 0));
  return snprintf(buf, size, "kernel_size=%s, stride=%s, padding=%s", a, b, c);
}

static const torc_module_vtable poolnd_vt = {
    sizeof(torc_module_vtable), poolnd_forward, torc__layer_destroy,
    poolnd_describe, NULL};

/* Checks one dim's geometry and fills its defaults. */
static int poolnd_dim(const char *t, int max, int64_t k, int64_t *stride,
                      int64_t pad, int64_t *dil) {
  if (k < 1 || *stride < 0 || pad < 0 || *dil < 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: kernel %lld, stride %lld, padding %lld, dilation "
                   "%lld; the kernel must be >= 1 and the others >= 0 (0 "
                   "takes the default)",
                   t, (long long)k, (long long)*stride, (long long)pad,
                   (long long)*dil);
    return 0;
  }
  if (*stride == 0)
    *stride = k;
  if (*dil == 0)
    *dil = 1;
  if (!max && *dil != 1) {
    torc_set_error(TORC_ERR_INVALID, "%s: dilation %lld is not supported; "
                   "average pooling has no dilation (leave it 1)", t,
                   (long long)*dil);
    return 0;
  }
  int64_t eff = *dil * (k - 1) + 1;
  if (pad > eff / 2) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: padding %lld is more than half the kernel size %lld; "
                   "use padding <= %lld",
                   t, (long long)pad, (long long)eff, (long long)(eff / 2));
    return 0;
  }
  return 1;
}

static torc_module *poolnd_new(int dims, int max, const torc_pool1d_params *p1,
                               const torc_pool3d_params *p3) {
  const char *t = poolnd_type(dims, max);
  if ((dims == 1 && p1 == NULL) || (dims == 3 && p3 == NULL)) {
    torc_set_error(TORC_ERR_INVALID, "%s: params are NULL; the kernel size "
                   "is required", t);
    return NULL;
  }
  poolnd_state tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.dims = dims;
  tmp.max = max;
  if (dims == 1) {
    tmp.p1 = *p1;
    if (!poolnd_dim(t, max, tmp.p1.kernel, &tmp.p1.stride, tmp.p1.padding,
                    &tmp.p1.dilation))
      return NULL;
  } else {
    tmp.p3 = *p3;
    if (tmp.p3.ceil_mode) {
      torc_set_error(TORC_ERR_UNSUPPORTED, "%s: ceil_mode is not supported "
                     "for 3-D pooling; leave it off (pad the input to round "
                     "the output up)", t);
      return NULL;
    }
    for (int i = 0; i < 3; i++)
      if (!poolnd_dim(t, max, tmp.p3.kernel[i], &tmp.p3.stride[i],
                      tmp.p3.padding[i], &tmp.p3.dilation[i]))
        return NULL;
  }
  poolnd_state *s = torc__malloc(sizeof *s);
  if (s)
    *s = tmp;
  return torc__layer_new(t, &poolnd_vt, s);
}

torc_module *torc_maxpool1d_new(const torc_pool1d_params *p) {
  return poolnd_new(1, 1, p, NULL);
}
torc_module *torc_avgpool1d_new(const torc_pool1d_params *p) {
  return poolnd_new(1, 0, p, NULL);
}
torc_module *torc_maxpool3d_new(const torc_pool3d_params *p) {
  return poolnd_new(3, 1, NULL, p);
}
torc_module *torc_avgpool3d_new(const torc_pool3d_params *p) {
  return poolnd_new(3, 0, NULL, p);
}

/* ---- nn.AdaptiveAvgPool2d ---- */

typedef struct adaptive_state {
  torc__layer_head head;
  int64_t out[2];
} adaptive_state;

static torc_tensor *adaptive_apply(torc_module *m, const torc_tensor *x) {
  const adaptive_state *s = torc_module_state(m);
  return torc_adaptive_avg_pool2d(x, s->out[0], s->out[1]);
}

static torc_tensor *adaptive_forward(torc_module *m,
                                     const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  if (!image_input(m, in[0]))
    return NULL;
  return torc__layer_image(m, in[0], adaptive_apply);
}

static int adaptive_describe(const torc_module *m, char *buf, size_t size) {
  const adaptive_state *s = torc_module_state(m);
  char o[48];
  return snprintf(buf, size, "output_size=%s",
                  torc__pair_str(o, sizeof o, s->out, 0));
}

static const torc_module_vtable adaptive_vt = {
    sizeof(torc_module_vtable), adaptive_forward, torc__layer_destroy,
    adaptive_describe, NULL};

torc_module *torc_adaptive_avgpool2d_new(int64_t out_h, int64_t out_w) {
  if (out_h < 1 || out_w < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "adaptive_avgpool2d: output size %lld x %lld; both must "
                   "be >= 1",
                   (long long)out_h, (long long)out_w);
    return NULL;
  }
  adaptive_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->out[0] = out_h;
    s->out[1] = out_w;
  }
  return torc__layer_new("adaptive_avgpool2d", &adaptive_vt, s);
}

/* ---- nn.Flatten, nn.Identity ---- */

typedef struct flatten_state {
  torc__layer_head head;
  int start, end;
} flatten_state;

static torc_tensor *flatten_forward(torc_module *m,
                                    const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  const flatten_state *s = torc_module_state(m);
  return torc_flatten(in[0], s->start, s->end);
}

static int flatten_describe(const torc_module *m, char *buf, size_t size) {
  const flatten_state *s = torc_module_state(m);
  return snprintf(buf, size, "start_dim=%d, end_dim=%d", s->start, s->end);
}

static const torc_module_vtable flatten_vt = {
    sizeof(torc_module_vtable), flatten_forward, torc__layer_destroy,
    flatten_describe, NULL};

torc_module *torc_flatten_new(int start_dim, int end_dim) {
  if (start_dim >= 0 && end_dim >= 0 && start_dim > end_dim) {
    torc_set_error(TORC_ERR_INVALID,
                   "flatten: start_dim %d comes after end_dim %d", start_dim,
                   end_dim);
    return NULL;
  }
  flatten_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->start = start_dim;
    s->end = end_dim;
  }
  return torc__layer_new("flatten", &flatten_vt, s);
}

static torc_tensor *identity_forward(torc_module *m,
                                     const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  return torc__ret(torc_retain((torc_tensor *)in[0]));
}

static int identity_describe(const torc_module *m, char *buf, size_t size) {
  (void)m;
  return snprintf(buf, size, "%s", "");
}

static const torc_module_vtable identity_vt = {
    sizeof(torc_module_vtable), identity_forward, torc__layer_destroy,
    identity_describe, NULL};

torc_module *torc_identity_new(void) {
  return torc__layer_new("identity", &identity_vt,
                         torc__calloc(1, sizeof(torc__layer_head)));
}

/* ---- activations ---- */

enum { A_RELU, A_LEAKY, A_ELU, A_GELU, A_SILU, A_SIGMOID, A_TANH,
       A_SOFTPLUS, A_SOFTMAX, A_LOG_SOFTMAX, A_HARDSWISH, A_HARDSIGMOID,
       A_SOFTSIGN, A_SELU, A_MISH, A_CELU, A_HARDTANH, A_RELU6, A_COUNT };

static const char *const act_names[A_COUNT] = {
    "relu", "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh",
    "softplus", "softmax", "log_softmax", "hardswish", "hardsigmoid",
    "softsign", "selu", "mish", "celu", "hardtanh", "relu6"};

typedef struct act_state {
  torc__layer_head head;
  int kind;
  double a, b;
  int dim, flags;
} act_state;

static torc_tensor *act_forward(torc_module *m, const torc_tensor *const *in,
                                int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  const act_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  switch (s->kind) {
  case A_RELU: return torc_relu(x);
  case A_LEAKY: return torc_leaky_relu(x, s->a);
  case A_ELU: return torc_elu(x, s->a);
  case A_GELU: return torc_gelu(x, s->flags);
  case A_SILU: return torc_silu(x);
  case A_SIGMOID: return torc_sigmoid(x);
  case A_TANH: return torc_tanh(x);
  case A_SOFTPLUS: return torc_softplus(x, s->a, s->b);
  case A_SOFTMAX: return torc_softmax(x, s->dim);
  case A_HARDSWISH: return torc_hardswish(x);
  case A_HARDSIGMOID: return torc_hardsigmoid(x);
  case A_SOFTSIGN: return torc_softsign(x);
  case A_SELU: return torc_selu(x);
  case A_MISH: return torc_mish(x);
  case A_CELU: return torc_celu(x, s->a);
  case A_HARDTANH: return torc_hardtanh(x, s->a, s->b);
  case A_RELU6: return torc_relu6(x);
  default: return torc_log_softmax(x, s->dim);
  }
}

/* PyTorch's extra_repr of ReLU, LeakyReLU, ELU, GELU, ... */
static int act_describe(const torc_module *m, char *buf, size_t size) {
  const act_state *s = torc_module_state(m);
  char a[40], b[40];
  switch (s->kind) {
  case A_LEAKY:
    return snprintf(buf, size, "negative_slope=%s",
                    torc__pyfloat(a, sizeof a, s->a));
  case A_ELU:
  case A_CELU:
    return snprintf(buf, size, "alpha=%s", torc__pyfloat(a, sizeof a, s->a));
  case A_HARDTANH:
    return snprintf(buf, size, "min_val=%s, max_val=%s",
                    torc__pyfloat(a, sizeof a, s->a),
                    torc__pyfloat(b, sizeof b, s->b));
  case A_GELU:
    return snprintf(buf, size, "approximate='%s'",
                    s->flags ? "tanh" : "none");
  case A_SOFTPLUS:
    return snprintf(buf, size, "beta=%s, threshold=%s",
                    torc__pyfloat(a, sizeof a, s->a),
                    torc__pyfloat(b, sizeof b, s->b));
  case A_SOFTMAX:
  case A_LOG_SOFTMAX:
    return snprintf(buf, size, "dim=%d", s->dim);
  default:
    return snprintf(buf, size, "%s", "");
  }
}

static const torc_module_vtable act_vt = {
    sizeof(torc_module_vtable), act_forward, torc__layer_destroy,
    act_describe, NULL};

int torc__layer_relu(const torc_module *m) {
  return torc__module_vtable(m) == &act_vt &&
         ((const act_state *)torc_module_state(m))->kind == A_RELU;
}

torc_module *torc__activation_new(const char *type, double a, double b,
                                  int dim, int flags) {
  int kind = 0;
  while (kind < A_COUNT && strcmp(act_names[kind], type) != 0)
    kind++;
  if (kind == A_COUNT) {
    torc_set_error(TORC_ERR_INVALID, "'%s' is not an activation", type);
    return NULL;
  }
  if (kind == A_SOFTPLUS && a == 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "softplus: beta is 0; it must not be 0 (PyTorch uses 1)");
    return NULL;
  }
  if (kind == A_CELU && !(a != 0)) {
    torc_set_error(TORC_ERR_INVALID,
                   "celu: alpha is %g; it must not be 0 (PyTorch uses 1)", a);
    return NULL;
  }
  if (kind == A_HARDTANH && !(a < b)) {
    torc_set_error(TORC_ERR_INVALID,
                   "hardtanh: min_val %g and max_val %g; min_val must be "
                   "below max_val (PyTorch uses -1 and 1)",
                   a, b);
    return NULL;
  }
  if (kind == A_GELU && flags != 0 && flags != 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "gelu: approximate is %d; use 0 (none, the erf form) or 1 "
                   "(tanh)",
                   flags);
    return NULL;
  }
  act_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->kind = kind;
    s->a = a;
    s->b = b;
    s->dim = dim;
    s->flags = flags;
  }
  return torc__layer_new(act_names[kind], &act_vt, s);
}
