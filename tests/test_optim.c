/* tests/test_optim.c — the optim plugin (plugins/optim) against PyTorch:
 * every optimizer configuration of tests/fixtures/optim.safetensors (written
 * by gen_optim.py) reproduced step by step through torc_optimizer_build and
 * torc_optimizer_step, every scheduler's lr sequence through
 * torc_scheduler_build and torc_scheduler_step (warm-up composed with
 * cosine and exponential included), parameter groups, frozen parameters,
 * state saved and loaded mid-way continuing bit for bit, and each key and
 * value error the plugin reports.
 */
#include <math.h>
#include <unistd.h>

#include "testutil.h"

#include "torc/optim.h"

/* Tolerances: relative, against PyTorch. */
#define TOL_F32 1e-6
#define TOL_F64 1e-12
#define TOL_LR 1e-12

static torc_safetensors *fx;
static int fx_steps, fx_sched_steps;

/* The largest deviation seen per kind, printed at the end. */
typedef struct dev_stat {
  double dev;
  char where[128];
  long long compared;
} dev_stat;
static dev_stat dev_f32, dev_f64, dev_lr;

static int open_fixture(void) {
  const char *src = getenv("TORC_TOP_SRCDIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/optim.safetensors",
           src ? src : ".");
  fx = torc_safetensors_open(path);
  if (fx == NULL) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  const char *s = torc_safetensors_metadata(fx, "steps");
  const char *ss = torc_safetensors_metadata(fx, "sched_steps");
  fx_steps = s ? atoi(s) : 0;
  fx_sched_steps = ss ? atoi(ss) : 0;
  return fx_steps > 10 && fx_sched_steps > 10 ? 0 : -1;
}

