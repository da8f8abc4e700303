/* tests/test_module_reset.c — the reset slot of torc_module_vtable: a module
 * type defined here re-initialises through it, both by torc_module_init and
 * by an INI model's [model] init (the trainer's path); a reset's errors come
 * back; a table from before the slot (struct_size ending before it) still
 * works and is never read past its end, in a program and in a plugin
 * (tests/plugins/modreset.c, built with and without the slot); and the
 * built-in layers, which now re-initialise through their own slots, draw
 * exactly what the init functions draw for PyTorch's schemes from the same
 * seed.
 */
#include <math.h>

#include "testutil.h"

/* ---- a module type with a reset: y = x * alpha, alpha [features] ---- */

/* What the resets saw. */
static struct {
  int calls;
  char scheme[32];
  torc_generator *gen;
  int grad_off; /* autograd was off inside every call */
  int fail;     /* 1: fail with a message; 2: fail without one */
} seen;

static torc_tensor *alpha_forward(torc_module *m, const torc_tensor *const *in,
                                  int n_in) {
  (void)n_in;
  return torc_mul(in[0], torc_module_parameter(m, "alpha"));
}

/* alpha ~ U(1, 1 + 1/16) for "default", U(2, 2 + 1/16) for any other
 * scheme, drawn from gen so one seed gives one value. */
static torc_status alpha_reset(torc_module *m, const char *scheme,
                               torc_generator *gen) {
  seen.calls++;
  snprintf(seen.scheme, sizeof seen.scheme, "%s", scheme);
  seen.gen = gen;
  if (torc_get_grad_mode() == TORC_GRAD_ENABLED)
    seen.grad_off = 0;
  if (seen.fail == 1)
    return torc_set_error(TORC_ERR_INVALID, "alpha: cannot reset here (a "
                                            "test refusal)");
  if (seen.fail == 2)
    return TORC_ERR_INVALID;
  double base = strcmp(scheme, "default") == 0 ? 1 : 2;
  return torc_init_uniform_(torc_module_parameter(m, "alpha"), base,
                            base + 1.0 / 16, gen);
}

static const torc_module_vtable alpha_vt = {
    sizeof(torc_module_vtable), alpha_forward, NULL, NULL, alpha_reset};

/* The same type as a plugin built against torc before the slot would give
 * it: struct_size ends at describe. The slot is filled in anyway, so a core
 * that read past struct_size would be caught calling it. */
static int old_calls;
static torc_status old_reset(torc_module *m, const char *scheme,
                             torc_generator *gen) {
  (void)m, (void)scheme, (void)gen;
  old_calls++;
  return TORC_OK;
}
static const torc_module_vtable old_vt = {
    offsetof(torc_module_vtable, reset), alpha_forward, NULL, NULL, old_reset};

static torc_module *alpha_new(const torc_module_vtable *vt, int64_t n) {
  torc_module *m = torc_module_new(vt == &old_vt ? "alpha_old" : "alpha", vt,
                                   NULL);
  if (m == NULL)
    return NULL;
  /* A scope of its own: the module holds the only reference to alpha. */
  int s = torc_scope_begin();
  torc_tensor *a = torc_full(TORC_SHAPE(n), 0.5, TORC_F32, TORC_CPU);
  torc_status st = a ? torc_module_register_parameter(m, "alpha", a)
                     : torc_last_status();
  torc_scope_end(s);
  if (st) {
    torc_module_free(m);
    return NULL;
  }
  return m;
}

static torc_module *alpha_create(const char *const *k, const char *const *v,
                                 int n, void *user) {
  (void)k, (void)n;
  return alpha_new(user, atoll(v[0]));
}

static const torc_module_key alpha_keys[] = {
    {"features", "the input's last dim", NULL}, {NULL, NULL, NULL}};

static const torc_module_type alpha_type = {
    sizeof(torc_module_type), "test_alpha", "x * alpha, with a reset",
    alpha_keys, alpha_create, (void *)&alpha_vt};
