/* core/layers_types.c — the built-in module types by name (what INI [layer]
 * sections and torc_module_build use): each layer's keys with their help
 * and defaults, and the parsing of their values into constructor calls.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "layers_internal.h"

/* ---- values ---- */

/* The value given for `key`, else its default in `keys`. */
static const char *get(const char *const *k, const char *const *v, int n,
                       const torc_module_key *keys, const char *key) {
  for (int i = 0; i < n; i++)
    if (strcmp(k[i], key) == 0)
      return v[i];
  for (const torc_module_key *d = keys; d->name; d++)
    if (strcmp(d->name, key) == 0)
      return d->default_value;
  return NULL;
}

static int missing(const char *type, const char *key) {
  torc_set_error(TORC_ERR_INVALID, "%s: key '%s' is required", type, key);
  return 0;
}

static int bad(const char *type, const char *key, const char *s,
               const char *accepted) {
  torc_set_error(TORC_ERR_INVALID, "%s: key '%s' = '%s' is not %s", type, key,
                 s, accepted);
  return 0;
}

/* Skips blanks. */
static const char *blank(const char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  return s;
}

/* One integer at *s (advancing it); 0 if there is none. */
static int scan_int(const char **s, int64_t *out) {
  const char *p = blank(*s);
  char *end;
  errno = 0;
  long long x = strtoll(p, &end, 10);
  if (end == p || errno)
    return 0;
  *out = x;
  *s = blank(end);
  return 1;
}

/* An integer >= min. */
static int p_int(const char *type, const char *key, const char *s,
                 int64_t min, int64_t *out) {
  char acc[64];
  snprintf(acc, sizeof acc, "an integer >= %lld", (long long)min);
  if (s == NULL)
    return missing(type, key);
  const char *p = s;
  if (!scan_int(&p, out) || *p || *out < min)
    return bad(type, key, s, acc);
  return 1;
}

/* Any integer (dims may be negative). */
static int p_dim(const char *type, const char *key, const char *s, int *out) {
  int64_t v = 0;
  const char *p = s;
  if (s == NULL)
    return missing(type, key);
  if (!scan_int(&p, &v) || *p || v < -TORC_MAX_DIMS || v >= TORC_MAX_DIMS)
    return bad(type, key, s, "a dim (an integer; negative counts from the "
                             "end)");
  *out = (int)v;
  return 1;
}

/* A number in [lo, hi]. */
static int p_num(const char *type, const char *key, const char *s, double lo,
                 double hi, const char *accepted, double *out) {
  if (s == NULL)
    return missing(type, key);
  char *end;
  errno = 0;
  double x = strtod(blank(s), &end);
  if (end == blank(s) || *blank(end) || errno || !(x >= lo && x <= hi))
    return bad(type, key, s, accepted);
  *out = x;
  return 1;
}

static int p_bool(const char *type, const char *key, const char *s,
                  int *out) {
  static const char *const yes[] = {"yes", "true", "on", "1"};
  static const char *const no[] = {"no", "false", "off", "0"};
  if (s == NULL)
    return missing(type, key);
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, yes[i]) == 0)
      return *out = 1;
    if (strcasecmp(s, no[i]) == 0) {
      *out = 0;
      return 1;
    }
  }
  return bad(type, key, s, "yes or no (true/false, on/off, 1/0 also work)");
}

/* "3" (both 3) or "3,5" (height 3, width 5), each >= min. */
static int p_pair(const char *type, const char *key, const char *s,
                  int64_t min, int64_t out[2]) {
  char acc[96];
  snprintf(acc, sizeof acc,
           "one integer >= %lld or two separated by a comma (height,width)",
           (long long)min);
  if (s == NULL)
    return missing(type, key);
  const char *p = s;
  if (!scan_int(&p, &out[0]))
    return bad(type, key, s, acc);
  out[1] = out[0];
  if (*p == ',' || *p == 'x') {
    p++;
    if (!scan_int(&p, &out[1]))
      return bad(type, key, s, acc);
  }
  if (*p || out[0] < min || out[1] < min)
    return bad(type, key, s, acc);
  return 1;
}

/* One integer >= min for all three dims, or three separated by commas
 * (depth,height,width). */
static int p_triple(const char *type, const char *key, const char *s,
                    int64_t min, int64_t out[3]) {
  char acc[112];
  snprintf(acc, sizeof acc,
           "one integer >= %lld or three separated by commas "
           "(depth,height,width)",
           (long long)min);
  if (s == NULL)
    return missing(type, key);
  const char *p = s;
  if (!scan_int(&p, &out[0]))
    return bad(type, key, s, acc);
  out[1] = out[2] = out[0];
  if (*p == ',') {
    p++;
    if (!scan_int(&p, &out[1]) || *p != ',')
      return bad(type, key, s, acc);
    p++;
    if (!scan_int(&p, &out[2]))
      return bad(type, key, s, acc);
  }
  if (*p || out[0] < min || out[1] < min || out[2] < min)
    return bad(type, key, s, acc);
  return 1;
}

/* ---- create functions ---- */

#define GET(name) get(k, v, n, keys, name)

static const torc_module_key linear_keys[] = {
    {"in_features", "input features, >= 1; 0 = infer from the first input",
     "0"},
    {"out_features", "output features, >= 1", NULL},
    {"bias", "learn an additive bias: yes or no", "yes"},
    {NULL, NULL, NULL}};

static torc_module *create_linear(const char *const *k,
                                  const char *const *v, int n, void *user) {
  (void)user;
  const torc_module_key *keys = linear_keys;
  int64_t in = 0, out = 0;
  int bias = 1;
  if (!p_int("linear", "in_features", GET("in_features"), 0, &in) ||
      !p_int("linear", "out_features", GET("out_features"), 1, &out) ||
      !p_bool("linear", "bias", GET("bias"), &bias))
    return NULL;
  return torc_linear_new(in, out, bias);
}

