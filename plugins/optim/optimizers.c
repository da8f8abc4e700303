/* plugins/optim/optimizers.c — the optimizer types sgd, adam, adamw,
 * rmsprop and adagrad: each parses one group's hyper-parameters and updates
 * one parameter in place, op for op as torch.optim's single-tensor code
 * (PyTorch 1.13/2.x, foreach=False), so that f32 results round alike.
 * sgd, adam and adamw run the core's fused step ops (torc_sgd_step_,
 * torc_adam_step_: one kernel per parameter, the same float operations in
 * the same order) when the core has them, the composed ops otherwise;
 * their `fused` hooks let torc_optimizer_step update a whole group with
 * one multi-tensor step (torc/foreach.h).
 */
#include <math.h>
#include <stdlib.h>

#include "optim_internal.h"

#define A optim_api

/* Inside an update: leave with the op's error when it fails. */
#define TRY(lhs, expr)                                                         \
  do {                                                                         \
    if (((lhs) = (expr)) == NULL) {                                            \
      st = A->last_status();                                                   \
      if (st == TORC_OK)                                                       \
        st = TORC_ERR_INVALID;                                                 \
      goto done;                                                               \
    }                                                                          \
  } while (0)
#define TRYS(expr)                                                             \
  do {                                                                         \
    if ((st = (expr)) != TORC_OK)                                              \
      goto done;                                                               \
  } while (0)

/* x + alpha * y, as torch's x.add(y, alpha=alpha) (alpha 1 and -1 exact). */
static torc_tensor *axpy(const torc_tensor *x, const torc_tensor *y,
                         double alpha) {
  if (alpha == 1)
    return A->add(x, y);
  if (alpha == -1)
    return A->sub(x, y);
  torc_tensor *ay = A->mul_scalar(y, alpha);
  return ay ? A->add(x, ay) : NULL;
}

/* x += alpha * y in place (x.add_(y, alpha=alpha)). */
static int axpy_(torc_tensor *x, const torc_tensor *y, double alpha) {
  if (alpha == 1)
    return A->add_(x, y);
  if (alpha == -1)
    return A->sub_(x, y);
  torc_tensor *ay = A->mul_scalar(y, alpha);
  return ay ? A->add_(x, ay) : A->last_status();
}

/* x += (value * t1) * t2 (addcmul_: the product in ATen's order). */
static int addcmul_(torc_tensor *x, const torc_tensor *t1,
                    const torc_tensor *t2, double value) {
  const torc_tensor *a = value == 1 ? t1 : A->mul_scalar(t1, value);
  torc_tensor *p = a ? A->mul(a, t2) : NULL;
  return p ? A->add_(x, p) : A->last_status();
}

/* x += (value * t1) / t2 (addcdiv_). */
static int addcdiv_(torc_tensor *x, const torc_tensor *t1,
                    const torc_tensor *t2, double value) {
  const torc_tensor *a = value == 1 ? t1 : A->mul_scalar(t1, value);
  torc_tensor *q = a ? A->div(a, t2) : NULL;
  return q ? A->add_(x, q) : A->last_status();
}

static void free_hyper(void *hyper) { free(hyper); }

/* Parses the keys every type shares: lr >= 0, weight_decay >= 0, maximize. */
static int common_keys(const char *type, const char *const *keys,
                       const char *const *values, int n, double *lr,
                       double *weight_decay, int *maximize) {
  int st = optim_parse_num(type, "lr", optim_value(keys, values, n, "lr"), 0,
                           0, INFINITY, 0, lr);
  if (st == TORC_OK)
    st = optim_parse_num(type, "weight_decay",
                         optim_value(keys, values, n, "weight_decay"), 0, 0,
                         INFINITY, 0, weight_decay);
  if (st == TORC_OK)
    st = optim_parse_bool(type, "maximize",
                          optim_value(keys, values, n, "maximize"), maximize);
  return st;
}

