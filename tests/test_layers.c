/* tests/test_layers.c — the built-in layers (torc/module.h): forward
 * values against PyTorch, PyTorch's extra_repr, state names, lazy shapes,
 * batch norm's running statistics, dropout's modes, gradients reaching
 * every parameter and the sim device. Parameter initialisation is in
 * test_layers_init.c, the user errors in test_layers_errors.c.
 *
 * Expected values come from /usr/bin/python3 with torch:
 *   import torch, torch.nn as nn
 *   torch.set_default_dtype(torch.float64)
 *   def v(n, off=0):
 *       return torch.tensor([(((i+off)*37) % 23 - 11)/8 for i in range(n)])
 *   out = {}
 *   with torch.no_grad():
 *       lin = nn.Linear(4, 3)
 *       lin.weight.copy_(v(12, 1).reshape(3, 4)); lin.bias.copy_(v(3, 2))
 *       out['lin_a'] = lin(v(8).reshape(2, 4))
 *       out['lin_b'] = lin(v(24, 5).reshape(2, 3, 4))
 *       conv = nn.Conv2d(4, 4, (3, 2), stride=(2, 1), padding=(1, 0),
 *                        dilation=(1, 2), groups=2)
 *       conv.weight.copy_(v(48, 3).reshape(4, 2, 3, 2))
 *       conv.bias.copy_(v(4, 7))
 *       out['conv_a'] = conv(v(64).reshape(1, 4, 4, 4))
 *       ct = nn.ConvTranspose2d(4, 2, (3, 2), stride=(2, 1), padding=(1, 0),
 *                               output_padding=(1, 0), groups=2,
 *                               dilation=(1, 2))
 *       ct.weight.copy_(v(24, 2).reshape(4, 1, 3, 2)); ct.bias.copy_(v(2, 5))
 *       out['convt_a'] = ct(v(24).reshape(1, 4, 2, 3))
 *       bn = nn.BatchNorm2d(2)
 *       bn.weight.copy_(torch.tensor([1.5, -0.5]))
 *       bn.bias.copy_(torch.tensor([0.25, 1.0]))
 *       bn.running_mean.copy_(torch.tensor([0.5, -0.25]))
 *       bn.running_var.copy_(torch.tensor([2.0, 0.5]))
 *       bn.train(); bn(v(24).reshape(3, 2, 2, 2))
 *       out['bn_y2'] = bn(v(24, 9).reshape(3, 2, 2, 2) * 2 + 1)
 *       out['bn_rm'] = bn.running_mean.clone()
 *       out['bn_rv'] = bn.running_var.clone()
 *       bn.eval(); out['bn_eval'] = bn(v(24, 4).reshape(3, 2, 2, 2))
 *       bn1 = nn.BatchNorm1d(3); out['bn1_y'] = bn1(v(30, 2).reshape(5, 3, 2))
 *       out['bn1_rm'] = bn1.running_mean.clone()
 *       out['bn1_rv'] = bn1.running_var.clone()
 *       ln = nn.LayerNorm((3, 4))
 *       ln.weight.copy_(v(12, 1).reshape(3, 4))
 *       ln.bias.copy_(v(12, 2).reshape(3, 4))
 *       out['ln'] = ln(v(24).reshape(2, 3, 4))
 *       out['ln_lazy'] = nn.LayerNorm(4)(v(24, 3).reshape(2, 3, 4))
 *       gn = nn.GroupNorm(2, 4)
 *       gn.weight.copy_(v(4, 1)); gn.bias.copy_(v(4, 2))
 *       out['gn'] = gn(v(24, 5).reshape(2, 4, 3))
 *       emb = nn.Embedding(5, 3); emb.weight.copy_(v(15, 1).reshape(5, 3))
 *       out['emb'] = emb(torch.tensor([[0, 4], [2, 2]]))
 *       x = v(72).reshape(1, 2, 6, 6)
 *       out['maxp'] = nn.MaxPool2d(3, 2, 1, ceil_mode=True)(x)
 *       out['avgp'] = nn.AvgPool2d(3, 2, 1, ceil_mode=True,
 *                                  count_include_pad=False)(x)
 *       out['adapt'] = nn.AdaptiveAvgPool2d((3, 4))(v(70).reshape(1, 2, 5, 7))
 *       a = v(12).reshape(3, 4) * 2
 *       acts = [('relu', nn.ReLU()), ('leaky', nn.LeakyReLU(0.2)),
 *               ('elu', nn.ELU(0.5)), ('gelu', nn.GELU()),
 *               ('gelu_tanh', nn.GELU(approximate='tanh')),
 *               ('silu', nn.SiLU()), ('sigm', nn.Sigmoid()),
 *               ('tanh', nn.Tanh()),
 *               ('softplus', nn.Softplus(2, 1)),
 *               ('softmax', nn.Softmax(dim=1)),
 *               ('log_softmax', nn.LogSoftmax(dim=0))]
 *       for n, m in acts:
 *           out['act_' + n] = m(a)
 *   for k, t in out.items():
 *       t = t.flatten().tolist()
 *       print('static const double %s[%d] = {%s};'
 *             % (k, len(t), ', '.join('%.17g' % x for x in t)))
 */
#include <math.h>

#include "testutil.h"
#include "layers_testutil.h"

