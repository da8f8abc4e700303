/* tests/test_nn.c — the neural-network ops (torc/nn.h): forward values
 * against PyTorch, stride/padding/dilation/groups/ceil_mode variants,
 * batch_norm's running statistics, gradcheck in f64 of every op and
 * input, the sim device against the cpu, and the user errors.
 *
 * Expected values come from /usr/bin/python3 with torch 2.x:
 *   import torch, torch.nn.functional as F
 *   torch.set_default_dtype(torch.float64)
 *   def v(n, off=0): return torch.tensor([(((i+off)*37) % 23 - 11)/8
 *                                         for i in range(n)])
 *   conv_a   = F.conv2d(v(64).reshape(1,4,4,4), v(72,3).reshape(4,2,3,3),
 *                       v(4,7), stride=(2,1), padding=(1,2),
 *                       dilation=(1,2), groups=2)
 *   conv_b   = F.conv2d(v(32).reshape(1,2,4,4), v(54,1).reshape(3,2,3,3))
 *   convt_a  = F.conv_transpose2d(v(24).reshape(1,4,2,3),
 *                v(24,2).reshape(4,1,3,2), v(2,5), stride=(2,1),
 *                padding=(1,0), output_padding=(1,0), groups=2,
 *                dilation=(1,2))
 *   maxp_a, maxp_a_idx = F.max_pool2d(v(72).reshape(1,2,6,6), 3, 2, 1,
 *                ceil_mode=True, return_indices=True)
 *   maxp_b, maxp_b_idx = F.max_pool2d(v(50,4).reshape(1,2,5,5), 2, 1, 0,
 *                dilation=2, return_indices=True)
 *   x = v(72).reshape(1,2,6,6)
 *   avgp_in  = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
 *                           count_include_pad=True)
 *   avgp_ex  = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
 *                           count_include_pad=False)
 *   avgp_div = F.avg_pool2d(x, (2,3), (2,1), (1,1), divisor_override=5)
 *   adapt    = F.adaptive_avg_pool2d(v(70).reshape(1,2,5,7), (3,4))
 *   x1 = v(24).reshape(3,2,2,2); x2 = v(24,9).reshape(3,2,2,2)*2+1
 *   rm = torch.tensor([0.5,-0.25]); rv = torch.tensor([2.0,0.5])
 *   w = torch.tensor([1.5,-0.5]); b = torch.tensor([0.25,1.0])
 *   F.batch_norm(x1, rm, rv, w, b, True, 0.1, 1e-5)
 *   bn_y2 = F.batch_norm(x2, rm, rv, w, b, True, 0.1, 1e-5)
 *   bn_rm, bn_rv = rm, rv
 *   bn_eval = F.batch_norm(v(12,3).reshape(4,3), torch.tensor([0.5,-1,0.25]),
 *                torch.tensor([1.0,4,0.25]), torch.tensor([2.0,1,-1]),
 *                torch.tensor([0.0,0.5,1]), False, 0.1, 1e-5)
 *   ln = F.layer_norm(v(24).reshape(2,3,4), (3,4), v(12,1).reshape(3,4),
 *                     v(12,2).reshape(3,4), 1e-5)
 *   gn = F.group_norm(v(24,5).reshape(2,4,3), 2, v(4,1), v(4,2), 1e-5)
 * each printed with "%.17g".
 */
#include <math.h>

#include "testutil.h"