#define CONV_KEYS                                                              \
  {"in_channels", "input channels, >= 1; 0 = infer from the first input",     \
   "0"},                                                                       \
      {"out_channels", "output channels, >= 1", NULL},                         \
      {"kernel", "kernel size: k, or kh,kw", NULL},                            \
      {"stride", "stride: s, or sh,sw", "1"},                                  \
      {"padding", "zero padding on each side: p, or ph,pw", "0"},              \
      {"dilation", "spacing of the kernel elements: d, or dh,dw", "1"},        \
      {"groups", "blocked connections; must divide both channel counts", "1"}, \
      {"bias", "learn an additive bias: yes or no", "yes"}

static const torc_module_key conv_keys[] = {CONV_KEYS, {NULL, NULL, NULL}};
static const torc_module_key convt_keys[] = {
    CONV_KEYS,
    {"output_padding",
     "extra size on one side of the output: p, or ph,pw (smaller than the "
     "stride or the dilation)",
     "0"},
    {NULL, NULL, NULL}};

static torc_module *create_conv(const char *const *k, const char *const *v,
                                int n, void *user) {
  int transposed = user != NULL;
  const char *t = transposed ? "conv_transpose2d" : "conv2d";
  const torc_module_key *keys = transposed ? convt_keys : conv_keys;
  int64_t in = 0, out = 0, kern[2], op[2] = {0, 0};
  torc_conv2d_params p;
  memset(&p, 0, sizeof p);
  int bias = 1;
  if (!p_int(t, "in_channels", GET("in_channels"), 0, &in) ||
      !p_int(t, "out_channels", GET("out_channels"), 1, &out) ||
      !p_pair(t, "kernel", GET("kernel"), 1, kern) ||
      !p_pair(t, "stride", GET("stride"), 1, p.stride) ||
      !p_pair(t, "padding", GET("padding"), 0, p.padding) ||
      !p_pair(t, "dilation", GET("dilation"), 1, p.dilation) ||
      !p_int(t, "groups", GET("groups"), 1, &p.groups) ||
      !p_bool(t, "bias", GET("bias"), &bias) ||
      (transposed &&
       !p_pair(t, "output_padding", GET("output_padding"), 0, op)))
    return NULL;
  p.output_padding[0] = op[0];
  p.output_padding[1] = op[1];
  return transposed ? torc_conv_transpose2d_new(in, out, kern[0], kern[1], &p,
                                                bias)
                    : torc_conv2d_new(in, out, kern[0], kern[1], &p, bias);
}

static const torc_module_key conv1d_keys[] = {
    {"in_channels", "input channels, >= 1; 0 = infer from the first input",
     "0"},
    {"out_channels", "output channels, >= 1", NULL},
    {"kernel", "kernel size, >= 1", NULL},
    {"stride", "stride, >= 1", "1"},
    {"padding", "zero padding on each side", "0"},
    {"dilation", "spacing of the kernel elements, >= 1", "1"},
    {"groups", "blocked connections; must divide both channel counts", "1"},
    {"bias", "learn an additive bias: yes or no", "yes"},
    {NULL, NULL, NULL}};

static const torc_module_key conv3d_keys[] = {
    {"in_channels", "input channels, >= 1; 0 = infer from the first input",
     "0"},
    {"out_channels", "output channels, >= 1", NULL},
    {"kernel", "kernel size: k, or kd,kh,kw", NULL},
    {"stride", "stride: s, or sd,sh,sw", "1"},
    {"padding", "zero padding on each side: p, or pd,ph,pw", "0"},
    {"dilation", "spacing of the kernel elements: d, or dd,dh,dw", "1"},
    {"groups", "blocked connections; must divide both channel counts", "1"},
    {"bias", "learn an additive bias: yes or no", "yes"},
    {NULL, NULL, NULL}};

static torc_module *create_convnd(const char *const *k, const char *const *v,
                                  int n, void *user) {
  int dims = user ? 3 : 1;
  const char *t = dims == 1 ? "conv1d" : "conv3d";
  const torc_module_key *keys = dims == 1 ? conv1d_keys : conv3d_keys;
  int64_t in = 0, out = 0, groups = 1;
  int bias = 1;
  if (!p_int(t, "in_channels", GET("in_channels"), 0, &in) ||
      !p_int(t, "out_channels", GET("out_channels"), 1, &out) ||
      !p_int(t, "groups", GET("groups"), 1, &groups) ||
      !p_bool(t, "bias", GET("bias"), &bias))
    return NULL;
  if (dims == 1) {
    int64_t kern;
    torc_conv1d_params p = {0, 0, 0, groups};
    if (!p_int(t, "kernel", GET("kernel"), 1, &kern) ||
        !p_int(t, "stride", GET("stride"), 1, &p.stride) ||
        !p_int(t, "padding", GET("padding"), 0, &p.padding) ||
        !p_int(t, "dilation", GET("dilation"), 1, &p.dilation))
      return NULL;
    return torc_conv1d_new(in, out, kern, &p, bias);
  }
  int64_t kern[3];
  torc_conv3d_params p;
  memset(&p, 0, sizeof p);
  p.groups = groups;
  if (!p_triple(t, "kernel", GET("kernel"), 1, kern) ||
      !p_triple(t, "stride", GET("stride"), 1, p.stride) ||
      !p_triple(t, "padding", GET("padding"), 0, p.padding) ||
      !p_triple(t, "dilation", GET("dilation"), 1, p.dilation))
    return NULL;
  return torc_conv3d_new(in, out, kern, &p, bias);
}

