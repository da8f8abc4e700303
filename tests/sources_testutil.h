/* tests/sources_testutil.h — shared by the data sources' tests
 * (test_sources, test_sources_csv_npy, test_sources_images): torc's log
 * captured into log_buf, the per-test fixtures and reading one sample.
 * Included after data_testutil.h, once per program. */
#ifndef TORC_SOURCES_TESTUTIL_H
#define TORC_SOURCES_TESTUTIL_H

#include <unistd.h>

#include "testutil.h"
#include "data_testutil.h"

#include "torc/data.h"

/* ---- log capture ---- */

static char log_buf[65536];

static inline void log_cb(int level, const char *line, void *user) {
  (void)user;
  size_t used = strlen(log_buf);
  if (used + 1 < sizeof log_buf)
    snprintf(log_buf + used, sizeof log_buf - used, "[%d] %s\n", level, line);
}

static inline int count_substr(const char *s, const char *needle) {
  int n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

/* ---- fixtures (the others are in data_testutil.h) ---- */

static inline int group_setup(void **state) {
  (void)state;
  return test_make_tmpdir(tmp_root, sizeof tmp_root, "torc-sources");
}

/* data_setup and data_teardown, with torc's log captured into log_buf. */
static inline int setup(void **state) {
  log_buf[0] = '\0';
  torc_set_log_level(TORC_LOG_INFO);
  torc_set_log_callback(log_cb, NULL);
  return data_setup(state);
}

static inline int teardown(void **state) {
  int rc = data_teardown(state);
  torc_set_log_callback(NULL, NULL);
  torc_set_log_level(TORC_LOG_WARN);
  return rc;
}

/* ---- reading samples ---- */

/* Sample i; asserts the input is a contiguous cpu tensor of dtype in_dt
 * and shape in_shape (the callers check the target). */
static inline void get_sample(torc_dataset *ds, int64_t i, torc_dtype in_dt,
                              const int64_t *in_shape, int in_ndim,
                              torc_tensor **in, torc_tensor **tg) {
  assert_ok(torc_dataset_get(ds, i, in, tg));
  assert_int_equal(torc_dtype_of(*in), in_dt);
  assert_int_equal(torc_ndim(*in), in_ndim);
  for (int d = 0; d < in_ndim; d++)
    assert_int_equal(torc_shape(*in)[d], in_shape[d]);
  assert_int_equal(torc_device_of(*in).type, TORC_CPU.type);
  assert_true(torc_is_contiguous(*in));
}

/* A class target: i64, 0-dim, value cls. */
static inline void assert_class(const torc_tensor *tg, int64_t cls) {
  assert_int_equal(torc_dtype_of(tg), TORC_I64);
  assert_int_equal(torc_ndim(tg), 0);
  assert_int_equal(*(const int64_t *)torc_data(tg), cls);
}

static inline void release2(torc_tensor *a, torc_tensor *b) {
  torc_release(a);
  torc_release(b);
}

/* Skips a permission check when running as root, which reads anything. */
static inline int running_as_root(const char *what) {
  if (geteuid() == 0) {
    printf("[   SKIP   ] %s: running as root, which can read a chmod 000 "
           "file; the unreadable-file check needs a normal user\n",
           what);
    return 1;
  }
  return 0;
}

#endif /* TORC_SOURCES_TESTUTIL_H */
