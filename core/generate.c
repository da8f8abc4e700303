/* core/generate.c — the decoder (torc/generate.h): the token history of
 * each sequence on the host, a decode cache (decode_internal.h) that the
 * looking-back modules fill, and the window kept within the model's
 * context; and sampling (temperature, top-k) on the host with a
 * splitmix64 stream, so that a seed gives the same text on any backend.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"
#include "internal.h"
#include "torc/autograd.h"
#include "torc/generate.h"
#include "torc/indexing.h"
#include "torc/ops.h"

/* The module types a cached step can run: position-wise ones see only
 * their own position (the new tokens alone give the same outputs), and
 * the looking-back ones keep what they need in the decode cache (or say
 * they cannot, through torc__decode_uncacheable). */
static const char *const positionwise[] = {
    "linear",     "embedding", "layernorm",  "dropout",   "identity",
    "relu",       "leaky_relu", "elu",       "gelu",      "silu",
    "sigmoid",    "tanh",      "softplus",   "celu",      "hardtanh",
    "relu6",      "prelu",     "hardswish",  "hardsigmoid", "softsign",
    "selu",       "mish",      NULL};
static const char *const lookback[] = {
    "multihead_attention", "transformer_encoder_layer",
    "positional_embedding", "lstm", "gru", "rnn", "last_step", NULL};

static int listed(const char *const *list, const char *name) {
  for (int i = 0; list[i]; i++)
    if (strcmp(list[i], name) == 0)
      return 1;
  return 0;
}

/* Whether every module of m can run a cached step; otherwise writes why. */
static int cacheable(const torc_module *m, char *why, size_t size) {
  const char *t = torc_module_type_name(m);
  if (listed(positionwise, t) || listed(lookback, t))
    return 1;
  if (strcmp(t, "sequential") == 0) {
    for (int i = 0; i < torc_module_child_count(m); i++)
      if (!cacheable(torc_module_child_at(m, i), why, size))
        return 0;
    return 1;
  }
  const char *p = torc_module_path(m);
  snprintf(why, size,
           "%s (%s) is not known to see only earlier positions, so each "
           "step runs the model on the whole window",
           p && p[0] ? p : "the model", t);
  return 0;
}

struct torc_decoder {
  torc_module *m;
  int64_t context;
  int class_dim;
  torc__decode *cache;
  int cached;      /* 1: cached steps; 0: whole-window steps */
  char why[600];   /* why not cached */
  int64_t n;       /* sequences (0 until the first step) */
  int64_t len, cap; /* tokens per sequence in hist */
  int64_t *hist;   /* [n][cap], row-major */
};

torc_decoder *torc_decoder_new(torc_module *m, int64_t context,
                               int class_dim) {
  if (m == NULL) {
    torc__null_input("torc_decoder_new");
    return NULL;
  }
  if (context < 0 || context == 1 || (class_dim != -1 && class_dim != 1)) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_decoder_new: context is %lld and class_dim %d; "
                   "give context 0 (no limit) or at least 2, and class_dim "
                   "-1 (logits [N, T, V]) or 1 ([N, V, T])",
                   (long long)context, class_dim);
    return NULL;
  }
  torc_decoder *d = torc__calloc(1, sizeof *d);
  if (d == NULL || (d->cache = torc__decode_new()) == NULL) {
    torc__free(d);
    torc_set_error(TORC_ERR_OOM, "out of memory for a decoder");
    return NULL;
  }
  d->m = m;
  d->context = context;
  d->class_dim = class_dim;
  d->cached = cacheable(m, d->why, sizeof d->why);
  return d;
}

void torc_decoder_free(torc_decoder *d) {
  if (d == NULL)
    return;
  torc__decode_free(d->cache);
  torc__free(d->hist);
  torc__free(d);
}

void torc_decoder_reset(torc_decoder *d) {
  if (d == NULL)
    return;
  torc__decode_clear(d->cache);
  torc__free(d->hist); /* sized for n sequences, which may change */
  d->hist = NULL;
  d->n = 0;
  d->len = 0;
  d->cap = 0;
}

