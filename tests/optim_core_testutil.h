/* tests/optim_core_testutil.h — shared by the tests of torc/optim.h's core
 * (test_optim_core, test_optim_core_sched): the types the tests register
 * themselves (test_sgd, test_mse, test_halve, plateau), the fixtures that
 * register them, and small tensor and network helpers. Included after
 * testutil.h, once per program. */
#ifndef TORC_OPTIM_CORE_TESTUTIL_H
#define TORC_OPTIM_CORE_TESTUTIL_H

#include <math.h>

#include "testutil.h"

/* ---- test types ---- */

/* test_sgd: buf = momentum * buf + grad; p -= lr * buf. Records the step
 * numbers it is handed. `fail = 1` makes update fail. */
typedef struct sgd_hyper {
  double momentum;
  int fail;
} sgd_hyper;

static int64_t seen_steps[64];
static int n_seen;

static inline int sgd_create(const char *const *k, const char *const *v, int n,
                             void *user, void **hyper) {
  (void)user;
  sgd_hyper *h = calloc(1, sizeof *h);
  if (h == NULL)
    return torc_set_error(TORC_ERR_OOM, "test_sgd: out of memory");
  for (int i = 0; i < n; i++) {
    char *end;
    if (strcmp(k[i], "momentum") == 0) {
      h->momentum = strtod(v[i], &end);
      if (end == v[i] || *end) {
        free(h);
        return torc_set_error(TORC_ERR_INVALID,
                              "test_sgd: key 'momentum' = '%s' is not a "
                              "number",
                              v[i]);
      }
    } else if (strcmp(k[i], "fail") == 0) {
      h->fail = atoi(v[i]);
    }
  }
  *hyper = h;
  return TORC_OK;
}

static inline int sgd_update(void *hyper, double lr, torc_tensor *param,
                             const torc_tensor *grad, torc_tensor *const *state,
                             int64_t step) {
  sgd_hyper *h = hyper;
  if (h->fail)
    return torc_set_error(TORC_ERR_INVALID, "test_sgd: failing on purpose");
  if (n_seen < 64)
    seen_steps[n_seen++] = step;
  torc_status st = torc_mul_scalar_(state[0], h->momentum);
  if (st == TORC_OK)
    st = torc_add_(state[0], grad);
  torc_tensor *d = st ? NULL : torc_mul_scalar(state[0], lr);
  return d ? torc_sub_(param, d) : torc_last_status();
}

static const torc_module_key sgd_keys[] = {{"lr", "learning rate", NULL},
                                           {"momentum", "momentum factor", "0"},
                                           {"fail", "1 = update fails", "0"},
                                           {NULL, NULL, NULL}};
static const char *const sgd_state[] = {"buf", NULL};
static const torc_optimizer_type test_sgd = {sizeof(torc_optimizer_type),
                                             "test_sgd",
                                             "sgd with a momentum buffer",
                                             sgd_keys,
                                             sgd_state,
                                             sgd_create,
                                             free,
                                             sgd_update,
                                             NULL,
                                             NULL,
                                             NULL};

/* test_mse: mean (or sum) of squared differences. */
static inline int mse_create(const char *const *k, const char *const *v, int n,
                             void *user, void **state) {
  (void)user;
  for (int i = 0; i < n; i++)
    if (strcmp(k[i], "reduction") == 0 && strcmp(v[i], "mean") != 0 &&
        strcmp(v[i], "sum") != 0)
      return torc_set_error(TORC_ERR_INVALID,
                            "test_mse: key 'reduction' = '%s' is not mean or "
                            "sum",
                            v[i]);
  int *sum = malloc(sizeof *sum);
  if (sum == NULL)
    return TORC_ERR_OOM;
  *sum = strcmp(v[0], "sum") == 0;
  *state = sum;
  return TORC_OK;
}

static inline torc_tensor *mse_forward(void *state, const torc_tensor *input,
                                       const torc_tensor *target) {
  if (torc_numel(input) != torc_numel(target)) {
    torc_set_error(TORC_ERR_SHAPE, "test_mse expects input and target of "
                                   "the same shape");
    return NULL;
  }
  torc_tensor *sq = torc_square(torc_sub(input, target));
  return *(int *)state ? torc_sum(sq, NULL, 0, 0) : torc_mean(sq, NULL, 0, 0);
}

static const torc_module_key mse_keys[] = {{"reduction", "mean or sum", "mean"},
                                           {NULL, NULL, NULL}};
static const torc_loss_type test_mse = {sizeof(torc_loss_type),
                                        "test_mse",
                                        "squared error",
                                        mse_keys,
                                        mse_create,
                                        free,
                                        mse_forward,
                                        NULL};

/* test_halve: lr = last * 0.5 every `every` steps (StepLR with gamma 0.5);
 * counts its calls and saves the count; records the t it is handed. */
typedef struct halve_state {
  int64_t every, calls;
} halve_state;

