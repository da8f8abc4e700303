/* tests/test_curves.c — curves.svg as a reader sees it: short trainings (1
 * and 3 epochs) and hand-written metrics files with a validation split are
 * drawn, rendered to PNG by rsvg-convert and read back by libpng: each
 * split's curve shows in each plot (a single epoch too), the legend box
 * covers no curve, the lr has its own plot, the axes are labelled and the
 * tick labels are round numbers (1, 2 or 5 times a power of ten apart);
 * a file of evaluations only draws those.
 * Without rsvg-convert (Debian's librsvg2-bin) the test is skipped.
 */
#include <dirent.h>
#include <math.h>
#include <png.h>
#include <sys/stat.h>

#include "testutil.h"
#include "train_internal.h"

static char tmpdir[512];

/* The colours curves.svg draws its series in: train, test, valid; and
 * the learning rate. */
static const unsigned char TRAIN[3] = {0x1f, 0x77, 0xb4};
static const unsigned char TEST[3] = {0xd6, 0x27, 0x28};
static const unsigned char VALID[3] = {0x2c, 0xa0, 0x2c};
static const unsigned char LR[3] = {0x94, 0x67, 0xbd};

/* The legend's swatches (a line and a marker) are in its first 36 px;
 * the names to their right are black. */
enum { SWATCH_W = 36 };

/* ---- the SVG's elements, as far as the checks need them ---- */

typedef struct box {
  double x, y, w, h;
} box;

typedef struct text {
  char s[64], anchor[16], cls[16];
  double x, y;
} text;

typedef struct svg {
  char *src;
  text t[512];
  int nt;
  box plot[8]; /* the frames (rect fill='none'), top to bottom */
  int nplot;
  box legend;
  int has_legend;
} svg;

/* The value of attribute `name` in the tag tag..end, into buf ("" when
 * absent). */
static void attr(const char *tag, const char *end, const char *name,
                 char *buf, size_t size) {
  buf[0] = '\0';
  size_t n = strlen(name);
  for (const char *p = tag; p && p < end; p++) {
    if ((p[-1] == ' ' || p[-1] == '\n') && strncmp(p, name, n) == 0 &&
        p[n] == '=' && (p[n + 1] == '\'' || p[n + 1] == '"')) {
      const char *v = p + n + 2, *q = strchr(v, p[n + 1]);
      if (q && q < end)
        snprintf(buf, size, "%.*s", (int)(q - v), v);
      return;
    }
  }
}

static double attr_num(const char *tag, const char *end, const char *name) {
  char b[64];
  attr(tag, end, name, b, sizeof b);
  return b[0] ? strtod(b, NULL) : NAN;
}

static void parse_svg(svg *g, const char *path) {
  memset(g, 0, sizeof *g);
  size_t n;
  g->src = (char *)test_read_file(path, &n);
  g->src[n] = '\0';
  for (const char *p = strstr(g->src, "<text"); p; p = strstr(p + 1, "<text")) {
    const char *end = strchr(p, '>'), *close = end ? strstr(end, "</text>") : 0;
    assert_non_null(close);
    assert_true(g->nt < 512);
    text *t = &g->t[g->nt++];
    attr(p, end, "text-anchor", t->anchor, sizeof t->anchor);
    attr(p, end, "class", t->cls, sizeof t->cls);
    t->x = attr_num(p, end, "x");
    t->y = attr_num(p, end, "y");
    snprintf(t->s, sizeof t->s, "%.*s", (int)(close - end - 1), end + 1);
  }
  for (const char *p = strstr(g->src, "<rect"); p; p = strstr(p + 1, "<rect")) {
    const char *end = strchr(p, '>');
    char fill[32], cls[32];
    attr(p, end, "fill", fill, sizeof fill);
    attr(p, end, "class", cls, sizeof cls);
    box b = {attr_num(p, end, "x"), attr_num(p, end, "y"),
             attr_num(p, end, "width"), attr_num(p, end, "height")};
    if (strcmp(cls, "legend") == 0)
      g->legend = b, g->has_legend = 1;
    else if (strcmp(fill, "none") == 0 && g->nplot < 8)
      g->plot[g->nplot++] = b;
  }
}

