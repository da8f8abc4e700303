/* train/train_internal.h — what the trainer's files share: its settings
 * and the parts of a run (loop.c), evaluation (eval.c), the position a
 * checkpoint holds (checkpoint.c), the built-in reporters (report.c) and
 * curves.svg (curves.c). The trainer is a layer above the core: it
 * includes the public headers only.
 */
#ifndef TORC_TRAIN_INTERNAL_H
#define TORC_TRAIN_INTERNAL_H

#include <stdio.h>
#include <time.h>

#include "torc/torc.h"

/* [train], [checkpoint] and [scheduler] interval, as read. */
typedef struct torc_train__settings {
  int64_t epochs, log_every, eval_every, ck_every, ck_keep;
  double clip_norm, clip_value;
  const char *metrics; /* or NULL */
  const char *ck_dir;  /* or NULL */
  int sched_per_step;
} torc_train__settings;

typedef struct torc_train__run {
  const torc_config *cfg;
  torc_train__settings s;
  torc_device dev;
  torc_module *model;
  torc_loader *train, *test;
  torc_loss *loss;
  torc_optimizer *opt;
  torc_scheduler *sched;
  /* [scheduler] warmup_epochs: the lr of group g at step k < warm_steps is
   * warm_lr[g] * (f + (1 - f) * k / warm_steps); the schedule starts
   * after (warm_lr: the schedule's first lr). */
  int64_t warm_epochs, warm_steps;
  double warm_f;
  double *warm_lr;
  int warm_groups;
  time_t started; /* files older than this were left by earlier runs */
} torc_train__run;

/* Builds the model, data, loss, optimizer and scheduler of cfg into r.
 * With `for_train` 0 only the model, the test data and the loss. */
torc_status torc_train__build(torc_train__run *r, const torc_config *cfg,
                              int for_train);

/* Frees what torc_train__build made. */
void torc_train__free(torc_train__run *r);

/* Loss (mean over the batch) and the number of correct predictions (-1
 * when the target is not class indices). */
torc_status torc_train__batch_metrics(torc_tensor *out,
                                      const torc_tensor *target,
                                      torc_tensor *loss, double *loss_v,
                                      int64_t *correct);

/* A NULL argument of `fn`: TORC_ERR_NULL, keeping the message of the
 * failed call that produced it when there is one. */
torc_status torc_train__null_input(const char *fn);

/* Creates `dir` and its parents; `what` (the key) for the message. */
torc_status torc_train__mkdirs(const char *dir, const char *what);

/* Prints the start-up header of run r to `out` (header.c): the torc
 * version, the plugins with the ops each serves on the run's device (the
 * heavy ones by name), the device, the parameter count, the data sizes
 * and, for "train" (`what`; or "eval"), the outputs. */
void torc_train__header(FILE *out, const torc_train__run *r,
                        const char *what);

/* ---- checkpoints (checkpoint.c) ---- */

/* Where a run is: the next epoch and batch, the steps so far, the
 * seconds so far, and the running sums of the current log window (w*) and
 * epoch (e*) — loss * samples, correct predictions, samples, steps — so
 * that a run resumed mid-window writes the rows it would have written. */
typedef struct torc_train__position {
  int64_t epoch, batch, gstep;
  double seconds;
  double wl, el;
  int64_t wc, wn, ws, ec, en, classify;
} torc_train__position;

/* Writes ckpt-<gstep>.safetensors in [checkpoint] dir (its path into
 * path) and keeps the newest [checkpoint] keep. */
torc_status torc_train__save_ckpt(torc_train__run *r,
                                  const torc_train__position *pos,
                                  char *path, size_t psize);

/* The newest checkpoint in dir (the highest step) into path: 1, or 0
 * when dir holds none. */
int torc_train__newest_ckpt(const char *dir, char *path, size_t psize);

/* Loads checkpoint `want` ("": the newest in [checkpoint] dir) into the
 * run, and the position it holds, checked against the run. */
torc_status torc_train__load_ckpt(torc_train__run *r, const char *want,
                                  torc_train__position *pos);

/* ---- evaluation (eval.c) ---- */

/* The figures of one pass over [data.test]. */
typedef struct torc_train__eval_out {
  double loss, accuracy;
  int64_t samples, classes;
  int64_t *confusion;
} torc_train__eval_out;

/* One pass over r's test data at `epoch` (its shuffle), in eval mode
 * under no-grad: the loss and accuracy, the confusion matrix when
 * `want_confusion`, and the outputs of the first `predict` samples
 * printed to pf. */
torc_status torc_train__evaluate(torc_train__run *r, int64_t epoch,
                                 int want_confusion, int predict, FILE *pf,
                                 torc_train__eval_out *e);

/* ---- the built-in reporters (report.c) ---- */

typedef struct torc_train__report {
  /* progress: lines or a bar, per-epoch summaries, stop messages */
  FILE *out;
  int bar;
  int64_t newline_epoch; /* the epoch whose bar line was ended */
  int64_t draw_epoch;    /* the epoch of the last draw, and its time */
  double draw_seconds;
  /* metrics: the CSV and curves.svg */
  const char *metrics;   /* [train] metrics, or NULL */
  FILE *csv;
  int csv_opened;        /* tried: opened lazily, at the first row */
  int64_t csv_keep_upto; /* resuming: keep the rows up to this step */
  char csv_path[1024];
  time_t started;
} torc_train__report;

/* Sets up the reporters of run r: progress on `out` (a bar when `bar`),
 * metrics as [train] metrics says; resuming at global step keep_upto >= 0
 * keeps the CSV's rows up to there (-1: a fresh file). */
void torc_train__report_init(torc_train__report *rp, const torc_train__run *r,
                             FILE *out, int bar, int64_t keep_upto);

/* The reporters as callbacks (user: rp). */
torc_train_callbacks torc_train__progress_callbacks(torc_train__report *rp);
torc_train_callbacks torc_train__metrics_callbacks(torc_train__report *rp);

/* Closes the CSV. */
void torc_train__report_close(torc_train__report *rp);

/* ---- curves.svg (curves.c) ---- */

/* Draws curves.svg next to the metrics CSV `csv_path`, from its rows (by
 * the header's column names); temporary files of killed runs older than
 * `started` are removed. Nothing is written for a file without rows. */
void torc_train__write_curves(const char *csv_path, time_t started);

#endif /* TORC_TRAIN_INTERNAL_H */
