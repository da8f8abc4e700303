/* tests/test_sched_cycle.c — schedulers that cycle momentum as well as the
 * lr (onecycle, cyclic) against PyTorch 1.13's OneCycleLR and CyclicLR:
 * every configuration of tests/fixtures/sched.safetensors (gen_sched.py),
 * lr and momentum / beta1 over 100 steps, with PyTorch's defaults; the
 * errors for optimizers without momentum; the hyper-parameter access the
 * schedulers use; momentum through a warm-up and a checkpoint.
 */
#include <math.h>

#include "testutil.h"

#include "torc/config.h"
#include "torc/optim.h"

#define TOL 1e-6

static torc_safetensors *fx;
static int fx_steps;
static double dev_max;
static char dev_where[160];

static int group_setup(void **state) {
  (void)state;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("optim", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/sched.safetensors",
           src ? src : ".");
  fx = torc_safetensors_open(path);
  if (fx == NULL) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  const char *s = torc_safetensors_metadata(fx, "steps");
  fx_steps = s ? atoi(s) : 0;
  return fx_steps >= 100 ? 0 : -1;
}

static int group_teardown(void **state) {
  torc_safetensors_close(fx);
  fx = NULL;
  printf("# largest deviation from PyTorch, |torc - torch| / |torch|: %.3g "
         "at %s (tolerance %g)\n",
         dev_max, dev_max > 0 ? dev_where : "every value", TOL);
  return test_teardown_all(state);
}

static void check_close(double got, double want, const char *name,
                        const char *what, int step, int group) {
  double d = fabs(got - want), scale = fabs(want);
  double rel = scale > 0 ? d / scale : d;
  if (rel > dev_max) {
    dev_max = rel;
    snprintf(dev_where, sizeof dev_where, "%s %s step %d group %d", name,
             what, step, group);
  }
  if (!(d <= TOL * scale + 1e-300)) {
    print_error("%s %s, step %d, group %d: torc %.17g, PyTorch %.17g "
                "(relative difference %.3g)\n",
                name, what, step, group, got, want, rel);
    fail();
  }
}

/* A fixture tensor's values as doubles (malloc'd). */
static double *fx_values(const char *name) {
  torc_tensor *t = torc_safetensors_get(fx, name, TORC_CPU);
  assert_torc(t);
  double *v = test_values(t);
  torc_release(t);
  return v;
}

/* Two groups at lr 0.1 and 0.02, as gen_sched.py builds them. */
typedef struct rig {
  torc_tensor *p[2];
  torc_optimizer *opt;
  torc_scheduler *s;
} rig;

static torc_optimizer *two_groups(rig *r, const char *otype,
                                  const char *ospec) {
  const int64_t shape[1] = {1};
  for (int i = 0; i < 2; i++) {
    r->p[i] = torc_zeros(shape, 1, TORC_F32, TORC_CPU);
    assert_torc(r->p[i]);
    assert_ok(torc_set_requires_grad(r->p[i], 1));
  }
  r->opt = torc_optimizer_build(otype, ospec, NULL);
  assert_torc(r->opt);
  assert_int_equal(torc_optimizer_add_params(r->opt, &r->p[0], 1, ""), 0);
  assert_int_equal(torc_optimizer_add_params(r->opt, &r->p[1], 1, "lr=0.02"),
                   1);
  return r->opt;
}

static void rig_free(rig *r) {
  torc_scheduler_free(r->s);
  torc_optimizer_free(r->opt);
  torc_release(r->p[0]);
  torc_release(r->p[1]);
  memset(r, 0, sizeof *r);
}

/* The group's momentum, or beta1 for optimizers with betas. */
static double momentum_of(const torc_optimizer *opt, int g) {
  const char *key =
      torc_optimizer_has_hyper(opt, "momentum") ? "momentum" : "betas";
  const char *v = torc_optimizer_get_hyper(opt, g, key);
  assert_non_null(v);
  return strtod(v, NULL); /* betas: the first number */
}

/* The configuration's four fields "OPT|OPT_SPEC|SCHED|SCHED_SPEC". */
typedef struct cfg {
  char buf[512];
  const char *name, *otype, *ospec, *stype, *sspec;
} sched_cfg;

static void parse_cfg(const char *name, sched_cfg *c) {
  char key[128];
  snprintf(key, sizeof key, "sched:%s", name);
  const char *m = torc_safetensors_metadata(fx, key);
  assert_non_null(m);
  snprintf(c->buf, sizeof c->buf, "%s", m);
  c->name = name;
  char *f[4], *p = c->buf;
  for (int i = 0; i < 4; i++) {
    f[i] = p;
    p = strchr(p, '|');
    if (i < 3) {
      assert_non_null(p);
      *p++ = '\0';
    }
  }
  c->otype = f[0], c->ospec = f[1], c->stype = f[2], c->sspec = f[3];
}

