/* core/layers.c — the built-in layers with weights (nn.Linear, nn.Conv2d,
 * nn.ConvTranspose2d, nn.Embedding) and their reset slots, and the helpers
 * every layer file shares (parameter creation, lazy shapes, PyTorch's repr
 * formatting).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers_internal.h"

/* ---- shared helpers ---- */

torc_module *torc__layer_new(const char *type, const torc_module_vtable *vt,
                             void *state) {
  if (state == NULL) {
    torc_set_error(TORC_ERR_OOM, "%s: out of memory for the layer", type);
    return NULL;
  }
  torc_module *m = torc_module_new(type, vt, state);
  if (m == NULL) {
    torc__free(state);
    return NULL;
  }
  ((torc__layer_head *)state)->self = m;
  return m;
}

void torc__layer_destroy(torc_module *m) { torc__free(torc_module_state(m)); }

/* Creates a tensor in a scope of its own and registers it, so that the
 * module holds the only reference whether or not the caller has a scope
 * open. */
static torc_tensor *make_registered(torc_module *m, const char *name,
                                    const int64_t *shape, int nd,
                                    torc_dtype dtype, double value,
                                    int param) {
  int s = torc_scope_begin();
  torc_tensor *t =
      torc_full(shape, nd, value, dtype, torc_module_device(m));
  if (t && (param ? torc_module_register_parameter(m, name, t)
                  : torc_module_register_buffer(m, name, t, 1)))
    t = NULL;
  torc_scope_end(s);
  return t;
}

torc_tensor *torc__layer_param(torc_module *m, const char *name,
                               const int64_t *shape, int nd) {
  return make_registered(m, name, shape, nd, torc_module_dtype(m), 0, 1);
}

torc_tensor *torc__layer_buffer(torc_module *m, const char *name,
                                const int64_t *shape, int nd,
                                torc_dtype dtype, double value) {
  return make_registered(m, name, shape, nd, dtype, value, 0);
}

torc_tensor *torc__layer_one_input(const torc_module *m, int n_in) {
  torc_set_error(TORC_ERR_INVALID,
                 "%s: given %d inputs; this layer takes one (only add and "
                 "concat nodes take two)",
                 torc_module_type_name(m), n_in);
  return NULL;
}

torc_tensor *torc__layer_image(torc_module *m, const torc_tensor *x,
                               torc__image_fn f) {
  if (torc_ndim(x) == 4)
    return f(m, x);
  int s = torc_scope_begin();
  torc_tensor *y = f(m, torc_unsqueeze(x, 0));
  if (y)
    y = torc_scope_keep(torc_squeeze(y, 0));
  torc_scope_end(s);
  return y;
}

char *torc__pyfloat(char *buf, size_t size, double v) {
  if (isnan(v)) {
    snprintf(buf, size, "nan");
    return buf;
  }
  if (isinf(v)) {
    snprintf(buf, size, v < 0 ? "-inf" : "inf");
    return buf;
  }
  /* the fewest significant digits that read back as v */
  char e[40];
  int p = 1;
  for (; p < 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    if (strtod(e, NULL) == v)
      break;
  }
  snprintf(e, sizeof e, "%.*e", p - 1, v);
  int exp = atoi(strchr(e, 'e') + 1);
  if (exp < -4 || exp >= 16) { /* Python's repr switches to "1e-05" */
    snprintf(buf, size, "%s", e);
    return buf;
  }
  int dec = p - 1 - exp;
  snprintf(buf, size, "%.*f", dec > 0 ? dec : 0, v);
  if (strchr(buf, '.') == NULL) {
    size_t l = strlen(buf);
    if (l + 3 <= size)
      memcpy(buf + l, ".0", 3);
  }
  return buf;
}

char *torc__pair_str(char *buf, size_t size, const int64_t p[2], int tuple) {
  if (!tuple && p[0] == p[1])
    snprintf(buf, size, "%lld", (long long)p[0]);
  else
    snprintf(buf, size, "(%lld, %lld)", (long long)p[0], (long long)p[1]);
  return buf;
}

