/* tests/test_oom.c — allocation-failure sweeps (tests/oom_testutil.h)
 * over the injector itself, tensor ops (on the cpu and sim), autograd on a
 * small MLP, module building, all-or-nothing module moves, and whole
 * processes under TORC_FAIL_ALLOC. State dicts, checkpoints and optimizer
 * state are in test_oom_state.c, the loader and torc_train in
 * test_oom_train.c.
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
      cmocka_unit_test(test_module_to),
      cmocka_unit_test(test_env_var),
  };
  oom_filter_from_env();
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
