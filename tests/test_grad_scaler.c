/* tests/test_grad_scaler.c — the gradient scaler of torc/amp.h
 * (torch.amp.GradScaler): its defaults and settings errors, a scaled step
 * against an unscaled one bit for bit, skipped steps on overflow and NaN
 * with the scale backing off, growth after growth_interval good steps,
 * state dicts through a file continuing bit for bit, the call-order
 * errors, the disabled pass-through and half-precision gradients. The
 * steps run on cpu (the flag read on the host) and on sim (decided on the
 * device).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <unistd.h>

#include "sim_testutil.h"
#include "testutil.h"

static char tmpdir[256];

static int group_setup(void **state) {
  if (test_setup_ref_sim(state))
    return -1;
  if (torc_plugin_load("optim", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "test_grad_scaler");
}

static int group_teardown(void **state) {
  rmdir(tmpdir);
  return test_teardown_all(state);
}

static torc_device sim_device(void) {
  torc_device d;
  assert_ok(torc_device_parse("sim", &d));
  return d;
}

/* ---- a small model: loss = sum(w * x) + sum(b * b) / 2 ----
 * w: (3), b: (2, 2), both f32; d loss / d w = x and d loss / d b = b,
 * exact. SGD with lr 0.25 keeps every value a short binary fraction. */

typedef struct model {
  torc_tensor *w, *b, *x;
  torc_optimizer *opt;
} model;

static const float X[3] = {1.0f, -2.0f, 4.0f};

static void model_new(model *m, torc_device dev, const float *w,
                      const float *b) {
  static const float w0[3] = {0.5f, 1.0f, -1.5f};
  static const float b0[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  m->w = torc_from_host(w ? w : w0, TORC_SHAPE(3), TORC_F32, dev);
  m->b = torc_from_host(b ? b : b0, TORC_SHAPE(2, 2), TORC_F32, dev);
  m->x = torc_from_host(X, TORC_SHAPE(3), TORC_F32, dev);
  assert_torc(m->w);
  assert_torc(m->b);
  assert_torc(m->x);
  assert_ok(torc_set_requires_grad(m->w, 1));
  assert_ok(torc_set_requires_grad(m->b, 1));
  m->opt = torc_optimizer_build("sgd", "lr=0.25", NULL);
  assert_torc(m->opt);
  torc_tensor *ps[2] = {m->w, m->b};
  assert_int_equal(torc_optimizer_add_params(m->opt, ps, 2, NULL), 0);
}

static void model_free(model *m) {
  torc_optimizer_free(m->opt);
  torc_release(m->w);
  torc_release(m->b);
  torc_release(m->x);
}

/* The loss, owned by the open scope. */
static torc_tensor *model_loss(const model *m) {
  torc_tensor *lw = torc_sum(torc_mul(m->w, m->x), NULL, 0, 0);
  torc_tensor *lb =
      torc_mul_scalar(torc_sum(torc_mul(m->b, m->b), NULL, 0, 0), 0.5);
  torc_tensor *loss = torc_add(lw, lb);
  assert_torc(loss);
  return loss;
}

/* One training step of m through gs: scaled backward, step, update. */
static void scaled_step(model *m, torc_grad_scaler *gs) {
  int scope = torc_scope_begin();
  torc_tensor *scaled = torc_grad_scaler_scale(gs, model_loss(m));
  assert_torc(scaled);
  assert_ok(torc_backward(scaled, NULL, 0));
  assert_ok(torc_grad_scaler_step(gs, m->opt));
  assert_ok(torc_grad_scaler_update(gs));
  assert_ok(torc_optimizer_zero_grad(m->opt, 1));
  torc_scope_end(scope);
}

/* One plain (unscaled) training step of m. */
static void plain_step(model *m) {
  int scope = torc_scope_begin();
  assert_ok(torc_backward(model_loss(m), NULL, 0));
  assert_ok(torc_optimizer_step(m->opt));
  assert_ok(torc_optimizer_zero_grad(m->opt, 1));
  torc_scope_end(scope);
}

/* Asserts t's values are exactly `want` (n of them). */
static void assert_exact(const torc_tensor *t, const double *want, int n) {
  test_assert_values(t, want, n, 0);
}

/* Asserts a and b hold the same values bit for bit. */
static void assert_same_bits(const torc_tensor *a, const torc_tensor *b) {
  assert_int_equal(torc_numel(a), torc_numel(b));
  double *va = test_values(a), *vb = test_values(b);
  assert_non_null(va);
  assert_non_null(vb);
  assert_memory_equal(va, vb, sizeof(double) * (size_t)torc_numel(a));
  free(va);
  free(vb);
}

/* The scaler's run of good steps, read through its state dict. */
static int64_t tracker_of(const torc_grad_scaler *gs) {
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_grad_scaler_state_dict(gs, "", sd));
  torc_tensor *t = torc_state_dict_get(sd, "growth_tracker");
  assert_non_null(t);
  int64_t v = -1;
  assert_ok(torc_item_i64(t, &v));
  torc_state_dict_free(sd);
  return v;
}