static const double conv_a[32] = {-0.109375, 2.328125, -2.390625, 1.0625, -3.546875, -1.46875, -1.0625, -1.59375, 1.734375, 4.21875, -0.546875, 2.953125, -1.59375, 0.375, 0.890625, 0.25, -3.109375, 1.9375, 1.953125, -3.484375, -3.75, -1.171875, 4.71875, -0.34375, -0.84375, 1.375, -2.25, -2.25, -2.421875, -3.1875, -0.421875, -0.5625};
static const double conv_b[12] = {-0.984375, 2.140625, 1.453125, 0.625, -0.921875, 2.21875, 1.578125, 0.765625, -4.453125, 3.734375, 1.703125, -2.328125};
static const double convt_a[40] = {-1.640625, -0.59375, -0.390625, -2.109375, 0.390625, -2.9375, -1.921875, 1.9375, -2.390625, -0.625, -1.375, 0.03125, -3.046875, -1.796875, 0.703125, -0.75, -0.75, -2.8125, -2.578125, 0.3125, -0.21875, 1.375, -0.890625, -0.3125, 1.65625, -0.5625, 2.625, 2.109375, -0.34375, 0.359375, -0.46875, 1.125, -0.265625, 0.5625, 2.53125, -0.546875, 1.4375, -1.4375, 0.875, 1.4375};
static const double maxp_a[32] = {0.5, 1.125, 1, 0.625, 1.375, 1.25, 0.875, 0.625, 1.375, 1.125, 0.875, 0.5, 1.125, 1.125, 0.625, -0.5, 1.25, 0.875, 1.375, 1.375, 1.125, 1, 1.25, 1.25, 1.125, 0.875, 1.375, 1.25, 0.875, 0.875, 0.375, -0.75};
static const double maxp_a_idx[32] = {6, 8, 3, 11, 18, 13, 21, 11, 18, 31, 21, 29, 31, 31, 34, 35, 0, 8, 5, 5, 18, 13, 23, 23, 18, 31, 28, 23, 31, 31, 34, 35};
static const double maxp_b[18] = {0.75, -0.375, 1.375, 0.875, -0.25, 1.25, 1, -0.125, 1.375, 1.375, 0.25, 1.375, 1.25, 0.375, 1.25, 1.375, 0.5, 1.375};
static const double maxp_b_idx[18] = {12, 13, 14, 17, 18, 9, 22, 23, 14, 12, 13, 12, 7, 18, 7, 12, 23, 12};
static const double avgp_in[32] = {-0.125, 0.125, -0.097222222222222224, -0.10416666666666667, 0.25, 0.125, -0.20833333333333334, -0.1875, 0.19444444444444445, 0.041666666666666664, -0.29166666666666669, -0.22916666666666666, 0.083333333333333329, 0, -0.16666666666666666, -0.125, 0.083333333333333329, -0.041666666666666664, 0.055555555555555552, 0.29166666666666669, 0.083333333333333329, -0.125, -0.1388888888888889, 0.16666666666666666, 0.027777777777777776, -0.20833333333333334, 0.097222222222222224, 0.125, 0, -0.125, -0.29166666666666669, -0.1875};
static const double avgp_ex[32] = {-0.28125, 0.1875, -0.14583333333333334, -0.3125, 0.375, 0.125, -0.20833333333333334, -0.375, 0.29166666666666669, 0.041666666666666664, -0.29166666666666669, -0.45833333333333331, 0.25, 0, -0.33333333333333331, -0.5, 0.1875, -0.0625, 0.083333333333333329, 0.875, 0.125, -0.125, -0.1388888888888889, 0.33333333333333331, 0.041666666666666664, -0.20833333333333334, 0.097222222222222224, 0.25, 0, -0.25, -0.58333333333333337, -0.75};
static const double avgp_div[48] = {-0.20000000000000001, -0.34999999999999998, 0.125, 0.025000000000000001, -0.074999999999999997, -0.27500000000000002, 0.125, 0.375, 0.17499999999999999, -0.025000000000000001, -0.22500000000000001, -0.025000000000000001, 0.25, 0.27500000000000002, 0.074999999999999997, -0.125, -0.32500000000000001, -0.47499999999999998, 0.10000000000000001, 0.10000000000000001, 0, -0.10000000000000001, -0.20000000000000001, 0.025000000000000001, 0.27500000000000002, 0.074999999999999997, -0.025000000000000001, -0.125, 0.34999999999999998, 0.20000000000000001, -0.074999999999999997, 0.074999999999999997, -0.125, -0.32500000000000001, -0.52500000000000002, -0.22500000000000001, 0.050000000000000003, -0.025000000000000001, -0.22500000000000001, 0.14999999999999999, 0.52500000000000002, 0.47499999999999998, 0, -0.050000000000000003, -0.14999999999999999, -0.25, -0.34999999999999998, -0.074999999999999997};
static const double adapt[24] = {-0.125, 0.10416666666666667, -0.22916666666666666, 0, 0.041666666666666664, -0.20833333333333334, 0.097222222222222224, 0.16666666666666666, -0.03125, -0.041666666666666664, 0.10416666666666667, 0.09375, 0.03125, 0.020833333333333332, -0.3125, 0.15625, -0.041666666666666664, 0.027777777777777776, 0.013888888888888888, 0.083333333333333329, 0.125, 0.35416666666666669, 0.020833333333333332, -0.46875};
static const double bn_y2[24] = {0.52395393930898648, -1.5894050210746231, 1.698042250633214, -0.41531670975039564, 0.30859243888684373, 1.0130454256813803, 1.7174984124759167, 0.62168265523997113, -0.18049904748555012, 3.106948224222287, 0.99358926383867741, -1.1197696965449322, 0.54341010115168931, 1.2478630879462258, 1.9523160747407622, 0.85650031750481659, -0.88495203428008673, 2.4024952374277504, 0.28913627704414091, -1.8242226833394688, 0.77822776341653477, 1.4826807502110713, 0.38686499297512561, 1.0913179797696622};
static const double bn_rm[2] = {0.48989583333333336, -0.097708333333333314};
static const double bn_rv[2] = {1.9708652935606064, 0.74581912878787882};
static const double bn_eval[12] = {0.99999500003749975, 0.93749945312602534, 3.9999400017999398, 0, 0.68749976562543946, -0.74996500104996489, -0.99999500003749975, 0.43750007812485353, 0.25001499955001505, -1.9999900000749995, 1.6249985937526368, 1.2499950001499949};
static const double ln[24] = {-1.3018480344147854, 0.54553691283488259, -0.85461420796576681, -1.4184914166700606, 0.4845420718651321, -1.2865993241723479, 0.65353319188652781, -0.65387036010491395, -1.125, 0.44414224082204518, -1.2342515864062271, 0.79862849846185613, -0.97598412625481978, -0.066645075922749653, -0.0044751326640960765, -1.1023570375135177, -0.55459258918915932, -0.85399724793821741, 0.14573545289578074, 0.2982990466563622, -1.125, -0.48684190117371356, -0.69585290942084388, 2.0575166111505561};
static const double gn[24] = {-1.1960499329586938, -0.43139290502950439, -0.92295813726969755, -0.18339778131898346, 0.79973268316140278, 1.7828631476417891, 0.41892365862437664, -1.0496702196614405, 1.2348091465609417, -1.2364019085343907, -1.0528276737486635, -1.3383875945264612, -1.0151627835793837, -0.15848302124599045, -0.70920572560317174, 2.0198568599207061, 0.30649733525391987, 1.4079427439682826, -1.31446648788985, 0.72461891992132155, -0.58622169938586022, -1.447232963553164, -1.2833778861397662, -1.1195228087263684};

/* v(n, off) of the script above, as a tensor of `shape` on dev. */
static torc_tensor *vt(const int64_t *shape, int nd, int off, torc_device dev) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    d[i] = (double)(((i + off) * 37) % 23 - 11) / 8;
  int s = torc_scope_begin(); /* the result goes to the caller's scope */
  torc_tensor *t = torc_from_host(d, shape, nd, TORC_F64, TORC_CPU);
  free(d);
  if (t && dev.type != TORC_CPU.type)
    t = torc_to(t, dev);
  assert_torc(t);
  torc_scope_keep(t);
  torc_scope_end(s);
  return t;
}

static torc_tensor *host(const double *v, const int64_t *shape, int nd) {
  torc_tensor *t = torc_from_host(v, shape, nd, TORC_F64, TORC_CPU);
  assert_torc(t);
  return t;
}

static void expect_shape(const torc_tensor *t, const int64_t *shape, int nd) {
  assert_torc(t);
  assert_int_equal(torc_ndim(t), nd);
  for (int i = 0; i < nd; i++)
    assert_int_equal(torc_size(t, i), shape[i]);
}

/* ---- forward values against PyTorch ---- */

