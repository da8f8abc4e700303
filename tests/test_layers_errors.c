/* tests/test_layers_errors.c — the built-in layers' user errors
 * (torc/module.h): bad forward inputs, constructor and build keys, and
 * every built-in type registered with documented keys.
 */
#include <math.h>

#include "testutil.h"
#include "layers_testutil.h"

/* ---- errors ---- */

static void test_forward_errors(void **state) {
  (void)state;
  int s = torc_scope_begin();
  torc_device cpu = TORC_CPU;
  torc_module *m = torc_linear_new(784, 128, 1);
  assert_null(torc_module_forward(
      m, torc_zeros(TORC_SHAPE(64, 3136), TORC_F32, cpu)));
  assert_error(TORC_ERR_SHAPE,
               "linear: input has 3136 features (shape [64, 3136]) but "
               "in_features is 784; set in_features to 3136, or to 0 to "
               "infer it at the first forward");
  assert_null(torc_module_forward(m, torc_zeros(NULL, 0, TORC_F32, cpu)));
  assert_error(TORC_ERR_SHAPE, "scalar");
  torc_module_free(m);

  m = torc_conv2d_new(3, 8, 3, 3, NULL, 1);
  assert_null(torc_module_forward(
      m, torc_zeros(TORC_SHAPE(2, 1, 8, 8), TORC_F32, cpu)));
  assert_error(TORC_ERR_SHAPE, "conv2d: input has 1 channels (shape [2, 1, "
                               "8, 8]) but in_channels is 3; set "
                               "in_channels to 1");
  assert_null(torc_module_forward(m, torc_zeros(TORC_SHAPE(2, 3), TORC_F32,
                                                cpu)));
  assert_error(TORC_ERR_SHAPE, "expected a 4-D input [N, C, H, W]");
  torc_module_free(m);
  torc_conv2d_params g2 = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, 2};
  m = torc_conv2d_new(0, 8, 3, 3, &g2, 1);
  assert_null(torc_module_forward(
      m, torc_zeros(TORC_SHAPE(2, 3, 8, 8), TORC_F32, cpu)));
  assert_error(TORC_ERR_SHAPE, "groups 2 does not divide");
  torc_module_free(m);

  m = torc_batchnorm2d_new(32, 1e-5, 0.1);
  assert_null(torc_module_forward(
      m, torc_zeros(TORC_SHAPE(2, 16, 4, 4), TORC_F32, cpu)));
  assert_error(TORC_ERR_SHAPE, "batchnorm2d: input has 16 channels (shape "
                               "[2, 16, 4, 4]) but num_features is 32; set "
                               "num_features to 16");
  assert_null(torc_module_forward(m, torc_zeros(TORC_SHAPE(2, 32), TORC_F32,
                                                cpu)));
  assert_error(TORC_ERR_SHAPE, "use batchnorm1d for [N, C]");
  torc_module_free(m);
  m = torc_batchnorm1d_new(0, 1e-5, 0.1);
  assert_null(torc_module_forward(
      m, torc_zeros(TORC_SHAPE(2, 3, 4, 4), TORC_F32, cpu)));
  assert_error(TORC_ERR_SHAPE, "use batchnorm2d for images");
  assert_true(torc_module_parameter(m, "weight") == NULL); /* still lazy */
  torc_module_free(m);

  m = torc_layernorm_new(TORC_SHAPE(4), 1e-5, 1);
  assert_null(torc_module_forward(m, torc_zeros(TORC_SHAPE(2, 3, 5), TORC_F32,
                                                cpu)));
  assert_error(TORC_ERR_SHAPE, "layernorm: input of shape [2, 3, 5] does not "
                               "end with normalized_shape [4]; set "
                               "normalized_shape to 5");
  torc_module_free(m);
  m = torc_groupnorm_new(2, 4, 1e-5, 1);
  assert_null(torc_module_forward(m, torc_zeros(TORC_SHAPE(2, 6), TORC_F32,
                                                cpu)));
  assert_error(TORC_ERR_SHAPE, "num_channels is 4; set num_channels to 6");
  torc_module_free(m);
  m = torc_embedding_new(4, 2);
  const int64_t idx[] = {4};
  assert_null(torc_module_forward(
      m, torc_from_host(idx, TORC_SHAPE(1), TORC_I64, cpu)));
  assert_error(TORC_ERR_RANGE, "index 4 is out of range");
  torc_module_free(m);
  m = torc_module_build("maxpool2d", "kernel=2");
  assert_null(torc_module_forward(m, torc_zeros(TORC_SHAPE(4, 4), TORC_F32,
                                                cpu)));
  assert_error(TORC_ERR_SHAPE, "maxpool2d: expected a 4-D input");
  const torc_tensor *two[2] = {torc_zeros(TORC_SHAPE(1, 1, 4, 4), TORC_F32,
                                          cpu),
                               torc_zeros(TORC_SHAPE(1, 1, 4, 4), TORC_F32,
                                          cpu)};
  assert_null(torc_module_forward_n(m, two, 2));
  assert_error(TORC_ERR_INVALID, "given 2 inputs; this layer takes one");
  torc_module_free(m);
  torc_scope_end(s);
}

