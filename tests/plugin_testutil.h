/* tests/plugin_testutil.h — shared by the plugin loader's tests
 * (test_plugin, test_plugin_keys): the test plugins' folder
 * ($TORC_TEST_PLUGIN_DIR), torc's log captured into log_buf, the per-test
 * fixtures, loading with the error captured at once, and temporary
 * folders that teardown removes. Included after testutil.h, once per
 * program. */
#ifndef TORC_PLUGIN_TESTUTIL_H
#define TORC_PLUGIN_TESTUTIL_H

#include <dirent.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "torc/plugin.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static const char *plugin_dir; /* $TORC_TEST_PLUGIN_DIR */

/* Folders made by the current test; teardown removes them, even after a
 * failed assertion. */
static char tmpdirs[4][PATH_MAX];
static int n_tmpdirs;

/* "<plugin_dir>/<name>.so" in one of four rotating buffers. */
static inline const char *tp_path(const char *name) {
  static char bufs[4][PATH_MAX];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, PATH_MAX, "%s/%s.so", plugin_dir, name);
  return b;
}

/* ---- log capture ---- */

static char log_buf[32768];

static inline void log_cb(int level, const char *line, void *user) {
  (void)user;
  size_t used = strlen(log_buf);
  if (used + 1 < sizeof log_buf)
    snprintf(log_buf + used, sizeof log_buf - used, "[%d] %s\n", level, line);
}

/* Number of captured lines containing `needle`. */
static inline int log_count(const char *needle) {
  int n = 0;
  for (const char *p = log_buf; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

static inline int setup(void **state) {
  (void)state;
  log_buf[0] = '\0';
  torc_set_log_level(TORC_LOG_WARN);
  torc_set_log_callback(log_cb, NULL);
  torc_clear_error();
  return 0;
}

static inline void remove_tmpdir(const char *dir);

static inline int teardown(void **state) {
  (void)state;
  torc_shutdown();
  while (n_tmpdirs > 0)
    remove_tmpdir(tmpdirs[--n_tmpdirs]);
  torc_set_log_callback(NULL, NULL);
  torc_set_log_level(TORC_LOG_WARN);
  return 0;
}

/* ---- loading with the error captured at once (the message is only valid
 * until the next torc call) ---- */

static char err_msg[4096];

static inline torc_status try_load(const char *module,
                                   const torc_plugin_opts *opts) {
  torc_status st = torc_plugin_load(module, opts);
  snprintf(err_msg, sizeof err_msg, "%s", st ? torc_last_error() : "");
  return st;
}

/* Asserts loading `module` fails with `want`; leaves the message in
 * err_msg. */
static inline void expect_load_error(const char *module,
                                     const torc_plugin_opts *opts,
                                     torc_status want) {
  int before = torc_plugin_count();
  torc_status st = try_load(module, opts);
  if (st != want) {
    print_error("loading %s: expected %s, got %s: %s\n", module,
                torc_status_name(want), torc_status_name(st), err_msg);
    fail();
  }
  assert_true(err_msg[0] != '\0');
  print_message("    %s: %s\n", torc_status_name(st), err_msg);
  /* One line. */
  assert_null(strchr(err_msg, '\n'));
  assert_int_equal(torc_plugin_count(), before);
}

/* ---- temporary folders ---- */

static inline void make_tmpdir(char *out) {
  const char *base = getenv("TMPDIR");
  snprintf(out, PATH_MAX, "%s/torc-test-plugin.XXXXXX",
           base && *base ? base : "/tmp");
  if (mkdtemp(out) == NULL) {
    print_error("mkdtemp %s: %s\n", out, strerror(errno));
    fail();
  }
  assert_true(n_tmpdirs < 4);
  snprintf(tmpdirs[n_tmpdirs++], PATH_MAX, "%s", out);
}

static inline void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

static inline void copy_file(const char *src, const char *dst, mode_t mode) {
  FILE *in = fopen(src, "rb");
  if (in == NULL) {
    print_error("cannot open %s: %s\n", src, strerror(errno));
    fail();
  }
  FILE *out = fopen(dst, "wb");
  assert_non_null(out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  assert_int_equal(fclose(out), 0);
  assert_int_equal(chmod(dst, mode), 0);
}

/* Removes a folder holding plain files only (and gives it back to us if a
 * test gave it away). */
static inline void remove_tmpdir(const char *dir) {
  if (geteuid() == 0 && chown(dir, 0, (gid_t)-1) != 0)
    print_message("cannot take %s back: %s\n", dir, strerror(errno));
  chmod(dir, 0700);
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  char path[PATH_MAX + 256];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) != 0)
      rmdir(path); /* an empty folder a test made */
  }
  closedir(d);
  rmdir(dir);
}

#endif /* TORC_PLUGIN_TESTUTIL_H */
