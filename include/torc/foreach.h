/* torc/foreach.h — multi-tensor ("foreach") optimizer steps: torc_sgd_step_
 * and torc_adam_step_ over a list of parameters in a handful of kernel
 * calls instead of one per parameter, as torch.optim's foreach/fused
 * implementations; what torc_optimizer_step runs for a type that
 * describes its update as one of these (torc_optimizer_type.fused).
 *
 * The list ops are rows of the op table (torc/ops_fused.def:
 * "foreach_sgd_step_", "foreach_adam_step_"), whose kernels take every
 * list through torc_kernel_args' in/out arrays: in the n gradients; out
 * the n parameters, then each state list (n momentum buffers; n exp_avg,
 * n exp_avg_sq and, with amsgrad, n max_exp_avg_sq). Their params are the
 * single-tensor ops' (torc_sgd_step_params, torc_adam_step_kparams); one
 * more input after the gradients, a one-element bool, skips the step
 * where it is false. A list longer than one kernel call takes is split
 * into several calls.
 *
 * Results are bit-identical to calling the single-tensor op on each
 * parameter in turn. On the host the single-tensor ops are run (the cpu
 * plugin's vectorised kernels; there is no launch to save), elsewhere the
 * list kernels; a list whose tensors do not share a dtype and device, or
 * are not contiguous, is stepped one parameter at a time too.
 */
#ifndef TORC_FOREACH_H
#define TORC_FOREACH_H

#include "torc/optim.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* torc_sgd_step_(params[i], grads[i], bufs ? bufs[i] : NULL, p) for i in
 * [0, n), in few kernel calls. bufs (n momentum buffers) may be NULL only
 * when p->momentum is 0. Errors as torc_sgd_step_, the first failing
 * parameter named by its index; the parameters before it are updated.
 * `ok` (may be NULL): a one-element bool tensor on the parameters' device;
 * where it holds false nothing is written (as GradScaler's found_inf: the
 * list kernel reads it on the device, so a step that is skipped costs no
 * read; off the list kernel it is read back). */
TORC_API torc_status torc_foreach_sgd_step_(torc_tensor *const *params,
                                            const torc_tensor *const *grads,
                                            torc_tensor *const *bufs, int n,
                                            const torc_sgd_step_params *p,
                                            const torc_tensor *ok);

/* torc_adam_step_ over n parameters sharing p (and so one step count):
 * exp_avg, exp_avg_sq and, with p->amsgrad, max_exp_avg_sq are lists of n
 * (max_exp_avg_sq NULL otherwise); `ok` as above. Errors as
 * torc_adam_step_. */
TORC_API torc_status torc_foreach_adam_step_(
    torc_tensor *const *params, const torc_tensor *const *grads,
    torc_tensor *const *exp_avg, torc_tensor *const *exp_avg_sq,
    torc_tensor *const *max_exp_avg_sq, int n,
    const torc_adam_step_params *p, const torc_tensor *ok);

TORC_END_DECLS

#endif /* TORC_FOREACH_H */
