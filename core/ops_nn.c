/* core/ops_nn.c — the neural-network ops' shape logic and checks:
 * convolution, pooling, normalisation, dropout, embedding. Each op
 * resolves its parameters (PyTorch's defaults), checks its inputs with
 * messages that name the shapes involved, allocates the outputs, calls the
 * kernel and records the autograd node (derivatives_nn.c).
 */
#include <limits.h>
#include <stdio.h>

#include "nn_internal.h"

#define SHP(t, buf) torc__shape_str((t)->shape, (t)->ndim, buf, sizeof buf)

/* ---- shared checks ---- */

/* x must be floating with ndim in [lo, hi]; `what` names it. */
static torc_status check_input(const char *fn, const char *what,
                               const torc_tensor *x, int lo, int hi,
                               const char *layout) {
  char b[128];
  if (x->ndim < lo || x->ndim > hi)
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: %s must be %s, got shape %s (%d dims)%s", fn,
                          what, layout, SHP(x, b), x->ndim,
                          lo == 4 && x->ndim == 3
                              ? "; for one unbatched image add the batch "
                                "dim with torc_unsqueeze(x, 0)"
                              : "");
  if (!torc_dtype_is_float(x->dtype))
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: %s is %s; this op needs a floating dtype: "
                          "cast it with torc_to_dtype(t, TORC_F32)",
                          fn, what, torc_dtype_name(x->dtype));
  return TORC_OK;
}

/* A parameter tensor t (weight, bias, running stat) next to input x: same
 * dtype and device, and (when shape != NULL) the given shape. */
/* A parameter of x's op: its dtype x's, or f32 where `mixed` lets a
 * bf16 or f16 x take f32 parameters. */
static torc_status check_param_mixed(const char *fn, const char *what,
                                     const torc_tensor *t,
                                     const torc_tensor *x,
                                     const int64_t *shape, int ndim,
                                     const char *why, int mixed) {
  char b1[128], b2[128];
  int half = x->dtype == TORC_BF16 || x->dtype == TORC_F16;
  if (!torc_dtype_is_float(t->dtype) ||
      (t->dtype != x->dtype && !(mixed && half && t->dtype == TORC_F32)))
    return torc_set_error(TORC_ERR_DTYPE,
                          "%s: %s is %s but the input is %s; they must have "
                          "one floating dtype%s: cast with torc_to_dtype",
                          fn, what, torc_dtype_name(t->dtype),
                          torc_dtype_name(x->dtype),
                          mixed ? " (or f32 parameters of a bf16 or f16 "
                                  "input)"
                                : "");
  const torc_tensor *pair[2] = {x, t};
  torc_status st = torc__same_device(fn, pair, 2);
  if (st)
    return st;
  if (shape && (t->ndim != ndim ||
                memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim)))
    return torc_set_error(TORC_ERR_SHAPE,
                          "%s: %s has shape %s but must be %s (%s)", fn, what,
                          SHP(t, b1), torc__shape_str(shape, ndim, b2,
                                                      sizeof b2),
                          why);
  return TORC_OK;
}

static torc_status check_param(const char *fn, const char *what,
                               const torc_tensor *t, const torc_tensor *x,
                               const int64_t *shape, int ndim,
                               const char *why) {
  return check_param_mixed(fn, what, t, x, shape, ndim, why, 0);
}

/* A new tensor of shape filled with v (untracked). */
static torc_tensor *filled(const int64_t *shape, int ndim, torc_dtype dt,
                           torc_device dev, double v) {
  torc_tensor *t = torc__empty(shape, ndim, dt, dev);
  torc_fill_params p = {v, (int64_t)v};
  if (t && torc__numel(shape, ndim) > 0 &&
      torc__kernel_call(TORC__OP_fill_, dt, NULL, 0, &t, 1, &p, sizeof p)) {
    torc_release(t);
    return NULL;
  }
  return t;
}

/* Releases outputs after a failure; returns NULL. */
static torc_tensor *fail_out(torc_tensor **ts, int n) {
  for (int i = 0; i < n; i++) {
    torc_release(ts[i]);
    ts[i] = NULL;
  }
  return NULL;
}

/* ---- convolution ---- */

static torc_status resolve_conv(const char *fn, const torc_conv2d_params *p,
                                torc_conv_kparams *k, int64_t out_pad[2]) {
  torc_conv2d_params z;
  memset(&z, 0, sizeof z);
  if (p == NULL)
    p = &z;
  static const char *const hw[2] = {"height", "width"};
  for (int i = 0; i < 2; i++) {
    if (p->stride[i] < 0 || p->padding[i] < 0 || p->dilation[i] < 0 ||
        p->output_padding[i] < 0)
      return torc_set_error(
          TORC_ERR_INVALID,
          "%s: negative %s parameter: stride %lld, padding %lld, dilation "
          "%lld, output_padding %lld; each must be >= 0 (0 means the "
          "default: stride 1, padding 0, dilation 1)",
          fn, hw[i], (long long)p->stride[i], (long long)p->padding[i],
          (long long)p->dilation[i], (long long)p->output_padding[i]);
    k->stride[i] = p->stride[i] ? p->stride[i] : 1;
    k->padding[i] = p->padding[i];
    k->dilation[i] = p->dilation[i] ? p->dilation[i] : 1;
    out_pad[i] = p->output_padding[i];
  }
  if (p->groups < 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: groups is %lld; it must be >= 1 (0 means 1)",
                          fn, (long long)p->groups);
  k->groups = p->groups ? p->groups : 1;
  return TORC_OK;
}

