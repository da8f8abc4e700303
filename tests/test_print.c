/* tests/test_print.c — torc_fprint/torc_print/torc_to_string/torc_describe:
 * the text must equal what PyTorch 1.13 prints for the same tensor. Each
 * expected string was produced by the python3 one-liner in the comment
 * above it (python3 -c 'import torch; print(EXPR)'), with PyTorch's dtype
 * and device suffixes spelt the torc way (dtype=torch.float64 -> dtype=f64,
 * device='cuda:0' -> device='sim:0').
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <unistd.h>

#include "testutil.h"

/* ---- helpers ---- */

/* Asserts torc_to_string(t) equals `expect`, printing both on a mismatch;
 * releases t. */
static void check_text(torc_tensor *t, const char *expect) {
  assert_torc(t);
  char *got = torc_to_string(t);
  if (got == NULL) {
    print_error("torc_to_string failed: %s\n", torc_last_error());
    torc_release(t);
    fail();
  }
  if (strcmp(got, expect) != 0) {
    print_error("expected:\n%s\ngot:\n%s\n", expect, got);
    free(got);
    torc_release(t);
    fail();
  }
  free(got);
  torc_release(t);
}

static torc_tensor *f32(const float *v, const int64_t *shape, int ndim) {
  return torc_from_host(v, shape, ndim, TORC_F32, TORC_CPU);
}

static torc_tensor *i64(const int64_t *v, const int64_t *shape, int ndim) {
  return torc_from_host(v, shape, ndim, TORC_I64, TORC_CPU);
}

/* arange(n) in `dtype`, reshaped. */
static torc_tensor *arange_shaped(int64_t n, torc_dtype dtype,
                                  const int64_t *shape, int ndim) {
  torc_tensor *a = torc_arange(0, (double)n, 1, dtype, TORC_CPU);
  if (a == NULL)
    return NULL;
  torc_tensor *r = torc_reshape(a, shape, ndim);
  torc_release(a);
  return r;
}

/* torch.arange(n, dtype=float32) / d, computed on the host in f32 as
 * PyTorch does (IEEE division, correctly rounded). */
static torc_tensor *arange_div_f32(int64_t n, float d, const int64_t *shape,
                                   int ndim) {
  float *v = malloc(sizeof(float) * (size_t)n);
  assert_non_null(v);
  for (int64_t i = 0; i < n; i++)
    v[i] = (float)i / d;
  torc_tensor *t = f32(v, shape, ndim);
  free(v);
  return t;
}

static torc_device sim0(void) {
  torc_device dev;
  assert_ok(torc_device_parse("sim:0", &dev));
  return dev;
}

/* t moved to sim:0; t is released. */
static torc_tensor *on_sim(torc_tensor *t) {
  assert_torc(t);
  torc_tensor *s = torc_to(t, sim0());
  torc_release(t);
  return s;
}

static int64_t live_before;

static int setup(void **state) {
  (void)state;
  live_before = torc_tensor_live_count();
  torc_clear_error();
  return 0;
}

/* Every test must release what it made; printing must not leak tensors. */
static int teardown(void **state) {
  (void)state;
  int64_t live = torc_tensor_live_count();
  if (live != live_before) {
    fprintf(stderr, "%lld tensors leaked\n", (long long)(live - live_before));
    return -1;
  }
  return 0;
}

/* ---- floating: fixed, int_mode, scientific ---- */

static void test_fixed(void **state) {
  (void)state;
  /* torch.tensor([1.5, 2.25, -3.125]) */
  check_text(f32((const float[]){1.5f, 2.25f, -3.125f}, TORC_SHAPE(3)),
             "tensor([ 1.5000,  2.2500, -3.1250])");
  /* torch.tensor([[1.5, -2.], [300.25, 4.]]) */
  check_text(f32((const float[]){1.5f, -2.f, 300.25f, 4.f}, TORC_SHAPE(2, 2)),
             "tensor([[  1.5000,  -2.0000],\n"
             "        [300.2500,   4.0000]])");
  /* torch.tensor([1.00005, 2.5])  (f32 1.00005 is 1.0000499...) */
  check_text(f32((const float[]){1.00005f, 2.5f}, TORC_SHAPE(2)),
             "tensor([1.0000, 2.5000])");
  /* torch.tensor([-0.0, 1.5]) */
  check_text(f32((const float[]){-0.0f, 1.5f}, TORC_SHAPE(2)),
             "tensor([-0.0000, 1.5000])");
  /* torch.arange(30.)/7  -- wraps at 80 columns, 9 per line */
  check_text(
      arange_div_f32(30, 7.f, TORC_SHAPE(30)),
      "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n"
      "        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,\n"
      "        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,\n"
      "        3.8571, 4.0000, 4.1429])");
}

