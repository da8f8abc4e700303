/* tests/test_random.c — Philox 4x32-10 against the Random123 known-answer
 * vectors, and the generators behind torc_rand/randn/randint/bernoulli:
 * seeded, reproducible, identical on every device. */
#include <math.h>

#include "testutil.h"
#include "torc/philox.h"

/* Known-answer tests from Random123's kat_vectors (philox4x32, 10 rounds). */
static void test_philox_known_answers(void **state) {
  (void)state;
  torc_philox_block b = torc_philox4x32(0, 0, 0, 0, 0, 0);
  assert_int_equal(b.v[0], 0x6627e8d5u);
  assert_int_equal(b.v[1], 0xe169c58du);
  assert_int_equal(b.v[2], 0xbc57ac4cu);
  assert_int_equal(b.v[3], 0x9b00dbd8u);
  b = torc_philox4x32(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu,
                      0xffffffffu, 0xffffffffu);
  assert_int_equal(b.v[0], 0x408f276du);
  assert_int_equal(b.v[1], 0x41c83b0eu);
  assert_int_equal(b.v[2], 0xa20bc7c6u);
  assert_int_equal(b.v[3], 0x6d5451fdu);
  b = torc_philox4x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                      0xa4093822u, 0x299f31d0u);
  assert_int_equal(b.v[0], 0xd16cfe09u);
  assert_int_equal(b.v[1], 0x94fdccebu);
  assert_int_equal(b.v[2], 0x5001e420u);
  assert_int_equal(b.v[3], 0x24126ea1u);
}

static double *values_of(torc_tensor *t) {
  double *v = test_values(t);
  assert_non_null(v);
  return v;
}

static void test_seed_reproducible(void **state) {
  (void)state;
  torc_manual_seed(1234);
  torc_tensor *a = torc_rand(TORC_SHAPE(100), TORC_F32, TORC_CPU, NULL);
  torc_tensor *b = torc_rand(TORC_SHAPE(100), TORC_F32, TORC_CPU, NULL);
  torc_manual_seed(1234);
  torc_tensor *c = torc_rand(TORC_SHAPE(100), TORC_F32, TORC_CPU, NULL);
  assert_torc(a);
  assert_torc(b);
  assert_torc(c);
  double *va = values_of(a), *vb = values_of(b), *vc = values_of(c);
  int differs = 0;
  for (int i = 0; i < 100; i++) {
    assert_true(va[i] == vc[i]);
    assert_true(va[i] >= 0.0 && va[i] < 1.0);
    differs |= va[i] != vb[i];
  }
  assert_true(differs); /* the offset advanced between a and b */
  free(va), free(vb), free(vc);
  torc_release(a), torc_release(b), torc_release(c);
}

/* Element i depends only on (seed, offset + i): drawing 10 then 20 gives
 * the same numbers as drawing 30 at once. */
static void test_counter_based_split(void **state) {
  (void)state;
  torc_generator *g1 = torc_generator_new(7), *g2 = torc_generator_new(7);
  torc_tensor *whole = torc_randn(TORC_SHAPE(30), TORC_F64, TORC_CPU, g1);
  torc_tensor *p1 = torc_randn(TORC_SHAPE(10), TORC_F64, TORC_CPU, g2);
  torc_tensor *p2 = torc_randn(TORC_SHAPE(4, 5), TORC_F64, TORC_CPU, g2);
  double *w = values_of(whole), *a = values_of(p1), *b = values_of(p2);
  for (int i = 0; i < 10; i++)
    assert_true(w[i] == a[i]);
  for (int i = 0; i < 20; i++)
    assert_true(w[10 + i] == b[i]);
  uint64_t seed, off;
  torc_generator_get_state(g2, &seed, &off);
  assert_int_equal(seed, 7);
  assert_int_equal(off, 30);
  /* Restoring the state replays the numbers. */
  torc_generator_set_state(g2, 7, 10);
  torc_tensor *again = torc_randn(TORC_SHAPE(20), TORC_F64, TORC_CPU, g2);
  double *r = values_of(again);
  for (int i = 0; i < 20; i++)
    assert_true(r[i] == b[i]);
  free(w), free(a), free(b), free(r);
  torc_release(whole), torc_release(p1), torc_release(p2), torc_release(again);
  torc_generator_free(g1), torc_generator_free(g2);
}

