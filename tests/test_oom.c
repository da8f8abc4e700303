/* tests/test_oom.c — allocation-failure sweeps (SQLite's habit): each
 * scenario runs once counting its allocation attempts K, then once per N in
 * 1..K with the Nth attempt failing (torc/testing.h), once only and from N
 * on. Every run must end cleanly: TORC_ERR_OOM, its message about memory
 * (or, where the failure hit something with a fallback, a correct result),
 * no leaked block, tensor or device byte, and the objects involved as they
 * were (a failed load leaves the model's values, a failed save the old
 * file and no temporary). Scenarios: tensor ops, autograd on a small MLP,
 * module building, state-dict save and strict load, a checkpoint save and
 * the loader with 0 and 1 workers, two short torc_train runs, and whole
 * processes under TORC_FAIL_ALLOC. Scenarios of more than 1500 attempts
 * take about 300 values of N; under TORC_VALGRIND=1 every scenario takes
 * about 60.
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

static char tmpdir[256];

/* ---- the sweep ---- */

#define MAX_OUT 256

typedef struct scenario {
  const char *name;
  /* One run: 0 on success (results into out), -1 on failure. */
  int (*run)(struct scenario *sc);
  /* Called with the injector disarmed after each run: asserts what the
   * failed (ok = 0) or successful run left behind, and restores it. */
  void (*after)(struct scenario *sc, int ok);
  void *ctx;
  double out[MAX_OUT];
  int n_out;
  /* Runs with more than one thread allocate in no fixed order: the
   * counting run's K is then only a guide, and the sweep goes past it. */
  int threaded;
  int64_t n;      /* the run's N (0: none), for messages */
  int persistent; /* ... and whether every attempt from N on fails */
} scenario;

static int valgrind_mode(void) {
  const char *v = getenv("TORC_VALGRIND");
  return v && strcmp(v, "1") == 0;
}

static void out_push(scenario *sc, double v) {
  if (sc->n_out < MAX_OUT)
    sc->out[sc->n_out++] = v;
}

/* Appends t's values (read through a f64 copy) to sc->out: -1 on error. */
static int out_tensor(scenario *sc, const torc_tensor *t) {
  int64_t n = torc_numel(t);
  if (n < 0 || sc->n_out + n > MAX_OUT)
    return -1;
  torc_tensor *d = torc_to_dtype(t, TORC_F64);
  if (d == NULL)
    return -1;
  torc_status st =
      torc_to_host(d, sc->out + sc->n_out, sizeof(double) * (size_t)n);
  torc_release(d);
  if (st != TORC_OK)
    return -1;
  sc->n_out += (int)n;
  return 0;
}

static int mentions_memory(const char *msg) {
  return msg && strcasestr(msg, "memory") != NULL;
}

typedef struct snapshot {
  int64_t blocks, tensors;
  size_t dev_bytes;
} snapshot;

static snapshot snap(void) {
  torc_device sim;
  size_t on_sim = torc_device_parse("sim:0", &sim) == TORC_OK
                      ? torc_device_memory_allocated(sim)
                      : 0;
  snapshot s = {torc_test_alloc_live(), torc_tensor_live_count(),
                torc_device_memory_allocated(TORC_CPU) + on_sim};
  return s;
}

/* Runs sc unarmed: must succeed. Returns the run's allocation attempts. */
static int64_t run_clean(scenario *sc) {
  torc_clear_error();
  sc->n_out = 0;
  sc->n = 0;
  int64_t c0 = torc_test_alloc_count();
  int rc = sc->run(sc);
  int64_t k = torc_test_alloc_count() - c0;
  if (rc != 0) {
    print_error("%s: the run without failures failed: %s\n", sc->name,
                torc_last_error());
    fail();
  }
  if (sc->after)
    sc->after(sc, 1);
  return k;
}

