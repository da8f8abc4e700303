/* plugins/ref/ref_index.h — the reference kernels for the indexing ops of
 * torc/indexing.h (gather, scatter, index_select, index_add, pad,
 * interpolate, topk). Their prototypes and table rows come from the op
 * table (ref_util.h, kernels_table.c). */
#ifndef TORC_REF_INDEX_H
#define TORC_REF_INDEX_H

#include "ref_util.h"

#endif /* TORC_REF_INDEX_H */