/* 100k normals: the mean's standard error is 1/sqrt(1e5) = 0.0032, so |mean|
 * < 0.02 and |var - 1| < 0.03 fail only for a broken generator. */
static void test_distributions(void **state) {
  (void)state;
  torc_generator *g = torc_generator_new(99);
  const int n = 100000;
  torc_tensor *x = torc_randn(TORC_SHAPE(n), TORC_F32, TORC_CPU, g);
  double *v = values_of(x);
  double mean = 0, var = 0;
  for (int i = 0; i < n; i++)
    mean += v[i];
  mean /= n;
  for (int i = 0; i < n; i++)
    var += (v[i] - mean) * (v[i] - mean);
  var /= n - 1;
  assert_true(fabs(mean) < 0.02);
  assert_true(fabs(var - 1.0) < 0.03);
  free(v);
  torc_release(x);

  torc_tensor *k = torc_randint(-3, 4, TORC_SHAPE(n), TORC_I64, TORC_CPU, g);
  v = values_of(k);
  int counts[7] = {0};
  for (int i = 0; i < n; i++) {
    assert_true(v[i] >= -3 && v[i] < 4 && v[i] == floor(v[i]));
    counts[(int)v[i] + 3]++;
  }
  for (int i = 0; i < 7; i++) /* expected 14286 each, sd ~111 */
    assert_true(abs(counts[i] - n / 7) < 800);
  free(v);
  torc_release(k);

  torc_tensor *p = torc_full(TORC_SHAPE(n), 0.25, TORC_F32, TORC_CPU);
  torc_tensor *bern = torc_bernoulli(p, g);
  assert_torc(bern);
  assert_int_equal(torc_dtype_of(bern), TORC_F32);
  v = values_of(bern);
  double ones = 0;
  for (int i = 0; i < n; i++) {
    assert_true(v[i] == 0.0 || v[i] == 1.0);
    ones += v[i];
  }
  assert_true(fabs(ones / n - 0.25) < 0.01); /* sd 0.0014 */
  free(v);
  torc_release(p), torc_release(bern);
  torc_generator_free(g);
}

static void test_random_errors(void **state) {
  (void)state;
  assert_null(torc_rand(TORC_SHAPE(3), TORC_I32, TORC_CPU, NULL));
  assert_error(TORC_ERR_DTYPE, "not floating");
  assert_null(torc_randint(5, 5, TORC_SHAPE(3), TORC_I64, TORC_CPU, NULL));
  assert_error(TORC_ERR_INVALID, "[5, 5) is empty");
  assert_null(torc_randint(0, 2, TORC_SHAPE(3), TORC_BOOL, TORC_CPU, NULL));
  assert_error(TORC_ERR_DTYPE, "bool");
  assert_null(torc_bernoulli(NULL, NULL));
}

/* The same seed gives the same numbers on the sim device as on the cpu. */
static void test_same_numbers_on_sim(void **state) {
  (void)state;
  if (torc_plugin_load("sim", NULL) != TORC_OK) {
    print_message("sim plugin unavailable: %s\n", torc_last_error());
    fail();
  }
  torc_device sim;
  assert_ok(torc_device_parse("sim:0", &sim));
  torc_generator *g1 = torc_generator_new(5), *g2 = torc_generator_new(5);
  torc_tensor *a = torc_randn(TORC_SHAPE(64), TORC_F32, TORC_CPU, g1);
  torc_tensor *b = torc_randn(TORC_SHAPE(64), TORC_F32, sim, g2);
  assert_torc(a);
  assert_torc(b);
  double *va = values_of(a), *vb = values_of(b);
  for (int i = 0; i < 64; i++)
    assert_true(va[i] == vb[i]);
  free(va), free(vb);
  torc_release(a), torc_release(b);
  torc_generator_free(g1), torc_generator_free(g2);
}

static int setup(void **state) {
  (void)state;
  return torc_plugin_load("ref", NULL) == TORC_OK ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_philox_known_answers),
      cmocka_unit_test(test_seed_reproducible),
      cmocka_unit_test(test_counter_based_split),
      cmocka_unit_test(test_distributions),
      cmocka_unit_test(test_random_errors),
      cmocka_unit_test(test_same_numbers_on_sim),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
