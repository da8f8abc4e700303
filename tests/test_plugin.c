/* tests/test_plugin.c — the plugin loader's failures: each way loading can
 * fail (not found, not a shared object, missing dependency, no entry
 * symbol, ABI mismatch, short or NULL descriptor, failing init, a kernel
 * for an op torc lacks (an error, unless the plugin is of a newer ABI;
 * every in-tree plugin is checked), a truncated or foreign ELF file,
 * something that is not a file) gives its status and one message naming
 * the plugin, the path and the cause; a failed init is rolled back. Keys,
 * tables, permissions and configuration files are in test_plugin_keys.c.
 * The test plugins live in tests/plugins/ ($TORC_TEST_PLUGIN_DIR). */
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
 * Failures
 * ==================================================================== */

/* A bare name that is nowhere: TORC_ERR_IO listing the folders searched. */
static void test_not_found_lists_folders(void **state) {
  (void)state;
  torc_plugin_opts opts = {0};
  opts.search_path = "/nonexistent/torc-a:/nonexistent/torc-b";
  expect_load_error("no_such_plugin", &opts, TORC_ERR_IO);
  assert_contains(err_msg, "no_such_plugin");
  assert_contains(err_msg, "/nonexistent/torc-a");
  assert_contains(err_msg, "/nonexistent/torc-b");
  /* TORC_PLUGIN_PATH's folders are searched (and listed) too. */
  const char *env = getenv("TORC_PLUGIN_PATH");
  if (env != NULL && *env != '\0') {
    char first[PATH_MAX];
    snprintf(first, sizeof first, "%s", env);
    char *colon = strchr(first, ':');
    if (colon)
      *colon = '\0';
    assert_contains(err_msg, first);
  }
}

/* A path that does not exist: TORC_ERR_IO naming it. */
static void test_not_found_path(void **state) {
  (void)state;
  char dir[PATH_MAX], path[PATH_MAX + 32];
  make_tmpdir(dir);
  snprintf(path, sizeof path, "%s/absent.so", dir);
  expect_load_error(path, NULL, TORC_ERR_IO);
  assert_contains(err_msg, path);
}

/* A text file named junk.so: TORC_ERR_PLUGIN saying it is no ELF file,
 * both by path and found by name on the search path. */
static void test_not_a_shared_object(void **state) {
  (void)state;
  char dir[PATH_MAX], path[PATH_MAX + 32];
  make_tmpdir(dir);
  snprintf(path, sizeof path, "%s/junk.so", dir);
  write_file(path, "This is not a shared object. It is a text file that "
                   "happens to be named junk.so, long enough to hold an ELF "
                   "header if it were one.\n");
  expect_load_error(path, NULL, TORC_ERR_PLUGIN);
  assert_contains(err_msg, path);
  assert_contains(err_msg, "is not a loadable shared object");
  assert_contains(err_msg, "ELF magic");

  torc_plugin_opts opts = {0};
  opts.search_path = dir;
  expect_load_error("junk", &opts, TORC_ERR_PLUGIN);
  assert_contains(err_msg, path);
  assert_contains(err_msg, "ELF magic");
}

/* ---- hostile plugin files ---- */

/* Loads `module` in a child process, so that a loader that crashes on it
 * (SIGBUS from a file cut short, a hang on a FIFO) fails the test instead
 * of ending the suite; the child's status and message land in err_msg.
 * The alarm only turns a hang into a failure: a load takes milliseconds. */
