/* tests/test_modplug.c — module types registered by a plugin: the test
 * plugin modplug (tests/plugins/modplug.c) defines "scaled_tanh" through
 * host->register_module_type and computes it only through host->api. Built
 * by name, its values, gradient and parameter names are checked; so are the
 * core's key errors, unregistration at shutdown, a name taken by another
 * plugin or by the core, the warning for a missing TORC_PROVIDES_MODULE,
 * and the plugin's refusal of a host table from before ABI 1.1.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>

#include "testutil.h"

#include "torc/plugin.h"

/* "$TORC_TEST_PLUGIN_DIR/<name>.so" in one of four rotating buffers. */
static const char *tp_path(const char *name) {
  static char bufs[4][4096];
  static int next;
  char *b = bufs[next++ % 4];
  const char *dir = getenv("TORC_TEST_PLUGIN_DIR");
  snprintf(b, sizeof bufs[0], "%s/%s.so", dir ? dir : ".", name);
  return b;
}

/* ---- log capture ---- */

static char log_buf[16384];

static void log_cb(int level, const char *line, void *user) {
  (void)user;
  size_t used = strlen(log_buf);
  if (used + 1 < sizeof log_buf)
    snprintf(log_buf + used, sizeof log_buf - used, "[%d] %s\n", level, line);
}

/* ---- fixture: ref (the cpu kernels) and modplug loaded; no tensor may
 * outlive a test ---- */

