/* tests/test_train_config.c — the configuration parts together, as the
 * trainer uses them: one INI file has the plugins, model ([model]/[layer]),
 * the data ([data.train], synthetic source, 2 worker threads, a random
 * transform), the loss, the optimizer and the scheduler. Training two
 * epochs straight and training one, checkpointing (model, optimizer,
 * scheduler, RNG, epoch), rebuilding everything from the file and
 * resuming for the second must give the same parameters bit for bit.
 */
#include <math.h>
#include <unistd.h>

#include "testutil.h"

static const char *const ini =
    "[torc]\n"
    "seed = 7\n"
    "[plugin.ref]\n"
    "module = ref\n"
    "[plugin.data]\n"
    "module = data\n"
    "[plugin.losses]\n"
    "module = losses\n"
    "[plugin.optim]\n"
    "module = optim\n"
    "[model]\n"
    "input = 1,4,4\n"
    "[layer]\n"
    "type = conv2d\n"
    "out_channels = 4\n"
    "kernel = 3\n"
    "padding = 1\n"
    "[layer]\n"
    "type = batchnorm2d\n"
    "[layer]\n"
    "type = relu\n"
    "[layer]\n"
    "type = flatten\n"
    "[layer]\n"
    "type = dropout\n"
    "p = 0.2\n"
    "[layer]\n"
    "type = linear\n"
    "out_features = 3\n"
    "[data.train]\n"
    "source = synthetic\n"
    "shape = 1,4,4\n"
    "classes = 3\n"
    "samples = 96\n"
    "batch_size = 16\n"
    "shuffle = yes\n"
    "workers = 2\n"
    "transform = random_hflip(0.5)\n"
    "[loss]\n"
    "type = cross_entropy\n"
    "label_smoothing = 0.1\n"
    "[optimizer]\n"
    "type = adam\n"
    "lr = 0.01\n"
    "[scheduler]\n"
    "type = cosine\n"
    "t_max = 4\n"
    "warmup = 1\n";

typedef struct run {
  torc_config *cfg;
  torc_module *model;
  torc_loader *loader;
  torc_loss *loss;
  torc_optimizer *opt;
  torc_scheduler *sched;
} run;

static void run_new(run *r) {
  r->cfg = torc_config_parse(ini, "train.ini");
  assert_torc(r->cfg);
  assert_ok(torc_config_apply(r->cfg)); /* plugins, and the seed */
  r->model = torc_module_from_config(r->cfg, NULL, NULL);
  assert_torc(r->model);
  r->loader = torc_loader_from_config(r->cfg, "train", TORC_CPU);
  assert_torc(r->loader);
  r->loss = torc_loss_from_config(r->cfg);
  assert_torc(r->loss);
  r->opt = torc_optimizer_from_config(r->cfg, r->model);
  assert_torc(r->opt);
  r->sched = torc_scheduler_from_config(r->cfg, r->opt);
  assert_torc(r->sched);
}

static void run_free(run *r) {
  torc_scheduler_free(r->sched);
  torc_optimizer_free(r->opt);
  torc_loss_free(r->loss);
  torc_loader_free(r->loader);
  torc_module_free(r->model);
  torc_config_free(r->cfg);
}

/* One epoch; returns the mean loss. */
static double epoch(run *r, int64_t e) {
  assert_ok(torc_loader_start(r->loader, e, 0));
  torc_module_train(r->model, 1);
  double sum = 0;
  int n = 0;
  torc_batch b = {0};
  int got;
  while ((got = torc_loader_next(r->loader, &b)) == 1) {
    int scope = torc_scope_begin();
    torc_tensor *loss = torc_loss_forward(
        r->loss, torc_module_forward(r->model, b.input), b.target);
    assert_torc(loss);
    double v;
    assert_ok(torc_item(loss, &v));
    sum += v;
    n++;
    assert_ok(torc_optimizer_zero_grad(r->opt, 1));
    assert_ok(torc_backward(loss, NULL, 0));
    assert_ok(torc_optimizer_step(r->opt));
    torc_scope_end(scope);
    torc_batch_clear(&b);
  }
  assert_int_equal(got, 0);
  assert_int_equal(n, 6);
  assert_ok(torc_scheduler_step(r->sched, NAN));
  return sum / n;
}

