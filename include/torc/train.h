/* torc/train.h — the INI-driven trainer behind `torc train` and `torc
 * eval`: one configuration (docs/config.md, `torc help config`) gives the
 * plugins, device, data, model, loss, optimizer, scheduler, the training
 * schedule ([train]) and checkpoints ([checkpoint]); the trainer runs the
 * loop a PyTorch user writes by hand (train mode, forward, loss,
 * zero_grad, backward, clip, step; eval mode under no-grad), and writes
 * the metrics CSV, curves.svg and checkpoints. torc_train_ex takes
 * callbacks that see every step, evaluation, epoch and checkpoint, and may
 * end the run early.
 */
#ifndef TORC_TRAIN_H
#define TORC_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "torc/error.h"

TORC_BEGIN_DECLS

struct torc_config;

/* How a run is driven. Zero-initialise, then set what you need. */
typedef struct torc_train_opts {
  /* NULL: start fresh. "": resume from the newest checkpoint in
   * [checkpoint] dir. Otherwise the checkpoint file to resume from. A
   * checkpoint of a run that finished all [train] epochs is
   * TORC_ERR_CONFIG ("already finished N epochs; raise [train] epochs"). */
  const char *resume;
  /* 0: log lines (one per log_every steps and per epoch); 1: a progress
   * bar redrawn in place (for a terminal). */
  int progress_bar;
  /* 1: SIGINT (Ctrl-C) ends the run after the current step with a
   * checkpoint, and torc_train returns TORC_ERR_INTERRUPTED. */
  int handle_sigint;
  /* Where progress and summaries go; NULL = stdout. */
  FILE *out;
} torc_train_opts;

/* What a run did. */
typedef struct torc_train_result {
  int64_t epochs;       /* epochs completed */
  int64_t steps;        /* optimizer steps taken, in all */
  double test_loss;     /* of the last evaluation; NaN when none ran */
  double test_accuracy; /* NaN when none ran or for regression */
  double seconds;       /* wall time of this process's part of the run */
  char checkpoint[1024]; /* the last checkpoint written, or "" */
} torc_train_result;

/* Trains the model of `cfg` (already applied with torc_config_apply: the
 * plugins, seed and threads are in place) as its [train] section says.
 * Checks the model and data are on [device] before the first step. Stops
 * with TORC_ERR_INVALID when the loss becomes NaN or infinite (naming the
 * step, the last finite loss and what to try). Errors in the file are
 * TORC_ERR_CONFIG with "FILE:LINE:". `res` may be NULL. */
TORC_API torc_status torc_train(const struct torc_config *cfg,
                                const torc_train_opts *opts,
                                torc_train_result *res);

/* The result of an evaluation. */
typedef struct torc_eval_result {
  double loss;      /* mean over samples */
  double accuracy;  /* NaN for regression */
  int64_t samples;
  int64_t classes;    /* 0 for regression */
  int64_t *confusion; /* classes x classes, row = true class, column =
                         predicted (malloc'd: free() it), or NULL */
  char checkpoint[1024]; /* the file whose weights were evaluated */
  char **class_names; /* `classes` names from [data.test] class_names
                         (else [data.train]'s), or NULL: one malloc'd
                         block, free() it */
} torc_eval_result;

/* Evaluates the model of `cfg` on [data.test] with the weights of
 * `checkpoint`: a torc checkpoint or a plain safetensors state dict (one
 * saved from PyTorch with the same architecture works), loaded strictly —
 * a checkpoint of another model is TORC_ERR_SHAPE/TORC_ERR_INVALID listing
 * the keys that differ. `checkpoint` NULL takes the newest checkpoint of
 * the run (the one --resume takes) and prints "checkpoint: PATH (the
 * newest of the run)" to `out` (NULL = stdout); none is TORC_ERR_CONFIG
 * (no [checkpoint] dir) or TORC_ERR_IO (none in it). When `predict` > 0,
 * prints the first `predict` samples to `out`: for a classification a
 * table of the true class, the class predicted and its probability (the
 * softmax of the outputs), "<- mistake" where they differ, classes named
 * by class_names; otherwise the outputs, one row each. */
