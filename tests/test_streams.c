/* tests/test_streams.c — streams and events (torc/stream.h) on sim with 2
 * devices and on the cpu: the current stream per thread, kernels on a side
 * stream, waits that order two streams, record_stream holding a block back
 * from reuse, asynchronous copies into pinned memory and between devices
 * without the host, overlap measured on sim's simulated clock (two
 * streams; the loader's copy stream one batch ahead of the step), and a
 * plugin device without the stream slots (decline's decldev). */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>

#include "testutil.h"
#include "loader_testutil.h"
#include "sim_testutil.h"
#include "torc/plugin_api.h"

/* Loads ref, then sim with 2 devices and the given latencies (in
 * microseconds): real sleeps before kernels, simulated kernel and copy
 * durations. */
static int load(long latency, long kernel_lat, long copy_lat) {
  static char v[3][32];
  static const char *const k[] = {"devices", "latency_us",
                                  "kernel_latency_us", "copy_latency_us"};
  snprintf(v[0], sizeof v[0], "%ld", latency);
  snprintf(v[1], sizeof v[1], "%ld", kernel_lat);
  snprintf(v[2], sizeof v[2], "%ld", copy_lat);
  const char *vals[] = {"2", v[0], v[1], v[2]};
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.keys = k;
  opts.values = vals;
  opts.n_keys = 4;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("sim", &opts) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static int setup_plain(void **state) {
  (void)state;
  return load(0, 0, 0);
}
/* 100 ms before each kernel: work still runs while the host goes on. */
static int setup_slow(void **state) {
  (void)state;
  return load(100000, 0, 0);
}
/* Kernels and copies of 1000 simulated microseconds. */
static int setup_clock(void **state) {
  (void)state;
  return load(0, 1000, 1000);
}

static int teardown(void **state) {
  (void)state;
  torc_shutdown();
  return 0;
}

static torc_tensor *filled(torc_device dev, int64_t n, float v) {
  torc_tensor *t = torc_full(TORC_SHAPE(n), (double)v, TORC_F32, dev);
  assert_torc(t);
  return t;
}

/* Asserts `call` fails with `status` and a message containing `needle`. */
#define assert_fails(call, status, needle)                                     \
  do {                                                                         \
    assert_int_equal((call), (status));                                        \
    assert_contains(torc_last_error(), (needle));                              \
  } while (0)

/* The device handle of t's first element (block identity). */
static uintptr_t addr_of(const torc_tensor *t) {
  torc_ktensor kt;
  assert_ok(torc_ktensor_of(t, &kt));
  return (uintptr_t)kt.data + (uintptr_t)kt.offset * 4u;
}

/* ---- the current stream, per thread and per device ---- */

typedef struct thread_view {
  torc_stream *main_stream, *seen, *own, *after;
} thread_view;

static void *other_thread(void *arg) {
  thread_view *v = arg;
  torc_device s0 = sim_dev(0);
  v->seen = torc_current_stream(s0);
  v->own = torc_stream_new(s0);
  if (v->own && torc_set_current_stream(v->own) == TORC_OK)
    v->after = torc_current_stream(s0);
  torc_set_current_stream(torc_stream_default(s0));
  return NULL;
}

/* A thread whose current stream another thread frees is back on the
 * default stream. */
typedef struct freed_view {
  pthread_barrier_t set, freed;
  torc_stream *s, *after;
} freed_view;

static void *holder_thread(void *arg) {
  freed_view *v = arg;
  torc_set_current_stream(v->s);
  pthread_barrier_wait(&v->set);
  pthread_barrier_wait(&v->freed);
  v->after = torc_current_stream(sim_dev(0));
  return NULL;
}

static void test_current_stream_per_thread(void **state) {
  (void)state;
  torc_device s0 = sim_dev(0), s1 = sim_dev(1);
  torc_stream *d0 = torc_stream_default(s0), *d1 = torc_stream_default(s1);
  assert_non_null(d0);
  assert_true(d0 != d1);
  assert_ptr_equal(torc_current_stream(s0), d0);
  torc_stream *s = torc_stream_new(s0);
  assert_torc(s);
  assert_true(torc_device_eq(torc_stream_device(s), s0));
  assert_ok(torc_set_current_stream(s));
  assert_ptr_equal(torc_current_stream(s0), s);
  assert_ptr_equal(torc_current_stream(s1), d1); /* per device */

  thread_view v = {.main_stream = s};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_thread, &v), 0);
  pthread_join(th, NULL);
  assert_ptr_equal(v.seen, d0); /* a new thread starts on the default */
  assert_non_null(v.own);
  assert_ptr_equal(v.after, v.own);
  assert_ptr_equal(torc_current_stream(s0), s); /* its choice is its own */
  torc_stream_free(v.own);

  /* Freeing the current stream puts the thread back on the default. */
  torc_stream_free(s);
  assert_ptr_equal(torc_current_stream(s0), d0);

  /* So does another thread's free. */
  freed_view f = {.s = torc_stream_new(s0)};
  assert_torc(f.s);
  pthread_barrier_init(&f.set, NULL, 2);
  pthread_barrier_init(&f.freed, NULL, 2);
  assert_int_equal(pthread_create(&th, NULL, holder_thread, &f), 0);
  pthread_barrier_wait(&f.set);
  torc_stream_free(f.s);
  pthread_barrier_wait(&f.freed);
  pthread_join(th, NULL);
  assert_ptr_equal(f.after, d0);
  pthread_barrier_destroy(&f.set);
  pthread_barrier_destroy(&f.freed);
}

