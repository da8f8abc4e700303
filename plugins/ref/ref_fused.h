/* plugins/ref/ref_fused.h — the reference kernels of the fused ops
 * (kernels_fused.c): cross-entropy forward and backward and the SGD and
 * Adam steps. Their prototypes and table rows come from the op table
 * (ref_util.h, kernels_table.c). */
#ifndef TORC_REF_FUSED_H
#define TORC_REF_FUSED_H

#include "ref_nn.h"

#endif /* TORC_REF_FUSED_H */
