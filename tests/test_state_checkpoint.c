/* tests/test_state_checkpoint.c — checkpoints (torc/state.h): RNG,
 * counters and extra tensors round trip, a real crash between writing and
 * renaming a checkpoint (a forked child killed with SIGKILL), and one bad
 * file per reader error, each leaving nothing half-loaded.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "st_testutil.h"
#include "state_testutil.h"

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

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_checkpoint_round_trip),
      T(test_crash_before_rename),
      T(test_bad_files),
  };
#undef T
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
