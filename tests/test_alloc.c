/* tests/test_alloc.c — the caching allocator and the object pools: a
 * training loop's steady state takes no memory from the OS, freed blocks
 * are reused by size class, empty_cache gives everything back, the counts
 * stay true, objects freed on another thread are fine. */
#include <pthread.h>

#include "testutil.h"

static torc_memory_stats stats(void) {
  torc_memory_stats s;
  assert_ok(torc_device_memory_stats(TORC_CPU, &s));
  return s;
}

static int setup(void **state) {
  (void)state;
  test_load_plugin("ref");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  torc_shutdown();
  return 0;
}

/* A few SGD steps of a small MLP, written with ops as a user would. */
static void steps(torc_tensor *w1, torc_tensor *w2, torc_tensor *x, int n) {
  for (int i = 0; i < n; i++) {
    int scope = torc_scope_begin();
    torc_tensor *h = torc_relu(torc_matmul(x, w1));
    torc_tensor *loss = torc_mean(torc_square(torc_matmul(h, w2)), NULL, 0, 0);
    assert_ok(torc_backward(loss, NULL, 0));
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    assert_ok(torc_sub_(w1, torc_mul_scalar(torc_grad_of(w1), 0.01)));
    assert_ok(torc_sub_(w2, torc_mul_scalar(torc_grad_of(w2), 0.01)));
    torc_set_grad_mode(gm);
    assert_ok(torc_zero_grad(w1, 1));
    assert_ok(torc_zero_grad(w2, 1));
    torc_scope_end(scope);
  }
}

static void test_steady_state_takes_nothing(void **state) {
  (void)state;
  if (!stats().caching) {
    print_message("caching is off (TORC_NO_CACHE or a sanitizer build)\n");
    skip();
  }
  torc_manual_seed(1);
  torc_tensor *x = torc_randn(TORC_SHAPE(32, 100), TORC_F32, TORC_CPU, NULL);
  torc_tensor *w1 = torc_randn(TORC_SHAPE(100, 64), TORC_F32, TORC_CPU, NULL);
  torc_tensor *w2 = torc_randn(TORC_SHAPE(64, 10), TORC_F32, TORC_CPU, NULL);
  assert_torc(x);
  assert_torc(w1);
  assert_torc(w2);
  assert_ok(torc_set_requires_grad(w1, 1));
  assert_ok(torc_set_requires_grad(w2, 1));
  steps(w1, w2, x, 3); /* warm-up: fills the cache */
  torc_memory_stats a = stats();
  steps(w1, w2, x, 20);
  torc_memory_stats b = stats();
  assert_int_equal(b.os_allocs, a.os_allocs);
  assert_true(b.cache_hits > a.cache_hits + 20);
  assert_int_equal(b.allocated, a.allocated);
  torc_release(x);
  torc_release(w1);
  torc_release(w2);
}

static void test_classes_and_empty_cache(void **state) {
  (void)state;
  torc_memory_stats s0 = stats();
  if (!s0.caching)
    skip();
  size_t base = s0.allocated;
  /* 1000 floats round up to a class; a request of a nearby size in the
   * same class reuses the block, one of another class does not. */
  torc_tensor *t = torc_empty(TORC_SHAPE(1000), TORC_F32, TORC_CPU);
  assert_torc(t);
  assert_int_equal(stats().allocated, base + 4000);
  torc_release(t);
  assert_int_equal(stats().allocated, base);
  assert_true(stats().cached >= 4000);
  torc_memory_stats a = stats();
  t = torc_empty(TORC_SHAPE(990), TORC_F32, TORC_CPU); /* same class */
  assert_int_equal(stats().os_allocs, a.os_allocs);
  assert_int_equal(stats().cache_hits, a.cache_hits + 1);
  torc_tensor *big = torc_empty(TORC_SHAPE(3, 1 << 20), TORC_F32, TORC_CPU);
  assert_torc(big);
  assert_int_equal(stats().os_allocs, a.os_allocs + 1);
  torc_release(t);
  torc_release(big);
  assert_ok(torc_device_empty_cache(TORC_CPU));
  torc_memory_stats e = stats();
  assert_int_equal(e.cached, 0);
  assert_true(e.os_frees >= a.os_frees + 2);
  assert_int_equal(e.allocated, base);
}