static void test_conv_forward(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_conv2d_params p = {{2, 1}, {1, 2}, {1, 2}, {0, 0}, 2};
  torc_tensor *y = torc_conv2d(vt(TORC_SHAPE(1, 4, 4, 4), 0, TORC_CPU),
                               vt(TORC_SHAPE(4, 2, 3, 3), 3, TORC_CPU),
                               vt(TORC_SHAPE(4), 7, TORC_CPU), &p);
  expect_shape(y, TORC_SHAPE(1, 4, 2, 4));
  test_assert_values(y, conv_a, 32, 1e-12);
  /* NULL params: PyTorch's defaults */
  y = torc_conv2d(vt(TORC_SHAPE(1, 2, 4, 4), 0, TORC_CPU),
                  vt(TORC_SHAPE(3, 2, 3, 3), 1, TORC_CPU), NULL, NULL);
  expect_shape(y, TORC_SHAPE(1, 3, 2, 2));
  test_assert_values(y, conv_b, 12, 1e-12);
  torc_conv2d_params q = {{2, 1}, {1, 0}, {1, 2}, {1, 0}, 2};
  y = torc_conv_transpose2d(vt(TORC_SHAPE(1, 4, 2, 3), 0, TORC_CPU),
                            vt(TORC_SHAPE(4, 1, 3, 2), 2, TORC_CPU),
                            vt(TORC_SHAPE(2), 5, TORC_CPU), &q);
  expect_shape(y, TORC_SHAPE(1, 2, 4, 5));
  test_assert_values(y, convt_a, 40, 1e-12);
  /* f32 agrees with the f64 result to f32 precision */
  torc_tensor *x32 =
      torc_to_dtype(vt(TORC_SHAPE(1, 2, 4, 4), 0, TORC_CPU), TORC_F32);
  torc_tensor *w32 =
      torc_to_dtype(vt(TORC_SHAPE(3, 2, 3, 3), 1, TORC_CPU), TORC_F32);
  y = torc_conv2d(x32, w32, NULL, NULL);
  assert_int_equal(torc_dtype_of(y), TORC_F32);
  test_assert_values(y, conv_b, 12, 1e-6);
  torc_scope_end(s);
}

static void test_pool_forward(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = vt(TORC_SHAPE(1, 2, 6, 6), 0, TORC_CPU), *ix = NULL;
  torc_pool2d_params p = {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 1, 0, 0};
  torc_tensor *y = torc_max_pool2d_with_indices(x, &p, &ix);
  expect_shape(y, TORC_SHAPE(1, 2, 4, 4)); /* 3 x 3 without ceil_mode */
  test_assert_values(y, maxp_a, 32, 0);
  assert_int_equal(torc_dtype_of(ix), TORC_I64);
  test_assert_values(ix, maxp_a_idx, 32, 0);
  p.ceil_mode = 0;
  expect_shape(torc_max_pool2d(x, &p), TORC_SHAPE(1, 2, 3, 3));
  torc_pool2d_params d = {{2, 2}, {1, 1}, {0, 0}, {2, 2}, 0, 0, 0};
  y = torc_max_pool2d_with_indices(vt(TORC_SHAPE(1, 2, 5, 5), 4, TORC_CPU),
                                   &d, &ix);
  expect_shape(y, TORC_SHAPE(1, 2, 3, 3));
  test_assert_values(y, maxp_b, 18, 0);
  test_assert_values(ix, maxp_b_idx, 18, 0);
  p.ceil_mode = 1;
  y = torc_avg_pool2d(x, &p);
  expect_shape(y, TORC_SHAPE(1, 2, 4, 4));
  test_assert_values(y, avgp_in, 32, 1e-12);
  p.exclude_pad = 1;
  test_assert_values(torc_avg_pool2d(x, &p), avgp_ex, 32, 1e-12);
  torc_pool2d_params dv = {{2, 3}, {2, 1}, {1, 1}, {0, 0}, 0, 0, 5};
  y = torc_avg_pool2d(x, &dv);
  expect_shape(y, TORC_SHAPE(1, 2, 4, 6));
  test_assert_values(y, avgp_div, 48, 1e-12);
  y = torc_adaptive_avg_pool2d(vt(TORC_SHAPE(1, 2, 5, 7), 0, TORC_CPU), 3, 4);
  expect_shape(y, TORC_SHAPE(1, 2, 3, 4));
  test_assert_values(y, adapt, 24, 1e-12);
  torc_scope_end(s);
}

static void test_batch_norm_running_stats(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *rm = host((const double[]){0.5, -0.25}, TORC_SHAPE(2));
  torc_tensor *rv = host((const double[]){2.0, 0.5}, TORC_SHAPE(2));
  torc_tensor *w = host((const double[]){1.5, -0.5}, TORC_SHAPE(2));
  torc_tensor *b = host((const double[]){0.25, 1.0}, TORC_SHAPE(2));
  torc_tensor *x1 = vt(TORC_SHAPE(3, 2, 2, 2), 0, TORC_CPU);
  torc_tensor *x2 = torc_add(torc_mul(vt(TORC_SHAPE(3, 2, 2, 2), 9, TORC_CPU),
                                      torc_full(NULL, 0, 2, TORC_F64, TORC_CPU)),
                             torc_full(NULL, 0, 1, TORC_F64, TORC_CPU));
  uint64_t v0 = torc_version(rm);
  assert_torc(torc_batch_norm(x1, rm, rv, w, b, 1, 0.1, 1e-5));
  assert_true(torc_version(rm) > v0); /* updated in place */
  torc_tensor *y2 = torc_batch_norm(x2, rm, rv, w, b, 1, 0.1, 1e-5);
  test_assert_values(y2, bn_y2, 24, 1e-12);
  test_assert_values(rm, bn_rm, 2, 1e-14);
  test_assert_values(rv, bn_rv, 2, 1e-14);
  /* eval on [N, C] with given running statistics */
  torc_tensor *em = host((const double[]){0.5, -1, 0.25}, TORC_SHAPE(3));
  torc_tensor *ev = host((const double[]){1, 4, 0.25}, TORC_SHAPE(3));
  torc_tensor *y = torc_batch_norm(
      vt(TORC_SHAPE(4, 3), 3, TORC_CPU), em, ev,
      host((const double[]){2, 1, -1}, TORC_SHAPE(3)),
      host((const double[]){0, 0.5, 1}, TORC_SHAPE(3)), 0, 0.1, 1e-5);
  test_assert_values(y, bn_eval, 12, 1e-12);
  const double em_v[] = {0.5, -1, 0.25};
  test_assert_values(em, em_v, 3, 0); /* eval leaves them alone */
  /* no weight/bias and no running stats: plain standardisation */
  y = torc_batch_norm(vt(TORC_SHAPE(4, 3), 0, TORC_CPU), NULL, NULL, NULL,
                      NULL, 1, 0.1, 0);
  double *yv = test_values(y);
  for (int c = 0; c < 3; c++) {
    double m = 0, q = 0;
    for (int i = 0; i < 4; i++)
      m += yv[i * 3 + c] / 4;
    for (int i = 0; i < 4; i++)
      q += (yv[i * 3 + c] - m) * (yv[i * 3 + c] - m) / 4;
    assert_true(fabs(m) < 1e-12 && fabs(q - 1) < 1e-9);
  }
  free(yv);
  torc_scope_end(s);
}