static int group_setup(void **state) {
  (void)state;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("sim", NULL) != TORC_OK ||
      torc_plugin_load("optim", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return open_fixture();
}

static int group_teardown(void **state) {
  torc_safetensors_close(fx);
  fx = NULL;
  printf("# largest deviation from PyTorch, |torc - torch| / |torch|:\n"
         "#   f32 parameters: %.3g at %s (%lld values; tolerance %g)\n"
         "#   f64 parameters: %.3g at %s (%lld values; tolerance %g)\n"
         "#   learning rates: %.3g at %s (%lld values; tolerance %g)\n",
         dev_f32.dev, dev_f32.where, dev_f32.compared, TOL_F32, dev_f64.dev,
         dev_f64.where, dev_f64.compared, TOL_F64, dev_lr.dev, dev_lr.where,
         dev_lr.compared, TOL_LR);
  return test_teardown_all(state);
}

/* Compares got with want (relative tol; an absolute floor of 1e-300 so
 * that exact zeros compare), noting the deviation in *stat. */
static void check_close(dev_stat *stat, double got, double want, double tol,
                        const char *what, int step, int index) {
  double d = fabs(got - want), scale = fabs(want);
  double rel = scale > 0 ? d / scale : d;
  stat->compared++;
  if (rel > stat->dev) {
    stat->dev = rel;
    snprintf(stat->where, sizeof stat->where, "%s step %d [%d]", what, step,
             index);
  }
  if (!(d <= tol * scale + 1e-300)) {
    print_error("%s, step %d, element %d: torc %.17g, PyTorch %.17g "
                "(relative difference %.3g > %g)\n",
                what, step, index, got, want, rel, tol);
    fail();
  }
}

/* A fixture tensor's values as doubles (malloc'd; *n receives numel). */
static double *fx_values(const char *name, int64_t *n) {
  int scope = torc_scope_begin();
  torc_tensor *t = torc_safetensors_get(fx, name, TORC_CPU);
  assert_torc(t);
  if (n)
    *n = torc_numel(t);
  double *v = test_values(t);
  torc_scope_end(scope);
  assert_non_null(v);
  return v;
}

/* ---- optimizer configurations ---- */

typedef struct opt_cfg {
  char name[64], type[32];
  torc_dtype dtype;
  char spec[256], group2[256]; /* group2 "-": one group */
  int maximize;
} opt_cfg;

/* "opt:NAME" = "TYPE|DTYPE|SPEC|GROUP2". */
static void parse_opt_cfg(const char *name, opt_cfg *c) {
  char key[96];
  snprintf(key, sizeof key, "opt:%s", name);
  const char *m = torc_safetensors_metadata(fx, key);
  assert_non_null(m);
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  char dt[8] = "";
  const char *p = m;
  char *fields[4] = {c->type, dt, c->spec, c->group2};
  size_t sizes[4] = {sizeof c->type, sizeof dt, sizeof c->spec,
                     sizeof c->group2};
  for (int i = 0; i < 4; i++) {
    size_t len = strcspn(p, "|");
    assert_true(len < sizes[i]);
    memcpy(fields[i], p, len);
    fields[i][len] = '\0';
    p += len;
    if (i < 3) {
      assert_int_equal(*p, '|');
      p++;
    }
  }
  c->dtype = strcmp(dt, "f64") == 0 ? TORC_F64 : TORC_F32;
  c->maximize = strstr(c->spec, "maximize=yes") != NULL;
}

/* Every "opt:" configuration name, in the file's order. */
static int opt_names(const char *names[64]) {
  int n = 0;
  for (int i = 0; i < torc_safetensors_metadata_count(fx) && n < 64; i++) {
    const char *k = torc_safetensors_metadata_key(fx, i);
    if (strncmp(k, "opt:", 4) == 0)
      names[n++] = k + 4;
  }
  return n;
}

/* The two parameters being trained: a linear module's (f32), or two leaf
 * tensors (f64, through torc_optimizer_add_params). */
typedef struct params {
  torc_module *m;
  torc_tensor *w, *b; /* borrowed from m, or owned */
  torc_tensor *tw, *tb;
} params;

/* New parameters holding `w0`, `b0` (or the fixture's init values). */
static void params_new(params *p, const opt_cfg *c, torc_device dev,
                       const torc_tensor *w0, const torc_tensor *b0) {
  memset(p, 0, sizeof *p);
  int scope = torc_scope_begin();
  torc_tensor *iw = w0 ? (torc_tensor *)w0
                       : torc_safetensors_get(fx, "init.weight", dev);
  torc_tensor *ib = b0 ? (torc_tensor *)b0
                       : torc_safetensors_get(fx, "init.bias", dev);
  torc_tensor *tw = torc_safetensors_get(fx, "target.weight", dev);
  torc_tensor *tb = torc_safetensors_get(fx, "target.bias", dev);
  assert_torc(iw);
  assert_torc(ib);
  assert_torc(tw);
  assert_torc(tb);
  p->tw = torc_scope_keep(torc_to_dtype(tw, c->dtype));
  p->tb = torc_scope_keep(torc_to_dtype(tb, c->dtype));
  if (c->dtype == TORC_F32) {
    p->m = torc_module_build("linear", "in_features=4, out_features=3");
    assert_torc(p->m);
    if (dev.type != TORC_CPU.type)
      assert_ok(torc_module_to(p->m, dev));
    p->w = torc_module_parameter(p->m, "weight");
    p->b = torc_module_parameter(p->m, "bias");
    torc_grad_mode mode = torc_set_grad_mode(TORC_NO_GRAD);
    assert_ok(torc_copy_(p->w, iw));
    assert_ok(torc_copy_(p->b, ib));
    torc_set_grad_mode(mode);
  } else {
    /* clone: fresh leaves, whatever to_dtype shares with its input */
    p->w = torc_scope_keep(torc_clone(torc_to_dtype(iw, c->dtype)));
    p->b = torc_scope_keep(torc_clone(torc_to_dtype(ib, c->dtype)));
    assert_torc(p->w);
    assert_torc(p->b);
    assert_ok(torc_set_requires_grad(p->w, 1));
    assert_ok(torc_set_requires_grad(p->b, 1));
  }
  torc_scope_end(scope);
}

static void params_free(params *p) {
  if (p->m)
    torc_module_free(p->m);
  else {
    torc_release(p->w);
    torc_release(p->b);
  }
  torc_release(p->tw);
  torc_release(p->tb);
  memset(p, 0, sizeof *p);
}

/* p.grad = 2 (p - target), or 2 (target - p) when maximizing. */
static void set_grad(torc_tensor *p, const torc_tensor *target,
                     int maximize) {
  int scope = torc_scope_begin();
  torc_tensor *v = torc_detach(p);
  torc_tensor *d = maximize ? torc_sub(target, v) : torc_sub(v, target);
  torc_tensor *g = torc_mul_scalar(d, 2.0);
  assert_torc(g);
  assert_ok(torc_set_grad(p, g));
  torc_scope_end(scope);
}

/* The optimizer of configuration c over p: one group, or the weight and
 * the bias in two groups (c->group2 overriding the bias's). */
static torc_optimizer *make_optimizer(const opt_cfg *c, params *p) {
  int two = strcmp(c->group2, "-") != 0;
  torc_optimizer *opt;
  if (p->m && !two) {
    opt = torc_optimizer_build(c->type, c->spec, p->m);
    assert_torc(opt);
    return opt;
  }
  opt = torc_optimizer_build(c->type, c->spec, NULL);
  assert_torc(opt);
  if (p->m) {
    assert_int_equal(torc_optimizer_add_module(opt, p->m, "weight", ""), 0);
    assert_int_equal(torc_optimizer_add_module(opt, p->m, "bias", c->group2),
                     1);
  } else if (two) {
    assert_int_equal(torc_optimizer_add_params(opt, &p->w, 1, ""), 0);
    assert_int_equal(torc_optimizer_add_params(opt, &p->b, 1, c->group2), 1);
  } else {
    torc_tensor *both[2] = {p->w, p->b};
    assert_int_equal(torc_optimizer_add_params(opt, both, 2, ""), 0);
  }
  assert_int_equal(torc_optimizer_group_count(opt), two ? 2 : 1);
  return opt;
}

/* How a trajectory runs. */
typedef struct run_opts {
  torc_device dev;
  int resume_at;           /* 0: straight through; else save and reload */
  const char *resume_file; /* NULL: in memory; else through this file */
  int freeze_bias;         /* bias requires_grad off: must not move */
  double *out;             /* fx_steps * 15 values (weight, bias), or NULL */
} run_opts;

/* Runs configuration c for fx_steps steps, comparing every step's
 * parameters with PyTorch's. */
static void run_trajectory(const opt_cfg *c, const run_opts *o) {
  char key[128];
  snprintf(key, sizeof key, "opt.%s.weight", c->name);
  double *rw = fx_values(key, NULL);
  snprintf(key, sizeof key, "opt.%s.bias", c->name);
  double *rb = fx_values(key, NULL);
  double *b_init = fx_values("init.bias", NULL);
  dev_stat *stat = c->dtype == TORC_F64 ? &dev_f64 : &dev_f32;
  double tol = c->dtype == TORC_F64 ? TOL_F64 : TOL_F32;

  params p;
  params_new(&p, c, o->dev, NULL, NULL);
  if (o->freeze_bias)
    assert_ok(torc_set_requires_grad(p.b, 0));
  torc_optimizer *opt = make_optimizer(c, &p);
  for (int s = 0; s < fx_steps; s++) {
    if (o->resume_at && s == o->resume_at) {
      /* A checkpoint: the optimizer's state dict and the parameters'
       * values go to a fresh model and optimizer. */
      torc_state_dict *sd = torc_state_dict_new();
      assert_non_null(sd);
      assert_ok(torc_optimizer_state_dict(opt, "optimizer.", sd));
      if (o->resume_file) {
        assert_ok(torc_state_dict_save(sd, o->resume_file));
        torc_state_dict_free(sd);
        sd = torc_state_dict_load(o->resume_file, TORC_CPU);
        assert_torc(sd);
        unlink(o->resume_file);
      }
      params q;
      torc_tensor *dw = torc_detach(p.w), *db = torc_detach(p.b);
      params_new(&q, c, o->dev, dw, db);
      torc_release(dw);
      torc_release(db);
      torc_optimizer_free(opt);
      params_free(&p);
      p = q;
      opt = make_optimizer(c, &p);
      assert_ok(torc_optimizer_load_state_dict(opt, sd, "optimizer."));
      assert_int_equal(torc_optimizer_steps(opt), s);
      torc_state_dict_free(sd);
    }
    set_grad(p.w, p.tw, c->maximize);
    if (!o->freeze_bias)
      set_grad(p.b, p.tb, c->maximize);
    assert_ok(torc_optimizer_step(opt));
    double *w = test_values(p.w), *b = test_values(p.b);
    assert_non_null(w);
    assert_non_null(b);
    snprintf(key, sizeof key, "%s weight", c->name);
    for (int i = 0; i < 12; i++)
      check_close(stat, w[i], rw[s * 12 + i], tol, key, s + 1, i);
    snprintf(key, sizeof key, "%s bias", c->name);
    for (int i = 0; i < 3; i++) {
      if (o->freeze_bias) {
        if (b[i] != b_init[i])
          fail_msg("%s: the frozen bias moved at step %d", c->name, s + 1);
      } else {
        check_close(stat, b[i], rb[s * 3 + i], tol, key, s + 1, i);
      }
    }
    if (o->out) {
      memcpy(o->out + s * 15, w, 12 * sizeof(double));
      memcpy(o->out + s * 15 + 12, b, 3 * sizeof(double));
    }
    free(w);
    free(b);
  }
  assert_int_equal(torc_optimizer_steps(opt), fx_steps);
  torc_optimizer_free(opt);
  params_free(&p);
  free(rw);
  free(rb);
  free(b_init);
}

/* ---- tests ---- */

static void test_plugin_registers_types(void **state) {
  (void)state;
  static const char *const opts[] = {"sgd", "adam", "adamw", "rmsprop",
                                     "adagrad"};
  for (int i = 0; i < 5; i++) {
    const torc_optimizer_type *t = torc_optimizer_type_find(opts[i]);
    assert_non_null(t);
    assert_string_equal(t->name, opts[i]);
    assert_non_null(t->state_names);
    assert_string_equal(t->keys[0].name, "lr");
  }
  const torc_optimizer_type *adam = torc_optimizer_type_find("adam");
  assert_string_equal(adam->state_names[0], "exp_avg");
  assert_string_equal(adam->state_names[1], "exp_avg_sq");
  assert_string_equal(adam->state_names[2], "max_exp_avg_sq");
  assert_null(adam->state_names[3]);
  assert_string_equal(torc_optimizer_type_find("sgd")->state_names[0],
                      "momentum_buffer");
  assert_string_equal(torc_optimizer_type_find("adagrad")->state_names[0],
                      "sum");
  static const char *const scheds[] = {"step",   "multistep", "exponential",
                                       "cosine", "plateau",   "onecycle"};
  for (int i = 0; i < 6; i++) {
    const torc_scheduler_type *t = torc_scheduler_type_find(scheds[i]);
    assert_non_null(t);
    assert_string_equal(t->name, scheds[i]);
  }
  assert_non_null(torc_scheduler_type_find("plateau")->save);
}

/* Every configuration of the fixture, step by step. */
static void test_optimizers_match_pytorch(void **state) {
  (void)state;
  const char *names[64];
  int n = opt_names(names);
  assert_true(n >= 15);
  int have_f64 = 0, have_groups = 0;
  for (int i = 0; i < n; i++) {
    opt_cfg c;
    parse_opt_cfg(names[i], &c);
    run_opts o = {.dev = TORC_CPU};
    run_trajectory(&c, &o);
    have_f64 += c.dtype == TORC_F64;
    have_groups += strcmp(c.group2, "-") != 0;
  }
  assert_true(have_f64 >= 1);
  assert_true(have_groups >= 2);
  printf("# %d optimizer configurations, %d steps each, match PyTorch\n", n,
         fx_steps);
}

/* Saving at step 10 and loading into a fresh model and optimizer continues
 * bit for bit as the uninterrupted run (and so as PyTorch). */
static void test_optimizer_state_resume(void **state) {
  (void)state;
  const char *names[64];
  int n = opt_names(names);
  size_t size = sizeof(double) * (size_t)fx_steps * 15;
  double *straight = malloc(size), *resumed = malloc(size);
  assert_non_null(straight);
  assert_non_null(resumed);
  char path[256];
  snprintf(path, sizeof path, "/tmp/torc-test-optim-%ld.safetensors",
           (long)getpid());
  for (int i = 0; i < n; i++) {
    opt_cfg c;
    parse_opt_cfg(names[i], &c);
    run_opts o = {.dev = TORC_CPU, .out = straight};
    run_trajectory(&c, &o);
    run_opts r = {.dev = TORC_CPU, .resume_at = fx_steps / 2, .out = resumed};
    /* Two configurations go through a file. */
    if (strcmp(c.name, "adam_amsgrad") == 0 ||
        strcmp(c.name, "adamw_amsgrad_f64") == 0)
      r.resume_file = path;
    run_trajectory(&c, &r);
    if (memcmp(straight, resumed, size) != 0)
      fail_msg("%s: resuming from a state dict changed the trajectory",
               c.name);
  }
  free(straight);
  free(resumed);
}

/* The state dict names the state as PyTorch does. */
static void test_optimizer_state_names(void **state) {
  (void)state;
  opt_cfg c;
  parse_opt_cfg("adam_amsgrad", &c);
  params p;
  params_new(&p, &c, TORC_CPU, NULL, NULL);
  torc_optimizer *opt = make_optimizer(&c, &p);
  set_grad(p.w, p.tw, 0);
  set_grad(p.b, p.tb, 0);
  assert_ok(torc_optimizer_step(opt));
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_optimizer_state_dict(opt, "optimizer.", sd));
  static const char *const want[] = {
      "optimizer.state.0.exp_avg", "optimizer.state.0.exp_avg_sq",
      "optimizer.state.0.max_exp_avg_sq", "optimizer.state.1.exp_avg",
      "optimizer.state.1.exp_avg_sq", "optimizer.state.1.max_exp_avg_sq"};
  for (int i = 0; i < 6; i++) {
    torc_tensor *t = torc_state_dict_get(sd, want[i]);
    if (t == NULL)
      fail_msg("the optimizer's state dict lacks '%s'", want[i]);
    assert_int_equal(torc_numel(t), i < 3 ? 12 : 3); /* weight, bias */
  }
  /* exp_avg after one step: (1 - beta1) * grad = 0.2 * grad. */
  double *m = test_values(torc_state_dict_get(sd, "optimizer.state.0.exp_avg"));
  double *g = test_values(torc_grad_of(p.w));
  for (int i = 0; i < 12; i++)
    assert_true(fabs(m[i] - 0.2 * g[i]) <= 1e-6 * fabs(g[i]));
  free(m);
  free(g);
  torc_state_dict_free(sd);
  torc_optimizer_free(opt);
  params_free(&p);
}

