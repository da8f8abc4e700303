/* tests/test_loader.c — datasets, transforms and the DataLoader
 * (torc/data.h) over a data source defined here, "ts": sample i's input
 * holds i * 1000 + k and its target is i, so every batch says which samples
 * it holds. Covers the registry and key errors, every transform stage's
 * values and parse errors, batching, shuffling, sharding, resume, workers
 * (identical batches for any count, in order, stopped mid-epoch, errors),
 * collate (stack, pad + mask, custom), pinned staging on sim and [data.*]
 * sections with their file:line errors.
 */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "torc/config.h"
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

static int ts_open(const char *const *keys, const char *const *values, int n,
                   void *user, void **handle) {
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

static int64_t ts_length(void *h) { return ((ts *)h)->n; }

static int ts_get(void *h, int64_t i, torc_tensor **input,
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

static void ts_close(void *h) { free(h); }

static int ts_describe(void *h, char *buf, size_t size) {
  ts *d = h;
  snprintf(buf, size, "%lld test samples in %s", (long long)d->n, d->root);
  return TORC_OK;
}

static int64_t ts_classes(void *h) {
  (void)h;
  return 3;
}

static int ts_class_name(void *h, int64_t i, char *buf, size_t size) {
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
static int mini_open(const char *const *keys, const char *const *values,
                     int n, void *user, void **handle) {
  (void)keys, (void)values, (void)n, (void)user;
  *handle = (void *)1;
  return TORC_OK;
}
static int64_t mini_length(void *h) {
  (void)h;
  return 0;
}
static void mini_close(void *h) { (void)h; }
static const torc_data_source_type mini_type = {
    offsetof(torc_data_source_type, describe), "mini", "no keys, no samples",
    NULL, mini_open, mini_length, ts_get, mini_close, NULL, NULL, NULL, NULL};

/* Opens a "ts" dataset from "k=v" pairs (root defaults to "."). */
static torc_dataset *ts_open_kv(const char *kv) {
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

static int64_t *targets_of(const torc_batch *b) {
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

static void dump_epoch(torc_loader *ld, epoch_dump *d) {
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

static void assert_same_epoch(const epoch_dump *a, const epoch_dump *b) {
  assert_int_equal(a->n_batches, b->n_batches);
  assert_int_equal(a->n_samples, b->n_samples);
  assert_memory_equal(a->order, b->order,
                      sizeof(int64_t) * (size_t)a->n_samples);
  assert_int_equal(a->n_bytes, b->n_bytes);
  assert_memory_equal(a->bytes, b->bytes, a->n_bytes);
}

static int is_permutation(const int64_t *v, int64_t n) {
  int seen[256] = {0};
  for (int64_t i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= n || seen[v[i]])
      return 0;
    seen[v[i]] = 1;
  }
  return 1;
}

static torc_tensor *sample_f32(const float *v, const int64_t *shape, int nd) {
  torc_tensor *t = torc_from_host(v, shape, nd, TORC_F32, TORC_CPU);
  assert_torc(t);
  return t;
}

/* Applies spec to x (epoch 0, index 0, seed 0) and checks the values. */
static void check_tf(const char *spec, const torc_tensor *x,
                     const int64_t *shape, int nd, torc_dtype dt,
                     const double *expect, double tol) {
  torc_transform *t = torc_transform_parse(spec);
  assert_torc(t);
  torc_tensor *y = torc_transform_apply(t, x, 0, 0, 0);
  assert_torc(y);
  assert_int_equal(torc_ndim(y), nd);
  for (int d = 0; d < nd; d++)
    assert_int_equal(torc_size(y, d), shape[d]);
  assert_int_equal(torc_dtype_of(y), dt);
  int64_t n = 1;
  for (int d = 0; d < nd; d++)
    n *= shape[d];
  test_assert_values(y, expect, n, tol);
  torc_release(y);
  torc_transform_free(t);
}

/* ---- the registry and datasets ---- */

static void test_registry(void **state) {
  (void)state;
  assert_ptr_equal(torc_data_source_find("ts"), &ts_type);
  assert_null(torc_data_source_find("nope"));
  assert_null(torc_data_source_find(NULL));
  int n = torc_data_source_count();
  assert_true(n >= 2);
  for (int i = 1; i < n; i++)
    assert_true(strcmp(torc_data_source_at(i - 1)->name,
                       torc_data_source_at(i)->name) < 0);
  assert_null(torc_data_source_at(n));
  assert_null(torc_data_source_at(-1));

  assert_int_equal(torc_data_source_register(&ts_type), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'ts' is already registered");
  assert_contains(torc_last_error(), "the core or the program");

  torc_data_source_type bad = ts_type;
  bad.name = "bad name";
  assert_int_equal(torc_data_source_register(&bad), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "letters, digits and '_'");
  bad.name = "nogets";
  bad.get = NULL;
  assert_int_equal(torc_data_source_register(&bad), TORC_ERR_NULL);
  assert_error(TORC_ERR_NULL, "lacks get");
  bad = ts_type;
  bad.name = "small";
  bad.struct_size = 8;
  assert_int_equal(torc_data_source_register(&bad), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "struct_size 8");
  static const torc_data_key loader_key[] = {{"shuffle", "", NULL, 0},
                                             {NULL, NULL, NULL, 0}};
  bad = ts_type;
  bad.name = "loaderkey";
  bad.keys = loader_key;
  assert_int_equal(torc_data_source_register(&bad), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "declares key 'shuffle', which [data.*] "
                                 "sections keep for the loader");
  static const torc_data_key bad_key[] = {{"a-b", "", NULL, 0},
                                          {NULL, NULL, NULL, 0}};
  bad.keys = bad_key;
  assert_int_equal(torc_data_source_register(&bad), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "declares key 'a-b', which is not valid");
  assert_int_equal(torc_data_source_register(NULL), TORC_ERR_NULL);
  assert_null(torc_data_source_find("small"));
}

static void test_dataset_open_errors(void **state) {
  (void)state;
  const char *k[4], *v[4];
  assert_null(torc_dataset_open("tss", NULL, NULL, 0));
  assert_error(TORC_ERR_INVALID, "unknown data source 'tss'");
  assert_contains(torc_last_error(), "did you mean 'ts'?");
  assert_contains(torc_last_error(), "mini, ts");
  assert_contains(torc_last_error(), "load it");

  k[0] = "root", v[0] = ".";
  k[1] = "nn", v[1] = "3";
  assert_null(torc_dataset_open("ts", k, v, 2));
  assert_error(TORC_ERR_INVALID, "data source 'ts': unknown key 'nn'");
  assert_contains(torc_last_error(), "did you mean 'n'?");
  assert_contains(torc_last_error(), "root, n, c, h, w, ragged");

  k[1] = "n", v[1] = "3";
  k[2] = "n", v[2] = "4";
  assert_null(torc_dataset_open("ts", k, v, 3));
  assert_error(TORC_ERR_INVALID, "key 'n' is given twice ('3' and '4')");

  assert_null(torc_dataset_open("ts", k + 1, v + 1, 1));
  assert_error(TORC_ERR_INVALID, "key 'root' is required");
  assert_contains(torc_last_error(), "a folder that must exist");

  k[0] = "root", v[0] = "/no/such/folder";
  assert_null(torc_dataset_open("ts", k, v, 1));
  assert_error(TORC_ERR_IO, "ts: cannot open folder /no/such/folder");

  k[0] = "x", v[0] = "1";
  assert_null(torc_dataset_open("mini", k, v, 1));
  assert_error(TORC_ERR_INVALID, "its keys are: (none)");

  assert_null(torc_dataset_open(NULL, NULL, NULL, 0));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  assert_null(torc_dataset_open("ts", NULL, NULL, 1));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
}

static void test_dataset_calls(void **state) {
  (void)state;
  torc_dataset *ds = ts_open_kv("n=5 c=2 h=1 w=3");
  assert_torc(ds);
  assert_int_equal(torc_dataset_length(ds), 5);
  assert_int_equal(torc_dataset_length(NULL), -1);
  assert_string_equal(torc_dataset_describe(ds), "5 test samples in .");
  assert_int_equal(torc_dataset_num_classes(ds), 3);
  char buf[32];
  assert_ok(torc_dataset_class_name(ds, 1, buf, sizeof buf));
  assert_string_equal(buf, "one");
  assert_ok(torc_dataset_class_name(ds, 2, buf, sizeof buf)); /* no name */
  assert_string_equal(buf, "2");
  assert_int_equal(torc_dataset_class_name(ds, 3, buf, sizeof buf),
                   TORC_ERR_RANGE);
  assert_error(TORC_ERR_RANGE, "class 3 is out of range");

  torc_tensor *x, *y;
  assert_ok(torc_dataset_get(ds, 4, &x, &y));
  double ex[6] = {4000, 4001, 4002, 4003, 4004, 4005}, ey = 4;
  test_assert_values(x, ex, 6, 0);
  test_assert_values(y, &ey, 1, 0);
  assert_int_equal(torc_ndim(y), 0);
  torc_release(x);
  torc_release(y);

  assert_int_equal(torc_dataset_get(ds, 5, &x, &y), TORC_ERR_RANGE);
  assert_error(TORC_ERR_RANGE, "index 5 is out of range");
  assert_contains(torc_last_error(), "has 5 samples (0..4)");
  assert_null(x);
  assert_int_equal(torc_dataset_get(ds, -1, &x, &y), TORC_ERR_RANGE);
  assert_int_equal(torc_dataset_get(ds, 0, NULL, &y), TORC_ERR_NULL);
  assert_error(TORC_ERR_NULL, "the input pointer is NULL");
  assert_int_equal(torc_dataset_get(ds, 0, &x, NULL), TORC_ERR_NULL);
  assert_int_equal(torc_dataset_get(NULL, 0, &x, &y), TORC_ERR_NULL);
  torc_dataset_close(ds);
  torc_dataset_close(NULL);

  /* The optional slots absent: describe falls back, no classes. */
  torc_dataset *m = torc_dataset_open("mini", NULL, NULL, 0);
  assert_torc(m);
  assert_string_equal(torc_dataset_describe(m), "mini, 0 samples");
  assert_int_equal(torc_dataset_num_classes(m), 0);
  assert_ok(torc_dataset_class_name(m, 7, buf, sizeof buf));
  assert_string_equal(buf, "7");
  torc_loader *ld = torc_loader_new(m, NULL);
  assert_null(ld);
  assert_error(TORC_ERR_INVALID, "has no samples");
  torc_dataset_close(m);

  /* A sample that fails carries the source's message. */
  ds = ts_open_kv("fail_at=2");
  assert_int_equal(torc_dataset_get(ds, 2, &x, &y), TORC_ERR_IO);
  assert_error(TORC_ERR_IO, "ts: sample 2 is unreadable");
  torc_dataset_close(ds);
}

/* ---- transforms ---- */

static void test_transform_values(void **state) {
  (void)state;
  /* scale: u8 -> f32, f64 stays f64. */
  unsigned char u[4] = {0, 1, 2, 255};
  torc_tensor *xu = torc_from_host(u, TORC_SHAPE(1, 2, 2), TORC_U8, TORC_CPU);
  double e_scale[4] = {0, 0.5, 1, 127.5};
  check_tf("scale(0.5)", xu, (int64_t[]){1, 2, 2}, 3, TORC_F32, e_scale, 0);
  double d4[4] = {1, 2, 3, 4};
  torc_tensor *xd = torc_from_host(d4, TORC_SHAPE(4), TORC_F64, TORC_CPU);
  double e_sd[4] = {0.1, 0.2, 0.30000000000000004, 0.4};
  check_tf(" scale( 0.1 ) ", xd, (int64_t[]){4}, 1, TORC_F64, e_sd, 0);
  torc_release(xd);

  /* normalize: one mean/std, then per channel (dim 0). */
  float f4[4] = {1, 3, 5, 7};
  torc_tensor *x4 = sample_f32(f4, TORC_SHAPE(1, 2, 2));
  double e_n1[4] = {0, 1, 2, 3};
  check_tf("normalize(1, 2)", x4, (int64_t[]){1, 2, 2}, 3, TORC_F32, e_n1, 0);
  float f6[6] = {1, 2, 4, 6, 20, 30};
  torc_tensor *x6 = sample_f32(f6, TORC_SHAPE(3, 1, 2));
  double e_n3[6] = {1, 2, 1.5, 2.5, 2, 4};
  check_tf("normalize(0, 1, 10, 1, 2, 5)", x6, (int64_t[]){3, 1, 2}, 3,
           TORC_F32, e_n3, 0);
  /* The examples' MNIST pipeline: u8 255 -> (1 - 0.2860) / 0.3530. */
  double e_mn[4] = {-0.2860 / 0.3530, (1.0 / 255 - 0.2860) / 0.3530,
                    (2.0 / 255 - 0.2860) / 0.3530, (1 - 0.2860) / 0.3530};
  check_tf("scale(0.00392156862745098), normalize(0.2860, 0.3530)", xu,
           (int64_t[]){1, 2, 2}, 3, TORC_F32, e_mn, 1e-6);

  /* center_crop: torchvision's offsets, round((H - h) / 2) half to even. */
  float f16[16];
  for (int i = 0; i < 16; i++)
    f16[i] = (float)i;
  torc_tensor *x16 = sample_f32(f16, TORC_SHAPE(1, 4, 4));
  double e_cc[4] = {5, 6, 9, 10};
  check_tf("center_crop(2)", x16, (int64_t[]){1, 2, 2}, 3, TORC_F32, e_cc, 0);
  double e_cc2[2] = {9, 10}; /* top = round(1.5) = 2 */
  check_tf("center_crop(1, 2)", x16, (int64_t[]){1, 1, 2}, 3, TORC_F32, e_cc2,
           0);
  torc_tensor *x9 = sample_f32(f16, TORC_SHAPE(1, 3, 3));
  double e_cc3[4] = {0, 1, 3, 4}; /* (3 - 2) / 2 = 0.5 rounds to 0 */
  check_tf("center_crop(2)", x9, (int64_t[]){1, 2, 2}, 3, TORC_F32, e_cc3, 0);
  /* On a [H, W] sample too. */
  torc_tensor *x2d = sample_f32(f16, TORC_SHAPE(4, 4));
  check_tf("center_crop(2)", x2d, (int64_t[]){2, 2}, 2, TORC_F32, e_cc, 0);

  /* random_hflip(1) always flips, (0) never. */
  double e_fl[16];
  for (int i = 0; i < 16; i++)
    e_fl[i] = (double)((i / 4) * 4 + (3 - i % 4));
  check_tf("random_hflip(1)", x16, (int64_t[]){1, 4, 4}, 3, TORC_F32, e_fl, 0);
  double e_id[16];
  for (int i = 0; i < 16; i++)
    e_id[i] = i;
  check_tf("random_hflip(0)", x16, (int64_t[]){1, 4, 4}, 3, TORC_F32, e_id, 0);

  /* random_crop to the padded size has one position: the zero-padded
   * sample; to the sample's size without padding: the sample. */
  double e_pad[16] = {0, 0, 0, 0, 0, 1, 3, 0, 0, 5, 7, 0, 0, 0, 0, 0};
  check_tf("random_crop(4, 1)", x4, (int64_t[]){1, 4, 4}, 3, TORC_F32, e_pad,
           0);
  check_tf("random_crop(4)", x16, (int64_t[]){1, 4, 4}, 3, TORC_F32, e_id, 0);
  torc_release(xu);
  torc_release(x4);
  torc_release(x6);
  torc_release(x16);
  torc_release(x9);
  torc_release(x2d);
}

static void test_transform_values2(void **state) {
  (void)state;
  /* resize, as F.interpolate(bilinear, align_corners=False). */
  float f4[4] = {0, 1, 2, 3};
  torc_tensor *x = sample_f32(f4, TORC_SHAPE(1, 2, 2));
  double e_up[16] = {0,   0.25, 0.75, 1,   0.5, 0.75, 1.25, 1.5,
                     1.5, 1.75, 2.25, 2.5, 2,   2.25, 2.75, 3};
  check_tf("resize(4, 4)", x, (int64_t[]){1, 4, 4}, 3, TORC_F32, e_up, 0);
  double e_down[1] = {1.5};
  check_tf("resize(1, 1)", x, (int64_t[]){1, 1, 1}, 3, TORC_F32, e_down, 0);
  float f12[12];
  for (int i = 0; i < 12; i++)
    f12[i] = (float)i;
  torc_tensor *x12 = sample_f32(f12, TORC_SHAPE(1, 3, 4));
  double e_r23[6] = {1.1666667, 2.5, 3.8333333, 7.1666667, 8.5, 9.8333333};
  check_tf("resize(2, 3)", x12, (int64_t[]){1, 2, 3}, 3, TORC_F32, e_r23,
           1e-6);

  /* cast: truncation toward zero, bool, identity. */
  float fc[3] = {1.7f, -1.7f, 0};
  torc_tensor *xc = sample_f32(fc, TORC_SHAPE(3));
  check_tf("cast(i64)", xc, (int64_t[]){3}, 1, TORC_I64,
           (double[]){1, -1, 0}, 0);
  check_tf("cast(bool)", xc, (int64_t[]){3}, 1, TORC_BOOL,
           (double[]){1, 1, 0}, 0);
  check_tf("cast(float64)", xc, (int64_t[]){3}, 1, TORC_F64,
           (double[]){1.7f, -1.7f, 0}, 0);
  check_tf("cast(f32)", xc, (int64_t[]){3}, 1, TORC_F32,
           (double[]){1.7f, -1.7f, 0}, 0);
  unsigned char u[2] = {200, 7};
  torc_tensor *xu = torc_from_host(u, TORC_SHAPE(2), TORC_U8, TORC_CPU);
  check_tf("cast(i32), scale(2), cast(u8)", xu, (int64_t[]){2}, 1, TORC_U8,
           (double[]){144, 14}, 0); /* 400 wraps to 144 as in PyTorch */

  /* Empty and NULL specs are the identity; a NULL pipeline too. */
  torc_transform *id = torc_transform_parse("  ");
  assert_torc(id);
  assert_int_equal(torc_transform_is_random(id), 0);
  torc_tensor *y = torc_transform_apply(id, x, 0, 0, 0);
  test_assert_values(y, (double[]){0, 1, 2, 3}, 4, 0);
  torc_release(y);
  torc_transform_free(id);
  id = torc_transform_parse(NULL);
  assert_torc(id);
  torc_transform_free(id);
  y = torc_transform_apply(NULL, x, 0, 0, 0);
  assert_ptr_equal(y, x);
  torc_release(y);
  assert_null(torc_transform_apply(NULL, NULL, 0, 0, 0));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);

  /* A non-contiguous sample is read through its strides. */
  torc_tensor *xt = torc_transpose(x12, 1, 2); /* [1, 4, 3] */
  double e_t[12] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
  check_tf("scale(1)", xt, (int64_t[]){1, 4, 3}, 3, TORC_F32, e_t, 0);
  torc_release(xt);

  torc_release(x);
  torc_release(x12);
  torc_release(xc);
  torc_release(xu);
}

/* random_crop draws a window; it is fixed by (seed, epoch, index) only. */
static void test_transform_random(void **state) {
  (void)state;
  float f16[16];
  for (int i = 0; i < 16; i++)
    f16[i] = (float)i;
  torc_tensor *x = sample_f32(f16, TORC_SHAPE(1, 4, 4));
  torc_transform *t = torc_transform_parse("random_crop(2), random_hflip(0.5)");
  assert_torc(t);
  assert_int_equal(torc_transform_is_random(t), 1);
  int seen[16] = {0}, flips = 0;
  for (int64_t i = 0; i < 200; i++) {
    torc_tensor *y = torc_transform_apply(t, x, 5, 1, i);
    assert_torc(y);
    float v[4];
    assert_ok(torc_to_host(y, v, sizeof v));
    /* A 2 x 2 window, maybe flipped: rows 4 apart, columns adjacent. */
    float lo = v[0] < v[1] ? v[0] : v[1];
    assert_true(fabsf(v[0] - v[1]) == 1);
    assert_true(v[2] - v[0] == 4 && v[3] - v[1] == 4);
    flips += v[0] > v[1];
    seen[(int)lo] = 1;
    torc_tensor *y2 = torc_transform_apply(t, x, 5, 1, i);
    float v2[4];
    assert_ok(torc_to_host(y2, v2, sizeof v2));
    assert_memory_equal(v, v2, sizeof v);
    torc_release(y);
    torc_release(y2);
  }
  /* Every one of the 9 windows is drawn, and about half are flipped. */
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++)
      assert_true(seen[r * 4 + c]);
  assert_true(flips > 60 && flips < 140);

  /* Another epoch or seed draws differently for some sample. */
  int diff_epoch = 0, diff_seed = 0;
  for (int64_t i = 0; i < 20; i++) {
    float a[4], b[4], c[4];
    torc_tensor *ya = torc_transform_apply(t, x, 5, 1, i);
    torc_tensor *yb = torc_transform_apply(t, x, 5, 2, i);
    torc_tensor *yc = torc_transform_apply(t, x, 6, 1, i);
    assert_ok(torc_to_host(ya, a, sizeof a));
    assert_ok(torc_to_host(yb, b, sizeof b));
    assert_ok(torc_to_host(yc, c, sizeof c));
    diff_epoch += memcmp(a, b, sizeof a) != 0;
    diff_seed += memcmp(a, c, sizeof a) != 0;
    torc_release(ya);
    torc_release(yb);
    torc_release(yc);
  }
  assert_true(diff_epoch > 0);
  assert_true(diff_seed > 0);

  /* Inside a scope the result belongs to the scope, as an op's does. */
  int s = torc_scope_begin();
  torc_tensor *y = torc_transform_apply(t, x, 0, 0, 0);
  assert_torc(y);
  torc_scope_end(s);
  torc_transform_free(t);
  torc_release(x);
}

static void parse_fails(const char *spec, const char *what) {
  torc_clear_error();
  torc_transform *t = torc_transform_parse(spec);
  if (t != NULL) {
    print_error("\"%s\" parsed\n", spec);
    torc_transform_free(t);
    fail();
  }
  assert_error(TORC_ERR_INVALID, what);
}

static void test_transform_parse_errors(void **state) {
  (void)state;
  parse_fails("blur(3)", "stage 1 'blur(3)': unknown stage 'blur'; the "
                         "stages are: scale, normalize, random_crop, "
                         "random_hflip, center_crop, resize, cast");
  parse_fails("scale(1), scal(2)", "stage 2 'scal(2)': unknown stage 'scal' "
                                   "(did you mean 'scale'?)");
  parse_fails("scale", "the arguments must follow in parentheses: scale(c)");
  parse_fails("scale(2", "'(' is never closed");
  parse_fails("scale(2) x", "unexpected text 'x' after ')'");
  parse_fails("scale(2))", "')' without '('");
  parse_fails("scale(a)", "argument 1 (c) = 'a' is not a finite number");
  parse_fails("scale(inf)", "is not a finite number");
  parse_fails("scale()", "takes 1 argument, got 0");
  parse_fails("scale(1, 2)", "takes 1 argument, got 2");
  parse_fails("scale(1,)", "argument 2 is empty");
  parse_fails("normalize(1)", "takes an even number (2 or more) of arguments");
  parse_fails("normalize(0, 0)", "argument 2 (std) = 0 must be > 0");
  parse_fails("normalize(0, 1, 2, 1, -1, 1)",
              "argument 5 (a std) = -1 must be > 0");
  parse_fails("random_hflip(1.5)", "argument 1 (p) = 1.5 is not a "
                                   "probability");
  parse_fails("random_hflip()", "takes 1 argument");
  parse_fails("random_crop(0)", "argument 1 (size) = 0 is out of range; it "
                                "must be from 1 to 2147483648");
  parse_fails("resize(4, 9999999999)", "argument 2 (w) = 9999999999 is out "
                                       "of range");
  parse_fails("random_crop(2.5)", "argument 1 (size) = '2.5' is not an "
                                  "integer");
  parse_fails("random_crop(4, -1)", "argument 2 (padding) = -1 is out of "
                                    "range; it must be from 0");
  parse_fails("random_crop(4, 4, x)", "argument 3 (padding) = 'x'");
  parse_fails("random_crop(1, 2, 3, 4)", "takes 1, 2 or 3 arguments, got 4");
  parse_fails("center_crop()", "takes 1 or 2 arguments, got 0");
  parse_fails("center_crop(2, 0)", "argument 2 (w) = 0 is out of range");
  parse_fails("resize(3)", "takes 2 arguments, got 1; resize(h, w)");
  parse_fails("cast(f128)", "argument 1 (dtype) = 'f128' is not a dtype");
  parse_fails("cast()", "takes 1 argument");
  parse_fails("scale(1),,cast(f32)", "stage 2 is empty");
  parse_fails("scale(1),", "stage 2 is empty");
  parse_fails(",", "stage 1 is empty");
  parse_fails("scale(1), cast(f32) random_hflip(0.5)",
              "stage 2 'cast(f32) random_hflip(0.5)': unexpected text "
              "'random_hflip(0.5)' after ')'; separate stages with ','");
}

static void apply_fails(const char *spec, const torc_tensor *x,
                        torc_status st, const char *what) {
  torc_transform *t = torc_transform_parse(spec);
  assert_torc(t);
  torc_clear_error();
  torc_tensor *y = torc_transform_apply(t, x, 0, 0, 0);
  torc_transform_free(t);
  if (y != NULL) {
    print_error("\"%s\" applied\n", spec);
    torc_release(y);
    fail();
  }
  assert_error(st, what);
}

static void test_transform_apply_errors(void **state) {
  (void)state;
  float f16[16] = {0};
  torc_tensor *x = sample_f32(f16, TORC_SHAPE(1, 4, 4));
  apply_fails("random_crop(10)", x, TORC_ERR_SHAPE,
              "'random_crop(10)' crops 10 x 10 from a sample of 4 x 4 (with "
              "padding 0: 4 x 4)");
  apply_fails("center_crop(5, 2)", x, TORC_ERR_SHAPE,
              "crops 5 x 2 from a sample of 4 x 4");
  apply_fails("normalize(0, 0, 0, 1, 1, 1)", x, TORC_ERR_SHAPE,
              "has 3 channels of mean and std, but the sample has shape "
              "[1, 4, 4]");
  torc_tensor *s = sample_f32(f16, NULL, 0);
  apply_fails("random_hflip(0.5)", s, TORC_ERR_SHAPE,
              "needs a sample with at least 1 dims");
  torc_tensor *v = sample_f32(f16, TORC_SHAPE(4));
  apply_fails("resize(2, 2)", v, TORC_ERR_SHAPE,
              "at least 2 dims ([..., H, W]), got shape [4]");
  torc_device sim;
  assert_ok(torc_device_parse("sim:0", &sim));
  torc_tensor *xs = torc_to(x, sim);
  apply_fails("scale(1)", xs, TORC_ERR_DEVICE, "the sample is on sim:0");
  torc_release(xs);
  torc_release(x);
  torc_release(s);
  torc_release(v);
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

/* ---- [data.*] sections ---- */

static const char *ini_ok = "[torc]\n"                         /* 1 */
                            "seed = 1234\n"                    /* 2 */
                            "[data.train]\n"                   /* 3 */
                            "source = ts\n"                    /* 4 */
                            "root = .\n"                       /* 5 */
                            "n = 37\n"                         /* 6 */
                            "c = 2\n"                          /* 7 */
                            "h = 5\n"                          /* 8 */
                            "w = 5\n"                          /* 9 */
                            "transform = random_crop(4, 1), "
                            "random_hflip(0.5), scale(0.001)\n" /* 10 */
                            "batch_size = 4\n"                 /* 11 */
                            "shuffle = yes\n"                  /* 12 */
                            "workers = 2\n"                    /* 13 */
                            "prefetch = 3\n"                   /* 14 */
                            "pin_memory = no\n"                /* 15 */
                            "[data.test]\n"                    /* 16 */
                            "source = ts\n"                    /* 17 */
                            "root = .\n"                       /* 18 */
                            "n = 10\n";                        /* 19 */

static void test_config(void **state) {
  (void)state;
  torc_config *cfg = torc_config_parse(ini_ok, "cfg.ini");
  assert_torc(cfg);
  torc_loader *ld = torc_loader_from_config(cfg, "train", TORC_CPU);
  assert_torc(ld);
  assert_int_equal(torc_loader_length(ld), 10);
  assert_string_equal(torc_dataset_describe(torc_loader_dataset(ld)),
                      "37 test samples in .");
  /* The same batches as the loader built by hand with [torc] seed. */
  torc_transform *tf = torc_transform_parse(
      "random_crop(4, 1), random_hflip(0.5), scale(0.001)");
  torc_dataset *ds = ts_open_kv("n=37 c=2 h=5 w=5");
  torc_loader_opts o = {0};
  o.batch_size = 4;
  o.shuffle = 1;
  o.seed = 1234;
  o.transform = tf;
  torc_loader *hand = torc_loader_new(ds, &o);
  epoch_dump a, b;
  assert_ok(torc_loader_start(ld, 1, 0));
  assert_ok(torc_loader_start(hand, 1, 0));
  dump_epoch(ld, &a);
  dump_epoch(hand, &b);
  assert_same_epoch(&a, &b);
  free(a.bytes), free(b.bytes);
  torc_loader_free(hand);
  torc_loader_free(ld); /* frees its dataset and transform */
  torc_transform_free(tf);
  torc_dataset_close(ds);

  ld = torc_loader_from_config(cfg, "test", TORC_CPU);
  assert_torc(ld);
  assert_int_equal(torc_loader_length(ld), 10); /* defaults: batch 1 */
  dump_epoch(ld, &a);
  for (int i = 0; i < 10; i++)
    assert_int_equal(a.order[i], i); /* shuffle = no */
  free(a.bytes);
  torc_loader_free(ld);

  assert_null(torc_loader_from_config(cfg, "valid", TORC_CPU));
  assert_error(TORC_ERR_CONFIG, "cfg.ini: no [data.valid] section");
  assert_null(torc_loader_from_config(NULL, "train", TORC_CPU));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  torc_config_free(cfg);
}

/* The source's path keys resolve against the INI file's folder. */
static void test_config_paths(void **state) {
  (void)state;
  char dir[] = "/tmp/torc-loader-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[128], ini[128];
  snprintf(sub, sizeof sub, "%s/images", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  snprintf(ini, sizeof ini, "%s/cfg.ini", dir);
  FILE *f = fopen(ini, "w");
  assert_non_null(f);
  fputs("[data.train]\nsource = ts\nroot = images\n"
        "[data.test]\nsource = ts\nroot = /\n",
        f);
  fclose(f);
  torc_config *cfg = torc_config_load(ini);
  assert_torc(cfg);
  torc_loader *ld = torc_loader_from_config(cfg, "train", TORC_CPU);
  assert_torc(ld);
  char want[160];
  snprintf(want, sizeof want, "10 test samples in %s", sub);
  assert_string_equal(torc_dataset_describe(torc_loader_dataset(ld)), want);
  torc_loader_free(ld);
  ld = torc_loader_from_config(cfg, "test", TORC_CPU);
  assert_torc(ld);
  assert_string_equal(torc_dataset_describe(torc_loader_dataset(ld)),
                      "10 test samples in /");
  torc_loader_free(ld);
  torc_config_free(cfg);
  /* A missing folder: the source's message, at the line of its key. */
  f = fopen(ini, "w");
  fputs("[data.train]\nsource = ts\nn = 3\nroot = nothere\n", f);
  fclose(f);
  cfg = torc_config_load(ini);
  assert_torc(cfg);
  assert_null(torc_loader_from_config(cfg, "train", TORC_CPU));
  snprintf(want, sizeof want, "%s:4: key 'root' in [data.train]: ts: cannot "
                              "open folder %s/nothere",
           ini, dir);
  assert_error(TORC_ERR_CONFIG, want);
  torc_config_free(cfg);
  unlink(ini);
  rmdir(sub);
  rmdir(dir);
}

static void config_fails(const char *text, const char *name, const char *what) {
  torc_clear_error();
  torc_config *cfg = torc_config_parse(text, "cfg.ini");
  if (cfg == NULL) {
    assert_error(TORC_ERR_CONFIG, what);
    return;
  }
  torc_loader *ld = torc_loader_from_config(cfg, name, TORC_CPU);
  torc_config_free(cfg);
  if (ld) {
    torc_loader_free(ld);
    print_error("the loader was built from \"%s\"\n", text);
    fail();
  }
  assert_error(TORC_ERR_CONFIG, what);
}

static void test_config_errors(void **state) {
  (void)state;
  config_fails("[data.train]\nsource = ts\nroot = .\nnn = 3\n", "train",
               "cfg.ini:4: key 'nn' in [data.train]: data source 'ts': "
               "unknown key 'nn' (did you mean 'n'?)");
  config_fails("[data.train]\nsource = ts\nn = 3\n", "train",
               "cfg.ini:1: [data.train]: data source 'ts': key 'root' is "
               "required");
  config_fails("[data.train]\nroot = .\nsource = tss\n", "train",
               "cfg.ini:3: key 'source' in [data.train]: unknown data "
               "source 'tss' (did you mean 'ts'?)");
  config_fails("[data.train]\nroot = .\n", "train",
               "cfg.ini:1: section [data.train] has no 'source' key");
  config_fails("[data.train]\nsource = ts\nroot = .\nn = 3\nn = 4\n", "train",
               "cfg.ini:5: key 'n' in [data.train]: given twice");
  config_fails("[data.train]\nsource = ts\nroot = .\n"
               "transform = scale(2), flip(1)\n",
               "train",
               "cfg.ini:4: key 'transform' in [data.train]: transform "
               "\"scale(2), flip(1)\": stage 2 'flip(1)': unknown stage");
  config_fails("[data.train]\nsource = ts\nroot = .\nbatch_size = 0\n",
               "train", "cfg.ini:4: key 'batch_size' in [data.train]");
  config_fails("[data.train]\nsource = ts\nroot = .\nshuffle = maybe\n",
               "train", "cfg.ini:4: key 'shuffle' in [data.train]");
  config_fails("[data.train]\nsource = ts\nroot = .\npin_memory = always\n",
               "train", "cfg.ini:4: key 'pin_memory' in [data.train]");
  config_fails("[data.train]\nsource = ts\nroot = .\nworkers = 1000\n",
               "train", "cfg.ini:4: key 'workers' in [data.train]");
  config_fails("[data.train]\nsource = ts\nroot = .\nprefetch = -1\n",
               "train", "cfg.ini:4: key 'prefetch' in [data.train]");
  config_fails("[data.train]\nsource = ts\nroot = .\nn = 5\n"
               "batch_size = 8\ndrop_last = yes\n",
               "train",
               "cfg.ini:5: key 'batch_size' in [data.train]: torc_loader_new: "
               "batch_size = 8 with drop_last leaves no batch");
  config_fails("[data.train]\nsource = ts\nroot = .\nn = 0\n", "train",
               "cfg.ini:1: [data.train]: torc_loader_new: the dataset");
  config_fails("[data.train]\nsource = ts\nroot = .\nn = -1\n", "train",
               "cfg.ini:1: [data.train]: ts: n = -1 is negative");
}

/* A source that fails without a message still gives one. */
static int ts_bad_open(const char *const *keys, const char *const *values,
                       int n, void *user, void **handle) {
  (void)keys, (void)values, (void)n, (void)user, (void)handle;
  return TORC_ERR_IO; /* without an error message */
}

static void test_source_without_message(void **state) {
  (void)state;
  static torc_data_source_type silent;
  silent = mini_type;
  silent.name = "silent";
  silent.open = ts_bad_open;
  if (torc_data_source_find("silent") == NULL)
    assert_ok(torc_data_source_register(&silent));
  assert_null(torc_dataset_open("silent", NULL, NULL, 0));
  assert_error(TORC_ERR_IO, "data source 'silent': open failed without "
                            "saying why (status 9)");
}

/* Sources a plugin registers through host->register_data_source belong to
 * it: named as their owner, gone after torc_shutdown unloads it, and
 * rolled back when its init fails half-way. Uses the data plugin of this
 * build; runs last, as it leaves a program source named "synthetic" behind. */
static void test_plugin_sources(void **state) {
  (void)state;
  if (torc_plugin_load("data", NULL) != TORC_OK) {
    print_message("the data plugin does not load (%s): skipping\n",
                  torc_last_error());
    skip();
  }
  const torc_data_source_type *idx = torc_data_source_find("idx");
  assert_non_null(idx);
  assert_non_null(torc_data_source_find("synthetic"));
  assert_int_equal(torc_data_source_register(idx), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'idx' is already registered (by data)");
  torc_shutdown();
  assert_null(torc_data_source_find("idx"));
  assert_null(torc_data_source_find("synthetic"));
  assert_non_null(torc_data_source_find("ts"));

  /* Init fails at a source whose name is taken: those it registered
   * before are taken back. */
  static torc_data_source_type taken;
  taken = mini_type;
  taken.name = "synthetic";
  assert_ok(torc_data_source_register(&taken));
  assert_int_equal(torc_plugin_load("data", NULL), TORC_ERR_PLUGIN);
  assert_error(TORC_ERR_PLUGIN, "plugin 'data' cannot register data source "
                                "'synthetic': data source 'synthetic' is "
                                "already registered (by the core or the "
                                "program)");
  assert_null(torc_data_source_find("idx"));
  assert_null(torc_data_source_find("csv"));
  assert_null(torc_data_source_find("npy"));
  assert_null(torc_data_source_find("image_folder"));
  assert_ptr_equal(torc_data_source_find("synthetic"), &taken);
  assert_int_equal(test_setup_ref_sim(NULL), 0);
}

int main(void) {
  if (torc_data_source_register(&ts_type) != TORC_OK ||
      torc_data_source_register(&mini_type) != TORC_OK) {
    fprintf(stderr, "registering the test sources: %s\n", torc_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, test_live_setup,               \
                                             test_live_teardown)
      T(test_registry),
      T(test_dataset_open_errors),
      T(test_dataset_calls),
      T(test_transform_values),
      T(test_transform_values2),
      T(test_transform_random),
      T(test_transform_parse_errors),
      T(test_transform_apply_errors),
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
      T(test_config),
      T(test_config_paths),
      T(test_config_errors),
      T(test_source_without_message),
      T(test_plugin_sources),
#undef T
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
