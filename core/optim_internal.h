/* core/optim_internal.h — what the loss, optimizer, scheduler and config
 * files share beyond include/torc/optim.h: the registries of the three
 * kinds of types (registry.h) and their owner-tracked registration. Not
 * installed. */
#ifndef TORC_OPTIM_INTERNAL_H
#define TORC_OPTIM_INTERNAL_H

#include <pthread.h>

#include "registry.h"
#include "torc/optim.h"

struct torc__plugin;

extern torc__oreg torc__loss_reg, torc__optimizer_reg, torc__scheduler_reg;

/* Owner-tracked registration for plugins (plugin.c) and its undoing. */
torc_status torc__loss_type_register_owned(struct torc__plugin *owner,
                                           const torc_loss_type *type);
torc_status
torc__optimizer_type_register_owned(struct torc__plugin *owner,
                                    const torc_optimizer_type *type);
torc_status
torc__scheduler_type_register_owned(struct torc__plugin *owner,
                                    const torc_scheduler_type *type);
void torc__optim_types_unregister_owner(struct torc__plugin *owner);

/* The "adam_step_" kernels' params for p (ops_fused.c, foreach.c): p
 * itself and, computed once in double as torch.optim.Adam's single-tensor
 * code does, step_size = lr / (1 - beta1^step) and bias_correction2_sqrt
 * = sqrt(1 - beta2^step), so every backend uses the same two numbers. */
torc_adam_step_kparams torc__adam_kparams(const torc_adam_step_params *p);

/* ---- an optimizer's insides (optimizer.c, optimizer_foreach.c) ---- */

typedef struct torc__oparam {
  torc_tensor *t;      /* a reference */
  char *name;          /* dotted name from add_module, or NULL */
  torc_tensor **state; /* n_state tensors; NULL before the first update */
  int64_t step;        /* updates of this parameter (PyTorch's 'step') */
} torc__oparam;

typedef struct torc__ogroup {
  torc__oparam *p;
  int n;
  void *hyper; /* the type's parsed hyper-parameters */
  char **vals; /* nk values: the optimizer's defaults and the group's */
  double lr;   /* current learning rate */
} torc__ogroup;

struct torc_optimizer {
  const torc_optimizer_type *type;
  int nk, n_state, lr_key;
  const char **keys; /* the type's key names */
  char **defaults;   /* nk values */
  torc__ogroup *g;
  int n_groups;
  int64_t steps;
};

/* The state tensors of a parameter, zeros like it, created on first use
 * (only those its group's hyper-parameters use; the others stay NULL). */
torc_status torc__optimizer_ensure_state(torc_optimizer *opt, void *hyper,
                                         torc__oparam *p);

/* Steps group G (index g) of opt in one list step (torc/foreach.h) when
 * its type describes its update as a fused step (torc_optimizer_type.
 * fused), every parameter to update is at one step count and there are
 * two or more: *done 1 then (each updated parameter's step counted).
 * Else *done 0 and nothing is changed: the caller updates each
 * parameter. `ok` (or NULL) as torc_optimizer_step_if's, read on the
 * device by the list kernels. */
torc_status torc__optimizer_step_fused(torc_optimizer *opt, torc__ogroup *G,
                                       int g, const torc_tensor *ok, int *done);

/* torc_optimizer_step, the updates applied only where the 0-d bool `ok`
 * (NULL: always; on the device, off the host) holds. */
torc_status torc__optimizer_step(torc_optimizer *opt, const torc_tensor *ok);

/* t = ok ? t : was, on t's device (the update of t undone where ok is
 * false). */
torc_status torc__put_back_unless(torc_tensor *t, const torc_tensor *was,
                                  const torc_tensor *ok);

/* Parses a floating value of key `key` for `type`; an error naming both
 * when it is not a number. */
torc_status torc__optim_parse_double(const char *type, const char *key,
                                     const char *v, double *out);

#include "torc/config.h"

/* torc_scheduler_from_config; with drop_warmup the section's
 * warmup_epochs and warmup_start_factor are left to the caller (torc
 * train raises the lr at every step of those epochs itself); run_length
 * > 0 (the run after warm-up, in scheduler steps) is cosine's t_max and
 * onecycle's total_steps when the section leaves them out. */
torc_scheduler *torc__scheduler_from_config(const torc_config *cfg,
                                            torc_optimizer *opt,
                                            int drop_warmup,
                                            int64_t run_length);

#endif /* TORC_OPTIM_INTERNAL_H */
