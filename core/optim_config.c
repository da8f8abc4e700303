/* core/optim_config.c — the [loss], [optimizer] and [scheduler] sections:
 * their schema rows, and building each through its type registry with
 * errors given the file and line of the key they name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "optim_internal.h"
#include "torc/config.h"

const torc__config_row torc__optim_rows[] = {
    {"loss", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "the loss: its type and the type's keys"},
    {"loss", "type", TORC__CFG_STRING, NULL,
     "a loss type: mse, l1, smooth_l1, cross_entropy, nll, bce, "
     "bce_with_logits, kl_div or a plugin's",
     TORC__CFG_REQUIRED, "the loss type; its own keys follow"},
    {"loss", "*", TORC__CFG_ANY, NULL, NULL, 0,
     "the loss type's keys (reduction, label_smoothing, ...; `torc losses` "
     "lists them)"},
    {"optimizer", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "the optimizer over every parameter of the model"},
    {"optimizer", "type", TORC__CFG_STRING, NULL,
     "an optimizer type: sgd, adam, adamw, rmsprop, adagrad or a plugin's",
     TORC__CFG_REQUIRED, "the optimizer type; its own keys follow"},
    {"optimizer", "*", TORC__CFG_ANY, NULL, NULL, 0,
     "the optimizer type's keys (lr, momentum, weight_decay, ...; `torc "
     "optimizers` lists them)"},
    {"scheduler", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "the learning-rate schedule (none when the section is absent)"},
    {"scheduler", "type", TORC__CFG_STRING, NULL,
     "none or a scheduler type: step, multistep, exponential, cosine, "
     "plateau, onecycle, cyclic or a plugin's",
     TORC__CFG_REQUIRED,
     "the scheduler type (none: a constant lr); its own keys follow, and "
     "warmup / warmup_start_factor for any type"},
    {"scheduler", "interval", TORC__CFG_ENUM, "epoch", "epoch|step", 0,
     "when torc train steps the schedule: after each epoch or each batch "
     "(onecycle wants step); warm-up and periods count in these units"},
    {"scheduler", "warmup_epochs", TORC__CFG_INT, NULL, "0..", 0,
     "epochs of linear warm-up, the lr raised at every step from "
     "warmup_start_factor * lr to lr (torc train); the schedule starts "
     "after it. torc_scheduler_from_config takes it as warmup"},
    {"scheduler", "*", TORC__CFG_ANY, NULL, NULL, 0,
     "the scheduler type's keys, and warmup (steps of linear warm-up) and "
     "warmup_start_factor (default 0.1); torc train sets cosine's t_max "
     "and onecycle's total_steps to the run after the warm-up when absent "
     "(`torc schedulers` lists them)"},
    {NULL, NULL, TORC__CFG_SECTION, NULL, NULL, 0, NULL}};

/* The section's keys but `type`, as arrays (borrowed from cfg). */
typedef struct kvs {
  const char **k, **v;
  int n;
} kvs;

/* drop_warmup: leave out warmup_epochs and warmup_start_factor (the
 * trainer runs that warm-up itself, step by step). */
static torc_status section_kvs(const torc_config *cfg, int i, kvs *out,
                               int drop_warmup) {
  int nk = torc_config_section_key_count(cfg, i);
  out->n = 0;
  out->k = torc__calloc((size_t)nk + 1, sizeof *out->k);
  out->v = torc__calloc((size_t)nk + 1, sizeof *out->v);
  if (out->k == NULL || out->v == NULL) {
    torc__free(out->k), torc__free(out->v);
    return torc_set_error(TORC_ERR_OOM, "out of memory reading the config");
  }
  for (int j = 0; j < nk; j++) {
    const char *key = torc_config_section_key(cfg, i, j);
    /* The trainer's key, not the type's. */
    if (strcmp(key, "interval") == 0)
      continue;
    if (drop_warmup && (strcmp(key, "warmup_epochs") == 0 ||
                        strcmp(key, "warmup_start_factor") == 0))
      continue;
    if (strcmp(key, "warmup_epochs") == 0) {
      out->k[out->n] = "warmup";
      out->v[out->n] = torc_config_section_get(cfg, i, key);
      out->n++;
      continue;
    }
    if (strcmp(key, "type") == 0)
      continue;
    out->k[out->n] = key;
    out->v[out->n] = torc_config_section_get(cfg, i, key);
    out->n++;
  }
  return TORC_OK;
}

static void kvs_free(kvs *x) {
  torc__free(x->k);
  torc__free(x->v);
}

/* The key of section i the message names ("key 'k'"), or "type" for an
 * unknown type, or NULL (the section's line). */
static const char *key_named(const torc_config *cfg, int i, const char *msg) {
  int n = torc_config_section_key_count(cfg, i);
  for (int j = 0; j < n; j++) {
    const char *k = torc_config_section_key(cfg, i, j);
    char pat[160];
    snprintf(pat, sizeof pat, "key '%s'", k);
    if (strstr(msg, pat))
      return k;
    /* PyTorch's name in the file, torc's in the type's message */
    const char *canon =
        torc__alias_key(torc_config_section_get(cfg, i, "type"), k);
    snprintf(pat, sizeof pat, "key '%s'", canon ? canon : "");
    if (canon && strstr(msg, pat))
      return k;
  }
  if (strstr(msg, "unknown ") && strstr(msg, " type '"))
    return "type";
  return NULL;
}