static torc_tensor *conv(const char *fn, int transposed, const torc_tensor *x,
                         const torc_tensor *w, const torc_tensor *b,
                         const torc_conv2d_params *p) {
  if (x == NULL || w == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  torc_conv_kparams k;
  int64_t opad[2];
  char bx[128], bw[128];
  if (resolve_conv(fn, p, &k, opad) ||
      check_input(fn, "the input x", x, 4, 4, "[N, C, H, W]"))
    return NULL;
  if (w->ndim != 4) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the weight must be %s, got shape %s", fn,
                   transposed ? "[C_in, C_out / groups, kH, kW]"
                              : "[C_out, C_in / groups, kH, kW]",
                   SHP(w, bw));
    return NULL;
  }
  if (check_param(fn, "the weight", w, x, NULL, 0, NULL))
    return NULL;
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t G = k.groups, kh = w->shape[2], kw = w->shape[3], O;
  if (C % G) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: groups %lld does not divide the %lld input channels "
                   "of x %s",
                   fn, (long long)G, (long long)C, SHP(x, bx));
    return NULL;
  }
  if (!transposed) {
    O = w->shape[0];
    if (w->shape[1] * G != C) {
      torc_set_error(
          TORC_ERR_SHAPE,
          "%s: x %s has %lld input channels but the weight %s "
          "([C_out, C_in / groups, kH, kW]) expects %lld in-channels per "
          "group * groups %lld = %lld; the layer's in_channels must equal "
          "the channels its input has (dim 1 of x)",
          fn, SHP(x, bx), (long long)C, SHP(w, bw), (long long)w->shape[1],
          (long long)G, (long long)(w->shape[1] * G));
      return NULL;
    }
    if (O % G) {
      torc_set_error(TORC_ERR_INVALID,
                     "%s: groups %lld does not divide the %lld output "
                     "channels of the weight %s",
                     fn, (long long)G, (long long)O, SHP(w, bw));
      return NULL;
    }
  } else {
    O = w->shape[1] * G;
    if (w->shape[0] != C) {
      torc_set_error(
          TORC_ERR_SHAPE,
          "%s: x %s has %lld input channels but the weight %s "
          "([C_in, C_out / groups, kH, kW]) has %lld in dim 0; they must be "
          "equal",
          fn, SHP(x, bx), (long long)C, SHP(w, bw), (long long)w->shape[0]);
      return NULL;
    }
  }
  if (b) {
    int64_t bs[1] = {O};
    if (check_param(fn, "the bias", b, x, bs, 1,
                    "one value per output channel"))
      return NULL;
  }
  int64_t in_sz[2] = {H, W}, ks[2] = {kh, kw}, osz[2];
  static const char *const hw[2] = {"height", "width"};
  for (int i = 0; i < 2; i++) {
    int64_t eff = k.dilation[i] * (ks[i] - 1) + 1;
    if (!transposed) {
      int64_t padded = in_sz[i] + 2 * k.padding[i];
      if (eff > padded) {
        torc_set_error(
            TORC_ERR_SHAPE,
            "%s: the kernel's %s %lld (dilated: %lld) is larger than the "
            "padded input %s %lld (%lld + 2 * padding %lld) of x %s; use a "
            "smaller kernel, more padding or a larger input",
            fn, hw[i], (long long)ks[i], (long long)eff, hw[i],
            (long long)padded, (long long)in_sz[i], (long long)k.padding[i],
            SHP(x, bx));
        return NULL;
      }
      osz[i] = (padded - eff) / k.stride[i] + 1;
    } else {
      if (opad[i] >= k.stride[i] && opad[i] >= k.dilation[i]) {
        torc_set_error(TORC_ERR_INVALID,
                       "%s: output_padding %lld (%s) must be smaller than "
                       "the stride %lld or the dilation %lld",
                       fn, (long long)opad[i], hw[i], (long long)k.stride[i],
                       (long long)k.dilation[i]);
        return NULL;
      }
      osz[i] = (in_sz[i] - 1) * k.stride[i] - 2 * k.padding[i] + eff +
               opad[i];
      if (osz[i] <= 0) {
        torc_set_error(TORC_ERR_SHAPE,
                       "%s: the output %s would be %lld (input %lld, "
                       "stride %lld, padding %lld, kernel %lld); reduce the "
                       "padding",
                       fn, hw[i], (long long)osz[i], (long long)in_sz[i],
                       (long long)k.stride[i], (long long)k.padding[i],
                       (long long)ks[i]);
        return NULL;
      }
    }
  }
  int64_t os[4] = {N, O, osz[0], osz[1]};
  torc_tensor *out = torc__empty(os, 4, x->dtype, x->storage->device);
  if (out == NULL)
    return NULL;
  const torc_tensor *in[3] = {x, w, b};
  int op = transposed ? TORC__OP_conv_transpose2d : TORC__OP_conv2d;
  if ((torc__numel(os, 4) > 0 &&
       torc__kernel_call(op, x->dtype, in, b ? 3 : 2, &out, 1, &k, sizeof k)) ||
      torc__nn_record(transposed ? TORC__NN_CONV_T2D : TORC__NN_CONV2D, in, 3,
                      in, 2, &k, sizeof k, out))
    return fail_out(&out, 1);
  return out;
}