/* ---- side streams run in parallel: the simulated clock ---- */

static uint64_t sim_time(int index) { return sim_counters(index, 0).sim_time_us; }

static void test_two_streams_overlap_on_the_clock(void **state) {
  (void)state;
  torc_device s0 = sim_dev(0);
  torc_tensor *x = filled(s0, 256, 1.0f);
  torc_stream *side = torc_stream_new(s0);
  assert_torc(side);
  assert_ok(torc_synchronize(s0));
  sim_counters(0, 1);

  /* Two kernels of 1000 us on one stream: 2000 us. */
  torc_tensor *a = torc_neg(x), *b = torc_neg(x);
  assert_torc(a);
  assert_torc(b);
  assert_ok(torc_synchronize(s0));
  assert_int_equal(sim_time(0), 2000);
  sim_counters(0, 1);

  /* One on the default stream and one on the side: 1000 us. */
  torc_tensor *c = torc_neg(x);
  assert_ok(torc_set_current_stream(side));
  torc_tensor *d = torc_neg(x);
  assert_ok(torc_tensor_record_stream(x, side));
  assert_ok(torc_set_current_stream(torc_stream_default(s0)));
  assert_torc(c);
  assert_torc(d);
  assert_ok(torc_synchronize(s0));
  torc_sim_counters k = sim_counters(0, 1);
  assert_int_equal(k.kernels, 2);
  assert_int_equal(k.sim_time_us, 1000);

  /* Two copies of 1000 us into pinned memory on two streams: 1000 us;
   * the second stream waiting on the first's event: 2000 us. */
  torc_tensor *p1 = torc_empty_pinned(TORC_SHAPE(256), TORC_F32, s0);
  torc_tensor *p2 = torc_empty_pinned(TORC_SHAPE(256), TORC_F32, s0);
  assert_torc(p1);
  assert_torc(p2);
  torc_event *e1 = NULL, *e2 = NULL;
  assert_ok(torc_to_host_async(c, p1, &e1));
  assert_ok(torc_set_current_stream(side));
  assert_ok(torc_to_host_async(d, p2, &e2));
  assert_ok(torc_event_synchronize(e1));
  assert_ok(torc_event_synchronize(e2));
  assert_int_equal(sim_time(0), 1000);
  assert_ok(torc_synchronize(s0));
  sim_counters(0, 1);
  torc_event_free(e2);
  assert_ok(torc_set_current_stream(torc_stream_default(s0)));
  torc_event_free(e1);
  assert_ok(torc_to_host_async(c, p1, &e1));
  assert_ok(torc_set_current_stream(side));
  assert_ok(torc_stream_wait_event(side, e1));
  assert_ok(torc_to_host_async(d, p2, &e2));
  assert_ok(torc_event_synchronize(e2));
  assert_int_equal(sim_time(0), 2000);
  assert_ok(torc_set_current_stream(torc_stream_default(s0)));
  torc_event_free(e1);
  torc_event_free(e2);

  torc_release(p1), torc_release(p2);
  torc_release(a), torc_release(b), torc_release(c), torc_release(d);
  torc_release(x);
  torc_stream_free(side);
}

