/* train/report.c — the trainer's built-in reporters, as callbacks on the
 * loop (torc_train_callbacks): the progress lines or bar, the summary of
 * each epoch and the stop messages; the metrics CSV (a row per log window
 * and per evaluation, trimmed on resume); curves.svg is drawn from it in
 * curves.c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

typedef torc_train__report report;

/* ---- the metrics CSV ---- */

/* The columns; an fp16 run's CSV adds skipped_steps, the steps skipped so
 * far for gradients that were not finite. */
static const char csv_header[] =
    "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds";

static torc_status csv_open(report *r, int64_t keep_upto);

static void csv_row(report *r, int64_t epoch, int64_t step, const char *split,
                    double loss, double acc, double lr, double sps,
                    double seconds, int64_t skipped) {
  if (!r->csv_opened) {
    r->csv_opened = 1;
    if (csv_open(r, r->csv_keep_upto) != TORC_OK) {
      torc_logf(TORC_LOG_WARN, "%s; metrics are not recorded",
                torc_last_error());
      torc_clear_error();
    }
  }
  if (r->csv == NULL)
    return;
  fprintf(r->csv, "%lld,%lld,%s,%.6f,", (long long)epoch, (long long)step,
          split, loss);
  if (!isnan(acc))
    fprintf(r->csv, "%.6f", acc);
  fprintf(r->csv, ",%.6g,%.1f,%.3f", lr, sps, seconds);
  if (r->scaled)
    fprintf(r->csv, ",%lld", (long long)(skipped > 0 ? skipped : 0));
  fputc('\n', r->csv);
  fflush(r->csv);
}

/* Opens the CSV: a fresh file with the header, or, resuming at global step
 * `keep_upto` >= 0, the old file cut to the rows of steps up to there. */
static torc_status csv_open(report *r, int64_t keep_upto) {
  if (r->metrics == NULL)
    return TORC_OK;
  snprintf(r->csv_path, sizeof r->csv_path, "%s", r->metrics);
  char *kept = NULL;
  size_t kept_len = 0;
  if (keep_upto >= 0) {
    FILE *f = fopen(r->csv_path, "r");
    FILE *m = f ? open_memstream(&kept, &kept_len) : NULL;
    char line[512];
    int first = 1;
    while (m && fgets(line, sizeof line, f)) {
      long long e, s;
      if (first || (sscanf(line, "%lld,%lld,", &e, &s) == 2 && s <= keep_upto))
        fputs(line, m);
      first = 0;
    }
    if (m)
      fclose(m);
    if (f)
      fclose(f);
  }
  r->csv = fopen(r->csv_path, "w");
  if (r->csv == NULL) {
    free(kept);
    return torc_set_error(TORC_ERR_IO,
                          "cannot write the metrics file %s: %s; check [train] "
                          "metrics and that its folder is writable",
                          r->csv_path, strerror(errno));
  }
  if (kept && kept_len)
    fwrite(kept, 1, kept_len, r->csv);
  else
    fprintf(r->csv, "%s%s\n", csv_header, r->scaled ? ",skipped_steps" : "");
  free(kept);
  fflush(r->csv);
  return TORC_OK;
}

/* ---- progress ---- */