static const torc_module_type old_type = {
    sizeof(torc_module_type), "test_alpha_old",
    "x * alpha, a vtable from before the reset slot", alpha_keys,
    alpha_create, (void *)&old_vt};

static void seen_clear(void) {
  memset(&seen, 0, sizeof seen);
  seen.grad_off = 1;
  old_calls = 0;
}

static torc_module *model_from(const char *text) {
  torc_config *cfg = torc_config_parse(text, "net.ini");
  if (cfg == NULL)
    return NULL;
  torc_module *m = torc_module_from_config(cfg, NULL, NULL);
  torc_config_free(cfg);
  return m;
}

static double first_value(const torc_tensor *t) {
  double *v = test_values(t);
  assert_non_null(v);
  double x = v[0];
  free(v);
  return x;
}

/* ---- torc_module_init calls the slot ---- */

static void test_init_calls_reset(void **state) {
  (void)state;
  seen_clear();
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_linear_new(4, 3, 1)));
  assert_ok(torc_sequential_append(seq, alpha_new(&alpha_vt, 3)));
  torc_tensor *a = torc_module_parameter(torc_module_child_at(seq, 1),
                                         "alpha");
  torc_generator *g = torc_generator_new(3);
  assert_ok(torc_module_init(seq, "default", g));
  assert_int_equal(seen.calls, 1);
  assert_string_equal(seen.scheme, "default");
  assert_ptr_equal(seen.gen, g);
  assert_true(seen.grad_off);
  double v = first_value(a);
  assert_true(v >= 1 && v < 1 + 1.0 / 16);
  /* one seed, one draw: the same value again */
  torc_generator_set_state(g, 3, 0);
  assert_ok(torc_module_init(seq, "default", g));
  assert_true(first_value(a) == v);
  assert_ok(torc_module_init(seq, "orthogonal", NULL));
  assert_int_equal(seen.calls, 3);
  assert_string_equal(seen.scheme, "orthogonal");
  assert_null(seen.gen);
  assert_true(first_value(a) >= 2);
  /* the parameter is still a leaf that requires grad */
  assert_true(torc_requires_grad(a) && torc_is_leaf(a));
  torc_generator_free(g);
  torc_module_free(seq);
}

/* ---- the trainer's path: [model] init of an INI model ---- */

static const char *const alpha_ini = "[model]\n"
                                     "input = 4\n"
                                     "init = xavier_uniform\n"
                                     "[layer]\n"
                                     "type = linear\n"
                                     "out_features = 3\n"
                                     "[layer]\n"
                                     "type = test_alpha\n"
                                     "features = 3\n";

static void test_ini_init_calls_reset(void **state) {
  (void)state;
  seen_clear();
  torc_module *m = model_from(alpha_ini);
  assert_torc(m);
  assert_int_equal(seen.calls, 1);
  assert_string_equal(seen.scheme, "xavier_uniform");
  assert_true(seen.grad_off);
  assert_true(first_value(torc_module_parameter(torc_module_child(m, "1"),
                                                "alpha")) >= 2);
  torc_module_free(m);

  /* without an init key nothing is re-initialised */
  seen_clear();
  const char *plain = "[model]\ninput = 4\n[layer]\ntype = test_alpha\n"
                      "features = 4\n";
  m = model_from(plain);
  assert_torc(m);
  assert_int_equal(seen.calls, 0);
  assert_true(first_value(torc_module_parameter(torc_module_child(m, "0"),
                                                "alpha")) == 0.5);
  torc_module_free(m);

  /* a reset's error is the model's error, at the init key */
  seen_clear();
  seen.fail = 1;
  assert_null(model_from(alpha_ini));
  assert_int_equal(torc_last_status(), TORC_ERR_CONFIG);
  assert_contains(torc_last_error(), "net.ini:3: key 'init' in [model]");
  assert_contains(torc_last_error(), "alpha: cannot reset here");
  seen.fail = 0;
}