/* ---- a wait on an event orders two streams ---- */

static void test_wait_event_orders_two_streams(void **state) {
  (void)state;
  torc_device s0 = sim_dev(0);
  torc_tensor *x = filled(s0, 64, 21.0f);
  torc_tensor *pin = torc_empty_pinned(TORC_SHAPE(64), TORC_F32, s0);
  assert_torc(pin);
  torc_stream *sa = torc_stream_new(s0), *sb = torc_stream_new(s0);
  assert_torc(sa);
  assert_torc(sb);
  assert_ok(torc_synchronize(s0));
  uint64_t reads = sim_counters(0, 0).blocking_reads;

  /* A writes y behind a 100 ms kernel; B copies y out once A's event
   * completed. Without the wait, B's copy (no latency) would read y
   * before the kernel wrote it. */
  assert_ok(torc_set_current_stream(sa));
  torc_tensor *y = torc_add(x, x);
  assert_torc(y);
  assert_ok(torc_tensor_record_stream(x, sa));
  torc_event *written = torc_event_new(s0);
  assert_torc(written);
  assert_ok(torc_event_record(written, NULL)); /* A: the current stream */
  assert_ok(torc_set_current_stream(sb));
  assert_ok(torc_stream_wait_event(sb, written));
  torc_event *done = NULL;
  assert_ok(torc_to_host_async(y, pin, &done));
  assert_non_null(done);
  assert_ok(torc_event_synchronize(done));
  const float *h = torc_data(pin);
  for (int i = 0; i < 64; i++)
    assert_true(h[i] == 42.0f);
  assert_int_equal(sim_counters(0, 0).blocking_reads, reads);
  assert_int_equal(torc_event_query(done), 1);

  /* wait_stream: the same through a stream. */
  assert_ok(torc_set_current_stream(sa));
  torc_tensor *z = torc_add(y, x);
  assert_torc(z);
  assert_ok(torc_stream_wait_stream(sb, sa));
  assert_ok(torc_set_current_stream(sb));
  torc_event_free(done);
  assert_ok(torc_to_host_async(z, pin, &done));
  assert_ok(torc_event_synchronize(done));
  for (int i = 0; i < 64; i++)
    assert_true(h[i] == 63.0f);
  assert_ok(torc_tensor_record_stream(y, sb));
  assert_ok(torc_tensor_record_stream(z, sb));

  assert_ok(torc_set_current_stream(torc_stream_default(s0)));
  torc_event_free(done);
  torc_event_free(written);
  torc_release(z), torc_release(y), torc_release(x), torc_release(pin);
  torc_stream_free(sa);
  torc_stream_free(sb);
}

/* ---- record_stream ---- */