static int setup(void **state) {
  log_buf[0] = '\0';
  torc_set_log_level(TORC_LOG_WARN);
  torc_set_log_callback(log_cb, NULL);
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load(tp_path("modplug"), NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return test_live_setup(state);
}

static int teardown(void **state) {
  int rc = test_live_teardown(state);
  torc_shutdown();
  torc_set_log_callback(NULL, NULL);
  return rc;
}

/* Loads a plugin by path with one key, capturing the error message. */
static char err_msg[4096];

static torc_status load_with_key(const char *name, const char *key,
                                 const char *value) {
  const char *keys[1] = {key}, *values[1] = {value};
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = key ? 1 : 0;
  torc_status st = torc_plugin_load(tp_path(name), &opts);
  snprintf(err_msg, sizeof err_msg, "%s", st ? torc_last_error() : "");
  return st;
}

/* ---- building and using the plugin's type ---- */

/* Built by name from key=value text: alpha [4] = scale, y = alpha tanh(x),
 * and d(sum y)/d(alpha) = sum over rows of tanh(x). */
static void test_build_forward_backward(void **state) {
  (void)state;
  const torc_module_type *t = torc_module_type_find("scaled_tanh");
  assert_non_null(t);
  assert_string_equal(t->name, "scaled_tanh");
  assert_contains(t->description, "tanh");

  torc_module *m = torc_module_build("scaled_tanh", "features=4, scale=2");
  assert_torc(m);
  assert_string_equal(torc_module_type_name(m), "scaled_tanh");

  torc_named_tensor *params = NULL;
  assert_int_equal(torc_module_named_parameters(m, &params), 1);
  assert_string_equal(params[0].name, "alpha");
  torc_tensor *alpha = params[0].tensor;
  torc_named_tensors_free(params, 1);
  assert_true(alpha == torc_module_parameter(m, "alpha"));
  assert_int_equal(torc_ndim(alpha), 1);
  assert_int_equal(torc_size(alpha, 0), 4);
  assert_true(torc_requires_grad(alpha));
  const double two[4] = {2, 2, 2, 2};
  test_assert_values(alpha, two, 4, 0);

  const float xv[8] = {-1.5f, -0.5f, 0, 0.25f, 0.5f, 1, 2, -3};
  int scope = torc_scope_begin();
  torc_tensor *x = torc_from_host(xv, TORC_SHAPE(2, 4), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(m, x);
  assert_torc(y);
  assert_int_equal(torc_ndim(y), 2);
  double want[8], grad[4] = {0};
  for (int i = 0; i < 8; i++) {
    want[i] = 2 * tanh((double)xv[i]);
    grad[i % 4] += tanh((double)xv[i]);
  }
  test_assert_values(y, want, 8, 1e-6);

  assert_ok(torc_backward(torc_sum(y, NULL, 0, 0), NULL, 0));
  assert_torc(torc_grad_of(alpha));
  test_assert_values(torc_grad_of(alpha), grad, 4, 1e-6);
  torc_scope_end(scope);

  char *repr = torc_module_repr(m);
  assert_torc(repr);
  assert_contains(repr, "scaled_tanh(4, scale=2)");
  free(repr);
  torc_module_free(m);
}

/* scale defaults to 1; a plugin type sits in a sequential like a built-in
 * one, with PyTorch-style dotted names. */
static void test_default_and_in_sequential(void **state) {
  (void)state;
  torc_module *seq = torc_sequential_new();
  assert_torc(seq);
  assert_ok(torc_sequential_append(seq, torc_linear_new(3, 4, 1)));
  assert_ok(torc_sequential_append(seq,
                                   torc_module_build("scaled_tanh",
                                                     "features=4")));
  torc_named_tensor *params = NULL;
  int n = torc_module_named_parameters(seq, &params);
  assert_int_equal(n, 3);
  assert_string_equal(params[0].name, "0.weight");
  assert_string_equal(params[1].name, "0.bias");
  assert_string_equal(params[2].name, "1.alpha");
  const double ones[4] = {1, 1, 1, 1};
  test_assert_values(params[2].tensor, ones, 4, 0);
  torc_named_tensors_free(params, n);

  int scope = torc_scope_begin();
  torc_tensor *x = torc_ones(TORC_SHAPE(5, 3), TORC_F32, TORC_CPU);
  torc_tensor *y = torc_module_forward(seq, x);
  assert_torc(y);
  assert_int_equal(torc_size(y, 0), 5);
  assert_int_equal(torc_size(y, 1), 4);
  /* With alpha = 1 the output is tanh of the linear layer's. */
  torc_tensor *h = torc_module_forward(torc_module_child(seq, "0"), x);
  double *hv = test_values(h);
  assert_non_null(hv);
  double want[20];
  for (int i = 0; i < 20; i++)
    want[i] = tanh(hv[i]);
  free(hv);
  test_assert_values(y, want, 20, 1e-6);
  torc_scope_end(scope);
  torc_module_free(seq);
}

/* The module moves to another device with torc_module_to and its forward,
 * written against host->api, runs there. */
static void test_on_sim(void **state) {
  (void)state;
  assert_ok(torc_plugin_load("sim", NULL));
  torc_device sim;
  assert_ok(torc_device_parse("sim:0", &sim));
  torc_module *m = torc_module_build("scaled_tanh", "features=2, scale=-0.5");
  assert_torc(m);
  assert_ok(torc_module_to(m, sim));
  assert_true(torc_device_eq(torc_device_of(torc_module_parameter(m, "alpha")),
                             sim));
  int scope = torc_scope_begin();
  const float xv[2] = {0.75f, -2};
  torc_tensor *x = torc_from_host(xv, TORC_SHAPE(1, 2), TORC_F32, sim);
  torc_tensor *y = torc_module_forward(m, x);
  assert_torc(y);
  assert_true(torc_device_eq(torc_device_of(y), sim));
  const double want[2] = {-0.5 * tanh(0.75), -0.5 * tanh(-2.0)};
  test_assert_values(y, want, 2, 1e-6);
  torc_scope_end(scope);
  torc_module_free(m);
}

/* ---- errors ---- */

/* Keys are checked by the core (unknown, missing, twice); values by the
 * plugin's create. */
static void test_key_and_value_errors(void **state) {
  (void)state;
  assert_null(torc_module_build("scaled_tanh", "features=4, scael=2"));
  assert_error(TORC_ERR_INVALID, "unknown key 'scael'");
  assert_contains(torc_last_error(), "did you mean 'scale'");
  assert_contains(torc_last_error(), "features, scale");

  assert_null(torc_module_build("scaled_tanh", "scale=2"));
  assert_error(TORC_ERR_INVALID, "key 'features' is required");

  assert_null(torc_module_build("scaled_tanh", "features=2, features=3"));
  assert_error(TORC_ERR_INVALID, "given twice");

  assert_null(torc_module_build("scaled_tanh", "features=0"));
  assert_error(TORC_ERR_INVALID, "key 'features' = '0' is not an integer");

  assert_null(torc_module_build("scaled_tanh", "features=4, scale=abc"));
  assert_error(TORC_ERR_INVALID, "key 'scale' = 'abc' is not a finite");

  assert_null(torc_module_build("scaled_tanh", "features=4, scale=inf"));
  assert_error(TORC_ERR_INVALID, "key 'scale' = 'inf'");
}

/* An input whose last dim is not `features`: the plugin's message, with the
 * module named by the core. */
static void test_forward_shape_error(void **state) {
  (void)state;
  torc_module *m = torc_module_build("scaled_tanh", "features=4");
  assert_torc(m);
  int scope = torc_scope_begin();
  torc_tensor *x = torc_zeros(TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  assert_null(torc_module_forward(m, x));
  assert_error(TORC_ERR_SHAPE, "last dim is 3 but features = 4");
  assert_contains(torc_last_error(), "scaled_tanh");
  torc_scope_end(scope);
  torc_module_free(m);
}

/* The type goes with its plugin at shutdown, and comes back on reload. */
static void test_unregistered_at_shutdown(void **state) {
  (void)state;
  int with = torc_module_type_count();
  assert_non_null(torc_module_type_find("scaled_tanh"));
  torc_shutdown();
  assert_null(torc_module_type_find("scaled_tanh"));
  assert_int_equal(torc_module_type_count(), with - 1);
  assert_null(torc_module_build("scaled_tanh", "features=4"));
  assert_error(TORC_ERR_INVALID, "unknown module type 'scaled_tanh'");

  assert_ok(torc_plugin_load("ref", NULL));
  assert_ok(torc_plugin_load(tp_path("modplug"), NULL));
  assert_non_null(torc_module_type_find("scaled_tanh"));
  torc_module *m = torc_module_build("scaled_tanh", "features=1");
  assert_torc(m);
  torc_module_free(m);
}

/* A second plugin registering a taken name fails to load, naming both
 * plugins; the first one's type stays. */
static void test_duplicate_from_two_plugins(void **state) {
  (void)state;
  int plugins = torc_plugin_count();
  const torc_module_type *before = torc_module_type_find("scaled_tanh");
  assert_int_equal(load_with_key("modplug_bare", NULL, NULL),
                   TORC_ERR_PLUGIN);
  print_message("    %s\n", err_msg);
  assert_contains(err_msg, "plugin 'modplug_bare' cannot register module "
                           "type 'scaled_tanh'");
  assert_contains(err_msg, "already registered (by modplug)");
  assert_null(strchr(err_msg, '\n'));
  assert_int_equal(torc_plugin_count(), plugins);
  /* Rolled back without touching modplug's registration. */
  assert_true(torc_module_type_find("scaled_tanh") == before);
  torc_module *m = torc_module_build("scaled_tanh", "features=2");
  assert_torc(m);
  torc_module_free(m);
}

/* A plugin cannot take a built-in type's name. */
static void test_duplicate_of_builtin(void **state) {
  (void)state;
  const torc_module_type *linear = torc_module_type_find("linear");
  assert_non_null(linear);
  assert_int_equal(load_with_key("modplug_bare", "type_name", "linear"),
                   TORC_ERR_PLUGIN);
  print_message("    %s\n", err_msg);
  assert_contains(err_msg, "plugin 'modplug_bare' cannot register module "
                           "type 'linear'");
  assert_contains(err_msg, "the core or the program");
  assert_true(torc_module_type_find("linear") == linear);
}

/* A bad type name is the core's error, with the plugin named. */
static void test_invalid_type_name(void **state) {
  (void)state;
  assert_int_equal(load_with_key("modplug_bare", "type_name", "bad-name"),
                   TORC_ERR_PLUGIN);
  assert_contains(err_msg, "plugin 'modplug_bare' cannot register module "
                           "type 'bad-name'");
  assert_contains(err_msg, "letters, digits and '_'");
}

/* Without TORC_PROVIDES_MODULE the type is registered with a warning
 * naming the plugin, the type and the fix; modplug, which declares it, gets
 * none. */
static void test_provides_warning(void **state) {
  (void)state;
  assert_int_equal(strstr(log_buf, "TORC_PROVIDES_MODULE") == NULL, 1);
  assert_ok(load_with_key("modplug_bare", "type_name", "scaled_tanh_b"));
  assert_contains(log_buf, "plugin 'modplug_bare' registers module type "
                           "'scaled_tanh_b' but its info.provides lacks "
                           "TORC_PROVIDES_MODULE");
  torc_module *m = torc_module_build("scaled_tanh_b", "features=3");
  assert_torc(m);
  torc_module_free(m);
}

/* ---- a core older than ABI 1.1 ---- */

static char fake_err[1024];

static int fake_set_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fake_err, sizeof fake_err, fmt, ap);
  va_end(ap);
  return status;
}

/* Handed a host table that ends before `api` (as an ABI 1.0 core's), the
 * plugin refuses to initialise with TORC_ERR_ABI instead of reading past
 * the table. */
static void test_plugin_refuses_old_host(void **state) {
  (void)state;
  void *h = dlopen(tp_path("modplug"), RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    print_error("dlopen: %s\n", dlerror());
    fail();
  }
  void *sym = dlsym(h, TORC_PLUGIN_ENTRY_SYMBOL);
  assert_non_null(sym);
  torc_plugin_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry);
  const torc_plugin_info *info = entry();
  assert_non_null(info);
  assert_int_equal(info->abi_minor, TORC_ABI_MINOR);
  assert_true(info->provides & TORC_PROVIDES_MODULE);

  torc_host old;
  memset(&old, 0, sizeof old);
  old.struct_size = offsetof(torc_host, api);
  old.abi_major = 1;
  old.abi_minor = 0;
  old.set_error = fake_set_error;
  fake_err[0] = '\0';
  assert_int_equal(info->init(&old, NULL), TORC_ERR_ABI);
  assert_contains(fake_err, "ABI 1.0");
  assert_contains(fake_err, "needs ABI 1.1");
  dlclose(h);
}

int main(void) {
  if (getenv("TORC_TEST_PLUGIN_DIR") == NULL) {
    printf("test_modplug: TORC_TEST_PLUGIN_DIR is unset (run through make "
           "check): skipping\n");
    return TEST_SKIP_STATUS;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_build_forward_backward, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_default_and_in_sequential, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_on_sim, setup, teardown),
      cmocka_unit_test_setup_teardown(test_key_and_value_errors, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_forward_shape_error, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_unregistered_at_shutdown, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_from_two_plugins, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_duplicate_of_builtin, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_invalid_type_name, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_provides_warning, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plugin_refuses_old_host, setup,
                                      teardown),
  };
  return cmocka_run_group_tests_name("modplug", tests, NULL, NULL);
}
