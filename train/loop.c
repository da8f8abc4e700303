/* train/loop.c — the INI-driven trainer (torc/train.h): building a run
 * from the file, the training loop with its callbacks, the validation
 * split, best and final weights, Ctrl-C, the NaN guard and the bench. The
 * sections and settings are settings.c's; evaluation is eval.c's; the
 * progress, metrics CSV and curves.svg are callbacks (report.c);
 * checkpoints and resume are checkpoint.c's.
 *
 * Resuming rebuilds everything from the INI file, loads the checkpoint,
 * trims the metrics CSV to the rows written before it, and starts the
 * loader at the saved batch: the run goes on as if it had never stopped
 * (bit for bit when the data pipeline is deterministic, [torc]
 * deterministic = yes).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train_internal.h"

typedef torc_train__settings settings;
typedef torc_train__run run;
typedef torc_train__position position;
typedef torc_train__eval_out eval_out;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A NULL argument: TORC_ERR_NULL, keeping the message of the failed call
 * that produced it when there is one. */
static torc_status null_input(const char *fn) {
  if (torc_last_status() == TORC_OK)
    torc_set_error(TORC_ERR_NULL,
                   "%s: an input tensor is NULL; an earlier call failed "
                   "without its error being checked",
                   fn);
  return TORC_ERR_NULL;
}

/* ---- SIGINT ---- */

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

/* ---- several processes ---- */

/* mpirun ends every rank with SIGTERM when one fails: the message, made
 * before the run starts, and an exit status below 128. */
static char term_msg[1400];
static torc_device dist_dev; /* the communicator's tensors' device */
static void on_sigterm(int sig) {
  (void)sig;
  ssize_t w = write(2, term_msg, strlen(term_msg));
  (void)w;
  _exit(1);
}

torc_status torc_train__dist_start(const torc_config *cfg) {
  int rank, world;
  torc_status st = torc_dist_env(&rank, &world);
  int k = torc_config_find(cfg, "dist");
  if (st || (world == 1 && k < 0))
    return st;
  torc_dist_opts o = {0};
  if (k >= 0) {
    o.backend = torc_config_value(cfg, k, "backend");
    if ((st = torc_config_get_double(cfg, k, "timeout", &o.timeout_s)))
      return st;
  }
  if ((st = torc_config_device(cfg, &o.device)))
    return st;
  dist_dev = o.device;
  return torc_dist_init(&o);
}

torc_status torc_train__dist_sum(double *v, int n) {
  if (torc_dist_world_size() == 1)
    return TORC_OK;
  const char *b = torc_dist_backend();
  torc_device dev = b && strcmp(b, "mpi") != 0 ? dist_dev : TORC_CPU;
  int scope = torc_scope_begin();
  int64_t len = n;
  torc_tensor *t = torc_from_host(v, &len, 1, TORC_F64, dev);
  torc_status st = t ? torc_dist_all_reduce(&t, 1, TORC_DIST_SUM)
                     : torc_last_status();
  if (st == TORC_OK)
    st = torc_to_host(t, v, sizeof(double) * (size_t)n);
  torc_scope_end(scope);
  return st;
}

/* Every rank's setup outcome: a rank that failed has said why; the others
 * stop with TORC_ERR_DIST naming it, so that none waits in a collective
 * for a rank that is gone. */
static torc_status dist_agree(const run *r, torc_status st) {
  if (r->world == 1)
    return st;
  double v[2] = {st != TORC_OK, st != TORC_OK ? r->rank + 1.0 : 0};
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", torc_last_error());
  torc_status as = torc_train__dist_sum(v, 2);
  if (as)
    return as;
  if (st) {
    torc_set_error(st, "%s", msg);
    return st;
  }
  if (v[0] > 0)
    return v[0] == 1
               ? torc_set_error(TORC_ERR_DIST,
                                "rank %d: rank %d failed before training; "
                                "its message says why",
                                r->rank, (int)v[1] - 1)
               : torc_set_error(TORC_ERR_DIST,
                                "rank %d: %d ranks failed before training; "
                                "their messages say why",
                                r->rank, (int)v[0]);
  return TORC_OK;
}


/* ---- the parts of a run ---- */

/* The folders the run writes to exist (made if missing) and are
 * writable: checked before the first step, so a bad path is a
 * configuration error, not a lost run. */