static void test_layer_group_norm_forward(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *y = torc_layer_norm(vt(TORC_SHAPE(2, 3, 4), 0, TORC_CPU),
                                   TORC_SHAPE(3, 4),
                                   vt(TORC_SHAPE(3, 4), 1, TORC_CPU),
                                   vt(TORC_SHAPE(3, 4), 2, TORC_CPU), 1e-5);
  expect_shape(y, TORC_SHAPE(2, 3, 4));
  test_assert_values(y, ln, 24, 1e-12);
  y = torc_group_norm(vt(TORC_SHAPE(2, 4, 3), 5, TORC_CPU), 2,
                      vt(TORC_SHAPE(4), 1, TORC_CPU),
                      vt(TORC_SHAPE(4), 2, TORC_CPU), 1e-5);
  test_assert_values(y, gn, 24, 1e-12);
  /* f32 and bf16 inputs: the same values to their precision */
  torc_tensor *x32 = torc_to_dtype(vt(TORC_SHAPE(2, 4, 3), 5, TORC_CPU),
                                   TORC_F32);
  y = torc_group_norm(x32, 2,
                      torc_to_dtype(vt(TORC_SHAPE(4), 1, TORC_CPU), TORC_F32),
                      torc_to_dtype(vt(TORC_SHAPE(4), 2, TORC_CPU), TORC_F32),
                      1e-5);
  assert_int_equal(torc_dtype_of(y), TORC_F32);
  test_assert_values(y, gn, 24, 1e-6);
  y = torc_layer_norm(torc_to_dtype(vt(TORC_SHAPE(2, 3, 4), 0, TORC_CPU),
                                    TORC_BF16),
                      TORC_SHAPE(3, 4),
                      torc_to_dtype(vt(TORC_SHAPE(3, 4), 1, TORC_CPU),
                                    TORC_BF16),
                      torc_to_dtype(vt(TORC_SHAPE(3, 4), 2, TORC_CPU),
                                    TORC_BF16),
                      1e-5);
  assert_int_equal(torc_dtype_of(y), TORC_BF16);
  test_assert_values(y, ln, 24, 1e-2);
  torc_scope_end(s);
}

static void test_dropout_and_embedding(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_tensor *x = torc_ones(TORC_SHAPE(100, 50), TORC_F32, TORC_CPU);
  torc_generator *g = torc_generator_new(42);
  torc_tensor *y = torc_dropout(x, 0.3, 1, g);
  double *v = test_values(y);
  int zeros = 0;
  for (int i = 0; i < 5000; i++) {
    if (v[i] == 0)
      zeros++;
    else
      assert_true(fabs(v[i] - 1 / 0.7) < 1e-6);
  }
  free(v);
  assert_in_range(zeros, 1300, 1700); /* 1500 expected, sd ~32 */
  /* the same generator state gives the same mask; the state advanced */
  uint64_t seed, off;
  torc_generator_get_state(g, &seed, &off);
  assert_int_equal(off, 5000);
  torc_generator_set_state(g, 42, 0);
  torc_tensor *y2 = torc_dropout(x, 0.3, 1, g);
  double *a = test_values(y), *b = test_values(y2);
  assert_memory_equal(a, b, sizeof(double) * 5000);
  free(a), free(b);
  /* eval or p = 0: x itself; p = 1: zeros */
  assert_ptr_equal(torc_dropout(x, 0.3, 0, g), x);
  assert_ptr_equal(torc_dropout(x, 0, 1, g), x);
  y = torc_dropout(x, 1, 1, g);
  assert_true(y != NULL);
  double m;
  assert_ok(torc_item(torc_amax(y, NULL, 0, 0), &m));
  assert_true(m == 0);
  torc_generator_free(g);

  /* embedding: rows of the weight, gradient counts the lookups */
  const int64_t idx[] = {1, 3, 0, 3};
  torc_tensor *ix = torc_from_host(idx, TORC_SHAPE(2, 2), TORC_I64, TORC_CPU);
  torc_tensor *w = vt(TORC_SHAPE(4, 3), 0, TORC_CPU);
  assert_ok(torc_set_requires_grad(w, 1));
  y = torc_embedding(ix, w);
  expect_shape(y, TORC_SHAPE(2, 2, 3));
  double wv[12], e[12];
  assert_ok(torc_to_host(w, wv, sizeof wv));
  for (int i = 0; i < 4; i++)
    for (int d = 0; d < 3; d++)
      e[i * 3 + d] = wv[idx[i] * 3 + d];
  test_assert_values(y, e, 12, 0);
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  const double ge[] = {1, 1, 1, 1, 1, 1, 0, 0, 0, 2, 2, 2};
  test_assert_values(torc_grad_of(w), ge, 12, 0);
  /* i32 indices work too */
  torc_tensor *i32 = torc_to_dtype(ix, TORC_I32);
  test_assert_values(torc_embedding(i32, w), e, 12, 0);
  torc_scope_end(s);
}

/* ---- every op: gradcheck in f64, and sim equal to cpu ---- */