static const double lin_a[6] = {-2.421875, 4.5, -1.515625, 0.71875, -0.484375, 1.90625};
static const double lin_b[18] = {-2.359375, 4.46875, -1.640625, 0.78125, -0.515625, 1.78125, -1.46875, 0.96875, -1.265625, -1.5625, 1.015625, -1.078125, -1.65625, 1.0625, -0.890625, -1.75, 1.109375, -0.703125};
static const double conv_a[16] = {0.015625, 0.046875, -3.953125, -1.484375, 0.03125, 1.171875, -1.109375, 6.796875, 0.171875, -2.25, 1.078125, 2.203125, -2.765625, -1.5625, -3.921875, -0.59375};
static const double convt_a[40] = {-1.640625, -0.59375, -0.390625, -2.109375, 0.390625, -2.9375, -1.921875, 1.9375, -2.390625, -0.625, -1.375, 0.03125, -3.046875, -1.796875, 0.703125, -0.75, -0.75, -2.8125, -2.578125, 0.3125, -0.21875, 1.375, -0.890625, -0.3125, 1.65625, -0.5625, 2.625, 2.109375, -0.34375, 0.359375, -0.46875, 1.125, -0.265625, 0.5625, 2.53125, -0.546875, 1.4375, -1.4375, 0.875, 1.4375};
static const double bn_y2[24] = {0.52395393930898648, -1.5894050210746231, 1.698042250633214, -0.41531670975039564, 0.30859243888684373, 1.0130454256813803, 1.7174984124759167, 0.62168265523997113, -0.18049904748555012, 3.106948224222287, 0.99358926383867741, -1.1197696965449322, 0.54341010115168931, 1.2478630879462258, 1.9523160747407622, 0.85650031750481659, -0.88495203428008673, 2.4024952374277504, 0.28913627704414091, -1.8242226833394688, 0.77822776341653477, 1.4826807502110713, 0.38686499297512561, 1.0913179797696622};
static const double bn_rm[2] = {0.48989583333333336, -0.097708333333333314};
static const double bn_rv[2] = {1.9708652935606064, 0.74581912878787882};
static const double bn_eval[24] = {-0.40699677323652961, -1.609023734265586, 0.26079598289072392, -0.94123097813833245, 0.29209789133785591, 0.94343055222992922, 1.5947632131220026, 0.58157907395655517, -0.80767242691288177, 1.0621472902434281, -0.13987967078562821, -1.3419066318146846, 0.50920877830188038, 1.1605414391939537, 0.14735730002850625, 0.79868996092057953, -1.2083480805892339, 0.66147163656707608, -0.54055532446198029, -1.7425822854910367, 0.72631966526590475, 1.3776523261579781, 0.3644681869925307, 1.0158008478846041};
static const double bn1_y[30] = {-1.1269750408022354, 1.0952292650049893, 0.33333064587108374, -1.0952292650049895, 0.3333306458710838, -1.0952292650049895, 1.2539581439912197, -0.17460176688485338, -0.93650038601875918, 1.2857039197884659, -0.93650038601875907, 1.2857039197884661, -0.015872887898623039, -1.4444327987746961, 1.4444327987746963, 0.015872887898623039, 1.4444327987746963, 0.015872887898623067, -1.2857039197884657, 0.93650038601875896, 0.1746017668848534, -1.25395814399122, 0.17460176688485343, -1.2539581439912197, 1.0952292650049893, -0.33333064587108374, -1.0952292650049895, 1.1269750408022357, -1.0952292650049895, 1.1269750408022357};
static const double bn1_rm[3] = {0.013750000000000002, -0.038750000000000007, 0.02375};
static const double bn1_rv[3] = {0.96890625000000008, 0.96890624999999997, 0.96890624999999997};
static const double ln[24] = {-1.3018480344147854, 0.54553691283488259, -0.85461420796576681, -1.4184914166700606, 0.4845420718651321, -1.2865993241723479, 0.65353319188652781, -0.65387036010491395, -1.125, 0.44414224082204518, -1.2342515864062271, 0.79862849846185613, -0.97598412625481978, -0.066645075922749653, -0.0044751326640960765, -1.1023570375135177, -0.55459258918915932, -0.85399724793821741, 0.14573545289578074, 0.2982990466563622, -1.125, -0.48684190117371356, -0.69585290942084388, 2.0575166111505561};
static const double ln_lazy[24] = {1.1528942408116323, -0.1859506840018762, -1.5247956088153847, 0.5578520520056286, -0.55785205200562848, 1.5247956088153847, 0.1859506840018762, -1.1528942408116323, 0.38850965353390526, -1.3597837873686687, 1.3597837873686687, -0.38850965353390537, -1.2780709062128017, 0.60540200820606394, -0.60540200820606394, 1.2780709062128017, 0.38850965353390532, -1.3597837873686687, 1.3597837873686687, -0.38850965353390532, -1.2780709062128017, 0.60540200820606394, -0.60540200820606394, 1.2780709062128017};
static const double gn[24] = {-1.1960499329586938, -0.43139290502950439, -0.92295813726969755, -0.18339778131898346, 0.79973268316140278, 1.7828631476417891, 0.41892365862437664, -1.0496702196614405, 1.2348091465609417, -1.2364019085343907, -1.0528276737486635, -1.3383875945264612, -1.0151627835793837, -0.15848302124599045, -0.70920572560317174, 2.0198568599207061, 0.30649733525391987, 1.4079427439682826, -1.31446648788985, 0.72461891992132155, -0.58622169938586022, -1.447232963553164, -1.2833778861397662, -1.1195228087263684};
static const double emb[12] = {0.375, -0.75, 1, 1.25, 0.125, -1, -0.625, 1.125, 0, -0.625, 1.125, 0};
static const double maxp[32] = {0.5, 1.125, 1, 0.625, 1.375, 1.25, 0.875, 0.625, 1.375, 1.125, 0.875, 0.5, 1.125, 1.125, 0.625, -0.5, 1.25, 0.875, 1.375, 1.375, 1.125, 1, 1.25, 1.25, 1.125, 0.875, 1.375, 1.25, 0.875, 0.875, 0.375, -0.75};
static const double avgp[32] = {-0.28125, 0.1875, -0.14583333333333334, -0.3125, 0.375, 0.125, -0.20833333333333334, -0.375, 0.29166666666666669, 0.041666666666666664, -0.29166666666666669, -0.45833333333333331, 0.25, 0, -0.33333333333333331, -0.5, 0.1875, -0.0625, 0.083333333333333329, 0.875, 0.125, -0.125, -0.1388888888888889, 0.33333333333333331, 0.041666666666666664, -0.20833333333333334, 0.097222222222222224, 0.25, 0, -0.25, -0.58333333333333337, -0.75};
static const double adapt[24] = {-0.125, 0.10416666666666667, -0.22916666666666666, 0, 0.041666666666666664, -0.20833333333333334, 0.097222222222222224, 0.16666666666666666, -0.03125, -0.041666666666666664, 0.10416666666666667, 0.09375, 0.03125, 0.020833333333333332, -0.3125, 0.15625, -0.041666666666666664, 0.027777777777777776, 0.013888888888888888, 0.083333333333333329, 0.125, 0.35416666666666669, 0.020833333333333332, -0.46875};
static const double act_relu[12] = {0, 0.75, 0, 2, 0, 0, 1, 0, 2.25, 0, 0, 1.25};
static const double act_leaky[12] = {-0.55000000000000004, 0.75, -0.30000000000000004, 2, -0.050000000000000003, -0.5, 1, -0.25, 2.25, 0, -0.45000000000000001, 1.25};
static const double act_elu[12] = {-0.46803606939664621, 0.75, -0.3884349199257851, 2, -0.11059960846429756, -0.45895750068805058, 1, -0.35674760156990493, 2.25, 0, -0.44730038771906783, 1.25};
static const double act_gelu[12] = {-0.0081943488964000277, 0.58002948571734891, -0.10021080190328704, 1.9544997361036416, -0.10032341857926907, -0.015524163314440398, 0.84134474606854304, -0.13206221708356905, 2.2224949365261493, 0, -0.027505063473850511, 1.117937782916431};
static const double act_gelu_tanh[12] = {-0.0077231440736179879, 0.57996055516562028, -0.10042842301976707, 1.954597694087775, -0.100324649298315, -0.015084266089998577, 0.84119199060827676, -0.13228579703028537, 2.2227986701027111, 0, -0.027201329897288629, 1.1177142029697147};
static const double act_silu[12] = {-0.16523828797852097, 0.50938402438154473, -0.27363828570953452, 1.7615941559557646, -0.10945587477855048, -0.18964545005310887, 0.7310585786300049, -0.27837517353163604, 2.0354637039770038, 0, -0.21453629602299634, 0.9716248264683639};
static const double act_sigm[12] = {0.060086650174007626, 0.67917869917539297, 0.18242552380635635, 0.88079707797788231, 0.43782349911420193, 0.075858180021243546, 0.7310585786300049, 0.22270013882530884, 0.90465053510089055, 0.5, 0.09534946489910949, 0.77729986117469108};
static const double act_tanh[12] = {-0.9918597245682077, 0.6351489523872873, -0.9051482536448664, 0.9640275800758169, -0.24491866240370913, -0.98661429815143031, 0.76159415595576485, -0.84828363995751288, 0.97802611473881362, 0, -0.97802611473881362, 0.84828363995751288};
static const double act_softplus[12] = {0.0020392216352853603, 0.75, 0.024293675786871031, 2, 0.23703849209005334, 0.0033576742445590342, 1, 0.039444867146274813, 2.25, 0.34657359027997264, 0.0055238724242969084, 1.25};
static const double act_softmax[12] = {0.0065278378576065395, 0.21617230096770232, 0.02278439289374978, 0.7545154682809414, 0.20146579975535828, 0.021234339069950602, 0.70318473534553239, 0.074115125829158912, 0.67367846379813379, 0.07100518768835129, 0.0074838917222218634, 0.2478324567912932};
static const double act_log_softmax[12] = {-5.0850972463643105, -0.41286483618055037, -2.6140955398199965, -0.41286483618055037, -2.58509724636431, -3.6628648361805505, -0.11409553981999643, -3.6628648361805505, -0.085097246364310153, -1.1628648361805505, -3.3640955398199965, -1.1628648361805505};

