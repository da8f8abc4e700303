/* tests/test_plugin_keys.c — the plugin loader beyond its failures: keys
 * reach the plugin (defaults, unknown keys, bad values), a plugin's
 * device, optional slots beyond a table's struct_size are never called,
 * reloading and shutdown, insecure permissions, and plugins named in a
 * configuration file (optional and required, missing kernels and their
 * fallback). The test plugins live in tests/plugins/
 * ($TORC_TEST_PLUGIN_DIR). */
#define _XOPEN_SOURCE 700 /* mkdtemp, setenv, realpath, chown */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>

#include "testutil.h"

#include "torc/plugin.h"
#include "plugin_testutil.h"

/* ======================================================================
 * Keys and tables
 * ==================================================================== */

/* Given keys reach the plugin through host->config_get. */
static void test_keys_reach_the_plugin(void **state) {
  (void)state;
  torc_set_log_level(TORC_LOG_INFO);
  const char *keys[] = {"devices", "greeting"};
  const char *values[] = {"3", "good morning"};
  torc_plugin_opts opts = {0};
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = 2;
  assert_ok(try_load(tp_path("goodkeys"), &opts));
  assert_int_equal(torc_device_count("testdev"), 3);
  assert_int_equal(log_count("greeting 'good morning'"), 1);

  assert_int_equal(torc_plugin_count(), 1);
  torc_plugin_summary s;
  assert_ok(torc_plugin_get(0, &s));
  assert_string_equal(s.name, "goodkeys");
  assert_string_equal(s.version, "1.2.3");
  char real[PATH_MAX];
  assert_non_null(realpath(tp_path("goodkeys"), real));
  assert_string_equal(s.path, real);
  assert_int_equal(s.provides, TORC_PROVIDES_DEVICE);
  assert_int_equal(s.abi_major, TORC_ABI_MAJOR);
}

/* Undeclared keys take the plugin's declared defaults. */
static void test_key_defaults(void **state) {
  (void)state;
  torc_set_log_level(TORC_LOG_INFO);
  assert_ok(try_load(tp_path("goodkeys"), NULL));
  assert_int_equal(torc_device_count("testdev"), 1);
  assert_int_equal(log_count("greeting 'hello'"), 1);
}

/* A key the plugin does not declare: refused, naming the key and the keys
 * the plugin accepts; init never runs. */
static void test_unknown_key(void **state) {
  (void)state;
  torc_set_log_level(TORC_LOG_INFO);
  const char *keys[] = {"devicez"};
  const char *values[] = {"2"};
  torc_plugin_opts opts = {0};
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = 1;
  expect_load_error(tp_path("goodkeys"), &opts, TORC_ERR_CONFIG);
  assert_contains(err_msg, "goodkeys");
  assert_contains(err_msg, "devicez");
  assert_contains(err_msg, "devices");
  assert_contains(err_msg, "greeting");
  assert_int_equal(log_count("goodkeys: init"), 0);
  assert_int_equal(torc_device_count("testdev"), -1);
}

/* A bad value the plugin's init rejects: its message comes through and
 * nothing stays registered. */
static void test_bad_key_value(void **state) {
  (void)state;
  const char *keys[] = {"devices"};
  const char *values[] = {"9"};
  torc_plugin_opts opts = {0};
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = 1;
  int before = torc_plugin_count();
  assert_int_not_equal(try_load(tp_path("goodkeys"), &opts), TORC_OK);
  assert_contains(err_msg, "devices = '9' is not a number from 0 to 4");
  assert_int_equal(torc_plugin_count(), before);
  assert_int_equal(torc_device_count("testdev"), -1);
}

/* goodkeys' device: memory through its copy slots, accounted by the core. */
static void test_device_of_a_plugin(void **state) {
  (void)state;
  const char *keys[] = {"devices"};
  const char *values[] = {"2"};
  torc_plugin_opts opts = {0};
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = 1;
  assert_ok(try_load(tp_path("goodkeys"), &opts));
  torc_device dev;
  assert_ok(torc_device_parse("testdev:1", &dev));
  assert_false(torc_device_is_host(dev));
  assert_int_not_equal(torc_device_parse("testdev:2", &dev), TORC_OK);
  assert_ok(torc_device_parse("testdev:1", &dev));

  const float v[6] = {1.5f, -2, 3, 4.25f, 5, -6};
  torc_tensor *t = torc_from_host(v, TORC_SHAPE(2, 3), TORC_F32, dev);
  assert_torc(t);
  assert_int_equal(torc_device_memory_allocated(dev), sizeof v);
  float back[6] = {0};
  assert_ok(torc_to_host(t, back, sizeof back));
  assert_memory_equal(back, v, sizeof v);
  torc_release(t);
  assert_int_equal(torc_device_memory_allocated(dev), 0);
}

