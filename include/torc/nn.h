/* torc/nn.h — the neural-network and indexing ops (torch.nn.functional's
 * core): convolution, pooling, normalisation, dropout, embedding, and
 * gather/scatter, cat/stack/split, pad, interpolate, topk. Ownership and
 * errors as in ops.h. */
#ifndef TORC_NN_H
#define TORC_NN_H

#include "torc/tensor.h"

TORC_BEGIN_DECLS

TORC_END_DECLS

#endif /* TORC_NN_H */
