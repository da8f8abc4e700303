/* tests/test_loader_datasets.c — datasets and transforms (torc/data.h)
 * over the test source "ts" (tests/loader_testutil.h): the registry and
 * key errors, every transform stage's values and parse errors, [data.*]
 * sections with their file:line errors, and sources a plugin registers.
 * The DataLoader itself is in test_loader.c.
 */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "loader_testutil.h"
#include "torc/config.h"
#include "torc/data.h"

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
  parse_fails("random_hflip(0.5, 1)", "takes 0 or 1 arguments, got 2");
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
  if (loader_register_test_sources())
    return 1;
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
      T(test_config),
      T(test_config_paths),
      T(test_config_errors),
      T(test_source_without_message),
      T(test_plugin_sources),
#undef T
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
