/* core/ops_nn_nd.c — 1-D and 3-D convolution and pooling, composed of the
 * 2-D ops (so every backend that runs those runs these, and autograd
 * flows through them). A 1-D op runs as the 2-D one on a height of 1. A
 * 3-D op runs as 2-D ones over depth slices: for each kernel depth offset
 * the input's depth positions it reads are sliced out and folded into the
 * batch, the 2-D op runs on them, and the results are summed
 * (convolution, average pooling) or maxed (max pooling). */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "torc/indexing.h"
#include "torc/nn.h"
#include "torc/ops.h"

/* One pass over xp (already padded) for the kernel's depth: the 2-D op of
 * `kind` on each depth offset's slices, combined. */
static torc_tensor *depth_pass(const torc_tensor *xp, const torc_tensor *w,
                               int kind, const torc__window3d *g,
                               int64_t dout) {
  const int64_t *s = torc_shape(xp);
  int64_t nb = s[0], c = s[1];
  torc_conv2d_params cp;
  torc_pool2d_params pp;
  memset(&cp, 0, sizeof cp);
  memset(&pp, 0, sizeof pp);
  for (int i = 0; i < 2; i++) {
    cp.stride[i] = pp.stride[i] = g->s[1 + i];
    cp.dilation[i] = pp.dilation[i] = g->d[1 + i];
    pp.kernel[i] = g->k[1 + i];
  }
  cp.groups = g->groups;
  int perm[5] = {0, 2, 1, 3, 4};
  torc_tensor *acc = NULL;
  for (int64_t kd = 0; kd < g->k[0]; kd++) {
    int64_t at = kd * g->d[0];
    torc_tensor *xs =
        torc_slice(xp, 2, at, at + (dout - 1) * g->s[0] + 1, g->s[0]);
    int64_t s4[4] = {nb * dout, c, s[3], s[4]};
    xs = xs ? torc_reshape(torc_permute(xs, perm, 5), s4, 4) : NULL;
    torc_tensor *r = NULL;
    if (xs && kind == TORC__W3_CONV)
      r = torc_conv2d(xs, torc_select(w, 2, kd), NULL, &cp);
    else if (xs && kind == TORC__W3_MAX)
      r = torc_max_pool2d(xs, &pp);
    else if (xs) /* window sums: the average times the window's size */
      r = torc_mul_scalar(torc_avg_pool2d(xs, &pp),
                          (double)(g->k[1] * g->k[2]));
    if (r == NULL)
      return NULL;
    acc = acc == NULL ? r
          : kind == TORC__W3_MAX ? torc_maximum(acc, r)
                                 : torc_add(acc, r);
    if (acc == NULL)
      return NULL;
  }
  const int64_t *rs = torc_shape(acc);
  int64_t s5[5] = {nb, dout, rs[1], rs[2], rs[3]};
  return torc_contiguous(torc_permute(torc_reshape(acc, s5, 5), perm, 5));
}

static torc_tensor *window3d(const torc_tensor *x, const torc_tensor *w,
                             const torc_tensor *b, int kind,
                             const torc__window3d *g) {
  const int64_t *sp = torc_shape(x) + 2;
  int64_t span = g->d[0] * (g->k[0] - 1) + 1;
  int64_t dp = sp[0] + g->pb[0] + g->pe[0];
  if (span > dp) {
    torc_set_error(TORC_ERR_SHAPE,
                   "the dilated kernel depth %lld is larger than the padded "
                   "input depth %lld; use a smaller kernel or more padding",
                   (long long)span, (long long)dp);
    return NULL;
  }
  int64_t dout = (dp - span) / g->s[0] + 1;
  double fill = kind == TORC__W3_MAX ? -INFINITY : 0.0;
  int64_t pads[6] = {g->pb[2], g->pe[2], g->pb[1], g->pe[1], g->pb[0], g->pe[0]};
  torc_tensor *xp = torc_pad(x, pads, 6, TORC_PAD_CONSTANT, fill);
  torc_tensor *y = xp ? depth_pass(xp, w, kind, g, dout) : NULL;
  if (y && kind == TORC__W3_CONV && b) {
    int64_t bs[5] = {1, -1, 1, 1, 1};
    y = torc_add(y, torc_reshape(b, bs, 5));
  } else if (y && kind == TORC__W3_AVG && !g->exclude_pad) {
    y = torc_div_scalar(y, (double)(g->k[0] * g->k[1] * g->k[2]));
  } else if (y && kind == TORC__W3_AVG) {
    /* each window's count of real elements: the same sums over ones */
    int64_t one[5] = {1, 1, sp[0], sp[1], sp[2]};
    torc_tensor *ones =
        torc_full(one, 5, 1.0, torc_dtype_of(x), torc_device_of(x));
    torc_tensor *cnt =
        ones ? torc_pad(ones, pads, 6, TORC_PAD_CONSTANT, 0.0) : NULL;
    cnt = cnt ? depth_pass(cnt, NULL, kind, g, dout) : NULL;
    y = cnt ? torc_div(y, cnt) : NULL;
  }
  return y;
}