/* v(n, off) of the script above, as an f64 tensor of `shape` (owned by the
 * caller's scope). */
static torc_tensor *vt(const int64_t *shape, int nd, int off) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    d[i] = (double)(((i + off) * 37) % 23 - 11) / 8;
  torc_tensor *t = torc_from_host(d, shape, nd, TORC_F64, TORC_CPU);
  free(d);
  assert_torc(t);
  return t;
}

static torc_tensor *host(const double *v, const int64_t *shape, int nd) {
  torc_tensor *t = torc_from_host(v, shape, nd, TORC_F64, TORC_CPU);
  assert_torc(t);
  return t;
}

/* m's repr must be exactly `want`; frees m. */
static void expect_repr(torc_module *m, const char *want) {
  assert_torc(m);
  char *r = torc_module_repr(m);
  assert_non_null(r);
  assert_string_equal(r, want);
  free(r);
  torc_module_free(m);
}

/* ---- forward values against PyTorch ---- */

static void test_linear_conv_forward(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *m = torc_linear_new(4, 3, 1);
  assert_torc(m);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  set_t(m, "weight", vt(TORC_SHAPE(3, 4), 1));
  set_t(m, "bias", vt(TORC_SHAPE(3), 2));
  torc_tensor *y = torc_module_forward(m, vt(TORC_SHAPE(2, 4), 0));
  expect_shape(y, TORC_SHAPE(2, 3));
  test_assert_values(y, lin_a, 6, 1e-12);
  y = torc_module_forward(m, vt(TORC_SHAPE(2, 3, 4), 5));
  expect_shape(y, TORC_SHAPE(2, 3, 3));
  test_assert_values(y, lin_b, 18, 1e-12);
  torc_module_free(m);

  torc_conv2d_params p = {{2, 1}, {1, 0}, {1, 2}, {0, 0}, 2};
  m = torc_conv2d_new(4, 4, 3, 2, &p, 1);
  assert_torc(m);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  expect_shape(torc_module_parameter(m, "weight"), TORC_SHAPE(4, 2, 3, 2));
  set_t(m, "weight", vt(TORC_SHAPE(4, 2, 3, 2), 3));
  set_t(m, "bias", vt(TORC_SHAPE(4), 7));
  torc_tensor *x = vt(TORC_SHAPE(1, 4, 4, 4), 0);
  y = torc_module_forward(m, x);
  expect_shape(y, TORC_SHAPE(1, 4, 2, 2));
  test_assert_values(y, conv_a, 16, 1e-12);
  y = torc_module_forward(m, torc_select(x, 0, 0)); /* unbatched */
  expect_shape(y, TORC_SHAPE(4, 2, 2));
  test_assert_values(y, conv_a, 16, 1e-12);
  torc_module_free(m);

  torc_conv2d_params q = {{2, 1}, {1, 0}, {1, 2}, {1, 0}, 2};
  m = torc_conv_transpose2d_new(4, 2, 3, 2, &q, 1);
  assert_torc(m);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  expect_shape(torc_module_parameter(m, "weight"), TORC_SHAPE(4, 1, 3, 2));
  set_t(m, "weight", vt(TORC_SHAPE(4, 1, 3, 2), 2));
  set_t(m, "bias", vt(TORC_SHAPE(2), 5));
  y = torc_module_forward(m, vt(TORC_SHAPE(1, 4, 2, 3), 0));
  expect_shape(y, TORC_SHAPE(1, 2, 4, 5));
  test_assert_values(y, convt_a, 40, 1e-12);
  torc_module_free(m);

  /* f32 (the default dtype) agrees to f32 precision */
  m = torc_linear_new(4, 3, 1);
  set_t(m, "weight", vt(TORC_SHAPE(3, 4), 1));
  set_t(m, "bias", vt(TORC_SHAPE(3), 2));
  y = torc_module_forward(m, torc_to_dtype(vt(TORC_SHAPE(2, 4), 0),
                                           TORC_F32));
  assert_int_equal(torc_dtype_of(y), TORC_F32);
  test_assert_values(y, lin_a, 6, 1e-6);
  torc_module_free(m);
  torc_scope_end(s);
}