/* "[64, 3136]" for messages. */
static char *shape_of(const torc_tensor *x, char *buf, size_t size) {
  return torc__shape_str(torc_shape(x), torc_ndim(x), buf, size);
}

/* Initialises a freshly created (or existing) weight and bias by scheme
 * (and so is the reset slot of linear and the convolutions):
 * "default" is PyTorch's reset_parameters of Linear and the convolutions
 * (kaiming_uniform with a = sqrt(5), so U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * and the bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with the weight's fan_in);
 * the other schemes set the weight and zero the bias. Nothing to do while
 * the weight is lazy. */
static torc_status init_weight_bias(torc_module *m, const char *scheme,
                                    torc_generator *gen) {
  torc_tensor *w = torc_module_parameter(m, "weight");
  torc_tensor *b = torc_module_parameter(m, "bias");
  if (w == NULL)
    return TORC_OK;
  torc_status st;
  if (strcmp(scheme, "kaiming_uniform") == 0)
    st = torc_init_kaiming_uniform_(w, 0, "fan_in", "relu", gen);
  else if (strcmp(scheme, "kaiming_normal") == 0)
    st = torc_init_kaiming_normal_(w, 0, "fan_in", "relu", gen);
  else if (strcmp(scheme, "xavier_uniform") == 0)
    st = torc_init_xavier_uniform_(w, 1, gen);
  else if (strcmp(scheme, "xavier_normal") == 0)
    st = torc_init_xavier_normal_(w, 1, gen);
  else if (strcmp(scheme, "orthogonal") == 0)
    st = torc_init_orthogonal_(w, 1, gen);
  else { /* default */
    st = torc_init_kaiming_uniform_(w, sqrt(5.0), "fan_in", "leaky_relu",
                                    gen);
    if (st == TORC_OK && b) {
      int64_t fan_in = 0;
      torc_init_fans(w, &fan_in, NULL);
      double bound = fan_in > 0 ? 1 / sqrt((double)fan_in) : 0;
      st = torc_init_uniform_(b, -bound, bound, gen);
    }
    return st;
  }
  if (st == TORC_OK && b)
    st = torc_init_zeros_(b);
  return st;
}

/* Creates weight [shape] and (when `bias`) bias [n_bias], then applies the
 * module's init scheme; lazy layers call it at their first forward. */
static torc_status create_weight_bias(torc_module *m, const int64_t *shape,
                                      int nd, int bias, int64_t n_bias) {
  if (torc__layer_param(m, "weight", shape, nd) == NULL)
    return torc_last_status();
  if (bias && torc__layer_param(m, "bias", &n_bias, 1) == NULL)
    return torc_last_status();
  torc__module_set_lazy(m, 0);
  return init_weight_bias(m, torc__module_init_scheme(m), NULL);
}

/* ---- nn.Linear ---- */

typedef struct linear_state {
  torc__layer_head head;
  int64_t in, out; /* in 0 until inferred */
  int bias;
} linear_state;

static torc_tensor *linear_forward(torc_module *m,
                                   const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  linear_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  char b[128];
  if (torc_ndim(x) == 0) {
    torc_set_error(TORC_ERR_SHAPE,
                   "linear: the input is a scalar (shape []); it needs a "
                   "last dim holding the features");
    return NULL;
  }
  int64_t f = torc_size(x, -1);
  if (s->in == 0) {
    if (f == 0) {
      torc_set_error(TORC_ERR_SHAPE,
                     "linear: cannot infer in_features from an input with "
                     "no features (shape %s)",
                     shape_of(x, b, sizeof b));
      return NULL;
    }
    if (create_weight_bias(m, TORC_SHAPE(s->out, f), s->bias, s->out))
      return NULL;
    s->in = f;
  } else if (f != s->in) {
    torc_set_error(TORC_ERR_SHAPE,
                   "linear: input has %lld features (shape %s) but "
                   "in_features is %lld; set in_features to %lld, or to 0 to "
                   "infer it at the first forward",
                   (long long)f, shape_of(x, b, sizeof b), (long long)s->in,
                   (long long)f);
    return NULL;
  }
  return torc_linear(x, torc_module_parameter(m, "weight"),
                     torc_module_parameter(m, "bias"));
}

