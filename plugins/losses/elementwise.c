/* plugins/losses/elementwise.c — the losses whose target has the input's
 * shape: mse, l1, smooth_l1, huber (regression), bce, bce_with_logits
 * (binary targets) and kl_div, each as torch.nn.functional defines it.
 */
#include <math.h>
#include <stdio.h>

#include "losses_internal.h"

#define A loss_api

#define REDUCTION_KEY                                                          \
  {"reduction", "mean, sum or none: how the per-element losses combine",       \
   "mean"}

/* ---- mse, l1 ---- */

/* (x - y)^2 */
static torc_tensor *mse_forward(void *state, const torc_tensor *x,
                                const torc_tensor *y) {
  const loss_state *s = state;
  if (loss_check_same(s, x, y, "targets") != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  torc_tensor *e = A->square(A->sub(x, y));
  return loss_finish(scope, e ? loss_reduce(s, e) : NULL);
}

/* |x - y| */
static torc_tensor *l1_forward(void *state, const torc_tensor *x,
                               const torc_tensor *y) {
  const loss_state *s = state;
  if (loss_check_same(s, x, y, "targets") != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  torc_tensor *e = A->abs(A->sub(x, y));
  return loss_finish(scope, e ? loss_reduce(s, e) : NULL);
}

/* ---- smooth_l1, huber ---- */

/* z = |x - y|:  z < beta ? 0.5 z^2 / beta : z - 0.5 beta  (l1 when beta is
 * 0: the quadratic branch would divide by 0, and its zero gradient times
 * 1/0 would be NaN). */
static torc_tensor *smooth_l1_forward(void *state, const torc_tensor *x,
                                      const torc_tensor *y) {
  const loss_state *s = state;
  if (s->beta == 0)
    return l1_forward(state, x, y);
  if (loss_check_same(s, x, y, "targets") != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  torc_tensor *d = A->sub(x, y);
  torc_tensor *z = A->abs(d);
  torc_tensor *quad = A->div_scalar(A->mul_scalar(A->square(d), 0.5), s->beta);
  torc_tensor *lin = A->sub_scalar(z, 0.5 * s->beta);
  torc_tensor *cond =
      A->lt(z, loss_scalar(s->beta, A->dtype_of(x), A->device_of(x)));
  torc_tensor *e = A->where(cond, quad, lin);
  return loss_finish(scope, e ? loss_reduce(s, e) : NULL);
}

/* z = |x - y|:  z < delta ? 0.5 z^2 : delta (z - 0.5 delta) */
static torc_tensor *huber_forward(void *state, const torc_tensor *x,
                                  const torc_tensor *y) {
  const loss_state *s = state;
  if (loss_check_same(s, x, y, "targets") != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  torc_tensor *d = A->sub(x, y);
  torc_tensor *z = A->abs(d);
  torc_tensor *quad = A->mul_scalar(A->square(d), 0.5);
  torc_tensor *lin = A->mul_scalar(A->sub_scalar(z, 0.5 * s->delta), s->delta);
  torc_tensor *cond =
      A->lt(z, loss_scalar(s->delta, A->dtype_of(x), A->device_of(x)));
  torc_tensor *e = A->where(cond, quad, lin);
  return loss_finish(scope, e ? loss_reduce(s, e) : NULL);
}

/* ---- bce, bce_with_logits ---- */

/* The weights of key `key` ([n] values) as a tensor broadcasting over x's
 * last dim: n must be 1 or that dim's size. */
static torc_tensor *last_dim_weights(const loss_state *s, const char *key,
                                     const double *v, int n,
                                     const torc_tensor *x) {
  int nd = A->ndim(x);
  int64_t last = nd ? A->size(x, nd - 1) : 1;
  if (n != 1 && n != last) {
    char b[96];
    loss_error(TORC_ERR_SHAPE,
               "%s: %s has %d entries but the input %s has %lld in its last "
               "dim; give %lld (one per column of the last dim) or 1",
               s->name, key, n, loss_shape_str(x, b, sizeof b),
               (long long)last, (long long)last);
    return NULL;
  }
  return loss_vector(v, n, A->dtype_of(x), A->device_of(x));
}

/* -w (y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch
 * (log(1 - x), not log1p(-x), as PyTorch 1.13: in f32 they differ by up
 * to 2e-4 relative for x near 0). The gradient with respect to x is
 * PyTorch's, w (x - y) / max(x (1 - x), 1e-12) (1e-12 rounded to f32, as
 * its kernel has it), finite at x = 0 and 1 where the clamped logs' own
 * derivative would give 0 * inf: the value is computed from x detached and
 * the gradient added as (x - detach(x)) * g, which is 0 in the forward. */
static torc_tensor *bce_forward(void *state, const torc_tensor *x,
                                const torc_tensor *y) {
  const loss_state *s = state;
  if (loss_check_same(s, x, y, "targets") != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  torc_tensor *xd = A->detach(x);
  torc_tensor *lo = A->reshape(A->amin(xd, NULL, 0, 0), (int64_t[]){1}, 1);
  torc_tensor *hi = A->reshape(A->amax(xd, NULL, 0, 0), (int64_t[]){1}, 1);
  const torc_tensor *pair[2] = {lo, hi};
  double range[2] = {0, 0};
  /* The range is read back on the host only, where that is free. On
   * another device the read would stall the queue at every step; a value
   * outside [0, 1] there makes a log NaN, and the loss NaN (the trainer's
   * guard names the step). */
  if (A->numel(x) > 0 && A->device_of(x).type == TORC_CPU.type) {
    torc_tensor *both = lo && hi ? A->cat(pair, 2, 0) : NULL;
    if (both == NULL || loss_read2(both, range) != TORC_OK)
      return loss_finish(scope, NULL);
  }
  if (!(range[0] >= 0 && range[1] <= 1)) {
    loss_error(TORC_ERR_INVALID,
               "bce: the input holds values in [%g, %g], outside [0, 1]; "
               "bce takes probabilities (after a sigmoid): for logits use "
               "bce_with_logits, which is also stable for large ones",
               range[0], range[1]);
    return loss_finish(scope, NULL);
  }
  torc_tensor *w = NULL;
  if (s->n_weight &&
      (w = last_dim_weights(s, "weight", s->weight, s->n_weight, x)) == NULL)
    return loss_finish(scope, NULL);
  torc_tensor *lx = A->clamp(A->log(xd), 1, -100, 0, 0);
  torc_tensor *l1x = A->clamp(A->log(A->add_scalar(A->neg(xd), 1)), 1, -100,
                              0, 0);
  torc_tensor *v = A->sub(A->mul(A->sub_scalar(y, 1), l1x), A->mul(y, lx));
  torc_tensor *yd = A->detach(y);
  torc_tensor *g = A->div(
      A->sub(xd, yd),
      A->clamp(A->mul(A->add_scalar(A->neg(xd), 1), xd), 1, (double)1e-12f, 0,
              0));
  if (w) {
    v = A->mul(v, w);
    g = A->mul(g, w);
  }
  torc_tensor *e = A->add(v, A->mul(A->sub(x, xd), g));
  return loss_finish(scope, e ? loss_reduce(s, e) : NULL);
}

/* With p = pos_weight (1 when not given), lw = (p - 1) y + 1 and
 * sp = log1p(exp(-|x|)):
 *   p y relu(-x) + (1 - y) relu(x) + lw sp,
 * PyTorch's (1 - y) x + lw (log(1 + exp(-x))) regrouped so that no term
 * cancels and none overflows for |x| > 100. relu and |x| are written as
 * x * m with m = (x >= 0) constant, so the gradient is lw sigmoid(x) - p y
 * at x = 0 too. */
static torc_tensor *bce_logits_forward(void *state, const torc_tensor *x,
                                       const torc_tensor *y) {
  const loss_state *s = state;
  if (loss_check_same(s, x, y, "targets") != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  torc_dtype dt = A->dtype_of(x);
  torc_tensor *w = NULL, *pw = NULL;
  if (s->n_weight &&
      (w = last_dim_weights(s, "weight", s->weight, s->n_weight, x)) == NULL)
    return loss_finish(scope, NULL);
  if (s->n_pos_weight &&
      (pw = last_dim_weights(s, "pos_weight", s->pos_weight, s->n_pos_weight,
                             x)) == NULL)
    return loss_finish(scope, NULL);
  torc_tensor *m = A->to_dtype(
      A->ge(A->detach(x), loss_scalar(0, dt, A->device_of(x))), dt);
  torc_tensor *sgn = A->sub_scalar(A->mul_scalar(m, 2), 1); /* sign, +1 at 0 */
  torc_tensor *relu_pos = A->mul(x, m);                    /* relu(x) */
  torc_tensor *relu_neg = A->mul(x, A->sub_scalar(m, 1));  /* relu(-x) */
  torc_tensor *sp = A->log1p(A->exp(A->neg(A->mul(x, sgn))));
  torc_tensor *one_minus_y = A->add_scalar(A->neg(y), 1);
  const torc_tensor *py = pw ? A->mul(pw, y) : y;
  torc_tensor *e;
  if (pw) {
    torc_tensor *lw = A->add_scalar(A->mul(A->sub_scalar(pw, 1), y), 1);
    e = A->add(A->add(A->mul(py, relu_neg), A->mul(one_minus_y, relu_pos)),
               A->mul(lw, sp));
  } else {
    e = A->add(A->add(A->mul(py, relu_neg), A->mul(one_minus_y, relu_pos)),
               sp);
  }
  if (w && e)
    e = A->mul(e, w);
  return loss_finish(scope, e ? loss_reduce(s, e) : NULL);
}

/* ---- kl_div ---- */

/* Input log q; target p (or log p with log_target):
 *   p (log p - log q), 0 where p = 0 (xlogy), or exp(t) (t - log q). */
static torc_tensor *kl_div_forward(void *state, const torc_tensor *x,
                                   const torc_tensor *y) {
  const loss_state *s = state;
  if (loss_check_same(s, x, y,
                      s->log_target ? "log-probabilities"
                                    : "probabilities") != TORC_OK)
    return NULL;
  int scope = A->scope_begin();
  torc_tensor *e;
  if (s->log_target) {
    e = A->mul(A->exp(y), A->sub(y, x));
  } else {
    torc_dtype dt = A->dtype_of(x);
    torc_device dev = A->device_of(x);
    /* xlogy(y, y): the log's argument is 1 where y = 0, so neither the
     * value nor the gradient is NaN there. */
    torc_tensor *zero = A->eq(y, loss_scalar(0, dt, dev));
    torc_tensor *safe = A->where(zero, loss_scalar(1, dt, dev), y);
    torc_tensor *ylogy = A->mul(y, A->log(safe));
    e = A->sub(ylogy, A->mul(y, x));
  }
  return loss_finish(scope, e ? loss_reduce(s, e) : NULL);
}

/* ---- the types ---- */

static const torc_module_key plain_keys[] = {REDUCTION_KEY,
                                             {NULL, NULL, NULL}};

static const torc_module_key smooth_l1_keys[] = {
    {"beta", "where the loss turns from quadratic to linear (>= 0; 0 is l1)",
     "1.0"},
    REDUCTION_KEY,
    {NULL, NULL, NULL}};

static const torc_module_key huber_keys[] = {
    {"delta", "where the loss turns from quadratic to linear (> 0)", "1.0"},
    REDUCTION_KEY,
    {NULL, NULL, NULL}};

static const torc_module_key bce_keys[] = {
    {"weight",
     "per-column weights over the input's last dim, \"w0,w1,...\" (or one "
     "for all), or none",
     "none"},
    REDUCTION_KEY,
    {NULL, NULL, NULL}};

static const torc_module_key bce_logits_keys[] = {
    {"pos_weight",
     "weight of the positive term per column of the last dim, \"p0,p1,...\" "
     "(or one for all), or none",
     "none"},
    {"weight",
     "per-column weights over the input's last dim, \"w0,w1,...\" (or one "
     "for all), or none",
     "none"},
    REDUCTION_KEY,
    {NULL, NULL, NULL}};

static const torc_module_key kl_div_keys[] = {
    {"log_target", "yes: the target holds log-probabilities (yes or no)", "no"},
    {"reduction",
     "mean (over every element), batchmean (sum / batch size: the KL "
     "divergence), sum or none",
     "mean"},
    {NULL, NULL, NULL}};

#define LOSS_TYPE(id, nm, desc, k, fwd)                                        \
  const torc_loss_type id = {                                                  \
      .struct_size = sizeof(torc_loss_type),                                   \
      .name = nm,                                                              \
      .description = desc,                                                     \
      .keys = k,                                                               \
      .create = loss_create,                                                   \
      .destroy = loss_destroy,                                                 \
      .forward = fwd,                                                          \
      .user = (void *)nm,                                                      \
  }

LOSS_TYPE(loss_mse_type, "mse",
          "mean squared error (x - y)^2; input and target of one shape",
          plain_keys, mse_forward);
LOSS_TYPE(loss_l1_type, "l1",
          "mean absolute error |x - y|; input and target of one shape",
          plain_keys, l1_forward);
LOSS_TYPE(loss_smooth_l1_type, "smooth_l1",
          "quadratic below beta, then |x - y| - beta/2; input and target of "
          "one shape",
          smooth_l1_keys, smooth_l1_forward);
LOSS_TYPE(loss_huber_type, "huber",
          "quadratic below delta, then delta (|x - y| - delta/2); input and "
          "target of one shape",
          huber_keys, huber_forward);
LOSS_TYPE(loss_bce_type, "bce",
          "binary cross-entropy of probabilities in [0, 1] (after a sigmoid) "
          "against targets in [0, 1] of the input's shape",
          bce_keys, bce_forward);
LOSS_TYPE(loss_bce_with_logits_type, "bce_with_logits",
          "binary cross-entropy of logits (no sigmoid; stable for large "
          "ones) against targets in [0, 1] of the input's shape",
          bce_logits_keys, bce_logits_forward);
LOSS_TYPE(loss_kl_div_type, "kl_div",
          "KL divergence: input log-probabilities, target probabilities (or "
          "log-probabilities with log_target) of the input's shape",
          kl_div_keys, kl_div_forward);
