/* plugins/losses/classify.c — the losses over classes: cross_entropy
 * (logits; class indices or probabilities as targets; label smoothing,
 * ignore_index, class weights) and nll (log-probabilities), as
 * torch.nn.functional computes them (aten/src/ATen/native/LossNLL.cpp).
 * cross_entropy with class-index targets runs the core's fused op
 * (torc_cross_entropy: one kernel forward, one backward); probability
 * targets and nll are composed of ops.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "losses_internal.h"

#define A loss_api

/* Rows summing to 1 within this are taken for softmax output. */
#define SOFTMAX_TOL 1e-3

/* The shape class indices have for input x: x's without the class dim
 * (dim 1; dim 0 of an unbatched [C], giving []). */
static const char *index_shape_str(const torc_tensor *x, char *buf,
                                   size_t size) {
  int nd = A->ndim(x), cd = nd == 1 ? 0 : 1;
  const int64_t *sh = A->shape(x);
  size_t len = (size_t)snprintf(buf, size, "[");
  for (int i = 0, k = 0; i < nd && len < size; i++)
    if (i != cd)
      len += (size_t)snprintf(buf + len, size - len, "%s%lld", k++ ? ", " : "",
                              (long long)sh[i]);
  if (len < size)
    snprintf(buf + len, size - len, "]");
  return buf;
}

static int is_index_shape(const torc_tensor *x, const torc_tensor *t) {
  int nd = A->ndim(x), cd = nd == 1 ? 0 : 1;
  if (A->ndim(t) != nd - 1)
    return 0;
  const int64_t *sx = A->shape(x), *st = A->shape(t);
  for (int i = 0, k = 0; i < nd; i++)
    if (i != cd && sx[i] != st[k++])
      return 0;
  return 1;
}

static int is_same_shape(const torc_tensor *x, const torc_tensor *t) {
  int nd = A->ndim(x);
  if (A->ndim(t) != nd)
    return 0;
  return nd == 0 || memcmp(A->shape(x), A->shape(t), sizeof(int64_t) *
                                                         (size_t)nd) == 0;
}

/* Checks input and target; *probs = 1 for probability targets (allowed
 * when allow_probs). Every error names the shapes expected. */
static int check_target(const loss_state *s, const torc_tensor *x,
                        const torc_tensor *t, int allow_probs, int *probs) {
  int st = loss_check_inputs(s, x, t);
  if (st != TORC_OK)
    return st;
  char bx[96], bt[96], bi[96];
  const char *what = allow_probs ? "logits" : "log-probabilities";
  if (A->ndim(x) < 1)
    return loss_error(TORC_ERR_SHAPE,
                      "%s expects %s [N, C] (or [N, C, d...], or [C] for one "
                      "sample); got a scalar input",
                      s->name, what);
  loss_shape_str(x, bx, sizeof bx);
  loss_shape_str(t, bt, sizeof bt);
  index_shape_str(x, bi, sizeof bi);
  torc_dtype xdt = A->dtype_of(x), tdt = A->dtype_of(t);
  *probs = 0;
  if (torc_dtype_is_float(tdt)) {
    if (allow_probs && is_same_shape(x, t)) {
      if (tdt != xdt)
        return loss_error(TORC_ERR_DTYPE,
                          "%s: probability target %s is %s but the input is "
                          "%s; give it the input's dtype (torc_to_dtype)",
                          s->name, bt, loss_dtype_str(tdt),
                          loss_dtype_str(xdt));
      if (s->ignore_index >= 0)
        return loss_error(TORC_ERR_INVALID,
                          "%s: ignore_index = %lld applies to class-index "
                          "targets only; with probability targets leave it "
                          "at -100 (a row of zeros adds nothing to the sum)",
                          s->name, (long long)s->ignore_index);
      *probs = 1;
      return TORC_OK;
    }
    if (is_index_shape(x, t) || is_same_shape(x, t)) {
      if (allow_probs)
        return loss_error(TORC_ERR_DTYPE,
                          "%s: target %s must be i64 class indices; got %s "
                          "— for probability targets give the input's shape "
                          "%s",
                          s->name, bt, loss_dtype_str(tdt), bx);
      return loss_error(TORC_ERR_DTYPE,
                        "%s: target %s must be i64 class indices %s; got %s "
                        "(for probability targets use cross_entropy on "
                        "logits, or kl_div)",
                        s->name, bt, bi, loss_dtype_str(tdt));
    }
  } else if (is_index_shape(x, t)) {
    if (tdt != TORC_I64)
      return loss_error(TORC_ERR_DTYPE,
                        "%s: target %s must be i64 class indices; got %s: "
                        "convert it with torc_to_dtype(target, TORC_I64)",
                        s->name, bt, loss_dtype_str(tdt));
    return TORC_OK;
  } else if (allow_probs && is_same_shape(x, t)) {
    return loss_error(TORC_ERR_DTYPE,
                      "%s: target %s is %s: probability targets must be "
                      "floating like the input (%s); for class indices give "
                      "%s",
                      s->name, bt, loss_dtype_str(tdt), loss_dtype_str(xdt),
                      bi);
  }
  if (allow_probs)
    return loss_error(TORC_ERR_SHAPE,
                      "%s: target %s does not fit input %s; give class "
                      "indices %s (i64) or probabilities %s (%s)",
                      s->name, bt, bx, bi, bx, loss_dtype_str(xdt));
  return loss_error(TORC_ERR_SHAPE,
                    "%s: target %s does not fit input %s; give class indices "
                    "%s (i64)",
                    s->name, bt, bx, bi);
}