static int64_t seen_t[64];
static int n_seen_t;

static inline int halve_create(const char *const *k, const char *const *v,
                               int n, void *user, void **state) {
  (void)user;
  halve_state *s = calloc(1, sizeof *s);
  if (s == NULL)
    return TORC_ERR_OOM;
  for (int i = 0; i < n; i++)
    if (strcmp(k[i], "every") == 0)
      s->every = atoll(v[i]);
  if (s->every < 1) {
    free(s);
    return torc_set_error(TORC_ERR_INVALID,
                          "test_halve: key 'every' must be >= 1");
  }
  *state = s;
  return TORC_OK;
}

static inline double halve_lr(void *state, int group, double initial,
                              double last, int64_t t, double metric) {
  (void)metric;
  halve_state *s = state;
  if (t == 0) /* at construction: the lr of step 0 */
    return initial;
  if (group == 0) {
    s->calls++;
    if (n_seen_t < 64)
      seen_t[n_seen_t++] = t;
  }
  return t % s->every == 0 ? last * 0.5 : last;
}

static inline int halve_save(void *state, char *buf, size_t size) {
  return snprintf(buf, size, "calls=%lld",
                  (long long)((halve_state *)state)->calls);
}

static inline int halve_load(void *state, const char *text) {
  long long c;
  if (sscanf(text, "calls=%lld", &c) != 1)
    return torc_set_error(TORC_ERR_INVALID, "test_halve: bad state '%s'", text);
  ((halve_state *)state)->calls = c;
  return TORC_OK;
}

static const torc_module_key halve_keys[] = {
    {"every", "steps between halvings", "1"}, {NULL, NULL, NULL}};
static const torc_scheduler_type test_halve = {sizeof(torc_scheduler_type),
                                               "test_halve",
                                               "halves the lr",
                                               halve_keys,
                                               halve_create,
                                               free,
                                               halve_lr,
                                               halve_save,
                                               halve_load,
                                               NULL,
                                               NULL,
                                               0};

/* A scheduler named "plateau" (the name the core asks a metric for). */
static inline double keep_lr(void *state, int group, double initial,
                             double last, int64_t t, double metric) {
  (void)state, (void)group, (void)initial, (void)t, (void)metric;
  return last;
}
static const torc_module_key no_keys[] = {{NULL, NULL, NULL}};
static const torc_scheduler_type test_plateau = {sizeof(torc_scheduler_type),
                                                 "plateau",
                                                 "keeps the lr",
                                                 no_keys,
                                                 NULL,
                                                 NULL,
                                                 keep_lr,
                                                 NULL,
                                                 NULL,
                                                 NULL,
                                                 NULL,
                                                 0};

/* ---- fixtures and helpers ---- */

static char tmpdir[256];

static inline int group_setup(void **state) {
  if (test_setup_ref_sim(state))
    return -1;
  if (torc_loss_type_register(&test_mse) ||
      torc_optimizer_type_register(&test_sgd) ||
      torc_scheduler_type_register(&test_halve) ||
      torc_scheduler_type_register(&test_plateau)) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-optim");
}

static inline int group_teardown(void **state) {
  char p[512];
  snprintf(p, sizeof p, "%s/ck.safetensors", tmpdir);
  remove(p);
  remove(tmpdir);
  return test_teardown_all(state);
}

static inline int setup(void **state) {
  n_seen = n_seen_t = 0;
  return test_live_setup(state);
}
static inline int teardown(void **state) { return test_live_teardown(state); }

static inline torc_tensor *vec(const float *v, int64_t n) {
  torc_tensor *t = torc_from_host(v, TORC_SHAPE(n), TORC_F32, TORC_CPU);
  assert_torc(t);
  return t;
}

static inline torc_tensor *param(const float *v, int64_t n) {
  torc_tensor *t = vec(v, n);
  assert_ok(torc_set_requires_grad(t, 1));
  return t;
}

static inline void set_grad(torc_tensor *p, const float *v, int64_t n) {
  torc_tensor *g = vec(v, n);
  assert_ok(torc_set_grad(p, g));
  torc_release(g);
}

static inline void expect(const torc_tensor *t, const double *v, int64_t n) {
  test_assert_values(t, v, n, 1e-6);
}

static inline void expect_lr(torc_optimizer *opt, int g, double lr) {
  double got = torc_optimizer_get_lr(opt, g);
  if (!(fabs(got - lr) <= 1e-15 * fabs(lr))) {
    print_error("group %d: lr %.17g, expected %.17g\n", g, got, lr);
    fail();
  }
}

static inline torc_module *small_net(void) {
  torc_module *m = torc_sequential_new();
  assert_torc(m);
  assert_ok(torc_sequential_append(m, torc_linear_new(3, 2, 1)));
  assert_ok(torc_sequential_append(m, torc_linear_new(2, 1, 1)));
  return m;
}

#endif /* TORC_OPTIM_CORE_TESTUTIL_H */