/* ---------------------------------------------------------------------
 * sgd (torch.optim.SGD)
 * ------------------------------------------------------------------- */

typedef struct sgd_hyper {
  double momentum, dampening, weight_decay;
  int nesterov, maximize;
} sgd_hyper;

static int sgd_create(const char *const *keys, const char *const *values,
                      int n, void *user, void **hyper) {
  (void)user;
  sgd_hyper h = {0};
  double lr;
  int st = common_keys("sgd", keys, values, n, &lr, &h.weight_decay,
                       &h.maximize);
  if (st == TORC_OK)
    st = optim_parse_num("sgd", "momentum",
                         optim_value(keys, values, n, "momentum"), 0, 0,
                         INFINITY, 0, &h.momentum);
  if (st == TORC_OK)
    st = optim_parse_num("sgd", "dampening",
                         optim_value(keys, values, n, "dampening"), -INFINITY,
                         0, INFINITY, 0, &h.dampening);
  if (st == TORC_OK)
    st = optim_parse_bool("sgd", "nesterov",
                          optim_value(keys, values, n, "nesterov"),
                          &h.nesterov);
  if (st != TORC_OK)
    return st;
  if (h.nesterov && (h.momentum <= 0 || h.dampening != 0))
    return optim_error(TORC_ERR_INVALID,
                       "sgd: nesterov = yes needs momentum > 0 and dampening "
                       "= 0, but momentum = %g and dampening = %g; set "
                       "momentum (e.g. 0.9) and dampening = 0, or nesterov "
                       "= no",
                       h.momentum, h.dampening);
  sgd_hyper *p = malloc(sizeof *p);
  if (p == NULL)
    return optim_oom("sgd");
  *p = h;
  *hyper = p;
  return TORC_OK;
}

/* d_p = grad (+ wd * param); buf = d_p at the first step, else
 * momentum * buf + (1 - dampening) * d_p; param -= lr * (nesterov ?
 * d_p + momentum * buf : buf). */
static int sgd_update(void *hyper, double lr, torc_tensor *param,
                      const torc_tensor *grad, torc_tensor *const *state,
                      int64_t step) {
  const sgd_hyper *h = hyper;
  if (TORC_API_HAS(A, sgd_step_)) {
    torc_sgd_step_params p = {.lr = lr,
                              .momentum = h->momentum,
                              .dampening = h->dampening,
                              .weight_decay = h->weight_decay,
                              .nesterov = h->nesterov,
                              .maximize = h->maximize,
                              .first_step = step == 1};
    return A->sgd_step_(param, grad, h->momentum != 0 ? state[0] : NULL, &p);
  }
  int st = TORC_OK, scope = A->scope_begin();
  const torc_tensor *d_p = grad;
  if (h->maximize)
    TRY(d_p, A->neg(grad));
  if (h->weight_decay != 0)
    TRY(d_p, axpy(d_p, param, h->weight_decay));
  if (h->momentum != 0) {
    torc_tensor *buf = state[0];
    if (step == 1) {
      TRYS(A->copy_(buf, d_p)); /* PyTorch: buf = clone(d_p) */
    } else {
      TRYS(A->mul_scalar_(buf, h->momentum));
      TRYS(axpy_(buf, d_p, 1 - h->dampening));
    }
    if (h->nesterov)
      TRY(d_p, axpy(d_p, buf, h->momentum));
    else
      d_p = buf;
  }
  TRYS(axpy_(param, d_p, -lr));
done:
  A->scope_end(scope);
  return st;
}

/* The same update as one fused step, for torc_optimizer_step's
 * multi-tensor path (the group in a handful of kernels). */
static int sgd_fused(void *hyper, double lr, int64_t step,
                     torc_optimizer_fused *out) {
  const sgd_hyper *h = hyper;
  if (!TORC_API_HAS(A, sgd_step_))
    return 0;
  out->kind = TORC_OPTIMIZER_FUSED_SGD;
  out->sgd = (torc_sgd_step_params){.lr = lr,
                                    .momentum = h->momentum,
                                    .dampening = h->dampening,
                                    .weight_decay = h->weight_decay,
                                    .nesterov = h->nesterov,
                                    .maximize = h->maximize,
                                    .first_step = step == 1};
  return 1;
}