static torc_status outputs_ok(const run *r) {
  torc_status st0 = torc_train__mkdirs(r->s.dir, "[train] dir");
  if (st0)
    return st0;
  if (access(r->s.dir, W_OK) != 0)
    return torc_set_error(TORC_ERR_IO, "cannot write to the run folder %s: "
                          "%s; check [train] dir",
                          r->s.dir, strerror(errno));
  if (r->s.metrics) {
    char d[1024];
    snprintf(d, sizeof d, "%s", r->s.metrics);
    char *slash = strrchr(d, '/');
    if (slash && slash != d) {
      *slash = '\0';
      torc_status st = torc_train__mkdirs(d, "[train] metrics");
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
    torc_status st = torc_train__mkdirs(r->s.ck_dir, "[checkpoint] dir");
    if (st)
      return st;
    if (access(r->s.ck_dir, W_OK) != 0)
      return torc_set_error(TORC_ERR_IO, "cannot write checkpoints to %s: %s; "
                            "check [checkpoint] dir",
                            r->s.ck_dir, strerror(errno));
  }
  return TORC_OK;
}

static void run_free(run *r) {
  torc_ddp_free(r->ddp);
  r->ddp = NULL;
  free(r->warm_lr);
  torc_grad_scaler_free(r->scaler);
  torc_scheduler_free(r->sched);
  torc_optimizer_free(r->opt);
  torc_loss_free(r->loss);
  torc_loader_free(r->train);
  torc_loader_free(r->test);
  torc_loader_free(r->valid);
  torc_module_free(r->model);
}

static torc_status warmup_build(run *r);

/* [train] precision: bf16 and fp16 need the device's fast kernels for
 * the products in that dtype (the matmul's provider other than ref) unless
 * allow_emulated; fp16 gets a gradient scaler. */
static torc_status precision_build(run *r) {
  torc_dtype dt = r->s.precision;
  if (dt == TORC_F32)
    return TORC_OK;
  int t = torc_config_find(r->cfg, "train");
  const char *devtype = torc_device_type_name(r->dev.type);
  const char *by = torc_train__provider(devtype ? devtype : "cpu", "matmul",
                                        dt);
  if ((by == NULL || strcmp(by, "ref") == 0) && !r->s.allow_emulated)
    return torc_config_error(
        r->cfg, t, "precision", TORC_ERR_CONFIG,
        "%s: no plugin has fast %s kernels on %s (its matmul would run on "
        "%s). On a CPU, bf16 needs AVX-512 BF16 or AMX and the onednn "
        "plugin; fp16 has no fast CPU kernels. Set precision = fp32, or "
        "allow_emulated = yes to run it anyway (slow; for testing)",
        torc_train__precision_name(dt), torc_dtype_name(dt),
        devtype ? devtype : "this device",
        by ? "the reference kernels" : "no kernel at all");
  if (dt != TORC_F16)
    return TORC_OK;
  torc_grad_scaler_params p;
  torc_grad_scaler_params_default(&p);
  p.init_scale = r->s.loss_scale;
  p.growth_interval = r->s.scale_growth;
  r->scaler = torc_grad_scaler_create(&p, r->dev);
  return r->scaler ? TORC_OK : torc_last_status();
}

/* A watched metric needs its split: valid.* a validation split, test.* a
 * [data.test]. */
static torc_status check_watched(const run *r, int m, const char *section,
                                 const char *key) {
  int valid = m == TORC_TRAIN__M_VALID_LOSS || m == TORC_TRAIN__M_VALID_ACCURACY;
  int test = m == TORC_TRAIN__M_TEST_LOSS || m == TORC_TRAIN__M_TEST_ACCURACY;
  if ((valid && r->valid == NULL) || (test && r->test == NULL))
    return torc_config_error(
        r->cfg, torc_config_find(r->cfg, section), key, TORC_ERR_CONFIG,
        "%s is measured on %s, and there is none; add %s, or watch "
        "another metric",
        torc_train__metric_name(m),
        valid ? "a validation split" : "[data.test]",
        valid ? "[data.valid] (or valid_fraction = 0.1 in [data.train])"
              : "a [data.test] section");
  return TORC_OK;
}

/* A language model's first layer is an embedding of token ids: its
 * num_embeddings must cover the text source's vocabulary (a char the
 * embedding has no row for fails only when a batch holds it). */
static torc_status check_vocabulary(const run *r, const torc_loader *ld) {
  torc_dataset *ds = ld ? torc_loader_dataset(ld) : NULL;
  int64_t v = ds ? torc_dataset_num_classes(ds) : 0;
  torc_module *first =
      torc_module_child_count(r->model) > 0 ? torc_module_child_at(r->model, 0)
                                            : NULL;
  torc_tensor *w = first && strcmp(torc_module_type_name(first), "embedding") == 0
                       ? torc_module_parameter(first, "weight")
                       : NULL;
  int di = torc_config_find(r->cfg, "data.train");
  const char *src = di >= 0 ? torc_config_section_get(r->cfg, di, "source")
                            : NULL;
  if (v <= 0 || w == NULL || torc_size(w, 0) >= v || src == NULL ||
      strcmp(src, "text") != 0 || torc_model_input_dtype(r->cfg) != TORC_I64)
    return TORC_OK;
  return torc_set_error(
      TORC_ERR_CONFIG,
      "%s: the embedding (layer 0) has num_embeddings = %lld, but the data's "
      "vocabulary has %lld tokens; set num_embeddings (and the last layer's "
      "out_features) to %lld",
      torc_config_path(r->cfg), (long long)torc_size(w, 0), (long long)v,
      (long long)v);
}

/* Builds the model, data, loss, optimizer and scheduler of cfg. With
 * `for_train` 0 only the model, the test data and the loss. */
static torc_status run_build(run *r, const torc_config *cfg, int for_train) {
  memset(r, 0, sizeof *r);
  r->cfg = cfg;
  r->rank = torc_dist_rank();
  r->world = torc_dist_world_size();
  r->started = time(NULL);
  torc_status st = torc_train__check_data_sections(cfg);
  if (st == TORC_OK)
    st = torc_train__read_settings(cfg, &r->s);
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
    torc_tensor *x =
        torc_zeros(shape, nd + 1, torc_model_input_dtype(cfg), TORC_CPU);
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
  if (torc_config_find(cfg, "data.test") >= 0 &&
      (r->test = torc_loader_from_config(cfg, "test", r->dev)) == NULL)
    return torc_last_status();
  if (for_train) {
    int ti = torc_config_find(cfg, "data.train");
    const char *vf =
        ti >= 0 ? torc_config_section_get(cfg, ti, "valid_fraction") : NULL;
    if ((torc_config_find(cfg, "data.valid") >= 0 ||
         (vf && strtod(vf, NULL) > 0)) &&
        (r->valid = torc_loader_from_config(cfg, "valid", r->dev)) == NULL)
      return torc_last_status();
    if ((st = check_watched(r, r->s.best, "checkpoint", "best")) ||
        (st = check_watched(r, r->s.early_stop, "train", "early_stop")))
      return st;
  }
  if ((st = check_vocabulary(r, r->train)) || (st = check_vocabulary(r, r->test)))
    return st;
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
  if ((st = precision_build(r)))
    return st;
  /* The run after the warm-up, in the schedule's steps: cosine's t_max
   * and onecycle's total_steps when the file leaves them out. */
  int k = torc_config_find(cfg, "scheduler");
  if (k >= 0 && torc_config_section_get(cfg, k, "warmup_epochs") &&
      (st = torc_config_get_int(cfg, k, "warmup_epochs", &r->warm_epochs)))
    return st;
  int64_t len = r->s.epochs - r->warm_epochs;
  if (r->s.sched_per_step)
    len *= torc_loader_length(r->train);
  r->sched = torc_scheduler_from_config_ex(cfg, r->opt, 1, len > 0 ? len : 1);
  if (r->sched == NULL && torc_last_status() != TORC_OK)
    return torc_last_status();
  return warmup_build(r);
}

/* [scheduler] warmup_epochs, which the trainer runs itself: a LinearLR
 * raised at every step, not once per epoch (a tenfold jump of the lr at
 * the first epoch's end is what a warm-up is there to avoid). */
static torc_status warmup_build(run *r) {
  int k = torc_config_find(r->cfg, "scheduler");
  if (k < 0 || r->sched == NULL ||
      torc_config_section_get(r->cfg, k, "warmup_epochs") == NULL)
    return TORC_OK; /* r->warm_epochs: read by run_build */
  r->warm_f = 0.1;
  const char *f = torc_config_section_get(r->cfg, k, "warmup_start_factor");
  if (f) {
    char *end;
    r->warm_f = strtod(f, &end);
    if (end == f || *end != '\0' || !(r->warm_f > 0 && r->warm_f <= 1))
      return torc_config_error(r->cfg, k, "warmup_start_factor",
                               TORC_ERR_CONFIG,
                               "'%s' is not a factor in (0, 1]; give one "
                               "(0.1 starts at a tenth of the lr)",
                               f);
  }
  r->warm_steps = r->warm_epochs * torc_loader_length(r->train);
  r->warm_groups = torc_optimizer_group_count(r->opt);
  r->warm_lr = calloc((size_t)r->warm_groups + 1, sizeof *r->warm_lr);
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

/* ---- what eval.c shares ---- */

torc_status torc_train__build(run *r, const torc_config *cfg, int for_train) {
  return run_build(r, cfg, for_train);
}

void torc_train__free(run *r) { run_free(r); }

torc_status torc_train__null_input(const char *fn) { return null_input(fn); }

/* ---- the loop ---- */

/* The optimizer step, skipped once the guard saw a non-finite loss: on
 * the device without a read (the list kernels take the flag, as AMP's
 * GradScaler skips a step), on the host by reading it (free there). */
static torc_status guarded_step(run *r, torc_train__accum *a) {
  return torc_optimizer_step_if(r->opt, a->alive);
}

/* One training step. Its loss and correct count go into a's device sums
 * and its guard; nothing is read back (but the guard on the host). */
static torc_status train_step(run *r, const torc_batch *b,
                              torc_train__accum *a, int *classify) {
  /* Mixed precision: the forward and the loss under autocast, backward
   * outside it (as PyTorch's recipe); fp16's loss scaled. */
  torc_dtype low = r->s.precision;
  torc_status st;
  if (low != TORC_F32 && (st = torc_autocast_begin(low)))
    return st;
  torc_tensor *out = torc_module_forward(r->model, b->input);
  torc_tensor *loss = out ? torc_loss_forward(r->loss, out, b->target) : NULL;
  if (low != TORC_F32)
    torc_autocast_end();
  if (loss == NULL)
    return torc_last_status();
  torc_tensor *scaled = r->scaler ? torc_grad_scaler_scale(r->scaler, loss)
                                  : loss;
  if (scaled == NULL)
    return torc_last_status();
  if ((st = torc_optimizer_zero_grad(r->opt, 1)) ||
      (st = torc_backward(scaled, NULL, 0)))
    return st;
  /* Clipping sees the true gradients. */
  if (r->scaler && (r->s.clip_norm > 0 || r->s.clip_value > 0) &&
      (st = torc_grad_scaler_unscale_(r->scaler, r->opt)))
    return st;
  torc_tensor *gnorm = NULL;
  if (r->s.clip_norm > 0 &&
      (st = torc_module_clip_grad_norm_t(r->model, r->s.clip_norm, 2,
                                         &gnorm)))
    return st;
  if (r->s.clip_value > 0 &&
      (st = torc_module_clip_grad_value(r->model, r->s.clip_value)))
    return st;
  /* The guard is fed before the step, so a NaN never reaches the
   * weights: the step of a non-finite loss (and every later one) is
   * skipped, and the loop stops at its next read. With a loss scale,
   * gradients that are not finite skip one step and back the scale off,
   * so the guard watches the loss alone. */
  if ((st = torc_train__accum_step(a, out, b->target, loss,
                                   r->scaler ? NULL : gnorm, b->size,
                                   classify)))
    return st;
  if (r->scaler)
    return (st = torc_grad_scaler_step_if(r->scaler, r->opt, a->alive))
               ? st
               : torc_grad_scaler_update(r->scaler);
  return guarded_step(r, a);
}
/* ---- callbacks ---- */

/* The callbacks of a run, called in order: the built-in reporters (the
 * metrics first, as the CSV row was written before the progress line),
 * then the caller's. */
typedef struct cb_list {
  torc_train_callbacks cb[4];
  int n;
} cb_list;

enum { ON_STEP, ON_EVAL, ON_EPOCH_END, ON_CHECKPOINT, ON_END };

static const char *const cb_names[] = {"on_step", "on_eval", "on_epoch_end",
                                       "on_checkpoint", "on_end"};

static torc_train_callback cb_fn(const torc_train_callbacks *c, int which) {
  switch (which) {
  case ON_STEP:
    return c->on_step;
  case ON_EVAL:
    return c->on_eval;
  case ON_EPOCH_END:
    return c->on_epoch_end;
  case ON_CHECKPOINT:
    return c->on_checkpoint;
  default:
    return c->on_end;
  }
}

/* Calls `which` of every callback: TORC_TRAIN_STOP when one asked to
 * stop (each still sees the event), TORC_TRAIN_FAIL with an error
 * recorded when one failed (those after it are not called), else
 * TORC_TRAIN_CONTINUE. on_end's return values are ignored. */
static int fire(const cb_list *l, int which, const torc_train_event *ev) {
  int stop = 0;
  for (int i = 0; i < l->n; i++) {
    torc_train_callback f = cb_fn(&l->cb[i], which);
    if (f == NULL)
      continue;
    int rc = f(ev, l->cb[i].user);
    if (which == ON_END || rc == TORC_TRAIN_CONTINUE)
      continue;
    if (rc == TORC_TRAIN_STOP) {
      stop = 1;
      continue;
    }
    if (torc_last_status() == TORC_OK)
      torc_set_error(TORC_ERR_INVALID,
                     "a train callback's %s returned %d, failing the run "
                     "without recording why; record the reason with "
                     "torc_set_error",
                     cb_names[which], rc);
    return TORC_TRAIN_FAIL;
  }
  return stop ? TORC_TRAIN_STOP : TORC_TRAIN_CONTINUE;
}

/* An event of run r at (0-based) epoch and batch, the figures NaN. */
static void ev_init(torc_train_event *ev, const run *r, int64_t epoch,
                    int64_t batch, int64_t nb, int64_t gstep, double seconds,
                    double epoch_seconds) {
  memset(ev, 0, sizeof *ev);
  ev->struct_size = sizeof *ev;
  ev->epoch = epoch + 1;
  ev->epochs = r->s.epochs;
  ev->batch = batch;
  ev->batches = nb;
  ev->step = gstep;
  ev->seconds = seconds;
  ev->epoch_seconds = epoch_seconds;
  ev->lr = torc_optimizer_get_lr(r->opt, 0);
  ev->skipped_steps = -1;
  ev->loss = ev->accuracy = ev->window_loss = ev->window_accuracy = NAN;
  ev->samples_per_sec = ev->eta_seconds = NAN;
  ev->train_loss = ev->train_accuracy = ev->test_loss = NAN;
  ev->test_accuracy = ev->valid_loss = ev->valid_accuracy = NAN;
  ev->checkpoint = "";
}

/* The size of the first layout of torc_train_callbacks. */
#define CALLBACKS_V1 (offsetof(torc_train_callbacks, flags) + sizeof(unsigned))

/* ---- the loop ---- */

torc_status torc_train_ex(const torc_config *cfg, const torc_train_opts *opts,
                          const torc_train_callbacks *callbacks,
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
    return null_input("torc_train");
  torc_train_callbacks user = {0};
  if (callbacks) {
    if (callbacks->struct_size < CALLBACKS_V1)
      return torc_set_error(TORC_ERR_INVALID,
                            "torc_train_ex: the callbacks' struct_size is "
                            "%zu, smaller than the oldest layout (%zu); set "
                            "it to sizeof(torc_train_callbacks)",
                            callbacks->struct_size, (size_t)CALLBACKS_V1);
    memcpy(&user, callbacks,
           callbacks->struct_size < sizeof user ? callbacks->struct_size
                                                : sizeof user);
  }
  run r;
  /* Several processes: the world first (the loaders shard by rank). */
  torc_status st = torc_train__dist_start(cfg);
  if (st)
    return st;
  st = run_build(&r, cfg, 1);
  position pos = {0};
  if (st == TORC_OK && o.resume)
    st = torc_train__load_ckpt(&r, o.resume, &pos);
  if (st == TORC_OK)
    st = torc_module_check_device(r.model, r.dev);
  /* Rank 0 alone checks and writes the run's files. */
  if (r.rank == 0) {
    if (st == TORC_OK && !o.resume &&
        (user.flags & TORC_TRAIN_KEEP_EARLIER))
      st = torc_train_check_fresh(cfg);
    if (st == TORC_OK)
      st = outputs_ok(&r);
    if (st == TORC_OK && !o.resume)
      torc_train__clear_outputs(&r);
    if (st == TORC_OK)
      st = torc_train__write_config(&r);
  }
  st = dist_agree(&r, st);
  if (st == TORC_OK && r.world > 1 &&
      (r.ddp = torc_ddp_new(r.model, &(torc_ddp_opts){
                                         .bucket_mb = r.s.bucket_mb})) ==
          NULL)
    st = torc_last_status();
  if (st == TORC_OK && r.world > 1 && r.s.sync_batchnorm)
    st = torc_module_sync_batchnorm(r.model, 1);
  if (st) {
    /* Every rank knows and stops: the world ends in order. */
    torc_dist_finalize(0);
    run_free(&r);
    return st;
  }
  /* The other ranks print only errors. */
  if (r.rank != 0)
    user.flags |= TORC_TRAIN_NO_PROGRESS | TORC_TRAIN_NO_METRICS;
  if (!(user.flags & TORC_TRAIN_NO_PROGRESS))
    torc_train__header(o.out ? o.out : stdout, &r, "train");
  torc_train__report rp;
  torc_train__report_init(&rp, &r, o.out ? o.out : stdout, o.progress_bar,
                          o.resume ? pos.gstep : -1);
  cb_list cbs = {.n = 0};
  if (!(user.flags & TORC_TRAIN_NO_METRICS))
    cbs.cb[cbs.n++] = torc_train__metrics_callbacks(&rp);
  if (!(user.flags & TORC_TRAIN_NO_PROGRESS))
    cbs.cb[cbs.n++] = torc_train__progress_callbacks(&rp);
  torc_train__early_stop es = {.metric = r.s.early_stop, .patience = r.s.patience,
                   .min_delta = r.s.min_delta,
                   .out = user.flags & TORC_TRAIN_NO_PROGRESS
                              ? NULL
                              : (o.out ? o.out : stdout)};
  if (r.s.early_stop != TORC_TRAIN__M_NONE)
    cbs.cb[cbs.n++] = (torc_train_callbacks){
        .struct_size = sizeof(torc_train_callbacks),
        .user = &es,
        .on_epoch_end = torc_train__early_stop_epoch};
  /* [checkpoint] best: the best value so far (best.safetensors keeps it,
   * so a resumed run compares against the earlier part's best). */
  double best_v = NAN;
  if (r.s.best != TORC_TRAIN__M_NONE && o.resume)
    best_v = torc_train__best_so_far(&r);
  if (callbacks)
    cbs.cb[cbs.n++] = user;
  struct sigaction old_sa, sa, old_term;
  if (o.handle_sigint) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);
  }
  if (o.handle_sigint && r.world > 1) {
    if (r.s.ck_dir)
      snprintf(term_msg, sizeof term_msg,
               "torc train: rank %d of %d: stopped by SIGTERM: the launcher "
               "ends every rank when one fails (its message names the "
               "rank). Checkpoints are written whole or not at all, so the "
               "newest one in %s is intact: go on with torc train --resume, "
               "on any number of ranks\n",
               r.rank, r.world, r.s.ck_dir);
    else
      snprintf(term_msg, sizeof term_msg,
               "torc train: rank %d of %d: stopped by SIGTERM: the launcher "
               "ends every rank when one fails (its message names the "
               "rank). The run has no [checkpoint] section, so it starts "
               "over; add one to be able to --resume\n",
               r.rank, r.world);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
  }
  interrupted = 0;
  double t_start = now_s() - pos.seconds, t_proc = now_s();
  int64_t nb = torc_loader_length(r.train), gstep = pos.gstep;
  torc_train__accum acc = {0};
  /* Where the run stands, and how the loop ended (for on_end). */
  int64_t at_epoch = pos.epoch, at_batch = pos.batch;
  double t_at = now_s();
  int ended = TORC_TRAIN_FINISHED;
  torc_train_event ev;
  for (int64_t epoch = pos.epoch; epoch < r.s.epochs && st == TORC_OK;
       epoch++) {
    int64_t first = epoch == pos.epoch ? pos.batch : 0;
    if ((st = torc_loader_start(r.train, epoch, first)))
      break;
    torc_module_train(r.model, 1);
    double wl = 0, ep_l = 0, t_win = now_s(), t_ep = t_win;
    int64_t wc = 0, wn = 0, ws = 0, ep_c = 0, ep_n = 0;
    int classify = 1, stop = 0;
    if (epoch == pos.epoch && first > 0) { /* mid-epoch: the saved sums */
      wl = pos.wl, wc = pos.wc, wn = pos.wn, ws = pos.ws;
      ep_l = pos.el, ep_c = pos.ec, ep_n = pos.en;
      classify = (int)pos.classify;
    }
    at_epoch = epoch, at_batch = first, t_at = t_ep;
    torc_batch b = {0};
    int got = 0;
    int64_t bi = first;
    /* The sums and the guard live on the device, read once per window. */
    torc_train__accum_free(&acc);
    if ((st = torc_train__accum_init(&acc, r.dev, wl, ep_l, wc, ep_c, gstep)))
      break;
    int64_t ep_step0 = gstep - first; /* the steps before this epoch */
    double t_read = t_win;
    while ((got = torc_loader_next(r.train, &b)) == 1) {
      int scope = torc_scope_begin();
      int cls = 1;
      warmup_apply(&r, gstep);
      st = train_step(&r, &b, &acc, &cls);
      torc_scope_end(scope);
      int64_t bs = b.size;
      torc_batch_clear(&b);
      if (st)
        break;
      if (!cls)
        classify = 0;
      gstep++;
      bi++;
      at_batch = bi;
      if (r.sched && r.s.sched_per_step && gstep > r.warm_steps &&
          (st = torc_scheduler_step(r.sched, NAN)))
        break;
      wn += bs, ep_n += bs, ws++;
      /* The step's event: the batch, and the log window so far (ending
       * here every log_every steps and at the epoch's last batch). The
       * figures are read from the device where the window ends, where the
       * bar is redrawn (4 times a second) and, with TORC_TRAIN_EVERY_STEP,
       * at every step. */
      double t = now_s();
      ev_init(&ev, &r, epoch, bi, nb, gstep, t - t_start, t - t_ep);
      ev.samples = bs;
      ev.logged = ws == r.s.log_every || bi == nb;
      int bar = o.progress_bar && !(user.flags & TORC_TRAIN_NO_PROGRESS) &&
                t - t_read >= 0.25;
      if (ev.logged || bar || (user.flags & TORC_TRAIN_EVERY_STEP)) {
        double v[4] = {NAN, NAN, NAN, NAN};
        torc_tensor *ts[4] = {acc.cur_l, acc.wl, acc.cur_c, acc.wc};
        if ((st = torc_train__accum_read(&acc, ts, classify ? 4 : 2, v))) {
          if (st == TORC_ERR_INVALID) /* the guard: its message */
            st = torc_train__accum_check(&acc, epoch, ep_step0);
          break;
        }
        double lv = v[0], wlv = v[1], cv = v[2], wcv = v[3], wnv = wn;
        if (r.world > 1 && ev.logged) { /* the window of every rank */
          double g[3] = {wlv, classify ? wcv : 0, wnv};
          if ((st = torc_train__dist_sum(g, 3)))
            break;
          wlv = g[0], wcv = g[1], wnv = g[2];
        }
        ev.loss = lv;
        ev.accuracy = classify ? cv / (double)bs : NAN;
        ev.window_loss = wlv / wnv;
        ev.window_accuracy = classify ? wcv / wnv : NAN;
        if (r.scaler)
          ev.skipped_steps = torc_grad_scaler_skipped(r.scaler);
        t_read = t;
      }
      ev.samples_per_sec = (double)wn * r.world / (t - t_win);
      ev.eta_seconds = (double)(nb - bi) * (t - t_ep) / (double)(bi - first);
      int rc = fire(&cbs, ON_STEP, &ev);
      if (ev.logged) {
        wn = 0, ws = 0;
        t_win = t;
        if ((st = torc_fill_(acc.wl, 0)) || (st = torc_fill_(acc.wc, 0)))
          break;
      }
      if (rc == TORC_TRAIN_FAIL) {
        st = torc_last_status();
        break;
      }
      stop = rc == TORC_TRAIN_STOP;
      if (interrupted || stop)
        break;
    }
    /* The epoch's (or, stopped early, the window's) figures: one read,
     * the guard first. */
    if (st == TORC_OK) {
      double v[4] = {0, 0, 0, 0};
      torc_tensor *ts[4] = {acc.wl, acc.el, acc.wc, acc.ec};
      if ((st = torc_train__accum_read(&acc, ts, 4, v))) {
        if (st == TORC_ERR_INVALID)
          st = torc_train__accum_check(&acc, epoch, ep_step0);
        break;
      }
      if (r.world > 1 && !interrupted && !stop) { /* every rank's */
        double g[6] = {v[0], v[1], v[2], v[3], (double)wn, (double)ep_n};
        if ((st = torc_train__dist_sum(g, 6)))
          break;
        memcpy(v, g, sizeof v);
        wn = (int64_t)g[4], ep_n = (int64_t)g[5];
      }
      wl = v[0], ep_l = v[1], wc = (int64_t)v[2], ep_c = (int64_t)v[3];
    }
    if (st == TORC_OK && got < 0)
      st = torc_last_status();
    if (st)
      break;
    if (interrupted || stop) {
      ended = interrupted ? TORC_TRAIN_INTERRUPTED : TORC_TRAIN_STOPPED;
      if (r.s.ck_dir && r.rank == 0) {
        position now = {.epoch = epoch, .batch = bi, .gstep = gstep,
                        .seconds = now_s() - t_start, .wl = wl, .el = ep_l,
                        .wc = wc, .wn = wn, .ws = ws, .ec = ep_c, .en = ep_n,
                        .classify = classify};
        st = torc_train__save_ckpt(&r, &now, res->checkpoint,
                                   sizeof res->checkpoint);
        if (st == TORC_OK) {
          double t = now_s();
          ev_init(&ev, &r, epoch, bi, nb, gstep, t - t_start, t - t_ep);
          ev.checkpoint = res->checkpoint;
          ev.reason = ended;
          if (fire(&cbs, ON_CHECKPOINT, &ev) == TORC_TRAIN_FAIL)
            st = torc_last_status();
        }
      }
      if (st == TORC_OK && interrupted)
        st = torc_set_error(TORC_ERR_INTERRUPTED, "interrupted (SIGINT)");
      break;
    }
    /* End of the epoch: evaluate, schedule, summarise, checkpoint. A
     * callback's stop here ends the run once the epoch is done. The
     * device's queue drains first, so the evaluation's time is its own. */
    if ((st = torc_synchronize(r.dev)))
      break;
    int last_epoch = epoch + 1 == r.s.epochs, stop_after = 0, rc;
    eval_out eo = {.loss = NAN, .accuracy = NAN};
    int evaluated = 0;
    if (r.test && ((r.s.eval_every > 0 && (epoch + 1) % r.s.eval_every == 0) ||
                   last_epoch)) {
      double t0 = now_s();
      if ((st = torc_train__evaluate(&r, epoch, 0, 0, NULL, &eo)))
        break;
      double t = now_s();
      evaluated = 1;
      res->test_loss = eo.loss;
      res->test_accuracy = eo.accuracy;
      ev_init(&ev, &r, epoch, bi, nb, gstep, t - t_start, t - t_ep);
      ev.samples = eo.samples;
      ev.samples_per_sec = eo.samples / (t - t0);
      ev.evaluated = 1;
      ev.test_loss = eo.loss;
      ev.test_accuracy = eo.accuracy;
      if ((rc = fire(&cbs, ON_EVAL, &ev)) == TORC_TRAIN_FAIL) {
        st = torc_last_status();
        break;
      }
      stop_after |= rc == TORC_TRAIN_STOP;
    }
    /* The validation split, every epoch: the evaluation reads r.test, so the
     * split stands in for it meanwhile. */
    eval_out vo = {.loss = NAN, .accuracy = NAN};
    double valid_sps = NAN;
    if (r.valid) {
      torc_loader *test = r.test;
      double t0 = now_s();
      r.test = r.valid;
      st = torc_train__evaluate(&r, epoch, 0, 0, NULL, &vo);
      r.test = test;
      valid_sps = vo.samples / (now_s() - t0);
      if (st)
        break;
    }
    if (r.sched && !r.s.sched_per_step && epoch + 1 > r.warm_epochs) {
      double metric = r.valid    ? vo.loss
                      : evaluated ? eo.loss
                                  : (ep_n ? ep_l / ep_n : NAN);
      if ((st = torc_scheduler_step(r.sched, metric)))
        break;
    }
    double t = now_s();
    ev_init(&ev, &r, epoch, bi, nb, gstep, t - t_start, t - t_ep);
    ev.train_loss = ep_n ? ep_l / ep_n : NAN;
    ev.train_accuracy = classify && ep_n ? (double)ep_c / ep_n : NAN;
    ev.evaluated = evaluated;
    ev.test_loss = eo.loss;
    ev.test_accuracy = eo.accuracy;
    ev.valid_evaluated = r.valid != NULL;
    ev.samples_per_sec = valid_sps;
    ev.valid_loss = vo.loss;
    ev.valid_accuracy = vo.accuracy;
    if ((rc = fire(&cbs, ON_EPOCH_END, &ev)) == TORC_TRAIN_FAIL) {
      st = torc_last_status();
      break;
    }
    stop_after |= rc == TORC_TRAIN_STOP;
    if (r.s.best != TORC_TRAIN__M_NONE) {
      double v = torc_train__metric_value(r.s.best, &ev);
      int higher = torc_train__metric_higher_better(r.s.best);
      if (!isnan(v) &&
          (isnan(best_v) || (higher ? v > best_v : v < best_v))) {
        char bp[1100];
        if (r.rank == 0 && (st = torc_train__save_weights(&r, "best.safetensors", v, bp,
                                           sizeof bp)))
          break;
        best_v = v;
      }
    }
    res->epochs = epoch + 1;
    int due =
        (r.s.ck_every > 0 && (epoch + 1) % r.s.ck_every == 0) || last_epoch;
    int stopping = stop_after && !last_epoch;
    if (r.s.ck_dir && (due || stopping)) {
      if (r.rank == 0 && (st = torc_train__save_ckpt(&r,
                                      &(position){.epoch = epoch + 1,
                                                  .gstep = gstep,
                                                  .seconds = now_s() - t_start,
                                                  .classify = 1},
                                      res->checkpoint, sizeof res->checkpoint)))
        break;
      t = now_s();
      ev_init(&ev, &r, epoch, bi, nb, gstep, t - t_start, t - t_ep);
      ev.checkpoint = res->checkpoint;
      ev.reason = due ? TORC_TRAIN_SCHEDULED : TORC_TRAIN_STOPPED;
      if ((rc = fire(&cbs, ON_CHECKPOINT, &ev)) == TORC_TRAIN_FAIL) {
        st = torc_last_status();
        break;
      }
      stopping |= rc == TORC_TRAIN_STOP && !last_epoch;
    }
    if (stopping) {
      ended = TORC_TRAIN_STOPPED;
      at_batch = nb;
      break;
    }
  }
  torc_train__accum_free(&acc);
  if (o.handle_sigint)
    sigaction(SIGINT, &old_sa, NULL);
  if (o.handle_sigint && r.world > 1)
    sigaction(SIGTERM, &old_term, NULL);
  if (st == TORC_OK && r.ddp && !(user.flags & TORC_TRAIN_NO_PROGRESS)) {
    torc_ddp_stats ds;
    torc_ddp_get_stats(r.ddp, &ds);
    fprintf(o.out ? o.out : stdout,
            "dist: %d ranks on %s, %d gradient bucket(s) per step, %d "
            "started during backward; all-reduce wait %.3f ms per step "
            "(%lld steps)\n",
            r.world, torc_dist_backend(), ds.buckets,
            ds.started_in_backward,
            ds.steps ? 1e3 * ds.comm_seconds / (double)ds.steps : 0.0,
            (long long)ds.steps);
  }
  /* The weights at the end, always: with no [checkpoint] section too. */
  if (st == TORC_OK && r.rank == 0) {
    char fp[1100];
    st = torc_train__save_weights(&r, "final.safetensors", NAN, fp,
                                  sizeof fp);
  }
  res->steps = gstep;
  res->seconds = now_s() - t_proc;
  /* The end, however it came. */
  if (at_epoch >= r.s.epochs) /* resumed from the end of the run */
    at_epoch = r.s.epochs - 1, at_batch = nb;
  double t = now_s();
  ev_init(&ev, &r, at_epoch, at_batch, nb, gstep, t - t_start, t - t_at);
  ev.test_loss = res->test_loss;
  ev.test_accuracy = res->test_accuracy;
  ev.checkpoint = res->checkpoint;
  ev.reason = st == TORC_OK ? ended
              : st == TORC_ERR_INTERRUPTED && ended == TORC_TRAIN_INTERRUPTED
                  ? TORC_TRAIN_INTERRUPTED
                  : TORC_TRAIN_FAILED;
  ev.status = st;
  fire(&cbs, ON_END, &ev);
  torc_train__report_close(&rp);
  run_free(&r);
  return st;
}

