/* tests/test_index.c — the indexing and shape-building ops of
 * torc/indexing.h: forward values against PyTorch, every pad mode,
 * bilinear with and without align_corners, negative dims, empty inputs,
 * gradcheck in f64 of every differentiable op and input, the sim device
 * against the cpu, and the errors (with the values in their messages). */
#include <math.h>

#include "testutil.h"

/* ---- reference values, from PyTorch 1.13 (/usr/bin/python3), printed by
 * this script:
 *
 * import torch
 * def P(name, t):
 *     v = t.flatten().tolist()
 *     print("/" "* %s %s *" "/" % (name, list(t.shape)))
 *     print("static const double %s[] = {%s};" % (name, ", ".join(
 *         repr(float(x)) if isinstance(x, float) else str(x) for x in v)))
 * x = torch.arange(12, dtype=torch.float64).reshape(3, 4)
 * P("gather_d1", torch.gather(x, 1, torch.tensor([[0, 2], [1, 0], [3, 3]])))
 * P("gather_d0", torch.gather(x, -2, torch.tensor([[2, 0, 1, 1], [0, 1, 2, 0]])))
 * s = torch.arange(1, 16, dtype=torch.float64).reshape(3, 5)
 * P("scatter_d1", torch.scatter(torch.zeros(3, 5, dtype=torch.float64), 1, torch.tensor([[0, 1, 2], [2, 3, 4], [4, 0, 1]]), s))
 * P("scatter_add_d1", torch.scatter_add(torch.ones(3, 5, dtype=torch.float64), 1, torch.tensor([[0, 0, 1], [2, 2, 2], [4, 3, 4]]), s))
 * P("index_select_d1", torch.index_select(x, 1, torch.tensor([3, 0, 3])))
 * P("index_select_d0", torch.index_select(x, 0, torch.tensor([2, 0])))
 * P("index_add_d0", torch.ones(5, 3, dtype=torch.float64).index_add(0, torch.tensor([0, 4, 2, 0]), torch.arange(12, dtype=torch.float64).reshape(4, 3), alpha=2))
 * P("one_hot_auto", torch.nn.functional.one_hot(torch.tensor([0, 2, 1, 2])))
 * P("one_hot_2d", torch.nn.functional.one_hot(torch.tensor([[3, 0], [1, 1]]), 4))
 * p = torch.arange(1, 13, dtype=torch.float64).reshape(1, 3, 4)
 * F = torch.nn.functional
 * P("pad_constant", F.pad(p, (1, 2, 0, 1), mode="constant", value=9))
 * P("pad_constant_neg", F.pad(p, (-1, 2, 1, -1), mode="constant", value=-1))
 * P("pad_reflect", F.pad(p, (2, 1, 1, 2), mode="reflect"))
 * P("pad_replicate", F.pad(p, (2, 1, 1, 2), mode="replicate"))
 * im = torch.arange(1, 25, dtype=torch.float32).reshape(1, 2, 3, 4) ** 1.5
 * P("interp_nearest", F.interpolate(im, size=(5, 7), mode="nearest"))
 * P("interp_nearest_down", F.interpolate(im, size=(2, 3), mode="nearest"))
 * P("interp_bilinear", F.interpolate(im, size=(5, 7), mode="bilinear", align_corners=False))
 * P("interp_bilinear_ac", F.interpolate(im, size=(5, 7), mode="bilinear", align_corners=True))
 * P("interp_bilinear_down", F.interpolate(im, size=(2, 3), mode="bilinear", align_corners=False))
 * t = torch.tensor([[0.5, 3.0, -1.0, 2.0, 7.0], [4.0, -2.0, 6.0, 1.0, 0.0], [9.0, 8.0, -3.0, 5.0, 2.5]], dtype=torch.float64)
 * v, i = torch.topk(t, 2, dim=1)
 * P("topk_v", v); P("topk_i", i)
 * v, i = torch.topk(t, 2, dim=0, largest=False)
 * P("topk_small_v", v); P("topk_small_i", i)
 * v, i = torch.topk(torch.tensor([1.0, float('nan'), 2.0, -1.0]), 3)
 * P("topk_nan_v", v); P("topk_nan_i", i)
 */
