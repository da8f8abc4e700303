/* train/curves.c — curves.svg, drawn from the metrics CSV after each epoch
 * and at the end of a run: loss and accuracy per epoch, one series per
 * split (train, test, valid, ...), and the learning rate on a small panel
 * of its own; round ticks, axis labels and the legend beside the plots.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

/* ---- what the CSV holds, per epoch ---- */

enum { MAX_EPOCHS = 1024, MAX_SERIES = 6, MAX_COLS = 64 };

/* One split's loss and accuracy per epoch (NaN: none). The train split
 * is the step-weighted mean of the epoch's log windows (w: the steps so
 * far); the others are the epoch's last evaluation. */
typedef struct series {
  char name[32];
  int style; /* its colour and marker: train, test, valid, then the rest */
  double loss[MAX_EPOCHS], acc[MAX_EPOCHS], w[MAX_EPOCHS];
} series;

typedef struct curves {
  int n; /* epochs */
  int ns, others;
  series s[MAX_SERIES];
  /* the lr of each train row: its epoch, global step and value */
  int nlr, lr_cap;
  int64_t *lr_epoch, *lr_step;
  double *lr;
  int64_t last_step[MAX_EPOCHS + 1]; /* the last train step of each epoch */
} curves;

static series *series_of(curves *c, const char *name) {
  for (int i = 0; i < c->ns; i++)
    if (strcmp(c->s[i].name, name) == 0)
      return &c->s[i];
  if (c->ns == MAX_SERIES)
    return NULL;
  series *s = &c->s[c->ns++];
  snprintf(s->name, sizeof s->name, "%s", name);
  if (strcmp(name, "train") == 0)
    s->style = 0;
  else if (strcmp(name, "test") == 0)
    s->style = 1;
  else if (strcmp(name, "valid") == 0 || strcmp(name, "val") == 0 ||
           strcmp(name, "validation") == 0)
    s->style = 2;
  else
    s->style = 3 + c->others++;
  for (int e = 0; e < MAX_EPOCHS; e++)
    s->loss[e] = s->acc[e] = NAN, s->w[e] = 0;
  return s;
}

/* Splits a CSV line in place at the commas (no quoting: torc writes none). */
static int split_fields(char *line, char **f, int max) {
  int n = 0;
  line[strcspn(line, "\r\n")] = '\0';
  while (n < max) {
    f[n++] = line;
    char *comma = strchr(line, ',');
    if (comma == NULL)
      break;
    *comma = '\0';
    line = comma + 1;
  }
  return n;
}

static double field_num(char **f, int nf, int col) {
  if (col < 0 || col >= nf || f[col][0] == '\0')
    return NAN;
  char *end;
  double v = strtod(f[col], &end);
  return end == f[col] ? NAN : v;
}

static void add_lr(curves *c, int64_t epoch, int64_t step, double lr) {
  if (c->nlr == c->lr_cap) {
    int cap = c->lr_cap ? 2 * c->lr_cap : 256;
    int64_t *e = realloc(c->lr_epoch, (size_t)cap * sizeof *e);
    if (e)
      c->lr_epoch = e;
    int64_t *s = realloc(c->lr_step, (size_t)cap * sizeof *s);
    if (s)
      c->lr_step = s;
    double *v = realloc(c->lr, (size_t)cap * sizeof *v);
    if (v)
      c->lr = v;
    if (!e || !s || !v)
      return;
    c->lr_cap = cap;
  }
  c->lr_epoch[c->nlr] = epoch;
  c->lr_step[c->nlr] = step;
  c->lr[c->nlr++] = lr;
}

/* Reads the CSV by its header's column names: epoch, step, split, loss,
 * accuracy, lr; and any SPLIT.loss / SPLIT.accuracy columns, as series
 * SPLIT, so that a file with those gets them drawn too. */
