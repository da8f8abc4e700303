/* torc/optim.h — losses, optimizers, learning-rate schedulers and gradient
 * clipping (torch.nn's losses, torch.optim, torch.optim.lr_scheduler,
 * torch.nn.utils.clip_grad_*).
 *
 * Losses, optimizers and schedulers are *types* registered by name (by the
 * `losses` and `optim` plugins through the host table, or by a program),
 * each built from key/value pairs exactly as module types are:
 *   torc_loss_build("cross_entropy", "label_smoothing=0.1")
 *   torc_optimizer_build("sgd", "lr=0.05, momentum=0.9", model)
 *   torc_scheduler_build("cosine", "t_max=50, warmup=5", opt)
 * Their math is written with core ops, so it runs on every backend. Keys
 * are described with torc_module_key ({name, help, default}).
 *
 * Errors follow the rest of the API: a status or NULL, one message with the
 * values involved and the fix.
 */
#ifndef TORC_OPTIM_H
#define TORC_OPTIM_H

#include "torc/module.h"
#include "torc/state.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* ------------------------------------------------------------------------
 * Losses
 * ---------------------------------------------------------------------- */

/* A loss type. Tables are append-only (struct_size first). */
typedef struct torc_loss_type {
  size_t struct_size;
  const char *name;             /* "cross_entropy" */
  const char *description;      /* one line: what input and target it expects */
  const torc_module_key *keys;  /* options (reduction, ...); {NULL}-ended */
  /* Parses options (every key known, defaults filled) into *state. */
  int (*create)(const char *const *keys, const char *const *values, int n,
                void *user, void **state);
  /* Frees the state. (optional) */
  void (*destroy)(void *state);
  /* The loss of `input` against `target`: a tensor as ops return (a new
   * reference, or owned by the open scope), differentiable in input; NULL
   * after setting an error naming what was expected ("cross_entropy
   * expects logits [N, C] and class indices [N] (i64)"). */
  torc_tensor *(*forward)(void *state, const torc_tensor *input,
                          const torc_tensor *target);
  void *user;
} torc_loss_type;

/* Registers a loss type (borrowed; must outlive the registration). */
TORC_API torc_status torc_loss_type_register(const torc_loss_type *type);

/* Looks up a loss type; NULL (no error recorded) when unknown. */
TORC_API const torc_loss_type *torc_loss_type_find(const char *name);

/* Number of registered loss types and type i (in name order). */
TORC_API int torc_loss_type_count(void);
TORC_API const torc_loss_type *torc_loss_type_at(int i);

/* A configured loss. Opaque. */
typedef struct torc_loss torc_loss;

/* Builds a loss from key/value pairs (as torc_module_create: unknown type
 * or key with the nearest name, repeated or missing key) or from a spec
 * string "key=value, ..." (torc_loss_build). */
TORC_API torc_loss *torc_loss_create(const char *type, const char *const *keys,
                                     const char *const *values, int n);
TORC_API torc_loss *torc_loss_build(const char *type, const char *spec);

/* Frees a loss. NULL is ignored. */
TORC_API void torc_loss_free(torc_loss *loss);

/* The loss's type name. */
TORC_API const char *torc_loss_name(const torc_loss *loss);

/* Computes the loss (see torc_loss_type.forward). NULL inputs propagate. */
TORC_API torc_tensor *torc_loss_forward(torc_loss *loss,
                                        const torc_tensor *input,
                                        const torc_tensor *target);

/* ------------------------------------------------------------------------
 * Optimizers
 * ---------------------------------------------------------------------- */

/* An optimizer type: a per-parameter update rule. The core keeps the
 * parameter groups, the per-parameter state tensors, the step count,
 * zero_grad, skipping frozen parameters (requires_grad off or no grad) and
 * the state dict; the type only updates one parameter. */
struct torc_optimizer_fused; /* below, with the fused steps */

