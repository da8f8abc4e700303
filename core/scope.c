/* core/scope.c — scopes: a per-thread stack that takes ownership of every
 * tensor returned while it is open, so a training step's garbage goes away
 * in one torc_scope_end. Tensors are recorded in a flat array; each scope
 * remembers where it began.
 */
#include <stdlib.h>

#include "internal.h"

#define MAX_SCOPE_DEPTH 64

static _Thread_local torc_tensor **owned;
static _Thread_local size_t n_owned, cap_owned;
static _Thread_local size_t scope_start[MAX_SCOPE_DEPTH];
static _Thread_local int depth;
static _Thread_local int suspended;

void torc__scope_suspend(int delta) { suspended += delta; }

/* Room for k more owned tensors: 0, or -1 with the error set. */
static int reserve(size_t k) {
  if (n_owned + k <= cap_owned)
    return 0;
  size_t cap = cap_owned ? cap_owned : 256;
  while (cap < n_owned + k)
    cap *= 2;
  torc_tensor **p = torc__realloc(owned, cap * sizeof *p);
  if (p == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory recording a tensor in the "
                                 "open scope (%zu tensors held)",
                   n_owned);
    return -1;
  }
  owned = p;
  cap_owned = cap;
  return 0;
}

torc_tensor *torc__ret(torc_tensor *t) {
  if (t == NULL || depth == 0 || suspended > 0)
    return t;
  if (reserve(1) != 0) {
    /* Cannot record it: the call fails, as any other out-of-memory
     * (handing the caller a reference it does not expect to own would
     * leak it). */
    torc_release(t);
    return NULL;
  }
  owned[n_owned++] = t;
  return t;
}

torc_status torc__ret_all(torc_tensor **ts, int n) {
  if (depth == 0 || suspended > 0)
    return TORC_OK;
  if (reserve((size_t)n) != 0) {
    for (int i = 0; i < n; i++) {
      torc_release(ts[i]);
      ts[i] = NULL;
    }
    return TORC_ERR_OOM;
  }
  for (int i = 0; i < n; i++)
    if (ts[i])
      owned[n_owned++] = ts[i];
  return TORC_OK;
}

int torc_scope_begin(void) {
  if (depth == MAX_SCOPE_DEPTH) {
    torc_set_error(TORC_ERR_INVALID,
                   "torc_scope_begin: more than %d nested scopes; is a "
                   "torc_scope_end missing?",
                   MAX_SCOPE_DEPTH);
    return -1;
  }
  scope_start[depth] = n_owned;
  return depth++;
}

void torc_scope_end(int token) {
  if (token < 0 || token >= depth)
    return;
  size_t start = scope_start[token];
  for (size_t i = n_owned; i > start; i--)
    torc_release(owned[i - 1]);
  n_owned = start;
  depth = token;
  if (depth == 0) {
    torc__free(owned);
    owned = NULL;
    n_owned = cap_owned = 0;
  }
}

torc_tensor *torc_scope_keep(torc_tensor *t) {
  if (t == NULL || depth == 0)
    return t;
  for (size_t i = n_owned; i > 0; i--) {
    if (owned[i - 1] != t)
      continue;
    /* Find the scope that owns slot i-1; hand the reference to the scope
     * around it (or the caller when it is the outermost). */
    int s = depth - 1;
    while (s > 0 && scope_start[s] > i - 1)
      s--;
    memmove(&owned[i - 1], &owned[i], (n_owned - i) * sizeof *owned);
    n_owned--;
    for (int k = s + 1; k < depth; k++)
      scope_start[k]--;
    if (s > 0) { /* re-record in the enclosing scope, at its end */
      size_t pos = scope_start[s];
      memmove(&owned[pos + 1], &owned[pos], (n_owned - pos) * sizeof *owned);
      owned[pos] = t;
      n_owned++;
      for (int k = s; k < depth; k++)
        scope_start[k]++;
    }
    return t;
  }
  return t;
}

void torc__scope_thread_cleanup(void) {
  if (depth > 0)
    torc_scope_end(0);
}