static torc_grad_scaler *scaler_new(double init_scale, int64_t interval,
                                    torc_device dev) {
  torc_grad_scaler_params p;
  torc_grad_scaler_params_default(&p);
  p.init_scale = init_scale;
  p.growth_interval = interval;
  torc_grad_scaler *gs = torc_grad_scaler_create(&p, dev);
  assert_torc(gs);
  return gs;
}

/* ---- defaults and settings ---- */

static void test_defaults_and_errors(void **state) {
  (void)state;
  torc_grad_scaler_params p;
  torc_grad_scaler_params_default(&p);
  assert_true(p.init_scale == 65536.0);
  assert_true(p.growth_factor == 2.0);
  assert_true(p.backoff_factor == 0.5);
  assert_int_equal(p.growth_interval, 2000);
  assert_int_equal(p.enabled, 1);

  torc_grad_scaler *gs = torc_grad_scaler_create(NULL, TORC_CPU);
  assert_torc(gs);
  assert_true(torc_grad_scaler_get_scale(gs) == 65536.0);
  assert_int_equal(torc_grad_scaler_skipped(gs), 0);
  assert_int_equal(tracker_of(gs), 0);
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_grad_scaler_state_dict(gs, "scaler.", sd));
  assert_string_equal(torc_state_dict_meta(sd, "scaler.growth_interval"),
                      "2000");
  assert_string_equal(torc_state_dict_meta(sd, "scaler.backoff_factor"), "0.5");
  torc_tensor *s = torc_state_dict_get(sd, "scaler.scale");
  assert_non_null(s);
  assert_int_equal(torc_dtype_of(s), TORC_F32);
  assert_int_equal(torc_ndim(s), 0);
  /* A second save under the same prefix adds nothing. */
  int n = torc_state_dict_count(sd);
  assert_int_equal(torc_grad_scaler_state_dict(gs, "scaler.", sd),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "already has 'scaler.scale'");
  assert_int_equal(torc_state_dict_count(sd), n);
  torc_state_dict_free(sd);
  torc_grad_scaler_free(gs);
  torc_grad_scaler_free(NULL);

  struct {
    double init, growth, backoff;
    int64_t interval;
    const char *msg;
  } bad[] = {
      {0, 2, 0.5, 10, "init_scale = 0 must be a finite number > 0"},
      {-1, 2, 0.5, 10, "init_scale = -1 must be a finite number > 0"},
      {NAN, 2, 0.5, 10, "init_scale = nan must be"},
      {INFINITY, 2, 0.5, 10, "init_scale = inf must be"},
      {8, 1, 0.5, 10, "growth_factor = 1 must be a finite number > 1"},
      {8, 0.5, 0.5, 10, "growth_factor = 0.5 must be"},
      {8, 2, 1, 10, "backoff_factor = 1 must be in (0, 1)"},
      {8, 2, 0, 10, "backoff_factor = 0 must be in (0, 1)"},
      {8, 2, 0.5, 0, "growth_interval = 0 must be >= 1"},
      {8, 2, 0.5, -5, "growth_interval = -5 must be >= 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    torc_grad_scaler_params_default(&p);
    p.init_scale = bad[i].init;
    p.growth_factor = bad[i].growth;
    p.backoff_factor = bad[i].backoff;
    p.growth_interval = bad[i].interval;
    assert_null(torc_grad_scaler_create(&p, TORC_CPU));
    assert_error(TORC_ERR_INVALID, bad[i].msg);
    assert_contains(torc_last_error(), "torc_grad_scaler_create");
    assert_contains(torc_last_error(), "PyTorch's default");
  }

  assert_null(torc_grad_scaler_scale(NULL, NULL));
  assert_error(TORC_ERR_NULL, "the scaler is NULL");
  assert_int_equal(torc_grad_scaler_update(NULL), TORC_ERR_NULL);
  assert_true(isnan(torc_grad_scaler_get_scale(NULL)));
  assert_int_equal(torc_grad_scaler_skipped(NULL), -1);
}

