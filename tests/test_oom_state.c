/* tests/test_oom_state.c — allocation-failure sweeps (tests/oom_testutil.h)
 * over state-dict save and strict load, a checkpoint save and
 * torc_optimizer_load_state_dict: a failed load leaves the model's and the
 * optimizer's values, a failed save the old file and no temporary.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"
#include "torc/config.h"
#include "torc/data.h"
#include "torc/optim.h"
#include "torc/testing.h"
#include "torc/train.h"
#include "oom_testutil.h"

/* ---- state dicts and checkpoints ---- */

/* Asserts dir holds exactly one entry, `name`. */
static void assert_only_file(const char *dir, const char *name) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (strcmp(e->d_name, name) != 0) {
      print_error("%s: unexpected file %s left behind\n", dir, e->d_name);
      closedir(d);
      fail();
    }
    n++;
  }
  closedir(d);
  assert_int_equal(n, 1);
}

typedef struct file_ctx {
  torc_module *m;  /* the model saved or loaded into */
  torc_module *m2; /* loading: the model whose values the file holds */
  char dir[512], path[600];
  unsigned char *old; /* saving: the file's bytes before */
  size_t old_len;
  double before[MAX_OUT]; /* loading: m's values before */
  double loaded[MAX_OUT]; /* ... and after a clean load */
  int n_before;
} file_ctx;

static void make_dir(file_ctx *c, const char *name) {
  snprintf(c->dir, sizeof c->dir, "%s/%s", tmpdir, name);
  assert_int_equal(mkdir(c->dir, 0700), 0);
  snprintf(c->path, sizeof c->path, "%s/model.safetensors", c->dir);
}

static void rm_dir(file_ctx *c) {
  unlink(c->path);
  rmdir(c->dir);
}

static int run_save(scenario *sc) {
  file_ctx *c = sc->ctx;
  return torc_module_save(c->m, c->path) == TORC_OK ? 0 : -1;
}

static int run_checkpoint(scenario *sc) {
  file_ctx *c = sc->ctx;
  torc_state_dict *ck = torc_checkpoint_new();
  if (ck == NULL)
    return -1;
  torc_status st = torc_checkpoint_add_module(ck, c->m);
  if (st == TORC_OK)
    st = torc_checkpoint_add_rng(ck, "default", NULL);
  if (st == TORC_OK)
    st = torc_state_dict_set_i64(ck, "step", 7);
  if (st == TORC_OK)
    st = torc_state_dict_save(ck, c->path);
  torc_state_dict_free(ck);
  return st == TORC_OK ? 0 : -1;
}

/* A failed save leaves the old file as it was and nothing else; a good
 * one a file that loads. Either way the old bytes go back for the next
 * run. */
static void after_save(scenario *sc, int ok) {
  file_ctx *c = sc->ctx;
  assert_only_file(c->dir, "model.safetensors");
  size_t len = 0;
  unsigned char *now = test_read_file(c->path, &len);
  assert_non_null(now);
  if (!ok) {
    if (len != c->old_len || memcmp(now, c->old, len) != 0) {
      print_error("%s: a failed save changed the old file\n", sc->name);
      free(now);
      fail();
    }
  } else {
    torc_state_dict *sd = torc_state_dict_load(c->path, TORC_CPU);
    if (sd == NULL) {
      print_error("%s: N=%lld%s: the file saved does not load: %s\n",
                  sc->name, (long long)sc->n,
                  sc->persistent ? " (from N on)" : "", torc_last_error());
      fail();
    }
    assert_true(torc_state_dict_count(sd) >= 4);
    torc_state_dict_free(sd);
    test_write_file(c->path, c->old, c->old_len);
  }
  free(now);
}

static void save_sweep(const char *name, int (*run)(scenario *)) {
  file_ctx c = {0};
  c.m = mlp_new(1.0f);
  assert_torc(c.m);
  make_dir(&c, name);
  /* The old file: another model's state. */
  torc_module *other = mlp_new(-0.5f);
  assert_torc(other);
  assert_ok(torc_module_save(other, c.path));
  torc_module_free(other);
  c.old = test_read_file(c.path, &c.old_len);
  assert_non_null(c.old);
  scenario sc = {.name = name, .run = run, .after = after_save, .ctx = &c};
  sweep(&sc);
  free(c.old);
  rm_dir(&c);
  torc_module_free(c.m);
}

static void test_state_save(void **state) {
  (void)state;
  save_sweep("torc_module_save", run_save);
}

static void test_checkpoint_save(void **state) {
  (void)state;
  save_sweep("checkpoint save", run_checkpoint);
}

static int run_load(scenario *sc) {
  file_ctx *c = sc->ctx;
  torc_load_opts opts = {0}; /* strict */
  return torc_module_load(c->m, c->path, &opts, NULL) == TORC_OK ? 0 : -1;
}

/* A failed load leaves the model's values; a good one is undone. */
static void after_load(scenario *sc, int ok) {
  file_ctx *c = sc->ctx;
  double v[MAX_OUT];
  int n = module_values(c->m, v, MAX_OUT);
  assert_int_equal(n, c->n_before);
  if (ok && sc->n > 0) { /* the file's values, as a clean run loads them */
    if (memcmp(v, c->loaded, sizeof(double) * (size_t)n) != 0) {
      print_error("%s: N=%lld%s: a good load gave other values\n", sc->name,
                  (long long)sc->n, sc->persistent ? " (from N on)" : "");
      fail();
    }
  } else if (ok) {
    memcpy(c->loaded, v, sizeof(double) * (size_t)n);
  }
  if (!ok) {
    if (memcmp(v, c->before, sizeof(double) * (size_t)n) != 0) {
      print_error("%s: a failed load changed the model\n", sc->name);
      fail();
    }
    return;
  }
  torc_module *orig = mlp_new(1.0f);
  assert_torc(orig);
  torc_state_dict *sd = torc_state_dict_new();
  assert_torc(sd);
  assert_ok(torc_module_state_dict(orig, NULL, sd));
  assert_ok(torc_module_load_state_dict(c->m, sd, NULL, NULL));
  torc_state_dict_free(sd);
  torc_module_free(orig);
}

