/* tests/test_loader.c — the DataLoader (torc/data.h) over the test source
 * "ts" (tests/loader_testutil.h): batching, shuffling, workers (identical
 * batches for any count, in order, stopped mid-epoch, errors), resume,
 * sharding, collate (stack, pad + mask, custom), pinned staging on sim,
 * scopes and the loader's option errors. Datasets, transforms and [data.*]
 * sections are in test_loader_datasets.c.
 */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "loader_testutil.h"
#include "torc/config.h"
#include "torc/data.h"

static int is_permutation(const int64_t *v, int64_t n) {
  int seen[256] = {0};
  for (int64_t i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= n || seen[v[i]])
      return 0;
    seen[v[i]] = 1;
  }
  return 1;
}

/* ---- the loader ---- */

static void test_batches(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=10 h=1 w=2");
  torc_loader_opts o = {0};
  o.batch_size = 3;
  torc_loader *ld = torc_loader_new(ds, &o);
  assert_torc(ld);
  assert_int_equal(torc_loader_length(ld), 4);
  assert_ptr_equal(torc_loader_dataset(ld), ds);
  torc_batch b;
  int64_t sizes[4] = {3, 3, 3, 1};
  for (int i = 0; i < 4; i++) { /* next starts epoch 0 on its own */
    assert_int_equal(torc_loader_next(ld, &b), 1);
    assert_int_equal(b.index, i);
    assert_int_equal(b.size, sizes[i]);
    assert_int_equal(torc_ndim(b.input), 4);
    assert_int_equal(torc_size(b.input, 0), sizes[i]);
    assert_int_equal(torc_size(b.input, 3), 2);
    assert_int_equal(torc_ndim(b.target), 1);
    assert_null(b.mask);
    double ex[6], et[3];
    for (int j = 0; j < sizes[i]; j++) {
      int64_t s = i * 3 + j;
      ex[2 * j] = (double)(s * 1000);
      ex[2 * j + 1] = (double)(s * 1000 + 1);
      et[j] = (double)s;
    }
    test_assert_values(b.input, ex, 2 * sizes[i], 0);
    test_assert_values(b.target, et, sizes[i], 0);
    assert_int_equal(torc_dtype_of(b.target), TORC_I64);
    torc_batch_clear(&b);
    assert_null(b.input);
  }
  assert_int_equal(torc_loader_next(ld, &b), 0);
  assert_null(b.input);
  assert_int_equal(torc_loader_next(ld, &b), 0);
  torc_loader_stats st;
  assert_ok(torc_loader_get_stats(ld, &st));
  assert_int_equal(st.batches, 4);
  assert_int_equal(st.samples, 10);
  assert_true(st.wait_seconds >= 0);
  assert_int_equal(st.pinned, 0);
  /* A new epoch starts over. */
  assert_ok(torc_loader_start(ld, 1, 0));
  epoch_dump d;
  dump_epoch(ld, &d);
  assert_int_equal(d.n_samples, 10);
  for (int i = 0; i < 10; i++)
    assert_int_equal(d.order[i], i);
  free(d.bytes);
  torc_loader_free(ld);

  o.drop_last = 1;
  ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_length(ld), 3);
  dump_epoch(ld, &d);
  assert_int_equal(d.n_samples, 9);
  free(d.bytes);
  torc_loader_free(ld);

  /* Batch size 0 means 1; a batch of the whole set. */
  o.drop_last = 0;
  o.batch_size = 0;
  ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_length(ld), 10);
  torc_loader_free(ld);
  o.batch_size = 10;
  o.drop_last = 1;
  ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_length(ld), 1);
  torc_loader_free(ld);
  ld = torc_loader_new(ds, NULL);
  assert_int_equal(torc_loader_length(ld), 10);
  torc_loader_free(ld);
  torc_loader_free(NULL);

  /* limit: the first 4 samples only, shuffled among themselves; a limit
   * past the end is the whole set. */
  memset(&o, 0, sizeof o);
  o.batch_size = 3;
  o.limit = 4;
  o.shuffle = 1;
  o.seed = 7;
  ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_length(ld), 2);
  dump_epoch(ld, &d);
  assert_int_equal(d.n_samples, 4);
  int seen[4] = {0};
  for (int i = 0; i < 4; i++) {
    assert_true(d.order[i] >= 0 && d.order[i] < 4);
    seen[d.order[i]]++;
  }
  for (int i = 0; i < 4; i++)
    assert_int_equal(seen[i], 1);
  free(d.bytes);
  torc_loader_free(ld);
  o.limit = 1000;
  ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_length(ld), 4);
  torc_loader_free(ld);
  torc_dataset_close(ds);
}

