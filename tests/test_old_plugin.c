/* tests/test_old_plugin.c — a plugin of the last shipped ABI still loads
 * and runs: tests/fixtures/abi-1.6/olddev.c, built against that release's
 * headers, is found by name on the plugin path and listed as ABI 1.6; its
 * device "olddev" takes tensors, its kernels compute ops and a linear
 * layer's forward whose numbers are checked; its memory is counted
 * uncached; the core reads nothing past its 1.6 device table (the poison
 * behind it is never called); unloading frees every allocation and calls
 * its shutdown once. */
#include <dlfcn.h>

#include "testutil.h"

#include "plugin_testutil.h"

/* As in olddev.c. */
typedef struct olddev_counts_t {
  long allocs, frees, live;
  long copies_in, copies_out;
  long kernels;
  long poison_calls;
  long shutdowns;
} olddev_counts_t;

/* Our own handle on the loaded olddev.so, which keeps it mapped after the
 * core unloads it, so its counters stay readable. */
static void *own_handle;

static olddev_counts_t *counts(void) {
  if (own_handle == NULL)
    own_handle = dlopen(tp_path("olddev"), RTLD_NOW | RTLD_NOLOAD);
  if (own_handle == NULL) {
    print_error("olddev.so is not loaded: %s\n", dlerror());
    fail();
  }
  olddev_counts_t *c = dlsym(own_handle, "olddev_counts");
  assert_non_null(c);
  return c;
}

static int old_teardown(void **state) {
  int rc = teardown(state);
  if (own_handle) {
    dlclose(own_handle);
    own_handle = NULL;
  }
  return rc;
}

/* Loads olddev by its bare name from the test plugins' folder, as
 * [plugin.olddev] module = olddev does from the plugin path. */
static torc_device load_olddev(void) {
  torc_plugin_opts o;
  memset(&o, 0, sizeof o);
  o.search_path = plugin_dir;
  if (try_load("olddev", &o) != TORC_OK) {
    print_error("loading olddev: %s\n", err_msg);
    fail();
  }
  torc_device dev = TORC_CPU;
  assert_ok(torc_device_parse("olddev", &dev));
  return dev;
}

static torc_tensor *on(torc_device dev, const float *v, const int64_t *shape,
                       int nd) {
  torc_tensor *t = torc_from_host(v, shape, nd, TORC_F32, dev);
  assert_torc(t);
  return t;
}

/* t's elements (f32, read back from the device) equal want's n. */
static void expect_f32(const torc_tensor *t, const float *want, int64_t n) {
  float got[16];
  assert_true(n <= 16);
  assert_int_equal(torc_numel(t), n);
  assert_ok(torc_to_host(t, got, (size_t)n * sizeof *got));
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      print_error("element %lld: got %g, want %g\n", (long long)i,
                  (double)got[i], (double)want[i]);
      fail();
    }
}

static void test_loads_as_abi_1_6(void **state) {
  (void)state;
  torc_device dev = load_olddev();
  int found = 0;
  for (int i = 0; i < torc_plugin_count(); i++) {
    torc_plugin_summary s;
    assert_ok(torc_plugin_get(i, &s));
    if (strcmp(s.name, "olddev") != 0)
      continue;
    found = 1;
    assert_int_equal(s.abi_major, 1);
    assert_int_equal(s.abi_minor, 6);
    assert_non_null(strstr(s.path, "olddev.so"));
  }
  assert_true(found);
  assert_int_equal(torc_device_count("olddev"), 1);
  assert_false(torc_device_is_host(dev));
  char line[256];
  assert_ok(torc_device_describe(dev, line, sizeof line));
  assert_string_equal(line, "olddev:0"); /* 1.6 gave no describe here */
  /* Its kernels are listed for its device type. */
  int kernels = 0;
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.device_type, "olddev") == 0) {
      assert_string_equal(k.provider, "olddev");
      assert_true(k.active);
      kernels++;
    }
  }
  assert_int_equal(kernels, 6);
  assert_int_equal(counts()->poison_calls, 0);
}

static void test_ops_and_a_linear_layer(void **state) {
  (void)state;
  torc_device dev = load_olddev();
  olddev_counts_t *c = counts();
  const float av[] = {1, 2, 3, 4, 5, 6}, bv[] = {10, 20, 30};
  torc_tensor *a = on(dev, av, (int64_t[]){2, 3}, 2);
  torc_tensor *b = on(dev, bv, (int64_t[]){3}, 1);
  assert_true(torc_device_eq(torc_device_of(a), dev));
  assert_true(c->copies_in >= 2);

  /* broadcasting add and mul */
  torc_tensor *s = torc_add(a, b);
  assert_torc(s);
  assert_true(torc_device_eq(torc_device_of(s), dev));
  expect_f32(s, (const float[]){11, 22, 33, 14, 25, 36}, 6);
  torc_tensor *p = torc_mul(a, b);
  assert_torc(p);
  expect_f32(p, (const float[]){10, 40, 90, 40, 100, 180}, 6);

  /* sums: over a dim, and of everything */
  int dim = 1;
  torc_tensor *rows = torc_sum(a, &dim, 1, 0);
  assert_torc(rows);
  expect_f32(rows, (const float[]){6, 15}, 2);
  torc_tensor *all = torc_sum(p, NULL, 0, 0);
  assert_torc(all);
  double v;
  assert_ok(torc_item(all, &v));
  assert_true(v == 460.0);

  /* a transposed view made contiguous: olddev's strided copy */
  torc_tensor *view = torc_transpose(a, 0, 1);
  assert_torc(view);
  torc_tensor *at = torc_contiguous(view);
  assert_torc(at);
  torc_release(view);
  expect_f32(at, (const float[]){1, 4, 2, 5, 3, 6}, 6);

  /* zeros: fill_ */
  torc_tensor *z = torc_zeros((int64_t[]){2, 2}, 2, TORC_F32, dev);
  assert_torc(z);
  expect_f32(z, (const float[]){0, 0, 0, 0}, 4);

  /* a linear layer's forward, y = x w^T + b: matmul and add */
  const float wv[] = {1, 0, -1, 0.5f, 0.5f, 0.5f}, biasv[] = {1, -2};
  torc_tensor *w = on(dev, wv, (int64_t[]){2, 3}, 2);
  torc_tensor *bias = on(dev, biasv, (int64_t[]){2}, 1);
  torc_tensor *y = torc_linear(a, w, bias);
  assert_torc(y);
  expect_f32(y, (const float[]){1 - 3 + 1, 3 - 2, 4 - 6 + 1, 7.5f - 2}, 4);

  torc_release(a), torc_release(b), torc_release(s), torc_release(p);
  torc_release(rows), torc_release(all), torc_release(at), torc_release(z);
  torc_release(w), torc_release(bias), torc_release(y);
  assert_true(c->kernels >= 8);
  assert_true(c->copies_out >= 6);
  assert_int_equal(c->poison_calls, 0);
  assert_int_equal(c->live, 0);
}