static int read_csv(FILE *f, curves *c) {
  char line[2048];
  char *fl[MAX_COLS];
  if (!fgets(line, sizeof line, f))
    return 0;
  int nh = split_fields(line, fl, MAX_COLS);
  int ce = -1, cs = -1, csp = -1, cl = -1, ca = -1, clr = -1;
  int wide_col[MAX_COLS], wide_acc[MAX_COLS];
  char wide_name[MAX_COLS][32];
  int nwide = 0;
  for (int i = 0; i < nh; i++) {
    const char *h = fl[i], *dot = strchr(h, '.');
    if (strcmp(h, "epoch") == 0)
      ce = i;
    else if (strcmp(h, "step") == 0)
      cs = i;
    else if (strcmp(h, "split") == 0)
      csp = i;
    else if (strcmp(h, "loss") == 0)
      cl = i;
    else if (strcmp(h, "accuracy") == 0)
      ca = i;
    else if (strcmp(h, "lr") == 0)
      clr = i;
    else if (dot && dot > h && dot - h < 32 &&
             (strcmp(dot, ".loss") == 0 || strcmp(dot, ".accuracy") == 0)) {
      wide_col[nwide] = i;
      wide_acc[nwide] = strcmp(dot, ".accuracy") == 0;
      snprintf(wide_name[nwide], sizeof wide_name[nwide], "%.*s",
               (int)(dot - h), h);
      nwide++;
    }
  }
  if (ce < 0 || cs < 0 || csp < 0 || cl < 0)
    return 0;
  series_of(c, "train"); /* train first: it keeps the first colour */
  int64_t prev_step = 0;
  while (fgets(line, sizeof line, f)) {
    int nf = split_fields(line, fl, MAX_COLS);
    double ev = field_num(fl, nf, ce), sv = field_num(fl, nf, cs);
    if (!(ev >= 1 && ev <= MAX_EPOCHS) || isnan(sv) || csp >= nf)
      continue;
    int i = (int)ev - 1;
    int64_t step = (int64_t)sv;
    double l = field_num(fl, nf, cl), a = field_num(fl, nf, ca);
    if (i + 1 > c->n)
      c->n = i + 1;
    if (strcmp(fl[csp], "train") == 0) {
      series *s = &c->s[0];
      double w = (double)(step - prev_step);
      prev_step = step;
      if (step > c->last_step[i + 1])
        c->last_step[i + 1] = step;
      double lr = field_num(fl, nf, clr);
      if (isfinite(lr))
        add_lr(c, i + 1, step, lr);
      if (w <= 0 || isnan(l))
        continue;
      s->loss[i] = ((isnan(s->loss[i]) ? 0 : s->loss[i] * s->w[i]) + l * w) /
                   (s->w[i] + w);
      s->acc[i] = isnan(a) ? NAN
                           : ((isnan(s->acc[i]) ? 0 : s->acc[i] * s->w[i]) +
                              a * w) / (s->w[i] + w);
      s->w[i] += w;
    } else if (fl[csp][0]) {
      series *s = series_of(c, fl[csp]);
      if (s && !isnan(l))
        s->loss[i] = l, s->acc[i] = a;
    }
    for (int k = 0; k < nwide; k++) {
      double v = field_num(fl, nf, wide_col[k]);
      series *s = isnan(v) ? NULL : series_of(c, wide_name[k]);
      if (s)
        *(wide_acc[k] ? &s->acc[i] : &s->loss[i]) = v;
    }
  }
  /* a series without a value (train in a file of evaluations) is left
   * out; the others keep their styles */
  int kept = 0;
  for (int k = 0; k < c->ns; k++) {
    int any = 0;
    for (int e = 0; e < c->n; e++)
      any |= isfinite(c->s[k].loss[e]) || isfinite(c->s[k].acc[e]);
    if (any && kept != k)
      c->s[kept] = c->s[k];
    kept += any;
  }
  c->ns = kept;
  /* the legend's order: train, test, valid, then the rest as they came */
  for (int k = 1; k < c->ns; k++)
    for (int j = k; j > 0 && c->s[j].style < c->s[j - 1].style; j--) {
      series t = c->s[j];
      c->s[j] = c->s[j - 1];
      c->s[j - 1] = t;
    }
  return 1;
}

/* ---- round ticks: "nice numbers" (Heckbert, Graphics Gems, 1990) ---- */

/* A number 1, 2 or 5 times a power of ten near x: rounded, or the
 * smallest such >= x. */
