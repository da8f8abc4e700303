/* core/layers_norm.c — the normalisation layers: nn.BatchNorm1d/2d (with
 * running statistics and num_batches_tracked), nn.LayerNorm and
 * nn.GroupNorm, each lazy when its feature count is 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers_internal.h"
#include "torc/dist.h"

static char *shape_of(const torc_tensor *x, char *buf, size_t size) {
  return torc__shape_str(torc_shape(x), torc_ndim(x), buf, size);
}

/* weight ones and bias zeros, when present. */
static torc_status affine_reset(torc_module *m) {
  torc_tensor *w = torc_module_parameter(m, "weight");
  torc_tensor *b = torc_module_parameter(m, "bias");
  torc_status st = w ? torc_init_ones_(w) : TORC_OK;
  if (st == TORC_OK && b)
    st = torc_init_zeros_(b);
  return st;
}

/* weight (ones) and bias (zeros) of `shape`. */
static torc_status affine_create(torc_module *m, const int64_t *shape,
                                 int nd) {
  if (torc__layer_param(m, "weight", shape, nd) == NULL ||
      torc__layer_param(m, "bias", shape, nd) == NULL)
    return torc_last_status();
  return affine_reset(m);
}

/* The reset slot of layer norm and group norm: ones and zeros, whatever
 * the scheme (PyTorch's reset_parameters). */
static torc_status norm_reset(torc_module *m, const char *scheme,
                              torc_generator *gen) {
  (void)scheme, (void)gen;
  return affine_reset(m);
}

/* ---- nn.BatchNorm1d / nn.BatchNorm2d ---- */

typedef struct bn_state {
  torc__layer_head head;
  int image; /* 0: batchnorm1d ([N, C] or [N, C, L]); 1: batchnorm2d */
  int64_t c; /* 0 until inferred */
  double eps, momentum;
  int sync; /* torc_module_sync_batchnorm: statistics over every rank */
} bn_state;

static const char *bn_type(const bn_state *s) {
  return s->image ? "batchnorm2d" : "batchnorm1d";
}

/* PyTorch's order: weight, bias, running_mean, running_var,
 * num_batches_tracked. */
static torc_status bn_create(torc_module *m, int64_t c) {
  if (affine_create(m, &c, 1) ||
      !torc__layer_buffer(m, "running_mean", &c, 1, torc_module_dtype(m),
                          0) ||
      !torc__layer_buffer(m, "running_var", &c, 1, torc_module_dtype(m), 1) ||
      !torc__layer_buffer(m, "num_batches_tracked", NULL, 0, TORC_I64, 0))
    return torc_last_status();
  torc__module_set_lazy(m, 0);
  return TORC_OK;
}

/* Training with statistics over every rank (PyTorch's SyncBatchNorm):
 * the per-channel sum, then the sum of squared deviations, each summed
 * across the ranks by an all-reduce that autograd follows, so the
 * gradient through the statistics is the whole world's. Computed in f32
 * (x cast up, y cast back); the running statistics take the global mean
 * and the unbiased global variance. */
