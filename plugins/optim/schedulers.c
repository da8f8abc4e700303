/* plugins/optim/schedulers.c — the learning-rate scheduler types step,
 * multistep, exponential, cosine (closed forms of torch.optim.lr_scheduler's
 * StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR), plateau
 * (ReduceLROnPlateau, stateful), onecycle (OneCycleLR) and cyclic
 * (CyclicLR); the last two cycle the momentum too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_internal.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Most milestones multistep takes. */
#define MAX_MILESTONES 64

static void free_state(void *state) { free(state); }

/* Copies a parsed state into a new heap block for *out. */
static int new_state(const char *type, const void *src, size_t size,
                     void **out) {
  void *p = malloc(size);
  if (p == NULL)
    return optim_oom(type);
  memcpy(p, src, size);
  *out = p;
  return TORC_OK;
}

/* The closed forms below are those PyTorch's schedulers use when stepped
 * to an epoch (_get_closed_form_lr), and that SequentialLR uses after a
 * warm-up; they equal the recursive get_lr sequence to a few ulps and do
 * not depend on last_lr. */

/* ---------------------------------------------------------------------
 * step: initial_lr * gamma^floor(t / step_size)
 * ------------------------------------------------------------------- */

typedef struct step_state {
  int64_t step_size;
  double gamma;
} step_state;

static int step_create(const char *const *keys, const char *const *values,
                       int n, void *user, void **state) {
  (void)user;
  step_state s;
  int st = optim_parse_int("step", "step_size",
                           optim_value(keys, values, n, "step_size"), 1,
                           INT64_MAX, &s.step_size);
  if (st == TORC_OK)
    st = optim_parse_num("step", "gamma", optim_value(keys, values, n, "gamma"),
                         -INFINITY, 0, INFINITY, 0, &s.gamma);
  return st ? st : new_state("step", &s, sizeof s, state);
}

static double step_lr(void *state, int group, double initial_lr,
                      double last_lr, int64_t t, double metric) {
  (void)group, (void)last_lr, (void)metric;
  const step_state *s = state;
  return initial_lr * pow(s->gamma, (double)(t / s->step_size));
}

static const torc_module_key step_keys[] = {
    {"step_size", "steps between two decays (an integer >= 1)", NULL},
    {"gamma", "factor applied every step_size steps (a number)", "0.1"},
    {NULL, NULL, NULL},
};

const torc_scheduler_type optim_step_type = {
    .struct_size = sizeof(torc_scheduler_type),
    .name = "step",
    .description = "multiplies the lr by gamma every step_size steps "
                   "(StepLR)",
    .keys = step_keys,
    .create = step_create,
    .destroy = free_state,
    .lr = step_lr,
};

/* ---------------------------------------------------------------------
 * multistep: initial_lr * gamma^(milestones <= t)
 * ------------------------------------------------------------------- */

typedef struct multistep_state {
  double gamma;
  int n;
  int64_t milestones[MAX_MILESTONES]; /* sorted */
} multistep_state;

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int multistep_create(const char *const *keys, const char *const *values,
                            int n, void *user, void **state) {
  (void)user;
  multistep_state s = {0};
  int st = optim_parse_num("multistep", "gamma",
                           optim_value(keys, values, n, "gamma"), -INFINITY, 0,
                           INFINITY, 0, &s.gamma);
  if (st != TORC_OK)
    return st;
  const char *mv = optim_value(keys, values, n, "milestones");
  double m[MAX_MILESTONES];
  st = optim_parse_list("multistep", "milestones", mv, m, MAX_MILESTONES,
                        &s.n);
  if (st != TORC_OK)
    return st;
  if (s.n == 0)
    return optim_error(TORC_ERR_INVALID,
                       "multistep: key 'milestones' is empty; give the steps "
                       "at which to decay, e.g. milestones=30,80");
  for (int i = 0; i < s.n; i++) {
    if (m[i] != floor(m[i]) || m[i] < 0 || m[i] > 1e15)
      return optim_error(TORC_ERR_INVALID,
                         "multistep: key 'milestones' = '%s': %g is not an "
                         "integer >= 0; give step numbers, e.g. "
                         "milestones=30,80",
                         mv, m[i]);
    s.milestones[i] = (int64_t)m[i];
  }
  /* PyTorch counts repeated milestones (a Counter) and sorts them. */
  qsort(s.milestones, (size_t)s.n, sizeof s.milestones[0], cmp_i64);
  return new_state("multistep", &s, sizeof s, state);
}