static double nice_num(double x, int round) {
  double p = pow(10, floor(log10(x))), f = x / p, nf;
  if (round)
    nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  else
    nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  return nf * p;
}

typedef struct axis {
  double lo, hi, step; /* the axis runs lo..hi; ticks every step */
  int decimals;        /* of the tick labels */
} axis;

/* Loose labelling: the axis extends to the ticks around [lo, hi], about
 * `ticks` of them. A flat series gets a range around its value. */
static axis nice_axis(double lo, double hi, int ticks) {
  if (!isfinite(lo) || !isfinite(hi) || lo > hi)
    lo = 0, hi = 1; /* nothing to draw: an empty plot 0..1 */
  if (!(hi - lo > 1e-12 * fmax(fabs(lo), fabs(hi)))) {
    double m = fabs(lo) > 0 ? fabs(lo) / 2 : 0.5;
    lo -= m, hi += m;
  }
  axis a;
  double range = nice_num(hi - lo, 0);
  a.step = nice_num(range / (ticks - 1), 1);
  a.lo = floor(lo / a.step) * a.step;
  a.hi = ceil(hi / a.step) * a.step;
  int d = -(int)floor(log10(a.step));
  a.decimals = d > 0 ? d : 0;
  return a;
}

/* ---- drawing ---- */

/* The figure: plots PX..PX+PW wide; the legend to their right. */
enum { PX = 72, PW = 470, LEGEND_X = PX + PW + 24, LEGEND_W = 116,
       FIG_W = LEGEND_X + LEGEND_W + 12, TOP = 16, BIG_H = 190, LR_H = 90,
       BELOW = 58 /* under a plot: tick labels and the "epoch" label */ };

enum { N_COLOURS = 6 };
static const char *const colours[N_COLOURS] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#8c564b", "#e377c2"};
static const char lr_colour[] = "#9467bd";

static const char font[] = "font-family='DejaVu Sans,Arial,sans-serif'";

/* The series' name, escaped for XML text. */
static void put_escaped(FILE *o, const char *s) {
  for (; *s; s++) {
    if (*s == '<')
      fputs("&lt;", o);
    else if (*s == '>')
      fputs("&gt;", o);
    else if (*s == '&')
      fputs("&amp;", o);
    else if ((unsigned char)*s >= 0x20)
      fputc(*s, o);
  }
}

/* A marker of style k at (x, y): train a circle, then a square, a
 * diamond, a triangle — telling the series apart in grey too. */
