/* train/settings.c — the trainer's sections and what a run reads from
 * them: the [train] and [checkpoint] schema rows, the run folder, the
 * metrics [checkpoint] best and [train] early_stop watch (early stopping
 * is a built-in callback), the [data.NAME] sections the trainer reads, and
 * the run folder's config.ini.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

typedef torc_train__settings settings;
typedef torc_train__run run;

#define WATCHED "none|test.loss|test.accuracy|valid.loss|valid.accuracy"

static const torc_config_row train_rows[] = {
    {"train", NULL, TORC_CONFIG_SECTION, NULL, NULL, 0,
     "the training schedule: epochs, clipping, logging, evaluation"},
    {"train", "epochs", TORC_CONFIG_INT, "1", "1..", 0, "passes over the data"},
    {"train", "clip_grad_norm", TORC_CONFIG_FLOAT, "0", "0..", 0,
     "scale gradients to this total 2-norm before each step (0 = off)"},
    {"train", "clip_grad_value", TORC_CONFIG_FLOAT, "0", "0..", 0,
     "clamp each gradient element to [-v, v] (0 = off)"},
    {"train", "precision", TORC_CONFIG_ENUM, "fp32", "fp32|bf16|fp16", 0,
     "arithmetic precision: fp32, or mixed (autocast; master weights and "
     "optimizer in f32): bf16, or fp16 with a dynamic loss scale"},
    {"train", "allow_emulated", TORC_CONFIG_BOOL, "no", NULL, 0,
     "run bf16/fp16 where the device has no fast kernels for it (slow; "
     "for testing)"},
    {"train", "loss_scale", TORC_CONFIG_FLOAT, "65536", "1..", 0,
     "fp16: the loss scale to start from (halved after a step whose "
     "gradients are not finite, which is skipped)"},
    {"train", "loss_scale_growth_interval", TORC_CONFIG_INT, "2000", "1..", 0,
     "fp16: good steps in a row after which the loss scale doubles"},
    {"train", "log_every", TORC_CONFIG_INT, "100", "1..", 0,
     "steps per progress line and metrics row"},
    {"train", "eval_every", TORC_CONFIG_INT, "1", "0..", 0,
     "epochs between evaluations on [data.test] (0 = only after the last)"},
    {"train", "dir", TORC_CONFIG_PATH, NULL, NULL, 0,
     "the run folder: config.ini, metrics.csv, curves.svg, checkpoints, "
     "final.safetensors (default: runs/<INI name>/ beside the INI)"},
    {"train", "metrics", TORC_CONFIG_PATH, NULL, NULL, 0,
     "the metrics CSV (default: metrics.csv in the run folder; curves.svg "
     "is written next to it)"},
    {"train", "early_stop", TORC_CONFIG_ENUM, "none", WATCHED, 0,
     "stop when this metric has not improved for `patience` epochs"},
    {"train", "patience", TORC_CONFIG_INT, "3", "1..", 0,
     "early_stop: epochs without improvement before stopping"},
    {"train", "min_delta", TORC_CONFIG_FLOAT, "0", "0..", 0,
     "early_stop: the smallest change that counts as an improvement"},
    {"checkpoint", NULL, TORC_CONFIG_SECTION, NULL, NULL, 0,
     "checkpoints: model, optimizer, scheduler, RNG and position"},
    {"checkpoint", "dir", TORC_CONFIG_PATH, NULL, NULL, 0,
     "the folder checkpoints are written to (default: the run folder; "
     "created if missing)"},
    {"checkpoint", "every", TORC_CONFIG_INT, "1", "0..", 0,
     "epochs between checkpoints (0 = only at the end and on Ctrl-C)"},
    {"checkpoint", "keep", TORC_CONFIG_INT, "3", "1..", 0,
     "how many of the newest checkpoints to keep"},
    {"checkpoint", "best", TORC_CONFIG_ENUM, "none", WATCHED, 0,
     "also keep the weights of the best epoch by this metric as "
     "best.safetensors (accuracy: highest, loss: lowest)"},
    {"dist", NULL, TORC_CONFIG_SECTION, NULL, NULL, 0,
     "training in several processes (mpirun -np N torc train, or torc "
     "train --nproc N): the communicator and its limits"},
    {"dist", "backend", TORC_CONFIG_ENUM, "auto", "auto|mpi|nccl", 0,
     "the communicator: mpi (cpu tensors, Open MPI), nccl (cuda tensors), "
     "auto (nccl on a cuda device, else mpi)"},
    {"dist", "timeout", TORC_CONFIG_FLOAT, "300", "1..", 0,
     "seconds a collective may take before the run stops, naming the "
     "cause (a rank that died or hangs)"},
    {"dist", "bucket_mb", TORC_CONFIG_FLOAT, "25", "0.001..", 0,
     "MiB of gradients per all-reduce; buckets start while backward runs"},
    {"dist", "sync_batchnorm", TORC_CONFIG_BOOL, "no", NULL, 0,
     "batch norm's training statistics over every rank's batch (two "
     "all-reduces per layer each way); no: per rank, as PyTorch's default"},
    {NULL, NULL, TORC_CONFIG_SECTION, NULL, NULL, 0, NULL}};

/* The trainer's sections join the schema when libtorc loads, before any
 * file is read, as the core's own do. The table is static and valid, so
 * this cannot fail short of a broken build; if it did, files with these
 * sections would be refused as unknown, and the reason is printed. */
