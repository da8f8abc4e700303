/* train/curves.c — curves.svg, drawn from the metrics CSV after each epoch
 * and at the end of a run: loss and accuracy per epoch, train and test.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

typedef torc_train__report report;

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
void torc_train__write_curves(torc_train__report *r) {
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
