/* train/report.c — the trainer's built-in reporters, as callbacks on the
 * loop (torc_train_callbacks): the progress lines or bar, the summary of
 * each epoch and the stop messages; the metrics CSV (a row per log window
 * and per evaluation, trimmed on resume) and curves.svg drawn from it.
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

/* ---- the metrics CSV and curves.svg ---- */

static const char csv_header[] =
    "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds\n";

static torc_status csv_open(report *r, int64_t keep_upto);

static void csv_row(report *r, int64_t epoch, int64_t step, const char *split,
                    double loss, double acc, double lr, double sps,
                    double seconds) {
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
  fprintf(r->csv, ",%.6g,%.1f,%.3f\n", lr, sps, seconds);
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
    fputs(csv_header, r->csv);
  free(kept);
  fflush(r->csv);
  return TORC_OK;
}

typedef struct curve {
  int n;
  double tl[1024], ta[1024], vl[1024], va[1024]; /* per epoch; NaN = none */
  double w[1024];
} curve;

static void svg_panel(FILE *f, const curve *c, int y0, const double *a,
                      const double *b, const char *title, int is_acc) {
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < c->n; i++) {
    if (!isnan(a[i]))
      lo = fmin(lo, a[i]), hi = fmax(hi, a[i]);
    if (!isnan(b[i]))
      lo = fmin(lo, b[i]), hi = fmax(hi, b[i]);
  }
  fprintf(f, "<text x='60' y='%d' font-size='14' font-family='sans-serif'>"
             "%s</text>\n", y0 + 16, title);
  int X0 = 60, W = 520, Y0 = y0 + 30, H = 200;
  fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' "
             "stroke='#888'/>\n", X0, Y0, W, H);
  if (!(hi >= lo))
    return;
  if (hi - lo < 1e-12)
    hi = lo + (is_acc ? 0.01 : 1e-3);
  for (int k = 0; k <= 4; k++) {
    double v = lo + (hi - lo) * k / 4;
    fprintf(f, "<text x='%d' y='%.1f' font-size='10' text-anchor='end' "
               "font-family='sans-serif'>%.4g</text>\n",
            X0 - 4, Y0 + H - H * k / 4.0 + 3, v);
  }
  for (int e = 0; e < c->n; e++)
    fprintf(f, "<text x='%.1f' y='%d' font-size='10' text-anchor='middle' "
               "font-family='sans-serif'>%d</text>\n",
            X0 + (c->n > 1 ? W * e / (double)(c->n - 1) : W / 2.0),
            Y0 + H + 14, e + 1);
  const double *ser[2] = {a, b};
  const char *col[2] = {"#1f77b4", "#d62728"};
  for (int s = 0; s < 2; s++) {
    fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' "
               "points='", col[s]);
    for (int e = 0; e < c->n; e++)
      if (!isnan(ser[s][e]))
        fprintf(f, "%.1f,%.1f ",
                X0 + (c->n > 1 ? W * e / (double)(c->n - 1) : W / 2.0),
                Y0 + H - H * (ser[s][e] - lo) / (hi - lo));
    fprintf(f, "'/>\n");
  }
  fprintf(f, "<text x='%d' y='%d' font-size='11' fill='%s' "
             "font-family='sans-serif'>train</text><text x='%d' y='%d' "
             "font-size='11' fill='%s' font-family='sans-serif'>test</text>\n",
          X0 + W - 80, Y0 + 14, col[0], X0 + W - 40, Y0 + 14, col[1]);
}

static int is_curves_name(const char *name, void *user) {
  (void)user;
  return strcmp(name, "curves.svg") == 0;
}

/* Removes the temporary files of curves.svg that killed runs left in
 * `dir`: ".curves.svg.tmp.PID.0" of a process that is gone, and the
 * "curves.svg.tmp" earlier versions wrote, when older than this run. */
