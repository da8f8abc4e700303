/* train/checkpoint.c — the trainer's checkpoints: one atomic safetensors
 * file, ckpt-<global step>.safetensors in [checkpoint] dir, with the model,
 * "optimizer." and "scheduler." state, the RNG and the position (epoch,
 * batch within it, global step, seconds so far, the running sums of the
 * log window); the newest [checkpoint] keep kept; resume, with the
 * position checked against the run. Also the run folder's weights files
 * (final.safetensors, best.safetensors) and its check for an earlier run.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "torc/checked.h"
#include "train_internal.h"

typedef torc_train__run run;
typedef torc_train__position position;

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

torc_status torc_train__mkdirs(const char *dir, const char *what) {
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

int torc_train__newest_ckpt(const char *dir, char *path, size_t psize) {
  long long steps[4096]; /* newest first */
  if (list_ckpts(dir, steps, 4096) == 0)
    return 0;
  snprintf(path, psize, "%s/ckpt-%08lld.safetensors", dir, steps[0]);
  return 1;
}

/* The position's running sums, by the metadata key ("train.KEY") each is
 * saved under: the doubles wl, el, seconds and the integers after. */
static const char *const pos_keys[] = {"wl", "el", "wc", "wn", "ws", "ec",
                                       "en", "classify", "seconds"};

static void pos_fields(position *p, double **d, int64_t **i) {
  d[0] = &p->wl, d[1] = &p->el, d[2] = &p->seconds;
  i[0] = &p->wc, i[1] = &p->wn, i[2] = &p->ws, i[3] = &p->ec, i[4] = &p->en,
  i[5] = &p->classify;
}

torc_status torc_train__save_ckpt(run *r, const position *pos, char *path,
                                  size_t psize) {
  int64_t epoch = pos->epoch, batch = pos->batch, gstep = pos->gstep;
  torc_status st = torc_train__mkdirs(r->s.ck_dir, "[checkpoint] dir");
  if (st)
    return st;
  /* Checkpoints whose save was killed before the rename. */
  torc_safetensors_remove_stale_temps(r->s.ck_dir, is_ckpt_name, NULL);
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
      (!r->scaler ||
       (st = torc_grad_scaler_state_dict(r->scaler, "scaler.", ck)) ==
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



/* ---- the run folder's weights, and an earlier run's files ---- */

torc_status torc_train__save_weights(run *r, const char *name, double value,
                                     char *path, size_t psize) {
  snprintf(path, psize, "%s/%s", r->s.dir, name);
  torc_state_dict *sd = torc_state_dict_new();
  if (sd == NULL)
    return torc_last_status();
  torc_status st = torc_module_state_dict(r->model, NULL, sd);
  if (st == TORC_OK && !isnan(value)) {
    char v[64];
    snprintf(v, sizeof v, "%.17g", value);
    st = torc_state_dict_set_meta(sd, "torc.best", v);
  }
  if (st == TORC_OK)
    st = torc_state_dict_set_meta(sd, "torc.format", "weights");
  if (st == TORC_OK)
    st = torc_state_dict_save(sd, path);
  torc_state_dict_free(sd);
  return st;
}

double torc_train__best_so_far(const run *r) {
  char path[1100];
  snprintf(path, sizeof path, "%s/best.safetensors", r->s.dir);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NAN;
  fclose(f);
  torc_state_dict *sd = torc_state_dict_load(path, TORC_CPU);
  double v = NAN;
  const char *m = sd ? torc_state_dict_meta(sd, "torc.best") : NULL;
  if (m)
    v = strtod(m, NULL);
  torc_state_dict_free(sd);
  torc_clear_error();
  return v;
}

void torc_train__clear_outputs(const run *r) {
  static const char *const names[] = {"final.safetensors",
                                      "best.safetensors"};
  char p[1100];
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", r->s.dir, names[i]);
    remove(p);
  }
  if (r->s.ck_dir == NULL)
    return;
  long long steps[4096];
  int n = list_ckpts(r->s.ck_dir, steps, 4096);
  for (int i = 0; i < n; i++) {
    snprintf(p, sizeof p, "%s/ckpt-%08lld.safetensors", r->s.ck_dir,
             steps[i]);
    remove(p);
  }
}

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

torc_status torc_train_check_fresh(const torc_config *cfg) {
  if (cfg == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_train_check_fresh: the "
                                         "configuration is NULL");
  torc_train__run r;
  memset(&r, 0, sizeof r);
  r.cfg = cfg;
  torc_status st = torc_train__read_settings(cfg, &r.s);
  if (st)
    return st;
  char found[1400] = "", p[1100];
  size_t len = 0;
  static const char *const names[] = {"config.ini", "final.safetensors",
                                      "best.safetensors"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/%s", r.s.dir, names[i]);
    if (exists(p) && len + 2 < sizeof found)
      len += (size_t)snprintf(found + len, sizeof found - len, "%s%s",
                              len ? ", " : "", names[i]);
  }
  if (r.s.metrics && exists(r.s.metrics) && len + 2 < sizeof found) {
    size_t dl = strlen(r.s.dir);
    const char *m = r.s.metrics;
    if (strncmp(m, r.s.dir, dl) == 0 && m[dl] == '/')
      m += dl + 1; /* in the run folder: its name there */
    len += (size_t)snprintf(found + len, sizeof found - len, "%s%s",
                            len ? ", " : "", m);
  }
  long long steps[4096];
  int n = r.s.ck_dir ? list_ckpts(r.s.ck_dir, steps, 4096) : 0;
  if (n > 0 && len + 2 < sizeof found)
    len += (size_t)snprintf(found + len, sizeof found - len,
                            "%s%d checkpoint%s%s%s", len ? ", " : "", n,
                            n == 1 ? "" : "s",
                            strcmp(r.s.ck_dir, r.s.dir) ? " in " : "",
                            strcmp(r.s.ck_dir, r.s.dir) ? r.s.ck_dir : "");
  if (len == 0)
    return TORC_OK;
  return torc_set_error(TORC_ERR_CONFIG,
                        "%s holds an earlier run (%s); not overwriting it. "
                        "Replace it with --overwrite, go on from it with "
                        "--resume, or set another [train] dir (--set "
                        "train.dir=runs/NEW)",
                        r.s.dir, found);
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

torc_status torc_train__load_ckpt(run *r, const char *want, position *pos) {
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
  if (st == TORC_OK && r->scaler)
    st = torc_grad_scaler_load_state_dict(r->scaler, ck, "scaler.");
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
  if (st == TORC_OK && pos->epoch == r->s.epochs)
    return torc_set_error(TORC_ERR_CONFIG,
                          "--resume: the run in %s already finished %lld "
                          "epochs (%s); raise [train] epochs to go on "
                          "(e.g. --set train.epochs=%lld)",
                          r->s.dir, (long long)r->s.epochs, path,
                          (long long)r->s.epochs * 2);
  if (st == TORC_OK)
    torc_logf(TORC_LOG_INFO, "resuming from %s (epoch %lld, batch %lld)",
              path, (long long)pos->epoch + 1, (long long)pos->batch);
  return st;
}