static double multistep_lr(void *state, int group, double initial_lr,
                           double last_lr, int64_t t, double metric) {
  (void)group, (void)last_lr, (void)metric;
  const multistep_state *s = state;
  int k = 0; /* bisect_right(milestones, t) */
  while (k < s->n && s->milestones[k] <= t)
    k++;
  return initial_lr * pow(s->gamma, (double)k);
}

static const torc_module_key multistep_keys[] = {
    {"milestones", "steps at which the lr is multiplied by gamma (integers "
                   "separated by commas, e.g. 30,80)",
     NULL},
    {"gamma", "factor applied at each milestone (a number)", "0.1"},
    {NULL, NULL, NULL},
};

const torc_scheduler_type optim_multistep_type = {
    .struct_size = sizeof(torc_scheduler_type),
    .name = "multistep",
    .description = "multiplies the lr by gamma at each milestone step "
                   "(MultiStepLR)",
    .keys = multistep_keys,
    .create = multistep_create,
    .destroy = free_state,
    .lr = multistep_lr,
};

/* ---------------------------------------------------------------------
 * exponential: initial_lr * gamma^t
 * ------------------------------------------------------------------- */

static int exponential_create(const char *const *keys,
                              const char *const *values, int n, void *user,
                              void **state) {
  (void)user;
  double gamma;
  int st = optim_parse_num("exponential", "gamma",
                           optim_value(keys, values, n, "gamma"), -INFINITY, 0,
                           INFINITY, 0, &gamma);
  return st ? st : new_state("exponential", &gamma, sizeof gamma, state);
}

static double exponential_lr(void *state, int group, double initial_lr,
                             double last_lr, int64_t t, double metric) {
  (void)group, (void)last_lr, (void)metric;
  return initial_lr * pow(*(const double *)state, (double)t);
}

static const torc_module_key exponential_keys[] = {
    {"gamma", "factor applied every step (a number, e.g. 0.95)", NULL},
    {NULL, NULL, NULL},
};

const torc_scheduler_type optim_exponential_type = {
    .struct_size = sizeof(torc_scheduler_type),
    .name = "exponential",
    .description = "multiplies the lr by gamma every step (ExponentialLR)",
    .keys = exponential_keys,
    .create = exponential_create,
    .destroy = free_state,
    .lr = exponential_lr,
};

/* ---------------------------------------------------------------------
 * cosine: eta_min + (initial_lr - eta_min) (1 + cos(pi t / t_max)) / 2
 * ------------------------------------------------------------------- */

typedef struct cosine_state {
  int64_t t_max;
  double eta_min;
} cosine_state;

static int cosine_create(const char *const *keys, const char *const *values,
                         int n, void *user, void **state) {
  (void)user;
  cosine_state s;
  int st = optim_parse_int("cosine", "t_max",
                           optim_value(keys, values, n, "t_max"), 1, INT64_MAX,
                           &s.t_max);
  if (st == TORC_OK)
    st = optim_parse_num("cosine", "eta_min",
                         optim_value(keys, values, n, "eta_min"), -INFINITY, 0,
                         INFINITY, 0, &s.eta_min);
  return st ? st : new_state("cosine", &s, sizeof s, state);
}

/* Past t_max the curve rises again (period 2 t_max), as PyTorch's. */
static double cosine_lr(void *state, int group, double initial_lr,
                        double last_lr, int64_t t, double metric) {
  (void)group, (void)last_lr, (void)metric;
  const cosine_state *s = state;
  return s->eta_min + (initial_lr - s->eta_min) *
                          (1 + cos(M_PI * (double)t / (double)s->t_max)) / 2;
}

static const torc_module_key cosine_keys[] = {
    {"t_max", "steps from the initial lr down to eta_min (an integer >= 1)",
     NULL},
    {"eta_min", "the lowest lr (a number)", "0"},
    {NULL, NULL, NULL},
};

const torc_scheduler_type optim_cosine_type = {
    .struct_size = sizeof(torc_scheduler_type),
    .name = "cosine",
    .description = "cosine annealing from the lr to eta_min over t_max steps "
                   "(CosineAnnealingLR)",
    .keys = cosine_keys,
    .create = cosine_create,
    .destroy = free_state,
    .lr = cosine_lr,
};

