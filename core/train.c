/* core/train.c — the INI-driven trainer (torc/train.h): the [train] and
 * [checkpoint] sections, the training loop, evaluation, the metrics CSV,
 * curves.svg, checkpoints and resume, Ctrl-C, the NaN guard.
 *
 * A checkpoint is one atomic safetensors file, ckpt-<global step>.safetensors
 * in [checkpoint] dir: the model, "optimizer." and "scheduler." state, the
 * RNG, and the position (epoch, batch within it, global step, seconds so
 * far). Resuming rebuilds everything from the INI file, loads that, trims
 * the metrics CSV to the rows written before it, and starts the loader at
 * the saved batch: the run goes on as if it had never stopped (bit for bit
 * when the data pipeline is deterministic, [torc] deterministic = yes).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "torc/checked.h"
#include "torc/torc.h"
#include "torc/train.h"

const torc__config_row torc__train_rows[] = {
    {"train", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "the training schedule: epochs, clipping, logging, evaluation"},
    {"train", "epochs", TORC__CFG_INT, "1", "1..", 0, "passes over the data"},
    {"train", "clip_grad_norm", TORC__CFG_FLOAT, "0", "0..", 0,
     "scale gradients to this total 2-norm before each step (0 = off)"},
    {"train", "clip_grad_value", TORC__CFG_FLOAT, "0", "0..", 0,
     "clamp each gradient element to [-v, v] (0 = off)"},
    {"train", "precision", TORC__CFG_ENUM, "fp32", "fp32", 0,
     "arithmetic precision (fp32; mixed precision is not available yet)"},
    {"train", "log_every", TORC__CFG_INT, "100", "1..", 0,
     "steps per progress line and metrics row"},
    {"train", "eval_every", TORC__CFG_INT, "1", "0..", 0,
     "epochs between evaluations on [data.test] (0 = only after the last)"},
    {"train", "metrics", TORC__CFG_PATH, NULL, NULL, 0,
     "the metrics CSV (curves.svg is written next to it)"},
    {"checkpoint", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "checkpoints: model, optimizer, scheduler, RNG and position"},
    {"checkpoint", "dir", TORC__CFG_PATH, NULL, NULL, TORC__CFG_REQUIRED,
     "the folder checkpoints are written to (created if missing)"},
    {"checkpoint", "every", TORC__CFG_INT, "1", "0..", 0,
     "epochs between checkpoints (0 = only at the end and on Ctrl-C)"},
    {"checkpoint", "keep", TORC__CFG_INT, "3", "1..", 0,
     "how many of the newest checkpoints to keep"},
    {NULL, NULL, TORC__CFG_SECTION, NULL, NULL, 0, NULL}};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- SIGINT ---- */

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

/* ---- the parts of a run ---- */

typedef struct settings {
  int64_t epochs, log_every, eval_every, ck_every, ck_keep;
  double clip_norm, clip_value;
  const char *metrics; /* or NULL */
  const char *ck_dir;  /* or NULL */
  int sched_per_step;
} settings;

typedef struct run {
  const torc_config *cfg;
  settings s;
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
  FILE *out;
  FILE *csv;
  int bar;
  int csv_opened;         /* tried: opened lazily, at the first row */
  int64_t csv_keep_upto;  /* resuming: keep the rows up to this step */
  char csv_path[1024];
  time_t started; /* files older than this were left by earlier runs */
} run;

static torc_status csv_open(run *r, int64_t keep_upto);
static torc_status mkdirs(const char *dir, const char *what);

/* The folders the run writes to exist (made if missing) and are
 * writable: checked before the first step, so a bad path is a
 * configuration error, not a lost run. */
static torc_status outputs_ok(const run *r) {
  if (r->s.metrics) {
    char d[1024];
    snprintf(d, sizeof d, "%s", r->s.metrics);
    char *slash = strrchr(d, '/');
    if (slash && slash != d) {
      *slash = '\0';
      torc_status st = mkdirs(d, "[train] metrics");
      if (st)
        return st;
    } else {
      snprintf(d, sizeof d, ".");
    }
    if (access(d, W_OK) != 0)
      return torc_set_error(TORC_ERR_IO, "cannot write the metrics file %s "
                            "(folder %s: %s); check [train] metrics",
                            r->s.metrics, d, strerror(errno));
  }
  if (r->s.ck_dir) {
    torc_status st = mkdirs(r->s.ck_dir, "[checkpoint] dir");
    if (st)
      return st;
    if (access(r->s.ck_dir, W_OK) != 0)
      return torc_set_error(TORC_ERR_IO, "cannot write checkpoints to %s: %s; "
                            "check [checkpoint] dir",
                            r->s.ck_dir, strerror(errno));
  }
  return TORC_OK;
}

