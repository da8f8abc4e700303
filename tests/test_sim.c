/* tests/test_sim.c — the sim plugin (a simulated accelerator) in its
 * default configuration (1 device, 1G, no latency): ops on sim match ref
 * on the cpu bit for bit, moving tensors, mixed-device errors, memory
 * accounting and pinned memory. The other configurations are in
 * test_sim_configs.c.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <time.h>

#include "testutil.h"
#include "sim_testutil.h"

/* ---- helpers ---- */

/* The number before `what` in the device's description ("3 copies from
 * pinned memory"), or -1. */
static long described(torc_device dev, const char *what) {
  char desc[256];
  if (torc_device_describe(dev, desc, sizeof desc) != TORC_OK)
    return -1;
  const char *p = strstr(desc, what);
  if (p == NULL || p == desc)
    return -1;
  while (p > desc && p[-1] == ' ')
    p--;
  while (p > desc && p[-1] >= '0' && p[-1] <= '9')
    p--;
  return strtol(p, NULL, 10);
}

typedef torc_tensor *(*unary_fn)(const torc_tensor *);
typedef torc_tensor *(*binary_fn)(const torc_tensor *, const torc_tensor *);
typedef torc_status (*inplace_fn)(torc_tensor *, const torc_tensor *);

/* ---- group: default configuration (1 device, 1G, no latency) ---- */

static void test_device_registered(void **state) {
  (void)state;
  assert_int_equal(torc_device_count("sim"), 1);
  torc_device d = sim_dev(0);
  assert_false(torc_device_is_host(d));
  char buf[32];
  assert_string_equal(torc_device_str(d, buf, sizeof buf), "sim:0");
  torc_device plain;
  assert_ok(torc_device_parse("sim", &plain));
  assert_true(torc_device_eq(plain, d));
  torc_device bad;
  assert_int_equal(torc_device_parse("sim:1", &bad), TORC_ERR_DEVICE);
  assert_contains(torc_last_error(), "sim:1");
  assert_ok(torc_synchronize(d));
}

static void test_round_trip_every_dtype(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  for (int dt = 0; dt < TORC_DTYPE_COUNT; dt++) {
    torc_tensor *c = make_cpu(TORC_SHAPE(3, 5), (torc_dtype)dt, 7u + dt, 0);
    torc_tensor *s = torc_to(c, sim);
    assert_torc(s);
    assert_true(torc_device_eq(torc_device_of(s), sim));
    assert_false(torc_shares_storage(c, s));
    torc_tensor *back = torc_to(s, TORC_CPU);
    assert_torc(back);
    assert_true(torc_device_is_host(torc_device_of(back)));
    size_t nb = 15 * torc_dtype_size((torc_dtype)dt);
    assert_memory_equal(torc_data(c), torc_data(back), nb);
    assert_same(c, s, torc_dtype_name((torc_dtype)dt));
    /* to() onto the device a tensor is on gives the tensor itself */
    torc_tensor *same = torc_to(s, sim);
    assert_ptr_equal(same, s);
    torc_release(same);
    torc_release(back);
    torc_release(s);
    torc_release(c);
  }
}

static void test_from_host_and_item(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  const float v[6] = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -0.5f};
  torc_tensor *s = torc_from_host(v, TORC_SHAPE(2, 3), TORC_F32, sim);
  assert_torc(s);
  assert_true(torc_is_contiguous(s));
  float out[6];
  assert_ok(torc_to_host(s, out, sizeof out));
  assert_memory_equal(out, v, sizeof v);
  /* a view on the device: row 1, read through the device's copy */
  torc_tensor *row = torc_select(s, 0, 1);
  assert_torc(row);
  float r[3];
  assert_ok(torc_to_host(row, r, sizeof r));
  assert_memory_equal(r, v + 3, sizeof r);
  torc_tensor *sum = torc_sum(s, NULL, 0, 0);
  double total;
  assert_ok(torc_item(sum, &total));
  assert_true(total == 10.25);
  char buf[64];
  assert_contains(torc_describe(s, buf, sizeof buf), "sim:0");
  /* printing reads through the device's copy */
  char *text = torc_to_string(s);
  assert_contains(text, "3.2500");
  assert_contains(text, "device='sim:0'");
  free(text);
  torc_release(sum);
  torc_release(row);
  torc_release(s);
}

