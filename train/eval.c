/* train/eval.c — evaluation on [data.test]: the pass the trainer runs
 * after its epochs, and torc_evaluate (torc eval): the checkpoint (the
 * run's newest when none is named), the class names of [data.*]
 * class_names, the predictions it prints, and torc_eval_report's
 * confusion matrix and per-class precision, recall and F1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "torc/graph.h"
#include "train_internal.h"

typedef torc_train__run run;
typedef torc_train__eval_out eval_out;

/* The class names a pass labels its classes with (n 0: none), and the
 * section that gave them, for messages. */
typedef struct class_names {
  char **v;
  int64_t n;
  int section;
} class_names;

/* A name of class c: its name, else its index (buf). */
static const char *class_label(const class_names *cn, int64_t c, char *buf,
                               size_t size) {
  if (cn && c >= 0 && c < cn->n)
    return cn->v[c];
  snprintf(buf, size, "%lld", (long long)c);
  return buf;
}

/* The widest label of k classes. */
static int label_width(const class_names *cn, int64_t k) {
  int w = 1;
  for (int64_t c = 0; c < k; c++) {
    char buf[32];
    int l = (int)strlen(class_label(cn, c, buf, sizeof buf));
    if (l > w)
      w = l;
  }
  return w;
}

/* Prints sample `index` of a classification: its true class, the class
 * predicted (the largest output) and that class's probability (the
 * softmax of the outputs), marking a mistake; the header before the
 * first. */
static void print_prediction(FILE *pf, const class_names *cn, int64_t index,
                             const double *v, int64_t k, int64_t target) {
  int w = label_width(cn, k);
  if (w < 9)
    w = 9;
  if (index == 0)
    fprintf(pf, "%6s  %-*s  %-*s  %11s\n", "sample", w, "true", w,
            "predicted", "probability");
  int64_t p = 0;
  for (int64_t j = 1; j < k; j++)
    if (v[j] > v[p])
      p = j;
  double sum = 0;
  for (int64_t j = 0; j < k; j++)
    sum += exp(v[j] - v[p]);
  char tb[32], pb[32];
  fprintf(pf, "%6lld  %-*s  %-*s  %11.4f%s\n", (long long)index, w,
          class_label(cn, target, tb, sizeof tb), w,
          class_label(cn, p, pb, sizeof pb), 1.0 / sum,
          p == target ? "" : "  <- mistake");
}

/* ---- [eval]: planned execution and precision ---- */

static const torc_config_row eval_rows[] = {
    {"eval", NULL, TORC_CONFIG_SECTION, NULL, NULL, 0,
     "how the test data is evaluated (torc eval and the trainer's passes)"},
    {"eval", "plan", TORC_CONFIG_BOOL, "yes", NULL, 0,
     "trace the model on the first batch and run batches of that shape "
     "through a plan (one arena, batch norm folded); no: eager forwards"},
    {"eval", "verbose", TORC_CONFIG_BOOL, "no", NULL, 0,
     "torc eval: a line on the plan (kernel calls, arena, batches "
     "planned)"},
    {"eval", "precision", TORC_CONFIG_ENUM, "f32", "f32|bf16|f16", 0,
     "torc eval: also evaluate the model converted to this dtype and "
     "report the accuracy against f32"},
    {NULL, NULL, TORC_CONFIG_SECTION, NULL, NULL, 0, NULL}};

__attribute__((constructor)) static void eval_rows_register(void) {
  if (torc_config_schema_add(eval_rows) != TORC_OK) {
    fprintf(stderr, "torc: the [eval] section is not available: %s\n",
            torc_last_error());
    torc_clear_error();
  }
}

/* [eval] plan (1 unless `no`) and precision (TORC_F32 unless set). */
static torc_status eval_settings(const torc_config *cfg, int *plan,
                                 torc_dtype *dt) {
  *plan = 1;
  *dt = TORC_F32;
  int i = torc_config_find(cfg, "eval");
  if (i < 0)
    return TORC_OK;
  torc_status st = torc_config_get_bool(cfg, i, "plan", plan);
  const char *p = torc_config_value(cfg, i, "precision");
  if (st == TORC_OK && p && strcmp(p, "bf16") == 0)
    *dt = TORC_BF16;
  else if (st == TORC_OK && p && strcmp(p, "f16") == 0)
    *dt = TORC_F16;
  return st;
}