static void test_shuffle(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=50 h=1 w=1");
  torc_loader_opts o = {0};
  o.batch_size = 7;
  o.shuffle = 1;
  o.seed = 42;
  torc_loader *a = torc_loader_new(ds, &o);
  torc_loader *b = torc_loader_new(ds, &o);
  o.seed = 43;
  torc_loader *c = torc_loader_new(ds, &o);
  epoch_dump a0, a1, b0, b1, c0, again;
  assert_ok(torc_loader_start(a, 0, 0));
  dump_epoch(a, &a0);
  assert_ok(torc_loader_start(a, 1, 0));
  dump_epoch(a, &a1);
  assert_ok(torc_loader_start(b, 1, 0)); /* other order of epochs */
  dump_epoch(b, &b1);
  assert_ok(torc_loader_start(b, 0, 0));
  dump_epoch(b, &b0);
  assert_ok(torc_loader_start(c, 0, 0));
  dump_epoch(c, &c0);
  assert_ok(torc_loader_start(a, 0, 0));
  dump_epoch(a, &again);
  assert_true(is_permutation(a0.order, 50));
  assert_true(is_permutation(a1.order, 50));
  assert_true(is_permutation(c0.order, 50));
  assert_same_epoch(&a0, &b0);
  assert_same_epoch(&a1, &b1);
  assert_same_epoch(&a0, &again);
  assert_true(memcmp(a0.order, a1.order, sizeof(int64_t) * 50) != 0);
  assert_true(memcmp(a0.order, c0.order, sizeof(int64_t) * 50) != 0);
  int sorted = 1;
  for (int i = 1; i < 50; i++)
    sorted &= a0.order[i] > a0.order[i - 1];
  assert_false(sorted);
  /* The input rows follow the targets. */
  float *v = (float *)a0.bytes;
  for (int i = 0; i < 50; i++)
    assert_true(v[i] == (float)(a0.order[i] * 1000));
  free(a0.bytes), free(a1.bytes), free(b0.bytes), free(b1.bytes);
  free(c0.bytes), free(again.bytes);
  torc_loader_free(a);
  torc_loader_free(b);
  torc_loader_free(c);
  torc_dataset_close(ds);
}

/* The headline: 0, 2 and 3 workers give the same batches bit for bit,
 * random transforms included, whatever order the workers finish in. */
static void test_workers_identical(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=37 c=2 h=5 w=5 delay_us=300");
  torc_transform *tf = torc_transform_parse(
      "random_crop(4, 1), random_hflip(0.5), scale(0.001)");
  assert_torc(tf);
  epoch_dump ref[2];
  for (int workers = 0; workers <= 3; workers++) {
    if (workers == 1)
      continue;
    torc_loader_opts o = {0};
    o.batch_size = 4;
    o.shuffle = 1;
    o.seed = 1234;
    o.workers = workers;
    o.prefetch = workers == 3 ? 5 : 0;
    o.transform = tf;
    torc_loader *ld = torc_loader_new(ds, &o);
    assert_torc(ld);
    for (int e = 0; e < 2; e++) {
      epoch_dump d;
      assert_ok(torc_loader_start(ld, e, 0));
      dump_epoch(ld, &d);
      assert_int_equal(d.n_batches, 10);
      assert_true(is_permutation(d.order, 37));
      if (workers == 0) {
        ref[e] = d;
      } else {
        assert_same_epoch(&ref[e], &d);
        free(d.bytes);
      }
    }
    assert_true(memcmp(ref[0].bytes, ref[1].bytes, ref[0].n_bytes) != 0);
    torc_loader_stats st;
    assert_ok(torc_loader_get_stats(ld, &st));
    assert_int_equal(st.batches, 20);
    assert_int_equal(st.samples, 74);
    assert_true(st.wait_seconds > 0);
    torc_loader_free(ld);
  }
  /* The augmented values are those of torc_transform_apply for the
   * sample's (seed, epoch, index). */
  torc_tensor *x, *y;
  int64_t idx = ref[1].order[5];
  assert_ok(torc_dataset_get(ds, idx, &x, &y));
  torc_tensor *ax = torc_transform_apply(tf, x, 1234, 1, idx);
  float got[32];
  assert_ok(torc_to_host(ax, got, sizeof got));
  assert_memory_equal(got, ref[1].bytes + 5 * sizeof got, sizeof got);
  torc_release(x), torc_release(y), torc_release(ax);
  free(ref[0].bytes);
  free(ref[1].bytes);
  torc_transform_free(tf);
  torc_dataset_close(ds);
}

