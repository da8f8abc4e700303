/* torc/amp.h — mixed precision: autocast (torch.autocast) and the
 * gradient scaler (torch.amp.GradScaler).
 *
 * Autocast runs the ops that gain from a low precision (matmul, linear,
 * the convolutions, attention) in bf16 or f16 and the ops that need range
 * or accuracy (softmax, log_softmax, layer and group norm, the losses,
 * exp, log, the reductions that sum) in f32, on every device; batch norm
 * keeps x's dtype with its f32 parameters, as PyTorch's; the other ops
 * follow their inputs' type promotion. Master weights stay f32: an op casts a
 * parameter once per autocast region (the cast is cached, as PyTorch's
 * weight-cast cache, and made again when the parameter changed in place),
 * and autograd sends f32 gradients back through the cast.
 *
 *   torc_autocast_begin(TORC_BF16);
 *   torc_tensor *logits = torc_module_forward(model, x);   // bf16
 *   torc_tensor *loss = torc_cross_entropy(logits, y, NULL); // f32
 *   torc_autocast_end();
 *   torc_backward(loss, NULL);        // outside autocast, as PyTorch's
 *
 * The gradient scaler keeps f16 gradients from underflowing: the loss is
 * multiplied by a scale before backward, the gradients divided by it
 * before the optimizer step, and a step whose gradients are not finite is
 * skipped on the device (no read back) while the scale backs off.
 *
 *   torc_tensor *scaled = torc_grad_scaler_scale(gs, loss);
 *   torc_backward(scaled, NULL);
 *   torc_grad_scaler_unscale_(gs, opt);      // optional: before clipping
 *   torc_grad_scaler_step(gs, opt);
 *   torc_grad_scaler_update(gs);
 */
#ifndef TORC_AMP_H
#define TORC_AMP_H

#include "torc/optim.h"
#include "torc/state.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* ------------------------------------------------------------------------
 * Autocast
 * ---------------------------------------------------------------------- */

/* Enters an autocast region of `dtype` on this thread: TORC_BF16 or
 * TORC_F16 turn it on, TORC_F32 turns it off inside an outer region
 * (autocast(enabled=False)). Regions nest; each begin needs its end.
 * Errors: TORC_ERR_INVALID for another dtype or more than 64 levels. */
TORC_API torc_status torc_autocast_begin(torc_dtype dtype);

/* Leaves the innermost region. Leaving the outermost one drops the cached
 * casts of the parameters. Errors: TORC_ERR_INVALID when no region is
 * open. */
TORC_API torc_status torc_autocast_end(void);

/* The low-precision dtype ops run in now on this thread: TORC_BF16 or
 * TORC_F16, or TORC_F32 when autocast is off. */
TORC_API torc_dtype torc_autocast_dtype(void);

/* How an op is treated under autocast (torc_autocast_policy). */
typedef enum torc_autocast_cast {
  TORC_AUTOCAST_FOLLOW = 0, /* runs in its inputs' promoted dtype */
  TORC_AUTOCAST_LOWER = 1,  /* f32 inputs cast to the autocast dtype */
  TORC_AUTOCAST_F32 = 2     /* f16/bf16 inputs cast to f32 */
} torc_autocast_cast;

/* The policy of the op table's op `name` ("matmul", "softmax"), or of a
 * public function's name without "torc_" ("linear", "cross_entropy").
 * Names autocast does not know follow their inputs (FOLLOW). */
TORC_API torc_autocast_cast torc_autocast_policy(const char *name);

/* ------------------------------------------------------------------------
 * Gradient scaler
 * ---------------------------------------------------------------------- */

/* The scaler's settings, PyTorch's defaults from
 * torc_grad_scaler_params_default. */
typedef struct torc_grad_scaler_params {
  double init_scale;       /* 65536 */
  double growth_factor;    /* 2: the scale after growth_interval good steps */
  double backoff_factor;   /* 0.5: the scale after a non-finite step */
  int64_t growth_interval; /* 2000 */
  int enabled;             /* 1; 0: every call passes through unchanged */
} torc_grad_scaler_params;

/* Fills *p with the defaults above. */
TORC_API void torc_grad_scaler_params_default(torc_grad_scaler_params *p);

typedef struct torc_grad_scaler torc_grad_scaler;

/* A new scaler whose scale and counters live on `dev` (the parameters'
 * device): 0-d tensors, the scale f32 and the counters i64. p NULL: the
 * defaults. A disabled scaler (enabled 0) holds nothing on the device.
 * Errors (NULL, message): init_scale not finite and > 0, growth_factor
 * not finite and > 1, backoff_factor not in (0, 1), growth_interval < 1
 * (TORC_ERR_INVALID), and those of making the tensors on dev. Not thread
 * safe: one scaler belongs to one training loop. */
TORC_API torc_grad_scaler *torc_grad_scaler_create(
    const torc_grad_scaler_params *p, torc_device dev);

