/* plugins/ref/ref_fused.h — prototypes of the reference kernels of the
 * fused ops (kernels_fused.c): cross-entropy forward and backward and the
 * SGD and Adam steps. Their table rows are in kernels_fused.inc, included
 * by kernels_table.c. */
#ifndef TORC_REF_FUSED_H
#define TORC_REF_FUSED_H

#include "ref_nn.h"

int torc_ref_k_cross_entropy(const torc_kernel_args *a);
int torc_ref_k_cross_entropy_backward(const torc_kernel_args *a);
int torc_ref_k_sgd_step(const torc_kernel_args *a);
int torc_ref_k_adam_step(const torc_kernel_args *a);

#endif /* TORC_REF_FUSED_H */