typedef struct torc_optimizer_type {
  size_t struct_size;
  const char *name;                /* "adam" */
  const char *description;         /* one line */
  const torc_module_key *keys;     /* hyper-parameters; must include "lr" */
  /* Names of the per-parameter state tensors, {NULL}-ended (Adam:
   * "exp_avg", "exp_avg_sq", "max_exp_avg_sq"); PyTorch's names, so the
   * state dict reads like optimizer.state_dict()["state"]. */
  const char *const *state_names;
  /* Parses one group's hyper-parameters (every key known, defaults
   * filled) into *hyper. */
  int (*create)(const char *const *keys, const char *const *values, int n,
                void *user, void **hyper);
  void (*destroy)(void *hyper); /* (optional) */
  /* Updates `param` in place (the core has set no-grad mode) from `grad`,
   * at learning rate `lr` (the group's current one), `step` counting from
   * 1 for the parameter's first update. state[i] is the tensor named
   * state_names[i]: zeros of the parameter's shape, dtype and device,
   * created before the first update and kept across steps (and in
   * checkpoints). Returns TORC_OK or an error status. */
  int (*update)(void *hyper, double lr, torc_tensor *param,
                const torc_tensor *grad, torc_tensor *const *state,
                int64_t step);
  void *user;
  /* (optional) 0 if state tensor i is not needed with these
   * hyper-parameters (SGD without momentum has no momentum_buffer, Adam
   * without amsgrad no max_exp_avg_sq): the core then creates none, passes
   * NULL in its slot and saves nothing for it, as PyTorch's state holds
   * only what the step uses. NULL = every state tensor is used. */
  int (*state_used)(void *hyper, int i);
  /* (optional; ABI 1.7, read when struct_size covers it) The update as one
   * of the core's fused steps: fills *out (torc_optimizer_fused, below)
   * for a group's hyper-parameters at learning rate `lr` and `step`, and
   * returns 1; or returns 0 (update is then called per parameter). With
   * it torc_optimizer_step updates a group's parameters in a handful of
   * kernel calls (torc/foreach.h) instead of one per parameter. */
  int (*fused)(void *hyper, double lr, int64_t step,
               struct torc_optimizer_fused *out);
} torc_optimizer_type;

TORC_API torc_status
torc_optimizer_type_register(const torc_optimizer_type *type);
TORC_API const torc_optimizer_type *torc_optimizer_type_find(const char *name);
TORC_API int torc_optimizer_type_count(void);
TORC_API const torc_optimizer_type *torc_optimizer_type_at(int i);

/* An optimizer over parameter groups. Opaque. */
typedef struct torc_optimizer torc_optimizer;

/* A new optimizer of `type` with default hyper-parameters from n
 * key/value pairs (or a spec string, torc_optimizer_build), and no
 * parameters yet; errors as torc_module_create. Add groups with
 * torc_optimizer_add_module / torc_optimizer_add_params. */
TORC_API torc_optimizer *torc_optimizer_create(const char *type,
                                               const char *const *keys,
                                               const char *const *values,
                                               int n);

/* torc_optimizer_create from a spec, then, when m is not NULL, one group
 * with every parameter of m (frozen ones included: they are skipped while
 * frozen, and trained once unfrozen, as in PyTorch). */
TORC_API torc_optimizer *torc_optimizer_build(const char *type,
                                              const char *spec,
                                              torc_module *m);

/* Adds a group: the parameters of m whose dotted names match the shell
 * pattern (NULL = all) and are in no group yet, with hyper-parameters
 * `spec` overriding the optimizer's defaults ("lr=1e-4" for a backbone).
 * Errors: a pattern that matches nothing new (the names are listed), a
 * parameter already in a group, bad keys. Returns the group index, or -1. */
TORC_API int torc_optimizer_add_module(torc_optimizer *opt, torc_module *m,
                                       const char *pattern, const char *spec);

/* Adds a group of n parameters (leaf tensors; a reference is taken). */
TORC_API int torc_optimizer_add_params(torc_optimizer *opt,
                                       torc_tensor *const *params, int n,
                                       const char *spec);

/* One update of every parameter that has a gradient and requires grad. */
TORC_API torc_status torc_optimizer_step(torc_optimizer *opt);

/* torc_optimizer_step applied only where `ok`, a one-element bool tensor,
 * holds true, decided on ok's device without reading it back (as AMP's
 * GradScaler skips the step of a non-finite gradient): the sgd, adam and
 * adamw list kernels read it there; other types' updates are undone with
 * a where. On the host the flag is read (free) and the step skipped. The
 * parameters are unchanged after a skipped step; the step counts advance
 * and other types' state tensors may change (a run that skips a step is
 * meant to stop). ok NULL: torc_optimizer_step. */
TORC_API torc_status torc_optimizer_step_if(torc_optimizer *opt,
                                            const torc_tensor *ok);