static void test_reset_errors(void **state) {
  (void)state;
  seen_clear();
  torc_module *m = alpha_new(&alpha_vt, 2);
  assert_torc(m);
  seen.fail = 1;
  assert_int_equal(torc_module_init(m, "default", NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "alpha: cannot reset here");
  /* a reset that fails without saying why is named */
  torc_clear_error();
  seen.fail = 2;
  assert_int_equal(torc_module_init(m, "default", NULL), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "torc_module_init: the reset of alpha (the "
                                 "root module) failed without saying why");
  seen.fail = 0;
  torc_module_free(m);
}

/* ---- a table from before the slot ---- */

static void test_old_vtable(void **state) {
  (void)state;
  seen_clear();
  torc_module *m = model_from("[model]\ninput = 2\ninit = kaiming_normal\n"
                              "[layer]\ntype = test_alpha_old\n"
                              "features = 2\n");
  assert_torc(m);
  assert_int_equal(old_calls, 0);
  torc_module *a = torc_module_child(m, "0");
  assert_ok(torc_module_init(a, "default", NULL));
  assert_int_equal(old_calls, 0);
  /* left as it was, and it still runs */
  assert_true(first_value(torc_module_parameter(a, "alpha")) == 0.5);
  int s = torc_scope_begin();
  torc_tensor *y = torc_module_forward(m, torc_ones(TORC_SHAPE(1, 2),
                                                    TORC_F32, TORC_CPU));
  assert_torc(y);
  assert_true(first_value(y) == 0.5);
  torc_scope_end(s);
  torc_module_free(m);
}

/* ---- plugins: one with the slot, one built before it ---- */

/* "$TORC_TEST_PLUGIN_DIR/<name>.so". */
static const char *tp_path(const char *name, char *buf, size_t size) {
  const char *dir = getenv("TORC_TEST_PLUGIN_DIR");
  snprintf(buf, size, "%s/%s.so", dir ? dir : ".", name);
  return buf;
}

static void test_plugin_types(void **state) {
  (void)state;
  char path[4096];
  assert_ok(torc_plugin_load(tp_path("modreset", path, sizeof path), NULL));
  assert_ok(
      torc_plugin_load(tp_path("modreset_old", path, sizeof path), NULL));
  torc_module *m = model_from("[model]\ninput = 3\ninit = orthogonal\n"
                              "[layer]\ntype = plug_alpha\nfeatures = 3\n"
                              "[layer]\ntype = plug_alpha_old\n"
                              "features = 3\n");
  assert_torc(m);
  /* the plugin's reset ran with the scheme; the old table was not read
   * past its struct_size (its slot would have set 100) */
  double a = first_value(torc_module_parameter(torc_module_child(m, "0"),
                                               "alpha"));
  assert_true(a >= 2 && a < 2 + 1.0 / 16);
  assert_true(first_value(torc_module_parameter(torc_module_child(m, "1"),
                                                "alpha")) == 0.5);
  assert_ok(torc_module_init(m, "default", NULL));
  a = first_value(torc_module_parameter(torc_module_child(m, "0"), "alpha"));
  assert_true(a >= 1 && a < 1 + 1.0 / 16);
  assert_true(first_value(torc_module_parameter(torc_module_child(m, "1"),
                                                "alpha")) == 0.5);
  torc_module_free(m);
}

/* ---- the built-in layers: the same draws as before ---- */

/* What torc_module_init does to a built-in layer under `scheme`, done by
 * hand with the init functions on fresh tensors of the same shapes, in the
 * same order, from generator g: PyTorch's reset_parameters for "default",
 * the scheme for linear/conv weights with zero biases otherwise; N(0, 1)
 * embeddings; ones/zeros and fresh statistics for the norms. */
static torc_tensor *expect_like(torc_module *m, const char *name) {
  torc_tensor *t = torc_module_parameter(m, name);
  if (t == NULL)
    t = torc_module_buffer(m, name);
  assert_non_null(t);
  return torc_zeros_like(t); /* the open scope owns it */
}

static void expect_equal(const torc_tensor *got, const torc_tensor *want) {
  assert_int_equal(torc_numel(got), torc_numel(want));
  double *a = test_values(got), *b = test_values(want);
  assert_non_null(a);
  assert_non_null(b);
  assert_memory_equal(a, b, sizeof(double) * (size_t)torc_numel(want));
  free(a);
  free(b);
}

static void expect_layer(torc_module *m, const char *scheme,
                         torc_generator *g) {
  const char *type = torc_module_type_name(m);
  if (strcmp(type, "linear") == 0 || strcmp(type, "conv2d") == 0 ||
      strcmp(type, "conv_transpose2d") == 0) {
    torc_tensor *w = expect_like(m, "weight"), *b = expect_like(m, "bias");
    if (strcmp(scheme, "default") == 0) {
      assert_ok(torc_init_kaiming_uniform_(w, sqrt(5.0), "fan_in",
                                           "leaky_relu", g));
      int64_t fan_in = 0;
      assert_ok(torc_init_fans(w, &fan_in, NULL));
      double bound = 1 / sqrt((double)fan_in);
      assert_ok(torc_init_uniform_(b, -bound, bound, g));
    } else if (strcmp(scheme, "kaiming_normal") == 0) {
      assert_ok(torc_init_kaiming_normal_(w, 0, "fan_in", "relu", g));
    } else {
      assert_string_equal(scheme, "orthogonal");
      assert_ok(torc_init_orthogonal_(w, 1, g));
    }
    expect_equal(torc_module_parameter(m, "weight"), w);
    expect_equal(torc_module_parameter(m, "bias"), b);
  } else if (strcmp(type, "embedding") == 0) {
    torc_tensor *w = expect_like(m, "weight");
    assert_ok(torc_init_normal_(w, 0, 1, g));
    expect_equal(torc_module_parameter(m, "weight"), w);
  } else if (strncmp(type, "batchnorm", 9) == 0 ||
             strcmp(type, "layernorm") == 0 ||
             strcmp(type, "groupnorm") == 0) {
    torc_tensor *one = expect_like(m, "weight");
    assert_ok(torc_init_ones_(one));
    expect_equal(torc_module_parameter(m, "weight"), one);
    expect_equal(torc_module_parameter(m, "bias"), expect_like(m, "bias"));
    if (type[0] == 'b') {
      expect_equal(torc_module_buffer(m, "running_mean"),
                   expect_like(m, "running_mean"));
      torc_tensor *rv = expect_like(m, "running_var");
      assert_ok(torc_init_ones_(rv));
      expect_equal(torc_module_buffer(m, "running_var"), rv);
      expect_equal(torc_module_buffer(m, "num_batches_tracked"),
                   expect_like(m, "num_batches_tracked"));
    }
  }
}

/* Sets every value of the named parameter or buffer to v. */
static void scribble(torc_module *m, const char *name, double v) {
  torc_tensor *t = torc_module_parameter(m, name);
  if (t == NULL)
    t = torc_module_buffer(m, name);
  assert_non_null(t);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  assert_ok(torc_fill_(t, v));
  torc_set_grad_mode(gm);
}

static void test_builtin_layers_unchanged(void **state) {
  (void)state;
  int s = torc_scope_begin();
  const int64_t ln_shape[1] = {4};
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_linear_new(6, 4, 1)));
  assert_ok(torc_sequential_append(seq, torc_conv2d_new(2, 3, 3, 3, NULL, 1)));
  assert_ok(torc_sequential_append(
      seq, torc_conv_transpose2d_new(3, 2, 2, 2, NULL, 1)));
  assert_ok(torc_sequential_append(seq, torc_embedding_new(10, 3)));
  assert_ok(torc_sequential_append(seq, torc_batchnorm2d_new(3, 1e-5, 0.1)));
  assert_ok(torc_sequential_append(seq, torc_layernorm_new(ln_shape, 1, 1e-5,
                                                           1)));
  assert_ok(torc_sequential_append(seq, torc_groupnorm_new(2, 4, 1e-5, 1)));
  assert_ok(torc_sequential_append(seq, torc_module_build("relu", NULL)));
  const char *schemes[] = {"default", "kaiming_normal", "orthogonal"};
  for (int k = 0; k < 3; k++) {
    /* what a reset must undo */
    scribble(torc_module_child(seq, "4"), "weight", 3);
    scribble(torc_module_child(seq, "4"), "running_mean", 3);
    scribble(torc_module_child(seq, "4"), "running_var", 3);
    scribble(torc_module_child(seq, "4"), "num_batches_tracked", 3);
    scribble(torc_module_child(seq, "5"), "bias", 3);
    scribble(torc_module_child(seq, "6"), "weight", 3);
    torc_generator *g = torc_generator_new(11), *h = torc_generator_new(11);
    assert_ok(torc_module_init(seq, schemes[k], g));
    for (int i = 0; i < torc_module_child_count(seq); i++)
      expect_layer(torc_module_child_at(seq, i), schemes[k], h);
    /* and not one draw more or less */
    uint64_t gs, go, hs, ho;
    torc_generator_get_state(g, &gs, &go);
    torc_generator_get_state(h, &hs, &ho);
    assert_true(go > 0);
    assert_true(gs == hs && go == ho);
    torc_generator_free(g);
    torc_generator_free(h);
  }
  torc_module_free(seq);
  torc_scope_end(s);
}