static void test_int_mode(void **state) {
  (void)state;
  /* torch.tensor([1., 2., -3.]) */
  check_text(f32((const float[]){1.f, 2.f, -3.f}, TORC_SHAPE(3)),
             "tensor([ 1.,  2., -3.])");
  /* torch.tensor([0., 10., -200.]) */
  check_text(f32((const float[]){0.f, 10.f, -200.f}, TORC_SHAPE(3)),
             "tensor([   0.,   10., -200.])");
  /* torch.tensor([0., 0.]) */
  check_text(f32((const float[]){0.f, 0.f}, TORC_SHAPE(2)), "tensor([0., 0.])");
  /* torch.arange(100.).reshape(10,10)  (first two rows checked in full) */
  torc_tensor *t = arange_shaped(100, TORC_F32, TORC_SHAPE(10, 10));
  assert_torc(t);
  char *s = torc_to_string(t);
  assert_non_null(s);
  assert_contains(s, "tensor([[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9.],\n"
                     "        [10., 11., 12., 13., 14., 15., 16., 17., 18., 19.],\n");
  assert_contains(s, "        [90., 91., 92., 93., 94., 95., 96., 97., 98., 99.]])");
  free(s);
  torc_release(t);
}

static void test_sci_mode(void **state) {
  (void)state;
  /* torch.tensor([1e5, 1.5, 2.])  (max/min > 1000) */
  check_text(f32((const float[]){1e5f, 1.5f, 2.f}, TORC_SHAPE(3)),
             "tensor([1.0000e+05, 1.5000e+00, 2.0000e+00])");
  /* torch.tensor([1e-5, 1.0])  (min < 1e-4) */
  check_text(f32((const float[]){1e-5f, 1.f}, TORC_SHAPE(2)),
             "tensor([1.0000e-05, 1.0000e+00])");
  /* torch.tensor([1e9, 2e9])  (integers, but max > 1e8) */
  check_text(f32((const float[]){1e9f, 2e9f}, TORC_SHAPE(2)),
             "tensor([1.0000e+09, 2.0000e+09])");
  /* torch.tensor([123456.5, -0.5])  (negative: width alignment) */
  check_text(f32((const float[]){123456.5f, -0.5f}, TORC_SHAPE(2)),
             "tensor([ 1.2346e+05, -5.0000e-01])");
  /* torch.tensor([0.00012345, 0.5]) */
  check_text(f32((const float[]){0.00012345f, 0.5f}, TORC_SHAPE(2)),
             "tensor([1.2345e-04, 5.0000e-01])");
}

static void test_nonfinite(void **state) {
  (void)state;
  /* torch.tensor([1.5, float('nan'), float('inf'), -float('inf')]) */
  check_text(f32((const float[]){1.5f, NAN, INFINITY, -INFINITY}, TORC_SHAPE(4)),
             "tensor([1.5000,    nan,    inf,   -inf])");
  /* torch.tensor([1., float('nan'), -float('inf')]) */
  check_text(f32((const float[]){1.f, NAN, -INFINITY}, TORC_SHAPE(3)),
             "tensor([1., nan, -inf])");
  /* torch.tensor([float('nan'), float('inf')]) */
  check_text(f32((const float[]){NAN, INFINITY}, TORC_SHAPE(2)),
             "tensor([nan, inf])");
  /* torch.tensor([1e-5, float('nan'), -2.0]) */
  check_text(f32((const float[]){1e-5f, NAN, -2.f}, TORC_SHAPE(3)),
             "tensor([ 1.0000e-05,         nan, -2.0000e+00])");
  /* A negative NaN still prints "nan" (Python never signs NaN):
   * torch.tensor([-float('nan'), 1.5]) */
  check_text(f32((const float[]){-NAN, 1.5f}, TORC_SHAPE(2)),
             "tensor([   nan, 1.5000])");
}