static const torc_module_key sgd_keys[] = {
    {"lr", "learning rate (a number >= 0)", NULL},
    {"momentum", "momentum factor (a number >= 0; 0 = plain SGD)", "0"},
    {"dampening", "dampening of the momentum (a number)", "0"},
    {"nesterov", "Nesterov momentum (yes | no; needs momentum > 0 and "
                 "dampening = 0)", "no"},
    {"weight_decay", "L2 penalty added to the gradient (a number >= 0)", "0"},
    {"maximize", "maximize the objective instead of minimizing (yes | no)",
     "no"},
    {NULL, NULL, NULL},
};

static const char *const sgd_state[] = {"momentum_buffer", NULL};

/* PyTorch keeps a momentum buffer only when momentum is on. */
static int sgd_state_used(void *hyper, int i) {
  (void)i;
  return ((const sgd_hyper *)hyper)->momentum != 0;
}

const torc_optimizer_type optim_sgd_type = {
    .struct_size = sizeof(torc_optimizer_type),
    .name = "sgd",
    .description = "stochastic gradient descent with optional momentum, "
                   "Nesterov momentum and weight decay (torch.optim.SGD)",
    .keys = sgd_keys,
    .state_names = sgd_state,
    .create = sgd_create,
    .destroy = free_hyper,
    .update = sgd_update,
    .user = NULL,
    .state_used = sgd_state_used,
    .fused = sgd_fused,
};

/* ---------------------------------------------------------------------
 * adam and adamw (torch.optim.Adam, torch.optim.AdamW)
 * ------------------------------------------------------------------- */

typedef struct adam_hyper {
  double beta1, beta2, eps, weight_decay;
  int amsgrad, maximize;
  int decoupled; /* adamw */
} adam_hyper;

static int adam_parse(const char *type, int decoupled,
                      const char *const *keys, const char *const *values,
                      int n, void **hyper) {
  adam_hyper h = {0};
  h.decoupled = decoupled;
  double lr;
  int st = common_keys(type, keys, values, n, &lr, &h.weight_decay,
                       &h.maximize);
  if (st == TORC_OK)
    st = optim_parse_num(type, "eps", optim_value(keys, values, n, "eps"), 0,
                         0, INFINITY, 0, &h.eps);
  if (st == TORC_OK)
    st = optim_parse_bool(type, "amsgrad",
                          optim_value(keys, values, n, "amsgrad"), &h.amsgrad);
  if (st != TORC_OK)
    return st;
  const char *bv = optim_value(keys, values, n, "betas");
  double b[3];
  int nb = 0;
  st = optim_parse_list(type, "betas", bv, b, 3, &nb);
  if (st != TORC_OK)
    return st;
  if (nb != 2)
    return optim_error(TORC_ERR_INVALID,
                       "%s: key 'betas' = '%s' has %d number(s), not 2; give "
                       "two numbers in [0, 1), e.g. betas=0.9,0.999",
                       type, bv ? bv : "", nb);
  for (int i = 0; i < 2; i++)
    if (!(b[i] >= 0 && b[i] < 1))
      return optim_error(TORC_ERR_INVALID,
                         "%s: key 'betas' = '%s': beta%d = %g is not in "
                         "[0, 1); give two numbers in [0, 1), e.g. "
                         "betas=0.9,0.999",
                         type, bv, i + 1, b[i]);
  h.beta1 = b[0];
  h.beta2 = b[1];
  adam_hyper *p = malloc(sizeof *p);
  if (p == NULL)
    return optim_oom(type);
  *p = h;
  *hyper = p;
  return TORC_OK;
}

static int adam_create(const char *const *keys, const char *const *values,
                       int n, void *user, void **hyper) {
  (void)user;
  return adam_parse("adam", 0, keys, values, n, hyper);
}