static int linear_describe(const torc_module *m, char *buf, size_t size) {
  const linear_state *s = torc_module_state(m);
  return snprintf(buf, size, "in_features=%lld, out_features=%lld, bias=%s",
                  (long long)s->in, (long long)s->out, torc__pybool(s->bias));
}

static const torc_module_vtable linear_vt = {
    sizeof(torc_module_vtable), linear_forward, torc__layer_destroy,
    linear_describe, init_weight_bias};

torc_module *torc_linear_new(int64_t in_features, int64_t out_features,
                             int bias) {
  if (in_features < 0 || out_features < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "linear: in_features %lld and out_features %lld; "
                   "out_features must be >= 1 and in_features >= 1 (or 0 to "
                   "infer it at the first forward)",
                   (long long)in_features, (long long)out_features);
    return NULL;
  }
  linear_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->in = in_features;
    s->out = out_features;
    s->bias = bias != 0;
  }
  torc_module *m = torc__layer_new("linear", &linear_vt, s);
  if (m == NULL)
    return NULL;
  if (in_features == 0)
    torc__module_set_lazy(m, 1);
  else if (create_weight_bias(m, TORC_SHAPE(out_features, in_features), bias,
                              out_features)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

/* ---- nn.Conv2d and nn.ConvTranspose2d ---- */

typedef struct conv_state {
  torc__layer_head head;
  int transposed;
  int64_t in, out, k[2]; /* in 0 until inferred */
  torc_conv2d_params p;  /* with PyTorch's defaults filled in */
  int bias;
} conv_state;

static const char *conv_type(const conv_state *s) {
  return s->transposed ? "conv_transpose2d" : "conv2d";
}

/* weight: conv [out, in/groups, kh, kw]; transposed [in, out/groups, kh,
 * kw]. */
static torc_status conv_create(torc_module *m, conv_state *s) {
  int64_t g = s->p.groups;
  int64_t shape[4] = {s->transposed ? s->in : s->out,
                      s->transposed ? s->out / g : s->in / g, s->k[0],
                      s->k[1]};
  return create_weight_bias(m, shape, 4, s->bias, s->out);
}

static torc_tensor *conv_apply(torc_module *m, const torc_tensor *x) {
  conv_state *s = torc_module_state(m);
  const torc_tensor *w = torc_module_parameter(m, "weight");
  const torc_tensor *b = torc_module_parameter(m, "bias");
  return s->transposed ? torc_conv_transpose2d(x, w, b, &s->p)
                       : torc_conv2d(x, w, b, &s->p);
}

static torc_tensor *conv_forward(torc_module *m, const torc_tensor *const *in,
                                 int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  conv_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  char b[128];
  int nd = torc_ndim(x);
  if (nd != 3 && nd != 4) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: expected a 4-D input [N, C, H, W] (or one unbatched "
                   "image [C, H, W]), got shape %s; reshape the input to "
                   "images (torc_reshape) before this layer",
                   conv_type(s), shape_of(x, b, sizeof b));
    return NULL;
  }
  int64_t c = torc_size(x, nd - 3);
  if (s->in == 0) {
    if (c == 0 || c % s->p.groups) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: input has %lld channels (shape %s), which groups "
                     "%lld does not divide; give an input with a multiple of "
                     "%lld channels or change groups",
                     conv_type(s), (long long)c, shape_of(x, b, sizeof b),
                     (long long)s->p.groups, (long long)s->p.groups);
      return NULL;
    }
    s->in = c;
    if (conv_create(m, s)) {
      s->in = 0;
      return NULL;
    }
  } else if (c != s->in) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: input has %lld channels (shape %s) but in_channels "
                   "is %lld; set in_channels to %lld, or to 0 to infer it at "
                   "the first forward",
                   conv_type(s), (long long)c, shape_of(x, b, sizeof b),
                   (long long)s->in, (long long)c);
    return NULL;
  }
  return torc__layer_image(m, x, conv_apply);
}