/* goodkeys' descriptor ends before fini and its device table before
 * host_alloc; the slots past struct_size report if called. The core must
 * give plain memory for host_alloc and skip shutdown and fini. */
static void test_slots_beyond_struct_size(void **state) {
  (void)state;
  assert_ok(try_load(tp_path("goodkeys"), NULL));
  torc_device dev;
  assert_ok(torc_device_parse("testdev:0", &dev));
  unsigned char *p = torc_host_alloc(dev, 256);
  if (p == NULL) {
    print_error("torc_host_alloc: %s\n", torc_last_error());
    fail();
  }
  memset(p, 0x5a, 256);
  torc_host_free(dev, p);
  torc_tensor *t = torc_empty_pinned(TORC_SHAPE(4), TORC_F32, dev);
  assert_torc(t);
  torc_release(t);
  torc_shutdown();
  assert_int_equal(log_count("beyond"), 0);
}

/* Loading a plugin whose name is loaded is a no-op: init runs once. */
static void test_load_twice_is_noop(void **state) {
  (void)state;
  torc_set_log_level(TORC_LOG_INFO);
  torc_plugin_opts opts = {0};
  opts.search_path = plugin_dir;
  assert_ok(try_load(tp_path("goodkeys"), NULL));
  assert_ok(try_load(tp_path("goodkeys"), NULL));
  assert_ok(try_load("goodkeys", &opts)); /* by name: the same plugin */
  assert_int_equal(torc_plugin_count(), 1);
  assert_int_equal(log_count("goodkeys: init"), 1);
  assert_int_equal(torc_device_count("testdev"), 1);
}

/* After torc_shutdown nothing is loaded, and loading again works. */
static void test_shutdown_then_reload(void **state) {
  (void)state;
  torc_set_log_level(TORC_LOG_INFO);
  const float v[3] = {1, 2, 3};
  for (int round = 0; round < 2; round++) {
    assert_ok(try_load(tp_path("goodkeys"), NULL));
    assert_int_equal(torc_plugin_count(), 1);
    torc_device dev;
    assert_ok(torc_device_parse("testdev:0", &dev));
    torc_tensor *t = torc_from_host(v, TORC_SHAPE(3), TORC_F32, dev);
    assert_torc(t);
    float back[3];
    assert_ok(torc_to_host(t, back, sizeof back));
    assert_memory_equal(back, v, sizeof v);
    torc_release(t);
    torc_shutdown();
    assert_int_equal(torc_plugin_count(), 0);
    assert_int_equal(torc_device_count("testdev"), -1);
    assert_int_not_equal(torc_device_parse("testdev:0", &dev), TORC_OK);
  }
  assert_int_equal(log_count("goodkeys: init"), 2);
}

static torc_status apply_ini(const char *text);

/* ======================================================================
 * Permissions
 * ==================================================================== */

/* A copy of goodkeys in a fresh private folder; returns its path in so. */
static void private_copy(char *dir, char *so) {
  make_tmpdir(dir);
  snprintf(so, PATH_MAX + 32, "%s/goodkeys.so", dir);
  copy_file(tp_path("goodkeys"), so, 0755);
}

/* Asserts loading `so` is refused for its permissions, naming `culprit`,
 * without the file ever being mapped. */
static void expect_insecure(const char *so, const char *culprit) {
  unsetenv("TORC_TEST_GOODKEYS_MAPPED");
  expect_load_error(so, NULL, TORC_ERR_PERMISSION);
  assert_contains(err_msg, culprit);
  assert_null(getenv("TORC_TEST_GOODKEYS_MAPPED"));
  assert_int_equal(torc_device_count("testdev"), -1);
}

/* A world-writable folder (not sticky) on the path is refused; a sticky
 * one, as /tmp, is accepted: others cannot replace its entries. */
static void test_insecure_folder(void **state) {
  (void)state;
  char dir[PATH_MAX], so[PATH_MAX + 32];
  private_copy(dir, so);
  assert_ok(try_load(so, NULL)); /* the private copy loads */
  torc_shutdown();

  assert_int_equal(chmod(dir, 0777), 0);
  expect_insecure(so, dir);
  assert_int_equal(chmod(dir, 0775), 0); /* group-writable */
  expect_insecure(so, dir);

  assert_int_equal(chmod(dir, 01777), 0);
  assert_ok(try_load(so, NULL));
  assert_int_equal(torc_device_count("testdev"), 1);
}

