/* tests/test_config.c — the INI configuration layer: parsing, validation
 * messages (file:line, key, accepted values, suggestions), --set overrides,
 * repeated sections, and applying [torc], [plugin.NAME] and [device].
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw, symlink, setenv */
#include <ftw.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

/* The private schema API: tests reach it because torc__config_schema_add
 * is exported from libtorc. */
#include "../core/internal.h"

/* Sections only these tests know: a repeatable one (like [layer]) and one
 * with a key of every type. */
static const torc__config_row test_rows[] = {
    {"tlayer", NULL, TORC__CFG_SECTION, NULL, NULL, TORC__CFG_REPEAT,
     "a repeatable section"},
    {"tlayer", "type", TORC__CFG_ENUM, NULL, "conv|relu|linear", 0,
     "layer kind"},
    {"tlayer", "size", TORC__CFG_INT, "1", "1..4096", 0, "width"},
    {"tneed", "what", TORC__CFG_STRING, NULL, NULL, TORC__CFG_REQUIRED,
     "a required key"},
    {"ttypes", "ratio", TORC__CFG_FLOAT, "0.5", "0..1", 0, "a fraction"},
    {"ttypes", "lr", TORC__CFG_FLOAT, NULL, NULL, 0, "any number"},
    {"ttypes", "cache", TORC__CFG_BYTES, "1M", NULL, 0, "a size"},
    {"ttypes", "data", TORC__CFG_PATH, NULL, NULL, 0, "a file"},
    {"ttypes", "flag", TORC__CFG_BOOL, "no", NULL, 0, "a flag"},
    {"ttypes", "name", TORC__CFG_STRING, NULL, "a name", 0, "a string"},
    {NULL, NULL, TORC__CFG_SECTION, NULL, NULL, 0, NULL}};

/* ---- fixtures: a temporary folder holding the INI files ---- */