/* ---- shapes ---- */

static void test_3d_4d(void **state) {
  (void)state;
  /* torch.arange(24.).reshape(2,3,4) */
  check_text(arange_shaped(24, TORC_F32, TORC_SHAPE(2, 3, 4)),
             "tensor([[[ 0.,  1.,  2.,  3.],\n"
             "         [ 4.,  5.,  6.,  7.],\n"
             "         [ 8.,  9., 10., 11.]],\n"
             "\n"
             "        [[12., 13., 14., 15.],\n"
             "         [16., 17., 18., 19.],\n"
             "         [20., 21., 22., 23.]]])");
  /* torch.arange(24).reshape(2,3,4)/7 */
  check_text(arange_div_f32(24, 7.f, TORC_SHAPE(2, 3, 4)),
             "tensor([[[0.0000, 0.1429, 0.2857, 0.4286],\n"
             "         [0.5714, 0.7143, 0.8571, 1.0000],\n"
             "         [1.1429, 1.2857, 1.4286, 1.5714]],\n"
             "\n"
             "        [[1.7143, 1.8571, 2.0000, 2.1429],\n"
             "         [2.2857, 2.4286, 2.5714, 2.7143],\n"
             "         [2.8571, 3.0000, 3.1429, 3.2857]]])");
  /* torch.arange(16).reshape(2,2,2,2) */
  check_text(arange_shaped(16, TORC_I64, TORC_SHAPE(2, 2, 2, 2)),
             "tensor([[[[ 0,  1],\n"
             "          [ 2,  3]],\n"
             "\n"
             "         [[ 4,  5],\n"
             "          [ 6,  7]]],\n"
             "\n"
             "\n"
             "        [[[ 8,  9],\n"
             "          [10, 11]],\n"
             "\n"
             "         [[12, 13],\n"
             "          [14, 15]]]])");
}

static void test_scalar(void **state) {
  (void)state;
  /* torch.tensor(3.5) */
  check_text(torc_full(NULL, 0, 3.5, TORC_F32, TORC_CPU), "tensor(3.5000)");
  /* torch.tensor(2.) */
  check_text(torc_full(NULL, 0, 2.0, TORC_F32, TORC_CPU), "tensor(2.)");
  /* torch.tensor(-7) */
  check_text(torc_full(NULL, 0, -7, TORC_I64, TORC_CPU), "tensor(-7)");
  /* torch.tensor(float('nan')) */
  check_text(torc_full(NULL, 0, NAN, TORC_F32, TORC_CPU), "tensor(nan)");
  /* torch.tensor(True) */
  check_text(torc_full(NULL, 0, 1, TORC_BOOL, TORC_CPU), "tensor(True)");
  /* torch.tensor(1e-20)  (sci applies to scalars too) */
  check_text(torc_full(NULL, 0, 1e-20, TORC_F64, TORC_CPU),
             "tensor(1.0000e-20, dtype=f64)");
}

static void test_empty(void **state) {
  (void)state;
  /* torch.tensor([]) */
  check_text(torc_zeros(TORC_SHAPE(0), TORC_F32, TORC_CPU), "tensor([])");
  /* torch.zeros(0, 3) */
  check_text(torc_zeros(TORC_SHAPE(0, 3), TORC_F32, TORC_CPU),
             "tensor([], size=(0, 3))");
  /* torch.zeros(0, dtype=torch.int64)  (empty: the dtype is always shown
   * unless it is the default float32) */
  check_text(torc_zeros(TORC_SHAPE(0), TORC_I64, TORC_CPU),
             "tensor([], dtype=i64)");
  /* torch.zeros(2,0,3, dtype=torch.float64) */
  check_text(torc_zeros(TORC_SHAPE(2, 0, 3), TORC_F64, TORC_CPU),
             "tensor([], size=(2, 0, 3), dtype=f64)");
}

/* ---- other dtypes ---- */