static int adamw_create(const char *const *keys, const char *const *values,
                        int n, void *user, void **hyper) {
  (void)user;
  return adam_parse("adamw", 1, keys, values, n, hyper);
}

/* adam: g = grad (+ wd * param); adamw: param *= 1 - lr * wd. Then
 * m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
 * (amsgrad: vmax = max(vmax, v), used for v);
 * param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). */
static int adam_update(void *hyper, double lr, torc_tensor *param,
                       const torc_tensor *grad, torc_tensor *const *state,
                       int64_t step) {
  const adam_hyper *h = hyper;
  torc_tensor *exp_avg = state[0], *exp_avg_sq = state[1];
  torc_tensor *max_exp_avg_sq = state[2];
  if (TORC_API_HAS(A, adam_step_)) {
    torc_adam_step_params p = {.lr = lr,
                               .beta1 = h->beta1,
                               .beta2 = h->beta2,
                               .eps = h->eps,
                               .weight_decay = h->weight_decay,
                               .step = step,
                               .amsgrad = h->amsgrad,
                               .maximize = h->maximize,
                               .decoupled = h->decoupled};
    return A->adam_step_(param, grad, exp_avg, exp_avg_sq,
                         h->amsgrad ? max_exp_avg_sq : NULL, &p);
  }
  int st = TORC_OK, scope = A->scope_begin();
  const torc_tensor *g = grad;
  torc_tensor *t = NULL, *denom = NULL;
  if (h->maximize)
    TRY(g, A->neg(grad));
  if (h->decoupled)
    TRYS(A->mul_scalar_(param, 1 - lr * h->weight_decay));
  else if (h->weight_decay != 0)
    TRY(g, axpy(g, param, h->weight_decay));
  TRYS(A->mul_scalar_(exp_avg, h->beta1));
  TRYS(axpy_(exp_avg, g, 1 - h->beta1));
  TRYS(A->mul_scalar_(exp_avg_sq, h->beta2));
  TRYS(addcmul_(exp_avg_sq, g, g, 1 - h->beta2));
  double bias_correction1 = 1 - pow(h->beta1, (double)step);
  double bias_correction2 = 1 - pow(h->beta2, (double)step);
  double step_size = lr / bias_correction1;
  double bias_correction2_sqrt = sqrt(bias_correction2);
  const torc_tensor *v = exp_avg_sq;
  if (h->amsgrad) {
    TRY(t, A->maximum(max_exp_avg_sq, exp_avg_sq));
    TRYS(A->copy_(max_exp_avg_sq, t));
    v = max_exp_avg_sq;
  }
  TRY(t, A->sqrt(v));
  TRY(denom, A->div_scalar(t, bias_correction2_sqrt));
  TRYS(A->add_scalar_(denom, h->eps));
  TRYS(addcdiv_(param, exp_avg, denom, -step_size));
done:
  A->scope_end(scope);
  return st;
}

/* The same update as one fused step (see sgd_fused). */
static int adam_fused(void *hyper, double lr, int64_t step,
                      torc_optimizer_fused *out) {
  const adam_hyper *h = hyper;
  if (!TORC_API_HAS(A, adam_step_))
    return 0;
  out->kind = TORC_OPTIMIZER_FUSED_ADAM;
  out->adam = (torc_adam_step_params){.lr = lr,
                                      .beta1 = h->beta1,
                                      .beta2 = h->beta2,
                                      .eps = h->eps,
                                      .weight_decay = h->weight_decay,
                                      .step = step,
                                      .amsgrad = h->amsgrad,
                                      .maximize = h->maximize,
                                      .decoupled = h->decoupled};
  return 1;
}