/* gather_d1 [3, 2] */
static const double gather_d1[] = {0.0, 2.0, 5.0, 4.0, 11.0, 11.0};
/* gather_d0 [2, 4] */
static const double gather_d0[] = {8.0, 1.0, 6.0, 7.0, 0.0, 5.0, 10.0, 3.0};
/* scatter_d1 [3, 5] */
static const double scatter_d1[] = {1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.0, 6.0, 7.0, 8.0, 12.0, 13.0, 0.0, 0.0, 11.0};
/* scatter_add_d1 [3, 5] */
static const double scatter_add_d1[] = {4.0, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0, 22.0, 1.0, 1.0, 1.0, 1.0, 1.0, 13.0, 25.0};
/* index_select_d1 [3, 3] */
static const double index_select_d1[] = {3.0, 0.0, 3.0, 7.0, 4.0, 7.0, 11.0, 8.0, 11.0};
/* index_select_d0 [2, 4] */
static const double index_select_d0[] = {8.0, 9.0, 10.0, 11.0, 0.0, 1.0, 2.0, 3.0};
/* index_add_d0 [5, 3] */
static const double index_add_d0[] = {19.0, 23.0, 27.0, 1.0, 1.0, 1.0, 13.0, 15.0, 17.0, 1.0, 1.0, 1.0, 7.0, 9.0, 11.0};
/* one_hot_auto [4, 3] */
static const double one_hot_auto[] = {1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1};
/* one_hot_2d [2, 2, 4] */
static const double one_hot_2d[] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0};
/* pad_constant [1, 4, 7] */
static const double pad_constant[] = {9.0, 1.0, 2.0, 3.0, 4.0, 9.0, 9.0, 9.0, 5.0, 6.0, 7.0, 8.0, 9.0, 9.0, 9.0, 9.0, 10.0, 11.0, 12.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0};
/* pad_constant_neg [1, 3, 5] */
static const double pad_constant_neg[] = {-1.0, -1.0, -1.0, -1.0, -1.0, 2.0, 3.0, 4.0, -1.0, -1.0, 6.0, 7.0, 8.0, -1.0, -1.0};
/* pad_reflect [1, 6, 7] */
static const double pad_reflect[] = {7.0, 6.0, 5.0, 6.0, 7.0, 8.0, 7.0, 3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 7.0, 6.0, 5.0, 6.0, 7.0, 8.0, 7.0, 11.0, 10.0, 9.0, 10.0, 11.0, 12.0, 11.0, 7.0, 6.0, 5.0, 6.0, 7.0, 8.0, 7.0, 3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0};
/* pad_replicate [1, 6, 7] */
static const double pad_replicate[] = {1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0, 1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0, 5.0, 5.0, 5.0, 6.0, 7.0, 8.0, 8.0, 9.0, 9.0, 9.0, 10.0, 11.0, 12.0, 12.0, 9.0, 9.0, 9.0, 10.0, 11.0, 12.0, 12.0, 9.0, 9.0, 9.0, 10.0, 11.0, 12.0, 12.0};
/* interp_nearest [1, 2, 5, 7] */
static const double interp_nearest[] = {1.0, 1.0, 2.8284270763397217, 2.8284270763397217, 5.196152210235596, 5.196152210235596, 8.0, 1.0, 1.0, 2.8284270763397217, 2.8284270763397217, 5.196152210235596, 5.196152210235596, 8.0, 11.180339813232422, 11.180339813232422, 14.696938514709473, 14.696938514709473, 18.520259857177734, 18.520259857177734, 22.627416610717773, 11.180339813232422, 11.180339813232422, 14.696938514709473, 14.696938514709473, 18.520259857177734, 18.520259857177734, 22.627416610717773, 27.0, 27.0, 31.62277603149414, 31.62277603149414, 36.482872009277344, 36.482872009277344, 41.569217681884766, 46.87216567993164, 46.87216567993164, 52.383201599121094, 52.383201599121094, 58.094749450683594, 58.094749450683594, 64.0, 46.87216567993164, 46.87216567993164, 52.383201599121094, 52.383201599121094, 58.094749450683594, 58.094749450683594, 64.0, 70.0927963256836, 70.0927963256836, 76.3675308227539, 76.3675308227539, 82.81907653808594, 82.81907653808594, 89.44271850585938, 70.0927963256836, 70.0927963256836, 76.3675308227539, 76.3675308227539, 82.81907653808594, 82.81907653808594, 89.44271850585938, 96.23409271240234, 96.23409271240234, 103.18914794921875, 103.18914794921875, 110.30412292480469, 110.30412292480469, 117.57550811767578};
/* interp_nearest_down [1, 2, 2, 3] */
static const double interp_nearest_down[] = {1.0, 2.8284270763397217, 5.196152210235596, 11.180339813232422, 14.696938514709473, 18.520259857177734, 46.87216567993164, 52.383201599121094, 58.094749450683594, 70.0927963256836, 76.3675308227539, 82.81907653808594};
/* interp_bilinear [1, 2, 5, 7] */
static const double interp_bilinear[] = {1.0, 1.6530096530914307, 2.6978251934051514, 4.012290000915527, 5.396427631378174, 6.998626232147217, 8.0, 5.072136402130127, 5.966313362121582, 7.39699649810791, 9.050813674926758, 10.76330852508545, 12.663407325744629, 13.850967407226562, 11.180340766906738, 12.43626880645752, 14.445754051208496, 16.608600616455078, 18.813631057739258, 21.16057777404785, 22.627418518066406, 20.672138214111328, 22.165103912353516, 24.553848266601562, 27.075136184692383, 29.633163452148438, 32.31583023071289, 33.99250030517578, 27.0, 28.650991439819336, 31.292577743530273, 34.052825927734375, 36.84618377685547, 39.75266647338867, 41.569217681884766, 46.87216567993164, 48.84039306640625, 51.98955535888672, 55.238975524902344, 58.51655578613281, 61.89098358154297, 64.0, 56.16041946411133, 58.23774719238281, 61.56147003173828, 64.980712890625, 68.42681121826172, 71.96544647216797, 74.17709350585938, 70.0927963256836, 72.33377075195312, 75.9193344116211, 79.59330749511719, 83.29219818115234, 87.07713317871094, 89.44271850585938, 85.77757263183594, 88.16433715820312, 91.983154296875, 95.88530731201172, 99.81098937988281, 103.81800842285156, 106.3223876953125, 96.23409271240234, 98.7180404663086, 102.6923599243164, 106.74663543701172, 110.8235092163086, 114.97858428955078, 117.57550811767578};
/* interp_bilinear_ac [1, 2, 5, 7] */
static const double interp_bilinear_ac[] = {1.0, 1.9142135381698608, 2.8284270763397217, 4.012289524078369, 5.196152210235596, 6.598075866699219, 8.0, 6.090169906616211, 7.426425933837891, 8.762682914733887, 10.310443878173828, 11.858205795288086, 13.585956573486328, 15.313708305358887, 11.180339813232422, 12.938638687133789, 14.696938514709473, 16.608598709106445, 18.520259857177734, 20.573837280273438, 22.627416610717773, 19.09016990661621, 21.12501335144043, 23.15985679626465, 25.330711364746094, 27.50156593322754, 29.799942016601562, 32.09831619262695, 27.0, 29.31138801574707, 31.62277603149414, 34.052825927734375, 36.482872009277344, 39.02604675292969, 41.569217681884766, 46.87216567993164, 49.627685546875, 52.383201599121094, 55.238975524902344, 58.094749450683594, 61.0473747253418, 64.0, 58.48248291015625, 61.428924560546875, 64.3753662109375, 67.4161376953125, 70.4569091796875, 73.5891342163086, 76.72135925292969, 70.0927963256836, 73.23016357421875, 76.3675308227539, 79.59330749511719, 82.81907653808594, 86.13089752197266, 89.44271850585938, 83.16344451904297, 86.47089385986328, 89.77833557128906, 93.16996765136719, 96.56159973144531, 100.03535461425781, 103.50910949707031, 96.23409271240234, 99.71162414550781, 103.18914794921875, 106.74663543701172, 110.30412292480469, 113.9398193359375, 117.57550811767578};
/* interp_bilinear_down [1, 2, 2, 3] */
static const double interp_bilinear_down[] = {3.92016339302063, 7.161366939544678, 11.135241508483887, 23.76945686340332, 29.691768646240234, 36.02684020996094, 53.62765121459961, 61.32755661010742, 69.34654235839844, 90.82959747314453, 99.95829772949219, 109.3573989868164};
/* topk_v [3, 2] */
static const double topk_v[] = {7.0, 3.0, 6.0, 4.0, 9.0, 8.0};
/* topk_i [3, 2] */
static const double topk_i[] = {4, 1, 2, 0, 0, 1};
/* topk_small_v [2, 5] */
static const double topk_small_v[] = {0.5, -2.0, -3.0, 1.0, 0.0, 4.0, 3.0, -1.0, 2.0, 2.5};
/* topk_small_i [2, 5] */
static const double topk_small_i[] = {0, 1, 2, 1, 1, 1, 0, 0, 0, 2};
/* topk_nan_v [3] */
static const double topk_nan_v[] = {NAN, 2.0, 1.0};
/* topk_nan_i [3] */
static const double topk_nan_i[] = {1, 2, 0};

/* ---- helpers ---- */

static torc_device sim_dev(void) {
  torc_device d;
  assert_ok(torc_device_parse("sim:0", &d));
  return d;
}

static torc_tensor *f64(const double *v, const int64_t *shape, int ndim) {
  torc_tensor *t = torc_from_host(v, shape, ndim, TORC_F64, TORC_CPU);
  assert_torc(t);
  return t;
}

static torc_tensor *i64(const int64_t *v, const int64_t *shape, int ndim) {
  torc_tensor *t = torc_from_host(v, shape, ndim, TORC_I64, TORC_CPU);
  assert_torc(t);
  return t;
}

/* 0, 1, 2, ... as f64 of `shape`. */
static torc_tensor *iota(const int64_t *shape, int ndim, double start) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  torc_tensor *a = torc_arange(start, start + (double)n, 1, TORC_F64, TORC_CPU);
  torc_tensor *r = a ? torc_reshape(a, shape, ndim) : NULL;
  assert_torc(r);
  return r;
}

static void assert_shape(const torc_tensor *t, const int64_t *shape, int ndim) {
  assert_non_null(t);
  assert_int_equal(torc_ndim(t), ndim);
  for (int i = 0; i < ndim; i++)
    assert_int_equal(torc_shape(t)[i], shape[i]);
}

/* Asserts t has `shape` and the values `e`. */
static void expect(const torc_tensor *t, const int64_t *shape, int ndim,
                   const double *e, double tol) {
  assert_torc(t);
  assert_shape(t, shape, ndim);
  test_assert_values(t, e, torc_numel(t), tol);
}

#define N(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

/* ---- forward values ---- */

