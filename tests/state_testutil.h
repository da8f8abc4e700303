/* tests/state_testutil.h — shared by the state-dict tests (test_state,
 * test_state_checkpoint): a temporary folder and its fixtures, and a small
 * test network with helpers to snapshot and compare its values. Included
 * after testutil.h, once per program. */
#ifndef TORC_STATE_TESTUTIL_H
#define TORC_STATE_TESTUTIL_H

#include <dirent.h>
#include <unistd.h>

#include "testutil.h"

/* Exported by core/safetensors.c for the tests only: 1 fails the save
 * before the rename, 2 stops the process there (SIGSTOP) for its parent
 * to kill. */
TORC_API void torc__safetensors_fail_before_rename(int on);

static char tmpdir[256];

static inline void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static inline int group_setup(void **state) {
  if (test_setup_ref_sim(state))
    return -1;
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-state");
}

static inline int group_teardown(void **state) {
  rm_tree(tmpdir);
  return test_teardown_all(state);
}

static inline int setup(void **state) { return test_live_setup(state); }

static inline int teardown(void **state) {
  torc__safetensors_fail_before_rename(0);
  return test_live_teardown(state);
}

/* ---- helpers ---- */

static inline const char *tpath(const char *name) {
  static char p[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
  return p[k];
}

static inline torc_device sim(void) {
  torc_device d = TORC_CPU;
  assert_ok(torc_device_parse("sim", &d));
  return d;
}

/* A new tensor (the caller owns it) of `dt` holding off, off + 0.5, ... */
static inline torc_tensor *vals(const int64_t *shape, int nd, torc_dtype dt,
                                double off) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++)
    d[i] = off + 0.5 * (double)i;
  int s = torc_scope_begin();
  torc_tensor *t =
      torc_to_dtype(torc_from_host(d, shape, nd, TORC_F64, TORC_CPU), dt);
  free(d);
  assert_torc(t);
  torc_scope_keep(t);
  torc_scope_end(s);
  return t;
}

static inline void reg_param(torc_module *m, const char *name, torc_tensor *t) {
  assert_ok(torc_module_register_parameter(m, name, t));
  torc_release(t);
}

static inline void reg_buffer(torc_module *m, const char *name, torc_tensor *t,
                              int persistent) {
  assert_ok(torc_module_register_buffer(m, name, t, persistent));
  torc_release(t);
}

static const torc_module_vtable plain_vt = {sizeof(torc_module_vtable), NULL,
                                            NULL, NULL, NULL};

/* The test network, values shifted by `off`:
 *   net: a [3] (param), rb [2] (persistent buffer), tmp [1] (not persistent)
 *     c: w [2, 3] (param), count [] i64 (buffer)
 *       d: z [4] (param)
 * PyTorch's state_dict order: a, rb, c.w, c.count, c.d.z — each module's
 * own parameters, then its own buffers, then its children. */
static inline torc_module *make_net(double off) {
  torc_module *net = torc_module_new("Net", &plain_vt, NULL);
  torc_module *c = torc_module_new("Block", &plain_vt, NULL);
  torc_module *d = torc_module_new("Leaf", &plain_vt, NULL);
  assert_torc(net);
  assert_torc(c);
  assert_torc(d);
  reg_param(net, "a", vals(TORC_SHAPE(3), TORC_F32, off));
  reg_buffer(net, "rb", vals(TORC_SHAPE(2), TORC_F32, off + 10), 1);
  reg_buffer(net, "tmp", vals(TORC_SHAPE(1), TORC_F32, off + 20), 0);
  reg_param(c, "w", vals(TORC_SHAPE(2, 3), TORC_F32, off + 30));
  reg_buffer(c, "count", vals((const int64_t *)NULL, 0, TORC_I64, off + 40), 1);
  reg_param(d, "z", vals(TORC_SHAPE(4), TORC_F32, off + 50));
  assert_ok(torc_module_add_child(c, "d", d));
  assert_ok(torc_module_add_child(net, "c", c));
  return net;
}

static const char *const net_keys[] = {"a", "rb", "c.w", "c.count", "c.d.z"};
#define NET_N 5

/* Every state-dict value of m, concatenated as doubles (malloc'ed). */
static inline double *snapshot(const torc_module *m, int64_t *n_out) {
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(m, NULL, sd));
  int64_t n = 0;
  for (int i = 0; i < torc_state_dict_count(sd); i++)
    n += torc_numel(torc_state_dict_tensor(sd, i));
  double *all = malloc(sizeof(double) * (size_t)(n ? n : 1));
  int64_t at = 0;
  for (int i = 0; i < torc_state_dict_count(sd); i++) {
    const torc_tensor *t = torc_state_dict_tensor(sd, i);
    double *v = test_values(t);
    assert_non_null(v);
    memcpy(all + at, v, sizeof(double) * (size_t)torc_numel(t));
    at += torc_numel(t);
    free(v);
  }
  torc_state_dict_free(sd);
  *n_out = n;
  return all;
}

/* Asserts m's state equals the snapshot `before`. */
static inline void assert_unchanged(const torc_module *m, const double *before,
                                    int64_t n) {
  int64_t n2;
  double *now = snapshot(m, &n2);
  assert_int_equal(n, n2);
  assert_memory_equal(before, now, sizeof(double) * (size_t)n);
  free(now);
}

/* Asserts the first value of tensor t equals x. */
static inline void assert_first(const torc_tensor *t, double x) {
  double *v = test_values(t);
  assert_non_null(v);
  double got = v[0];
  free(v);
  if (got != x) {
    print_error("first value %.17g, expected %.17g\n", got, x);
    fail();
  }
}

static inline int count_temps(void) {
  DIR *d = opendir(tmpdir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

/* A second architecture: a [3], e.w [2, 3]. */
static inline torc_module *make_other(void) {
  torc_module *m = torc_module_new("Other", &plain_vt, NULL);
  torc_module *e = torc_module_new("Block", &plain_vt, NULL);
  reg_param(m, "a", vals(TORC_SHAPE(3), TORC_F32, 500));
  reg_param(e, "w", vals(TORC_SHAPE(2, 3), TORC_F32, 600));
  assert_ok(torc_module_add_child(m, "e", e));
  return m;
}

#endif /* TORC_STATE_TESTUTIL_H */