static void sweep(scenario *sc) {
  /* Two warm-up runs: plugins' lazy state, the pools and the cache settle
   * so a clean run leaves the live count where it found it. */
  run_clean(sc);
  run_clean(sc);
  double ref[MAX_OUT];
  int n_ref = sc->n_out;
  memcpy(ref, sc->out, sizeof ref);
  snapshot s0 = snap();
  int64_t k = run_clean(sc);
  snapshot s1 = snap();
  assert_int_equal(s1.blocks, s0.blocks);
  assert_int_equal(s1.tensors, s0.tensors);
  assert_int_equal(s1.dev_bytes, s0.dev_bytes);
  int64_t last = sc->threaded ? k + k / 4 + 8 : k;
  /* Every N up to 1500 attempts; past that about 300 of them (each run of
   * the trainer syncs its checkpoints to disk), and 60 under valgrind. */
  int64_t stride = 1;
  if (valgrind_mode() && last > 60)
    stride = last / 60;
  else if (last > 1500)
    stride = last / 300;
  int64_t hits = 0, recovered = 0, errors = 0;
  for (int persistent = 0; persistent <= 1; persistent++) {
    for (int64_t n = 1; n <= last; n += stride) {
      torc_clear_error();
      sc->n_out = 0;
      int64_t f0 = torc_test_alloc_failed();
      sc->n = n, sc->persistent = persistent;
      torc_test_fail_alloc(n, persistent);
      int rc = sc->run(sc);
      torc_test_fail_alloc(0, 0);
      int hit = torc_test_alloc_failed() > f0;
      hits += hit;
      if (rc != 0) {
        errors++;
        if (!hit) {
          print_error("%s: N=%lld%s: failed with no injected failure: %s\n",
                      sc->name, (long long)n, persistent ? " (from N on)" : "",
                      torc_last_error());
          fail();
        }
        if (torc_last_status() != TORC_ERR_OOM ||
            !mentions_memory(torc_last_error())) {
          print_error("%s: N=%lld%s: not an out-of-memory error: %s (%s)\n",
                      sc->name, (long long)n, persistent ? " (from N on)" : "",
                      torc_last_error(),
                      torc_status_name(torc_last_status()));
          fail();
        }
      } else {
        recovered += hit;
        /* Success despite a failure (a fallback) or without one: the
         * result must be the clean run's. */
        if (sc->n_out != n_ref || memcmp(sc->out, ref, sizeof(double) *
                                                           (size_t)n_ref)) {
          print_error("%s: N=%lld%s: succeeded with a different result\n",
                      sc->name, (long long)n,
                      persistent ? " (from N on)" : "");
          fail();
        }
      }
      if (sc->after)
        sc->after(sc, rc == 0);
      snapshot s = snap();
      if (s.blocks != s0.blocks || s.tensors != s0.tensors ||
          s.dev_bytes != s0.dev_bytes) {
        print_error("%s: N=%lld%s: leaked %lld block(s), %lld tensor(s), "
                    "%lld device byte(s) (%s)\n",
                    sc->name, (long long)n, persistent ? " (from N on)" : "",
                    (long long)(s.blocks - s0.blocks),
                    (long long)(s.tensors - s0.tensors),
                    (long long)s.dev_bytes - (long long)s0.dev_bytes,
                    rc ? torc_last_error() : "it succeeded");
        fail();
      }
    }
  }
  printf("%-22s K=%-5lld stride %lld: %lld injected, %lld errors, %lld "
         "recovered\n",
         sc->name, (long long)k, (long long)stride, (long long)hits,
         (long long)errors, (long long)recovered);
  /* The injector reached the scenario at all. */
  assert_true(k > 0);
  assert_true(errors > 0);
}

/* ---- tensor ops ---- */

/* torc_release of each of the n tensors, in order (NULLs too: a run that
 * failed half-way leaves some). */
static void release_all(torc_tensor *const *ts, int n) {
  for (int i = 0; i < n; i++)
    torc_release(ts[i]);
}