static torc_tensor *f_conv(torc_tensor *const *in, int n, void *u) {
  (void)u;
  torc_conv2d_params p = {{2, 1}, {1, 2}, {1, 2}, {0, 0}, 2};
  return torc_conv2d(in[0], in[1], n > 2 ? in[2] : NULL, &p);
}
static torc_tensor *f_conv_plain(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  return torc_conv2d(in[0], in[1], NULL, NULL);
}
static torc_tensor *f_convt(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  torc_conv2d_params p = {{2, 1}, {1, 0}, {1, 2}, {1, 0}, 2};
  return torc_conv_transpose2d(in[0], in[1], in[2], &p);
}
static torc_tensor *f_maxpool(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  torc_pool2d_params p = {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 1, 0, 0};
  return torc_max_pool2d(in[0], &p);
}
static torc_tensor *f_maxpool_dil(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  torc_pool2d_params p = {{2, 2}, {1, 1}, {0, 0}, {2, 2}, 0, 0, 0};
  return torc_max_pool2d(in[0], &p);
}
static torc_tensor *f_avgpool(torc_tensor *const *in, int n, void *u) {
  (void)n;
  torc_pool2d_params p = {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 1,
                          u != NULL, 0};
  return torc_avg_pool2d(in[0], &p);
}
static torc_tensor *f_avgpool_div(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  torc_pool2d_params p = {{2, 3}, {2, 1}, {1, 1}, {0, 0}, 0, 0, 5};
  return torc_avg_pool2d(in[0], &p);
}
static torc_tensor *f_adaptive(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  return torc_adaptive_avg_pool2d(in[0], 3, 4);
}
static torc_tensor *f_bn_train(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  return torc_batch_norm(in[0], NULL, NULL, in[1], in[2], 1, 0.1, 1e-5);
}
static torc_tensor *f_bn_eval(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  int s = torc_scope_begin();
  torc_device dev = torc_device_of(in[0]);
  torc_tensor *rm = torc_full(TORC_SHAPE(3), 0.25, TORC_F64, dev);
  torc_tensor *rv = torc_full(TORC_SHAPE(3), 1.5, TORC_F64, dev);
  torc_tensor *y = torc_batch_norm(in[0], rm, rv, in[1], in[2], 0, 0.1, 1e-5);
  torc_scope_keep(y);
  torc_scope_end(s);
  return y;
}
static torc_tensor *f_ln(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  return torc_layer_norm(in[0], TORC_SHAPE(3, 4), in[1], in[2], 1e-5);
}
static torc_tensor *f_gn(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  return torc_group_norm(in[0], 2, in[1], in[2], 1e-5);
}
static torc_tensor *f_dropout(torc_tensor *const *in, int n, void *u) {
  (void)n;
  torc_generator_set_state(u, 7, 0); /* the same mask every call */
  return torc_dropout(in[0], 0.4, 1, u);
}
static torc_tensor *f_embedding(torc_tensor *const *in, int n, void *u) {
  (void)n, (void)u;
  const int64_t idx[] = {4, 0, 2, 4, 4, 1};
  int s = torc_scope_begin(); /* gradcheck calls this inside its scope */
  torc_tensor *ix = torc_from_host(idx, TORC_SHAPE(3, 2), TORC_I64, TORC_CPU);
  torc_tensor *y = torc_embedding(torc_to(ix, torc_device_of(in[0])), in[0]);
  torc_scope_keep(y);
  torc_scope_end(s);
  return y;
}

typedef struct nn_case {
  const char *name;
  torc_fn fn;
  int n;
  int64_t shape[3][4];
  int nd[3];
} nn_case;