/* The INI path draws as torc_module_init does: the same model built from
 * the same seed, with init in the file or by hand afterwards. */
static void test_ini_init_matches_module_init(void **state) {
  (void)state;
  const char *with = "[model]\ninput = 1,6,6\ninit = kaiming_normal\n"
                     "[layer]\ntype = conv2d\nout_channels = 2\nkernel = 3\n"
                     "[layer]\ntype = batchnorm2d\n"
                     "[layer]\ntype = flatten\n"
                     "[layer]\ntype = linear\nout_features = 3\n";
  const char *without = "[model]\ninput = 1,6,6\n"
                        "[layer]\ntype = conv2d\nout_channels = 2\n"
                        "kernel = 3\n"
                        "[layer]\ntype = batchnorm2d\n"
                        "[layer]\ntype = flatten\n"
                        "[layer]\ntype = linear\nout_features = 3\n";
  torc_manual_seed(21);
  torc_module *a = model_from(with);
  assert_torc(a);
  torc_manual_seed(21);
  torc_module *b = model_from(without);
  assert_torc(b);
  assert_ok(torc_module_init(b, "kaiming_normal", NULL));
  torc_named_tensor *pa, *pb;
  int na = torc_module_named_parameters(a, &pa);
  int nb = torc_module_named_parameters(b, &pb);
  assert_int_equal(na, 6);
  assert_int_equal(na, nb);
  for (int i = 0; i < na; i++) {
    assert_string_equal(pa[i].name, pb[i].name);
    expect_equal(pa[i].tensor, pb[i].tensor);
  }
  torc_named_tensors_free(pa, na);
  torc_named_tensors_free(pb, nb);
  torc_module_free(a);
  torc_module_free(b);
}

static int setup(void **state) {
  (void)state;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_module_type_register(&alpha_type) != TORC_OK ||
      torc_module_type_register(&old_type) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_init_calls_reset, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_ini_init_calls_reset,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_reset_errors, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_old_vtable, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_plugin_types, test_live_setup,
                                      test_live_teardown),
      cmocka_unit_test_setup_teardown(test_builtin_layers_unchanged,
                                      test_live_setup, test_live_teardown),
      cmocka_unit_test_setup_teardown(test_ini_init_matches_module_init,
                                      test_live_setup, test_live_teardown),
  };
  return cmocka_run_group_tests(tests, setup, test_teardown_all);
}
