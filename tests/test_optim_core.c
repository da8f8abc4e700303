/* tests/test_optim_core.c — the core of torc/optim.h with types the test
 * registers itself (test_sgd, test_mse, test_halve, plateau): the three
 * registries and their key errors, losses, optimizer groups, per-parameter
 * state and step counts, zero_grad, state dicts through checkpoint files,
 * the generic warm-up against PyTorch's numbers, clipping by norm and by
 * value, the [loss]/[optimizer]/[scheduler] sections, and plugin owners.
 */
#define _POSIX_C_SOURCE 200809L

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

static int sgd_create(const char *const *k, const char *const *v, int n,
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

static int sgd_update(void *hyper, double lr, torc_tensor *param,
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
                                             NULL};

/* test_mse: mean (or sum) of squared differences. */
static int mse_create(const char *const *k, const char *const *v, int n,
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

static torc_tensor *mse_forward(void *state, const torc_tensor *input,
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

static int halve_create(const char *const *k, const char *const *v, int n,
                        void *user, void **state) {
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

static double halve_lr(void *state, int group, double initial, double last,
                       int64_t t, double metric) {
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

static int halve_save(void *state, char *buf, size_t size) {
  return snprintf(buf, size, "calls=%lld",
                  (long long)((halve_state *)state)->calls);
}

static int halve_load(void *state, const char *text) {
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
                                               NULL};

/* A scheduler named "plateau" (the name the core asks a metric for). */
static double keep_lr(void *state, int group, double initial, double last,
                      int64_t t, double metric) {
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
                                                 NULL};

/* ---- fixtures and helpers ---- */

static char tmpdir[256];

static int group_setup(void **state) {
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

static int group_teardown(void **state) {
  char p[512];
  snprintf(p, sizeof p, "%s/ck.safetensors", tmpdir);
  remove(p);
  remove(tmpdir);
  return test_teardown_all(state);
}

static int setup(void **state) {
  n_seen = n_seen_t = 0;
  return test_live_setup(state);
}
static int teardown(void **state) { return test_live_teardown(state); }

static torc_tensor *vec(const float *v, int64_t n) {
  torc_tensor *t = torc_from_host(v, TORC_SHAPE(n), TORC_F32, TORC_CPU);
  assert_torc(t);
  return t;
}

static torc_tensor *param(const float *v, int64_t n) {
  torc_tensor *t = vec(v, n);
  assert_ok(torc_set_requires_grad(t, 1));
  return t;
}

static void set_grad(torc_tensor *p, const float *v, int64_t n) {
  torc_tensor *g = vec(v, n);
  assert_ok(torc_set_grad(p, g));
  torc_release(g);
}

static void expect(const torc_tensor *t, const double *v, int64_t n) {
  test_assert_values(t, v, n, 1e-6);
}

static void expect_lr(torc_optimizer *opt, int g, double lr) {
  double got = torc_optimizer_get_lr(opt, g);
  if (!(fabs(got - lr) <= 1e-15 * fabs(lr))) {
    print_error("group %d: lr %.17g, expected %.17g\n", g, got, lr);
    fail();
  }
}

/* ---- registries and keys ---- */

static void test_registries(void **state) {
  (void)state;
  assert_ptr_equal(torc_loss_type_find("test_mse"), &test_mse);
  assert_ptr_equal(torc_optimizer_type_find("test_sgd"), &test_sgd);
  assert_ptr_equal(torc_scheduler_type_find("test_halve"), &test_halve);
  assert_null(torc_loss_type_find("nope"));
  assert_int_equal(torc_last_status(), TORC_OK);
  /* at() walks the types in name order. */
  int n = torc_scheduler_type_count(), found = 0;
  assert_true(n >= 2);
  for (int i = 0; i < n; i++) {
    found += torc_scheduler_type_at(i) == &test_halve;
    if (i > 0)
      assert_true(strcmp(torc_scheduler_type_at(i - 1)->name,
                         torc_scheduler_type_at(i)->name) < 0);
  }
  assert_int_equal(found, 1);
  assert_null(torc_scheduler_type_at(n));
  assert_null(torc_loss_type_at(-1));
  assert_true(torc_loss_type_count() >= 1 && torc_optimizer_type_count() >= 1);

  /* A taken name is refused, naming the owner. */
  torc_loss_type dup = test_mse;
  assert_int_equal(torc_loss_type_register(&dup), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'test_mse' is already registered (by the "
                                 "program)");
  dup.name = "bad name";
  assert_int_equal(torc_loss_type_register(&dup), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'bad name' is not valid");
  dup.name = "no_forward";
  dup.forward = NULL;
  assert_int_equal(torc_loss_type_register(&dup), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "has no forward");
  assert_int_equal(torc_loss_type_register(NULL), TORC_ERR_NULL);

  torc_optimizer_type o = test_sgd;
  o.name = "no_lr";
  o.keys = no_keys;
  assert_int_equal(torc_optimizer_type_register(&o), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "has no key 'lr'");
  o = test_sgd;
  o.name = "small";
  o.struct_size = 8;
  assert_int_equal(torc_optimizer_type_register(&o), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "struct_size 8");

  torc_scheduler_type s = test_halve;
  s.name = "none";
  assert_int_equal(torc_scheduler_type_register(&s), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'none' is reserved");
  s.name = "test_halve";
  assert_int_equal(torc_scheduler_type_register(&s), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "already registered");
  assert_null(torc_optimizer_type_find("no_lr"));
}

static void test_key_errors(void **state) {
  (void)state;
  assert_null(torc_loss_build("test_mes", NULL));
  assert_error(TORC_ERR_INVALID, "unknown loss type 'test_mes'");
  assert_contains(torc_last_error(), "did you mean 'test_mse'");
  assert_null(torc_loss_build("test_mse", "reductoin=sum"));
  assert_error(TORC_ERR_INVALID, "unknown key 'reductoin'");
  assert_contains(torc_last_error(), "did you mean 'reduction'");
  assert_null(torc_loss_build("test_mse", "reduction=sum, reduction=mean"));
  assert_error(TORC_ERR_INVALID, "key 'reduction' is given twice");
  assert_null(torc_loss_build("test_mse", "sum"));
  assert_error(TORC_ERR_INVALID, "'sum' in \"sum\" is not key=value");
  assert_null(torc_loss_build("test_mse", "=sum"));
  assert_error(TORC_ERR_INVALID, "an empty key");
  assert_null(torc_loss_build("test_mse", "reduction=max"));
  assert_error(TORC_ERR_INVALID, "key 'reduction' = 'max' is not mean or sum");
  assert_null(torc_loss_create(NULL, NULL, NULL, 0));
  assert_error(TORC_ERR_NULL, "torc_loss_create");

  assert_null(torc_optimizer_build("test_sgd", NULL, NULL));
  assert_error(TORC_ERR_INVALID, "test_sgd: key 'lr' is required");
  assert_null(torc_optimizer_build("test_sgd", "lr=abc", NULL));
  assert_error(TORC_ERR_INVALID, "key 'lr' = 'abc' is not a number");
  assert_null(torc_optimizer_build("test_sgd", "lr=-1", NULL));
  assert_error(TORC_ERR_INVALID, "key 'lr' = -1 is negative");
  assert_null(torc_optimizer_build("test_sgd", "lr=0.1 momentum=x", NULL));
  assert_error(TORC_ERR_INVALID, "key 'momentum' = 'x' is not a number");
  assert_null(torc_optimizer_build("test_sgd", "lr=0.1, momentun=0.9", NULL));
  assert_contains(torc_last_error(), "did you mean 'momentum'");
  assert_null(torc_optimizer_build("tset_sgd", "lr=0.1", NULL));
  assert_error(TORC_ERR_INVALID, "unknown optimizer type 'tset_sgd'");
  assert_contains(torc_last_error(), "did you mean 'test_sgd'");

  torc_optimizer *opt = torc_optimizer_build("test_sgd", "lr=0.1", NULL);
  assert_torc(opt);
  assert_int_equal(torc_optimizer_group_count(opt), 0);
  assert_null(torc_scheduler_build("test_halve", "warmpu=3", opt));
  assert_error(TORC_ERR_INVALID, "unknown key 'warmpu'");
  assert_contains(torc_last_error(), "did you mean 'warmup'");
  assert_null(torc_scheduler_build("test_halve", "warmup=-1", opt));
  assert_error(TORC_ERR_INVALID, "key 'warmup' = '-1' is not a step count");
  assert_null(torc_scheduler_build("test_halve", "warmup_start_factor=0", opt));
  assert_error(TORC_ERR_INVALID, "key 'warmup_start_factor' = 0 is out of "
                                 "range");
  assert_null(torc_scheduler_build("test_halve", "every=0", opt));
  assert_error(TORC_ERR_INVALID, "key 'every' must be >= 1");
  assert_null(torc_scheduler_build("step_lr", NULL, opt));
  assert_error(TORC_ERR_INVALID, "unknown scheduler type 'step_lr'");
  assert_null(torc_scheduler_build("test_halve", NULL, NULL));
  assert_error(TORC_ERR_NULL, "optimizer");
  torc_optimizer_free(opt);
}

/* ---- losses ---- */

static void test_loss_forward(void **state) {
  (void)state;
  torc_loss *l = torc_loss_build("test_mse", NULL);
  torc_loss *s = torc_loss_build("test_mse", "reduction=sum");
  assert_torc(l);
  assert_torc(s);
  assert_string_equal(torc_loss_name(l), "test_mse");
  assert_null(torc_loss_name(NULL));
  const float x[] = {1, 2, 3}, y[] = {1, 0, 0}, z[] = {1, 2};
  torc_tensor *in = param(x, 3), *tg = vec(y, 3), *short_tg = vec(z, 2);
  torc_tensor *out = torc_loss_forward(l, in, tg);
  expect(out, (double[]){13.0 / 3}, 1);
  assert_ok(torc_backward(out, NULL, 0));
  expect(torc_grad_of(in), (double[]){0, 4.0 / 3, 2}, 3);
  torc_release(out);
  out = torc_loss_forward(s, in, tg);
  expect(out, (double[]){13}, 1);
  torc_release(out);

  assert_null(torc_loss_forward(l, in, short_tg));
  assert_error(TORC_ERR_SHAPE, "test_mse expects input and target of the "
                               "same shape (in loss 'test_mse')");
  /* NULL inputs propagate, keeping the first error. */
  torc_set_error(TORC_ERR_SHAPE, "an earlier failure");
  assert_null(torc_loss_forward(l, NULL, tg));
  assert_error(TORC_ERR_SHAPE, "an earlier failure");
  torc_clear_error();
  assert_null(torc_loss_forward(l, in, NULL));
  assert_error(TORC_ERR_NULL, "torc_loss_forward");
  assert_null(torc_loss_forward(NULL, in, tg));
  assert_error(TORC_ERR_NULL, "the loss is NULL");

  /* Inside a caller's scope the result belongs to that scope. */
  int sc = torc_scope_begin();
  assert_torc(torc_loss_forward(l, in, tg));
  torc_scope_end(sc);

  torc_release(in), torc_release(tg), torc_release(short_tg);
  torc_loss_free(l);
  torc_loss_free(s);
  torc_loss_free(NULL);
}

/* ---- optimizers ---- */

static void test_groups_and_step(void **state) {
  (void)state;
  const float av[] = {1, 2}, bv[] = {3}, cv[] = {5}, dv[] = {7};
  torc_tensor *a = param(av, 2), *b = param(bv, 1), *c = param(cv, 1),
              *d = param(dv, 1);
  torc_optimizer *opt =
      torc_optimizer_build("test_sgd", "lr=0.1, momentum=0.5", NULL);
  assert_torc(opt);
  assert_int_equal(torc_optimizer_add_params(opt, &a, 1, "lr=1.0"), 0);
  torc_tensor *rest[] = {b, c, d};
  assert_int_equal(torc_optimizer_add_params(opt, rest, 3, NULL), 1);
  assert_int_equal(torc_optimizer_group_count(opt), 2);
  expect_lr(opt, 0, 1.0);
  expect_lr(opt, 1, 0.1);

  /* Errors adding parameters. */
  assert_int_equal(torc_optimizer_add_params(opt, &b, 1, NULL), -1);
  assert_error(TORC_ERR_INVALID, "parameter 0 ([1] f32) is already in group "
                                 "1");
  const float ev[] = {1};
  torc_tensor *e = param(ev, 1);
  torc_tensor *twice[] = {e, e};
  assert_int_equal(torc_optimizer_add_params(opt, twice, 2, NULL), -1);
  assert_error(TORC_ERR_INVALID, "is given twice");
  torc_tensor *op = torc_mul_scalar(e, 2);
  assert_int_equal(torc_optimizer_add_params(opt, &op, 1, NULL), -1);
  assert_error(TORC_ERR_INVALID, "not a leaf");
  torc_release(op);
  assert_int_equal(torc_optimizer_add_params(opt, &e, 1, "lr=x"), -1);
  assert_error(TORC_ERR_INVALID, "key 'lr' = 'x' is not a number");
  assert_int_equal(torc_optimizer_add_params(opt, &e, 1, "beta=1"), -1);
  assert_error(TORC_ERR_INVALID, "unknown key 'beta'");
  assert_int_equal(torc_optimizer_add_params(opt, &e, 0, NULL), -1);
  assert_error(TORC_ERR_INVALID, "at least one parameter");
  assert_int_equal(torc_optimizer_group_count(opt), 2);
  torc_release(e);

  /* c has no gradient; d has one but does not require grad: both are
   * skipped. */
  set_grad(a, (float[]){1, 1}, 2);
  set_grad(b, (float[]){2}, 1);
  set_grad(d, (float[]){1}, 1);
  assert_ok(torc_set_requires_grad(d, 0));
  assert_ok(torc_optimizer_step(opt));
  expect(a, (double[]){0, 1}, 2);
  expect(b, (double[]){2.8}, 1);
  expect(c, (double[]){5}, 1);
  expect(d, (double[]){7}, 1);
  assert_ok(torc_optimizer_step(opt));
  /* buf = 0.5 * 1 + 1 = 1.5 for a; 0.5 * 2 + 2 = 3 for b. */
  expect(a, (double[]){-1.5, -0.5}, 2);
  expect(b, (double[]){2.5}, 1);
  assert_int_equal(torc_optimizer_steps(opt), 2);

  /* Unfrozen, d gets its first update (its own step 1) while a and b are
   * at 3: PyTorch's per-parameter step. */
  assert_ok(torc_set_requires_grad(d, 1));
  assert_ok(torc_optimizer_step(opt));
  assert_int_equal(n_seen, 7);
  const int64_t want[] = {1, 1, 2, 2, 3, 3, 1};
  for (int i = 0; i < 7; i++)
    assert_int_equal(seen_steps[i], want[i]);
  expect(d, (double[]){6.9}, 1);

  /* The state: a buffer for a, b and d; none for c. */
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_optimizer_state_dict(opt, "opt.", sd));
  expect(torc_state_dict_get(sd, "opt.state.0.buf"), (double[]){1.75, 1.75}, 2);
  expect(torc_state_dict_get(sd, "opt.state.1.buf"), (double[]){3.5}, 1);
  assert_null(torc_state_dict_get(sd, "opt.state.2.buf"));
  expect(torc_state_dict_get(sd, "opt.state.3.buf"), (double[]){1}, 1);
  assert_string_equal(torc_state_dict_meta(sd, "opt.type"), "test_sgd");
  assert_string_equal(torc_state_dict_meta(sd, "opt.steps"), "3");
  assert_string_equal(torc_state_dict_meta(sd, "opt.state.0.step"), "3");
  assert_string_equal(torc_state_dict_meta(sd, "opt.state.3.step"), "1");
  assert_null(torc_state_dict_meta(sd, "opt.state.2.step"));
  assert_string_equal(torc_state_dict_meta(sd, "opt.group.0.lr"), "1");
  assert_string_equal(torc_state_dict_meta(sd, "opt.group.1.lr"),
                      "0.10000000000000001");
  assert_string_equal(torc_state_dict_meta(sd, "opt.group.1.momentum"), "0.5");
  assert_string_equal(torc_state_dict_meta(sd, "opt.group.1.params"), "3");
  /* A second call with the same prefix collides and adds nothing. */
  int count = torc_state_dict_count(sd);
  assert_int_equal(torc_optimizer_state_dict(opt, "opt.", sd),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "already has 'opt.state.0.buf'");
  assert_int_equal(torc_state_dict_count(sd), count);
  torc_state_dict_free(sd);

  /* lr access. */
  assert_ok(torc_optimizer_set_lr(opt, 1, 0.25));
  expect_lr(opt, 1, 0.25);
  assert_int_equal(torc_optimizer_set_lr(opt, 1, -1), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "not a finite number >= 0");
  assert_int_equal(torc_optimizer_set_lr(opt, 2, 0.1), TORC_ERR_RANGE);
  assert_error(TORC_ERR_RANGE, "group 2 does not exist; the optimizer has 2 "
                               "groups");
  assert_true(isnan(torc_optimizer_get_lr(opt, -1)));

  /* zero_grad: zeros in place, then dropped. */
  assert_ok(torc_optimizer_zero_grad(opt, 0));
  expect(torc_grad_of(a), (double[]){0, 0}, 2);
  expect(torc_grad_of(b), (double[]){0}, 1);
  assert_ok(torc_optimizer_zero_grad(opt, 1));
  assert_null(torc_grad_of(a));
  assert_null(torc_grad_of(d));

  /* An update that fails says where. */
  torc_optimizer *bad = torc_optimizer_build("test_sgd", "lr=1, fail=1", NULL);
  assert_int_equal(torc_optimizer_add_params(bad, &a, 1, NULL), 0);
  set_grad(a, (float[]){1, 1}, 2);
  assert_int_equal(torc_optimizer_step(bad), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "test_sgd: failing on purpose (in optimizer "
                                 "'test_sgd', parameter 0 ([2] f32) of group "
                                 "0)");
  assert_int_equal(torc_optimizer_steps(bad), 0);
  torc_optimizer_free(bad);

  torc_optimizer_free(opt);
  torc_release(a), torc_release(b), torc_release(c), torc_release(d);
}

static torc_module *small_net(void) {
  torc_module *m = torc_sequential_new();
  assert_torc(m);
  assert_ok(torc_sequential_append(m, torc_linear_new(3, 2, 1)));
  assert_ok(torc_sequential_append(m, torc_linear_new(2, 1, 1)));
  return m;
}

static void test_add_module(void **state) {
  (void)state;
  torc_module *m = small_net();
  torc_optimizer *opt = torc_optimizer_build("test_sgd", "lr=0.1", NULL);
  assert_torc(opt);
  assert_int_equal(torc_optimizer_add_module(opt, m, "0.*", "lr=0.5"), 0);
  assert_int_equal(torc_optimizer_add_module(opt, m, "2.*", NULL), -1);
  assert_error(TORC_ERR_INVALID, "pattern '2.*' matches no parameter that is "
                                 "not in a group yet; the parameters are: "
                                 "0.weight (in group 0), 0.bias (in group "
                                 "0), 1.weight, 1.bias");
  assert_int_equal(torc_optimizer_add_module(opt, m, NULL, NULL), 1);
  assert_int_equal(torc_optimizer_add_module(opt, m, NULL, NULL), -1);
  assert_error(TORC_ERR_INVALID, "1.bias (in group 1)");
  expect_lr(opt, 0, 0.5);
  expect_lr(opt, 1, 0.1);
  /* Errors name parameters by their dotted names. */
  torc_tensor *w = torc_module_parameter(torc_module_child(m, "1"), "weight");
  assert_int_equal(torc_optimizer_add_params(opt, &w, 1, NULL), -1);
  assert_error(TORC_ERR_INVALID, "already in group 1");
  torc_optimizer_free(opt);

  /* build() with a module: one group of everything. */
  opt = torc_optimizer_build("test_sgd", "lr=0.1", m);
  assert_torc(opt);
  assert_int_equal(torc_optimizer_group_count(opt), 1);
  torc_optimizer_free(opt);

  /* A module with lazy sizes is refused until its parameters exist. */
  torc_module *lazy = torc_sequential_new();
  assert_ok(torc_sequential_append(lazy, torc_linear_new(0, 2, 1)));
  assert_null(torc_optimizer_build("test_sgd", "lr=0.1", lazy));
  assert_error(TORC_ERR_INVALID, "not created yet");
  torc_module_free(lazy);
  torc_module *empty = torc_sequential_new();
  assert_null(torc_optimizer_build("test_sgd", "lr=0.1", empty));
  assert_error(TORC_ERR_INVALID, "no parameters to optimize");
  torc_module_free(empty);
  assert_int_equal(torc_optimizer_add_module(NULL, m, NULL, NULL), -1);
  assert_error(TORC_ERR_NULL, "torc_optimizer_add_module");
  torc_module_free(m);
}

/* ---- state dicts through a checkpoint file ---- */

/* One training step of net on fixed data. */
static void train_step(torc_module *net, torc_optimizer *opt, torc_scheduler *s,
                       torc_loss *loss) {
  static const float xs[] = {0.5f, -1, 2, 1, 0, -0.5f, -2, 1.5f, 0.25f};
  static const float ys[] = {1, -1, 0.5f};
  int sc = torc_scope_begin();
  torc_tensor *x = torc_from_host(xs, TORC_SHAPE(3, 3), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_from_host(ys, TORC_SHAPE(3, 1), TORC_F32, TORC_CPU);
  assert_ok(torc_optimizer_zero_grad(opt, 1));
  torc_tensor *l = torc_loss_forward(loss, torc_module_forward(net, x), y);
  assert_torc(l);
  assert_ok(torc_backward(l, NULL, 0));
  assert_ok(torc_optimizer_step(opt));
  if (s)
    assert_ok(torc_scheduler_step(s, NAN));
  torc_scope_end(sc);
}

static double *net_values(torc_module *net, int64_t *n) {
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(net, NULL, sd));
  double *all = NULL;
  *n = 0;
  for (int i = 0; i < torc_state_dict_count(sd); i++) {
    torc_tensor *t = torc_state_dict_tensor(sd, i);
    double *v = test_values(t);
    all = realloc(all, (size_t)(*n + torc_numel(t)) * sizeof *all);
    memcpy(all + *n, v, (size_t)torc_numel(t) * sizeof *v);
    *n += torc_numel(t);
    free(v);
  }
  torc_state_dict_free(sd);
  return all;
}

static void test_state_dict_round_trip(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/ck.safetensors", tmpdir);
  torc_loss *loss = torc_loss_build("test_mse", NULL);
  torc_module *net = small_net();
  torc_optimizer *opt =
      torc_optimizer_build("test_sgd", "lr=0.05, momentum=0.9", NULL);
  assert_int_equal(torc_optimizer_add_module(opt, net, "0.*", "lr=0.1"), 0);
  assert_int_equal(torc_optimizer_add_module(opt, net, NULL, NULL), 1);
  torc_scheduler *s = torc_scheduler_build("test_halve", "every=2", opt);
  assert_torc(s);
  for (int i = 0; i < 3; i++)
    train_step(net, opt, s, loss);

  torc_state_dict *ck = torc_checkpoint_new();
  assert_ok(torc_checkpoint_add_module(ck, net));
  assert_ok(torc_optimizer_state_dict(opt, "optimizer.", ck));
  assert_ok(torc_scheduler_state_dict(s, "scheduler.", ck));
  assert_ok(torc_state_dict_save(ck, path));
  torc_state_dict_free(ck);
  for (int i = 0; i < 3; i++)
    train_step(net, opt, s, loss);
  int64_t n1, n2;
  double *want = net_values(net, &n1);
  double lr0 = torc_optimizer_get_lr(opt, 0),
         lr1 = torc_optimizer_get_lr(opt, 1);

  /* A fresh run from the checkpoint follows the same trajectory. */
  torc_module *net2 = small_net();
  torc_optimizer *opt2 =
      torc_optimizer_build("test_sgd", "lr=0.05, momentum=0.9", NULL);
  assert_int_equal(torc_optimizer_add_module(opt2, net2, "0.*", "lr=0.1"), 0);
  assert_int_equal(torc_optimizer_add_module(opt2, net2, NULL, NULL), 1);
  torc_scheduler *s2 = torc_scheduler_build("test_halve", "every=2", opt2);
  ck = torc_checkpoint_load(path, TORC_CPU);
  assert_torc(ck);
  assert_ok(torc_checkpoint_load_module(ck, net2, NULL, NULL));
  assert_ok(torc_optimizer_load_state_dict(opt2, ck, "optimizer."));
  assert_ok(torc_scheduler_load_state_dict(s2, ck, "scheduler."));
  torc_state_dict_free(ck);
  assert_int_equal(torc_optimizer_steps(opt2), 3);
  assert_int_equal(torc_scheduler_steps(s2), 3);
  expect_lr(opt2, 0, 0.05); /* 0.1 halved at t = 2 */
  for (int i = 0; i < 3; i++)
    train_step(net2, opt2, s2, loss);
  double *got = net_values(net2, &n2);
  assert_int_equal(n1, n2);
  for (int64_t i = 0; i < n1; i++)
    assert_true(got[i] == want[i]);
  assert_true(torc_optimizer_get_lr(opt2, 0) == lr0);
  assert_true(torc_optimizer_get_lr(opt2, 1) == lr1);
  expect_lr(opt2, 1, 0.05 / 8);
  /* The type's own state came back too: 6 calls, as the first run. */
  torc_state_dict *a = torc_state_dict_new(), *b = torc_state_dict_new();
  assert_ok(torc_scheduler_state_dict(s, NULL, a));
  assert_ok(torc_scheduler_state_dict(s2, NULL, b));
  assert_string_equal(torc_state_dict_meta(a, "state"), "calls=6");
  assert_string_equal(torc_state_dict_meta(b, "state"), "calls=6");
  assert_string_equal(torc_state_dict_meta(b, "group.0.initial_lr"),
                      "0.10000000000000001");
  torc_state_dict_free(a);
  torc_state_dict_free(b);
  free(want);
  free(got);
  torc_scheduler_free(s), torc_scheduler_free(s2);
  torc_optimizer_free(opt), torc_optimizer_free(opt2);
  torc_module_free(net), torc_module_free(net2);
  torc_loss_free(loss);
}

static void test_load_errors(void **state) {
  (void)state;
  const float av[] = {1, 2}, bv[] = {3}, cv[] = {4, 5, 6};
  torc_tensor *a = param(av, 2), *b = param(bv, 1), *c = param(cv, 3);
  torc_optimizer *opt = torc_optimizer_build("test_sgd", "lr=0.1", NULL);
  torc_optimizer_add_params(opt, &a, 1, NULL);
  torc_optimizer_add_params(opt, &b, 1, "momentum=0.5");
  set_grad(a, (float[]){1, 1}, 2);
  set_grad(b, (float[]){1}, 1);
  assert_ok(torc_optimizer_step(opt));
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_optimizer_state_dict(opt, "o.", sd));

  /* The target: two groups, a then c (c's shape differs from b's). */
  torc_optimizer *t = torc_optimizer_build("test_sgd", "lr=0.3", NULL);
  torc_optimizer_add_params(t, &a, 1, NULL);
  assert_int_equal(torc_optimizer_load_state_dict(t, sd, "o."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "the state dict has 2 parameter groups, "
                                 "this optimizer 1");
  torc_optimizer_add_params(t, &c, 1, NULL);
  assert_int_equal(torc_optimizer_load_state_dict(t, sd, "o."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'o.state.1.buf' is [1] but parameter 1 "
                                 "([3] f32) is [3]");
  /* All-or-nothing: the lr and hyper-parameters are unchanged. */
  expect_lr(t, 0, 0.3);
  torc_state_dict *chk = torc_state_dict_new();
  assert_ok(torc_optimizer_state_dict(t, NULL, chk));
  assert_string_equal(torc_state_dict_meta(chk, "group.1.momentum"), "0");
  assert_null(torc_state_dict_meta(chk, "state.0.step"));
  torc_state_dict_free(chk);

  assert_int_equal(torc_optimizer_load_state_dict(t, sd, "x."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "no optimizer state under 'x.'");
  assert_ok(torc_state_dict_set_meta(sd, "o.type", "adam"));
  assert_int_equal(torc_optimizer_load_state_dict(opt, sd, "o."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "holds the state of a 'adam' optimizer");
  assert_ok(torc_state_dict_set_meta(sd, "o.type", "test_sgd"));
  assert_ok(torc_state_dict_set_meta(sd, "o.group.1.params", "2"));
  assert_int_equal(torc_optimizer_load_state_dict(opt, sd, "o."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "group 1 has 2 parameters in the state "
                                 "dict and 1 here");
  assert_ok(torc_state_dict_set_meta(sd, "o.group.1.params", "1"));
  torc_tensor *stray = vec(cv, 3);
  assert_ok(torc_state_dict_set(sd, "o.state.7.buf", stray));
  torc_release(stray);
  assert_int_equal(torc_optimizer_load_state_dict(opt, sd, "o."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'o.state.7.buf' is not state of this "
                                 "optimizer");

  /* A good load into a fresh optimizer over a and b restores everything. */
  torc_state_dict *sd2 = torc_state_dict_new();
  assert_ok(torc_optimizer_state_dict(opt, "o.", sd2));
  torc_optimizer *u = torc_optimizer_build("test_sgd", "lr=0.3", NULL);
  torc_optimizer_add_params(u, &a, 1, NULL);
  torc_optimizer_add_params(u, &b, 1, NULL);
  assert_ok(torc_optimizer_load_state_dict(u, sd2, "o."));
  expect_lr(u, 0, 0.1);
  chk = torc_state_dict_new();
  assert_ok(torc_optimizer_state_dict(u, NULL, chk));
  assert_string_equal(torc_state_dict_meta(chk, "group.1.momentum"), "0.5");
  assert_string_equal(torc_state_dict_meta(chk, "state.1.step"), "1");
  expect(torc_state_dict_get(chk, "state.0.buf"), (double[]){1, 1}, 2);
  /* Loaded state is a copy: stepping u leaves the dict as it was. */
  assert_ok(torc_optimizer_step(u));
  expect(torc_state_dict_get(sd2, "o.state.0.buf"), (double[]){1, 1}, 2);
  torc_state_dict_free(chk);
  torc_state_dict_free(sd2);

  /* Scheduler loads. */
  torc_scheduler *s = torc_scheduler_build("test_halve", NULL, opt);
  torc_scheduler *p = torc_scheduler_build("plateau", NULL, opt);
  torc_state_dict *ss = torc_state_dict_new();
  assert_ok(torc_scheduler_state_dict(p, "s.", ss));
  assert_int_equal(torc_scheduler_load_state_dict(s, ss, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "holds the state of a 'plateau' scheduler");
  assert_int_equal(torc_scheduler_load_state_dict(s, ss, "t."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "no scheduler state under 't.'");
  assert_ok(torc_state_dict_set_meta(ss, "s.type", "test_halve"));
  assert_int_equal(torc_scheduler_load_state_dict(s, ss, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "lacks 's.state'");
  assert_ok(torc_state_dict_set_meta(ss, "s.state", "junk"));
  assert_int_equal(torc_scheduler_load_state_dict(s, ss, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "test_halve: bad state 'junk'");
  assert_int_equal(torc_scheduler_steps(s), 0);
  torc_state_dict_free(ss);
  torc_scheduler_free(s);
  torc_scheduler_free(p);

  torc_state_dict_free(sd);
  torc_optimizer_free(opt), torc_optimizer_free(t), torc_optimizer_free(u);
  torc_release(a), torc_release(b), torc_release(c);
}

/* ---- schedulers ---- */

/* The lrs of PyTorch 1.13's
 *   SequentialLR(opt, [LinearLR(opt, start_factor=0.1, total_iters=3),
 *                      StepLR(opt, step_size=2, gamma=0.5)], milestones=[3])
 * over SGD groups with lr 0.1 and 0.02, after construction and after each
 * of 10 steps, from:
 *   a = torch.nn.Parameter(torch.zeros(1)); b = ...
 *   opt = torch.optim.SGD([{"params": [a], "lr": 0.1},
 *                          {"params": [b], "lr": 0.02}], lr=0.1)
 *   main = StepLR(opt, step_size=2, gamma=0.5)
 *   warm = LinearLR(opt, start_factor=0.1, total_iters=3)
 *   s = SequentialLR(opt, [warm, main], milestones=[3])
 *   out = [[g["lr"] for g in opt.param_groups]]
 *   for t in range(10):
 *       opt.step(); s.step(); out.append([g["lr"] for g in opt.param_groups])
 *   for g in range(2): print(", ".join(repr(o[g]) for o in out))
 */
static const double pt_lr0[11] = {0.010000000000000002,
                                  0.04,
                                  0.07,
                                  0.1,
                                  0.1,
                                  0.05,
                                  0.05,
                                  0.025,
                                  0.025,
                                  0.0125,
                                  0.0125};
static const double pt_lr1[11] = {0.002,
                                  0.007999999999999998,
                                  0.013999999999999997,
                                  0.02,
                                  0.02,
                                  0.01,
                                  0.01,
                                  0.005,
                                  0.005,
                                  0.0025,
                                  0.0025};

static void test_warmup_matches_pytorch(void **state) {
  (void)state;
  const float av[] = {0}, bv[] = {0};
  torc_tensor *a = param(av, 1), *b = param(bv, 1);
  torc_optimizer *opt = torc_optimizer_build("test_sgd", "lr=0.1", NULL);
  torc_optimizer_add_params(opt, &a, 1, NULL);
  torc_optimizer_add_params(opt, &b, 1, "lr=0.02");
  torc_scheduler *s =
      torc_scheduler_build("test_halve", "every=2, warmup=3", opt);
  assert_torc(s);
  expect_lr(opt, 0, pt_lr0[0]);
  expect_lr(opt, 1, pt_lr1[0]);
  for (int t = 1; t <= 10; t++) {
    assert_ok(torc_scheduler_step(s, NAN));
    expect_lr(opt, 0, pt_lr0[t]);
    expect_lr(opt, 1, pt_lr1[t]);
  }
  assert_int_equal(torc_scheduler_steps(s), 10);
  /* The schedule counted from 1 after the warm-up: t' = t - 3. */
  assert_int_equal(n_seen_t, 7);
  for (int i = 0; i < 7; i++)
    assert_int_equal(seen_t[i], i + 1);
  torc_scheduler_free(s);

  /* Without warm-up the lr is untouched at creation and t starts at 1. */
  n_seen_t = 0;
  assert_ok(torc_optimizer_set_lr(opt, 0, 1.0));
  s = torc_scheduler_build("test_halve", NULL, opt);
  expect_lr(opt, 0, 1.0);
  assert_ok(torc_scheduler_step(s, 3.0));
  assert_ok(torc_scheduler_step(s, NAN));
  expect_lr(opt, 0, 0.25);
  assert_int_equal(seen_t[0], 1);
  assert_int_equal(seen_t[1], 2);
  torc_scheduler_free(s);

  /* A type named plateau needs its metric. */
  s = torc_scheduler_build("plateau", "warmup=2", opt);
  assert_torc(s);
  assert_int_equal(torc_scheduler_step(s, NAN), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "scheduler 'plateau' needs the monitored "
                                 "metric");
  assert_int_equal(torc_scheduler_steps(s), 0);
  assert_ok(torc_scheduler_step(s, 0.5));
  assert_int_equal(torc_scheduler_steps(s), 1);
  torc_scheduler_free(s);
  torc_scheduler_free(NULL);
  assert_int_equal(torc_scheduler_step(NULL, 0), TORC_ERR_NULL);

  torc_optimizer_free(opt);
  torc_release(a), torc_release(b);
}

/* ---- clipping ---- */

/* From PyTorch 1.13 (f32):
 *   a = torch.zeros(2, requires_grad=True); a.grad = torch.tensor([3., -4.])
 *   b = torch.zeros(2, 2, requires_grad=True)
 *   b.grad = torch.tensor([[1., 2.], [-2., 0.5]])
 *   c = torch.zeros(1, requires_grad=True)          # no grad
 *   torch.nn.utils.clip_grad_norm_([a, b, c], max_norm=1.0, norm_type=p)
 * p = 1: total 12.5, a.grad [0.23999997973442078, -0.31999996304512024],
 *   b.grad [0.07999999076128006, 0.15999998152256012, -0.15999998152256012,
 *   0.03999999538064003]
 * p = 2: total 5.852349758148193, a.grad [0.5126145482063293,
 *   -0.6834860444068909], b.grad [0.17087151110172272, 0.34174302220344543,
 *   -0.34174302220344543, 0.08543575555086136]
 * p = inf: total 4.0, a.grad [0.7499998211860657, -0.9999997615814209],
 *   b.grad [0.24999994039535522, 0.49999988079071045, -0.49999988079071045,
 *   0.12499997019767761]
 * max_norm 100 (p = 2): unchanged.
 * clip_grad_value_(..., 1.5): a.grad [1.5, -1.5], b.grad [1, 1.5, -1.5,
 *   0.5]. */
static void make_clip_params(torc_tensor **ps) {
  const float z[] = {0, 0, 0, 0};
  ps[0] = param(z, 2);
  ps[1] = torc_from_host(z, TORC_SHAPE(2, 2), TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(ps[1], 1));
  ps[2] = param(z, 1);
  set_grad(ps[0], (float[]){3, -4}, 2);
  torc_tensor *g = torc_from_host((float[]){1, 2, -2, 0.5f}, TORC_SHAPE(2, 2),
                                  TORC_F32, TORC_CPU);
  assert_ok(torc_set_grad(ps[1], g));
  torc_release(g);
}

static void free3(torc_tensor **ps) {
  for (int i = 0; i < 3; i++)
    torc_release(ps[i]);
}

static void test_clip_grad_norm(void **state) {
  (void)state;
  const double p_[3] = {1, 2, INFINITY},
               tot[3] = {12.5, 5.852349758148193, 4.0};
  const double ga[3][2] = {{0.23999997973442078, -0.31999996304512024},
                           {0.5126145482063293, -0.6834860444068909},
                           {0.7499998211860657, -0.9999997615814209}};
  const double gb[3][4] = {{0.07999999076128006, 0.15999998152256012,
                            -0.15999998152256012, 0.03999999538064003},
                           {0.17087151110172272, 0.34174302220344543,
                            -0.34174302220344543, 0.08543575555086136},
                           {0.24999994039535522, 0.49999988079071045,
                            -0.49999988079071045, 0.12499997019767761}};
  for (int k = 0; k < 3; k++) {
    torc_tensor *ps[3];
    make_clip_params(ps);
    double total = -1;
    assert_ok(torc_clip_grad_norm(ps, 3, 1.0, p_[k], 1, &total));
    assert_true(fabs(total - tot[k]) < 1e-6 * tot[k]);
    /* PyTorch's coefficient: max_norm / (total + 1e-6). */
    double coef = 1.0 / (tot[k] + 1e-6);
    assert_true(fabs(ga[k][0] - 3 * coef) < 1e-6);
    test_assert_values(torc_grad_of(ps[0]), ga[k], 2, 1e-7);
    test_assert_values(torc_grad_of(ps[1]), gb[k], 4, 1e-7);
    assert_null(torc_grad_of(ps[2]));
    free3(ps);
  }
  /* Below max_norm nothing changes. */
  torc_tensor *ps[3];
  make_clip_params(ps);
  assert_ok(torc_clip_grad_norm(ps, 3, 100, 2, 1, NULL));
  expect(torc_grad_of(ps[0]), (double[]){3, -4}, 2);
  expect(torc_grad_of(ps[1]), (double[]){1, 2, -2, 0.5}, 4);
  assert_int_equal(torc_clip_grad_norm(ps, 3, 1, 3, 1, NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "p = 3 is not supported; use 1, 2 or "
                                 "INFINITY");
  assert_int_equal(torc_clip_grad_norm(ps, 3, -1, 2, 1, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "max_norm = -1");
  /* clip_grad_value_. */
  assert_ok(torc_clip_grad_value(ps, 3, 1.5));
  expect(torc_grad_of(ps[0]), (double[]){1.5, -1.5}, 2);
  expect(torc_grad_of(ps[1]), (double[]){1, 1.5, -1.5, 0.5}, 4);
  assert_int_equal(torc_clip_grad_value(ps, 3, -1), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "clip = -1 must be >= 0");
  free3(ps);
}

static int n_warnings;
static char last_warning[1024];
static void warn_cb(int level, const char *line, void *user) {
  (void)user;
  if (level == TORC_LOG_WARN) {
    n_warnings++;
    snprintf(last_warning, sizeof last_warning, "%s", line);
  }
}

static void test_clip_nonfinite(void **state) {
  (void)state;
  torc_tensor *ps[3];
  make_clip_params(ps);
  torc_tensor *g = torc_from_host((float[]){1, NAN, 0, 0}, TORC_SHAPE(2, 2),
                                  TORC_F32, TORC_CPU);
  assert_ok(torc_set_grad(ps[1], g));
  torc_release(g);
  double total = 0;
  assert_int_equal(torc_clip_grad_norm(ps, 3, 1, 2, 1, &total),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "the gradient of parameter 1 is not finite");
  assert_true(isnan(total));
  expect(torc_grad_of(ps[0]), (double[]){3, -4}, 2);

  /* Not an error: one warning (once per process), gradients unchanged. */
  n_warnings = 0;
  torc_set_log_callback(warn_cb, NULL);
  assert_ok(torc_clip_grad_norm(ps, 3, 1, 2, 0, &total));
  assert_ok(torc_clip_grad_norm(ps, 3, 1, INFINITY, 0, &total));
  torc_set_log_callback(NULL, NULL);
  assert_int_equal(n_warnings, 1);
  assert_contains(last_warning, "left unclipped");
  assert_contains(last_warning, "parameter 1");
  assert_true(isnan(total));
  expect(torc_grad_of(ps[0]), (double[]){3, -4}, 2);
  free3(ps);

  /* The module variants name parameters by their dotted names. */
  torc_module *m = small_net();
  torc_tensor *w = torc_module_parameter(torc_module_child(m, "1"), "weight");
  torc_tensor *bad = torc_from_host((float[]){INFINITY, 1}, TORC_SHAPE(1, 2),
                                    TORC_F32, TORC_CPU);
  assert_ok(torc_set_grad(w, bad));
  torc_release(bad);
  assert_int_equal(torc_module_clip_grad_norm(m, 1, 1, 1, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "parameter 2 ('1.weight') is not finite");
  assert_ok(torc_module_clip_grad_value(m, 0.5));
  expect(torc_grad_of(w), (double[]){0.5, 0.5}, 2);
  assert_ok(torc_module_clip_grad_norm(m, 0.1, 2, 1, &total));
  assert_true(fabs(total - sqrt(0.5)) < 1e-6);
  expect(torc_grad_of(w),
         (double[]){0.1 / (sqrt(0.5) + 1e-6) * 0.5,
                    0.1 / (sqrt(0.5) + 1e-6) * 0.5},
         2);
  assert_int_equal(torc_module_clip_grad_value(NULL, 1), TORC_ERR_NULL);
  torc_module_free(m);
}

/* ---- INI sections ---- */

static void test_config(void **state) {
  (void)state;
  torc_config *cfg = torc_config_parse("[loss]\n"
                                       "type = test_mse\n"
                                       "reduction = sum\n"
                                       "[optimizer]\n"
                                       "type = test_sgd\n"
                                       "lr = 0.2\n"
                                       "momentum = 0.9\n"
                                       "[scheduler]\n"
                                       "type = test_halve\n"
                                       "every = 2\n"
                                       "warmup = 1\n",
                                       "run.ini");
  assert_torc(cfg);
  torc_module *m = small_net();
  torc_loss *l = torc_loss_from_config(cfg);
  torc_optimizer *opt = torc_optimizer_from_config(cfg, m);
  assert_torc(l);
  assert_torc(opt);
  assert_int_equal(torc_optimizer_group_count(opt), 1);
  torc_scheduler *s = torc_scheduler_from_config(cfg, opt);
  assert_torc(s);
  expect_lr(opt, 0, 0.2 * 0.1); /* the warm-up's start */
  assert_ok(torc_scheduler_step(s, NAN));
  expect_lr(opt, 0, 0.2);
  torc_scheduler_free(s);
  torc_optimizer_free(opt);
  torc_loss_free(l);
  torc_config_free(cfg);

  /* Errors carry the line of the key they name. */
  cfg = torc_config_parse("[loss]\ntype = test_mes\n"
                          "[optimizer]\ntype = test_sgd\nlr = 0.1\n"
                          "momentum = fast\n"
                          "[scheduler]\ntype = test_halve\nevry = 2\n",
                          "bad.ini");
  assert_torc(cfg);
  assert_null(torc_loss_from_config(cfg));
  assert_error(TORC_ERR_CONFIG, "bad.ini:2: key 'type' in [loss]: unknown "
                                "loss type 'test_mes'");
  assert_null(torc_optimizer_from_config(cfg, m));
  assert_error(TORC_ERR_CONFIG, "bad.ini:6: key 'momentum' in [optimizer]: "
                                "test_sgd: key 'momentum' = 'fast' is not a "
                                "number");
  torc_optimizer *o2 = torc_optimizer_build("test_sgd", "lr=1", m);
  assert_null(torc_scheduler_from_config(cfg, o2));
  assert_error(TORC_ERR_CONFIG, "bad.ini:9: key 'evry' in [scheduler]: "
                                "test_halve: unknown key 'evry' (did you "
                                "mean 'every'?)");
  torc_config_free(cfg);

  /* [optimizer] without lr: the section's line. */
  cfg = torc_config_parse("[optimizer]\ntype = test_sgd\n", "nolr.ini");
  assert_null(torc_optimizer_from_config(cfg, m));
  assert_error(TORC_ERR_CONFIG, "nolr.ini:1: [optimizer]: test_sgd: key 'lr' "
                                "is required");
  assert_null(torc_loss_from_config(cfg));
  assert_error(TORC_ERR_CONFIG, "nolr.ini: no [loss] section");
  /* No [scheduler], or type = none: no scheduler and no error. */
  assert_null(torc_scheduler_from_config(cfg, o2));
  assert_int_equal(torc_last_status(), TORC_OK);
  torc_config_free(cfg);
  cfg = torc_config_parse("[scheduler]\ntype = none\n", "none.ini");
  torc_set_error(TORC_ERR_INVALID, "stale");
  assert_null(torc_scheduler_from_config(cfg, o2));
  assert_int_equal(torc_last_status(), TORC_OK);
  torc_config_free(cfg);
  cfg =
      torc_config_parse("[scheduler]\ntype = none\nwarmup = 3\n", "none2.ini");
  assert_null(torc_scheduler_from_config(cfg, o2));
  assert_error(TORC_ERR_CONFIG, "none2.ini:3: key 'warmup' in [scheduler]: "
                                "[scheduler] type = none takes no other "
                                "keys");
  torc_config_free(cfg);
  /* type is required (the schema). */
  assert_null(torc_config_parse("[loss]\nreduction = sum\n", "notype.ini"));
  assert_error(TORC_ERR_CONFIG, "notype.ini");
  assert_contains(torc_last_error(), "type");
  torc_optimizer_free(o2);
  torc_module_free(m);
}

/* ---- plugins own their types (run last: it shuts torc down) ---- */

static void test_plugin_owners(void **state) {
  (void)state;
  if (torc_plugin_load("losses", NULL) != TORC_OK) {
    print_message("the losses plugin does not load (%s): skipping\n",
                  torc_last_error());
    skip();
  }
  const torc_loss_type *mse = torc_loss_type_find("mse");
  assert_non_null(mse);
  torc_loss_type mine = test_mse;
  mine.name = "mse";
  assert_int_equal(torc_loss_type_register(&mine), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'mse' is already registered (by losses)");

  /* The optim plugin's "plateau" collides with the program's: its init
   * fails, naming both owners, and whatever it registered is rolled back. */
  int n_opt = torc_optimizer_type_count(),
      n_sched = torc_scheduler_type_count();
  torc_status st = torc_plugin_load("optim", NULL);
  if (st == TORC_OK || strstr(torc_last_error(), "plateau") == NULL) {
    print_message("optim plugin: %s\n", st ? torc_last_error() : "loaded");
    if (st != TORC_OK && strstr(torc_last_error(), "not found"))
      skip();
    fail();
  }
  assert_contains(torc_last_error(), "plugin 'optim' cannot register "
                                     "scheduler type 'plateau'");
  assert_contains(torc_last_error(), "(by the program)");
  assert_int_equal(torc_optimizer_type_count(), n_opt);
  assert_int_equal(torc_scheduler_type_count(), n_sched);
  assert_null(torc_optimizer_type_find("sgd"));

  /* Unloading removes the plugin's types; the program's stay. */
  torc_shutdown();
  assert_null(torc_loss_type_find("mse"));
  assert_non_null(torc_loss_type_find("test_mse"));
  assert_int_equal(test_setup_ref_sim(NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_registries, setup, teardown),
      cmocka_unit_test_setup_teardown(test_key_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_loss_forward, setup, teardown),
      cmocka_unit_test_setup_teardown(test_groups_and_step, setup, teardown),
      cmocka_unit_test_setup_teardown(test_add_module, setup, teardown),
      cmocka_unit_test_setup_teardown(test_state_dict_round_trip, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_load_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_warmup_matches_pytorch, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_clip_grad_norm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_clip_nonfinite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_config, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plugin_owners, setup, teardown),
  };
  return cmocka_run_group_tests_name("optim_core", tests, group_setup,
                                     group_teardown);
}