static void *make_tensors(void *arg) {
  torc_tensor **out = arg;
  for (int i = 0; i < 64; i++)
    out[i] = torc_full(TORC_SHAPE(i + 1), (double)i, TORC_F32, TORC_CPU);
  return NULL;
}

/* Tensors made on one thread and freed on another: headers join the
 * freeing thread's pool, blocks the shared cache; the maker's pool is
 * freed when it exits (valgrind checks). */
static void test_cross_thread(void **state) {
  (void)state;
  torc_tensor *ts[64];
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, make_tensors, ts), 0);
  pthread_join(th, NULL);
  int scope = torc_scope_begin();
  for (int i = 0; i < 64; i++) {
    assert_torc(ts[i]);
    double v;
    assert_ok(torc_item(torc_sum(ts[i], NULL, 0, 0), &v));
    assert_true(v == (double)i * (i + 1));
    torc_release(ts[i]);
  }
  torc_scope_end(scope);
}

static void test_errors(void **state) {
  (void)state;
  torc_device bad = {.type = 60, .index = 0};
  torc_memory_stats s;
  assert_int_not_equal(torc_device_memory_stats(bad, &s), TORC_OK);
  assert_error(TORC_ERR_DEVICE, "torc_device_memory_stats");
  assert_int_not_equal(torc_device_empty_cache(bad), TORC_OK);
  assert_error(TORC_ERR_DEVICE, "torc_device_empty_cache");
  assert_int_equal(torc_device_memory_stats(TORC_CPU, NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "out is NULL");
}

/* A memory limit fails the storage that would pass it, with the figures,
 * keeps what is allocated, and counts nothing for the failed request. */
static void test_memory_limit(void **state) {
  (void)state;
  assert_int_equal(torc_device_memory_limit(TORC_CPU), 0);
  size_t base = torc_device_memory_allocated(TORC_CPU);
  assert_ok(torc_device_set_memory_limit(TORC_CPU, base + 64 * 1024));
  int64_t small[1] = {1024}, big[1] = {64 * 1024};
  torc_tensor *a = torc_zeros(small, 1, TORC_F32, TORC_CPU);
  assert_non_null(a);
  assert_int_equal(torc_device_memory_allocated(TORC_CPU), base + 4096);
  torc_tensor *b = torc_zeros(big, 1, TORC_F32, TORC_CPU);
  assert_null(b);
  assert_error(TORC_ERR_OOM, "would pass the memory limit of");
  assert_error(TORC_ERR_OOM, "262144 bytes");
  assert_int_equal(torc_device_memory_allocated(TORC_CPU), base + 4096);
  torc_release(a);
  assert_int_equal(torc_device_memory_allocated(TORC_CPU), base);
  /* A request near SIZE_MAX does not wrap around the check. */
  assert_ok(torc_device_set_memory_limit(TORC_CPU, base + 1));
  int64_t huge[1] = {(int64_t)1 << 60};
  assert_null(torc_empty(huge, 1, TORC_U8, TORC_CPU));
  torc_clear_error();
  assert_ok(torc_device_set_memory_limit(TORC_CPU, 0));
  b = torc_zeros(big, 1, TORC_F32, TORC_CPU);
  assert_non_null(b);
  torc_release(b);
  torc_device bad = {.type = 60, .index = 0};
  assert_int_not_equal(torc_device_set_memory_limit(bad, 1), TORC_OK);
  assert_error(TORC_ERR_DEVICE, "torc_device_set_memory_limit");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_steady_state_takes_nothing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_classes_and_empty_cache, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cross_thread, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_limit, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