torc_tensor *torc_conv2d(const torc_tensor *x, const torc_tensor *weight,
                         const torc_tensor *bias,
                         const torc_conv2d_params *p) {
  TORC__AC_BEGIN(TORC_AUTOCAST_LOWER, &x, &weight, &bias);
  torc_tensor *r = conv("torc_conv2d", 0, x, weight, bias, p);
  TORC__AC_END();
  return torc__ret(r);
}

torc_tensor *torc_conv_transpose2d(const torc_tensor *x,
                                   const torc_tensor *weight,
                                   const torc_tensor *bias,
                                   const torc_conv2d_params *p) {
  TORC__AC_BEGIN(TORC_AUTOCAST_LOWER, &x, &weight, &bias);
  torc_tensor *r = conv("torc_conv_transpose2d", 1, x, weight, bias, p);
  TORC__AC_END();
  return torc__ret(r);
}

/* ---- pooling ---- */

/* PyTorch's pooling_output_shape. */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s,
                        int64_t d, int ceil_mode) {
  int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad)
    out--;
  return out;
}

static torc_status resolve_pool(const char *fn, const int64_t *xs,
                                const torc_pool2d_params *p, int is_max,
                                torc_pool_kparams *k, int64_t osz[2]) {
  static const char *const hw[2] = {"height", "width"};
  char bx[128];
  if (p == NULL)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the params are NULL; the kernel size is "
                          "required (torc_pool2d_params.kernel)",
                          fn);
  memset(k, 0, sizeof *k);
  for (int i = 0; i < 2; i++) {
    if (p->kernel[i] <= 0 || p->stride[i] < 0 || p->padding[i] < 0 ||
        p->dilation[i] < 0)
      return torc_set_error(
          TORC_ERR_INVALID,
          "%s: bad %s parameters: kernel %lld, stride %lld, padding %lld, "
          "dilation %lld; the kernel must be >= 1, the others >= 0 (0 "
          "means the default: stride = kernel, dilation 1)",
          fn, hw[i], (long long)p->kernel[i], (long long)p->stride[i],
          (long long)p->padding[i], (long long)p->dilation[i]);
    if (!is_max && p->dilation[i] > 1)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: avg_pool2d has no dilation (got %lld)", fn,
                            (long long)p->dilation[i]);
    k->kernel[i] = p->kernel[i];
    k->stride[i] = p->stride[i] ? p->stride[i] : p->kernel[i];
    k->padding[i] = p->padding[i];
    k->dilation[i] = p->dilation[i] ? p->dilation[i] : 1;
    int64_t eff = is_max ? (k->kernel[i] - 1) * k->dilation[i] + 1
                         : k->kernel[i];
    if (2 * k->padding[i] > eff)
      return torc_set_error(TORC_ERR_INVALID,
                            "%s: padding %lld (%s) is more than half the "
                            "%skernel size %lld; use padding <= %lld",
                            fn, (long long)k->padding[i], hw[i],
                            is_max ? "dilated " : "", (long long)eff,
                            (long long)(eff / 2));
    int64_t in = xs[2 + i];
    osz[i] = pool_out(in, k->kernel[i], k->padding[i], k->stride[i],
                      k->dilation[i], p->ceil_mode);
    if (osz[i] < 1)
      return torc_set_error(
          TORC_ERR_SHAPE,
          "%s: the %s window %lld (dilated: %lld) is larger than the padded "
          "input %s %lld (%lld + 2 * padding %lld) of x %s; the output "
          "would be empty",
          fn, hw[i], (long long)k->kernel[i], (long long)eff, hw[i],
          (long long)(in + 2 * k->padding[i]), (long long)in,
          (long long)k->padding[i], torc__shape_str(xs, 4, bx, sizeof bx));
  }
  if (p->divisor_override < 0)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: divisor_override is %lld; use 0 (none) or a "
                          "positive divisor",
                          fn, (long long)p->divisor_override);
  k->count_include_pad = !p->exclude_pad;
  k->ceil_mode = p->ceil_mode != 0;
  k->divisor = p->divisor_override;
  return TORC_OK;
}

static torc_tensor *max_pool(const torc_tensor *x, const torc_pool2d_params *p,
                             torc_tensor **indices) {
  const char *fn = "torc_max_pool2d";
  if (indices)
    *indices = NULL;
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  torc_pool_kparams k;
  int64_t osz[2];
  if (check_input(fn, "the input x", x, 4, 4, "[N, C, H, W]") ||
      resolve_pool(fn, x->shape, p, 1, &k, osz))
    return NULL;
  int64_t os[4] = {x->shape[0], x->shape[1], osz[0], osz[1]};
  torc_tensor *out[2] = {torc__empty(os, 4, x->dtype, x->storage->device),
                         torc__empty(os, 4, TORC_I64, x->storage->device)};
  if (out[0] == NULL || out[1] == NULL)
    return fail_out(out, 2);
  const torc_tensor *save = out[1];
  if ((torc__numel(os, 4) > 0 &&
       torc__kernel_call(TORC__OP_max_pool2d, x->dtype, &x, 1, out, 2, &k,
                         sizeof k)) ||
      torc__nn_record(TORC__NN_MAX_POOL2D, &x, 1, &save, 1, &k, sizeof k,
                      out[0]))
    return fail_out(out, 2);
  if (indices)
    *indices = out[1];
  else
    torc_release(out[1]);
  return out[0];
}