static const torc_module_key maxpool1d_keys[] = {
    {"kernel", "window size, >= 1", NULL},
    {"stride", "stride; 0 = the kernel size", "0"},
    {"padding", "implicit -inf padding (at most half the kernel)", "0"},
    {"dilation", "spacing of the window elements, >= 1", "1"},
    {"ceil_mode", "round the output size up: yes or no", "no"},
    {NULL, NULL, NULL}};
static const torc_module_key avgpool1d_keys[] = {
    {"kernel", "window size, >= 1", NULL},
    {"stride", "stride; 0 = the kernel size", "0"},
    {"padding", "implicit zero padding (at most half the kernel)", "0"},
    {"ceil_mode", "round the output size up: yes or no", "no"},
    {"count_include_pad", "count the padding in the average: yes or no",
     "yes"},
    {NULL, NULL, NULL}};
static const torc_module_key maxpool3d_keys[] = {
    {"kernel", "window size: k, or kd,kh,kw", NULL},
    {"stride", "stride: s, or sd,sh,sw; 0 = the kernel size", "0"},
    {"padding", "implicit -inf padding: p, or pd,ph,pw (at most half the "
                "kernel)", "0"},
    {"dilation", "spacing of the window elements: d, or dd,dh,dw", "1"},
    {NULL, NULL, NULL}};
static const torc_module_key avgpool3d_keys[] = {
    {"kernel", "window size: k, or kd,kh,kw", NULL},
    {"stride", "stride: s, or sd,sh,sw; 0 = the kernel size", "0"},
    {"padding", "implicit zero padding: p, or pd,ph,pw (at most half the "
                "kernel)", "0"},
    {"count_include_pad", "count the padding in the average: yes or no",
     "yes"},
    {NULL, NULL, NULL}};

/* user: "m1", "a1", "m3", "a3" (max or average, 1-D or 3-D). */
static torc_module *create_poolnd(const char *const *k, const char *const *v,
                                  int n, void *user) {
  const char *u = user;
  int max = u[0] == 'm', dims = u[1] - '0';
  const char *t = dims == 1 ? (max ? "maxpool1d" : "avgpool1d")
                            : (max ? "maxpool3d" : "avgpool3d");
  const torc_module_key *keys = dims == 1
                                    ? (max ? maxpool1d_keys : avgpool1d_keys)
                                    : (max ? maxpool3d_keys : avgpool3d_keys);
  int incl = 1, ceil = 0;
  if (!max && !p_bool(t, "count_include_pad", GET("count_include_pad"), &incl))
    return NULL;
  if (dims == 1) {
    torc_pool1d_params p;
    memset(&p, 0, sizeof p);
    if (!p_int(t, "kernel", GET("kernel"), 1, &p.kernel) ||
        !p_int(t, "stride", GET("stride"), 0, &p.stride) ||
        !p_int(t, "padding", GET("padding"), 0, &p.padding) ||
        (max && !p_int(t, "dilation", GET("dilation"), 1, &p.dilation)) ||
        !p_bool(t, "ceil_mode", GET("ceil_mode"), &ceil))
      return NULL;
    p.ceil_mode = ceil;
    p.exclude_pad = !incl;
    return max ? torc_maxpool1d_new(&p) : torc_avgpool1d_new(&p);
  }
  torc_pool3d_params p;
  memset(&p, 0, sizeof p);
  if (!p_triple(t, "kernel", GET("kernel"), 1, p.kernel) ||
      !p_triple(t, "stride", GET("stride"), 0, p.stride) ||
      !p_triple(t, "padding", GET("padding"), 0, p.padding) ||
      (max && !p_triple(t, "dilation", GET("dilation"), 1, p.dilation)))
    return NULL;
  p.exclude_pad = !incl;
  return max ? torc_maxpool3d_new(&p) : torc_avgpool3d_new(&p);
}

static const torc_module_key bn_keys[] = {
    {"num_features", "channels, >= 1; 0 = infer from the first input", "0"},
    {"eps", "added to the variance, >= 0", "1e-5"},
    {"momentum", "weight of the new batch in the running statistics, 0 to 1",
     "0.1"},
    {NULL, NULL, NULL}};

static torc_module *create_bn(const char *const *k, const char *const *v,
                              int n, void *user) {
  const char *t = user ? "batchnorm2d" : "batchnorm1d";
  const torc_module_key *keys = bn_keys;
  int64_t c = 0;
  double eps = 0, mom = 0;
  if (!p_int(t, "num_features", GET("num_features"), 0, &c) ||
      !p_num(t, "eps", GET("eps"), 0, INFINITY, "a number >= 0", &eps) ||
      !p_num(t, "momentum", GET("momentum"), 0, 1, "a number from 0 to 1",
             &mom))
    return NULL;
  return user ? torc_batchnorm2d_new(c, eps, mom)
              : torc_batchnorm1d_new(c, eps, mom);
}

static const torc_module_key ln_keys[] = {
    {"normalized_shape",
     "sizes of the last dims to normalise over: d, or d1,d2,...; 0 = the "
     "last dim of the first input",
     "0"},
    {"eps", "added to the variance, >= 0", "1e-5"},
    {"elementwise_affine", "learn a per-element weight and bias: yes or no",
     "yes"},
    {NULL, NULL, NULL}};

