/* tests/test_config_get.c — the public calls a layer above the core builds
 * with: a schema table of its own (torc_config_schema_add), its section
 * read typed with the schema's defaults and checks (torc_config_find,
 * _value, _get_int/_double/_bool), errors with the file and line
 * (torc_config_error); the sweep for stale temporary files
 * (torc_safetensors_remove_stale_temps); and a scheduler for a trainer
 * that runs the warm-up itself (torc_scheduler_from_config_ex).
 */
#include <math.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static const torc_config_row lib_rows[] = {
    {"mylib", NULL, TORC_CONFIG_SECTION, NULL, NULL, 0, "a library's section"},
    {"mylib", "n", TORC_CONFIG_INT, "3", "1..10", 0, "a count"},
    {"mylib", "on", TORC_CONFIG_BOOL, "no", NULL, 0, "a switch"},
    {"mylib", "x", TORC_CONFIG_FLOAT, "0.5", "0..", 0, "a number"},
    {"mylib", "name", TORC_CONFIG_STRING, NULL, "a name", 0, "no default"},
    {"mylib", "out", TORC_CONFIG_PATH, NULL, NULL, 0, "a file"},
    {NULL, NULL, TORC_CONFIG_SECTION, NULL, NULL, 0, NULL}};

static void test_schema_and_reads(void **state) {
  (void)state;
  assert_ok(torc_config_schema_add(lib_rows));
  assert_ok(torc_config_schema_add(lib_rows)); /* twice: a no-op */
  char *help = torc_config_help();
  assert_non_null(help);
  assert_contains(help, "[mylib]");
  free(help);

  torc_config *cfg = torc_config_parse(
      "[mylib]\nn = 5\non = yes\nname = abc\nout = sub/f.txt\n", "lib.ini");
  assert_torc(cfg);
  int i = torc_config_find(cfg, "mylib");
  assert_int_equal(i, 0);
  assert_int_equal(torc_config_find(cfg, "other"), -1);
  assert_int_equal(torc_config_find(NULL, "mylib"), -1);
  int64_t n = 0;
  int on = 0;
  double x = 0;
  assert_ok(torc_config_get_int(cfg, i, "n", &n));
  assert_int_equal(n, 5);
  assert_ok(torc_config_get_bool(cfg, i, "on", &on));
  assert_int_equal(on, 1);
  assert_ok(torc_config_get_double(cfg, i, "x", &x)); /* the default */
  assert_true(x == 0.5);
  assert_string_equal(torc_config_value(cfg, i, "x"), "0.5");
  assert_string_equal(torc_config_value(cfg, i, "out"), "sub/f.txt");
  assert_null(torc_config_value(cfg, i, "missing"));
  /* Of the wrong type, absent with no default, NULL arguments. */
  assert_int_equal(torc_config_get_int(cfg, i, "name", &n), TORC_ERR_CONFIG);
  assert_error(TORC_ERR_CONFIG, "lib.ini:4: key 'name' in [mylib]: 'abc' is "
                                "not an integer");
  assert_int_equal(n, 5);
  torc_config_free(cfg);
  cfg = torc_config_parse("[mylib]\n", "lib.ini");
  assert_torc(cfg);
  assert_int_equal(torc_config_get_int(cfg, 0, "name", &n), TORC_ERR_CONFIG);
  assert_error(TORC_ERR_CONFIG, "torc_config_get_int: the key is not set and "
                                "has no default");
  assert_int_equal(torc_config_get_int(cfg, 0, "n", NULL), TORC_ERR_NULL);
  /* A builder's error names the file and line. */
  torc_config_free(cfg);
  cfg = torc_config_parse("[mylib]\n\nn = 7\n", "lib.ini");
  assert_torc(cfg);
  assert_int_equal(
      torc_config_error(cfg, 0, "n", TORC_ERR_CONFIG, "%d is too many here", 7),
      TORC_ERR_CONFIG);
  assert_error(TORC_ERR_CONFIG,
               "lib.ini:3: key 'n' in [mylib]: 7 is too many here");
  assert_int_equal(
      torc_config_error(cfg, 0, NULL, TORC_ERR_INVALID, "the section"),
      TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "lib.ini:1: [mylib]: the section");
  torc_config_free(cfg);
  /* The schema checks values when a file is read. */
  assert_null(torc_config_parse("[mylib]\nn = 11\n", "lib.ini"));
  assert_error(TORC_ERR_CONFIG, "lib.ini:2");
  assert_contains(torc_last_error(), "from 1 to 10");
  assert_null(torc_config_parse("[mylib]\nm = 1\n", "lib.ini"));
  assert_error(TORC_ERR_CONFIG, "'m'");
}