/* Re-records the last error with the file and line of the key it names. */
static void located(const torc_config *cfg, int i) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", torc_last_error());
  torc__config_error(cfg, i, key_named(cfg, i, msg),
                     torc__config_rewrap_status(), "%s", msg);
}

/* Does section i set `key` of `type`, under its name or PyTorch's? */
static int key_given(const torc_config *cfg, int i, const char *type,
                     const char *key) {
  const char *alias = torc_config_key_alias(type, key);
  return torc_config_section_get(cfg, i, key) != NULL ||
         (alias && torc_config_section_get(cfg, i, alias) != NULL);
}

/* Index of [name], or -1 after an error saying to add it (required). */
static int find_section(const torc_config *cfg, const char *name,
                        const char *fn, const char *example) {
  if (cfg == NULL) {
    torc__null_input(fn);
    return -1;
  }
  int i = torc__config_find(cfg, name);
  if (i < 0 && example)
    torc_set_error(TORC_ERR_CONFIG, "%s: no [%s] section; add one, e.g. %s",
                   torc_config_path(cfg), name, example);
  return i;
}

torc_loss *torc_loss_from_config(const torc_config *cfg) {
  int i = find_section(cfg, "loss", "torc_loss_from_config",
                       "[loss] type = cross_entropy");
  if (i < 0)
    return NULL;
  kvs x;
  if (section_kvs(cfg, i, &x, 0))
    return NULL;
  torc_loss *loss =
      torc_loss_create(torc__config_value(cfg, i, "type"), x.k, x.v, x.n);
  if (loss == NULL)
    located(cfg, i);
  kvs_free(&x);
  return loss;
}

torc_optimizer *torc_optimizer_from_config(const torc_config *cfg,
                                           torc_module *m) {
  int i = find_section(cfg, "optimizer", "torc_optimizer_from_config",
                       "[optimizer] type = sgd, lr = 0.01");
  if (i < 0)
    return NULL;
  if (m == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_optimizer_from_config: the module "
                                  "is NULL");
    return NULL;
  }
  kvs x;
  if (section_kvs(cfg, i, &x, 0))
    return NULL;
  torc_optimizer *opt =
      torc_optimizer_create(torc__config_value(cfg, i, "type"), x.k, x.v, x.n);
  if (opt && torc_optimizer_add_module(opt, m, NULL, NULL) < 0) {
    torc_optimizer_free(opt);
    opt = NULL;
  }
  if (opt == NULL)
    located(cfg, i);
  kvs_free(&x);
  return opt;
}

torc_scheduler *torc_scheduler_from_config(const torc_config *cfg,
                                           torc_optimizer *opt) {
  return torc__scheduler_from_config(cfg, opt, 0, 0);
}

torc_scheduler *torc_scheduler_from_config_ex(const torc_config *cfg,
                                              torc_optimizer *opt,
                                              int trainer_warmup,
                                              int64_t run_length) {
  return torc__scheduler_from_config(cfg, opt, trainer_warmup, run_length);
}

torc_scheduler *torc__scheduler_from_config(const torc_config *cfg,
                                            torc_optimizer *opt,
                                            int drop_warmup,
                                            int64_t run_length) {
  int i = find_section(cfg, "scheduler", "torc_scheduler_from_config", NULL);
  if (i < 0) { /* absent: no scheduler, as type = none */
    if (cfg)
      torc_clear_error();
    return NULL;
  }
  const char *type = torc__config_value(cfg, i, "type");
  kvs x;
  if (type && strcmp(type, "none") == 0) {
    if (torc_config_section_key_count(cfg, i) > 1) {
      const char *k = torc_config_section_key(cfg, i, 0);
      if (strcmp(k, "type") == 0)
        k = torc_config_section_key(cfg, i, 1);
      torc__config_error(cfg, i, k, TORC_ERR_CONFIG,
                         "[scheduler] type = none takes no other keys; "
                         "remove it or choose a scheduler type");
      return NULL;
    }
    torc_clear_error();
    return NULL;
  }
  if (opt == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_scheduler_from_config: the "
                                  "optimizer is NULL");
    return NULL;
  }
  int has_we = torc_config_section_get(cfg, i, "warmup_epochs") != NULL;
  if (has_we && torc_config_section_get(cfg, i, "warmup") != NULL) {
    torc__config_error(cfg, i, "warmup_epochs", TORC_ERR_CONFIG,
                       "warmup and warmup_epochs are both set; keep one "
                       "(warmup_epochs: a warm-up raised at every step)");
    return NULL;
  }
  if (section_kvs(cfg, i, &x, drop_warmup && has_we))
    return NULL;
  /* The run's length for the key that measures it, when left out. */
  char len[32];
  const char *lkey = NULL;
  if (run_length > 0 && type) {
    if (strcmp(type, "cosine") == 0 && !key_given(cfg, i, type, "t_max"))
      lkey = "t_max";
    else if (strcmp(type, "onecycle") == 0 &&
             !key_given(cfg, i, type, "total_steps") &&
             !key_given(cfg, i, type, "epochs"))
      lkey = "total_steps";
  }
  if (lkey) {
    snprintf(len, sizeof len, "%lld", (long long)run_length);
    x.k[x.n] = lkey; /* section_kvs left a slot: it skips `type` */
    x.v[x.n] = len;
    x.n++;
  }
  torc_scheduler *s = torc_scheduler_create(type, x.k, x.v, x.n, opt);
  if (s == NULL)
    located(cfg, i);
  kvs_free(&x);
  return s;
}