static void test_bool(void **state) {
  (void)state;
  /* torch.tensor([True, False, True]) */
  check_text(torc_from_host((const uint8_t[]){1, 0, 1}, TORC_SHAPE(3),
                            TORC_BOOL, TORC_CPU),
             "tensor([ True, False,  True])");
  /* torch.tensor([[True], [False]]) */
  check_text(torc_from_host((const uint8_t[]){1, 0}, TORC_SHAPE(2, 1),
                            TORC_BOOL, TORC_CPU),
             "tensor([[ True],\n"
             "        [False]])");
  /* torch.tensor([True]) */
  check_text(torc_from_host((const uint8_t[]){1}, TORC_SHAPE(1), TORC_BOOL,
                            TORC_CPU),
             "tensor([True])");
}

static void test_integers(void **state) {
  (void)state;
  /* torch.tensor([1, -20, 300]) */
  check_text(i64((const int64_t[]){1, -20, 300}, TORC_SHAPE(3)),
             "tensor([  1, -20, 300])");
  /* torch.arange(40) */
  check_text(torc_arange(0, 40, 1, TORC_I64, TORC_CPU),
             "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
             "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
             "        36, 37, 38, 39])");
  /* torch.tensor([1, 2, 255], dtype=torch.uint8) */
  check_text(torc_from_host((const uint8_t[]){1, 2, 255}, TORC_SHAPE(3),
                            TORC_U8, TORC_CPU),
             "tensor([  1,   2, 255], dtype=u8)");
  /* torch.tensor([1, -2], dtype=torch.int32) */
  check_text(torc_from_host((const int32_t[]){1, -2}, TORC_SHAPE(2), TORC_I32,
                            TORC_CPU),
             "tensor([ 1, -2], dtype=i32)");
  /* torch.tensor([-9223372036854775807 - 1, 7])  (every int64 is exact) */
  check_text(i64((const int64_t[]){INT64_MIN, 7}, TORC_SHAPE(2)),
             "tensor([-9223372036854775808,                    7])");
}

static void test_f64_f16_bf16(void **state) {
  (void)state;
  /* torch.tensor([0.1, 0.2], dtype=torch.float64) */
  check_text(torc_from_host((const double[]){0.1, 0.2}, TORC_SHAPE(2),
                            TORC_F64, TORC_CPU),
             "tensor([0.1000, 0.2000], dtype=f64)");
  /* torch.arange(9, dtype=torch.float64)/7  (the suffix goes to a new
   * line: the last line would pass 80 columns) */
  double v[9];
  for (int i = 0; i < 9; i++)
    v[i] = (double)i / 7.0;
  check_text(torc_from_host(v, TORC_SHAPE(9), TORC_F64, TORC_CPU),
             "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429],\n"
             "       dtype=f64)");
  torc_tensor *src = f32((const float[]){0.1f, 0.2f, 3.0f}, TORC_SHAPE(3));
  assert_torc(src);
  /* torch.tensor([0.1, 0.2, 3.0], dtype=torch.float16) */
  check_text(torc_to_dtype(src, TORC_F16),
             "tensor([0.1000, 0.2000, 3.0000], dtype=f16)");
  /* torch.tensor([0.1, 0.2, 3.0], dtype=torch.bfloat16) */
  check_text(torc_to_dtype(src, TORC_BF16),
             "tensor([0.1001, 0.2002, 3.0000], dtype=bf16)");
  torc_release(src);
}

/* ---- summaries beyond 1000 elements ---- */