static void test_gather_scatter(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = iota(TORC_SHAPE(3, 4), 0);
  const int64_t i1[] = {0, 2, 1, 0, 3, 3}, i0[] = {2, 0, 1, 1, 0, 1, 2, 0};
  torc_tensor *g = torc_gather(x, 1, i64(i1, TORC_SHAPE(3, 2)));
  expect(g, TORC_SHAPE(3, 2), gather_d1, 0);
  assert_int_equal(torc_dtype_of(g), TORC_F64);
  expect(torc_gather(x, -2, i64(i0, TORC_SHAPE(2, 4))), TORC_SHAPE(2, 4),
         gather_d0, 0);
  /* an i32 index and a strided (transposed) input give the same */
  torc_tensor *xt = torc_transpose(torc_contiguous(torc_transpose(x, 0, 1)),
                                   0, 1);
  assert_false(torc_is_contiguous(xt));
  expect(torc_gather(xt, 1,
                     torc_to_dtype(i64(i1, TORC_SHAPE(3, 2)), TORC_I32)),
         TORC_SHAPE(3, 2), gather_d1, 0);
  /* an empty index gives an empty result */
  torc_tensor *e = torc_gather(x, 1, torc_zeros(TORC_SHAPE(3, 0), TORC_I64,
                                                TORC_CPU));
  assert_shape(e, TORC_SHAPE(3, 0));

  torc_tensor *src = iota(TORC_SHAPE(3, 5), 1);
  const int64_t si[] = {0, 1, 2, 2, 3, 4, 4, 0, 1};
  torc_tensor *z = torc_zeros(TORC_SHAPE(3, 5), TORC_F64, TORC_CPU);
  expect(torc_scatter(z, 1, i64(si, TORC_SHAPE(3, 3)), src), TORC_SHAPE(3, 5),
         scatter_d1, 0);
  double zv = 1;
  assert_ok(torc_item(torc_sum(z, NULL, 0, 0), &zv));
  assert_true(zv == 0); /* out of place: z is untouched */
  const int64_t ai[] = {0, 0, 1, 2, 2, 2, 4, 3, 4};
  torc_tensor *o = torc_ones(TORC_SHAPE(3, 5), TORC_F64, TORC_CPU);
  expect(torc_scatter_add(o, -1, i64(ai, TORC_SHAPE(3, 3)), src),
         TORC_SHAPE(3, 5), scatter_add_d1, 0);
  /* integers add exactly */
  torc_tensor *oi = torc_scatter_add(
      torc_to_dtype(o, TORC_I64), 1, i64(ai, TORC_SHAPE(3, 3)),
      torc_to_dtype(src, TORC_I64));
  assert_int_equal(torc_dtype_of(oi), TORC_I64);
  expect(oi, TORC_SHAPE(3, 5), scatter_add_d1, 0);
  torc_scope_end(s);
}

static void test_index_select_add(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = iota(TORC_SHAPE(3, 4), 0);
  const int64_t a[] = {3, 0, 3}, b[] = {2, 0};
  expect(torc_index_select(x, -1, i64(a, TORC_SHAPE(3))), TORC_SHAPE(3, 3),
         index_select_d1, 0);
  expect(torc_index_select(x, 0, i64(b, TORC_SHAPE(2))), TORC_SHAPE(2, 4),
         index_select_d0, 0);
  /* a 0-D index selects one slice, keeping the dim */
  const int64_t one = 2;
  expect(torc_index_select(x, 0, i64(&one, NULL, 0)), TORC_SHAPE(1, 4),
         index_select_d0, 0);
  /* an empty index */
  assert_shape(torc_index_select(x, 1, torc_zeros(TORC_SHAPE(0), TORC_I64,
                                                  TORC_CPU)),
               TORC_SHAPE(3, 0));
  const int64_t ia[] = {0, 4, 2, 0};
  torc_tensor *ones = torc_ones(TORC_SHAPE(5, 3), TORC_F64, TORC_CPU);
  expect(torc_index_add(ones, 0, i64(ia, TORC_SHAPE(4)),
                        iota(TORC_SHAPE(4, 3), 0), 2.0),
         TORC_SHAPE(5, 3), index_add_d0, 0);
  torc_scope_end(s);
}

static void test_one_hot(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const int64_t a[] = {0, 2, 1, 2}, b[] = {3, 0, 1, 1};
  torc_tensor *h = torc_one_hot(i64(a, TORC_SHAPE(4)), -1);
  expect(h, TORC_SHAPE(4, 3), one_hot_auto, 0);
  assert_int_equal(torc_dtype_of(h), TORC_I64);
  expect(torc_one_hot(torc_to_dtype(i64(b, TORC_SHAPE(2, 2)), TORC_I32), 4),
         TORC_SHAPE(2, 2, 4), one_hot_2d, 0);
  assert_shape(torc_one_hot(torc_zeros(TORC_SHAPE(0), TORC_I64, TORC_CPU), 5),
               TORC_SHAPE(0, 5));
  torc_scope_end(s);
}

static void test_cat_stack(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *a = iota(TORC_SHAPE(2, 3), 0);
  torc_tensor *b = torc_to_dtype(iota(TORC_SHAPE(1, 3), 10), TORC_I64);
  const torc_tensor *ab[] = {a, b};
  torc_tensor *c = torc_cat(ab, 2, 0);
  const double ec[] = {0, 1, 2, 3, 4, 5, 10, 11, 12};
  expect(c, TORC_SHAPE(3, 3), ec, 0);
  assert_int_equal(torc_dtype_of(c), TORC_F64);
  /* negative dim, a strided input */
  torc_tensor *p = iota(TORC_SHAPE(2, 2), 20);
  const torc_tensor *ap[] = {torc_transpose(p, 0, 1), a};
  const double ed[] = {20, 22, 0, 1, 2, 21, 23, 3, 4, 5};
  expect(torc_cat(ap, 2, -1), TORC_SHAPE(2, 5), ed, 0);
  /* promotion as torch.cat: i32 + u8 -> i32, bool + bool -> bool,
   * f16 + i64 -> f16 */
  torc_tensor *i32 = torc_to_dtype(a, TORC_I32), *u8 = torc_to_dtype(b, TORC_U8);
  const torc_tensor *iu[] = {i32, u8};
  assert_int_equal(torc_dtype_of(torc_cat(iu, 2, 0)), TORC_I32);
  torc_tensor *bl = torc_to_dtype(a, TORC_BOOL);
  const torc_tensor *bb[] = {bl, bl};
  assert_int_equal(torc_dtype_of(torc_cat(bb, 2, 1)), TORC_BOOL);
  const torc_tensor *hb[] = {torc_to_dtype(a, TORC_F16), b};
  torc_tensor *hc = torc_cat(hb, 2, 0);
  assert_int_equal(torc_dtype_of(hc), TORC_F16);
  expect(hc, TORC_SHAPE(3, 3), ec, 0);
  /* 1-D empty tensors are skipped, as in PyTorch; empty inputs work */
  const torc_tensor *ae[] = {torc_zeros(TORC_SHAPE(0), TORC_F64, TORC_CPU), a,
                             torc_zeros(TORC_SHAPE(0, 3), TORC_F64, TORC_CPU)};
  expect(torc_cat(ae, 3, 0), TORC_SHAPE(2, 3), ec, 0);
  /* stack */
  const torc_tensor *aa[] = {a, torc_neg(a)};
  const double es[] = {0, 1, 2, 0, -1, -2, 3, 4, 5, -3, -4, -5};
  expect(torc_stack(aa, 2, 1), TORC_SHAPE(2, 2, 3), es, 0);
  const double es2[] = {0, 0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5};
  expect(torc_stack(aa, 2, -1), TORC_SHAPE(2, 3, 2), es2, 0);
  const double es0[] = {0, 1, 2, 3, 4, 5, 0, -1, -2, -3, -4, -5};
  expect(torc_stack(aa, 2, 0), TORC_SHAPE(2, 2, 3), es0, 0);
  torc_scope_end(s);
}

