/* tests/test_train_callbacks.c — the trainer's callbacks (torc_train_ex):
 * a callback sees every step, evaluation, epoch, checkpoint and the end,
 * in order and with the figures the metrics CSV holds; TORC_TRAIN_STOP
 * ends the run cleanly (TORC_OK, the stop message, a checkpoint that
 * --resume goes on from to the same CSV as a straight run), from an epoch's
 * end or mid-epoch; TORC_TRAIN_FAIL ends it with the callback's error; the
 * built-in reporters write the same CSV with callbacks as without, and
 * their flags leave them out.
 */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char tmpdir[512];

/* 48 samples in batches of 8: 6 steps an epoch, a log row every 2, a test
 * set of 24 evaluated each epoch, checkpoints only at the end (every = 0),
 * deterministic so that a stopped and resumed run is the straight one. */
static torc_config *config(const char *name, int epochs) {
  char ini[4096];
  snprintf(ini, sizeof ini,
           "[torc]\nseed = 11\ndeterministic = yes\n"
           "[plugin.ref]\nmodule = ref\n[plugin.data]\nmodule = data\n"
           "[plugin.losses]\nmodule = losses\n[plugin.optim]\nmodule = optim\n"
           "[model]\ninput = 6\n"
           "[layer]\ntype = linear\nout_features = 8\n"
           "[layer]\ntype = relu\n"
           "[layer]\ntype = linear\nout_features = 3\n"
           "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
           "samples = 48\nbatch_size = 8\nshuffle = yes\n"
           "[data.test]\nsource = synthetic\nshape = 6\nclasses = 3\n"
           "samples = 24\nbatch_size = 12\n"
           "[loss]\ntype = cross_entropy\n"
           "[optimizer]\ntype = sgd\nlr = 0.1\nmomentum = 0.9\n"
           "[train]\nepochs = %d\nlog_every = 2\ndir = %s/%s\n"
           "metrics = %s/%s/metrics.csv\n"
           "[checkpoint]\ndir = %s/%s/ckpt\nevery = 0\n",
           epochs, tmpdir, name, tmpdir, name, tmpdir, name);
  torc_config *cfg = torc_config_parse(ini, "callbacks.ini");
  assert_torc(cfg);
  return cfg;
}

/* ---- a recorder: every event, in order ---- */

enum { EV_STEP = 1, EV_EVAL, EV_EPOCH, EV_CKPT, EV_END };

typedef struct rec {
  int kind;
  torc_train_event ev;
  char ckpt[1024];
} rec;

typedef struct recorder {
  rec r[256];
  int n;
  int stop_kind;      /* stop at this kind of event ... */
  int64_t stop_epoch; /* ... of this epoch (on_step: at this global step) */
  int64_t stop_step;
  int fail_at_step; /* on_step returns TORC_TRAIN_FAIL at this step */
} recorder;

static int record(recorder *rc, int kind, const torc_train_event *ev) {
  assert_true(rc->n < 256);
  assert_int_equal(ev->struct_size, sizeof(torc_train_event));
  rec *r = &rc->r[rc->n++];
  r->kind = kind;
  r->ev = *ev;
  snprintf(r->ckpt, sizeof r->ckpt, "%s", ev->checkpoint ? ev->checkpoint : "");
  if (kind == EV_STEP && rc->fail_at_step && ev->step == rc->fail_at_step) {
    torc_set_error(TORC_ERR_IO, "the test's callback failed at step %lld",
                   (long long)ev->step);
    return TORC_TRAIN_FAIL;
  }
  if (kind != rc->stop_kind)
    return TORC_TRAIN_CONTINUE;
  if (kind == EV_STEP)
    return ev->step == rc->stop_step ? TORC_TRAIN_STOP : TORC_TRAIN_CONTINUE;
  return ev->epoch == rc->stop_epoch ? TORC_TRAIN_STOP : TORC_TRAIN_CONTINUE;
}

static int on_step(const torc_train_event *ev, void *u) {
  return record(u, EV_STEP, ev);
}
static int on_eval(const torc_train_event *ev, void *u) {
  return record(u, EV_EVAL, ev);
}
static int on_epoch(const torc_train_event *ev, void *u) {
  return record(u, EV_EPOCH, ev);
}
static int on_ckpt(const torc_train_event *ev, void *u) {
  return record(u, EV_CKPT, ev);
}
static int on_end(const torc_train_event *ev, void *u) {
  record(u, EV_END, ev);
  return TORC_TRAIN_STOP; /* ignored */
}