/* Only the state the hyper-parameters use is kept, as in PyTorch's
 * optimizer.state: no momentum_buffer for plain SGD, no max_exp_avg_sq
 * without amsgrad, rmsprop's extras only when enabled. */
static void test_optimizer_state_kept(void **state) {
  (void)state;
  static const struct {
    const char *cfg;
    const char *have, *lack; /* "" = none */
  } cases[] = {
      {"sgd", "", "momentum_buffer"},
      {"sgd_momentum", "momentum_buffer", ""},
      {"adam", "exp_avg_sq", "max_exp_avg_sq"},
      {"adam_amsgrad", "max_exp_avg_sq", ""},
      {"rmsprop", "square_avg", "grad_avg"},
      {"rmsprop_centered", "grad_avg", ""},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    opt_cfg c;
    parse_opt_cfg(cases[k].cfg, &c);
    params p;
    params_new(&p, &c, TORC_CPU, NULL, NULL);
    torc_optimizer *opt = make_optimizer(&c, &p);
    set_grad(p.w, p.tw, 0);
    set_grad(p.b, p.tb, 0);
    assert_ok(torc_optimizer_step(opt));
    torc_state_dict *sd = torc_state_dict_new();
    assert_ok(torc_optimizer_state_dict(opt, "optimizer.", sd));
    char key[96];
    assert_non_null(torc_state_dict_meta(sd, "optimizer.state.0.step"));
    if (cases[k].have[0]) {
      snprintf(key, sizeof key, "optimizer.state.0.%s", cases[k].have);
      if (torc_state_dict_get(sd, key) == NULL)
        fail_msg("%s: the state dict lacks '%s'", cases[k].cfg, key);
    }
    if (cases[k].lack[0]) {
      snprintf(key, sizeof key, "optimizer.state.0.%s", cases[k].lack);
      if (torc_state_dict_get(sd, key) != NULL)
        fail_msg("%s: the state dict has '%s', which PyTorch does not keep",
                 cases[k].cfg, key);
    }
    /* and it loads back into a fresh optimizer of the same settings */
    torc_optimizer *again = make_optimizer(&c, &p);
    assert_ok(torc_optimizer_load_state_dict(again, sd, "optimizer."));
    torc_optimizer_free(again);
    torc_state_dict_free(sd);
    torc_optimizer_free(opt);
    params_free(&p);
  }
}