/* A pass's planned forward: traced on the first batch, for that shape. */
typedef struct planned {
  int want, tried, verbose;
  int64_t planned, batches; /* batches run through the plan, in all */
  torc_graph *g;
  torc_plan *p;
} planned;

static void planned_free(planned *pl) {
  torc_plan_free(pl->p);
  torc_graph_free(pl->g);
  pl->p = NULL;
  pl->g = NULL;
}

/* Traces r's model on the pass's first input (cast to dt) and plans it,
 * outside any scope (torc_trace releases the forward's result itself);
 * on failure the pass runs eagerly, silently. The weights stay as they
 * are for the pass, so the plan is frozen (packed weights). */
static void planned_start(run *r, planned *pl, const torc_tensor *x,
                          torc_dtype dt) {
  pl->tried = 1;
  torc_tensor *xc = NULL;
  if (dt != TORC_F32 && torc_dtype_is_float(torc_dtype_of(x)))
    x = xc = torc_to_dtype(x, dt);
  if (x == NULL || torc_trace(r->model, &x, 1, &pl->g) != TORC_OK ||
      torc_plan_new(pl->g,
                    TORC_PLAN_FOLD_BN | TORC_PLAN_FUSE | TORC_PLAN_FREEZE,
                    &pl->p) != TORC_OK)
    planned_free(pl);
  torc_release(xc);
  torc_clear_error();
}

/* The model's output for x: through the plan when there is one for x's
 * shape, else eagerly (a trace or plan that fails leaves eager, silently:
 * the eager forward reports any real error). *owned receives a planned
 * output, which the caller releases (eager ones belong to the scope). */
static torc_tensor *model_output(run *r, planned *pl, const torc_tensor *x,
                                 torc_tensor **owned) {
  *owned = NULL;
  if (pl->p) {
    torc_tensor *y = NULL;
    pl->batches++;
    if (torc_plan_run(pl->p, &x, 1, &y) == TORC_OK) {
      pl->planned++;
      return *owned = y;
    }
    torc_clear_error(); /* another shape (the last batch): eager */
  }
  return torc_module_forward(r->model, x);
}

/* Seconds on the monotonic clock. */
static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One pass over the test data (see torc_train__evaluate), its classes
 * named by cn (NULL: by their indices), with the model's inputs cast to
 * dt when that is not f32 (the model converted before). */