/* loss * scale, tracked by autograd; the dtype promotes as torch's. */
static void test_scale_loss(void **state) {
  (void)state;
  torc_grad_scaler *gs = torc_grad_scaler_create(NULL, TORC_CPU);
  assert_torc(gs);
  int scope = torc_scope_begin();
  torc_tensor *w = torc_full(NULL, 0, 1.5, TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(w, 1));
  torc_tensor *loss = torc_mul_scalar(w, 2.0);
  torc_tensor *s = torc_grad_scaler_scale(gs, loss);
  assert_torc(s);
  assert_int_equal(torc_dtype_of(s), TORC_F32);
  assert_non_null(torc_grad_fn_name(s));
  double v3 = 3.0 * 65536;
  assert_exact(s, &v3, 1);
  assert_ok(torc_backward(s, NULL, 0));
  double g = 2.0 * 65536;
  assert_exact(torc_grad_of(w), &g, 1);

  /* A 0-d bf16 loss times the 0-d f32 scale is f32, as in PyTorch. */
  torc_tensor *lb =
      torc_to_dtype(torc_full(NULL, 0, 1.5, TORC_F32, TORC_CPU), TORC_BF16);
  torc_tensor *sb = torc_grad_scaler_scale(gs, lb);
  assert_torc(sb);
  assert_int_equal(torc_dtype_of(sb), TORC_F32);
  double v15 = 1.5 * 65536;
  assert_exact(sb, &v15, 1);

  /* The loss on another device than the scale is refused. */
  torc_tensor *ls = torc_full(NULL, 0, 1.0, TORC_F32, sim_device());
  assert_null(torc_grad_scaler_scale(gs, ls));
  assert_error(TORC_ERR_DEVICE, "the loss is on sim");
  assert_contains(torc_last_error(), "the scaler's scale on cpu");
  torc_tensor *li = torc_full(NULL, 0, 1.0, TORC_I64, TORC_CPU);
  assert_null(torc_grad_scaler_scale(gs, li));
  assert_error(TORC_ERR_DTYPE, "the loss is i64");
  torc_scope_end(scope);
  torc_grad_scaler_free(gs);
}

/* ---- a scaled step is an unscaled one ---- */

static void scaled_matches_plain(torc_device dev) {
  model a, ref;
  model_new(&a, dev, NULL, NULL);
  model_new(&ref, dev, NULL, NULL);
  torc_grad_scaler *gs = torc_grad_scaler_create(NULL, dev);
  assert_torc(gs);

  int scope = torc_scope_begin();
  torc_tensor *scaled = torc_grad_scaler_scale(gs, model_loss(&a));
  assert_ok(torc_backward(scaled, NULL, 0));
  /* The gradients carry the scale... */
  double gw[3], gb[4], b0[4] = {0.5, -1.0, 2.0, 0.25};
  for (int i = 0; i < 3; i++)
    gw[i] = X[i] * 65536.0;
  for (int i = 0; i < 4; i++)
    gb[i] = b0[i] * 65536.0;
  assert_exact(torc_grad_of(a.w), gw, 3);
  assert_exact(torc_grad_of(a.b), gb, 4);
  /* ...and unscale_ takes it out exactly (the scale is a power of two). */
  assert_ok(torc_grad_scaler_unscale_(gs, a.opt));
  for (int i = 0; i < 3; i++)
    gw[i] = X[i];
  assert_exact(torc_grad_of(a.w), gw, 3);
  assert_exact(torc_grad_of(a.b), b0, 4);
  /* step does not unscale a second time. */
  assert_ok(torc_grad_scaler_step(gs, a.opt));
  assert_ok(torc_grad_scaler_update(gs));
  assert_ok(torc_optimizer_zero_grad(a.opt, 1));
  torc_scope_end(scope);
  plain_step(&ref);
  assert_same_bits(a.w, ref.w);
  assert_same_bits(a.b, ref.b);
  double w1[3] = {0.25, 1.5, -2.5};
  assert_exact(a.w, w1, 3);

  /* More steps through step alone (it unscales) stay with the plain run. */
  for (int k = 0; k < 3; k++) {
    scaled_step(&a, gs);
    plain_step(&ref);
  }
  assert_same_bits(a.w, ref.w);
  assert_same_bits(a.b, ref.b);
  assert_int_equal(torc_grad_scaler_skipped(gs), 0);
  assert_true(torc_grad_scaler_get_scale(gs) == 65536.0);
  assert_int_equal(tracker_of(gs), 4);
  assert_int_equal(torc_optimizer_steps(a.opt), 4);
  torc_grad_scaler_free(gs);
  model_free(&a);
  model_free(&ref);
}