static torc_module *create_ln(const char *const *k, const char *const *v,
                              int n, void *user) {
  (void)user;
  const torc_module_key *keys = ln_keys;
  const char *acc = "0, or sizes >= 1 separated by commas (e.g. 128 or 8,128)";
  const char *s = GET("normalized_shape");
  int64_t shape[TORC_MAX_DIMS];
  int nd = 0, affine = 1;
  double eps = 0;
  if (s == NULL)
    return missing("layernorm", "normalized_shape"), NULL;
  const char *p = s;
  for (;;) {
    if (nd == TORC_MAX_DIMS || !scan_int(&p, &shape[nd]))
      return bad("layernorm", "normalized_shape", s, acc), NULL;
    nd++;
    if (*p != ',')
      break;
    p++;
  }
  if (*p)
    return bad("layernorm", "normalized_shape", s, acc), NULL;
  if (nd == 1 && shape[0] == 0)
    nd = 0;
  for (int i = 0; i < nd; i++)
    if (shape[i] < 1)
      return bad("layernorm", "normalized_shape", s, acc), NULL;
  if (!p_num("layernorm", "eps", GET("eps"), 0, INFINITY, "a number >= 0",
             &eps) ||
      !p_bool("layernorm", "elementwise_affine", GET("elementwise_affine"),
              &affine))
    return NULL;
  return torc_layernorm_new(shape, nd, eps, affine);
}

static const torc_module_key gn_keys[] = {
    {"groups", "number of channel groups, >= 1; must divide the channels",
     NULL},
    {"num_channels", "channels, >= 1; 0 = infer from the first input", "0"},
    {"eps", "added to the variance, >= 0", "1e-5"},
    {"affine", "learn a per-channel weight and bias: yes or no", "yes"},
    {NULL, NULL, NULL}};

static torc_module *create_gn(const char *const *k, const char *const *v,
                              int n, void *user) {
  (void)user;
  const torc_module_key *keys = gn_keys;
  int64_t g = 0, c = 0;
  double eps = 0;
  int affine = 1;
  if (!p_int("groupnorm", "groups", GET("groups"), 1, &g) ||
      !p_int("groupnorm", "num_channels", GET("num_channels"), 0, &c) ||
      !p_num("groupnorm", "eps", GET("eps"), 0, INFINITY, "a number >= 0",
             &eps) ||
      !p_bool("groupnorm", "affine", GET("affine"), &affine))
    return NULL;
  return torc_groupnorm_new(g, c, eps, affine);
}

static const torc_module_key dropout_keys[] = {
    {"p", "probability of zeroing an element while training, 0 to 1", "0.5"},
    {NULL, NULL, NULL}};

static torc_module *create_dropout(const char *const *k,
                                   const char *const *v, int n, void *user) {
  (void)user;
  const torc_module_key *keys = dropout_keys;
  double p = 0;
  if (!p_num("dropout", "p", GET("p"), 0, 1, "a number from 0 to 1", &p))
    return NULL;
  return torc_dropout_new(p);
}

static const torc_module_key embedding_keys[] = {
    {"num_embeddings", "size of the dictionary (indices 0 .. n-1), >= 1",
     NULL},
    {"embedding_dim", "size of each embedding vector, >= 1", NULL},
    {"padding_idx", "the index whose row starts zero and gets no gradient "
                    "(negative counts from the end); empty = none", ""},
    {NULL, NULL, NULL}};

static torc_module *create_embedding(const char *const *k,
                                     const char *const *v, int n,
                                     void *user) {
  (void)user;
  const torc_module_key *keys = embedding_keys;
  int64_t num = 0, dim = 0;
  if (!p_int("embedding", "num_embeddings", GET("num_embeddings"), 1, &num) ||
      !p_int("embedding", "embedding_dim", GET("embedding_dim"), 1, &dim))
    return NULL;
  const char *pad = GET("padding_idx");
  if (pad == NULL || *blank(pad) == '\0')
    return torc_embedding_new(num, dim);
  int64_t idx = 0;
  const char *p = pad;
  if (!scan_int(&p, &idx) || *p)
    return bad("embedding", "padding_idx", pad,
               "an integer (negative counts from the end) or empty"),
           NULL;
  return torc_embedding_padded_new(num, dim, idx);
}

static const torc_module_key maxpool_keys[] = {
    {"kernel", "window size: k, or kh,kw", NULL},
    {"stride", "stride: s, or sh,sw; 0 = the kernel size", "0"},
    {"padding", "implicit -inf padding: p, or ph,pw (at most half the "
                "kernel)", "0"},
    {"dilation", "spacing of the window elements: d, or dh,dw", "1"},
    {"ceil_mode", "round the output size up: yes or no", "no"},
    {NULL, NULL, NULL}};

static const torc_module_key avgpool_keys[] = {
    {"kernel", "window size: k, or kh,kw", NULL},
    {"stride", "stride: s, or sh,sw; 0 = the kernel size", "0"},
    {"padding", "implicit zero padding: p, or ph,pw (at most half the "
                "kernel)", "0"},
    {"ceil_mode", "round the output size up: yes or no", "no"},
    {"count_include_pad", "count the padding in the average: yes or no",
     "yes"},
    {"divisor_override", "divide by this instead of the window size; 0 = off",
     "0"},
    {NULL, NULL, NULL}};

static torc_module *create_pool(const char *const *k, const char *const *v,
                                int n, void *user) {
  int max = user != NULL;
  const char *t = max ? "maxpool2d" : "avgpool2d";
  const torc_module_key *keys = max ? maxpool_keys : avgpool_keys;
  torc_pool2d_params p;
  memset(&p, 0, sizeof p);
  int ceil = 0, incl = 1;
  if (!p_pair(t, "kernel", GET("kernel"), 1, p.kernel) ||
      !p_pair(t, "stride", GET("stride"), 0, p.stride) ||
      !p_pair(t, "padding", GET("padding"), 0, p.padding) ||
      (max && !p_pair(t, "dilation", GET("dilation"), 1, p.dilation)) ||
      !p_bool(t, "ceil_mode", GET("ceil_mode"), &ceil) ||
      (!max &&
       (!p_bool(t, "count_include_pad", GET("count_include_pad"), &incl) ||
        !p_int(t, "divisor_override", GET("divisor_override"), 0,
               &p.divisor_override))))
    return NULL;
  p.ceil_mode = ceil;
  p.exclude_pad = !incl;
  return max ? torc_maxpool2d_new(&p) : torc_avgpool2d_new(&p);
}