/* A plugin file writable by group or others is refused. */
static void test_insecure_file(void **state) {
  (void)state;
  char dir[PATH_MAX], so[PATH_MAX + 32];
  private_copy(dir, so);
  assert_int_equal(chmod(so, 0757), 0);
  expect_insecure(so, so);
  assert_int_equal(chmod(so, 0775), 0);
  expect_insecure(so, so);
  assert_int_equal(chmod(so, 0755), 0);
  assert_ok(try_load(so, NULL));
}

/* allow_insecure loads it anyway, with a warning naming the folder. */
static void test_allow_insecure(void **state) {
  (void)state;
  char dir[PATH_MAX], so[PATH_MAX + 32];
  private_copy(dir, so);
  assert_int_equal(chmod(dir, 0777), 0);
  torc_plugin_opts opts = {0};
  opts.allow_insecure = 1;
  assert_ok(try_load(so, &opts));
  assert_int_equal(torc_device_count("testdev"), 1);
  assert_contains(log_buf, "[1] "); /* TORC_LOG_WARN */
  assert_contains(log_buf, dir);
  torc_shutdown();

  /* The same through a configuration file: [plugins] allow_insecure. */
  log_buf[0] = '\0';
  char ini[2 * PATH_MAX];
  snprintf(ini, sizeof ini,
           "[plugins]\n"
           "allow_insecure = yes\n"
           "[plugin.goodkeys]\n"
           "module = %s\n",
           so);
  if (apply_ini(ini) != TORC_OK) {
    print_error("torc_config_apply: %s\n", err_msg);
    fail();
  }
  assert_int_equal(torc_device_count("testdev"), 1);
  assert_contains(log_buf, "[1] ");
  assert_contains(log_buf, dir);
}

/* A file or folder owned by another user (not root) is refused. */
static void test_foreign_owner(void **state) {
  (void)state;
  if (geteuid() != 0) {
    print_message("not root: cannot give a file to another user; ownership "
                  "checks skipped\n");
    skip();
  }
  const uid_t other = 65534; /* nobody */
  char dir[PATH_MAX], so[PATH_MAX + 32];
  private_copy(dir, so);
  assert_int_equal(chown(so, other, (gid_t)-1), 0);
  expect_insecure(so, so);
  assert_int_equal(chown(so, 0, (gid_t)-1), 0);
  assert_int_equal(chown(dir, other, (gid_t)-1), 0);
  expect_insecure(so, dir);
  assert_int_equal(chown(dir, 0, (gid_t)-1), 0);
  assert_ok(try_load(so, NULL));
}

/* ======================================================================
 * Through a configuration file
 * ==================================================================== */

static torc_status apply_ini(const char *text) {
  torc_config *cfg = torc_config_parse(text, "test.ini");
  if (cfg == NULL) {
    snprintf(err_msg, sizeof err_msg, "%s", torc_last_error());
    print_error("parsing test.ini: %s\n", err_msg);
    fail();
  }
  torc_status st = torc_config_apply(cfg);
  snprintf(err_msg, sizeof err_msg, "%s", st ? torc_last_error() : "");
  torc_config_free(cfg);
  return st;
}

/* required = no: the failure is a warning and the next plugin loads. */
static void test_config_optional_plugin_fails(void **state) {
  (void)state;
  char ini[2 * PATH_MAX];
  snprintf(ini, sizeof ini,
           "[plugins]\n"
           "path = %s\n"
           "[plugin.missing_dep]\n"
           "module = missing_dep\n"
           "required = no\n"
           "[plugin.goodkeys]\n"
           "module = goodkeys\n"
           "devices = 2\n",
           plugin_dir);
  if (apply_ini(ini) != TORC_OK) {
    print_error("torc_config_apply: %s\n", err_msg);
    fail();
  }
  assert_contains(log_buf, "[1] "); /* a warning */
  assert_contains(log_buf, "missing_dep");
  assert_contains(log_buf, "libtorc_missing_dep.so.1");
  assert_int_equal(torc_plugin_count(), 1);
  assert_int_equal(torc_device_count("testdev"), 2);
}