/* Logs the "extra softmax" warning, once per loss, when every element of
 * x [N, C, ...] is >= 0 and every row (over dim 1) sums to 1: the model
 * ends with a softmax and cross_entropy applies log_softmax again, which
 * trains slowly or not at all. Checked on the first few forwards only
 * (the mistake shows from the first batch), as it reads two values back
 * from the device; on the host only, where that read is free: on another
 * device it would stall the training step's pipeline, for a warning. */
static int check_softmaxed(loss_state *s, const torc_tensor *x) {
  if (s->checks_left <= 0 || A->size(x, 1) < 2 || A->numel(x) == 0 ||
      A->device_of(x).type != TORC_CPU.type)
    return TORC_OK;
  s->checks_left--;
  int scope = A->scope_begin();
  torc_tensor *xd = A->detach(x);
  const int dim1[1] = {1};
  const int64_t one[1] = {1};
  const torc_tensor *pair[2] = {
      A->reshape(A->amin(xd, NULL, 0, 0), one, 1),
      A->reshape(A->amax(A->abs(A->sub_scalar(A->sum(xd, dim1, 1, 0), 1)),
                         NULL, 0, 0),
                 one, 1)};
  torc_tensor *both = pair[0] && pair[1] ? A->cat(pair, 2, 0) : NULL;
  double v[2];
  int st = both ? loss_read2(both, v) : (int)A->last_status();
  A->scope_end(scope);
  if (st != TORC_OK)
    return st;
  if (v[0] >= 0 && v[1] <= SOFTMAX_TOL) {
    char b[96];
    loss_host->log(TORC_LOG_WARN,
                   "%s: every row of the input %s is >= 0 and sums to 1, "
                   "like softmax output, but %s expects logits (it applies "
                   "log_softmax itself); drop the softmax at the end of the "
                   "model (or give log-probabilities to nll). Said once per "
                   "loss.",
                   s->name, loss_shape_str(x, b, sizeof b), s->name);
    s->checks_left = 0;
  }
  return TORC_OK;
}

/* After an op failed: rewords TORC_ERR_RANGE (a target class out of
 * range) with the fix; other errors stay as they are. */
static void range_error(const loss_state *s, int64_t n_classes) {
  if (A->last_status() != TORC_ERR_RANGE)
    return;
  char why[512];
  snprintf(why, sizeof why, "%s", A->last_error());
  loss_error(TORC_ERR_RANGE,
             "%s: a target class is out of range for the input's %lld "
             "classes (%s); give class indices in [0, %lld), or "
             "ignore_index (= %lld) for targets to skip",
             s->name, (long long)n_classes, why, (long long)n_classes,
             (long long)s->ignore_index);
}