void torc_decoder_use_cache(torc_decoder *d, int on) {
  if (d == NULL)
    return;
  torc_decoder_reset(d);
  if (!on) {
    d->cached = 0;
    snprintf(d->why, sizeof d->why, "the cache is turned off "
                                    "(torc_decoder_use_cache)");
  } else {
    d->why[0] = '\0';
    d->cached = cacheable(d->m, d->why, sizeof d->why);
  }
}

int torc_decoder_cached(const torc_decoder *d, const char **why) {
  if (why)
    *why = d && !d->cached ? d->why : NULL;
  return d ? d->cached : 0;
}

/* Appends t tokens per sequence (ids row-major [n, t]) to the history. */
static torc_status remember(torc_decoder *d, const int64_t *ids, int64_t t) {
  if (d->len + t > d->cap) {
    int64_t cap = d->cap ? d->cap : 64;
    while (cap < d->len + t)
      cap *= 2;
    int64_t *h = torc__calloc((size_t)(d->n * cap), sizeof *h);
    if (h == NULL)
      return torc_set_error(TORC_ERR_OOM,
                            "out of memory for %lld tokens of history",
                            (long long)(d->n * cap));
    for (int64_t i = 0; d->len > 0 && i < d->n; i++)
      memcpy(h + i * cap, d->hist + i * d->cap,
             (size_t)d->len * sizeof *h);
    torc__free(d->hist);
    d->hist = h;
    d->cap = cap;
  }
  for (int64_t i = 0; i < d->n; i++)
    memcpy(d->hist + i * d->cap + d->len, ids + i * t,
           (size_t)t * sizeof *ids);
  d->len += t;
  return TORC_OK;
}

/* The last `count` tokens of every sequence as i64 [n, count]. */
static torc_tensor *recent(const torc_decoder *d, int64_t count) {
  int64_t *v = torc__calloc((size_t)(d->n * count), sizeof *v);
  if (v == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for the decoder's window");
    return NULL;
  }
  for (int64_t i = 0; i < d->n; i++)
    memcpy(v + i * count, d->hist + i * d->cap + d->len - count,
           (size_t)count * sizeof *v);
  torc_tensor *x = torc_from_host(v, TORC_SHAPE(d->n, count), TORC_I64,
                                  torc_module_device(d->m));
  torc__free(v);
  return x;
}

/* Runs the model on x, under the cache when `cached`; the logits as
 * f32 [n, T, V]. */
static torc_tensor *run_model(torc_decoder *d, const torc_tensor *x,
                              int cached) {
  torc__decode *old = torc__decode_set_active(cached ? d->cache : NULL);
  torc_tensor *y = torc_module_forward(d->m, x);
  torc__decode_set_active(old);
  if (y == NULL)
    return NULL;
  if (torc_ndim(y) != 3 || torc_size(y, 0) != torc_size(x, 0) ||
      torc_size(y, d->class_dim == 1 ? 2 : 1) != torc_size(x, 1)) {
    char a[96], b[96];
    torc_set_error(TORC_ERR_SHAPE,
                   "decoder: the model turned token ids %s into %s; a "
                   "language model gives logits %s (class_dim %d)",
                   torc__shape_str(torc_shape(x), torc_ndim(x), a, sizeof a),
                   torc__shape_str(torc_shape(y), torc_ndim(y), b, sizeof b),
                   d->class_dim == 1 ? "[N, V, T]" : "[N, T, V]",
                   d->class_dim);
    return NULL;
  }
  if (d->class_dim == 1)
    y = torc_transpose(y, 1, 2);
  return torc_to_dtype(torc_to(y, TORC_CPU), TORC_F32);
}