static void test_unary_ops_match_ref(void **state) {
  (void)state;
  static const struct {
    const char *name;
    unary_fn fn;
    int positive;
  } ops[] = {{"neg", torc_neg, 0},
             {"abs", torc_abs, 0},
             {"sign", torc_sign, 0},
             {"square", torc_square, 0},
             {"relu", torc_relu, 0},
             {"exp", torc_exp, 0},
             {"log", torc_log, 1},
             {"sqrt", torc_sqrt, 1},
             {"sin", torc_sin, 0},
             {"cos", torc_cos, 0},
             {"tanh", torc_tanh, 0},
             {"sigmoid", torc_sigmoid, 0},
             {"reciprocal", torc_reciprocal, 1}};
  static const torc_dtype dts[] = {TORC_F32,  TORC_F64, TORC_F16,
                                   TORC_BF16, TORC_I32, TORC_I64};
  torc_device sim = sim_dev(0);
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
      torc_tensor *c = make_cpu(TORC_SHAPE(4, 6), dts[d],
                                (uint32_t)(o * 11 + d), ops[o].positive);
      torc_tensor *s = torc_to(c, sim);
      assert_torc(s);
      torc_tensor *rc = ops[o].fn(c), *rs = ops[o].fn(s);
      char what[64];
      snprintf(what, sizeof what, "%s(%s)", ops[o].name,
               torc_dtype_name(dts[d]));
      assert_same(rc, rs, what);
      /* a strided input: the transpose */
      torc_tensor *tc = torc_transpose(c, 0, 1), *ts = torc_transpose(s, 0, 1);
      torc_tensor *rtc = ops[o].fn(tc), *rts = ops[o].fn(ts);
      snprintf(what, sizeof what, "%s(%s, transposed)", ops[o].name,
               torc_dtype_name(dts[d]));
      assert_same(rtc, rts, what);
      torc_release(rtc);
      torc_release(rts);
      torc_release(tc);
      torc_release(ts);
      torc_release(rc);
      torc_release(rs);
      torc_release(s);
      torc_release(c);
    }
}

static void test_binary_ops_match_ref(void **state) {
  (void)state;
  static const struct {
    const char *name;
    binary_fn fn;
    int positive;
  } ops[] = {{"add", torc_add, 0},
             {"sub", torc_sub, 0},
             {"mul", torc_mul, 0},
             {"div", torc_div, 1},
             {"pow", torc_pow, 1},
             {"maximum", torc_maximum, 0},
             {"minimum", torc_minimum, 0},
             {"eq", torc_eq, 0},
             {"ne", torc_ne, 0},
             {"lt", torc_lt, 0},
             {"le", torc_le, 0},
             {"gt", torc_gt, 0},
             {"ge", torc_ge, 0}};
  /* (a dtype, b dtype): same dtypes and promotions */
  static const torc_dtype pairs[][2] = {
      {TORC_F32, TORC_F32}, {TORC_F64, TORC_F64}, {TORC_I32, TORC_I32},
      {TORC_I64, TORC_F32}, {TORC_U8, TORC_I32},  {TORC_F16, TORC_BF16}};
  torc_device sim = sim_dev(0);
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
      int pos = ops[o].positive || pairs[p][0] == TORC_U8;
      /* a: [3, 4], b: [4] (broadcast), and a column [3, 1] */
      torc_tensor *ac =
          make_cpu(TORC_SHAPE(3, 4), pairs[p][0], (uint32_t)(100 + o), pos);
      torc_tensor *bc = make_cpu(TORC_SHAPE(4), pairs[p][1],
                                 (uint32_t)(200 + p), ops[o].positive);
      torc_tensor *kc = make_cpu(TORC_SHAPE(3, 1), pairs[p][1],
                                 (uint32_t)(300 + p), ops[o].positive);
      torc_tensor *as = torc_to(ac, sim), *bs = torc_to(bc, sim),
                  *ks = torc_to(kc, sim);
      char what[80];
      snprintf(what, sizeof what, "%s(%s, %s)", ops[o].name,
               torc_dtype_name(pairs[p][0]), torc_dtype_name(pairs[p][1]));
      torc_tensor *rc = ops[o].fn(ac, bc), *rs = ops[o].fn(as, bs);
      assert_same(rc, rs, what);
      torc_tensor *rkc = ops[o].fn(ac, kc), *rks = ops[o].fn(as, ks);
      assert_same(rkc, rks, what);
      torc_release(rkc);
      torc_release(rks);
      torc_release(rc);
      torc_release(rs);
      torc_release(ks);
      torc_release(bs);
      torc_release(as);
      torc_release(kc);
      torc_release(bc);
      torc_release(ac);
    }
}