static void test_constructor_errors(void **state) {
  (void)state;
  torc_conv2d_params bad = {{-1, 1}, {0, 0}, {0, 0}, {0, 0}, 0};
  assert_null(torc_linear_new(-1, 3, 1));
  assert_error(TORC_ERR_INVALID, "in_features -1");
  assert_null(torc_linear_new(3, 0, 1));
  assert_error(TORC_ERR_INVALID, "out_features must be >= 1");
  assert_null(torc_conv2d_new(3, 8, 0, 3, NULL, 1));
  assert_error(TORC_ERR_INVALID, "conv2d: kernel size 0 x 3");
  assert_null(torc_conv2d_new(3, 8, 3, 3, &bad, 1));
  assert_error(TORC_ERR_INVALID, "conv2d: stride (-1, 1) is negative");
  torc_conv2d_params g = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, 3};
  assert_null(torc_conv2d_new(4, 6, 3, 3, &g, 1));
  assert_error(TORC_ERR_INVALID, "groups 3 must divide in_channels 4");
  torc_conv2d_params op = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 0};
  assert_null(torc_conv2d_new(4, 6, 3, 3, &op, 1));
  assert_error(TORC_ERR_INVALID, "output_padding is for conv_transpose2d");
  assert_null(torc_conv_transpose2d_new(4, 6, 3, 3, &op, 1));
  assert_error(TORC_ERR_INVALID, "output_padding (1, 1) must be smaller "
                                 "than the stride (1, 1) or the dilation");
  assert_null(torc_batchnorm2d_new(-2, 1e-5, 0.1));
  assert_error(TORC_ERR_INVALID, "num_features -2 is negative");
  assert_null(torc_batchnorm1d_new(3, 1e-5, 1.5));
  assert_error(TORC_ERR_INVALID, "momentum between 0 and 1");
  assert_null(torc_layernorm_new(TORC_SHAPE(0), 1e-5, 1));
  assert_error(TORC_ERR_INVALID, "normalized_shape size 0 is 0");
  assert_null(torc_groupnorm_new(3, 4, 1e-5, 1));
  assert_error(TORC_ERR_INVALID, "groups must be >= 1 and divide "
                                 "num_channels");
  assert_null(torc_dropout_new(-0.1));
  assert_error(TORC_ERR_INVALID, "dropout: p is -0.1");
  assert_null(torc_embedding_new(0, 3));
  assert_error(TORC_ERR_INVALID, "num_embeddings 0");
  assert_null(torc_maxpool2d_new(NULL));
  assert_error(TORC_ERR_INVALID, "maxpool2d: the kernel size is missing");
  torc_pool2d_params pp = {{2, 2}, {0, 0}, {2, 1}, {0, 0}, 0, 0, 0};
  assert_null(torc_avgpool2d_new(&pp));
  assert_error(TORC_ERR_INVALID, "padding 2 is more than half the kernel "
                                 "size 2; use padding <= 1");
  torc_pool2d_params pd = {{2, 2}, {0, 0}, {0, 0}, {2, 2}, 0, 0, 0};
  assert_null(torc_avgpool2d_new(&pd));
  assert_error(TORC_ERR_INVALID, "average pooling has no dilation");
  assert_null(torc_adaptive_avgpool2d_new(0, 2));
  assert_error(TORC_ERR_INVALID, "output size 0 x 2");
  assert_null(torc_flatten_new(2, 1));
  assert_error(TORC_ERR_INVALID, "start_dim 2 comes after end_dim 1");
}