/* Class-index targets against logits x [N, C, d...] through the core's
 * fused op (log_softmax, pick, smoothing and reduction in one kernel, one
 * kernel for the gradient): the same loss as log_softmax + index_loss. */
static torc_tensor *fused_index_loss(const loss_state *s, const torc_tensor *x,
                                     const torc_tensor *t,
                                     const torc_tensor *w) {
  torc_cross_entropy_params p = TORC_CROSS_ENTROPY_DEFAULTS;
  p.ignore_index = s->ignore_index;
  p.label_smoothing = s->label_smoothing;
  p.reduction = s->reduction == LOSS_SUM    ? TORC_REDUCTION_SUM
                : s->reduction == LOSS_NONE ? TORC_REDUCTION_NONE
                                            : TORC_REDUCTION_MEAN;
  torc_tensor *out = A->cross_entropy(x, t, w, &p);
  if (out == NULL)
    range_error(s, A->size(x, 1));
  return out;
}

/* The class weights viewed to broadcast over logp [N, C, d...]. */
static torc_tensor *class_weight_view(const torc_tensor *w, int nd) {
  int64_t shape[TORC_KERNEL_MAX_DIMS];
  for (int i = 0; i < nd; i++)
    shape[i] = 1;
  shape[1] = A->numel(w);
  return A->reshape(w, shape, nd);
}

/* Class-index targets t [N, d...] against log-probabilities logp
 * [N, C, d...] (PyTorch's nll_loss_nd, and cross_entropy's label
 * smoothing: (1 - eps) nll + eps / C * sum_c -w_c logp_c, both summed over
 * the targets not ignored and, for mean, divided by the sum of their class
 * weights). `w`: class weights [C] or NULL. */
static torc_tensor *index_loss(const loss_state *s, const torc_tensor *logp,
                               const torc_tensor *t, const torc_tensor *w,
                               double eps) {
  torc_dtype dt = A->dtype_of(logp);
  torc_device dev = A->device_of(logp);
  int64_t n_classes = A->size(logp, 1);
  torc_tensor *keep =
      A->ne(t, loss_scalar((double)s->ignore_index, TORC_I64, dev));
  torc_tensor *tsafe = A->where(keep, t, loss_scalar(0, TORC_I64, dev));
  torc_tensor *picked =
      tsafe ? A->gather(logp, 1, A->unsqueeze(tsafe, 1)) : NULL;
  if (picked == NULL) {
    range_error(s, n_classes);
    return NULL;
  }
  picked = A->squeeze(picked, 1);
  torc_tensor *keepf = A->to_dtype(keep, dt);
  torc_tensor *wt = keepf; /* each target's weight, 0 where ignored */
  if (w) {
    const int64_t flat[1] = {A->numel(t)};
    torc_tensor *wsel = A->index_select(w, 0, A->reshape(tsafe, flat, 1));
    wt = A->mul(A->reshape(wsel, A->shape(t), A->ndim(t)), keepf);
  }
  torc_tensor *nll = A->neg(A->mul(picked, wt));
  torc_tensor *smooth = NULL;
  if (eps > 0) {
    const int dim1[1] = {1};
    const torc_tensor *prod =
        w ? A->mul(logp, class_weight_view(w, A->ndim(logp))) : logp;
    smooth = A->mul(A->neg(A->sum(prod, dim1, 1, 0)), keepf);
  }
  if (s->reduction != LOSS_NONE) {
    nll = A->sum(nll, NULL, 0, 0);
    if (smooth)
      smooth = A->sum(smooth, NULL, 0, 0);
    if (s->reduction == LOSS_MEAN) {
      torc_tensor *denom = A->sum(wt, NULL, 0, 0);
      nll = A->div(nll, denom);
      if (smooth)
        smooth = A->div(smooth, denom);
    }
  }
  if (smooth == NULL)
    return nll;
  return A->add(A->mul_scalar(nll, 1 - eps),
                A->mul_scalar(smooth, eps / (double)n_classes));
}