static void test_inplace_ops_match_ref(void **state) {
  (void)state;
  static const struct {
    const char *name;
    inplace_fn fn;
  } ops[] = {{"add_", torc_add_},
             {"sub_", torc_sub_},
             {"mul_", torc_mul_},
             {"div_", torc_div_}};
  torc_device sim = sim_dev(0);
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
    torc_tensor *ac = make_cpu(TORC_SHAPE(5, 3), TORC_F32, 31, 0);
    torc_tensor *bc = make_cpu(TORC_SHAPE(3), TORC_F32, 32, 1);
    torc_tensor *as = torc_to(ac, sim), *bs = torc_to(bc, sim);
    assert_torc(as);
    uint64_t v0 = torc_version(as);
    assert_ok(ops[o].fn(ac, bc));
    assert_ok(ops[o].fn(as, bs));
    assert_true(torc_version(as) > v0);
    assert_same(ac, as, ops[o].name);
    torc_release(bs);
    torc_release(as);
    torc_release(bc);
    torc_release(ac);
  }
}

static void test_reductions_and_matmul_match_ref(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  static const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_I32, TORC_BOOL};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    torc_tensor *c =
        make_cpu(TORC_SHAPE(3, 4, 5), dts[d], (uint32_t)(50 + d), 0);
    torc_tensor *s = torc_to(c, sim);
    const int d1[] = {1}, d02[] = {0, 2};
    struct {
      const char *name;
      torc_tensor *(*fn)(const torc_tensor *, const int *, int, int);
      const int *dims;
      int n;
      int keep;
      int float_only;
    } cases[] = {{"sum all", torc_sum, NULL, 0, 0, 0},
                 {"sum dim 1", torc_sum, d1, 1, 0, 0},
                 {"sum dims 0,2 keepdim", torc_sum, d02, 2, 1, 0},
                 {"mean dim 1", torc_mean, d1, 1, 0, 1},
                 {"prod dims 0,2", torc_prod, d02, 2, 0, 0},
                 {"amax dim 1", torc_amax, d1, 1, 1, 0},
                 {"amin all", torc_amin, NULL, 0, 0, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      if (cases[k].float_only && !torc_dtype_is_float(dts[d]))
        continue;
      if (dts[d] == TORC_BOOL && cases[k].fn != torc_sum)
        continue;
      torc_tensor *rc =
          cases[k].fn(c, cases[k].dims, cases[k].n, cases[k].keep);
      torc_tensor *rs =
          cases[k].fn(s, cases[k].dims, cases[k].n, cases[k].keep);
      char what[80];
      snprintf(what, sizeof what, "%s (%s)", cases[k].name,
               torc_dtype_name(dts[d]));
      assert_same(rc, rs, what);
      torc_release(rc);
      torc_release(rs);
    }
    torc_release(s);
    torc_release(c);
  }
  /* matmul: 2-D, batched with a broadcast operand, 1-D dot, transposed */
  static const torc_dtype mdts[] = {TORC_F32, TORC_F64, TORC_I64};
  for (size_t d = 0; d < sizeof mdts / sizeof mdts[0]; d++) {
    torc_tensor *a = make_cpu(TORC_SHAPE(2, 3, 4), mdts[d], 61, 0);
    torc_tensor *b = make_cpu(TORC_SHAPE(4, 5), mdts[d], 62, 0);
    torc_tensor *v = make_cpu(TORC_SHAPE(4), mdts[d], 63, 0);
    torc_tensor *as = torc_to(a, sim), *bs = torc_to(b, sim),
                *vs = torc_to(v, sim);
    torc_tensor *r1 = torc_matmul(a, b), *r1s = torc_matmul(as, bs);
    assert_same(r1, r1s, "matmul batched");
    torc_tensor *r2 = torc_matmul(v, v), *r2s = torc_matmul(vs, vs);
    assert_same(r2, r2s, "matmul dot");
    torc_tensor *bt = torc_transpose(b, 0, 1), *bts = torc_transpose(bs, 0, 1);
    torc_tensor *r3 = torc_matmul(bt, v), *r3s = torc_matmul(bts, vs);
    assert_same(r3, r3s, "matmul transposed x vector");
    torc_release(r3);
    torc_release(r3s);
    torc_release(bt);
    torc_release(bts);
    torc_release(r2);
    torc_release(r2s);
    torc_release(r1);
    torc_release(r1s);
    torc_release(vs);
    torc_release(bs);
    torc_release(as);
    torc_release(v);
    torc_release(b);
    torc_release(a);
  }
}