static const torc_module_key adam_keys[] = {
    {"lr", "learning rate (a number >= 0)", "0.001"},
    {"betas", "decay rates of the running averages of the gradient and its "
              "square (two numbers in [0, 1), e.g. 0.9,0.999)",
     "0.9,0.999"},
    {"eps", "added to the denominator (a number >= 0)", "1e-8"},
    {"weight_decay", "L2 penalty added to the gradient (a number >= 0)", "0"},
    {"amsgrad", "use the maximum of the squared-gradient averages (AMSGrad; "
                "yes | no)",
     "no"},
    {"maximize", "maximize the objective instead of minimizing (yes | no)",
     "no"},
    {NULL, NULL, NULL},
};

static const torc_module_key adamw_keys[] = {
    {"lr", "learning rate (a number >= 0)", "0.001"},
    {"betas", "decay rates of the running averages of the gradient and its "
              "square (two numbers in [0, 1), e.g. 0.9,0.999)",
     "0.9,0.999"},
    {"eps", "added to the denominator (a number >= 0)", "1e-8"},
    {"weight_decay", "decoupled weight decay: param *= 1 - lr * weight_decay "
                     "each step (a number >= 0)",
     "0.01"},
    {"amsgrad", "use the maximum of the squared-gradient averages (AMSGrad; "
                "yes | no)",
     "no"},
    {"maximize", "maximize the objective instead of minimizing (yes | no)",
     "no"},
    {NULL, NULL, NULL},
};

static const char *const adam_state[] = {"exp_avg", "exp_avg_sq",
                                         "max_exp_avg_sq", NULL};

/* max_exp_avg_sq exists only with amsgrad. */
static int adam_state_used(void *hyper, int i) {
  return i != 2 || ((const adam_hyper *)hyper)->amsgrad;
}

const torc_optimizer_type optim_adam_type = {
    .struct_size = sizeof(torc_optimizer_type),
    .name = "adam",
    .description = "Adam, with optional AMSGrad and L2 weight decay "
                   "(torch.optim.Adam)",
    .keys = adam_keys,
    .state_names = adam_state,
    .create = adam_create,
    .destroy = free_hyper,
    .update = adam_update,
    .user = NULL,
    .state_used = adam_state_used,
    .fused = adam_fused,
};

const torc_optimizer_type optim_adamw_type = {
    .struct_size = sizeof(torc_optimizer_type),
    .name = "adamw",
    .description = "Adam with decoupled weight decay (torch.optim.AdamW)",
    .keys = adamw_keys,
    .state_names = adam_state,
    .create = adamw_create,
    .destroy = free_hyper,
    .update = adam_update,
    .user = NULL,
    .state_used = adam_state_used,
    .fused = adam_fused,
};

/* ---------------------------------------------------------------------
 * rmsprop (torch.optim.RMSprop)
 * ------------------------------------------------------------------- */

typedef struct rmsprop_hyper {
  double alpha, eps, weight_decay, momentum;
  int centered, maximize;
} rmsprop_hyper;

static int rmsprop_create(const char *const *keys, const char *const *values,
                          int n, void *user, void **hyper) {
  (void)user;
  rmsprop_hyper h = {0};
  double lr;
  int st = common_keys("rmsprop", keys, values, n, &lr, &h.weight_decay,
                       &h.maximize);
  if (st == TORC_OK)
    st = optim_parse_num("rmsprop", "alpha",
                         optim_value(keys, values, n, "alpha"), 0, 0,
                         INFINITY, 0, &h.alpha);
  if (st == TORC_OK)
    st = optim_parse_num("rmsprop", "eps", optim_value(keys, values, n, "eps"),
                         0, 0, INFINITY, 0, &h.eps);
  if (st == TORC_OK)
    st = optim_parse_num("rmsprop", "momentum",
                         optim_value(keys, values, n, "momentum"), 0, 0,
                         INFINITY, 0, &h.momentum);
  if (st == TORC_OK)
    st = optim_parse_bool("rmsprop", "centered",
                          optim_value(keys, values, n, "centered"),
                          &h.centered);
  if (st != TORC_OK)
    return st;
  rmsprop_hyper *p = malloc(sizeof *p);
  if (p == NULL)
    return optim_oom("rmsprop");
  *p = h;
  *hyper = p;
  return TORC_OK;
}

