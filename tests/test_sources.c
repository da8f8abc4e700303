/* tests/test_sources.c — the data plugin's sources (plugins/data) that
 * are neither tables nor images: the plugin's registrations, idx (raw and
 * gzip, its cache, every bad-file error, and the real Fashion-MNIST from
 * Debian's dataset-fashion-mnist when installed) and synthetic, opened
 * through torc_dataset_open. Every input file is written at run time into
 * a temporary folder. csv and npy are in test_sources_csv_npy.c,
 * image_folder in test_sources_images.c.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "testutil.h"
#include "data_testutil.h"
#include "sources_testutil.h"

#include "torc/data.h"
#include "torc/philox.h"

/* ======================================================================
 * The plugin
 * ==================================================================== */

static void test_plugin_registers_sources(void **state) {
  (void)state;
  static const char *const names[] = {"idx", "csv", "npy", "image_folder",
                                      "synthetic"};
  for (size_t i = 0; i < 5; i++) {
    const torc_data_source_type *t = torc_data_source_find(names[i]);
    assert_non_null(t);
    assert_string_equal(t->name, names[i]);
    assert_non_null(t->description);
    assert_non_null(t->keys);
    assert_non_null(t->describe);
    assert_non_null(t->num_classes);
  }
  /* idx's keys are paths, resolved by the config layer. */
  const torc_data_source_type *idx = torc_data_source_find("idx");
  assert_string_equal(idx->keys[0].name, "images");
  assert_int_equal(idx->keys[0].is_path, 1);
  assert_null(idx->keys[0].default_value);
  assert_int_equal(idx->keys[1].is_path, 1);
}

/* ======================================================================
 * idx
 * ==================================================================== */

/* write_idx and write_idx_pair (idx_pixels, idx_labels) are in
 * data_testutil.h. */

static void check_idx_values(torc_dataset *ds) {
  assert_int_equal(torc_dataset_length(ds), 3);
  assert_string_equal(torc_dataset_describe(ds),
                      "3 samples, input [1, 2, 4] u8, 8 classes");
  assert_int_equal(torc_dataset_num_classes(ds), 8);
  const int64_t shape[3] = {1, 2, 4};
  for (int64_t i = 0; i < 3; i += 2) { /* first and last */
    torc_tensor *in, *tg;
    get_sample(ds, i, TORC_U8, shape, 3, &in, &tg);
    assert_memory_equal(torc_data(in), idx_pixels + 8 * i, 8);
    assert_class(tg, idx_labels[i]);
    release2(in, tg);
  }
  torc_tensor *in, *tg;
  assert_int_equal(torc_dataset_get(ds, 3, &in, &tg), TORC_ERR_RANGE);
  assert_null(in);
}

static void test_idx_raw(void **state) {
  (void)state;
  write_idx_pair(P("raw-images"), P("raw-labels"), 0);
  torc_dataset *ds = open_idx(P("raw-images"), P("raw-labels"));
  assert_torc(ds);
  check_idx_values(ds);
  torc_dataset_close(ds);
}

static void test_idx_gzip(void **state) {
  (void)state;
  write_idx_pair(P("gz-images.gz"), P("gz-labels.gz"), 1);
  torc_dataset *ds = open_idx(P("gz-images.gz"), P("gz-labels.gz"));
  assert_torc(ds);
  check_idx_values(ds);
  torc_dataset_close(ds);
}

/* Files in folder dir whose name contains `part`; the size of the last. */
static int count_files(const char *dir, const char *part, off_t *size) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strstr(e->d_name, part)) {
      char p[1200];
      struct stat sb;
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      if (stat(p, &sb) == 0 && size)
        *size = sb.st_size;
      n++;
    }
  if (d)
    closedir(d);
  return n;
}

/* A gzip IDX file is decoded once: the copy in TORC_DATA_CACHE serves the
 * next open; a damaged copy is ignored and rewritten; "off" writes none. */