/* Starting at batch k gives the batches k.. of a full epoch. */
static void test_resume(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=23 h=2 w=2");
  torc_transform *tf = torc_transform_parse("random_hflip(0.5)");
  for (int workers = 0; workers <= 2; workers += 2) {
    torc_loader_opts o = {0};
    o.batch_size = 5;
    o.shuffle = 1;
    o.seed = 9;
    o.workers = workers;
    o.transform = tf;
    torc_loader *ld = torc_loader_new(ds, &o);
    epoch_dump full, part;
    assert_ok(torc_loader_start(ld, 3, 0));
    dump_epoch(ld, &full);
    /* Mid-epoch restart, batches already queued are dropped. */
    torc_batch b;
    assert_ok(torc_loader_start(ld, 7, 0));
    assert_int_equal(torc_loader_next(ld, &b), 1);
    torc_batch_clear(&b);
    assert_ok(torc_loader_start(ld, 3, 2));
    memset(&part, 0, sizeof part);
    int64_t k = 2, at = 0;
    while (torc_loader_next(ld, &b) == 1) {
      assert_int_equal(b.index, k);
      int64_t *t = targets_of(&b);
      assert_memory_equal(t, full.order + k * 5,
                          sizeof(int64_t) * (size_t)b.size);
      size_t nb = (size_t)torc_numel(b.input) * sizeof(float);
      unsigned char *bytes = malloc(nb);
      assert_ok(torc_to_host(b.input, bytes, nb));
      assert_memory_equal(bytes, full.bytes + 2 * 5 * 16 + at, nb);
      at += (int64_t)nb;
      free(bytes);
      free(t);
      torc_batch_clear(&b);
      k++;
    }
    assert_int_equal(k, 5);
    /* The end of an epoch is a valid position; beyond is not. */
    assert_ok(torc_loader_start(ld, 3, 5));
    assert_int_equal(torc_loader_next(ld, &b), 0);
    assert_int_equal(torc_loader_start(ld, 3, 6), TORC_ERR_RANGE);
    assert_error(TORC_ERR_RANGE, "first_batch = 6 is out of range; an epoch "
                                 "has 5 batches");
    assert_int_equal(torc_loader_start(ld, -1, 0), TORC_ERR_INVALID);
    assert_error(TORC_ERR_INVALID, "epoch = -1 is negative");
    free(full.bytes);
    torc_loader_free(ld);
  }
  torc_transform_free(tf);
  torc_dataset_close(ds);
}

/* Two ranks split an epoch as PyTorch's DistributedSampler does: padded by
 * wrap-around to a multiple of the world size, every second sample. */
static void test_shard(void **state) {
  (void)state;
  for (int n = 10; n <= 11; n++) {
    char kv[32];
    snprintf(kv, sizeof kv, "n=%d h=1 w=1", n);
    torc_dataset *ds = ts_open_kv(kv);
    epoch_dump all, r[2];
    torc_loader_opts o = {0};
    o.batch_size = 2;
    o.shuffle = 1;
    o.seed = 3;
    torc_loader *ld = torc_loader_new(ds, &o);
    assert_ok(torc_loader_start(ld, 2, 0));
    dump_epoch(ld, &all);
    torc_loader_free(ld);
    o.world_size = 2;
    for (int rank = 0; rank < 2; rank++) {
      o.rank = rank;
      o.workers = rank; /* the count does not matter */
      ld = torc_loader_new(ds, &o);
      assert_torc(ld);
      assert_int_equal(torc_loader_length(ld), 3);
      assert_ok(torc_loader_start(ld, 2, 0));
      dump_epoch(ld, &r[rank]);
      assert_int_equal(r[rank].n_samples, (n + 1) / 2);
      for (int k = 0; k < r[rank].n_samples; k++)
        assert_int_equal(r[rank].order[k], all.order[(rank + 2 * k) % n]);
      torc_loader_free(ld);
    }
    /* Together the ranks cover the epoch; with 11, sample order[0] twice. */
    int count[16] = {0};
    for (int rank = 0; rank < 2; rank++)
      for (int k = 0; k < r[rank].n_samples; k++)
        count[r[rank].order[k]]++;
    for (int i = 0; i < n; i++)
      assert_int_equal(count[i], n == 11 && i == all.order[0] ? 2 : 1);
    free(all.bytes), free(r[0].bytes), free(r[1].bytes);
    torc_dataset_close(ds);
  }
}

