/* core/decode_internal.h — incremental decoding. While a decoder
 * (torc_decoder_step, include/torc/generate.h) runs a model on the next
 * tokens of sequences it has already seen, the modules that look back
 * along the sequence keep what the earlier tokens left in per-module
 * slots: attention its keys and values, a recurrent layer its state, a
 * positional embedding nothing but the offset. A module that finds no
 * decode active runs as usual. Not installed; the functions a test drives
 * a decode with are exported (TORC_API) for tests/test_transformer.c. */
#ifndef TORC_DECODE_INTERNAL_H
#define TORC_DECODE_INTERNAL_H

#include <stdint.h>

#include "torc/module.h"
#include "torc/tensor.h"

/* The most tensors one module keeps per decode. */
#define TORC__DECODE_SLOTS 4

typedef struct torc__decode torc__decode;

/* The decode running on this thread (set around each step's forward), or
 * NULL outside one. */
TORC_API torc__decode *torc__decode_active(void);

/* The number of tokens per sequence that earlier steps fed the model: the
 * position of this step's first token. */
TORC_API int64_t torc__decode_past(const torc__decode *d);

/* Tensor i (0 .. TORC__DECODE_SLOTS-1) module m kept at an earlier step,
 * borrowed from the decode, or NULL when it kept none (its first step). */
torc_tensor *torc__decode_get(torc__decode *d, const torc_module *m, int i);

/* Keeps t (detached from autograd; the decode holds its own reference and
 * releases the one it replaces) as module m's tensor i. t may be NULL to
 * drop it. Fails only for memory. */
torc_status torc__decode_put(torc__decode *d, const torc_module *m, int i,
                             const torc_tensor *t);

/* Marks the decode as unable to cache for module m: a module that sees
 * later tokens (non-causal attention, a bidirectional recurrent layer, a
 * convolution along the sequence) calls it, with its reason, when it runs
 * under a decode; the decoder then recomputes each step from the whole
 * sequence and reports the reason once. Returns TORC_OK. */
torc_status torc__decode_uncacheable(torc__decode *d, const torc_module *m,
                                     const char *why);

/* A new decode with nothing cached (NULL for memory), its cache freed by
 * torc__decode_free. */
TORC_API torc__decode *torc__decode_new(void);
TORC_API void torc__decode_free(torc__decode *d);

/* Drops every module's tensors and the position: the next step starts new
 * sequences. */
TORC_API void torc__decode_clear(torc__decode *d);

/* Makes d the decode of this thread (NULL: none) and returns the one it
 * replaces, for the caller to put back. */
TORC_API torc__decode *torc__decode_set_active(torc__decode *d);

/* Advances the position by n tokens (after a step's forward). */
TORC_API void torc__decode_advance(torc__decode *d, int64_t n);

/* The reason the first module that called torc__decode_uncacheable gave,
 * with the module's path, or NULL. */
TORC_API const char *torc__decode_why_uncacheable(const torc__decode *d);

#endif