static void test_split_chunk(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = iota(TORC_SHAPE(5, 2), 0);
  torc_tensor *out[8] = {0};
  assert_int_equal(torc_split(x, 2, 0, NULL, 0), 3);
  assert_int_equal(torc_split(x, 2, 0, out, 8), 3);
  const double e0[] = {0, 1, 2, 3}, e2[] = {8, 9};
  expect(out[0], TORC_SHAPE(2, 2), e0, 0);
  expect(out[2], TORC_SHAPE(1, 2), e2, 0);
  assert_true(torc_shares_storage(out[1], x)); /* views */
  assert_int_equal(torc_split(x, 1, -1, out, 8), 2);
  const double c1[] = {1, 3, 5, 7, 9};
  expect(out[1], TORC_SHAPE(5, 1), c1, 0);
  assert_int_equal(torc_split(x, 7, 0, out, 8), 1);
  assert_shape(out[0], TORC_SHAPE(5, 2));
  /* chunk: 5 in 3 -> 2, 2, 1; 6 in 4 -> 2, 2, 2 (fewer, as torch.chunk) */
  assert_int_equal(torc_chunk(x, 3, 0, out, 8), 3);
  assert_shape(out[2], TORC_SHAPE(1, 2));
  torc_tensor *y = iota(TORC_SHAPE(6), 0);
  assert_int_equal(torc_chunk(y, 4, 0, out, 8), 3);
  const double y2[] = {4, 5};
  expect(out[2], TORC_SHAPE(2), y2, 0);
  /* empty dims: split gives one empty piece, chunk `chunks` of them */
  torc_tensor *z = torc_zeros(TORC_SHAPE(0, 2), TORC_F64, TORC_CPU);
  assert_int_equal(torc_split(z, 2, 0, out, 8), 1);
  assert_shape(out[0], TORC_SHAPE(0, 2));
  assert_int_equal(torc_chunk(z, 3, 0, out, 8), 3);
  assert_shape(out[2], TORC_SHAPE(0, 2));
  torc_tensor *w = torc_scope_keep(iota(TORC_SHAPE(4), 0)), *pc[2];
  torc_scope_end(s);
  /* outside a scope the pieces are the caller's */
  assert_int_equal(torc_chunk(w, 2, 0, pc, 2), 2);
  torc_release(pc[0]), torc_release(pc[1]), torc_release(w);
}

static void test_pad(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = iota(TORC_SHAPE(1, 3, 4), 1);
  const int64_t p1[] = {1, 2, 0, 1}, p2[] = {-1, 2, 1, -1},
                p3[] = {2, 1, 1, 2};
  expect(torc_pad(x, p1, 4, TORC_PAD_CONSTANT, 9), TORC_SHAPE(1, 4, 7),
         pad_constant, 0);
  expect(torc_pad(x, p2, 4, TORC_PAD_CONSTANT, -1), TORC_SHAPE(1, 3, 5),
         pad_constant_neg, 0);
  expect(torc_pad(x, p3, 4, TORC_PAD_REFLECT, 0), TORC_SHAPE(1, 6, 7),
         pad_reflect, 0);
  expect(torc_pad(x, p3, 4, TORC_PAD_REPLICATE, 0), TORC_SHAPE(1, 6, 7),
         pad_replicate, 0);
  /* integer dtypes, a strided input, no padding at all */
  torc_tensor *xi = torc_to_dtype(x, TORC_I64);
  torc_tensor *pi = torc_pad(xi, p1, 4, TORC_PAD_CONSTANT, 9);
  assert_int_equal(torc_dtype_of(pi), TORC_I64);
  expect(pi, TORC_SHAPE(1, 4, 7), pad_constant, 0);
  torc_tensor *xt = torc_transpose(torc_contiguous(torc_transpose(x, 1, 2)),
                                   1, 2);
  expect(torc_pad(xt, p3, 4, TORC_PAD_REFLECT, 0), TORC_SHAPE(1, 6, 7),
         pad_reflect, 0);
  double ex[12];
  for (int i = 0; i < 12; i++)
    ex[i] = i + 1;
  expect(torc_pad(x, NULL, 0, TORC_PAD_REPLICATE, 0), TORC_SHAPE(1, 3, 4), ex,
         0);
  torc_scope_end(s);
}

/* The image the interpolation constants were made from: (1..24)^1.5. */
static torc_tensor *image(void) {
  torc_tensor *k = torc_full(NULL, 0, 1.5, TORC_F32, TORC_CPU);
  torc_tensor *r = torc_pow(torc_to_dtype(iota(TORC_SHAPE(1, 2, 3, 4), 1),
                                          TORC_F32),
                            k);
  assert_torc(r);
  return r;
}

static void test_interpolate(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *im = image();
  expect(torc_interpolate(im, 5, 7, TORC_INTERP_NEAREST, 0),
         TORC_SHAPE(1, 2, 5, 7), interp_nearest, 1e-6);
  expect(torc_interpolate(im, 2, 3, TORC_INTERP_NEAREST, 0),
         TORC_SHAPE(1, 2, 2, 3), interp_nearest_down, 1e-6);
  expect(torc_interpolate(im, 5, 7, TORC_INTERP_BILINEAR, 0),
         TORC_SHAPE(1, 2, 5, 7), interp_bilinear, 1e-6);
  expect(torc_interpolate(im, 5, 7, TORC_INTERP_BILINEAR, 1),
         TORC_SHAPE(1, 2, 5, 7), interp_bilinear_ac, 1e-6);
  expect(torc_interpolate(im, 2, 3, TORC_INTERP_BILINEAR, 0),
         TORC_SHAPE(1, 2, 2, 3), interp_bilinear_down, 1e-6);
  /* same size: the identity, in f64 too */
  torc_tensor *d = torc_to_dtype(im, TORC_F64);
  double *v = test_values(d);
  assert_non_null(v);
  expect(torc_interpolate(d, 3, 4, TORC_INTERP_BILINEAR, 0),
         TORC_SHAPE(1, 2, 3, 4), v, 0);
  free(v);
  torc_scope_end(s);
}

static void test_topk(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double tv[] = {0.5, 3, -1, 2, 7, 4, -2, 6, 1, 0, 9, 8, -3, 5, 2.5};
  torc_tensor *t = f64(tv, TORC_SHAPE(3, 5));
  torc_tensor *v = NULL, *i = NULL;
  assert_ok(torc_topk(t, 2, 1, 1, 1, &v, &i));
  expect(v, TORC_SHAPE(3, 2), topk_v, 0);
  expect(i, TORC_SHAPE(3, 2), topk_i, 0);
  assert_int_equal(torc_dtype_of(i), TORC_I64);
  assert_ok(torc_topk(t, 2, -2, 0, 1, &v, &i));
  expect(v, TORC_SHAPE(2, 5), topk_small_v, 0);
  expect(i, TORC_SHAPE(2, 5), topk_small_i, 0);
  /* integers; sorted = 0 gives the same (torc always sorts) */
  assert_ok(torc_topk(torc_to_dtype(t, TORC_I32), 2, 1, 1, 0, &v, NULL));
  const double iv[] = {7, 3, 6, 4, 9, 8};
  expect(v, TORC_SHAPE(3, 2), iv, 0);
  assert_int_equal(torc_dtype_of(v), TORC_I32);
  /* NaN is the largest, as in PyTorch */
  const double nv[] = {1, NAN, 2, -1};
  assert_ok(torc_topk(f64(nv, TORC_SHAPE(4)), 3, 0, 1, 1, &v, &i));
  expect(v, TORC_SHAPE(3), topk_nan_v, 0);
  expect(i, TORC_SHAPE(3), topk_nan_i, 0);
  /* ties: the lower index first (documented; PyTorch leaves it open) */
  const double tie[] = {1, 3, 3, 2, 3, 1};
  assert_ok(torc_topk(f64(tie, TORC_SHAPE(6)), 2, 0, 1, 1, &v, &i));
  const double tv2[] = {3, 3}, ti2[] = {1, 2};
  expect(v, TORC_SHAPE(2), tv2, 0);
  expect(i, TORC_SHAPE(2), ti2, 0);
  assert_ok(torc_topk(f64(tie, TORC_SHAPE(6)), 3, 0, 0, 1, &v, &i));
  const double ti3[] = {0, 5, 3};
  expect(i, TORC_SHAPE(3), ti3, 0);
  /* k = 0 */
  assert_ok(torc_topk(t, 0, 1, 1, 1, &v, &i));
  assert_shape(v, TORC_SHAPE(3, 0));
  torc_scope_end(s);
}