static void test_record_stream_holds_a_block_back(void **state) {
  (void)state;
  torc_device s0 = sim_dev(0);
  torc_memory_stats2 ms = {.struct_size = sizeof ms};
  assert_ok(torc_device_memory_stats2(s0, &ms));
  if (ms.caching != TORC_CACHING_BLOCKS) {
    printf("caching is off (TORC_NO_CACHE or a sanitizer build): no blocks "
           "to hold back; skipping\n");
    skip();
  }
  assert_ok(torc_synchronize(s0));
  assert_ok(torc_device_empty_cache(s0));
  torc_stream *side = torc_stream_new(s0);
  assert_torc(side);

  /* Without record_stream a freed block is reused at once on its stream. */
  torc_tensor *t = filled(s0, 256, 1.0f);
  uintptr_t at = addr_of(t);
  torc_release(t);
  t = torc_empty(TORC_SHAPE(256), TORC_F32, s0);
  assert_torc(t);
  assert_true(addr_of(t) == at);

  /* Used on the side stream by a 100 ms kernel and freed meanwhile: the
   * next allocation (default stream) must not get the block... */
  assert_ok(torc_fill_(t, 2.0));
  assert_ok(torc_stream_wait_stream(side, torc_stream_default(s0)));
  assert_ok(torc_set_current_stream(side));
  torc_tensor *u = torc_mul(t, t);
  assert_torc(u);
  assert_ok(torc_tensor_record_stream(t, side));
  assert_ok(torc_set_current_stream(torc_stream_default(s0)));
  torc_release(t);
  torc_tensor *w = torc_empty(TORC_SHAPE(256), TORC_F32, s0);
  assert_torc(w);
  assert_true(addr_of(w) != at);
  /* ...and once the side stream is past the free, it does. */
  assert_ok(torc_stream_synchronize(side));
  torc_tensor *w2 = torc_empty(TORC_SHAPE(256), TORC_F32, s0);
  assert_torc(w2);
  assert_true(addr_of(w2) == at);

  /* Blocks allocated on the side stream serve it only. */
  assert_ok(torc_set_current_stream(side));
  torc_tensor *v = torc_empty(TORC_SHAPE(256), TORC_F32, s0);
  assert_torc(v);
  uintptr_t vat = addr_of(v);
  torc_release(v);
  assert_ok(torc_set_current_stream(torc_stream_default(s0)));
  torc_tensor *q = torc_empty(TORC_SHAPE(256), TORC_F32, s0);
  assert_torc(q);
  assert_true(addr_of(q) != vat);

  double val;
  torc_tensor *one = torc_sum(u, NULL, 0, 0);
  assert_torc(one);
  assert_ok(torc_item(one, &val)); /* u = t * t = 4 each, after the wait */
  assert_true(val == 4.0 * 256);
  torc_release(one);
  torc_release(q), torc_release(w), torc_release(w2), torc_release(u);
  torc_stream_free(side);
}

/* ---- copies ---- */

static void test_async_copy_to_pinned(void **state) {
  (void)state;
  torc_device s0 = sim_dev(0);
  float v[6] = {1, 2, 3, 4, 5, 6};
  torc_tensor *x = torc_from_host(v, TORC_SHAPE(2, 3), TORC_F32, s0);
  assert_torc(x);
  torc_tensor *p = torc_empty_pinned(TORC_SHAPE(6), TORC_F32, s0);
  assert_torc(p);
  assert_ok(torc_synchronize(s0));
  sim_counters(0, 1);
  torc_event *done = NULL;
  assert_ok(torc_to_host_async(x, p, &done));
  assert_ok(torc_event_synchronize(done));
  torc_sim_counters k = sim_counters(0, 0);
  assert_int_equal(k.blocking_reads, 0);
  assert_int_equal(k.async_reads, 1);
  assert_memory_equal(torc_data(p), v, sizeof v);
  torc_event_free(done);

  /* Misuse: plain memory, a wrong size, a wrong dtype. */
  torc_tensor *plain = torc_empty(TORC_SHAPE(6), TORC_F32, TORC_CPU);
  assert_fails(torc_to_host_async(x, plain, &done), TORC_ERR_INVALID,
               "torc_empty_pinned");
  assert_null(done);
  torc_tensor *small = torc_empty_pinned(TORC_SHAPE(5), TORC_F32, s0);
  assert_fails(torc_to_host_async(x, small, NULL), TORC_ERR_INVALID,
               "6 elements");
  torc_tensor *ints = torc_empty_pinned(TORC_SHAPE(6), TORC_I32, s0);
  assert_int_equal(torc_to_host_async(x, ints, NULL), TORC_ERR_DTYPE);
  torc_release(plain), torc_release(small), torc_release(ints);
  torc_release(p), torc_release(x);
}

