/* tests/test_oom_train.c — allocation-failure sweeps (tests/oom_testutil.h)
 * over the loader with 0 and 1 workers (a source defined here), and short
 * torc_train and torc_evaluate runs of an INI file with a checkpoint.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"
#include "torc/config.h"
#include "torc/data.h"
#include "torc/optim.h"
#include "torc/testing.h"
#include "torc/train.h"
#include "oom_testutil.h"

/* ---- the loader, over a source defined here ---- */

/* Sample i: input [2, 3] holding i * 10 + k, target i. Its own memory is
 * the C library's: only the tensors it makes go through torc. */
static int ms_open(const char *const *keys, const char *const *values, int n,
                   void *user, void **handle) {
  (void)keys, (void)values, (void)n, (void)user;
  *handle = (void *)1;
  return TORC_OK;
}
static int64_t ms_length(void *h) {
  (void)h;
  return 6;
}
static int ms_get(void *h, int64_t i, torc_tensor **input,
                  torc_tensor **target) {
  (void)h;
  float v[6];
  for (int k = 0; k < 6; k++)
    v[k] = (float)(i * 10 + k);
  *input = torc_from_host(v, TORC_SHAPE(2, 3), TORC_F32, TORC_CPU);
  int64_t t = i;
  *target = torc_from_host(&t, NULL, 0, TORC_I64, TORC_CPU);
  if (*input == NULL || *target == NULL) {
    torc_release(*input);
    torc_release(*target);
    *input = *target = NULL;
    return torc_last_status();
  }
  return TORC_OK;
}
static void ms_close(void *h) { (void)h; }
static const torc_data_source_type ms_type = {
    offsetof(torc_data_source_type, describe), "oom_samples",
    "six small samples", NULL, ms_open, ms_length, ms_get, ms_close,
    NULL, NULL, NULL, NULL};

static int run_loader(scenario *sc) {
  int workers = *(int *)sc->ctx;
  torc_dataset *ds = torc_dataset_open("oom_samples", NULL, NULL, 0);
  if (ds == NULL)
    return -1;
  torc_loader_opts o = {.batch_size = 2, .workers = workers};
  torc_loader *ld = torc_loader_new(ds, &o);
  int rc = ld ? 0 : -1;
  for (int b = 0; rc == 0 && b < 2; b++) {
    torc_batch batch = {0};
    int got = torc_loader_next(ld, &batch);
    if (got != 1) {
      rc = -1;
      break;
    }
    rc = out_tensor(sc, batch.input) || out_tensor(sc, batch.target);
    torc_batch_clear(&batch);
  }
  /* Keep the error: freeing the loader must not replace it. */
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", torc_last_error());
  torc_status st = torc_last_status();
  torc_loader_free(ld);
  torc_dataset_close(ds);
  if (rc != 0)
    torc_set_error(st, "%s", msg);
  return rc;
}

static void loader_sweep(int workers) {
  scenario sc = {.name = workers ? "loader, 1 worker" : "loader, 0 workers",
                 .run = run_loader, .ctx = &workers, .threaded = workers > 0};
  sweep(&sc);
}

static void test_loader_0(void **state) {
  (void)state;
  loader_sweep(0);
}

static void test_loader_1(void **state) {
  (void)state;
  loader_sweep(1);
}

/* ---- torc_train: a short run of an INI file, with a checkpoint ---- */

typedef struct train_ctx {
  char ini[4096];
  char dir[512];     /* the checkpoint folder */
  const char *resume; /* torc_train_opts.resume */
} train_ctx;

static int run_train(scenario *sc) {
  train_ctx *c = sc->ctx;
  torc_config *cfg = torc_config_parse(c->ini, "train.ini");
  if (cfg == NULL)
    return -1;
  FILE *devnull = fopen("/dev/null", "w");
  torc_train_opts o = {.out = devnull, .resume = c->resume};
  torc_train_result res;
  memset(&res, 0, sizeof res);
  torc_status st = torc_train(cfg, &o, &res);
  fclose(devnull);
  torc_config_free(cfg);
  if (st != TORC_OK)
    return -1;
  out_push(sc, (double)res.epochs);
  out_push(sc, (double)res.steps);
  return 0;
}

/* No temporary file stays behind; a good run's checkpoint loads. The
 * folder is emptied for the next run. */