torc_tensor *torc__window3d_run(const torc_tensor *x, const torc_tensor *w,
                                const torc_tensor *b, int kind,
                                const torc__window3d *g) {
  int scope = torc_scope_begin();
  torc_tensor *y = torc_scope_keep(window3d(x, w, b, kind, g));
  torc_scope_end(scope);
  return y;
}

/* Checks x (and the weight) are 5-D and fills g's geometry: kernel, stride
 * (0: default), symmetric padding, dilation. */
static int check3d(const char *fn, int conv, const torc_tensor *x,
                   const torc_tensor *w, const int64_t *k, const int64_t *s, const int64_t *pad,
                   const int64_t *dil, int64_t sdef, torc__window3d *g) {
  char b1[128], b2[128];
  if (x == NULL || (conv && w == NULL)) {
    torc__null_input(fn);
    return 0;
  }
  if (torc_ndim(x) != 5 || (w && torc_ndim(w) != 5)) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: x has shape %s%s%s; x must be [N, C, D, H, W]%s",
                   fn, torc__shape_str(torc_shape(x), torc_ndim(x), b1, sizeof b1),
                   w ? " and the weight " : "",
                   w ? torc__shape_str(torc_shape(w), torc_ndim(w), b2, sizeof b2)
                     : "",
                   w ? " and the weight [O, C/groups, kD, kH, kW]" : "");
    return 0;
  }
  for (int i = 0; i < 3; i++) {
    g->k[i] = k[i];
    g->s[i] = s[i] ? s[i] : sdef ? sdef : k[i];
    g->d[i] = dil[i] ? dil[i] : 1;
    g->pb[i] = g->pe[i] = pad[i];
    if (k[i] < 1 || s[i] < 0 || pad[i] < 0 || dil[i] < 0) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: dim %d has kernel %lld, stride %lld, padding %lld, "
                     "dilation %lld; the kernel must be >= 1 and the others "
                     ">= 0 (0: the default)",
                     fn, i, (long long)k[i], (long long)s[i],
                     (long long)pad[i], (long long)dil[i]);
      return 0;
    }
  }
  return 1;
}

static torc_tensor *conv3d(const torc_tensor *x, const torc_tensor *weight,
                           const torc_tensor *bias,
                           const torc_conv3d_params *p);

torc_tensor *torc_conv3d(const torc_tensor *x, const torc_tensor *weight,
                         const torc_tensor *bias, const torc_conv3d_params *p) {
  TORC__AC_BEGIN(TORC_AUTOCAST_LOWER, &x, &weight, &bias);
  torc_tensor *r = conv3d(x, weight, bias, p);
  TORC__AC_END();
  return r;
}

/* torc_conv3d's work: its result is the caller's (through a scope or
 * torc__ret). */
static torc_tensor *conv3d(const torc_tensor *x, const torc_tensor *weight,
                           const torc_tensor *bias,
                           const torc_conv3d_params *p) {
  torc_conv3d_params q;
  memset(&q, 0, sizeof q);
  if (p)
    q = *p;
  torc__window3d g;
  memset(&g, 0, sizeof g);
  int64_t k[3] = {1, 1, 1};
  if (weight && torc_ndim(weight) == 5)
    memcpy(k, torc_shape(weight) + 2, sizeof k);
  if (!check3d("torc_conv3d", 1, x, weight, k, q.stride, q.padding, q.dilation,
               1, &g))
    return NULL;
  if (q.groups < 0) {
    torc_set_error(TORC_ERR_INVALID, "torc_conv3d: groups %lld is negative",
                   (long long)q.groups);
    return NULL;
  }
  g.groups = q.groups ? q.groups : 1;
  int64_t c = torc_size(x, 1), wc = torc_size(weight, 1);
  if (c != wc * g.groups) {
    char b1[128], b2[128];
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_conv3d: x %s has %lld channels but the weight %s "
                   "takes %lld (its dim 1 times groups %lld)",
                   torc__shape_str(torc_shape(x), 5, b1, sizeof b1),
                   (long long)c,
                   torc__shape_str(torc_shape(weight), 5, b2, sizeof b2),
                   (long long)(wc * g.groups), (long long)g.groups);
    return NULL;
  }
  return torc__window3d_run(x, weight, bias, TORC__W3_CONV, &g);
}

