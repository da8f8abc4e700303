/* tests/testutil.h — shared helpers for the cmocka tests: loading the build
 * tree's plugins, asserting on error messages, comparing tensors. */
#ifndef TORC_TESTUTIL_H
#define TORC_TESTUTIL_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <unistd.h>

#include "torc/torc.h"

/* The dispatcher's provider pin (core/dispatch.c; exported for tools and
 * tests, not public API): ops run with that plugin's kernels alone. */
TORC_API void torc__dispatch_pin(const char *provider);

/* Exit status automake reads as SKIP. */
#define TEST_SKIP_STATUS 77

/* Asserts `s` contains `needle`, printing both when it does not. */
#define assert_contains(s, needle)                                             \
  do {                                                                         \
    const char *s_ = (s), *n_ = (needle);                                      \
    if (s_ == NULL || strstr(s_, n_) == NULL) {                                \
      print_error("expected \"%s\" in \"%s\"\n", n_, s_ ? s_ : "(null)");      \
      fail();                                                                  \
    }                                                                          \
  } while (0)

/* Asserts the last error contains `needle` and has status `st`. */
#define assert_error(st, needle)                                               \
  do {                                                                         \
    assert_int_equal(torc_last_status(), (st));                                \
    assert_contains(torc_last_error(), (needle));                              \
  } while (0)