/* PyTorch's _ConvNd.extra_repr. */
static int conv_describe(const torc_module *m, char *buf, size_t size) {
  const conv_state *s = torc_module_state(m);
  char k[48], st[48], pad[48], dil[48], op[48], g[32];
  const torc_conv2d_params *p = &s->p;
  torc__pair_str(k, sizeof k, s->k, 1);
  torc__pair_str(st, sizeof st, p->stride, 1);
  pad[0] = dil[0] = op[0] = g[0] = '\0';
  if (p->padding[0] || p->padding[1]) {
    memcpy(pad, ", padding=", 11);
    torc__pair_str(pad + 10, sizeof pad - 10, p->padding, 1);
  }
  if (p->dilation[0] != 1 || p->dilation[1] != 1) {
    memcpy(dil, ", dilation=", 12);
    torc__pair_str(dil + 11, sizeof dil - 11, p->dilation, 1);
  }
  if (s->transposed && (p->output_padding[0] || p->output_padding[1])) {
    memcpy(op, ", output_padding=", 18);
    torc__pair_str(op + 17, sizeof op - 17, p->output_padding, 1);
  }
  if (p->groups != 1)
    snprintf(g, sizeof g, ", groups=%lld", (long long)p->groups);
  return snprintf(buf, size, "%lld, %lld, kernel_size=%s, stride=%s%s%s%s%s%s",
                  (long long)s->in, (long long)s->out, k, st, pad, dil, op, g,
                  s->bias ? "" : ", bias=False");
}

static const torc_module_vtable conv_vt = {
    sizeof(torc_module_vtable), conv_forward, torc__layer_destroy,
    conv_describe, init_weight_bias};
static const torc_module_vtable convt_vt = {
    sizeof(torc_module_vtable), conv_forward, torc__layer_destroy,
    conv_describe, init_weight_bias};

int torc__layer_linear(const torc_module *m) {
  return torc__module_vtable(m) == &linear_vt &&
         torc_module_parameter(m, "weight") != NULL;
}

int torc__layer_conv2d(const torc_module *m, torc_conv2d_params *p) {
  if (torc__module_vtable(m) != &conv_vt ||
      torc_module_parameter(m, "weight") == NULL)
    return 0;
  *p = ((const conv_state *)torc_module_state(m))->p;
  return 1;
}

/* Checks the arguments and fills PyTorch's defaults into s->p. */
static torc_status conv_check(conv_state *s, const torc_conv2d_params *p) {
  const char *t = conv_type(s);
  if (s->in < 0 || s->out < 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: in_channels %lld and out_channels %lld; "
                          "out_channels must be >= 1 and in_channels >= 1 "
                          "(or 0 to infer it at the first forward)",
                          t, (long long)s->in, (long long)s->out);
  if (s->k[0] < 1 || s->k[1] < 1)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: kernel size %lld x %lld; both must be >= 1",
                          t, (long long)s->k[0], (long long)s->k[1]);
  torc_conv2d_params q;
  memset(&q, 0, sizeof q);
  if (p)
    q = *p;
  struct {
    const char *name;
    int64_t *v;
    int64_t def;
  } f[] = {{"stride", q.stride, 1},
           {"padding", q.padding, 0},
           {"dilation", q.dilation, 1},
           {"output_padding", q.output_padding, 0}};
  for (int i = 0; i < 4; i++) {
    if (f[i].v[0] < 0 || f[i].v[1] < 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: %s (%lld, %lld) is negative; it must be >= "
                            "%d",
                            t, f[i].name, (long long)f[i].v[0],
                            (long long)f[i].v[1], f[i].def ? 1 : 0);
    for (int j = 0; j < 2; j++)
      if (f[i].v[j] == 0)
        f[i].v[j] = f[i].def;
  }
  if (q.groups < 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: groups %lld is negative; it must be >= 1", t,
                          (long long)q.groups);
  if (q.groups == 0)
    q.groups = 1;
  if (s->out % q.groups || s->in % q.groups)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: groups %lld must divide in_channels %lld and "
                          "out_channels %lld",
                          t, (long long)q.groups, (long long)s->in,
                          (long long)s->out);
  if (!s->transposed && (q.output_padding[0] || q.output_padding[1]))
    return torc_set_error(TORC_ERR_INVALID,
                          "conv2d: output_padding is for conv_transpose2d "
                          "only; leave it 0");
  for (int j = 0; j < 2; j++)
    if (q.output_padding[j] >= q.stride[j] &&
        q.output_padding[j] >= q.dilation[j])
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: output_padding (%lld, %lld) must be smaller "
                            "than the stride (%lld, %lld) or the dilation "
                            "(%lld, %lld)",
                            t, (long long)q.output_padding[0],
                            (long long)q.output_padding[1],
                            (long long)q.stride[0], (long long)q.stride[1],
                            (long long)q.dilation[0],
                            (long long)q.dilation[1]);
  s->p = q;
  return TORC_OK;
}