/* ---------------------------------------------------------------------
 * plateau (ReduceLROnPlateau)
 * ------------------------------------------------------------------- */

typedef struct plateau_state {
  /* options */
  int mode_max, threshold_abs;
  double factor, threshold, min_lr, eps;
  int64_t patience, cooldown;
  /* counters (saved) */
  double best;
  int64_t num_bad_epochs, cooldown_counter;
  int64_t last_t; /* the step the counters were last updated at */
  int reduce;     /* whether that step reduces the lrs */
} plateau_state;

static int plateau_create(const char *const *keys, const char *const *values,
                          int n, void *user, void **state) {
  (void)user;
  static const char *const modes[] = {"min", "max"};
  static const char *const tmodes[] = {"rel", "abs"};
  plateau_state s = {0};
#define V(k) optim_value(keys, values, n, k)
  int st = optim_parse_choice("plateau", "mode", V("mode"), modes, 2,
                              &s.mode_max);
  if (st == TORC_OK)
    st = optim_parse_num("plateau", "factor", V("factor"), 0, 1, 1, 1,
                         &s.factor);
  if (st == TORC_OK)
    st = optim_parse_int("plateau", "patience", V("patience"), 0, INT64_MAX,
                         &s.patience);
  if (st == TORC_OK)
    st = optim_parse_num("plateau", "threshold", V("threshold"), 0, 0,
                         INFINITY, 0, &s.threshold);
  if (st == TORC_OK)
    st = optim_parse_choice("plateau", "threshold_mode", V("threshold_mode"),
                            tmodes, 2, &s.threshold_abs);
  if (st == TORC_OK)
    st = optim_parse_int("plateau", "cooldown", V("cooldown"), 0, INT64_MAX,
                         &s.cooldown);
  if (st == TORC_OK)
    st = optim_parse_num("plateau", "min_lr", V("min_lr"), 0, 0, INFINITY, 0,
                         &s.min_lr);
  if (st == TORC_OK)
    st = optim_parse_num("plateau", "eps", V("eps"), 0, 0, INFINITY, 0,
                         &s.eps);
#undef V
  if (st != TORC_OK)
    return st;
  s.best = s.mode_max ? -INFINITY : INFINITY;
  return new_state("plateau", &s, sizeof s, state);
}

static int plateau_is_better(const plateau_state *s, double a) {
  if (!s->mode_max && !s->threshold_abs)
    return a < s->best * (1. - s->threshold);
  if (!s->mode_max)
    return a < s->best - s->threshold;
  if (!s->threshold_abs)
    return a > s->best * (s->threshold + 1.);
  return a > s->best + s->threshold;
}

/* The counters move once per step (the first group's call); every group's
 * lr is then cut by factor, down to min_lr, when the cut exceeds eps. */
static double plateau_lr(void *state, int group, double initial_lr,
                         double last_lr, int64_t t, double metric) {
  (void)group, (void)initial_lr;
  plateau_state *s = state;
  if (isnan(metric)) {
    optim_error(TORC_ERR_INVALID,
                "plateau: step %lld has no metric (NaN); pass the monitored "
                "value (e.g. the validation loss) to torc_scheduler_step",
                (long long)t);
    return NAN;
  }
  if (t != s->last_t) {
    s->last_t = t;
    if (plateau_is_better(s, metric)) {
      s->best = metric;
      s->num_bad_epochs = 0;
    } else {
      s->num_bad_epochs++;
    }
    if (s->cooldown_counter > 0) {
      s->cooldown_counter--;
      s->num_bad_epochs = 0; /* bad epochs in cooldown do not count */
    }
    s->reduce = s->num_bad_epochs > s->patience;
    if (s->reduce) {
      s->cooldown_counter = s->cooldown;
      s->num_bad_epochs = 0;
    }
  }
  if (s->reduce) {
    double new_lr = fmax(last_lr * s->factor, s->min_lr);
    if (last_lr - new_lr > s->eps)
      return new_lr;
  }
  return last_lr;
}

static int plateau_save(void *state, char *buf, size_t size) {
  const plateau_state *s = state;
  return snprintf(buf, size,
                  "best=%.17g num_bad_epochs=%lld cooldown_counter=%lld "
                  "last_epoch=%lld reduce=%d",
                  s->best, (long long)s->num_bad_epochs,
                  (long long)s->cooldown_counter, (long long)s->last_t,
                  s->reduce);
}