static void test_idx_gzip_cache(void **state) {
  (void)state;
  char cache[1024];
  snprintf(cache, sizeof cache, "%s", P("cache"));
  const char *old = getenv("TORC_DATA_CACHE");
  char *saved = old ? strdup(old) : NULL;
  setenv("TORC_DATA_CACHE", cache, 1);
  write_idx_pair(P("c-images.gz"), P("c-labels.gz"), 1);
  for (int round = 0; round < 3; round++) {
    torc_dataset *ds = open_idx(P("c-images.gz"), P("c-labels.gz"));
    assert_torc(ds);
    check_idx_values(ds);
    torc_dataset_close(ds);
    off_t size = 0;
    assert_int_equal(count_files(cache, "c-images.gz", &size), 1);
    /* header + 3 images of 2 x 4 + the checksum trailer */
    assert_int_equal(size, 16 + 24 + 8);
    assert_int_equal(count_files(cache, "c-labels.gz", NULL), 1);
    if (round == 1) { /* damage the images' copy: it must be rewritten */
      DIR *d = opendir(cache);
      struct dirent *e;
      while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, "c-images.gz")) {
          char p[1200];
          snprintf(p, sizeof p, "%s/%s", cache, e->d_name);
          assert_int_equal(truncate(p, 7), 0);
        }
      closedir(d);
    }
  }
  setenv("TORC_DATA_CACHE", "off", 1);
  write_idx_pair(P("o-images.gz"), P("o-labels.gz"), 1);
  torc_dataset *ds = open_idx(P("o-images.gz"), P("o-labels.gz"));
  assert_torc(ds);
  check_idx_values(ds);
  torc_dataset_close(ds);
  assert_int_equal(count_files(cache, "o-images", NULL), 0);
  if (saved)
    setenv("TORC_DATA_CACHE", saved, 1);
  else
    unsetenv("TORC_DATA_CACHE");
  free(saved);
}

