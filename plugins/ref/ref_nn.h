/* plugins/ref/ref_nn.h — prototypes of the reference kernels for the
 * neural-network and indexing ops (conv, pooling, normalisation, dropout,
 * embedding, gather/scatter, cat, pad, interpolate, topk). Their table rows
 * are in kernels_nn.inc, included by kernels_table.c. */
#ifndef TORC_REF_NN_H
#define TORC_REF_NN_H

#include "ref_util.h"

#endif /* TORC_REF_NN_H */