static void after_train(scenario *sc, int ok) {
  train_ctx *c = sc->ctx;
  DIR *d = opendir(c->dir);
  int ckpts = 0;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.' &&
          (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0))
        continue;
      char p[1024];
      snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name);
      if (strstr(e->d_name, ".tmp")) {
        print_error("%s: N=%lld%s: temporary file %s left behind\n",
                    sc->name, (long long)sc->n,
                    sc->persistent ? " (from N on)" : "", e->d_name);
        closedir(d);
        fail();
      }
      if (ok && strstr(e->d_name, ".safetensors")) {
        torc_state_dict *ck = torc_checkpoint_load(p, TORC_CPU);
        if (ck == NULL) {
          print_error("%s: N=%lld: checkpoint %s does not load: %s\n",
                      sc->name, (long long)sc->n, e->d_name,
                      torc_last_error());
          closedir(d);
          fail();
        }
        torc_state_dict_free(ck);
        ckpts++;
      }
      unlink(p);
    }
    closedir(d);
  }
  if (ok)
    assert_true(ckpts > 0);
}

static void test_train(void **state) {
  (void)state;
  train_ctx c = {0};
  snprintf(c.dir, sizeof c.dir, "%s/ckpt", tmpdir);
  snprintf(c.ini, sizeof c.ini,
           "[torc]\nseed = 3\n"
           "[model]\ninput = 6\n"
           "[layer]\ntype = linear\nout_features = 5\n"
           "[layer]\ntype = relu\n"
           "[layer]\ntype = linear\nout_features = 3\n"
           "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
           "samples = 8\nbatch_size = 4\n"
           "[loss]\ntype = cross_entropy\n"
           "[optimizer]\ntype = sgd\nlr = 0.1\nmomentum = 0.9\n"
           "[train]\nepochs = 1\ndir = %s/run\n"
           "[checkpoint]\ndir = %s\n",
           tmpdir, c.dir);
  scenario sc = {.name = "torc_train", .run = run_train,
                 .after = after_train, .ctx = &c};
  sweep(&sc);
  rmdir(c.dir);
}

/* More of the trainer: a loader worker, a test set evaluated, adam with a
 * scheduler and warm-up, clipping, the metrics CSV and its curves. */
static void test_train_full(void **state) {
  (void)state;
  train_ctx c = {0};
  snprintf(c.dir, sizeof c.dir, "%s/ckpt", tmpdir);
  snprintf(c.ini, sizeof c.ini,
           "[torc]\nseed = 5\n"
           "[model]\ninput = 1,4,4\n"
           "[layer]\ntype = conv2d\nout_channels = 2\nkernel = 3\n"
           "padding = 1\n"
           "[layer]\ntype = batchnorm2d\n"
           "[layer]\ntype = relu\n"
           "[layer]\ntype = flatten\n"
           "[layer]\ntype = linear\nout_features = 3\n"
           "[data.train]\nsource = synthetic\nshape = 1,4,4\nclasses = 3\n"
           "samples = 8\nbatch_size = 4\nworkers = 1\nshuffle = yes\n"
           "transform = random_hflip(0.5)\n"
           "[data.test]\nsource = synthetic\nshape = 1,4,4\nclasses = 3\n"
           "samples = 4\nbatch_size = 4\n"
           "[loss]\ntype = cross_entropy\nlabel_smoothing = 0.1\n"
           "[optimizer]\ntype = adam\nlr = 0.01\n"
           "[scheduler]\ntype = cosine\nt_max = 2\nwarmup = 1\n"
           "[train]\nepochs = 2\nclip_grad_norm = 1\nlog_every = 1\n"
           "dir = %s/run\nmetrics = %s/metrics.csv\n"
           "[checkpoint]\ndir = %s\nkeep = 1\n",
           tmpdir, c.dir, c.dir);
  scenario sc = {.name = "torc_train (more)", .run = run_train,
                 .after = after_train, .ctx = &c, .threaded = 1};
  sweep(&sc);
  rmdir(c.dir);
}

/* Resuming: a clean run's first-epoch checkpoint (model, adam, scheduler,
 * RNG, position) read back, and the second epoch trained. */