static torc_tensor *bn_sync_forward(torc_module *m, const bn_state *s,
                                    const torc_tensor *x) {
  int nd = torc_ndim(x), dims[TORC_MAX_DIMS], nr = 0;
  int64_t c = torc_size(x, 1), view[TORC_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    if (d != 1)
      dims[nr++] = d;
    view[d] = d == 1 ? c : 1;
  }
  int scope = torc_scope_begin();
  torc_tensor *y = NULL;
  double n_all = (double)(torc_numel(x) / (c ? c : 1));
  torc_tensor *cnt = torc_full(NULL, 0, n_all, TORC_F64, TORC_CPU);
  const char *be = torc_dist_backend();
  if (cnt && be && strcmp(be, "mpi") != 0) /* the communicator's device */
    cnt = torc_to(cnt, torc_device_of(x));
  if (cnt == NULL || torc_dist_all_reduce(&cnt, 1, TORC_DIST_SUM) ||
      torc_item(cnt, &n_all))
    goto out;
  if (n_all < 2) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: synchronised batch norm over all ranks has %g "
                   "value(s) per channel; training needs more than one",
                   bn_type(s), n_all);
    goto out;
  }
  torc_tensor *xf = torc_dtype_of(x) == TORC_F32 ? (torc_tensor *)x
                                                  : torc_to_dtype(x, TORC_F32);
  torc_tensor *mean = xf ? torc_div_scalar(torc_dist_all_reduce_sum_grad(
                                               torc_sum(xf, dims, nr, 0)),
                                           n_all)
                         : NULL;
  torc_tensor *xc = mean ? torc_sub(xf, torc_reshape(mean, view, nd)) : NULL;
  torc_tensor *var =
      xc ? torc_div_scalar(torc_dist_all_reduce_sum_grad(
                               torc_sum(torc_mul(xc, xc), dims, nr, 0)),
                           n_all)
         : NULL;
  torc_tensor *rstd = var ? torc_rsqrt(torc_add_scalar(var, s->eps)) : NULL;
  torc_tensor *w = torc_module_parameter(m, "weight"),
              *b = torc_module_parameter(m, "bias");
  torc_tensor *yf = rstd ? torc_mul(xc, torc_reshape(rstd, view, nd)) : NULL;
  if (yf && w)
    yf = torc_mul(yf, torc_reshape(torc_to_dtype(w, TORC_F32), view, nd));
  if (yf && b)
    yf = torc_add(yf, torc_reshape(torc_to_dtype(b, TORC_F32), view, nd));
  if (yf == NULL)
    goto out;
  /* running = (1 - momentum) * running + momentum * batch, no grad */
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *rm = torc_module_buffer(m, "running_mean"),
              *rv = torc_module_buffer(m, "running_var");
  double mo = s->momentum;
  torc_status st = TORC_OK;
  if (rm)
    st = torc_copy_(rm, torc_add(torc_mul_scalar(rm, 1 - mo),
                                 torc_mul_scalar(torc_detach(mean), mo)));
  if (st == TORC_OK && rv)
    st = torc_copy_(rv, torc_add(torc_mul_scalar(rv, 1 - mo),
                                 torc_mul_scalar(torc_detach(var),
                                                 mo * n_all / (n_all - 1))));
  if (st == TORC_OK)
    st = torc_add_scalar_(torc_module_buffer(m, "num_batches_tracked"), 1);
  torc_set_grad_mode(gm);
  if (st == TORC_OK)
    y = torc_dtype_of(x) == TORC_F32 ? yf : torc_to_dtype(yf, torc_dtype_of(x));
  if (y)
    torc_scope_keep(y);
out:
  torc_scope_end(scope);
  return y;
}

torc_status torc_module_sync_batchnorm(torc_module *m, int on) {
  if (m == NULL)
    return torc__null_input("torc_module_sync_batchnorm");
  const char *t = torc_module_type_name(m);
  if (t && (strcmp(t, "batchnorm1d") == 0 || strcmp(t, "batchnorm2d") == 0))
    ((bn_state *)torc_module_state(m))->sync = on != 0;
  for (int i = 0; i < torc_module_child_count(m); i++) {
    torc_status st = torc_module_sync_batchnorm(torc_module_child_at(m, i), on);
    if (st)
      return st;
  }
  return TORC_OK;
}