/* Asserts a torc call returned TORC_OK, printing the error otherwise. */
#define assert_ok(call)                                                        \
  do {                                                                         \
    torc_status st_ = (call);                                                  \
    if (st_ != TORC_OK) {                                                      \
      print_error("%s failed: %s\n", #call, torc_last_error());                \
      fail();                                                                  \
    }                                                                          \
  } while (0)

/* Asserts a pointer is non-NULL, printing torc_last_error() otherwise. */
#define assert_torc(ptr)                                                       \
  do {                                                                         \
    if ((ptr) == NULL) {                                                       \
      print_error("%s returned NULL: %s\n", #ptr, torc_last_error());          \
      fail();                                                                  \
    }                                                                          \
  } while (0)

/* Loads a build-tree plugin by name (found through TORC_PLUGIN_PATH, which
 * `make check` sets); fails the test with the loader's message if it
 * cannot. */
static inline void test_load_plugin(const char *name) {
  if (torc_plugin_load(name, NULL) != TORC_OK) {
    print_error("cannot load plugin %s: %s\n", name, torc_last_error());
    fail();
  }
}

/* Loads ref, cpu where it was built, and onednn, as a normal run loads
 * them. */
static inline void test_load_ref_cpu_onednn(void) {
  test_load_plugin("ref");
  const char *path = getenv("TORC_PLUGIN_PATH");
  char so[4096];
  snprintf(so, sizeof so, "%s/cpu.so", path ? path : ".");
  if (access(so, R_OK) == 0)
    test_load_plugin("cpu");
  test_load_plugin("onednn");
}

/* 1 when the build tree has plugin `name` (NAME.so on TORC_PLUGIN_PATH);
 * otherwise prints the SKIP line, naming the Debian package configure
 * needs, and returns 0: the test then exits TEST_SKIP_STATUS. */
static inline int test_plugin_built(const char *name, const char *package) {
  const char *path = getenv("TORC_PLUGIN_PATH");
  char so[4096];
  snprintf(so, sizeof so, "%s/%s.so", path ? path : ".", name);
  if (access(so, R_OK) == 0)
    return 1;
  printf("SKIP: the %s plugin was not built (%s is missing; install %s and "
         "configure again)\n",
         name, so, package);
  return 0;
}

/* Parses and applies an INI text (threads, plugins) named `name` for
 * messages: 0, or -1 after printing the error (a group setup's body). */
static inline int test_apply_ini(const char *text, const char *name) {
  torc_config *cfg = torc_config_parse(text, name);
  torc_status st = cfg ? torc_config_apply(cfg) : torc_last_status();
  torc_config_free(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

/* Makes the folder "$TMPDIR/NAME-XXXXXX" (/tmp when TMPDIR is unset or
 * empty) into buf: 0, or -1 after printing why (a group setup's body). */
static inline int test_make_tmpdir(char *buf, size_t size, const char *name) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, size, "%s/%s-XXXXXX", base && *base ? base : "/tmp", name);
  if (mkdtemp(buf) == NULL) {
    fprintf(stderr, "setup: mkdtemp %s: %s\n", buf, strerror(errno));
    return -1;
  }
  return 0;
}

/* Writes the n bytes to path (created or truncated). */
static inline void test_write_file(const char *path, const void *data,
                                   size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* The whole file into a malloc'd buffer, *n its size, with 64 bytes to
 * spare after it (room to append to it before writing it back); the
 * caller frees it. */
static inline unsigned char *test_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    print_error("cannot open %s: %s\n", path, strerror(errno));
    fail();
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len + 64);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return b;
}

/* Group setup that loads ref and sim; teardown shuts torc down. */
static inline int test_setup_ref_sim(void **state) {
  (void)state;
  if (torc_plugin_load("ref", NULL) != TORC_OK ||
      torc_plugin_load("sim", NULL) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

static inline int test_teardown_all(void **state) {
  (void)state;
  torc_shutdown();
  return 0;
}

/* Reads a tensor's values as doubles (any dtype, any device) into a
 * malloc'd array of numel elements; the caller frees it. */
static inline double *test_values(const torc_tensor *t) {
  int64_t n = torc_numel(t);
  /* Its own scope: the caller may have one open, and a tensor a scope owns
   * must not be released by hand. */
  int scope = torc_scope_begin();
  torc_tensor *d = torc_to_dtype(t, TORC_F64);
  double *v = d ? malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)) : NULL;
  if (v && torc_to_host(d, v, sizeof(double) * (size_t)n) != TORC_OK) {
    free(v);
    v = NULL;
  }
  torc_scope_end(scope);
  return v;
}

/* Asserts t's values (read as doubles) equal `expect` within `tol`
 * (absolute + relative), elementwise; prints the first difference. */
static inline void test_assert_values(const torc_tensor *t,
                                      const double *expect, int64_t n,
                                      double tol) {
  assert_non_null(t);
  assert_int_equal(torc_numel(t), n);
  double *v = test_values(t);
  if (v == NULL) {
    print_error("reading values failed: %s\n", torc_last_error());
    fail();
  }
  for (int64_t i = 0; i < n; i++) {
    double d = v[i] - expect[i];
    int both_nan = v[i] != v[i] && expect[i] != expect[i];
    if (v[i] != expect[i] && !both_nan && !(d <= tol * (1 + (expect[i] < 0 ? -expect[i] : expect[i])) &&
                       -d <= tol * (1 + (expect[i] < 0 ? -expect[i] : expect[i])))) {
      print_error("element %lld: got %.17g, expected %.17g\n", (long long)i,
                  v[i], expect[i]);
      free(v);
      fail();
    }
  }
  free(v);
}

/* Asserts a's values equal b's within tol (absolute + relative; NaN
 * matches NaN, an infinity itself): a plugin's result against ref's. */
static inline void test_assert_close(const torc_tensor *a,
                                     const torc_tensor *b, double tol) {
  assert_non_null(a);
  assert_non_null(b);
  assert_int_equal(torc_numel(a), torc_numel(b));
  double *vb = test_values(b);
  assert_non_null(vb);
  test_assert_values(a, vb, torc_numel(b), tol);
  free(vb);
}

/* 1 when the profile report (torc_profile_report) has a row for `op` on
 * device cpu whose provider column is exactly `provider`. */
static inline int test_profile_served(const char *report, const char *op,
                                      const char *provider) {
  const char *line = report;
  while (line && *line) {
    char o[64], dev[16], prov[16];
    if (sscanf(line, "%63s %15s %15s", o, dev, prov) == 3 &&
        strcmp(o, op) == 0 && strcmp(dev, "cpu") == 0 &&
        strcmp(prov, provider) == 0)
      return 1;
    line = strchr(line, '\n');
    line = line ? line + 1 : NULL;
  }
  return 0;
}

/* Per-test fixture: setup clears the error and notes the live tensor
 * count; teardown fails the test if tensors leaked. */
static int64_t test_live_at_start;

static inline int test_live_setup(void **state) {
  (void)state;
  torc_clear_error();
  test_live_at_start = torc_tensor_live_count();
  return 0;
}

static inline int test_live_teardown(void **state) {
  (void)state;
  int64_t live = torc_tensor_live_count();
  if (live != test_live_at_start) {
    fprintf(stderr, "teardown: %lld tensor(s) leaked\n",
            (long long)(live - test_live_at_start));
    return -1;
  }
  return 0;
}

#endif /* TORC_TESTUTIL_H */
