/* torc/train.h — the INI-driven trainer behind `torc train` and `torc
 * eval`: one configuration (docs/config.md, `torc help config`) gives the
 * plugins, device, data, model, loss, optimizer, scheduler, the training
 * schedule ([train]) and checkpoints ([checkpoint]); the trainer runs the
 * loop a PyTorch user writes by hand (train mode, forward, loss,
 * zero_grad, backward, clip, step; eval mode under no-grad), and writes
 * the metrics CSV, curves.svg and checkpoints.
 */
#ifndef TORC_TRAIN_H
#define TORC_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "torc/error.h"

TORC_BEGIN_DECLS

struct torc_config;

/* How a run is driven. Zero-initialise, then set what you need. */
typedef struct torc_train_opts {
  /* NULL: start fresh. "": resume from the newest checkpoint in
   * [checkpoint] dir. Otherwise the checkpoint file to resume from. */
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
} torc_eval_result;

/* Evaluates the model of `cfg` on [data.test] with the weights of
 * `checkpoint`: a torc checkpoint or a plain safetensors state dict (one
 * saved from PyTorch with the same architecture works), loaded strictly —
 * a checkpoint of another model is TORC_ERR_SHAPE/TORC_ERR_INVALID listing
 * the keys that differ. When `predict` > 0, prints the logits of the first
 * `predict` samples to `out` (NULL = stdout), one row each. */
TORC_API torc_status torc_evaluate(const struct torc_config *cfg,
                                   const char *checkpoint, int predict,
                                   FILE *out, torc_eval_result *res);

/* Times `steps` training steps (after a few of warm-up) of the model of
 * `cfg` on batches of [data.train], with the profiler on, and prints to
 * `out` (NULL = stdout) the step time, samples/s, and the profile: kernels
 * by op, the time outside kernels, forward and backward per layer. What
 * `torc bench FILE.ini` prints. */
TORC_API torc_status torc_bench(const struct torc_config *cfg, int64_t steps,
                                FILE *out);

TORC_END_DECLS

#endif /* TORC_TRAIN_H */