/* Freeing a loader whose workers are busy neither hangs nor leaks. */
static void test_free_mid_epoch(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=60 h=8 w=8 delay_us=2000");
  torc_loader_opts o = {0};
  o.batch_size = 4;
  o.workers = 3;
  o.prefetch = 6;
  torc_loader *ld = torc_loader_new(ds, &o);
  torc_batch b;
  assert_int_equal(torc_loader_next(ld, &b), 1);
  torc_batch_clear(&b);
  torc_loader_free(ld); /* workers mid-batch, slots full */
  /* Never started; started and never read; read to the end. */
  ld = torc_loader_new(ds, &o);
  torc_loader_free(ld);
  ld = torc_loader_new(ds, &o);
  assert_ok(torc_loader_start(ld, 0, 0));
  torc_loader_free(ld);
  torc_dataset_close(ds);
  ds = ts_open_kv("n=9 h=1 w=1");
  ld = torc_loader_new(ds, &o);
  epoch_dump d;
  dump_epoch(ld, &d);
  assert_int_equal(d.n_samples, 9);
  free(d.bytes);
  torc_loader_free(ld);
  torc_dataset_close(ds);
}

/* A sample that fails in a worker surfaces at torc_loader_next with the
 * sample's index and the source's message; the next batches follow. */
static void test_worker_error(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=10 h=1 w=1 fail_at=4");
  for (int workers = 0; workers <= 2; workers += 2) {
    torc_loader_opts o = {0};
    o.batch_size = 3;
    o.workers = workers;
    torc_loader *ld = torc_loader_new(ds, &o);
    torc_batch b;
    assert_int_equal(torc_loader_next(ld, &b), 1);
    torc_batch_clear(&b);
    assert_int_equal(torc_loader_next(ld, &b), -1);
    assert_null(b.input);
    assert_error(TORC_ERR_IO, "data loader: sample 4 (batch 1 of epoch 0): "
                              "ts: sample 4 is unreadable");
    assert_int_equal(torc_loader_next(ld, &b), 1);
    assert_int_equal(b.index, 2);
    torc_batch_clear(&b);
    torc_loader_free(ld);
  }
  /* A transform that fails names the sample too. */
  torc_transform *tf = torc_transform_parse("center_crop(3)");
  torc_dataset *small = ts_open_kv("n=4 h=2 w=2");
  torc_loader_opts o = {0};
  o.transform = tf;
  o.workers = 1;
  torc_loader *ld = torc_loader_new(small, &o);
  torc_batch b;
  assert_int_equal(torc_loader_next(ld, &b), -1);
  assert_error(TORC_ERR_SHAPE, "sample 0 (batch 0 of epoch 0): transform "
                               "stage 'center_crop(3)' crops 3 x 3");
  torc_loader_free(ld);
  torc_transform_free(tf);
  torc_dataset_close(small);
  torc_dataset_close(ds);
}