static void fmt_time(double s, char *buf, size_t size) {
  if (!(s >= 0) || s > 1e7)
    s = 0;
  long t = (long)(s + 0.5);
  if (t >= 3600)
    snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

static void progress(report *r, int64_t epoch, int64_t epochs, int64_t b,
                     int64_t nb, double loss, double acc, double sps,
                     double eta) {
  char e[32];
  fmt_time(eta, e, sizeof e);
  char accs[32] = "";
  if (!isnan(acc))
    snprintf(accs, sizeof accs, " acc %.4f", acc);
  if (r->bar) {
    int w = 24, fill = nb ? (int)(w * b / nb) : w;
    char bar[32];
    for (int i = 0; i < w; i++)
      bar[i] = i < fill ? '#' : '-';
    bar[w] = '\0';
    fprintf(r->out, "\repoch %lld/%lld [%s] %lld/%lld loss %.4f%s %.0f "
                    "samples/s ETA %s\033[K",
            (long long)epoch + 1, (long long)epochs, bar, (long long)b,
            (long long)nb, loss, accs, sps, e);
  } else {
    fprintf(r->out, "epoch %lld/%lld step %lld/%lld loss %.4f%s %.0f "
                    "samples/s ETA %s\n",
            (long long)epoch + 1, (long long)epochs, (long long)b,
            (long long)nb, loss, accs, sps, e);
  }
  fflush(r->out);
}

/* A bar line is ended once per epoch: after the draw of its last batch, or
 * before whatever is printed next (an epoch resumed after its last batch
 * draws nothing). Log lines end themselves. */
static void end_bar_line(report *r, int64_t epoch) {
  if (r->bar && r->newline_epoch != epoch) {
    fputc('\n', r->out);
    r->newline_epoch = epoch;
  }
}

/* A line per log window; the bar moves 4 times a second in between. */
static int progress_step(const torc_train_event *ev, void *user) {
  report *r = user;
  if (r->draw_epoch != ev->epoch) {
    r->draw_epoch = ev->epoch;
    r->draw_seconds = 0;
  }
  if (ev->logged || (r->bar && ev->epoch_seconds - r->draw_seconds >= 0.25)) {
    progress(r, ev->epoch - 1, ev->epochs, ev->batch, ev->batches,
             ev->window_loss, ev->window_accuracy, ev->samples_per_sec,
             ev->eta_seconds);
    r->draw_seconds = ev->epoch_seconds;
    if (ev->logged && ev->batch == ev->batches)
      end_bar_line(r, ev->epoch);
  }
  return TORC_TRAIN_CONTINUE;
}

static int progress_eval(const torc_train_event *ev, void *user) {
  end_bar_line(user, ev->epoch);
  return TORC_TRAIN_CONTINUE;
}

/* "epoch E/N: train loss L accuracy A | test loss L accuracy A | S s". */
static int progress_epoch_end(const torc_train_event *ev, void *user) {
  report *r = user;
  end_bar_line(r, ev->epoch);
  char line[256];
  int len =
      snprintf(line, sizeof line, "epoch %lld/%lld: train loss %.4f",
               (long long)ev->epoch, (long long)ev->epochs, ev->train_loss);
  if (!isnan(ev->train_accuracy))
    len += snprintf(line + len, sizeof line - (size_t)len, " accuracy %.4f",
                    ev->train_accuracy);
  if (ev->valid_evaluated) {
    len += snprintf(line + len, sizeof line - (size_t)len,
                    " | valid loss %.4f", ev->valid_loss);
    if (!isnan(ev->valid_accuracy))
      len += snprintf(line + len, sizeof line - (size_t)len, " accuracy %.4f",
                      ev->valid_accuracy);
  }
  if (ev->evaluated) {
    len += snprintf(line + len, sizeof line - (size_t)len, " | test loss %.4f",
                    ev->test_loss);
    if (!isnan(ev->test_accuracy))
      len += snprintf(line + len, sizeof line - (size_t)len, " accuracy %.4f",
                      ev->test_accuracy);
  }
  snprintf(line + len, sizeof line - (size_t)len, " | %.1f s",
           ev->epoch_seconds);
  fprintf(r->out, "%s\n", line);
  fflush(r->out);
  return TORC_TRAIN_CONTINUE;
}

/* What a run ended early by Ctrl-C or a callback left, and how to go on. */
static int progress_end(const torc_train_event *ev, void *user) {
  report *r = user;
  if (ev->reason != TORC_TRAIN_INTERRUPTED && ev->reason != TORC_TRAIN_STOPPED)
    return TORC_TRAIN_CONTINUE;
  end_bar_line(r, ev->epoch);
  const char *what =
      ev->reason == TORC_TRAIN_INTERRUPTED ? "interrupted" : "stopped early";
  int mid = ev->reason == TORC_TRAIN_INTERRUPTED || ev->batch < ev->batches;
  char at[96];
  if (mid)
    snprintf(at, sizeof at, "at epoch %lld, batch %lld", (long long)ev->epoch,
             (long long)ev->batch);
  else
    snprintf(at, sizeof at, "after epoch %lld", (long long)ev->epoch);
  if (ev->checkpoint && ev->checkpoint[0])
    fprintf(r->out, "%s %s: checkpoint %s; go on with --resume\n", what, at,
            ev->checkpoint);
  else
    fprintf(r->out, "%s %s (no [checkpoint] dir: nothing saved)\n", what, at);
  return TORC_TRAIN_CONTINUE;
}

/* A train row per log window, a test row per evaluation; curves.svg after
 * each epoch and at the end. */
static int metrics_step(const torc_train_event *ev, void *user) {
  if (ev->logged)
    csv_row(user, ev->epoch, ev->step, "train", ev->window_loss,
            ev->window_accuracy, ev->lr, ev->samples_per_sec, ev->seconds,
            ev->skipped_steps);
  if (ev->logged && ev->skipped_steps >= 0)
    ((report *)user)->skipped = ev->skipped_steps;
  return TORC_TRAIN_CONTINUE;
}

static int metrics_eval(const torc_train_event *ev, void *user) {
  csv_row(user, ev->epoch, ev->step, "test", ev->test_loss, ev->test_accuracy,
          ev->lr, ev->samples_per_sec, ev->seconds,
          ((report *)user)->skipped);
  return TORC_TRAIN_CONTINUE;
}

static int metrics_curves(const torc_train_event *ev, void *user) {
  report *r = user;
  (void)ev;
  if (r->csv)
    torc_train__write_curves(r->csv_path, r->started);
  return TORC_TRAIN_CONTINUE;
}

/* The epoch's validation row (split "valid"), then curves.svg. */
static int metrics_epoch_end(const torc_train_event *ev, void *user) {
  if (ev->valid_evaluated)
    csv_row(user, ev->epoch, ev->step, "valid", ev->valid_loss,
            ev->valid_accuracy, ev->lr, ev->samples_per_sec, ev->seconds,
            ((report *)user)->skipped);
  return metrics_curves(ev, user);
}

/* ---- set-up ---- */

void torc_train__report_init(report *rp, const torc_train__run *r, FILE *out,
                             int bar, int64_t keep_upto) {
  memset(rp, 0, sizeof *rp);
  rp->out = out;
  rp->bar = bar;
  rp->newline_epoch = rp->draw_epoch = -1;
  rp->metrics = r->s.metrics;
  rp->csv_keep_upto = keep_upto;
  rp->started = r->started;
  rp->scaled = r->scaler != NULL;
}

torc_train_callbacks torc_train__progress_callbacks(report *rp) {
  return (torc_train_callbacks){.struct_size = sizeof(torc_train_callbacks),
                                .user = rp,
                                .on_step = progress_step,
                                .on_eval = progress_eval,
                                .on_epoch_end = progress_epoch_end,
                                .on_end = progress_end};
}

torc_train_callbacks torc_train__metrics_callbacks(report *rp) {
  return (torc_train_callbacks){.struct_size = sizeof(torc_train_callbacks),
                                .user = rp,
                                .on_step = metrics_step,
                                .on_eval = metrics_eval,
                                .on_epoch_end = metrics_epoch_end,
                                .on_end = metrics_curves};
}

void torc_train__report_close(report *rp) {
  if (rp->csv)
    fclose(rp->csv);
  rp->csv = NULL;
}
