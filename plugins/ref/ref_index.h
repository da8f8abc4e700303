/* plugins/ref/ref_index.h — prototypes of the reference kernels for the
 * indexing ops of torc/indexing.h (gather, scatter, index_select,
 * index_add, pad, interpolate, topk). Their table rows are in
 * kernels_index.inc, included by kernels_table.c. */
#ifndef TORC_REF_INDEX_H
#define TORC_REF_INDEX_H

#include "ref_util.h"

#define REF_INDEX_KERNEL_LIST(X)                                               \
  X(gather) X(scatter) X(index_select) X(index_add) X(pad) X(pad_backward)     \
  X(interpolate) X(interpolate_backward) X(topk)

#define REF_INDEX_DECLARE_KERNEL(name)                                         \
  int torc_ref_k_##name(const torc_kernel_args *a);
REF_INDEX_KERNEL_LIST(REF_INDEX_DECLARE_KERNEL)
#undef REF_INDEX_DECLARE_KERNEL

#endif /* TORC_REF_INDEX_H */
