/* tests/sim_testutil.h — shared by the sim plugin's tests (test_sim,
 * test_sim_configs): naming a sim device, deterministic cpu tensors, and
 * asserting a sim result equals ref's bit for bit. Included after
 * testutil.h, once per program. */
#ifndef TORC_SIM_TESTUTIL_H
#define TORC_SIM_TESTUTIL_H

#include <dlfcn.h>

#include "testutil.h"
#include "../plugins/sim/sim_counters.h"

static inline torc_device sim_dev(int index) {
  char name[16];
  torc_device d = TORC_CPU;
  snprintf(name, sizeof name, "sim:%d", index);
  if (torc_device_parse(name, &d) != TORC_OK) {
    print_error("torc_device_parse(%s): %s\n", name, torc_last_error());
    fail();
  }
  return d;
}

/* Device `index`'s counters (zeroed afterwards when `reset`), read through
 * the loaded sim plugin's exported torc_sim_read_counters. */
static inline torc_sim_counters sim_counters(int index, int reset) {
  torc_sim_counters c = {.struct_size = sizeof c};
  const char *dir = getenv("TORC_PLUGIN_PATH");
  char path[4096];
  snprintf(path, sizeof path, "%s/sim.so", dir ? dir : ".");
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL) {
    print_error("sim is not loaded from %s: %s\n", path, dlerror());
    fail();
  }
  torc_sim_counters_fn fn =
      (torc_sim_counters_fn)(uintptr_t)dlsym(h, TORC_SIM_COUNTERS_SYMBOL);
  if (fn == NULL || fn(index, &c, reset) != 0) {
    print_error("torc_sim_counters(%d) failed\n", index);
    fail();
  }
  dlclose(h);
  return c;
}

/* A deterministic test pattern of n doubles in roughly [-4, 4], with
 * repeats (so comparisons see equal elements) and exact zeros. */
static inline void pattern(double *v, int64_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    int k = (int)(x >> 24) % 33 - 16; /* -16 .. 16 */
    v[i] = (i % 7 == 3) ? 0.0 : k * 0.25 + ((x >> 8) & 0xff) / 1024.0;
  }
}

/* A cpu tensor of `shape` and dtype holding pattern(seed); `positive`
 * maps values to |v| + 0.5 (for log, sqrt, pow). */
static inline torc_tensor *make_cpu(const int64_t *shape, int ndim,
                                    torc_dtype dt, uint32_t seed,
                                    int positive) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  assert_non_null(v);
  pattern(v, n, seed);
  if (positive)
    for (int64_t i = 0; i < n; i++)
      v[i] = fabs(v[i]) + 0.5;
  torc_tensor *d = torc_from_host(v, shape, ndim, TORC_F64, TORC_CPU);
  free(v);
  assert_torc(d);
  torc_tensor *t = torc_to_dtype(d, dt);
  torc_release(d);
  assert_torc(t);
  return t;
}

/* Asserts a (on cpu) and b (on sim) have the same dtype, shape and bytes. */
static inline void assert_same(const torc_tensor *a, const torc_tensor *b,
                               const char *what) {
  if (a == NULL || b == NULL) {
    print_error("%s: %s is NULL: %s\n", what, a ? "sim result" : "cpu result",
                torc_last_error());
    fail();
  }
  char da[96], db[96];
  torc_describe(a, da, sizeof da);
  torc_describe(b, db, sizeof db);
  assert_true(torc_device_is_host(torc_device_of(a)));
  assert_false(torc_device_is_host(torc_device_of(b)));
  if (torc_dtype_of(a) != torc_dtype_of(b) || torc_ndim(a) != torc_ndim(b) ||
      memcmp(torc_shape(a), torc_shape(b),
             sizeof(int64_t) * (size_t)torc_ndim(a)) != 0) {
    print_error("%s: cpu gives %s, sim gives %s\n", what, da, db);
    fail();
  }
  size_t es = torc_dtype_size(torc_dtype_of(a));
  size_t nbytes = (size_t)torc_numel(a) * es;
  unsigned char *ha = malloc(nbytes + 1), *hb = malloc(nbytes + 1);
  assert_non_null(ha);
  assert_non_null(hb);
  assert_ok(torc_to_host(a, ha, nbytes));
  assert_ok(torc_to_host(b, hb, nbytes));
  for (size_t i = 0; i < nbytes; i++)
    if (ha[i] != hb[i]) {
      print_error("%s (%s): element %zu differs between cpu and sim\n", what,
                  da, i / es);
      free(ha);
      free(hb);
      fail();
    }
  free(ha);
  free(hb);
}

#endif /* TORC_SIM_TESTUTIL_H */