/* ---- a convolution, its relu and max pool in one call ---- */

int torc__conv2d_act_prepare(const int64_t *xs, torc_dtype dt,
                             torc_device dev, const torc_tensor *w,
                             const torc_tensor *b,
                             const torc_conv2d_params *cp, int act,
                             const torc_pool2d_params *pp,
                             torc_conv_act_kparams *k, int64_t ys[4]) {
  memset(k, 0, sizeof *k);
  if (w == NULL || w->ndim != 4 || w->dtype != dt ||
      !torc_device_eq(w->storage->device, dev) ||
      (b && (b->ndim != 1 || b->dtype != dt || b->shape[0] != w->shape[0] ||
             !torc_device_eq(b->storage->device, dev))))
    return 0;
  int have = torc__kernel_rank(dev.type, TORC__OP_conv2d_act, dt);
  if (have == INT_MIN ||
      have < torc__kernel_rank(dev.type, TORC__OP_conv2d, dt))
    return 0;
  /* the checks of conv2d and max_pool2d, quietly: a call they refuse runs
   * unfused, and they say what is wrong */
  torc_conv2d_params z;
  memset(&z, 0, sizeof z);
  const torc_conv2d_params *q = cp ? cp : &z;
  int64_t G = q->groups ? q->groups : 1, O = w->shape[0];
  if (G < 1 || q->output_padding[0] || q->output_padding[1] ||
      xs[1] % G || O % G || w->shape[1] * G != xs[1])
    return 0;
  for (int i = 0; i < 2; i++) {
    if (q->stride[i] < 0 || q->padding[i] < 0 || q->dilation[i] < 0)
      return 0;
    k->conv.stride[i] = q->stride[i] ? q->stride[i] : 1;
    k->conv.padding[i] = q->padding[i];
    k->conv.dilation[i] = q->dilation[i] ? q->dilation[i] : 1;
    int64_t eff = k->conv.dilation[i] * (w->shape[2 + i] - 1) + 1;
    int64_t padded = xs[2 + i] + 2 * k->conv.padding[i];
    if (eff > padded)
      return 0;
    ys[2 + i] = (padded - eff) / k->conv.stride[i] + 1;
  }
  k->conv.groups = G;
  ys[0] = xs[0], ys[1] = O;
  k->act = act;
  if (pp) {
    int64_t osz[2];
    if (resolve_pool("", ys, pp, 1, &k->pool, osz) != TORC_OK) {
      torc_clear_error();
      return 0;
    }
    k->has_pool = 1;
    ys[2] = osz[0], ys[3] = osz[1];
  }
  return 1;
}

torc_tensor *torc__conv2d_act_run(const torc_tensor *x, const torc_tensor *w,
                                  const torc_tensor *b,
                                  const torc_conv_act_kparams *k,
                                  const int64_t ys[4]) {
  torc_tensor *y = torc__empty(ys, 4, x->dtype, x->storage->device);
  const torc_tensor *in[3] = {x, w, b};
  if (y && torc__numel(ys, 4) > 0 &&
      torc__kernel_call(TORC__OP_conv2d_act, x->dtype, in, b ? 3 : 2, &y, 1,
                        k, sizeof *k)) {
    torc_release(y);
    return NULL;
  }
  return y;
}

torc_tensor *torc__linear_relu_run(const torc_tensor *x, const torc_tensor *w,
                                  const torc_tensor *b) {
  /* linear_act's w is the product's right operand [K, N]: w transposed. */
  const int64_t ws[2] = {w->shape[1], w->shape[0]};
  const int64_t wst[2] = {w->strides[1], w->strides[0]};
  torc_tensor *wt = torc__view_of(w, ws, wst, 2, w->offset);
  const int64_t ys[2] = {x->shape[0], w->shape[0]};
  torc_tensor *y = wt ? torc__empty(ys, 2, x->dtype, x->storage->device) : NULL;
  torc_linear_act_kparams k = {TORC_ACT_RELU, 0, 0};
  const torc_tensor *in[3] = {x, wt, b};
  if (y && torc__numel(ys, 2) > 0 &&
      torc__kernel_call(TORC__OP_linear_act, x->dtype, in, b ? 3 : 2, &y, 1,
                        &k, sizeof k)) {
    torc_release(y);
    y = NULL;
  }
  torc_release(wt);
  return y;
}

torc_tensor *torc_max_pool2d(const torc_tensor *x,
                             const torc_pool2d_params *p) {
  return torc__ret(max_pool(x, p, NULL));
}

