/* core/decode.c — the per-module cache of an incremental decode
 * (decode_internal.h): a short list of (module, tensors) entries, looked up
 * linearly (a model has tens of modules that keep anything), and the
 * thread's active decode.
 */
#include <stdio.h>
#include <string.h>

#include "decode_internal.h"
#include "internal.h"
#include "torc/autograd.h"

typedef struct decode_entry {
  const torc_module *m;
  torc_tensor *t[TORC__DECODE_SLOTS];
} decode_entry;

struct torc__decode {
  decode_entry *e;
  int n, cap;
  int64_t past;
  char why[512]; /* the first uncacheable module's reason, or "" */
};

static _Thread_local torc__decode *tl_active;

torc__decode *torc__decode_new(void) {
  torc__decode *d = torc__calloc(1, sizeof *d);
  if (d == NULL)
    torc_set_error(TORC_ERR_OOM, "out of memory for a decode's cache");
  return d;
}

void torc__decode_clear(torc__decode *d) {
  if (d == NULL)
    return;
  for (int i = 0; i < d->n; i++)
    for (int j = 0; j < TORC__DECODE_SLOTS; j++)
      torc_release(d->e[i].t[j]);
  d->n = 0;
  d->past = 0;
  d->why[0] = '\0';
}

void torc__decode_free(torc__decode *d) {
  if (d == NULL)
    return;
  torc__decode_clear(d);
  torc__free(d->e);
  torc__free(d);
}

torc__decode *torc__decode_active(void) { return tl_active; }

torc__decode *torc__decode_set_active(torc__decode *d) {
  torc__decode *old = tl_active;
  tl_active = d;
  return old;
}

int64_t torc__decode_past(const torc__decode *d) { return d ? d->past : 0; }

void torc__decode_advance(torc__decode *d, int64_t n) {
  if (d)
    d->past += n;
}

static decode_entry *find(torc__decode *d, const torc_module *m) {
  for (int i = 0; i < d->n; i++)
    if (d->e[i].m == m)
      return &d->e[i];
  return NULL;
}

torc_tensor *torc__decode_get(torc__decode *d, const torc_module *m, int i) {
  if (d == NULL || i < 0 || i >= TORC__DECODE_SLOTS)
    return NULL;
  decode_entry *e = find(d, m);
  return e ? e->t[i] : NULL;
}

torc_status torc__decode_put(torc__decode *d, const torc_module *m, int i,
                             const torc_tensor *t) {
  if (d == NULL || i < 0 || i >= TORC__DECODE_SLOTS)
    return torc_set_error(TORC_ERR_INVALID,
                          "decode cache: slot %d of %d (internal error)", i,
                          TORC__DECODE_SLOTS);
  decode_entry *e = find(d, m);
  if (e == NULL) {
    if (d->n == d->cap) {
      int cap = d->cap ? 2 * d->cap : 16;
      decode_entry *ne = torc__realloc(d->e, (size_t)cap * sizeof *ne);
      if (ne == NULL)
        return torc_set_error(TORC_ERR_OOM,
                              "out of memory for a decode's cache");
      d->e = ne;
      d->cap = cap;
    }
    e = &d->e[d->n++];
    memset(e, 0, sizeof *e);
    e->m = m;
  }
  torc_tensor *keep = NULL;
  if (t) {
    /* detached, with a reference of the cache's own: the cache outlives
     * the step's scope */
    int tok = torc_scope_begin();
    keep = torc_retain(torc_detach(t));
    torc_scope_end(tok);
    if (keep == NULL)
      return torc_last_status();
  }
  torc_release(e->t[i]);
  e->t[i] = keep;
  return TORC_OK;
}

torc_status torc__decode_uncacheable(torc__decode *d, const torc_module *m,
                                     const char *why) {
  if (d && d->why[0] == '\0')
    snprintf(d->why, sizeof d->why, "%s (%s): %s",
             torc_module_path(m)[0] ? torc_module_path(m) : "the model",
             torc_module_type_name(m), why);
  return TORC_OK;
}

const char *torc__decode_why_uncacheable(const torc__decode *d) {
  return d && d->why[0] ? d->why : NULL;
}