TORC_API torc_status torc_evaluate(const struct torc_config *cfg,
                                   const char *checkpoint, int predict,
                                   FILE *out, torc_eval_result *res);

/* Prints the confusion matrix of a classification's `res` (rows labelled
 * with the classes' indices and names) and its classification report:
 * per-class precision, recall, F1 and support, then accuracy, the macro
 * and the support-weighted averages, laid out and computed as
 * scikit-learn's classification_report(labels=all classes,
 * zero_division=0, digits=4) (a "micro avg" line replaces "accuracy" when
 * a class has neither samples nor predictions, as there). Prints nothing
 * when res has no confusion matrix (regression). `out` NULL: stdout. */
TORC_API torc_status torc_eval_report(const torc_eval_result *res, FILE *out);

/* Times `steps` training steps (after a few of warm-up) of the model of
 * `cfg` on batches of [data.train], with the profiler on, and prints to
 * `out` (NULL = stdout) the step time, samples/s, and the profile: kernels
 * by op, the time outside kernels, forward and backward per layer. What
 * `torc bench FILE.ini` prints. */
TORC_API torc_status torc_bench(const struct torc_config *cfg, int64_t steps,
                                FILE *out);

/* torc_bench_ex's flags. TORC_BENCH_ROOFLINE: measure the machine's fp32
 * FMA peak first (torc_cpu_peak_gflops on the run's threads, a fraction
 * of a second), print it, and print the profile as a roofline
 * (torc_profile_roofline): FLOPs per step, GFLOP/s and % of that peak per
 * op and per module, and the whole step's. TORC_BENCH_ALL_OPS: list
 * every op in the profile, not the 15 costliest. */
enum { TORC_BENCH_ROOFLINE = 1u << 0, TORC_BENCH_ALL_OPS = 1u << 1 };

/* torc_bench with `flags` (TORC_BENCH_*; 0 is torc_bench). An unknown
 * flag is TORC_ERR_INVALID. */
TORC_API torc_status torc_bench_ex(const struct torc_config *cfg,
                                   int64_t steps, unsigned flags, FILE *out);

/* What torc_generate_text (`torc generate`) takes. */
typedef struct torc_text_generate_options {
  const char *checkpoint; /* the weights; NULL: as torc eval finds them */
  const char *prompt;     /* the text to continue; NULL or "": a newline */
  int64_t tokens;         /* how many tokens to add */
  double temperature;     /* 0 = greedy */
  int64_t top_k;          /* 0 = all */
  uint64_t seed;
} torc_text_generate_options;

/* Continues o->prompt with text from the language model of `cfg` (a model
 * of token ids, trained on a text source) and the weights of
 * o->checkpoint, printing the prompt and each token to `out` as it comes
 * (NULL = stdout), and to `info` (NULL = stderr) the checkpoint taken and
 * a last line with the tokens, the time and whether the decoder cached.
 * The vocabulary is the text source's of [data.test] (else [data.train]),
 * so that section must read the model's vocabulary file; the window is
 * [model] input's length, and the logits' layout [loss] class_dim's. */
TORC_API torc_status torc_generate_text(const struct torc_config *cfg,
                                        const torc_text_generate_options *o,
                                        FILE *out, FILE *info);

/* ---- callbacks: watching a run, and ending it early ----
 * torc_train_ex calls the functions of a torc_train_callbacks as the run
 * goes: after every optimizer step, after each evaluation, at the end of
 * each epoch, after each checkpoint, and once at the end. The progress
 * lines (or bar), the per-epoch summaries, the metrics CSV and curves.svg
 * of torc_train are themselves such callbacks, registered first; the
 * caller's run after them, so a file they write already holds the row of
 * the event. Callbacks run on the training thread, between steps. */

/* What a callback returns. */
enum {
  TORC_TRAIN_CONTINUE = 0, /* go on */
  /* End the run cleanly: from on_step after this step, as Ctrl-C does
   * (a checkpoint of the position mid-epoch when [checkpoint] dir is
   * set); from on_eval, on_epoch_end or on_checkpoint once this epoch is
   * done (its checkpoint written). torc_train_ex then returns TORC_OK,
   * and on_end sees TORC_TRAIN_STOPPED; --resume goes on from there. */
  TORC_TRAIN_STOP = 1,
  /* End the run with the error the callback recorded with torc_set_error
   * (TORC_ERR_INVALID when it recorded none); no checkpoint is written.
   * Any other value but 0 and TORC_TRAIN_STOP counts as this. */
  TORC_TRAIN_FAIL = -1
};