static void test_summarised(void **state) {
  (void)state;
  /* torch.arange(2000) */
  check_text(torc_arange(0, 2000, 1, TORC_I64, TORC_CPU),
             "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  /* torch.arange(2000.)  (sci from the edge items only; " ..." counts as
   * an element when lines wrap) */
  check_text(torc_arange(0, 2000, 1, TORC_F32, TORC_CPU),
             "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
             "        1.9990e+03])");
  /* torch.arange(10000).reshape(100,100) */
  check_text(arange_shaped(10000, TORC_I64, TORC_SHAPE(100, 100)),
             "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
             "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
             "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
             "        ...,\n"
             "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
             "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
             "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])");
  /* torch.arange(10000.).reshape(100,100)/3 */
  check_text(arange_div_f32(10000, 3.f, TORC_SHAPE(100, 100)),
             "tensor([[0.0000e+00, 3.3333e-01, 6.6667e-01,  ..., 3.2333e+01, 3.2667e+01,\n"
             "         3.3000e+01],\n"
             "        [3.3333e+01, 3.3667e+01, 3.4000e+01,  ..., 6.5667e+01, 6.6000e+01,\n"
             "         6.6333e+01],\n"
             "        [6.6667e+01, 6.7000e+01, 6.7333e+01,  ..., 9.9000e+01, 9.9333e+01,\n"
             "         9.9667e+01],\n"
             "        ...,\n"
             "        [3.2333e+03, 3.2337e+03, 3.2340e+03,  ..., 3.2657e+03, 3.2660e+03,\n"
             "         3.2663e+03],\n"
             "        [3.2667e+03, 3.2670e+03, 3.2673e+03,  ..., 3.2990e+03, 3.2993e+03,\n"
             "         3.2997e+03],\n"
             "        [3.3000e+03, 3.3003e+03, 3.3007e+03,  ..., 3.3323e+03, 3.3327e+03,\n"
             "         3.3330e+03]])");
  /* torch.arange(1200).reshape(2,600)  (a dim of <= 6 is never cut) */
  check_text(arange_shaped(1200, TORC_I64, TORC_SHAPE(2, 600)),
             "tensor([[   0,    1,    2,  ...,  597,  598,  599],\n"
             "        [ 600,  601,  602,  ..., 1197, 1198, 1199]])");
  /* torch.arange(2*3*1000).reshape(2,3,1000) */
  check_text(arange_shaped(6000, TORC_I64, TORC_SHAPE(2, 3, 1000)),
             "tensor([[[   0,    1,    2,  ...,  997,  998,  999],\n"
             "         [1000, 1001, 1002,  ..., 1997, 1998, 1999],\n"
             "         [2000, 2001, 2002,  ..., 2997, 2998, 2999]],\n"
             "\n"
             "        [[3000, 3001, 3002,  ..., 3997, 3998, 3999],\n"
             "         [4000, 4001, 4002,  ..., 4997, 4998, 4999],\n"
             "         [5000, 5001, 5002,  ..., 5997, 5998, 5999]]])");
  /* torch.arange(1001).reshape(7,11,13)  (1001 > 1000: every dim cut) */
  check_text(arange_shaped(1001, TORC_I64, TORC_SHAPE(7, 11, 13)),
             "tensor([[[   0,    1,    2,  ...,   10,   11,   12],\n"
             "         [  13,   14,   15,  ...,   23,   24,   25],\n"
             "         [  26,   27,   28,  ...,   36,   37,   38],\n"
             "         ...,\n"
             "         [ 104,  105,  106,  ...,  114,  115,  116],\n"
             "         [ 117,  118,  119,  ...,  127,  128,  129],\n"
             "         [ 130,  131,  132,  ...,  140,  141,  142]],\n"
             "\n"
             "        [[ 143,  144,  145,  ...,  153,  154,  155],\n"
             "         [ 156,  157,  158,  ...,  166,  167,  168],\n"
             "         [ 169,  170,  171,  ...,  179,  180,  181],\n"
             "         ...,\n"
             "         [ 247,  248,  249,  ...,  257,  258,  259],\n"
             "         [ 260,  261,  262,  ...,  270,  271,  272],\n"
             "         [ 273,  274,  275,  ...,  283,  284,  285]],\n"
             "\n"
             "        [[ 286,  287,  288,  ...,  296,  297,  298],\n"
             "         [ 299,  300,  301,  ...,  309,  310,  311],\n"
             "         [ 312,  313,  314,  ...,  322,  323,  324],\n"
             "         ...,\n"
             "         [ 390,  391,  392,  ...,  400,  401,  402],\n"
             "         [ 403,  404,  405,  ...,  413,  414,  415],\n"
             "         [ 416,  417,  418,  ...,  426,  427,  428]],\n"
             "\n"
             "        ...,\n"
             "\n"
             "        [[ 572,  573,  574,  ...,  582,  583,  584],\n"
             "         [ 585,  586,  587,  ...,  595,  596,  597],\n"
             "         [ 598,  599,  600,  ...,  608,  609,  610],\n"
             "         ...,\n"
             "         [ 676,  677,  678,  ...,  686,  687,  688],\n"
             "         [ 689,  690,  691,  ...,  699,  700,  701],\n"
             "         [ 702,  703,  704,  ...,  712,  713,  714]],\n"
             "\n"
             "        [[ 715,  716,  717,  ...,  725,  726,  727],\n"
             "         [ 728,  729,  730,  ...,  738,  739,  740],\n"
             "         [ 741,  742,  743,  ...,  751,  752,  753],\n"
             "         ...,\n"
             "         [ 819,  820,  821,  ...,  829,  830,  831],\n"
             "         [ 832,  833,  834,  ...,  842,  843,  844],\n"
             "         [ 845,  846,  847,  ...,  855,  856,  857]],\n"
             "\n"
             "        [[ 858,  859,  860,  ...,  868,  869,  870],\n"
             "         [ 871,  872,  873,  ...,  881,  882,  883],\n"
             "         [ 884,  885,  886,  ...,  894,  895,  896],\n"
             "         ...,\n"
             "         [ 962,  963,  964,  ...,  972,  973,  974],\n"
             "         [ 975,  976,  977,  ...,  985,  986,  987],\n"
             "         [ 988,  989,  990,  ...,  998,  999, 1000]]])");
}