static const torc_module_key adaptive_keys[] = {
    {"output_size", "output height and width: s, or h,w", "1"},
    {NULL, NULL, NULL}};

static torc_module *create_adaptive(const char *const *k,
                                    const char *const *v, int n, void *user) {
  (void)user;
  const torc_module_key *keys = adaptive_keys;
  int64_t o[2];
  if (!p_pair("adaptive_avgpool2d", "output_size", GET("output_size"), 1, o))
    return NULL;
  return torc_adaptive_avgpool2d_new(o[0], o[1]);
}

static const torc_module_key flatten_keys[] = {
    {"start_dim", "first dim to flatten (negative counts from the end)", "1"},
    {"end_dim", "last dim to flatten (negative counts from the end)", "-1"},
    {NULL, NULL, NULL}};

static torc_module *create_flatten(const char *const *k,
                                   const char *const *v, int n, void *user) {
  (void)user;
  const torc_module_key *keys = flatten_keys;
  int s = 0, e = 0;
  if (!p_dim("flatten", "start_dim", GET("start_dim"), &s) ||
      !p_dim("flatten", "end_dim", GET("end_dim"), &e))
    return NULL;
  return torc_flatten_new(s, e);
}

static const torc_module_key no_keys[] = {{NULL, NULL, NULL}};

static torc_module *create_identity(const char *const *k,
                                    const char *const *v, int n, void *user) {
  (void)k, (void)v, (void)n, (void)user;
  return torc_identity_new();
}

/* ---- activations ---- */

static const torc_module_key prelu_keys[] = {
    {"num_parameters", "number of slopes: 1, or the input's channels (dim 1)",
     "1"},
    {"init", "the initial value of every slope", "0.25"},
    {NULL, NULL, NULL}};

static torc_module *create_prelu(const char *const *k, const char *const *v,
                                 int n, void *user) {
  (void)user;
  const torc_module_key *keys = prelu_keys;
  int64_t num = 1;
  double init = 0.25;
  if (!p_int("prelu", "num_parameters", GET("num_parameters"), 1, &num) ||
      !p_num("prelu", "init", GET("init"), -INFINITY, INFINITY, "a number",
             &init))
    return NULL;
  return torc_prelu_new(num, init);
}

static const torc_module_key leaky_keys[] = {
    {"negative_slope", "slope for x < 0", "0.01"}, {NULL, NULL, NULL}};
static const torc_module_key elu_keys[] = {
    {"alpha", "value approached for x -> -inf: alpha (e^x - 1)", "1.0"},
    {NULL, NULL, NULL}};
static const torc_module_key celu_keys[] = {
    {"alpha", "alpha (e^(x / alpha) - 1) for x <= 0; not 0", "1.0"},
    {NULL, NULL, NULL}};
static const torc_module_key hardtanh_keys[] = {
    {"min_val", "the lower bound, below max_val", "-1.0"},
    {"max_val", "the upper bound", "1.0"},
    {NULL, NULL, NULL}};
static const torc_module_key gelu_keys[] = {
    {"approximate", "none (the exact erf form) or tanh", "none"},
    {NULL, NULL, NULL}};
static const torc_module_key softplus_keys[] = {
    {"beta", "log(1 + e^(beta x)) / beta; not 0", "1"},
    {"threshold", "above beta x > threshold the output is x", "20"},
    {NULL, NULL, NULL}};
static const torc_module_key softmax_keys[] = {
    {"dim", "the dim the outputs sum to 1 along (-1 = the last)", "-1"},
    {NULL, NULL, NULL}};

static torc_module *create_activation(const char *const *k,
                                      const char *const *v, int n,
                                      void *user) {
  const char *t = user;
  const torc_module_key *keys = no_keys;
  double a = 0, b = 0;
  int dim = 0, flags = 0;
  const double inf = INFINITY;
  if (strcmp(t, "leaky_relu") == 0) {
    keys = leaky_keys;
    if (!p_num(t, "negative_slope", GET("negative_slope"), -inf, inf,
               "a number", &a))
      return NULL;
  } else if (strcmp(t, "elu") == 0) {
    keys = elu_keys;
    if (!p_num(t, "alpha", GET("alpha"), -inf, inf, "a number", &a))
      return NULL;
  } else if (strcmp(t, "celu") == 0) {
    keys = celu_keys;
    if (!p_num(t, "alpha", GET("alpha"), -inf, inf, "a number other than 0",
               &a))
      return NULL;
    if (a == 0)
      return bad(t, "alpha", GET("alpha"), "a number other than 0"), NULL;
  } else if (strcmp(t, "hardtanh") == 0) {
    keys = hardtanh_keys;
    if (!p_num(t, "min_val", GET("min_val"), -inf, inf, "a number", &a) ||
        !p_num(t, "max_val", GET("max_val"), -inf, inf,
               "a number above min_val", &b))
      return NULL;
    if (!(a < b))
      return bad(t, "max_val", GET("max_val"), "a number above min_val"),
             NULL;
  } else if (strcmp(t, "gelu") == 0) {
    keys = gelu_keys;
    const char *s = GET("approximate");
    if (s && strcmp(s, "tanh") == 0)
      flags = 1;
    else if (s == NULL || strcmp(s, "none") != 0)
      return bad(t, "approximate", s ? s : "", "none or tanh"), NULL;
  } else if (strcmp(t, "softplus") == 0) {
    keys = softplus_keys;
    if (!p_num(t, "beta", GET("beta"), -inf, inf, "a number other than 0",
               &a) ||
        !p_num(t, "threshold", GET("threshold"), -inf, inf, "a number", &b))
      return NULL;
    if (a == 0)
      return bad(t, "beta", GET("beta"), "a number other than 0"), NULL;
  } else if (strcmp(t, "softmax") == 0 || strcmp(t, "log_softmax") == 0) {
    keys = softmax_keys;
    if (!p_dim(t, "dim", GET("dim"), &dim))
      return NULL;
  }
  return torc__activation_new(t, a, b, dim, flags);
}