/* Probability targets t of logp's shape (PyTorch's
 * cross_entropy_loss_prob_target): -sum_c w_c t'_c logp_c per sample, with
 * t' = (1 - eps) t + eps / C; mean divides by the number of samples. */
static torc_tensor *prob_loss(const loss_state *s, const torc_tensor *logp,
                              const torc_tensor *t, const torc_tensor *w,
                              double eps) {
  int64_t n_classes = A->size(logp, 1);
  const torc_tensor *tt = t;
  if (eps > 0)
    tt = A->add_scalar(A->mul_scalar(t, 1 - eps), eps / (double)n_classes);
  torc_tensor *prod = A->mul(logp, tt);
  if (w)
    prod = A->mul(prod, class_weight_view(w, A->ndim(logp)));
  const int dim1[1] = {1};
  switch (s->reduction) {
  case LOSS_NONE:
    return A->neg(A->sum(prod, dim1, 1, 0));
  case LOSS_SUM:
    return A->neg(A->sum(prod, NULL, 0, 0));
  default:
    return A->div_scalar(A->neg(A->sum(prod, NULL, 0, 0)),
                         (double)(A->numel(logp) / n_classes));
  }
}

static torc_tensor *class_forward_dim1(loss_state *s, const torc_tensor *input,
                                       const torc_tensor *target, int logits);

/* class_dim = -1: input [..., C] against class indices [...] or
 * probabilities [..., C], computed as [M, C] against [M] (or [M, C]) views
 * (M the product of the leading dims); reduction none gives [...] back. */
static torc_tensor *class_last_forward(loss_state *s, const torc_tensor *input,
                                       const torc_tensor *target, int logits) {
  int nd = A->ndim(input), tnd = A->ndim(target);
  const int64_t *xs = A->shape(input), *ts = A->shape(target);
  int index = tnd == nd - 1 &&
              (nd == 1 || memcmp(xs, ts, sizeof(int64_t) * (size_t)tnd) == 0);
  if (nd < 2 || (!index && !is_same_shape(input, target))) {
    char a[96], b[96];
    loss_error(TORC_ERR_SHAPE,
               "%s: class_dim = -1 takes the input's classes from its last "
               "dim, so an input [..., C] of at least 2 dims needs class "
               "indices [...] or probabilities [..., C]; got input %s and "
               "target %s",
               s->name, loss_shape_str(input, a, sizeof a),
               loss_shape_str(target, b, sizeof b));
    return NULL;
  }
  int scope = A->scope_begin();
  int64_t c = xs[nd - 1], m = c ? A->numel(input) / c : 0;
  const int64_t xf[2] = {m, c};
  torc_tensor *x2 = A->reshape(input, xf, 2);
  torc_tensor *t2 = A->reshape(target, xf, index ? 1 : 2);
  torc_tensor *out = x2 && t2 ? class_forward_dim1(s, x2, t2, logits) : NULL;
  if (out && s->reduction == LOSS_NONE)
    out = A->reshape(out, xs, nd - 1);
  return loss_finish(scope, out);
}

/* cross_entropy (logits = 1) and nll (logits = 0) with the classes on
 * dim 1. */