static torc_tensor *bn_forward(torc_module *m, const torc_tensor *const *in,
                               int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  bn_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  char b[128];
  int nd = torc_ndim(x);
  if (s->image ? nd != 4 : nd != 2 && nd != 3) {
    torc_set_error(TORC_ERR_SHAPE,
                   s->image ? "batchnorm2d: expected a 4-D input [N, C, H, "
                              "W], got shape %s; use batchnorm1d for [N, C] "
                              "or [N, C, L]"
                            : "batchnorm1d: expected a 2-D [N, C] or 3-D [N, "
                              "C, L] input, got shape %s; use batchnorm2d "
                              "for images [N, C, H, W]",
                   shape_of(x, b, sizeof b));
    return NULL;
  }
  int64_t c = torc_size(x, 1);
  if (s->c == 0) {
    if (c == 0) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: cannot infer num_features from an input with no "
                     "channels (shape %s)",
                     bn_type(s), shape_of(x, b, sizeof b));
      return NULL;
    }
    if (bn_create(m, c))
      return NULL;
    s->c = c;
  } else if (c != s->c) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: input has %lld channels (shape %s) but num_features "
                   "is %lld; set num_features to %lld, or to 0 to infer it "
                   "at the first forward",
                   bn_type(s), (long long)c, shape_of(x, b, sizeof b),
                   (long long)s->c, (long long)c);
    return NULL;
  }
  int training = torc_module_is_training(m);
  if (s->sync && training && torc_dist_world_size() > 1)
    return bn_sync_forward(m, s, x);
  int scope = torc_scope_begin();
  torc_tensor *y = torc_batch_norm(
      x, torc_module_buffer(m, "running_mean"),
      torc_module_buffer(m, "running_var"), torc_module_parameter(m, "weight"),
      torc_module_parameter(m, "bias"), training, s->momentum, s->eps);
  if (y && training) { /* num_batches_tracked += 1, outside autograd */
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    if (torc_add_scalar_(torc_module_buffer(m, "num_batches_tracked"), 1))
      y = NULL;
    torc_set_grad_mode(gm);
  }
  if (y)
    torc_scope_keep(y);
  torc_scope_end(scope);
  return y;
}

static int bn_describe(const torc_module *m, char *buf, size_t size) {
  const bn_state *s = torc_module_state(m);
  char e[40], mo[40];
  return snprintf(buf, size,
                  "%lld, eps=%s, momentum=%s, affine=True, "
                  "track_running_stats=True",
                  (long long)s->c, torc__pyfloat(e, sizeof e, s->eps),
                  torc__pyfloat(mo, sizeof mo, s->momentum));
}

/* nn.BatchNorm's reset_parameters: ones and zeros, and the running
 * statistics too (any scheme). */
static torc_status bn_reset(torc_module *m, const char *scheme,
                            torc_generator *gen) {
  (void)scheme, (void)gen;
  torc_tensor *rm = torc_module_buffer(m, "running_mean");
  torc_tensor *rv = torc_module_buffer(m, "running_var");
  torc_tensor *nb = torc_module_buffer(m, "num_batches_tracked");
  torc_status st = affine_reset(m);
  if (st == TORC_OK && rm)
    st = torc_init_zeros_(rm);
  if (st == TORC_OK && rv)
    st = torc_init_ones_(rv);
  if (st == TORC_OK && nb) {
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    st = torc_zero_(nb);
    torc_set_grad_mode(gm);
  }
  return st;
}

static const torc_module_vtable bn1_vt = {
    sizeof(torc_module_vtable), bn_forward, torc__layer_destroy,
    bn_describe, bn_reset};
static const torc_module_vtable bn2_vt = {
    sizeof(torc_module_vtable), bn_forward, torc__layer_destroy,
    bn_describe, bn_reset};

static torc_module *bn_new(int image, int64_t c, double eps,
                           double momentum) {
  const char *t = image ? "batchnorm2d" : "batchnorm1d";
  if (c < 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: num_features %lld is negative; give the channel "
                   "count, or 0 to infer it at the first forward",
                   t, (long long)c);
    return NULL;
  }
  if (!(eps >= 0) || !(momentum >= 0 && momentum <= 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: eps %g and momentum %g; eps must be >= 0 (PyTorch "
                   "uses 1e-5) and momentum between 0 and 1 (PyTorch uses "
                   "0.1)",
                   t, eps, momentum);
    return NULL;
  }
  bn_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->image = image;
    s->c = c;
    s->eps = eps;
    s->momentum = momentum;
  }
  torc_module *m = torc__layer_new(t, image ? &bn2_vt : &bn1_vt, s);
  if (m == NULL)
    return NULL;
  if (c == 0)
    torc__module_set_lazy(m, 1);
  else if (bn_create(m, c)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

torc_module *torc_batchnorm1d_new(int64_t num_features, double eps,
                                  double momentum) {
  return bn_new(0, num_features, eps, momentum);
}

torc_module *torc_batchnorm2d_new(int64_t num_features, double eps,
                                  double momentum) {
  return bn_new(1, num_features, eps, momentum);
}

/* ---- nn.LayerNorm ---- */

typedef struct ln_state {
  torc__layer_head head;
  int n; /* 0 until inferred (the last dim of the first input) */
  int64_t shape[TORC_MAX_DIMS];
  double eps;
  int affine;
} ln_state;

/* "3,4", the value to write for normalized_shape. */
static void dims_csv(const int64_t *d, int n, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? "," : "",
                            (long long)d[i]);
}