static int plateau_load(void *state, const char *text) {
  plateau_state *s = state;
  double best;
  long long bad, cool, last;
  int reduce, used = 0;
  if (text == NULL ||
      sscanf(text,
             "best=%lf num_bad_epochs=%lld cooldown_counter=%lld "
             "last_epoch=%lld reduce=%d%n",
             &best, &bad, &cool, &last, &reduce, &used) != 5 ||
      text[used] != '\0' || isnan(best) || bad < 0 || cool < 0 || last < 0 ||
      (reduce != 0 && reduce != 1))
    return optim_error(TORC_ERR_INVALID,
                       "plateau: saved state '%s' is not 'best=X "
                       "num_bad_epochs=N cooldown_counter=N last_epoch=N "
                       "reduce=0|1'; load a checkpoint written by a plateau "
                       "scheduler",
                       text ? text : "");
  s->best = best;
  s->num_bad_epochs = bad;
  s->cooldown_counter = cool;
  s->last_t = last;
  s->reduce = reduce;
  return TORC_OK;
}

static const torc_module_key plateau_keys[] = {
    {"mode", "min: reduce when the metric stops decreasing; max: when it "
             "stops increasing (min | max)",
     "min"},
    {"factor", "the lr is multiplied by factor (a number in (0, 1))", "0.1"},
    {"patience", "steps without improvement before reducing (an integer >= "
                 "0)",
     "10"},
    {"threshold", "least change counted as an improvement (a number >= 0)",
     "1e-4"},
    {"threshold_mode", "rel: best * (1 -/+ threshold); abs: best -/+ "
                       "threshold (rel | abs)",
     "rel"},
    {"cooldown", "steps to wait after a reduction before counting again (an "
                 "integer >= 0)",
     "0"},
    {"min_lr", "the lr never goes below this (a number >= 0)", "0"},
    {"eps", "reductions smaller than this are skipped (a number >= 0)",
     "1e-8"},
    {NULL, NULL, NULL},
};

const torc_scheduler_type optim_plateau_type = {
    .struct_size = sizeof(torc_scheduler_type),
    .name = "plateau",
    .description = "reduces the lr by factor when a metric stops improving "
                   "(ReduceLROnPlateau; torc_scheduler_step takes the metric)",
    .keys = plateau_keys,
    .create = plateau_create,
    .destroy = free_state,
    .lr = plateau_lr,
    .save = plateau_save,
    .load = plateau_load,
};

/* ---------------------------------------------------------------------
 * onecycle (OneCycleLR)
 * ------------------------------------------------------------------- */

typedef struct onecycle_state {
  double max_lr; /* 0: each group's initial lr */
  int64_t total_steps;
  double pct_start, div_factor, final_div_factor;
  int linear, three_phase;
  int cycle_momentum;
  double base_momentum, max_momentum;
} onecycle_state;

/* A momentum key: a number >= 0. */
static int parse_momentum(const char *type, const char *key, const char *v,
                          double *out) {
  return optim_parse_num(type, key, v, 0, 0, INFINITY, 0, out);
}