static torc_tensor *class_forward_dim1(loss_state *s, const torc_tensor *input,
                                       const torc_tensor *target, int logits) {
  int probs;
  if (check_target(s, input, target, logits, &probs) != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  const torc_tensor *x = input, *t = target;
  int unbatched = A->ndim(input) == 1;
  if (unbatched) {
    x = A->unsqueeze(input, 0);
    t = A->unsqueeze(target, 0);
    if (x == NULL || t == NULL)
      return loss_finish(scope, NULL);
  }
  int64_t n_classes = A->size(x, 1);
  torc_tensor *w = NULL;
  if (s->n_weight) {
    if (s->n_weight != n_classes) {
      char b[96];
      loss_error(TORC_ERR_SHAPE,
                 "%s: weight has %d entries but the input %s has %lld "
                 "classes (dim %d); give one weight per class",
                 s->name, s->n_weight, loss_shape_str(input, b, sizeof b),
                 (long long)n_classes, unbatched ? 0 : 1);
      return loss_finish(scope, NULL);
    }
    w = loss_vector(s->weight, s->n_weight, A->dtype_of(x), A->device_of(x));
    if (w == NULL)
      return loss_finish(scope, NULL);
  }
  if (logits && check_softmaxed(s, x) != TORC_OK)
    return loss_finish(scope, NULL);
  if (logits && !probs && TORC_API_HAS(A, cross_entropy)) {
    torc_tensor *out = fused_index_loss(s, x, t, w);
    if (out && unbatched && s->reduction == LOSS_NONE)
      out = A->squeeze(out, 0);
    return loss_finish(scope, out);
  }
  const torc_tensor *logp = logits ? A->log_softmax(x, 1) : x;
  if (logp == NULL)
    return loss_finish(scope, NULL);
  double eps = logits ? s->label_smoothing : 0;
  torc_tensor *out = probs ? prob_loss(s, logp, t, w, eps)
                           : index_loss(s, logp, t, w, eps);
  if (out && unbatched && s->reduction == LOSS_NONE)
    out = A->squeeze(out, 0);
  return loss_finish(scope, out);
}

static torc_tensor *class_forward(loss_state *s, const torc_tensor *input,
                                  const torc_tensor *target, int logits) {
  return s->class_last ? class_last_forward(s, input, target, logits)
                       : class_forward_dim1(s, input, target, logits);
}

static torc_tensor *cross_entropy_forward(void *state, const torc_tensor *x,
                                          const torc_tensor *y) {
  return class_forward(state, x, y, 1);
}

static torc_tensor *nll_forward(void *state, const torc_tensor *x,
                                const torc_tensor *y) {
  return class_forward(state, x, y, 0);
}

#define WEIGHT_KEY                                                             \
  {"weight",                                                                   \
   "class weights \"w0,w1,...\", one per class (C of them), or none",          \
   "none"}
#define IGNORE_KEY                                                             \
  {"ignore_index",                                                             \
   "a class index whose targets add nothing (and are not counted by mean)",    \
   "-100"}
#define REDUCTION_KEY                                                          \
  {"reduction",                                                                \
   "mean (weighted by the targets' class weights), sum or none", "mean"}
#define CLASS_DIM_KEY                                                          \
  {"class_dim",                                                                \
   "where the input's classes are: 1 ([N, C, d...], PyTorch's layout) or -1 " \
   "([N, L, C], a language model's per-position logits)",                     \
   "1"}

static const torc_module_key cross_entropy_keys[] = {
    WEIGHT_KEY,
    IGNORE_KEY,
    {"label_smoothing",
     "in [0, 1]: the share of each target spread evenly over all classes",
     "0.0"},
    REDUCTION_KEY,
    CLASS_DIM_KEY,
    {NULL, NULL, NULL}};

static const torc_module_key nll_keys[] = {
    WEIGHT_KEY, IGNORE_KEY, REDUCTION_KEY, CLASS_DIM_KEY, {NULL, NULL, NULL}};

const torc_loss_type loss_cross_entropy_type = {
    .struct_size = sizeof(torc_loss_type),
    .name = "cross_entropy",
    .description = "logits [N, C] or [N, C, d...] (no softmax) against class "
                   "indices [N] or [N, d...] (i64) or probabilities of the "
                   "input's shape",
    .keys = cross_entropy_keys,
    .create = loss_create,
    .destroy = loss_destroy,
    .forward = cross_entropy_forward,
    .user = (void *)"cross_entropy",
};

const torc_loss_type loss_nll_type = {
    .struct_size = sizeof(torc_loss_type),
    .name = "nll",
    .description = "log-probabilities [N, C] or [N, C, d...] (after "
                   "log_softmax) against class indices [N] or [N, d...] (i64)",
    .keys = nll_keys,
    .create = loss_create,
    .destroy = loss_destroy,
    .forward = nll_forward,
    .user = (void *)"nll",
};