static void marker(FILE *o, int k, double x, double y) {
  const char *c = colours[k % N_COLOURS];
  switch (k % 4) {
  case 0:
    fprintf(o, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s'/>\n", x, y, c);
    break;
  case 1:
    fprintf(o, "<rect x='%.1f' y='%.1f' width='7' height='7' fill='%s'/>\n",
            x - 3.5, y - 3.5, c);
    break;
  case 2:
    fprintf(o, "<path d='M%.1f %.1fl4.5 4.5l-4.5 4.5l-4.5 -4.5z' "
               "fill='%s'/>\n", x, y - 4.5, c);
    break;
  default:
    fprintf(o, "<path d='M%.1f %.1fl4.5 8l-9 0z' fill='%s'/>\n", x, y - 4.5,
            c);
  }
}

typedef struct frame {
  int y, h;        /* the plot's top and height */
  axis xa, ya;
} frame;

static double fx(const frame *f, double x) {
  /* 8 px inside the frame at each end, so that markers at the first and
   * last epoch are whole. */
  return PX + 8 + (PW - 16) * (x - f->xa.lo) / (f->xa.hi - f->xa.lo);
}

static double fy(const frame *f, double y) {
  return f->y + f->h - f->h * (y - f->ya.lo) / (f->ya.hi - f->ya.lo);
}

/* A plot's frame, grid, ticks and axis labels. The x axis is epochs
 * 0..n, with whole-epoch ticks. */
static void draw_frame(FILE *o, const frame *f, int n, const char *ylabel) {
  fprintf(o, "<rect class='plot' x='%d' y='%d' width='%d' height='%d' "
             "fill='none' stroke='#888'/>\n", PX, f->y, PW, f->h);
  int ny = (int)floor((f->ya.hi - f->ya.lo) / f->ya.step + 0.5);
  for (int k = 0; k <= ny; k++) {
    double v = f->ya.lo + k * f->ya.step, y = fy(f, v);
    if (k > 0 && k < ny)
      fprintf(o, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#e6e6e6'/>"
                 "\n", PX + 1, y, PX + PW - 1, y);
    fprintf(o, "<text class='ytick' x='%d' y='%.1f' font-size='11' "
               "text-anchor='end' %s>%.*f</text>\n",
            PX - 5, y + 4, font, f->ya.decimals, fabs(v) < f->ya.step / 2 ? 0 : v);
  }
  int nx = (int)floor(n / f->xa.step + 1e-9);
  for (int k = 0; k <= nx; k++) {
    double v = k * f->xa.step, x = fx(f, v);
    fprintf(o, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#888'/>\n",
            x, f->y + f->h, x, f->y + f->h + 4);
    fprintf(o, "<text class='xtick' x='%.1f' y='%d' font-size='11' "
               "text-anchor='middle' %s>%.*f</text>\n",
            x, f->y + f->h + 17, font, f->xa.decimals, v);
  }
  fprintf(o, "<text class='xlabel' x='%d' y='%d' font-size='12' "
             "text-anchor='middle' %s>epoch</text>\n",
          PX + PW / 2, f->y + f->h + 34, font);
  fprintf(o, "<text class='ylabel' x='%d' y='%d' font-size='12' "
             "text-anchor='middle' transform='rotate(-90 %d %d)' %s>%s</text>"
             "\n", 18, f->y + f->h / 2, 18, f->y + f->h / 2, font, ylabel);
}

/* A panel of loss (acc = 0) or accuracy per epoch, a series each. */
static void draw_metric(FILE *o, const curves *c, int y, int acc,
                        const axis *xa) {
  double lo = INFINITY, hi = -INFINITY;
  for (int k = 0; k < c->ns; k++)
    for (int e = 0; e < c->n; e++) {
      double v = acc ? c->s[k].acc[e] : c->s[k].loss[e];
      if (isfinite(v))
        lo = fmin(lo, v), hi = fmax(hi, v);
    }
  frame f = {.y = y, .h = BIG_H, .xa = *xa};
  f.ya = nice_axis(lo, hi, 5);
  draw_frame(o, &f, c->n, acc ? "accuracy" : "loss");
  for (int k = 0; k < c->ns; k++) {
    const double *v = acc ? c->s[k].acc : c->s[k].loss;
    fprintf(o, "<polyline fill='none' stroke='%s' stroke-width='2' "
               "stroke-linejoin='round' points='",
            colours[c->s[k].style % N_COLOURS]);
    for (int e = 0; e < c->n; e++)
      if (isfinite(v[e]))
        fprintf(o, "%.1f,%.1f ", fx(&f, e + 1), fy(&f, v[e]));
    fprintf(o, "'/>\n");
    for (int e = 0; e < c->n; e++)
      if (isfinite(v[e]))
        marker(o, c->s[k].style, fx(&f, e + 1), fy(&f, v[e]));
  }
}

/* The lr of each logged train step, at its place in the epoch (epoch e's
 * steps run from e - 1 to e). */
static void draw_lr(FILE *o, const curves *c, int y, const axis *xa) {
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < c->nlr; i++)
    lo = fmin(lo, c->lr[i]), hi = fmax(hi, c->lr[i]);
  frame f = {.y = y, .h = LR_H, .xa = *xa};
  f.ya = nice_axis(lo, hi, 3);
  draw_frame(o, &f, c->n, "learning rate");
  fprintf(o, "<polyline fill='none' stroke='%s' stroke-width='1.5' points='",
          lr_colour);
  double *px = malloc((size_t)c->nlr * sizeof *px);
  for (int i = 0; px && i < c->nlr; i++) {
    int64_t e = c->lr_epoch[i];
    double from = (double)c->last_step[e - 1], to = (double)c->last_step[e];
    px[i] = fx(&f, (double)(e - 1) +
                       (to > from ? ((double)c->lr_step[i] - from) / (to - from)
                                  : 1.0));
    fprintf(o, "%.1f,%.1f ", px[i], fy(&f, c->lr[i]));
  }
  fprintf(o, "'/>\n");
  /* a dot per row while they stay apart, so that one row shows */
  for (int i = 0; px && c->nlr <= 60 && i < c->nlr; i++)
    fprintf(o, "<circle cx='%.1f' cy='%.1f' r='2.5' fill='%s'/>\n", px[i],
            fy(&f, c->lr[i]), lr_colour);
  free(px);
}