static torc_train_callbacks callbacks(recorder *rc, unsigned flags) {
  return (torc_train_callbacks){.struct_size = sizeof(torc_train_callbacks),
                                .user = rc,
                                .on_step = on_step,
                                .on_eval = on_eval,
                                .on_epoch_end = on_epoch,
                                .on_checkpoint = on_ckpt,
                                .on_end = on_end,
                                .flags = flags};
}

/* ---- helpers ---- */

/* Runs cfg with callbacks cb (NULL: torc_train), its output into `out`.
 * The file is applied first: each run starts from [torc] seed. */
static torc_status run(torc_config *cfg, const torc_train_callbacks *cb,
                       const char *resume, char *out, size_t size,
                       torc_train_result *res) {
  assert_ok(torc_config_apply(cfg));
  FILE *f = tmpfile();
  assert_non_null(f);
  torc_train_opts o = {.out = f, .resume = resume};
  torc_status st =
      cb ? torc_train_ex(cfg, &o, cb, res) : torc_train(cfg, &o, res);
  rewind(f);
  size_t n = fread(out, 1, size - 1, f);
  out[n] = '\0';
  fclose(f);
  return st;
}

/* The CSV of run `name` without its timed columns (samples_per_sec,
 * seconds), into buf. */
static void csv_untimed(const char *name, char *buf, size_t size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s/metrics.csv", tmpdir, name);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    print_error("no metrics file %s\n", path);
    fail();
  }
  size_t len = 0;
  char line[512];
  buf[0] = '\0';
  while (fgets(line, sizeof line, f)) {
    int commas = 0;
    char *p = line;
    while (*p && !(*p == ',' && ++commas == 6))
      p++;
    *p = '\0';
    len += (size_t)snprintf(buf + len, size - len, "%s\n", line);
    assert_true(len < size);
  }
  fclose(f);
}

static int file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* ---- tests ---- */

/* Steps 1..18 in order, each with its epoch and batch; a logged window
 * every 2 steps whose figures are the CSV's; after each epoch's 6 steps an
 * evaluation then the epoch's end; the last epoch's checkpoint; the end. */
static void test_events_in_order(void **state) {
  (void)state;
  torc_config *cfg = config("order", 3);
  recorder *rc = calloc(1, sizeof *rc);
  assert_non_null(rc);
  torc_train_callbacks cb = callbacks(rc, 0);
  char out[8192];
  torc_train_result res;
  assert_ok(run(cfg, &cb, NULL, out, sizeof out, &res));
  assert_int_equal(res.epochs, 3);
  assert_int_equal(res.steps, 18);
  assert_int_equal(rc->n, 3 * (6 + 2) + 1 + 1);
  int i = 0;
  for (int64_t e = 1; e <= 3; e++) {
    for (int64_t b = 1; b <= 6; b++, i++) {
      const torc_train_event *ev = &rc->r[i].ev;
      assert_int_equal(rc->r[i].kind, EV_STEP);
      assert_int_equal(ev->epoch, e);
      assert_int_equal(ev->epochs, 3);
      assert_int_equal(ev->batch, b);
      assert_int_equal(ev->batches, 6);
      assert_int_equal(ev->step, (e - 1) * 6 + b);
      assert_int_equal(ev->samples, 8);
      assert_int_equal(ev->logged, b % 2 == 0);
      /* The figures are read where the window ends (every 2 steps). */
      if (ev->logged) {
        assert_true(isfinite(ev->loss) && ev->loss > 0);
        assert_true(ev->accuracy >= 0 && ev->accuracy <= 1);
        assert_true(isfinite(ev->window_loss) && ev->window_loss > 0);
      } else {
        assert_true(isnan(ev->loss) && isnan(ev->accuracy));
        assert_true(isnan(ev->window_loss));
      }
      assert_true(fabs(ev->lr - 0.1) < 1e-12);
      assert_true(ev->seconds >= 0 && ev->epoch_seconds >= 0);
      assert_true(isnan(ev->test_loss));
    }
    assert_int_equal(rc->r[i].kind, EV_EVAL);
    assert_int_equal(rc->r[i].ev.epoch, e);
    assert_int_equal(rc->r[i].ev.samples, 24);
    assert_true(isfinite(rc->r[i].ev.test_loss));
    i++;
    assert_int_equal(rc->r[i].kind, EV_EPOCH);
    assert_int_equal(rc->r[i].ev.epoch, e);
    assert_true(rc->r[i].ev.evaluated);
    assert_true(rc->r[i].ev.test_loss == rc->r[i - 1].ev.test_loss);
    assert_true(isfinite(rc->r[i].ev.train_loss));
    i++;
  }
  assert_int_equal(rc->r[i].kind, EV_CKPT);
  assert_int_equal(rc->r[i].ev.reason, TORC_TRAIN_SCHEDULED);
  assert_string_equal(rc->r[i].ckpt, res.checkpoint);
  assert_contains(res.checkpoint, "order/ckpt/ckpt-00000018.safetensors");
  assert_true(file_exists(res.checkpoint));
  i++;
  assert_int_equal(rc->r[i].kind, EV_END);
  assert_int_equal(rc->r[i].ev.reason, TORC_TRAIN_FINISHED);
  assert_int_equal(rc->r[i].ev.status, TORC_OK);
  assert_int_equal(rc->r[i].ev.step, 18);
  assert_true(rc->r[i].ev.test_loss == res.test_loss);

  /* The logged windows are the CSV's train rows, the evaluations its test
   * rows: epoch, step, loss and accuracy as printed there. */
  char csv[16384], want[16384];
  csv_untimed("order", csv, sizeof csv);
  size_t len = (size_t)snprintf(want, sizeof want,
                                "epoch,step,split,loss,accuracy,lr\n");
  for (int k = 0; k < rc->n; k++) {
    const torc_train_event *ev = &rc->r[k].ev;
    if (rc->r[k].kind == EV_STEP && ev->logged)
      len += (size_t)snprintf(want + len, sizeof want - len,
                              "%lld,%lld,train,%.6f,%.6f,%.6g\n",
                              (long long)ev->epoch, (long long)ev->step,
                              ev->window_loss, ev->window_accuracy, ev->lr);
    else if (rc->r[k].kind == EV_EVAL)
      len += (size_t)snprintf(want + len, sizeof want - len,
                              "%lld,%lld,test,%.6f,%.6f,%.6g\n",
                              (long long)ev->epoch, (long long)ev->step,
                              ev->test_loss, ev->test_accuracy, ev->lr);
  }
  assert_string_equal(csv, want);
  free(rc);
  torc_config_free(cfg);
}