torc_tensor *torc_max_pool2d_with_indices(const torc_tensor *x,
                                          const torc_pool2d_params *p,
                                          torc_tensor **indices) {
  torc_tensor *ix = NULL;
  torc_tensor *y = max_pool(x, p, &ix);
  if (indices == NULL)
    torc_release(ix), ix = NULL;
  torc_tensor *both[2] = {y, ix};
  if (torc__ret_all(both, 2) != TORC_OK)
    return NULL;
  if (indices)
    *indices = both[1];
  return both[0];
}

static torc_tensor *avg_pool(const torc_tensor *x,
                             const torc_pool2d_params *p) {
  const char *fn = "torc_avg_pool2d";
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  torc_pool_kparams k;
  int64_t osz[2];
  if (check_input(fn, "the input x", x, 4, 4, "[N, C, H, W]") ||
      resolve_pool(fn, x->shape, p, 0, &k, osz))
    return NULL;
  int64_t os[4] = {x->shape[0], x->shape[1], osz[0], osz[1]};
  torc_tensor *out = torc__empty(os, 4, x->dtype, x->storage->device);
  if (out == NULL ||
      (torc__numel(os, 4) > 0 &&
       torc__kernel_call(TORC__OP_avg_pool2d, x->dtype, &x, 1, &out, 1, &k,
                         sizeof k)) ||
      torc__nn_record(TORC__NN_AVG_POOL2D, &x, 1, NULL, 0, &k, sizeof k, out))
    return fail_out(&out, 1);
  return out;
}

torc_tensor *torc_avg_pool2d(const torc_tensor *x,
                             const torc_pool2d_params *p) {
  return torc__ret(avg_pool(x, p));
}

static torc_tensor *adaptive_avg(const torc_tensor *x, int64_t oh,
                                 int64_t ow) {
  const char *fn = "torc_adaptive_avg_pool2d";
  char bx[128];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (check_input(fn, "the input x", x, 4, 4, "[N, C, H, W]"))
    return NULL;
  if (oh <= 0 || ow <= 0) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: the output size %lld x %lld must be positive", fn,
                   (long long)oh, (long long)ow);
    return NULL;
  }
  if (x->shape[2] == 0 || x->shape[3] == 0) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: x %s has an empty plane; there is nothing to average",
                   fn, SHP(x, bx));
    return NULL;
  }
  int64_t os[4] = {x->shape[0], x->shape[1], oh, ow};
  torc_tensor *out = torc__empty(os, 4, x->dtype, x->storage->device);
  if (out == NULL ||
      (torc__numel(os, 4) > 0 &&
       torc__kernel_call(TORC__OP_adaptive_avg_pool2d, x->dtype, &x, 1, &out,
                         1, NULL, 0)) ||
      torc__nn_record(TORC__NN_ADAPTIVE_AVG2D, &x, 1, NULL, 0, NULL, 0, out))
    return fail_out(&out, 1);
  return out;
}

torc_tensor *torc_adaptive_avg_pool2d(const torc_tensor *x, int64_t out_h,
                                      int64_t out_w) {
  return torc__ret(adaptive_avg(x, out_h, out_w));
}

/* ---- normalisation ---- */

/* Runs a norm kernel: in x, w (or ones), b (or zeros) [+ extra]; out y and
 * two statistics of `stat_shape`; records `which`. */
static torc_tensor *norm_run(int op, torc__nn_rec which, const torc_tensor *x,
                             const torc_tensor *w, const torc_tensor *b,
                             const int64_t *pshape, int pndim,
                             torc_tensor *const *extra, int n_extra,
                             const int64_t *stat_shape, int stat_ndim,
                             const torc_norm_kparams *k) {
  torc_device dev = x->storage->device;
  torc_dtype sdt = x->dtype == TORC_F64 ? TORC_F64 : TORC_F32;
  /* the parameters' dtype: x's, or f32 beside a half x (batch_norm) */
  torc_dtype pdt = w ? w->dtype : b ? b->dtype : x->dtype;
  torc_tensor *wu = w ? torc_retain((torc_tensor *)w)
                      : filled(pshape, pndim, pdt, dev, 1.0);
  torc_tensor *bu = b ? torc_retain((torc_tensor *)b)
                      : filled(pshape, pndim, pdt, dev, 0.0);
  torc_tensor *out[3] = {torc__empty(x->shape, x->ndim, x->dtype, dev),
                         torc__empty(stat_shape, stat_ndim, sdt, dev),
                         torc__empty(stat_shape, stat_ndim, sdt, dev)};
  torc_tensor *res = NULL;
  if (wu && bu && out[0] && out[1] && out[2]) {
    const torc_tensor *in[5] = {x, wu, bu, NULL, NULL};
    for (int i = 0; i < n_extra; i++)
      in[3 + i] = extra[i];
    const torc_tensor *rin[3] = {x, w, b};
    const torc_tensor *save[4] = {x, wu, out[1], out[2]};
    if (torc__numel(x->shape, x->ndim) == 0 ||
        torc__kernel_call(op, x->dtype, in, 3 + n_extra, out, 3, k,
                          sizeof *k) == TORC_OK) {
      for (int i = 0; i < n_extra; i++)
        torc__bump_version(extra[i]);
      if (torc__nn_record(which, rin, 3, save, 4, k, sizeof *k, out[0]) ==
          TORC_OK) {
        res = out[0];
        out[0] = NULL;
      }
    }
  }
  fail_out(out, 3);
  torc_release(wu);
  torc_release(bu);
  return res;
}

