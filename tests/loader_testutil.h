/* tests/loader_testutil.h — shared by the loader's tests (test_loader,
 * test_loader_datasets): the data source "ts", whose sample i's input holds
 * i * 1000 + k and whose target is i (so every batch says which samples it
 * holds), a keyless source "mini", and reading a whole epoch. Included
 * after testutil.h, once per program. */
#ifndef TORC_LOADER_TESTUTIL_H
#define TORC_LOADER_TESTUTIL_H

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "torc/data.h"

/* ---- the test source ---- */

typedef struct ts {
  int64_t n, c, h, w;
  int ragged;      /* sample i's width is w + i % 3 */
  int64_t fail_at; /* this sample fails (-1: none) */
  int64_t delay_us; /* sample i sleeps (i % 3) * delay_us */
  char root[512];
} ts;

static const torc_data_key ts_keys[] = {
    {"root", "a folder that must exist", NULL, 1},
    {"n", "number of samples", "10", 0},
    {"c", "channels", "1", 0},
    {"h", "height", "4", 0},
    {"w", "width", "4", 0},
    {"ragged", "0 or 1: widths w + i % 3", "0", 0},
    {"fail_at", "the sample that fails (-1: none)", "-1", 0},
    {"delay_us", "sample i sleeps (i % 3) * delay_us", "0", 0},
    {NULL, NULL, NULL, 0}};

static inline int ts_open(const char *const *keys, const char *const *values,
                          int n, void *user, void **handle) {
  (void)user;
  ts *d = calloc(1, sizeof *d);
  if (d == NULL)
    return torc_set_error(TORC_ERR_OOM, "ts: out of memory");
  for (int i = 0; i < n; i++) {
    long long v = atoll(values[i]);
    if (strcmp(keys[i], "root") == 0)
      snprintf(d->root, sizeof d->root, "%s", values[i]);
    else if (strcmp(keys[i], "n") == 0)
      d->n = v;
    else if (strcmp(keys[i], "c") == 0)
      d->c = v;
    else if (strcmp(keys[i], "h") == 0)
      d->h = v;
    else if (strcmp(keys[i], "w") == 0)
      d->w = v;
    else if (strcmp(keys[i], "ragged") == 0)
      d->ragged = (int)v;
    else if (strcmp(keys[i], "fail_at") == 0)
      d->fail_at = v;
    else if (strcmp(keys[i], "delay_us") == 0)
      d->delay_us = v;
  }
  struct stat st;
  if (stat(d->root, &st) != 0) {
    torc_status s = torc_set_error(TORC_ERR_IO, "ts: cannot open folder %s: %s",
                                   d->root, strerror(errno));
    free(d);
    return s;
  }
  if (d->n < 0) {
    long long n_bad = d->n;
    free(d);
    return torc_set_error(TORC_ERR_INVALID, "ts: n = %lld is negative",
                          n_bad);
  }
  *handle = d;
  return TORC_OK;
}

static inline int64_t ts_length(void *h) { return ((ts *)h)->n; }

static inline int ts_get(void *h, int64_t i, torc_tensor **input,
                         torc_tensor **target) {
  ts *d = h;
  if (i == d->fail_at)
    return torc_set_error(TORC_ERR_IO, "ts: sample %lld is unreadable",
                          (long long)i);
  if (d->delay_us)
    usleep((useconds_t)((i % 3) * d->delay_us));
  int64_t w = d->w + (d->ragged ? i % 3 : 0);
  int64_t n = d->c * d->h * w;
  float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (v == NULL)
    return torc_set_error(TORC_ERR_OOM, "ts: out of memory");
  for (int64_t k = 0; k < n; k++)
    v[k] = (float)(i * 1000 + k);
  *input = torc_from_host(v, TORC_SHAPE(d->c, d->h, w), TORC_F32, TORC_CPU);
  free(v);
  int64_t t = i;
  *target = torc_from_host(&t, NULL, 0, TORC_I64, TORC_CPU);
  return TORC_OK;
}

static inline void ts_close(void *h) { free(h); }

static inline int ts_describe(void *h, char *buf, size_t size) {
  ts *d = h;
  snprintf(buf, size, "%lld test samples in %s", (long long)d->n, d->root);
  return TORC_OK;
}

static inline int64_t ts_classes(void *h) {
  (void)h;
  return 3;
}