/* Clears the gradients of every parameter (set_to_none: drop them, the
 * default in PyTorch 2; else fill with zeros). */
TORC_API torc_status torc_optimizer_zero_grad(torc_optimizer *opt,
                                              int set_to_none);

/* Groups and their learning rates (what schedulers change). */
TORC_API int torc_optimizer_group_count(const torc_optimizer *opt);
TORC_API double torc_optimizer_get_lr(const torc_optimizer *opt, int group);
TORC_API torc_status torc_optimizer_set_lr(torc_optimizer *opt, int group,
                                           double lr);

/* Number of step() calls so far. */
TORC_API int64_t torc_optimizer_steps(const torc_optimizer *opt);

/* The optimizer's type name ("adam"); "" for NULL. */
TORC_API const char *torc_optimizer_name(const torc_optimizer *opt);

/* 1 if the optimizer's type has the hyper-parameter `key` ("momentum",
 * "betas"), else 0 (NULL arguments: 0). */
TORC_API int torc_optimizer_has_hyper(const torc_optimizer *opt,
                                      const char *key);

/* A group's hyper-parameter `key` as text: the value given for the group
 * or the optimizer, else the type's default ("0.9,0.999" for Adam's
 * betas). Borrowed: valid until the next torc_optimizer_set_hyper or load
 * of that group. NULL with an error for an unknown group or key, and for
 * "lr" (use torc_optimizer_get_lr: schedulers move it). */
TORC_API const char *torc_optimizer_get_hyper(const torc_optimizer *opt,
                                              int group, const char *key);

/* Sets a group's hyper-parameter `key` to `value` (text, as in a spec),
 * as assigning optimizer.param_groups[g][key] does in PyTorch: the type
 * parses the group's hyper-parameters again, so a value it refuses is an
 * error that changes nothing. The new value is used from the next step on
 * and saved in the state dict. Schedulers that cycle momentum (onecycle,
 * cyclic) set "momentum" or the first of "betas" with it. "lr" is refused
 * (use torc_optimizer_set_lr). */
TORC_API torc_status torc_optimizer_set_hyper(torc_optimizer *opt, int group,
                                              const char *key,
                                              const char *value);

/* Adds the optimizer's state to sd under `prefix` ("optimizer."): every
 * state tensor as "PREFIX state.I.NAME" (I = the parameter's index across
 * groups, as PyTorch numbers them) and, as metadata, the type, the step
 * count, and each group's hyper-parameters ("PREFIX group.G.lr", ...). */
TORC_API torc_status torc_optimizer_state_dict(const torc_optimizer *opt,
                                               const char *prefix,
                                               torc_state_dict *sd);

/* Restores what torc_optimizer_state_dict saved, onto the parameters'
 * devices. All-or-nothing; errors name a type mismatch, a different
 * number of groups or parameters, and state tensors whose shape differs
 * from their parameter's. */
TORC_API torc_status torc_optimizer_load_state_dict(torc_optimizer *opt,
                                                    const torc_state_dict *sd,
                                                    const char *prefix);

/* Frees the optimizer (not the parameters). NULL is ignored. */
TORC_API void torc_optimizer_free(torc_optimizer *opt);

/* ------------------------------------------------------------------------
 * Learning-rate schedulers
 * ---------------------------------------------------------------------- */

