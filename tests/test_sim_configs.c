/* tests/test_sim_configs.c — the sim plugin (a simulated accelerator) in
 * its other configurations, one cmocka group each: the memory cap,
 * asynchronous streams (a latency per kernel), injected kernel failures
 * and their sticky errors, two devices, and the plugin's keys. Each group
 * loads ref and sim with its keys and shuts torc down at the end, since
 * plugins are process-wide.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <time.h>

#include "testutil.h"
#include "sim_testutil.h"

/* ---- helpers ---- */

/* Loads ref, then sim with n key/value pairs. */
static int load_sim(const char *const *keys, const char *const *values, int n) {
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = n;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("sim", &opts) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- group: memory cap of 1M ---- */

static int setup_small_memory(void **state) {
  (void)state;
  static const char *const k[] = {"memory"}, *const v[] = {"1M"};
  return load_sim(k, v, 1);
}

static void test_out_of_memory(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  size_t base = torc_device_memory_allocated(sim);
  int64_t live = torc_tensor_live_count();
  char desc[128];
  assert_ok(torc_device_describe(sim, desc, sizeof desc));
  assert_contains(desc, "simulated accelerator, 0 B of 1.0 MiB in use");
  /* 512 KiB fits */
  torc_tensor *a = torc_empty(TORC_SHAPE(131072), TORC_F32, sim);
  assert_torc(a);
  assert_ok(torc_device_describe(sim, desc, sizeof desc));
  assert_contains(desc, "512.0 KiB of 1.0 MiB in use");
  /* 768 KiB more does not */
  torc_clear_error();
  assert_null(torc_empty(TORC_SHAPE(196608), TORC_F32, sim));
  assert_error(TORC_ERR_OOM, "sim:0");
  assert_contains(torc_last_error(), "786432 bytes");  /* requested */
  assert_contains(torc_last_error(), "524288 bytes");  /* in use */
  assert_contains(torc_last_error(), "1048576 bytes"); /* the cap */
  assert_contains(torc_last_error(), "[plugin.sim] memory");
  assert_contains(torc_last_error(), "lower the batch size");
  /* nor does an op whose output would not fit */
  torc_tensor *h = torc_empty(TORC_SHAPE(100000), TORC_F32, sim); /* 400000 */
  assert_torc(h);
  torc_clear_error();
  assert_null(torc_neg(h)); /* needs 400000 more, 924288 in use */
  assert_error(TORC_ERR_OOM, "400000 bytes");
  assert_contains(torc_last_error(), "924288 bytes");
  torc_release(h);
  /* a single request over the cap */
  assert_null(torc_empty(TORC_SHAPE(2, 1024, 1024), TORC_U8, sim));
  assert_error(TORC_ERR_OOM, "2097152 bytes");
  /* freeing makes room again */
  torc_release(a);
  torc_tensor *c = torc_ones(TORC_SHAPE(196608), TORC_F32, sim);
  assert_torc(c);
  torc_release(c);
  torc_tensor *d = torc_ones(TORC_SHAPE(65536), TORC_F32, sim); /* 256K */
  assert_torc(d);
  double s;
  torc_tensor *sum = torc_sum(d, NULL, 0, 0);
  assert_ok(torc_item(sum, &s));
  assert_true(s == 65536.0);
  torc_release(sum);
  torc_release(d);
  /* exactly the cap fits */
  torc_tensor *full = torc_empty(TORC_SHAPE(1024, 1024), TORC_U8, sim);
  assert_torc(full);
  torc_release(full);
  assert_int_equal(torc_device_memory_allocated(sim), base);
  assert_int_equal(torc_tensor_live_count(), live);
}

/* ---- group: 1M and a latency: asynchronous streams ---- */

#define LATENCY_US 20000 /* per kernel */

static int setup_async(void **state) {
  (void)state;
  static const char *const k[] = {"memory", "latency_us"}, *const v[] = {
                                                               "1M", "20000"};
  return load_sim(k, v, 2);
}

static void test_async_chain(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  enum { CHAIN = 12 };
  const float one = 1.0f;
  torc_tensor *x = torc_from_host(&one, TORC_SHAPE(1), TORC_F32, sim);
  assert_torc(x);
  assert_ok(torc_synchronize(sim));
  double t0 = now_s();
  /* x = x + x, CHAIN times: one kernel each, each kernel delayed */
  for (int i = 0; i < CHAIN; i++) {
    torc_tensor *y = torc_add(x, x);
    assert_torc(y);
    torc_release(x);
    x = y;
  }
  double issued = now_s() - t0;
  float got = 0;
  assert_ok(torc_to_host(x, &got, sizeof got));
  double done = now_s() - t0;
  assert_true(got == 4096.0f);
  /* the kernels alone take CHAIN * latency; launching them must not */
  double work = CHAIN * LATENCY_US * 1e-6;
  if (!(done >= work * 0.99) || !(issued < work * 0.5)) {
    print_error("launching took %.3f s, finishing %.3f s; the kernels take "
                "%.3f s: launches are not asynchronous\n",
                issued, done, work);
    fail();
  }
  /* torc_synchronize waits too */
  t0 = now_s();
  torc_tensor *z = torc_neg(x);
  torc_tensor *w = torc_neg(z);
  assert_ok(torc_synchronize(sim));
  assert_true(now_s() - t0 >= 2 * LATENCY_US * 1e-6 * 0.99);
  float wv = 0;
  assert_ok(torc_to_host(w, &wv, sizeof wv));
  assert_true(wv == 4096.0f);
  torc_release(w);
  torc_release(z);
  torc_release(x);
}

static void test_async_free_is_stream_ordered(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  size_t base = torc_device_memory_allocated(sim);
  /* a (512K) and h = -a (512K) fill the 1M device. Releasing a while -a is
   * still queued drops its bytes from the accounting at once, so another
   * 512K fits, while a's buffer lives until -a has run. */
  torc_tensor *a = torc_full(TORC_SHAPE(131072), 3.0, TORC_F32, sim);
  assert_torc(a);
  torc_tensor *h = torc_neg(a);
  assert_torc(h);
  torc_release(a);
  torc_tensor *c = torc_full(TORC_SHAPE(131072), 5.0, TORC_F32, sim);
  assert_torc(c);
  float v[4];
  torc_tensor *hv = torc_slice(h, 0, 131068, TORC_END, 1);
  assert_ok(torc_to_host(hv, v, sizeof v));
  for (int i = 0; i < 4; i++)
    assert_true(v[i] == -3.0f);
  torc_tensor *cv = torc_slice(c, 0, 0, 4, 1);
  assert_ok(torc_to_host(cv, v, sizeof v));
  for (int i = 0; i < 4; i++)
    assert_true(v[i] == 5.0f);
  torc_release(cv);
  torc_release(hv);
  torc_release(c);
  torc_release(h);
  assert_ok(torc_synchronize(sim));
  assert_int_equal(torc_device_memory_allocated(sim), base);
}

static void test_async_staged_copy(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  /* the source of a plain (unpinned) copy may be reused as soon as the
   * copy returns, even while the device is busy */
  torc_tensor *busy = torc_ones(TORC_SHAPE(8), TORC_F32, sim);
  torc_tensor *busy2 = torc_exp(busy);
  float src[64];
  for (int i = 0; i < 64; i++)
    src[i] = (float)i;
  torc_tensor *s = torc_from_host(src, TORC_SHAPE(64), TORC_F32, sim);
  assert_torc(s);
  for (int i = 0; i < 64; i++)
    src[i] = -1.0f;
  float out[64];
  assert_ok(torc_to_host(s, out, sizeof out));
  for (int i = 0; i < 64; i++)
    assert_true(out[i] == (float)i);
  torc_release(s);
  torc_release(busy2);
  torc_release(busy);
}

static void test_async_pinned_release(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  enum { N = 3000 };
  /* two delayed kernels ahead of the copy keep it queued */
  torc_tensor *busy = torc_ones(TORC_SHAPE(8), TORC_F32, sim);
  torc_tensor *busy2 = torc_exp(busy);
  torc_tensor *p = torc_empty_pinned(TORC_SHAPE(N), TORC_F32, sim);
  assert_torc(p);
  float *pv = torc_data(p);
  for (int i = 0; i < N; i++)
    pv[i] = (float)i;
  torc_tensor *s = torc_to(p, sim); /* queued, reading p's pinned block */
  assert_torc(s);
  /* the core frees a pinned tensor at its last release, even with a copy
   * from it queued: the block must outlive the copy. A new block of the
   * same size (malloc tends to hand back the one just freed) is then
   * overwritten, which would show in s if the copy read freed memory. */
  torc_release(p);
  torc_tensor *q = torc_empty_pinned(TORC_SHAPE(N), TORC_F32, sim);
  assert_torc(q);
  float *qv = torc_data(q);
  for (int i = 0; i < N; i++)
    qv[i] = -7.0f;
  float *out = malloc(sizeof(float) * N);
  assert_non_null(out);
  assert_ok(torc_to_host(s, out, sizeof(float) * N));
  for (int i = 0; i < N; i++)
    if (out[i] != (float)i) {
      print_error("element %d: %g, expected %d\n", i, (double)out[i], i);
      free(out);
      fail();
    }
  free(out);
  torc_release(q);
  torc_release(s);
  torc_release(busy2);
  torc_release(busy);
}

/* ---- group: injected kernel failures (sticky errors) ---- */

static int setup_fail_op(void **state) {
  (void)state;
  static const char *const k[] = {"fail_op", "latency_us"}, *const v[] = {
                                                                "sqrt", "1000"};
  return load_sim(k, v, 2);
}

static void test_sticky_error_at_synchronize(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  torc_tensor *x = torc_ones(TORC_SHAPE(4), TORC_F32, sim);
  torc_tensor *x64 = torc_ones(TORC_SHAPE(4), TORC_F64, sim);
  /* launches succeed: the failure happens later, on the stream */
  torc_tensor *r = torc_sqrt(x);
  assert_torc(r);
  torc_tensor *r64 = torc_sqrt(x64);
  assert_torc(r64);
  torc_tensor *ok = torc_neg(x); /* later work still runs */
  assert_torc(ok);
  torc_clear_error();
  assert_int_equal(torc_synchronize(sim), TORC_ERR_DEVICE);
  /* the first failure wins */
  assert_error(TORC_ERR_DEVICE, "sim:0");
  assert_contains(torc_last_error(), "'sqrt' (f32)");
  assert_contains(torc_last_error(), "fail_op");
  /* reported once, then cleared */
  assert_ok(torc_synchronize(sim));
  const double m1[4] = {-1, -1, -1, -1};
  test_assert_values(ok, m1, 4, 0);
  torc_release(ok);
  torc_release(r64);
  torc_release(r);
  torc_release(x64);
  torc_release(x);
}

static void test_sticky_error_at_copy(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  torc_tensor *x = torc_full(TORC_SHAPE(3), 4.0, TORC_F32, sim);
  torc_tensor *r = torc_sqrt(x);
  assert_torc(r);
  float v[3];
  torc_clear_error();
  /* reading any tensor of the device reports it */
  assert_int_equal(torc_to_host(x, v, sizeof v), TORC_ERR_DEVICE);
  assert_error(TORC_ERR_DEVICE, "'sqrt'");
  assert_ok(torc_to_host(x, v, sizeof v));
  assert_true(v[0] == 4.0f && v[2] == 4.0f);
  torc_release(r);
  torc_release(x);
}

/* ---- group: two devices ---- */

static int setup_two_devices(void **state) {
  (void)state;
  static const char *const k[] = {"devices", "memory"}, *const v[] = {"2",
                                                                      "64K"};
  return load_sim(k, v, 2);
}

static void test_two_devices(void **state) {
  (void)state;
  assert_int_equal(torc_device_count("sim"), 2);
  torc_device s0 = sim_dev(0), s1 = sim_dev(1);
  assert_false(torc_device_eq(s0, s1));
  torc_device bad;
  assert_int_equal(torc_device_parse("sim:2", &bad), TORC_ERR_DEVICE);
  size_t base0 = torc_device_memory_allocated(s0);
  size_t base1 = torc_device_memory_allocated(s1);
  torc_tensor *c = make_cpu(TORC_SHAPE(5, 7), TORC_F32, 5, 0);
  torc_tensor *a = torc_to(c, s0), *b = torc_to(c, s1);
  assert_torc(a);
  assert_torc(b);
  assert_int_equal(torc_device_memory_allocated(s0), base0 + 140);
  assert_int_equal(torc_device_memory_allocated(s1), base1 + 140);
  torc_clear_error();
  assert_null(torc_add(a, b));
  assert_error(TORC_ERR_DEVICE, "sim:0");
  assert_contains(torc_last_error(), "sim:1");
  assert_contains(torc_last_error(), "torc_to");
  /* between devices through torc_to, and each device computes alone */
  torc_tensor *b0 = torc_to(b, s0);
  assert_torc(b0);
  assert_true(torc_device_eq(torc_device_of(b0), s0));
  torc_tensor *sum0 = torc_add(a, b0);
  torc_tensor *sum1 = torc_add(b, b);
  torc_tensor *sumc = torc_add(c, c);
  assert_same(sumc, sum0, "add on sim:0");
  assert_same(sumc, sum1, "add on sim:1");
  torc_tensor *back = torc_to(sum1, s0);
  assert_same(sumc, back, "sim:1 -> sim:0");
  /* the caps are per device: 64K each */
  torc_tensor *big0 = torc_empty(TORC_SHAPE(16384), TORC_F32, s0); /* 64K */
  assert_null(big0);
  assert_error(TORC_ERR_OOM, "sim:0");
  torc_release(back);
  torc_release(sumc);
  torc_release(sum1);
  torc_release(sum0);
  torc_release(b0);
  torc_release(b);
  torc_release(a);
  torc_release(c);
  torc_tensor *big1 = torc_empty(TORC_SHAPE(16384), TORC_F32, s1);
  assert_torc(big1);
  torc_tensor *big0b = torc_empty(TORC_SHAPE(16384), TORC_F32, s0);
  assert_torc(big0b);
  torc_release(big0b);
  torc_release(big1);
  assert_ok(torc_synchronize(s0));
  assert_ok(torc_synchronize(s1));
  assert_int_equal(torc_device_memory_allocated(s0), base0);
  assert_int_equal(torc_device_memory_allocated(s1), base1);
}

/* ---- group: the plugin's keys (each test loads and shuts down) ---- */

static int teardown_each(void **state) {
  (void)state;
  torc_shutdown();
  return 0;
}

static void expect_bad_key(const char *key, const char *value,
                           const char *expected) {
  const char *const k[] = {key}, *const v[] = {value};
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.keys = k;
  opts.values = v;
  opts.n_keys = 1;
  torc_clear_error();
  assert_int_equal(torc_plugin_load("sim", &opts), TORC_ERR_PLUGIN);
  char want[200];
  snprintf(want, sizeof want, "sim: key '%s' = '%s': expected %s", key, value,
           expected);
  assert_contains(torc_last_error(), want);
  /* a failed init leaves no sim device behind */
  assert_int_equal(torc_device_count("sim"), -1);
  torc_shutdown();
}

static void test_bad_keys(void **state) {
  (void)state;
  const char *bytes = "a byte count like 512M or 2G";
  expect_bad_key("memory", "abc", bytes);
  expect_bad_key("memory", "0", bytes);
  expect_bad_key("memory", "12X", bytes);
  expect_bad_key("memory", "-5M", bytes);
  expect_bad_key("memory", "99999999999999999999G", bytes);
  expect_bad_key("devices", "x", "a number of devices from 0 to 64");
  expect_bad_key("devices", "65", "a number of devices from 0 to 64");
  expect_bad_key("devices", "-1", "a number of devices from 0 to 64");
  expect_bad_key("latency_us", "1ms", "microseconds from 0 to 60000000");
  expect_bad_key("kernel_latency_us", "-1", "microseconds from 0 to 60000000");
  expect_bad_key("copy_latency_us", "60000001",
                 "microseconds from 0 to 60000000");
  expect_bad_key("fail_op", "add;neg", "an op name like add or matmul");
}

static void test_good_keys(void **state) {
  (void)state;
  /* suffixes, as documented */
  static const char *const k[] = {"memory", "devices"};
  static const char *const sizes[] = {"3K",  "3k",   "3KiB",
                                      "3KB", "3072", "3072B"};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const char *v[] = {sizes[i], "1"};
    assert_int_equal(load_sim(k, v, 2), 0);
    torc_device sim = sim_dev(0);
    torc_tensor *ok = torc_empty(TORC_SHAPE(3072), TORC_U8, sim);
    assert_torc(ok);
    assert_null(torc_empty(TORC_SHAPE(1), TORC_U8, sim));
    assert_error(TORC_ERR_OOM, "3072 bytes");
    torc_release(ok);
    torc_shutdown();
  }
  /* zero devices: the type exists, no device does */
  const char *v0[] = {"1G", "0"};
  assert_int_equal(load_sim(k, v0, 2), 0);
  assert_int_equal(torc_device_count("sim"), 0);
  torc_device d;
  assert_int_equal(torc_device_parse("sim:0", &d), TORC_ERR_DEVICE);
  torc_shutdown();
  /* defaults: one device; reloading after a shutdown works */
  assert_int_equal(load_sim(NULL, NULL, 0), 0);
  assert_int_equal(torc_device_count("sim"), 1);
  torc_tensor *t = torc_ones(TORC_SHAPE(2), TORC_F32, sim_dev(0));
  const double one2[2] = {1, 1};
  test_assert_values(t, one2, 2, 0);
  torc_release(t);
  torc_shutdown();
}