static void test_idx_missing_file(void **state) {
  (void)state;
  write_idx_pair(P("m-images"), P("m-labels"), 0);
  assert_open_fails(open_idx(P("no-such-images"), P("m-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "does not exist");
  assert_contains(torc_last_error(), "no-such-images");
  assert_contains(torc_last_error(), "'images'");
  assert_open_fails(open_idx(P("m-images"), P("no-such-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "no-such-labels");
  /* A folder is not a file. */
  assert_open_fails(open_idx(tmp_root, P("m-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is a folder");
  /* A required key left out: the core's message. */
  assert_open_fails(open_ds("idx", 1, "images", P("m-images")),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "'labels' is required");
}

static void test_idx_unreadable(void **state) {
  (void)state;
  write_idx_pair(P("u-images"), P("u-labels"), 0);
  if (running_as_root("idx unreadable file"))
    return;
  assert_int_equal(chmod(P("u-images"), 0), 0);
  assert_open_fails(open_idx(P("u-images"), P("u-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "not readable");
  assert_contains(torc_last_error(), "u-images");
  chmod(P("u-images"), 0644);
}

static void test_idx_truncated_gzip(void **state) {
  (void)state;
  /* Enough data that the compressed stream is long, cut in the middle. */
  enum { N = 50, H = 28, W = 28 };
  uint8_t *pix = malloc(N * H * W);
  uint8_t lab[N];
  for (int i = 0; i < N * H * W; i++)
    pix[i] = (uint8_t)torc_philox_randint(1, (uint64_t)i, 0, 256);
  for (int i = 0; i < N; i++)
    lab[i] = (uint8_t)(i % 10);
  const uint32_t idims[3] = {N, H, W}, ldims[1] = {N};
  write_idx(P("t-images.gz"), 0x803, idims, 3, pix, N * H * W, 1);
  write_idx(P("t-labels.gz"), 0x801, ldims, 1, lab, N, 1);
  free(pix);
  size_t n;
  unsigned char *b = test_read_file(P("t-images.gz"), &n);
  test_write_file(P("t-images-cut.gz"), b, n / 2);
  /* Cut just before the 8-byte trailer too: the data is whole but the
   * stream is not. */
  test_write_file(P("t-images-notrailer.gz"), b, n - 4);
  free(b);
  assert_open_fails(open_idx(P("t-images-cut.gz"), P("t-labels.gz")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "truncated gzip");
  assert_contains(torc_last_error(), "t-images-cut.gz");
  assert_open_fails(open_idx(P("t-images-notrailer.gz"), P("t-labels.gz")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "truncated gzip");
  /* The whole file opens. */
  torc_dataset *ds = open_idx(P("t-images.gz"), P("t-labels.gz"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), N);
  torc_dataset_close(ds);
}

static void test_idx_wrong_magic(void **state) {
  (void)state;
  write_idx_pair(P("w-images"), P("w-labels"), 0);
  /* Swapped files. */
  assert_open_fails(open_idx(P("w-labels"), P("w-images")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "wrong IDX magic 0x00000801");
  assert_contains(torc_last_error(), "expected 0x00000803");
  assert_contains(torc_last_error(), "swapped");
  /* Not an IDX file at all. */
  write_text(P("w-text"), "hello, this is text\n");
  assert_open_fails(open_idx(P("w-text"), P("w-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "wrong IDX magic");
  assert_contains(torc_last_error(), "not an IDX file");
  /* An IDX file of another element type (0x0D: float). */
  const uint32_t dims[3] = {3, 2, 4};
  float fl[24] = {0};
  write_idx(P("w-float"), 0x0D03, dims, 3, (const uint8_t *)fl, sizeof fl, 0);
  assert_open_fails(open_idx(P("w-float"), P("w-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "0x00000d03");
  assert_contains(torc_last_error(), "unsigned bytes");
  /* An empty file. */
  write_text(P("w-empty"), "");
  assert_open_fails(open_idx(P("w-empty"), P("w-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "truncated");
}

static void test_idx_size_mismatch(void **state) {
  (void)state;
  write_idx_pair(P("s-images"), P("s-labels"), 0);
  const uint32_t dims[3] = {3, 2, 4};
  /* Header [3, 2, 4] = 24 bytes, 20 present (raw and gzip). */
  write_idx(P("s-short"), 0x803, dims, 3, idx_pixels, 20, 0);
  assert_open_fails(open_idx(P("s-short"), P("s-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is truncated");
  assert_contains(torc_last_error(), "[3, 2, 4]");
  assert_contains(torc_last_error(), "needs 24 bytes but only 20");
  write_idx(P("s-short.gz"), 0x803, dims, 3, idx_pixels, 20, 1);
  assert_open_fails(open_idx(P("s-short.gz"), P("s-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "needs 24 bytes but only 20");
  /* Header [3, 2, 3] = 18 bytes, 24 present. */
  const uint32_t small[3] = {3, 2, 3};
  write_idx(P("s-long"), 0x803, small, 3, idx_pixels, 24, 0);
  assert_open_fails(open_idx(P("s-long"), P("s-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "6 bytes after the 18");
  /* The header itself cut short. */
  test_write_file(P("s-head"), "\0\0\x08\x03\0\0\0\x03\0\0", 10);
  assert_open_fails(open_idx(P("s-head"), P("s-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "dimensions");
  /* A zero dimension. */
  const uint32_t zero[3] = {0, 2, 4};
  write_idx(P("s-zero"), 0x803, zero, 3, NULL, 0, 0);
  assert_open_fails(open_idx(P("s-zero"), P("s-labels")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "size 0");
}

static void test_idx_count_mismatch(void **state) {
  (void)state;
  write_idx_pair(P("c-images"), P("c-labels"), 0);
  const uint32_t two[1] = {2};
  write_idx(P("c-labels2"), 0x801, two, 1, idx_labels, 2, 0);
  assert_open_fails(open_idx(P("c-images"), P("c-labels2")), TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "has 3 samples");
  assert_contains(torc_last_error(), "has 2");
  assert_contains(torc_last_error(), "c-labels2");
}

/* The first byte of a gzip (or raw) file's data at `offset`. */
static int gz_byte_at(const char *path, long offset, uint8_t *out, size_t n) {
  gzFile gz = gzopen(path, "rb");
  if (gz == NULL)
    return -1;
  int ok = gzseek(gz, offset, SEEK_SET) == offset &&
           gzread(gz, out, (unsigned)n) == (int)n;
  gzclose(gz);
  return ok ? 0 : -1;
}

static void test_idx_fashion_mnist(void **state) {
  (void)state;
  static const char dir[] = "/usr/share/datasets/fashion-mnist";
  static const struct {
    const char *images, *labels;
    int64_t n;
  } splits[] = {
      {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 60000},
      {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 10000},
  };
  for (int s = 0; s < 2; s++) {
    char images[256], labels[256];
    snprintf(images, sizeof images, "%s/%s", dir, splits[s].images);
    snprintf(labels, sizeof labels, "%s/%s", dir, splits[s].labels);
    if (access(images, R_OK) != 0 || access(labels, R_OK) != 0) {
      printf("[   SKIP   ] Fashion-MNIST: %s is absent (apt-get install "
             "dataset-fashion-mnist to run this check)\n",
             access(images, R_OK) != 0 ? images : labels);
      return;
    }
    torc_dataset *ds = open_idx(images, labels);
    assert_torc(ds);
    assert_int_equal(torc_dataset_length(ds), splits[s].n);
    char want[128];
    snprintf(want, sizeof want, "%lld samples, input [1, 28, 28] u8, 10 "
                                "classes",
             (long long)splits[s].n);
    assert_string_equal(torc_dataset_describe(ds), want);
    assert_int_equal(torc_dataset_num_classes(ds), 10);
    /* First and last samples against the files' own bytes. */
    int64_t idxs[2] = {0, splits[s].n - 1};
    for (int k = 0; k < 2; k++) {
      uint8_t lab, pix[784];
      assert_int_equal(gz_byte_at(labels, 8 + (long)idxs[k], &lab, 1), 0);
      assert_int_equal(
          gz_byte_at(images, 16 + 784 * (long)idxs[k], pix, 784), 0);
      const int64_t shape[3] = {1, 28, 28};
      torc_tensor *in, *tg;
      get_sample(ds, idxs[k], TORC_U8, shape, 3, &in, &tg);
      assert_class(tg, lab);
      assert_memory_equal(torc_data(in), pix, 784);
      release2(in, tg);
    }
    torc_dataset_close(ds);
  }
}

/* ======================================================================
 * synthetic
 * ==================================================================== */

#define SYN_TARGET_KEY 0x9E3779B97F4A7C15ull

static void check_synthetic_sample(torc_dataset *ds, uint64_t seed,
                                   int64_t i) {
  torc_tensor *in, *tg;
  get_sample(ds, i, TORC_F32, (const int64_t[3]){1, 4, 4}, 3, &in, &tg);
  const float *v = torc_data(in);
  for (int j = 0; j < 16; j++)
    assert_true(v[j] == (float)torc_philox_normal(seed, (uint64_t)i * 16 +
                                                            (uint64_t)j));
  assert_class(tg, torc_philox_randint(seed ^ SYN_TARGET_KEY, (uint64_t)i, 0,
                                       3));
  release2(in, tg);
}

static void test_synthetic_values(void **state) {
  (void)state;
  torc_dataset *ds = open_ds("synthetic", 4, "shape", "1,4,4", "classes",
                             "3", "samples", "500", "seed", "7");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 500);
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  assert_string_equal(torc_dataset_describe(ds),
                      "500 samples, input [1, 4, 4] f32 (N(0, 1), seed 7), "
                      "3 classes");
  check_synthetic_sample(ds, 7, 0);
  check_synthetic_sample(ds, 7, 499);
  check_synthetic_sample(ds, 7, 0); /* again: the same */
  /* Moments of N(0, 1), and every class drawn. */
  double s = 0, s2 = 0;
  int64_t seen[3] = {0};
  for (int64_t i = 0; i < 500; i++) {
    torc_tensor *in, *tg;
    assert_ok(torc_dataset_get(ds, i, &in, &tg));
    const float *v = torc_data(in);
    for (int j = 0; j < 16; j++) {
      s += v[j];
      s2 += (double)v[j] * v[j];
    }
    int64_t c = *(const int64_t *)torc_data(tg);
    assert_in_range(c, 0, 2);
    seen[c]++;
    release2(in, tg);
  }
  double mean = s / 8000, var = s2 / 8000 - mean * mean;
  assert_true(fabs(mean) < 0.05);
  assert_true(fabs(var - 1) < 0.08);
  for (int c = 0; c < 3; c++)
    assert_true(seen[c] > 120);
  torc_dataset_close(ds);
  /* Another seed gives other values; defaults fill classes and samples. */
  ds = open_ds("synthetic", 1, "shape", "1,4,4");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 1000);
  assert_int_equal(torc_dataset_num_classes(ds), 10);
  torc_tensor *in, *tg;
  assert_ok(torc_dataset_get(ds, 0, &in, &tg));
  assert_true(*(const float *)torc_data(in) ==
              (float)torc_philox_normal(0, 0));
  assert_true(*(const float *)torc_data(in) !=
              (float)torc_philox_normal(7, 0));
  release2(in, tg);
  torc_dataset_close(ds);
}

typedef struct syn_job {
  torc_dataset *ds;
  int first;
  int bad;
} syn_job;

/* Reads every 4th sample from `first` and compares with the formula. */
static void *syn_thread(void *arg) {
  syn_job *job = arg;
  for (int rep = 0; rep < 3; rep++)
    for (int64_t i = job->first; i < 200; i += 4) {
      torc_tensor *in, *tg;
      if (torc_dataset_get(job->ds, i, &in, &tg) != TORC_OK) {
        job->bad++;
        continue;
      }
      const float *v = torc_data(in);
      for (int j = 0; j < 16; j++)
        if (v[j] != (float)torc_philox_normal(11, (uint64_t)i * 16 +
                                                      (uint64_t)j))
          job->bad++;
      release2(in, tg);
    }
  return NULL;
}

static void test_synthetic_threads(void **state) {
  (void)state;
  torc_dataset *ds = open_ds("synthetic", 4, "shape", "16", "classes", "3",
                             "samples", "200", "seed", "11");
  assert_torc(ds);
  pthread_t th[4];
  syn_job jobs[4];
  for (int t = 0; t < 4; t++) {
    jobs[t] = (syn_job){ds, t, 0};
    assert_int_equal(pthread_create(&th[t], NULL, syn_thread, &jobs[t]), 0);
  }
  for (int t = 0; t < 4; t++) {
    pthread_join(th[t], NULL);
    assert_int_equal(jobs[t].bad, 0);
  }
  torc_dataset_close(ds);
}

static void test_synthetic_bad_keys(void **state) {
  (void)state;
  assert_open_fails(open_ds("synthetic", 1, "shape", "1,x,3"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'shape' = '1,x,3'");
  assert_open_fails(open_ds("synthetic", 1, "shape", "0"), TORC_ERR_INVALID);
  assert_open_fails(open_ds("synthetic", 1, "shape", ""), TORC_ERR_INVALID);
  assert_open_fails(open_ds("synthetic", 2, "shape", "4", "classes", "0"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'classes' = '0'");
  assert_open_fails(open_ds("synthetic", 2, "shape", "4", "samples", "-3"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'samples' = '-3'");
  assert_open_fails(open_ds("synthetic", 2, "shape", "4", "seed", "abc"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "key 'seed'");
  assert_open_fails(open_ds("synthetic", 2, "shape", "4", "sampels", "3"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "did you mean 'samples'");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_plugin_registers_sources),
      T(test_idx_raw),
      T(test_idx_gzip),
      T(test_idx_gzip_cache),
      T(test_idx_missing_file),
      T(test_idx_unreadable),
      T(test_idx_truncated_gzip),
      T(test_idx_wrong_magic),
      T(test_idx_size_mismatch),
      T(test_idx_count_mismatch),
      T(test_idx_fashion_mnist),
      T(test_synthetic_values),
      T(test_synthetic_threads),
      T(test_synthetic_bad_keys),
  };
  return cmocka_run_group_tests(tests, group_setup, data_tmp_teardown);
}