static int has_text(const svg *g, const char *s) {
  for (int i = 0; i < g->nt; i++)
    if (strcmp(g->t[i].s, s) == 0)
      return 1;
  return 0;
}

/* ---- rendering and pixels ---- */

typedef struct image {
  int w, h;
  unsigned char *rgb;
} image;

/* Renders svg_path (with its text elements left out when `no_text`:
 * then only the lines and markers have colour) into img. */
static void render(const svg *g, const char *name, int no_text, image *img) {
  char in[1024], png[1024], cmd[2300];
  snprintf(in, sizeof in, "%s/%s%s.svg", tmpdir, name, no_text ? "-lines" : "");
  snprintf(png, sizeof png, "%s/%s%s.png", tmpdir, name, no_text ? "-lines" : "");
  FILE *f = fopen(in, "w");
  assert_non_null(f);
  for (const char *p = g->src; *p;) {
    const char *t = no_text ? strstr(p, "<text") : NULL;
    if (t == NULL) {
      fputs(p, f);
      break;
    }
    fwrite(p, 1, (size_t)(t - p), f);
    p = strstr(t, "</text>") + 7;
  }
  assert_int_equal(fclose(f), 0);
  snprintf(cmd, sizeof cmd, "rsvg-convert -o '%s' '%s'", png, in);
  if (system(cmd) != 0) {
    print_error("rsvg-convert could not render %s (not valid SVG?)\n", in);
    fail();
  }
  png_image pi;
  memset(&pi, 0, sizeof pi);
  pi.version = PNG_IMAGE_VERSION;
  assert_true(png_image_begin_read_from_file(&pi, png));
  pi.format = PNG_FORMAT_RGB;
  img->w = (int)pi.width, img->h = (int)pi.height;
  img->rgb = malloc(PNG_IMAGE_SIZE(pi));
  assert_non_null(img->rgb);
  assert_true(png_image_finish_read(&pi, NULL, img->rgb, 0, NULL));
}

/* Pixels of colour c (within anti-aliasing's reach) inside b. */
static int count(const image *img, box b, const unsigned char *c) {
  int n = 0;
  for (int y = (int)floor(b.y); y < (int)ceil(b.y + b.h); y++)
    for (int x = (int)floor(b.x); x < (int)ceil(b.x + b.w); x++) {
      if (x < 0 || y < 0 || x >= img->w || y >= img->h)
        continue;
      const unsigned char *p = img->rgb + 3 * ((size_t)y * img->w + x);
      n += abs(p[0] - c[0]) + abs(p[1] - c[1]) + abs(p[2] - c[2]) < 48;
    }
  return n;
}

/* ---- the checks; each failure is printed, then the test fails ---- */

static int failures;

static void check(int ok, const char *what, const char *name) {
  if (!ok) {
    print_error("%s: %s\n", name, what);
    failures++;
  }
}

/* A group of tick labels is round: equally spaced by 1, 2 or 5 times a
 * power of ten, each label a multiple of that step. */
static int round_ticks(double *v, int n, char *why, size_t size) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  double step = v[1] - v[0];
  if (!(step > 0)) {
    snprintf(why, size, "two ticks read %g", v[0]);
    return 0;
  }
  double m = step / pow(10, floor(log10(step) + 1e-9));
  if (fabs(m - 1) > 1e-6 && fabs(m - 2) > 1e-6 && fabs(m - 5) > 1e-6) {
    snprintf(why, size, "ticks %g, %g are %g apart, not 1, 2 or 5 times a "
                        "power of ten", v[0], v[1], step);
    return 0;
  }
  for (int i = 0; i < n; i++) {
    double q = v[i] / step;
    if (fabs(q - floor(q + 0.5)) > 1e-6 ||
        (i > 0 && fabs(v[i] - v[i - 1] - step) > 1e-6 * step)) {
      snprintf(why, size, "tick %g is not a multiple of the step %g", v[i],
               step);
      return 0;
    }
  }
  return 1;
}

