/* tests/test_dtype.c — dtype names, parsing, PyTorch's promotion table and
 * the exact f16/bf16 and int64-to-float conversions. */
#include <math.h>

#include "testutil.h"

static void test_names_and_sizes(void **state) {
  (void)state;
  static const struct {
    torc_dtype dt;
    const char *name;
    size_t size;
  } rows[] = {{TORC_F32, "f32", 4}, {TORC_F64, "f64", 8}, {TORC_F16, "f16", 2},
              {TORC_BF16, "bf16", 2}, {TORC_I32, "i32", 4}, {TORC_I64, "i64", 8},
              {TORC_U8, "u8", 1},     {TORC_BOOL, "bool", 1}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    assert_string_equal(torc_dtype_name(rows[i].dt), rows[i].name);
    assert_int_equal(torc_dtype_size(rows[i].dt), rows[i].size);
    torc_dtype p;
    assert_ok(torc_dtype_parse(rows[i].name, &p));
    assert_int_equal(p, rows[i].dt);
  }
  assert_string_equal(torc_dtype_name(TORC_DTYPE_ANY), "any");
  assert_string_equal(torc_dtype_name((torc_dtype)42), "invalid");
  assert_int_equal(torc_dtype_size((torc_dtype)42), 0);
}

static void test_parse_aliases_and_errors(void **state) {
  (void)state;
  torc_dtype p;
  assert_ok(torc_dtype_parse("float32", &p));
  assert_int_equal(p, TORC_F32);
  assert_ok(torc_dtype_parse("Long", &p));
  assert_int_equal(p, TORC_I64);
  assert_ok(torc_dtype_parse("bfloat16", &p));
  assert_int_equal(p, TORC_BF16);
  assert_int_equal(torc_dtype_parse("float128", &p), TORC_ERR_DTYPE);
  assert_error(TORC_ERR_DTYPE, "unknown dtype 'float128'");
  assert_contains(torc_last_error(), "f32, f64, f16, bf16, i32, i64, u8, bool");
}

/* Expected values from torch.promote_types (PyTorch 1.13). */
static void test_promotion_matches_pytorch(void **state) {
  (void)state;
  assert_int_equal(torc_promote_types(TORC_U8, TORC_I32), TORC_I32);
  assert_int_equal(torc_promote_types(TORC_BOOL, TORC_U8), TORC_U8);
  assert_int_equal(torc_promote_types(TORC_I64, TORC_F16), TORC_F16);
  assert_int_equal(torc_promote_types(TORC_F16, TORC_BF16), TORC_F32);
  assert_int_equal(torc_promote_types(TORC_BF16, TORC_I64), TORC_BF16);
  assert_int_equal(torc_promote_types(TORC_F32, TORC_F64), TORC_F64);
  assert_int_equal(torc_promote_types(TORC_I32, TORC_I64), TORC_I64);
  assert_int_equal(torc_promote_types(TORC_BOOL, TORC_BOOL), TORC_BOOL);
  assert_int_equal(torc_promote_types(TORC_F32, (torc_dtype)99), TORC_DTYPE_ANY);
  /* symmetric */
  for (int a = 0; a < TORC_DTYPE_COUNT; a++)
    for (int b = 0; b < TORC_DTYPE_COUNT; b++)
      assert_int_equal(torc_promote_types((torc_dtype)a, (torc_dtype)b),
                       torc_promote_types((torc_dtype)b, (torc_dtype)a));
}

static void test_f16_conversions(void **state) {
  (void)state;
  /* Exact bit patterns of IEEE binary16. */
  assert_int_equal(torc_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(torc_f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(torc_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(torc_f32_to_f16(65520.0f), 0x7c00);  /* rounds to inf */
  assert_int_equal(torc_f32_to_f16(65519.0f), 0x7bff);
  assert_int_equal(torc_f32_to_f16(5.960464477539063e-08f), 0x0001); /* 2^-24 */
  assert_int_equal(torc_f32_to_f16(2.98023224e-08f), 0x0000); /* tie -> even */
  assert_int_equal(torc_f32_to_f16(6.103515625e-05f), 0x0400); /* min normal */
  assert_int_equal(torc_f32_to_f16(INFINITY), 0x7c00);
  assert_true((torc_f32_to_f16(NAN) & 0x7c00) == 0x7c00 &&
              (torc_f32_to_f16(NAN) & 0x3ff) != 0);
  /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1). */
  assert_int_equal(torc_f32_to_f16(1.00048828125f), 0x3c00);
  assert_int_equal(torc_f32_to_f16(1.00146484375f), 0x3c02);
  /* Every half value round-trips through float exactly. */
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = torc_f16_to_f32((uint16_t)h);
    if (f != f)
      continue;
    assert_int_equal(torc_f32_to_f16(f), h);
  }
  assert_true(torc_f16_to_f32(0x0001) == 5.960464477539063e-08f);
}

static void test_bf16_conversions(void **state) {
  (void)state;
  assert_int_equal(torc_f32_to_bf16(1.0f), 0x3f80);
  assert_true(torc_bf16_to_f32(0x3f80) == 1.0f);
  /* 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: even. */
  assert_int_equal(torc_f32_to_bf16(1.00390625f), 0x3f80);
  assert_int_equal(torc_f32_to_bf16(1.01171875f), 0x3f82);
  assert_true((torc_f32_to_bf16(NAN) & 0x7f) != 0);
  for (uint32_t b = 0; b < 0x10000; b++) {
    float f = torc_bf16_to_f32((uint16_t)b);
    if (f != f)
      continue;
    assert_int_equal(torc_f32_to_bf16(f), b);
  }
}

/* int64 to float in one rounding, ties to even, exact below 2^24. */
static void test_i64_to_f32(void **state) {
  (void)state;
  assert_true(torc_i64_to_f32(0) == 0.0f);
  assert_true(torc_i64_to_f32(-1) == -1.0f);
  assert_true(torc_i64_to_f32(16777215) == 16777215.0f);
  /* 2^24 + 1 ties between 2^24 and 2^24 + 2: to even, 2^24 */
  assert_true(torc_i64_to_f32(16777217) == 16777216.0f);
  /* 2^24 + 3 ties between 2^24 + 2 and 2^24 + 4: to even, 2^24 + 4 */
  assert_true(torc_i64_to_f32(16777219) == 16777220.0f);
  /* a double rounding would give 2^60 */
  int64_t v = (INT64_C(1) << 60) + (INT64_C(1) << 36) + 1;
  assert_true(torc_i64_to_f32(v) == ldexpf(1.0f, 60) + ldexpf(1.0f, 37));
  assert_true(torc_i64_to_f32(-v) == -(ldexpf(1.0f, 60) + ldexpf(1.0f, 37)));
  assert_true(torc_i64_to_f32(INT64_MIN) == -ldexpf(1.0f, 63));
  assert_true(torc_i64_to_f32(INT64_MAX) == ldexpf(1.0f, 63));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_and_sizes),
      cmocka_unit_test(test_parse_aliases_and_errors),
      cmocka_unit_test(test_promotion_matches_pytorch),
      cmocka_unit_test(test_f16_conversions),
      cmocka_unit_test(test_bf16_conversions),
      cmocka_unit_test(test_i64_to_f32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