static int onecycle_create(const char *const *keys, const char *const *values,
                           int n, void *user, void **state) {
  (void)user;
  static const char *const strategies[] = {"cos", "linear"};
  onecycle_state s = {0};
#define V(k) optim_value(keys, values, n, k)
  int st = TORC_OK;
  const char *mv = V("max_lr");
  if (mv && mv[0] != '\0')
    st = optim_parse_num("onecycle", "max_lr", mv, 0, 1, INFINITY, 0,
                         &s.max_lr);
  const char *tv = V("total_steps"), *ev = V("epochs"),
             *sv = V("steps_per_epoch");
  if (st == TORC_OK && tv && tv[0] != '\0') {
    st = optim_parse_int("onecycle", "total_steps", tv, 1, INT64_MAX / 4,
                         &s.total_steps);
  } else if (st == TORC_OK && ev && ev[0] != '\0' && sv && sv[0] != '\0') {
    int64_t e = 0, spe = 0;
    st = optim_parse_int("onecycle", "epochs", ev, 1, INT32_MAX, &e);
    if (st == TORC_OK)
      st = optim_parse_int("onecycle", "steps_per_epoch", sv, 1, INT32_MAX,
                           &spe);
    s.total_steps = e * spe;
  } else if (st == TORC_OK) {
    st = optim_error(TORC_ERR_INVALID,
                     "onecycle: no cycle length; give total_steps, or both "
                     "epochs and steps_per_epoch");
  }
  if (st == TORC_OK)
    st = optim_parse_num("onecycle", "pct_start", V("pct_start"), 0, 0, 1, 0,
                         &s.pct_start);
  if (st == TORC_OK)
    st = optim_parse_choice("onecycle", "anneal_strategy",
                            V("anneal_strategy"), strategies, 2, &s.linear);
  if (st == TORC_OK)
    st = optim_parse_bool("onecycle", "cycle_momentum", V("cycle_momentum"),
                          &s.cycle_momentum);
  if (st == TORC_OK)
    st = parse_momentum("onecycle", "base_momentum", V("base_momentum"),
                        &s.base_momentum);
  if (st == TORC_OK)
    st = parse_momentum("onecycle", "max_momentum", V("max_momentum"),
                        &s.max_momentum);
  if (st == TORC_OK)
    st = optim_parse_num("onecycle", "div_factor", V("div_factor"), 0, 1,
                         INFINITY, 0, &s.div_factor);
  if (st == TORC_OK)
    st = optim_parse_num("onecycle", "final_div_factor",
                         V("final_div_factor"), 0, 1, INFINITY, 0,
                         &s.final_div_factor);
  if (st == TORC_OK)
    st = optim_parse_bool("onecycle", "three_phase", V("three_phase"),
                          &s.three_phase);
#undef V
  return st ? st : new_state("onecycle", &s, sizeof s, state);
}