/* A scheduler type. */
typedef struct torc_scheduler_type {
  size_t struct_size;
  const char *name;            /* "cosine" */
  const char *description;
  const torc_module_key *keys; /* its options; the core adds "warmup" and
                                  "warmup_start_factor" to every type */
  int (*create)(const char *const *keys, const char *const *values, int n,
                void *user, void **state);
  void (*destroy)(void *state); /* (optional) */
  /* The learning rate of one group after `t` steps (t = 1 for the first
   * torc_scheduler_step; t = 0 when the scheduler is built and when a
   * warm-up ends: return the lr the schedule starts from, usually
   * initial_lr — OneCycleLR's is max_lr / div_factor), from the group's
   * initial lr and its current lr
   * (closed form or recursive, as PyTorch's get_lr); `metric` is the value
   * given to torc_scheduler_step (reduce-on-plateau; NaN otherwise). A
   * stateful type (plateau) keeps its counters in state, and saves and
   * restores them with save/load. */
  double (*lr)(void *state, int group, double initial_lr, double last_lr,
               int64_t t, double metric);
  /* (optional) The state as a string, and back (checkpoints). */
  int (*save)(void *state, char *buf, size_t size);
  int (*load)(void *state, const char *text);
  void *user;
  /* (optional) For schedules that also cycle momentum (OneCycleLR,
   * CyclicLR): the momentum of one group after `t` steps (t as for lr:
   * t = 0 when the scheduler is built and when a warm-up ends; during a
   * warm-up the momentum stays at its t = 0 value), or NaN when these
   * options leave the momentum alone (cycle_momentum = no). The core
   * writes it to the optimizer's "momentum" hyper-parameter (SGD,
   * RMSprop) or, when momentum_betas is set and the optimizer has no
   * "momentum" but "betas" (Adam, AdamW), to the first of the betas, as
   * PyTorch does; an optimizer with neither is an error when the
   * scheduler is built. */
  double (*momentum)(void *state, int group, int64_t t);
  /* With momentum: 1 if beta1 of an optimizer with "betas" may be cycled
   * (OneCycleLR), 0 if only a "momentum" key is (CyclicLR in PyTorch
   * 1.13). */
  int momentum_betas;
} torc_scheduler_type;

TORC_API torc_status
torc_scheduler_type_register(const torc_scheduler_type *type);
TORC_API const torc_scheduler_type *torc_scheduler_type_find(const char *name);
TORC_API int torc_scheduler_type_count(void);
TORC_API const torc_scheduler_type *torc_scheduler_type_at(int i);

/* A scheduler driving an optimizer's learning rates (borrowed optimizer:
 * it must outlive the scheduler). Opaque. */
typedef struct torc_scheduler torc_scheduler;

/* Builds a scheduler from key/values or a spec. Every type also takes
 * `warmup` (steps of linear warm-up from warmup_start_factor * lr to lr
 * before the schedule starts counting, as PyTorch's SequentialLR of a
 * LinearLR and the schedule) and `warmup_start_factor` (default 0.1).
 * The optimizer's current lrs are the initial ones. */
TORC_API torc_scheduler *torc_scheduler_create(const char *type,
                                               const char *const *keys,
                                               const char *const *values,
                                               int n, torc_optimizer *opt);
TORC_API torc_scheduler *torc_scheduler_build(const char *type,
                                              const char *spec,
                                              torc_optimizer *opt);

/* Advances one step (an epoch or a batch, as the caller decides) and sets
 * every group's lr. `metric`: the monitored value for reduce-on-plateau
 * (required there: NaN is an error naming it), ignored by the others. */
TORC_API torc_status torc_scheduler_step(torc_scheduler *s, double metric);

/* Steps taken so far. */
TORC_API int64_t torc_scheduler_steps(const torc_scheduler *s);

/* Saves / restores the step count and the type's state as metadata under
 * `prefix` ("scheduler."). */
TORC_API torc_status torc_scheduler_state_dict(const torc_scheduler *s,
                                               const char *prefix,
                                               torc_state_dict *sd);
TORC_API torc_status torc_scheduler_load_state_dict(torc_scheduler *s,
                                                    const torc_state_dict *sd,
                                                    const char *prefix);

TORC_API void torc_scheduler_free(torc_scheduler *s);

/* ------------------------------------------------------------------------
 * Gradient clipping
 * ---------------------------------------------------------------------- */

/* Scales the gradients of the n tensors so that their joint p-norm (p = 1,
 * 2 or INFINITY) is at most max_norm, as clip_grad_norm_; *total_norm (may
 * be NULL) receives the norm before clipping. A non-finite norm is
 * TORC_ERR_INVALID when error_if_nonfinite (naming the first parameter
 * whose gradient is not finite), else a warning once and no change.
 * Tensors without a gradient are skipped. */
TORC_API torc_status torc_clip_grad_norm(torc_tensor *const *params, int n,
                                         double max_norm, double p,
                                         int error_if_nonfinite,
                                         double *total_norm);

/* torc_clip_grad_norm without a read from the device, as PyTorch's
 * clip_grad_norm_: the norm, the clip coefficient min(1, max_norm / (norm
 * + 1e-6)) and the scaling are computed on the gradients' device, and
 * *total_norm (may be NULL) receives the norm before clipping as a 0-d f64
 * tensor on that device (owned by the open scope, else by the caller; a
 * CPU zero when no tensor has a gradient). A non-finite norm leaves the
 * gradients as they are, with no error or warning (nothing is read to
 * tell); the caller can test *total_norm. The gradients must share one
 * device. */