torc_tensor *torc_decoder_step(torc_decoder *d, const torc_tensor *ids) {
  if (d == NULL || ids == NULL) {
    torc__null_input("torc_decoder_step");
    return NULL;
  }
  char a[96];
  if (torc_dtype_of(ids) != TORC_I64 || torc_ndim(ids) != 2 ||
      torc_size(ids, 1) < 1 || torc_size(ids, 0) < 1) {
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_decoder_step: ids must be i64 [N, T] with N, T >= 1 "
                   "(N sequences, T new tokens each), got %s %s",
                   torc_dtype_name(torc_dtype_of(ids)),
                   torc__shape_str(torc_shape(ids), torc_ndim(ids), a,
                                   sizeof a));
    return NULL;
  }
  int64_t n = torc_size(ids, 0), t = torc_size(ids, 1);
  if (d->context && t > d->context) {
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_decoder_step: ids %s holds %lld new tokens, more "
                   "than the model's window of %lld; feed at most %lld at "
                   "once (the earlier ones cannot be seen anyway)",
                   torc__shape_str(torc_shape(ids), 2, a, sizeof a),
                   (long long)t, (long long)d->context,
                   (long long)d->context);
    return NULL;
  }
  if (d->n && n != d->n) {
    torc_set_error(TORC_ERR_SHAPE,
                   "torc_decoder_step: the decoder holds %lld sequences but "
                   "ids %s has %lld; give %lld, or torc_decoder_reset first",
                   (long long)d->n,
                   torc__shape_str(torc_shape(ids), 2, a, sizeof a),
                   (long long)n, (long long)d->n);
    return NULL;
  }
  int64_t *v = torc__calloc((size_t)(n * t), sizeof *v);
  if (v == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory for %lld token ids",
                   (long long)(n * t));
    return NULL;
  }
  torc_status st = torc_to_host(ids, v, (size_t)(n * t) * sizeof *v);
  d->n = n;
  if (st == TORC_OK)
    st = remember(d, v, t);
  torc__free(v);
  if (st != TORC_OK)
    return NULL;

  int scope = torc_scope_begin();
  torc_grad_mode gm = torc_set_grad_mode(TORC_NO_GRAD);
  torc_tensor *y = NULL;
  int64_t past = torc__decode_past(d->cache);
  if (d->cached) {
    /* the new tokens alone, or, past the context, a fresh start from
     * the last context / 2 tokens */
    int64_t feed = t;
    if (d->context && past + t > d->context) {
      torc__decode_clear(d->cache);
      feed = d->context / 2 > t ? d->context / 2 : t;
      if (feed > d->len)
        feed = d->len;
      if (feed > d->context)
        feed = d->context;
    }
    torc_tensor *x = recent(d, feed);
    y = x ? run_model(d, x, 1) : NULL;
    const char *why = torc__decode_why_uncacheable(d->cache);
    if (why) { /* a module cannot cache: whole windows from now on */
      snprintf(d->why, sizeof d->why, "%s", why);
      d->cached = 0;
      torc__decode_clear(d->cache);
      y = NULL;
    } else if (y) {
      torc__decode_advance(d->cache, feed);
    }
  }
  if (!d->cached) {
    int64_t w = d->context && d->len > d->context ? d->context : d->len;
    torc_tensor *x = recent(d, w);
    y = x ? run_model(d, x, 0) : NULL;
  }
  if (y)
    y = torc_contiguous(torc_narrow(y, 1, torc_size(y, 1) - t, t));
  torc_set_grad_mode(gm);
  if (y)
    torc_scope_keep(y);
  torc_scope_end(scope);
  return y;
}

/* ---- sampling ---- */

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

typedef struct cand {
  float logit;
  int64_t id;
} cand;

static int by_logit_desc(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->logit != y->logit)
    return x->logit < y->logit ? 1 : -1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Draws a token from logits[0..v): argmax at temperature 0, else softmax
 * of logits / temperature over the top_k largest (all when 0). */
