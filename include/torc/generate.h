/* torc/generate.h — running a sequence model one token at a time:
 * a decoder that feeds a model the next tokens of sequences it has seen
 * (keeping attention's keys and values and recurrent states between
 * steps, so each new token costs one position's work), and sampling text
 * from a language model with temperature and top-k.
 *
 * The model takes token ids i64 [N, T] and returns logits per position,
 * [N, T, V] (V the vocabulary; class_dim -1), or [N, V, T] (class_dim 1).
 * Models made of embedding, positional_embedding, causal attention and
 * transformer layers, unidirectional lstm/gru/rnn, and position-wise
 * layers (linear, layernorm, dropout, activations) are run with the cache;
 * any other model is run on the whole window at each step (the same
 * logits while the sequences fit in the window), and torc_decoder_cached
 * says why.
 */
#ifndef TORC_GENERATE_H
#define TORC_GENERATE_H

#include <stdint.h>

#include "torc/module.h"
#include "torc/tensor.h"

TORC_BEGIN_DECLS

typedef struct torc_decoder torc_decoder;

/* A decoder for model m (borrowed: it must outlive the decoder), which
 * runs m in eval mode without autograd. `context` is the longest sequence
 * the model sees (a positional embedding's max_len; the training window):
 * when a sequence grows past it, the decoder re-reads its last
 * context / 2 tokens and goes on from there; 0 = no limit. class_dim is
 * -1 or 1 (where the vocabulary is in the model's output). NULL with the
 * error for a bad argument or memory. */
TORC_API torc_decoder *torc_decoder_new(torc_module *m, int64_t context,
                                        int class_dim);

/* Frees d and its cache. NULL is ignored. */
TORC_API void torc_decoder_free(torc_decoder *d);

/* Forgets every sequence: the next step starts new ones. */
TORC_API void torc_decoder_reset(torc_decoder *d);

/* Feeds ids, i64 [N, T] on the cpu (N sequences, T >= 1 new tokens each;
 * N fixed from the first step after a reset), as the next tokens of the
 * sequences (T at most the decoder's context, when it has one), and
 * returns the logits of those T positions, f32 [N, T, V]
 * whatever the model's class_dim (a new reference, or scope-owned), or
 * NULL with the error. */
TORC_API torc_tensor *torc_decoder_step(torc_decoder *d,
                                        const torc_tensor *ids);

/* 1 when d's steps use the cache; 0 when it recomputes each step from the
 * whole window, with the reason in *why (may be NULL; valid until d is
 * freed). Known once the first step ran (1 before it). */
TORC_API int torc_decoder_cached(const torc_decoder *d, const char **why);

/* Turns the cache off (on = 0: every step runs the model on the whole
 * window, as for a model the decoder cannot cache) or back on (on = 1,
 * where the model allows it). Forgets the sequences, as torc_decoder_reset.
 * For checking a model's cached steps against whole windows. */
TORC_API void torc_decoder_use_cache(torc_decoder *d, int on);

/* Sampling options for torc_generate. */
typedef struct torc_generate_options {
  int64_t max_new_tokens; /* how many tokens to add (>= 1) */
  double temperature;     /* > 0 divides the logits; 0 = greedy (argmax) */
  int64_t top_k;          /* sample among the k likeliest; 0 = all */
  uint64_t seed;          /* the sampler's seed */
  /* Called with each new token as it is drawn (may be NULL); a non-zero
   * return stops generation there. */
  int (*on_token)(void *user, int64_t token);
  void *user;
} torc_generate_options;

/* The defaults: 100 tokens, temperature 1, top_k 0, seed 0, no
 * callback. */
TORC_API torc_generate_options torc_generate_options_default(void);

/* Continues the prompt (n_prompt >= 1 token ids; of a prompt longer than
 * the decoder's context only the last context tokens are fed) with up to
 * o->max_new_tokens tokens drawn from the next-token distribution of d's
 * model, written to out (room for max_new_tokens); *n_out (may be NULL)
 * receives how many were written. Resets d first, and runs its model in
 * eval mode (restoring the mode after). Errors: TORC_ERR_INVALID for a
 * bad option (named, with its value), and the model's own errors. */
TORC_API torc_status torc_generate(torc_decoder *d, const int64_t *prompt,
                                   int64_t n_prompt,
                                   const torc_generate_options *o,
                                   int64_t *out, int64_t *n_out);

TORC_END_DECLS

#endif /* TORC_GENERATE_H */