/* required (the default): the failure stops apply, naming file and line. */
static void test_config_required_plugin_fails(void **state) {
  (void)state;
  char ini[2 * PATH_MAX];
  snprintf(ini, sizeof ini,
           "[plugins]\n"
           "path = %s\n"
           "[plugin.missing_dep]\n"
           "module = missing_dep\n",
           plugin_dir);
  assert_int_equal(apply_ini(ini), TORC_ERR_PLUGIN);
  print_message("    %s\n", err_msg);
  assert_contains(err_msg, "test.ini:3:"); /* the [plugin.missing_dep] line */
  assert_contains(err_msg, "libtorc_missing_dep.so.1");
  assert_int_equal(torc_plugin_count(), 0);
}

/* A misspelt plugin key in the INI: an error at its line, with the keys
 * the plugin accepts. */
static void test_config_unknown_key(void **state) {
  (void)state;
  char ini[2 * PATH_MAX];
  snprintf(ini, sizeof ini,
           "[plugins]\n"
           "path = %s\n"
           "[plugin.goodkeys]\n"
           "module = goodkeys\n"
           "devicez = 2\n",
           plugin_dir);
  assert_int_equal(apply_ini(ini), TORC_ERR_CONFIG);
  print_message("    %s\n", err_msg);
  assert_contains(err_msg, "test.ini:5");
  assert_contains(err_msg, "devicez");
  assert_contains(err_msg, "devices");
  assert_contains(err_msg, "greeting");
  assert_int_equal(torc_plugin_count(), 0);
}

/* A device with no kernels: an op there names the devices that have it;
 * with [torc] fallback = cpu it runs on the cpu with copies, logged once. */
static void test_missing_kernel_and_fallback(void **state) {
  (void)state;
  char ini[2 * PATH_MAX];
  snprintf(ini, sizeof ini,
           "[plugins]\n"
           "path = %s\n"
           "[plugin.goodkeys]\n"
           "module = goodkeys\n",
           plugin_dir);
  if (apply_ini(ini) != TORC_OK) {
    print_error("torc_config_apply: %s\n", err_msg);
    fail();
  }
  test_load_plugin("ref");
  torc_device dev;
  assert_ok(torc_device_parse("testdev:0", &dev));
  const float v[3] = {0, 1, 2};
  torc_tensor *t = torc_from_host(v, TORC_SHAPE(3), TORC_F32, dev);
  assert_torc(t);
  assert_null(torc_exp(t));
  assert_error(TORC_ERR_NO_KERNEL, "no kernel for op 'exp' with dtype f32 on "
                                   "testdev:0");
  assert_contains(torc_last_error(), "Devices that have it: cpu");
  assert_contains(torc_last_error(), "fallback = cpu");

  torc_config *cfg = torc_config_parse("[torc]\nfallback = cpu\n", "fb.ini");
  assert_non_null(cfg);
  assert_ok(torc_config_apply(cfg));
  torc_config_free(cfg);
  log_buf[0] = '\0';
  torc_tensor *e1 = torc_exp(t), *e2 = torc_exp(t);
  assert_torc(e1);
  assert_torc(e2);
  assert_true(torc_device_eq(torc_device_of(e1), dev));
  float back[3];
  assert_ok(torc_to_host(e1, back, sizeof back));
  for (int i = 0; i < 3; i++)
    assert_true(fabsf(back[i] - expf(v[i])) < 1e-6f * expf(v[i]));
  assert_contains(log_buf, "running it on the cpu");
  /* logged once per (op, device), not per call */
  const char *first = strstr(log_buf, "running it on the cpu");
  assert_null(strstr(first + 1, "running it on the cpu"));
  torc_release(t), torc_release(e1), torc_release(e2);
}

int main(void) {
  plugin_dir = getenv("TORC_TEST_PLUGIN_DIR");
  if (plugin_dir == NULL || *plugin_dir == '\0') {
    printf("test_plugin_keys: TORC_TEST_PLUGIN_DIR is unset; run it "
           "through `make check`, which builds the test plugins and sets "
           "it\n");
    return TEST_SKIP_STATUS;
  }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_keys_reach_the_plugin),
      T(test_missing_kernel_and_fallback),
      T(test_key_defaults),
      T(test_unknown_key),
      T(test_bad_key_value),
      T(test_device_of_a_plugin),
      T(test_slots_beyond_struct_size),
      T(test_load_twice_is_noop),
      T(test_shutdown_then_reload),
      T(test_insecure_folder),
      T(test_insecure_file),
      T(test_allow_insecure),
      T(test_foreign_owner),
      T(test_config_optional_plugin_fails),
      T(test_config_required_plugin_fails),
      T(test_config_unknown_key),
  };
#undef T
  return cmocka_run_group_tests_name("plugin_keys", tests, NULL, NULL);
}