static torc_status read_settings(const torc_config *cfg, settings *s) {
  memset(s, 0, sizeof *s);
  int t = torc__config_find(cfg, "train");
  s->epochs = 1;
  s->log_every = 100;
  s->eval_every = 1;
  if (t >= 0) {
    torc_status st;
    if ((st = torc__config_int(cfg, t, "epochs", &s->epochs)) ||
        (st = torc__config_int(cfg, t, "log_every", &s->log_every)) ||
        (st = torc__config_int(cfg, t, "eval_every", &s->eval_every)) ||
        (st = torc__config_float(cfg, t, "clip_grad_norm", &s->clip_norm)) ||
        (st = torc__config_float(cfg, t, "clip_grad_value", &s->clip_value)))
      return st;
    s->metrics = torc__config_value(cfg, t, "metrics");
    if (s->clip_norm > 0 && s->clip_value > 0)
      return torc__config_error(cfg, t, "clip_grad_value", TORC_ERR_CONFIG,
                                "clip_grad_norm and clip_grad_value are both "
                                "set; choose one");
  }
  int c = torc__config_find(cfg, "checkpoint");
  s->ck_every = 1;
  s->ck_keep = 3;
  if (c >= 0) {
    torc_status st;
    if ((st = torc__config_int(cfg, c, "every", &s->ck_every)) ||
        (st = torc__config_int(cfg, c, "keep", &s->ck_keep)))
      return st;
    s->ck_dir = torc__config_value(cfg, c, "dir");
  }
  int k = torc__config_find(cfg, "scheduler");
  if (k >= 0) {
    const char *iv = torc__config_value(cfg, k, "interval");
    s->sched_per_step = iv && strcmp(iv, "step") == 0;
  }
  return TORC_OK;
}

static void run_free(run *r) {
  torc__free(r->warm_lr);
  torc_scheduler_free(r->sched);
  torc_optimizer_free(r->opt);
  torc_loss_free(r->loss);
  torc_loader_free(r->train);
  torc_loader_free(r->test);
  torc_module_free(r->model);
  if (r->csv)
    fclose(r->csv);
}

static torc_status warmup_build(run *r);

/* Builds the model, data, loss, optimizer and scheduler of cfg. With
 * `for_train` 0 only the model, the test data and the loss. */
static torc_status run_build(run *r, const torc_config *cfg, int for_train) {
  memset(r, 0, sizeof *r);
  r->cfg = cfg;
  r->started = time(NULL);
  torc_status st = read_settings(cfg, &r->s);
  if (st == TORC_OK)
    st = torc_config_device(cfg, &r->dev);
  if (st)
    return st;
  int64_t shape[TORC_MAX_DIMS + 1];
  int nd = 0;
  r->model = torc_module_from_config(cfg, shape + 1, &nd);
  if (r->model == NULL)
    return torc_last_status();
  /* Materialise lazy sizes with one sample, then move to the device. */
  shape[0] = 1;
  {
    int scope = torc_scope_begin();
    torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
    torc_module_train(r->model, 0);
    torc_tensor *x = torc_zeros(shape, nd + 1, TORC_F32, TORC_CPU);
    st = x && torc_module_forward(r->model, x) ? TORC_OK : torc_last_status();
    torc_set_grad_mode(gm);
    torc_scope_end(scope);
    if (st)
      return st;
  }
  if ((st = torc_module_to(r->model, r->dev)))
    return st;
  if (for_train &&
      (r->train = torc_loader_from_config(cfg, "train", r->dev)) == NULL)
    return torc_last_status();
  if (torc__config_find(cfg, "data.test") >= 0 &&
      (r->test = torc_loader_from_config(cfg, "test", r->dev)) == NULL)
    return torc_last_status();
  if (!for_train && r->test == NULL)
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: no [data.test] section to evaluate on; add "
                          "one (source, and its files)",
                          torc_config_path(cfg));
  if ((r->loss = torc_loss_from_config(cfg)) == NULL)
    return torc_last_status();
  if (!for_train)
    return TORC_OK;
  if ((r->opt = torc_optimizer_from_config(cfg, r->model)) == NULL)
    return torc_last_status();
  /* The run after the warm-up, in the schedule's steps: cosine's t_max
   * and onecycle's total_steps when the file leaves them out. */
  int k = torc__config_find(cfg, "scheduler");
  if (k >= 0 && torc_config_section_get(cfg, k, "warmup_epochs") &&
      (st = torc__config_int(cfg, k, "warmup_epochs", &r->warm_epochs)))
    return st;
  int64_t len = r->s.epochs - r->warm_epochs;
  if (r->s.sched_per_step)
    len *= torc_loader_length(r->train);
  r->sched = torc__scheduler_from_config(cfg, r->opt, 1, len > 0 ? len : 1);
  if (r->sched == NULL && torc_last_status() != TORC_OK)
    return torc_last_status();
  return warmup_build(r);
}

/* [scheduler] warmup_epochs, which the trainer runs itself: a LinearLR
 * raised at every step, not once per epoch (a tenfold jump of the lr at
 * the first epoch's end is what a warm-up is there to avoid). */