static void test_norm_forward(void **state) {
  (void)state;
  int s = torc_scope_begin();
  /* batchnorm2d: two training steps, then eval */
  torc_module *m = torc_batchnorm2d_new(2, 1e-5, 0.1);
  assert_torc(m);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  set_t(m, "weight", host((const double[]){1.5, -0.5}, TORC_SHAPE(2)));
  set_t(m, "bias", host((const double[]){0.25, 1.0}, TORC_SHAPE(2)));
  set_t(m, "running_mean", host((const double[]){0.5, -0.25}, TORC_SHAPE(2)));
  set_t(m, "running_var", host((const double[]){2.0, 0.5}, TORC_SHAPE(2)));
  torc_tensor *nbt = torc_module_buffer(m, "num_batches_tracked");
  assert_int_equal(torc_dtype_of(nbt), TORC_I64); /* kept by to_dtype */
  assert_int_equal(torc_ndim(nbt), 0);
  assert_torc(torc_module_forward(m, vt(TORC_SHAPE(3, 2, 2, 2), 0)));
  torc_tensor *x2 = torc_add_scalar(
      torc_mul_scalar(vt(TORC_SHAPE(3, 2, 2, 2), 9), 2), 1);
  torc_tensor *y = torc_module_forward(m, x2);
  test_assert_values(y, bn_y2, 24, 1e-12);
  test_assert_values(torc_module_buffer(m, "running_mean"), bn_rm, 2, 1e-14);
  test_assert_values(torc_module_buffer(m, "running_var"), bn_rv, 2, 1e-14);
  int64_t count = 0;
  assert_ok(torc_item_i64(nbt, &count));
  assert_int_equal(count, 2);
  torc_module_train(m, 0);
  y = torc_module_forward(m, vt(TORC_SHAPE(3, 2, 2, 2), 4));
  test_assert_values(y, bn_eval, 24, 1e-12);
  test_assert_values(torc_module_buffer(m, "running_mean"), bn_rm, 2, 0);
  assert_ok(torc_item_i64(nbt, &count));
  assert_int_equal(count, 2); /* eval leaves the counter alone */
  torc_module_free(m);

  /* batchnorm1d on [N, C, L] with PyTorch's initial state */
  m = torc_batchnorm1d_new(3, 1e-5, 0.1);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  y = torc_module_forward(m, vt(TORC_SHAPE(5, 3, 2), 2));
  test_assert_values(y, bn1_y, 30, 1e-12);
  test_assert_values(torc_module_buffer(m, "running_mean"), bn1_rm, 3,
                     1e-14);
  test_assert_values(torc_module_buffer(m, "running_var"), bn1_rv, 3, 1e-14);
  torc_module_free(m);

  m = torc_layernorm_new(TORC_SHAPE(3, 4), 1e-5, 1);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  set_t(m, "weight", vt(TORC_SHAPE(3, 4), 1));
  set_t(m, "bias", vt(TORC_SHAPE(3, 4), 2));
  test_assert_values(torc_module_forward(m, vt(TORC_SHAPE(2, 3, 4), 0)), ln,
                     24, 1e-12);
  torc_module_free(m);
  m = torc_layernorm_new(NULL, 0, 1e-5, 1); /* lazy: the last dim */
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  test_assert_values(torc_module_forward(m, vt(TORC_SHAPE(2, 3, 4), 3)),
                     ln_lazy, 24, 1e-12);
  expect_shape(torc_module_parameter(m, "weight"), TORC_SHAPE(4));
  torc_module_free(m);

  m = torc_groupnorm_new(2, 4, 1e-5, 1);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  set_t(m, "weight", vt(TORC_SHAPE(4), 1));
  set_t(m, "bias", vt(TORC_SHAPE(4), 2));
  test_assert_values(torc_module_forward(m, vt(TORC_SHAPE(2, 4, 3), 5)), gn,
                     24, 1e-12);
  torc_module_free(m);
  torc_scope_end(s);
}