static void test_device_to_device_without_the_host(void **state) {
  (void)state;
  torc_device s0 = sim_dev(0), s1 = sim_dev(1);
  float v[5] = {1.5f, -2, 3, 0, 8};
  torc_tensor *x = torc_from_host(v, TORC_SHAPE(5), TORC_F32, s0);
  assert_torc(x);
  assert_ok(torc_synchronize(s0));
  assert_ok(torc_synchronize(s1));
  sim_counters(0, 1);
  sim_counters(1, 1);
  torc_tensor *y = torc_to(x, s1);
  assert_torc(y);
  torc_tensor *y2 = torc_add(y, y); /* on sim:1, after the copy */
  assert_torc(y2);
  torc_sim_counters k0 = sim_counters(0, 0), k1 = sim_counters(1, 0);
  assert_int_equal(k0.blocking_reads, 0);
  assert_int_equal(k0.copies_d2d, 1);
  assert_int_equal(k1.blocking_reads, 0);
  assert_int_equal(k1.copies_staged + k1.copies_pinned, 0);
  float back[5];
  assert_ok(torc_to_host(y2, back, sizeof back));
  for (int i = 0; i < 5; i++)
    assert_true(back[i] == 2 * v[i]);
  torc_release(y2), torc_release(y), torc_release(x);
}

/* ---- the loader: batch k+1 moves while step k computes ---- */

static void test_loader_overlaps_copies_and_steps(void **state) {
  (void)state;
  if (torc_data_source_find("ts") == NULL)
    assert_ok(torc_data_source_register(&ts_type));
  torc_device s0 = sim_dev(0);
  torc_dataset *ds = ts_open_kv("n=16 h=4 w=4");
  assert_non_null(ds);
  torc_loader_opts o = {0};
  o.batch_size = 2;
  o.device = s0;
  torc_loader *ld = torc_loader_new(ds, &o);
  assert_non_null(ld);
  assert_ok(torc_synchronize(s0));
  sim_counters(0, 1);
  /* Each batch: 2 copies (input, target) of 1000 us on the copy stream;
   * each step: 2 kernels of 1000 us on the default stream. */
  torc_batch b;
  int64_t steps = 0;
  while (torc_loader_next(ld, &b) == 1) {
    torc_tensor *y = torc_neg(b.input);
    assert_torc(y);
    torc_tensor *z = torc_neg(y);
    assert_torc(z);
    int64_t t[2];
    assert_ok(torc_to_host(b.target, t, sizeof t));
    assert_int_equal(t[0], 2 * steps);
    assert_int_equal(t[1], 2 * steps + 1);
    float v[32]; /* [2, 1, 4, 4]: sample i's element k is i * 1000 + k */
    assert_ok(torc_to_host(z, v, sizeof v));
    assert_true(v[0] == (float)(2 * steps * 1000));
    assert_true(v[17] == (float)((2 * steps + 1) * 1000 + 1));
    torc_release(z), torc_release(y);
    torc_batch_clear(&b);
    steps++;
  }
  assert_int_equal(steps, 8);
  assert_ok(torc_synchronize(s0));
  torc_sim_counters k = sim_counters(0, 0);
  /* In turn: 8 x (2000 + 2000) = 32000 us; overlapped, the copies of
   * batch 0 then 8 steps of 2000: 18000. */
  if (k.sim_time_us != 18000)
    print_error("8 steps took %llu simulated us (overlapped: 18000; in "
                "turn: 32000)\n",
                (unsigned long long)k.sim_time_us);
  assert_int_equal(k.sim_time_us, 18000);
  assert_int_equal(k.copies_pinned, 16);
  torc_loader_free(ld);
  torc_dataset_close(ds);
}