static torc_module *conv_new(int transposed, int64_t in, int64_t out,
                             int64_t kh, int64_t kw,
                             const torc_conv2d_params *p, int bias) {
  conv_state tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.transposed = transposed;
  tmp.in = in;
  tmp.out = out;
  tmp.k[0] = kh;
  tmp.k[1] = kw;
  tmp.bias = bias != 0;
  if (conv_check(&tmp, p))
    return NULL;
  conv_state *s = torc__malloc(sizeof *s);
  if (s)
    *s = tmp;
  torc_module *m = torc__layer_new(conv_type(&tmp),
                                   transposed ? &convt_vt : &conv_vt, s);
  if (m == NULL)
    return NULL;
  if (in == 0)
    torc__module_set_lazy(m, 1);
  else if (conv_create(m, s)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

torc_module *torc_conv2d_new(int64_t in_channels, int64_t out_channels,
                             int64_t kh, int64_t kw,
                             const torc_conv2d_params *p, int bias) {
  return conv_new(0, in_channels, out_channels, kh, kw, p, bias);
}

torc_module *torc_conv_transpose2d_new(int64_t in_channels,
                                       int64_t out_channels, int64_t kh,
                                       int64_t kw,
                                       const torc_conv2d_params *p,
                                       int bias) {
  return conv_new(1, in_channels, out_channels, kh, kw, p, bias);
}

/* ---- nn.Conv1d and nn.Conv3d ---- */

typedef struct convnd_state {
  torc__layer_head head;
  int dims; /* 1 or 3 */
  int64_t in, out; /* in 0 until inferred */
  int64_t k[3], stride[3], padding[3], dilation[3], groups;
  int bias;
} convnd_state;

static const char *convnd_type(const convnd_state *s) {
  return s->dims == 1 ? "conv1d" : "conv3d";
}

/* weight [out, in/groups, k...] */
static torc_status convnd_create(torc_module *m, convnd_state *s) {
  int64_t shape[5] = {s->out, s->in / s->groups, s->k[0], s->k[1], s->k[2]};
  return create_weight_bias(m, shape, 2 + s->dims, s->bias, s->out);
}

static torc_tensor *convnd_apply(torc_module *m, const torc_tensor *x) {
  const convnd_state *s = torc_module_state(m);
  const torc_tensor *w = torc_module_parameter(m, "weight");
  const torc_tensor *b = torc_module_parameter(m, "bias");
  if (s->dims == 1) {
    torc_conv1d_params p = {s->stride[0], s->padding[0], s->dilation[0],
                            s->groups};
    return torc_conv1d(x, w, b, &p);
  }
  torc_conv3d_params p;
  memset(&p, 0, sizeof p);
  for (int i = 0; i < 3; i++) {
    p.stride[i] = s->stride[i];
    p.padding[i] = s->padding[i];
    p.dilation[i] = s->dilation[i];
  }
  p.groups = s->groups;
  return torc_conv3d(x, w, b, &p);
}

static torc_tensor *convnd_forward(torc_module *m,
                                   const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  convnd_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  char b[128];
  int nd = torc_ndim(x), want = s->dims + 2;
  if (nd != want && nd != want - 1) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: expected a %d-D input %s (or one unbatched %s), got "
                   "shape %s; reshape the input before this layer",
                   convnd_type(s), want,
                   s->dims == 1 ? "[N, C, L]" : "[N, C, D, H, W]",
                   s->dims == 1 ? "[C, L]" : "[C, D, H, W]",
                   shape_of(x, b, sizeof b));
    return NULL;
  }
  int64_t c = torc_size(x, nd - s->dims - 1);
  if (s->in == 0) {
    if (c == 0 || c % s->groups) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: input has %lld channels (shape %s), which groups "
                     "%lld does not divide; give an input with a multiple of "
                     "%lld channels or change groups",
                     convnd_type(s), (long long)c, shape_of(x, b, sizeof b),
                     (long long)s->groups, (long long)s->groups);
      return NULL;
    }
    s->in = c;
    if (convnd_create(m, s)) {
      s->in = 0;
      return NULL;
    }
  } else if (c != s->in) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: input has %lld channels (shape %s) but in_channels "
                   "is %lld; set in_channels to %lld, or to 0 to infer it at "
                   "the first forward",
                   convnd_type(s), (long long)c, shape_of(x, b, sizeof b),
                   (long long)s->in, (long long)c);
    return NULL;
  }
  if (nd == want)
    return convnd_apply(m, x);
  int scope = torc_scope_begin();
  torc_tensor *y = convnd_apply(m, torc_unsqueeze(x, 0));
  if (y)
    y = torc_scope_keep(torc_squeeze(y, 0));
  torc_scope_end(scope);
  return y;
}