static void test_other_forward(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *m = torc_embedding_new(5, 3);
  assert_torc(m);
  assert_ok(torc_module_to_dtype(m, TORC_F64));
  set_t(m, "weight", vt(TORC_SHAPE(5, 3), 1));
  const int64_t idx[] = {0, 4, 2, 2};
  torc_tensor *y = torc_module_forward(
      m, torc_from_host(idx, TORC_SHAPE(2, 2), TORC_I64, TORC_CPU));
  expect_shape(y, TORC_SHAPE(2, 2, 3));
  test_assert_values(y, emb, 12, 0);
  torc_module_free(m);

  torc_tensor *x = vt(TORC_SHAPE(1, 2, 6, 6), 0);
  m = torc_module_build("maxpool2d", "kernel=3 stride=2 padding=1 "
                                     "ceil_mode=yes");
  assert_torc(m);
  y = torc_module_forward(m, x);
  expect_shape(y, TORC_SHAPE(1, 2, 4, 4));
  test_assert_values(y, maxp, 32, 0);
  y = torc_module_forward(m, torc_select(x, 0, 0)); /* unbatched */
  expect_shape(y, TORC_SHAPE(2, 4, 4));
  torc_module_free(m);
  m = torc_module_build("avgpool2d", "kernel=3, stride=2, padding=1, "
                                     "ceil_mode=yes, count_include_pad=no");
  assert_torc(m);
  test_assert_values(torc_module_forward(m, x), avgp, 32, 1e-12);
  torc_module_free(m);
  m = torc_adaptive_avgpool2d_new(3, 4);
  y = torc_module_forward(m, vt(TORC_SHAPE(1, 2, 5, 7), 0));
  expect_shape(y, TORC_SHAPE(1, 2, 3, 4));
  test_assert_values(y, adapt, 24, 1e-12);
  torc_module_free(m);

  m = torc_flatten_new(1, -1);
  expect_shape(torc_module_forward(m, x), TORC_SHAPE(1, 72));
  torc_module_free(m);
  m = torc_module_build("flatten", "start_dim=0, end_dim=2");
  expect_shape(torc_module_forward(m, x), TORC_SHAPE(12, 6));
  torc_module_free(m);
  m = torc_identity_new();
  y = torc_module_forward(m, x);
  assert_ptr_equal(y, x);
  torc_module_free(m);

  /* every activation */
  static const struct {
    const char *type, *spec;
    const double *want;
  } acts[] = {{"relu", NULL, act_relu},
              {"leaky_relu", "negative_slope=0.2", act_leaky},
              {"elu", "alpha=0.5", act_elu},
              {"gelu", NULL, act_gelu},
              {"gelu", "approximate=tanh", act_gelu_tanh},
              {"silu", NULL, act_silu},
              {"sigmoid", NULL, act_sigm},
              {"tanh", NULL, act_tanh},
              {"softplus", "beta=2 threshold=1", act_softplus},
              {"softmax", "dim=1", act_softmax},
              {"log_softmax", "dim=0", act_log_softmax}};
  torc_tensor *a = torc_mul_scalar(vt(TORC_SHAPE(3, 4), 0), 2);
  for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
    m = torc_module_build(acts[i].type, acts[i].spec);
    assert_torc(m);
    y = torc_module_forward(m, a);
    expect_shape(y, TORC_SHAPE(3, 4));
    test_assert_values(y, acts[i].want, 12, 1e-12);
    torc_module_free(m);
  }
  double want12[12];
  /* the activations whose values test_optable checks: each type runs its
   * op, and its repr is PyTorch's (empty) */
  static const struct {
    const char *type;
    torc_tensor *(*f)(const torc_tensor *);
  } plain[] = {{"hardswish", torc_hardswish},
               {"hardsigmoid", torc_hardsigmoid},
               {"softsign", torc_softsign},
               {"selu", torc_selu},
               {"mish", torc_mish},
               {"relu6", torc_relu6}};
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
    m = torc_module_build(plain[i].type, NULL);
    assert_torc(m);
    y = torc_module_forward(m, a);
    expect_shape(y, TORC_SHAPE(3, 4));
    double want[12];
    assert_ok(torc_to_host(plain[i].f(a), want, sizeof want));
    test_assert_values(y, want, 12, 0);
    char repr[64];
    snprintf(repr, sizeof repr, "%s()", plain[i].type);
    expect_repr(m, repr);
  }
  m = torc_module_build("celu", "alpha=2");
  assert_torc(m);
  assert_ok(torc_to_host(torc_celu(a, 2), want12, sizeof want12));
  test_assert_values(torc_module_forward(m, a), want12, 12, 0);
  expect_repr(m, "celu(alpha=2.0)");
  m = torc_module_build("hardtanh", "min_val=-0.5 max_val=2");
  assert_torc(m);
  assert_ok(torc_to_host(torc_hardtanh(a, -0.5, 2), want12, sizeof want12));
  test_assert_values(torc_module_forward(m, a), want12, 12, 0);
  expect_repr(m, "hardtanh(min_val=-0.5, max_val=2.0)");
  assert_null(torc_module_build("hardtanh", "min_val=1 max_val=1"));
  torc_clear_error();
  assert_null(torc_module_build("celu", "alpha=0"));
  torc_clear_error();
  torc_scope_end(s);
}

/* ---- repr (PyTorch's extra_repr) ---- */