static void test_ragged_collate(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=3 c=1 h=1 w=1 ragged=1");
  torc_loader_opts o = {0};
  o.batch_size = 3;
  torc_loader *ld = torc_loader_new(ds, &o);
  torc_batch b;
  assert_int_equal(torc_loader_next(ld, &b), 1);
  assert_non_null(b.mask);
  assert_int_equal(torc_dtype_of(b.mask), TORC_BOOL);
  assert_int_equal(torc_ndim(b.input), 4);
  assert_int_equal(torc_size(b.input, 3), 3);
  double ex[9] = {0, 0, 0, 1000, 1001, 0, 2000, 2001, 2002};
  double em[9] = {1, 0, 0, 1, 1, 0, 1, 1, 1};
  test_assert_values(b.input, ex, 9, 0);
  test_assert_values(b.mask, em, 9, 0);
  torc_batch_clear(&b);
  torc_loader_free(ld);
  torc_dataset_close(ds);

  /* Ragged in two dims, through torc_collate_default directly. */
  float a[6] = {1, 2, 3, 4, 5, 6}, c[2] = {7, 8};
  int64_t t0 = 0, t1 = 1;
  torc_tensor *xs[2] = {torc_from_host(a, TORC_SHAPE(2, 3), TORC_F32, TORC_CPU),
                        torc_from_host(c, TORC_SHAPE(1, 2), TORC_F32,
                                       TORC_CPU)};
  torc_tensor *ys[2] = {torc_from_host(&t0, NULL, 0, TORC_I64, TORC_CPU),
                        torc_from_host(&t1, NULL, 0, TORC_I64, TORC_CPU)};
  assert_ok(torc_collate_default(xs, ys, 2, &b, NULL));
  assert_int_equal(b.size, 2);
  double e2[12] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0};
  double m2[12] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
  test_assert_values(b.input, e2, 12, 0);
  test_assert_values(b.mask, m2, 12, 0);
  test_assert_values(b.target, (double[]){0, 1}, 2, 0);
  torc_batch_clear(&b);

  /* Errors: dtypes, dims, targets. */
  torc_tensor *xi = torc_from_host((int32_t[]){1, 2}, TORC_SHAPE(1, 2),
                                   TORC_I32, TORC_CPU);
  torc_tensor *x1 = torc_from_host(c, TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_tensor *yv = torc_from_host(c, TORC_SHAPE(2), TORC_F32, TORC_CPU);
  torc_tensor *mix[2] = {xs[0], xi};
  assert_int_equal(torc_collate_default(mix, ys, 2, &b, NULL), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "sample 1's input is i32 but sample 0's is "
                               "f32");
  mix[1] = x1;
  assert_int_equal(torc_collate_default(mix, ys, 2, &b, NULL), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "sample 1's input has shape [2] but sample "
                               "0's [2, 3]");
  torc_tensor *ty[2] = {ys[0], yv};
  assert_int_equal(torc_collate_default(xs, ty, 2, &b, NULL), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "sample 1's target is f32 [2] but sample 0's "
                               "is i64 []");
  assert_int_equal(torc_collate_default(xs, ys, 0, &b, NULL), TORC_ERR_NULL);
  assert_error(TORC_ERR_NULL, "at least one sample");
  assert_null(b.input);
  for (int i = 0; i < 2; i++) {
    torc_release(xs[i]);
    torc_release(ys[i]);
  }
  torc_release(xi), torc_release(x1), torc_release(yv);
}

/* A custom collate: inputs flattened and concatenated into [sum], the
 * target the number of samples. A batch starting at sample 2 fails; one
 * starting at sample 4 returns TORC_OK without an input (decided by the
 * batch, so prefetching workers behave as the caller's thread does). */
static torc_status my_collate(torc_tensor *const *inputs,
                              torc_tensor *const *targets, int n,
                              torc_batch *out, void *user) {
  int *calls = user;
  (*calls)++; /* only with workers <= 1: one thread calls it */
  double first;
  torc_status st = torc_item(targets[0], &first);
  if (st != TORC_OK)
    return st;
  if (first == 2)
    return torc_set_error(TORC_ERR_INVALID, "my_collate refuses %d samples",
                          n);
  if (first == 4)
    return TORC_OK;
  int64_t per = torc_numel(inputs[0]);
  float *v = malloc(sizeof(float) * (size_t)(per * n));
  for (int i = 0; i < n && st == TORC_OK; i++)
    st = torc_to_host(inputs[i], v + i * per, sizeof(float) * (size_t)per);
  if (st == TORC_OK)
    out->input = torc_from_host(v, TORC_SHAPE(per * n), TORC_F32, TORC_CPU);
  free(v);
  int64_t cnt = n;
  out->target = torc_from_host(&cnt, NULL, 0, TORC_I64, TORC_CPU);
  return st;
}

static void test_custom_collate(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=5 h=1 w=2");
  for (int workers = 0; workers <= 1; workers++) {
    int calls = 0;
    torc_loader_opts o = {0};
    o.batch_size = 2;
    o.workers = workers;
    o.collate = my_collate;
    o.collate_user = &calls;
    torc_loader *ld = torc_loader_new(ds, &o);
    torc_batch b;
    assert_int_equal(torc_loader_next(ld, &b), 1);
    assert_int_equal(b.size, 2);
    assert_int_equal(b.index, 0);
    test_assert_values(b.input, (double[]){0, 1, 1000, 1001}, 4, 0);
    double two;
    assert_ok(torc_item(b.target, &two));
    assert_true(two == 2);
    torc_batch_clear(&b);
    assert_int_equal(torc_loader_next(ld, &b), -1);
    assert_error(TORC_ERR_INVALID, "batch 1 of epoch 0 (samples 2..): "
                                   "my_collate refuses 2 samples");
    assert_int_equal(torc_loader_next(ld, &b), -1);
    assert_error(TORC_ERR_INVALID, "the custom collate returned TORC_OK "
                                   "without an input");
    assert_int_equal(torc_loader_next(ld, &b), 0);
    torc_loader_free(ld);
    assert_int_equal(calls, 3);
  }
  torc_dataset_close(ds);
}