static torc_memory_stats2 stats(torc_device dev) {
  torc_memory_stats2 s = {.struct_size = sizeof s};
  assert_ok(torc_device_memory_stats2(dev, &s));
  return s;
}

static void test_memory_is_counted_uncached(void **state) {
  (void)state;
  torc_device dev = load_olddev();
  olddev_counts_t *c = counts();
  torc_memory_stats2 s0 = stats(dev);
  assert_int_equal(s0.caching, TORC_CACHING_NONE);
  assert_int_equal(s0.allocated, 0);
  assert_int_equal(s0.reserved, 0);
  assert_int_equal(s0.device_total, 0); /* 1.6 had no memory-info slot */

  torc_tensor *t1 = torc_zeros((int64_t[]){100}, 1, TORC_F32, dev);
  torc_tensor *t2 = torc_zeros((int64_t[]){7, 3}, 2, TORC_F32, dev);
  assert_torc(t1);
  assert_torc(t2);
  torc_memory_stats2 s = stats(dev);
  assert_int_equal(s.allocated, 400 + 84);
  assert_int_equal(s.reserved, s.allocated); /* every storage its own call */
  assert_int_equal(s.peak_allocated, 484);
  assert_int_equal(s.alloc_count - s0.alloc_count, 2);
  assert_int_equal(s.segment_allocs - s0.segment_allocs, 2);
  assert_int_equal(s.cache_hits, 0);
  assert_int_equal(c->live, 2);
  assert_int_equal(torc_device_memory_allocated(dev), 484);
  torc_memory_stats v1;
  assert_ok(torc_device_memory_stats(dev, &v1));
  assert_int_equal(v1.caching, 0);
  assert_int_equal(v1.allocated, 484);

  torc_release(t1);
  s = stats(dev);
  assert_int_equal(s.allocated, 84);
  assert_int_equal(s.free_count - s0.free_count, 1);
  assert_int_equal(c->live, 1); /* given back at once: nothing is cached */
  char *text = torc_memory_summary(dev);
  assert_non_null(text);
  assert_non_null(strstr(text, "memory summary of olddev:0 (caching: none)"));
  free(text);
  assert_ok(torc_device_empty_cache(dev));
  assert_ok(torc_reset_peak_memory_stats(dev));
  assert_int_equal(stats(dev).peak_allocated, 84);
  torc_release(t2);
  assert_int_equal(stats(dev).allocated, 0);
  assert_int_equal(c->live, 0);
  assert_int_equal(c->allocs, c->frees);
  assert_int_equal(c->poison_calls, 0);
}

static void test_unloading_is_clean(void **state) {
  (void)state;
  torc_device dev = load_olddev();
  olddev_counts_t *c = counts();
  torc_tensor *t = torc_zeros((int64_t[]){5}, 1, TORC_F32, dev);
  assert_torc(t);
  torc_release(t);
  assert_int_equal(c->shutdowns, 0);
  torc_shutdown();
  /* our handle kept the file mapped: the counters are still there */
  assert_int_equal(c->shutdowns, 1);
  assert_int_equal(c->live, 0);
  assert_int_equal(c->allocs, c->frees);
  assert_int_equal(c->poison_calls, 0);
  assert_int_equal(torc_device_count("olddev"), -1);
  /* and it loads again after the unload */
  load_olddev();
  assert_int_equal(torc_device_count("olddev"), 1);
}

int main(void) {
  plugin_dir = getenv("TORC_TEST_PLUGIN_DIR");
  if (plugin_dir == NULL || *plugin_dir == '\0') {
    printf("test_old_plugin: TORC_TEST_PLUGIN_DIR is unset; run it through "
           "`make check`, which builds the test plugins and sets it\n");
    return TEST_SKIP_STATUS;
  }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, old_teardown)
  const struct CMUnitTest tests[] = {
      T(test_loads_as_abi_1_6),
      T(test_ops_and_a_linear_layer),
      T(test_memory_is_counted_uncached),
      T(test_unloading_is_clean),
  };
  return cmocka_run_group_tests_name("old_plugin", tests, NULL, NULL);
}