/* g = grad (+ wd * param); sq = alpha sq + (1 - alpha) g^2; avg = sqrt(sq)
 * (centered: ga = alpha ga + (1 - alpha) g, avg = sqrt(sq - ga^2)) + eps;
 * momentum: buf = momentum buf + g / avg, param -= lr buf; else
 * param -= lr g / avg. */
static int rmsprop_update(void *hyper, double lr, torc_tensor *param,
                          const torc_tensor *grad, torc_tensor *const *state,
                          int64_t step) {
  (void)step;
  const rmsprop_hyper *h = hyper;
  torc_tensor *square_avg = state[0], *buf = state[1], *grad_avg = state[2];
  int st = TORC_OK, scope = A->scope_begin();
  const torc_tensor *g = grad;
  torc_tensor *t = NULL, *avg = NULL;
  if (h->maximize)
    TRY(g, A->neg(grad));
  if (h->weight_decay != 0)
    TRY(g, axpy(g, param, h->weight_decay));
  TRYS(A->mul_scalar_(square_avg, h->alpha));
  TRYS(addcmul_(square_avg, g, g, 1 - h->alpha));
  if (h->centered) {
    TRYS(A->mul_scalar_(grad_avg, h->alpha));
    TRYS(axpy_(grad_avg, g, 1 - h->alpha));
    /* square_avg.addcmul(grad_avg, grad_avg, value=-1): the same bits as
     * square_avg - grad_avg * grad_avg. */
    TRY(t, A->mul(grad_avg, grad_avg));
    TRY(t, A->sub(square_avg, t));
    TRY(avg, A->sqrt(t));
  } else {
    TRY(avg, A->sqrt(square_avg));
  }
  TRYS(A->add_scalar_(avg, h->eps));
  if (h->momentum > 0) {
    TRYS(A->mul_scalar_(buf, h->momentum));
    TRYS(addcdiv_(buf, g, avg, 1));
    TRYS(axpy_(param, buf, -lr));
  } else {
    TRYS(addcdiv_(param, g, avg, -lr));
  }
done:
  A->scope_end(scope);
  return st;
}

static const torc_module_key rmsprop_keys[] = {
    {"lr", "learning rate (a number >= 0)", "0.01"},
    {"alpha", "smoothing constant of the squared-gradient average (a number "
              ">= 0)",
     "0.99"},
    {"eps", "added to the denominator (a number >= 0)", "1e-8"},
    {"weight_decay", "L2 penalty added to the gradient (a number >= 0)", "0"},
    {"momentum", "momentum factor (a number >= 0)", "0"},
    {"centered", "normalize by the estimated variance of the gradient "
                 "(yes | no)",
     "no"},
    {"maximize", "maximize the objective instead of minimizing (yes | no)",
     "no"},
    {NULL, NULL, NULL},
};

static const char *const rmsprop_state[] = {"square_avg", "momentum_buffer",
                                            "grad_avg", NULL};

/* momentum_buffer with momentum > 0, grad_avg when centered. */
static int rmsprop_state_used(void *hyper, int i) {
  const rmsprop_hyper *h = hyper;
  return i == 0 || (i == 1 && h->momentum > 0) || (i == 2 && h->centered);
}

const torc_optimizer_type optim_rmsprop_type = {
    .struct_size = sizeof(torc_optimizer_type),
    .name = "rmsprop",
    .description = "RMSprop, with optional momentum and centering "
                   "(torch.optim.RMSprop)",
    .keys = rmsprop_keys,
    .state_names = rmsprop_state,
    .create = rmsprop_create,
    .destroy = free_hyper,
    .update = rmsprop_update,
    .user = NULL,
    .state_used = rmsprop_state_used,
};

/* ---------------------------------------------------------------------
 * adagrad (torch.optim.Adagrad)
 * ------------------------------------------------------------------- */