/* The same math on another device (sim runs the ref kernels: same bits). */
static void test_optimizer_on_sim(void **state) {
  (void)state;
  torc_device sim;
  assert_ok(torc_device_parse("sim", &sim));
  static const char *const cfgs[] = {"adam_amsgrad", "rmsprop_centered",
                                     "sgd_nesterov_wd", "adagrad_decay"};
  for (int i = 0; i < 4; i++) {
    opt_cfg c;
    parse_opt_cfg(cfgs[i], &c);
    run_opts o = {.dev = sim};
    run_trajectory(&c, &o);
  }
}

/* A parameter with requires_grad off, or without a gradient, is left
 * alone; the others follow PyTorch (the gradients are elementwise, so the
 * weight's trajectory does not depend on the bias). */
static void test_frozen_parameter(void **state) {
  (void)state;
  static const char *const cfgs[] = {"adam", "sgd_momentum", "adagrad_decay"};
  for (int i = 0; i < 3; i++) {
    opt_cfg c;
    parse_opt_cfg(cfgs[i], &c);
    run_opts o = {.dev = TORC_CPU, .freeze_bias = 1};
    run_trajectory(&c, &o);
  }
  /* No gradient this step: untouched, even with weight decay. */
  opt_cfg c;
  parse_opt_cfg("sgd_nesterov_wd", &c);
  params p;
  params_new(&p, &c, TORC_CPU, NULL, NULL);
  torc_optimizer *opt = make_optimizer(&c, &p);
  double *b0 = test_values(p.b), *w0 = test_values(p.w);
  set_grad(p.w, p.tw, 0);
  assert_ok(torc_optimizer_step(opt));
  double *b1 = test_values(p.b), *w1 = test_values(p.w);
  assert_memory_equal(b0, b1, 3 * sizeof(double));
  assert_memory_not_equal(w0, w1, 12 * sizeof(double));
  free(b0), free(b1), free(w0), free(w1);
  torc_optimizer_free(opt);
  params_free(&p);
}