__attribute__((constructor)) static void train_rows_register(void) {
  if (torc_config_schema_add(train_rows) != TORC_OK) {
    fprintf(stderr, "torc: the [train] and [checkpoint] sections are not "
                    "available: %s\n", torc_last_error());
    torc_clear_error();
  }
}

/* ---- watched metrics: [checkpoint] best, [train] early_stop ---- */

static const char *const metric_names[] = {"none", "test.loss",
                                           "test.accuracy", "valid.loss",
                                           "valid.accuracy"};

const char *torc_train__metric_name(int m) {
  return m >= 0 && m <= TORC_TRAIN__M_VALID_ACCURACY ? metric_names[m]
                                                     : "none";
}

double torc_train__metric_value(int m, const torc_train_event *ev) {
  switch (m) {
  case TORC_TRAIN__M_TEST_LOSS:
    return ev->evaluated ? ev->test_loss : NAN;
  case TORC_TRAIN__M_TEST_ACCURACY:
    return ev->evaluated ? ev->test_accuracy : NAN;
  case TORC_TRAIN__M_VALID_LOSS:
    return ev->valid_evaluated ? ev->valid_loss : NAN;
  case TORC_TRAIN__M_VALID_ACCURACY:
    return ev->valid_evaluated ? ev->valid_accuracy : NAN;
  default:
    return NAN;
  }
}

int torc_train__metric_higher_better(int m) {
  return m == TORC_TRAIN__M_TEST_ACCURACY ||
         m == TORC_TRAIN__M_VALID_ACCURACY;
}

static int metric_parse(const char *v) {
  for (int m = 0; v && m <= TORC_TRAIN__M_VALID_ACCURACY; m++)
    if (strcmp(v, metric_names[m]) == 0)
      return m;
  return TORC_TRAIN__M_NONE;
}

/* The run folder: [train] dir, else runs/<the file's name less .ini>
 * beside the file. */
static torc_status run_dir(const torc_config *cfg, char *buf, size_t size) {
  int t = torc_config_find(cfg, "train");
  const char *d = t >= 0 ? torc_config_value(cfg, t, "dir") : NULL;
  int n;
  if (d) {
    n = snprintf(buf, size, "%s", d);
  } else {
    const char *path = torc_config_path(cfg);
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *base = slash ? slash + 1 : path ? path : "run";
    size_t bl = strlen(base);
    if (bl > 4 && strcmp(base + bl - 4, ".ini") == 0)
      bl -= 4;
    if (slash)
      n = snprintf(buf, size, "%.*s/runs/%.*s", (int)(slash - path), path,
                   (int)bl, base);
    else
      n = snprintf(buf, size, "runs/%.*s", (int)bl, base);
  }
  if (n < 0 || (size_t)n >= size)
    return torc_set_error(TORC_ERR_RANGE,
                          "the run folder of %s is too long a path (%d "
                          "bytes); set a shorter [train] dir",
                          torc_config_path(cfg), n);
  return TORC_OK;
}