static torc_tensor *batch_norm(const torc_tensor *x, torc_tensor *rm,
                               torc_tensor *rv, const torc_tensor *w,
                               const torc_tensor *b, int training,
                               double momentum, double eps) {
  const char *fn = "torc_batch_norm";
  char bx[128];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (check_input(fn, "the input x", x, 2, TORC_MAX_DIMS, "[N, C, *]"))
    return NULL;
  int64_t C = x->shape[1], cs[1] = {C};
  if ((rm == NULL) != (rv == NULL) || (!training && rm == NULL)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: running_mean is %s and running_var %s; %s", fn,
                   rm ? "set" : "NULL", rv ? "set" : "NULL",
                   training ? "give both or neither"
                            : "eval mode (training 0) normalises with the "
                              "running statistics, so both are required");
    return NULL;
  }
  if (!(eps >= 0) || !(momentum >= 0 && momentum <= 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: eps %g must be >= 0 and momentum %g in [0, 1]", fn,
                   eps, momentum);
    return NULL;
  }
  if ((w && check_param_mixed(fn, "the weight", w, x, cs, 1,
                              "one value per channel, dim 1 of x", 1)) ||
      (b && check_param_mixed(fn, "the bias", b, x, cs, 1,
                              "one value per channel, dim 1 of x", 1)))
    return NULL;
  if (w && b && w->dtype != b->dtype) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the weight is %s but the bias %s; give both in one "
                   "dtype (cast with torc_to_dtype)",
                   fn, torc_dtype_name(w->dtype), torc_dtype_name(b->dtype));
    return NULL;
  }
  torc_tensor *rs[2] = {rm, rv};
  static const char *const rn[2] = {"running_mean", "running_var"};
  for (int i = 0; rm && i < 2; i++) {
    const torc_tensor *pair[2] = {x, rs[i]};
    char br[128];
    if (torc__same_device(fn, pair, 2))
      return NULL;
    if (!torc_dtype_is_float(rs[i]->dtype) || rs[i]->ndim != 1 ||
        rs[i]->shape[0] != C || !torc_is_contiguous(rs[i])) {
      torc_set_error(TORC_ERR_SHAPE,
                     "%s: %s is a %s tensor of shape %s%s; it must be a "
                     "contiguous floating [%lld] (one value per channel of "
                     "x %s)",
                     fn, rn[i], torc_dtype_name(rs[i]->dtype),
                     SHP(rs[i], br),
                     torc_is_contiguous(rs[i]) ? "" : " (not contiguous)",
                     (long long)C, SHP(x, bx));
      return NULL;
    }
    if (training && torc__check_inplace(rs[i], fn))
      return NULL;
  }
  int64_t per = torc__numel(x->shape, x->ndim) / (C ? C : 1);
  if (training && per <= 1 && C > 0) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: expected more than 1 value per channel when "
                   "training, got x %s (%lld per channel); use eval mode or "
                   "a larger batch",
                   fn, SHP(x, bx), (long long)per);
    return NULL;
  }
  torc_norm_kparams k = {eps, momentum, 0, training != 0, 0};
  return norm_run(TORC__OP_batch_norm, TORC__NN_BATCH_NORM, x, w, b, cs, 1,
                  rs, rm ? 2 : 0, cs, 1, &k);
}

torc_tensor *torc_batch_norm(const torc_tensor *x, torc_tensor *running_mean,
                             torc_tensor *running_var,
                             const torc_tensor *weight,
                             const torc_tensor *bias, int training,
                             double momentum, double eps) {
  /* Autocast leaves batch_norm to x's dtype: a bf16 or f16 x normalises
   * with its f32 parameters and statistics, in f32 arithmetic. */
  return torc__ret(batch_norm(x, running_mean, running_var, weight, bias,
                              training, momentum, eps));
}

static torc_tensor *layer_norm(const torc_tensor *x, const int64_t *ns, int n,
                               const torc_tensor *w, const torc_tensor *b,
                               double eps) {
  const char *fn = "torc_layer_norm";
  char bx[128], bn[128];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (check_input(fn, "the input x", x, 1, TORC_MAX_DIMS, "at least 1-D"))
    return NULL;
  if (n < 1 || ns == NULL || n > x->ndim ||
      memcmp(x->shape + x->ndim - n, ns, sizeof(int64_t) * (size_t)n)) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: normalized_shape %s must equal the last %d dim(s) "
                   "of x %s",
                   fn,
                   ns && n >= 1 && n <= TORC_MAX_DIMS
                       ? torc__shape_str(ns, n, bn, sizeof bn)
                       : "(none)",
                   n, SHP(x, bx));
    return NULL;
  }
  if (!(eps >= 0)) {
    torc_set_error(TORC_ERR_INVALID, "%s: eps %g must be >= 0", fn, eps);
    return NULL;
  }
  if ((w && check_param(fn, "the weight", w, x, ns, n,
                        "normalized_shape")) ||
      (b && check_param(fn, "the bias", b, x, ns, n, "normalized_shape")))
    return NULL;
  int64_t K = torc__numel(ns, n);
  int64_t ss[1] = {K ? torc__numel(x->shape, x->ndim) / K : 0};
  torc_norm_kparams k = {eps, 0, 0, 0, 0};
  return norm_run(TORC__OP_layer_norm, TORC__NN_LAYER_NORM, x, w, b, ns, n,
                  NULL, 0, ss, 1, &k);
}

