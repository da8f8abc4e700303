/* tests/test_error.c — status codes, the thread-local last error, NULL
 * propagation through chains of ops, scopes. */
#include <pthread.h>

#include "testutil.h"
#include "torc/checked.h"

static void test_status_strings(void **state) {
  (void)state;
  assert_string_equal(torc_status_str(TORC_OK), "success");
  assert_string_equal(torc_status_str(TORC_ERR_SHAPE), "shape mismatch");
  assert_string_equal(torc_status_name(TORC_ERR_OOM), "TORC_ERR_OOM");
  assert_string_equal(torc_status_str((torc_status)9999), "unknown status");
  assert_string_equal(torc_status_name((torc_status)-5), "TORC_UNKNOWN");
}

/* The checked size helpers refuse what would wrap, including a shape whose
 * product wraps to 0 (2^32 * 2^32) or hides behind a zero dimension. */
static void test_checked_sizes(void **state) {
  (void)state;
  uint64_t n;
  int64_t ok[] = {60000, 28, 28};
  assert_int_equal(torc_checked_numel(ok, 3, UINT64_MAX, &n), 0);
  assert_int_equal(n, 47040000);
  int64_t wrap[] = {(int64_t)1 << 32, (int64_t)1 << 32};
  assert_int_not_equal(torc_checked_numel(wrap, 2, UINT64_MAX, &n), 0);
  int64_t hidden[] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
  assert_int_not_equal(torc_checked_numel(hidden, 3, UINT64_MAX, &n), 0);
  int64_t empty[] = {0, 5};
  assert_int_equal(torc_checked_numel(empty, 2, UINT64_MAX, &n), 0);
  assert_int_equal(n, 0);
  int64_t neg[] = {3, -1};
  assert_int_not_equal(torc_checked_numel(neg, 2, UINT64_MAX, &n), 0);
  assert_int_not_equal(torc_checked_numel(ok, 3, 1000, &n), 0);
  assert_int_equal(torc_checked_numel(ok, 0, 1, &n), 0);
  assert_int_equal(n, 1);
  assert_int_not_equal(torc_checked_bytes(UINT64_MAX / 2, 4, UINT64_MAX, &n), 0);
  assert_int_not_equal(torc_checked_bytes(100, 4, 399, &n), 0);
  assert_int_equal(torc_checked_bytes(100, 4, 400, &n), 0);
  assert_int_equal(n, 400);
  uint64_t s;
  assert_int_not_equal(torc_checked_add(UINT64_MAX, 1, &s), 0);
  size_t z;
  assert_int_not_equal(torc_checked_mul_size(SIZE_MAX, 2, &z), 0);
}

static void test_set_and_clear(void **state) {
  (void)state;
  torc_clear_error();
  assert_int_equal(torc_last_status(), TORC_OK);
  assert_string_equal(torc_last_error(), "");
  assert_int_equal(torc_set_error(TORC_ERR_IO, "cannot open %s: %d", "x.bin", 2),
                   TORC_ERR_IO);
  assert_error(TORC_ERR_IO, "cannot open x.bin: 2");
  torc_clear_error();
  assert_string_equal(torc_last_error(), "");
}

static void *other_thread(void *arg) {
  (void)arg;
  /* A fresh thread sees no error, and its error does not leak back. */
  int clean = torc_last_status() == TORC_OK;
  torc_set_error(TORC_ERR_RANGE, "thread-local");
  return (void *)(intptr_t)clean;
}

static void test_thread_local(void **state) {
  (void)state;
  torc_set_error(TORC_ERR_SHAPE, "main thread");
  pthread_t t;
  void *ret;
  assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
  pthread_join(t, &ret);
  assert_int_equal((intptr_t)ret, 1);
  assert_error(TORC_ERR_SHAPE, "main thread");
}

static void test_long_message_truncated(void **state) {
  (void)state;
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  torc_set_error(TORC_ERR_INVALID, "%s", big);
  assert_true(strlen(torc_last_error()) < 1024);
}

/* A failing op inside a chain: the first error survives to the end. */
static void test_null_propagation_keeps_first_error(void **state) {
  (void)state;
  test_load_plugin("ref");
  torc_tensor *a = torc_ones(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  torc_tensor *b = torc_ones(TORC_SHAPE(4), TORC_F32, TORC_CPU);
  assert_torc(a);
  assert_torc(b);
  torc_clear_error();
  torc_tensor *r = torc_relu(torc_exp(torc_add(a, b)));
  assert_null(r);
  assert_error(TORC_ERR_SHAPE, "do not broadcast");
  assert_contains(torc_last_error(), "[2, 3]");
  assert_contains(torc_last_error(), "[4]");
  /* A NULL given directly, with no earlier error, is named. */
  torc_clear_error();
  assert_null(torc_neg(NULL));
  assert_error(TORC_ERR_NULL, "torc_neg");
  /* In-place ops report NULL too. */
  assert_int_equal(torc_add_(NULL, a), TORC_ERR_NULL);
  torc_release(a);
  torc_release(b);
  torc_shutdown();
}

static void test_scope_releases_and_keeps(void **state) {
  (void)state;
  test_load_plugin("ref");
  int64_t live0 = torc_tensor_live_count();
  torc_tensor *kept;
  int outer = torc_scope_begin();
  {
    torc_tensor *a = torc_ones(TORC_SHAPE(3), TORC_F32, TORC_CPU);
    torc_tensor *b = torc_add(a, a);
    int inner = torc_scope_begin();
    torc_tensor *c = torc_mul(b, b);
    torc_tensor *d = torc_add(c, c);
    torc_scope_keep(d); /* moves to the outer scope */
    torc_scope_end(inner);
    assert_int_equal(torc_tensor_live_count(), live0 + 3); /* a, b, d */
    kept = torc_scope_keep(torc_sub(d, a)); /* caller-owned */
  }
  torc_scope_end(outer);
  assert_int_equal(torc_tensor_live_count(), live0 + 1);
  double v;
  torc_tensor *first = torc_select(kept, 0, 0);
  assert_ok(torc_item(first, &v));
  assert_true(v == 7.0); /* (2*2)+(2*2) - 1 */
  torc_release(first);
  torc_release(kept);
  assert_int_equal(torc_tensor_live_count(), live0);
  torc_shutdown();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_strings),
      cmocka_unit_test(test_checked_sizes),
      cmocka_unit_test(test_set_and_clear),
      cmocka_unit_test(test_thread_local),
      cmocka_unit_test(test_long_message_truncated),
      cmocka_unit_test(test_null_propagation_keeps_first_error),
      cmocka_unit_test(test_scope_releases_and_keeps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