static void test_scaled_step_cpu(void **state) {
  (void)state;
  scaled_matches_plain(TORC_CPU);
}

static void test_scaled_step_sim(void **state) {
  (void)state;
  scaled_matches_plain(sim_device());
}

/* ---- overflow: the step is skipped and the scale backs off ---- */

static void overflow_skips(torc_device dev) {
  model a, ref;
  model_new(&a, dev, NULL, NULL);
  model_new(&ref, dev, NULL, NULL);
  /* 2^127: the gradient 4 * 2^127 (and 2 * 2^127) is inf in f32, and so
   * at 2^126; at 2^125 every gradient is finite. */
  double big = ldexp(1, 127);
  torc_grad_scaler *gs = scaler_new(big, 2, dev);
  double *w0 = test_values(a.w), *b0 = test_values(a.b);
  scaled_step(&a, gs);
  /* Skipped: the parameters are bit for bit what they were. */
  double *w1 = test_values(a.w), *b1 = test_values(a.b);
  assert_memory_equal(w0, w1, 3 * sizeof(double));
  assert_memory_equal(b0, b1, 4 * sizeof(double));
  free(w1), free(b1);
  assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 126));
  assert_int_equal(torc_grad_scaler_skipped(gs), 1);
  assert_int_equal(tracker_of(gs), 0);

  scaled_step(&a, gs);
  w1 = test_values(a.w);
  assert_memory_equal(w0, w1, 3 * sizeof(double));
  free(w1);
  assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 125));
  assert_int_equal(torc_grad_scaler_skipped(gs), 2);

  /* The next finite step goes through, as an unscaled step. */
  scaled_step(&a, gs);
  plain_step(&ref);
  assert_same_bits(a.w, ref.w);
  assert_same_bits(a.b, ref.b);
  assert_int_equal(torc_grad_scaler_skipped(gs), 2);
  assert_int_equal(tracker_of(gs), 1);
  assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 125));

  /* A NaN gradient skips too and restarts the run of good steps: the
   * scale halves instead of growing at the second good step. */
  int scope = torc_scope_begin();
  assert_ok(torc_backward(torc_grad_scaler_scale(gs, model_loss(&a)), NULL, 0));
  float nanb[4] = {1, NAN, 1, 1};
  assert_ok(torc_set_grad(
      a.b, torc_from_host(nanb, TORC_SHAPE(2, 2), TORC_F32, dev)));
  double *wb = test_values(a.w);
  assert_ok(torc_grad_scaler_step(gs, a.opt));
  assert_ok(torc_grad_scaler_update(gs));
  assert_ok(torc_optimizer_zero_grad(a.opt, 1));
  torc_scope_end(scope);
  double *wa = test_values(a.w);
  assert_memory_equal(wb, wa, 3 * sizeof(double));
  assert_same_bits(a.b, ref.b);
  free(wa), free(wb);
  assert_int_equal(torc_grad_scaler_skipped(gs), 3);
  assert_int_equal(tracker_of(gs), 0);
  assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 124));
  scaled_step(&a, gs);
  plain_step(&ref);
  assert_same_bits(a.w, ref.w);
  assert_int_equal(tracker_of(gs), 1);

  free(w0), free(b0);
  torc_grad_scaler_free(gs);
  model_free(&a);
  model_free(&ref);
}

static void test_overflow_cpu(void **state) {
  (void)state;
  overflow_skips(TORC_CPU);
}

static void test_overflow_sim(void **state) {
  (void)state;
  overflow_skips(sim_device());
}

/* ---- growth ---- */