/* ---- schedulers ---- */

typedef struct sched_cfg {
  char name[64], type[32], spec[256];
  int has_metric;
} sched_cfg;

static void parse_sched_cfg(const char *name, sched_cfg *c) {
  char key[96];
  snprintf(key, sizeof key, "sched:%s", name);
  const char *m = torc_safetensors_metadata(fx, key);
  assert_non_null(m);
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  size_t len = strcspn(m, "|");
  assert_true(len < sizeof c->type && m[len] == '|');
  memcpy(c->type, m, len);
  snprintf(c->spec, sizeof c->spec, "%s", m + len + 1);
  snprintf(key, sizeof key, "sched.%s.metric", name);
  c->has_metric = torc_safetensors_info(fx, key, NULL, NULL, NULL) == TORC_OK;
  torc_clear_error();
}

/* Two groups at lr 0.1 and 0.02 (the fixture's group_lrs), as in
 * gen_optim.py. */
typedef struct sched_rig {
  torc_tensor *p[2];
  torc_optimizer *opt;
  torc_scheduler *s;
} sched_rig;

static void rig_new(sched_rig *r, const sched_cfg *c) {
  const int64_t shape[1] = {1};
  for (int i = 0; i < 2; i++) {
    r->p[i] = torc_zeros(shape, 1, TORC_F32, TORC_CPU);
    assert_torc(r->p[i]);
    assert_ok(torc_set_requires_grad(r->p[i], 1));
  }
  r->opt = torc_optimizer_build("sgd", "lr=0.1", NULL);
  assert_torc(r->opt);
  assert_int_equal(torc_optimizer_add_params(r->opt, &r->p[0], 1, ""), 0);
  assert_int_equal(torc_optimizer_add_params(r->opt, &r->p[1], 1, "lr=0.02"),
                   1);
  r->s = torc_scheduler_build(c->type, c->spec, r->opt);
  assert_torc(r->s);
}

