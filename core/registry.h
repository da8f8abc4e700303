/* core/registry.h — what every registry of named types shares (module
 * types, data sources, losses, optimizers, schedulers): a name-ordered,
 * owner-tracked table, the resolution of key/value pairs against a type's
 * key list, and the "key=value, ..." spec splitter; registry.c. Not
 * installed. */
#ifndef TORC_REGISTRY_H
#define TORC_REGISTRY_H

#include <pthread.h>

#include "torc/module.h"

struct torc__plugin;

/* ---- registries ---- */

typedef struct torc__oreg_entry {
  const void *type; /* a torc_loss_type, torc_optimizer_type, ... */
  const char *name;
  struct torc__plugin *owner; /* NULL: the core or the program */
} torc__oreg_entry;

/* A registry of named types kept in name order. `what` ("loss type"),
 * `fn` ("torc_loss_type_register") and `nobody` (who registered an entry
 * without owner: "the program") word its messages. */
typedef struct torc__oreg {
  const char *what, *fn, *nobody;
  pthread_mutex_t lock;
  torc__oreg_entry *e;
  int n, cap;
} torc__oreg;

#define TORC__OREG_INIT(what, fn, nobody)                                      \
  { what, fn, nobody, PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 }

/* Adds `type` under `name` (validated: letters, digits, '_'); a taken name
 * is refused naming its owner. */
torc_status torc__oreg_add(torc__oreg *r, struct torc__plugin *owner,
                           const void *type, const char *name);
/* Removes every type `owner` registered (NULL: nothing). */
void torc__oreg_remove_owner(torc__oreg *r, struct torc__plugin *owner);
const void *torc__oreg_find(torc__oreg *r, const char *name);
int torc__oreg_count(torc__oreg *r);
const void *torc__oreg_at(torc__oreg *r, int i);
/* The type registered as `name`, or NULL after an error "unknown WHAT
 * 'x' (did you mean 'y'?); the types are: ..." (`kind`: "loss",
 * "optimizer", "scheduler"). */
const void *torc__oreg_lookup(torc__oreg *r, const char *name,
                              const char *kind);

/* ---- keys and specs ---- */

/* Number of keys in a {NULL}-ended table (NULL: 0). */
int torc__keys_count(const torc_module_key *keys);

/* Resolves n key/value pairs for `type` against `keys` followed by
 * `extra` (either may be NULL): an unknown key (with the nearest name and
 * the list), a repeated one, a required one missing. out[j] (one slot per
 * key of keys then extra) receives the value given, else base[j] when
 * base is not NULL, else the key's default. Values are borrowed. */
torc_status torc__keys_resolve(const char *type, const torc_module_key *keys,
                                const torc_module_key *extra,
                                const char *const *k, const char *const *v,
                                int n, const char *const *base,
                                const char **out);

/* A "key=value, key=value" spec split in place: blanks and commas
 * separate pairs; a token without '=' continues the previous value
 * ("betas=0.9,0.999" is one pair). */
#define TORC__SPEC_MAX 64
typedef struct torc__spec {
  char *buf;
  int n;
  const char *k[TORC__SPEC_MAX], *v[TORC__SPEC_MAX];
  char *owned[TORC__SPEC_MAX];
} torc__spec;
torc_status torc__spec_split(torc__spec *s, const char *type, const char *spec);
void torc__spec_free(torc__spec *s);

#endif /* TORC_REGISTRY_H */