static char tmpdir[] = "/tmp/torc-test-config-XXXXXX";
static char cfgpath[512];

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static int group_setup(void **state) {
  (void)state;
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    return -1;
  }
  if (torc__config_schema_add(test_rows) != TORC_OK) {
    fprintf(stderr, "schema: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

static int test_setup(void **state) {
  (void)state;
  torc_clear_error();
  return 0;
}

static int test_teardown(void **state) {
  (void)state;
  torc_set_log_callback(NULL, NULL);
  torc_shutdown();
  return 0;
}

/* Writes `text` to TMPDIR/name and returns its path (static buffer). */
static const char *write_file(const char *name, const char *text) {
  snprintf(cfgpath, sizeof cfgpath, "%s/%s", tmpdir, name);
  FILE *f = fopen(cfgpath, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
  assert_int_equal(fclose(f), 0);
  return cfgpath;
}

/* Loads `text` as cfg.ini; asserts it fails with TORC_ERR_CONFIG and that
 * the message contains each of the NULL-terminated needles. */
static void expect_load_error(const char *text, ...) {
  torc_config *cfg = torc_config_load(write_file("cfg.ini", text));
  if (cfg != NULL) {
    torc_config_free(cfg);
    print_error("expected an error for:\n%s\n", text);
    fail();
  }
  assert_int_equal(torc_last_status(), TORC_ERR_CONFIG);
  va_list ap;
  va_start(ap, text);
  for (const char *n = va_arg(ap, const char *); n;
       n = va_arg(ap, const char *))
    assert_contains(torc_last_error(), n);
  va_end(ap);
}

/* ---- parsing and reading ---- */

static void test_good_file(void **state) {
  (void)state;
  const char *text =
      "\xEF\xBB\xBF; a BOM, then comments of both kinds\n"
      "# full-line comment\n"
      "[torc]\n"
      "seed = 42            ; inline comment\n"
      "  threads = 2\r\n" /* indented key and a CRLF line ending */
      "deterministic = yes\n"
      "fallback = cpu\n"
      "\n"
      "[plugins]\n"
      "path = plugs:/opt/torc/plugins\n"
      "[plugin.ref]\n"
      "module = ref\n"
      "[plugin.mine]\n"
      "module = lib/mine.so\n"
      "required = no\n"
      "priority = -3\n"
      "greeting = hello world\n"
      "[device]\n"
      "type = sim:0\n"
      "[ttypes]\n"
      "data = data/train.gz\n"
      "ratio = 0.25\n"
      "cache = 512K\n";
  const char *path = write_file("good.ini", text);
  torc_config *cfg = torc_config_load(path);
  assert_torc(cfg);
  assert_string_equal(torc_config_path(cfg), path);
  assert_string_equal(torc_config_get(cfg, "torc", "seed"), "42");
  assert_string_equal(torc_config_get(cfg, "torc", "threads"), "2");
  assert_string_equal(torc_config_get(cfg, "torc", "deterministic"), "yes");
  assert_string_equal(torc_config_get(cfg, "torc", "fallback"), "cpu");
  assert_int_equal(torc_config_line(cfg, "torc", "seed"), 4);
  assert_int_equal(torc_config_line(cfg, "torc", "threads"), 5);
  assert_int_equal(torc_config_line(cfg, "torc", "fallback"), 7);
  /* Relative paths resolve against the file's folder, absolute ones stay. */
  char want[1024];
  snprintf(want, sizeof want, "%s/plugs:/opt/torc/plugins", tmpdir);
  assert_string_equal(torc_config_get(cfg, "plugins", "path"), want);
  snprintf(want, sizeof want, "%s/lib/mine.so", tmpdir);
  assert_string_equal(torc_config_get(cfg, "plugin.mine", "module"), want);
  snprintf(want, sizeof want, "%s/data/train.gz", tmpdir);
  assert_string_equal(torc_config_get(cfg, "ttypes", "data"), want);
  /* A module given by name is not a path. */
  assert_string_equal(torc_config_get(cfg, "plugin.ref", "module"), "ref");
  /* Plugin keys are kept as written for the plugin to check. */
  assert_string_equal(torc_config_get(cfg, "plugin.mine", "greeting"),
                      "hello world");
  assert_string_equal(torc_config_get(cfg, "device", "type"), "sim:0");
  /* Absent keys and sections. */
  assert_null(torc_config_get(cfg, "torc", "nope"));
  assert_null(torc_config_get(cfg, "nope", "seed"));
  assert_int_equal(torc_config_line(cfg, "torc", "nope"), 0);
  /* Sections, in order. */
  assert_int_equal(torc_config_section_count(cfg), 6);
  static const char *const names[] = {"torc",        "plugins", "plugin.ref",
                                      "plugin.mine", "device",  "ttypes"};
  for (int i = 0; i < 6; i++)
    assert_string_equal(torc_config_section_name(cfg, i), names[i]);
  assert_null(torc_config_section_name(cfg, 6));
  assert_null(torc_config_section_name(cfg, -1));
  assert_string_equal(torc_config_section_get(cfg, 3, "priority"), "-3");
  assert_null(torc_config_section_get(cfg, 9, "priority"));
  torc_config_free(cfg);
}

static void test_parse_string(void **state) {
  (void)state;
  torc_config *cfg = torc_config_parse("[ttypes]\ndata = rel/x.bin\n"
                                       "[torc]\nthreads=3\n",
                                       "inline.ini");
  assert_torc(cfg);
  assert_string_equal(torc_config_path(cfg), "inline.ini");
  /* From a string, relative paths stay relative to the current folder. */
  assert_string_equal(torc_config_get(cfg, "ttypes", "data"), "rel/x.bin");
  assert_int_equal(torc_config_line(cfg, "torc", "threads"), 4);
  torc_config_free(cfg);
  /* Errors name the given name. */
  assert_null(torc_config_parse("[torc]\nthreads = x\n", "inline.ini"));
  assert_error(TORC_ERR_CONFIG, "inline.ini:2: key 'threads' in [torc]");
  torc_config_free(NULL); /* ignored */
}

static void test_repeated_sections_keep_order(void **state) {
  (void)state;
  torc_config *cfg = torc_config_load(
      write_file("layers.ini", "[tlayer]\ntype = conv\nsize = 32\n"
                               "[torc]\nseed = 1\n"
                               "[tlayer]\n" /* an occurrence with no keys */
                               "[tlayer]\ntype = linear\nsize = 10\n"
                               "[tlayer]\ntype = relu\n"));
  assert_torc(cfg);
  assert_int_equal(torc_config_section_count(cfg), 5);
  static const char *const names[] = {"tlayer", "torc", "tlayer", "tlayer",
                                      "tlayer"};
  static const char *const types[] = {"conv", NULL, NULL, "linear", "relu"};
  static const char *const sizes[] = {"32", NULL, NULL, "10", NULL};
  for (int i = 0; i < 5; i++) {
    assert_string_equal(torc_config_section_name(cfg, i), names[i]);
    const char *t = torc_config_section_get(cfg, i, "type");
    const char *s = torc_config_section_get(cfg, i, "size");
    if (types[i])
      assert_string_equal(t, types[i]);
    else
      assert_null(t);
    if (sizes[i])
      assert_string_equal(s, sizes[i]);
    else
      assert_null(s);
  }
  /* get reads the first occurrence. */
  assert_string_equal(torc_config_get(cfg, "tlayer", "type"), "conv");
  assert_int_equal(torc_config_line(cfg, "tlayer", "size"), 3);
  /* The same key in two occurrences is not "given twice". */
  torc_config_free(cfg);
}

/* ---- one test per error the parser reports ---- */

static void test_unknown_section(void **state) {
  (void)state;
  expect_load_error("[torc]\nseed = 1\n[tocr]\nthreads = 2\n",
                    "cfg.ini:3: unknown section [tocr]", "did you mean [torc]?",
                    "known sections: [torc], [plugins], [plugin.NAME], "
                    "[device]",
                    NULL);
  /* Nothing close: no suggestion, but the list. */
  expect_load_error("[zzzzzzzz]\n",
                    "cfg.ini:1: unknown section [zzzzzzzz]; "
                    "known sections: [torc]",
                    NULL);
  assert_null(strstr(torc_last_error(), "did you mean"));
  expect_load_error("[plugin]\nmodule = ref\n",
                    "cfg.ini:1: unknown section [plugin]; did you mean "
                    "[plugin.NAME]?",
                    NULL);
  /* The NAME of [plugin.NAME] has rules of its own. */
  expect_load_error("[plugin.a b]\nmodule = ref\n",
                    "cfg.ini:1: section [plugin.a b]: the NAME in "
                    "[plugin.NAME] may contain only letters, digits, '_' "
                    "and '-'",
                    NULL);
}

static void test_unknown_key(void **state) {
  (void)state;
  expect_load_error("[torc]\nseed = 1\nthread = 2\n",
                    "cfg.ini:3: key 'thread' in [torc]: unknown key",
                    "did you mean 'threads'?",
                    "[torc] accepts: seed, threads, deterministic, fallback",
                    NULL);
  /* A misspelling beyond reach gets the list, no guess. */
  expect_load_error("[device]\ncolour = red\n",
                    "cfg.ini:2: key 'colour' in [device]: unknown key; "
                    "[device] accepts: type",
                    NULL);
  assert_null(strstr(torc_last_error(), "did you mean"));
}

static void test_bad_value_integer(void **state) {
  (void)state;
  expect_load_error("[torc]\nseed = 1\nthreads = two\n",
                    "cfg.ini:3: key 'threads' in [torc]: 'two' is not an "
                    "integer; expected an integer >= 1",
                    NULL);
  expect_load_error("[torc]\nthreads = 0\n",
                    "cfg.ini:2: key 'threads' in [torc]: '0' is out of "
                    "range; expected an integer >= 1",
                    NULL);
  expect_load_error("[torc]\nthreads = 99999999999999999999999\n",
                    "cfg.ini:2: key 'threads' in [torc]: "
                    "'99999999999999999999999' is out of range",
                    NULL);
  expect_load_error("[torc]\nseed = -1\n",
                    "cfg.ini:2: key 'seed' in [torc]: '-1' is out of range; "
                    "expected an integer from 0 to 18446744073709551615",
                    NULL);
  expect_load_error("[tlayer]\nsize = 5000\n",
                    "cfg.ini:2: key 'size' in [tlayer]: '5000' is out of "
                    "range; expected an integer from 1 to 4096",
                    NULL);
  expect_load_error("[plugin.x]\nmodule = ref\npriority = high\n",
                    "cfg.ini:3: key 'priority' in [plugin.x]: 'high' is not "
                    "an integer",
                    NULL);
}

static void test_bad_value_other_types(void **state) {
  (void)state;
  expect_load_error("[torc]\ndeterministic = maybe\n",
                    "cfg.ini:2: key 'deterministic' in [torc]: 'maybe' is "
                    "not a boolean; expected yes or no",
                    NULL);
  expect_load_error("[torc]\nfallback = gpu\n",
                    "cfg.ini:2: key 'fallback' in [torc]: 'gpu' is not one "
                    "of: error, cpu",
                    NULL);
  expect_load_error("[torc]\nfallback = cpus\n",
                    "'cpus' is not one of: error, cpu (did you mean 'cpu'?)",
                    NULL);
  expect_load_error("[ttypes]\nratio = 1.5\n",
                    "cfg.ini:2: key 'ratio' in [ttypes]: '1.5' is out of "
                    "range; expected a number from 0 to 1",
                    NULL);
  expect_load_error("[ttypes]\nlr = fast\n",
                    "cfg.ini:2: key 'lr' in [ttypes]: 'fast' is not a "
                    "number; expected a number",
                    NULL);
  expect_load_error("[ttypes]\nlr = nan\n", "'nan' is not a number", NULL);
  expect_load_error("[ttypes]\ncache = 12Q\n",
                    "cfg.ini:2: key 'cache' in [ttypes]: '12Q' is not a "
                    "size; expected a size in bytes",
                    "512K", NULL);
  expect_load_error("[ttypes]\nname =\n",
                    "cfg.ini:2: key 'name' in [ttypes]: the value is empty; "
                    "expected a name",
                    NULL);
  expect_load_error("[plugin.x]\nmodule = bad name!\n",
                    "cfg.ini:2: key 'module' in [plugin.x]: 'bad name!' is "
                    "not a plugin name or path",
                    NULL);
  /* Every accepted spelling of a boolean and of a size parses. */
  torc_config *cfg = torc_config_parse(
      "[ttypes]\nflag = On\ncache = 2GiB\nratio = 1e-1\nlr = -3\n", "t.ini");
  assert_torc(cfg);
  torc_config_free(cfg);
}

static void test_required_key_missing(void **state) {
  (void)state;
  expect_load_error("[torc]\nseed = 1\n[plugin.ref]\nrequired = yes\n",
                    "cfg.ini:3: section [plugin.ref] has no 'module' key; add "
                    "'module = ...' with a plugin name",
                    NULL);
  expect_load_error("[tneed]\n",
                    "cfg.ini:1: section [tneed] has no 'what' "
                    "key",
                    NULL);
}

static void test_key_given_twice(void **state) {
  (void)state;
  expect_load_error("[torc]\nthreads = 2\nseed = 1\nthreads = 4\n",
                    "cfg.ini:4: key 'threads' in [torc]: given twice in this "
                    "section (first at line 2)",
                    NULL);
}

static void test_section_given_twice(void **state) {
  (void)state;
  expect_load_error("[torc]\nseed = 1\n[device]\ntype = cpu\n[torc]\n"
                    "threads = 2\n",
                    "cfg.ini:5: section [torc] given twice (first at line 1)",
                    NULL);
}

static void test_syntax_errors(void **state) {
  (void)state;
  expect_load_error("[torc]\nseed = 1\nthis is not a line\n",
                    "cfg.ini:3: cannot parse this line: 'this is not a "
                    "line'; expected [section] or key = value",
                    NULL);
  expect_load_error("[torc\nseed = 1\n",
                    "cfg.ini:1: section header '[torc' has no closing ']'",
                    NULL);
  expect_load_error("seed = 1\n[torc]\n",
                    "cfg.ini:1: key 'seed' comes before any [section]", NULL);
  expect_load_error("[]\n", "cfg.ini:1: empty section name", NULL);
  expect_load_error("[torc] extra\n",
                    "cfg.ini:1: unexpected text 'extra' after [torc]", NULL);
  expect_load_error("[torc]\n= 3\n", "cfg.ini:2: [torc]: '=' with no key name",
                    NULL);
  /* An indented line is not a continuation of the value above. */
  expect_load_error("[ttypes]\nname = a,\n    b\n",
                    "cfg.ini:3: cannot parse this line: 'b'",
                    "a value cannot continue on an indented line", NULL);
  /* A NUL byte (a binary file). */
  const char bin[] = "[torc]\nse\0ed = 1\n";
  snprintf(cfgpath, sizeof cfgpath, "%s/bin.ini", tmpdir);
  FILE *f = fopen(cfgpath, "wb");
  assert_non_null(f);
  fwrite(bin, 1, sizeof bin - 1, f);
  fclose(f);
  assert_null(torc_config_load(cfgpath));
  assert_error(TORC_ERR_CONFIG, "bin.ini:2: the line contains a NUL byte");
}

/* Only regular files are read: a FIFO would block the open (or feed it
 * forever), /dev/zero would be read until the size cap, a folder fails
 * later with a worse message. */
static void test_not_regular_files(void **state) {
  (void)state;
  char fifo[512];
  snprintf(fifo, sizeof fifo, "%s/fifo.ini", tmpdir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_null(torc_config_load(fifo));
  assert_error(TORC_ERR_IO, "fifo.ini' is a FIFO, not a regular file");
  unlink(fifo);
  assert_null(torc_config_load("/dev/zero"));
  assert_error(TORC_ERR_IO, "'/dev/zero' is a character device, not a regular");
  assert_null(torc_config_load(tmpdir));
  assert_error(TORC_ERR_IO, "is a directory, not a regular file");
}

static void test_first_error_by_line(void **state) {
  (void)state;
  /* The error on the lowest line is the one reported, whatever its kind
   * and whenever it is found (syntax while reading, values after). */
  expect_load_error("[torc]\nthreads = x\n[device]\ntypo = 1\n",
                    "cfg.ini:2: key 'threads'", NULL);
  expect_load_error("[torc]\nthreads = 1\nnonsense\nthreads = 2\n",
                    "cfg.ini:3: cannot parse", NULL);
}

static void test_long_line(void **state) {
  (void)state;
  char text[1024];
  char value[400];
  memset(value, 'a', 300);
  value[300] = '\0';
  snprintf(text, sizeof text, "[ttypes]\nname = %s\n", value);
  expect_load_error(text,
                    "cfg.ini:2: line longer than 198 characters (it "
                    "has 307)",
                    NULL);
  /* A line of exactly the limit is read whole. */
  value[198 - 7] = '\0'; /* "name = " + 191 */
  snprintf(text, sizeof text, "[ttypes]\nname = %s\n", value);
  torc_config *cfg = torc_config_load(write_file("cfg.ini", text));
  assert_torc(cfg);
  assert_int_equal(strlen(torc_config_get(cfg, "ttypes", "name")), 191);
  torc_config_free(cfg);
  /* Comment lines may be longer. */
  memset(value, 'c', 300);
  value[300] = '\0';
  snprintf(text, sizeof text, "; %s\n[torc]\n# %s\nseed = 3\n", value, value);
  cfg = torc_config_load(write_file("cfg.ini", text));
  assert_torc(cfg);
  assert_string_equal(torc_config_get(cfg, "torc", "seed"), "3");
  torc_config_free(cfg);
}

static void test_missing_file(void **state) {
  (void)state;
  char path[600];
  snprintf(path, sizeof path, "%s/does-not-exist.ini", tmpdir);
  assert_null(torc_config_load(path));
  assert_error(TORC_ERR_IO, path);
  assert_contains(torc_last_error(), "No such file or directory");
  /* A folder is not a file. */
  assert_null(torc_config_load(tmpdir));
  assert_error(TORC_ERR_IO, tmpdir);
  assert_null(torc_config_load(NULL));
  assert_int_equal(torc_last_status(), TORC_ERR_INVALID);
}

/* ---- --set overrides ---- */

static void test_set_overrides(void **state) {
  (void)state;
  torc_config *cfg = torc_config_load(
      write_file("set.ini", "[torc]\nthreads = 2\n[tlayer]\ntype = conv\n"
                            "[tlayer]\ntype = relu\n"));
  assert_torc(cfg);
  /* Replace a key: the line is forgotten. */
  assert_ok(torc_config_set(cfg, "torc.threads=4"));
  assert_string_equal(torc_config_get(cfg, "torc", "threads"), "4");
  assert_int_equal(torc_config_line(cfg, "torc", "threads"), 0);
  /* Add a key, with blanks around the parts. */
  assert_ok(torc_config_set(cfg, " torc.seed = 7 "));
  assert_string_equal(torc_config_get(cfg, "torc", "seed"), "7");
  /* Add a section; a dotted section name splits at the last dot. */
  assert_ok(torc_config_set(cfg, "plugin.sim.memory=1M"));
  assert_string_equal(torc_config_get(cfg, "plugin.sim", "memory"), "1M");
  assert_ok(torc_config_set(cfg, "device.type=sim:0"));
  assert_int_equal(torc_config_section_count(cfg), 5);
  assert_string_equal(torc_config_section_name(cfg, 3), "plugin.sim");
  /* A repeated section: the first occurrence changes. */
  assert_ok(torc_config_set(cfg, "tlayer.type=linear"));
  assert_string_equal(torc_config_section_get(cfg, 1, "type"), "linear");
  assert_string_equal(torc_config_section_get(cfg, 2, "type"), "relu");
  /* A path given on the command line is relative to the current folder. */
  assert_ok(torc_config_set(cfg, "ttypes.data=here.bin"));
  assert_string_equal(torc_config_get(cfg, "ttypes", "data"), "here.bin");

  /* A bad value: the message names the override; nothing changes. */
  assert_int_equal(torc_config_set(cfg, "torc.threads=two"), TORC_ERR_CONFIG);
  assert_error(TORC_ERR_CONFIG, "--set torc.threads=two: key 'threads' in "
                                "[torc]: 'two' is not an integer; expected an "
                                "integer >= 1");
  assert_string_equal(torc_config_get(cfg, "torc", "threads"), "4");
  assert_int_equal(torc_config_set(cfg, "torc.thread=3"), TORC_ERR_CONFIG);
  assert_error(TORC_ERR_CONFIG, "did you mean 'threads'?");
  assert_int_equal(torc_config_set(cfg, "tocr.threads=3"), TORC_ERR_CONFIG);
  assert_error(TORC_ERR_CONFIG, "unknown section [tocr]; did you mean [torc]?");
  assert_int_equal(torc_config_section_count(cfg), 6);
  /* Not an assignment. */
  static const char *const bad[] = {"torcthreads=3", "torc.threads", ".x=1",
                                    "torc.=1", "=1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(torc_config_set(cfg, bad[i]), TORC_ERR_CONFIG);
    assert_error(TORC_ERR_CONFIG, "expected section.key=value");
  }
  assert_int_equal(torc_config_set(NULL, "torc.seed=1"), TORC_ERR_INVALID);
  torc_config_free(cfg);
}

/* ---- registering schemas ---- */

static void test_schema_add_checks_rows(void **state) {
  (void)state;
  static const torc__config_row dup[] = {
      {"torc", "threads", TORC__CFG_INT, NULL, NULL, 0, "again"}, {NULL}};
  assert_int_equal(torc__config_schema_add(dup), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "[torc] threads): already defined");
  static const torc__config_row bad_default[] = {
      {"tbad", "n", TORC__CFG_INT, "ten", "0..", 0, "x"}, {NULL}};
  assert_int_equal(torc__config_schema_add(bad_default), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "default: 'ten' is not an integer");
  static const torc__config_row no_list[] = {
      {"tbad", "e", TORC__CFG_ENUM, NULL, NULL, 0, "x"}, {NULL}};
  assert_int_equal(torc__config_schema_add(no_list), TORC_ERR_INVALID);
  static const torc__config_row bad_pattern[] = {
      {"t*x", "e", TORC__CFG_INT, NULL, NULL, 0, "x"}, {NULL}};
  assert_int_equal(torc__config_schema_add(bad_pattern), TORC_ERR_INVALID);
  /* Nothing of a rejected table was added. */
  assert_null(torc_config_parse("[tbad]\nn = 1\n", "t.ini"));
  assert_error(TORC_ERR_CONFIG, "unknown section [tbad]");
  /* Adding the same table again is a no-op. */
  assert_ok(torc__config_schema_add(test_rows));
}

/* ---- applying ---- */

/* Captures warnings. */
static char logged[4096];
static void log_capture(int level, const char *line, void *user) {
  (void)user;
  if (level == TORC_LOG_WARN) {
    size_t len = strlen(logged);
    snprintf(logged + len, sizeof logged - len, "%s\n", line);
  }
}

static void test_apply_loads_plugins(void **state) {
  (void)state;
  torc_config *cfg = torc_config_load(
      write_file("apply.ini", "[torc]\nthreads = 3\nseed = 5\n"
                              "[plugin.ref]\nmodule = ref\n"
                              "[plugin.sim]\nmodule = sim\nmemory = 1M\n"
                              "devices = 2\n"));
  assert_torc(cfg);
  torc_manual_seed(99);
  uint64_t seed = 0, offset = 0;
  assert_ok(torc_config_apply(cfg));
  assert_int_equal(torc_get_num_threads(), 3);
  torc_generator_get_state(NULL, &seed, &offset);
  assert_int_equal(seed, 5);
  assert_int_equal(offset, 0);
  assert_int_equal(torc_plugin_count(), 2);
  torc_plugin_summary s;
  assert_ok(torc_plugin_get(0, &s));
  assert_string_equal(s.name, "ref");
  assert_ok(torc_plugin_get(1, &s));
  assert_string_equal(s.name, "sim");
  /* The plugin's own keys reached it. */
  assert_int_equal(torc_device_count("sim"), 2);
  torc_config_free(cfg);
  /* Keys left out keep the library's current settings. */
  torc_manual_seed(77);
  assert_int_equal(torc_deterministic_algorithms_enabled(), 0);
  cfg = torc_config_parse("[torc]\ndeterministic = yes\n", "d.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  torc_generator_get_state(NULL, &seed, NULL);
  assert_int_equal(seed, 77);
  assert_int_equal(torc_get_num_threads(), 3);
  /* deterministic = yes asks the backends for deterministic algorithms */
  assert_int_equal(torc_deterministic_algorithms_enabled(), 1);
  torc_config_free(cfg);
  cfg = torc_config_parse("[torc]\ndeterministic = no\n", "d.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  assert_int_equal(torc_deterministic_algorithms_enabled(), 0);
  torc_config_free(cfg);
}

static void test_apply_search_path(void **state) {
  (void)state;
  /* [plugins] path is relative to the INI file's folder: put a link to the
   * build tree's ref plugin in TMPDIR/plugs and hide TORC_PLUGIN_PATH. */
  const char *tpp = getenv("TORC_PLUGIN_PATH");
  if (tpp == NULL || strchr(tpp, ':')) {
    print_message("skipped: TORC_PLUGIN_PATH is not one folder\n");
    return;
  }
  char saved[1024], dir[600], link[700], target[1200];
  snprintf(saved, sizeof saved, "%s", tpp);
  snprintf(dir, sizeof dir, "%s/plugs", tmpdir);
  snprintf(link, sizeof link, "%s/ref.so", dir);
  snprintf(target, sizeof target, "%s/ref.so", saved);
  mkdir(dir, 0700);
  unlink(link);
  assert_int_equal(symlink(target, link), 0);
  unsetenv("TORC_PLUGIN_PATH");
  torc_config *cfg = torc_config_load(write_file(
      "paths.ini", "[plugins]\npath = plugs\n[plugin.ref]\nmodule = ref\n"));
  torc_status st = cfg ? torc_config_apply(cfg) : torc_last_status();
  setenv("TORC_PLUGIN_PATH", saved, 1);
  assert_torc(cfg);
  if (st != TORC_OK) {
    print_error("apply: %s\n", torc_last_error());
    fail();
  }
  assert_int_equal(torc_plugin_count(), 1);
  torc_plugin_summary s;
  assert_ok(torc_plugin_get(0, &s));
  assert_string_equal(s.name, "ref");
  torc_config_free(cfg);
}

static void test_apply_unknown_plugin_key(void **state) {
  (void)state;
  torc_config *cfg = torc_config_load(
      write_file("cfg.ini", "[torc]\nseed = 1\n[plugin.sim]\nmodule = sim\n"
                            "devices = 1\nmemroy = 1M\n"));
  assert_torc(cfg); /* plugin keys are the plugin's to check */
  assert_int_equal(torc_config_apply(cfg), TORC_ERR_CONFIG);
  assert_contains(torc_last_error(), "cfg.ini:6: ");
  assert_contains(torc_last_error(), "memroy");
  assert_contains(torc_last_error(), "[plugin.sim]");
  assert_contains(torc_last_error(), "memory"); /* the keys it has */
  assert_int_equal(torc_plugin_count(), 0);
  torc_config_free(cfg);
}

static void test_apply_optional_plugin_missing(void **state) {
  (void)state;
  logged[0] = '\0';
  torc_set_log_callback(log_capture, NULL);
  torc_config *cfg = torc_config_load(write_file(
      "cfg.ini", "[plugin.ref]\nmodule = ref\n"
                 "[plugin.extra]\nmodule = no_such_plugin_xyz\nrequired = no\n"
                 "[torc]\nthreads = 2\n"));
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  assert_contains(logged, "cfg.ini:3: [plugin.extra] has required = no and "
                          "was not loaded");
  assert_contains(logged, "no_such_plugin_xyz");
  /* The handled failure does not linger as the last error. */
  assert_int_equal(torc_last_status(), TORC_OK);
  assert_int_equal(torc_plugin_count(), 1);
  torc_config_free(cfg);
}

static void test_apply_required_plugin_missing(void **state) {
  (void)state;
  torc_config *cfg = torc_config_load(
      write_file("cfg.ini", "[torc]\nseed = 1\n[plugin.extra]\n"
                            "module = no_such_plugin_xyz\n"));
  assert_torc(cfg);
  assert_int_equal(torc_config_apply(cfg), TORC_ERR_IO);
  assert_contains(torc_last_error(), "cfg.ini:3: ");
  assert_contains(torc_last_error(), "no_such_plugin_xyz");
  torc_config_free(cfg);
  /* A module path that does not exist, relative to the INI's folder. */
  cfg = torc_config_load(
      write_file("cfg.ini", "[plugin.x]\nmodule = ./nowhere/x.so\n"));
  assert_torc(cfg);
  assert_int_equal(torc_config_apply(cfg), TORC_ERR_IO);
  assert_contains(torc_last_error(), "cfg.ini:1: ");
  char want[700];
  snprintf(want, sizeof want, "%s/./nowhere/x.so", tmpdir);
  assert_contains(torc_last_error(), want);
  torc_config_free(cfg);
  /* A plugin section added by --set without a module. */
  cfg = torc_config_parse("[torc]\nseed = 1\n", "s.ini");
  assert_torc(cfg);
  assert_ok(torc_config_set(cfg, "plugin.sim.devices=2"));
  assert_int_equal(torc_config_apply(cfg), TORC_ERR_CONFIG);
  assert_error(TORC_ERR_CONFIG, "[plugin.sim] has no 'module' key");
  torc_config_free(cfg);
}

static void test_device(void **state) {
  (void)state;
  torc_config *cfg = torc_config_load(write_file(
      "cfg.ini", "[plugin.ref]\nmodule = ref\n[plugin.sim]\nmodule = sim\n"
                 "[device]\ntype = sim:0\n"));
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  torc_device dev;
  assert_ok(torc_config_device(cfg, &dev));
  assert_string_equal(torc_device_type_name(dev.type), "sim");
  assert_int_equal(dev.index, 0);
  /* sim:7 does not exist (one device by default). */
  assert_ok(torc_config_set(cfg, "device.type=sim:7"));
  assert_int_not_equal(torc_config_device(cfg, &dev), TORC_OK);
  assert_contains(torc_last_error(), "cfg.ini (--set): key 'type' in "
                                     "[device]: ");
  assert_contains(torc_last_error(), "sim:7");
  torc_config_free(cfg);

  cfg = torc_config_load(write_file(
      "cfg.ini", "[plugin.sim]\nmodule = sim\n[device]\ntype = sim:7\n"));
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  assert_int_equal(torc_config_device(cfg, &dev), TORC_ERR_DEVICE);
  assert_contains(torc_last_error(), "cfg.ini:4: key 'type' in [device]: ");
  assert_contains(torc_last_error(), "sim:7");
  torc_config_free(cfg);

  /* No [device]: the cpu. */
  cfg = torc_config_parse("[torc]\nseed = 1\n", "n.ini");
  assert_torc(cfg);
  dev.type = 5;
  assert_ok(torc_config_device(cfg, &dev));
  assert_true(torc_device_eq(dev, TORC_CPU));
  torc_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
      T(test_good_file),
      T(test_parse_string),
      T(test_repeated_sections_keep_order),
      T(test_unknown_section),
      T(test_unknown_key),
      T(test_bad_value_integer),
      T(test_bad_value_other_types),
      T(test_required_key_missing),
      T(test_key_given_twice),
      T(test_section_given_twice),
      T(test_syntax_errors),
      T(test_not_regular_files),
      T(test_first_error_by_line),
      T(test_long_line),
      T(test_missing_file),
      T(test_set_overrides),
      T(test_schema_add_checks_rows),
      T(test_apply_loads_plugins),
      T(test_apply_search_path),
      T(test_apply_unknown_plugin_key),
      T(test_apply_optional_plugin_missing),
      T(test_apply_required_plugin_missing),
      T(test_device),
#undef T
  };
  return cmocka_run_group_tests_name("config", tests, group_setup,
                                     group_teardown);
}