static void test_creation_casts_views_match_ref(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  torc_tensor *pc, *ps;
  pc = torc_zeros(TORC_SHAPE(2, 3), TORC_I32, TORC_CPU);
  ps = torc_zeros(TORC_SHAPE(2, 3), TORC_I32, sim);
  assert_same(pc, ps, "zeros");
  torc_release(pc);
  torc_release(ps);
  pc = torc_full(TORC_SHAPE(4), -2.5, TORC_BF16, TORC_CPU);
  ps = torc_full(TORC_SHAPE(4), -2.5, TORC_BF16, sim);
  assert_same(pc, ps, "full");
  torc_release(pc);
  torc_release(ps);
  pc = torc_arange(-3, 7, 0.5, TORC_F32, TORC_CPU);
  ps = torc_arange(-3, 7, 0.5, TORC_F32, sim);
  assert_same(pc, ps, "arange");
  torc_release(pc);
  torc_release(ps);
  pc = torc_linspace(0, 1, 11, TORC_F64, TORC_CPU);
  ps = torc_linspace(0, 1, 11, TORC_F64, sim);
  assert_same(pc, ps, "linspace");
  torc_release(pc);
  torc_release(ps);
  pc = torc_eye(3, 4, TORC_U8, TORC_CPU);
  ps = torc_eye(3, 4, TORC_U8, sim);
  assert_same(pc, ps, "eye");
  torc_release(pc);
  torc_release(ps);

  /* casts between every pair of dtypes, from a strided source */
  torc_tensor *c = make_cpu(TORC_SHAPE(4, 6), TORC_F64, 77, 0);
  torc_tensor *s = torc_to(c, sim);
  torc_tensor *cv = torc_slice(c, 1, 0, TORC_END, 2);
  torc_tensor *sv = torc_slice(s, 1, 0, TORC_END, 2);
  assert_false(torc_is_contiguous(sv));
  for (int from = 0; from < TORC_DTYPE_COUNT; from++) {
    torc_tensor *fc = torc_to_dtype(cv, (torc_dtype)from);
    torc_tensor *fs = torc_to_dtype(sv, (torc_dtype)from);
    for (int to = 0; to < TORC_DTYPE_COUNT; to++) {
      torc_tensor *tc = torc_to_dtype(fc, (torc_dtype)to);
      torc_tensor *ts = torc_to_dtype(fs, (torc_dtype)to);
      char what[64];
      snprintf(what, sizeof what, "cast %s -> %s",
               torc_dtype_name((torc_dtype)from),
               torc_dtype_name((torc_dtype)to));
      assert_same(tc, ts, what);
      torc_release(tc);
      torc_release(ts);
    }
    torc_release(fc);
    torc_release(fs);
  }
  /* views then copies: clone, contiguous of a permute, reshape of it */
  torc_tensor *cc = torc_clone(cv), *sc = torc_clone(sv);
  assert_same(cc, sc, "clone of a slice");
  const int perm[] = {1, 0};
  torc_tensor *pc2 = torc_permute(c, perm, 2), *ps2 = torc_permute(s, perm, 2);
  torc_tensor *kc = torc_contiguous(pc2), *ks = torc_contiguous(ps2);
  assert_same(kc, ks, "contiguous of a permute");
  torc_tensor *rc = torc_reshape(pc2, TORC_SHAPE(-1)),
              *rs = torc_reshape(ps2, TORC_SHAPE(-1));
  assert_same(rc, rs, "reshape of a permute");
  /* copy_ with broadcast and cast, fill_ and zero_ on the device */
  torc_tensor *dc = torc_empty(TORC_SHAPE(3, 4, 6), TORC_F32, TORC_CPU);
  torc_tensor *ds = torc_empty(TORC_SHAPE(3, 4, 6), TORC_F32, sim);
  assert_ok(torc_copy_(dc, c));
  assert_ok(torc_copy_(ds, s));
  assert_same(dc, ds, "copy_ broadcast");
  torc_tensor *dcv = torc_select(dc, 0, 1), *dsv = torc_select(ds, 0, 1);
  assert_ok(torc_fill_(dcv, 0.75));
  assert_ok(torc_fill_(dsv, 0.75));
  assert_same(dc, ds, "fill_ on a view");
  assert_ok(torc_zero_(dc));
  assert_ok(torc_zero_(ds));
  assert_same(dc, ds, "zero_");
  torc_release(dcv);
  torc_release(dsv);
  torc_release(dc);
  torc_release(ds);
  torc_release(rc);
  torc_release(rs);
  torc_release(kc);
  torc_release(ks);
  torc_release(pc2);
  torc_release(ps2);
  torc_release(cc);
  torc_release(sc);
  torc_release(cv);
  torc_release(sv);
  torc_release(s);
  torc_release(c);
}

