/* train/train_internal.h — what the trainer's files share: its settings
 * (settings.c) and the parts of a run (loop.c), evaluation (eval.c), the
 * position a checkpoint holds (checkpoint.c), the built-in reporters
 * (report.c) and curves.svg (curves.c). The trainer is a layer above the
 * core: it includes the public headers only.
 */
#ifndef TORC_TRAIN_INTERNAL_H
#define TORC_TRAIN_INTERNAL_H

#include <stdio.h>
#include <time.h>

#include "torc/torc.h"

/* A metric a run can watch: [checkpoint] best, [train] early_stop. */
enum {
  TORC_TRAIN__M_NONE = 0,
  TORC_TRAIN__M_TEST_LOSS,
  TORC_TRAIN__M_TEST_ACCURACY,
  TORC_TRAIN__M_VALID_LOSS,
  TORC_TRAIN__M_VALID_ACCURACY
};

/* [train], [checkpoint] and [scheduler] interval, as read. */
typedef struct torc_train__settings {
  int64_t epochs, log_every, eval_every, ck_every, ck_keep;
  double clip_norm, clip_value;
  const char *metrics; /* the metrics CSV: [train] metrics, or in dir */
  const char *ck_dir;  /* [checkpoint] dir, or dir; NULL without a
                          [checkpoint] section (then only final) */
  int sched_per_step;
  char dir[1024];      /* the run folder ([train] dir or runs/<name>) */
  char metrics_buf[1024], ck_buf[1024];
  int best;            /* [checkpoint] best: TORC_TRAIN__M_* */
  int early_stop;      /* [train] early_stop: TORC_TRAIN__M_* */
  int64_t patience;    /* [train] patience */
  double min_delta;    /* [train] min_delta */
  torc_dtype precision; /* [train] precision: TORC_F32, TORC_BF16, TORC_F16 */
  int allow_emulated;   /* [train] allow_emulated */
  double loss_scale;    /* [train] loss_scale (fp16) */
  int64_t scale_growth; /* [train] loss_scale_growth_interval (fp16) */
  double bucket_mb;     /* [dist] bucket_mb */
  int sync_batchnorm;   /* [dist] sync_batchnorm */
} torc_train__settings;

/* Reads [train], [checkpoint] and [scheduler] interval of cfg into s
 * (settings.c). */
torc_status torc_train__read_settings(const torc_config *cfg,
                                      torc_train__settings *s);

/* The name of metric m ("test.loss"), and its value in an epoch's event
 * (NaN when that split was not evaluated). Accuracy is better higher,
 * loss lower. */
const char *torc_train__metric_name(int m);
double torc_train__metric_value(int m, const torc_train_event *ev);
int torc_train__metric_higher_better(int m);

typedef struct torc_train__run {
  const torc_config *cfg;
  torc_train__settings s;
  torc_device dev;
  torc_module *model;
  torc_loader *train, *test;
  torc_loader *valid; /* [data.valid] or [data.train] valid_fraction */
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
  torc_grad_scaler *scaler; /* [train] precision = fp16; else NULL */
  /* Training in several processes ([dist], a launcher): this process's
   * rank and the world size (0 and 1 alone), and the DDP that averages
   * the gradients (NULL alone). Rank 0 alone writes files. */
  int rank, world;
  torc_ddp *ddp;
} torc_train__run;

/* Joins the world a launcher started, or [dist] asks for (loop.c): before
 * the loaders are built, which shard the training split by rank. */
torc_status torc_train__dist_start(const torc_config *cfg);

/* Sums v[0..n) across the ranks in place (nothing alone). */
torc_status torc_train__dist_sum(double *v, int n);

/* Builds the model, data, loss, optimizer and scheduler of cfg into r.
 * With `for_train` 0 only the model, the test data and the loss. */
torc_status torc_train__build(torc_train__run *r, const torc_config *cfg,
                              int for_train);

/* Frees what torc_train__build made. */
void torc_train__free(torc_train__run *r);

/* The weights a command takes without --checkpoint (eval.c): the newest
 * checkpoint of the run, else its final.safetensors; *what says which.
 * TORC_ERR_IO naming the folders when there is neither. */
torc_status torc_train__weights_path(const torc_train__run *r, char *path,
                                     size_t size, const char **what);

/* Loads the weights at `checkpoint` into r->model strictly: a torc
 * checkpoint's model part, or a plain safetensors state dict. */
torc_status torc_train__load_weights(torc_train__run *r,
                                     const char *checkpoint);


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

/* The plugin whose kernel serves `op` in dtype dt on device type
 * `devtype` (header.c), or NULL when none does. */
const char *torc_train__provider(const char *devtype, const char *op,
                                 torc_dtype dt);

/* The precision's name as [train] precision spells it ("bf16"). */
const char *torc_train__precision_name(torc_dtype dt);

/* ---- settings.c ---- */

/* A [data.NAME] section other than train, test and valid:
 * TORC_ERR_CONFIG with its line and the nearest name. */
torc_status torc_train__check_data_sections(const torc_config *cfg);