/* ---- recurrent layers ---- */

#define RNN_KEYS                                                               \
  {"input_size", "features per step, >= 1; 0 = infer from the first input",   \
   "0"},                                                                       \
      {"hidden_size", "features of the hidden state, >= 1", NULL},             \
      {"num_layers", "stacked layers, >= 1", "1"},                             \
      {"bias", "learn bias_ih and bias_hh: yes or no", "yes"},                 \
      {"batch_first", "input and output [N, L, F] (yes) or [L, N, F] (no)",    \
       "no"},                                                                  \
      {"dropout", "dropout between layers while training, 0 to 1", "0"},      \
      {"bidirectional", "also run the sequence backwards: yes or no", "no"}

static const torc_module_key lstm_keys[] = {RNN_KEYS, {NULL, NULL, NULL}};
static const torc_module_key rnn_keys[] = {
    RNN_KEYS,
    {"nonlinearity", "the cell's activation: tanh or relu", "tanh"},
    {NULL, NULL, NULL}};

/* user: "lstm", "gru" or "rnn". */
static torc_module *create_rnn(const char *const *k, const char *const *v,
                               int n, void *user) {
  const char *t = user;
  const torc_module_key *keys = strcmp(t, "rnn") == 0 ? rnn_keys : lstm_keys;
  torc_rnn_options o = torc_rnn_options_default(0);
  int64_t layers = 1;
  if (!p_int(t, "input_size", GET("input_size"), 0, &o.input_size) ||
      !p_int(t, "hidden_size", GET("hidden_size"), 1, &o.hidden_size) ||
      !p_int(t, "num_layers", GET("num_layers"), 1, &layers) ||
      !p_bool(t, "bias", GET("bias"), &o.bias) ||
      !p_bool(t, "batch_first", GET("batch_first"), &o.batch_first) ||
      !p_num(t, "dropout", GET("dropout"), 0, 1, "a number from 0 to 1",
             &o.dropout) ||
      !p_bool(t, "bidirectional", GET("bidirectional"), &o.bidirectional))
    return NULL;
  if (layers > 1000000) {
    bad(t, "num_layers", GET("num_layers"), "an integer from 1 to 1000000");
    return NULL;
  }
  o.num_layers = (int)layers;
  if (t[0] == 'l')
    return torc_lstm_new(&o);
  if (t[0] == 'g')
    return torc_gru_new(&o);
  o.nonlinearity = GET("nonlinearity");
  if (strcmp(o.nonlinearity, "tanh") != 0 &&
      strcmp(o.nonlinearity, "relu") != 0) {
    bad(t, "nonlinearity", o.nonlinearity, "tanh or relu");
    return NULL;
  }
  return torc_rnn_new(&o);
}

static torc_module *create_last_step(const char *const *k,
                                     const char *const *v, int n,
                                     void *user) {
  (void)k, (void)v, (void)n, (void)user;
  return torc_last_step_new();
}

/* ---- attention and transformer layers ---- */

/* An optional size: empty is 0 (the default), else an integer >= 1. */
static int p_opt_size(const char *type, const char *key, const char *s,
                      int64_t *out) {
  if (s == NULL || *blank(s) == '\0') {
    *out = 0;
    return 1;
  }
  const char *p = s;
  if (!scan_int(&p, out) || *p || *out < 1)
    return bad(type, key, s, "an integer >= 1, or empty for embed_dim");
  return 1;
}

static const torc_module_key mha_keys[] = {
    {"embed_dim", "the query's features and the output's, >= 1", NULL},
    {"num_heads", "attention heads, dividing embed_dim", NULL},
    {"dropout", "dropout on the attention weights while training, 0 to <1",
     "0"},
    {"bias", "learn in_proj_bias and out_proj.bias: yes or no", "yes"},
    {"kdim", "the key's features; empty = embed_dim", ""},
    {"vdim", "the value's features; empty = embed_dim", ""},
    {"batch_first", "input and output [N, L, E] (yes) or [L, N, E] (no)",
     "no"},
    {"causal", "query i sees keys j <= i only: yes or no", "no"},
    {NULL, NULL, NULL}};

static torc_module *create_mha(const char *const *k, const char *const *v,
                               int n, void *user) {
  (void)user;
  const torc_module_key *keys = mha_keys;
  const char *t = "multihead_attention";
  int64_t e = 0, h = 0;
  if (!p_int(t, "embed_dim", GET("embed_dim"), 1, &e) ||
      !p_int(t, "num_heads", GET("num_heads"), 1, &h))
    return NULL;
  torc_mha_options o = torc_mha_options_default(e, h);
  if (!p_num(t, "dropout", GET("dropout"), 0, 1, "a number from 0 to 1",
             &o.dropout) ||
      !p_bool(t, "bias", GET("bias"), &o.bias) ||
      !p_opt_size(t, "kdim", GET("kdim"), &o.kdim) ||
      !p_opt_size(t, "vdim", GET("vdim"), &o.vdim) ||
      !p_bool(t, "batch_first", GET("batch_first"), &o.batch_first) ||
      !p_bool(t, "causal", GET("causal"), &o.causal))
    return NULL;
  return torc_multihead_attention_new(&o);
}