torc_status torc_train_run_dir(const torc_config *cfg, char *buf,
                               size_t size) {
  if (cfg == NULL || buf == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_train_run_dir: the %s is "
                          "NULL", cfg == NULL ? "configuration" : "buffer");
  return run_dir(cfg, buf, size);
}

torc_status torc_train__read_settings(const torc_config *cfg, settings *s) {
  memset(s, 0, sizeof *s);
  int t = torc_config_find(cfg, "train");
  s->epochs = 1;
  s->log_every = 100;
  s->eval_every = 1;
  s->patience = 3;
  s->precision = TORC_F32;
  s->loss_scale = 65536;
  s->scale_growth = 2000;
  torc_status st = run_dir(cfg, s->dir, sizeof s->dir);
  if (st)
    return st;
  snprintf(s->metrics_buf, sizeof s->metrics_buf, "%s/metrics.csv", s->dir);
  s->metrics = s->metrics_buf;
  if (t >= 0) {
    if ((st = torc_config_get_int(cfg, t, "epochs", &s->epochs)) ||
        (st = torc_config_get_int(cfg, t, "log_every", &s->log_every)) ||
        (st = torc_config_get_int(cfg, t, "eval_every", &s->eval_every)) ||
        (st =
             torc_config_get_double(cfg, t, "clip_grad_norm", &s->clip_norm)) ||
        (st =
             torc_config_get_double(cfg, t, "clip_grad_value", &s->clip_value)) ||
        (st = torc_config_get_int(cfg, t, "patience", &s->patience)) ||
        (st = torc_config_get_double(cfg, t, "min_delta", &s->min_delta)) ||
        (st = torc_config_get_bool(cfg, t, "allow_emulated",
                                   &s->allow_emulated)) ||
        (st = torc_config_get_double(cfg, t, "loss_scale", &s->loss_scale)) ||
        (st = torc_config_get_int(cfg, t, "loss_scale_growth_interval",
                                  &s->scale_growth)))
      return st;
    const char *pr = torc_config_value(cfg, t, "precision");
    s->precision = pr && strcmp(pr, "bf16") == 0   ? TORC_BF16
                   : pr && strcmp(pr, "fp16") == 0 ? TORC_F16
                                                   : TORC_F32;
    const char *m = torc_config_value(cfg, t, "metrics");
    if (m) {
      snprintf(s->metrics_buf, sizeof s->metrics_buf, "%s", m);
      s->metrics = s->metrics_buf;
    }
    s->early_stop = metric_parse(torc_config_value(cfg, t, "early_stop"));
    if (s->clip_norm > 0 && s->clip_value > 0)
      return torc_config_error(cfg, t, "clip_grad_value", TORC_ERR_CONFIG,
                               "clip_grad_norm and clip_grad_value are both "
                               "set; choose one");
  }
  int c = torc_config_find(cfg, "checkpoint");
  s->ck_every = 1;
  s->ck_keep = 3;
  if (c >= 0) {
    if ((st = torc_config_get_int(cfg, c, "every", &s->ck_every)) ||
        (st = torc_config_get_int(cfg, c, "keep", &s->ck_keep)))
      return st;
    const char *d = torc_config_value(cfg, c, "dir");
    snprintf(s->ck_buf, sizeof s->ck_buf, "%s", d ? d : s->dir);
    s->ck_dir = s->ck_buf;
    s->best = metric_parse(torc_config_value(cfg, c, "best"));
  }
  s->bucket_mb = 25;
  int dk = torc_config_find(cfg, "dist");
  if (dk >= 0 &&
      ((st = torc_config_get_double(cfg, dk, "bucket_mb", &s->bucket_mb)) ||
       (st = torc_config_get_bool(cfg, dk, "sync_batchnorm",
                                  &s->sync_batchnorm))))
    return st;
  int k = torc_config_find(cfg, "scheduler");
  if (k >= 0) {
    const char *iv = torc_config_value(cfg, k, "interval");
    s->sched_per_step = iv && strcmp(iv, "step") == 0;
  }
  return TORC_OK;
}

/* The [data.NAME] sections the trainer reads. */
static const char *const data_names[] = {"data.train", "data.test",
                                         "data.valid"};