/* A Python tuple of n ints: "(3,)" or "(3, 3, 3)". */
static char *tuple_str(char *buf, size_t size, const int64_t *v, int n) {
  if (n == 1) {
    snprintf(buf, size, "(%lld,)", (long long)v[0]);
    return buf;
  }
  snprintf(buf, size, "(%lld, %lld, %lld)", (long long)v[0], (long long)v[1],
           (long long)v[2]);
  return buf;
}

static int any_not(const int64_t *v, int n, int64_t x) {
  for (int i = 0; i < n; i++)
    if (v[i] != x)
      return 1;
  return 0;
}

/* PyTorch's _ConvNd.extra_repr. */
static int convnd_describe(const torc_module *m, char *buf, size_t size) {
  const convnd_state *s = torc_module_state(m);
  int n = s->dims;
  char k[48], st[48], t[48], pad[64] = "", dil[64] = "", g[32] = "";
  if (any_not(s->padding, n, 0))
    snprintf(pad, sizeof pad, ", padding=%s",
             tuple_str(t, sizeof t, s->padding, n));
  if (any_not(s->dilation, n, 1))
    snprintf(dil, sizeof dil, ", dilation=%s",
             tuple_str(t, sizeof t, s->dilation, n));
  if (s->groups != 1)
    snprintf(g, sizeof g, ", groups=%lld", (long long)s->groups);
  return snprintf(buf, size, "%lld, %lld, kernel_size=%s, stride=%s%s%s%s%s",
                  (long long)s->in, (long long)s->out,
                  tuple_str(k, sizeof k, s->k, n),
                  tuple_str(st, sizeof st, s->stride, n), pad, dil, g,
                  s->bias ? "" : ", bias=False");
}

static const torc_module_vtable convnd_vt = {
    sizeof(torc_module_vtable), convnd_forward, torc__layer_destroy,
    convnd_describe, init_weight_bias};