/* The legend, beside the top plot: a swatch (line and marker) and the
 * split's name per series. */
static void draw_legend(FILE *o, const curves *c, int y) {
  fprintf(o, "<g class='legend'>\n<rect class='legend' x='%d' y='%d' "
             "width='%d' height='%d' fill='white' stroke='#bbb'/>\n",
          LEGEND_X, y, LEGEND_W, 10 + 20 * c->ns);
  for (int k = 0; k < c->ns; k++) {
    double ly = y + 15 + 20 * k;
    fprintf(o, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='%s' "
               "stroke-width='2'/>\n", LEGEND_X + 8, ly, LEGEND_X + 32, ly,
            colours[c->s[k].style % N_COLOURS]);
    marker(o, c->s[k].style, LEGEND_X + 20, ly);
    fprintf(o, "<text x='%d' y='%.1f' font-size='12' %s>", LEGEND_X + 40,
            ly + 4, font);
    put_escaped(o, c->s[k].name);
    fprintf(o, "</text>\n");
  }
  fprintf(o, "</g>\n");
}

static void draw(FILE *o, const curves *c) {
  int has_acc = 0;
  for (int k = 0; k < c->ns; k++)
    for (int e = 0; e < c->n; e++)
      has_acc |= isfinite(c->s[k].acc[e]);
  int h = TOP + BIG_H + BELOW + (has_acc ? BIG_H + BELOW : 0) +
          (c->nlr ? LR_H + BELOW : 0);
  fprintf(o, "<?xml version='1.0' encoding='UTF-8'?>\n"
             "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
             "viewBox='0 0 %d %d'>\n<title>training curves: loss%s per "
             "epoch</title>\n<rect width='%d' height='%d' fill='white'/>\n",
          FIG_W, h, FIG_W, h, has_acc ? " and accuracy" : "", FIG_W, h);
  /* x: epochs 0..n, whole-epoch ticks */
  axis xa = nice_axis(0, c->n > 0 ? c->n : 1, 6);
  if (xa.step < 1)
    xa.step = 1;
  xa.lo = 0, xa.hi = c->n > 0 ? c->n : 1, xa.decimals = 0;
  int y = TOP;
  draw_metric(o, c, y, 0, &xa);
  draw_legend(o, c, y);
  y += BIG_H + BELOW;
  if (has_acc) {
    draw_metric(o, c, y, 1, &xa);
    y += BIG_H + BELOW;
  }
  if (c->nlr)
    draw_lr(o, c, y, &xa);
  fprintf(o, "</svg>\n");
}

/* ---- the file ---- */

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

void torc_train__write_curves(const char *csv_path, time_t started) {
  FILE *f = fopen(csv_path, "r");
  if (f == NULL)
    return;
  curves *c = calloc(1, sizeof *c);
  int ok = c && read_csv(f, c);
  fclose(f);
  if (!ok || c->n == 0) {
    if (c)
      free(c->lr_epoch), free(c->lr_step), free(c->lr);
    free(c);
    return;
  }
  char path[1100];
  snprintf(path, sizeof path, "%s", csv_path);
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
  remove_stale_curves(dir, started);
  char tmp[1200];
  snprintf(tmp, sizeof tmp, "%s.curves.svg.tmp.%ld.0", dir, (long)getpid());
  FILE *o = fopen(tmp, "w");
  if (o != NULL) {
    draw(o, c);
    if (fclose(o) == 0)
      rename(tmp, path);
    else
      remove(tmp);
  }
  free(c->lr_epoch), free(c->lr_step), free(c->lr);
  free(c);
}