static void test_growth(void **state) {
  (void)state;
  torc_device devs[2] = {TORC_CPU, sim_device()};
  for (int d = 0; d < 2; d++) {
    model a;
    model_new(&a, devs[d], NULL, NULL);
    torc_grad_scaler *gs = scaler_new(1024, 3, devs[d]);
    scaled_step(&a, gs);
    scaled_step(&a, gs);
    assert_true(torc_grad_scaler_get_scale(gs) == 1024);
    assert_int_equal(tracker_of(gs), 2);
    scaled_step(&a, gs);
    assert_true(torc_grad_scaler_get_scale(gs) == 2048);
    assert_int_equal(tracker_of(gs), 0);
    for (int k = 0; k < 3; k++)
      scaled_step(&a, gs);
    assert_true(torc_grad_scaler_get_scale(gs) == 4096);
    assert_int_equal(torc_grad_scaler_skipped(gs), 0);
    torc_grad_scaler_free(gs);
    model_free(&a);
  }

  /* Growth that would overflow f32 keeps the scale, and the run restarts
   * (PyTorch's _amp_update_scale_). The gradients are zeros. */
  float zw[3] = {0, 0, 0}, zb[4] = {0, 0, 0, 0};
  model z;
  model_new(&z, TORC_CPU, zw, zb);
  torc_release(z.x);
  z.x = torc_zeros(TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_grad_scaler *gs = scaler_new(ldexp(1, 127), 1, TORC_CPU);
  scaled_step(&z, gs);
  assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 127));
  assert_int_equal(tracker_of(gs), 0);
  assert_int_equal(torc_grad_scaler_skipped(gs), 0);
  torc_grad_scaler_free(gs);
  model_free(&z);
}

/* ---- state dicts ---- */

static void round_trip(torc_device dev) {
  char path[512];
  snprintf(path, sizeof path, "%s/scaler.safetensors", tmpdir);
  /* Two skips (2^127, 2^126), then good steps at 2^125 growing after 3,
   * which overflows again: a run where the counters matter. */
  model a;
  model_new(&a, dev, NULL, NULL);
  torc_grad_scaler *gs = scaler_new(ldexp(1, 127), 3, dev);
  for (int k = 0; k < 4; k++)
    scaled_step(&a, gs);
  assert_int_equal(tracker_of(gs), 2);

  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_grad_scaler_state_dict(gs, "scaler.", sd));
  assert_ok(torc_state_dict_save(sd, path));
  torc_state_dict_free(sd);
  float wv[3], bv[4];
  double *w = test_values(a.w), *b = test_values(a.b);
  for (int i = 0; i < 3; i++)
    wv[i] = (float)w[i];
  for (int i = 0; i < 4; i++)
    bv[i] = (float)b[i];
  free(w), free(b);

  /* A fresh scaler with other settings takes the saved ones. */
  model c;
  model_new(&c, dev, wv, bv);
  torc_grad_scaler *gc = torc_grad_scaler_create(NULL, dev);
  assert_torc(gc);
  sd = torc_state_dict_load(path, TORC_CPU); /* copied onto dev by load */
  assert_torc(sd);
  assert_ok(torc_grad_scaler_load_state_dict(gc, sd, "scaler."));
  torc_state_dict_free(sd);
  assert_true(torc_grad_scaler_get_scale(gc) == torc_grad_scaler_get_scale(gs));
  assert_int_equal(torc_grad_scaler_skipped(gc), 2);
  assert_int_equal(tracker_of(gc), 2);

  for (int k = 0; k < 6; k++) {
    scaled_step(&a, gs);
    scaled_step(&c, gc);
    assert_true(torc_grad_scaler_get_scale(gc) ==
                torc_grad_scaler_get_scale(gs));
  }
  /* Growth at the next good step, an overflow at 2^126 and back. */
  assert_int_equal(torc_grad_scaler_skipped(gs), 4);
  assert_int_equal(torc_grad_scaler_skipped(gc), 4);
  assert_int_equal(tracker_of(gc), tracker_of(gs));
  assert_same_bits(a.w, c.w);
  assert_same_bits(a.b, c.b);
  torc_grad_scaler_free(gs);
  torc_grad_scaler_free(gc);
  model_free(&a);
  model_free(&c);
  unlink(path);
}

static void test_state_dict_cpu(void **state) {
  (void)state;
  round_trip(TORC_CPU);
}

static void test_state_dict_sim(void **state) {
  (void)state;
  round_trip(sim_device());
}