TORC_API torc_status torc_clip_grad_norm_t(torc_tensor *const *params, int n,
                                           double max_norm, double p,
                                           torc_tensor **total_norm);

/* Clamps every gradient element to [-clip, clip] (clip_grad_value_). */
TORC_API torc_status torc_clip_grad_value(torc_tensor *const *params, int n,
                                          double clip);

/* The same over every parameter of a module. */
TORC_API torc_status torc_module_clip_grad_norm(torc_module *m,
                                                double max_norm, double p,
                                                int error_if_nonfinite,
                                                double *total_norm);
TORC_API torc_status torc_module_clip_grad_norm_t(torc_module *m,
                                                  double max_norm, double p,
                                                  torc_tensor **total_norm);
TORC_API torc_status torc_module_clip_grad_value(torc_module *m, double clip);

/* ------------------------------------------------------------------------
 * From INI files: [loss], [optimizer], [scheduler]
 * ---------------------------------------------------------------------- */

struct torc_config;

/* [loss] type = ... and its keys. Errors: TORC_ERR_CONFIG "FILE:LINE: key
 * 'k' in [loss]: ..." (a type's errors get the line of the key they
 * name). */
TORC_API torc_loss *torc_loss_from_config(const struct torc_config *cfg);

/* [optimizer] type = ... and its keys, over every parameter of m. */
TORC_API torc_optimizer *torc_optimizer_from_config(
    const struct torc_config *cfg, torc_module *m);

/* [scheduler] type = ... (none: returns NULL with no error) and its keys.
 * `warmup_epochs` is taken as `warmup` (LinearLR stepped whenever the
 * caller steps the scheduler); `torc train` instead raises the lr at every
 * step of those epochs, then starts the schedule. Both warmup and
 * warmup_epochs: TORC_ERR_CONFIG. */
TORC_API torc_scheduler *torc_scheduler_from_config(
    const struct torc_config *cfg, torc_optimizer *opt);

/* ------------------------------------------------------------------------
 * Fused optimizer steps: one op per parameter
 * ---------------------------------------------------------------------- */

/* The math of torch.optim's single-tensor SGD, Adam and AdamW updates as
 * one in-place op each (the sgd, adam and adamw types of the optim plugin
 * call them: one kernel per parameter instead of 5 to 15 elementwise ops).
 * Each evaluates exactly the float operations of the composed ops, in the
 * same order, every intermediate rounded to the parameter's dtype and
 * every scalar (lr, momentum, ...) rounded to that dtype before it
 * multiplies, so results match the composed updates bit for bit.
 *
 * The parameter, its gradient and the state tensors must have one
 * floating dtype (a gradient of another dtype is cast), one shape and one
 * device; non-contiguous ones are updated through contiguous copies. The
 * writes are not tracked by autograd: call these in no-grad mode when
 * any of the tensors requires grad (torc_optimizer_step does). Errors:
 * TORC_ERR_NULL, _DTYPE, _SHAPE, _DEVICE, _INVALID (nesterov without
 * momentum or with dampening; betas outside [0, 1) or a step below 1),
 * _AUTOGRAD (grad mode on and a tensor requires grad). Other
 * hyper-parameters are used as given, as torch.optim's functional code
 * does (the optim plugin checks its keys when it builds an optimizer).
 *
 * Kernel contracts ("sgd_step_", "adam_step_"): in grad; out the updated
 * tensors, read and written in place: param (and momentum_buffer for SGD
 * with momentum != 0; exp_avg, exp_avg_sq and, with amsgrad,
 * max_exp_avg_sq for Adam); all contiguous, of one shape and dtype, never
 * empty. Params: torc_sgd_step_params; torc_adam_step_kparams. */

/* SGD (torch.optim.SGD), per element, R() rounding to the dtype:
 *   d = maximize ? -grad : grad
 *   if weight_decay != 0: d = R(d + R(R(weight_decay) * param))
 *   if momentum != 0:
 *     buf = first_step ? d
 *         : R(R(buf * R(momentum)) + R(R(1 - dampening) * d))
 *     d = nesterov ? R(d + R(R(momentum) * buf)) : buf
 *   param = R(param + R(R(-lr) * d))
 * (Multiplying by 1 or -1 is exact, so this equals torch's add with alpha
 * 1 or -1.) */