/* The threshold is numel > 1000: 1000 elements print whole. */
static void test_threshold(void **state) {
  (void)state;
  torc_tensor *t = torc_arange(0, 1000, 1, TORC_I64, TORC_CPU);
  assert_torc(t);
  char *s = torc_to_string(t);
  assert_non_null(s);
  /* python3 -c 'import torch; print("..." in str(torch.arange(1000)))' -> False */
  assert_null(strstr(s, "..."));
  /* Width 3 ("999"): floor((80 - 7) / (3 + 2)) = 14 per line, and
   * 1000 = 71 * 14 + 6 leaves 6 on the last line. */
  assert_contains(s, "tensor([  0,   1,   2,   3,   4,   5,   6,   7,   8,   9,  10,  11,  12,  13,\n");
  assert_contains(s, "        994, 995, 996, 997, 998, 999])");
  free(s);
  torc_release(t);
}

/* ---- strided inputs ---- */

static void test_noncontiguous(void **state) {
  (void)state;
  /* torch.arange(6.).reshape(2,3).t() */
  torc_tensor *a = arange_shaped(6, TORC_F32, TORC_SHAPE(2, 3));
  assert_torc(a);
  torc_tensor *at = torc_transpose(a, 0, 1);
  assert_torc(at);
  assert_false(torc_is_contiguous(at));
  check_text(at, "tensor([[0., 3.],\n"
                 "        [1., 4.],\n"
                 "        [2., 5.]])");
  /* torch.arange(6.).reshape(2,3).t()[1]  (offset 1, stride 3) */
  torc_tensor *at2 = torc_transpose(a, 0, 1);
  check_text(torc_select(at2, 0, 1), "tensor([1., 4.])");
  torc_release(at2);
  torc_release(a);

  /* torch.arange(24.).reshape(2,3,4).permute(2,0,1) */
  torc_tensor *b = arange_shaped(24, TORC_F32, TORC_SHAPE(2, 3, 4));
  assert_torc(b);
  check_text(torc_permute(b, (const int[]){2, 0, 1}, 3),
             "tensor([[[ 0.,  4.,  8.],\n"
             "         [12., 16., 20.]],\n"
             "\n"
             "        [[ 1.,  5.,  9.],\n"
             "         [13., 17., 21.]],\n"
             "\n"
             "        [[ 2.,  6., 10.],\n"
             "         [14., 18., 22.]],\n"
             "\n"
             "        [[ 3.,  7., 11.],\n"
             "         [15., 19., 23.]]])");
  torc_release(b);

  /* torch.arange(2000).reshape(1000,2).t()  (summarised and strided) */
  torc_tensor *c = arange_shaped(2000, TORC_I64, TORC_SHAPE(1000, 2));
  assert_torc(c);
  check_text(torc_transpose(c, 0, 1),
             "tensor([[   0,    2,    4,  ..., 1994, 1996, 1998],\n"
             "        [   1,    3,    5,  ..., 1995, 1997, 1999]])");
  torc_release(c);

  /* A broadcast view (stride 0): torch.tensor([1.5, 2.]).expand(2, 2) */
  torc_tensor *d = f32((const float[]){1.5f, 2.f}, TORC_SHAPE(2));
  assert_torc(d);
  check_text(torc_expand(d, TORC_SHAPE(2, 2)),
             "tensor([[1.5000, 2.0000],\n"
             "        [1.5000, 2.0000]])");
  torc_release(d);
}

