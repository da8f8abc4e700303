/* core/tensor_internal.h — what tensor.c and tensor_views.c share beyond
 * internal.h. Not installed. */
#ifndef TORC_TENSOR_INTERNAL_H
#define TORC_TENSOR_INTERNAL_H

#include "internal.h"

/* Returns NULL from the calling function, after the error for a NULL
 * input naming `fn`, when t is NULL. */
#define CHECK_IN(t, fn)                                                        \
  do {                                                                         \
    if ((t) == NULL) {                                                         \
      torc__null_input(fn);                                                    \
      return NULL;                                                             \
    }                                                                          \
  } while (0)

#endif /* TORC_TENSOR_INTERNAL_H */