static void rig_free(sched_rig *r) {
  torc_scheduler_free(r->s);
  torc_optimizer_free(r->opt);
  torc_release(r->p[0]);
  torc_release(r->p[1]);
}

static void check_lrs(const sched_rig *r, const sched_cfg *c,
                      const double *ref, int t) {
  char what[96];
  snprintf(what, sizeof what, "%s lr", c->name);
  for (int g = 0; g < 2; g++)
    check_close(&dev_lr, torc_optimizer_get_lr(r->opt, g), ref[t * 2 + g],
                TOL_LR, what, t, g);
}

/* Runs a scheduler configuration (resume_at > 0: checkpoint and restore
 * the optimizer and the scheduler after that many steps). */
static void run_schedule(const sched_cfg *c, int resume_at) {
  char key[128];
  snprintf(key, sizeof key, "sched.%s.lr", c->name);
  int64_t n = 0;
  double *ref = fx_values(key, &n);
  assert_int_equal(n, (fx_sched_steps + 1) * 2);
  double *metric = NULL;
  if (c->has_metric) {
    snprintf(key, sizeof key, "sched.%s.metric", c->name);
    metric = fx_values(key, NULL);
  }
  sched_rig r;
  rig_new(&r, c);
  /* Row 0: the lrs once the scheduler exists (OneCycleLR's max_lr /
   * div_factor: the core asks the type for step 0 at construction). */
  check_lrs(&r, c, ref, 0);
  for (int t = 1; t <= fx_sched_steps; t++) {
    if (resume_at && t == resume_at + 1) {
      torc_state_dict *sd = torc_state_dict_new();
      assert_ok(torc_optimizer_state_dict(r.opt, "optimizer.", sd));
      assert_ok(torc_scheduler_state_dict(r.s, "scheduler.", sd));
      rig_free(&r);
      rig_new(&r, c);
      assert_ok(torc_optimizer_load_state_dict(r.opt, sd, "optimizer."));
      assert_ok(torc_scheduler_load_state_dict(r.s, sd, "scheduler."));
      assert_int_equal(torc_scheduler_steps(r.s), resume_at);
      torc_state_dict_free(sd);
      check_lrs(&r, c, ref, resume_at);
    }
    assert_ok(torc_scheduler_step(r.s, metric ? metric[t - 1] : NAN));
    check_lrs(&r, c, ref, t);
  }
  assert_int_equal(torc_scheduler_steps(r.s), fx_sched_steps);
  rig_free(&r);
  free(ref);
  free(metric);
}

static int sched_names(const char *names[64]) {
  int n = 0;
  for (int i = 0; i < torc_safetensors_metadata_count(fx) && n < 64; i++) {
    const char *k = torc_safetensors_metadata_key(fx, i);
    if (strncmp(k, "sched:", 6) == 0)
      names[n++] = k + 6;
  }
  return n;
}

static void test_schedulers_match_pytorch(void **state) {
  (void)state;
  const char *names[64];
  int n = sched_names(names);
  assert_true(n >= 10);
  for (int i = 0; i < n; i++) {
    sched_cfg c;
    parse_sched_cfg(names[i], &c);
    run_schedule(&c, 0);
  }
  printf("# %d scheduler configurations, %d steps each, match PyTorch\n", n,
         fx_sched_steps);
}

/* Checkpointing mid-way (plateau's counters, the warm-up's position)
 * continues the same sequence. */
static void test_scheduler_state_resume(void **state) {
  (void)state;
  static const char *const cfgs[] = {"plateau", "plateau_max_abs",
                                     "cosine_warmup", "onecycle", "step"};
  for (int i = 0; i < 5; i++) {
    sched_cfg c;
    parse_sched_cfg(cfgs[i], &c);
    run_schedule(&c, 3);
    run_schedule(&c, 25);
  }
}