/* ---- devices ---- */

static void test_sim_device(void **state) {
  (void)state;
  /* torch.tensor([1.5, 2.], device='cuda')  -> device='sim:0' */
  check_text(on_sim(f32((const float[]){1.5f, 2.f}, TORC_SHAPE(2))),
             "tensor([1.5000, 2.0000], device='sim:0')");
  /* torch.tensor([1, -2], dtype=torch.int32, device='cuda')  (device
   * comes before dtype) */
  check_text(on_sim(torc_from_host((const int32_t[]){1, -2}, TORC_SHAPE(2),
                                   TORC_I32, TORC_CPU)),
             "tensor([ 1, -2], device='sim:0', dtype=i32)");
  /* torch.arange(2000, device='cuda')  (summary read from the device) */
  check_text(on_sim(torc_arange(0, 2000, 1, TORC_I64, TORC_CPU)),
             "tensor([   0,    1,    2,  ..., 1997, 1998, 1999], device='sim:0')");
  /* torch.tensor(3.5, device='cuda')  (0-dim, read from the device) */
  check_text(on_sim(torc_full(NULL, 0, 3.5, TORC_F32, TORC_CPU)),
             "tensor(3.5000, device='sim:0')");
  /* torch.tensor([], device='cuda') */
  check_text(on_sim(torc_zeros(TORC_SHAPE(0), TORC_F32, TORC_CPU)),
             "tensor([], device='sim:0')");
  /* torch.arange(6.,device='cuda').reshape(2,3).t() (strided on device) */
  torc_tensor *a = on_sim(arange_shaped(6, TORC_F32, TORC_SHAPE(2, 3)));
  assert_torc(a);
  check_text(torc_transpose(a, 0, 1), "tensor([[0., 3.],\n"
                                      "        [1., 4.],\n"
                                      "        [2., 5.]], device='sim:0')");
  torc_release(a);
  /* torch.arange(9,dtype=torch.float64,device='cuda')/7 -> two suffixes
   * after a full line: each on its own line, indented by 7 */
  double v[9];
  for (int i = 0; i < 9; i++)
    v[i] = (double)i / 7.0;
  check_text(on_sim(torc_from_host(v, TORC_SHAPE(9), TORC_F64, TORC_CPU)),
             "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429],\n"
             "       device='sim:0', dtype=f64)");
}