static void test_state_load(void **state) {
  (void)state;
  file_ctx c = {0};
  c.m = mlp_new(1.0f);
  assert_torc(c.m);
  make_dir(&c, "load");
  torc_module *other = mlp_new(-0.5f);
  assert_torc(other);
  assert_ok(torc_module_save(other, c.path));
  torc_module_free(other);
  c.n_before = module_values(c.m, c.before, MAX_OUT);
  scenario sc = {.name = "strict load", .run = run_load, .after = after_load,
                 .ctx = &c};
  sweep(&sc);
  rm_dir(&c);
  torc_module_free(c.m);
}

/* ---- torc_optimizer_load_state_dict: all-or-nothing ---- */

typedef struct opt_ctx {
  torc_module *m;
  torc_optimizer *opt;
  torc_state_dict *other;  /* another optimizer's state, to load */
  torc_state_dict *before; /* opt's own, to compare with and restore */
} opt_ctx;

/* An optimizer over m with one step of state. */
static torc_optimizer *stepped_optimizer(torc_module *m, float scale) {
  torc_optimizer *opt = torc_optimizer_build("adam", "lr=0.1", m);
  assert_torc(opt);
  const float xv[4] = {scale, -1, 2, 0.5f};
  torc_tensor *x = torc_from_host(xv, TORC_SHAPE(1, 4), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(m, x);
  torc_tensor *loss = torc_mean(y, NULL, 0, 0);
  assert_ok(torc_backward(loss, NULL, 0));
  assert_ok(torc_optimizer_step(opt));
  assert_ok(torc_optimizer_zero_grad(opt, 1));
  torc_release(x);
  torc_release(y);
  torc_release(loss);
  return opt;
}

/* The values of every tensor of sd, in order, into sc->out. */
static void dict_values(torc_state_dict *sd, scenario *sc) {
  sc->n_out = 0;
  for (int i = 0; i < torc_state_dict_count(sd); i++)
    assert_int_equal(out_tensor(sc, torc_state_dict_tensor(sd, i)), 0);
}

/* opt's state dict with copies of its tensors (a state dict holds
 * references to the optimizer's own). */
static torc_state_dict *optimizer_state_copy(const torc_optimizer *opt) {
  torc_state_dict *sd = torc_state_dict_new(), *out = torc_state_dict_new();
  assert_torc(sd);
  assert_torc(out);
  assert_ok(torc_optimizer_state_dict(opt, NULL, sd));
  for (int i = 0; i < torc_state_dict_count(sd); i++) {
    torc_tensor *t = torc_clone(torc_state_dict_tensor(sd, i));
    assert_torc(t);
    assert_ok(torc_state_dict_set(out, torc_state_dict_name(sd, i), t));
    torc_release(t);
  }
  for (int i = 0; i < torc_state_dict_meta_count(sd); i++) {
    const char *k = torc_state_dict_meta_key(sd, i);
    assert_ok(torc_state_dict_set_meta(out, k, torc_state_dict_meta(sd, k)));
  }
  torc_state_dict_free(sd);
  return out;
}

static int run_opt_load(scenario *sc) {
  opt_ctx *c = sc->ctx;
  return torc_optimizer_load_state_dict(c->opt, c->other, NULL) == TORC_OK
             ? 0
             : -1;
}

static void after_opt_load(scenario *sc, int ok) {
  opt_ctx *c = sc->ctx;
  torc_state_dict *now = torc_state_dict_new();
  assert_torc(now);
  assert_ok(torc_optimizer_state_dict(c->opt, NULL, now));
  scenario a = {0}, b = {0};
  dict_values(now, &a);
  dict_values(ok ? c->other : c->before, &b);
  torc_state_dict_free(now);
  if (a.n_out != b.n_out ||
      memcmp(a.out, b.out, sizeof(double) * (size_t)a.n_out) != 0) {
    print_error("%s: N=%lld%s: the state is not %s\n", sc->name,
                (long long)sc->n, sc->persistent ? " (from N on)" : "",
                ok ? "the loaded one" : "the old one (half loaded?)");
    fail();
  }
  if (ok)
    assert_ok(torc_optimizer_load_state_dict(c->opt, c->before, NULL));
}

static void test_optimizer_load(void **state) {
  (void)state;
  opt_ctx c;
  c.m = mlp_new(1.0f);
  assert_torc(c.m);
  c.opt = stepped_optimizer(c.m, 1.0f);
  torc_module *m2 = mlp_new(0.5f);
  torc_optimizer *o2 = stepped_optimizer(m2, -3.0f);
  c.other = optimizer_state_copy(o2);
  c.before = optimizer_state_copy(c.opt);
  torc_optimizer_free(o2);
  torc_module_free(m2);
  scenario sc = {.name = "optimizer load", .run = run_opt_load,
                 .after = after_opt_load, .ctx = &c};
  sweep(&sc);
  torc_state_dict_free(c.other);
  torc_state_dict_free(c.before);
  torc_optimizer_free(c.opt);
  torc_module_free(c.m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_state_save),
      cmocka_unit_test(test_state_load),
      cmocka_unit_test(test_checkpoint_save),
      cmocka_unit_test(test_optimizer_load),
  };
  oom_filter_from_env();
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