static const nn_case cases[] = {
    {"conv2d", f_conv, 3, {{2, 4, 4, 4}, {4, 2, 3, 3}, {4}}, {4, 4, 1}},
    {"conv2d plain", f_conv_plain, 2, {{2, 2, 4, 4}, {3, 2, 3, 3}}, {4, 4}},
    {"conv_transpose2d", f_convt, 3, {{1, 4, 2, 3}, {4, 1, 3, 2}, {2}},
     {4, 4, 1}},
    {"max_pool2d", f_maxpool, 1, {{1, 2, 6, 6}}, {4}},
    {"max_pool2d dilation", f_maxpool_dil, 1, {{1, 2, 5, 5}}, {4}},
    {"avg_pool2d", f_avgpool, 1, {{1, 2, 6, 6}}, {4}},
    {"avg_pool2d divisor", f_avgpool_div, 1, {{1, 2, 6, 6}}, {4}},
    {"adaptive_avg_pool2d", f_adaptive, 1, {{1, 2, 5, 7}}, {4}},
    {"batch_norm train", f_bn_train, 3, {{3, 2, 2, 2}, {2}, {2}}, {4, 1, 1}},
    {"batch_norm eval", f_bn_eval, 3, {{4, 3}, {3}, {3}}, {2, 1, 1}},
    {"layer_norm", f_ln, 3, {{2, 3, 4}, {3, 4}, {3, 4}}, {3, 2, 2}},
    {"group_norm", f_gn, 3, {{2, 4, 3}, {4}, {4}}, {3, 1, 1}},
    {"dropout", f_dropout, 1, {{4, 5}}, {2}},
    {"embedding", f_embedding, 1, {{5, 3}}, {2}},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static torc_generator *case_gen;

static void *case_user(size_t i) {
  if (cases[i].fn == f_dropout)
    return case_gen;
  if (cases[i].fn == f_avgpool && i == 5)
    return NULL;
  return NULL;
}

/* Random f64 inputs in [0.25, 1.25) (distinct: no ties in max_pool),
 * requiring grad. */
static void make_inputs(size_t c, torc_tensor **in, uint64_t seed) {
  torc_generator *g = torc_generator_new(seed);
  int s = torc_scope_begin(); /* the inputs go to the caller's scope */
  for (int i = 0; i < cases[c].n; i++) {
    in[i] = torc_add(
        torc_rand(cases[c].shape[i], cases[c].nd[i], TORC_F64, TORC_CPU, g),
        torc_full(NULL, 0, 0.25, TORC_F64, TORC_CPU));
    assert_torc(in[i]);
    assert_ok(torc_set_requires_grad(in[i], 1));
    torc_scope_keep(in[i]);
  }
  torc_scope_end(s);
  torc_generator_free(g);
}

static void test_gradcheck_all(void **state) {
  (void)state;
  case_gen = torc_generator_new(7);
  for (size_t c = 0; c < N_CASES; c++) {
    torc_tensor *in[3] = {0};
    make_inputs(c, in, 100 + c);
    if (torc_gradcheck(cases[c].fn, case_user(c), in, cases[c].n, 1e-6, 1e-7,
                       1e-5) != TORC_OK) {
      print_error("%s: %s\n", cases[c].name, torc_last_error());
      fail();
    }
    for (int i = 0; i < cases[c].n; i++)
      torc_release(in[i]);
  }
  /* avg_pool2d without the padding in the divisor */
  torc_tensor *x = NULL;
  make_inputs(5, &x, 99);
  assert_ok(torc_gradcheck(f_avgpool, (void *)1, &x, 1, 1e-6, 1e-7, 1e-5));
  torc_release(x);
  torc_generator_free(case_gen);
}

static torc_device sim0(void) {
  torc_device d = TORC_CPU;
  assert_ok(torc_device_parse("sim:0", &d));
  return d;
}

/* Forward and backward of every case on cpu and on sim: equal results. */
static void test_sim_equals_cpu(void **state) {
  (void)state;
  case_gen = torc_generator_new(7);
  for (size_t c = 0; c < N_CASES; c++) {
    int s = torc_scope_begin();
    torc_tensor *in[3] = {0}, *sin[3] = {0};
    make_inputs(c, in, 200 + c);
    for (int i = 0; i < cases[c].n; i++) {
      sin[i] = torc_to(torc_detach(in[i]), sim0());
      assert_torc(sin[i]);
      assert_ok(torc_set_requires_grad(sin[i], 1));
    }
    torc_tensor *y = cases[c].fn(in, cases[c].n, case_user(c));
    torc_tensor *ys = cases[c].fn(sin, cases[c].n, case_user(c));
    assert_torc(y);
    assert_torc(ys);
    assert_int_equal(torc_device_of(ys).type, sim0().type);
    /* a weighted sum, so every gradient element differs */
    torc_generator *g = torc_generator_new(5);
    torc_tensor *wt = torc_rand(torc_shape(y), torc_ndim(y), TORC_F64,
                                TORC_CPU, g);
    torc_generator_free(g);
    assert_ok(torc_backward(torc_sum(torc_mul(y, wt), NULL, 0, 0), NULL, 0));
    assert_ok(torc_backward(
        torc_sum(torc_mul(ys, torc_to(wt, sim0())), NULL, 0, 0), NULL, 0));
    double *e = test_values(y);
    test_assert_values(ys, e, torc_numel(y), 1e-13);
    free(e);
    for (int i = 0; i < cases[c].n; i++) {
      e = test_values(torc_grad_of(in[i]));
      assert_non_null(torc_grad_of(sin[i]));
      test_assert_values(torc_grad_of(sin[i]), e, torc_numel(in[i]), 1e-13);
      free(e);
    }
    torc_scope_end(s);
  }
  /* the max_pool2d indices and the running statistics, too */
  int s = torc_scope_begin();
  torc_tensor *x = vt(TORC_SHAPE(1, 2, 6, 6), 0, TORC_CPU), *ic, *is;
  torc_pool2d_params p = {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 1, 0, 0};
  assert_torc(torc_max_pool2d_with_indices(x, &p, &ic));
  assert_torc(torc_max_pool2d_with_indices(torc_to(x, sim0()), &p, &is));
  double *e = test_values(ic);
  test_assert_values(is, e, 32, 0);
  free(e);
  /* PyTorch's two training steps of test_batch_norm_running_stats */
  torc_tensor *rm = torc_to(host((const double[]){0.5, -0.25}, TORC_SHAPE(2)),
                            sim0());
  torc_tensor *rv = torc_to(host((const double[]){2.0, 0.5}, TORC_SHAPE(2)),
                            sim0());
  torc_tensor *w = torc_to(host((const double[]){1.5, -0.5}, TORC_SHAPE(2)),
                           sim0());
  torc_tensor *b = torc_to(host((const double[]){0.25, 1.0}, TORC_SHAPE(2)),
                           sim0());
  torc_tensor *x2 = torc_add(torc_mul(vt(TORC_SHAPE(3, 2, 2, 2), 9, sim0()),
                                      torc_full(NULL, 0, 2, TORC_F64, sim0())),
                             torc_full(NULL, 0, 1, TORC_F64, sim0()));
  assert_torc(torc_batch_norm(vt(TORC_SHAPE(3, 2, 2, 2), 0, sim0()), rm, rv,
                              w, b, 1, 0.1, 1e-5));
  torc_tensor *y2 = torc_batch_norm(x2, rm, rv, w, b, 1, 0.1, 1e-5);
  test_assert_values(y2, bn_y2, 24, 1e-12);
  test_assert_values(rm, bn_rm, 2, 1e-14);
  test_assert_values(rv, bn_rv, 2, 1e-14);
  torc_scope_end(s);
  torc_generator_free(case_gen);
}

/* ---- user errors ---- */

static void test_errors(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_device cpu = TORC_CPU;
  /* the hand-computed 64*7*7 class: in_channels that do not match */
  torc_tensor *x = torc_zeros(TORC_SHAPE(8, 64, 7, 7), TORC_F32, cpu);
  torc_tensor *w = torc_zeros(TORC_SHAPE(16, 3, 3, 3), TORC_F32, cpu);
  assert_null(torc_conv2d(x, w, NULL, NULL));
  assert_error(TORC_ERR_SHAPE, "has 64 input channels");
  assert_contains(torc_last_error(), "[8, 64, 7, 7]");
  assert_contains(torc_last_error(), "[16, 3, 3, 3]");
  assert_contains(torc_last_error(), "= 3");
  /* a NULL input keeps the first error */
  assert_null(torc_relu(torc_conv2d(x, w, NULL, NULL)));
  assert_contains(torc_last_error(), "has 64 input channels");
  /* kernel larger than the padded input */
  torc_tensor *small = torc_zeros(TORC_SHAPE(1, 3, 2, 2), TORC_F32, cpu);
  torc_tensor *w5 = torc_zeros(TORC_SHAPE(4, 3, 5, 5), TORC_F32, cpu);
  torc_conv2d_params pad1 = {{0, 0}, {1, 1}, {0, 0}, {0, 0}, 0};
  assert_null(torc_conv2d(small, w5, NULL, &pad1));
  assert_error(TORC_ERR_SHAPE, "height 5 (dilated: 5) is larger than the "
                               "padded input height 4 (2 + 2 * padding 1)");
  /* negative padding */
  torc_conv2d_params neg = {{1, 1}, {-1, 0}, {1, 1}, {0, 0}, 1};
  assert_null(torc_conv2d(small, w5, NULL, &neg));
  assert_error(TORC_ERR_INVALID, "padding -1");
  /* groups that do not divide the channels */
  torc_conv2d_params g2 = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, 2};
  torc_tensor *w3 = torc_zeros(TORC_SHAPE(4, 1, 1, 1), TORC_F32, cpu);
  assert_null(torc_conv2d(small, w3, NULL, &g2));
  assert_error(TORC_ERR_INVALID, "groups 2 does not divide the 3 input "
                                 "channels");
  assert_null(torc_group_norm(small, 2, NULL, NULL, 1e-5));
  assert_error(TORC_ERR_INVALID, "groups 2 must be >= 1 and divide the 3 "
                                 "channels");
  /* a bias of the wrong size, dtype mismatches, a 3-D input */
  torc_tensor *w1 = torc_zeros(TORC_SHAPE(4, 3, 1, 1), TORC_F32, cpu);
  assert_null(torc_conv2d(small, w1,
                          torc_zeros(TORC_SHAPE(3), TORC_F32, cpu), NULL));
  assert_error(TORC_ERR_SHAPE, "the bias has shape [3] but must be [4]");
  assert_null(torc_conv2d(small, torc_zeros(TORC_SHAPE(4, 3, 1, 1), TORC_F64,
                                            cpu), NULL, NULL));
  assert_error(TORC_ERR_DTYPE, "the weight is f64 but the input is f32");
  assert_null(torc_conv2d(torc_zeros(TORC_SHAPE(3, 2, 2), TORC_F32, cpu), w1,
                          NULL, NULL));
  assert_error(TORC_ERR_SHAPE, "torc_unsqueeze(x, 0)");
  assert_null(torc_conv_transpose2d(small, w1, NULL, NULL));
  assert_error(TORC_ERR_SHAPE, "x [1, 3, 2, 2] has 3 input channels but the "
                               "weight [4, 3, 1, 1] ([C_in, C_out / groups, "
                               "kH, kW]) has 4 in dim 0");
  /* output_padding too large */
  torc_conv2d_params op = {{1, 1}, {0, 0}, {1, 1}, {1, 0}, 1};
  torc_tensor *wt = torc_zeros(TORC_SHAPE(3, 2, 1, 1), TORC_F32, cpu);
  assert_null(torc_conv_transpose2d(small, wt, NULL, &op));
  assert_error(TORC_ERR_INVALID, "output_padding 1 (height) must be smaller");
  /* pooling: window too large, padding over half the kernel */
  torc_pool2d_params big = {{3, 3}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0};
  assert_null(torc_max_pool2d(small, &big));
  assert_error(TORC_ERR_SHAPE, "window 3 (dilated: 3) is larger than the "
                               "padded input height 2");
  torc_pool2d_params hp = {{2, 2}, {0, 0}, {2, 0}, {0, 0}, 0, 0, 0};
  assert_null(torc_avg_pool2d(small, &hp));
  assert_error(TORC_ERR_INVALID, "padding 2 (height) is more than half");
  assert_null(torc_max_pool2d(small, NULL));
  assert_error(TORC_ERR_INVALID, "kernel size is required");
  /* batch_norm: eval without running stats; one value per channel */
  assert_null(torc_batch_norm(small, NULL, NULL, NULL, NULL, 0, 0.1, 1e-5));
  assert_error(TORC_ERR_INVALID, "both are required");
  assert_null(torc_batch_norm(torc_zeros(TORC_SHAPE(1, 3), TORC_F32, cpu),
                              NULL, NULL, NULL, NULL, 1, 0.1, 1e-5));
  assert_error(TORC_ERR_SHAPE, "more than 1 value per channel");
  assert_null(torc_batch_norm(small, torc_zeros(TORC_SHAPE(4), TORC_F32, cpu),
                              torc_ones(TORC_SHAPE(4), TORC_F32, cpu), NULL,
                              NULL, 1, 0.1, 1e-5));
  assert_error(TORC_ERR_SHAPE, "running_mean is a f32 tensor of shape [4]");
  /* f32 parameters go with a bf16 x (mixed precision), not the reverse,
   * and weight and bias share a dtype */
  torc_tensor *w32 = torc_ones(TORC_SHAPE(3), TORC_F32, cpu);
  torc_tensor *w16 = torc_ones(TORC_SHAPE(3), TORC_BF16, cpu);
  torc_tensor *xh = torc_to_dtype(vt(TORC_SHAPE(2, 3, 2, 2), 0, cpu),
                                  TORC_BF16);
  assert_torc(xh);
  torc_tensor *ym = torc_batch_norm(xh, NULL, NULL, w32, w32, 1, 0.1, 1e-5);
  assert_torc(ym);
  assert_int_equal(torc_dtype_of(ym), TORC_BF16);
  assert_null(torc_batch_norm(small, NULL, NULL, w16, NULL, 1, 0.1, 1e-5));
  assert_error(TORC_ERR_DTYPE, "the weight is bf16 but the input is f32; "
                               "they must have one floating dtype (or f32 "
                               "parameters of a bf16 or f16 input)");
  assert_null(torc_batch_norm(xh, NULL, NULL, w32, w16, 1, 0.1, 1e-5));
  assert_error(TORC_ERR_DTYPE, "the weight is f32 but the bias bf16");
  /* layer_norm: normalized_shape must end x's shape */
  assert_null(torc_layer_norm(small, TORC_SHAPE(3, 2), NULL, NULL, 1e-5));
  assert_error(TORC_ERR_SHAPE, "normalized_shape [3, 2] must equal the last "
                               "2 dim(s) of x [1, 3, 2, 2]");
  /* dropout p, embedding indices */
  assert_null(torc_dropout(small, 1.5, 1, NULL));
  assert_error(TORC_ERR_INVALID, "p is 1.5");
  const int64_t idx[] = {0, 10, 2};
  torc_tensor *ix = torc_from_host(idx, TORC_SHAPE(3), TORC_I64, cpu);
  torc_tensor *emb = torc_zeros(TORC_SHAPE(10, 4), TORC_F32, cpu);
  assert_null(torc_embedding(ix, emb));
  assert_error(TORC_ERR_RANGE, "index 10 is out of range for num_embeddings "
                               "10");
  assert_contains(torc_last_error(), "0..9");
  /* On sim too, as an asynchronous error at the next synchronisation
   * (nothing is read back to check before the kernel runs). */
  assert_non_null(torc_embedding(torc_to(ix, sim0()), torc_to(emb, sim0())));
  assert_int_equal(torc_synchronize(sim0()), TORC_ERR_RANGE);
  assert_error(TORC_ERR_RANGE, "index 10 is out of range");
  if (getenv("TORC_NN_SHOW_ERRORS")) /* to read the messages */
    fprintf(stderr, "%s\n", torc_last_error());
  const int64_t neg_idx[] = {-1};
  assert_null(torc_embedding(
      torc_from_host(neg_idx, TORC_SHAPE(1), TORC_I64, cpu), emb));
  assert_error(TORC_ERR_RANGE, "index -1 is out of range");
  assert_null(torc_embedding(torc_zeros(TORC_SHAPE(2), TORC_F32, cpu), emb));
  assert_error(TORC_ERR_DTYPE, "the indices are f32");
  /* mixed devices name both */
  assert_null(torc_conv2d(small, torc_to(w1, sim0()), NULL, NULL));
  assert_int_equal(torc_last_status(), TORC_ERR_DEVICE);
  torc_scope_end(s);
}

