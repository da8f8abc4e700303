/* tests/test_optim_core_sched.c — schedulers, clipping and the INI
 * sections of torc/optim.h with types the test registers itself
 * (tests/optim_core_testutil.h): the generic warm-up against PyTorch's
 * numbers, clipping by norm and by value (non-finite gradients too), and
 * the [loss]/[optimizer]/[scheduler] sections.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "testutil.h"
#include "optim_core_testutil.h"

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

/* torc_clip_grad_norm_t: the same PyTorch figures with the norm a 0-d
 * f64 tensor and nothing read; a non-finite norm leaves the gradients. */
static void test_clip_grad_norm_t(void **state) {
  (void)state;
  const double p_[3] = {1, 2, INFINITY},
               tot[3] = {12.5, 5.852349758148193, 4.0};
  const double ga[3][2] = {{0.23999997973442078, -0.31999996304512024},
                           {0.5126145482063293, -0.6834860444068909},
                           {0.7499998211860657, -0.9999997615814209}};
  for (int k = 0; k < 3; k++) {
    torc_tensor *ps[3], *qs[3], *total = NULL;
    make_clip_params(ps);
    make_clip_params(qs);
    assert_ok(torc_clip_grad_norm_t(ps, 3, 1.0, p_[k], &total));
    assert_non_null(total);
    assert_int_equal(torc_ndim(total), 0);
    assert_int_equal(torc_dtype_of(total), TORC_F64);
    double t = -1, h = -1;
    assert_ok(torc_item(total, &t));
    assert_true(fabs(t - tot[k]) < 1e-6 * tot[k]);
    test_assert_values(torc_grad_of(ps[0]), ga[k], 2, 1e-7);
    assert_null(torc_grad_of(ps[2]));
    /* As the double form, to the last bit. */
    assert_ok(torc_clip_grad_norm(qs, 3, 1.0, p_[k], 1, &h));
    assert_true(t == h);
    for (int i = 0; i < 2; i++) {
      int sc = torc_scope_begin();
      torc_tensor *d = torc_ne(torc_grad_of(ps[i]), torc_grad_of(qs[i]));
      double any = 1;
      assert_ok(torc_item(torc_sum(d, NULL, 0, 0), &any));
      assert_true(any == 0);
      torc_scope_end(sc);
    }
    torc_release(total);
    free3(ps), free3(qs);
  }
  torc_tensor *ps[3], *total = NULL;
  make_clip_params(ps);
  torc_tensor *g = torc_from_host((float[]){1, NAN, 0, 0}, TORC_SHAPE(2, 2),
                                  TORC_F32, TORC_CPU);
  assert_ok(torc_set_grad(ps[1], g));
  torc_release(g);
  assert_ok(torc_clip_grad_norm_t(ps, 3, 1, 2, &total));
  double t = 0;
  assert_ok(torc_item(total, &t));
  assert_true(isnan(t));
  expect(torc_grad_of(ps[0]), (double[]){3, -4}, 2);
  torc_release(total);
  assert_int_equal(torc_clip_grad_norm_t(ps, 3, 1, 3, NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "p = 3 is not supported");
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

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_warmup_matches_pytorch),
      T(test_clip_grad_norm),
      T(test_clip_grad_norm_t),
      T(test_clip_nonfinite),
      T(test_config),
  };
#undef T
  return cmocka_run_group_tests_name("optim_core_sched", tests, group_setup,
                                     group_teardown);
}