/* The plot whose rows y is in (-1: none). */
static int plot_at(const svg *g, double y) {
  for (int p = 0; p < g->nplot; p++)
    if (y >= g->plot[p].y - 8 && y <= g->plot[p].y + g->plot[p].h + 8)
      return p;
  return -1;
}

/* Numbers in text elements are tick labels: a y axis's share their x,
 * are right-aligned and beside one plot; an x axis's share their y. */
static void check_ticks(const svg *g, const char *name) {
  int seen[512] = {0}, groups = 0;
  for (int i = 0; i < g->nt; i++) {
    char *end;
    strtod(g->t[i].s, &end);
    if (seen[i] || end == g->t[i].s || *end)
      continue;
    int yaxis = strcmp(g->t[i].anchor, "end") == 0;
    double v[64];
    int n = 0;
    for (int j = i; j < g->nt && n < 64; j++) {
      strtod(g->t[j].s, &end);
      if (seen[j] || end == g->t[j].s || *end ||
          strcmp(g->t[j].anchor, g->t[i].anchor) != 0 ||
          (yaxis ? g->t[j].x != g->t[i].x ||
                       plot_at(g, g->t[j].y) != plot_at(g, g->t[i].y)
                 : g->t[j].y != g->t[i].y))
        continue;
      seen[j] = 1;
      v[n++] = strtod(g->t[j].s, NULL);
    }
    if (n < 2)
      continue;
    groups++;
    char why[256] = "", msg[400];
    int ok = round_ticks(v, n, why, sizeof why);
    snprintf(msg, sizeof msg, "%s axis tick labels are not round: %s",
             yaxis ? "a y" : "an x", why);
    check(ok, msg, name);
  }
  check(groups >= 2, "fewer than two axes have tick labels", name);
}

static int overlap(box a, box b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h &&
         b.y < a.y + a.h;
}

/* The checks of one curves.svg: `series` the colours that each big plot
 * shows (n of them), `plots` the big plots (loss, accuracy), `lr` whether
 * a learning-rate plot follows. */
static void check_svg(const char *path, const char *name,
                      const unsigned char *const *series, int n, int plots,
                      int lr) {
  static svg g;
  parse_svg(&g, path);
  check(strstr(g.src, "href") == NULL && strstr(g.src, "url(") == NULL,
        "the SVG refers to another file", name);
  image full, lines;
  render(&g, name, 0, &full);
  render(&g, name, 1, &lines);

  check(has_text(&g, "epoch"), "no x axis label \"epoch\"", name);
  check(has_text(&g, "loss"), "no y axis label \"loss\"", name);
  if (plots > 1)
    check(has_text(&g, "accuracy"), "no y axis label \"accuracy\"", name);
  if (lr)
    check(has_text(&g, "learning rate"), "no y axis label \"learning rate\"",
          name);
  check_ticks(&g, name);

  /* each split's curve in each plot (text left out: a legend's coloured
   * name inside a plot is no curve) */
  check(g.nplot >= plots + lr, "fewer plots than loss, accuracy and lr", name);
  for (int p = 0; p < plots && p < g.nplot; p++)
    for (int s = 0; s < n; s++) {
      char msg[128];
      snprintf(msg, sizeof msg, "plot %d (%s) shows no curve of series %d", p + 1,
               p ? "accuracy" : "loss", s + 1);
      check(count(&lines, g.plot[p], series[s]) >= 12, msg, name);
    }
  if (lr && g.nplot > plots)
    check(count(&lines, g.plot[plots], LR) >= 12,
          "the learning-rate plot shows no curve", name);

  /* the legend: a box beside the plots, with no curve in it but its own
   * swatches; without a box, the series' names are the legend */
  box zone[16];
  int nz = 0;
  if (g.has_legend) {
    for (int p = 0; p < g.nplot; p++)
      check(!overlap(g.legend, g.plot[p]), "the legend box is over a plot",
            name);
    zone[nz++] = (box){g.legend.x + SWATCH_W, g.legend.y,
                       g.legend.w - SWATCH_W, g.legend.h};
  } else {
    check(0, "no legend box (rect class='legend')", name);
    for (int i = 0; i < g.nt && nz < 16; i++)
      if (strcmp(g.t[i].s, "train") == 0 || strcmp(g.t[i].s, "test") == 0)
        zone[nz++] = (box){g.t[i].x, g.t[i].y - 10,
                           7.0 * (double)strlen(g.t[i].s), 13};
  }
  const unsigned char *all[4] = {TRAIN, TEST, VALID, LR};
  for (int z = 0; z < nz; z++)
    for (int c = 0; c < 4; c++)
      check(count(&lines, zone[z], all[c]) == 0,
            "a curve runs under the legend", name);
  /* the full picture is drawn: the text renders too */
  check(full.w == lines.w && full.h == lines.h, "renders differ in size", name);
  free(full.rgb);
  free(lines.rgb);
  free(g.src);
}