/* On sim, batches are collated into pinned memory and arrive on sim:0. */
static void test_pinned_sim(void **state) {
  (void)state;
  torc_device sim;
  assert_ok(torc_device_parse("sim:0", &sim));
  torc_dataset *ds = ts_open_kv("n=6 h=1 w=2 ragged=1");
  torc_dataset *plain = ts_open_kv("n=6 h=1 w=2");
  int calls = 0;
  for (int variant = 0; variant < 4; variant++) {
    torc_loader_opts o = {0};
    o.batch_size = 3;
    o.workers = variant % 2 ? 2 : 0;
    o.device = sim;
    o.pin_memory = variant == 2 ? 1 : 0;
    if (variant == 3) {
      o.workers = 1;
      o.collate = my_collate;
      o.collate_user = &calls;
    }
    torc_loader *ld = torc_loader_new(variant == 3 ? plain : ds, &o);
    torc_batch b;
    assert_int_equal(torc_loader_next(ld, &b), 1);
    assert_true(torc_device_eq(torc_device_of(b.input), sim));
    assert_true(torc_device_eq(torc_device_of(b.target), sim));
    if (variant < 3) {
      assert_true(torc_device_eq(torc_device_of(b.mask), sim));
      double ex[12] = {0, 1, 0, 0, 1000, 1001, 1002, 0, 2000, 2001, 2002,
                       2003};
      test_assert_values(b.input, ex, 12, 0);
      test_assert_values(b.target, (double[]){0, 1, 2}, 3, 0);
    }
    torc_batch_clear(&b);
    torc_loader_stats st;
    assert_ok(torc_loader_get_stats(ld, &st));
    assert_int_equal(st.pinned, 1);
    torc_loader_free(ld);
  }
  /* pin_memory = -1: plain memory, still delivered on sim. */
  torc_loader_opts o = {0};
  o.batch_size = 3;
  o.device = sim;
  o.pin_memory = -1;
  torc_loader *ld = torc_loader_new(ds, &o);
  torc_batch b;
  assert_int_equal(torc_loader_next(ld, &b), 1);
  assert_true(torc_device_eq(torc_device_of(b.input), sim));
  torc_batch_clear(&b);
  torc_loader_stats st;
  assert_ok(torc_loader_get_stats(ld, &st));
  assert_int_equal(st.pinned, 0);
  torc_loader_free(ld);
  /* On the cpu, auto does not pin. */
  o.device = TORC_CPU;
  o.pin_memory = 0;
  ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_next(ld, &b), 1);
  assert_false(torc_is_pinned(b.input));
  torc_batch_clear(&b);
  torc_loader_free(ld);
  /* Asked for on the cpu, which has no pinned memory: plain, and said so. */
  o.pin_memory = 1;
  o.workers = 1;
  ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_next(ld, &b), 1);
  assert_true(torc_device_eq(torc_device_of(b.input), TORC_CPU));
  test_assert_values(b.target, (double[]){0, 1, 2}, 3, 0);
  torc_batch_clear(&b);
  assert_ok(torc_loader_get_stats(ld, &st));
  assert_int_equal(st.pinned, 0);
  torc_loader_free(ld);
  assert_ok(torc_synchronize(sim));
  torc_dataset_close(ds);
  torc_dataset_close(plain);
}

/* Batches are the caller's: not owned by a scope open around next. */
static void test_scope(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=4 h=1 w=1");
  torc_transform *tf = torc_transform_parse("scale(2)");
  torc_loader_opts o = {0};
  o.batch_size = 2;
  o.transform = tf;
  torc_loader *ld = torc_loader_new(ds, &o);
  torc_batch b;
  int s = torc_scope_begin();
  assert_int_equal(torc_loader_next(ld, &b), 1);
  torc_tensor *x, *y;
  assert_ok(torc_dataset_get(ds, 0, &x, &y));
  torc_scope_end(s);
  test_assert_values(b.input, (double[]){0, 2000}, 2, 0);
  torc_batch_clear(&b);
  torc_batch_clear(NULL);
  torc_release(x);
  torc_release(y);
  torc_loader_free(ld);
  torc_transform_free(tf);
  torc_dataset_close(ds);
}

