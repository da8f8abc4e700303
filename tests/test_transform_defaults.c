/* tests/test_transform_defaults.c — transform stages with torchvision's
 * defaults: random_hflip and random_vflip without their argument flip with
 * p = 0.5 (RandomHorizontalFlip, RandomVerticalFlip), written bare or with
 * empty parentheses; random_vflip reverses the rows; random_crop(size)
 * pads nothing; scale then normalize, which run as one pass, give the
 * bits of the two stages applied one after the other (u8 and f32 samples,
 * one or per-channel mean and std, lengths that end mid-vector).
 */
#include "testutil.h"

#include "torc/data.h"

/* A [1, 4, 4] f32 sample holding 0 .. 15. */
static torc_tensor *sample16(void) {
  const int64_t shape[3] = {1, 4, 4};
  torc_tensor *x = torc_empty(shape, 3, TORC_F32, TORC_CPU);
  assert_torc(x);
  float *p = torc_data(x);
  for (int i = 0; i < 16; i++)
    p[i] = (float)i;
  return x;
}

static torc_transform *parse_ok(const char *spec) {
  torc_clear_error();
  torc_transform *t = torc_transform_parse(spec);
  if (t == NULL) {
    print_error("'%s' was refused: %s\n", spec, torc_last_error());
    fail();
  }
  return t;
}

/* 1 if a and b hold the same 16 floats. */
static int same16(const torc_tensor *a, const torc_tensor *b) {
  return memcmp(torc_data(a), torc_data(b),
                16 * sizeof(float)) == 0;
}

/* The default p is 0.5: the same draws as p = 0.5 written out, both
 * outcomes seen over 64 samples. */
static void check_default_half(const char *bare, const char *empty,
                               const char *half) {
  torc_tensor *x = sample16();
  torc_transform *tb = parse_ok(bare), *te = parse_ok(empty),
                 *th = parse_ok(half);
  assert_true(torc_transform_is_random(tb));
  int flipped = 0;
  for (int64_t i = 0; i < 64; i++) {
    torc_tensor *yb = torc_transform_apply(tb, x, 7, 1, i);
    torc_tensor *ye = torc_transform_apply(te, x, 7, 1, i);
    torc_tensor *yh = torc_transform_apply(th, x, 7, 1, i);
    assert_torc(yb);
    assert_torc(ye);
    assert_torc(yh);
    assert_true(same16(yb, yh));
    assert_true(same16(ye, yh));
    flipped += !same16(yh, x);
    torc_release(yb), torc_release(ye), torc_release(yh);
  }
  assert_true(flipped > 8 && flipped < 56);
  torc_transform_free(tb), torc_transform_free(te), torc_transform_free(th);
  torc_release(x);
}

static void test_hflip_default(void **state) {
  (void)state;
  check_default_half("random_hflip", "random_hflip()", "random_hflip(0.5)");
  /* In a pipeline too. */
  torc_transform_free(parse_ok("scale(2), random_hflip, cast(f32)"));
}

static void test_vflip(void **state) {
  (void)state;
  check_default_half("random_vflip", "random_vflip()", "random_vflip(0.5)");
  torc_tensor *x = sample16();
  torc_transform *t = parse_ok("random_vflip(1)");
  torc_tensor *y = torc_transform_apply(t, x, 1, 0, 0);
  assert_torc(y);
  const float *p = torc_data(y);
  for (int i = 0; i < 16; i++)
    assert_true(p[i] == (float)((3 - i / 4) * 4 + i % 4));
  torc_release(y);
  torc_transform_free(t);
  torc_release(x);
  torc_clear_error();
  assert_null(torc_transform_parse("random_vflip(2)"));
  assert_error(TORC_ERR_INVALID, "argument 1 (p) = 2 is not a probability");
  torc_clear_error();
  assert_null(torc_transform_parse("random_vflip(0.5, 1)"));
  assert_error(TORC_ERR_INVALID, "takes 0 or 1 arguments, got 2");
}

/* random_crop(size): torchvision's padding = 0, the crop inside the
 * sample. */
static void test_crop_default_padding(void **state) {
  (void)state;
  torc_tensor *x = sample16();
  torc_transform *t = parse_ok("random_crop(4)");
  torc_tensor *y = torc_transform_apply(t, x, 3, 0, 5);
  assert_torc(y);
  assert_true(same16(x, y));
  torc_release(y);
  torc_transform_free(t);
  torc_release(x);
  /* Stages without defaults still need their arguments. */
  torc_clear_error();
  assert_null(torc_transform_parse("scale"));
  assert_error(TORC_ERR_INVALID, "must follow in parentheses");
}

/* scale(c), normalize(...) in one transform against the two stages as
 * two transforms, bit for bit, on a [3, 7, 9] sample of dtype dt. */
static void check_pair(torc_dtype dt, const char *norm) {
  const int64_t shape[3] = {3, 7, 9};
  torc_tensor *x = torc_empty(shape, 3, dt, TORC_CPU);
  assert_torc(x);
  uint32_t r = 12345;
  for (int i = 0; i < 3 * 7 * 9; i++) {
    r = r * 1664525u + 1013904223u;
    if (dt == TORC_U8)
      ((uint8_t *)torc_data(x))[i] = (uint8_t)(r >> 24);
    else
      ((float *)torc_data(x))[i] = (float)(r >> 8) / 65536.0f - 100.0f;
  }
  char both[160];
  snprintf(both, sizeof both, "scale(0.00392156862745098), %s", norm);
  torc_transform *t = parse_ok(both);
  torc_transform *t1 = parse_ok("scale(0.00392156862745098)");
  torc_transform *t2 = parse_ok(norm);
  torc_tensor *y = torc_transform_apply(t, x, 1, 0, 0);
  torc_tensor *h = torc_transform_apply(t1, x, 1, 0, 0);
  assert_torc(h);
  torc_tensor *z = torc_transform_apply(t2, h, 1, 0, 0);
  assert_torc(y);
  assert_torc(z);
  assert_int_equal(torc_dtype_of(y), TORC_F32);
  assert_memory_equal(torc_data(y), torc_data(z), 3 * 7 * 9 * sizeof(float));
  torc_release(y), torc_release(z), torc_release(h), torc_release(x);
  torc_transform_free(t), torc_transform_free(t1), torc_transform_free(t2);
}

static void test_scale_normalize_pair(void **state) {
  (void)state;
  check_pair(TORC_U8, "normalize(0.2860, 0.3530)");
  check_pair(TORC_U8, "normalize(0.485, 0.456, 0.406, 0.229, 0.224, 0.225)");
  check_pair(TORC_F32, "normalize(0.2860, 0.3530)");
  check_pair(TORC_F32, "normalize(0.485, 0.456, 0.406, 0.229, 0.224, 0.225)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hflip_default),
      cmocka_unit_test(test_vflip),
      cmocka_unit_test(test_crop_default_padding),
      cmocka_unit_test(test_scale_normalize_pair),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
