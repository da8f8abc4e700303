/* tests/test_state.c — state dicts (torc/state.h): the map and its
 * metadata, PyTorch's state_dict order, save/load round trips onto any
 * device, loading into modules (strict, non-strict, prefixes, "module."
 * detection, dtype casts, parameter identity, all-or-nothing after every
 * failure), checkpoints (RNG, counters, extra tensors), a real crash
 * between writing and renaming a checkpoint (a forked child killed with
 * SIGKILL), and one bad file per reader error.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* Exported by core/safetensors.c for the tests only: 1 fails the save
 * before the rename, 2 stops the process there (SIGSTOP) for its parent
 * to kill. */
TORC_API void torc__safetensors_fail_before_rename(int on);

static char tmpdir[256];

static void rm_tree(const char *dir) {
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

static int group_setup(void **state) {
  if (test_setup_ref_sim(state))
    return -1;
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-state");
}

static int group_teardown(void **state) {
  rm_tree(tmpdir);
  return test_teardown_all(state);
}

static int setup(void **state) { return test_live_setup(state); }

static int teardown(void **state) {
  torc__safetensors_fail_before_rename(0);
  return test_live_teardown(state);
}

/* ---- helpers ---- */

static const char *tpath(const char *name) {
  static char p[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
  return p[k];
}

static torc_device sim(void) {
  torc_device d = TORC_CPU;
  assert_ok(torc_device_parse("sim", &d));
  return d;
}

/* A new tensor (the caller owns it) of `dt` holding off, off + 0.5, ... */
static torc_tensor *vals(const int64_t *shape, int nd, torc_dtype dt,
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

static void reg_param(torc_module *m, const char *name, torc_tensor *t) {
  assert_ok(torc_module_register_parameter(m, name, t));
  torc_release(t);
}

static void reg_buffer(torc_module *m, const char *name, torc_tensor *t,
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
static torc_module *make_net(double off) {
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
static double *snapshot(const torc_module *m, int64_t *n_out) {
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
static void assert_unchanged(const torc_module *m, const double *before,
                             int64_t n) {
  int64_t n2;
  double *now = snapshot(m, &n2);
  assert_int_equal(n, n2);
  assert_memory_equal(before, now, sizeof(double) * (size_t)n);
  free(now);
}

/* Asserts the first value of tensor t equals x. */
static void assert_first(const torc_tensor *t, double x) {
  double *v = test_values(t);
  assert_non_null(v);
  double got = v[0];
  free(v);
  if (got != x) {
    print_error("first value %.17g, expected %.17g\n", got, x);
    fail();
  }
}

static int count_temps(void) {
  DIR *d = opendir(tmpdir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

/* A safetensors file from a header text and data_len bytes 0, 1, 2, ... */
static void write_st(const char *path, const char *header, size_t data_len) {
  size_t hl = strlen(header);
  unsigned char *b = malloc(8 + hl + data_len + 1);
  assert_non_null(b);
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(b + 8, header, hl);
  for (size_t i = 0; i < data_len; i++)
    b[8 + hl + i] = (unsigned char)i;
  test_write_file(path, b, 8 + hl + data_len);
  free(b);
}

/* ---- the map ---- */

static void test_dict_basics(void **state) {
  (void)state;
  torc_state_dict *sd = torc_state_dict_new();
  assert_torc(sd);
  torc_tensor *x = vals(TORC_SHAPE(2), TORC_F32, 1);
  torc_tensor *y = vals(TORC_SHAPE(3), TORC_F64, 2);
  assert_ok(torc_state_dict_set(sd, "x", x));
  assert_ok(torc_state_dict_set(sd, "y", y));
  assert_int_equal(torc_state_dict_count(sd), 2);
  assert_string_equal(torc_state_dict_name(sd, 0), "x");
  assert_string_equal(torc_state_dict_name(sd, 1), "y");
  assert_ptr_equal(torc_state_dict_tensor(sd, 1), y);
  assert_ptr_equal(torc_state_dict_get(sd, "x"), x); /* a reference */
  assert_null(torc_state_dict_get(sd, "z"));
  assert_null(torc_state_dict_name(sd, 2));
  assert_null(torc_state_dict_tensor(sd, -1));

  /* key collisions are refused, never resolved silently */
  torc_clear_error();
  assert_int_equal(torc_state_dict_set(sd, "x", y), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'x' is already in the state dict");
  assert_ptr_equal(torc_state_dict_get(sd, "x"), x);
  assert_int_equal(torc_state_dict_set(sd, "", y), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "the name is empty");
  assert_int_equal(torc_state_dict_set(sd, "__metadata__", y),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "reserved");
  assert_int_equal(torc_state_dict_set(NULL, "q", y), TORC_ERR_NULL);
  torc_clear_error();
  assert_int_equal(torc_state_dict_set(sd, "q", NULL), TORC_ERR_NULL);
  assert_int_equal(torc_state_dict_count(sd), 2);

  /* the dict holds references: the caller's may go */
  torc_release(x);
  torc_release(y);
  assert_first(torc_state_dict_get(sd, "x"), 1);

  /* many keys: the index grows */
  for (int i = 0; i < 300; i++) {
    char k[32];
    snprintf(k, sizeof k, "layer.%d.weight", i);
    assert_ok(torc_state_dict_set(sd, k, torc_state_dict_get(sd, "x")));
  }
  assert_int_equal(torc_state_dict_count(sd), 302);
  assert_string_equal(torc_state_dict_name(sd, 301), "layer.299.weight");
  assert_non_null(torc_state_dict_get(sd, "layer.123.weight"));

  /* metadata */
  assert_int_equal(torc_state_dict_meta_count(sd), 0);
  assert_ok(torc_state_dict_set_meta(sd, "note", "first"));
  assert_ok(torc_state_dict_set_meta(sd, "user", "me"));
  assert_ok(torc_state_dict_set_meta(sd, "note", "second")); /* replaces */
  assert_int_equal(torc_state_dict_meta_count(sd), 2);
  assert_string_equal(torc_state_dict_meta_key(sd, 0), "note");
  assert_string_equal(torc_state_dict_meta(sd, "note"), "second");
  assert_null(torc_state_dict_meta(sd, "nope"));
  assert_null(torc_state_dict_meta_key(sd, 2));
  assert_int_equal(torc_state_dict_set_meta(sd, "", "v"), TORC_ERR_INVALID);
  assert_int_equal(torc_state_dict_set_meta(sd, "k", NULL), TORC_ERR_NULL);

  /* integer metadata */
  int64_t v = 0;
  assert_ok(torc_state_dict_set_i64(sd, "epoch", -42));
  assert_ok(torc_state_dict_set_i64(sd, "big", INT64_MAX));
  assert_string_equal(torc_state_dict_meta(sd, "epoch"), "-42");
  assert_ok(torc_state_dict_get_i64(sd, "epoch", &v));
  assert_int_equal(v, -42);
  assert_ok(torc_state_dict_get_i64(sd, "big", &v));
  assert_true(v == INT64_MAX);
  assert_int_equal(torc_state_dict_get_i64(sd, "step", &v), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "no metadata key 'step'");
  assert_contains(torc_last_error(), "epoch"); /* the keys there are */
  assert_int_equal(torc_state_dict_get_i64(sd, "user", &v), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "metadata 'user' is \"me\", not a 64-bit");
  assert_ok(torc_state_dict_set_meta(sd, "huge", "99999999999999999999"));
  assert_int_equal(torc_state_dict_get_i64(sd, "huge", &v), TORC_ERR_INVALID);
  assert_ok(torc_state_dict_set_meta(sd, "trail", "12x"));
  assert_int_equal(torc_state_dict_get_i64(sd, "trail", &v), TORC_ERR_INVALID);
  torc_state_dict_free(sd);
  torc_state_dict_free(NULL);
}

/* ---- a module's state dict ---- */

static void test_module_state_dict_order(void **state) {
  (void)state;
  torc_module *net = make_net(0);
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(net, NULL, sd));
  assert_int_equal(torc_state_dict_count(sd), NET_N);
  for (int i = 0; i < NET_N; i++)
    assert_string_equal(torc_state_dict_name(sd, i), net_keys[i]);
  /* the tensors themselves, not copies; non-persistent buffers left out */
  assert_ptr_equal(torc_state_dict_get(sd, "a"),
                   torc_module_parameter(net, "a"));
  assert_ptr_equal(torc_state_dict_get(sd, "c.count"),
                   torc_module_buffer(torc_module_child(net, "c"), "count"));
  assert_null(torc_state_dict_get(sd, "tmp"));

  /* under a prefix, next to other entries */
  torc_state_dict *ck = torc_state_dict_new();
  torc_tensor *o = vals(TORC_SHAPE(1), TORC_F32, 0);
  assert_ok(torc_state_dict_set(ck, "optimizer.x", o));
  torc_release(o);
  assert_ok(torc_module_state_dict(net, "model.", ck));
  assert_int_equal(torc_state_dict_count(ck), NET_N + 1);
  assert_string_equal(torc_state_dict_name(ck, 1), "model.a");
  assert_string_equal(torc_state_dict_name(ck, 5), "model.c.d.z");
  /* a collision: refused, nothing added */
  torc_clear_error();
  assert_int_equal(torc_module_state_dict(net, "model.", ck), TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'model.a' of the Net module is already in");
  assert_contains(torc_last_error(), "nothing was added");
  assert_int_equal(torc_state_dict_count(ck), NET_N + 1);
  /* a sub-module's state dict is relative to it */
  torc_state_dict *sub = torc_state_dict_new();
  assert_ok(torc_module_state_dict(torc_module_child(net, "c"), "", sub));
  assert_int_equal(torc_state_dict_count(sub), 3);
  assert_string_equal(torc_state_dict_name(sub, 0), "w");
  assert_string_equal(torc_state_dict_name(sub, 2), "d.z");
  /* a NULL module keeps the first error */
  torc_set_error(TORC_ERR_SHAPE, "earlier failure");
  assert_int_equal(torc_module_state_dict(NULL, NULL, sub), TORC_ERR_SHAPE);
  assert_error(TORC_ERR_SHAPE, "earlier failure");
  torc_state_dict_free(sub);
  torc_state_dict_free(ck);
  torc_state_dict_free(sd);
  torc_module_free(net);
}

/* ---- files ---- */

static void test_save_load_round_trip(void **state) {
  (void)state;
  torc_module *net = make_net(0);
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(net, NULL, sd));
  assert_ok(torc_state_dict_set_meta(sd, "who", "test"));
  assert_ok(torc_state_dict_set_i64(sd, "epoch", 7));
  const char *p = tpath("rt.safetensors");
  assert_ok(torc_state_dict_save(sd, p));

  torc_device devs[2] = {TORC_CPU, sim()};
  for (int k = 0; k < 2; k++) {
    torc_state_dict *got = torc_state_dict_load(p, devs[k]);
    assert_torc(got);
    assert_int_equal(torc_state_dict_count(got), NET_N);
    /* a file lists its tensors in sorted order */
    assert_string_equal(torc_state_dict_name(got, 0), "a");
    assert_string_equal(torc_state_dict_name(got, 1), "c.count");
    for (int i = 0; i < NET_N; i++) {
      const torc_tensor *a = torc_state_dict_get(sd, net_keys[i]);
      const torc_tensor *b = torc_state_dict_get(got, net_keys[i]);
      assert_torc(b);
      assert_true(torc_device_eq(torc_device_of(b), devs[k]));
      assert_int_equal(torc_dtype_of(a), torc_dtype_of(b));
      assert_int_equal(torc_ndim(a), torc_ndim(b));
      double *va = test_values(a);
      test_assert_values(b, va, torc_numel(a), 0);
      free(va);
    }
    int64_t e = 0;
    assert_ok(torc_state_dict_get_i64(got, "epoch", &e));
    assert_int_equal(e, 7);
    assert_string_equal(torc_state_dict_meta(got, "who"), "test");
    torc_state_dict_free(got);
  }
  /* and a dict on the sim device saves the same bytes */
  torc_state_dict *on_sim = torc_state_dict_load(p, sim());
  const char *p2 = tpath("rt2.safetensors");
  assert_ok(torc_state_dict_save(on_sim, p2));
  size_t n1, n2;
  unsigned char *b1 = test_read_file(p, &n1), *b2 = test_read_file(p2, &n2);
  assert_int_equal(n1, n2);
  assert_memory_equal(b1, b2, n1);
  free(b1);
  free(b2);
  torc_state_dict_free(on_sim);

  torc_clear_error();
  assert_null(torc_state_dict_load(tpath("missing.safetensors"), TORC_CPU));
  assert_error(TORC_ERR_IO, "cannot open");
  assert_int_equal(torc_state_dict_save(NULL, p), TORC_ERR_NULL);
  torc_state_dict_free(sd);
  torc_module_free(net);
}

/* ---- loading into a module ---- */

static void test_load_keeps_identity(void **state) {
  (void)state;
  torc_module *src = make_net(100);
  torc_module *dst = make_net(0);
  torc_tensor *a = torc_module_parameter(dst, "a");
  torc_module *dc = torc_module_child(dst, "c");
  torc_tensor *w = torc_module_parameter(dc, "w");
  torc_tensor *cnt = torc_module_buffer(dc, "count");
  assert_first(a, 0);
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(src, NULL, sd));
  torc_load_report r = {0};
  assert_ok(torc_module_load_state_dict(dst, sd, NULL, &r));
  assert_int_equal(r.n_loaded, NET_N);
  assert_int_equal(r.n_missing + r.n_unexpected + r.n_mismatched, 0);
  /* same tensor objects, new values, still trainable leaves */
  assert_ptr_equal(torc_module_parameter(dst, "a"), a);
  assert_ptr_equal(torc_module_parameter(dc, "w"), w);
  assert_ptr_equal(torc_module_buffer(dc, "count"), cnt);
  assert_first(a, 100);
  assert_first(w, 130);
  assert_first(cnt, 140);
  assert_true(torc_requires_grad(a));
  /* a leaf: the copy was not recorded */
  assert_string_equal(torc_grad_fn_name(a), "AccumulateGrad");
  /* the file is a copy: changing the source later does not reach dst */
  assert_ok(torc_fill_(torc_state_dict_get(sd, "rb"), -1));
  assert_first(torc_module_buffer(dst, "rb"), 110);
  /* the non-persistent buffer is not touched */
  assert_first(torc_module_buffer(dst, "tmp"), 20);
  /* a module's own state dict loads into itself */
  torc_state_dict *own = torc_state_dict_new();
  assert_ok(torc_module_state_dict(dst, NULL, own));
  assert_ok(torc_module_load_state_dict(dst, own, NULL, NULL));
  assert_first(a, 100);
  torc_state_dict_free(own);
  torc_load_report_clear(&r);
  torc_load_report_clear(NULL);
  torc_state_dict_free(sd);
  torc_module_free(src);
  torc_module_free(dst);
}

/* A second architecture: a [3], e.w [2, 3]. */
static torc_module *make_other(void) {
  torc_module *m = torc_module_new("Other", &plain_vt, NULL);
  torc_module *e = torc_module_new("Block", &plain_vt, NULL);
  reg_param(m, "a", vals(TORC_SHAPE(3), TORC_F32, 500));
  reg_param(e, "w", vals(TORC_SHAPE(2, 3), TORC_F32, 600));
  assert_ok(torc_module_add_child(m, "e", e));
  return m;
}

static void test_strict_and_non_strict(void **state) {
  (void)state;
  torc_module *net = make_net(0);
  torc_module *other = make_other();
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(other, NULL, sd));
  int64_t n;
  double *before = snapshot(net, &n);

  /* strict: one message with every missing and unexpected key */
  torc_load_report r = {0};
  torc_clear_error();
  assert_int_equal(torc_module_load_state_dict(net, sd, NULL, &r),
                   TORC_ERR_INVALID);
  const char *msg = torc_last_error();
  assert_contains(msg, "does not fit the Net module (nothing was loaded)");
  assert_contains(msg, "missing (4): rb, c.w, c.count, c.d.z");
  assert_contains(msg, "unexpected (1): e.w");
  assert_contains(msg, "non_strict = 1");
  if (getenv("TORC_STATE_SHOW_ERRORS"))
    fprintf(stderr, "%s\n", msg);
  assert_int_equal(r.n_loaded, 0);
  assert_int_equal(r.n_missing, 4);
  assert_string_equal(r.missing[0], "rb");
  assert_int_equal(r.n_unexpected, 1);
  assert_string_equal(r.unexpected[0], "e.w");
  assert_unchanged(net, before, n);
  torc_load_report_clear(&r);
  assert_int_equal(r.n_missing, 0);
  assert_null(r.missing);

  /* non-strict: the lists come back and the matching key loads */
  torc_load_opts o = {.non_strict = 1};
  assert_ok(torc_module_load_state_dict(net, sd, &o, &r));
  assert_int_equal(r.n_loaded, 1);
  assert_int_equal(r.n_missing, 4);
  assert_int_equal(r.n_unexpected, 1);
  assert_first(torc_module_parameter(net, "a"), 500);
  assert_first(torc_module_buffer(net, "rb"), 10);
  torc_load_report_clear(&r);
  /* a NULL report is fine */
  assert_ok(torc_module_load_state_dict(net, sd, &o, NULL));

  /* an empty dict: strict lists every key */
  torc_state_dict *empty = torc_state_dict_new();
  assert_int_equal(torc_module_load_state_dict(net, empty, NULL, &r),
                   TORC_ERR_INVALID);
  assert_int_equal(r.n_missing, NET_N);
  torc_load_report_clear(&r);
  torc_state_dict_free(empty);

  /* NULL arguments */
  torc_clear_error();
  assert_int_equal(torc_module_load_state_dict(net, NULL, NULL, NULL),
                   TORC_ERR_NULL);
  torc_set_error(TORC_ERR_SHAPE, "first");
  assert_int_equal(torc_module_load_state_dict(NULL, sd, NULL, NULL),
                   TORC_ERR_SHAPE);
  free(before);
  torc_state_dict_free(sd);
  torc_module_free(net);
  torc_module_free(other);
}

static void test_shape_and_dtype_mismatch(void **state) {
  (void)state;
  torc_module *net = make_net(0);
  torc_module *src = make_net(100);
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(src, NULL, sd));
  int64_t n;
  double *before = snapshot(net, &n);
  torc_load_report r = {0};

  /* a wrong shape: an error even non-strict, with both shapes */
  torc_state_dict *bad = torc_state_dict_new();
  for (int i = 0; i < NET_N; i++) {
    torc_tensor *t = torc_state_dict_get(sd, net_keys[i]);
    if (strcmp(net_keys[i], "c.w") == 0) {
      torc_tensor *x = vals(TORC_SHAPE(3, 2), TORC_F32, 0);
      assert_ok(torc_state_dict_set(bad, "c.w", x));
      torc_release(x);
    } else {
      assert_ok(torc_state_dict_set(bad, net_keys[i], t));
    }
  }
  torc_load_opts ns = {.non_strict = 1};
  for (int strict = 0; strict < 2; strict++) {
    torc_clear_error();
    assert_int_equal(
        torc_module_load_state_dict(net, bad, strict ? NULL : &ns, &r),
        TORC_ERR_INVALID);
    assert_error(TORC_ERR_INVALID,
                 "mismatched (1): c.w: [3, 2] f32 in the file, [2, 3] f32 in "
                 "the model");
    assert_contains(torc_last_error(), "even with non_strict");
    assert_int_equal(r.n_mismatched, 1);
    assert_string_equal(r.mismatched[0],
                        "c.w: [3, 2] f32 in the file, [2, 3] f32 in the model");
    assert_int_equal(r.n_loaded, 0);
    torc_load_report_clear(&r);
    assert_unchanged(net, before, n);
  }
  torc_state_dict_free(bad);

  /* a wrong dtype: f64 in the file for an f32 parameter */
  bad = torc_state_dict_new();
  for (int i = 0; i < NET_N; i++) {
    torc_tensor *t = torc_state_dict_get(sd, net_keys[i]);
    if (strcmp(net_keys[i], "a") == 0 || strcmp(net_keys[i], "c.count") == 0) {
      /* a: f64; c.count: i32 (integers are never cast) */
      int s = torc_scope_begin();
      torc_tensor *x = torc_to_dtype(t, i == 0 ? TORC_F64 : TORC_I32);
      assert_ok(torc_state_dict_set(bad, net_keys[i], x));
      torc_scope_end(s);
    } else {
      assert_ok(torc_state_dict_set(bad, net_keys[i], t));
    }
  }
  torc_clear_error();
  assert_int_equal(torc_module_load_state_dict(net, bad, NULL, &r),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID,
               "mismatched (2): a: [3] f64 in the file, [3] f32 in the model, "
               "c.count: [] i32 in the file, [] i64 in the model");
  assert_contains(torc_last_error(), "allow_dtype_cast = 1");
  torc_load_report_clear(&r);
  assert_unchanged(net, before, n);
  /* allow_dtype_cast converts floats; the integer buffer still mismatches */
  torc_load_opts cast = {.allow_dtype_cast = 1};
  assert_int_equal(torc_module_load_state_dict(net, bad, &cast, &r),
                   TORC_ERR_INVALID);
  assert_int_equal(r.n_mismatched, 1);
  assert_contains(r.mismatched[0], "c.count");
  assert_error(TORC_ERR_INVALID, "Integer and bool tensors are never cast");
  torc_load_report_clear(&r);
  assert_unchanged(net, before, n);
  /* with the integer fixed, the f64 tensor loads, converted */
  torc_tensor *cnt = vals((const int64_t *)NULL, 0, TORC_I64, 77);
  torc_state_dict *ok = torc_state_dict_new();
  for (int i = 0; i < NET_N; i++)
    assert_ok(torc_state_dict_set(
        ok, net_keys[i], i == 3 ? cnt : torc_state_dict_get(bad, net_keys[i])));
  torc_release(cnt);
  assert_ok(torc_module_load_state_dict(net, ok, &cast, &r));
  assert_int_equal(r.n_loaded, NET_N);
  torc_tensor *a = torc_module_parameter(net, "a");
  assert_int_equal(torc_dtype_of(a), TORC_F32);
  assert_first(a, 100);
  assert_first(torc_module_buffer(torc_module_child(net, "c"), "count"), 77);
  torc_load_report_clear(&r);
  torc_state_dict_free(ok);
  torc_state_dict_free(bad);
  free(before);
  torc_state_dict_free(sd);
  torc_module_free(src);
  torc_module_free(net);
}

/* A dict holding src's state under "module." (DataParallel). */
static torc_state_dict *data_parallel_dict(const torc_module *src) {
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(src, "module.", sd));
  return sd;
}

static void test_module_prefix(void **state) {
  (void)state;
  torc_module *net = make_net(0);
  torc_module *src = make_net(100);
  torc_state_dict *sd = data_parallel_dict(src);
  int64_t n;
  double *before = snapshot(net, &n);
  torc_load_report r = {0};

  /* detected and named, strict or not */
  torc_load_opts ns = {.non_strict = 1};
  for (int strict = 0; strict < 2; strict++) {
    torc_clear_error();
    assert_int_equal(
        torc_module_load_state_dict(net, sd, strict ? NULL : &ns, &r),
        TORC_ERR_INVALID);
    assert_error(TORC_ERR_INVALID, "start with \"module.\"");
    assert_contains(torc_last_error(), "DataParallel");
    assert_contains(torc_last_error(), "strip_module_prefix = 1");
    assert_contains(torc_last_error(), "unexpected (5): module.a, module.rb");
    assert_int_equal(r.n_unexpected, NET_N);
    torc_load_report_clear(&r);
    assert_unchanged(net, before, n);
  }
  /* stripped on request */
  torc_load_opts o = {.strip_module_prefix = 1};
  assert_ok(torc_module_load_state_dict(net, sd, &o, &r));
  assert_int_equal(r.n_loaded, NET_N);
  assert_first(torc_module_parameter(net, "a"), 100);
  torc_load_report_clear(&r);

  /* only the unexpected keys carry it (a mix): still named */
  torc_state_dict *mix = torc_state_dict_new();
  assert_ok(torc_state_dict_set(mix, "a", torc_state_dict_get(sd, "module.a")));
  assert_ok(torc_state_dict_set(mix, "module.rb",
                                torc_state_dict_get(sd, "module.rb")));
  assert_int_equal(torc_module_load_state_dict(net, mix, &ns, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "strip_module_prefix");
  /* not named when stripping would not help */
  torc_state_dict *junk = torc_state_dict_new();
  assert_ok(torc_state_dict_set(junk, "module.zzz",
                                torc_state_dict_get(sd, "module.a")));
  assert_ok(torc_module_load_state_dict(net, junk, &ns, &r));
  assert_int_equal(r.n_unexpected, 1);
  torc_load_report_clear(&r);
  torc_clear_error();
  assert_int_equal(torc_module_load_state_dict(net, junk, NULL, NULL),
                   TORC_ERR_INVALID);
  assert_null(strstr(torc_last_error(), "strip_module_prefix"));

  /* a collision once stripped: both "module.a" and "a" */
  assert_ok(torc_state_dict_set(mix, "module.a",
                                torc_state_dict_get(sd, "module.a")));
  free(before);
  before = snapshot(net, &n);
  torc_clear_error();
  assert_int_equal(torc_module_load_state_dict(net, mix, &o, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "the keys 'a' and 'module.a' both become 'a'");
  assert_contains(torc_last_error(), "ambiguous");
  assert_unchanged(net, before, n);
  torc_state_dict_free(junk);
  torc_state_dict_free(mix);
  free(before);
  torc_state_dict_free(sd);
  torc_module_free(src);
  torc_module_free(net);
}

static void test_prefix_option(void **state) {
  (void)state;
  torc_module *net = make_net(0);
  torc_module *src = make_net(100);
  torc_state_dict *sd = torc_state_dict_new();
  torc_tensor *x = vals(TORC_SHAPE(2), TORC_F32, 0);
  assert_ok(torc_state_dict_set(sd, "optimizer.state", x));
  torc_release(x);
  assert_ok(torc_module_state_dict(src, "model.", sd));
  /* without the prefix: nothing matches */
  assert_int_equal(torc_module_load_state_dict(net, sd, NULL, NULL),
                   TORC_ERR_INVALID);
  torc_load_opts o = {.prefix = "model."};
  torc_load_report r = {0};
  assert_ok(torc_module_load_state_dict(net, sd, &o, &r));
  assert_int_equal(r.n_loaded, NET_N);
  assert_int_equal(r.n_unexpected, 0); /* other prefixes are not considered */
  assert_first(torc_module_parameter(net, "a"), 100);
  torc_load_report_clear(&r);
  /* a sub-module from a prefix within */
  torc_module *blk = torc_module_new("Block", &plain_vt, NULL);
  torc_module *leaf = torc_module_new("Leaf", &plain_vt, NULL);
  reg_param(blk, "w", vals(TORC_SHAPE(2, 3), TORC_F32, 0));
  reg_buffer(blk, "count", vals((const int64_t *)NULL, 0, TORC_I64, 0), 1);
  reg_param(leaf, "z", vals(TORC_SHAPE(4), TORC_F32, 0));
  assert_ok(torc_module_add_child(blk, "d", leaf));
  o.prefix = "model.c.";
  assert_ok(torc_module_load_state_dict(blk, sd, &o, NULL));
  assert_first(torc_module_parameter(blk, "w"), 130);
  /* unexpected keys are reported with their full names */
  o.prefix = "model.";
  torc_state_dict *more = torc_state_dict_new();
  assert_ok(torc_module_state_dict(src, "model.", more));
  x = vals(TORC_SHAPE(2), TORC_F32, 0);
  assert_ok(torc_state_dict_set(more, "model.extra", x));
  torc_release(x);
  assert_int_equal(torc_module_load_state_dict(net, more, &o, &r),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "unexpected (1): model.extra");
  torc_load_report_clear(&r);
  torc_state_dict_free(more);
  torc_module_free(blk);
  torc_state_dict_free(sd);
  torc_module_free(src);
  torc_module_free(net);
}

/* Many keys: every one in the report, the message within its buffer and
 * saying so. */
static void test_long_lists(void **state) {
  (void)state;
  torc_module *big = torc_module_new("Big", &plain_vt, NULL);
  for (int i = 0; i < 120; i++) {
    char k[32];
    snprintf(k, sizeof k, "weight_%03d", i);
    reg_param(big, k, vals(TORC_SHAPE(1), TORC_F32, i));
  }
  torc_state_dict *sd = torc_state_dict_new();
  torc_tensor *x = vals(TORC_SHAPE(2), TORC_F32, 0);
  for (int i = 0; i < 60; i++) {
    char k[40];
    snprintf(k, sizeof k, "encoder.layers.%d.proj", i);
    assert_ok(torc_state_dict_set(sd, k, x));
  }
  assert_ok(torc_state_dict_set(sd, "weight_000", x)); /* shape [2] vs [1] */
  torc_release(x);
  torc_load_report r = {0};
  assert_int_equal(torc_module_load_state_dict(big, sd, NULL, &r),
                   TORC_ERR_INVALID);
  const char *msg = torc_last_error();
  if (getenv("TORC_STATE_SHOW_ERRORS"))
    fprintf(stderr, "%s\n", msg);
  assert_true(strlen(msg) < 1023);
  assert_contains(msg, "missing (119): weight_001, weight_002");
  assert_contains(msg, "more");
  assert_contains(msg, "unexpected (60): encoder.layers.0.proj");
  assert_contains(msg, "mismatched (1): weight_000: [2] f32 in the file, [1] "
                       "f32 in the model");
  assert_contains(msg, "every key is in the torc_load_report");
  assert_contains(msg, "non_strict = 1"); /* the fix survives */
  assert_int_equal(r.n_missing, 119);
  assert_string_equal(r.missing[118], "weight_119");
  assert_int_equal(r.n_unexpected, 60);
  assert_string_equal(r.unexpected[59], "encoder.layers.59.proj");
  torc_load_report_clear(&r);
  torc_state_dict_free(sd);
  torc_module_free(big);
}

/* ---- files into modules, across devices ---- */

static void test_map_location(void **state) {
  (void)state;
  torc_device s = sim();
  /* a model on sim saved, loaded into a cpu model */
  torc_module *on_sim = make_net(100);
  assert_ok(torc_module_to(on_sim, s));
  const char *p = tpath("sim.safetensors");
  assert_ok(torc_module_save(on_sim, p));
  torc_module *on_cpu = make_net(0);
  torc_tensor *a = torc_module_parameter(on_cpu, "a");
  assert_ok(torc_module_load(on_cpu, p, NULL, NULL));
  assert_ptr_equal(torc_module_parameter(on_cpu, "a"), a);
  assert_true(torc_device_eq(torc_device_of(a), TORC_CPU));
  assert_first(a, 100);
  assert_first(torc_module_buffer(torc_module_child(on_cpu, "c"), "count"),
               140);
  assert_ok(torc_module_check_device(on_cpu, TORC_CPU));

  /* and a cpu model saved, loaded into a sim model */
  torc_module *src = make_net(200);
  assert_ok(torc_module_save(src, p));
  torc_tensor *sa = torc_module_parameter(on_sim, "a");
  assert_ok(torc_module_load(on_sim, p, NULL, NULL));
  assert_ptr_equal(torc_module_parameter(on_sim, "a"), sa);
  assert_true(torc_device_eq(torc_device_of(sa), s));
  assert_ok(torc_module_check_device(on_sim, s));
  assert_first(sa, 200);
  assert_first(torc_module_parameter(
                   torc_module_child(torc_module_child(on_sim, "c"), "d"), "z"),
               250);
  /* a state dict read onto the cpu, loaded with a cast into sim f64 */
  assert_ok(torc_module_to_dtype(on_sim, TORC_F64));
  torc_state_dict *sd = torc_state_dict_load(p, TORC_CPU);
  assert_torc(sd);
  assert_ok(torc_fill_(torc_state_dict_get(sd, "a"), 3.25));
  torc_load_opts cast = {.allow_dtype_cast = 1};
  assert_ok(torc_module_load_state_dict(on_sim, sd, &cast, NULL));
  assert_int_equal(torc_dtype_of(sa), TORC_F64);
  assert_true(torc_device_eq(torc_device_of(sa), s));
  assert_first(sa, 3.25);
  /* torc_module_save writes the Python library's "format": "pt" tag */
  assert_string_equal(torc_state_dict_meta(sd, "format"), "pt");
  torc_state_dict_free(sd);
  torc_module_free(src);
  torc_module_free(on_cpu);
  torc_module_free(on_sim);
}

/* ---- checkpoints ---- */

static void test_checkpoint_round_trip(void **state) {
  (void)state;
  torc_module *net = make_net(100);
  torc_state_dict *ck = torc_checkpoint_new();
  assert_torc(ck);
  assert_string_equal(torc_state_dict_meta(ck, "torc.format"), "checkpoint");
  assert_string_equal(torc_state_dict_meta(ck, "torc.version"),
                      torc_version_string());
  assert_ok(torc_checkpoint_add_module(ck, net));
  assert_non_null(torc_state_dict_get(ck, "model.c.d.z"));
  /* optimizer state (arbitrary tensors until optimizers exist) */
  torc_tensor *m1 = vals(TORC_SHAPE(3), TORC_F32, 1000);
  torc_tensor *st = vals((const int64_t *)NULL, 0, TORC_I64, 12);
  assert_ok(torc_state_dict_set(ck, "optimizer.state.0.exp_avg", m1));
  assert_ok(torc_state_dict_set(ck, "optimizer.state.0.step", st));
  torc_release(m1);
  torc_release(st);
  assert_ok(torc_state_dict_set_i64(ck, "epoch", 3));
  assert_ok(torc_state_dict_set_i64(ck, "step", 12345));
  assert_ok(torc_state_dict_set_i64(ck, "loader.position", 640));
  assert_ok(torc_state_dict_set_meta(ck, "user.note", "lr=0.1, run \"b\""));
  /* RNG states: the default generator and one of the caller's */
  torc_manual_seed(42);
  torc_tensor *burn = torc_rand(TORC_SHAPE(5), TORC_F32, TORC_CPU, NULL);
  torc_release(burn);
  torc_generator *g = torc_generator_new(7);
  burn = torc_rand(TORC_SHAPE(3), TORC_F32, TORC_CPU, g);
  torc_release(burn);
  assert_ok(torc_checkpoint_add_rng(ck, "default", NULL));
  assert_ok(torc_checkpoint_add_rng(ck, "loader", g));
  torc_tensor *next_d = torc_rand(TORC_SHAPE(4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *next_g = torc_rand(TORC_SHAPE(4), TORC_F32, TORC_CPU, g);
  assert_int_equal(torc_checkpoint_add_rng(ck, "a.b", NULL), TORC_ERR_INVALID);
  assert_int_equal(torc_checkpoint_add_rng(ck, "", NULL), TORC_ERR_INVALID);
  const char *p = tpath("ck.safetensors");
  assert_ok(torc_state_dict_save(ck, p));

  torc_state_dict *back = torc_checkpoint_load(p, sim());
  assert_torc(back);
  int64_t v = 0;
  assert_ok(torc_state_dict_get_i64(back, "epoch", &v));
  assert_int_equal(v, 3);
  assert_ok(torc_state_dict_get_i64(back, "step", &v));
  assert_int_equal(v, 12345);
  assert_ok(torc_state_dict_get_i64(back, "loader.position", &v));
  assert_int_equal(v, 640);
  assert_string_equal(torc_state_dict_meta(back, "user.note"),
                      "lr=0.1, run \"b\"");
  assert_string_equal(torc_state_dict_meta(back, "torc.version"),
                      torc_version_string());
  torc_tensor *em = torc_state_dict_get(back, "optimizer.state.0.exp_avg");
  assert_torc(em);
  assert_true(torc_device_eq(torc_device_of(em), sim()));
  assert_first(em, 1000);
  assert_first(torc_state_dict_get(back, "optimizer.state.0.step"), 12);
  /* the RNG streams continue where they were saved */
  torc_manual_seed(999);
  torc_generator *g2 = torc_generator_new(1);
  assert_ok(torc_checkpoint_restore_rng(back, "default", NULL));
  assert_ok(torc_checkpoint_restore_rng(back, "loader", g2));
  torc_tensor *again_d = torc_rand(TORC_SHAPE(4), TORC_F32, TORC_CPU, NULL);
  torc_tensor *again_g = torc_rand(TORC_SHAPE(4), TORC_F32, TORC_CPU, g2);
  double *vd = test_values(next_d), *vg = test_values(next_g);
  test_assert_values(again_d, vd, 4, 0);
  test_assert_values(again_g, vg, 4, 0);
  free(vd);
  free(vg);
  torc_clear_error();
  assert_int_equal(torc_checkpoint_restore_rng(back, "optim", NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "no RNG state 'optim'");
  assert_contains(torc_last_error(), "'default'");
  assert_contains(torc_last_error(), "'loader'");
  assert_ok(torc_state_dict_set_meta(back, "rng.loader.offset", "-3"));
  assert_int_equal(torc_checkpoint_restore_rng(back, "loader", g2),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "'rng.loader.offset' is \"-3\"");

  /* the model part, into a cpu model */
  torc_module *fresh = make_net(0);
  torc_load_report r = {0};
  assert_ok(torc_checkpoint_load_module(back, fresh, NULL, &r));
  assert_int_equal(r.n_loaded, NET_N);
  assert_int_equal(r.n_unexpected, 0);
  assert_first(torc_module_parameter(fresh, "a"), 100);
  torc_load_report_clear(&r);
  /* torc_module_load recognises a checkpoint file and uses "model." */
  torc_module *fresh2 = make_net(0);
  assert_ok(torc_module_load(fresh2, p, NULL, NULL));
  assert_first(torc_module_parameter(fresh2, "a"), 100);

  /* a plain state dict is not a checkpoint */
  const char *plain = tpath("plain.safetensors");
  assert_ok(torc_module_save(net, plain));
  torc_clear_error();
  assert_null(torc_checkpoint_load(plain, TORC_CPU));
  assert_error(TORC_ERR_INVALID, "is a plain state dict");
  assert_contains(torc_last_error(), "torc_module_load");
  torc_state_dict *psd = torc_state_dict_load(plain, TORC_CPU);
  assert_int_equal(torc_checkpoint_load_module(psd, fresh, NULL, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "not a checkpoint");
  torc_state_dict_free(psd);
  /* another format tag is named */
  torc_state_dict *odd = torc_state_dict_new();
  assert_ok(torc_state_dict_set_meta(odd, "torc.format", "dataset"));
  assert_ok(torc_state_dict_save(odd, tpath("odd.safetensors")));
  assert_null(torc_checkpoint_load(tpath("odd.safetensors"), TORC_CPU));
  assert_error(TORC_ERR_INVALID, "\"torc.format\" = \"dataset\"");
  torc_state_dict_free(odd);

  /* a checkpoint of another architecture: strict error listing keys */
  torc_module *other = make_other();
  torc_state_dict *ck2 = torc_checkpoint_new();
  assert_ok(torc_checkpoint_add_module(ck2, other));
  assert_ok(torc_state_dict_save(ck2, tpath("other.safetensors")));
  int64_t n;
  double *before = snapshot(fresh, &n);
  torc_clear_error();
  assert_int_equal(
      torc_module_load(fresh, tpath("other.safetensors"), NULL, NULL),
      TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "other.safetensors");
  assert_contains(torc_last_error(), "missing (4): rb, c.w, c.count, c.d.z");
  assert_contains(torc_last_error(), "unexpected (1): model.e.w");
  assert_unchanged(fresh, before, n);
  free(before);
  torc_state_dict_free(ck2);
  torc_module_free(other);

  torc_release(next_d);
  torc_release(next_g);
  torc_release(again_d);
  torc_release(again_g);
  torc_generator_free(g);
  torc_generator_free(g2);
  torc_module_free(fresh);
  torc_module_free(fresh2);
  torc_state_dict_free(back);
  torc_state_dict_free(ck);
  torc_module_free(net);
}

/* ---- a crash between writing and renaming ---- */

/* Saves a checkpoint of `net` at `epoch` to path. */
static torc_status save_ck(const torc_module *net, int64_t epoch,
                           const char *path) {
  torc_state_dict *ck = torc_checkpoint_new();
  torc_status s = torc_checkpoint_add_module(ck, net);
  if (s == TORC_OK)
    s = torc_state_dict_set_i64(ck, "epoch", epoch);
  if (s == TORC_OK)
    s = torc_state_dict_save(ck, path);
  torc_state_dict_free(ck);
  return s;
}

/* The leftover temporary file's name in tmpdir (static), or NULL. */
static const char *find_temp(void) {
  static char name[512];
  DIR *d = opendir(tmpdir);
  assert_non_null(d);
  struct dirent *e;
  const char *found = NULL;
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".tmp.")) {
      snprintf(name, sizeof name, "%s/%s", tmpdir, e->d_name);
      found = name;
    }
  closedir(d);
  return found;
}

static void test_crash_before_rename(void **state) {
  (void)state;
  const char *p = tpath("crash.safetensors");
  char path[512];
  snprintf(path, sizeof path, "%s", p);
  torc_module *old_net = make_net(100);
  torc_module *new_net = make_net(900);
  assert_ok(save_ck(old_net, 1, path));
  assert_int_equal(count_temps(), 0);

  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* The child writes epoch 2 over epoch 1 and stops itself (hook mode
     * 2: SIGSTOP) once the temporary file is written and fsync'ed, just
     * before the rename. */
    torc__safetensors_fail_before_rename(2);
    save_ck(new_net, 2, path);
    _exit(3); /* not reached */
  }
  /* The parent kills it there with SIGKILL, from outside: nothing in the
   * child runs after (no handler, no atexit, no valgrind report). */
  int wst = 0;
  assert_int_equal(waitpid(pid, &wst, WUNTRACED), pid);
  if (!WIFSTOPPED(wst)) {
    print_error("the child was not stopped before the rename (status %#x)\n",
                wst);
    fail();
  }
  assert_int_equal(kill(pid, SIGKILL), 0);
  assert_int_equal(waitpid(pid, &wst, 0), pid);
  assert_true(WIFSIGNALED(wst));
  assert_int_equal(WTERMSIG(wst), SIGKILL);

  /* The old checkpoint is intact. */
  torc_state_dict *ck = torc_checkpoint_load(path, TORC_CPU);
  assert_torc(ck);
  int64_t epoch = 0;
  assert_ok(torc_state_dict_get_i64(ck, "epoch", &epoch));
  assert_int_equal(epoch, 1);
  torc_module *loaded = make_net(0);
  assert_ok(torc_checkpoint_load_module(ck, loaded, NULL, NULL));
  int64_t n1, n2;
  double *want = snapshot(old_net, &n1);
  assert_unchanged(loaded, want, n1);
  free(want);
  torc_state_dict_free(ck);

  /* What a crash leaves: one temporary file next to the checkpoint,
   * ".crash.safetensors.tmp.<child pid>.<n>", holding the complete new
   * checkpoint (it was fsync'ed; only the rename was missing). Nothing
   * reads it. A later save removes it only once its writer's pid is dead
   * *and* it is older than the saving process (a newer one may belong to a
   * live writer on another machine sharing the folder); this process
   * started before the child wrote it, so here it stays. */
  assert_int_equal(count_temps(), 1);
  const char *tmp = find_temp();
  assert_non_null(tmp);
  char want_prefix[512];
  snprintf(want_prefix, sizeof want_prefix, "%s/.crash.safetensors.tmp.%ld.",
           tmpdir, (long)pid);
  assert_true(strncmp(tmp, want_prefix, strlen(want_prefix)) == 0);
  torc_state_dict *left = torc_checkpoint_load(tmp, TORC_CPU);
  assert_torc(left);
  assert_ok(torc_state_dict_get_i64(left, "epoch", &epoch));
  assert_int_equal(epoch, 2);
  torc_state_dict_free(left);

  /* The next successful save works (and leaves that newer file alone). */
  assert_ok(save_ck(new_net, 3, path));
  ck = torc_checkpoint_load(path, TORC_CPU);
  assert_torc(ck);
  assert_ok(torc_state_dict_get_i64(ck, "epoch", &epoch));
  assert_int_equal(epoch, 3);
  assert_ok(torc_checkpoint_load_module(ck, loaded, NULL, NULL));
  want = snapshot(new_net, &n2);
  assert_unchanged(loaded, want, n2);
  free(want);
  torc_state_dict_free(ck);
  assert_int_equal(count_temps(), 1);
  unlink(tmp);

  torc_module_free(loaded);
  torc_module_free(old_net);
  torc_module_free(new_net);
}

/* ---- bad files: each a clear error, nothing half-loaded ---- */

typedef struct bad_file {
  const char *what;
  torc_status status;
  const char *needle;
} bad_file;

static void test_bad_files(void **state) {
  (void)state;
  torc_module *net = make_net(0);
  torc_module *src = make_net(100);
  const char *good = tpath("good.safetensors");
  char gpath[512];
  snprintf(gpath, sizeof gpath, "%s", good);
  assert_ok(torc_module_save(src, gpath));
  size_t len;
  unsigned char *bytes = test_read_file(gpath, &len);
  int64_t n;
  double *before = snapshot(net, &n);

  static const bad_file cases[] = {
      {"truncated", TORC_ERR_INVALID, "truncated or corrupt"},
      {"header_past_end", TORC_ERR_IO, "past the end of the file"},
      {"tiny", TORC_ERR_IO, "starts with an 8-byte header length"},
      {"malformed_json", TORC_ERR_INVALID, "JSON header is malformed"},
      {"overlap", TORC_ERR_INVALID, "overlaps tensor"},
      {"out_of_bounds", TORC_ERR_INVALID, "run past the end of the data area"},
      {"unknown_dtype", TORC_ERR_INVALID, "dtype \"I8\" is not one torc"},
      {"duplicate_key", TORC_ERR_INVALID, "duplicate object key"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char name[64], path[512];
    snprintf(name, sizeof name, "%s.safetensors", cases[i].what);
    snprintf(path, sizeof path, "%s", tpath(name));
    switch (i) {
    case 0: /* the data cut short */
      test_write_file(path, bytes, len - 6);
      break;
    case 1: { /* a header length beyond the file */
      unsigned char *b = malloc(len);
      memcpy(b, bytes, len);
      b[4] = 0x01;
      test_write_file(path, b, len);
      free(b);
      break;
    }
    case 2:
      test_write_file(path, bytes, 5);
      break;
    case 3:
      write_st(path, "{\"a\": {\"dtype\": \"F32\",", 12);
      break;
    case 4:
      write_st(
          path,
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
          "\"rb\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
          16);
      break;
    case 5:
      write_st(
          path,
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[4,16]}}",
          12);
      break;
    case 6:
      write_st(
          path,
          "{\"a\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3);
      break;
    case 7:
      write_st(
          path,
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
          8);
      break;
    }
    torc_clear_error();
    torc_load_report r = {0};
    torc_status s = torc_module_load(net, path, NULL, &r);
    if (s != cases[i].status) {
      print_error("case %s: status %d (%s)\n", cases[i].what, s,
                  torc_last_error());
      fail();
    }
    assert_error(cases[i].status, cases[i].needle);
    assert_contains(torc_last_error(), name); /* the path */
    assert_int_equal(r.n_loaded, 0);
    assert_unchanged(net, before, n);
    torc_clear_error();
    assert_null(torc_state_dict_load(path, sim()));
    assert_error(cases[i].status, cases[i].needle);
    assert_null(torc_checkpoint_load(path, TORC_CPU));
    assert_error(cases[i].status, cases[i].needle);
  }
  /* the good file still loads */
  assert_ok(torc_module_load(net, gpath, NULL, NULL));
  assert_first(torc_module_parameter(net, "a"), 100);
  torc_clear_error();
  assert_int_equal(torc_module_load(net, NULL, NULL, NULL), TORC_ERR_NULL);
  free(before);
  free(bytes);
  torc_module_free(src);
  torc_module_free(net);
}

/* ---- built-in layers ---- */

/* Lazy layers have nothing to load into until their first forward. */
static void test_lazy_layers(void **state) {
  (void)state;
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_linear_new(4, 5, 1)));
  assert_ok(torc_sequential_append(seq, torc_linear_new(0, 3, 1)));
  torc_module *src = torc_sequential_new();
  assert_ok(torc_sequential_append(src, torc_linear_new(4, 5, 1)));
  assert_ok(torc_sequential_append(src, torc_linear_new(5, 3, 1)));
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(src, NULL, sd));
  assert_int_equal(torc_state_dict_count(sd), 4);
  assert_string_equal(torc_state_dict_name(sd, 2), "1.weight");
  torc_tensor *w0 =
      torc_module_parameter(torc_module_child(seq, "0"), "weight");
  double *before = test_values(w0);
  torc_clear_error();
  torc_load_opts ns = {.non_strict = 1};
  assert_int_equal(torc_module_load_state_dict(seq, sd, &ns, NULL),
                   TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "lazy: '1'");
  assert_contains(torc_last_error(), "run one forward first");
  assert_contains(torc_last_error(), "torc_module_summary");
  test_assert_values(w0, before, 20, 0);
  free(before);
  /* after one forward the parameters exist and the load goes through */
  int s = torc_scope_begin();
  torc_tensor *x = torc_ones(TORC_SHAPE(2, 4), TORC_F32, TORC_CPU);
  assert_torc(torc_module_forward(seq, x));
  torc_scope_end(s);
  torc_load_report r = {0};
  assert_ok(torc_module_load_state_dict(seq, sd, NULL, &r));
  assert_int_equal(r.n_loaded, 4);
  double *want = test_values(torc_state_dict_get(sd, "1.weight"));
  test_assert_values(
      torc_module_parameter(torc_module_child(seq, "1"), "weight"), want, 15,
      0);
  free(want);
  torc_load_report_clear(&r);
  torc_state_dict_free(sd);
  torc_module_free(src);
  torc_module_free(seq);
}

/* PyTorch's order for a real network: each module's parameters, then its
 * buffers, then the next module (listing all parameters, then all buffers,
 * would put 3.weight before 1.running_mean). From /usr/bin/python3:
 *   m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(),
 *                     nn.Linear(8, 3))
 *   list(m.state_dict()) */
static void test_layers_order_like_pytorch(void **state) {
  (void)state;
  static const char *const torch_keys[] = {"0.weight",
                                           "0.bias",
                                           "1.weight",
                                           "1.bias",
                                           "1.running_mean",
                                           "1.running_var",
                                           "1.num_batches_tracked",
                                           "3.weight",
                                           "3.bias"};
  torc_module *seq = torc_sequential_new();
  assert_ok(torc_sequential_append(seq, torc_conv2d_new(1, 2, 3, 3, NULL, 1)));
  assert_ok(torc_sequential_append(seq, torc_batchnorm2d_new(2, 1e-5, 0.1)));
  assert_ok(torc_sequential_append(seq, torc_flatten_new(1, -1)));
  assert_ok(torc_sequential_append(seq, torc_linear_new(8, 3, 1)));
  torc_state_dict *sd = torc_state_dict_new();
  assert_ok(torc_module_state_dict(seq, NULL, sd));
  assert_int_equal(torc_state_dict_count(sd), 9);
  for (int i = 0; i < 9; i++)
    assert_string_equal(torc_state_dict_name(sd, i), torch_keys[i]);
  /* a round trip through a file into a second network */
  const char *p = tpath("seq.safetensors");
  assert_ok(torc_module_save(seq, p));
  torc_module *two = torc_sequential_new();
  assert_ok(torc_sequential_append(two, torc_conv2d_new(1, 2, 3, 3, NULL, 1)));
  assert_ok(torc_sequential_append(two, torc_batchnorm2d_new(2, 1e-5, 0.1)));
  assert_ok(torc_sequential_append(two, torc_flatten_new(1, -1)));
  assert_ok(torc_sequential_append(two, torc_linear_new(8, 3, 1)));
  torc_load_report r = {0};
  assert_ok(torc_module_load(two, p, NULL, &r));
  assert_int_equal(r.n_loaded, 9);
  torc_state_dict *sd2 = torc_state_dict_new();
  assert_ok(torc_module_state_dict(two, NULL, sd2));
  for (int i = 0; i < 9; i++) {
    double *want = test_values(torc_state_dict_tensor(sd, i));
    const torc_tensor *got = torc_state_dict_tensor(sd2, i);
    test_assert_values(got, want, torc_numel(got), 0);
    free(want);
  }
  torc_state_dict_free(sd2);
  torc_load_report_clear(&r);
  torc_module_free(two);
  torc_state_dict_free(sd);
  torc_module_free(seq);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_dict_basics, setup, teardown),
      cmocka_unit_test_setup_teardown(test_module_state_dict_order, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_save_load_round_trip, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_load_keeps_identity, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_strict_and_non_strict, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_shape_and_dtype_mismatch, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_module_prefix, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prefix_option, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_lists, setup, teardown),
      cmocka_unit_test_setup_teardown(test_map_location, setup, teardown),
      cmocka_unit_test_setup_teardown(test_checkpoint_round_trip, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_crash_before_rename, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_bad_files, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lazy_layers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_layers_order_like_pytorch, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