static torc_tensor *ln_forward(torc_module *m, const torc_tensor *const *in,
                               int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  ln_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  const int64_t *xs = torc_shape(x);
  int nd = torc_ndim(x);
  char b[128], want[128], fix[128];
  if (s->n == 0) {
    if (nd == 0) {
      torc_set_error(TORC_ERR_SHAPE,
                     "layernorm: cannot infer normalized_shape from a scalar "
                     "input; give it a last dim");
      return NULL;
    }
    s->shape[0] = xs[nd - 1];
    s->n = 1;
    if (s->affine && affine_create(m, s->shape, 1)) {
      s->n = 0;
      return NULL;
    }
    torc__module_set_lazy(m, 0);
  }
  if (nd < s->n ||
      memcmp(xs + nd - s->n, s->shape, sizeof(int64_t) * (size_t)s->n)) {
    int k = nd < s->n ? nd : s->n;
    dims_csv(xs + nd - k, k, fix, sizeof fix);
    torc_set_error(TORC_ERR_SHAPE,
                   "layernorm: input of shape %s does not end with "
                   "normalized_shape %s; set normalized_shape to %s (its "
                   "last dims), or to 0 to infer the last dim at the first "
                   "forward",
                   shape_of(x, b, sizeof b),
                   torc__shape_str(s->shape, s->n, want, sizeof want),
                   k ? fix : "0");
    return NULL;
  }
  return torc_layer_norm(x, s->shape, s->n, torc_module_parameter(m, "weight"),
                         torc_module_parameter(m, "bias"), s->eps);
}

static int ln_describe(const torc_module *m, char *buf, size_t size) {
  const ln_state *s = torc_module_state(m);
  char d[160], e[40];
  size_t len = (size_t)snprintf(d, sizeof d, "(");
  for (int i = 0; i < s->n; i++)
    len += (size_t)snprintf(d + len, sizeof d - len, "%s%lld", i ? ", " : "",
                            (long long)s->shape[i]);
  snprintf(d + len, sizeof d - len, s->n == 1 ? ",)" : s->n ? ")" : "0,)");
  return snprintf(buf, size, "%s, eps=%s, elementwise_affine=%s", d,
                  torc__pyfloat(e, sizeof e, s->eps),
                  torc__pybool(s->affine));
}

static const torc_module_vtable ln_vt = {
    sizeof(torc_module_vtable), ln_forward, torc__layer_destroy,
    ln_describe, norm_reset};