static void test_loaded_twice(void **state) {
  (void)state;
  assert_int_equal(load_sim(NULL, NULL, 0), 0);
  torc_tensor *t = torc_full(TORC_SHAPE(3), 2.0, TORC_F32, sim_dev(0));
  assert_torc(t);
  /* the same file under another name is refused, and the first instance
   * keeps working */
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.name = "sim2";
  assert_int_equal(torc_plugin_load("sim", &opts), TORC_ERR_PLUGIN);
  assert_contains(torc_last_error(), "sim: this plugin is already loaded");
  torc_tensor *u = torc_mul(t, t);
  const double four[3] = {4, 4, 4};
  test_assert_values(u, four, 3, 0);
  torc_release(u);
  torc_release(t);
  torc_shutdown();
}

static void test_sim_kernels_registered(void **state) {
  (void)state;
  assert_int_equal(load_sim(NULL, NULL, 0), 0);
  int n = torc_kernel_count(), n_sim = 0, n_cpu = 0;
  for (int i = 0; i < n; i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.device_type, "sim") == 0) {
      n_sim++;
      assert_string_equal(k.provider, "sim");
    } else if (strcmp(k.device_type, "cpu") == 0 &&
               strcmp(k.provider, "ref") == 0) {
      n_cpu++;
    }
  }
  /* the very same table as ref's */
  assert_true(n_sim > 0);
  assert_int_equal(n_sim, n_cpu);
  torc_shutdown();
}

