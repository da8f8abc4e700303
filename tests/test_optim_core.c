/* tests/test_optim_core.c — the core of torc/optim.h with types the test
 * registers itself (tests/optim_core_testutil.h): the three registries and
 * their key errors, losses, optimizer groups, per-parameter state and step
 * counts, zero_grad, state dicts through checkpoint files, and plugin
 * owners. Schedulers, clipping and the INI sections are in
 * test_optim_core_sched.c.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "testutil.h"
#include "optim_core_testutil.h"

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
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_registries),
      T(test_key_errors),
      T(test_loss_forward),
      T(test_groups_and_step),
      T(test_add_module),
      T(test_state_dict_round_trip),
      T(test_load_errors),
      T(test_plugin_owners),
  };
#undef T
  return cmocka_run_group_tests_name("optim_core", tests, group_setup,
                                     group_teardown);
}