/* Frees the scaler. NULL is ignored. */
TORC_API void torc_grad_scaler_free(torc_grad_scaler *gs);

/* loss times the current scale, as a new tensor tracked by autograd (the
 * scale stays on the device), owned by the open scope as every op's
 * result; the dtype promotes as torc_mul's (a 0-d bf16 or f16 loss gives
 * f32). Disabled: a new reference to loss. Errors (NULL): a loss that is
 * not floating (TORC_ERR_DTYPE) or not on the scaler's device
 * (TORC_ERR_DEVICE). */
TORC_API torc_tensor *torc_grad_scaler_scale(torc_grad_scaler *gs,
                                             const torc_tensor *loss);

/* Divides every gradient of opt's parameters by the scale, in place, and
 * records on the device whether any of them held an inf or a NaN (checked
 * before dividing, as PyTorch). Gradients of any floating dtype; f16 and
 * bf16 ones are multiplied by 1/scale in f32 and rounded once. At most
 * once per step and optimizer: a second call, or one after step, before
 * update is TORC_ERR_INVALID; call it before clipping the gradients. A
 * gradient that is not floating (TORC_ERR_DTYPE) or not on the scaler's
 * device (TORC_ERR_DEVICE) is refused before any is changed. Several
 * optimizers may share one scaler, each unscaled and stepped once per
 * step. Disabled: nothing. */
TORC_API torc_status torc_grad_scaler_unscale_(torc_grad_scaler *gs,
                                               torc_optimizer *opt);

/* Unscales the gradients when unscale_ has not, then steps opt only where
 * they were all finite, decided on the device
 * (torc_optimizer_step_if), and adds the skip to the skipped count there.
 * A second step of opt before update is TORC_ERR_INVALID. Disabled:
 * torc_optimizer_step. */
TORC_API torc_status torc_grad_scaler_step(torc_grad_scaler *gs,
                                           torc_optimizer *opt);

/* torc_grad_scaler_step, stepping only where `also` (a one-element bool
 * tensor on the scaler's device, e.g. a finite-loss guard; NULL: none)
 * holds as well, decided on the device. A step that `also` alone skips
 * is not counted as skipped by the scaler. Errors as
 * torc_grad_scaler_step, and TORC_ERR_INVALID for an `also` that is not
 * a one-element bool. */
TORC_API torc_status torc_grad_scaler_step_if(torc_grad_scaler *gs,
                                              torc_optimizer *opt,
                                              const torc_tensor *also);

/* Ends the step: after a non-finite step (of any optimizer) the scale is
 * multiplied by backoff_factor and the run of good steps restarts; after
 * growth_interval good steps in a row it is multiplied by growth_factor
 * (unless that overflows f32) and the run restarts. Computed on the
 * device. Errors: TORC_ERR_INVALID when neither step nor unscale_ ran
 * since the last update (PyTorch's "No inf checks were recorded").
 * Disabled: nothing. */
TORC_API torc_status torc_grad_scaler_update(torc_grad_scaler *gs);

/* The current scale (reads the device: a sync). 1 when disabled; NaN
 * with the error set when gs is NULL or the read fails. */
TORC_API double torc_grad_scaler_get_scale(torc_grad_scaler *gs);

/* Optimizer steps skipped for non-finite gradients so far (reads the
 * device; with several optimizers each one's skip counts). 0 when
 * disabled; -1 with the error set when gs is NULL or the read fails. */
TORC_API int64_t torc_grad_scaler_skipped(torc_grad_scaler *gs);

/* Adds the scaler's state under `prefix` ("scaler."): copies of the
 * scale, the run of good steps and the skipped steps as the tensors
 * "PREFIX scale", "PREFIX growth_tracker" and "PREFIX skipped", and the
 * settings as the metadata "PREFIX enabled", "init_scale",
 * "growth_factor", "backoff_factor" and "growth_interval", so a resumed
 * run continues bit for bit. Disabled: the metadata only. Errors:
 * TORC_ERR_INVALID when sd already has one of the tensor names (nothing
 * is added then). */
TORC_API torc_status torc_grad_scaler_state_dict(const torc_grad_scaler *gs,
                                                 const char *prefix,
                                                 torc_state_dict *sd);

/* Restores what torc_grad_scaler_state_dict saved, copied onto the
 * scaler's device, with the saved settings (as PyTorch's load_state_dict
 * restores growth_factor, backoff_factor and growth_interval); the
 * current step's records are dropped. All or nothing; errors
 * (TORC_ERR_INVALID) name a missing entry, a tensor of the wrong shape or
 * dtype, a setting out of range, or a state saved from a disabled
 * scaler. A disabled scaler loads nothing. */
TORC_API torc_status torc_grad_scaler_load_state_dict(
    torc_grad_scaler *gs, const torc_state_dict *sd, const char *prefix);

TORC_END_DECLS

#endif /* TORC_AMP_H */