/* TORC_TRAIN_EVERY_STEP reads every step's figures back, the run itself
 * the same (its CSV as without the flag); at the logged steps the figures
 * are those the default reads there. */
static void test_every_step(void **state) {
  (void)state;
  torc_config *plain = config("lazy", 1), *every = config("every", 1);
  recorder *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  assert_non_null(a);
  assert_non_null(b);
  torc_train_callbacks ca = callbacks(a, 0),
                       cb = callbacks(b, TORC_TRAIN_EVERY_STEP);
  char out[8192];
  torc_train_result res;
  assert_ok(run(plain, &ca, NULL, out, sizeof out, &res));
  assert_ok(run(every, &cb, NULL, out, sizeof out, &res));
  assert_int_equal(a->n, b->n);
  int steps = 0;
  for (int k = 0; k < b->n; k++) {
    if (b->r[k].kind != EV_STEP)
      continue;
    const torc_train_event *ev = &b->r[k].ev, *ea = &a->r[k].ev;
    steps++;
    assert_true(isfinite(ev->loss) && ev->loss > 0);
    assert_true(ev->accuracy >= 0 && ev->accuracy <= 1);
    assert_true(isfinite(ev->window_loss));
    if (ev->logged) {
      assert_true(ev->loss == ea->loss);
      assert_true(ev->window_loss == ea->window_loss);
    } else {
      assert_true(isnan(ea->loss));
    }
  }
  assert_int_equal(steps, 6);
  char x[16384], y[16384];
  csv_untimed("lazy", x, sizeof x);
  csv_untimed("every", y, sizeof y);
  assert_string_equal(x, y);
  free(a), free(b);
  torc_config_free(plain), torc_config_free(every);
}

/* The built-in reporters write the same CSV and the same lines with a
 * caller's callbacks as torc_train does without; the flags leave them
 * out. */