static void test_schema_refuses_bad_rows(void **state) {
  (void)state;
  static const torc_config_row bad_enum[] = {
      {"badlib", NULL, TORC_CONFIG_SECTION, NULL, NULL, 0, "x"},
      {"badlib", "k", TORC_CONFIG_ENUM, NULL, NULL, 0, "no values"},
      {NULL, NULL, TORC_CONFIG_SECTION, NULL, NULL, 0, NULL}};
  assert_int_equal(torc_config_schema_add(bad_enum), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "torc_config_schema_add: row 1 ([badlib] k)");
  /* Nothing was added: the section is unknown. */
  assert_null(torc_config_parse("[badlib]\n", "bad.ini"));
  static const torc_config_row twice[] = {
      {"train", "epochs", TORC_CONFIG_INT, "1", NULL, 0, "again"},
      {NULL, NULL, TORC_CONFIG_SECTION, NULL, NULL, 0, NULL}};
  assert_int_equal(torc_config_schema_add(twice), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "already defined by another table");
  assert_int_equal(torc_config_schema_add(NULL), TORC_ERR_INVALID);
}

static int want_name(const char *name, void *user) {
  return strcmp(name, (const char *)user) == 0;
}

/* A temporary file of a process that is gone, last changed before this
 * one started, is removed when its name is wanted; others stay. */
static void test_remove_stale_temps(void **state) {
  (void)state;
  char dir[512];
  assert_int_equal(test_make_tmpdir(dir, sizeof dir, "torc-stale"), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(0);
  assert_int_equal(waitpid(pid, NULL, 0), pid);
  char stale[1024], other[1024], mine[1024];
  snprintf(stale, sizeof stale, "%s/.x.safetensors.tmp.%ld.0", dir, (long)pid);
  snprintf(other, sizeof other, "%s/.y.safetensors.tmp.%ld.0", dir, (long)pid);
  snprintf(mine, sizeof mine, "%s/x.safetensors", dir);
  const char *files[] = {stale, other, mine};
  struct timeval old[2] = {{.tv_sec = time(NULL) - 3600},
                           {.tv_sec = time(NULL) - 3600}};
  for (int k = 0; k < 3; k++) {
    test_write_file(files[k], "x", 1);
    assert_int_equal(utimes(files[k], old), 0);
  }
  torc_safetensors_remove_stale_temps(dir, want_name, "x.safetensors");
  assert_int_equal(access(stale, F_OK), -1);
  assert_int_equal(access(other, F_OK), 0);
  assert_int_equal(access(mine, F_OK), 0);
  torc_safetensors_remove_stale_temps(dir, NULL, NULL); /* ignored */
  for (int k = 1; k < 3; k++)
    unlink(files[k]);
  rmdir(dir);
}

/* cosine without t_max takes the run's length; the trainer's warm-up keys
 * are left out (the lr starts at lr, not at a tenth of it). */
static void test_scheduler_ex(void **state) {
  (void)state;
  torc_config *cfg = torc_config_parse(
      "[plugin.ref]\nmodule = ref\n[plugin.optim]\nmodule = optim\n"
      "[model]\ninput = 2\n[layer]\ntype = linear\nout_features = 1\n"
      "[optimizer]\ntype = sgd\nlr = 0.1\n"
      "[scheduler]\ntype = cosine\nwarmup_epochs = 1\n",
      "sched.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  torc_module *m = torc_module_from_config(cfg, NULL, NULL);
  assert_torc(m);
  torc_optimizer *opt = torc_optimizer_from_config(cfg, m);
  assert_torc(opt);
  torc_scheduler *s = torc_scheduler_from_config_ex(cfg, opt, 1, 4);
  assert_torc(s);
  assert_true(fabs(torc_optimizer_get_lr(opt, 0) - 0.1) < 1e-12);
  assert_ok(torc_scheduler_step(s, NAN));
  assert_ok(torc_scheduler_step(s, NAN));
  assert_true(fabs(torc_optimizer_get_lr(opt, 0) - 0.05) < 1e-9);
  torc_scheduler_free(s);
  torc_optimizer_free(opt);
  torc_module_free(m);
  torc_config_free(cfg);

  cfg = torc_config_parse("[scheduler]\ntype = none\n", "none.ini");
  assert_torc(cfg);
  torc_clear_error();
  assert_null(torc_scheduler_from_config_ex(cfg, NULL, 1, 4));
  assert_int_equal(torc_last_status(), TORC_OK);
  torc_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_and_reads),
      cmocka_unit_test(test_schema_refuses_bad_rows),
      cmocka_unit_test(test_remove_stale_temps),
      cmocka_unit_test(test_scheduler_ex),
  };
  return cmocka_run_group_tests(tests, NULL, test_teardown_all);
}