torc_status torc_train(const torc_config *cfg, const torc_train_opts *opts,
                       torc_train_result *res) {
  return torc_train_ex(cfg, opts, NULL, res);
}

/* ---- the bench ---- */

torc_status torc_bench(const torc_config *cfg, int64_t steps, FILE *out) {
  return torc_bench_ex(cfg, steps, 0, out);
}

/* "machine fp32 FMA peak: ...\n" into buf for a roofline bench of a
 * model on `dev`; the peak in GFLOP/s (0: none to compare with). */
static double bench_peak(torc_device dev, char *buf, size_t size) {
  if (dev.type != 0) {
    snprintf(buf, size, "machine fp32 FMA peak: not measured (the model "
                        "runs on %s, not the cpu): %% peak shows -\n",
             torc_device_type_name(dev.type));
    return 0;
  }
  const char *isa;
  int threads;
  double peak = torc_cpu_peak_gflops(0, &isa, &threads);
  if (peak > 0)
    snprintf(buf, size,
             "machine fp32 FMA peak: %.1f GFLOP/s (%s, %d thread%s)\n", peak,
             isa, threads, threads == 1 ? "" : "s");
  else
    snprintf(buf, size, "machine fp32 FMA peak: unknown (no AVX2 or AVX-512 "
                        "FMA on this CPU): %% peak shows -\n");
  return peak;
}