/* Training-style loop: memory must stay flat (no leaked nodes/tensors). */
static void test_no_leak(void **state) {
  (void)state;
  torc_tensor *w = vt(TORC_SHAPE(4, 2, 3, 3), 0, TORC_CPU);
  assert_ok(torc_set_requires_grad(w, 1));
  int64_t before = 0;
  for (int it = 0; it < 20; it++) {
    int s = torc_scope_begin();
    torc_tensor *x = vt(TORC_SHAPE(2, 2, 6, 6), it, TORC_CPU);
    torc_conv2d_params p = {{1, 1}, {1, 1}, {0, 0}, {0, 0}, 1};
    torc_pool2d_params mp = {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0};
    torc_tensor *y = torc_max_pool2d(
        torc_relu(torc_batch_norm(torc_conv2d(x, w, NULL, &p), NULL, NULL,
                                  NULL, NULL, 1, 0.1, 1e-5)),
        &mp);
    assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
    torc_scope_end(s);
    if (it == 2)
      before = torc_tensor_live_count();
  }
  assert_int_equal(torc_tensor_live_count(), before);
  torc_release(w);
}

/* ---- prelu: values worked out by hand from torch.nn.PReLU's formula
 * (x where x >= 0, else weight x; the slope's gradient is x g where
 * x <= 0, x's is weight g there, as PyTorch's backward at x = 0) ---- */