torc_module *torc_layernorm_new(const int64_t *normalized_shape, int n,
                                double eps, int elementwise_affine) {
  if (n < 0 || n > TORC_MAX_DIMS || (n > 0 && normalized_shape == NULL)) {
    torc_set_error(TORC_ERR_INVALID,
                   "layernorm: normalized_shape has %d dims; give 1 to %d "
                   "sizes, or 0 dims to infer the last dim at the first "
                   "forward",
                   n, TORC_MAX_DIMS);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (normalized_shape[i] < 1) {
      torc_set_error(TORC_ERR_INVALID,
                     "layernorm: normalized_shape size %d is %lld; sizes "
                     "must be >= 1 (or give no sizes to infer the last dim)",
                     i, (long long)normalized_shape[i]);
      return NULL;
    }
  if (!(eps >= 0)) {
    torc_set_error(TORC_ERR_INVALID,
                   "layernorm: eps %g must be >= 0 (PyTorch uses 1e-5)", eps);
    return NULL;
  }
  ln_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->n = n;
    if (n)
      memcpy(s->shape, normalized_shape, sizeof(int64_t) * (size_t)n);
    s->eps = eps;
    s->affine = elementwise_affine != 0;
  }
  torc_module *m = torc__layer_new("layernorm", &ln_vt, s);
  if (m == NULL)
    return NULL;
  if (n == 0)
    torc__module_set_lazy(m, 1);
  else if (s->affine && affine_create(m, s->shape, n)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

/* ---- nn.GroupNorm ---- */

typedef struct gn_state {
  torc__layer_head head;
  int64_t groups, c; /* c 0 until inferred */
  double eps;
  int affine;
} gn_state;

static torc_tensor *gn_forward(torc_module *m, const torc_tensor *const *in,
                               int n_in) {
  if (n_in != 1)
    return torc__layer_one_input(m, n_in);
  gn_state *s = torc_module_state(m);
  const torc_tensor *x = in[0];
  char b[128];
  if (torc_ndim(x) < 2) {
    torc_set_error(TORC_ERR_SHAPE,
                   "groupnorm: expected an input [N, C, *], got shape %s",
                   shape_of(x, b, sizeof b));
    return NULL;
  }
  int64_t c = torc_size(x, 1);
  if (s->c == 0) {
    if (c == 0 || c % s->groups) {
      torc_set_error(TORC_ERR_SHAPE,
                     "groupnorm: input has %lld channels (shape %s), which "
                     "groups %lld does not divide; change groups to a "
                     "divisor of %lld",
                     (long long)c, shape_of(x, b, sizeof b),
                     (long long)s->groups, (long long)c);
      return NULL;
    }
    if (s->affine && affine_create(m, &c, 1))
      return NULL;
    s->c = c;
    torc__module_set_lazy(m, 0);
  } else if (c != s->c) {
    torc_set_error(TORC_ERR_SHAPE,
                   "groupnorm: input has %lld channels (shape %s) but "
                   "num_channels is %lld; set num_channels to %lld, or to 0 "
                   "to infer it at the first forward",
                   (long long)c, shape_of(x, b, sizeof b), (long long)s->c,
                   (long long)c);
    return NULL;
  }
  return torc_group_norm(x, s->groups, torc_module_parameter(m, "weight"),
                         torc_module_parameter(m, "bias"), s->eps);
}

static int gn_describe(const torc_module *m, char *buf, size_t size) {
  const gn_state *s = torc_module_state(m);
  char e[40];
  return snprintf(buf, size, "%lld, %lld, eps=%s, affine=%s",
                  (long long)s->groups, (long long)s->c,
                  torc__pyfloat(e, sizeof e, s->eps), torc__pybool(s->affine));
}

static const torc_module_vtable gn_vt = {
    sizeof(torc_module_vtable), gn_forward, torc__layer_destroy,
    gn_describe, norm_reset};

torc_module *torc_groupnorm_new(int64_t groups, int64_t num_channels,
                                double eps, int affine) {
  if (groups < 1 || num_channels < 0 ||
      (num_channels > 0 && num_channels % groups)) {
    torc_set_error(TORC_ERR_INVALID,
                   "groupnorm: groups %lld and num_channels %lld; groups "
                   "must be >= 1 and divide num_channels (0 infers it at the "
                   "first forward)",
                   (long long)groups, (long long)num_channels);
    return NULL;
  }
  if (!(eps >= 0)) {
    torc_set_error(TORC_ERR_INVALID,
                   "groupnorm: eps %g must be >= 0 (PyTorch uses 1e-5)", eps);
    return NULL;
  }
  gn_state *s = torc__calloc(1, sizeof *s);
  if (s) {
    s->groups = groups;
    s->c = num_channels;
    s->eps = eps;
    s->affine = affine != 0;
  }
  torc_module *m = torc__layer_new("groupnorm", &gn_vt, s);
  if (m == NULL)
    return NULL;
  if (num_channels == 0)
    torc__module_set_lazy(m, 1);
  else if (s->affine && affine_create(m, &num_channels, 1)) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}