static void test_repr(void **state) {
  (void)state;
  torc_conv2d_params p = {{0, 0}, {1, 1}, {0, 0}, {0, 0}, 0};
  expect_repr(torc_linear_new(784, 128, 1),
              "linear(in_features=784, out_features=128, bias=True)");
  expect_repr(torc_linear_new(0, 10, 0),
              "linear(in_features=0, out_features=10, bias=False)");
  expect_repr(torc_conv2d_new(1, 32, 3, 3, &p, 1),
              "conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), "
              "padding=(1, 1))");
  expect_repr(torc_module_build("conv2d", "in_channels=4, out_channels=8, "
                                          "kernel=3,5, stride=2, dilation=2, "
                                          "groups=2, bias=no"),
              "conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), "
              "dilation=(2, 2), groups=2, bias=False)");
  expect_repr(torc_module_build("conv_transpose2d",
                                "in_channels=2 out_channels=4 kernel=3 "
                                "stride=2 output_padding=1"),
              "conv_transpose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), "
              "output_padding=(1, 1))");
  expect_repr(torc_batchnorm2d_new(32, 1e-5, 0.1),
              "batchnorm2d(32, eps=1e-05, momentum=0.1, affine=True, "
              "track_running_stats=True)");
  expect_repr(torc_module_build("batchnorm1d", "num_features=8, eps=0.001, "
                                               "momentum=0.01"),
              "batchnorm1d(8, eps=0.001, momentum=0.01, affine=True, "
              "track_running_stats=True)");
  expect_repr(torc_layernorm_new(TORC_SHAPE(4), 1e-5, 1),
              "layernorm((4,), eps=1e-05, elementwise_affine=True)");
  expect_repr(torc_module_build("layernorm", "normalized_shape=3,4 "
                                             "elementwise_affine=no"),
              "layernorm((3, 4), eps=1e-05, elementwise_affine=False)");
  expect_repr(torc_groupnorm_new(2, 4, 1e-5, 1),
              "groupnorm(2, 4, eps=1e-05, affine=True)");
  expect_repr(torc_dropout_new(0.5), "dropout(p=0.5, inplace=False)");
  expect_repr(torc_module_build("dropout", "p=0"),
              "dropout(p=0.0, inplace=False)");
  expect_repr(torc_embedding_new(10, 3), "embedding(10, 3)");
  expect_repr(torc_module_build("maxpool2d", "kernel=2"),
              "maxpool2d(kernel_size=2, stride=2, padding=0, dilation=1, "
              "ceil_mode=False)");
  expect_repr(torc_module_build("avgpool2d", "kernel=2,3"),
              "avgpool2d(kernel_size=(2, 3), stride=(2, 3), padding=0)");
  expect_repr(torc_module_build("adaptive_avgpool2d", NULL),
              "adaptive_avgpool2d(output_size=1)");
  expect_repr(torc_adaptive_avgpool2d_new(3, 4),
              "adaptive_avgpool2d(output_size=(3, 4))");
  expect_repr(torc_flatten_new(1, -1), "flatten(start_dim=1, end_dim=-1)");
  expect_repr(torc_identity_new(), "identity()");
  expect_repr(torc_module_build("relu", ""), "relu()");
  expect_repr(torc_module_build("leaky_relu", NULL),
              "leaky_relu(negative_slope=0.01)");
  expect_repr(torc_module_build("elu", NULL), "elu(alpha=1.0)");
  expect_repr(torc_module_build("gelu", NULL), "gelu(approximate='none')");
  expect_repr(torc_module_build("softplus", NULL),
              "softplus(beta=1.0, threshold=20.0)");
  expect_repr(torc_module_build("softmax", NULL), "softmax(dim=-1)");
  expect_repr(torc_module_build("log_softmax", "dim=1"),
              "log_softmax(dim=1)");
  expect_repr(torc_module_build("sigmoid", NULL), "sigmoid()");
}

/* ---- names, laziness, modes ---- */

static void test_state_names(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_conv2d_params p = {{0, 0}, {1, 1}, {0, 0}, {0, 0}, 0};
  torc_pool2d_params mp = {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0};
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_conv2d_new(1, 4, 3, 3, &p, 1)));
  assert_ok(torc_sequential_append(seq, torc_batchnorm2d_new(4, 1e-5, 0.1)));
  assert_ok(torc_sequential_append(seq, torc_module_build("relu", NULL)));
  assert_ok(torc_sequential_append(seq, torc_maxpool2d_new(&mp)));
  assert_ok(torc_sequential_append(seq, torc_flatten_new(1, -1)));
  assert_ok(torc_sequential_append(seq, torc_linear_new(64, 10, 1)));
  static const char *const pnames[] = {"0.weight", "0.bias", "1.weight",
                                       "1.bias", "5.weight", "5.bias"};
  static const int64_t pshape[][4] = {{4, 1, 3, 3}, {4}, {4}, {4},
                                      {10, 64}, {10}};
  static const int pnd[] = {4, 1, 1, 1, 2, 1};
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(seq, &list);
  assert_int_equal(n, 6);
  for (int i = 0; i < n; i++) {
    assert_string_equal(list[i].name, pnames[i]);
    expect_shape(list[i].tensor, pshape[i], pnd[i]);
  }
  torc_named_tensors_free(list, n);
  static const char *const bnames[] = {
      "1.running_mean", "1.running_var", "1.num_batches_tracked"};
  n = torc_module_named_buffers(seq, 1, &list);
  assert_int_equal(n, 3);
  for (int i = 0; i < n; i++)
    assert_string_equal(list[i].name, bnames[i]);
  assert_int_equal(torc_dtype_of(list[2].tensor), TORC_I64);
  assert_int_equal(torc_ndim(list[2].tensor), 0);
  torc_named_tensors_free(list, n);
  torc_tensor *y = torc_module_forward(
      seq, torc_zeros(TORC_SHAPE(2, 1, 8, 8), TORC_F32, TORC_CPU));
  expect_shape(y, TORC_SHAPE(2, 10));
  torc_module_free(seq);
  torc_scope_end(s);
}