/* Why a checkpoint was written (torc_train_event.reason in on_checkpoint),
 * or how the run ended (in on_end). */
enum {
  TORC_TRAIN_SCHEDULED = 0,   /* on_checkpoint: [checkpoint] every, or the
                                 run's last epoch */
  TORC_TRAIN_FINISHED = 1,    /* on_end: every epoch ran */
  TORC_TRAIN_INTERRUPTED = 2, /* SIGINT (Ctrl-C), with handle_sigint */
  TORC_TRAIN_STOPPED = 3,     /* a callback returned TORC_TRAIN_STOP */
  TORC_TRAIN_FAILED = 4       /* on_end: an error ended the run */
};

/* What a callback is told. Fields a kind of event does not fill are 0, or
 * NaN for the figures. The struct is the library's (valid during the
 * call only) and may gain fields at its end: struct_size says how many
 * there are. */
typedef struct torc_train_event {
  size_t struct_size;   /* sizeof(torc_train_event) of the library */
  int64_t epoch;        /* the epoch, from 1 */
  int64_t epochs;       /* [train] epochs */
  int64_t batch;        /* batches of this epoch done (on_end, on_checkpoint:
                           where the run stands) */
  int64_t batches;      /* batches per epoch */
  int64_t step;         /* optimizer steps so far, in all */
  double seconds;       /* wall time of the run so far, earlier processes'
                           part of a resumed run included */
  double epoch_seconds; /* since this epoch (or this process's part of it)
                           began */
  double lr;            /* the learning rate of parameter group 0 now */
  /* on_step: this batch. */
  double loss;        /* its loss (mean over the batch); NaN but where
                         the figures are read (TORC_TRAIN_EVERY_STEP) */
  double accuracy;    /* its accuracy; NaN unless the target is class
                         indices */
  int64_t samples;    /* its samples (on_eval: the test samples) */
  /* on_step: the log window ([train] log_every steps, or up to the
   * epoch's last batch) so far; `logged` 1 when it ends at this step (a
   * progress line and a metrics row are written). */
  int logged;
  double window_loss;     /* mean over the window's samples */
  double window_accuracy; /* NaN as accuracy */
  double samples_per_sec; /* of the window (on_eval: of the evaluation;
                             on_epoch_end: of the validation split's) */
  double eta_seconds;     /* the rest of this epoch, estimated */
  /* on_epoch_end: the epoch's figures; on_eval: test_loss and
   * test_accuracy. */
  double train_loss;     /* mean over the epoch's samples */
  double train_accuracy; /* NaN as accuracy */
  int evaluated;         /* [data.test] was evaluated this epoch */
  double test_loss;      /* NaN when not evaluated */
  double test_accuracy;  /* NaN when not evaluated or for regression */
  /* on_checkpoint: the file written; on_end: the last one, or "". */
  const char *checkpoint;
  int reason;         /* TORC_TRAIN_SCHEDULED ... TORC_TRAIN_FAILED */
  torc_status status; /* on_end: what torc_train_ex returns */
  /* on_epoch_end: the validation split ([data.valid], or [data.train]
   * valid_fraction), evaluated every epoch when there is one. */
  int valid_evaluated;
  double valid_loss;     /* NaN when not evaluated */
  double valid_accuracy; /* NaN when not evaluated or for regression */
  /* [train] precision = fp16: the optimizer steps skipped so far because
   * the gradients were not finite (the loss scale backed off); read with
   * the figures of a logged step. -1 without a loss scale. */
  int64_t skipped_steps;
} torc_train_event;

/* A callback: `ev` the event, `user` the struct's user pointer. Returns
 * TORC_TRAIN_CONTINUE, TORC_TRAIN_STOP or TORC_TRAIN_FAIL. */
typedef int (*torc_train_callback)(const torc_train_event *ev, void *user);