/* ---- errors ---- */

static void assert_opt_fails(const char *type, const char *spec,
                             const char *needle) {
  torc_clear_error();
  torc_optimizer *opt = torc_optimizer_build(type, spec, NULL);
  if (opt != NULL) {
    torc_optimizer_free(opt);
    fail_msg("%s \"%s\" was accepted", type, spec);
  }
  assert_error(TORC_ERR_INVALID, needle);
}

static void test_optimizer_bad_values(void **state) {
  (void)state;
  assert_opt_fails("sgd", "lr=-0.1", "key 'lr' = -0.1");
  assert_opt_fails("sgd", "lr=0.1, momentum=abc", "key 'momentum' = 'abc'");
  assert_opt_fails("sgd", "lr=0.1, momentum=-0.9", "a number >= 0");
  assert_opt_fails("sgd", "lr=0.1, nesterov=maybe", "yes or no");
  assert_opt_fails("sgd", "lr=0.1, nesterov=yes", "momentum > 0");
  assert_opt_fails("sgd", "lr=0.1, momentum=0.9, dampening=0.1, nesterov=yes",
                   "dampening = 0.1");
  assert_opt_fails("sgd", "lr=0.1, weight_decay=-1", "key 'weight_decay'");
  assert_opt_fails("sgd", "lr=inf", "key 'lr' = 'inf'");
  assert_opt_fails("adam", "betas=0.9", "has 1 number(s), not 2");
  assert_opt_fails("adam", "betas=1.0,0.999", "beta1 = 1 is not in [0, 1)");
  assert_opt_fails("adam", "betas=0.9,-0.1", "beta2 = -0.1");
  assert_opt_fails("adam", "betas=0.9,x", "'x' is not a number");
  assert_opt_fails("adam", "eps=-1e-8", "key 'eps' = '-1e-8'");
  assert_opt_fails("adam", "amsgrad=2", "key 'amsgrad' = '2'");
  assert_opt_fails("adamw", "weight_decay=-0.01", "adamw: key 'weight_decay'");
  assert_opt_fails("rmsprop", "alpha=-0.5", "rmsprop: key 'alpha' = '-0.5'");
  assert_opt_fails("rmsprop", "momentum=-1", "key 'momentum' = '-1'");
  assert_opt_fails("rmsprop", "centered=perhaps", "key 'centered'");
  assert_opt_fails("adagrad", "lr_decay=-1", "adagrad: key 'lr_decay' = '-1'");
  assert_opt_fails("adagrad", "initial_accumulator_value=-0.1",
                   "key 'initial_accumulator_value' = '-0.1'");
  /* The core's key checks reach the plugin's keys. */
  assert_opt_fails("sgd", "lr=0.1, momentun=0.9", "momentum");
  torc_clear_error();
  assert_null(torc_optimizer_build("sgd", "momentum=0.9", NULL));
  assert_contains(torc_last_error(), "lr");
  /* A group's override is checked too. */
  const int64_t shape[1] = {2};
  torc_tensor *t = torc_zeros(shape, 1, TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(t, 1));
  torc_optimizer *opt = torc_optimizer_build("sgd", "lr=0.1", NULL);
  assert_torc(opt);
  torc_clear_error();
  assert_int_equal(torc_optimizer_add_params(opt, &t, 1, "momentum=-1"), -1);
  assert_error(TORC_ERR_INVALID, "key 'momentum' = '-1'");
  assert_int_equal(torc_optimizer_add_params(opt, &t, 1, "momentum=0.5"), 0);
  torc_optimizer_free(opt);
  torc_release(t);
}

static void assert_sched_fails(const char *type, const char *spec,
                               const char *needle) {
  const int64_t shape[1] = {1};
  torc_tensor *t = torc_zeros(shape, 1, TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(t, 1));
  torc_optimizer *opt = torc_optimizer_build("sgd", "lr=0.1", NULL);
  assert_int_equal(torc_optimizer_add_params(opt, &t, 1, ""), 0);
  torc_clear_error();
  torc_scheduler *s = torc_scheduler_build(type, spec, opt);
  if (s != NULL) {
    torc_scheduler_free(s);
    fail_msg("%s \"%s\" was accepted", type, spec);
  }
  assert_error(TORC_ERR_INVALID, needle);
  torc_optimizer_free(opt);
  torc_release(t);
}