static double onecycle_anneal(const onecycle_state *s, double start,
                              double end, double pct) {
  if (s->linear)
    return (end - start) * pct + start;
  double cos_out = cos(M_PI * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

/* The phase step t falls in (its index) and how far into it (*pct), as
 * OneCycleLR's get_lr at step_num = t: phases end at pct_start * total - 1
 * (warm-up) and total - 1 (annealing); three phases: up, back down by
 * 2 pct_start total - 2, then the final annealing. -1 past the end of the
 * cycle, with the error set. */
static int onecycle_phase(const onecycle_state *s, int64_t t, double *pct) {
  if (t > s->total_steps) {
    optim_error(TORC_ERR_INVALID,
                "onecycle: step %lld is past the end of the cycle "
                "(total_steps = %lld); raise total_steps (or epochs) to the "
                "number of steps you train for",
                (long long)t, (long long)s->total_steps);
    return -1;
  }
  double total = (double)s->total_steps;
  double ends[3] = {s->pct_start * total - 1, total - 1, 0};
  int n_ph = 2;
  if (s->three_phase) {
    ends[1] = 2 * s->pct_start * total - 2;
    ends[2] = total - 1;
    n_ph = 3;
  }
  double start_step = 0, step = (double)t;
  for (int i = 0; i < n_ph; i++) {
    double end_step = ends[i];
    if (step <= end_step || i == n_ph - 1) {
      *pct = (step - start_step) / (end_step - start_step);
      return i;
    }
    start_step = end_step;
  }
  return -1; /* not reached */
}

/* The lr after t steps: from max_lr / div_factor up to max_lr, then down
 * to that / final_div_factor (three phases: up, back down to the start,
 * then to the minimum). At t = 0 (the core asks when the scheduler is
 * built) it is max_lr / div_factor, as PyTorch sets at construction. */
static double onecycle_lr(void *state, int group, double initial_lr,
                          double last_lr, int64_t t, double metric) {
  (void)group, (void)last_lr, (void)metric;
  const onecycle_state *s = state;
  double pct;
  int i = onecycle_phase(s, t, &pct);
  if (i < 0)
    return NAN;
  double max_lr = s->max_lr > 0 ? s->max_lr : initial_lr;
  double init = max_lr / s->div_factor;
  double min_lr = init / s->final_div_factor;
  static const int two[2][2] = {{0, 1}, {1, 2}}, three[3][2] = {{0, 1},
                                                                {1, 0},
                                                                {0, 2}};
  const double lrs[3] = {init, max_lr, min_lr};
  const int *ph = s->three_phase ? three[i] : two[i];
  return onecycle_anneal(s, lrs[ph[0]], lrs[ph[1]], pct);
}

/* The momentum after t steps, inversely to the lr: max_momentum down to
 * base_momentum while the lr rises, back up while it falls (three phases:
 * down, up, then flat at max_momentum). NaN with cycle_momentum = no. */
static double onecycle_momentum(void *state, int group, int64_t t) {
  (void)group;
  const onecycle_state *s = state;
  if (!s->cycle_momentum)
    return NAN;
  double pct;
  int i = onecycle_phase(s, t, &pct);
  if (i < 0)
    return NAN;
  double base = s->base_momentum, max = s->max_momentum;
  if (i == 0)
    return onecycle_anneal(s, max, base, pct);
  if (i == 1)
    return onecycle_anneal(s, base, max, pct);
  return onecycle_anneal(s, max, max, pct);
}

static const torc_module_key onecycle_keys[] = {
    {"max_lr", "the peak lr (a number > 0; empty: each group's lr)", ""},
    {"total_steps", "steps in the cycle (an integer >= 1; or give epochs and "
                    "steps_per_epoch)",
     ""},
    {"epochs", "epochs in the cycle, with steps_per_epoch (an integer >= 1)",
     ""},
    {"steps_per_epoch", "steps per epoch, with epochs (an integer >= 1)", ""},
    {"pct_start", "fraction of the cycle spent raising the lr (a number in "
                  "[0, 1])",
     "0.3"},
    {"anneal_strategy", "shape of the curve (cos | linear)", "cos"},
    {"cycle_momentum", "cycle the optimizer's momentum (SGD, RMSprop) or "
                       "beta1 (Adam, AdamW) inversely to the lr (yes | no)",
     "yes"},
    {"base_momentum", "the momentum at the peak of the lr (a number >= 0)",
     "0.85"},
    {"max_momentum", "the momentum at the start and end of the cycle (a "
                     "number >= 0)",
     "0.95"},
    {"div_factor", "the cycle starts at max_lr / div_factor (a number > 0)",
     "25"},
    {"final_div_factor", "the cycle ends at max_lr / div_factor / "
                         "final_div_factor (a number > 0)",
     "1e4"},
    {"three_phase", "come back down to the starting lr before the final "
                    "annealing (yes | no)",
     "no"},
    {NULL, NULL, NULL},
};

const torc_scheduler_type optim_onecycle_type = {
    .struct_size = sizeof(torc_scheduler_type),
    .name = "onecycle",
    .description = "the 1cycle policy: up from max_lr / div_factor to max_lr, "
                   "then down to a far lower lr (OneCycleLR)",
    .keys = onecycle_keys,
    .create = onecycle_create,
    .destroy = free_state,
    .lr = onecycle_lr,
    .momentum = onecycle_momentum,
    .momentum_betas = 1,
};

/* ---------------------------------------------------------------------
 * cyclic (CyclicLR)
 * ------------------------------------------------------------------- */

typedef struct cyclic_state {
  double base_lr; /* < 0: each group's initial lr */
  double max_lr;
  double total_size, step_ratio;
  int mode; /* 0 triangular, 1 triangular2, 2 exp_range */
  double gamma;
  int cycle_momentum;
  double base_momentum, max_momentum;
} cyclic_state;

static int cyclic_create(const char *const *keys, const char *const *values,
                         int n, void *user, void **state) {
  (void)user;
  static const char *const modes[] = {"triangular", "triangular2",
                                      "exp_range"};
  cyclic_state s = {.base_lr = -1};
  double up = 0, down = 0;
#define V(k) optim_value(keys, values, n, k)
  int st = TORC_OK;
  const char *bv = V("base_lr");
  if (bv && bv[0] != '\0')
    st = optim_parse_num("cyclic", "base_lr", bv, 0, 0, INFINITY, 0,
                         &s.base_lr);
  if (st == TORC_OK)
    st = optim_parse_num("cyclic", "max_lr", V("max_lr"), 0, 0, INFINITY, 0,
                         &s.max_lr);
  if (st == TORC_OK)
    st = optim_parse_num("cyclic", "step_size_up", V("step_size_up"), 0, 1,
                         INFINITY, 0, &up);
  const char *dv = V("step_size_down");
  down = up;
  if (st == TORC_OK && dv && dv[0] != '\0')
    st = optim_parse_num("cyclic", "step_size_down", dv, 0, 1, INFINITY, 0,
                         &down);
  if (st == TORC_OK)
    st = optim_parse_choice("cyclic", "mode", V("mode"), modes, 3, &s.mode);
  if (st == TORC_OK)
    st = optim_parse_num("cyclic", "gamma", V("gamma"), 0, 1, INFINITY, 0,
                         &s.gamma);
  if (st == TORC_OK)
    st = optim_parse_bool("cyclic", "cycle_momentum", V("cycle_momentum"),
                          &s.cycle_momentum);
  if (st == TORC_OK)
    st = parse_momentum("cyclic", "base_momentum", V("base_momentum"),
                        &s.base_momentum);
  if (st == TORC_OK)
    st = parse_momentum("cyclic", "max_momentum", V("max_momentum"),
                        &s.max_momentum);
#undef V
  if (st != TORC_OK)
    return st;
  s.total_size = up + down;
  s.step_ratio = up / s.total_size;
  return new_state("cyclic", &s, sizeof s, state);
}

/* CyclicLR's get_lr at last_epoch = t: the position in the cycle as a
 * scale factor in [0, 1] (rising for step_size_up steps, falling for
 * step_size_down), and the amplitude's scale (triangular: 1;
 * triangular2: halved each cycle; exp_range: gamma^t). */
static void cyclic_factors(const cyclic_state *s, int64_t t, double *factor,
                           double *scale) {
  double cycle = floor(1 + (double)t / s->total_size);
  double x = 1. + (double)t / s->total_size - cycle;
  if (x <= s->step_ratio)
    *factor = x / s->step_ratio;
  else
    *factor = (x - 1) / (s->step_ratio - 1);
  if (s->mode == 0)
    *scale = 1.;
  else if (s->mode == 1)
    *scale = 1 / pow(2., cycle - 1);
  else
    *scale = pow(s->gamma, (double)t);
}

static double cyclic_lr(void *state, int group, double initial_lr,
                        double last_lr, int64_t t, double metric) {
  (void)group, (void)last_lr, (void)metric;
  const cyclic_state *s = state;
  double base_lr = s->base_lr >= 0 ? s->base_lr : initial_lr;
  double factor, scale;
  cyclic_factors(s, t, &factor, &scale);
  double base_height = (s->max_lr - base_lr) * factor;
  return base_lr + base_height * scale;
}

/* Inversely to the lr: max_momentum at the cycle's ends, base_momentum at
 * its peak. NaN with cycle_momentum = no. */
static double cyclic_momentum(void *state, int group, int64_t t) {
  (void)group;
  const cyclic_state *s = state;
  if (!s->cycle_momentum)
    return NAN;
  double factor, scale;
  cyclic_factors(s, t, &factor, &scale);
  double base_height = (s->max_momentum - s->base_momentum) * factor;
  return s->max_momentum - base_height * scale;
}

static const torc_module_key cyclic_keys[] = {
    {"base_lr", "the lower lr of the cycle (a number >= 0; empty: each "
                "group's lr)",
     ""},
    {"max_lr", "the upper lr of the cycle (a number >= 0)", NULL},
    {"step_size_up", "steps from base_lr up to max_lr (a number > 0)",
     "2000"},
    {"step_size_down", "steps from max_lr back down (a number > 0; empty: "
                       "step_size_up)",
     ""},
    {"mode", "amplitude per cycle: constant, halved every cycle, or scaled "
             "by gamma^step (triangular | triangular2 | exp_range)",
     "triangular"},
    {"gamma", "exp_range's factor per step (a number > 0)", "1.0"},
    {"cycle_momentum", "cycle the optimizer's momentum inversely to the lr "
                       "(yes | no; needs an optimizer with momentum: sgd, "
                       "rmsprop)",
     "yes"},
    {"base_momentum", "the momentum at the peak of the lr (a number >= 0)",
     "0.8"},
    {"max_momentum", "the momentum at base_lr (a number >= 0)", "0.9"},
    {NULL, NULL, NULL},
};

const torc_scheduler_type optim_cyclic_type = {
    .struct_size = sizeof(torc_scheduler_type),
    .name = "cyclic",
    .description = "cycles the lr between base_lr and max_lr, and the "
                   "momentum inversely (CyclicLR)",
    .keys = cyclic_keys,
    .create = cyclic_create,
    .destroy = free_state,
    .lr = cyclic_lr,
    .momentum = cyclic_momentum,
    .momentum_betas = 0,
};
