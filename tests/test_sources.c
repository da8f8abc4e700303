/* tests/test_sources.c — the data plugin's sources (plugins/data): idx,
 * csv, npy, image_folder and synthetic, opened through torc_dataset_open.
 * Every input file is written at run time into a temporary folder (IDX raw
 * and gzip with zlib, CSV text, .npy bytes, PNG with libpng, JPEG with
 * libjpeg); each source's values and every bad-input error it reports are
 * checked, and the real Fashion-MNIST (Debian's dataset-fashion-mnist) is
 * read when installed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "testutil.h"
#include "data_testutil.h"

#include "torc/data.h"
#include "torc/philox.h"

/* ---- log capture ---- */

static char log_buf[65536];

static void log_cb(int level, const char *line, void *user) {
  (void)user;
  size_t used = strlen(log_buf);
  if (used + 1 < sizeof log_buf)
    snprintf(log_buf + used, sizeof log_buf - used, "[%d] %s\n", level, line);
}

static int count_substr(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* ---- fixtures (the others are in data_testutil.h) ---- */

static int group_setup(void **state) {
  (void)state;
  return test_make_tmpdir(tmp_root, sizeof tmp_root, "torc-sources");
}

/* data_setup and data_teardown, with torc's log captured into log_buf. */
static int setup(void **state) {
  log_buf[0] = '\0';
  torc_set_log_level(TORC_LOG_INFO);
  torc_set_log_callback(log_cb, NULL);
  return data_setup(state);
}

static int teardown(void **state) {
  int rc = data_teardown(state);
  torc_set_log_callback(NULL, NULL);
  torc_set_log_level(TORC_LOG_WARN);
  return rc;
}

/* ---- reading samples ---- */

/* Sample i; asserts the input is a contiguous cpu tensor of dtype in_dt
 * and shape in_shape (the callers check the target). */
static void get_sample(torc_dataset *ds, int64_t i, torc_dtype in_dt,
                       const int64_t *in_shape, int in_ndim,
                       torc_tensor **in, torc_tensor **tg) {
  assert_ok(torc_dataset_get(ds, i, in, tg));
  assert_int_equal(torc_dtype_of(*in), in_dt);
  assert_int_equal(torc_ndim(*in), in_ndim);
  for (int d = 0; d < in_ndim; d++)
    assert_int_equal(torc_shape(*in)[d], in_shape[d]);
  assert_int_equal(torc_device_of(*in).type, TORC_CPU.type);
  assert_true(torc_is_contiguous(*in));
}

/* A class target: i64, 0-dim, value cls. */
static void assert_class(const torc_tensor *tg, int64_t cls) {
  assert_int_equal(torc_dtype_of(tg), TORC_I64);
  assert_int_equal(torc_ndim(tg), 0);
  assert_int_equal(*(const int64_t *)torc_data(tg), cls);
}

static void release2(torc_tensor *a, torc_tensor *b) {
  torc_release(a);
  torc_release(b);
}

/* Skips a permission check when running as root, which reads anything. */
static int running_as_root(const char *what) {
  if (geteuid() == 0) {
    printf("[   SKIP   ] %s: running as root, which can read a chmod 000 "
           "file; the unreadable-file check needs a normal user\n",
           what);
    return 1;
  }
  return 0;
}

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
 * csv
 * ==================================================================== */

static void check_features(const torc_tensor *in, const float *want, int n) {
  assert_int_equal(torc_dtype_of(in), TORC_F32);
  assert_int_equal(torc_ndim(in), 1);
  assert_int_equal(torc_shape(in)[0], n);
  const float *v = torc_data(in);
  for (int i = 0; i < n; i++)
    if (v[i] != want[i]) {
      print_error("feature %d: got %g, expected %g\n", i, (double)v[i],
                  (double)want[i]);
      fail();
    }
}

static void test_csv_classification(void **state) {
  (void)state;
  write_text(P("iris.csv"), "sepal,petal,species\n"
                            "5.1,1.4,virginica\n"
                            "4.9, 1.5 ,setosa\n"
                            "\n"
                            "6.3,-2e-1,versicolor\n"
                            "5.0,1.0,setosa\n");
  torc_dataset *ds = open_ds("csv", 1, "path", P("iris.csv"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  const char *d = torc_dataset_describe(ds);
  assert_contains(d, "4 samples, input [2] f32, 3 classes");
  assert_contains(d, "column 'species'");
  assert_contains(d, "setosa, versicolor, virginica");
  char name[64];
  assert_ok(torc_dataset_class_name(ds, 0, name, sizeof name));
  assert_string_equal(name, "setosa");
  assert_ok(torc_dataset_class_name(ds, 2, name, sizeof name));
  assert_string_equal(name, "virginica");
  /* The mapping is logged once, at info level. */
  assert_int_equal(count_substr(log_buf, "0 = setosa, 1 = versicolor, 2 = "
                                         "virginica"),
                   1);
  assert_contains(log_buf, "[2] csv:");
  static const float f0[2] = {5.1f, 1.4f}, f1[2] = {4.9f, 1.5f},
                     f2[2] = {6.3f, -0.2f}, f3[2] = {5.0f, 1.0f};
  const float *want[4] = {f0, f1, f2, f3};
  const int64_t cls[4] = {2, 0, 1, 0};
  const int64_t shape[1] = {2};
  for (int64_t i = 0; i < 4; i++) {
    torc_tensor *in, *tg;
    get_sample(ds, i, TORC_F32, shape, 1, &in, &tg);
    check_features(in, want[i], 2);
    assert_class(tg, cls[i]);
    release2(in, tg);
  }
  torc_dataset_close(ds);
}

static void test_csv_numeric_labels(void **state) {
  (void)state;
  /* "10" sorts after "9": numeric order when every label is a number. */
  write_text(P("num.csv"), "x,y\n1,10\n2,9\n3,2\n4,9\n");
  torc_dataset *ds = open_ds("csv", 1, "path", P("num.csv"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  assert_contains(torc_dataset_describe(ds), "numeric order: 2, 9, 10");
  const int64_t want[4] = {2, 1, 0, 1};
  const int64_t shape[1] = {1};
  for (int64_t i = 0; i < 4; i++) {
    torc_tensor *in, *tg;
    get_sample(ds, i, TORC_F32, shape, 1, &in, &tg);
    assert_class(tg, want[i]);
    release2(in, tg);
  }
  char name[16];
  assert_ok(torc_dataset_class_name(ds, 2, name, sizeof name));
  assert_string_equal(name, "10");
  torc_dataset_close(ds);
}

static void test_csv_columns(void **state) {
  (void)state;
  write_text(P("cols.csv"),
             "id,label,a,b,c\n7,cat,1,2,3\n8,dog,4,5,6\n");
  /* Label by name, features a subset (in the order given). */
  torc_dataset *ds = open_ds("csv", 3, "path", P("cols.csv"), "label_column",
                             "label", "feature_columns", "c, a");
  assert_torc(ds);
  const int64_t shape[1] = {2};
  torc_tensor *in, *tg;
  get_sample(ds, 1, TORC_F32, shape, 1, &in, &tg);
  static const float w1[2] = {6, 4};
  check_features(in, w1, 2);
  assert_class(tg, 1);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Label by 0-based index; every other column is a feature. */
  ds = open_ds("csv", 2, "path", P("cols.csv"), "label_column", "1");
  assert_torc(ds);
  const int64_t shape4[1] = {4};
  get_sample(ds, 0, TORC_F32, shape4, 1, &in, &tg);
  static const float w0[4] = {7, 1, 2, 3};
  check_features(in, w0, 4);
  assert_class(tg, 0);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Unknown column: the columns are listed. */
  assert_open_fails(open_ds("csv", 2, "path", P("cols.csv"), "label_column",
                            "lable"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "'lable' is not a column");
  assert_contains(torc_last_error(), "'label'");
  assert_open_fails(open_ds("csv", 2, "path", P("cols.csv"), "label_column",
                            "5"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "index below 5");
  /* A feature that is also the target. */
  assert_open_fails(open_ds("csv", 3, "path", P("cols.csv"), "label_column",
                            "label", "feature_columns", "a,label"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "both a feature and a target");
  /* A label column of text read as a feature. */
  assert_open_fails(open_ds("csv", 2, "path", P("cols.csv"), "label_column",
                            "id"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:3: 'cat' is not a number (column "
                                     "'label')");
}

static void test_csv_regression(void **state) {
  (void)state;
  write_text(P("reg.csv"), "x1,y1,x2,y2\n1,0.5,2,-1\n3,1.5,4,-2\n");
  torc_dataset *ds = open_ds("csv", 3, "path", P("reg.csv"), "task",
                             "regression", "target_columns", "y1,y2");
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 0);
  assert_contains(torc_dataset_describe(ds),
                  "2 samples, input [2] f32, regression targets [2] f32");
  const int64_t shape[1] = {2};
  torc_tensor *in, *tg;
  get_sample(ds, 1, TORC_F32, shape, 1, &in, &tg);
  static const float wi[2] = {3, 4}, wt[2] = {1.5f, -2};
  check_features(in, wi, 2);
  check_features(tg, wt, 2);
  release2(in, tg);
  torc_dataset_close(ds);
  /* One target: label_column (default last). */
  ds = open_ds("csv", 2, "path", P("reg.csv"), "task", "regression");
  assert_torc(ds);
  get_sample(ds, 0, TORC_F32, (const int64_t[1]){3}, 1, &in, &tg);
  static const float wt1[1] = {-1};
  check_features(tg, wt1, 1);
  release2(in, tg);
  torc_dataset_close(ds);
  /* A non-numeric regression target. */
  write_text(P("reg-bad.csv"), "x,y\n1,2\n3,n/a\n");
  assert_open_fails(open_ds("csv", 2, "path", P("reg-bad.csv"), "task",
                            "regression"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "reg-bad.csv:3:3: 'n/a' is not a number "
                                     "(column 'y')");
  assert_contains(torc_last_error(), "regression target");
  /* Bad task; target_columns without regression. */
  assert_open_fails(open_ds("csv", 2, "path", P("reg.csv"), "task", "regress"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "classification or regression");
  assert_open_fails(open_ds("csv", 2, "path", P("reg.csv"), "target_columns",
                            "y1"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "task = regression");
}

static void test_csv_formats(void **state) {
  (void)state;
  /* No header, semicolons, CRLF, a byte-order mark, a quoted label with
   * the delimiter and a doubled quote. */
  write_text(P("fmt.csv"), "\xEF\xBB\xBF"
                           "1;2;\"a;b\"\r\n"
                           "3;4;\"say \"\"hi\"\"\"\r\n");
  torc_dataset *ds = open_ds("csv", 3, "path", P("fmt.csv"), "header", "no",
                             "delimiter", "semicolon");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 2);
  char name[32];
  assert_ok(torc_dataset_class_name(ds, 0, name, sizeof name));
  assert_string_equal(name, "a;b");
  assert_ok(torc_dataset_class_name(ds, 1, name, sizeof name));
  assert_string_equal(name, "say \"hi\"");
  torc_tensor *in, *tg;
  get_sample(ds, 0, TORC_F32, (const int64_t[1]){2}, 1, &in, &tg);
  static const float w0[2] = {1, 2};
  check_features(in, w0, 2);
  assert_class(tg, 0);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Tabs, header=no with the label first. */
  write_text(P("fmt.tsv"), "b\t1.5\t2\na\t3\t4\n");
  ds = open_ds("csv", 4, "path", P("fmt.tsv"), "header", "no", "delimiter",
               "tab", "label_column", "0");
  assert_torc(ds);
  get_sample(ds, 1, TORC_F32, (const int64_t[1]){2}, 1, &in, &tg);
  static const float w1[2] = {3, 4};
  check_features(in, w1, 2);
  assert_class(tg, 0);
  release2(in, tg);
  torc_dataset_close(ds);
  /* Bad delimiter, bad header value. */
  assert_open_fails(open_ds("csv", 2, "path", P("fmt.tsv"), "delimiter",
                            "::"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "one character");
  assert_open_fails(open_ds("csv", 2, "path", P("fmt.tsv"), "header",
                            "maybe"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "yes or no");
  /* An unterminated quote, text after a closing quote. */
  write_text(P("q1.csv"), "a,b\n1,\"x\n");
  assert_open_fails(open_ds("csv", 1, "path", P("q1.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "q1.csv:2:3: a quoted field has no "
                                     "closing quote");
  write_text(P("q2.csv"), "a,b\n1,\"x\"y\n");
  assert_open_fails(open_ds("csv", 1, "path", P("q2.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "q2.csv:2:6: text after the closing "
                                     "quote");
}

static void test_csv_ragged(void **state) {
  (void)state;
  write_text(P("rag.csv"), "a,b,c,d,e,f\n1,2,3,4,5,x\n1,2,3,4,y\n");
  assert_open_fails(open_ds("csv", 1, "path", P("rag.csv")), TORC_ERR_IO);
  char want[600];
  snprintf(want, sizeof want, "%s:3: row has 5 fields, the header has 6",
           P("rag.csv"));
  assert_contains(torc_last_error(), want);
  /* Without a header, the first row sets the width. */
  write_text(P("rag2.csv"), "1,2,a\n\n1,2,3,b\n");
  assert_open_fails(open_ds("csv", 2, "path", P("rag2.csv"), "header", "no"),
                    TORC_ERR_IO);
  snprintf(want, sizeof want, "%s:3: row has 4 fields, the first row has 3",
           P("rag2.csv"));
  assert_contains(torc_last_error(), want);
}

static void test_csv_not_a_number(void **state) {
  (void)state;
  write_text(P("nan.csv"), "name,age,class\nx,1,a\nx,abc,b\n");
  assert_open_fails(open_ds("csv", 2, "path", P("nan.csv"),
                            "feature_columns", "age"),
                    TORC_ERR_IO);
  char want[600];
  snprintf(want, sizeof want,
           "%s:3:3: 'abc' is not a number (column 'age')", P("nan.csv"));
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "feature_columns");
  /* "name" is text: a feature by default. */
  assert_open_fails(open_ds("csv", 1, "path", P("nan.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:1: 'x' is not a number (column "
                                     "'name')");
  /* Empty fields and non-finite values. */
  write_text(P("nan2.csv"), "a,b\n,1\n");
  assert_open_fails(open_ds("csv", 1, "path", P("nan2.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:1: '' is not a number (column 'a')");
  write_text(P("nan3.csv"), "a,b\n1,1\ninf,1\n");
  assert_open_fails(open_ds("csv", 1, "path", P("nan3.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":3:1: 'inf' is not a finite number");
  /* An empty label. */
  write_text(P("nan4.csv"), "a,b\n1,\n");
  assert_open_fails(open_ds("csv", 1, "path", P("nan4.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), ":2:3: the label (column 'b') is empty");
}

static void test_csv_files(void **state) {
  (void)state;
  assert_open_fails(open_ds("csv", 1, "path", P("absent.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "absent.csv' does not exist");
  write_text(P("empty.csv"), "\n\n");
  assert_open_fails(open_ds("csv", 1, "path", P("empty.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is empty");
  write_text(P("head.csv"), "a,b\n");
  assert_open_fails(open_ds("csv", 1, "path", P("head.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "no data rows");
  write_text(P("one.csv"), "a\n1\n");
  assert_open_fails(open_ds("csv", 1, "path", P("one.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "check the delimiter");
  if (running_as_root("csv unreadable file"))
    return;
  write_text(P("locked.csv"), "a,b\n1,2\n");
  assert_int_equal(chmod(P("locked.csv"), 0), 0);
  assert_open_fails(open_ds("csv", 1, "path", P("locked.csv")), TORC_ERR_IO);
  assert_contains(torc_last_error(), "not readable");
  chmod(P("locked.csv"), 0644);
}

/* ======================================================================
 * npy
 * ==================================================================== */

/* write_npy_raw and write_npy are in data_testutil.h. */

static void test_npy_classification(void **state) {
  (void)state;
  float x[4 * 2 * 3];
  for (int i = 0; i < 24; i++)
    x[i] = (float)i * 0.5f - 3;
  const int64_t y[4] = {1, 0, 4, 1};
  write_npy(P("x.npy"), 1, "<f4", "(4, 2, 3)", x, sizeof x);
  write_npy(P("y.npy"), 1, "<i8", "(4,)", y, sizeof y);
  torc_dataset *ds = open_ds("npy", 2, "inputs", P("x.npy"), "targets",
                             P("y.npy"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 5);
  assert_string_equal(torc_dataset_describe(ds),
                      "4 samples, input [2, 3] f32, 5 classes");
  const int64_t shape[2] = {2, 3};
  for (int64_t i = 0; i < 4; i += 3) {
    torc_tensor *in, *tg;
    get_sample(ds, i, TORC_F32, shape, 2, &in, &tg);
    assert_memory_equal(torc_data(in), x + 6 * i, 6 * sizeof(float));
    assert_class(tg, y[i]);
    release2(in, tg);
  }
  torc_dataset_close(ds);
}

static void test_npy_versions_and_dtypes(void **state) {
  (void)state;
  /* Version 2, u8 images; version 3, f64 regression targets [N, 2]. */
  uint8_t img[3 * 4];
  for (int i = 0; i < 12; i++)
    img[i] = (uint8_t)(250 + i % 6);
  const double t[3 * 2] = {0.5, -1, 2.25, 3, 1e-3, 7};
  write_npy(P("img.npy"), 2, "|u1", "(3, 4)", img, sizeof img);
  write_npy(P("t.npy"), 3, "<f8", "(3, 2)", t, sizeof t);
  torc_dataset *ds = open_ds("npy", 2, "inputs", P("img.npy"), "targets",
                             P("t.npy"));
  assert_torc(ds);
  assert_int_equal(torc_dataset_num_classes(ds), 0);
  assert_string_equal(torc_dataset_describe(ds),
                      "3 samples, input [4] u8, regression targets [2] f32");
  torc_tensor *in, *tg;
  get_sample(ds, 2, TORC_U8, (const int64_t[1]){4}, 1, &in, &tg);
  assert_memory_equal(torc_data(in), img + 8, 4);
  const float wt[2] = {1e-3f, 7};
  check_features(tg, wt, 2);
  release2(in, tg);
  torc_dataset_close(ds);
  /* i4 class targets; f64 inputs; 1-D float targets give [1]. */
  const int32_t c[3] = {2, 2, 0};
  const double x[3] = {1.5, 2.5, 3.5};
  write_npy(P("c.npy"), 1, "<i4", "(3,)", c, sizeof c);
  write_npy(P("x64.npy"), 1, "<f8", "(3,)", x, sizeof x);
  ds = open_ds("npy", 2, "inputs", P("x64.npy"), "targets", P("c.npy"));
  assert_torc(ds);
  get_sample(ds, 1, TORC_F64, NULL, 0, &in, &tg);
  assert_true(*(const double *)torc_data(in) == 2.5);
  assert_class(tg, 2);
  release2(in, tg);
  torc_dataset_close(ds);
  const float r[3] = {1, 2, 3};
  write_npy(P("r.npy"), 1, "<f4", "(3,)", r, sizeof r);
  ds = open_ds("npy", 2, "inputs", P("img.npy"), "targets", P("r.npy"));
  assert_torc(ds);
  get_sample(ds, 1, TORC_U8, (const int64_t[1]){4}, 1, &in, &tg);
  const float wr[1] = {2};
  check_features(tg, wr, 1);
  release2(in, tg);
  torc_dataset_close(ds);
}

static void test_npy_bad_header(void **state) {
  (void)state;
  const int64_t y[2] = {0, 1};
  write_npy(P("by.npy"), 1, "<i8", "(2,)", y, sizeof y);
  /* Not a .npy file. */
  write_text(P("bad-magic.npy"), "PK\x03\x04 this is a zip (an .npz)");
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-magic.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "is not a .npy file");
  assert_contains(torc_last_error(), "bad-magic.npy");
  /* A header that is not a dict, one with a missing key, an unknown
   * format version, a header longer than the file. */
  write_npy_raw(P("bad-dict.npy"), 1, "[1, 2, 3]", y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-dict.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "bad header: it is not a Python dict");
  write_npy_raw(P("bad-key.npy"), 1, "{'descr': '<i8', 'shape': (2,), }", y,
                sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-key.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "'fortran_order' is missing");
  write_npy_raw(P("bad-shape.npy"), 1,
                "{'descr': '<i8', 'fortran_order': False, 'shape': (2, x), }",
                y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-shape.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "'shape'");
  size_t n;
  unsigned char *b = test_read_file(P("by.npy"), &n);
  b[6] = 9;
  test_write_file(P("bad-version.npy"), b, n);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-version.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "format version 9.0");
  b[6] = 1;
  test_write_file(P("bad-cut.npy"), b, 40);
  free(b);
  assert_open_fails(open_ds("npy", 2, "inputs", P("bad-cut.npy"),
                            "targets", P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "ends inside the header");
  /* Data shorter than the shape says. */
  write_npy(P("short.npy"), 1, "<i8", "(3,)", y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("short.npy"), "targets",
                            P("by.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "holds 16 bytes of data but its "
                                     "header's shape [3] of i64 needs 24");
  assert_contains(torc_last_error(), "truncated");
}

static void test_npy_unsupported(void **state) {
  (void)state;
  const int64_t y[2] = {0, 1};
  const float x[4] = {1, 2, 3, 4};
  write_npy(P("uy.npy"), 1, "<i8", "(2,)", y, sizeof y);
  /* Big-endian and complex dtypes. */
  write_npy(P("be.npy"), 1, ">f4", "(2, 2)", x, sizeof x);
  assert_open_fails(open_ds("npy", 2, "inputs", P("be.npy"), "targets",
                            P("uy.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "dtype '>f4'");
  assert_contains(torc_last_error(), "astype('<f4')");
  write_npy(P("c8.npy"), 1, "<c8", "(2, 1)", x, sizeof x);
  assert_open_fails(open_ds("npy", 2, "inputs", P("c8.npy"), "targets",
                            P("uy.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "dtype '<c8'");
  /* Fortran order. */
  write_npy_raw(P("fo.npy"), 1,
                "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                x, sizeof x);
  assert_open_fails(open_ds("npy", 2, "inputs", P("fo.npy"), "targets",
                            P("uy.npy")),
                    TORC_ERR_UNSUPPORTED);
  assert_contains(torc_last_error(), "Fortran order");
  assert_contains(torc_last_error(), "ascontiguousarray");
  /* Integer targets that are not one index per sample. */
  write_npy(P("x22.npy"), 1, "<f4", "(2, 2)", x, sizeof x);
  const int64_t y2[4] = {0, 1, 1, 0};
  write_npy(P("y22.npy"), 1, "<i8", "(2, 2)", y2, sizeof y2);
  assert_open_fails(open_ds("npy", 2, "inputs", P("x22.npy"), "targets",
                            P("y22.npy")),
                    TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "class indices");
  /* A negative class index. */
  const int64_t yn[2] = {0, -1};
  write_npy(P("yn.npy"), 1, "<i8", "(2,)", yn, sizeof yn);
  assert_open_fails(open_ds("npy", 2, "inputs", P("x22.npy"), "targets",
                            P("yn.npy")),
                    TORC_ERR_RANGE);
  assert_contains(torc_last_error(), "class index -1 at row 1");
}

static void test_npy_length_mismatch(void **state) {
  (void)state;
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const int64_t y[2] = {0, 1};
  write_npy(P("lx.npy"), 1, "<f4", "(3, 2)", x, sizeof x);
  write_npy(P("ly.npy"), 1, "<i8", "(2,)", y, sizeof y);
  assert_open_fails(open_ds("npy", 2, "inputs", P("lx.npy"), "targets",
                            P("ly.npy")),
                    TORC_ERR_SHAPE);
  assert_contains(torc_last_error(), "has 3 rows");
  assert_contains(torc_last_error(), "has 2");
  assert_open_fails(open_ds("npy", 2, "inputs", P("nope.npy"), "targets",
                            P("ly.npy")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "does not exist");
}

/* ======================================================================
 * image_folder
 * ==================================================================== */

/* Writes a PNG with libpng: color_type PNG_COLOR_TYPE_*, 8 bits, rows of
 * w * channels bytes. */
static void write_png(const char *path, int w, int h, int color_type,
                      const uint8_t *pix) {
  int ch = color_type == PNG_COLOR_TYPE_RGB          ? 3
           : color_type == PNG_COLOR_TYPE_RGB_ALPHA  ? 4
           : color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                     : 1;
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  assert_non_null(info);
  if (setjmp(png_jmpbuf(png)))
    fail_msg("libpng failed writing %s", path);
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < h; y++)
    png_write_row(png, pix + (size_t)y * w * ch);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
}

/* Writes an RGB JPEG (quality 100) with libjpeg. */
static void write_jpeg(const char *path, int w, int h, const uint8_t *rgb) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  jpeg_stdio_dest(&c, f);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  fclose(f);
}

/* ROOT/cat/a.png (RGB 3x2), ROOT/cat/b.jpg (8x8 of (200, 100, 50)),
 * ROOT/dog/c.png (gray 2x2), ROOT/dog/d.png (RGBA 2x1), and a text file
 * that is ignored. */
static uint8_t img_a[2 * 3 * 3];

static void make_image_tree(const char *root) {
  char p[1024];
  make_dir(root);
  snprintf(p, sizeof p, "%s/cat", root);
  make_dir(p);
  snprintf(p, sizeof p, "%s/dog", root);
  make_dir(p);
  for (int y = 0; y < 2; y++)
    for (int x = 0; x < 3; x++) {
      uint8_t *px = img_a + (y * 3 + x) * 3;
      px[0] = (uint8_t)(10 * y + x);
      px[1] = (uint8_t)(100 + x);
      px[2] = (uint8_t)(200 - y);
    }
  snprintf(p, sizeof p, "%s/cat/a.png", root);
  write_png(p, 3, 2, PNG_COLOR_TYPE_RGB, img_a);
  uint8_t solid[8 * 8 * 3];
  for (int i = 0; i < 64; i++) {
    solid[3 * i] = 200;
    solid[3 * i + 1] = 100;
    solid[3 * i + 2] = 50;
  }
  snprintf(p, sizeof p, "%s/cat/b.jpg", root);
  write_jpeg(p, 8, 8, solid);
  const uint8_t gray[4] = {0, 50, 100, 255};
  snprintf(p, sizeof p, "%s/dog/c.png", root);
  write_png(p, 2, 2, PNG_COLOR_TYPE_GRAY, gray);
  const uint8_t rgba[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  snprintf(p, sizeof p, "%s/dog/d.png", root);
  write_png(p, 2, 1, PNG_COLOR_TYPE_RGB_ALPHA, rgba);
  snprintf(p, sizeof p, "%s/dog/notes.txt", root);
  write_text(p, "not an image\n");
}

static void test_image_folder_values(void **state) {
  (void)state;
  const char *root = P("imgs");
  make_image_tree(root);
  torc_dataset *ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 2);
  assert_string_equal(torc_dataset_describe(ds),
                      "4 samples, input [3, H, W] u8 (H 1 to 8, W 2 to 8), "
                      "2 classes (cat, dog)");
  char name[32];
  assert_ok(torc_dataset_class_name(ds, 1, name, sizeof name));
  assert_string_equal(name, "dog");
  assert_contains(log_buf, "ignored 1 entry");
  assert_contains(log_buf, "notes.txt");
  torc_tensor *in, *tg;
  /* a.png: RGB, exact, [3, 2, 3] channel-major. */
  get_sample(ds, 0, TORC_U8, (const int64_t[3]){3, 2, 3}, 3, &in, &tg);
  const uint8_t *v = torc_data(in);
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 6; i++)
      assert_int_equal(v[c * 6 + i], img_a[i * 3 + c]);
  assert_class(tg, 0);
  release2(in, tg);
  /* b.jpg: lossy, close to (200, 100, 50). */
  get_sample(ds, 1, TORC_U8, (const int64_t[3]){3, 8, 8}, 3, &in, &tg);
  v = torc_data(in);
  const int want[3] = {200, 100, 50};
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 64; i++)
      assert_in_range(v[c * 64 + i], want[c] - 3, want[c] + 3);
  assert_class(tg, 0);
  release2(in, tg);
  /* c.png: gray replicated to three channels. */
  get_sample(ds, 2, TORC_U8, (const int64_t[3]){3, 2, 2}, 3, &in, &tg);
  v = torc_data(in);
  const uint8_t g[4] = {0, 50, 100, 255};
  for (int c = 0; c < 3; c++)
    assert_memory_equal(v + 4 * c, g, 4);
  assert_class(tg, 1);
  release2(in, tg);
  /* d.png: alpha dropped. */
  get_sample(ds, 3, TORC_U8, (const int64_t[3]){3, 1, 2}, 3, &in, &tg);
  v = torc_data(in);
  const uint8_t rgb[6] = {1, 5, 2, 6, 3, 7};
  assert_memory_equal(v, rgb, 6);
  assert_class(tg, 1);
  release2(in, tg);
  torc_dataset_close(ds);
  /* channels = 1: ITU-R 601 luma. */
  ds = open_ds("image_folder", 2, "root", root, "channels", "1");
  assert_torc(ds);
  get_sample(ds, 0, TORC_U8, (const int64_t[3]){1, 2, 3}, 3, &in, &tg);
  v = torc_data(in);
  for (int i = 0; i < 6; i++) {
    double l = 0.299 * img_a[3 * i] + 0.587 * img_a[3 * i + 1] +
               0.114 * img_a[3 * i + 2];
    assert_in_range(v[i], (int)l - 1, (int)l + 2);
  }
  release2(in, tg);
  get_sample(ds, 1, TORC_U8, (const int64_t[3]){1, 8, 8}, 3, &in, &tg);
  v = torc_data(in);
  int l = (int)(0.299 * 200 + 0.587 * 100 + 0.114 * 50);
  assert_in_range(v[10], l - 3, l + 3);
  release2(in, tg);
  torc_dataset_close(ds);
  assert_open_fails(open_ds("image_folder", 2, "root", root, "channels",
                            "4"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "not 1 or 3");
  assert_open_fails(open_ds("image_folder", 2, "root", root, "on_error",
                            "ignore"),
                    TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "error or skip");
}

static void test_image_folder_layout(void **state) {
  (void)state;
  char p[1024];
  /* Images directly in the root. */
  const char *flat = P("flat");
  make_dir(flat);
  snprintf(p, sizeof p, "%s/x.png", flat);
  write_png(p, 2, 1, PNG_COLOR_TYPE_RGB, img_a);
  assert_open_fails(open_ds("image_folder", 1, "root", flat), TORC_ERR_IO);
  assert_contains(torc_last_error(), "unknown class folder layout");
  assert_contains(torc_last_error(), "directly in the root folder");
  assert_contains(torc_last_error(), "x.png");
  assert_contains(torc_last_error(), "ROOT/CLASS/IMAGE");
  /* An empty root, and one holding only non-image files. */
  const char *empty = P("empty-root");
  make_dir(empty);
  assert_open_fails(open_ds("image_folder", 1, "root", empty), TORC_ERR_IO);
  assert_contains(torc_last_error(), "unknown class folder layout: no class "
                                     "folders");
  snprintf(p, sizeof p, "%s/README", empty);
  write_text(p, "readme\n");
  assert_open_fails(open_ds("image_folder", 1, "root", empty), TORC_ERR_IO);
  assert_contains(torc_last_error(), "no class folders");
  /* An empty class folder. */
  const char *hole = P("hole");
  make_dir(hole);
  snprintf(p, sizeof p, "%s/a", hole);
  make_dir(p);
  snprintf(p, sizeof p, "%s/a/1.png", hole);
  write_png(p, 2, 1, PNG_COLOR_TYPE_RGB, img_a);
  snprintf(p, sizeof p, "%s/b", hole);
  make_dir(p);
  assert_open_fails(open_ds("image_folder", 1, "root", hole), TORC_ERR_IO);
  assert_contains(torc_last_error(), "unknown class folder layout: class "
                                     "folder 'b' holds no PNG or JPEG");
  /* A missing root; a file as the root. */
  assert_open_fails(open_ds("image_folder", 1, "root", P("no-root")),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "does not exist");
  snprintf(p, sizeof p, "%s/a/1.png", hole);
  assert_open_fails(open_ds("image_folder", 1, "root", p), TORC_ERR_IO);
  assert_contains(torc_last_error(), "is a file, not a folder");
}

/* Position of `tag` in b, or -1. */
static long find_tag(const unsigned char *b, size_t n, const char *tag,
                     size_t tl) {
  for (size_t i = 0; i + tl <= n; i++)
    if (memcmp(b + i, tag, tl) == 0)
      return (long)i;
  return -1;
}

/* ROOT/ok/{good.png, good.jpg}, ROOT/bad/{hdr.png, hdr.jpg} (header
 * corrupt: a text file and a JPEG whose markers are garbage) and
 * ROOT/late/{data.png, data.jpg} (header fine, data corrupt: an IDAT byte
 * flipped, a JPEG cut after its scan header). */
static void make_corrupt_tree(const char *root) {
  char p[1024];
  make_dir(root);
  static const char *const dirs[] = {"bad", "late", "ok"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
    make_dir(p);
  }
  uint8_t noise[16 * 16 * 3];
  for (int i = 0; i < (int)sizeof noise; i++)
    noise[i] = (uint8_t)torc_philox_randint(3, (uint64_t)i, 0, 256);
  snprintf(p, sizeof p, "%s/ok/good.png", root);
  write_png(p, 16, 16, PNG_COLOR_TYPE_RGB, noise);
  snprintf(p, sizeof p, "%s/ok/good.jpg", root);
  write_jpeg(p, 16, 16, noise);
  snprintf(p, sizeof p, "%s/bad/hdr.png", root);
  write_text(p, "this is not a PNG at all\n");
  snprintf(p, sizeof p, "%s/bad/hdr.jpg", root);
  test_write_file(p, "\xFF\xD8\xFF\xE0\x00\x04xx\xFF\xC0\x00\x02zzzz", 16);
  /* data.png: the good PNG with one IDAT data byte flipped (CRC error). */
  size_t n;
  snprintf(p, sizeof p, "%s/ok/good.png", root);
  unsigned char *b = test_read_file(p, &n);
  long at = find_tag(b, n, "IDAT", 4);
  assert_true(at > 0);
  b[at + 6] ^= 0x55;
  snprintf(p, sizeof p, "%s/late/data.png", root);
  test_write_file(p, b, n);
  free(b);
  /* data.jpg: cut a few bytes into the entropy-coded data. */
  snprintf(p, sizeof p, "%s/ok/good.jpg", root);
  b = test_read_file(p, &n);
  at = find_tag(b, n, "\xFF\xDA", 2);
  assert_true(at > 0);
  size_t seg = (size_t)b[at + 2] << 8 | b[at + 3];
  snprintf(p, sizeof p, "%s/late/data.jpg", root);
  test_write_file(p, b, (size_t)at + 2 + seg + 8);
  free(b);
}

static void test_image_folder_corrupt(void **state) {
  (void)state;
  const char *root = P("corrupt");
  make_corrupt_tree(root);
  /* on_error = error: the first bad header stops the open, naming it. */
  assert_open_fails(open_ds("image_folder", 1, "root", root), TORC_ERR_IO);
  char want[1024];
  snprintf(want, sizeof want, "corrupt image '%s/bad/hdr.jpg'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "on_error = skip");
  /* Only the PNG with a bad signature. */
  char p[1024], q[1024];
  snprintf(p, sizeof p, "%s/bad/hdr.jpg", root);
  snprintf(q, sizeof q, "%s/hdr.jpg.off", root);
  assert_int_equal(rename(p, q), 0);
  assert_open_fails(open_ds("image_folder", 1, "root", root), TORC_ERR_IO);
  snprintf(want, sizeof want, "corrupt image '%s/bad/hdr.png'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "neither PNG nor JPEG");
  assert_int_equal(rename(q, p), 0);
  /* on_error = skip: both are left out, one warning each. */
  log_buf[0] = '\0';
  torc_dataset *ds = open_ds("image_folder", 2, "root", root, "on_error",
                             "skip");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  assert_int_equal(count_substr(log_buf, "skipping corrupt image"), 2);
  assert_contains(log_buf, "hdr.png");
  assert_contains(log_buf, "hdr.jpg");
  assert_contains(log_buf, "class 0 ('bad') has no samples");
  assert_contains(torc_dataset_describe(ds), "2 corrupt skipped");
  /* Samples: late/data.jpg, late/data.png, ok/good.jpg, ok/good.png.
   * Corrupt data is an error at get(), naming the file. */
  torc_tensor *in, *tg;
  assert_int_equal(torc_dataset_get(ds, 0, &in, &tg), TORC_ERR_IO);
  assert_null(in);
  snprintf(want, sizeof want, "cannot decode image '%s/late/data.jpg'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "truncated");
  assert_int_equal(torc_dataset_get(ds, 1, &in, &tg), TORC_ERR_IO);
  snprintf(want, sizeof want, "cannot decode image '%s/late/data.png'", root);
  assert_contains(torc_last_error(), want);
  assert_contains(torc_last_error(), "PNG: IDAT");
  for (int64_t i = 2; i < 4; i++) {
    get_sample(ds, i, TORC_U8, (const int64_t[3]){3, 16, 16}, 3, &in, &tg);
    assert_class(tg, 2);
    release2(in, tg);
  }
  torc_dataset_close(ds);
  /* The same get() errors with on_error = error once the headers pass. */
  snprintf(p, sizeof p, "%s/bad", root);
  nftw(p, rm_entry, 4, FTW_DEPTH | FTW_PHYS);
  ds = open_ds("image_folder", 1, "root", root);
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 4);
  assert_int_equal(torc_dataset_get(ds, 1, &in, &tg), TORC_ERR_IO);
  assert_contains(torc_last_error(), "late/data.png");
  torc_dataset_close(ds);
  /* Every image corrupt with skip: nothing left. */
  const char *allbad = P("allbad");
  make_dir(allbad);
  snprintf(p, sizeof p, "%s/x", allbad);
  make_dir(p);
  snprintf(p, sizeof p, "%s/x/1.png", allbad);
  write_text(p, "no");
  assert_open_fails(open_ds("image_folder", 2, "root", allbad, "on_error",
                            "skip"),
                    TORC_ERR_IO);
  assert_contains(torc_last_error(), "every image failed");
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
      T(test_csv_classification),
      T(test_csv_numeric_labels),
      T(test_csv_columns),
      T(test_csv_regression),
      T(test_csv_formats),
      T(test_csv_ragged),
      T(test_csv_not_a_number),
      T(test_csv_files),
      T(test_npy_classification),
      T(test_npy_versions_and_dtypes),
      T(test_npy_bad_header),
      T(test_npy_unsupported),
      T(test_npy_length_mismatch),
      T(test_image_folder_values),
      T(test_image_folder_layout),
      T(test_image_folder_corrupt),
      T(test_synthetic_values),
      T(test_synthetic_threads),
      T(test_synthetic_bad_keys),
  };
  return cmocka_run_group_tests(tests, group_setup, data_tmp_teardown);
}