/* ---- runs ---- */

static void train(const char *name, int epochs) {
  char ini[4096];
  snprintf(ini, sizeof ini,
           "[torc]\nseed = 5\ndeterministic = yes\n"
           "[plugin.ref]\nmodule = ref\n[plugin.data]\nmodule = data\n"
           "[plugin.losses]\nmodule = losses\n[plugin.optim]\nmodule = optim\n"
           "[model]\ninput = 6\n"
           "[layer]\ntype = linear\nout_features = 8\n"
           "[layer]\ntype = relu\n"
           "[layer]\ntype = linear\nout_features = 3\n"
           "[data.train]\nsource = synthetic\nshape = 6\nclasses = 3\n"
           "samples = 48\nbatch_size = 8\nshuffle = yes\n"
           "[data.test]\nsource = synthetic\nshape = 6\nclasses = 3\n"
           "samples = 24\nbatch_size = 12\n"
           "[loss]\ntype = cross_entropy\n"
           "[optimizer]\ntype = sgd\nlr = 0.1\nmomentum = 0.9\n"
           "[scheduler]\ntype = step\nstep_size = 1\ngamma = 0.5\n"
           "[train]\nepochs = %d\nlog_every = 2\nmetrics = %s/%s/metrics.csv\n"
           "dir = %s/%s\n",
           epochs, tmpdir, name, tmpdir, name);
  torc_config *cfg = torc_config_parse(ini, "curves.ini");
  assert_torc(cfg);
  assert_ok(torc_config_apply(cfg));
  FILE *out = tmpfile();
  assert_non_null(out);
  torc_train_opts o = {.out = out};
  assert_ok(torc_train(cfg, &o, NULL));
  fclose(out);
  torc_config_free(cfg);
}

static void test_one_epoch(void **state) {
  (void)state;
  failures = 0;
  train("one", 1);
  char path[1024];
  snprintf(path, sizeof path, "%s/one/curves.svg", tmpdir);
  const unsigned char *s[2] = {TRAIN, TEST};
  check_svg(path, "1 epoch", s, 2, 2, 1);
  assert_int_equal(failures, 0);
}

static void test_three_epochs(void **state) {
  (void)state;
  failures = 0;
  train("three", 3);
  char path[1024];
  snprintf(path, sizeof path, "%s/three/curves.svg", tmpdir);
  const unsigned char *s[2] = {TRAIN, TEST};
  check_svg(path, "3 epochs", s, 2, 2, 1);
  assert_int_equal(failures, 0);
}

/* Draws curves.svg from the CSV text csv, written to DIR/metrics.csv. */
static void draw(const char *dir, const char *csv, char *svg_path,
                 size_t size) {
  char d[1024], path[1100];
  snprintf(d, sizeof d, "%s/%s", tmpdir, dir);
  assert_int_equal(mkdir(d, 0755), 0);
  snprintf(path, sizeof path, "%s/metrics.csv", d);
  test_write_file(path, csv, strlen(csv));
  torc_train__write_curves(path, 0);
  snprintf(svg_path, size, "%s/curves.svg", d);
}

