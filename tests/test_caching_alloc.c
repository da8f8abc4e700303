/* tests/test_caching_alloc.c — the block allocator of devices that ask for
 * it (TORC_DEVICE_CACHING), on sim: a training loop's steady state takes no
 * device memory after its first step, the statistics match figures worked
 * out by hand from the rounding rules, split and merged blocks never
 * overlap, empty_cache gives free segments back, the out-of-memory message
 * says what to do, and a plugin device without the flag is unchanged. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>

#include "testutil.h"
#include "sim_testutil.h"
#include "torc/testing.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static torc_memory_stats2 stats(torc_device dev) {
  torc_memory_stats2 s = {.struct_size = sizeof s};
  assert_ok(torc_device_memory_stats2(dev, &s));
  return s;
}

/* Loads ref, then sim with `memory` (NULL: the default). */
static int load_sim(const char *memory) {
  static const char *const k[] = {"memory"};
  const char *v[] = {memory};
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.keys = k;
  opts.values = v;
  opts.n_keys = memory ? 1 : 0;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("sim", &opts) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static int setup_default(void **state) {
  (void)state;
  return load_sim(NULL);
}

static int setup_64m(void **state) {
  (void)state;
  return load_sim("64M");
}

static int teardown(void **state) {
  (void)state;
  torc_shutdown();
  return 0;
}

/* A fresh start of every test: nothing cached, peaks reset. */
static torc_device fresh_sim(void) {
  torc_device sim = sim_dev(0);
  assert_ok(torc_synchronize(sim));
  assert_ok(torc_device_empty_cache(sim));
  assert_ok(torc_reset_peak_memory_stats(sim));
  torc_memory_stats2 s = stats(sim);
  assert_int_equal(s.caching, TORC_CACHING_BLOCKS);
  assert_int_equal(s.allocated, 0);
  assert_int_equal(s.reserved, 0);
  return sim;
}

static torc_tensor *bytes_on(torc_device dev, size_t n) {
  torc_tensor *t = torc_empty(TORC_SHAPE((int64_t)n), TORC_U8, dev);
  assert_torc(t);
  return t;
}

/* ---- the figures, by hand ---- */

static void test_hand_computed_figures(void **state) {
  (void)state;
  torc_device sim = fresh_sim();
  torc_memory_stats2 s0 = stats(sim);
  /* 3 MiB: the large pool, a new 20 MiB segment split into 3 + 17 */
  torc_tensor *a = bytes_on(sim, 3 * MIB);
  torc_memory_stats2 s = stats(sim);
  assert_int_equal(s.allocated, 3 * MIB);
  assert_int_equal(s.reserved, 20 * MIB);
  assert_int_equal(s.pool_reserved[1].current, 20 * MIB);
  assert_int_equal(s.pool_reserved[0].current, 0);
  assert_int_equal(s.segment_allocs, s0.segment_allocs + 1);
  /* 100 KiB: the small pool, a new 2 MiB segment */
  torc_tensor *b = bytes_on(sim, 100 * KIB);
  s = stats(sim);
  assert_int_equal(s.allocated, 3 * MIB + 100 * KIB);
  assert_int_equal(s.reserved, 22 * MIB);
  assert_int_equal(s.pool_reserved[0].current, 2 * MIB);
  assert_int_equal(s.pool_allocated[0].current, 100 * KIB);
  assert_int_equal(s.pool_allocated[1].current, 3 * MIB);
  assert_int_equal(s.segment_allocs, s0.segment_allocs + 2);
  /* both freed: nothing allocated, everything still reserved */
  torc_release(a);
  torc_release(b);
  s = stats(sim);
  assert_int_equal(s.allocated, 0);
  assert_int_equal(s.reserved, 22 * MIB);
  assert_int_equal(s.peak_allocated, 3 * MIB + 100 * KIB);
  assert_int_equal(s.peak_reserved, 22 * MIB);
  assert_int_equal(s.fragmentation, 22 * MIB);
  /* 1 MiB is the small pool's largest: the merged 2 MiB segment serves it */
  uint64_t hits = s.cache_hits;
  torc_tensor *c = bytes_on(sim, 1 * MIB);
  s = stats(sim);
  assert_int_equal(s.allocated, 1 * MIB);
  assert_int_equal(s.reserved, 22 * MIB);
  assert_int_equal(s.fragmentation, 21 * MIB);
  assert_int_equal(s.segment_allocs, s0.segment_allocs + 2);
  assert_int_equal(s.cache_hits, hits + 1);
  assert_int_equal(s.alloc_count, s0.alloc_count + 3);
  assert_int_equal(s.free_count, s0.free_count + 2);
  /* the peaks restart from the current figures */
  assert_ok(torc_reset_peak_memory_stats(sim));
  s = stats(sim);
  assert_int_equal(s.peak_allocated, 1 * MIB);
  assert_int_equal(s.peak_reserved, 22 * MIB);
  /* 11 MiB + 1 byte rounds to 11 MiB + 512: the free 20 MiB segment
   * serves it and splits (9 MiB - 512 remain, over the 1 MiB minimum);
   * 12 MiB + 1 fits no free block: a segment of its own, rounded up to
   * 2 MiB (14 MiB); 100 bytes round up to 512 in the small segment */
  torc_tensor *d = bytes_on(sim, 11 * MIB + 1);
  s = stats(sim);
  assert_int_equal(s.reserved, 22 * MIB);
  assert_int_equal(s.cache_hits, hits + 2);
  torc_tensor *f = bytes_on(sim, 12 * MIB + 1);
  torc_tensor *e = bytes_on(sim, 100);
  s = stats(sim);
  assert_int_equal(s.reserved, 36 * MIB);
  assert_int_equal(s.pool_reserved[1].current, 34 * MIB);
  assert_int_equal(s.segment_allocs, s0.segment_allocs + 3);
  assert_int_equal(s.allocated, 24 * MIB + 102);
  assert_int_equal(s.fragmentation, 12 * MIB - 102);
  assert_int_equal(s.device_total, 1024 * MIB); /* sim's default 1G */
  assert_int_equal(s.device_free, 1024 * MIB - 36 * MIB);
  torc_release(c);
  torc_release(d);
  torc_release(e);
  torc_release(f);
  assert_ok(torc_device_empty_cache(sim));
  s = stats(sim);
  assert_int_equal(s.reserved, 0);
  assert_int_equal(s.segment_frees, s0.segment_frees + 3);
  assert_int_equal(s.device_free, s.device_total);
}

/* The summary names each row; the old call still works on sim. */
static void test_summary_and_old_stats(void **state) {
  (void)state;
  torc_device sim = fresh_sim();
  torc_tensor *a = bytes_on(sim, 3 * MIB);
  char *text = torc_memory_summary(sim);
  assert_non_null(text);
  print_message("%s", text);
  assert_contains(text, "memory summary of sim:0");
  assert_contains(text, "blocks");
  assert_contains(text, "allocated");
  assert_contains(text, "reserved");
  assert_contains(text, "small pool");
  assert_contains(text, "large pool");
  assert_contains(text, "3.0 MiB");
  assert_contains(text, "20.0 MiB");
  assert_contains(text, "device: 1.00 GiB total"); /* sim's default */
  free(text);
  torc_memory_stats old;
  assert_ok(torc_device_memory_stats(sim, &old));
  assert_int_equal(old.caching, 1);
  assert_int_equal(old.allocated, 3 * MIB);
  assert_int_equal(old.cached, 17 * MIB);
  torc_release(a);
  /* a caller built when the struct was shorter gets only what fits */
  torc_memory_stats2 s;
  memset(&s, 0xab, sizeof s);
  s.struct_size = offsetof(torc_memory_stats2, reserved);
  assert_ok(torc_device_memory_stats2(sim, &s));
  assert_int_equal(s.caching, TORC_CACHING_BLOCKS);
  assert_int_equal(s.allocated, 0);
  size_t untouched;
  memset(&untouched, 0xab, sizeof untouched);
  assert_memory_equal(&s.reserved, &untouched, sizeof untouched);
  s.struct_size = 1;
  assert_int_equal(torc_device_memory_stats2(sim, &s), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "struct_size");
}

/* ---- the steady state of a training loop ---- */

/* A few SGD steps of a small MLP on `dev`, written with ops as a user
 * would. */
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

static torc_tensor *randn_on(torc_device dev, int64_t r, int64_t c) {
  torc_tensor *t = torc_randn(TORC_SHAPE(r, c), TORC_F32, TORC_CPU, NULL);
  assert_torc(t);
  torc_tensor *d = torc_to(t, dev);
  torc_release(t);
  assert_torc(d);
  return d;
}

static void test_steady_state_takes_nothing(void **state) {
  (void)state;
  torc_device sim = fresh_sim();
  torc_manual_seed(1);
  /* a large-pool input (2.4 MiB) and small-pool weights and activations */
  torc_tensor *x = randn_on(sim, 2400, 256);
  torc_tensor *w1 = randn_on(sim, 256, 128);
  torc_tensor *w2 = randn_on(sim, 128, 10);
  assert_ok(torc_set_requires_grad(w1, 1));
  assert_ok(torc_set_requires_grad(w2, 1));
  steps(w1, w2, x, 1); /* the first step takes its segments */
  assert_ok(torc_synchronize(sim));
  torc_memory_stats2 a = stats(sim);
  assert_true(a.segment_allocs > 0);
  steps(w1, w2, x, 5);
  assert_ok(torc_synchronize(sim));
  torc_memory_stats2 b = stats(sim);
  assert_int_equal(b.segment_allocs, a.segment_allocs);
  assert_int_equal(b.segment_frees, a.segment_frees);
  assert_int_equal(b.reserved, a.reserved);
  assert_int_equal(b.peak_reserved, a.peak_reserved);
  assert_int_equal(b.device_free, a.device_free); /* sim's own count */
  assert_true(b.alloc_count > a.alloc_count);
  assert_true(b.cache_hits >= a.cache_hits + (b.alloc_count - a.alloc_count));
  assert_int_equal(b.allocated, a.allocated); /* x, w1, w2 */
  torc_release(x);
  torc_release(w1);
  torc_release(w2);
}

/* ---- split and merge ---- */

static void check_filled(torc_tensor *t, int value, const char *what) {
  int64_t n = torc_numel(t);
  uint8_t *v = malloc((size_t)n);
  assert_non_null(v);
  assert_ok(torc_to_host(t, v, (size_t)n));
  for (int64_t i = 0; i < n; i++)
    if (v[i] != (uint8_t)value) {
      print_error("%s: byte %lld of %lld is %d, not %d: another block "
                  "overlaps it\n",
                  what, (long long)i, (long long)n, v[i], value);
      fail();
    }
  free(v);
}

static void test_split_and_merge_never_overlap(void **state) {
  (void)state;
  torc_device sim = fresh_sim();
  enum { N = 24 };
  torc_tensor *t[2 * N] = {0};
  int value[2 * N];
  /* small blocks of odd sizes, carved from one 2 MiB segment */
  for (int i = 0; i < N; i++) {
    size_t n = 1000 + (size_t)i * 3001;
    value[i] = i + 1;
    t[i] = torc_full(TORC_SHAPE((int64_t)n), (double)value[i], TORC_U8, sim);
    assert_torc(t[i]);
  }
  uint64_t segs = stats(sim).segment_allocs;
  assert_int_equal(stats(sim).reserved, 2 * MIB);
  /* every other one freed; new ones of other sizes fill the holes */
  for (int i = 0; i < N; i += 2) {
    torc_release(t[i]);
    t[i] = NULL;
  }
  for (int i = 0; i < N; i++) {
    size_t n = 700 + (size_t)i * 1999;
    value[N + i] = 100 + i;
    t[N + i] =
        torc_full(TORC_SHAPE((int64_t)n), (double)value[N + i], TORC_U8, sim);
    assert_torc(t[N + i]);
  }
  assert_int_equal(stats(sim).segment_allocs, segs); /* all in the holes */
  char what[32];
  for (int i = 0; i < 2 * N; i++)
    if (t[i]) {
      snprintf(what, sizeof what, "block %d", i);
      check_filled(t[i], value[i], what);
    }
  for (int i = 0; i < 2 * N; i++)
    torc_release(t[i]);
  /* everything merged back: the segment holds two 1 MiB blocks again */
  torc_memory_stats2 s = stats(sim);
  assert_int_equal(s.allocated, 0);
  torc_tensor *a = torc_full(TORC_SHAPE(1 << 20), 7, TORC_U8, sim);
  torc_tensor *b = torc_full(TORC_SHAPE(1 << 20), 9, TORC_U8, sim);
  assert_torc(a);
  assert_torc(b);
  assert_int_equal(stats(sim).segment_allocs, segs);
  assert_int_equal(stats(sim).reserved, 2 * MIB);
  check_filled(a, 7, "first half");
  check_filled(b, 9, "second half");
  torc_release(a);
  torc_release(b);
}

/* ---- empty_cache ---- */

static void test_empty_cache_returns_free_segments(void **state) {
  (void)state;
  torc_device sim = fresh_sim();
  torc_tensor *keep = bytes_on(sim, 4 * KIB);   /* a small segment */
  torc_tensor *gone = bytes_on(sim, 3 * MIB);   /* a large one */
  torc_tensor *also = bytes_on(sim, 18 * MIB);  /* fits no free block */
  torc_release(gone);
  torc_release(also);
  torc_memory_stats2 s = stats(sim);
  assert_int_equal(s.reserved, 40 * MIB);
  assert_ok(torc_device_empty_cache(sim));
  s = stats(sim);
  assert_int_equal(s.reserved, 2 * MIB); /* the segment with a live block */
  assert_int_equal(s.pool_reserved[1].current, 0);
  assert_int_equal(s.device_free, s.device_total - 2 * MIB);
  torc_release(keep);
  assert_ok(torc_device_empty_cache(sim));
  assert_int_equal(stats(sim).reserved, 0);
}

/* ---- out of memory (a 64 MiB sim) ---- */

static void test_oom_empties_the_cache_first(void **state) {
  (void)state;
  torc_device sim = fresh_sim();
  torc_tensor *a = bytes_on(sim, 40 * MIB);
  torc_release(a); /* cached */
  uint64_t frees = stats(sim).segment_frees;
  torc_tensor *b = bytes_on(sim, 50 * MIB); /* fits once the cache is out */
  assert_int_equal(stats(sim).segment_frees, frees + 1);
  assert_int_equal(stats(sim).oom_count, 0);
  torc_release(b);
}

static void test_oom_message(void **state) {
  (void)state;
  torc_device sim = fresh_sim();
  /* four 5 MiB blocks fill a 20 MiB segment; two of them freed leave 10
   * MiB free in two holes; 40 MiB more of its own leaves 4 MiB free */
  torc_tensor *q[4];
  for (int i = 0; i < 4; i++)
    q[i] = bytes_on(sim, 5 * MIB);
  torc_tensor *big = bytes_on(sim, 40 * MIB);
  torc_release(q[0]);
  torc_release(q[2]);
  assert_int_equal(stats(sim).reserved, 60 * MIB);
  /* 8 MiB fits neither hole nor the device */
  torc_clear_error();
  assert_null(torc_empty(TORC_SHAPE(8 << 20), TORC_U8, sim));
  assert_error(TORC_ERR_OOM, "sim:0");
  const char *m = torc_last_error();
  assert_contains(m, "cannot allocate 8388608 bytes (8.0 MiB)");
  assert_contains(m, "52428800 bytes (50.0 MiB) allocated");
  assert_contains(m, "10485760 bytes (10.0 MiB) reserved but free");
  assert_contains(m, "the device has 64.0 MiB in total");
  assert_contains(m, "fragmentation");
  assert_contains(m, "emptying the cache (done already) cannot return it");
  assert_contains(m, "lower the batch size");
  assert_contains(m, "[plugin.sim] memory"); /* the device's own words */
  assert_int_equal(stats(sim).oom_count, 1);
  /* with nothing free in the cache, the advice is a smaller batch */
  torc_release(q[1]);
  torc_release(q[3]);
  torc_tensor *r = bytes_on(sim, 20 * MIB); /* the merged segment, whole */
  assert_int_equal(stats(sim).reserved, 60 * MIB);
  torc_clear_error();
  assert_null(torc_empty(TORC_SHAPE(8 << 20), TORC_U8, sim));
  m = torc_last_error();
  assert_contains(m, "0 bytes (0 B) reserved but free");
  assert_contains(m, "did not make room: lower the batch size");
  /* a request larger than the device says so */
  torc_clear_error();
  assert_null(torc_empty(TORC_SHAPE(100 << 20), TORC_U8, sim));
  assert_contains(torc_last_error(), "larger than the device");
  assert_int_equal(stats(sim).oom_count, 3);
  char *text = torc_memory_summary(sim);
  assert_non_null(text);
  assert_contains(text, "out-of-memory errors: 3");
  free(text);
  torc_release(r);
  torc_release(big);
}

/* ---- a plugin device without the flag (an older table) ---- */

static void test_device_without_the_flag_is_unchanged(void **state) {
  (void)state;
  const char *dir = getenv("TORC_TEST_PLUGIN_DIR");
  if (dir == NULL) {
    print_message("TORC_TEST_PLUGIN_DIR is unset (run through make check): "
                  "skipping the old-table check\n");
    skip();
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/goodkeys.so", dir);
  if (torc_plugin_load(path, NULL) != TORC_OK) {
    print_error("loading %s: %s\n", path, torc_last_error());
    fail();
  }
  torc_device dev;
  assert_ok(torc_device_parse("testdev", &dev));
  torc_memory_stats2 s0 = stats(dev);
  assert_int_equal(s0.caching, TORC_CACHING_NONE);
  /* every storage is one call of the device, of exactly its size */
  const float v[3] = {1, 2, 3};
  torc_tensor *a = torc_from_host(v, TORC_SHAPE(3), TORC_F32, dev);
  torc_tensor *b = torc_from_host(v, TORC_SHAPE(3), TORC_F32, dev);
  assert_torc(a);
  assert_torc(b);
  torc_memory_stats2 s = stats(dev);
  assert_int_equal(s.segment_allocs, s0.segment_allocs + 2);
  assert_int_equal(s.allocated, s0.allocated + 24);
  assert_int_equal(s.reserved, s.allocated);
  assert_int_equal(s.cache_hits, 0);
  assert_int_equal(s.device_total, 0); /* it reports none */
  torc_release(a);
  s = stats(dev);
  assert_int_equal(s.segment_frees, s0.segment_frees + 1);
  assert_int_equal(s.reserved, s.allocated);
  float back[3];
  assert_ok(torc_to_host(b, back, sizeof back));
  assert_true(back[0] == 1 && back[1] == 2 && back[2] == 3);
  torc_release(b);
  torc_memory_stats old;
  assert_ok(torc_device_memory_stats(dev, &old));
  assert_int_equal(old.caching, 0);
  assert_int_equal(old.os_allocs, 0);
  char *text = torc_memory_summary(dev);
  assert_non_null(text);
  assert_contains(text, "caching: none");
  free(text);
}

/* ---- the cpu's size-class cache ---- */

/* A storage the cpu refuses: the message gives the request, what torc
 * holds, that the cache was given back first, and the fix. */
static void test_cpu_oom_message(void **state) {
  (void)state;
  torc_tensor *w = torc_empty(TORC_SHAPE(1 << 18), TORC_F32, TORC_CPU);
  assert_torc(w);
  torc_release(w); /* 1 MiB in the cpu's cache */
  const char *m = NULL;
  /* the attempts before the storage's are the tensor's header */
  for (int n = 1; n <= 4 && m == NULL; n++) {
    torc_clear_error();
    torc_test_fail_alloc(n, 1);
    torc_tensor *t = torc_empty(TORC_SHAPE(1 << 18), TORC_F32, TORC_CPU);
    torc_test_fail_alloc(0, 0);
    assert_null(t);
    if (strstr(torc_last_error(), "cannot allocate") != NULL)
      m = torc_last_error();
  }
  assert_non_null(m);
  assert_contains(m, "out of memory on cpu:0");
  assert_contains(m, "cannot allocate 1048576 bytes (1.0 MiB)");
  if (stats(TORC_CPU).caching == TORC_CACHING_NONE) /* a sanitizer build */
    assert_contains(m, "held no cached memory to give back");
  else
    assert_contains(m, "gave its 1048576 cached bytes (1.0 MiB) back");
  assert_contains(m, "lower the batch size");
  assert_contains(m, "(an injected failure)"); /* the device's own words */
}

int main(void) {
  const struct CMUnitTest old_table[] = {
      cmocka_unit_test(test_device_without_the_flag_is_unchanged),
      cmocka_unit_test(test_cpu_oom_message),
  };
  const struct CMUnitTest blocks[] = {
      cmocka_unit_test(test_hand_computed_figures),
      cmocka_unit_test(test_summary_and_old_stats),
      cmocka_unit_test(test_steady_state_takes_nothing),
      cmocka_unit_test(test_split_and_merge_never_overlap),
      cmocka_unit_test(test_empty_cache_returns_free_segments),
  };
  const struct CMUnitTest small[] = {
      cmocka_unit_test(test_oom_empties_the_cache_first),
      cmocka_unit_test(test_oom_message),
  };
  int rc = cmocka_run_group_tests_name("old_table", old_table, NULL, teardown);
  /* Caching off (TORC_NO_CACHE, a sanitizer build): no blocks to test. */
  const char *no_cache = getenv("TORC_NO_CACHE");
#ifdef TORC_SANITIZE
  no_cache = "1";
#endif
  if (no_cache && *no_cache && strcmp(no_cache, "0") != 0) {
    printf("caching is off (TORC_NO_CACHE or a sanitizer build): the block "
           "allocator cannot be tested\n");
    return rc ? rc : TEST_SKIP_STATUS;
  }
  rc |= cmocka_run_group_tests_name("blocks", blocks, setup_default, teardown);
  rc |= cmocka_run_group_tests_name("oom", small, setup_64m, teardown);
  return rc;
}