static const torc_module_key tfm_keys[] = {
    {"d_model", "the features of the sequence, >= 1", NULL},
    {"nhead", "attention heads, dividing d_model", NULL},
    {"dim_feedforward", "the feed-forward's hidden size, >= 1", "2048"},
    {"dropout", "every dropout of the layer while training, 0 to <1", "0.1"},
    {"activation", "the feed-forward's activation: relu or gelu", "relu"},
    {"layer_norm_eps", "the layer norms' eps, > 0", "1e-5"},
    {"batch_first", "input and output [N, L, d_model] (yes) or "
                    "[L, N, d_model] (no)", "no"},
    {"norm_first", "pre-norm (yes) or post-norm (no)", "no"},
    {"bias", "the linears and attention learn biases: yes or no", "yes"},
    {"causal", "causal self-attention (a GPT block): yes or no", "no"},
    {NULL, NULL, NULL}};

/* user: "e" (encoder) or "d" (decoder). */
static torc_module *create_tfm(const char *const *k, const char *const *v,
                               int n, void *user) {
  const torc_module_key *keys = tfm_keys;
  int dec = ((const char *)user)[0] == 'd';
  const char *t =
      dec ? "transformer_decoder_layer" : "transformer_encoder_layer";
  int64_t d = 0, h = 0;
  if (!p_int(t, "d_model", GET("d_model"), 1, &d) ||
      !p_int(t, "nhead", GET("nhead"), 1, &h))
    return NULL;
  torc_transformer_layer_options o =
      torc_transformer_layer_options_default(d, h);
  if (!p_int(t, "dim_feedforward", GET("dim_feedforward"), 1,
             &o.dim_feedforward) ||
      !p_num(t, "dropout", GET("dropout"), 0, 1, "a number from 0 to 1",
             &o.dropout) ||
      !p_num(t, "layer_norm_eps", GET("layer_norm_eps"), 1e-300, 1,
             "a number from 1e-300 to 1", &o.layer_norm_eps) ||
      !p_bool(t, "batch_first", GET("batch_first"), &o.batch_first) ||
      !p_bool(t, "norm_first", GET("norm_first"), &o.norm_first) ||
      !p_bool(t, "bias", GET("bias"), &o.bias) ||
      !p_bool(t, "causal", GET("causal"), &o.causal))
    return NULL;
  o.activation = GET("activation");
  if (strcmp(o.activation, "relu") != 0 && strcmp(o.activation, "gelu") != 0)
    return bad(t, "activation", o.activation, "relu or gelu"), NULL;
  return dec ? torc_transformer_decoder_layer_new(&o)
             : torc_transformer_encoder_layer_new(&o);
}

static const torc_module_key pos_keys[] = {
    {"kind", "learned (a trained table) or sinusoidal (a fixed one)",
     "learned"},
    {"max_len", "the most positions a sequence may have, >= 1", NULL},
    {"d_model", "the features of the sequence, >= 1", NULL},
    {"dropout", "dropout after the addition while training, 0 to <1", "0"},
    {NULL, NULL, NULL}};

static torc_module *create_pos(const char *const *k, const char *const *v,
                               int n, void *user) {
  (void)user;
  const torc_module_key *keys = pos_keys;
  const char *t = "positional_embedding";
  int64_t len = 0, d = 0;
  double p = 0;
  const char *kind = GET("kind");
  if (strcmp(kind, "learned") != 0 && strcmp(kind, "sinusoidal") != 0)
    return bad(t, "kind", kind, "learned or sinusoidal"), NULL;
  if (!p_int(t, "max_len", GET("max_len"), 1, &len) ||
      !p_int(t, "d_model", GET("d_model"), 1, &d) ||
      !p_num(t, "dropout", GET("dropout"), 0, 1, "a number from 0 to 1", &p))
    return NULL;
  return torc_positional_embedding_new(kind, len, d, p);
}

/* ---- the table ---- */

#define TYPE(name, desc, keys, create, user)                                   \
  static const torc_module_type type_##name = {                                \
      sizeof(torc_module_type), #name, desc, keys, create, (void *)(user)}

TYPE(linear, "fully connected layer y = x W^T + b (nn.Linear)", linear_keys,
     create_linear, NULL);
TYPE(conv2d, "2-D convolution over [N, C, H, W] (nn.Conv2d)", conv_keys,
     create_conv, NULL);
TYPE(conv_transpose2d, "2-D transposed convolution (nn.ConvTranspose2d)",
     convt_keys, create_conv, 1);
TYPE(conv1d, "1-D convolution over [N, C, L] (nn.Conv1d)", conv1d_keys,
     create_convnd, NULL);
TYPE(conv3d, "3-D convolution over [N, C, D, H, W] (nn.Conv3d)", conv3d_keys,
     create_convnd, 1);
TYPE(maxpool1d, "1-D max pooling (nn.MaxPool1d)", maxpool1d_keys,
     create_poolnd, "m1");
TYPE(avgpool1d, "1-D average pooling (nn.AvgPool1d)", avgpool1d_keys,
     create_poolnd, "a1");
TYPE(maxpool3d, "3-D max pooling (nn.MaxPool3d)", maxpool3d_keys,
     create_poolnd, "m3");
TYPE(avgpool3d, "3-D average pooling (nn.AvgPool3d)", avgpool3d_keys,
     create_poolnd, "a3");
TYPE(batchnorm1d, "batch normalisation of [N, C] or [N, C, L] "
     "(nn.BatchNorm1d)", bn_keys, create_bn, NULL);
TYPE(batchnorm2d, "batch normalisation of [N, C, H, W] (nn.BatchNorm2d)",
     bn_keys, create_bn, 1);
TYPE(layernorm, "layer normalisation over the last dims (nn.LayerNorm)",
     ln_keys, create_ln, NULL);
TYPE(groupnorm, "group normalisation over channel groups (nn.GroupNorm)",
     gn_keys, create_gn, NULL);
TYPE(dropout, "zeroes elements at random while training (nn.Dropout)",
     dropout_keys, create_dropout, NULL);