/* The loader's pinned staging buffers come back from its pool once their
 * copies ran: a few host_allocs for the whole epoch, not two per batch. */
static void test_loader_reuses_staging_buffers(void **state) {
  (void)state;
  if (torc_data_source_find("ts") == NULL)
    assert_ok(torc_data_source_register(&ts_type));
  torc_device s0 = sim_dev(0);
  torc_dataset *ds = ts_open_kv("n=16 h=4 w=4");
  assert_non_null(ds);
  torc_loader_opts o = {0};
  o.batch_size = 2;
  o.device = s0;
  torc_loader *ld = torc_loader_new(ds, &o);
  assert_non_null(ld);
  assert_ok(torc_synchronize(s0));
  sim_counters(0, 1);
  torc_batch b;
  int64_t steps = 0;
  while (torc_loader_next(ld, &b) == 1) {
    assert_true(torc_device_eq(torc_device_of(b.input), s0));
    torc_tensor *y = torc_neg(b.input);
    assert_torc(y);
    assert_ok(torc_synchronize(s0)); /* every copy queued so far ran */
    torc_release(y);
    torc_batch_clear(&b);
    steps++;
  }
  assert_int_equal(steps, 8);
  torc_sim_counters k = sim_counters(0, 0);
  /* Batches 0 and 1 may take fresh buffers (input and target, maybe a
   * mask); every later one reuses them. Without the pool: 2 per batch. */
  if (k.host_allocs > 6)
    print_error("%llu pinned allocations for 8 batches\n",
                (unsigned long long)k.host_allocs);
  assert_true(k.host_allocs >= 2 && k.host_allocs <= 6);
  torc_loader_free(ld);
  torc_dataset_close(ds);
}

/* ---- errors a user can make ---- */

static void test_errors_name_the_fix(void **state) {
  (void)state;
  torc_device s0 = sim_dev(0), s1 = sim_dev(1);
  torc_event *e1 = torc_event_new(s1);
  assert_torc(e1);
  torc_stream *st0 = torc_stream_new(s0);
  assert_torc(st0);
  assert_fails(torc_event_record(e1, st0), TORC_ERR_DEVICE, "belongs to sim:1");
  assert_contains(torc_last_error(), "stream");
  /* Waiting on another device's event of the same type is fine. */
  assert_ok(torc_event_record(e1, torc_stream_default(s1)));
  assert_ok(torc_stream_wait_event(st0, e1));
  assert_ok(torc_stream_synchronize(st0));

  torc_tensor *t = filled(s1, 4, 1.0f);
  assert_fails(torc_tensor_record_stream(t, st0), TORC_ERR_DEVICE,
               "tensor is on sim:1");
  torc_release(t);

  torc_stream_free(st0);
  assert_fails(torc_set_current_stream(st0), TORC_ERR_INVALID, "was freed");
  assert_fails(torc_stream_synchronize(st0), TORC_ERR_INVALID,
               "torc_stream_new");
  assert_int_equal(torc_set_current_stream(NULL), TORC_ERR_INVALID);
  torc_event_free(e1);
}