static void new_fails(torc_dataset *ds, const torc_loader_opts *o,
                      torc_status st, const char *what) {
  torc_clear_error();
  torc_loader *ld = torc_loader_new(ds, o);
  if (ld) {
    torc_loader_free(ld);
    print_error("the loader was created\n");
    fail();
  }
  assert_error(st, what);
}

static void test_loader_opt_errors(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=10 h=1 w=1");
  torc_loader_opts o = {0};
  o.batch_size = -1;
  new_fails(ds, &o, TORC_ERR_INVALID, "batch_size = -1 is out of range; "
                                      "use 1 to 2147483647");
  o.batch_size = 11;
  o.drop_last = 1;
  new_fails(ds, &o, TORC_ERR_INVALID, "batch_size = 11 with drop_last leaves "
                                      "no batch: the dataset has 10 samples");
  o.batch_size = 6;
  o.world_size = 2;
  new_fails(ds, &o, TORC_ERR_INVALID, "this rank has 5 samples per rank");
  memset(&o, 0, sizeof o);
  o.workers = -1;
  new_fails(ds, &o, TORC_ERR_INVALID, "workers = -1 is out of range");
  o.workers = 257;
  new_fails(ds, &o, TORC_ERR_INVALID, "workers = 257 is out of range; use 0");
  o.workers = 0;
  o.limit = -3;
  new_fails(ds, &o, TORC_ERR_INVALID, "limit = -3 is negative; give a sample "
                                      "count (0 = all)");
  o.limit = 0;
  o.prefetch = -2;
  new_fails(ds, &o, TORC_ERR_INVALID, "prefetch = -2 is out of range");
  o.prefetch = 0;
  o.world_size = -1;
  new_fails(ds, &o, TORC_ERR_INVALID, "world_size = -1 is negative");
  o.world_size = 2;
  o.rank = 2;
  new_fails(ds, &o, TORC_ERR_INVALID, "rank = 2 is out of range for "
                                      "world_size = 2; use 0 to 1");
  o.world_size = 1;
  o.rank = 1;
  new_fails(ds, &o, TORC_ERR_INVALID, "rank = 1 without sharding");
  o.rank = 0;
  o.world_size = 0;
  o.pin_memory = 2;
  new_fails(ds, &o, TORC_ERR_INVALID, "pin_memory = 2 is not one of 0 (auto)");
  o.pin_memory = 0;
  o.device.type = 9;
  new_fails(ds, &o, TORC_ERR_DEVICE, "torc_loader_new");
  o.device.type = 0;
  new_fails(NULL, &o, TORC_ERR_NULL, "torc_loader_new");
  torc_batch b;
  assert_int_equal(torc_loader_next(NULL, &b), -1);
  assert_error(TORC_ERR_NULL, "the loader is NULL");
  torc_loader *ld = torc_loader_new(ds, &o);
  assert_int_equal(torc_loader_next(ld, NULL), -1);
  assert_error(TORC_ERR_NULL, "the output batch is NULL");
  torc_loader_stats st;
  assert_int_equal(torc_loader_get_stats(ld, NULL), TORC_ERR_NULL);
  assert_int_equal(torc_loader_get_stats(NULL, &st), TORC_ERR_NULL);
  assert_int_equal(torc_loader_start(NULL, 0, 0), TORC_ERR_NULL);
  assert_int_equal(torc_loader_length(NULL), -1);
  assert_null(torc_loader_dataset(NULL));
  torc_loader_free(ld);
  torc_dataset_close(ds);
}

int main(void) {
  if (loader_register_test_sources())
    return 1;
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, test_live_setup,               \
                                             test_live_teardown)
      T(test_batches),
      T(test_shuffle),
      T(test_workers_identical),
      T(test_resume),
      T(test_shard),
      T(test_free_mid_epoch),
      T(test_worker_error),
      T(test_ragged_collate),
      T(test_custom_collate),
      T(test_pinned_sim),
      T(test_scope),
      T(test_loader_opt_errors),
#undef T
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