/* Edit distance of a and b (short names), for the nearest section. */
static int distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b), row[64];
  if (la > 62 || lb > 62)
    return 99;
  for (int j = 0; j <= lb; j++)
    row[j] = j;
  for (int i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

/* A [data.NAME] section the trainer does not read is a mistake (the
 * schema accepts any name for data.*): an error naming the nearest. */
torc_status torc_train__check_data_sections(const torc_config *cfg) {
  for (int i = 0; i < torc_config_section_count(cfg); i++) {
    const char *name = torc_config_section_name(cfg, i);
    if (strncmp(name, "data.", 5) != 0)
      continue;
    int known = 0, best = 0, bd = 99;
    for (int k = 0; k < 3; k++) {
      if (strcmp(name, data_names[k]) == 0)
        known = 1;
      int d = distance(name + 5, data_names[k] + 5);
      /* a prefix ("validation" for "valid") is as near as it gets */
      if (strncmp(name + 5, data_names[k] + 5, strlen(data_names[k] + 5)) ==
              0 ||
          strncmp(name + 5, data_names[k] + 5, strlen(name + 5)) == 0)
        d = 1;
      if (d < bd)
        bd = d, best = k;
    }
    if (known)
      continue;
    char hint[64] = "";
    if (bd <= 2)
      snprintf(hint, sizeof hint, "did you mean [%s]? ", data_names[best]);
    return torc_config_error(
        cfg, i, NULL, TORC_ERR_CONFIG,
        "unknown section [%s]; %sthe trainer reads [data.train], "
        "[data.test] and [data.valid] (a validation split; or "
        "valid_fraction in [data.train])",
        name, hint);
  }
  return TORC_OK;
}

/* config.ini in the run folder: the configuration as this run reads it
 * (--set overrides applied), section by section. */
torc_status torc_train__write_config(const run *r) {
  char path[1100], tmp[1110];
  snprintf(path, sizeof path, "%s/config.ini", r->s.dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (f == NULL)
    return torc_set_error(TORC_ERR_IO, "cannot write %s: %s; check [train] "
                          "dir",
                          tmp, strerror(errno));
  const torc_config *cfg = r->cfg;
  fprintf(f, "# the configuration of this run: %s with the --set overrides "
             "applied\n# (relative paths in it are relative to that file's "
             "folder)\n",
          torc_config_path(cfg));
  for (int i = 0; i < torc_config_section_count(cfg); i++) {
    fprintf(f, "%s[%s]\n", i ? "\n" : "", torc_config_section_name(cfg, i));
    for (int j = 0; j < torc_config_section_key_count(cfg, i); j++) {
      const char *k = torc_config_section_key(cfg, i, j);
      fprintf(f, "%s = %s\n", k, torc_config_section_get(cfg, i, k));
    }
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
    remove(tmp);
    return torc_set_error(TORC_ERR_IO, "cannot write %s: %s; check [train] "
                          "dir",
                          path, strerror(errno));
  }
  return TORC_OK;
}

/* ---- early stopping ---- */

int torc_train__early_stop_epoch(const torc_train_event *ev, void *user) {
  torc_train__early_stop *e = user;
  double v = torc_train__metric_value(e->metric, ev);
  if (isnan(v)) /* not evaluated this epoch ([train] eval_every) */
    return TORC_TRAIN_CONTINUE;
  int higher = torc_train__metric_higher_better(e->metric);
  if (e->best_epoch == 0 ||
      (higher ? v > e->best + e->min_delta : v < e->best - e->min_delta)) {
    e->best = v;
    e->best_epoch = ev->epoch;
    e->wait = 0;
    return TORC_TRAIN_CONTINUE;
  }
  if (++e->wait < e->patience || ev->epoch == ev->epochs)
    return TORC_TRAIN_CONTINUE;
  if (e->out) {
    fprintf(e->out,
            "early stop after epoch %lld: %s has not improved by more than "
            "%g for %lld epochs ([train] patience); the best, %.4f, was at "
            "epoch %lld\n",
            (long long)ev->epoch, torc_train__metric_name(e->metric),
            e->min_delta, (long long)e->wait, e->best,
            (long long)e->best_epoch);
    fflush(e->out);
  }
  return TORC_TRAIN_STOP;
}