static void check_row(const rig *r, const sched_cfg *c, const double *lr,
                      const double *mom, int t) {
  for (int g = 0; g < 2; g++) {
    check_close(torc_optimizer_get_lr(r->opt, g), lr[t * 2 + g], c->name,
                "lr", t, g);
    check_close(momentum_of(r->opt, g), mom[t * 2 + g], c->name, "momentum",
                t, g);
  }
}

/* Every configuration of the fixture: lr and momentum (beta1) after
 * construction and after each of the 100 steps. */
static void test_sequences_match_pytorch(void **state) {
  (void)state;
  int n = 0, onecycle_beta1 = 0;
  for (int i = 0; i < torc_safetensors_metadata_count(fx); i++) {
    const char *k = torc_safetensors_metadata_key(fx, i);
    if (strncmp(k, "sched:", 6) != 0)
      continue;
    sched_cfg c;
    parse_cfg(k + 6, &c);
    char name[160];
    snprintf(name, sizeof name, "sched.%s.lr", c.name);
    double *lr = fx_values(name);
    snprintf(name, sizeof name, "sched.%s.momentum", c.name);
    double *mom = fx_values(name);
    rig r = {0};
    two_groups(&r, c.otype, c.ospec);
    r.s = torc_scheduler_build(c.stype, c.sspec, r.opt);
    assert_torc(r.s);
    check_row(&r, &c, lr, mom, 0);
    for (int t = 1; t <= fx_steps; t++) {
      assert_ok(torc_optimizer_step(r.opt));
      assert_ok(torc_scheduler_step(r.s, NAN));
      check_row(&r, &c, lr, mom, t);
    }
    if (strcmp(c.stype, "onecycle") == 0 && strncmp(c.otype, "adam", 4) == 0 &&
        mom[0] != mom[2 * 30])
      onecycle_beta1++;
    free(lr), free(mom);
    rig_free(&r);
    n++;
  }
  assert_true(n >= 10);
  assert_true(onecycle_beta1 >= 2); /* Adam's beta1 does cycle */
  printf("# %d configurations, %d steps each, lr and momentum match "
         "PyTorch\n",
         n, fx_steps);
}

/* PyTorch raises for an optimizer without momentum; torc refuses to build
 * the scheduler, naming the fix. CyclicLR (1.13) cycles only "momentum". */
static void test_no_momentum_errors(void **state) {
  (void)state;
  rig r = {0};
  two_groups(&r, "adagrad", "lr=0.1");
  torc_clear_error();
  assert_null(torc_scheduler_build("onecycle", "total_steps=10", r.opt));
  assert_error(TORC_ERR_INVALID, "optimizer 'adagrad' has none");
  assert_contains(torc_last_error(), "cycle_momentum = no");
  r.s = torc_scheduler_build("onecycle", "total_steps=10, cycle_momentum=no",
                             r.opt);
  assert_torc(r.s);
  rig_free(&r);

  two_groups(&r, "adam", "lr=0.1");
  torc_clear_error();
  assert_null(torc_scheduler_build("cyclic", "max_lr=0.5", r.opt));
  assert_error(TORC_ERR_INVALID, "optimizer 'adam' has none");
  assert_contains(torc_last_error(), "sgd or rmsprop");
  /* A beta1 the optimizer refuses is reported when the scheduler is
   * built, and the optimizer keeps its betas. */
  torc_clear_error();
  assert_null(torc_scheduler_build("onecycle",
                                   "total_steps=10, max_momentum=1", r.opt));
  assert_contains(torc_last_error(), "cycle_momentum = no");
  assert_string_equal(torc_optimizer_get_hyper(r.opt, 0, "betas"),
                      "0.9,0.999");
  rig_free(&r);

  two_groups(&r, "sgd", "lr=0.1");
  torc_clear_error();
  assert_null(torc_scheduler_build("cyclic", "step_size_up=10", r.opt));
  assert_contains(torc_last_error(), "max_lr");
  torc_clear_error();
  assert_null(torc_scheduler_build("cyclic", "max_lr=1, mode=triangle",
                                   r.opt));
  assert_contains(torc_last_error(), "triangular2");
  rig_free(&r);
}

/* [scheduler] in an INI file: the error names the file and the line. */
static void test_no_momentum_from_config(void **state) {
  (void)state;
  torc_config *cfg = torc_config_parse("[optimizer]\n"
                                       "type = adagrad\n"
                                       "lr = 0.1\n"
                                       "[scheduler]\n"
                                       "type = onecycle\n"
                                       "total_steps = 20\n",
                                       "run.ini");
  assert_torc(cfg);
  rig r = {0};
  two_groups(&r, "adagrad", "lr=0.1");
  torc_clear_error();
  assert_null(torc_scheduler_from_config(cfg, r.opt));
  assert_contains(torc_last_error(), "run.ini");
  assert_contains(torc_last_error(), "cycle_momentum");
  torc_config_free(cfg);
  rig_free(&r);
}