static torc_status load_in_child(const char *module,
                                 const torc_plugin_opts *opts) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    /* cmocka catches these to fail the test in progress; in the child
     * they must end it, for the parent to see. */
    const int sigs[] = {SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
      signal(sigs[i], SIG_DFL);
    alarm(60);
    torc_status st = torc_plugin_load(module, opts);
    char out[sizeof err_msg];
    int n = snprintf(out, sizeof out, "%d %s", (int)st,
                     st ? torc_last_error() : "");
    if (n > (int)sizeof out - 1)
      n = (int)sizeof out - 1;
    ssize_t w = write(fds[1], out, (size_t)n);
    _exit(w == n && torc_plugin_count() == (st ? 0 : 1) ? 0 : 3);
  }
  close(fds[1]);
  char got[sizeof err_msg];
  size_t used = 0;
  ssize_t r;
  while (used < sizeof got - 1 &&
         ((r = read(fds[0], got + used, sizeof got - 1 - used)) > 0 ||
          (r < 0 && errno == EINTR)))
    if (r > 0)
      used += (size_t)r;
  got[used] = '\0';
  close(fds[0]);
  int ws;
  while (waitpid(pid, &ws, 0) < 0)
    assert_int_equal(errno, EINTR);
  if (WIFSIGNALED(ws)) {
    print_error("loading %s killed the loading process with signal %d "
                "(%s)\n",
                module, WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    fail();
  }
  assert_true(WIFEXITED(ws));
  assert_int_equal(WEXITSTATUS(ws), 0);
  int st = -1, off = 0;
  assert_int_equal(sscanf(got, "%d %n", &st, &off), 1);
  snprintf(err_msg, sizeof err_msg, "%s", got + off);
  return (torc_status)st;
}

/* Asserts loading `module` (in a child) fails with `want` and the one-line
 * "not a loadable shared object" message naming `module`, the reason
 * `why` and the fix. */
static void expect_not_loadable(const char *module,
                                const torc_plugin_opts *opts,
                                torc_status want, const char *why) {
  torc_status st = load_in_child(module, opts);
  if (st != want) {
    print_error("loading %s: expected %s, got %s: %s\n", module,
                torc_status_name(want), torc_status_name(st), err_msg);
    fail();
  }
  print_message("    %s: %s\n", torc_status_name(st), err_msg);
  assert_null(strchr(err_msg, '\n'));
  assert_contains(err_msg, module);
  assert_contains(err_msg, "is not a loadable shared object: ");
  assert_contains(err_msg, why);
  assert_contains(err_msg, "built for this machine");
}

/* A copy of goodkeys in `dir` named `name`, truncated to `len` bytes when
 * len >= 0; returns the copy's size before truncation. */
static long copy_plugin(const char *dir, const char *name, long len,
                        char *out) {
  snprintf(out, PATH_MAX + 32, "%s/%s", dir, name);
  copy_file(tp_path("goodkeys"), out, 0755);
  struct stat st;
  assert_int_equal(stat(out, &st), 0);
  if (len >= 0)
    assert_int_equal(truncate(out, (off_t)len), 0);
  return (long)st.st_size;
}

/* Rewrites `n` bytes at `off` of the file `path`. */
static void patch_file(const char *path, long off, const void *bytes,
                       size_t n) {
  int fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, bytes, n, (off_t)off), (ssize_t)n);
  assert_int_equal(close(fd), 0);
}

/* A plugin cut short anywhere — inside its ELF header, its program
 * headers, one of its loaded segments, its section headers — is refused
 * before dlopen maps it: dlopen of a file whose segments run past its end
 * touches pages beyond it and dies of SIGBUS. */