static void test_lazy(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_conv2d_params p = {{0, 0}, {1, 1}, {0, 0}, {0, 0}, 0};
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_conv2d_new(0, 8, 3, 3, &p, 1)));
  assert_ok(torc_sequential_append(seq, torc_batchnorm2d_new(0, 1e-5, 0.1)));
  assert_ok(torc_sequential_append(seq, torc_flatten_new(1, -1)));
  assert_ok(torc_sequential_append(seq, torc_linear_new(0, 10, 1)));
  assert_int_equal(torc_module_parameter_count(seq, 0), 0);
  torc_named_tensor *list = NULL;
  int n = torc_module_named_buffers(seq, 1, &list);
  assert_int_equal(n, 0);
  torc_named_tensors_free(list, n);
  /* created where the module is, in its dtype */
  assert_ok(torc_module_to_dtype(seq, TORC_F64));
  torc_tensor *y = torc_module_forward(
      seq, torc_ones(TORC_SHAPE(2, 1, 28, 28), TORC_F64, TORC_CPU));
  expect_shape(y, TORC_SHAPE(2, 10));
  torc_module *conv = torc_module_child_at(seq, 0);
  torc_module *lin = torc_module_child_at(seq, 3);
  torc_tensor *w = torc_module_parameter(lin, "weight");
  expect_shape(w, TORC_SHAPE(10, 8 * 28 * 28));
  assert_int_equal(torc_dtype_of(w), TORC_F64);
  expect_shape(torc_module_parameter(conv, "weight"), TORC_SHAPE(8, 1, 3, 3));
  expect_shape(torc_module_buffer(torc_module_child_at(seq, 1),
                                  "running_var"),
               TORC_SHAPE(8));
  assert_int_equal(torc_module_parameter_count(seq, 0),
                   8 * 9 + 8 + 8 + 8 + 10 * 6272 + 10);
  /* default init with the inferred fan_in */
  expect_uniform(w, 1 / sqrt(6272.0) + 1e-9, 0.98);
  char *r = torc_module_repr(lin);
  assert_string_equal(r,
                      "linear(in_features=6272, out_features=10, bias=True)");
  free(r);
  /* the inferred sizes are now checked */
  assert_null(torc_module_forward(
      seq, torc_ones(TORC_SHAPE(2, 3, 28, 28), TORC_F64, TORC_CPU)));
  assert_error(TORC_ERR_SHAPE, "input has 3 channels (shape [2, 3, 28, 28]) "
                               "but in_channels is 1");
  torc_module_free(seq);

  /* lazy groupnorm */
  torc_module *g = torc_groupnorm_new(2, 0, 1e-5, 1);
  assert_torc(torc_module_forward(g, torc_ones(TORC_SHAPE(2, 6, 3), TORC_F32,
                                               TORC_CPU)));
  expect_shape(torc_module_parameter(g, "weight"), TORC_SHAPE(6));
  torc_module_free(g);
  /* lazy state, found by path, on sim: created there */
  seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_linear_new(0, 3, 1)));
  assert_ok(torc_module_to(seq, sim0()));
  y = torc_module_forward(seq, torc_ones(TORC_SHAPE(4, 5), TORC_F32, sim0()));
  expect_shape(y, TORC_SHAPE(4, 3));
  w = torc_module_parameter(torc_module_child_at(seq, 0), "weight");
  assert_int_equal(torc_device_of(w).type, sim0().type);
  torc_module_free(seq);
  torc_scope_end(s);
}

static void test_dropout_modes(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *m = torc_dropout_new(0.5);
  torc_tensor *x = torc_ones(TORC_SHAPE(4000), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(m, x);
  double *v = test_values(y);
  int zeros = 0;
  for (int i = 0; i < 4000; i++) {
    assert_true(v[i] == 0 || v[i] == 2); /* kept ones scaled by 1/(1-p) */
    zeros += v[i] == 0;
  }
  free(v);
  assert_in_range(zeros, 1800, 2200);
  torc_module_train(m, 0);
  y = torc_module_forward(m, x);
  assert_true(stats_of(y).min == 1 && stats_of(y).max == 1);
  torc_module_free(m);
  m = torc_dropout_new(1);
  assert_true(stats_of(torc_module_forward(m, x)).max == 0);
  torc_module_free(m);
  m = torc_dropout_new(0);
  assert_true(stats_of(torc_module_forward(m, x)).min == 1);
  torc_module_free(m);
  torc_scope_end(s);
}

/* ---- gradients, devices ---- */

static torc_module *small_cnn(void) {
  torc_conv2d_params p = {{0, 0}, {1, 1}, {0, 0}, {0, 0}, 0};
  torc_pool2d_params mp = {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0};
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_conv2d_new(0, 4, 3, 3, &p, 1)));
  assert_ok(torc_sequential_append(seq, torc_batchnorm2d_new(0, 1e-5, 0.1)));
  assert_ok(torc_sequential_append(seq, torc_module_build("silu", NULL)));
  assert_ok(torc_sequential_append(seq, torc_maxpool2d_new(&mp)));
  assert_ok(torc_sequential_append(seq, torc_conv_transpose2d_new(
                                            0, 2, 2, 2, NULL, 1)));
  assert_ok(torc_sequential_append(seq, torc_groupnorm_new(1, 0, 1e-5, 1)));
  assert_ok(torc_sequential_append(seq, torc_layernorm_new(NULL, 0, 1e-5,
                                                           1)));
  assert_ok(torc_sequential_append(seq, torc_module_build(
                                            "adaptive_avgpool2d",
                                            "output_size=2")));
  assert_ok(torc_sequential_append(seq, torc_flatten_new(1, -1)));
  assert_ok(torc_sequential_append(seq, torc_dropout_new(0.2)));
  assert_ok(torc_sequential_append(seq, torc_linear_new(0, 5, 1)));
  assert_ok(torc_sequential_append(seq, torc_module_build("log_softmax",
                                                          "dim=1")));
  return seq;
}