int main(void) {
  const struct CMUnitTest small_memory[] = {
      cmocka_unit_test(test_out_of_memory),
  };
  const struct CMUnitTest async[] = {
      cmocka_unit_test(test_async_chain),
      cmocka_unit_test(test_async_free_is_stream_ordered),
      cmocka_unit_test(test_async_staged_copy),
      cmocka_unit_test(test_async_pinned_release),
  };
  const struct CMUnitTest sticky[] = {
      cmocka_unit_test(test_sticky_error_at_synchronize),
      cmocka_unit_test(test_sticky_error_at_copy),
  };
  const struct CMUnitTest two[] = {
      cmocka_unit_test(test_two_devices),
  };
  const struct CMUnitTest keys[] = {
      cmocka_unit_test_teardown(test_bad_keys, teardown_each),
      cmocka_unit_test_teardown(test_good_keys, teardown_each),
      cmocka_unit_test_teardown(test_loaded_twice, teardown_each),
      cmocka_unit_test_teardown(test_sim_kernels_registered, teardown_each),
  };
  if (getenv("TORC_PLUGIN_PATH") == NULL) {
    printf("test_sim_configs: TORC_PLUGIN_PATH is not set (run through make "
           "check); skipped\n");
    return TEST_SKIP_STATUS;
  }
  int failed = 0;
  failed += cmocka_run_group_tests_name("sim_oom", small_memory,
                                        setup_small_memory, test_teardown_all);
  failed += cmocka_run_group_tests_name("sim_async", async, setup_async,
                                        test_teardown_all);
  failed += cmocka_run_group_tests_name("sim_sticky", sticky, setup_fail_op,
                                        test_teardown_all);
  failed += cmocka_run_group_tests_name("sim_two_devices", two,
                                        setup_two_devices, test_teardown_all);
  failed += cmocka_run_group_tests_name("sim_keys", keys, NULL, NULL);
  return failed;
}