static torc_status eval_pass_dt(run *r, int64_t epoch, int want_confusion,
                                int predict, FILE *pf, const class_names *cn,
                                torc_dtype dt, eval_out *e) {
  memset(e, 0, sizeof *e);
  planned pl = {0};
  torc_status st = eval_settings(r->cfg, &pl.want, &(torc_dtype){0});
  int ei = torc_config_find(r->cfg, "eval");
  if (st == TORC_OK && ei >= 0)
    st = torc_config_get_bool(r->cfg, ei, "verbose", &pl.verbose);
  if (st)
    return st;
  torc_module_train(r->model, 0);
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  st = torc_loader_start(r->test, epoch, 0);
  double lsum = 0;
  int64_t correct = 0, n = 0, printed = 0;
  int classify = 1;
  /* The sums on the device, read once at the end of the pass. */
  torc_tensor *lsum_t = torc_train__owned_scalar(0, TORC_F64, r->dev);
  torc_tensor *csum_t = torc_train__owned_scalar(0, TORC_F64, r->dev);
  if ((lsum_t == NULL || csum_t == NULL) && st == TORC_OK)
    st = torc_last_status();
  torc_batch b = {0};
  int got;
  while (st == TORC_OK && (got = torc_loader_next(r->test, &b)) == 1) {
    if (pl.want && !pl.tried)
      planned_start(r, &pl, b.input, dt);
    int scope = torc_scope_begin();
    torc_tensor *x = b.input, *owned = NULL;
    if (dt != TORC_F32 && torc_dtype_is_float(torc_dtype_of(x)))
      x = torc_to_dtype(x, dt);
    torc_tensor *out = x ? model_output(r, &pl, x, &owned) : NULL;
    if (out && dt != TORC_F32 && torc_dtype_of(out) == dt)
      out = torc_to_dtype(out, TORC_F32); /* the loss in f32 */
    torc_tensor *loss = out ? torc_loss_forward(r->loss, out, b.target) : NULL;
    int64_t c = loss && torc_train__classifies(out, b.target) ? 0 : -1;
    st = loss ? torc_train__batch_sums(out, b.target, loss, b.size, lsum_t,
                                       csum_t, &classify)
              : torc_last_status();
    if (st == TORC_OK) {
      n += b.size;
      if (classify && want_confusion) {
        int64_t k = torc_shape(out)[1];
        if (e->confusion == NULL) {
          e->classes = k;
          e->confusion = calloc((size_t)(k * k), sizeof(int64_t));
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
      if (st == TORC_OK && c >= 0 && cn && cn->n != torc_shape(out)[1])
        st = torc_config_error(
            r->cfg, cn->section, "class_names", TORC_ERR_CONFIG,
            "%lld names for the %lld classes of the model (its outputs); "
            "give one name per class, in the order of the labels",
            (long long)cn->n, (long long)torc_shape(out)[1]);
      torc_tensor *tgt = predict > printed && c >= 0
                             ? torc_to(b.target, TORC_CPU)
                             : NULL;
      for (int64_t i = 0; i < b.size && printed < predict && st == TORC_OK;
           i++, printed++) {
        torc_tensor *row = torc_to(torc_select(out, 0, i), TORC_CPU);
        torc_tensor *rf = row ? torc_to_dtype(row, TORC_F64) : NULL;
        if (rf == NULL || (c >= 0 && tgt == NULL)) {
          st = torc_last_status();
          break;
        }
        const double *v = torc_data(torc_contiguous(rf));
        int64_t m = torc_numel(rf);
        if (c >= 0) { /* a classification: the class, not the logits */
          const int64_t *t = torc_data(torc_contiguous(tgt));
          print_prediction(pf, cn, printed, v, m, t[i]);
          continue;
        }
        for (int64_t j = 0; j < m; j++)
          fprintf(pf, "%s%.6g", j ? " " : "", v[j]);
        fputc('\n', pf);
      }
    }
    torc_scope_end(scope);
    torc_release(owned);
    torc_batch_clear(&b);
  }
  if (st == TORC_OK && pf && pl.p && pl.verbose)
    fprintf(pf,
            "plan: %d kernel calls (%d batch norms folded, %d fused, %d "
            "in place), arena %zu bytes; %lld of %lld batches planned, the "
            "others eager\n",
            torc_plan_n_nodes(pl.p), torc_plan_n_folded(pl.p),
            torc_plan_n_fused(pl.p), torc_plan_n_in_place(pl.p),
            torc_plan_arena_bytes(pl.p),
            (long long)pl.planned, (long long)pl.batches);
  planned_free(&pl);
  if (st == TORC_OK && got < 0)
    st = torc_last_status();
  double cv = 0;
  if (st == TORC_OK && (st = torc_item(lsum_t, &lsum)) == TORC_OK)
    st = torc_item(csum_t, &cv);
  correct = (int64_t)cv;
  torc_release(lsum_t), torc_release(csum_t);
  torc_set_grad_mode(gm);
  e->samples = n;
  e->loss = n ? lsum / (double)n : NAN;
  e->accuracy = classify && n ? (double)correct / (double)n : NAN;
  if (!classify) {
    free(e->confusion);
    e->confusion = NULL;
    e->classes = 0;
  }
  return st;
}

static torc_status eval_pass(run *r, int64_t epoch, int want_confusion,
                             int predict, FILE *pf, const class_names *cn,
                             eval_out *e) {
  return eval_pass_dt(r, epoch, want_confusion, predict, pf, cn, TORC_F32, e);
}

torc_status torc_train__evaluate(run *r, int64_t epoch, int want_confusion,
                                 int predict, FILE *pf, eval_out *e) {
  return eval_pass(r, epoch, want_confusion, predict, pf, NULL, e);
}

/* ---- torc eval ---- */

/* The class names of [data.test] class_names, else [data.train]'s: a
 * comma-separated list, each name trimmed, none empty. One malloc'd block
 * (the pointers, then the text) in cn->v; cn->n 0 when neither section
 * names them. */
static torc_status read_class_names(const torc_config *cfg, class_names *cn) {
  memset(cn, 0, sizeof *cn);
  const char *spec = NULL;
  static const char *const sections[] = {"data.test", "data.train"};
  for (int k = 0; k < 2 && spec == NULL; k++) {
    cn->section = torc_config_find(cfg, sections[k]);
    if (cn->section >= 0)
      spec = torc_config_value(cfg, cn->section, "class_names");
  }
  if (spec == NULL)
    return TORC_OK;
  size_t len = strlen(spec), count = 1;
  for (const char *q = spec; *q; q++)
    count += *q == ',';
  char **v = malloc((count + 1) * sizeof *v + len + 1);
  if (v == NULL)
    return torc_set_error(TORC_ERR_OOM, "out of memory reading class_names");
  char *text = (char *)(v + count + 1);
  memcpy(text, spec, len + 1);
  int64_t n = 0;
  for (char *tok = text;; n++) {
    char *comma = strchr(tok, ',');
    if (comma)
      *comma = '\0';
    while (*tok == ' ' || *tok == '\t')
      tok++;
    char *end = tok + strlen(tok);
    while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
      *--end = '\0';
    if (*tok == '\0') {
      free(v);
      return torc_config_error(cfg, cn->section, "class_names",
                               TORC_ERR_CONFIG,
                               "name %lld is empty; give the names of the "
                               "classes separated by commas, e.g. "
                               "class_names = cat, dog",
                               (long long)n + 1);
    }
    v[n] = tok;
    if (comma == NULL)
      break;
    tok = comma + 1;
  }
  v[++n] = NULL;
  cn->v = v;
  cn->n = n;
  return TORC_OK;
}

/* The checkpoint torc eval takes when none is named: the newest the run
 * wrote, as --resume finds it (the highest step of [checkpoint] dir's
 * ckpt-*.safetensors). */
torc_status torc_train__weights_path(const run *r, char *path, size_t size,
                                     const char **what) {
  /* The newest checkpoint (what --resume takes), else the run's final
   * weights: a run without a [checkpoint] section keeps only those. */
  char final[1100];
  struct stat fs;
  if (r->s.ck_dir && torc_train__newest_ckpt(r->s.ck_dir, path, size)) {
    *what = "the newest of the run";
    return TORC_OK;
  }
  snprintf(final, sizeof final, "%s/final.safetensors", r->s.dir);
  if (stat(final, &fs) == 0 && S_ISREG(fs.st_mode)) {
    snprintf(path, size, "%s", final);
    *what = "the run's final weights";
    return TORC_OK;
  }
  if (r->s.ck_dir == NULL)
    return torc_set_error(TORC_ERR_IO,
                          "no weights to evaluate: %s has no [checkpoint] "
                          "dir and its run folder %s holds no "
                          "final.safetensors; train first (torc train %s), "
                          "or name the weights: --checkpoint PATH",
                          torc_config_path(r->cfg), r->s.dir,
                          torc_config_path(r->cfg));
  return torc_set_error(TORC_ERR_IO,
                        "no checkpoint (ckpt-*.safetensors) in %s, the "
                        "[checkpoint] dir of %s, and no final.safetensors in "
                        "%s; train first (torc train %s), or name the "
                        "weights to evaluate: --checkpoint PATH",
                        r->s.ck_dir, torc_config_path(r->cfg), r->s.dir,
                        torc_config_path(r->cfg));
}

/* [eval] precision: a pass in f32 (the reference), then the model
 * converted to dt and the pass that torc eval reports, and a line with
 * both accuracies (or losses), their difference and the passes' times. */
static torc_status low_precision(run *r, FILE *out, int predict,
                                 const class_names *cn, torc_dtype dt,
                                 eval_out *ev) {
  eval_out ref = {0};
  double t0 = now_seconds();
  torc_status st = eval_pass(r, 0, 0, 0, out, cn, &ref);
  double t1 = now_seconds();
  free(ref.confusion);
  if (st == TORC_OK)
    st = torc_module_to_dtype(r->model, dt);
  if (st == TORC_OK)
    st = eval_pass_dt(r, 0, 1, predict, out, cn, dt, ev);
  double t2 = now_seconds();
  if (st)
    return st;
  const char *name = torc_dtype_name(dt);
  if (!isnan(ev->accuracy))
    fprintf(out,
            "precision: %s accuracy=%.4f, f32 accuracy=%.4f, delta=%+.4f "
            "(loss %.4f vs %.4f); pass %.3f s in %s, %.3f s in f32\n",
            name, ev->accuracy, ref.accuracy, ev->accuracy - ref.accuracy,
            ev->loss, ref.loss, t2 - t1, name, t1 - t0);
  else
    fprintf(out,
            "precision: %s loss=%.4f, f32 loss=%.4f, delta=%+.4g; pass "
            "%.3f s in %s, %.3f s in f32\n",
            name, ev->loss, ref.loss, ev->loss - ref.loss, t2 - t1, name,
            t1 - t0);
  return TORC_OK;
}

torc_status torc_train__load_weights(run *r, const char *checkpoint) {
  /* A torc checkpoint (its "model." part) or a plain state dict. */
  torc_state_dict *sd = torc_state_dict_load(checkpoint, r->dev);
  if (sd == NULL)
    return torc_last_status();
  const char *fmt = torc_state_dict_meta(sd, "torc.format");
  torc_status st =
      fmt && strcmp(fmt, "checkpoint") == 0
          ? torc_checkpoint_load_module(sd, r->model, NULL, NULL)
          : torc_module_load_state_dict(r->model, sd, NULL, NULL);
  torc_state_dict_free(sd);
  return st;
}

torc_status torc_evaluate(const torc_config *cfg, const char *checkpoint,
                          int predict, FILE *out, torc_eval_result *res) {
  if (cfg == NULL)
    return torc_train__null_input("torc_evaluate");
  if (res)
    memset(res, 0, sizeof *res);
  if (out == NULL)
    out = stdout;
  run r;
  class_names cn = {0};
  char path[1100];
  const char *what = NULL;
  torc_status st = torc_train__build(&r, cfg, 0);
  if (st == TORC_OK)
    st = read_class_names(cfg, &cn);
  if (st == TORC_OK && checkpoint == NULL &&
      (st = torc_train__weights_path(&r, path, sizeof path, &what)) ==
          TORC_OK) {
    checkpoint = path;
    fprintf(out, "checkpoint: %s (%s)\n", checkpoint, what);
  }
  if (st == TORC_OK)
    st = torc_train__load_weights(&r, checkpoint);
  eval_out ev = {0};
  int plan = 1;
  torc_dtype dt = TORC_F32;
  if (st == TORC_OK)
    st = eval_settings(cfg, &plan, &dt);
  if (st == TORC_OK)
    torc_train__header(out, &r, "eval");
  if (st == TORC_OK && dt != TORC_F32)
    st = low_precision(&r, out, predict, cn.n ? &cn : NULL, dt, &ev);
  else if (st == TORC_OK)
    st = eval_pass(&r, 0, 1, predict, out, cn.n ? &cn : NULL, &ev);
  torc_train__free(&r);
  if (st == TORC_OK && res) {
    res->loss = ev.loss;
    res->accuracy = ev.accuracy;
    res->samples = ev.samples;
    res->classes = ev.classes;
    res->confusion = ev.confusion;
    snprintf(res->checkpoint, sizeof res->checkpoint, "%s", checkpoint);
    res->class_names = ev.confusion ? cn.v : NULL;
    if (res->class_names == NULL)
      free(cn.v);
  } else {
    free(ev.confusion);
    free(cn.v);
  }
  return st;
}

/* ---- the report ---- */

/* The confusion matrix, its rows labelled with the classes' indices and
 * names, its columns with the indices. */
static void print_confusion(const torc_eval_result *res,
                            const class_names *cn, FILE *out) {
  int64_t k = res->classes, top = 0;
  for (int64_t i = 0; i < k * k; i++)
    if (res->confusion[i] > top)
      top = res->confusion[i];
  char buf[32];
  int cw = snprintf(buf, sizeof buf, "%lld", (long long)(top > k ? top : k));
  if (cw < 6)
    cw = 6;
  int iw = snprintf(buf, sizeof buf, "%lld", (long long)(k - 1));
  int nw = cn ? label_width(cn, k) : 0;
  int lw = iw + (cn ? 1 + nw : 0);
  fprintf(out, "confusion matrix (rows: true class, columns: predicted):\n");
  fprintf(out, "%*s", lw, "");
  for (int64_t j = 0; j < k; j++)
    fprintf(out, " %*lld", cw, (long long)j);
  fputc('\n', out);
  for (int64_t i = 0; i < k; i++) {
    if (cn)
      fprintf(out, "%*lld %-*s", iw, (long long)i, nw, cn->v[i]);
    else
      fprintf(out, "%*lld", iw, (long long)i);
    for (int64_t j = 0; j < k; j++)
      fprintf(out, " %*lld", cw, (long long)res->confusion[i * k + j]);
    fputc('\n', out);
  }
}

/* a / b, 0 when b is 0 (scikit-learn's zero_division=0). */
static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

/* Per-class precision, recall, F1 and support, then accuracy (micro
 * average when a class has neither samples nor predictions), macro and
 * support-weighted averages: scikit-learn's classification_report with
 * labels = every class, zero_division = 0 and digits = 4, line for line. */
static void print_classification(const torc_eval_result *res,
                                 const class_names *cn, FILE *out) {
  int64_t k = res->classes, total = 0, right = 0;
  int absent = 0, width = 12; /* "weighted avg" */
  for (int64_t c = 0; c < k; c++) {
    char buf[32];
    int l = (int)strlen(class_label(cn, c, buf, sizeof buf));
    if (l > width)
      width = l;
  }
  fprintf(out, "%*s  %9s %9s %9s %9s\n\n", width, "", "precision", "recall",
          "f1-score", "support");
  double mp = 0, mr = 0, mf = 0, wp = 0, wr = 0, wf = 0;
  for (int64_t c = 0; c < k; c++) {
    int64_t tp = res->confusion[c * k + c], sup = 0, pred = 0;
    for (int64_t j = 0; j < k; j++) {
      sup += res->confusion[c * k + j];
      pred += res->confusion[j * k + c];
    }
    double p = ratio((double)tp, (double)pred),
           rc = ratio((double)tp, (double)sup),
           f = ratio(2.0 * (double)tp, (double)(sup + pred));
    char buf[32];
    fprintf(out, "%*s  %9.4f %9.4f %9.4f %9lld\n", width,
            class_label(cn, c, buf, sizeof buf), p, rc, f, (long long)sup);
    mp += p, mr += rc, mf += f;
    wp += p * (double)sup, wr += rc * (double)sup, wf += f * (double)sup;
    total += sup, right += tp;
    absent |= sup == 0 && pred == 0;
  }
  double acc = ratio((double)right, (double)total);
  fputc('\n', out);
  if (absent)
    fprintf(out, "%*s  %9.4f %9.4f %9.4f %9lld\n", width, "micro avg", acc,
            acc, acc, (long long)total);
  else
    fprintf(out, "%*s  %9s %9s %9.4f %9lld\n", width, "accuracy", "", "", acc,
            (long long)total);
  fprintf(out, "%*s  %9.4f %9.4f %9.4f %9lld\n", width, "macro avg",
          ratio(mp, (double)k), ratio(mr, (double)k), ratio(mf, (double)k),
          (long long)total);
  fprintf(out, "%*s  %9.4f %9.4f %9.4f %9lld\n", width, "weighted avg",
          ratio(wp, (double)total), ratio(wr, (double)total),
          ratio(wf, (double)total), (long long)total);
}

torc_status torc_eval_report(const torc_eval_result *res, FILE *out) {
  if (res == NULL)
    return torc_train__null_input("torc_eval_report");
  if (out == NULL)
    out = stdout;
  if (res->confusion == NULL || res->classes < 1)
    return TORC_OK;
  class_names cn = {.v = res->class_names, .n = res->classes};
  const class_names *named = res->class_names ? &cn : NULL;
  print_confusion(res, named, out);
  fputc('\n', out);
  print_classification(res, named, out);
  return TORC_OK;
}