static void remove_stale_curves(const char *dir, time_t started) {
  torc_safetensors_remove_stale_temps(dir, is_curves_name, NULL);
  char old[1200];
  snprintf(old, sizeof old, "%scurves.svg.tmp", dir);
  struct stat sb;
  if (lstat(old, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_mtime < started)
    remove(old);
}

/* Reads the CSV back and draws loss and accuracy per epoch, train (the
 * step-weighted mean of the epoch's windows) and test, next to it. */
static void write_curves(report *r) {
  if (r->csv == NULL)
    return;
  FILE *f = fopen(r->csv_path, "r");
  if (f == NULL)
    return;
  static curve c;
  memset(&c, 0, sizeof c);
  for (int i = 0; i < 1024; i++)
    c.tl[i] = c.ta[i] = c.vl[i] = c.va[i] = NAN;
  char line[512];
  long long prev_step = 0;
  while (fgets(line, sizeof line, f)) {
    long long e, s;
    char split[16];
    double l, a = NAN;
    char acc[64] = "";
    if (sscanf(line, "%lld,%lld,%15[^,],%lf,%63[^,],", &e, &s, split, &l,
               acc) < 4)
      continue;
    if (acc[0] && acc[0] != ',')
      a = strtod(acc, NULL);
    if (e < 1 || e > 1024)
      continue;
    int i = (int)e - 1;
    if (i + 1 > c.n)
      c.n = i + 1;
    if (strcmp(split, "train") == 0) {
      double w = (double)(s - prev_step);
      prev_step = s;
      if (w <= 0)
        continue;
      c.tl[i] = (isnan(c.tl[i]) ? 0 : c.tl[i] * c.w[i]) + l * w;
      c.ta[i] = isnan(a) ? NAN : (isnan(c.ta[i]) ? 0 : c.ta[i] * c.w[i]) + a * w;
      c.w[i] += w;
      c.tl[i] /= c.w[i];
      if (!isnan(c.ta[i]))
        c.ta[i] /= c.w[i];
    } else {
      c.vl[i] = l;
      c.va[i] = a;
    }
  }
  fclose(f);
  char path[1100];
  snprintf(path, sizeof path, "%s", r->csv_path);
  char *slash = strrchr(path, '/');
  snprintf(slash ? slash + 1 : path,
           sizeof path - (size_t)(slash ? slash + 1 - path : 0), "curves.svg");
  /* The temporary file is named as torc_safetensors_save names its own,
   * ".curves.svg.tmp.PID.0", so that one killed mid-write is recognised
   * and removed by the next run. */
  char dir[1100];
  snprintf(dir, sizeof dir, "%s", path);
  slash = strrchr(dir, '/');
  if (slash)
    slash[1] = '\0';
  else
    dir[0] = '\0';
  remove_stale_curves(dir, r->started);
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.curves.svg.tmp.%ld.0", dir, (long)getpid());
  FILE *o = fopen(tmp, "w");
  if (o == NULL)
    return;
  fprintf(o, "<svg xmlns='http://www.w3.org/2000/svg' width='620' "
             "height='540' viewBox='0 0 620 540'>\n<rect width='620' "
             "height='540' fill='white'/>\n");
  svg_panel(o, &c, 0, c.tl, c.vl, "loss per epoch", 0);
  svg_panel(o, &c, 270, c.ta, c.va, "accuracy per epoch", 1);
  fprintf(o, "</svg>\n");
  if (fclose(o) == 0)
    rename(tmp, path);
  else
    remove(tmp);
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
            ev->window_accuracy, ev->lr, ev->samples_per_sec, ev->seconds);
  return TORC_TRAIN_CONTINUE;
}

static int metrics_eval(const torc_train_event *ev, void *user) {
  csv_row(user, ev->epoch, ev->step, "test", ev->test_loss, ev->test_accuracy,
          ev->lr, ev->samples_per_sec, ev->seconds);
  return TORC_TRAIN_CONTINUE;
}

static int metrics_curves(const torc_train_event *ev, void *user) {
  (void)ev;
  write_curves(user);
  return TORC_TRAIN_CONTINUE;
}

/* The epoch's validation row (split "valid"), then curves.svg. */
static int metrics_epoch_end(const torc_train_event *ev, void *user) {
  if (ev->valid_evaluated)
    csv_row(user, ev->epoch, ev->step, "valid", ev->valid_loss,
            ev->valid_accuracy, ev->lr, ev->samples_per_sec, ev->seconds);
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