/* Flags of torc_train_callbacks: leave out a built-in reporter, or keep
 * an earlier run. */
enum {
  TORC_TRAIN_NO_PROGRESS = 1u << 0, /* no progress lines, bar, per-epoch
                                       summaries or stop messages on out */
  TORC_TRAIN_NO_METRICS = 1u << 1,  /* no metrics CSV or curves.svg, even
                                       with [train] metrics */
  /* A fresh run (no resume) whose run folder holds an earlier run's files
   * fails, once the run is built, with torc_train_check_fresh's error
   * (TORC_ERR_CONFIG) instead of replacing them; what `torc train` does
   * without --overwrite. */
  TORC_TRAIN_KEEP_EARLIER = 1u << 2,
  /* Read each step's loss and accuracy back for on_step (ev->loss,
   * ev->accuracy, ev->window_loss, ev->window_accuracy). By default the
   * trainer keeps them on the device and reads them where a log window
   * ends (ev->logged) and at the epoch's end, so a step waits on nothing;
   * the other steps' events have them NaN. On an accelerator this flag
   * costs a blocking read per step. */
  TORC_TRAIN_EVERY_STEP = 1u << 3
};

/* The callbacks of a run; any may be NULL. Zero-initialise, set
 * struct_size = sizeof(torc_train_callbacks) (the library reads only the
 * fields that size covers, so a program built against an older header
 * keeps working), then what you need. */
typedef struct torc_train_callbacks {
  size_t struct_size;
  void *user; /* handed to every callback */
  torc_train_callback on_step;       /* after each optimizer step */
  torc_train_callback on_eval;       /* after each evaluation on
                                        [data.test] */
  torc_train_callback on_epoch_end;  /* after each epoch (its evaluation
                                        and the scheduler's step done),
                                        before its checkpoint */
  torc_train_callback on_checkpoint; /* after each checkpoint is written */
  torc_train_callback on_end;        /* once the loop ends, however it
                                        ended (its return value is
                                        ignored); not called when the run
                                        fails before its first step */
  unsigned flags; /* TORC_TRAIN_NO_PROGRESS, TORC_TRAIN_NO_METRICS, ... */
} torc_train_callbacks;

/* torc_train with callbacks (NULL: none, as torc_train). The run is the
 * same, step for step, whatever the callbacks do short of stopping it; a
 * callback's TORC_TRAIN_STOP ends it with TORC_OK (see TORC_TRAIN_STOP),
 * its TORC_TRAIN_FAIL with its error. A struct_size smaller than the first
 * version of the struct: TORC_ERR_INVALID. */
TORC_API torc_status torc_train_ex(const struct torc_config *cfg,
                                   const torc_train_opts *opts,
                                   const torc_train_callbacks *callbacks,
                                   torc_train_result *res);

/* ---- the run folder ----
 * A run writes into one folder: [train] dir, by default runs/<the INI
 * file's name without .ini>/ beside the file. It holds config.ini (the
 * configuration as the run saw it, --set overrides applied), metrics.csv
 * and curves.svg (unless [train] metrics names another file), the
 * checkpoints (unless [checkpoint] dir names another folder),
 * final.safetensors (the weights at the end, always) and best.safetensors
 * ([checkpoint] best). A fresh run removes the checkpoints, final and best
 * an earlier run left there. */

/* The run folder of `cfg` into buf (size bytes). TORC_ERR_RANGE when it
 * does not fit; TORC_ERR_NULL for a NULL argument. */
TORC_API torc_status torc_train_run_dir(const struct torc_config *cfg,
                                        char *buf, size_t size);

/* TORC_OK when a fresh run of `cfg` would replace no earlier run's files:
 * config.ini, the metrics CSV, checkpoints, final.safetensors or
 * best.safetensors in the run folder (or where [train] metrics and
 * [checkpoint] dir point). Otherwise TORC_ERR_CONFIG saying what is there
 * and the ways on: `torc train --overwrite`, `--resume`, or another
 * [train] dir. What `torc train` checks before a fresh run. */
TORC_API torc_status torc_train_check_fresh(const struct torc_config *cfg);

TORC_END_DECLS

#endif /* TORC_TRAIN_H */