static void test_random_matches_ref(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  static const torc_dtype dts[] = {TORC_F32, TORC_F64, TORC_F16};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    torc_generator *gc = torc_generator_new(1234),
                   *gs = torc_generator_new(1234);
    torc_tensor *uc = torc_rand(TORC_SHAPE(7, 9), dts[d], TORC_CPU, gc);
    torc_tensor *us = torc_rand(TORC_SHAPE(7, 9), dts[d], sim, gs);
    assert_same(uc, us, "rand");
    torc_tensor *nc = torc_randn(TORC_SHAPE(33), dts[d], TORC_CPU, gc);
    torc_tensor *ns = torc_randn(TORC_SHAPE(33), dts[d], sim, gs);
    assert_same(nc, ns, "randn");
    torc_tensor *pc = torc_bernoulli(uc, gc), *ps = torc_bernoulli(us, gs);
    assert_same(pc, ps, "bernoulli");
    torc_release(pc);
    torc_release(ps);
    torc_release(nc);
    torc_release(ns);
    torc_release(uc);
    torc_release(us);
    torc_generator_free(gc);
    torc_generator_free(gs);
  }
  torc_generator *gc = torc_generator_new(99), *gs = torc_generator_new(99);
  torc_tensor *ic =
      torc_randint(-5, 17, TORC_SHAPE(50), TORC_I64, TORC_CPU, gc);
  torc_tensor *is = torc_randint(-5, 17, TORC_SHAPE(50), TORC_I64, sim, gs);
  assert_same(ic, is, "randint");
  torc_release(ic);
  torc_release(is);
  torc_generator_free(gc);
  torc_generator_free(gs);
}

static void test_mixed_devices_fail(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  int64_t live = torc_tensor_live_count();
  torc_tensor *c = torc_ones(TORC_SHAPE(2, 2), TORC_F32, TORC_CPU);
  torc_tensor *s = torc_ones(TORC_SHAPE(2, 2), TORC_F32, sim);
  assert_torc(c);
  assert_torc(s);
  torc_clear_error();
  assert_null(torc_add(c, s));
  assert_error(TORC_ERR_DEVICE, "cpu");
  assert_contains(torc_last_error(), "sim:0");
  assert_contains(torc_last_error(), "torc_to");
  assert_null(torc_matmul(s, c));
  assert_error(TORC_ERR_DEVICE, "sim:0");
  assert_contains(torc_last_error(), "cpu");
  assert_int_equal(torc_add_(s, c), TORC_ERR_DEVICE);
  assert_int_equal(torc_copy_(c, s), TORC_ERR_DEVICE);
  assert_contains(torc_last_error(), "sim:0");
  /* the fix the message gives works */
  torc_tensor *moved = torc_to(c, sim);
  torc_tensor *sum = torc_add(moved, s);
  assert_torc(sum);
  const double two[4] = {2, 2, 2, 2};
  test_assert_values(sum, two, 4, 0);
  torc_release(sum);
  torc_release(moved);
  torc_release(s);
  torc_release(c);
  assert_int_equal(torc_tensor_live_count(), live);
}