/* Writes config.ini in the run folder (atomically): cfg as the run reads
 * it, --set overrides applied. */
torc_status torc_train__write_config(const torc_train__run *r);

/* [train] early_stop as a callback (on_epoch_end, user: this): the
 * metric, its best so far and the epoch of it, and the epochs since it
 * last improved by more than min_delta. */
typedef struct torc_train__early_stop {
  int metric;
  int64_t patience;
  double min_delta, best;
  int64_t best_epoch, wait;
  FILE *out; /* the stop message, or NULL */
} torc_train__early_stop;

int torc_train__early_stop_epoch(const torc_train_event *ev, void *user);

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

/* Writes the model's weights (a plain state dict, as PyTorch's
 * save_file(model.state_dict())) to `name` in the run folder,
 * atomically, with `value` (unless NaN) as its "torc.best" metadata; its
 * path into path. */
torc_status torc_train__save_weights(torc_train__run *r, const char *name,
                                     double value, char *path, size_t psize);

/* The [checkpoint] best value best.safetensors of the run folder holds
 * (metadata "torc.best"), NaN when there is none. */
double torc_train__best_so_far(const torc_train__run *r);

/* Removes what an earlier run left in the run's folders: its
 * checkpoints, final.safetensors and best.safetensors. */
void torc_train__clear_outputs(const torc_train__run *r);

/* Loads checkpoint `want` ("": the newest in [checkpoint] dir) into the
 * run, and the position it holds, checked against the run. */
torc_status torc_train__load_ckpt(torc_train__run *r, const char *want,
                                  torc_train__position *pos);

/* ---- the figures on the device (accum.c) ----
 * A training step adds its loss and correct count to device tensors and
 * feeds the non-finite-loss guard there; the loop reads them once per log
 * window and at the epoch's end, so a step itself waits on nothing. */

typedef struct torc_train__accum {
  torc_device dev;
  int host; /* dev is the host: reading `alive` each step is free */
  /* f64 0-d sums: loss * samples and correct predictions, of the log
   * window and of the epoch (as the host's double sums, bit for bit). */
  torc_tensor *wl, *el, *wc, *ec;
  torc_tensor *alive; /* bool: no non-finite loss yet (cleared for good) */
  torc_tensor *bad;   /* f64: the first bad step's number (from 1) */
  torc_tensor *badv;  /* f64: its loss */
  torc_tensor *last;  /* f64: the last finite loss */
  torc_tensor *steps; /* f64: steps counted on the device */
  torc_tensor *cur_l, *cur_c; /* f64: the last step's loss and count */
  torc_tensor *inf;           /* f64: infinity, for the finite test */
} torc_train__accum;

/* The accumulators on dev, the sums starting at the given values (a
 * resumed run's), the step count at gstep. */
torc_status torc_train__accum_init(torc_train__accum *a, torc_device dev,
                                   double wl, double el, int64_t wc,
                                   int64_t ec, int64_t gstep);
void torc_train__accum_free(torc_train__accum *a);

/* A 0-d tensor of `value` on dev that the caller owns (and releases),
 * whatever scope is open. */
torc_tensor *torc_train__owned_scalar(double value, torc_dtype dt,
                                      torc_device dev);

/* Whether target holds class indices for out (a correct count is kept). */
int torc_train__classifies(const torc_tensor *out, const torc_tensor *target);

/* Adds loss * samples to loss_sum and, when target holds class indices,
 * the batch's correct predictions to correct_sum (else clears *classify);
 * all on the device. */
torc_status torc_train__batch_sums(torc_tensor *out, const torc_tensor *target,
                                   torc_tensor *loss, int64_t samples,
                                   torc_tensor *loss_sum,
                                   torc_tensor *correct_sum, int *classify);

/* One step's figures into both sums, and the guard fed with its loss and
 * (unless NULL) its gradients' total norm. */
torc_status torc_train__accum_step(torc_train__accum *a, torc_tensor *out,
                                   const torc_tensor *target,
                                   torc_tensor *loss, torc_tensor *gnorm,
                                   int64_t samples, int *classify);

/* Reads the n (<= 8) f64 0-d tensors ts (a NULL one reads 0) into out
 * with the guard, in one blocking read: TORC_OK while every loss was
 * finite, TORC_ERR_INVALID (nothing recorded) once one was not; the
 * caller then gets the message from torc_train__accum_check. */
torc_status torc_train__accum_read(const torc_train__accum *a,
                                   torc_tensor *const *ts, int n,
                                   double *out);

/* Reads the guard (a blocking read): 1 while every loss was finite. */
int torc_train__accum_alive(const torc_train__accum *a);

/* Reads the guard: TORC_OK, or the error naming the first step whose loss
 * was not finite (at `epoch`, whose first step is epoch_first_step + 1),
 * the last finite loss and what to try. */
torc_status torc_train__accum_check(const torc_train__accum *a, int64_t epoch,
                                    int64_t epoch_first_step);

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
  int scaled;      /* fp16: the CSV has a skipped_steps column */
  int64_t skipped; /* the last logged count, for test and valid rows */
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