static void test_describe(void **state) {
  (void)state;
  char buf[64];
  torc_tensor *t = torc_zeros(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  assert_torc(t);
  assert_string_equal(torc_describe(t, buf, sizeof buf), "f32[2, 3] on cpu");
  torc_tensor *s = torc_to(t, sim0());
  assert_torc(s);
  assert_string_equal(torc_describe(s, buf, sizeof buf), "f32[2, 3] on sim:0");
  torc_release(s);
  torc_release(t);
  t = torc_full(NULL, 0, 1, TORC_I64, TORC_CPU);
  assert_torc(t);
  assert_string_equal(torc_describe(t, buf, sizeof buf), "i64[] on cpu");
  torc_release(t);
  t = torc_zeros(TORC_SHAPE(0, 4), TORC_BF16, TORC_CPU);
  assert_torc(t);
  assert_string_equal(torc_describe(t, buf, sizeof buf), "bf16[0, 4] on cpu");
  /* A small buffer is truncated, still NUL-terminated. */
  char small[6];
  assert_ptr_equal(torc_describe(t, small, sizeof small), small);
  assert_string_equal(small, "bf16[");
  torc_release(t);
}

/* ---- the FILE and stdout variants ---- */

static char *read_all(FILE *f) {
  long n = ftell(f);
  assert_true(n >= 0);
  rewind(f);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  return s;
}

static void test_fprint_print(void **state) {
  (void)state;
  torc_tensor *t = f32((const float[]){1.5f, 2.f}, TORC_SHAPE(2));
  assert_torc(t);

  FILE *f = tmpfile();
  assert_non_null(f);
  assert_ok(torc_fprint(f, t));
  char *s = read_all(f);
  assert_string_equal(s, "tensor([1.5000, 2.0000])"); /* no newline */
  free(s);
  fclose(f);

  /* torc_print writes to stdout and adds a newline. */
  f = tmpfile();
  assert_non_null(f);
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  assert_true(saved >= 0);
  assert_true(dup2(fileno(f), STDOUT_FILENO) >= 0);
  torc_status st = torc_print(t);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  assert_ok(st);
  fseek(f, 0, SEEK_END);
  s = read_all(f);
  assert_string_equal(s, "tensor([1.5000, 2.0000])\n");
  free(s);
  fclose(f);
  torc_release(t);
}

/* ---- errors and ownership ---- */

static void test_errors(void **state) {
  (void)state;
  torc_clear_error();
  assert_null(torc_to_string(NULL));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  assert_int_equal(torc_fprint(stdout, NULL), TORC_ERR_NULL);
  assert_int_equal(torc_print(NULL), TORC_ERR_NULL);

  /* A NULL input keeps the first error (one check at the end of a chain). */
  torc_set_error(TORC_ERR_SHAPE, "first error");
  assert_null(torc_to_string(NULL));
  assert_error(TORC_ERR_SHAPE, "first error");

  torc_tensor *t = f32((const float[]){1.f}, TORC_SHAPE(1));
  assert_torc(t);
  assert_int_equal(torc_fprint(NULL, t), TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "FILE");
  torc_release(t);

  char buf[32];
  assert_string_equal(torc_describe(NULL, buf, sizeof buf), "(null tensor)");
}

/* Printing inside an open scope: the temporaries printing makes must not
 * be handed to the user's scope (which would free them twice). */
static void test_in_scope(void **state) {
  (void)state;
  int token = torc_scope_begin();
  /* Everything here belongs to the scope: nothing is released by hand. */
  torc_tensor *a = torc_reshape(torc_arange(0, 2000, 1, TORC_I64, TORC_CPU),
                                TORC_SHAPE(1000, 2));
  assert_torc(a);
  torc_tensor *at = torc_transpose(a, 0, 1);
  assert_torc(at);
  int64_t live = torc_tensor_live_count();
  char *s = torc_to_string(at);
  assert_non_null(s);
  assert_int_equal(torc_tensor_live_count(), live);
  assert_contains(s, "[   1,    3,    5,  ..., 1995, 1997, 1999]])");
  free(s);
  torc_scope_end(token);
}

/* Host tensors print with no plugin loaded: their memory is read in place,
 * strided views included (no copy kernel needed). */
static void test_no_plugin(void **state) {
  (void)state;
  torc_shutdown();
  assert_int_equal(torc_plugin_count(), 0);
  torc_tensor *a = f32((const float[]){0, 1, 2, 3, 4, 5}, TORC_SHAPE(2, 3));
  assert_torc(a);
  /* torch.arange(6.).reshape(2,3).t() */
  check_text(torc_transpose(a, 0, 1), "tensor([[0., 3.],\n"
                                      "        [1., 4.],\n"
                                      "        [2., 5.]])");
  torc_release(a);
  /* Restore what the group's other tests expect. */
  test_load_plugin("ref");
  test_load_plugin("sim");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_fixed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_int_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sci_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nonfinite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_3d_4d, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scalar, setup, teardown),
      cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bool, setup, teardown),
      cmocka_unit_test_setup_teardown(test_integers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_f64_f16_bf16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_summarised, setup, teardown),
      cmocka_unit_test_setup_teardown(test_threshold, setup, teardown),
      cmocka_unit_test_setup_teardown(test_noncontiguous, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sim_device, setup, teardown),
      cmocka_unit_test_setup_teardown(test_describe, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fprint_print, setup, teardown),
      cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_in_scope, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_plugin, setup, teardown),
  };
  return cmocka_run_group_tests_name("print", tests, test_setup_ref_sim,
                                     test_teardown_all);
}