static void test_default_reporters(void **state) {
  (void)state;
  torc_config *plain = config("plain", 2), *with = config("with", 2),
              *quiet = config("quiet", 2);
  char out_plain[8192], out_with[8192], out_quiet[8192];
  torc_train_result res;
  assert_ok(run(plain, NULL, NULL, out_plain, sizeof out_plain, &res));
  recorder *rc = calloc(1, sizeof *rc);
  assert_non_null(rc);
  torc_train_callbacks cb = callbacks(rc, 0);
  assert_ok(run(with, &cb, NULL, out_with, sizeof out_with, &res));
  char a[16384], b[16384];
  csv_untimed("plain", a, sizeof a);
  csv_untimed("with", b, sizeof b);
  assert_string_equal(a, b);
  /* 3 train rows and a test row an epoch, after the header. */
  int rows = 0;
  for (const char *p = a; (p = strchr(p, '\n')) != NULL; p++)
    rows++;
  assert_int_equal(rows, 1 + 2 * (3 + 1));
  assert_contains(a, "\n1,2,train,");
  assert_contains(a, "\n1,6,test,");
  assert_contains(a, "\n2,12,test,");
  /* The same lines, timings aside: the start-up header (from its first
   * line "torc VERSION train: ..."), then 3 progress lines and a summary
   * an epoch. */
  char head[64];
  snprintf(head, sizeof head, "torc %s train: ", torc_version_string());
  assert_true(strncmp(out_plain, head, strlen(head)) == 0);
  assert_true(strncmp(out_with, head, strlen(head)) == 0);
  assert_contains(out_plain, "epoch 1/2 step 2/6 loss ");
  assert_contains(out_plain, "epoch 2/2: train loss ");
  assert_contains(out_with, "epoch 1/2 step 2/6 loss ");
  assert_contains(out_with, "epoch 2/2: train loss ");
  const char *body_plain = strstr(out_plain, "\nepoch 1/2 step ");
  const char *body_with = strstr(out_with, "\nepoch 1/2 step ");
  assert_non_null(body_plain);
  assert_non_null(body_with);
  int lines_plain = 0, lines_with = 0;
  for (const char *p = body_plain + 1; (p = strchr(p, '\n')) != NULL; p++)
    lines_plain++;
  for (const char *p = body_with + 1; (p = strchr(p, '\n')) != NULL; p++)
    lines_with++;
  assert_int_equal(lines_plain, 2 * (3 + 1));
  assert_int_equal(lines_with, lines_plain);

  /* Neither reporter: no output, no CSV; the caller's callbacks still
   * see every step. */
  rc->n = 0;
  cb = callbacks(rc, TORC_TRAIN_NO_PROGRESS | TORC_TRAIN_NO_METRICS);
  assert_ok(run(quiet, &cb, NULL, out_quiet, sizeof out_quiet, &res));
  assert_string_equal(out_quiet, "");
  char path[1024];
  snprintf(path, sizeof path, "%s/quiet/metrics.csv", tmpdir);
  assert_false(file_exists(path));
  assert_int_equal(rc->n, 2 * (6 + 2) + 1 + 1);
  free(rc);
  torc_config_free(plain);
  torc_config_free(with);
  torc_config_free(quiet);
}

/* A stop at the end of epoch 2 of 4: TORC_OK, 2 epochs, the stop message,
 * a checkpoint though none was due, on_end told why; --resume goes on to
 * the end, and the CSV is the straight run's. */
static void test_stop_after_epoch(void **state) {
  (void)state;
  torc_config *cfg = config("stop", 4);
  recorder *rc = calloc(1, sizeof *rc);
  assert_non_null(rc);
  rc->stop_kind = EV_EPOCH;
  rc->stop_epoch = 2;
  torc_train_callbacks cb = callbacks(rc, 0);
  char out[8192];
  torc_train_result res;
  assert_ok(run(cfg, &cb, NULL, out, sizeof out, &res));
  assert_int_equal(res.epochs, 2);
  assert_int_equal(res.steps, 12);
  assert_contains(res.checkpoint, "stop/ckpt/ckpt-00000012.safetensors");
  assert_true(file_exists(res.checkpoint));
  assert_contains(out, "epoch 2/4: train loss ");
  assert_null(strstr(out, "epoch 3/4"));
  char line[1200];
  snprintf(line, sizeof line,
           "stopped early after epoch 2: checkpoint %s; go on with "
           "--resume\n",
           res.checkpoint);
  assert_contains(out, line);
  const rec *ck = &rc->r[rc->n - 2], *end = &rc->r[rc->n - 1];
  assert_int_equal(ck->kind, EV_CKPT);
  assert_int_equal(ck->ev.reason, TORC_TRAIN_STOPPED);
  assert_int_equal(end->kind, EV_END);
  assert_int_equal(end->ev.reason, TORC_TRAIN_STOPPED);
  assert_int_equal(end->ev.status, TORC_OK);
  assert_int_equal(end->ev.epoch, 2);

  /* Resumed without callbacks: epochs 3 and 4, then the straight run. */
  assert_ok(run(cfg, NULL, "", out, sizeof out, &res));
  assert_int_equal(res.epochs, 4);
  assert_int_equal(res.steps, 24);
  torc_config *straight = config("straight", 4);
  assert_ok(run(straight, NULL, NULL, out, sizeof out, &res));
  char a[16384], b[16384];
  csv_untimed("stop", a, sizeof a);
  csv_untimed("straight", b, sizeof b);
  assert_string_equal(a, b);
  free(rc);
  torc_config_free(cfg);
  torc_config_free(straight);
}