static torc_module *convnd_new(convnd_state *tmp) {
  const char *t = convnd_type(tmp);
  int n = tmp->dims;
  if (tmp->in < 0 || tmp->out < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: in_channels %lld and out_channels %lld; "
                   "out_channels must be >= 1 and in_channels >= 1 (or 0 to "
                   "infer it at the first forward)",
                   t, (long long)tmp->in, (long long)tmp->out);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (tmp->k[i] < 1 || tmp->stride[i] < 0 || tmp->padding[i] < 0 ||
        tmp->dilation[i] < 0) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: kernel %lld, stride %lld, padding %lld, dilation "
                     "%lld (dim %d); the kernel must be >= 1, the others >= 0 "
                     "(0 takes the default)",
                     t, (long long)tmp->k[i], (long long)tmp->stride[i],
                     (long long)tmp->padding[i], (long long)tmp->dilation[i],
                     i);
      return NULL;
    }
    if (tmp->stride[i] == 0)
      tmp->stride[i] = 1;
    if (tmp->dilation[i] == 0)
      tmp->dilation[i] = 1;
  }
  if (tmp->groups < 0) {
    torc_set_error(TORC_ERR_INVALID, "%s: groups %lld is negative; it must be "
                   ">= 1", t, (long long)tmp->groups);
    return NULL;
  }
  if (tmp->groups == 0)
    tmp->groups = 1;
  if (tmp->out % tmp->groups || tmp->in % tmp->groups) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: groups %lld must divide in_channels %lld and "
                   "out_channels %lld",
                   t, (long long)tmp->groups, (long long)tmp->in,
                   (long long)tmp->out);
    return NULL;
  }
  convnd_state *s = torc__malloc(sizeof *s);
  if (s)
    *s = *tmp;
  torc_module *m = torc__layer_new(t, &convnd_vt, s);
  if (m == NULL)
    return NULL;
  if (tmp->in == 0)
    torc__module_set_lazy(m, 1);
  else if (convnd_create(m, s)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

torc_module *torc_conv1d_new(int64_t in_channels, int64_t out_channels,
                             int64_t kernel, const torc_conv1d_params *p,
                             int bias) {
  convnd_state tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.dims = 1;
  tmp.in = in_channels;
  tmp.out = out_channels;
  tmp.k[0] = kernel;
  tmp.k[1] = tmp.k[2] = 1;
  if (p) {
    tmp.stride[0] = p->stride;
    tmp.padding[0] = p->padding;
    tmp.dilation[0] = p->dilation;
    tmp.groups = p->groups;
  }
  tmp.bias = bias != 0;
  return convnd_new(&tmp);
}

torc_module *torc_conv3d_new(int64_t in_channels, int64_t out_channels,
                             const int64_t kernel[3],
                             const torc_conv3d_params *p, int bias) {
  if (kernel == NULL) {
    torc_set_error(TORC_ERR_INVALID, "conv3d: the kernel size is NULL; pass "
                   "three sizes {kD, kH, kW}");
    return NULL;
  }
  convnd_state tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.dims = 3;
  tmp.in = in_channels;
  tmp.out = out_channels;
  for (int i = 0; i < 3; i++) {
    tmp.k[i] = kernel[i];
    if (p) {
      tmp.stride[i] = p->stride[i];
      tmp.padding[i] = p->padding[i];
      tmp.dilation[i] = p->dilation[i];
    }
  }
  if (p)
    tmp.groups = p->groups;
  tmp.bias = bias != 0;
  return convnd_new(&tmp);
}

/* ---- nn.PReLU ---- */

typedef struct prelu_state {
  torc__layer_head head;
  int64_t num;
  double init;
} prelu_state;

static torc_tensor *prelu_forward(torc_module *m, const torc_tensor *const *in,
                                  int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  return torc_prelu(in[0], torc_module_parameter(m, "weight"));
}

static int prelu_describe(const torc_module *m, char *buf, size_t size) {
  const prelu_state *s = torc_module_state(m);
  return snprintf(buf, size, "num_parameters=%lld", (long long)s->num);
}

/* nn.PReLU's reset_parameters: every slope back to init. */
static torc_status prelu_reset(torc_module *m, const char *scheme,
                               torc_generator *gen) {
  (void)scheme, (void)gen;
  const prelu_state *s = torc_module_state(m);
  return torc_init_constant_(torc_module_parameter(m, "weight"), s->init);
}

static const torc_module_vtable prelu_vt = {
    sizeof(torc_module_vtable), prelu_forward, torc__layer_destroy,
    prelu_describe, prelu_reset};

torc_module *torc_prelu_new(int64_t num_parameters, double init) {
  if (num_parameters < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "prelu: num_parameters is %lld; it must be >= 1 (1, or "
                   "the input's channels)",
                   (long long)num_parameters);
    return NULL;
  }
  prelu_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->num = num_parameters;
    s->init = init;
  }
  torc_module *m = torc__layer_new("prelu", &prelu_vt, s);
  if (m == NULL)
    return NULL;
  torc_tensor *w = torc__layer_param(m, "weight", TORC_SHAPE(num_parameters));
  if (w == NULL || torc_init_constant_(w, init)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

/* ---- nn.Embedding ---- */

typedef struct embedding_state {
  torc__layer_head head;
  int64_t num, dim;
  int64_t pad; /* padding_idx, 0 .. num-1, or -1: none */
} embedding_state;

static torc_tensor *embedding_forward(torc_module *m,
                                      const torc_tensor *const *in, int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  embedding_state *s = torc_module_state(m);
  torc_tensor *y = torc_embedding(in[0], torc_module_parameter(m, "weight"));
  if (y == NULL || s->pad < 0)
    return y;
  /* the lookups of padding_idx pass no gradient to the weight (PyTorch's
   * embedding backward skips that row): they read a detached copy */
  torc_tensor *is_pad = torc_unsqueeze(
      torc_eq(in[0], torc_full(TORC_SHAPE(1), (double)s->pad,
                               torc_dtype_of(in[0]), torc_device_of(in[0]))),
      -1);
  return torc_where(is_pad, torc_detach(y), y);
}

static int embedding_describe(const torc_module *m, char *buf, size_t size) {
  const embedding_state *s = torc_module_state(m);
  if (s->pad >= 0)
    return snprintf(buf, size, "%lld, %lld, padding_idx=%lld",
                    (long long)s->num, (long long)s->dim, (long long)s->pad);
  return snprintf(buf, size, "%lld, %lld", (long long)s->num,
                  (long long)s->dim);
}

/* nn.Embedding's reset_parameters: N(0, 1), whatever the scheme, and the
 * padding_idx row zero. */
static torc_status embedding_reset(torc_module *m, const char *scheme,
                                   torc_generator *gen) {
  (void)scheme;
  embedding_state *s = torc_module_state(m);
  torc_tensor *w = torc_module_parameter(m, "weight");
  if (torc_init_normal_(w, 0, 1, gen))
    return torc_last_status();
  if (s->pad < 0)
    return TORC_OK;
  int scope = torc_scope_begin();
  torc_status st = torc_init_zeros_(torc_narrow(w, 0, s->pad, 1));
  torc_scope_end(scope);
  return st;
}

static const torc_module_vtable embedding_vt = {
    sizeof(torc_module_vtable), embedding_forward, torc__layer_destroy,
    embedding_describe, embedding_reset};

static torc_module *embedding_new(int64_t num_embeddings, int64_t dim,
                                  int has_pad, int64_t padding_idx) {
  if (num_embeddings < 1 || dim < 1) {
    torc_set_error(TORC_ERR_INVALID,
                   "embedding: num_embeddings %lld and embedding_dim %lld; "
                   "both must be >= 1",
                   (long long)num_embeddings, (long long)dim);
    return NULL;
  }
  if (has_pad &&
      (padding_idx < -num_embeddings || padding_idx >= num_embeddings)) {
    torc_set_error(TORC_ERR_INVALID,
                   "embedding: padding_idx %lld is outside the table of "
                   "num_embeddings %lld; it must be from %lld to %lld "
                   "(negative counts from the end)",
                   (long long)padding_idx, (long long)num_embeddings,
                   (long long)-num_embeddings, (long long)(num_embeddings - 1));
    return NULL;
  }
  embedding_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->num = num_embeddings;
    s->dim = dim;
    s->pad = !has_pad          ? -1
             : padding_idx < 0 ? padding_idx + num_embeddings
                               : padding_idx;
  }
  torc_module *m = torc__layer_new("embedding", &embedding_vt, s);
  if (m == NULL)
    return NULL;
  torc_tensor *w = torc__layer_param(m, "weight", TORC_SHAPE(num_embeddings,
                                                             dim));
  if (w == NULL || embedding_reset(m, "default", NULL)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

torc_module *torc_embedding_new(int64_t num_embeddings, int64_t dim) {
  return embedding_new(num_embeddings, dim, 0, 0);
}

torc_module *torc_embedding_padded_new(int64_t num_embeddings, int64_t dim,
                                       int64_t padding_idx) {
  return embedding_new(num_embeddings, dim, 1, padding_idx);
}