static int64_t draw(const float *logits, int64_t v, double temperature,
                    int64_t top_k, uint64_t *rng, cand *c) {
  for (int64_t i = 0; i < v; i++)
    c[i] = (cand){logits[i], i};
  if (temperature == 0) {
    int64_t best = 0;
    for (int64_t i = 1; i < v; i++)
      if (logits[i] > logits[best])
        best = i;
    return best;
  }
  int64_t k = top_k > 0 && top_k < v ? top_k : v;
  qsort(c, (size_t)v, sizeof *c, by_logit_desc);
  double mx = c[0].logit, total = 0;
  for (int64_t i = 0; i < k; i++)
    total += exp((c[i].logit - mx) / temperature);
  double u = (double)(splitmix64(rng) >> 11) * 0x1.0p-53 * total, acc = 0;
  for (int64_t i = 0; i < k; i++) {
    acc += exp((c[i].logit - mx) / temperature);
    if (u < acc)
      return c[i].id;
  }
  return c[k - 1].id;
}

torc_generate_options torc_generate_options_default(void) {
  torc_generate_options o;
  memset(&o, 0, sizeof o);
  o.max_new_tokens = 100;
  o.temperature = 1.0;
  return o;
}

torc_status torc_generate(torc_decoder *d, const int64_t *prompt,
                          int64_t n_prompt, const torc_generate_options *o,
                          int64_t *out, int64_t *n_out) {
  if (d == NULL || prompt == NULL || o == NULL || out == NULL)
    return torc__null_input("torc_generate");
  if (n_out)
    *n_out = 0;
  if (n_prompt < 1 || o->max_new_tokens < 1 || !(o->temperature >= 0) ||
      !isfinite(o->temperature) || o->top_k < 0)
    return torc_set_error(
        TORC_ERR_INVALID,
        "torc_generate: prompt of %lld tokens, max_new_tokens %lld, "
        "temperature %g, top_k %lld; give a prompt of at least one token, "
        "max_new_tokens >= 1, a finite temperature >= 0 (0 = greedy) and "
        "top_k >= 0 (0 = all)",
        (long long)n_prompt, (long long)o->max_new_tokens, o->temperature,
        (long long)o->top_k);
  torc_module *m = d->m;
  torc_decoder_reset(d);
  int was_training = torc_module_is_training(m);
  torc_module_train(m, 0);
  uint64_t rng = o->seed;
  cand *c = NULL;
  float *row = NULL;
  torc_status st = TORC_OK;
  int64_t v = 0, made = 0;
  /* a prompt longer than the window: only its last window is seen */
  int64_t skip = d->context && n_prompt > d->context ? n_prompt - d->context
                                                     : 0;
  const int64_t *feed = prompt + skip;
  int64_t n_feed = n_prompt - skip, tok;
  while (made < o->max_new_tokens) {
    int scope = torc_scope_begin();
    torc_tensor *ids = torc_from_host(feed, TORC_SHAPE(1, n_feed), TORC_I64,
                                      TORC_CPU);
    torc_tensor *y = ids ? torc_decoder_step(d, ids) : NULL;
    if (y && v == 0) {
      v = torc_size(y, 2);
      c = torc__calloc((size_t)v, sizeof *c);
      row = torc__calloc((size_t)v, sizeof *row);
      if (c == NULL || row == NULL)
        st = torc_set_error(TORC_ERR_OOM,
                            "out of memory for %lld logits", (long long)v);
    }
    if (y == NULL)
      st = torc_last_status();
    else if (st == TORC_OK)
      st = torc_to_host(torc_select(torc_select(y, 0, 0), 0, n_feed - 1),
                        row, (size_t)v * sizeof *row);
    torc_scope_end(scope);
    if (st != TORC_OK)
      break;
    tok = draw(row, v, o->temperature, o->top_k, &rng, c);
    out[made++] = tok;
    if (n_out)
      *n_out = made;
    if (o->on_token && o->on_token(o->user, tok))
      break;
    feed = &tok;
    n_feed = 1;
  }
  torc__free(c);
  torc__free(row);
  torc_module_train(m, was_training);
  return st;
}