static void test_truncated_plugin(void **state) {
  (void)state;
  char dir[PATH_MAX], so[PATH_MAX + 32];
  make_tmpdir(dir);
  long full = copy_plugin(dir, "whole.so", -1, so);
  assert_true(full > 8192);
  struct {
    long len;
    const char *why;
  } cuts[16] = {
      {0, "shorter than an ELF header"},
      {10, "shorter than an ELF header"},
      {(long)sizeof(Elf64_Ehdr), "program headers"},
      {(long)sizeof(Elf64_Ehdr) + 100, "program headers"},
      {full - 1, "section headers"},
  };
  size_t n_cuts = 5;
  /* Halfway through each loaded segment. */
  FILE *f = fopen(so, "rb");
  assert_non_null(f);
  Elf64_Ehdr eh;
  assert_int_equal(fread(&eh, sizeof eh, 1, f), 1);
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    assert_int_equal(fseek(f, (long)(eh.e_phoff + i * sizeof ph), SEEK_SET),
                     0);
    assert_int_equal(fread(&ph, sizeof ph, 1, f), 1);
    long mid = (long)(ph.p_offset + ph.p_filesz / 2);
    if (ph.p_type == PT_LOAD && ph.p_filesz > 0 &&
        mid > (long)(eh.e_phoff + eh.e_phnum * sizeof ph) &&
        n_cuts < sizeof cuts / sizeof cuts[0]) {
      cuts[n_cuts].len = mid;
      cuts[n_cuts++].why = "the file is truncated";
    }
  }
  fclose(f);
  assert_true(n_cuts >= 7); /* goodkeys has several PT_LOADs */
  for (size_t i = 0; i < n_cuts; i++) {
    char name[64];
    snprintf(name, sizeof name, "cut%ld.so", cuts[i].len);
    copy_plugin(dir, name, cuts[i].len, so);
    unsetenv("TORC_TEST_GOODKEYS_MAPPED");
    expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, cuts[i].why);
    if (cuts[i].len > 0) {
      char bytes[64];
      snprintf(bytes, sizeof bytes, "it is %ld bytes long", cuts[i].len);
      assert_contains(err_msg, bytes);
    }
  }
  /* The whole copy still loads. */
  copy_plugin(dir, "whole.so", -1, so);
  assert_ok(load_in_child(so, NULL));
}

/* Program or section header offsets pointing past the end (or so far that
 * offset + size wraps) are refused, and so is a segment whose offset does. */
static void test_corrupt_header_offsets(void **state) {
  (void)state;
  char dir[PATH_MAX], so[PATH_MAX + 32];
  make_tmpdir(dir);
  const uint64_t offs[] = {0x7fffffffffff0000ull, UINT64_MAX - 8, 1u << 20};
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
    copy_plugin(dir, "phoff.so", -1, so);
    patch_file(so, offsetof(Elf64_Ehdr, e_phoff), &offs[i], sizeof offs[i]);
    expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, "program headers");
    copy_plugin(dir, "shoff.so", -1, so);
    patch_file(so, offsetof(Elf64_Ehdr, e_shoff), &offs[i], sizeof offs[i]);
    expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, "section headers");
  }
  /* The first program header of goodkeys is a PT_LOAD or comes before one;
   * give every PT_LOAD a wrapping offset. */
  long full = copy_plugin(dir, "seg.so", -1, so);
  FILE *f = fopen(so, "rb");
  assert_non_null(f);
  Elf64_Ehdr eh;
  assert_int_equal(fread(&eh, sizeof eh, 1, f), 1);
  int loads = 0;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    long at = (long)eh.e_phoff + (long)(i * sizeof ph);
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    assert_int_equal(fread(&ph, sizeof ph, 1, f), 1);
    if (ph.p_type == PT_LOAD) {
      uint64_t huge = UINT64_MAX - 16;
      patch_file(so, at + (long)offsetof(Elf64_Phdr, p_offset), &huge,
                 sizeof huge);
      loads++;
    }
  }
  fclose(f);
  assert_true(loads > 0 && full > 0);
  expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, "overflows");
}

/* An ELF file of another class, byte order, machine or type. */
static void test_foreign_elf(void **state) {
  (void)state;
  char dir[PATH_MAX], so[PATH_MAX + 32];
  make_tmpdir(dir);
  unsigned char b;
  copy_plugin(dir, "class32.so", -1, so);
  b = ELFCLASS32;
  patch_file(so, EI_CLASS, &b, 1);
  expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, "32-bit");

  copy_plugin(dir, "msb.so", -1, so);
  b = ELFDATA2MSB;
  patch_file(so, EI_DATA, &b, 1);
  expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, "big-endian");

  copy_plugin(dir, "machine.so", -1, so);
  FILE *f = fopen(so, "rb");
  assert_non_null(f);
  Elf64_Ehdr eh;
  assert_int_equal(fread(&eh, sizeof eh, 1, f), 1);
  fclose(f);
  Elf64_Half other = eh.e_machine == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
  patch_file(so, offsetof(Elf64_Ehdr, e_machine), &other, sizeof other);
  expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, "built for ELF machine");

  copy_plugin(dir, "exec.so", -1, so);
  Elf64_Half type = ET_EXEC;
  patch_file(so, offsetof(Elf64_Ehdr, e_type), &type, sizeof type);
  expect_not_loadable(so, NULL, TORC_ERR_PLUGIN, "not a shared object");
}

