/* tests/test_decline.c — kernels that decline a case (TORC_KERNEL_DECLINED)
 * with tests/plugins/decline.c: the next kernel in priority order serves
 * it, then the cpu with [torc] fallback = cpu, else one error naming the
 * op, the shapes and the providers; a plugin's unload rebuilds the ranked
 * lists. And api->ktensor_of, used by the plugin's ktdouble layer, and
 * host->kernel_scratch, used by its decldev mul. */
#include <dlfcn.h>

#include "testutil.h"

#include "plugin_testutil.h"

#include "torc/plugin_api.h"

typedef struct decline_counts_t {
  long served_cpu, served_dev, declined, ktdouble;
  void *scratch;
  int scratch_status;
} decline_counts_t;

/* The loaded decline plugin's counters (its exported decline_counts). */
static decline_counts_t *counts(void) {
  void *h = dlopen(tp_path("decline"), RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL) {
    print_error("decline.so is not loaded: %s\n", dlerror());
    fail();
  }
  decline_counts_t *c = dlsym(h, "decline_counts");
  dlclose(h); /* the core's own handle keeps it mapped */
  assert_non_null(c);
  return c;
}

static void load_ref_and_decline(void) {
  test_load_plugin("ref");
  if (try_load(tp_path("decline"), NULL) != TORC_OK) {
    print_error("loading decline: %s\n", err_msg);
    fail();
  }
}

/* a + b for n elements (a[i] = i, b[i] = 10 i) on dev, checked. */
static torc_status add_n(int64_t n, torc_device dev) {
  float a[16], b[16], y[16];
  for (int64_t i = 0; i < n; i++)
    a[i] = (float)i, b[i] = 10.0f * (float)i;
  torc_tensor *ta = torc_from_host(a, &n, 1, TORC_F32, dev);
  torc_tensor *tb = torc_from_host(b, &n, 1, TORC_F32, dev);
  assert_torc(ta);
  assert_torc(tb);
  torc_tensor *s = torc_add(ta, tb);
  torc_status st = s ? TORC_OK : torc_last_status();
  if (s) {
    assert_true(torc_device_eq(torc_device_of(s), dev));
    assert_ok(torc_to_host(s, y, (size_t)n * sizeof *y));
    for (int64_t i = 0; i < n; i++)
      assert_true(y[i] == 11.0f * (float)i);
  }
  torc_release(ta), torc_release(tb), torc_release(s);
  return st;
}

/* Even sizes run on the plugin's kernel; odd ones it declines run on
 * ref's, with the same result. */
static void test_declined_case_runs_on_the_next_kernel(void **state) {
  (void)state;
  load_ref_and_decline();
  decline_counts_t *c = counts();
  assert_ok(add_n(4, TORC_CPU));
  assert_int_equal(c->served_cpu, 1);
  assert_int_equal(c->declined, 0);
  assert_ok(add_n(3, TORC_CPU));
  assert_int_equal(c->served_cpu, 1);
  assert_int_equal(c->declined, 1);
  assert_ok(add_n(6, TORC_CPU));
  assert_ok(add_n(5, TORC_CPU));
  assert_int_equal(c->served_cpu, 2);
  assert_int_equal(c->declined, 2);

  /* The profiler's provider column names the kernel that accepted, and
   * counts no call for the one that declined. */
  char want[128];
  torc_profile_enable(1);
  assert_ok(add_n(3, TORC_CPU));
  char *rep = torc_profile_report(0, 0);
  assert_non_null(rep);
  snprintf(want, sizeof want, "  %-28s %-8s %-10s %10d ", "add", "cpu", "ref",
           1);
  assert_contains(rep, want);
  free(rep);
  torc_profile_enable(1); /* resets the counts */
  assert_ok(add_n(4, TORC_CPU));
  rep = torc_profile_report(0, 0);
  assert_non_null(rep);
  snprintf(want, sizeof want, "  %-28s %-8s %-10s %10d ", "add", "cpu",
           "decline", 1);
  assert_contains(rep, want);
  free(rep);
  /* An op two plugins served in one window names both, the first first. */
  torc_profile_enable(1);
  assert_ok(add_n(3, TORC_CPU));
  assert_ok(add_n(4, TORC_CPU));
  assert_ok(add_n(3, TORC_CPU));
  rep = torc_profile_report(0, 0);
  assert_non_null(rep);
  snprintf(want, sizeof want, "  %-28s %-8s %-10s %10d ", "add", "cpu",
           "ref+decline", 3);
  assert_contains(rep, want);
  free(rep);
  torc_profile_enable(0);
  assert_int_equal(c->served_cpu, 4);
  assert_int_equal(c->declined, 5);

  /* The listing still shows the plugin's kernel as the key's winner. */
  int found = 0;
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    if (strcmp(k.op, "add") == 0 && strcmp(k.device_type, "cpu") == 0 &&
        k.dtype == TORC_F32 && strcmp(k.provider, "decline") == 0) {
      assert_true(k.active);
      found = 1;
    }
  }
  assert_true(found);
}