/* A validation split's rows (split "valid") are a series of their own. */
static void test_valid_rows(void **state) {
  (void)state;
  failures = 0;
  char path[1100];
  draw("rows",
       "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds\n"
       "1,5,train,1.20,0.40,0.01,100.0,0.1\n"
       "1,10,train,0.90,0.55,0.01,100.0,0.2\n"
       "1,10,valid,0.95,0.50,0.01,100.0,0.3\n"
       "1,10,test,1.00,0.48,0.01,100.0,0.3\n"
       "2,15,train,0.70,0.70,0.001,100.0,0.4\n"
       "2,20,train,0.60,0.75,0.001,100.0,0.5\n"
       "2,20,valid,0.66,0.71,0.001,100.0,0.6\n"
       "2,20,test,0.72,0.69,0.001,100.0,0.6\n",
       path, sizeof path);
  const unsigned char *s[3] = {TRAIN, TEST, VALID};
  check_svg(path, "valid rows", s, 3, 2, 1);
  static svg g;
  parse_svg(&g, path);
  check(has_text(&g, "valid"), "no legend entry \"valid\"", "valid rows");
  free(g.src);
  assert_int_equal(failures, 0);
}

/* valid.loss / valid.accuracy columns are the series "valid"; a file
 * without accuracy (regression) has no accuracy plot. */
static void test_valid_columns(void **state) {
  (void)state;
  failures = 0;
  char path[1100];
  draw("columns",
       "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds,"
       "valid.loss\n"
       "1,4,train,3.0,,0.1,10.0,0.1,\n"
       "1,4,test,2.5,,0.1,10.0,0.2,2.7\n"
       "2,8,train,2.0,,0.1,10.0,0.3,\n"
       "2,8,test,1.8,,0.1,10.0,0.4,1.9\n",
       path, sizeof path);
  const unsigned char *s[3] = {TRAIN, TEST, VALID};
  check_svg(path, "valid columns", s, 3, 1, 1);
  static svg g;
  parse_svg(&g, path);
  check(!has_text(&g, "accuracy"), "an accuracy plot without accuracy",
        "valid columns");
  free(g.src);
  assert_int_equal(failures, 0);
}

/* A file of evaluations only draws them, with no empty train entry; a
 * file without rows draws nothing. */
static void test_eval_rows_only(void **state) {
  (void)state;
  failures = 0;
  char path[1100];
  draw("evals",
       "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds\n"
       "1,10,test,1.00,0.48,,,\n"
       "2,20,test,0.72,0.69,,,\n",
       path, sizeof path);
  const unsigned char *s[1] = {TEST};
  check_svg(path, "evaluations", s, 1, 2, 0);
  static svg g;
  parse_svg(&g, path);
  check(!has_text(&g, "train"), "a legend entry for train without rows",
        "evaluations");
  check(!has_text(&g, "learning rate"), "an lr plot without an lr",
        "evaluations");
  free(g.src);
  draw("empty", "epoch,step,split,loss,accuracy,lr,samples_per_sec,seconds\n",
       path, sizeof path);
  check(access(path, F_OK) != 0, "a curves.svg without rows", "empty");
  assert_int_equal(failures, 0);
}

static int rm_tree(const char *path) {
  DIR *d = opendir(path);
  if (d == NULL)
    return remove(path);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    rm_tree(p);
  }
  closedir(d);
  return rmdir(path);
}

static int setup(void **state) {
  (void)state;
  return test_make_tmpdir(tmpdir, sizeof tmpdir, "torc-curves");
}

static int teardown(void **state) {
  rm_tree(tmpdir);
  return test_teardown_all(state);
}

int main(void) {
  if (system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
    printf("skipped: rsvg-convert is not installed (Debian: apt-get install "
           "librsvg2-bin; scripts/setup.sh installs it)\n");
    return TEST_SKIP_STATUS;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_epoch),
      cmocka_unit_test(test_three_epochs),
      cmocka_unit_test(test_valid_rows),
      cmocka_unit_test(test_valid_columns),
      cmocka_unit_test(test_eval_rows_only),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