static int run_ops(scenario *sc) {
  const float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {0.5f, -1, 2, 3, -4, 0.25f};
  torc_tensor *a = torc_from_host(av, TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  torc_tensor *b = torc_from_host(bv, TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  torc_tensor *sum = torc_add(a, b);
  torc_tensor *bt = torc_transpose(b, 0, 1);
  torc_tensor *mm = torc_matmul(a, bt);
  torc_tensor *red = torc_sum(mm, (const int[]){1}, 1, 0);
  torc_tensor *view = torc_view(sum, TORC_SHAPE(3, 2));
  torc_tensor *cat = torc_cat((const torc_tensor *const[]){a, b}, 2, 0);
  int rc = cat && view && red ? 0 : -1;
  if (rc == 0)
    rc = out_tensor(sc, view) || out_tensor(sc, red) || out_tensor(sc, cat);
  release_all((torc_tensor *const[]){a, b, sum, bt, mm, red, view, cat}, 8);
  return rc;
}

static void test_ops(void **state) {
  (void)state;
  scenario sc = {.name = "tensor ops", .run = run_ops};
  sweep(&sc);
}

/* The same on the sim plugin's device, which has no cache: its alloc op
 * itself is what fails, and the copies to and from it. */
static int run_ops_sim(scenario *sc) {
  torc_device sim;
  if (torc_device_parse("sim:0", &sim) != TORC_OK)
    return -1;
  const float av[6] = {1, 2, 3, 4, 5, 6};
  torc_tensor *a = torc_from_host(av, TORC_SHAPE(2, 3), TORC_F32, sim);
  torc_tensor *b = torc_add(a, a);
  torc_tensor *at = torc_transpose(a, 0, 1);
  torc_tensor *mm = torc_matmul(b, at);
  torc_tensor *host = torc_to(mm, TORC_CPU);
  int rc = host ? out_tensor(sc, host) : -1;
  release_all((torc_tensor *const[]){a, b, at, mm, host}, 5);
  return rc;
}

static void test_ops_sim(void **state) {
  (void)state;
  scenario sc = {.name = "tensor ops on sim", .run = run_ops_sim};
  sweep(&sc);
}

/* ---- autograd: forward and backward of a small MLP ---- */

/* A two-layer MLP 4 -> 8 -> 1 with fixed weights. */
static torc_module *mlp_new(float base) {
  torc_module *seq = torc_sequential_new();
  torc_module *l1 = torc_linear_new(4, 8, 1);
  torc_module *act = torc_module_build("relu", NULL);
  torc_module *l2 = torc_linear_new(8, 1, 1);
  if (!seq || !l1 || !act || !l2 || torc_sequential_append(seq, l1) ||
      torc_sequential_append(seq, act) || torc_sequential_append(seq, l2))
    return NULL;
  torc_named_tensor *ps = NULL;
  int n = torc_module_named_parameters(seq, &ps);
  for (int i = 0; i < n; i++) {
    torc_tensor *p = ps[i].tensor;
    int64_t cnt = torc_numel(p);
    float v[64];
    for (int64_t j = 0; j < cnt && j < 64; j++)
      v[j] = base * (float)((j * 7 + i * 3) % 11 - 5) / 10.0f;
    torc_tensor *src = torc_from_host(v, torc_shape(p), torc_ndim(p),
                                      TORC_F32, TORC_CPU);
    torc_grad_mode saved = torc_set_grad_mode(TORC_NO_GRAD);
    torc_copy_(p, src);
    torc_set_grad_mode(saved);
    torc_release(src);
  }
  torc_named_tensors_free(ps, n);
  /* Each module caches its dotted path when a message first names it: made
   * now, so an error's message does not count as a new block. */
  torc_module_path(seq);
  for (int i = 0; i < torc_module_child_count(seq); i++)
    torc_module_path(torc_module_child_at(seq, i));
  return seq;
}

typedef struct mlp_ctx {
  torc_module *m;
  torc_named_tensor *params;
  int n_params;
} mlp_ctx;

static int run_autograd(scenario *sc) {
  mlp_ctx *c = sc->ctx;
  const float xv[12] = {1, -2, 3, 0.5f, 0, 1, -1, 2, 4, -3, 2, 1};
  torc_tensor *x = torc_from_host(xv, TORC_SHAPE(3, 4), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(c->m, x);
  torc_tensor *sq = torc_mul(y, y);
  torc_tensor *loss = torc_mean(sq, NULL, 0, 0);
  int rc = loss ? 0 : -1;
  if (rc == 0 && torc_backward(loss, NULL, 0) != TORC_OK)
    rc = -1;
  if (rc == 0)
    rc = out_tensor(sc, loss);
  for (int i = 0; rc == 0 && i < c->n_params; i++) {
    torc_tensor *g = torc_grad_of(c->params[i].tensor); /* borrowed */
    rc = g ? out_tensor(sc, g) : -1;
  }
  release_all((torc_tensor *const[]){x, y, sq, loss}, 4);
  return rc;
}

/* Drops the gradients (a failed backward may have filled some). */
static void after_autograd(scenario *sc, int ok) {
  (void)ok;
  mlp_ctx *c = sc->ctx;
  for (int i = 0; i < c->n_params; i++)
    assert_ok(torc_zero_grad(c->params[i].tensor, 1));
}

static void test_autograd(void **state) {
  (void)state;
  mlp_ctx c = {mlp_new(1.0f), NULL, 0};
  assert_torc(c.m);
  c.n_params = torc_module_named_parameters(c.m, &c.params);
  assert_int_equal(c.n_params, 4);
  scenario sc = {.name = "autograd (mlp)", .run = run_autograd,
                 .after = after_autograd, .ctx = &c};
  sweep(&sc);
  torc_named_tensors_free(c.params, c.n_params);
  torc_module_free(c.m);
}

/* ---- module building: a spec string and an INI model ---- */

static int run_build(scenario *sc) {
  torc_module *m = torc_module_build("linear", "in_features=4, out_features=3");
  if (m == NULL)
    return -1;
  out_push(sc, (double)torc_module_parameter_count(m, 0));
  torc_module_free(m);
  return 0;
}

static void test_module_build(void **state) {
  (void)state;
  scenario sc = {.name = "torc_module_build", .run = run_build};
  sweep(&sc);
}

static const char model_ini[] = "[model]\n"
                                "input = 6\n"
                                "[layer]\n"
                                "type = linear\n"
                                "out_features = 5\n"
                                "[layer]\n"
                                "type = relu\n"
                                "[layer]\n"
                                "type = linear\n"
                                "out_features = 2\n";

static int run_ini_model(scenario *sc) {
  torc_config *cfg = torc_config_parse(model_ini, "net.ini");
  if (cfg == NULL)
    return -1;
  int64_t shape[TORC_MAX_DIMS];
  int nd = 0;
  torc_module *m = torc_module_from_config(cfg, shape, &nd);
  torc_config_free(cfg);
  if (m == NULL)
    return -1;
  out_push(sc, (double)torc_module_parameter_count(m, 0));
  out_push(sc, (double)nd);
  torc_module_free(m);
  return 0;
}

static void test_ini_model(void **state) {
  (void)state;
  scenario sc = {.name = "sequential from INI", .run = run_ini_model};
  sweep(&sc);
}

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

/* All of m's parameters' values, in order, into v: the count. */
static int module_values(torc_module *m, double *v, int max) {
  scenario tmp = {0};
  torc_named_tensor *ps = NULL;
  int n = torc_module_named_parameters(m, &ps);
  assert_true(n > 0);
  for (int i = 0; i < n; i++)
    assert_int_equal(out_tensor(&tmp, ps[i].tensor), 0);
  torc_named_tensors_free(ps, n);
  assert_true(tmp.n_out <= max);
  memcpy(v, tmp.out, sizeof(double) * (size_t)tmp.n_out);
  return tmp.n_out;
}

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

/* ---- all-or-nothing moves: torc_module_to, torc_module_to_dtype ---- */

typedef struct move_ctx {
  torc_module *m;
  torc_named_tensor *params;
  int n_params;
  double before[MAX_OUT];
  int n_before;
} move_ctx;

static int run_to_sim(scenario *sc) {
  move_ctx *c = sc->ctx;
  torc_device sim;
  if (torc_device_parse("sim:0", &sim) != TORC_OK)
    return -1;
  return torc_module_to(c->m, sim) == TORC_OK ? 0 : -1;
}

static int run_to_f64(scenario *sc) {
  move_ctx *c = sc->ctx;
  return torc_module_to_dtype(c->m, TORC_F64) == TORC_OK ? 0 : -1;
}

/* Every parameter where it was (failed) or where it went (moved: then
 * moved back); the values the same either way. */
static void after_move(scenario *sc, int ok, int to_sim) {
  move_ctx *c = sc->ctx;
  torc_device sim;
  assert_ok(torc_device_parse("sim:0", &sim));
  for (int i = 0; i < c->n_params; i++) {
    torc_tensor *p = c->params[i].tensor;
    torc_device d = torc_device_of(p);
    torc_dtype dt = torc_dtype_of(p);
    int moved = to_sim ? d.type == sim.type : dt == TORC_F64;
    if (moved != ok) {
      print_error("%s: N=%lld%s: %s %s moved after %s\n", sc->name,
                  (long long)sc->n, sc->persistent ? " (from N on)" : "",
                  c->params[i].name, moved ? "was" : "was not",
                  ok ? "a success" : "a failure");
      fail();
    }
  }
  double v[MAX_OUT];
  int n = module_values(c->m, v, MAX_OUT);
  assert_int_equal(n, c->n_before);
  assert_memory_equal(v, c->before, sizeof(double) * (size_t)n);
  if (ok)
    assert_ok(to_sim ? torc_module_to(c->m, TORC_CPU)
                     : torc_module_to_dtype(c->m, TORC_F32));
}

static void after_to_sim(scenario *sc, int ok) { after_move(sc, ok, 1); }
static void after_to_f64(scenario *sc, int ok) { after_move(sc, ok, 0); }

static void move_sweep(const char *name, int (*run)(scenario *),
                       void (*after)(scenario *, int)) {
  move_ctx c = {0};
  c.m = mlp_new(1.0f);
  assert_torc(c.m);
  c.n_params = torc_module_named_parameters(c.m, &c.params);
  c.n_before = module_values(c.m, c.before, MAX_OUT);
  scenario sc = {.name = name, .run = run, .after = after, .ctx = &c};
  sweep(&sc);
  torc_named_tensors_free(c.params, c.n_params);
  torc_module_free(c.m);
}

static void test_module_to(void **state) {
  (void)state;
  move_sweep("torc_module_to(sim)", run_to_sim, after_to_sim);
  move_sweep("torc_module_to_dtype", run_to_f64, after_to_f64);
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

/* ---- the loader, over a source defined here ---- */

/* Sample i: input [2, 3] holding i * 10 + k, target i. Its own memory is
 * the C library's: only the tensors it makes go through torc. */
static int ms_open(const char *const *keys, const char *const *values, int n,
                   void *user, void **handle) {
  (void)keys, (void)values, (void)n, (void)user;
  *handle = (void *)1;
  return TORC_OK;
}
static int64_t ms_length(void *h) {
  (void)h;
  return 6;
}
static int ms_get(void *h, int64_t i, torc_tensor **input,
                  torc_tensor **target) {
  (void)h;
  float v[6];
  for (int k = 0; k < 6; k++)
    v[k] = (float)(i * 10 + k);
  *input = torc_from_host(v, TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  int64_t t = i;
  *target = torc_from_host(&t, NULL, 0, TORC_I64, TORC_CPU);
  if (*input == NULL || *target == NULL) {
    torc_release(*input);
    torc_release(*target);
    *input = *target = NULL;
    return torc_last_status();
  }
  return TORC_OK;
}
static void ms_close(void *h) { (void)h; }
static const torc_data_source_type ms_type = {
    offsetof(torc_data_source_type, describe), "oom_samples",
    "six small samples", NULL, ms_open, ms_length, ms_get, ms_close,
    NULL, NULL, NULL, NULL};

static int run_loader(scenario *sc) {
  int workers = *(int *)sc->ctx;
  torc_dataset *ds = torc_dataset_open("oom_samples", NULL, NULL, 0);
  if (ds == NULL)
    return -1;
  torc_loader_opts o = {.batch_size = 2, .workers = workers};
  torc_loader *ld = torc_loader_new(ds, &o);
  int rc = ld ? 0 : -1;
  for (int b = 0; rc == 0 && b < 2; b++) {
    torc_batch batch = {0};
    int got = torc_loader_next(ld, &batch);
    if (got != 1) {
      rc = -1;
      break;
    }
    rc = out_tensor(sc, batch.input) || out_tensor(sc, batch.target);
    torc_batch_clear(&batch);
  }
  /* Keep the error: freeing the loader must not replace it. */
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", torc_last_error());
  torc_status st = torc_last_status();
  torc_loader_free(ld);
  torc_dataset_close(ds);
  if (rc != 0)
    torc_set_error(st, "%s", msg);
  return rc;
}

static void loader_sweep(int workers) {
  scenario sc = {.name = workers ? "loader, 1 worker" : "loader, 0 workers",
                 .run = run_loader, .ctx = &workers, .threaded = workers > 0};
  sweep(&sc);
}

static void test_loader_0(void **state) {
  (void)state;
  loader_sweep(0);
}

static void test_loader_1(void **state) {
  (void)state;
  loader_sweep(1);
}

/* ---- the injector itself ---- */

/* One-shot arms fail exactly one attempt; persistent ones every attempt
 * from N on; a cache hit counts and, failing, empties the cache and asks
 * the device again. */
static void test_injector(void **state) {
  (void)state;
  torc_tensor *t = torc_zeros(TORC_SHAPE(16), TORC_F32, TORC_CPU);
  assert_torc(t);
  torc_release(t); /* its block is now cached */
  torc_memory_stats m0;
  assert_ok(torc_device_memory_stats(TORC_CPU, &m0));
  int64_t f0 = torc_test_alloc_failed();
  torc_test_fail_alloc(1, 0);
  t = torc_zeros(TORC_SHAPE(16), TORC_F32, TORC_CPU);
  assert_int_equal(torc_test_alloc_failed(), f0 + 1);
  if (m0.caching) {
    /* The header came first: that one failed, nothing to recover. */
    assert_null(t);
    assert_error(TORC_ERR_OOM, "memory");
  }
  torc_release(t);
  /* Fail the storage block itself (the second attempt): the cache is
   * flushed and the device asked again, so the call succeeds. */
  t = torc_zeros(TORC_SHAPE(16), TORC_F32, TORC_CPU);
  torc_release(t);
  torc_test_fail_alloc(2, 0);
  t = torc_zeros(TORC_SHAPE(16), TORC_F32, TORC_CPU);
  torc_test_fail_alloc(0, 0);
  assert_int_equal(torc_test_alloc_failed(), f0 + 2);
  if (m0.caching) {
    assert_torc(t);
    torc_memory_stats m1;
    assert_ok(torc_device_memory_stats(TORC_CPU, &m1));
    assert_true(m1.os_frees > m0.os_frees); /* the flush */
    assert_true(m1.os_allocs > m0.os_allocs); /* the retry */
  } else {
    assert_null(t);
  }
  torc_release(t);
  /* Persistent: every attempt fails until disarmed. */
  torc_test_fail_alloc(1, 1);
  for (int i = 0; i < 3; i++)
    assert_null(torc_zeros(TORC_SHAPE(4), TORC_F32, TORC_CPU));
  torc_test_fail_alloc(0, 0);
  assert_true(torc_test_alloc_failed() >= f0 + 5);
  t = torc_zeros(TORC_SHAPE(4), TORC_F32, TORC_CPU);
  assert_torc(t);
  torc_release(t);
}

/* ---- torc_train: a short run of an INI file, with a checkpoint ---- */

typedef struct train_ctx {
  char ini[4096];
  char dir[512];     /* the checkpoint folder */
  const char *resume; /* torc_train_opts.resume */
} train_ctx;

static int run_train(scenario *sc) {
  train_ctx *c = sc->ctx;
  torc_config *cfg = torc_config_parse(c->ini, "train.ini");
  if (cfg == NULL)
    return -1;
  FILE *devnull = fopen("/dev/null", "w");
  torc_train_opts o = {.out = devnull, .resume = c->resume};
  torc_train_result res;
  memset(&res, 0, sizeof res);
  torc_status st = torc_train(cfg, &o, &res);
  fclose(devnull);
  torc_config_free(cfg);
  if (st != TORC_OK)
    return -1;
  out_push(sc, (double)res.epochs);
  out_push(sc, (double)res.steps);
  return 0;
}

/* No temporary file stays behind; a good run's checkpoint loads. The
 * folder is emptied for the next run. */
static void after_train(scenario *sc, int ok) {
  train_ctx *c = sc->ctx;
  DIR *d = opendir(c->dir);
  int ckpts = 0;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.' &&
          (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0))
        continue;
      char p[1024];
      snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
      if (strstr(e->d_name, ".tmp")) {
        print_error("%s: N=%lld%s: temporary file %s left behind\n",
                    sc->name, (long long)sc->n,
                    sc->persistent ? " (from N on)" : "", e->d_name);
        closedir(d);
        fail();
      }
      if (ok && strstr(e->d_name, ".safetensors")) {
        torc_state_dict *ck = torc_checkpoint_load(p, TORC_CPU);
        if (ck == NULL) {
          print_error("%s: N=%lld: checkpoint %s does not load: %s\n",
                      sc->name, (long long)sc->n, e->d_name,
                      torc_last_error());
          closedir(d);
          fail();
        }
        torc_state_dict_free(ck);
        ckpts++;
      }
      unlink(p);
    }
    closedir(d);
  }
  if (ok)
    assert_true(ckpts > 0);
}

static void test_train(void **state) {
  (void)state;
  train_ctx c = {0};
  snprintf(c.dir, sizeof c.dir, "%s/ckpt", tmpdir);
  snprintf(c.ini, sizeof c.ini,
           "[torc]\nseed = 3\n"
           "[model]\ninput = 6\n"
           "[layer]\ntype = linear\nout_features = 5\n"
           "[layer]\ntype = relu\n"
           "[layer]\ntype = linear\nout_features = 3\n"
           "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
           "samples = 8\nbatch_size = 4\n"
           "[loss]\ntype = cross_entropy\n"
           "[optimizer]\ntype = sgd\nlr = 0.1\nmomentum = 0.9\n"
           "[train]\nepochs = 1\n"
           "[checkpoint]\ndir = %s\n",
           c.dir);
  scenario sc = {.name = "torc_train", .run = run_train,
                 .after = after_train, .ctx = &c};
  sweep(&sc);
  rmdir(c.dir);
}

/* More of the trainer: a loader worker, a test set evaluated, adam with a
 * scheduler and warm-up, clipping, the metrics CSV and its curves. */
static void test_train_full(void **state) {
  (void)state;
  train_ctx c = {0};
  snprintf(c.dir, sizeof c.dir, "%s/ckpt", tmpdir);
  snprintf(c.ini, sizeof c.ini,
           "[torc]\nseed = 5\n"
           "[model]\ninput = 1,4,4\n"
           "[layer]\ntype = conv2d\nout_channels = 2\nkernel = 3\n"
           "padding = 1\n"
           "[layer]\ntype = batchnorm2d\n"
           "[layer]\ntype = relu\n"
           "[layer]\ntype = flatten\n"
           "[layer]\ntype = linear\nout_features = 3\n"
           "[data.train]\nsource = synthetic\nshape = 1,4,4\nclasses = 3\n"
           "samples = 8\nbatch_size = 4\nworkers = 1\nshuffle = yes\n"
           "transform = random_hflip(0.5)\n"
           "[data.test]\nsource = synthetic\nshape = 1,4,4\nclasses = 3\n"
           "samples = 4\nbatch_size = 4\n"
           "[loss]\ntype = cross_entropy\nlabel_smoothing = 0.1\n"
           "[optimizer]\ntype = adam\nlr = 0.01\n"
           "[scheduler]\ntype = cosine\nt_max = 2\nwarmup = 1\n"
           "[train]\nepochs = 2\nclip_grad_norm = 1\nlog_every = 1\n"
           "metrics = %s/metrics.csv\n"
           "[checkpoint]\ndir = %s\nkeep = 1\n",
           c.dir, c.dir);
  scenario sc = {.name = "torc_train (more)", .run = run_train,
                 .after = after_train, .ctx = &c, .threaded = 1};
  sweep(&sc);
  rmdir(c.dir);
}

/* Resuming: a clean run's first-epoch checkpoint (model, adam, scheduler,
 * RNG, position) read back, and the second epoch trained. */
static void test_train_resume(void **state) {
  (void)state;
  train_ctx c = {0};
  char first[512], ckpt[1024] = "";
  snprintf(first, sizeof first, "%s/first", tmpdir);
  snprintf(c.dir, sizeof c.dir, "%s/ckpt", tmpdir);
  const char *body =
      "[torc]\nseed = 4\n"
      "[model]\ninput = 6\n"
      "[layer]\ntype = linear\nout_features = 3\n"
      "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
      "samples = 8\nbatch_size = 4\nshuffle = yes\n"
      "[loss]\ntype = cross_entropy\n"
      "[optimizer]\ntype = adam\nlr = 0.01\n"
      "[scheduler]\ntype = step\nstep_size = 1\n";
  snprintf(c.ini, sizeof c.ini,
           "%s[train]\nepochs = 1\n[checkpoint]\ndir = %s\n", body, first);
  scenario setup = {.name = "setup", .run = run_train, .ctx = &c};
  run_clean(&setup);
  DIR *d = opendir(first);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".safetensors"))
      snprintf(ckpt, sizeof ckpt, "%s/%s", first, e->d_name);
  closedir(d);
  assert_true(ckpt[0] != '\0');
  snprintf(c.ini, sizeof c.ini,
           "%s[train]\nepochs = 2\n[checkpoint]\ndir = %s\n", body, c.dir);
  c.resume = ckpt;
  scenario sc = {.name = "torc_train resume", .run = run_train,
                 .after = after_train, .ctx = &c};
  sweep(&sc);
  unlink(ckpt);
  rmdir(first);
  rmdir(c.dir);
}