static void test_inplace(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const int64_t si[] = {0, 1, 2, 2, 3, 4, 4, 0, 1}, ai[] = {0, 0, 1, 2, 2, 2,
                                                          4, 3, 4};
  torc_tensor *src = iota(TORC_SHAPE(3, 5), 1);
  torc_tensor *z = torc_zeros(TORC_SHAPE(3, 5), TORC_F64, TORC_CPU);
  uint64_t ver = torc_version(z);
  assert_ok(torc_scatter_(z, 1, i64(si, TORC_SHAPE(3, 3)), src));
  assert_true(torc_version(z) > ver);
  test_assert_values(z, scatter_d1, 15, 0);
  torc_tensor *o = torc_ones(TORC_SHAPE(3, 5), TORC_F64, TORC_CPU);
  assert_ok(torc_scatter_add_(o, 1, i64(ai, TORC_SHAPE(3, 3)), src));
  test_assert_values(o, scatter_add_d1, 15, 0);
  /* into a strided view: writes reach the base */
  torc_tensor *base = torc_ones(TORC_SHAPE(5, 3), TORC_F64, TORC_CPU);
  torc_tensor *bt = torc_transpose(base, 0, 1); /* [3, 5] */
  assert_ok(torc_scatter_add_(bt, 1, i64(ai, TORC_SHAPE(3, 3)), src));
  test_assert_values(torc_contiguous(bt), scatter_add_d1, 15, 0);
  const int64_t ia[] = {0, 4, 2, 0};
  torc_tensor *ones = torc_ones(TORC_SHAPE(5, 3), TORC_F64, TORC_CPU);
  assert_ok(torc_index_add_(ones, 0, i64(ia, TORC_SHAPE(4)),
                            iota(TORC_SHAPE(4, 3), 0), 2.0));
  test_assert_values(ones, index_add_d0, 15, 0);
  /* autograd: y = 2 x; y.index_add_(0, idx, w, 3) -> dx = 2, dw = 3 */
  torc_tensor *x = iota(TORC_SHAPE(5, 3), 0), *w = iota(TORC_SHAPE(4, 3), 0);
  assert_ok(torc_set_requires_grad(x, 1));
  assert_ok(torc_set_requires_grad(w, 1));
  torc_tensor *y = torc_mul(x, torc_full(NULL, 0, 2, TORC_F64, TORC_CPU));
  assert_ok(torc_index_add_(y, 0, i64(ia, TORC_SHAPE(4)), w, 3.0));
  assert_string_equal(torc_grad_fn_name(y), "IndexAddBackward");
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  double e2[15], e3[12];
  for (int i = 0; i < 15; i++)
    e2[i] = 2;
  for (int i = 0; i < 12; i++)
    e3[i] = 3;
  test_assert_values(torc_grad_of(x), e2, 15, 0);
  test_assert_values(torc_grad_of(w), e3, 12, 0);
  /* scatter_ overwrites: those elements of x get no gradient */
  assert_ok(torc_zero_grad(x, 1));
  const int64_t ci[] = {1, 1, 1};
  torc_tensor *y2 = torc_mul(x, torc_full(NULL, 0, 1, TORC_F64, TORC_CPU));
  assert_ok(torc_scatter_(y2, 0, i64(ci, TORC_SHAPE(1, 3)),
                          torc_zeros(TORC_SHAPE(1, 3), TORC_F64, TORC_CPU)));
  assert_ok(torc_backward(torc_sum(y2, NULL, 0, 0), NULL, 0));
  const double es[] = {1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  test_assert_values(torc_grad_of(x), es, 15, 0);
  /* refused: a leaf that requires grad, an expanded target */
  assert_int_equal(torc_scatter_(x, 0, i64(ci, TORC_SHAPE(1, 3)),
                                 torc_zeros(TORC_SHAPE(1, 3), TORC_F64,
                                            TORC_CPU)),
                   TORC_ERR_AUTOGRAD);
  assert_contains(torc_last_error(), "torc_scatter_: the target is a leaf");
  torc_tensor *ex = torc_expand(torc_ones(TORC_SHAPE(1, 3), TORC_F64, TORC_CPU),
                                TORC_SHAPE(5, 3));
  assert_int_equal(torc_index_add_(ex, 0, i64(ia, TORC_SHAPE(4)),
                                   iota(TORC_SHAPE(4, 3), 0), 1),
                   TORC_ERR_INVALID);
  assert_contains(torc_last_error(), "expanded view (dim 0 has stride 0)");
  assert_int_equal(torc_scatter_add_(NULL, 0, NULL, NULL), TORC_ERR_NULL);
  torc_scope_end(s);
}

/* ---- gradcheck (f64) of every differentiable op and input ---- */

enum {
  GC_GATHER,
  GC_SCATTER,
  GC_SCATTER_ADD,
  GC_INDEX_SELECT,
  GC_INDEX_ADD,
  GC_CAT,
  GC_STACK,
  GC_SPLIT,
  GC_CHUNK,
  GC_PAD_CONSTANT,
  GC_PAD_REFLECT,
  GC_PAD_REPLICATE,
  GC_NEAREST,
  GC_BILINEAR,
  GC_BILINEAR_AC,
  GC_TOPK
};

typedef struct gc_case {
  const char *name;
  int op;
  int n;                 /* inputs */
  int64_t shape[3][4];   /* their shapes (4 dims at most; 0 ends) */
  int ndim[3];
} gc_case;

/* Index tensors the cases use (made once per run of the test). */
static torc_tensor *gc_idx_g, *gc_idx_s, *gc_idx_sel;

static torc_tensor *gc_fn(torc_tensor *const *in, int n, void *user) {
  const gc_case *c = user;
  (void)n;
  int s = torc_scope_begin();
  torc_tensor *r = NULL, *pieces[4];
  const int64_t p[] = {2, 1, 1, 2}, pn[] = {-1, 2, 1, 0};
  switch (c->op) {
  case GC_GATHER: r = torc_gather(in[0], 1, gc_idx_g); break;
  case GC_SCATTER: r = torc_scatter(in[0], 1, gc_idx_s, in[1]); break;
  case GC_SCATTER_ADD: r = torc_scatter_add(in[0], -1, gc_idx_s, in[1]); break;
  case GC_INDEX_SELECT: r = torc_index_select(in[0], 0, gc_idx_sel); break;
  case GC_INDEX_ADD:
    r = torc_index_add(in[0], 0, gc_idx_sel, in[1], 1.5);
    break;
  case GC_CAT: r = torc_cat((const torc_tensor *const *)in, 3, 1); break;
  case GC_STACK: r = torc_stack((const torc_tensor *const *)in, 2, -2); break;
  case GC_SPLIT:
  case GC_CHUNK: {
    int k = c->op == GC_SPLIT ? torc_split(in[0], 2, 1, pieces, 4)
                              : torc_chunk(in[0], 2, 0, pieces, 4);
    /* reordered and weighted, so that a mixed-up piece shows */
    torc_tensor *sq = torc_square(pieces[k - 1]);
    const torc_tensor *rev[2] = {sq, pieces[0]};
    r = torc_cat(rev, 2, c->op == GC_SPLIT ? 1 : 0);
    break;
  }
  case GC_PAD_CONSTANT: r = torc_pad(in[0], pn, 4, TORC_PAD_CONSTANT, 3); break;
  case GC_PAD_REFLECT: r = torc_pad(in[0], p, 4, TORC_PAD_REFLECT, 0); break;
  case GC_PAD_REPLICATE:
    r = torc_pad(in[0], p, 4, TORC_PAD_REPLICATE, 0);
    break;
  case GC_NEAREST: r = torc_interpolate(in[0], 5, 3, TORC_INTERP_NEAREST, 0); break;
  case GC_BILINEAR:
    r = torc_interpolate(in[0], 5, 3, TORC_INTERP_BILINEAR, 0);
    break;
  case GC_BILINEAR_AC:
    r = torc_interpolate(in[0], 4, 5, TORC_INTERP_BILINEAR, 1);
    break;
  case GC_TOPK: {
    torc_tensor *v = NULL;
    if (torc_topk(in[0], 2, 1, 1, 1, &v, NULL) == TORC_OK)
      r = torc_square(v);
    break;
  }
  }
  torc_scope_keep(r);
  torc_scope_end(s);
  return r;
}

static void test_gradcheck(void **state) {
  (void)state;
  const int64_t ig[] = {0, 2, 1, 1, 3, 0};         /* [3, 2] into [3, 4] */
  const int64_t is[] = {1, 0, 3, 2, 2, 0};         /* [3, 2], unique rows */
  const int64_t isel[] = {2, 0, 2, 1};             /* repeats */
  gc_idx_g = i64(ig, TORC_SHAPE(3, 2));
  gc_idx_s = i64(is, TORC_SHAPE(3, 2));
  gc_idx_sel = i64(isel, TORC_SHAPE(4));
  static const gc_case cases[] = {
      {"gather", GC_GATHER, 1, {{3, 4}}, {2}},
      /* src larger than the index: its extra column gets no gradient */
      {"scatter", GC_SCATTER, 2, {{3, 4}, {3, 3}}, {2, 2}},
      {"scatter_add", GC_SCATTER_ADD, 2, {{3, 4}, {4, 2}}, {2, 2}},
      {"index_select", GC_INDEX_SELECT, 1, {{3, 2}}, {2}},
      {"index_add", GC_INDEX_ADD, 2, {{3, 2}, {4, 2}}, {2, 2}},
      {"cat", GC_CAT, 3, {{2, 1}, {2, 3}, {2, 2}}, {2, 2, 2}},
      {"stack", GC_STACK, 2, {{2, 3}, {2, 3}}, {2, 2}},
      {"split", GC_SPLIT, 1, {{2, 5}}, {2}},
      {"chunk", GC_CHUNK, 1, {{3, 2}}, {2}},
      {"pad constant", GC_PAD_CONSTANT, 1, {{2, 3, 4}}, {3}},
      {"pad reflect", GC_PAD_REFLECT, 1, {{2, 3, 4}}, {3}},
      {"pad replicate", GC_PAD_REPLICATE, 1, {{2, 3, 4}}, {3}},
      {"nearest", GC_NEAREST, 1, {{1, 2, 3, 2}}, {4}},
      {"bilinear", GC_BILINEAR, 1, {{1, 2, 3, 2}}, {4}},
      {"bilinear align_corners", GC_BILINEAR_AC, 1, {{2, 1, 2, 3}}, {4}},
      {"topk", GC_TOPK, 1, {{2, 5}}, {2}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const gc_case *c = &cases[k];
    torc_tensor *in[3] = {0};
    torc_generator *g = torc_generator_new(100 + k);
    for (int j = 0; j < c->n; j++) {
      in[j] = torc_rand(c->shape[j], c->ndim[j], TORC_F64, TORC_CPU, g);
      assert_torc(in[j]);
      assert_ok(torc_set_requires_grad(in[j], 1));
    }
    torc_generator_free(g);
    if (torc_gradcheck(gc_fn, (void *)c, in, c->n, 1e-6, 1e-7, 1e-5)) {
      print_error("%s: %s\n", c->name, torc_last_error());
      fail();
    }
    /* and backward really reaches every input */
    torc_tensor *out = gc_fn(in, c->n, (void *)c);
    assert_torc(out);
    torc_tensor *l = torc_sum(out, NULL, 0, 0);
    assert_ok(torc_backward(l, NULL, 0));
    for (int j = 0; j < c->n; j++) {
      assert_non_null(torc_grad_of(in[j]));
      torc_release(in[j]);
    }
    torc_release(out), torc_release(l);
  }
  torc_release(gc_idx_g), torc_release(gc_idx_s), torc_release(gc_idx_sel);
}

static void test_grad_values(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* gather with a repeated index accumulates; topk's gradient goes to the
   * chosen elements; cat's reaches inputs of other dtypes */
  torc_tensor *x = iota(TORC_SHAPE(2, 3), 0);
  assert_ok(torc_set_requires_grad(x, 1));
  const int64_t ig[] = {2, 2, 0, 1};
  torc_tensor *g = torc_gather(x, 1, i64(ig, TORC_SHAPE(2, 2)));
  assert_string_equal(torc_grad_fn_name(g), "GatherBackward");
  assert_ok(torc_backward(torc_sum(g, NULL, 0, 0), NULL, 0));
  const double eg[] = {0, 0, 2, 1, 1, 0};
  test_assert_values(torc_grad_of(x), eg, 6, 0);
  assert_ok(torc_zero_grad(x, 1));
  torc_tensor *v = NULL, *i = NULL;
  assert_ok(torc_topk(x, 1, 1, 0, 1, &v, &i));
  assert_false(torc_requires_grad(i));
  assert_ok(torc_backward(torc_sum(v, NULL, 0, 0), NULL, 0));
  const double et[] = {1, 0, 0, 1, 0, 0};
  test_assert_values(torc_grad_of(x), et, 6, 0);
  torc_tensor *f = torc_ones(TORC_SHAPE(1, 3), TORC_F32, TORC_CPU);
  assert_ok(torc_set_requires_grad(f, 1));
  assert_ok(torc_zero_grad(x, 1));
  const torc_tensor *xf[] = {x, f, torc_zeros(TORC_SHAPE(0), TORC_I64, TORC_CPU)};
  torc_tensor *c = torc_cat(xf, 3, 0);
  assert_string_equal(torc_grad_fn_name(c), "CatBackward");
  torc_tensor *w = iota(TORC_SHAPE(3, 3), 1);
  assert_ok(torc_backward(torc_sum(torc_mul(c, w), NULL, 0, 0), NULL, 0));
  const double ex[] = {1, 2, 3, 4, 5, 6}, ef[] = {7, 8, 9};
  test_assert_values(torc_grad_of(x), ex, 6, 0);
  assert_int_equal(torc_dtype_of(torc_grad_of(f)), TORC_F32);
  test_assert_values(torc_grad_of(f), ef, 3, 0);
  /* one_hot and integer index inputs never require grad */
  assert_false(torc_requires_grad(torc_one_hot(i64(ig, TORC_SHAPE(4)), 3)));
  torc_scope_end(s);
}

/* ---- the sim device gives the cpu's results ---- */

static void same_values(const char *what, const torc_tensor *cpu,
                        const torc_tensor *sim) {
  assert_torc(cpu);
  assert_torc(sim);
  assert_int_equal(torc_dtype_of(cpu), torc_dtype_of(sim));
  assert_int_equal(torc_ndim(cpu), torc_ndim(sim));
  for (int d = 0; d < torc_ndim(cpu); d++)
    assert_int_equal(torc_shape(cpu)[d], torc_shape(sim)[d]);
  double *a = test_values(cpu), *b = test_values(sim);
  assert_non_null(a);
  assert_non_null(b);
  for (int64_t k = 0; k < torc_numel(cpu); k++)
    if (memcmp(&a[k], &b[k], sizeof(double)) != 0) {
      print_error("%s: element %lld: cpu %g, sim %g\n", what, (long long)k,
                  a[k], b[k]);
      free(a), free(b);
      fail();
    }
  free(a), free(b);
}

static void test_sim_equals_cpu(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_device sd = sim_dev();
  torc_tensor *x = iota(TORC_SHAPE(3, 4), 0), *xs = torc_to(x, sd);
  const int64_t ig[] = {0, 2, 1, 0, 3, 3}, isel[] = {3, 0, 3};
  torc_tensor *ic = i64(ig, TORC_SHAPE(3, 2)), *is = torc_to(ic, sd);
  torc_tensor *lc = i64(isel, TORC_SHAPE(3)), *ls = torc_to(lc, sd);
  same_values("gather", torc_gather(x, 1, ic), torc_gather(xs, 1, is));
  torc_tensor *src = iota(TORC_SHAPE(3, 2), 5), *srcs = torc_to(src, sd);
  same_values("scatter", torc_scatter(x, 1, ic, src),
              torc_scatter(xs, 1, is, srcs));
  same_values("scatter_add", torc_scatter_add(x, 1, ic, src),
              torc_scatter_add(xs, 1, is, srcs));
  same_values("index_select", torc_index_select(x, 1, lc),
              torc_index_select(xs, 1, ls));
  torc_tensor *sa = iota(TORC_SHAPE(3, 3), 1), *sas = torc_to(sa, sd);
  same_values("index_add", torc_index_add(x, 1, lc, sa, -0.5),
              torc_index_add(xs, 1, ls, sas, -0.5));
  same_values("one_hot", torc_one_hot(lc, 5), torc_one_hot(ls, 5));
  const torc_tensor *cc[] = {x, src}, *cs[] = {xs, srcs};
  same_values("cat", torc_cat(cc, 2, 1), torc_cat(cs, 2, 1));
  const torc_tensor *kc[] = {x, x}, *ks[] = {xs, xs};
  same_values("stack", torc_stack(kc, 2, 2), torc_stack(ks, 2, 2));
  torc_tensor *pc[3], *ps[3];
  assert_int_equal(torc_split(x, 3, 1, pc, 3), 2);
  assert_int_equal(torc_split(xs, 3, 1, ps, 3), 2);
  same_values("split", pc[1], ps[1]);
  const int64_t pads[] = {2, 1, 1, 2};
  for (int m = 0; m < 3; m++)
    same_values("pad", torc_pad(x, pads, 4, (torc_pad_mode)m, 4),
                torc_pad(xs, pads, 4, (torc_pad_mode)m, 4));
  torc_tensor *im = image(), *ims = torc_to(im, sd);
  for (int m = 0; m < 3; m++)
    same_values("interpolate",
                torc_interpolate(im, 5, 7, m ? TORC_INTERP_BILINEAR
                                             : TORC_INTERP_NEAREST, m == 2),
                torc_interpolate(ims, 5, 7, m ? TORC_INTERP_BILINEAR
                                              : TORC_INTERP_NEAREST, m == 2));
  torc_tensor *vc, *icc, *vs, *iss;
  assert_ok(torc_topk(x, 3, 1, 0, 1, &vc, &icc));
  assert_ok(torc_topk(xs, 3, 1, 0, 1, &vs, &iss));
  same_values("topk values", vc, vs);
  same_values("topk indices", icc, iss);
  /* backward on sim */
  torc_tensor *xg = torc_to(image(), sd);
  assert_ok(torc_set_requires_grad(xg, 1));
  torc_tensor *up = torc_interpolate(xg, 4, 6, TORC_INTERP_BILINEAR, 0);
  torc_tensor *pd = torc_pad(up, pads, 4, TORC_PAD_REFLECT, 0);
  assert_ok(torc_backward(torc_sum(pd, NULL, 0, 0), NULL, 0));
  torc_tensor *xg2 = image();
  assert_ok(torc_set_requires_grad(xg2, 1));
  torc_tensor *up2 = torc_interpolate(xg2, 4, 6, TORC_INTERP_BILINEAR, 0);
  torc_tensor *pd2 = torc_pad(up2, pads, 4, TORC_PAD_REFLECT, 0);
  assert_ok(torc_backward(torc_sum(pd2, NULL, 0, 0), NULL, 0));
  same_values("pad+interpolate gradient", torc_grad_of(xg2), torc_grad_of(xg));
  torc_scope_end(s);
}

/* ---- errors ---- */

static void test_errors(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = iota(TORC_SHAPE(3, 4), 0);
  const int64_t bad[] = {0, 5, 1, 0, 3, 3}, neg[] = {0, -1, 2};
  torc_tensor *ib = i64(bad, TORC_SHAPE(3, 2));
  assert_null(torc_gather(x, 1, ib));
  assert_error(TORC_ERR_RANGE, "torc_gather: index 5 is out of range for dim "
                               "1 of size 4 (valid indices: 0 to 3)");
  torc_tensor *src = iota(TORC_SHAPE(3, 2), 0);
  assert_null(torc_scatter(x, -1, ib, src));
  assert_error(TORC_ERR_RANGE, "index 5 is out of range for dim 1 of size 4");
  assert_null(torc_scatter_add(x, 1, ib, src));
  assert_error(TORC_ERR_RANGE, "index 5 is out of range for dim 1 of size 4");
  torc_tensor *in = i64(neg, TORC_SHAPE(3));
  assert_null(torc_index_select(x, 0, in));
  assert_error(TORC_ERR_RANGE, "torc_index_select: index -1 is out of range "
                               "for dim 0 of size 3");
  assert_null(torc_index_add(x, 1, in, iota(TORC_SHAPE(3, 3), 0), 1));
  assert_error(TORC_ERR_RANGE, "index -1 is out of range for dim 1 of size 4");
  assert_null(torc_gather(x, 2, ib));
  assert_error(TORC_ERR_RANGE, "dim 2 is out of range");
  assert_null(torc_gather(x, 1, x));
  assert_error(TORC_ERR_DTYPE, "index must be an integer tensor");
  assert_null(torc_gather(x, 1, i64(bad, TORC_SHAPE(6))));
  assert_error(TORC_ERR_SHAPE, "the index has 1 dims (shape [6])");
  assert_null(torc_gather(x, 0, i64(bad, TORC_SHAPE(1, 6))));
  assert_error(TORC_ERR_SHAPE, "larger than the input (shape [3, 4]) in dim 1 "
                               "(6 > 4)");
  assert_null(torc_scatter(x, 1, ib, torc_to_dtype(src, TORC_F32)));
  assert_error(TORC_ERR_DTYPE, "src is f32 but the input is f64");
  assert_null(torc_index_add(x, 1, in, iota(TORC_SHAPE(3, 2), 0), 1));
  assert_error(TORC_ERR_SHAPE, "src has shape [3, 2] but must have shape "
                               "[3, 3]");
  /* one_hot */
  assert_null(torc_one_hot(in, 3));
  assert_error(TORC_ERR_RANGE, "index -1 (element 1) is negative");
  assert_null(torc_one_hot(ib, 4));
  assert_error(TORC_ERR_RANGE, "index 5 is out of range for num_classes 4");
  assert_null(torc_one_hot(x, 4));
  assert_error(TORC_ERR_DTYPE, "got f64");
  /* cat / stack */
  torc_tensor *y = iota(TORC_SHAPE(2, 4), 0), *z = iota(TORC_SHAPE(2, 3), 0);
  const torc_tensor *yz[] = {y, y, z};
  assert_null(torc_cat(yz, 3, 0));
  assert_error(TORC_ERR_SHAPE, "torc_cat: tensor 2 has shape [2, 3] but "
                               "tensor 0 has shape [2, 4]: sizes must match "
                               "except in dim 0 (they differ in dim 1)");
  const torc_tensor *yv[] = {y, torc_reshape(y, TORC_SHAPE(8))};
  assert_null(torc_cat(yv, 2, 0));
  assert_error(TORC_ERR_SHAPE, "tensor 1 has shape [8] but tensor 0 has "
                               "shape [2, 4]: they must have the same number "
                               "of dims");
  const torc_tensor *ys[] = {y, torc_to(y, sim_dev())};
  assert_null(torc_cat(ys, 2, 0));
  assert_error(TORC_ERR_DEVICE, "tensor 1 is on sim:0 but tensor 0 is on cpu");
  assert_null(torc_cat(yz, 0, 0));
  assert_error(TORC_ERR_INVALID, "non-empty list");
  assert_null(torc_stack(yz, 3, 0));
  assert_error(TORC_ERR_SHAPE, "torc_stack: tensor 2 has shape [2, 3] but "
                               "tensor 0 has shape [2, 4]");
  assert_null(torc_stack(yz, 2, 3));
  assert_error(TORC_ERR_RANGE, "dim 3 is out of range");
  /* split / chunk */
  torc_tensor *out[2];
  assert_int_equal(torc_split(x, 0, 1, out, 2), -1);
  assert_error(TORC_ERR_INVALID, "torc_split: split_size is 0; it must be "
                                 ">= 1 (splitting dim 1 of shape [3, 4])");
  assert_int_equal(torc_split(x, 1, 1, out, 2), -1);
  assert_error(TORC_ERR_INVALID, "the result has 4 pieces but out holds 2");
  assert_int_equal(torc_chunk(x, 0, 1, out, 2), -1);
  assert_error(TORC_ERR_INVALID, "chunks is 0");
  /* pad */
  const int64_t big[] = {4, 0}, two[] = {1, 1, 1, 1, 1, 1}, ng[] = {-1, 0};
  assert_null(torc_pad(x, big, 2, TORC_PAD_REFLECT, 0));
  assert_error(TORC_ERR_SHAPE, "reflect padding (4, 0) of dim 1 must be less "
                               "than its size 4");
  assert_null(torc_pad(x, two, 6, TORC_PAD_CONSTANT, 0));
  assert_error(TORC_ERR_INVALID, "got 6 padding amounts for a tensor of shape "
                                 "[3, 4]");
  assert_null(torc_pad(x, two, 3, TORC_PAD_CONSTANT, 0));
  assert_error(TORC_ERR_INVALID, "got 3 padding amounts");
  assert_null(torc_pad(x, ng, 2, TORC_PAD_REPLICATE, 0));
  assert_error(TORC_ERR_INVALID, "padding (-1, 0) of dim 1 is negative");
  assert_null(torc_pad(x, two, 2, (torc_pad_mode)7, 0));
  assert_error(TORC_ERR_INVALID, "unknown mode 7");
  /* interpolate */
  assert_null(torc_interpolate(x, 2, 2, TORC_INTERP_BILINEAR, 0));
  assert_error(TORC_ERR_SHAPE, "expected a 4-D input [N, C, H, W], got shape "
                               "[3, 4]");
  torc_tensor *im = image();
  assert_null(torc_interpolate(im, 0, 2, TORC_INTERP_BILINEAR, 0));
  assert_error(TORC_ERR_SHAPE, "output size [0, 2]");
  assert_null(torc_interpolate(im, 2, 2, TORC_INTERP_NEAREST, 1));
  assert_error(TORC_ERR_INVALID, "align_corners only applies to bilinear");
  assert_null(torc_interpolate(torc_to_dtype(im, TORC_I64), 2, 2,
                               TORC_INTERP_NEAREST, 0));
  assert_error(TORC_ERR_DTYPE, "the input is i64");
  /* topk */
  torc_tensor *v = x, *i = x;
  assert_int_equal(torc_topk(x, 5, 1, 1, 1, &v, &i), TORC_ERR_RANGE);
  assert_contains(torc_last_error(), "torc_topk: k is 5 but dim 1 has size 4 "
                                     "(shape [3, 4]); k must be in 0 to 4");
  assert_null(v);
  assert_null(i);
  assert_int_equal(torc_topk(x, -1, 0, 1, 1, &v, &i), TORC_ERR_RANGE);
  assert_contains(torc_last_error(), "k is -1 but dim 0 has size 3");
  /* NULL inputs */
  torc_clear_error();
  assert_null(torc_gather(NULL, 0, ib));
  assert_int_equal(torc_last_status(), TORC_ERR_NULL);
  /* on sim a bad index is reported at the next synchronize */
  torc_device sd = sim_dev();
  torc_tensor *r = torc_gather(torc_to(x, sd), 1, torc_to(ib, sd));
  if (r != NULL) {
    double buf[6];
    assert_int_not_equal(torc_to_host(r, buf, sizeof buf), TORC_OK);
  }
  assert_contains(torc_last_error(),
                  "index 5 is out of range for dim 1 of size 4");
  torc_scope_end(s);
}

static void test_no_leaks(void **state) {
  (void)state;
  int64_t live = torc_tensor_live_count();
  int s = torc_scope_begin();
  torc_tensor *x = iota(TORC_SHAPE(2, 3), 1);
  assert_ok(torc_set_requires_grad(x, 1));
  const int64_t pads[] = {1, 1};
  const torc_tensor *xx[] = {x, x};
  torc_tensor *parts[3];
  assert_int_equal(torc_chunk(torc_stack(xx, 2, 0), 2, 1, parts, 3), 2);
  torc_tensor *v = NULL;
  assert_ok(torc_topk(torc_pad(parts[1], pads, 2, TORC_PAD_REFLECT, 0), 2,
                      -1, 1, 1, &v, NULL));
  assert_ok(torc_backward(torc_sum(v, NULL, 0, 0), NULL, 0));
  /* failing calls free what they made */
  const int64_t bad[] = {9};
  assert_null(torc_index_select(x, 0, i64(bad, TORC_SHAPE(1))));
  torc_scope_end(s);
  assert_int_equal(torc_tensor_live_count(), live);
}

static int setup(void **state) { return test_setup_ref_sim(state); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather_scatter),
      cmocka_unit_test(test_index_select_add),
      cmocka_unit_test(test_one_hot),
      cmocka_unit_test(test_cat_stack),
      cmocka_unit_test(test_split_chunk),
      cmocka_unit_test(test_pad),
      cmocka_unit_test(test_interpolate),
      cmocka_unit_test(test_topk),
      cmocka_unit_test(test_inplace),
      cmocka_unit_test(test_gradcheck),
      cmocka_unit_test(test_grad_values),
      cmocka_unit_test(test_sim_equals_cpu),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_no_leaks),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
