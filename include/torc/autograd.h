/* torc/autograd.h — reverse-mode automatic differentiation, as in PyTorch:
 * a dynamic tape recorded by ops whose inputs require grad, backward
 * through it, gradients accumulated into leaves' .grad.
 *
 * Safety rules (each an error with the fix in the message, never a wrong
 * gradient): an in-place op on a leaf that requires grad, while grad mode
 * is on; a tensor saved for backward and modified in place afterwards
 * (checked at backward, naming the op that saved it and both versions);
 * running backward twice through a graph freed by the first backward.
 */
#ifndef TORC_AUTOGRAD_H
#define TORC_AUTOGRAD_H

#include "torc/tensor.h"

TORC_BEGIN_DECLS

/* ---- requires_grad, leaves, .grad ---- */

/* Sets whether t requires grad. Only leaves (tensors not produced by a
 * recorded op) can be changed; for others TORC_ERR_AUTOGRAD with the fix
 * (detach first). Integer and bool tensors cannot require grad
 * (TORC_ERR_DTYPE). */
TORC_API torc_status torc_set_requires_grad(torc_tensor *t, int requires_grad);

/* 1 if t requires grad (a leaf flagged so, or the output of a recorded op). */
TORC_API int torc_requires_grad(const torc_tensor *t);

/* 1 if t is a leaf: it was not produced by a recorded op. */
TORC_API int torc_is_leaf(const torc_tensor *t);

/* The gradient accumulated into t by backward (leaves, and non-leaves that
 * called torc_retain_grad), or NULL when none has been computed. The
 * pointer is borrowed: valid until t's gradient is replaced or zeroed;
 * retain it to keep it longer. */
TORC_API torc_tensor *torc_grad_of(const torc_tensor *t);

/* Replaces t's .grad with g (retained; NULL clears it). g must have t's
 * shape, dtype and device. */
TORC_API torc_status torc_set_grad(torc_tensor *t, torc_tensor *g);

/* Clears t's .grad: set_to_none drops it (as PyTorch's default), otherwise
 * it is filled with zeros in place. */
TORC_API torc_status torc_zero_grad(torc_tensor *t, int set_to_none);

/* Asks backward to keep the gradient of a non-leaf in its .grad. */
TORC_API torc_status torc_retain_grad(torc_tensor *t);

/* Name of the node that produced t ("MulBackward", "MatmulBackward",
 * "AccumulateGrad" for a leaf that requires grad), or NULL. Static
 * storage. */
TORC_API const char *torc_grad_fn_name(const torc_tensor *t);

/* ---- backward ---- */

/* Computes the gradient of `root` with respect to every leaf that requires
 * grad and accumulates it into their .grad. `grad` is d(loss)/d(root)
 * (same shape), or NULL for a one-element root (then 1). Unless
 * retain_graph, the graph's saved tensors are freed, and a second backward
 * through it is an error. */
TORC_API torc_status torc_backward(torc_tensor *root, const torc_tensor *grad,
                                   int retain_graph);

/* Gradients of `outputs` with respect to `inputs`, as torch.autograd.grad:
 * grads_out[i] receives a new reference to d(sum of outputs weighted by
 * grad_outputs)/d(inputs[i]). grad_outputs may be NULL, or hold NULL
 * entries, meaning 1 for one-element outputs. Leaves' .grad are not
 * touched. An input the outputs do not depend on is an error, unless
 * allow_unused, in which case its gradient is NULL. */
TORC_API torc_status torc_grad(torc_tensor *const *outputs,
                               const torc_tensor *const *grad_outputs,
                               int n_outputs, torc_tensor *const *inputs,
                               int n_inputs, torc_tensor **grads_out,
                               int retain_graph, int allow_unused);

/* A gradient hook: called with the gradient flowing into t during
 * backward (borrowed). Return NULL to keep it, or a new reference to
 * replace it (same shape). */
typedef torc_tensor *(*torc_grad_hook)(const torc_tensor *grad, void *user);