torc_tensor *torc_layer_norm(const torc_tensor *x,
                             const int64_t *normalized_shape, int n,
                             const torc_tensor *weight,
                             const torc_tensor *bias, double eps) {
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &x, &weight, &bias);
  torc_tensor *r = layer_norm(x, normalized_shape, n, weight, bias, eps);
  TORC__AC_END();
  return torc__ret(r);
}

static torc_tensor *group_norm(const torc_tensor *x, int64_t groups,
                               const torc_tensor *w, const torc_tensor *b,
                               double eps) {
  const char *fn = "torc_group_norm";
  char bx[128];
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (check_input(fn, "the input x", x, 2, TORC_MAX_DIMS, "[N, C, *]"))
    return NULL;
  int64_t C = x->shape[1], cs[1] = {C};
  if (groups < 1 || C % groups) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: groups %lld must be >= 1 and divide the %lld "
                   "channels of x %s",
                   fn, (long long)groups, (long long)C, SHP(x, bx));
    return NULL;
  }
  if (!(eps >= 0)) {
    torc_set_error(TORC_ERR_INVALID, "%s: eps %g must be >= 0", fn, eps);
    return NULL;
  }
  if ((w && check_param(fn, "the weight", w, x, cs, 1,
                        "one value per channel, dim 1 of x")) ||
      (b && check_param(fn, "the bias", b, x, cs, 1,
                        "one value per channel, dim 1 of x")))
    return NULL;
  int64_t ss[1] = {x->shape[0] * groups};
  torc_norm_kparams k = {eps, 0, groups, 0, 0};
  return norm_run(TORC__OP_group_norm, TORC__NN_GROUP_NORM, x, w, b, cs, 1,
                  NULL, 0, ss, 1, &k);
}

torc_tensor *torc_group_norm(const torc_tensor *x, int64_t groups,
                             const torc_tensor *weight,
                             const torc_tensor *bias, double eps) {
  TORC__AC_BEGIN(TORC_AUTOCAST_F32, &x, &weight, &bias);
  torc_tensor *r = group_norm(x, groups, weight, bias, eps);
  TORC__AC_END();
  return torc__ret(r);
}

/* ---- dropout, embedding ---- */

static torc_tensor *dropout(const torc_tensor *x, double p, int training,
                            torc_generator *gen) {
  const char *fn = "torc_dropout";
  if (x == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (!(p >= 0 && p <= 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "%s: p is %g; the drop probability must be in [0, 1]", fn,
                   p);
    return NULL;
  }
  if (!training || p == 0)
    return torc_retain((torc_tensor *)x);
  if (check_input(fn, "the input x", x, 0, TORC_MAX_DIMS, "a tensor"))
    return NULL;
  int64_t n = torc__numel(x->shape, x->ndim);
  torc_dropout_kparams k = {0, 0, p};
  torc__generator_take(gen, (uint64_t)n, &k.seed, &k.offset);
  torc_device dev = x->storage->device;
  torc_tensor *out[2] = {torc__empty(x->shape, x->ndim, x->dtype, dev),
                         torc__empty(x->shape, x->ndim, x->dtype, dev)};
  const torc_tensor *save = out[1];
  if (!out[0] || !out[1] ||
      (n > 0 && torc__kernel_call(TORC__OP_dropout, x->dtype, &x, 1, out, 2,
                                  &k, sizeof k)) ||
      torc__nn_record(TORC__NN_DROPOUT, &x, 1, &save, 1, NULL, 0, out[0]))
    return fail_out(out, 2);
  torc_release(out[1]);
  return out[0];
}

torc_tensor *torc_dropout(const torc_tensor *x, double p, int training,
                          torc_generator *gen) {
  return torc__ret(dropout(x, p, training, gen));
}

/* Checks every index lies in [0, num): reads its minimum and maximum. On
 * the host only, where the read is free; on another device that read
 * would stall the queue, and the kernel checks each index itself: a bad
 * one is an asynchronous error naming it, reported at the next read or
 * synchronisation (as CUDA's device-side asserts). */
static torc_status check_indices(const char *fn, const torc_tensor *ix,
                                 const torc_tensor *w) {
  if (torc__numel(ix->shape, ix->ndim) == 0 ||
      !torc_device_is_host(ix->storage->device))
    return TORC_OK;
  char bw[128];
  int scope = torc_scope_begin();
  int64_t lo = 0, hi = 0;
  torc_status st = torc_item_i64(torc_amin(ix, NULL, 0, 0), &lo);
  if (st == TORC_OK)
    st = torc_item_i64(torc_amax(ix, NULL, 0, 0), &hi);
  torc_scope_end(scope);
  if (st)
    return st;
  int64_t num = w->shape[0];
  if (lo < 0 || hi >= num)
    return torc_set_error(TORC_ERR_RANGE,
                          "%s: index %lld is out of range for "
                          "num_embeddings %lld (weight %s); valid indices "
                          "are 0..%lld",
                          fn, (long long)(lo < 0 ? lo : hi), (long long)num,
                          SHP(w, bw), (long long)(num - 1));
  return TORC_OK;
}

static torc_tensor *embedding(const torc_tensor *ix, const torc_tensor *w) {
  const char *fn = "torc_embedding";
  char bw[128], bi[128];
  if (ix == NULL || w == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (ix->dtype != TORC_I64 && ix->dtype != TORC_I32) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: the indices are %s; they must be i64 or i32 (cast "
                   "with torc_to_dtype(indices, TORC_I64))",
                   fn, torc_dtype_name(ix->dtype));
    return NULL;
  }
  if (check_input(fn, "the weight", w, 2, 2, "[num_embeddings, dim]"))
    return NULL;
  const torc_tensor *pair[2] = {w, ix};
  if (torc__same_device(fn, pair, 2))
    return NULL;
  if (ix->ndim + 1 > TORC_MAX_DIMS) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: indices %s have %d dims; the result would exceed %d",
                   fn, SHP(ix, bi), ix->ndim, TORC_MAX_DIMS);
    return NULL;
  }
  (void)bw;
  if (check_indices(fn, ix, w))
    return NULL;
  torc_tensor *i64 = ix->dtype == TORC_I64 ? torc_retain((torc_tensor *)ix)
                                           : torc__cast(ix, TORC_I64);
  if (i64 == NULL)
    return NULL;
  int64_t os[TORC_MAX_DIMS];
  memcpy(os, ix->shape, sizeof(int64_t) * (size_t)ix->ndim);
  os[ix->ndim] = w->shape[1];
  torc_tensor *out = torc__empty(os, ix->ndim + 1, w->dtype,
                                 w->storage->device);
  const torc_tensor *in[2] = {i64, w};
  if (out == NULL ||
      (torc__numel(os, ix->ndim + 1) > 0 &&
       torc__kernel_call(TORC__OP_embedding, w->dtype, in, 2, &out, 1, NULL,
                         0)) ||
      torc__nn_record(TORC__NN_EMBEDDING, in, 2, in, 1, NULL, 0, out))
    fail_out(&out, 1);
  torc_release(i64);
  return out;
}