/* A stop at step 9 (epoch 2, batch 3), as Ctrl-C: the position
 * checkpointed mid-epoch; resumed, the CSV is the straight run's. */
static void test_stop_mid_epoch(void **state) {
  (void)state;
  torc_config *cfg = config("mid", 3);
  recorder *rc = calloc(1, sizeof *rc);
  assert_non_null(rc);
  rc->stop_kind = EV_STEP;
  rc->stop_step = 9;
  torc_train_callbacks cb = callbacks(rc, 0);
  char out[8192];
  torc_train_result res;
  assert_ok(run(cfg, &cb, NULL, out, sizeof out, &res));
  assert_int_equal(res.epochs, 1);
  assert_int_equal(res.steps, 9);
  assert_contains(res.checkpoint, "mid/ckpt/ckpt-00000009.safetensors");
  char line[1200];
  snprintf(line, sizeof line,
           "stopped early at epoch 2, batch 3: checkpoint %s; go on with "
           "--resume\n",
           res.checkpoint);
  assert_contains(out, line);
  assert_null(strstr(out, "epoch 2/3:"));
  /* No event after the stopping step but its checkpoint and the end. */
  assert_int_equal(rc->r[rc->n - 3].kind, EV_STEP);
  assert_int_equal(rc->r[rc->n - 3].ev.step, 9);
  assert_int_equal(rc->r[rc->n - 2].kind, EV_CKPT);
  assert_int_equal(rc->r[rc->n - 2].ev.reason, TORC_TRAIN_STOPPED);
  assert_int_equal(rc->r[rc->n - 1].ev.reason, TORC_TRAIN_STOPPED);
  assert_int_equal(rc->r[rc->n - 1].ev.batch, 3);

  assert_ok(run(cfg, NULL, "", out, sizeof out, &res));
  assert_int_equal(res.steps, 18);
  torc_config *straight = config("straight3", 3);
  assert_ok(run(straight, NULL, NULL, out, sizeof out, &res));
  char a[16384], b[16384];
  csv_untimed("mid", a, sizeof a);
  csv_untimed("straight3", b, sizeof b);
  assert_string_equal(a, b);
  free(rc);
  torc_config_free(cfg);
  torc_config_free(straight);
}

/* TORC_TRAIN_FAIL ends the run with the callback's error and no
 * checkpoint; a struct_size too small is refused before any step. */
static void test_fail_and_struct_size(void **state) {
  (void)state;
  torc_config *cfg = config("fail", 2);
  recorder *rc = calloc(1, sizeof *rc);
  assert_non_null(rc);
  rc->fail_at_step = 4;
  torc_train_callbacks cb = callbacks(rc, 0);
  char out[8192];
  torc_train_result res;
  torc_status st = run(cfg, &cb, NULL, out, sizeof out, &res);
  assert_int_equal(st, TORC_ERR_IO);
  assert_error(TORC_ERR_IO, "the test's callback failed at step 4");
  assert_int_equal(res.steps, 4);
  assert_string_equal(res.checkpoint, "");
  assert_int_equal(rc->r[rc->n - 1].kind, EV_END);
  assert_int_equal(rc->r[rc->n - 1].ev.reason, TORC_TRAIN_FAILED);
  assert_int_equal(rc->r[rc->n - 1].ev.status, TORC_ERR_IO);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/fail/ckpt", tmpdir);
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
      assert_null(strstr(e->d_name, "ckpt-"));
    closedir(d);
  }

  rc->n = 0;
  cb.struct_size = sizeof(size_t);
  st = run(cfg, &cb, NULL, out, sizeof out, &res);
  assert_int_equal(st, TORC_ERR_INVALID);
  assert_error(TORC_ERR_INVALID, "sizeof(torc_train_callbacks)");
  assert_int_equal(rc->n, 0);
  assert_int_equal(res.steps, 0);
  free(rc);
  torc_config_free(cfg);
}

static int rm_tree(const char *path) {
  DIR *d = opendir(path);
  if (d == NULL)
    return remove(path);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    rm_tree(p);
  }
  closedir(d);
  return rmdir(path);
}

static int setup(void **state) {
  (void)state;
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-callbacks");
}

static int teardown(void **state) {
  rm_tree(tmpdir);
  return test_teardown_all(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_events_in_order),
      cmocka_unit_test(test_default_reporters),
      cmocka_unit_test(test_every_step),
      cmocka_unit_test(test_stop_after_epoch),
      cmocka_unit_test(test_stop_mid_epoch),
      cmocka_unit_test(test_fail_and_struct_size),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