static void test_cpu_has_no_side_streams(void **state) {
  (void)state;
  assert_null(torc_stream_new(TORC_CPU));
  assert_contains(torc_last_error(), "cpu has no streams");
  torc_stream *d = torc_stream_default(TORC_CPU);
  assert_non_null(d);
  assert_ok(torc_set_current_stream(d));
  assert_ptr_equal(torc_current_stream(TORC_CPU), d);
  torc_event *e = torc_event_new(TORC_CPU);
  assert_torc(e);
  assert_int_equal(torc_event_query(e), 1);
  assert_ok(torc_event_record(e, NULL));
  assert_int_equal(torc_event_query(e), 1);
  assert_ok(torc_event_synchronize(e));
  assert_ok(torc_stream_synchronize(d));
  assert_ok(torc_stream_wait_event(d, e));
  torc_tensor *x = filled(TORC_CPU, 3, 2.0f);
  assert_ok(torc_tensor_record_stream(x, d));
  torc_release(x);
  torc_event_free(e);
  /* An event of the cpu cannot order a sim stream. */
  torc_event *ce = torc_event_new(TORC_CPU);
  assert_fails(torc_stream_wait_event(torc_stream_default(sim_dev(0)), ce),
               TORC_ERR_DEVICE, "another type");
  torc_event_free(ce);
}

/* ---- a plugin device without the stream slots ---- */

static void test_device_without_stream_slots(void **state) {
  (void)state;
  const char *dir = getenv("TORC_TEST_PLUGIN_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/decline.so", dir ? dir : ".");
  if (torc_plugin_load(path, NULL) != TORC_OK) {
    print_error("loading decline: %s\n", torc_last_error());
    fail();
  }
  torc_device dd;
  assert_ok(torc_device_parse("decldev:0", &dd));
  torc_stream *s = torc_stream_new(dd); /* its one queue, renamed */
  assert_torc(s);
  assert_ok(torc_set_current_stream(s));
  float a[4] = {1, 2, 3, 4}, y[4];
  torc_tensor *ta = torc_from_host(a, TORC_SHAPE(4), TORC_F32, dd);
  assert_torc(ta);
  torc_tensor *sum = torc_add(ta, ta);
  assert_torc(sum);
  torc_event *e = torc_event_new(dd);
  assert_torc(e);
  assert_ok(torc_event_record(e, s));
  assert_int_equal(torc_event_query(e), 1); /* complete once recorded */
  assert_ok(torc_stream_wait_event(torc_stream_default(dd), e));
  assert_ok(torc_stream_wait_stream(torc_stream_default(dd), s));
  assert_ok(torc_tensor_record_stream(sum, s));
  torc_tensor *p = torc_empty_pinned(TORC_SHAPE(4), TORC_F32, dd);
  assert_torc(p);
  torc_event *done = NULL;
  assert_ok(torc_to_host_async(sum, p, &done)); /* a plain copy */
  assert_int_equal(torc_event_query(done), 1);
  assert_ok(torc_to_host(sum, y, sizeof y));
  for (int i = 0; i < 4; i++) {
    assert_true(y[i] == 2 * a[i]);
    assert_true(((float *)torc_data(p))[i] == 2 * a[i]);
  }
  assert_ok(torc_stream_synchronize(s));
  torc_event_free(done);
  torc_event_free(e);
  torc_release(p), torc_release(sum), torc_release(ta);
  torc_stream_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_current_stream_per_thread,
                                      setup_plain, teardown),
      cmocka_unit_test_setup_teardown(test_two_streams_overlap_on_the_clock,
                                      setup_clock, teardown),
      cmocka_unit_test_setup_teardown(test_wait_event_orders_two_streams,
                                      setup_slow, teardown),
      cmocka_unit_test_setup_teardown(test_record_stream_holds_a_block_back,
                                      setup_slow, teardown),
      cmocka_unit_test_setup_teardown(test_async_copy_to_pinned, setup_plain,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_device_to_device_without_the_host,
                                      setup_plain, teardown),
      cmocka_unit_test_setup_teardown(test_loader_overlaps_copies_and_steps,
                                      setup_clock, teardown),
      cmocka_unit_test_setup_teardown(test_loader_reuses_staging_buffers,
                                      setup_plain, teardown),
      cmocka_unit_test_setup_teardown(test_errors_name_the_fix, setup_plain,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_cpu_has_no_side_streams,
                                      setup_plain, teardown),
      cmocka_unit_test_setup_teardown(test_device_without_stream_slots,
                                      setup_plain, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