torc_tensor *torc_embedding(const torc_tensor *indices,
                            const torc_tensor *weight) {
  return torc__ret(embedding(indices, weight));
}

/* ---- prelu: where(x > 0, x, w x), w along dim 1 ----
 * A composition of existing ops, so its gradients to x and to the weight
 * are theirs: g where x > 0 else w g, and the sum of x g where x <= 0
 * (PyTorch's prelu backward). */
static torc_tensor *prelu(const torc_tensor *x, const torc_tensor *w) {
  const char *fn = "torc_prelu";
  char bx[128], bw[128];
  if (x == NULL || w == NULL) {
    torc__null_input(fn);
    return NULL;
  }
  if (!torc_dtype_is_float(x->dtype) || !torc_dtype_is_float(w->dtype)) {
    torc_set_error(TORC_ERR_DTYPE,
                   "%s: x is %s and the weight %s; both must be floating "
                   "(cast with torc_to_dtype)",
                   fn, torc_dtype_name(x->dtype), torc_dtype_name(w->dtype));
    return NULL;
  }
  int64_t channels = x->ndim >= 2 ? x->shape[1] : 1;
  int64_t nw = torc__numel(w->shape, w->ndim);
  if (w->ndim > 1 || (nw != 1 && nw != channels)) {
    torc_set_error(TORC_ERR_SHAPE,
                   "%s: the weight is %s for x %s; it must hold 1 slope or "
                   "one per channel (%lld, x's dim 1), as [1] or [%lld]",
                   fn, SHP(w, bw), SHP(x, bx), (long long)channels,
                   (long long)channels);
    return NULL;
  }
  const torc_tensor *pair[2] = {x, w};
  if (torc__same_device(fn, pair, 2))
    return NULL;
  /* the weight as [C, 1, ..., 1] over x's dims after the batch */
  int64_t ws[TORC_MAX_DIMS];
  int wn = 0;
  if (nw > 1) {
    ws[wn++] = nw;
    while (wn < x->ndim - 1)
      ws[wn++] = 1;
  }
  int scope = torc_scope_begin();
  torc_tensor *wc = torc_reshape(w, ws, wn);
  torc_tensor *zero = torc_full(NULL, 0, 0, x->dtype, x->storage->device);
  torc_tensor *wx = wc ? torc_mul(x, wc) : NULL;
  torc_tensor *pos = zero ? torc_gt(x, zero) : NULL;
  torc_tensor *out = wx && pos ? torc_where(pos, x, wx) : NULL;
  out = torc_scope_keep(out);
  torc_scope_end(scope);
  return out;
}

/* prelu's result comes out of its own scope into the caller's. */
torc_tensor *torc_prelu(const torc_tensor *x, const torc_tensor *weight) {
  TORC__AC_BEGIN(TORC_AUTOCAST_LOWER, &x, &weight);
  torc_tensor *r = prelu(x, weight);
  TORC__AC_END();
  return r;
}