static void test_build_errors(void **state) {
  (void)state;
  static const struct {
    const char *type, *spec, *needle;
  } cases[] = {
      {"linear", "out_features=abc",
       "linear: key 'out_features' = 'abc' is not an integer >= 1"},
      {"linear", "out_features=0", "'out_features' = '0' is not an integer"},
      {"linear", "out_features=3 in_features=-1",
       "'in_features' = '-1' is not an integer >= 0"},
      {"linear", "out_features=3 bias=maybe",
       "'bias' = 'maybe' is not yes or no"},
      {"conv2d", "out_channels=8 kernel=0",
       "'kernel' = '0' is not one integer >= 1 or two separated by a comma"},
      {"conv2d", "out_channels=8 kernel=3,x", "'kernel' = '3,x'"},
      {"conv2d", "out_channels=8 kernel=3 stride=0", "'stride' = '0'"},
      {"conv2d", "out_channels=8 kernel=3 padding=-1", "'padding' = '-1'"},
      {"conv2d", "out_channels=8 kernel=3 dilation=1,0", "'dilation' = '1,0'"},
      {"conv2d", "out_channels=8 kernel=3 groups=0",
       "'groups' = '0' is not an integer >= 1"},
      {"conv2d", "in_channels=4 out_channels=6 kernel=3 groups=4",
       "groups 4 must divide"},
      {"conv2d", "out_channels=8 kernel=3 bias=2", "'bias' = '2'"},
      {"conv_transpose2d", "out_channels=8 kernel=3 output_padding=1",
       "output_padding (1, 1) must be smaller"},
      {"conv_transpose2d", "out_channels=8 kernel=3 output_padding=a",
       "'output_padding' = 'a'"},
      {"batchnorm2d", "eps=-1", "'eps' = '-1' is not a number >= 0"},
      {"batchnorm1d", "momentum=2",
       "'momentum' = '2' is not a number from 0 to 1"},
      {"batchnorm2d", "num_features=x", "'num_features' = 'x'"},
      {"layernorm", "normalized_shape=a", "'normalized_shape' = 'a' is not 0, "
                                          "or sizes >= 1"},
      {"layernorm", "normalized_shape=0,4", "'normalized_shape' = '0,4'"},
      {"layernorm", "elementwise_affine=perhaps",
       "'elementwise_affine' = 'perhaps'"},
      {"groupnorm", "groups=3 num_channels=4", "groups 3 and num_channels 4"},
      {"groupnorm", "groups=2 affine=x", "'affine' = 'x'"},
      {"groupnorm", "groups=0", "'groups' = '0' is not an integer >= 1"},
      {"dropout", "p=1.5", "'p' = '1.5' is not a number from 0 to 1"},
      {"dropout", "p=half", "'p' = 'half'"},
      {"embedding", "num_embeddings=0 embedding_dim=3",
       "'num_embeddings' = '0' is not an integer >= 1"},
      {"embedding", "num_embeddings=10 embedding_dim=x", "'embedding_dim'"},
      {"maxpool2d", "kernel=2 padding=2", "padding 2 is more than half"},
      {"maxpool2d", "kernel=2 ceil_mode=sometimes", "'ceil_mode'"},
      {"maxpool2d", "kernel=2 stride=-1", "'stride' = '-1' is not one "
                                          "integer >= 0"},
      {"avgpool2d", "kernel=2 count_include_pad=perhaps",
       "'count_include_pad' = 'perhaps'"},
      {"avgpool2d", "kernel=2 divisor_override=-1",
       "'divisor_override' = '-1' is not an integer >= 0"},
      {"adaptive_avgpool2d", "output_size=0", "'output_size' = '0'"},
      {"flatten", "start_dim=x", "'start_dim' = 'x' is not a dim"},
      {"flatten", "start_dim=2 end_dim=1", "start_dim 2 comes after end_dim"},
      {"flatten", "end_dim=99", "'end_dim' = '99'"},
      {"leaky_relu", "negative_slope=abc",
       "'negative_slope' = 'abc' is not a number"},
      {"elu", "alpha=", "'alpha' = '' is not a number"},
      {"gelu", "approximate=fast", "'approximate' = 'fast' is not none or "
                                   "tanh"},
      {"softplus", "beta=0", "'beta' = '0' is not a number other than 0"},
      {"softplus", "threshold=big", "'threshold' = 'big'"},
      {"softmax", "dim=a", "'dim' = 'a' is not a dim"},
      {"log_softmax", "dim=1.5", "'dim' = '1.5'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    torc_clear_error();
    torc_module *m = torc_module_build(cases[i].type, cases[i].spec);
    if (m != NULL) {
      print_error("%s \"%s\" was accepted\n", cases[i].type, cases[i].spec);
      torc_module_free(m);
      fail();
    }
    assert_error(TORC_ERR_INVALID, cases[i].needle);
  }
  /* required keys (the core checks them against the key list) */
  assert_null(torc_module_build("linear", "in_features=3"));
  assert_error(TORC_ERR_INVALID, "out_features");
  assert_null(torc_module_build("conv2d", "out_channels=3"));
  assert_error(TORC_ERR_INVALID, "kernel");
  assert_null(torc_module_build("embedding", "num_embeddings=3"));
  assert_error(TORC_ERR_INVALID, "embedding_dim");
  assert_null(torc_module_build("groupnorm", NULL));
  assert_error(TORC_ERR_INVALID, "groups");
  assert_null(torc_module_build("linear", "out_features=3 in_feature=4"));
  assert_error(TORC_ERR_INVALID, "in_feature");
}

/* Every built-in type is registered with documented keys and builds from
 * its required keys alone. */
static void test_types(void **state) {
  (void)state;
  static const char *const names[] = {
      "linear", "conv2d", "conv_transpose2d", "batchnorm1d", "batchnorm2d",
      "layernorm", "groupnorm", "dropout", "embedding", "maxpool2d",
      "avgpool2d", "adaptive_avgpool2d", "flatten", "identity", "relu",
      "leaky_relu", "elu", "gelu", "silu", "sigmoid", "tanh", "softplus",
      "softmax", "log_softmax", "hardswish", "hardsigmoid", "softsign",
      "selu", "mish", "prelu", "celu", "hardtanh", "relu6"};
  static const char *const required[] = {
      "out_features=2", "out_channels=2 kernel=3", "out_channels=2 kernel=3",
      NULL, NULL, NULL, "groups=1", NULL, "num_embeddings=4 embedding_dim=2",
      "kernel=2", "kernel=2", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const torc_module_type *t = torc_module_type_find(names[i]);
    if (t == NULL) {
      print_error("type %s is not registered\n", names[i]);
      fail();
    }
    assert_non_null(t->description);
    for (const torc_module_key *k = t->keys; k->name; k++)
      assert_non_null(k->help);
    torc_module *m = torc_module_build(names[i], required[i]);
    assert_torc(m);
    assert_string_equal(torc_module_type_name(m), names[i]);
    torc_module_free(m);
  }
  /* the add/concat/sequential types are module.c's */
  assert_non_null(torc_module_type_find("sequential"));
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, test_live_setup, \
                                             test_live_teardown)
  const struct CMUnitTest tests[] = {
      T(test_forward_errors),
      T(test_constructor_errors),
      T(test_build_errors),
      T(test_types),
  };
  return cmocka_run_group_tests(tests, test_setup_ref_sim, test_teardown_all);
}