static torc_status warmup_build(run *r) {
  int k = torc__config_find(r->cfg, "scheduler");
  if (k < 0 || r->sched == NULL ||
      torc_config_section_get(r->cfg, k, "warmup_epochs") == NULL)
    return TORC_OK; /* r->warm_epochs: read by run_build */
  r->warm_f = 0.1;
  const char *f = torc_config_section_get(r->cfg, k, "warmup_start_factor");
  if (f) {
    char *end;
    r->warm_f = strtod(f, &end);
    if (end == f || *end != '\0' || !(r->warm_f > 0 && r->warm_f <= 1))
      return torc__config_error(r->cfg, k, "warmup_start_factor",
                                TORC_ERR_CONFIG,
                                "'%s' is not a factor in (0, 1]; give one "
                                "(0.1 starts at a tenth of the lr)",
                                f);
  }
  r->warm_steps = r->warm_epochs * torc_loader_length(r->train);
  r->warm_groups = torc_optimizer_group_count(r->opt);
  r->warm_lr = torc__calloc((size_t)r->warm_groups + 1, sizeof *r->warm_lr);
  if (r->warm_lr == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory building the run");
  for (int g = 0; g < r->warm_groups; g++)
    r->warm_lr[g] = torc_optimizer_get_lr(r->opt, g);
  return TORC_OK;
}

/* The lr of the step after `gstep` steps, while the warm-up lasts (at its
 * last step the schedule's first lr). */
static void warmup_apply(run *r, int64_t gstep) {
  if (gstep > r->warm_steps || r->warm_steps == 0)
    return;
  double f = r->warm_f, a = f + (1.0 - f) * (double)gstep / r->warm_steps;
  if (gstep == r->warm_steps)
    a = 1.0;
  for (int g = 0; g < r->warm_groups; g++)
    torc_optimizer_set_lr(r->opt, g, r->warm_lr[g] * a);
}

/* ---- batches ---- */

/* Loss (mean over the batch) and the number of correct predictions (-1
 * when the target is not class indices). */
static torc_status batch_metrics(torc_tensor *out, const torc_tensor *target,
                                 torc_tensor *loss, double *loss_v,
                                 int64_t *correct) {
  torc_status st = torc_item(loss, loss_v);
  if (st)
    return st;
  *correct = -1;
  if (torc_dtype_of(target) == TORC_I64 && torc_ndim(out) == 2 &&
      torc_ndim(target) == 1) {
    int dim = 1;
    double c;
    torc_tensor *pred = torc_argmax(out, &dim, 0);
    if ((st = torc_item(torc_sum(torc_eq(pred, target), NULL, 0, 0), &c)))
      return st;
    *correct = (int64_t)c;
  }
  return TORC_OK;
}

typedef struct eval_out {
  double loss, accuracy;
  int64_t samples, classes;
  int64_t *confusion;
} eval_out;

static torc_status evaluate(run *r, int64_t epoch, int want_confusion,
                            int predict, FILE *pf, eval_out *e) {
  memset(e, 0, sizeof *e);
  torc_module_train(r->model, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_status st = torc_loader_start(r->test, epoch, 0);
  double lsum = 0;
  int64_t correct = 0, n = 0, printed = 0;
  int classify = 1;
  torc_batch b = {0};
  int got;
  while (st == TORC_OK && (got = torc_loader_next(r->test, &b)) == 1) {
    int scope = torc_scope_begin();
    torc_tensor *out = torc_module_forward(r->model, b.input);
    torc_tensor *loss = out ? torc_loss_forward(r->loss, out, b.target) : NULL;
    double lv;
    int64_t c;
    st = loss ? batch_metrics(out, b.target, loss, &lv, &c)
              : torc_last_status();
    if (st == TORC_OK) {
      lsum += lv * (double)b.size;
      n += b.size;
      if (c < 0)
        classify = 0;
      else
        correct += c;
      if (classify && want_confusion) {
        int64_t k = torc_shape(out)[1];
        if (e->confusion == NULL) {
          e->classes = k;
          e->confusion = torc__calloc((size_t)(k * k), sizeof(int64_t));
          if (e->confusion == NULL)
            st = torc_set_error(TORC_ERR_OOM, "out of memory");
        }
        int dim = 1;
        torc_tensor *pred = torc_to(torc_argmax(out, &dim, 0), TORC_CPU);
        torc_tensor *tgt = torc_to(b.target, TORC_CPU);
        if (st == TORC_OK && pred && tgt) {
          const int64_t *p = torc_data(torc_contiguous(pred)),
                        *t = torc_data(torc_contiguous(tgt));
          for (int64_t i = 0; i < b.size; i++)
            if (t[i] >= 0 && t[i] < k && p[i] >= 0 && p[i] < k)
              e->confusion[t[i] * k + p[i]]++;
        }
      }
      for (int64_t i = 0; i < b.size && printed < predict && st == TORC_OK;
           i++, printed++) {
        torc_tensor *row = torc_to(torc_select(out, 0, i), TORC_CPU);
        torc_tensor *rf = row ? torc_to_dtype(row, TORC_F64) : NULL;
        if (rf == NULL) {
          st = torc_last_status();
          break;
        }
        const double *v = torc_data(torc_contiguous(rf));
        int64_t m = torc_numel(rf);
        for (int64_t j = 0; j < m; j++)
          fprintf(pf, "%s%.6g", j ? " " : "", v[j]);
        fputc('\n', pf);
      }
    }
    torc_scope_end(scope);
    torc_batch_clear(&b);
  }
  if (st == TORC_OK && got < 0)
    st = torc_last_status();
  torc_set_grad_mode(gm);
  e->samples = n;
  e->loss = n ? lsum / (double)n : NAN;
  e->accuracy = classify && n ? (double)correct / (double)n : NAN;
  if (!classify) {
    torc__free(e->confusion);
    e->confusion = NULL;
    e->classes = 0;
  }
  return st;
}

/* ---- the metrics CSV and curves.svg ---- */

static const char csv_header[] =
    "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds\n";

static void csv_row(run *r, int64_t epoch, int64_t step, const char *split,
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
static torc_status csv_open(run *r, int64_t keep_upto) {
  if (r->s.metrics == NULL)
    return TORC_OK;
  snprintf(r->csv_path, sizeof r->csv_path, "%s", r->s.metrics);
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

/* In core/safetensors.c: removes ".NAME.tmp.PID.N" files whose process is
 * gone, for the NAMEs `want` accepts. */
void torc__safetensors_remove_stale_temps(const char *dir,
                                          int (*want)(const char *name,
                                                      void *user),
                                          void *user);

static int is_curves_name(const char *name, void *user) {
  (void)user;
  return strcmp(name, "curves.svg") == 0;
}

/* A checkpoint's file name: ckpt-<digits>.safetensors. */
static int is_ckpt_name(const char *name, void *user) {
  (void)user;
  if (strncmp(name, "ckpt-", 5) != 0)
    return 0;
  const char *p = name + 5;
  if (*p < '0' || *p > '9')
    return 0;
  while (*p >= '0' && *p <= '9')
    p++;
  return strcmp(p, ".safetensors") == 0;
}

/* Removes the temporary files of curves.svg that killed runs left in
 * `dir`: ".curves.svg.tmp.PID.0" of a process that is gone, and the
 * "curves.svg.tmp" earlier versions wrote, when older than this run. */
static void remove_stale_curves(const char *dir, time_t started) {
  torc__safetensors_remove_stale_temps(dir, is_curves_name, NULL);
  char old[1200];
  snprintf(old, sizeof old, "%scurves.svg.tmp", dir);
  struct stat sb;
  if (lstat(old, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_mtime < started)
    remove(old);
}

/* Reads the CSV back and draws loss and accuracy per epoch, train (the
 * step-weighted mean of the epoch's windows) and test, next to it. */
static void write_curves(run *r) {
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

/* ---- checkpoints ---- */

static torc_status mkdirs(const char *dir, const char *what) {
  char p[1024];
  snprintf(p, sizeof p, "%s", dir);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      if (mkdir(p, 0777) != 0 && errno != EEXIST)
        goto fail;
      *s = '/';
    }
  if (mkdir(p, 0777) != 0 && errno != EEXIST)
    goto fail;
  return TORC_OK;
fail:
  return torc_set_error(TORC_ERR_IO, "cannot create the folder %s: %s; check %s",
                        dir, strerror(errno), what);
}

/* The global steps of the checkpoints in dir, newest first; count. */
static int list_ckpts(const char *dir, long long *steps, int max) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long long s;
    char tail[32];
    if (sscanf(e->d_name, "ckpt-%lld.%31s", &s, tail) == 2 &&
        strcmp(tail, "safetensors") == 0 && n < max)
      steps[n++] = s;
  }
  closedir(d);
  for (int i = 1; i < n; i++) /* insertion sort, descending */
    for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) {
      long long t = steps[j];
      steps[j] = steps[j - 1];
      steps[j - 1] = t;
    }
  return n;
}

/* Where a run is: the next epoch and batch, the steps so far, the
 * seconds so far, and the running sums of the current log window (w*) and
 * epoch (e*) — loss * samples, correct predictions, samples, steps — so
 * that a run resumed mid-window writes the rows it would have written. */
typedef struct position {
  int64_t epoch, batch, gstep;
  double seconds;
  double wl, el;
  int64_t wc, wn, ws, ec, en, classify;
} position;

static const char *const pos_keys[] = {"wl", "el", "wc", "wn", "ws", "ec",
                                       "en", "classify", "seconds"};

static void pos_fields(position *p, double **d, int64_t **i) {
  d[0] = &p->wl, d[1] = &p->el, d[2] = &p->seconds;
  i[0] = &p->wc, i[1] = &p->wn, i[2] = &p->ws, i[3] = &p->ec, i[4] = &p->en,
  i[5] = &p->classify;
}

static torc_status save_ckpt(run *r, const position *pos, char *path,
                             size_t psize) {
  int64_t epoch = pos->epoch, batch = pos->batch, gstep = pos->gstep;
  torc_status st = mkdirs(r->s.ck_dir, "[checkpoint] dir");
  if (st)
    return st;
  /* Checkpoints whose save was killed before the rename. */
  torc__safetensors_remove_stale_temps(r->s.ck_dir, is_ckpt_name, NULL);
  snprintf(path, psize, "%s/ckpt-%08lld.safetensors", r->s.ck_dir,
           (long long)gstep);
  torc_state_dict *ck = torc_checkpoint_new();
  if (ck == NULL)
    return torc_last_status();
  if ((st = torc_checkpoint_add_module(ck, r->model)) == TORC_OK &&
      (st = torc_optimizer_state_dict(r->opt, "optimizer.", ck)) == TORC_OK &&
      (!r->sched ||
       (st = torc_scheduler_state_dict(r->sched, "scheduler.", ck)) ==
           TORC_OK) &&
      (st = torc_checkpoint_add_rng(ck, "default", NULL)) == TORC_OK &&
      (st = torc_state_dict_set_i64(ck, "epoch", epoch)) == TORC_OK &&
      (st = torc_state_dict_set_i64(ck, "batch", batch)) == TORC_OK &&
      (st = torc_state_dict_set_i64(ck, "global_step", gstep)) == TORC_OK) {
    position p = *pos;
    double *d[3];
    int64_t *iv[6];
    pos_fields(&p, d, iv);
    for (int k = 0; k < 9 && st == TORC_OK; k++) {
      char key[32], v[64];
      snprintf(key, sizeof key, "train.%s", pos_keys[k]);
      if (k == 0 || k == 1 || k == 8)
        snprintf(v, sizeof v, "%.17g", *d[k == 8 ? 2 : k]);
      else
        snprintf(v, sizeof v, "%lld", (long long)*iv[k - 2]);
      st = torc_state_dict_set_meta(ck, key, v);
    }
    if (st == TORC_OK)
      st = torc_state_dict_save(ck, path);
  }
  torc_state_dict_free(ck);
  if (st)
    return st;
  /* Keep the newest `keep`. */
  long long steps[4096];
  int n = list_ckpts(r->s.ck_dir, steps, 4096);
  for (int i = (int)r->s.ck_keep; i < n; i++) {
    char old[1100];
    snprintf(old, sizeof old, "%s/ckpt-%08lld.safetensors", r->s.ck_dir,
             steps[i]);
    remove(old);
  }
  return TORC_OK;
}


/* The metadata `key` of checkpoint `path` as an integer in [lo, hi]; an
 * error naming the file, the key, the value and the range otherwise. */
static torc_status ckpt_int(const torc_state_dict *ck, const char *path,
                            const char *key, int64_t lo, int64_t hi,
                            const char *range_is, int64_t *out) {
  const char *v = torc_state_dict_meta(ck, key);
  char *end = NULL;
  errno = 0;
  long long x = v ? strtoll(v, &end, 10) : 0;
  if (v == NULL || v[0] == '\0' || v[0] == ' ' || *end != '\0' ||
      errno == ERANGE)
    return torc_set_error(TORC_ERR_INVALID,
                          "--resume: checkpoint %s: metadata '%s' is \"%s\", "
                          "not an integer; the file is corrupt: resume from "
                          "another checkpoint",
                          path, key, v ? v : "");
  if (x < lo || x > hi)
    return torc_set_error(TORC_ERR_INVALID,
                          "--resume: checkpoint %s: metadata '%s' is %lld, "
                          "outside %lld..%lld (%s); the file is corrupt or "
                          "from another run: resume from another checkpoint",
                          path, key, x, (long long)lo, (long long)hi,
                          range_is);
  *out = (int64_t)x;
  return TORC_OK;
}

/* Reads and checks the position a checkpoint holds against this run: the
 * epoch within [train] epochs, the batch within the epoch, a global step
 * that counts at least those batches and leaves room for the rest of the
 * run, and the running sums of the log window (train.*) as numbers of
 * their kind. A hostile file would otherwise name checkpoints with a
 * negative step, or skip the whole run without a word. */
static torc_status check_position(run *r, const torc_state_dict *ck,
                                  const char *path, position *pos) {
  int64_t nb = torc_loader_length(r->train);
  if (nb < 0)
    nb = 0;
  char why[160];
  /* epoch: the next epoch to run, so `epochs` itself is a finished run. */
  const char *ev = torc_state_dict_meta(ck, "epoch");
  char *end = NULL;
  errno = 0;
  long long e = strtoll(ev, &end, 10);
  if (ev[0] != '\0' && *end == '\0' && errno == 0 && e > r->s.epochs)
    return torc_set_error(TORC_ERR_INVALID,
                          "--resume: checkpoint %s: metadata 'epoch' is %lld, "
                          "past [train] epochs = %lld of %s (valid: "
                          "0..%lld); raise epochs to train on from it, or "
                          "resume from an earlier checkpoint",
                          path, e, (long long)r->s.epochs,
                          torc_config_path(r->cfg), (long long)r->s.epochs);
  snprintf(why, sizeof why, "[train] epochs is %lld", (long long)r->s.epochs);
  torc_status st =
      ckpt_int(ck, path, "epoch", 0, r->s.epochs, why, &pos->epoch);
  if (st)
    return st;
  /* batch: batches done in that epoch; an interrupt after the last one
   * saves nb, a finished run 0. */
  int64_t bmax = pos->epoch < r->s.epochs ? nb : 0;
  snprintf(why, sizeof why, "an epoch has %lld batches", (long long)nb);
  if ((st = ckpt_int(ck, path, "batch", 0, bmax, why, &pos->batch)))
    return st;
  /* global_step: at least the batches of this epoch and one per epoch
   * before it; at most what leaves the rest of the run countable. */
  uint64_t rest = 0;
  if (torc_checked_mul((uint64_t)(r->s.epochs - pos->epoch), (uint64_t)nb,
                       &rest) ||
      rest > (uint64_t)INT64_MAX)
    rest = (uint64_t)INT64_MAX;
  int64_t smin = pos->batch > pos->epoch ? pos->batch : pos->epoch;
  snprintf(why, sizeof why,
           "at least its epoch %lld and batch %lld, and room for the %llu "
           "steps left",
           (long long)pos->epoch, (long long)pos->batch,
           (unsigned long long)rest);
  if ((st = ckpt_int(ck, path, "global_step", smin,
                     INT64_MAX - (int64_t)rest, why, &pos->gstep)))
    return st;
  /* The running sums of the current log window and epoch. */
  double *d[3];
  int64_t *iv[6];
  pos_fields(pos, d, iv);
  for (int k = 0; k < 9; k++) {
    char key[32];
    snprintf(key, sizeof key, "train.%s", pos_keys[k]);
    const char *v = torc_state_dict_meta(ck, key);
    if (k == 0 || k == 1 || k == 8) {
      double x = 0;
      if (v) {
        errno = 0;
        x = strtod(v, &end);
        if (v[0] == '\0' || *end != '\0' || !isfinite(x) ||
            (k == 8 && x < 0))
          return torc_set_error(
              TORC_ERR_INVALID,
              "--resume: checkpoint %s: metadata '%s' is \"%s\", not a "
              "finite%s number; the file is corrupt: resume from another "
              "checkpoint",
              path, key, v, k == 8 ? " non-negative" : "");
      }
      *d[k == 8 ? 2 : k] = x;
    } else if (v == NULL) {
      *iv[k - 2] = k == 7; /* classify defaults to yes */
    } else if ((st = ckpt_int(ck, path, key, 0, k == 7 ? 1 : INT64_MAX,
                              k == 7 ? "a flag" : "a count",
                              iv[k - 2]))) {
      return st;
    }
  }
  return TORC_OK;
}

static torc_status load_ckpt(run *r, const char *want, position *pos) {
  char path[1100];
  if (want[0] == '\0') {
    if (r->s.ck_dir == NULL)
      return torc_set_error(TORC_ERR_CONFIG,
                            "--resume: %s has no [checkpoint] dir to find "
                            "the newest checkpoint in; add one, or name the "
                            "checkpoint: --resume PATH",
                            torc_config_path(r->cfg));
    long long steps[4096]; /* newest first */
    if (list_ckpts(r->s.ck_dir, steps, 4096) == 0)
      return torc_set_error(TORC_ERR_IO,
                            "--resume: no checkpoint (ckpt-*.safetensors) in "
                            "%s; train without --resume first",
                            r->s.ck_dir);
    snprintf(path, sizeof path, "%s/ckpt-%08lld.safetensors", r->s.ck_dir,
             steps[0]);
  } else {
    snprintf(path, sizeof path, "%s", want);
  }
  torc_state_dict *ck = torc_checkpoint_load(path, r->dev);
  if (ck == NULL)
    return torc_last_status();
  torc_status st = torc_checkpoint_load_module(ck, r->model, NULL, NULL);
  if (st == TORC_OK)
    st = torc_optimizer_load_state_dict(r->opt, ck, "optimizer.");
  if (st == TORC_OK && r->sched)
    st = torc_scheduler_load_state_dict(r->sched, ck, "scheduler.");
  if (st == TORC_OK)
    st = torc_checkpoint_restore_rng(ck, "default", NULL);
  if (st == TORC_OK && (torc_state_dict_meta(ck, "epoch") == NULL ||
                        torc_state_dict_meta(ck, "batch") == NULL ||
                        torc_state_dict_meta(ck, "global_step") == NULL))
    st = torc_set_error(TORC_ERR_INVALID,
                        "--resume: %s is not a torc train checkpoint (no "
                        "epoch/batch/global_step); resume from a file torc "
                        "train wrote",
                        path);
  if (st == TORC_OK)
    st = check_position(r, ck, path, pos);
  torc_state_dict_free(ck);
  if (st == TORC_OK)
    torc_logf(TORC_LOG_INFO, "resuming from %s (epoch %lld, batch %lld)",
              path, (long long)pos->epoch + 1, (long long)pos->batch);
  return st;
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

static void progress(run *r, int64_t epoch, int64_t b, int64_t nb,
                     double loss, double acc, double sps, double eta) {
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
            (long long)epoch + 1, (long long)r->s.epochs, bar, (long long)b,
            (long long)nb, loss, accs, sps, e);
  } else {
    fprintf(r->out, "epoch %lld/%lld step %lld/%lld loss %.4f%s %.0f "
                    "samples/s ETA %s\n",
            (long long)epoch + 1, (long long)r->s.epochs, (long long)b,
            (long long)nb, loss, accs, sps, e);
  }
  fflush(r->out);
}

/* ---- the loop ---- */

static torc_status train_step(run *r, const torc_batch *b, double *lv,
                              int64_t *correct) {
  torc_tensor *out = torc_module_forward(r->model, b->input);
  torc_tensor *loss = out ? torc_loss_forward(r->loss, out, b->target) : NULL;
  if (loss == NULL)
    return torc_last_status();
  torc_status st;
  if ((st = torc_optimizer_zero_grad(r->opt, 1)) ||
      (st = torc_backward(loss, NULL, 0)))
    return st;
  if (r->s.clip_norm > 0 &&
      (st = torc_module_clip_grad_norm(r->model, r->s.clip_norm, 2, 0, NULL)))
    return st;
  if (r->s.clip_value > 0 &&
      (st = torc_module_clip_grad_value(r->model, r->s.clip_value)))
    return st;
  /* The loss is read before the step so a NaN stops the run before it
   * spoils the weights. */
  if ((st = batch_metrics(out, b->target, loss, lv, correct)))
    return st;
  if (!isfinite(*lv))
    return TORC_OK;
  return torc_optimizer_step(r->opt);
}

torc_status torc_train(const torc_config *cfg, const torc_train_opts *opts,
                       torc_train_result *res) {
  torc_train_opts o = {0};
  if (opts)
    o = *opts;
  torc_train_result tmp;
  if (res == NULL)
    res = &tmp;
  memset(res, 0, sizeof *res);
  res->test_loss = res->test_accuracy = NAN;
  if (cfg == NULL)
    return torc__null_input("torc_train");
  run r;
  torc_status st = run_build(&r, cfg, 1);
  r.out = o.out ? o.out : stdout;
  r.bar = o.progress_bar;
  position pos = {0};
  if (st == TORC_OK && o.resume)
    st = load_ckpt(&r, o.resume, &pos);
  if (st == TORC_OK)
    st = torc_module_check_device(r.model, r.dev);
  r.csv_keep_upto = o.resume ? pos.gstep : -1;
  if (st == TORC_OK)
    st = outputs_ok(&r);
  if (st) {
    run_free(&r);
    return st;
  }
  struct sigaction old_sa, sa;
  if (o.handle_sigint) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
  }
  interrupted = 0;
  double t_start = now_s() - pos.seconds, t_proc = now_s();
  int64_t nb = torc_loader_length(r.train), gstep = pos.gstep;
  double last_finite = NAN;
  int64_t last_finite_step = -1;
  for (int64_t epoch = pos.epoch; epoch < r.s.epochs && st == TORC_OK;
       epoch++) {
    int64_t first = epoch == pos.epoch ? pos.batch : 0;
    if ((st = torc_loader_start(r.train, epoch, first)))
      break;
    torc_module_train(r.model, 1);
    double wl = 0, ep_l = 0, t_win = now_s(), t_ep = t_win, t_draw = t_win;
    int64_t wc = 0, wn = 0, ws = 0, ep_c = 0, ep_n = 0;
    int classify = 1;
    if (epoch == pos.epoch && first > 0) { /* mid-epoch: the saved sums */
      wl = pos.wl, wc = pos.wc, wn = pos.wn, ws = pos.ws;
      ep_l = pos.el, ep_c = pos.ec, ep_n = pos.en;
      classify = (int)pos.classify;
    }
    torc_batch b = {0};
    int got = 0;
    int64_t bi = first;
    while ((got = torc_loader_next(r.train, &b)) == 1) {
      int scope = torc_scope_begin();
      double lv;
      int64_t c;
      warmup_apply(&r, gstep);
      st = train_step(&r, &b, &lv, &c);
      torc_scope_end(scope);
      int64_t bs = b.size;
      torc_batch_clear(&b);
      if (st)
        break;
      if (!isfinite(lv)) {
        char last[96];
        if (last_finite_step >= 0)
          snprintf(last, sizeof last, "%.6g at step %lld", last_finite,
                   (long long)last_finite_step);
        else
          snprintf(last, sizeof last, "none (the first step)");
        st = torc_set_error(
            TORC_ERR_INVALID,
            "step %lld (epoch %lld, batch %lld): the loss is %s; the last "
            "finite loss was %s. The weights were not updated by this step. "
            "Try a lower learning rate ([optimizer] lr), clip gradients "
            "([train] clip_grad_norm = 1.0), or check the data for NaN/Inf "
            "(torc_set_anomaly_mode names the op that made one)",
            (long long)gstep + 1, (long long)epoch + 1, (long long)bi + 1,
            isnan(lv) ? "NaN" : "infinite", last);
        break;
      }
      last_finite = lv;
      last_finite_step = gstep + 1;
      gstep++;
      bi++;
      if (r.sched && r.s.sched_per_step && gstep > r.warm_steps &&
          (st = torc_scheduler_step(r.sched, NAN)))
        break;
      wl += lv * (double)bs, ep_l += lv * (double)bs;
      wn += bs, ep_n += bs, ws++;
      if (c < 0)
        classify = 0;
      else
        wc += c, ep_c += c;
      if (ws == r.s.log_every || bi == nb) {
        double t = now_s(), sps = wn / (t - t_win);
        double acc = classify ? (double)wc / wn : NAN;
        csv_row(&r, epoch + 1, gstep, "train", wl / wn, acc,
                torc_optimizer_get_lr(r.opt, 0), sps, t - t_start);
        double eta = (double)(nb - bi) * (t - t_ep) / (double)(bi - first);
        progress(&r, epoch, bi, nb, wl / wn, acc, sps, eta);
        wl = 0, wc = 0, wn = 0, ws = 0;
        t_win = t_draw = t;
      } else if (r.bar) { /* the bar moves 4 times a second in between */
        double t = now_s();
        if (t - t_draw >= 0.25) {
          double eta = (double)(nb - bi) * (t - t_ep) / (double)(bi - first);
          progress(&r, epoch, bi, nb, wl / wn,
                   classify ? (double)wc / wn : NAN, wn / (t - t_win), eta);
          t_draw = t;
        }
      }
      if (interrupted)
        break;
    }
    if (st == TORC_OK && got < 0)
      st = torc_last_status();
    if (st)
      break;
    if (r.bar)
      fputc('\n', r.out);
    if (interrupted) {
      if (r.s.ck_dir) {
        position now = {.epoch = epoch, .batch = bi, .gstep = gstep,
                        .seconds = now_s() - t_start, .wl = wl, .el = ep_l,
                        .wc = wc, .wn = wn, .ws = ws, .ec = ep_c, .en = ep_n,
                        .classify = classify};
        st = save_ckpt(&r, &now, res->checkpoint, sizeof res->checkpoint);
        if (st == TORC_OK)
          fprintf(r.out, "interrupted at epoch %lld, batch %lld: checkpoint "
                         "%s; go on with --resume\n",
                  (long long)epoch + 1, (long long)bi, res->checkpoint);
      } else {
        fprintf(r.out, "interrupted at epoch %lld, batch %lld (no "
                       "[checkpoint] dir: nothing saved)\n",
                (long long)epoch + 1, (long long)bi);
      }
      if (st == TORC_OK)
        st = torc_set_error(TORC_ERR_INTERRUPTED, "interrupted (SIGINT)");
      break;
    }
    /* End of the epoch: evaluate, schedule, checkpoint, summarise. */
    int last_epoch = epoch + 1 == r.s.epochs;
    eval_out ev = {.loss = NAN, .accuracy = NAN};
    int evaluated = 0;
    if (r.test && ((r.s.eval_every > 0 && (epoch + 1) % r.s.eval_every == 0) ||
                   last_epoch)) {
      double t0 = now_s();
      if ((st = evaluate(&r, epoch, 0, 0, NULL, &ev)))
        break;
      double t = now_s();
      csv_row(&r, epoch + 1, gstep, "test", ev.loss, ev.accuracy,
              torc_optimizer_get_lr(r.opt, 0), ev.samples / (t - t0),
              t - t_start);
      evaluated = 1;
      res->test_loss = ev.loss;
      res->test_accuracy = ev.accuracy;
    }
    if (r.sched && !r.s.sched_per_step && epoch + 1 > r.warm_epochs) {
      double metric = evaluated ? ev.loss : (ep_n ? ep_l / ep_n : NAN);
      if ((st = torc_scheduler_step(r.sched, metric)))
        break;
    }
    char line[256];
    int len = snprintf(line, sizeof line, "epoch %lld/%lld: train loss %.4f",
                       (long long)epoch + 1, (long long)r.s.epochs,
                       ep_n ? ep_l / ep_n : NAN);
    if (classify && ep_n)
      len += snprintf(line + len, sizeof line - (size_t)len, " accuracy %.4f",
                      (double)ep_c / ep_n);
    if (evaluated) {
      len += snprintf(line + len, sizeof line - (size_t)len,
                      " | test loss %.4f", ev.loss);
      if (!isnan(ev.accuracy))
        len += snprintf(line + len, sizeof line - (size_t)len,
                        " accuracy %.4f", ev.accuracy);
    }
    snprintf(line + len, sizeof line - (size_t)len, " | %.1f s",
             now_s() - t_ep);
    fprintf(r.out, "%s\n", line);
    fflush(r.out);
    res->epochs = epoch + 1;
    if (r.s.ck_dir &&
        ((r.s.ck_every > 0 && (epoch + 1) % r.s.ck_every == 0) || last_epoch) &&
        (st = save_ckpt(&r,
                        &(position){.epoch = epoch + 1, .gstep = gstep,
                                    .seconds = now_s() - t_start,
                                    .classify = 1},
                        res->checkpoint, sizeof res->checkpoint)))
      break;
    write_curves(&r);
  }
  if (o.handle_sigint)
    sigaction(SIGINT, &old_sa, NULL);
  res->steps = gstep;
  res->seconds = now_s() - t_proc;
  write_curves(&r);
  run_free(&r);
  return st;
}