torc_status torc_bench_ex(const torc_config *cfg, int64_t steps,
                          unsigned flags, FILE *out) {
  if (cfg == NULL)
    return null_input("torc_bench");
  const unsigned known = TORC_BENCH_ROOFLINE | TORC_BENCH_ALL_OPS;
  if (flags & ~known)
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_bench_ex: unknown flags 0x%x (the known "
                          "ones: TORC_BENCH_ROOFLINE, TORC_BENCH_ALL_OPS)",
                          flags & ~known);
  if (out == NULL)
    out = stdout;
  if (steps < 1)
    steps = 50;
  run r;
  torc_status st = run_build(&r, cfg, 1);
  if (st == TORC_OK)
    st = torc_module_check_device(r.model, r.dev);
  /* The peak before the steps: its threads then leave the cores to them. */
  double peak = 0;
  char peak_line[200] = "";
  if (st == TORC_OK && (flags & TORC_BENCH_ROOFLINE))
    peak = bench_peak(r.dev, peak_line, sizeof peak_line);
  int64_t done = 0, samples = 0, epoch = 0, warm = 5;
  double t0 = 0;
  torc_train__accum acc = {0};
  if (st == TORC_OK)
    st = torc_train__accum_init(&acc, r.dev, 0, 0, 0, 0, 0);
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
      /* the device's queue drained, so the clock counts the timed steps'
       * work alone (on an asynchronous device a step only queues it) */
      if ((st = torc_synchronize(r.dev)) != TORC_OK)
        break;
      torc_profile_enable(1);
      t0 = now_s();
    }
    int scope = torc_scope_begin();
    int cls = 1;
    st = train_step(&r, &b, &acc, &cls);
    torc_scope_end(scope);
    if (done >= warm)
      samples += b.size;
    torc_batch_clear(&b);
    done++;
  }
  if (st == TORC_OK)
    st = torc_synchronize(r.dev); /* the last steps' queued work */
  torc_train__accum_free(&acc);
  double secs = now_s() - t0;
  char *rep = NULL;
  int top = flags & TORC_BENCH_ALL_OPS ? 0 : 15;
  if (st == TORC_OK)
    rep = flags & TORC_BENCH_ROOFLINE
              ? torc_profile_roofline(top, steps, peak)
              : torc_profile_report(top, steps);
  torc_profile_enable(0);
  if (st == TORC_OK && rep == NULL)
    st = torc_last_status();
  if (st == TORC_OK) {
    int mixed = r.s.precision != TORC_F32;
    fprintf(out, "%lld training steps (after %lld of warm-up%s%s%s): %.3f "
                 "ms/step, %.0f samples/s\n%s\n%s",
            (long long)steps, (long long)warm, mixed ? "; " : "",
            mixed ? torc_train__precision_name(r.s.precision) : "",
            mixed ? " mixed precision" : "", secs * 1e3 / (double)steps,
            (double)samples / secs, peak_line, rep);
  }
  free(rep);
  run_free(&r);
  return st;
}