typedef struct adagrad_hyper {
  double lr_decay, weight_decay, initial_accumulator_value, eps;
  int maximize;
} adagrad_hyper;

static int adagrad_create(const char *const *keys, const char *const *values,
                          int n, void *user, void **hyper) {
  (void)user;
  adagrad_hyper h = {0};
  double lr;
  int st = common_keys("adagrad", keys, values, n, &lr, &h.weight_decay,
                       &h.maximize);
  if (st == TORC_OK)
    st = optim_parse_num("adagrad", "lr_decay",
                         optim_value(keys, values, n, "lr_decay"), 0, 0,
                         INFINITY, 0, &h.lr_decay);
  if (st == TORC_OK)
    st = optim_parse_num(
        "adagrad", "initial_accumulator_value",
        optim_value(keys, values, n, "initial_accumulator_value"), 0, 0,
        INFINITY, 0, &h.initial_accumulator_value);
  if (st == TORC_OK)
    st = optim_parse_num("adagrad", "eps", optim_value(keys, values, n, "eps"),
                         0, 0, INFINITY, 0, &h.eps);
  if (st != TORC_OK)
    return st;
  adagrad_hyper *p = malloc(sizeof *p);
  if (p == NULL)
    return optim_oom("adagrad");
  *p = h;
  *hyper = p;
  return TORC_OK;
}

/* clr = lr / (1 + (t - 1) lr_decay); g = grad (+ wd * param);
 * sum += g^2 (sum starts at initial_accumulator_value);
 * param -= clr g / (sqrt(sum) + eps). */
static int adagrad_update(void *hyper, double lr, torc_tensor *param,
                          const torc_tensor *grad, torc_tensor *const *state,
                          int64_t step) {
  const adagrad_hyper *h = hyper;
  torc_tensor *sum = state[0];
  int st = TORC_OK, scope = A->scope_begin();
  const torc_tensor *g = grad;
  torc_tensor *std = NULL;
  double clr = lr / (1 + ((double)step - 1) * h->lr_decay);
  if (h->maximize)
    TRY(g, A->neg(grad));
  if (h->weight_decay != 0)
    TRY(g, axpy(g, param, h->weight_decay));
  /* PyTorch fills the sum with initial_accumulator_value when it creates
   * the state; the core hands it over as zeros before the first update. */
  if (step == 1 && h->initial_accumulator_value != 0)
    TRYS(A->fill_(sum, h->initial_accumulator_value));
  TRYS(addcmul_(sum, g, g, 1));
  TRY(std, A->sqrt(sum));
  TRYS(A->add_scalar_(std, h->eps));
  TRYS(addcdiv_(param, g, std, -clr));
done:
  A->scope_end(scope);
  return st;
}

static const torc_module_key adagrad_keys[] = {
    {"lr", "learning rate (a number >= 0)", "0.01"},
    {"lr_decay", "learning-rate decay: lr / (1 + (step - 1) * lr_decay) (a "
                 "number >= 0)",
     "0"},
    {"weight_decay", "L2 penalty added to the gradient (a number >= 0)", "0"},
    {"initial_accumulator_value", "starting value of the sum of squared "
                                  "gradients (a number >= 0)",
     "0"},
    {"eps", "added to the denominator (a number >= 0)", "1e-10"},
    {"maximize", "maximize the objective instead of minimizing (yes | no)",
     "no"},
    {NULL, NULL, NULL},
};

static const char *const adagrad_state[] = {"sum", NULL};

const torc_optimizer_type optim_adagrad_type = {
    .struct_size = sizeof(torc_optimizer_type),
    .name = "adagrad",
    .description = "Adagrad, with optional learning-rate decay "
                   "(torch.optim.Adagrad)",
    .keys = adagrad_keys,
    .state_names = adagrad_state,
    .create = adagrad_create,
    .destroy = free_hyper,
    .update = adagrad_update,
    .user = NULL,
};