typedef struct torc_sgd_step_params {
  double lr;           /* >= 0 */
  double momentum;     /* >= 0; 0: no buffer (momentum_buffer may be NULL) */
  double dampening;
  double weight_decay; /* >= 0 */
  int32_t nesterov;    /* needs momentum > 0 and dampening 0 */
  int32_t maximize;
  int32_t first_step;  /* 1: the buffer starts as d (PyTorch's first step) */
  int32_t reserved;    /* 0 */
} torc_sgd_step_params;

/* One SGD update of param from grad (momentum_buffer: required when
 * momentum != 0, else ignored). */
TORC_API torc_status torc_sgd_step_(torc_tensor *param,
                                    const torc_tensor *grad,
                                    torc_tensor *momentum_buffer,
                                    const torc_sgd_step_params *p);

/* Adam (torch.optim.Adam) and AdamW (decoupled = 1, torch.optim.AdamW),
 * per element, with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step (in
 * double):
 *   g = maximize ? -grad : grad
 *   if decoupled: param = R(param * R(1 - lr * weight_decay))
 *   else if weight_decay != 0: g = R(g + R(R(weight_decay) * param))
 *   m = R(R(m * R(beta1)) + R(R(1 - beta1) * g))
 *   v = R(R(v * R(beta2)) + R(R(R(1 - beta2) * g) * g))
 *   amsgrad: vmax = max(vmax, v) (NaN propagates), used in place of v
 *   denom = R(R(R(sqrt(v)) / R(sqrt(bc2))) + R(eps))
 *   param = R(param + R(R(R(-lr / bc1) * m) / denom)) */
typedef struct torc_adam_step_params {
  double lr;           /* >= 0 */
  double beta1, beta2; /* in [0, 1) */
  double eps;          /* >= 0 */
  double weight_decay; /* >= 0: L2 (adam) or decoupled (adamw) */
  int64_t step;        /* this update's number, from 1 */
  int32_t amsgrad;     /* max_exp_avg_sq required */
  int32_t maximize;
  int32_t decoupled;   /* 1: AdamW's decay */
  int32_t reserved;    /* 0 */
} torc_adam_step_params;

/* One Adam/AdamW update of param from grad; max_exp_avg_sq is required
 * with amsgrad, else ignored. */
TORC_API torc_status torc_adam_step_(torc_tensor *param,
                                     const torc_tensor *grad,
                                     torc_tensor *exp_avg,
                                     torc_tensor *exp_avg_sq,
                                     torc_tensor *max_exp_avg_sq,
                                     const torc_adam_step_params *p);

/* What torc_optimizer_type.fused describes: an SGD or an Adam/AdamW
 * step with these params (the optimizer's state tensors, in state_names
 * order, are the steps' momentum_buffer; exp_avg, exp_avg_sq,
 * max_exp_avg_sq). */
enum { TORC_OPTIMIZER_FUSED_SGD = 1, TORC_OPTIMIZER_FUSED_ADAM = 2 };
typedef struct torc_optimizer_fused {
  int kind; /* TORC_OPTIMIZER_FUSED_SGD or _ADAM */
  torc_sgd_step_params sgd;
  torc_adam_step_params adam;
} torc_optimizer_fused;

/* The "adam_step_" kernel's params: the user's and, computed once by the
 * core in double, step_size = lr / bc1 and bias_correction2_sqrt =
 * sqrt(bc2), so every backend uses the same two numbers. */
typedef struct torc_adam_step_kparams {
  torc_adam_step_params p;
  double step_size;
  double bias_correction2_sqrt;
} torc_adam_step_kparams;

/* torc_scheduler_from_config for a trainer that runs the warm-up itself
 * and knows the run's length: with `trainer_warmup` non-zero, [scheduler]
 * warmup_epochs and warmup_start_factor are left to the caller (the
 * schedule starts after them; torc train raises the lr at every step of
 * those epochs); `run_length` > 0, the run after the warm-up in scheduler
 * steps, is cosine's t_max and onecycle's total_steps when the section
 * leaves them out (0: no such default). NULL with no error when there is
 * no schedule. */
TORC_API torc_scheduler *torc_scheduler_from_config_ex(
    const struct torc_config *cfg, torc_optimizer *opt, int trainer_warmup,
    int64_t run_length);

TORC_END_DECLS

#endif /* TORC_OPTIM_H */