static torc_tensor *prelu_fn(torc_tensor *const *in, int n, void *user) {
  (void)n, (void)user;
  return torc_prelu(in[0], in[1]);
}

static void test_prelu(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const double xv[12] = {-2, 1, -1, 0, 3, -0.5, 0.5, -4, 2, -3, -1, 1};
  const double wv[3] = {0.25, -0.5, 2};
  const double yv[12] = {-0.5, 1, 0.5, 0, 3, -1, 0.5, -1, 2, 1.5, -2, 1};
  const double dx[12] = {0.25, 1, -0.5, -0.5, 1, 2, 1, 0.25, 1, -0.5, 2, 1};
  const double dw[3] = {-6, -4, -1.5};
  torc_tensor *x = torc_from_host(xv, TORC_SHAPE(2, 3, 2), TORC_F64, TORC_CPU);
  torc_tensor *w = torc_from_host(wv, TORC_SHAPE(3), TORC_F64, TORC_CPU);
  assert_ok(torc_set_requires_grad(x, 1));
  assert_ok(torc_set_requires_grad(w, 1));
  torc_tensor *y = torc_prelu(x, w);
  test_assert_values(y, yv, 12, 0);
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  test_assert_values(torc_grad_of(x), dx, 12, 0);
  test_assert_values(torc_grad_of(w), dw, 3, 0);
  /* one slope for every channel, and x without a channel dim */
  const double x1[2] = {-2, 3}, y1[2] = {-0.5, 3};
  torc_tensor *one = torc_full(TORC_SHAPE(1), 0.25, TORC_F64, TORC_CPU);
  test_assert_values(
      torc_prelu(torc_from_host(x1, TORC_SHAPE(2), TORC_F64, TORC_CPU), one),
      y1, 2, 0);
  test_assert_values(torc_prelu(x, one),
                     (const double[12]){-0.5, 1, -0.25, 0, 3, -0.125, 0.5, -1,
                                        2, -0.75, -0.25, 1},
                     12, 0);
  /* the gradient to both inputs is the finite difference's, away from 0 */
  const double gx[12] = {-2, 1, -1, 0.3, 3, -0.5, 0.5, -4, 2, -3, -1, 1};
  torc_tensor *in[2] = {
      torc_from_host(gx, TORC_SHAPE(2, 3, 2), TORC_F64, TORC_CPU), w};
  assert_ok(torc_set_requires_grad(in[0], 1));
  if (torc_gradcheck(prelu_fn, NULL, in, 2, 1e-6, 1e-7, 1e-5)) {
    print_error("%s\n", torc_last_error());
    fail();
  }
  /* a weight of another size, an integer x */
  assert_null(torc_prelu(x, torc_zeros(TORC_SHAPE(2), TORC_F64, TORC_CPU)));
  assert_int_equal(torc_last_status(), TORC_ERR_SHAPE);
  assert_non_null(strstr(torc_last_error(), "[2] for x [2, 3, 2]"));
  torc_clear_error();
  assert_null(torc_prelu(torc_to_dtype(x, TORC_I64), w));
  assert_int_equal(torc_last_status(), TORC_ERR_DTYPE);
  torc_clear_error();
  /* nn.PReLU: parameter "weight", every slope init */
  torc_module *m = torc_module_build("prelu", "num_parameters=3 init=0.5");
  assert_non_null(m);
  const double half[3] = {0.5, 0.5, 0.5};
  test_assert_values(torc_module_parameter(m, "weight"), half, 3, 0);
  char *r = torc_module_repr(m);
  assert_string_equal(r, "prelu(num_parameters=3)");
  free(r);
  test_assert_values(torc_module_forward(m, x),
                     (const double[12]){-1, 1, -0.5, 0, 3, -0.25, 0.5, -2, 2,
                                        -1.5, -0.5, 1},
                     12, 0);
  torc_module_free(m);
  assert_null(torc_module_build("prelu", "num_parameters=0"));
  torc_clear_error();
  torc_scope_end(s);
}

static int setup(void **state) { return test_setup_ref_sim(state); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_forward),
      cmocka_unit_test(test_pool_forward),
      cmocka_unit_test(test_batch_norm_running_stats),
      cmocka_unit_test(test_layer_group_norm_forward),
      cmocka_unit_test(test_dropout_and_embedding),
      cmocka_unit_test(test_gradcheck_all),
      cmocka_unit_test(test_sim_equals_cpu),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_prelu),
      cmocka_unit_test(test_no_leak),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