torc_status torc_evaluate(const torc_config *cfg, const char *checkpoint,
                          int predict, FILE *out, torc_eval_result *res) {
  if (cfg == NULL || checkpoint == NULL)
    return torc__null_input("torc_evaluate");
  if (res)
    memset(res, 0, sizeof *res);
  run r;
  torc_status st = run_build(&r, cfg, 0);
  if (st == TORC_OK) {
    /* A torc checkpoint (its "model." part) or a plain state dict. */
    torc_state_dict *sd = torc_state_dict_load(checkpoint, r.dev);
    if (sd == NULL) {
      st = torc_last_status();
    } else {
      const char *fmt = torc_state_dict_meta(sd, "torc.format");
      if (fmt && strcmp(fmt, "checkpoint") == 0)
        st = torc_checkpoint_load_module(sd, r.model, NULL, NULL);
      else
        st = torc_module_load_state_dict(r.model, sd, NULL, NULL);
    }
    torc_state_dict_free(sd);
  }
  eval_out ev = {0};
  if (st == TORC_OK)
    st = evaluate(&r, 0, 1, predict, out ? out : stdout, &ev);
  run_free(&r);
  if (st == TORC_OK && res) {
    res->loss = ev.loss;
    res->accuracy = ev.accuracy;
    res->samples = ev.samples;
    res->classes = ev.classes;
    res->confusion = ev.confusion;
  } else {
    torc__free(ev.confusion);
  }
  return st;
}