/* A bad load says what is wrong and changes nothing. */
static void test_load_errors(void **state) {
  (void)state;
  torc_grad_scaler *src = scaler_new(256, 5, TORC_CPU);
  torc_grad_scaler *gs = scaler_new(1024, 7, TORC_CPU);
  int scope = torc_scope_begin();

  /* Missing tensor. */
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_grad_scaler_state_dict(src, "s.", sd));
  assert_int_equal(torc_grad_scaler_load_state_dict(gs, sd, "t."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "the state dict has no 't.scale'");
  torc_state_dict *part = torc_state_dict_new();
  assert_ok(
      torc_state_dict_set(part, "s.scale", torc_state_dict_get(sd, "s.scale")));
  assert_ok(torc_state_dict_set(part, "s.growth_tracker",
                                torc_state_dict_get(sd, "s.growth_tracker")));
  assert_int_equal(torc_grad_scaler_load_state_dict(gs, part, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "the state dict has no 's.skipped'");
  torc_state_dict_free(part);

  /* Wrong dtype, wrong shape. */
  part = torc_state_dict_new();
  assert_ok(torc_state_dict_set(part, "s.scale",
                                torc_full(NULL, 0, 8, TORC_F64, TORC_CPU)));
  assert_ok(torc_state_dict_set(part, "s.growth_tracker",
                                torc_state_dict_get(sd, "s.growth_tracker")));
  assert_ok(torc_state_dict_set(part, "s.skipped",
                                torc_state_dict_get(sd, "s.skipped")));
  assert_int_equal(torc_grad_scaler_load_state_dict(gs, part, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'s.scale' is f64 [] in the state dict, "
                                 "expected one element of f32");
  torc_state_dict_free(part);
  part = torc_state_dict_new();
  assert_ok(
      torc_state_dict_set(part, "s.scale", torc_state_dict_get(sd, "s.scale")));
  assert_ok(torc_state_dict_set(part, "s.growth_tracker",
                                torc_zeros(TORC_SHAPE(2), TORC_I64, TORC_CPU)));
  assert_ok(torc_state_dict_set(part, "s.skipped",
                                torc_state_dict_get(sd, "s.skipped")));
  assert_int_equal(torc_grad_scaler_load_state_dict(gs, part, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'s.growth_tracker' is i64 [2]");

  /* A bad setting in the metadata. */
  assert_ok(torc_state_dict_set_meta(part, "s.backoff_factor", "2"));
  assert_int_equal(torc_grad_scaler_load_state_dict(gs, part, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "backoff_factor = 2 in the state dict must "
                                 "be in (0, 1)");
  assert_ok(torc_state_dict_set_meta(part, "s.growth_factor", "two"));
  assert_int_equal(torc_grad_scaler_load_state_dict(gs, part, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'s.growth_factor' = 'two' in the state "
                                 "dict is not a number");
  torc_state_dict_free(part);

  /* From a disabled scaler: nothing to load. */
  torc_grad_scaler_params p;
  torc_grad_scaler_params_default(&p);
  p.enabled = 0;
  torc_grad_scaler *off = torc_grad_scaler_create(&p, TORC_CPU);
  assert_torc(off);
  part = torc_state_dict_new();
  assert_ok(torc_grad_scaler_state_dict(off, "s.", part));
  assert_int_equal(torc_state_dict_count(part), 0);
  assert_int_equal(torc_grad_scaler_load_state_dict(gs, part, "s."),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "saved from a disabled scaler");
  /* A disabled scaler loads nothing, as PyTorch's. */
  assert_ok(torc_grad_scaler_load_state_dict(off, sd, "s."));
  assert_true(torc_grad_scaler_get_scale(off) == 1.0);
  torc_state_dict_free(part);
  torc_grad_scaler_free(off);

  /* Nothing changed in gs; a good load then takes the saved settings. */
  assert_true(torc_grad_scaler_get_scale(gs) == 1024);
  assert_int_equal(tracker_of(gs), 0);
  torc_state_dict *mine = torc_state_dict_new();
  assert_ok(torc_grad_scaler_state_dict(gs, "", mine));
  assert_string_equal(torc_state_dict_meta(mine, "growth_interval"), "7");
  torc_state_dict_free(mine);
  assert_ok(torc_grad_scaler_load_state_dict(gs, sd, "s."));
  assert_true(torc_grad_scaler_get_scale(gs) == 256);
  mine = torc_state_dict_new();
  assert_ok(torc_grad_scaler_state_dict(gs, "", mine));
  assert_string_equal(torc_state_dict_meta(mine, "growth_interval"), "5");
  torc_state_dict_free(mine);
  /* Saving and loading copy: writing to the dict changes neither. */
  assert_ok(torc_fill_(torc_state_dict_get(sd, "s.scale"), 3));
  assert_true(torc_grad_scaler_get_scale(gs) == 256);
  assert_true(torc_grad_scaler_get_scale(src) == 256);
  torc_state_dict_free(sd);
  torc_scope_end(scope);
  torc_grad_scaler_free(src);
  torc_grad_scaler_free(gs);
}

/* ---- call order; disabled ---- */

static void test_call_order(void **state) {
  (void)state;
  model a;
  model_new(&a, TORC_CPU, NULL, NULL);
  model s; /* made outside the scope: model_free releases its tensors */
  model_new(&s, sim_device(), NULL, NULL);
  torc_grad_scaler *gs = torc_grad_scaler_create(NULL, TORC_CPU);
  assert_torc(gs);
  int scope = torc_scope_begin();

  /* update with nothing recorded. */
  assert_int_equal(torc_grad_scaler_update(gs), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "no inf checks were recorded prior to "
                                 "update");

  assert_ok(torc_backward(torc_grad_scaler_scale(gs, model_loss(&a)), NULL, 0));
  assert_ok(torc_grad_scaler_unscale_(gs, a.opt));
  assert_int_equal(torc_grad_scaler_unscale_(gs, a.opt), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "unscale_ has already been called on this "
                                 "optimizer since the last update");
  assert_contains(torc_last_error(), "torc_grad_scaler_update ends the step");
  /* The gradients were unscaled once. */
  double gw[3] = {X[0], X[1], X[2]};
  assert_exact(torc_grad_of(a.w), gw, 3);
  assert_ok(torc_grad_scaler_step(gs, a.opt));
  assert_int_equal(torc_grad_scaler_step(gs, a.opt), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "step has already been called");
  assert_int_equal(torc_grad_scaler_unscale_(gs, a.opt), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "unscale_ is being called after step");
  assert_ok(torc_grad_scaler_update(gs));
  assert_int_equal(torc_grad_scaler_update(gs), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "no inf checks");
  assert_int_equal(torc_optimizer_steps(a.opt), 1);

  /* update after unscale_ alone is allowed: the check was recorded. */
  assert_ok(torc_grad_scaler_unscale_(gs, a.opt));
  assert_ok(torc_grad_scaler_update(gs));

  /* Gradients on another device than the scaler's. */
  assert_ok(torc_backward(model_loss(&s), NULL, 0));
  assert_int_equal(torc_grad_scaler_unscale_(gs, s.opt), TORC_ERR_DEVICE);
  assert_error(TORC_ERR_DEVICE, "the gradient of parameter 0 is on sim");
  assert_contains(torc_last_error(), "but the scaler on cpu");
  assert_int_equal(torc_grad_scaler_unscale_(NULL, s.opt), TORC_ERR_NULL);
  assert_int_equal(torc_grad_scaler_step(gs, NULL), TORC_ERR_NULL);
  torc_scope_end(scope);
  model_free(&s);
  torc_grad_scaler_free(gs);
  model_free(&a);
}

static void test_disabled(void **state) {
  (void)state;
  torc_grad_scaler_params p;
  torc_grad_scaler_params_default(&p);
  p.enabled = 0;
  torc_grad_scaler *gs = torc_grad_scaler_create(&p, TORC_CPU);
  assert_torc(gs);
  model a, ref;
  model_new(&a, TORC_CPU, NULL, NULL);
  model_new(&ref, TORC_CPU, NULL, NULL);
  for (int k = 0; k < 2; k++) {
    int scope = torc_scope_begin();
    torc_tensor *loss = model_loss(&a);
    torc_tensor *s = torc_grad_scaler_scale(gs, loss);
    assert_ptr_equal(s, loss);
    assert_ok(torc_backward(s, NULL, 0));
    double gw[3] = {X[0], X[1], X[2]};
    assert_ok(torc_grad_scaler_unscale_(gs, a.opt));
    assert_ok(torc_grad_scaler_unscale_(gs, a.opt)); /* no-op, no error */
    assert_exact(torc_grad_of(a.w), gw, 3);
    assert_ok(torc_grad_scaler_step(gs, a.opt));
    assert_ok(torc_grad_scaler_update(gs));
    assert_ok(torc_optimizer_zero_grad(a.opt, 1));
    torc_scope_end(scope);
    plain_step(&ref);
  }
  assert_same_bits(a.w, ref.w);
  assert_same_bits(a.b, ref.b);
  assert_true(torc_grad_scaler_get_scale(gs) == 1.0);
  assert_int_equal(torc_grad_scaler_skipped(gs), 0);
  torc_grad_scaler_free(gs);
  model_free(&a);
  model_free(&ref);
}

/* ---- no host waits ---- */

/* scale, backward, step and update on sim wait on nothing, for a good
 * step and for a skipped one: the host reads only at get_scale. */
static void test_no_host_wait(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  model a, ref;
  model_new(&a, sim, NULL, NULL);
  model_new(&ref, sim, NULL, NULL);
  torc_grad_scaler *gs = scaler_new(ldexp(1, 126), 2000, sim);
  assert_ok(torc_synchronize(sim));
  for (int k = 0; k < 2; k++) {
    (void)sim_counters(0, 1);
    scaled_step(&a, gs); /* 2^126 overflows, 2^125 does not */
    torc_sim_counters c = sim_counters(0, 1);
    assert_int_equal(c.blocking_reads + c.synchronizes, 0);
    assert_true(c.kernels > 0);
  }
  plain_step(&ref);
  assert_same_bits(a.w, ref.w);
  assert_same_bits(a.b, ref.b);
  assert_int_equal(torc_grad_scaler_skipped(gs), 1);
  assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 125));
  torc_grad_scaler_free(gs);
  model_free(&a);
  model_free(&ref);
}

/* ---- half-precision gradients ---- */

/* f16 and bf16 gradients are unscaled in f32 and rounded once: 2^-26 is
 * below f16's range, yet 2^15 * 2^-26 = 2^-11 is exact. A list of three
 * dtypes is checked for overflow across all of them. */
static void test_half_gradients(void **state) {
  (void)state;
  torc_device devs[2] = {TORC_CPU, sim_device()};
  for (int d = 0; d < 2; d++) {
    torc_device dev = devs[d];
    int scope = torc_scope_begin();
    torc_dtype dts[3] = {TORC_F16, TORC_BF16, TORC_F32};
    torc_tensor *ps[3];
    for (int i = 0; i < 3; i++) {
      ps[i] = torc_zeros(TORC_SHAPE(2), dts[i], dev);
      assert_torc(ps[i]);
      assert_ok(torc_set_requires_grad(ps[i], 1));
    }
    torc_optimizer *opt = torc_optimizer_build("sgd", "lr=0.5", NULL);
    assert_torc(opt);
    assert_int_equal(torc_optimizer_add_params(opt, ps, 3, NULL), 0);
    torc_grad_scaler *gs = scaler_new(ldexp(1, 26), 2000, dev);
    for (int i = 0; i < 3; i++)
      assert_ok(torc_set_grad(
          ps[i],
          torc_to_dtype(torc_full(TORC_SHAPE(2), ldexp(1, 15), TORC_F32, dev),
                        dts[i])));
    assert_ok(torc_grad_scaler_unscale_(gs, opt));
    double want[2] = {ldexp(1, -11), ldexp(1, -11)};
    for (int i = 0; i < 3; i++) {
      assert_int_equal(torc_dtype_of(torc_grad_of(ps[i])), dts[i]);
      assert_exact(torc_grad_of(ps[i]), want, 2);
    }
    assert_ok(torc_grad_scaler_update(gs));
    assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 26));

    /* An inf in the f16 gradient alone backs the scale off. */
    for (int i = 0; i < 3; i++)
      assert_ok(torc_set_grad(
          ps[i], torc_to_dtype(torc_full(TORC_SHAPE(2), i == 0 ? INFINITY : 1,
                                         TORC_F32, dev),
                               dts[i])));
    assert_ok(torc_grad_scaler_unscale_(gs, opt));
    assert_ok(torc_grad_scaler_update(gs));
    assert_true(torc_grad_scaler_get_scale(gs) == ldexp(1, 25));
    torc_grad_scaler_free(gs);
    torc_optimizer_free(opt);
    torc_scope_end(scope);
  }
}

int main(void) {
#define T(f)                                                                   \
  cmocka_unit_test_setup_teardown(f, test_live_setup, test_live_teardown)
  const struct CMUnitTest tests[] = {
      T(test_defaults_and_errors),
      T(test_scale_loss),
      T(test_scaled_step_cpu),
      T(test_scaled_step_sim),
      T(test_overflow_cpu),
      T(test_overflow_sim),
      T(test_growth),
      T(test_state_dict_cpu),
      T(test_state_dict_sim),
      T(test_load_errors),
      T(test_call_order),
      T(test_disabled),
      T(test_no_host_wait),
      T(test_half_gradients),
  };
#undef T
  return cmocka_run_group_tests_name("grad_scaler", tests, group_setup,
                                     group_teardown);
}