/* torc_evaluate of a checkpoint a clean run wrote: the predictions it
 * prints (as a hash of the text) are the result. */
typedef struct eval_ctx {
  char ini[4096];
  char ckpt[1024];
} eval_ctx;

static int run_eval(scenario *sc) {
  eval_ctx *c = sc->ctx;
  torc_config *cfg = torc_config_parse(c->ini, "eval.ini");
  if (cfg == NULL)
    return -1;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  torc_status st = torc_evaluate(cfg, c->ckpt, 2, out, NULL);
  fclose(out);
  torc_config_free(cfg);
  uint64_t h = 5381;
  for (size_t i = 0; i < len; i++)
    h = h * 33 + (unsigned char)text[i];
  free(text);
  if (st != TORC_OK)
    return -1;
  out_push(sc, (double)(h % 1000000007u));
  return 0;
}

static void test_evaluate(void **state) {
  (void)state;
  train_ctx t = {0};
  snprintf(t.dir, sizeof t.dir, "%s/eval", tmpdir);
  const char *body =
      "[torc]\nseed = 3\n"
      "[model]\ninput = 6\n"
      "[layer]\ntype = linear\nout_features = 5\n"
      "[layer]\ntype = relu\n"
      "[layer]\ntype = linear\nout_features = 3\n"
      "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
      "samples = 8\nbatch_size = 4\n"
      "[data.test]\nsource = synthetic\nshape = 6\nclasses = 3\n"
      "samples = 6\nbatch_size = 4\nseed = 9\n"
      "[loss]\ntype = cross_entropy\n"
      "[optimizer]\ntype = sgd\nlr = 0.1\n";
  snprintf(t.ini, sizeof t.ini, "%s[checkpoint]\ndir = %s\nevery = 0\n",
           body, t.dir);
  scenario tr = {.name = "setup", .run = run_train, .ctx = &t};
  run_clean(&tr);
  eval_ctx c;
  snprintf(c.ini, sizeof c.ini, "%s", t.ini);
  DIR *d = opendir(t.dir);
  assert_non_null(d);
  struct dirent *e;
  c.ckpt[0] = '\0';
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".safetensors"))
      snprintf(c.ckpt, sizeof c.ckpt, "%s/%s", t.dir, e->d_name);
  closedir(d);
  assert_true(c.ckpt[0] != '\0');
  scenario sc = {.name = "torc_evaluate", .run = run_eval, .ctx = &c};
  sweep(&sc);
  unlink(c.ckpt);
  rmdir(t.dir);
}