static inline int ts_class_name(void *h, int64_t i, char *buf, size_t size) {
  (void)h;
  static const char *const names[] = {"zero", "one", ""};
  snprintf(buf, size, "%s", names[i]);
  return TORC_OK;
}

static const torc_data_source_type ts_type = {
    sizeof(torc_data_source_type), "ts", "test samples encoding their index",
    ts_keys, ts_open, ts_length, ts_get, ts_close, ts_describe, ts_classes,
    ts_class_name, NULL};

/* A minimal source with only the required functions and no keys. */
static inline int mini_open(const char *const *keys, const char *const *values,
                            int n, void *user, void **handle) {
  (void)keys, (void)values, (void)n, (void)user;
  *handle = (void *)1;
  return TORC_OK;
}
static inline int64_t mini_length(void *h) {
  (void)h;
  return 0;
}
static inline void mini_close(void *h) { (void)h; }
static const torc_data_source_type mini_type = {
    offsetof(torc_data_source_type, describe), "mini", "no keys, no samples",
    NULL, mini_open, mini_length, ts_get, mini_close, NULL, NULL, NULL, NULL};

/* Opens a "ts" dataset from "k=v" pairs (root defaults to "."). */
static inline torc_dataset *ts_open_kv(const char *kv) {
  const char *k[16], *v[16];
  char buf[512], *save = NULL;
  int n = 0;
  snprintf(buf, sizeof buf, "%s", kv ? kv : "");
  int has_root = 0;
  for (char *t = strtok_r(buf, " ", &save); t && n < 15;
       t = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(t, '=');
    *eq = '\0';
    k[n] = t;
    v[n] = eq + 1;
    has_root |= strcmp(t, "root") == 0;
    n++;
  }
  if (!has_root) {
    k[n] = "root";
    v[n] = ".";
    n++;
  }
  return torc_dataset_open("ts", k, v, n);
}

/* ---- helpers ---- */

static inline int64_t *targets_of(const torc_batch *b) {
  int64_t *t = malloc(sizeof(int64_t) * (size_t)b->size);
  assert_non_null(t);
  assert_ok(torc_to_host(b->target, t, sizeof(int64_t) * (size_t)b->size));
  return t;
}

/* Every batch of the current epoch: targets concatenated into order[]
 * (returns the sample count), and the inputs' bytes into bytes (optional,
 * malloc'd). */
typedef struct epoch_dump {
  int64_t n_batches, n_samples;
  int64_t order[256];
  int64_t sizes[64];
  unsigned char *bytes;
  size_t n_bytes;
} epoch_dump;

static inline void dump_epoch(torc_loader *ld, epoch_dump *d) {
  memset(d, 0, sizeof *d);
  torc_batch b;
  int r;
  while ((r = torc_loader_next(ld, &b)) == 1) {
    assert_int_equal(b.index, d->n_batches);
    int64_t *t = targets_of(&b);
    memcpy(d->order + d->n_samples, t, sizeof(int64_t) * (size_t)b.size);
    free(t);
    d->sizes[d->n_batches++] = b.size;
    d->n_samples += b.size;
    size_t nb = (size_t)torc_numel(b.input) *
                torc_dtype_size(torc_dtype_of(b.input));
    d->bytes = realloc(d->bytes, d->n_bytes + nb);
    assert_non_null(d->bytes);
    assert_ok(torc_to_host(b.input, d->bytes + d->n_bytes, nb));
    d->n_bytes += nb;
    torc_batch_clear(&b);
  }
  if (r != 0)
    print_error("torc_loader_next: %s\n", torc_last_error());
  assert_int_equal(r, 0);
}

static inline void assert_same_epoch(const epoch_dump *a, const epoch_dump *b) {
  assert_int_equal(a->n_batches, b->n_batches);
  assert_int_equal(a->n_samples, b->n_samples);
  assert_memory_equal(a->order, b->order,
                      sizeof(int64_t) * (size_t)a->n_samples);
  assert_int_equal(a->n_bytes, b->n_bytes);
  assert_memory_equal(a->bytes, b->bytes, a->n_bytes);
}

/* Registers "ts" and "mini" (a program's main, before the tests): 0, or 1
 * after printing why. */
static inline int loader_register_test_sources(void) {
  if (torc_data_source_register(&ts_type) != TORC_OK ||
      torc_data_source_register(&mini_type) != TORC_OK) {
    fprintf(stderr, "registering the test sources: %s\n", torc_last_error());
    return 1;
  }
  return 0;
}

#endif /* TORC_LOADER_TESTUTIL_H */