static void test_gradients(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *seq = small_cnn();
  torc_tensor *x = torc_randn(TORC_SHAPE(3, 2, 8, 8), TORC_F32, TORC_CPU, NULL);
  torc_tensor *y = torc_module_forward(seq, x);
  expect_shape(y, TORC_SHAPE(3, 5));
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  torc_named_tensor *list = NULL;
  int n = torc_module_named_parameters(seq, &list);
  assert_int_equal(n, 12);
  for (int i = 0; i < n; i++) {
    torc_tensor *g = torc_grad_of(list[i].tensor);
    if (g == NULL) {
      print_error("no gradient for %s\n", list[i].name);
      fail();
    }
    expect_shape(g, torc_shape(list[i].tensor), torc_ndim(list[i].tensor));
  }
  torc_named_tensors_free(list, n);
  /* embedding's weight gets a gradient through the lookup */
  torc_module *e = torc_embedding_new(6, 3);
  const int64_t idx[] = {1, 1, 5};
  y = torc_module_forward(e, torc_from_host(idx, TORC_SHAPE(3), TORC_I64,
                                            TORC_CPU));
  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  static const double ge[18] = {0, 0, 0, 2, 2, 2, 0, 0, 0,
                                0, 0, 0, 0, 0, 0, 1, 1, 1};
  test_assert_values(torc_grad_of(torc_module_parameter(e, "weight")), ge, 18,
                     0);
  torc_module_free(e);
  torc_module_free(seq);
  torc_scope_end(s);
}

/* A sequential runs nn.ReLU then nn.MaxPool2d as the pool first and the
 * relu on its output: the same output and input gradient, bit for bit, as
 * the two layers one after the other, with NaN, ties, zeros of both signs
 * and windows of negatives only; padding, and in training and eval. */
static void test_relu_pool_order(void **state) {
  (void)state;
  int s = torc_scope_begin();
  enum { N = 2 * 3 * 7 * 8 };
  float v[N];
  for (int i = 0; i < N; i++)
    v[i] = (float)((i * 37) % 11 - 6) / 2;
  v[3] = v[40] = NAN;
  v[9] = -0.0f;
  v[100] = -INFINITY;
  const torc_pool2d_params ps[2] = {
      {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0, 0, 0},
      {{3, 3}, {2, 2}, {1, 1}, {0, 0}, 1, 0, 0},
  };
  for (int k = 0; k < 4; k++) {
    torc_module *relu = torc_module_build("relu", NULL);
    torc_module *pool = torc_maxpool2d_new(&ps[k % 2]);
    torc_module *seq = torc_sequential_new();
    assert_ok(torc_sequential_append(seq, relu));
    assert_ok(torc_sequential_append(seq, pool));
    torc_module_train(seq, k < 2);
    torc_tensor *xs = torc_from_host(v, TORC_SHAPE(2, 3, 7, 8), TORC_F32,
                                     TORC_CPU);
    torc_tensor *xl = torc_clone(xs);
    assert_ok(torc_set_requires_grad(xs, 1));
    assert_ok(torc_set_requires_grad(xl, 1));
    torc_tensor *ys = torc_module_forward(seq, xs);
    torc_tensor *yl = torc_module_forward(pool, torc_module_forward(relu, xl));
    assert_torc(ys);
    assert_torc(yl);
    expect_shape(ys, torc_shape(yl), torc_ndim(yl));
    test_assert_close(ys, yl, 0);
    /* a gradient that differs per output, so a wrong winner shows */
    torc_tensor *w = torc_arange(0, (double)torc_numel(yl), 1, TORC_F32,
                                 TORC_CPU);
    w = torc_reshape(w, torc_shape(yl), torc_ndim(yl));
    assert_ok(torc_backward(ys, w, 0));
    assert_ok(torc_backward(yl, w, 0));
    test_assert_close(torc_grad_of(xs), torc_grad_of(xl), 0);
    torc_module_free(seq);
  }
  torc_scope_end(s);
}

static void test_sim(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_module *seq = small_cnn();
  torc_module_train(seq, 0); /* no dropout: comparable outputs */
  torc_tensor *x = torc_randn(TORC_SHAPE(3, 2, 8, 8), TORC_F32, TORC_CPU, NULL);
  torc_tensor *yc = torc_module_forward(seq, x);
  assert_torc(yc);
  assert_ok(torc_module_to(seq, sim0()));
  torc_tensor *ys = torc_module_forward(seq, torc_to(x, sim0()));
  assert_torc(ys);
  assert_int_equal(torc_device_of(ys).type, sim0().type);
  double *vc = test_values(yc);
  test_assert_values(ys, vc, 15, 1e-5);
  free(vc);
  /* training step on sim: batch statistics, counter, gradients */
  torc_module_train(seq, 1);
  ys = torc_module_forward(seq, torc_to(x, sim0()));
  assert_ok(torc_backward(torc_sum(ys, NULL, 0, 0), NULL, 0));
  torc_module *bn = torc_module_child_at(seq, 1);
  int64_t count = 0;
  assert_ok(torc_item_i64(torc_module_buffer(bn, "num_batches_tracked"),
                          &count));
  assert_int_equal(count, 1);
  assert_non_null(torc_grad_of(torc_module_parameter(bn, "weight")));
  /* init schemes run on the device */
  assert_ok(torc_module_init(seq, "orthogonal", NULL));
  torc_tensor *w = torc_module_parameter(torc_module_child_at(seq, 10),
                                         "weight");
  assert_int_equal(torc_device_of(w).type, sim0().type);
  expect_shape(w, TORC_SHAPE(5, 8));
  expect_orthogonal(w, 5, 8, 1);
  /* a cpu input names both devices */
  assert_null(torc_module_forward(seq, x));
  assert_int_equal(torc_last_status(), TORC_ERR_DEVICE);
  torc_module_free(seq);
  torc_scope_end(s);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, test_live_setup, \
                                             test_live_teardown)
  const struct CMUnitTest tests[] = {
      T(test_linear_conv_forward),
      T(test_norm_forward),
      T(test_other_forward),
      T(test_repr),
      T(test_state_names),
      T(test_lazy),
      T(test_dropout_modes),
      T(test_gradients),
      T(test_relu_pool_order),
      T(test_sim),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