static torc_tensor *pool3d(const char *fn, const torc_tensor *x,
                           const torc_pool3d_params *p, int kind) {
  if (p == NULL) {
    torc_set_error(TORC_ERR_INVALID, "%s: params are NULL; the kernel size "
                   "is required", fn);
    return NULL;
  }
  torc__window3d g;
  memset(&g, 0, sizeof g);
  if (!check3d(fn, 0, x, NULL, p->kernel, p->stride, p->padding, p->dilation, 0,
               &g))
    return NULL;
  if (p->ceil_mode) {
    torc_set_error(TORC_ERR_UNSUPPORTED,
                   "%s: ceil_mode is not supported for 3-D pooling; leave it "
                   "0 (pad the input to round the output up)", fn);
    return NULL;
  }
  for (int i = 0; i < 3; i++) {
    if (kind == TORC__W3_AVG && g.d[i] != 1) {
      torc_set_error(TORC_ERR_INVALID, "%s: average pooling has no dilation "
                     "(dim %d has %lld); leave it 0 or 1", fn, i,
                     (long long)g.d[i]);
      return NULL;
    }
    int64_t eff = g.d[i] * (g.k[i] - 1) + 1;
    if (2 * g.pb[i] > eff) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: padding %lld at dim %d is more than half the "
                     "kernel size %lld; use padding <= %lld",
                     fn, (long long)g.pb[i], i, (long long)eff,
                     (long long)(eff / 2));
      return NULL;
    }
  }
  g.exclude_pad = p->exclude_pad;
  if (!torc_dtype_is_float(torc_dtype_of(x))) {
    torc_set_error(TORC_ERR_DTYPE, "%s: x is %s; pooling takes a floating "
                   "dtype (cast with torc_to_dtype)", fn,
                   torc_dtype_name(torc_dtype_of(x)));
    return NULL;
  }
  return torc__window3d_run(x, NULL, NULL, kind, &g);
}

torc_tensor *torc_max_pool3d(const torc_tensor *x,
                             const torc_pool3d_params *p) {
  return pool3d("torc_max_pool3d", x, p, TORC__W3_MAX);
}

torc_tensor *torc_avg_pool3d(const torc_tensor *x,
                             const torc_pool3d_params *p) {
  return pool3d("torc_avg_pool3d", x, p, TORC__W3_AVG);
}

/* ---- 1-D: the 2-D ops on a height of 1 ---- */

static int check1d(const char *fn, int conv, const torc_tensor *x,
                   const torc_tensor *w) {
  char b1[128], b2[128];
  if (x == NULL || (conv && w == NULL)) {
    torc__null_input(fn);
    return 0;
  }
  if (torc_ndim(x) != 3 || (w && torc_ndim(w) != 3)) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: x has shape %s%s%s; x must be [N, C, L]%s", fn,
                   torc__shape_str(torc_shape(x), torc_ndim(x), b1, sizeof b1),
                   w ? " and the weight " : "",
                   w ? torc__shape_str(torc_shape(w), torc_ndim(w), b2, sizeof b2)
                     : "",
                   w ? " and the weight [O, C/groups, k]" : "");
    return 0;
  }
  return 1;
}

torc_tensor *torc_conv1d(const torc_tensor *x, const torc_tensor *weight,
                         const torc_tensor *bias, const torc_conv1d_params *p) {
  if (!check1d("torc_conv1d", 1, x, weight))
    return NULL;
  torc_conv2d_params q;
  memset(&q, 0, sizeof q);
  if (p) {
    q.stride[0] = q.dilation[0] = 1;
    q.stride[1] = p->stride;
    q.padding[1] = p->padding;
    q.dilation[1] = p->dilation;
    q.groups = p->groups;
  }
  int scope = torc_scope_begin();
  torc_tensor *y = torc_conv2d(torc_unsqueeze(x, 2), torc_unsqueeze(weight, 2),
                               bias, &q);
  y = torc_scope_keep(y ? torc_squeeze(y, 2) : NULL);
  torc_scope_end(scope);
  return y;
}

static torc_tensor *pool1d(const char *fn, const torc_tensor *x,
                           const torc_pool1d_params *p, int max) {
  if (!check1d(fn, 0, x, NULL))
    return NULL;
  if (p == NULL) {
    torc_set_error(TORC_ERR_INVALID, "%s: params are NULL; the kernel size "
                   "is required", fn);
    return NULL;
  }
  torc_pool2d_params q;
  memset(&q, 0, sizeof q);
  q.kernel[0] = q.stride[0] = q.dilation[0] = 1;
  q.kernel[1] = p->kernel;
  q.stride[1] = p->stride;
  q.padding[1] = p->padding;
  q.dilation[1] = p->dilation;
  q.ceil_mode = p->ceil_mode;
  q.exclude_pad = p->exclude_pad;
  int scope = torc_scope_begin();
  torc_tensor *x4 = torc_unsqueeze(x, 2);
  torc_tensor *y = max ? torc_max_pool2d(x4, &q) : torc_avg_pool2d(x4, &q);
  y = torc_scope_keep(y ? torc_squeeze(y, 2) : NULL);
  torc_scope_end(scope);
  return y;
}

torc_tensor *torc_max_pool1d(const torc_tensor *x,
                             const torc_pool1d_params *p) {
  return pool1d("torc_max_pool1d", x, p, 1);
}

torc_tensor *torc_avg_pool1d(const torc_tensor *x,
                             const torc_pool1d_params *p) {
  return pool1d("torc_avg_pool1d", x, p, 0);
}
