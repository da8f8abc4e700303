/* torc/foreach.h — multi-tensor ("foreach") ops, as torch's _foreach_*:
 * add_, mul_ and norm over lists of tensors, and torc_sgd_step_ and
 * torc_adam_step_ over a list of parameters, each in a handful of kernel
 * calls instead of one per tensor. torc_optimizer_step runs the steps for
 * a type that describes its update as one of them
 * (torc_optimizer_type.fused); torc_clip_grad_norm_t the others.
 *
 * The list ops are rows of the op table (torc/ops_fused.def:
 * "foreach_add_", "foreach_mul_", "foreach_norm", "foreach_sgd_step_",
 * "foreach_adam_step_"), whose kernels take every
 * list through torc_kernel_args' in/out arrays: in the n gradients; out
 * the n parameters, then each state list (n momentum buffers; n exp_avg,
 * n exp_avg_sq and, with amsgrad, n max_exp_avg_sq); foreach_add_: in
 * ys, out xs; foreach_mul_: in the factor, out xs; foreach_norm: in xs,
 * out the [n] norms (params torc_norm_params, dims_mask unused). The
 * steps' params are the
 * single-tensor ops' (torc_sgd_step_params, torc_adam_step_kparams); one
 * more input after the gradients, a one-element bool, skips the step
 * where it is false. A list longer than one kernel call takes is split
 * into several calls.
 *
 * Results are bit-identical to calling the single-tensor op on each
 * parameter in turn. On the host the single-tensor ops are run (the cpu
 * plugin's vectorised kernels; there is no launch to save), elsewhere the
 * list kernels; a list whose tensors do not share a dtype and device, or
 * are not contiguous, or that autograd would track, goes one tensor at a
 * time through the single-tensor ops too (with their errors).
 */
#ifndef TORC_FOREACH_H
#define TORC_FOREACH_H

#include "torc/optim.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* torc_add_(xs[i], ys[i]) for i in [0, n). */
TORC_API torc_status torc_foreach_add_(torc_tensor *const *xs,
                                       const torc_tensor *const *ys, int n);

/* torc_mul_(xs[i], s) for i in [0, n): s one element, on the list's
 * device (in their dtype for the list kernel). */
TORC_API torc_status torc_foreach_mul_(torc_tensor *const *xs, int n,
                                       const torc_tensor *s);

/* torc_mul_scalar_(xs[i], c) for i in [0, n). */
TORC_API torc_status torc_foreach_mul_scalar_(torc_tensor *const *xs, int n,
                                              double c);

/* The p-norm (p = 1, 2 or INFINITY) of each of the n tensors over all its
 * elements, as torc_norm(xs[i], p, NULL, 0, 0): a new [n] tensor of their
 * dtype on their device (n >= 1; at most 2048 tensors). Tracked by
 * autograd only on the single-tensor path (a tensor that requires grad,
 * in grad mode). */
TORC_API torc_tensor *torc_foreach_norm(const torc_tensor *const *xs, int n,
                                        double p);

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
    torc_tensor *const *max_exp_avg_sq, int n, const torc_adam_step_params *p,
    const torc_tensor *ok);

TORC_END_DECLS

#endif /* TORC_FOREACH_H */