static void test_data_on_sim_fails(void **state) {
  (void)state;
  torc_tensor *s = torc_zeros(TORC_SHAPE(3), TORC_F32, sim_dev(0));
  assert_torc(s);
  torc_clear_error();
  assert_null(torc_data(s));
  assert_error(TORC_ERR_DEVICE, "sim:0");
  assert_contains(torc_last_error(), "torc_to_host");
  /* the wrong-size read is an error too, not an overrun */
  float small[2];
  assert_int_not_equal(torc_to_host(s, small, sizeof small), TORC_OK);
  torc_release(s);
}

static void test_memory_accounting(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  assert_ok(torc_synchronize(sim));
  size_t base = torc_device_memory_allocated(sim);
  torc_tensor *a = torc_zeros(TORC_SHAPE(100, 10), TORC_F64, sim);
  assert_torc(a);
  assert_int_equal(torc_device_memory_allocated(sim), base + 8000);
  torc_tensor *v = torc_slice(a, 0, 10, 20, 1); /* a view: no memory */
  assert_int_equal(torc_device_memory_allocated(sim), base + 8000);
  torc_tensor *b = torc_exp(v);
  assert_torc(b);
  assert_int_equal(torc_device_memory_allocated(sim), base + 8000 + 800);
  torc_release(a);
  assert_int_equal(torc_device_memory_allocated(sim), base + 8000 + 800);
  torc_release(v); /* last reference to a's storage */
  assert_int_equal(torc_device_memory_allocated(sim), base + 800);
  double ones[100];
  for (int i = 0; i < 100; i++)
    ones[i] = 1.0;
  test_assert_values(b, ones, 100, 0);
  torc_release(b);
  assert_int_equal(torc_device_memory_allocated(sim), base);
  /* a failed op leaves nothing allocated behind */
  torc_tensor *c = torc_ones(TORC_SHAPE(4), TORC_F32, sim);
  torc_tensor *h = torc_ones(TORC_SHAPE(4), TORC_F32, TORC_CPU);
  assert_null(torc_mul(c, h));
  torc_release(c);
  torc_release(h);
  assert_int_equal(torc_device_memory_allocated(sim), base);
}

static void test_pinned_memory(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  enum { N = 3000 };
  torc_tensor *p = torc_empty_pinned(TORC_SHAPE(N), TORC_F32, sim);
  assert_torc(p);
  assert_int_equal(torc_is_pinned(p), 1);
  assert_true(torc_device_is_host(torc_device_of(p)));
  float *pv = torc_data(p);
  assert_non_null(pv);
  assert_int_equal((uintptr_t)pv % 64, 0);
  for (int i = 0; i < N; i++)
    pv[i] = (float)i * 0.5f - 100.0f;
  /* pinned -> device (queued without staging), compute, device -> pinned */
  long pinned0 = described(sim, "copies from pinned memory");
  long staged0 = described(sim, "staged");
  assert_true(pinned0 >= 0 && staged0 >= 0);
  torc_tensor *s = torc_to(p, sim);
  assert_torc(s);
  assert_int_equal(described(sim, "copies from pinned memory"), pinned0 + 1);
  assert_int_equal(described(sim, "staged"), staged0);
  torc_tensor *two = torc_full(TORC_SHAPE(1), 2.0, TORC_F32, sim);
  torc_tensor *r = torc_mul(s, two);
  assert_torc(r);
  torc_tensor *q = torc_empty_pinned(TORC_SHAPE(N), TORC_F32, sim);
  assert_torc(q);
  assert_ok(torc_to_host(r, torc_data(q), sizeof(float) * N));
  const float *qv = torc_data(q);
  for (int i = 0; i < N; i++)
    if (qv[i] != 2.0f * ((float)i * 0.5f - 100.0f)) {
      print_error("element %d: %g\n", i, (double)qv[i]);
      fail();
    }
  /* plain memory is staged */
  torc_tensor *plain = torc_ones(TORC_SHAPE(5), TORC_F32, TORC_CPU);
  torc_tensor *ps = torc_to(plain, sim);
  assert_torc(ps);
  assert_int_equal(described(sim, "copies from pinned memory"), pinned0 + 1);
  assert_int_equal(described(sim, "staged"), staged0 + 1);
  torc_release(ps);
  torc_release(plain);
  /* back to a plain cpu tensor: not pinned */
  torc_tensor *c = torc_to(r, TORC_CPU);
  assert_torc(c);
  assert_int_equal(torc_is_pinned(c), 0);
  assert_memory_equal(torc_data(c), qv, sizeof(float) * N);
  /* a pinned tensor released right after its copy was queued: the sim
   * waits for the stream before freeing it (as cudaFreeHost does) */
  torc_tensor *p2 = torc_empty_pinned(TORC_SHAPE(N), TORC_F32, sim);
  memcpy(torc_data(p2), pv, sizeof(float) * N);
  torc_tensor *s2 = torc_to(p2, sim);
  torc_release(p2);
  assert_same(p, s2, "copy from a released pinned tensor");
  /* raw pinned blocks */
  void *raw = torc_host_alloc(sim, 12345);
  assert_non_null(raw);
  memset(raw, 0x5a, 12345);
  torc_host_free(sim, raw);
  torc_host_free(sim, NULL);
  torc_release(s2);
  torc_release(c);
  torc_release(q);
  torc_release(r);
  torc_release(two);
  torc_release(s);
  torc_release(p);
}