/* get/set of a group's hyper-parameters, as the schedulers use them. */
static void test_hyper_access(void **state) {
  (void)state;
  rig r = {0};
  two_groups(&r, "adam", "lr=0.1, betas=0.8,0.99");
  assert_true(torc_optimizer_has_hyper(r.opt, "betas"));
  assert_false(torc_optimizer_has_hyper(r.opt, "momentum"));
  assert_string_equal(torc_optimizer_name(r.opt), "adam");
  assert_string_equal(torc_optimizer_get_hyper(r.opt, 1, "betas"),
                      "0.8,0.99");
  assert_ok(torc_optimizer_set_hyper(r.opt, 1, "betas", "0.5,0.9"));
  assert_string_equal(torc_optimizer_get_hyper(r.opt, 1, "betas"), "0.5,0.9");
  assert_string_equal(torc_optimizer_get_hyper(r.opt, 0, "betas"),
                      "0.8,0.99");
  /* A refused value changes nothing. */
  torc_clear_error();
  assert_int_not_equal(torc_optimizer_set_hyper(r.opt, 1, "betas", "1.5,0.9"),
                       TORC_OK);
  assert_string_equal(torc_optimizer_get_hyper(r.opt, 1, "betas"), "0.5,0.9");
  torc_clear_error();
  assert_null(torc_optimizer_get_hyper(r.opt, 0, "momentum"));
  assert_error(TORC_ERR_INVALID, "no hyper-parameter 'momentum'");
  torc_clear_error();
  assert_int_not_equal(torc_optimizer_set_hyper(r.opt, 0, "lr", "1"), TORC_OK);
  assert_contains(torc_last_error(), "torc_optimizer_set_lr");
  torc_clear_error();
  assert_null(torc_optimizer_get_hyper(r.opt, 2, "betas"));
  assert_error(TORC_ERR_RANGE, "group 2 does not exist");
  /* The value is saved with the group. */
  torc_state_dict *sd = torc_state_dict_new();
  assert_non_null(sd);
  assert_ok(torc_optimizer_state_dict(r.opt, "optimizer.", sd));
  assert_string_equal(torc_state_dict_meta(sd, "optimizer.group.1.betas"),
                      "0.5,0.9");
  torc_state_dict_free(sd);
  rig_free(&r);
}

/* With a warm-up, the momentum is set when the scheduler is built
 * (max_momentum) and stays there until the schedule starts; a checkpoint
 * mid-way continues the same sequence. */
static void test_warmup_and_resume(void **state) {
  (void)state;
  rig a = {0}, b = {0};
  two_groups(&a, "sgd", "lr=0.1, momentum=0.5");
  a.s = torc_scheduler_build("onecycle", "total_steps=20, warmup=3", a.opt);
  assert_torc(a.s);
  for (int t = 0; t <= 3; t++) {
    if (t > 0)
      assert_ok(torc_scheduler_step(a.s, NAN));
    assert_true(momentum_of(a.opt, 0) == 0.95);
  }
  assert_ok(torc_scheduler_step(a.s, NAN));
  assert_true(momentum_of(a.opt, 0) < 0.95);
  for (int t = 0; t < 5; t++)
    assert_ok(torc_scheduler_step(a.s, NAN));
  torc_state_dict *sd = torc_state_dict_new();
  assert_non_null(sd);
  assert_ok(torc_optimizer_state_dict(a.opt, "optimizer.", sd));
  assert_ok(torc_scheduler_state_dict(a.s, "scheduler.", sd));
  two_groups(&b, "sgd", "lr=0.1, momentum=0.5");
  b.s = torc_scheduler_build("onecycle", "total_steps=20, warmup=3", b.opt);
  assert_torc(b.s);
  assert_ok(torc_optimizer_load_state_dict(b.opt, sd, "optimizer."));
  assert_ok(torc_scheduler_load_state_dict(b.s, sd, "scheduler."));
  torc_state_dict_free(sd);
  for (int t = 0; t < 10; t++) {
    assert_true(momentum_of(a.opt, 1) == momentum_of(b.opt, 1));
    assert_true(torc_optimizer_get_lr(a.opt, 1) ==
                torc_optimizer_get_lr(b.opt, 1));
    assert_ok(torc_scheduler_step(a.s, NAN));
    assert_ok(torc_scheduler_step(b.s, NAN));
  }
  rig_free(&a);
  rig_free(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sequences_match_pytorch),
      cmocka_unit_test(test_no_momentum_errors),
      cmocka_unit_test(test_no_momentum_from_config),
      cmocka_unit_test(test_hyper_access),
      cmocka_unit_test(test_warmup_and_resume),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