/* A FIFO, a folder and a character device named as plugins: refused
 * without blocking on the FIFO or reading the device. */
static void test_not_a_file(void **state) {
  (void)state;
  char dir[PATH_MAX], path[PATH_MAX + 32];
  make_tmpdir(dir);
  snprintf(path, sizeof path, "%s/fifo.so", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  expect_not_loadable(path, NULL, TORC_ERR_PLUGIN, "a FIFO");

  snprintf(path, sizeof path, "%s/folder.so", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  expect_not_loadable(path, NULL, TORC_ERR_PLUGIN, "a directory");
  /* Found by name on the search path too. */
  torc_plugin_opts opts = {0};
  opts.search_path = dir;
  torc_status st = load_in_child("folder", &opts);
  assert_int_equal(st, TORC_ERR_PLUGIN);
  assert_contains(err_msg, "a directory");

  /* /dev/zero is writable by all, so it takes allow_insecure to get past
   * the permission check. */
  struct stat zs;
  if (stat("/dev/zero", &zs) == 0 && S_ISCHR(zs.st_mode)) {
    expect_load_error("/dev/zero", NULL, TORC_ERR_PERMISSION);
    opts.search_path = NULL;
    opts.allow_insecure = 1;
    expect_not_loadable("/dev/zero", &opts, TORC_ERR_PLUGIN,
                        "a character device");
  }
}

/* A plugin whose shared-library dependency is absent. */
static void test_missing_dependency(void **state) {
  (void)state;
  const char *path = tp_path("missing_dep");
  expect_load_error(path, NULL, TORC_ERR_PLUGIN);
  assert_contains(err_msg, path);
  assert_contains(err_msg, "libtorc_missing_dep.so.1");
  assert_contains(err_msg, "cannot open shared object file");
  assert_int_equal(log_count("loaded although"), 0);
}

/* A shared object without torc_plugin_entry. */
static void test_no_entry_symbol(void **state) {
  (void)state;
  const char *path = tp_path("no_entry");
  expect_load_error(path, NULL, TORC_ERR_PLUGIN);
  assert_contains(err_msg, path);
  assert_contains(err_msg, "torc_plugin_entry");
  assert_int_equal(log_count("init called"), 0);
}

/* The next ABI major: TORC_ERR_ABI with both versions and the fix; init is
 * never called. */
static void test_abi_mismatch(void **state) {
  (void)state;
  const char *path = tp_path("bad_abi");
  expect_load_error(path, NULL, TORC_ERR_ABI);
  assert_contains(err_msg, "bad_abi");
  assert_contains(err_msg, path);
  char theirs[32], ours[32];
  snprintf(theirs, sizeof theirs, "%d.0", TORC_ABI_MAJOR + 1);
  snprintf(ours, sizeof ours, "%d.%d", TORC_ABI_MAJOR, TORC_ABI_MINOR);
  assert_contains(err_msg, theirs);
  assert_contains(err_msg, ours);
  assert_contains(err_msg, "rebuild");
  assert_int_equal(log_count("init called"), 0);
}

/* A descriptor that ends before init: refused, and the slot past its
 * struct_size is never read. */
static void test_descriptor_too_short(void **state) {
  (void)state;
  const char *path = tp_path("short_info");
  expect_load_error(path, NULL, TORC_ERR_ABI);
  assert_contains(err_msg, path);
  assert_contains(err_msg, "rebuild");
  assert_int_equal(log_count("init called"), 0);
}

/* An entry point returning NULL: refused with a message, no crash. */
static void test_entry_returns_null(void **state) {
  (void)state;
  const char *path = tp_path("null_info");
  expect_load_error(path, NULL, TORC_ERR_ABI);
  assert_contains(err_msg, path);
  assert_contains(err_msg, "NULL");
}

/* init registers a device type and a kernel, then fails: the plugin's
 * message is reported and both registrations are rolled back, leaving
 * what other plugins registered untouched. */
static void test_init_failure_rolls_back(void **state) {
  (void)state;
  test_load_plugin("ref");
  int kernels = torc_kernel_count();
  int plugins = torc_plugin_count();
  assert_true(kernels > 0);

  for (int round = 0; round < 2; round++) { /* a failed plugin is not kept */
    expect_load_error(tp_path("init_fail"), NULL, TORC_ERR_PLUGIN);
    assert_contains(err_msg, "init_fail");
    assert_contains(err_msg, "the widget driver is not installed; install "
                             "it or remove [plugin.init_fail]");
    assert_int_equal(torc_kernel_count(), kernels);
    assert_int_equal(torc_plugin_count(), plugins);
    assert_int_equal(torc_device_count("initfaildev"), -1);
    for (int i = 0; i < kernels; i++) {
      torc_kernel_summary k;
      assert_ok(torc_kernel_get(i, &k));
      assert_string_not_equal(k.provider, "init_fail");
    }
  }

  /* cpu add is ref's again, not the priority-1000 kernel of init_fail. */
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
  torc_tensor *ta = torc_from_host(a, TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_tensor *tb = torc_from_host(b, TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_tensor *tc = torc_add(ta, tb);
  assert_torc(tc);
  const double want[3] = {11, 22, 33};
  test_assert_values(tc, want, 3, 0);
  torc_release(ta);
  torc_release(tb);
  torc_release(tc);
}

/* A kernel table that names an op torc lacks ("rleu") fails the load,
 * naming the plugin, the name and the nearest op; the device type and the
 * kernel registered before it are rolled back, and ref serves the op. */
static void test_unknown_op_fails_the_load(void **state) {
  (void)state;
  expect_load_error(tp_path("typo_op"), NULL, TORC_ERR_PLUGIN);
  assert_contains(err_msg, "plugin 'typo_op': register_kernel: no op is "
                           "named 'rleu' (did you mean 'relu'?); the op "
                           "names are those of torc/ops.h");
  assert_int_equal(torc_kernel_count(), 0);
  assert_int_equal(torc_plugin_count(), 0);
  assert_int_equal(torc_device_count("typo_opdev"), -1);

  test_load_plugin("ref");
  int kernels = torc_kernel_count();
  expect_load_error(tp_path("typo_op"), NULL, TORC_ERR_PLUGIN);
  assert_int_equal(torc_kernel_count(), kernels);
  for (int i = 0; i < kernels; i++) {
    torc_kernel_summary k;
    assert_ok(torc_kernel_get(i, &k));
    assert_string_not_equal(k.provider, "typo_op");
  }
  /* An init that ignores the refusal and returns success fails the same. */
  expect_load_error(tp_path("typo_op_ignores"), NULL, TORC_ERR_PLUGIN);
  assert_contains(err_msg, "plugin 'typo_op_ignores': register_kernel: no op "
                           "is named 'rleu' (did you mean 'relu'?)");
  assert_int_equal(torc_kernel_count(), kernels);
  assert_int_equal(torc_device_count("typo_op_ignoresdev"), -1);
  /* add and relu run, on ref's kernels, not the priority-1000 add. */
  float a[3] = {-1, 2, 3}, b[3] = {10, 20, 30};
  torc_tensor *ta = torc_from_host(a, TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_tensor *tb = torc_from_host(b, TORC_SHAPE(3), TORC_F32, TORC_CPU);
  torc_tensor *tc = torc_add(ta, tb), *tr = torc_relu(ta);
  assert_torc(tc);
  assert_torc(tr);
  const double want_add[3] = {9, 22, 33}, want_relu[3] = {0, 2, 3};
  test_assert_values(tc, want_add, 3, 0);
  test_assert_values(tr, want_relu, 3, 0);
  torc_release(ta), torc_release(tb), torc_release(tc), torc_release(tr);
}

/* A plugin built for a newer minor ABI may name ops this torc lacks: it
 * loads, those kernels are skipped, logged once at INFO, and its other
 * kernels stay. */
static void test_newer_plugin_unknown_op_skipped(void **state) {
  (void)state;
  torc_set_log_level(TORC_LOG_INFO);
  if (try_load(tp_path("typo_op_newer"), NULL) != TORC_OK) {
    print_error("loading typo_op_newer: %s\n", err_msg);
    fail();
  }
  assert_int_equal(log_count("its kernels for ops this torc lacks "
                             "('op_of_a_later_torc' and any others) are "
                             "skipped"),
                   1);
  assert_int_equal(torc_kernel_count(), 1);
  torc_kernel_summary k;
  assert_ok(torc_kernel_get(0, &k));
  assert_string_equal(k.provider, "typo_op_newer");
  assert_string_equal(k.op, "add");
}

/* Every in-tree plugin loads, alone and on a fresh torc: the loader fails
 * any whose kernel table names an op torc lacks, and none may claim a
 * newer ABI than the core it ships with (which would hide such a name). */
static void test_in_tree_plugins_load(void **state) {
  (void)state;
  static const struct {
    const char *name, *package;
  } in_tree[] = {
      {"ref", "nothing (always built)"},
      {"sim", "nothing (always built)"},
      {"cpu", "libopenblas-dev"},
      {"onednn", "libdnnl-dev"},
      {"data", "nothing (always built)"},
      {"losses", "nothing (always built)"},
      {"optim", "nothing (always built)"},
  };
  int loaded = 0;
  for (size_t i = 0; i < sizeof in_tree / sizeof in_tree[0]; i++) {
    if (!test_plugin_built(in_tree[i].name, in_tree[i].package))
      continue;
    torc_shutdown();
    test_load_plugin(in_tree[i].name);
    int found = 0;
    for (int j = 0; j < torc_plugin_count(); j++) {
      torc_plugin_summary p;
      assert_ok(torc_plugin_get(j, &p));
      assert_int_equal(p.abi_major, TORC_ABI_MAJOR);
      assert_true(p.abi_minor <= TORC_ABI_MINOR);
      found += strcmp(p.name, in_tree[i].name) == 0;
    }
    assert_int_equal(found, 1);
    print_message("    %s loads\n", in_tree[i].name);
    loaded++;
  }
  assert_true(loaded >= 5); /* ref, sim, data, losses, optim: always built */
}

/* NULL or empty module: an error, not a crash. */
static void test_bad_arguments(void **state) {
  (void)state;
  assert_int_not_equal(torc_plugin_load(NULL, NULL), TORC_OK);
  assert_true(torc_last_error()[0] != '\0');
  assert_int_not_equal(torc_plugin_load("", NULL), TORC_OK);
  assert_true(torc_last_error()[0] != '\0');
  assert_int_equal(torc_plugin_count(), 0);
}

int main(void) {
  plugin_dir = getenv("TORC_TEST_PLUGIN_DIR");
  if (plugin_dir == NULL || *plugin_dir == '\0') {
    printf("test_plugin: TORC_TEST_PLUGIN_DIR is unset; run it through "
           "`make check`, which builds the test plugins and sets it\n");
    return TEST_SKIP_STATUS;
  }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_not_found_lists_folders),
      T(test_not_found_path),
      T(test_not_a_shared_object),
      T(test_truncated_plugin),
      T(test_corrupt_header_offsets),
      T(test_foreign_elf),
      T(test_not_a_file),
      T(test_missing_dependency),
      T(test_no_entry_symbol),
      T(test_abi_mismatch),
      T(test_descriptor_too_short),
      T(test_entry_returns_null),
      T(test_init_failure_rolls_back),
      T(test_unknown_op_fails_the_load),
      T(test_newer_plugin_unknown_op_skipped),
      T(test_in_tree_plugins_load),
      T(test_bad_arguments),
  };
#undef T
  return cmocka_run_group_tests_name("plugin", tests, NULL, NULL);
}