static void test_scheduler_bad_values(void **state) {
  (void)state;
  assert_sched_fails("step", "step_size=0", "step: key 'step_size' = '0'");
  assert_sched_fails("step", "step_size=2.5", "key 'step_size' = '2.5'");
  assert_sched_fails("step", "step_size=3, gamma=x", "key 'gamma' = 'x'");
  assert_sched_fails("multistep", "milestones=10,x", "'x' is not a number");
  assert_sched_fails("multistep", "milestones=10,2.5",
                     "2.5 is not an integer");
  assert_sched_fails("multistep", "milestones=-3", "-3 is not an integer");
  assert_sched_fails("exponential", "gamma=fast", "key 'gamma' = 'fast'");
  assert_sched_fails("cosine", "t_max=0", "cosine: key 't_max' = '0'");
  assert_sched_fails("cosine", "t_max=10, eta_min=low", "key 'eta_min'");
  assert_sched_fails("plateau", "mode=median", "min | max");
  assert_sched_fails("plateau", "factor=1.0", "a number in (0, 1)");
  assert_sched_fails("plateau", "threshold_mode=relative", "rel | abs");
  assert_sched_fails("plateau", "patience=-1", "key 'patience' = '-1'");
  assert_sched_fails("onecycle", "", "give total_steps");
  assert_sched_fails("onecycle", "epochs=3", "give total_steps");
  assert_sched_fails("onecycle", "total_steps=0", "key 'total_steps' = '0'");
  assert_sched_fails("onecycle", "total_steps=10, anneal_strategy=exp",
                     "cos | linear");
  assert_sched_fails("onecycle", "total_steps=10, pct_start=1.5",
                     "key 'pct_start' = '1.5'");
  assert_sched_fails("onecycle", "total_steps=10, max_lr=-1",
                     "key 'max_lr' = '-1'");
  assert_sched_fails("onecycle", "total_steps=10, three_phase=2",
                     "key 'three_phase'");
}

/* Errors at step time: past the end of a cycle, a missing metric. */
static void test_scheduler_step_errors(void **state) {
  (void)state;
  sched_cfg c = {.name = "onecycle short", .type = "onecycle",
                 .spec = "total_steps=3"};
  sched_rig r;
  rig_new(&r, &c);
  for (int t = 1; t <= 3; t++)
    assert_ok(torc_scheduler_step(r.s, NAN));
  torc_clear_error();
  assert_int_not_equal(torc_scheduler_step(r.s, NAN), TORC_OK);
  assert_contains(torc_last_error(), "past the end of the cycle");
  assert_contains(torc_last_error(), "total_steps = 3");
  rig_free(&r);

  sched_cfg p = {.name = "plateau", .type = "plateau", .spec = ""};
  rig_new(&r, &p);
  assert_ok(torc_scheduler_step(r.s, 1.0));
  torc_clear_error();
  assert_int_not_equal(torc_scheduler_step(r.s, NAN), TORC_OK);
  assert_contains(torc_last_error(), "metric");
  /* The lrs are left as they were. */
  assert_true(torc_optimizer_get_lr(r.opt, 0) == 0.1);
  assert_true(torc_optimizer_get_lr(r.opt, 1) == 0.02);
  rig_free(&r);
}

/* plateau's counters travel as text: a fresh state (best = inf) loads
 * back; a damaged one is refused with the expected form. */
static void test_plateau_state_text(void **state) {
  (void)state;
  sched_cfg p = {.name = "plateau", .type = "plateau", .spec = "patience=0"};
  sched_rig r, q;
  rig_new(&r, &p);
  rig_new(&q, &p);
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_scheduler_state_dict(r.s, "scheduler.", sd));
  assert_contains(torc_state_dict_meta(sd, "scheduler.state"), "best=inf");
  assert_ok(torc_scheduler_load_state_dict(q.s, sd, "scheduler."));
  /* patience 0: the first metric improves on inf, the same value again
   * does not, so the second step cuts the lr by factor (0.1). */
  assert_ok(torc_scheduler_step(q.s, 1.0));
  assert_ok(torc_scheduler_step(q.s, 1.0));
  assert_true(torc_optimizer_get_lr(q.opt, 0) == 0.1 * 0.1);
  assert_ok(torc_state_dict_set_meta(sd, "scheduler.state", "best=oops"));
  torc_clear_error();
  assert_int_not_equal(torc_scheduler_load_state_dict(q.s, sd, "scheduler."),
                       TORC_OK);
  assert_contains(torc_last_error(), "plateau: saved state 'best=oops'");
  assert_contains(torc_last_error(), "num_bad_epochs=N");
  torc_state_dict_free(sd);
  rig_free(&r);
  rig_free(&q);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, test_live_setup, \
                                              test_live_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_plugin_registers_types),
      T(test_optimizers_match_pytorch),
      T(test_optimizer_state_resume),
      T(test_optimizer_state_names),
      T(test_optimizer_state_kept),
      T(test_optimizer_on_sim),
      T(test_frozen_parameter),
      T(test_schedulers_match_pytorch),
      T(test_scheduler_state_resume),
      T(test_optimizer_bad_values),
      T(test_scheduler_bad_values),
      T(test_scheduler_step_errors),
      T(test_plateau_state_text),
  };
  return cmocka_run_group_tests_name("optim", tests, group_setup,
                                     group_teardown);
}