/* Every kernel of decldev declines size 3: one error naming the op, the
 * shapes and dtypes, the provider and the fallback; size 4 is served. */
static void test_all_declining_is_one_error(void **state) {
  (void)state;
  load_ref_and_decline();
  decline_counts_t *c = counts();
  torc_device dev;
  assert_ok(torc_device_parse("decldev:0", &dev));
  assert_ok(add_n(4, dev));
  assert_int_equal(c->served_dev, 1);

  assert_int_equal(add_n(3, dev), TORC_ERR_NO_KERNEL);
  const char *msg = torc_last_error();
  print_message("    %s\n", msg);
  assert_contains(msg, "op 'add' (f32) on decldev:0");
  assert_contains(msg, "every kernel declined");
  assert_contains(msg, "[3] f32, [3] f32 -> [3] f32");
  assert_contains(msg, "providers that declined: decline.");
  assert_contains(msg, "fallback = cpu");
  assert_null(strchr(msg, '\n'));
  /* decldev's f32 kernel, then its ANY kernel. */
  assert_int_equal(c->declined, 2);
  assert_int_equal(c->served_dev, 1);

  /* i64: only the ANY kernel, which declines too. */
  int64_t n = 2;
  const int64_t v[2] = {1, 2};
  torc_tensor *t = torc_from_host(v, &n, 1, TORC_I64, dev);
  assert_torc(t);
  assert_null(torc_add(t, t));
  assert_error(TORC_ERR_NO_KERNEL, "op 'add' (i64) on decldev:0");
  assert_int_equal(c->declined, 3);
  torc_release(t);
}

/* With [torc] fallback = cpu a case every decldev kernel declines runs on
 * the cpu, where the plugin's cpu kernel declines it too and ref's
 * serves it; logged once. */
static void test_declined_everywhere_falls_back_to_the_cpu(void **state) {
  (void)state;
  load_ref_and_decline();
  decline_counts_t *c = counts();
  torc_config *cfg = torc_config_parse("[torc]\nfallback = cpu\n", "fb.ini");
  assert_non_null(cfg);
  assert_ok(torc_config_apply(cfg));
  torc_config_free(cfg);
  torc_device dev;
  assert_ok(torc_device_parse("decldev:0", &dev));
  log_buf[0] = '\0';
  assert_ok(add_n(3, dev));
  assert_int_equal(c->declined, 3);
  assert_int_equal(c->served_cpu + c->served_dev, 0);
  assert_ok(add_n(5, dev));
  assert_int_equal(c->declined, 6);
  assert_int_equal(log_count("declined these inputs: running it on the cpu"),
                   1);
  /* An even size on the cpu side of the fallback still takes the
   * plugin's cpu kernel; on decldev it never leaves the device. */
  assert_ok(add_n(4, dev));
  assert_int_equal(c->served_dev, 1);
  assert_int_equal(c->served_cpu, 0);
}

/* A plugin whose init fails after registering the top "add" is
 * unregistered: the lists are rebuilt without it (its kernel would fail
 * the call, and its code is unmapped). After torc_shutdown only ref's
 * kernel is left. */
static void test_unregistering_rebuilds_the_lists(void **state) {
  (void)state;
  load_ref_and_decline();
  decline_counts_t *c = counts();
  assert_int_equal(try_load(tp_path("decline_fail"), NULL), TORC_ERR_PLUGIN);
  assert_contains(err_msg, "init fails on purpose");
  assert_ok(add_n(4, TORC_CPU));
  assert_ok(add_n(3, TORC_CPU));
  assert_int_equal(c->served_cpu, 1);
  assert_int_equal(c->declined, 1);
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    assert_string_not_equal(k.provider, "decline_fail");
  }

  torc_shutdown();
  test_load_plugin("ref");
  assert_ok(add_n(4, TORC_CPU));
  assert_ok(add_n(3, TORC_CPU));
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    assert_string_not_equal(k.provider, "decline");
  }
}

/* The plugin's ktdouble layer doubles a strided view (an offset and a
 * transpose) with its own kernel on api->ktensor_of descriptors. */