TYPE(embedding, "lookup table of learned vectors (nn.Embedding)",
     embedding_keys, create_embedding, NULL);
TYPE(maxpool2d, "2-D max pooling (nn.MaxPool2d)", maxpool_keys, create_pool,
     1);
TYPE(avgpool2d, "2-D average pooling (nn.AvgPool2d)", avgpool_keys,
     create_pool, NULL);
TYPE(adaptive_avgpool2d, "average pooling to a fixed output size "
     "(nn.AdaptiveAvgPool2d)", adaptive_keys, create_adaptive, NULL);
TYPE(flatten, "flattens a range of dims into one (nn.Flatten)", flatten_keys,
     create_flatten, NULL);
TYPE(identity, "passes its input through (nn.Identity)", no_keys,
     create_identity, NULL);
TYPE(relu, "max(x, 0) (nn.ReLU)", no_keys, create_activation, "relu");
TYPE(leaky_relu, "x, or negative_slope x for x < 0 (nn.LeakyReLU)",
     leaky_keys, create_activation, "leaky_relu");
TYPE(elu, "x, or alpha (e^x - 1) for x < 0 (nn.ELU)", elu_keys,
     create_activation, "elu");
TYPE(gelu, "x Phi(x) (nn.GELU)", gelu_keys, create_activation, "gelu");
TYPE(silu, "x sigmoid(x), also called swish (nn.SiLU)", no_keys,
     create_activation, "silu");
TYPE(sigmoid, "1 / (1 + e^-x) (nn.Sigmoid)", no_keys, create_activation,
     "sigmoid");
TYPE(tanh, "hyperbolic tangent (nn.Tanh)", no_keys, create_activation,
     "tanh");
TYPE(softplus, "log(1 + e^(beta x)) / beta (nn.Softplus)", softplus_keys,
     create_activation, "softplus");
TYPE(softmax, "e^x normalised to sum to 1 along dim (nn.Softmax)",
     softmax_keys, create_activation, "softmax");
TYPE(log_softmax, "log of softmax along dim (nn.LogSoftmax)", softmax_keys,
     create_activation, "log_softmax");
TYPE(celu, "x, or alpha (e^(x / alpha) - 1) for x <= 0 (nn.CELU)", celu_keys,
     create_activation, "celu");
TYPE(hardtanh, "x clamped to [min_val, max_val] (nn.Hardtanh)",
     hardtanh_keys, create_activation, "hardtanh");
TYPE(relu6, "min(max(x, 0), 6) (nn.ReLU6)", no_keys, create_activation,
     "relu6");
TYPE(prelu, "x, or a learned slope times x for x <= 0 (nn.PReLU)",
     prelu_keys, create_prelu, NULL);
TYPE(hardswish, "x relu6(x + 3) / 6 (nn.Hardswish)", no_keys,
     create_activation, "hardswish");
TYPE(hardsigmoid, "relu6(x + 3) / 6 (nn.Hardsigmoid)", no_keys,
     create_activation, "hardsigmoid");
TYPE(softsign, "x / (1 + |x|) (nn.Softsign)", no_keys, create_activation,
     "softsign");
TYPE(selu, "scale (x, or alpha (e^x - 1) for x < 0) (nn.SELU)", no_keys,
     create_activation, "selu");
TYPE(mish, "x tanh(softplus(x)) (nn.Mish)", no_keys, create_activation,
     "mish");
TYPE(lstm, "long short-term memory over a sequence (nn.LSTM)", lstm_keys,
     create_rnn, "lstm");
TYPE(gru, "gated recurrent unit over a sequence (nn.GRU)", lstm_keys,
     create_rnn, "gru");
TYPE(rnn, "Elman recurrent layer, tanh or relu (nn.RNN)", rnn_keys,
     create_rnn, "rnn");
TYPE(last_step, "the last time step of [N, L, F]: [N, F]", no_keys,
     create_last_step, NULL);
TYPE(multihead_attention, "attention of queries over keys and values, in "
     "heads (nn.MultiheadAttention)", mha_keys, create_mha, NULL);
TYPE(transformer_encoder_layer, "self-attention and a feed-forward, each "
     "with a residual and a layer norm (nn.TransformerEncoderLayer)",
     tfm_keys, create_tfm, "e");
TYPE(transformer_decoder_layer, "self-attention, attention over a memory "
     "and a feed-forward (nn.TransformerDecoderLayer)", tfm_keys, create_tfm,
     "d");
TYPE(positional_embedding, "adds each position's vector (learned or "
     "sinusoidal) to [N, L, d_model]", pos_keys, create_pos, NULL);

const torc_module_type *const torc__builtin_module_types[] = {
    &type_linear, &type_conv2d, &type_conv_transpose2d, &type_batchnorm1d,
    &type_batchnorm2d, &type_layernorm, &type_groupnorm, &type_dropout,
    &type_embedding, &type_maxpool2d, &type_avgpool2d,
    &type_adaptive_avgpool2d, &type_flatten, &type_identity, &type_relu,
    &type_leaky_relu, &type_elu, &type_gelu, &type_silu, &type_sigmoid,
    &type_tanh, &type_softplus, &type_softmax, &type_log_softmax,
    &type_hardswish, &type_hardsigmoid, &type_softsign, &type_selu,
    &type_mish, &type_prelu, &type_celu, &type_hardtanh, &type_relu6,
    &type_conv1d, &type_conv3d, &type_maxpool1d, &type_avgpool1d,
    &type_maxpool3d, &type_avgpool3d, &type_lstm, &type_gru, &type_rnn,
    &type_last_step, &type_multihead_attention,
    &type_transformer_encoder_layer, &type_transformer_decoder_layer,
    &type_positional_embedding, NULL};