/* Every parameter and buffer of the model, as doubles, concatenated. */
static double *snapshot(const torc_module *m, int64_t *n_out) {
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(m, NULL, sd));
  int64_t n = 0;
  for (int i = 0; i < torc_state_dict_count(sd); i++)
    n += torc_numel(torc_state_dict_tensor(sd, i));
  double *v = malloc(sizeof(double) * (size_t)n);
  int64_t at = 0;
  for (int i = 0; i < torc_state_dict_count(sd); i++) {
    torc_tensor *t = torc_state_dict_tensor(sd, i);
    double *x = test_values(t);
    memcpy(v + at, x, sizeof(double) * (size_t)torc_numel(t));
    at += torc_numel(t);
    free(x);
  }
  torc_state_dict_free(sd);
  *n_out = n;
  return v;
}

static void test_resume_is_bit_exact(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/test_train_config.ckpt.safetensors",
           getenv("TORC_TOP_BUILDDIR") ? getenv("TORC_TOP_BUILDDIR") : ".");

  /* Straight: four epochs; the loss goes down. */
  run a;
  run_new(&a);
  double first = epoch(&a, 0);
  epoch(&a, 1);
  int64_t n_a;
  double *after2 = snapshot(a.model, &n_a);
  epoch(&a, 2);
  double last = epoch(&a, 3);
  if (!(last < first))
    fail_msg("the loss did not go down: %g -> %g", first, last);
  double lr_a = torc_optimizer_get_lr(a.opt, 0);
  run_free(&a);

  /* Interrupted: one epoch, a checkpoint, everything rebuilt from the
   * file (a new process would do the same), resumed for the second. */
  run b;
  run_new(&b);
  epoch(&b, 0);
  torc_state_dict *ck = torc_checkpoint_new();
  assert_ok(torc_checkpoint_add_module(ck, b.model));
  assert_ok(torc_optimizer_state_dict(b.opt, "optimizer.", ck));
  assert_ok(torc_scheduler_state_dict(b.sched, "scheduler.", ck));
  assert_ok(torc_checkpoint_add_rng(ck, "default", NULL));
  assert_ok(torc_state_dict_set_i64(ck, "epoch", 1));
  assert_ok(torc_state_dict_save(ck, path));
  torc_state_dict_free(ck);
  run_free(&b);

  run c;
  run_new(&c); /* re-seeds, re-initialises: the checkpoint overrides */
  ck = torc_checkpoint_load(path, TORC_CPU);
  assert_torc(ck);
  assert_ok(torc_checkpoint_load_module(ck, c.model, NULL, NULL));
  assert_ok(torc_optimizer_load_state_dict(c.opt, ck, "optimizer."));
  assert_ok(torc_scheduler_load_state_dict(c.sched, ck, "scheduler."));
  assert_ok(torc_checkpoint_restore_rng(ck, "default", NULL));
  int64_t e;
  assert_ok(torc_state_dict_get_i64(ck, "epoch", &e));
  torc_state_dict_free(ck);
  assert_int_equal(e, 1);
  epoch(&c, e);
  int64_t n_c;
  double *resumed = snapshot(c.model, &n_c);
  assert_int_equal(n_a, n_c);
  for (int64_t i = 0; i < n_a; i++)
    if (after2[i] != resumed[i])
      fail_msg("value %lld differs after resuming: %.17g vs %.17g",
               (long long)i, after2[i], resumed[i]);
  /* and the schedule continues where it was */
  epoch(&c, 2);
  epoch(&c, 3);
  assert_true(torc_optimizer_get_lr(c.opt, 0) == lr_a);
  free(after2);
  free(resumed);
  run_free(&c);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_resume_is_bit_exact,
                                      test_live_setup, test_live_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, test_teardown_all);
}