/* ---- TORC_FAIL_ALLOC: the injector armed from the environment ---- */

static const char *self_path;

/* The child: loads ref and runs the ops scenario with whatever
 * TORC_FAIL_ALLOC says, from the process's first allocation on (torc's
 * start-up and the plugin's loading included). Exits 0 ("ok K": K
 * attempts) or 3 ("error: MESSAGE"). */
static int env_child(void) {
  scenario sc = {.name = "child", .run = run_ops};
  if (torc_plugin_load("ref", NULL) != TORC_OK || run_ops(&sc) != 0) {
    printf("error: %s (%s)\n", torc_last_error(),
           torc_status_name(torc_last_status()));
    return 3;
  }
  printf("ok %lld\n", (long long)torc_test_alloc_count());
  torc_shutdown();
  return 0;
}

/* Runs the child with TORC_FAIL_ALLOC=spec (NULL: unset): its wait status,
 * its output into out. */
static int spawn_child(const char *spec, char *out, size_t size) {
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  fflush(stdout);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    if (spec)
      setenv("TORC_FAIL_ALLOC", spec, 1);
    else
      unsetenv("TORC_FAIL_ALLOC");
    execl(self_path, self_path, "--env-child", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  size_t len = 0;
  ssize_t r;
  while ((r = read(fd[0], out + len, size - 1 - len)) > 0)
    len += (size_t)r;
  out[len] = '\0';
  close(fd[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

/* Every N from the first allocation of a process (start-up and plugin
 * loading under failure too): a clean exit, with an out-of-memory message
 * when it failed. */
static void test_env_var(void **state) {
  (void)state;
  char out[2048];
  int status = spawn_child(NULL, out, sizeof out);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  long long k = 0;
  assert_int_equal(sscanf(out, "ok %lld", &k), 1);
  assert_true(k > 0);
  long long stride = valgrind_mode() ? k / 10 + 1 : k / 60 + 1;
  int errors = 0;
  for (int persistent = 0; persistent <= 1; persistent++)
    for (long long n = 1; n <= k; n += stride) {
      char spec[64];
      snprintf(spec, sizeof spec, "%lld%s", n, persistent ? ",persistent" : "");
      status = spawn_child(spec, out, sizeof out);
      if (!WIFEXITED(status) ||
          (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3)) {
        print_error("TORC_FAIL_ALLOC=%s: the child ended with status %#x: "
                    "%s\n", spec, status, out);
        fail();
      }
      if (WEXITSTATUS(status) == 3) {
        errors++;
        if (!mentions_memory(out) || !strstr(out, "TORC_ERR_OOM")) {
          print_error("TORC_FAIL_ALLOC=%s: %s", spec, out);
          fail();
        }
      }
    }
  printf("%-22s K=%-5lld stride %lld: %d errors\n", "TORC_FAIL_ALLOC", k,
         stride, errors);
  assert_true(errors > 0);
}

static int group_setup(void **state) {
  if (test_setup_ref_sim(state) ||
      test_apply_ini("[plugin.data]\nmodule = data\n"
                     "[plugin.losses]\nmodule = losses\n"
                     "[plugin.optim]\nmodule = optim\n",
                     "plugins.ini"))
    return -1;
  if (torc_data_source_register(&ms_type) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-oom");
}

static int group_teardown(void **state) {
  rmdir(tmpdir);
  return test_teardown_all(state);
}

int main(int argc, char **argv) {
  self_path = argv[0];
  if (argc > 1 && strcmp(argv[1], "--env-child") == 0)
    return env_child();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_injector),
      cmocka_unit_test(test_ops),
      cmocka_unit_test(test_ops_sim),
      cmocka_unit_test(test_autograd),
      cmocka_unit_test(test_module_build),
      cmocka_unit_test(test_ini_model),
      cmocka_unit_test(test_state_save),
      cmocka_unit_test(test_state_load),
      cmocka_unit_test(test_checkpoint_save),
      cmocka_unit_test(test_module_to),
      cmocka_unit_test(test_optimizer_load),
      cmocka_unit_test(test_loader_0),
      cmocka_unit_test(test_loader_1),
      cmocka_unit_test(test_train),
      cmocka_unit_test(test_train_full),
      cmocka_unit_test(test_train_resume),
      cmocka_unit_test(test_evaluate),
      cmocka_unit_test(test_env_var),
  };
  /* TORC_OOM_ONLY=test_ops runs one sweep (for debugging a failure). */
  const char *only = getenv("TORC_OOM_ONLY");
  if (only && *only)
    cmocka_set_test_filter(only);
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