torc_status torc_bench(const torc_config *cfg, int64_t steps, FILE *out) {
  if (cfg == NULL)
    return torc__null_input("torc_bench");
  if (out == NULL)
    out = stdout;
  if (steps < 1)
    steps = 50;
  run r;
  torc_status st = run_build(&r, cfg, 1);
  if (st == TORC_OK)
    st = torc_module_check_device(r.model, r.dev);
  int64_t done = 0, samples = 0, epoch = 0, warm = 5;
  double t0 = 0;
  torc_module_train(r.model, 1);
  if (st == TORC_OK)
    st = torc_loader_start(r.train, epoch, 0);
  while (st == TORC_OK && done < warm + steps) {
    torc_batch b = {0};
    int got = torc_loader_next(r.train, &b);
    if (got < 0) {
      st = torc_last_status();
      break;
    }
    if (got == 0) { /* a short epoch: go round again */
      st = torc_loader_start(r.train, ++epoch, 0);
      continue;
    }
    if (done == warm) { /* warmed up: caches full, pools started */
      torc_profile_enable(1);
      t0 = now_s();
    }
    int scope = torc_scope_begin();
    double lv;
    int64_t c;
    st = train_step(&r, &b, &lv, &c);
    torc_scope_end(scope);
    if (done >= warm)
      samples += b.size;
    torc_batch_clear(&b);
    done++;
  }
  double secs = now_s() - t0;
  char *rep = st == TORC_OK ? torc_profile_report(15, steps) : NULL;
  torc_profile_enable(0);
  if (st == TORC_OK && rep == NULL)
    st = torc_last_status();
  if (st == TORC_OK) {
    fprintf(out, "%lld training steps (after %lld of warm-up): %.3f ms/step, "
                 "%.0f samples/s\n\n%s",
            (long long)steps, (long long)warm, secs * 1e3 / (double)steps,
            (double)samples / secs, rep);
  }
  free(rep);
  run_free(&r);
  return st;
}