/* The counters see each time the host waits: a queued kernel does not
 * block, a read back does, synchronize does. */
static void test_counters_count_host_waits(void **state) {
  (void)state;
  torc_device sim = sim_dev(0);
  assert_ok(torc_synchronize(sim));
  (void)sim_counters(0, 1);
  torc_tensor *c = make_cpu(TORC_SHAPE(4, 4), TORC_F32, 3u, 0);
  torc_tensor *s = torc_to(c, sim);
  assert_torc(s);
  torc_tensor *y = torc_exp(s);
  assert_torc(y);
  torc_sim_counters k = sim_counters(0, 0);
  assert_int_equal(k.struct_size, sizeof k);
  assert_true(k.kernels >= 1);
  assert_int_equal(k.blocking_reads, 0);
  assert_int_equal(k.synchronizes, 0);
  float out[16];
  assert_ok(torc_to_host(y, out, sizeof out));
  k = sim_counters(0, 0);
  assert_int_equal(k.blocking_reads, 1);
  assert_int_equal(k.blocking_bytes, sizeof out);
  assert_ok(torc_synchronize(sim));
  k = sim_counters(0, 1);
  assert_int_equal(k.synchronizes, 1);
  k = sim_counters(0, 0);
  assert_int_equal(k.blocking_reads, 0);
  assert_int_equal(k.kernels, 0);
  torc_release(y);
  torc_release(s);
  torc_release(c);
}

int main(void) {
  const struct CMUnitTest basic[] = {
      cmocka_unit_test(test_device_registered),
      cmocka_unit_test(test_round_trip_every_dtype),
      cmocka_unit_test(test_from_host_and_item),
      cmocka_unit_test(test_unary_ops_match_ref),
      cmocka_unit_test(test_binary_ops_match_ref),
      cmocka_unit_test(test_inplace_ops_match_ref),
      cmocka_unit_test(test_reductions_and_matmul_match_ref),
      cmocka_unit_test(test_creation_casts_views_match_ref),
      cmocka_unit_test(test_random_matches_ref),
      cmocka_unit_test(test_mixed_devices_fail),
      cmocka_unit_test(test_data_on_sim_fails),
      cmocka_unit_test(test_memory_accounting),
      cmocka_unit_test(test_pinned_memory),
      cmocka_unit_test(test_counters_count_host_waits),
  };
  if (getenv("TORC_PLUGIN_PATH") == NULL) {
    printf("test_sim: TORC_PLUGIN_PATH is not set (run through make check); "
           "skipped\n");
    return TEST_SKIP_STATUS;
  }
  return cmocka_run_group_tests_name("sim", basic, test_setup_ref_sim,
                                     test_teardown_all);
}