/* Registers a hook on t (which must require grad); returns an id > 0 for
 * torc_remove_hook, or -1 on error. */
TORC_API int torc_register_hook(torc_tensor *t, torc_grad_hook hook,
                                void *user);

/* Removes a hook by id (a gradient hook or a post-accumulate hook). */
TORC_API torc_status torc_remove_hook(torc_tensor *t, int id);

/* A post-accumulate gradient hook: called by backward right after leaf
 * t's .grad took its gradient (torc_grad_of(t) is complete for this
 * backward), as PyTorch's register_post_accumulate_grad_hook. Return
 * TORC_OK, or an error status (with torc_set_error) to stop backward. */
typedef torc_status (*torc_post_accumulate_hook)(torc_tensor *t, void *user);

/* Registers a post-accumulate hook on leaf t (which must require grad):
 * data-parallel training starts a gradient's all-reduce from one while
 * backward goes on. Returns an id > 0 for torc_remove_hook, or -1. Not
 * called by torc_grad, which leaves .grad alone. */
TORC_API int torc_register_post_accumulate_grad_hook(
    torc_tensor *t, torc_post_accumulate_hook hook, void *user);

/* An end-of-backward callback: TORC_OK or an error status. */
typedef torc_status (*torc_backward_callback)(void *user);

/* Queues fn(user) to run once the running torc_backward has walked the
 * whole graph (PyTorch's Variable._execution_engine.queue_callback). Call
 * it from a hook during backward; queuing the same fn and user twice in
 * one backward queues it once. Callbacks run in the order queued, also
 * when backward failed (the first error is returned). TORC_ERR_AUTOGRAD
 * outside a backward; at most 16 per backward. */
TORC_API torc_status torc_autograd_queue_callback(torc_backward_callback fn,
                                                  void *user);

/* ---- modes (thread-local) ---- */

/* Grad modes: ENABLED records ops; NO_GRAD records nothing (evaluation, the
 * optimizer's update); INFERENCE records nothing and skips version bumps
 * too — the fastest path for evaluation, for tensors never used with
 * autograd afterwards. */
typedef enum torc_grad_mode {
  TORC_GRAD_ENABLED = 0,
  TORC_NO_GRAD = 1,
  TORC_INFERENCE = 2
} torc_grad_mode;

/* Sets this thread's grad mode and returns the previous one, so that
 * `torc_grad_mode m = torc_set_grad_mode(TORC_NO_GRAD); ...;
 * torc_set_grad_mode(m);` restores it. */
TORC_API torc_grad_mode torc_set_grad_mode(torc_grad_mode mode);

/* This thread's grad mode. */
TORC_API torc_grad_mode torc_get_grad_mode(void);

/* Anomaly mode (thread-local): every gradient computed in backward is
 * checked for NaN/Inf; the first one stops backward with an error naming
 * the forward op that produced the node and, for an op run inside
 * torc_module_forward, the module ("in module linear 'features.3'"): each
 * node records the module whose forward was running when the op ran.
 * Slower; for debugging. */
TORC_API void torc_set_anomaly_mode(int on);

/* 1 if anomaly mode is on for this thread. */
TORC_API int torc_get_anomaly_mode(void);

/* ---- gradcheck ---- */

/* A function of n tensors returning one tensor (a new reference). */
typedef torc_tensor *(*torc_fn)(torc_tensor *const *inputs, int n, void *user);

/* Checks fn's analytic gradients against central finite differences, in
 * f64, for every input that requires grad (inputs must be f64). Each
 * output element's gradient row is compared: |analytic - numeric| <=
 * atol + rtol * |numeric|. On mismatch TORC_ERR_AUTOGRAD names the input,
 * the element, both values. eps: the step (1e-6 is typical). */
TORC_API torc_status torc_gradcheck(torc_fn fn, void *user,
                                    torc_tensor *const *inputs, int n,
                                    double eps, double atol, double rtol);

TORC_END_DECLS

#endif /* TORC_AUTOGRAD_H */