static void test_ktensor_of_from_a_plugin(void **state) {
  (void)state;
  load_ref_and_decline();
  decline_counts_t *c = counts();
  float v[12];
  for (int i = 0; i < 12; i++)
    v[i] = (float)i;
  torc_tensor *x = torc_from_host(v, TORC_SHAPE(3, 4), TORC_F32, TORC_CPU);
  torc_tensor *n = torc_narrow(x, 1, 1, 3);    /* x[:, 1:4] */
  torc_tensor *view = torc_transpose(n, 0, 1); /* [3, 3] */
  assert_torc(view);
  torc_ktensor k;
  assert_ok(torc_ktensor_of(view, &k));
  assert_int_equal(k.offset, 1);
  assert_int_equal(k.ndim, 2);
  assert_int_equal(k.dtype, TORC_F32);
  assert_int_equal(k.shape[0], 3);
  assert_int_equal(k.shape[1], 3);
  assert_int_equal(k.strides[0], 1);
  assert_int_equal(k.strides[1], 4);
  assert_int_equal(k.shape[2], 1);
  assert_int_equal(k.strides[2], 0);

  torc_module *m = torc_module_build("ktdouble", "");
  assert_torc(m);
  torc_tensor *y = torc_module_forward(m, view);
  assert_torc(y);
  assert_int_equal(c->ktdouble, 1);
  float got[9];
  assert_ok(torc_to_host(y, got, sizeof got));
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      assert_true(got[i * 3 + j] == 2.0f * v[j * 4 + 1 + i]);

  assert_int_equal(torc_ktensor_of(NULL, &k), TORC_ERR_NULL);
  assert_int_equal(torc_ktensor_of(x, NULL), TORC_ERR_NULL);
  torc_release(y), torc_release(view), torc_release(n), torc_release(x);
  torc_module_free(m);
}

/* a * b on decldev through the kernel's scratch: the result is right, the
 * scratch is the allocator's and back in its cache once the call
 * returns (the next call's output gets that block), a fifth request in one
 * call is refused with the op named, and a request outside any kernel
 * call is refused. */
static void test_kernel_scratch(void **state) {
  (void)state;
  load_ref_and_decline();
  decline_counts_t *c = counts();
  torc_device dev;
  assert_ok(torc_device_parse("decldev", &dev));
  float a[8], b[8], y[8];
  for (int i = 0; i < 8; i++)
    a[i] = (float)i + 1, b[i] = 0.5f * (float)i;
  int64_t n = 8;
  torc_tensor *ta = torc_from_host(a, &n, 1, TORC_F32, dev);
  torc_tensor *tb = torc_from_host(b, &n, 1, TORC_F32, dev);
  assert_torc(ta);
  assert_torc(tb);
  torc_memory_stats before, after;
  assert_ok(torc_device_memory_stats(dev, &before));
  torc_tensor *p = torc_mul(ta, tb);
  assert_torc(p);
  assert_ok(torc_to_host(p, y, sizeof y));
  for (int i = 0; i < 8; i++)
    assert_true(y[i] == a[i] * b[i]);
  void *first = c->scratch;
  assert_non_null(first);
  assert_ok(torc_device_memory_stats(dev, &after));
  /* the product's storage is live; the scratch is not */
  assert_int_equal(after.allocated, before.allocated + sizeof y);
  /* with caching, the next call's output takes the block the scratch gave
   * back (sanitizer builds turn caching off) */
  torc_tensor *q = torc_mul(ta, tb);
  assert_torc(q);
  torc_ktensor kq;
  assert_ok(torc_ktensor_of(q, &kq));
  if (after.caching)
    assert_ptr_equal(kq.data, first);
  assert_ok(torc_device_memory_stats(dev, &after));
  assert_int_equal(after.allocated, before.allocated + 2 * sizeof y);

  int64_t seven = 7;
  torc_tensor *s7 = torc_from_host(a, &seven, 1, TORC_F32, dev);
  assert_torc(s7);
  assert_null(torc_mul(s7, s7));
  assert_int_equal(c->scratch_status, TORC_ERR_INVALID);
  assert_int_equal(torc_last_status(), TORC_ERR_INVALID);
  assert_non_null(strstr(torc_last_error(), "kernel 'mul' on decldev:0"));
  assert_non_null(strstr(torc_last_error(), "at most 4"));
  torc_clear_error();

  void *h = dlopen(tp_path("decline"), RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(h);
  int (*outside)(void) = (int (*)(void))dlsym(h, "decline_scratch_outside");
  dlclose(h);
  assert_non_null(outside);
  assert_int_equal(outside(), TORC_ERR_INVALID);
  assert_non_null(strstr(torc_last_error(), "outside a kernel call"));
  torc_clear_error();
  torc_release(ta), torc_release(tb), torc_release(p), torc_release(q);
  torc_release(s7);
}

int main(void) {
  plugin_dir = getenv("TORC_TEST_PLUGIN_DIR");
  if (plugin_dir == NULL || *plugin_dir == '\0') {
    printf("test_decline: TORC_TEST_PLUGIN_DIR is unset; run it through "
           "`make check`, which builds the test plugins and sets it\n");
    return TEST_SKIP_STATUS;
  }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_declined_case_runs_on_the_next_kernel),
      T(test_all_declining_is_one_error),
      T(test_declined_everywhere_falls_back_to_the_cpu),
      T(test_unregistering_rebuilds_the_lists),
      T(test_ktensor_of_from_a_plugin),
      T(test_kernel_scratch),
  };
  return cmocka_run_group_tests_name("decline", tests, NULL, NULL);
}
