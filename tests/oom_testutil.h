/* tests/oom_testutil.h — the allocation-failure sweep (SQLite's habit)
 * shared by test_oom, test_oom_state and test_oom_train: each scenario runs
 * once counting its allocation attempts K, then once per N in 1..K with the
 * Nth attempt failing (torc/testing.h), once only and from N on. Every run
 * must end cleanly: TORC_ERR_OOM, its message about memory (or, where the
 * failure hit something with a fallback, a correct result), no leaked
 * block, tensor or device byte, and the objects involved as they were.
 * Scenarios of more than 1500 attempts take about 300 values of N; under
 * TORC_VALGRIND=1 every scenario takes about 60. Also the group fixtures
 * (ref, sim, the data, losses and optim plugins and a temporary folder).
 * Included after testutil.h, once per program.
 */
#ifndef TORC_OOM_TESTUTIL_H
#define TORC_OOM_TESTUTIL_H

#include <unistd.h>

#include "testutil.h"
#include "torc/testing.h"

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

static inline int valgrind_mode(void) {
  const char *v = getenv("TORC_VALGRIND");
  return v && strcmp(v, "1") == 0;
}

static inline void out_push(scenario *sc, double v) {
  if (sc->n_out < MAX_OUT)
    sc->out[sc->n_out++] = v;
}

/* Appends t's values (read through a f64 copy) to sc->out: -1 on error. */
static inline int out_tensor(scenario *sc, const torc_tensor *t) {
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

static inline int mentions_memory(const char *msg) {
  return msg && strcasestr(msg, "memory") != NULL;
}

typedef struct snapshot {
  int64_t blocks, tensors;
  size_t dev_bytes;
} snapshot;

static inline snapshot snap(void) {
  torc_device sim;
  size_t on_sim = torc_device_parse("sim:0", &sim) == TORC_OK
                      ? torc_device_memory_allocated(sim)
                      : 0;
  snapshot s = {torc_test_alloc_live(), torc_tensor_live_count(),
                torc_device_memory_allocated(TORC_CPU) + on_sim};
  return s;
}

/* Runs sc unarmed: must succeed. Returns the run's allocation attempts. */
static inline int64_t run_clean(scenario *sc) {
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

static inline void sweep(scenario *sc) {
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

/* A two-layer MLP 4 -> 8 -> 1 with fixed weights. */
static inline torc_module *mlp_new(float base) {
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

/* All of m's parameters' values, in order, into v: the count. */
static inline int module_values(torc_module *m, double *v, int max) {
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

/* ---- group fixtures ---- */

/* Loads ref, sim and the data, losses and optim plugins, and makes
 * tmpdir. */
static inline int group_setup(void **state) {
  if (test_setup_ref_sim(state) ||
      test_apply_ini("[plugin.data]\nmodule = data\n"
                     "[plugin.losses]\nmodule = losses\n"
                     "[plugin.optim]\nmodule = optim\n",
                     "plugins.ini"))
    return -1;
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-oom");
}

static inline int group_teardown(void **state) {
  rmdir(tmpdir);
  return test_teardown_all(state);
}

/* TORC_OOM_ONLY=test_ops runs one sweep (for debugging a failure). */
static inline void oom_filter_from_env(void) {
  const char *only = getenv("TORC_OOM_ONLY");
  if (only && *only)
    cmocka_set_test_filter(only);
}

#endif /* TORC_OOM_TESTUTIL_H */