static void test_train_resume(void **state) {
  (void)state;
  train_ctx c = {0};
  char first[512], ckpt[1024] = "";
  snprintf(first, sizeof first, "%s/first", tmpdir);
  snprintf(c.dir, sizeof c.dir, "%s/ckpt", tmpdir);
  const char *body =
      "[torc]\nseed = 4\n"
      "[model]\ninput = 6\n"
      "[layer]\ntype = linear\nout_features = 3\n"
      "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
      "samples = 8\nbatch_size = 4\nshuffle = yes\n"
      "[loss]\ntype = cross_entropy\n"
      "[optimizer]\ntype = adam\nlr = 0.01\n"
      "[scheduler]\ntype = step\nstep_size = 1\n";
  snprintf(c.ini, sizeof c.ini,
           "%s[train]\nepochs = 1\ndir = %s/run\n[checkpoint]\ndir = %s\n",
           body, tmpdir, first);
  scenario setup = {.name = "setup", .run = run_train, .ctx = &c};
  run_clean(&setup);
  DIR *d = opendir(first);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".safetensors"))
      snprintf(ckpt, sizeof ckpt, "%s/%s", first, e->d_name);
  closedir(d);
  assert_true(ckpt[0] != '\0');
  snprintf(c.ini, sizeof c.ini,
           "%s[train]\nepochs = 2\ndir = %s/run\n[checkpoint]\ndir = %s\n",
           body, tmpdir, c.dir);
  c.resume = ckpt;
  scenario sc = {.name = "torc_train resume", .run = run_train,
                 .after = after_train, .ctx = &c};
  sweep(&sc);
  unlink(ckpt);
  rmdir(first);
  rmdir(c.dir);
}

/* torc_evaluate of a checkpoint a clean run wrote: the predictions it
 * prints (as a hash of the text) are the result. */
typedef struct eval_ctx {
  char ini[4096];
  char ckpt[1024];
} eval_ctx;

static int run_eval(scenario *sc) {
  eval_ctx *c = sc->ctx;
  torc_config *cfg = torc_config_parse(c->ini, "eval.ini");
  if (cfg == NULL)
    return -1;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  torc_status st = torc_evaluate(cfg, c->ckpt, 2, out, NULL);
  fclose(out);
  torc_config_free(cfg);
  uint64_t h = 5381;
  for (size_t i = 0; i < len; i++)
    h = h * 33 + (unsigned char)text[i];
  free(text);
  if (st != TORC_OK)
    return -1;
  out_push(sc, (double)(h % 1000000007u));
  return 0;
}

static void test_evaluate(void **state) {
  (void)state;
  train_ctx t = {0};
  snprintf(t.dir, sizeof t.dir, "%s/eval", tmpdir);
  const char *body =
      "[torc]\nseed = 3\n"
      "[model]\ninput = 6\n"
      "[layer]\ntype = linear\nout_features = 5\n"
      "[layer]\ntype = relu\n"
      "[layer]\ntype = linear\nout_features = 3\n"
      "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
      "samples = 8\nbatch_size = 4\n"
      "[data.test]\nsource = synthetic\nshape = 6\nclasses = 3\n"
      "samples = 6\nbatch_size = 4\nseed = 9\n"
      "[loss]\ntype = cross_entropy\n"
      "[optimizer]\ntype = sgd\nlr = 0.1\n";
  snprintf(t.ini, sizeof t.ini,
           "%s[train]\ndir = %s/run\n[checkpoint]\ndir = %s\nevery = 0\n",
           body, tmpdir, t.dir);
  scenario tr = {.name = "setup", .run = run_train, .ctx = &t};
  run_clean(&tr);
  eval_ctx c;
  snprintf(c.ini, sizeof c.ini, "%s", t.ini);
  DIR *d = opendir(t.dir);
  assert_non_null(d);
  struct dirent *e;
  c.ckpt[0] = '\0';
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".safetensors"))
      snprintf(c.ckpt, sizeof c.ckpt, "%s/%s", t.dir, e->d_name);
  closedir(d);
  assert_true(c.ckpt[0] != '\0');
  scenario sc = {.name = "torc_evaluate", .run = run_eval, .ctx = &c};
  sweep(&sc);
  unlink(c.ckpt);
  rmdir(t.dir);
}

/* group_setup, and the source of the loader's sweeps. */
static int train_group_setup(void **state) {
  if (group_setup(state))
    return -1;
  if (torc_data_source_register(&ms_type) != TORC_OK) {
    fprintf(stderr, "setup: %s\n", torc_last_error());
    return -1;
  }
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loader_0),
      cmocka_unit_test(test_loader_1),
      cmocka_unit_test(test_train),
      cmocka_unit_test(test_train_full),
      cmocka_unit_test(test_train_resume),
      cmocka_unit_test(test_evaluate),
  };
  oom_filter_from_env();
  return cmocka_run_group_tests(tests, train_group_setup, group_teardown);
}
