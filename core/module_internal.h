/* core/module_internal.h — what the module files (module*.c, layers*.c,
 * init.c, state*.c) share beyond include/torc/module.h: the module struct
 * itself, which only the module*.c files touch, and internal hooks. Not
 * installed. */
#ifndef TORC_MODULE_INTERNAL_H
#define TORC_MODULE_INTERNAL_H

#include "torc/init.h"
#include "torc/module.h"
#include "torc/state.h"

/* Sets the `from` offset of an add/concat node (module_containers.c checks
 * it in torc_sequential_append). */
void torc__module_set_from(torc_module *m, int from);

/* The init scheme set on m by torc_module_init ("default" unless set);
 * layers creating lazy parameters apply it. */
const char *torc__module_init_scheme(const torc_module *m);
void torc__module_set_init_scheme(torc_module *m, const char *scheme);

/* Applies m's init scheme (or the layer's PyTorch default when the scheme
 * is "default") to a freshly created weight [out, in, ...] and bias; the
 * layer passes its default-init function. Implemented in init.c. */
typedef torc_status (*torc__default_init_fn)(torc_module *m);

/* 1 if some parameter of a layer below m has not been created yet (lazy);
 * `names` (may be NULL) receives up to `max` paths of such modules. Layers
 * report laziness through torc__module_set_lazy. */
void torc__module_set_lazy(torc_module *m, int lazy);
int torc__module_lazy_paths(const torc_module *m, const char **names, int max);

/* Built-in module types, defined in layers.c: a NULL-terminated array. */
extern const torc_module_type *const torc__builtin_module_types[];

/* Re-initialises m's own parameters and buffers through its type's reset
 * slot (torc_module_vtable.reset), called by torc_module_init for every
 * module (module.c). TORC_OK for a type without the slot. */
torc_status torc__module_reset(torc_module *m, const char *scheme,
                               torc_generator *gen);

/* Replaces t's storage by a copy on dev / in dtype (keeping the tensor
 * object, so references held elsewhere follow); module.c. Prepared copies
 * are made first by torc__prepare_move, then committed, so a failure
 * leaves nothing half-moved. */
torc_tensor *torc__prepare_move(const torc_tensor *t, torc_device dev,
                                torc_dtype dtype);
void torc__commit_move(torc_tensor *t, torc_tensor *prepared);

/* Module types registered by a plugin (owner: the core's handle of the
 * plugin, as in torc__kernel_register), and their removal when it
 * unloads; module_types.c. torc_module_type_register registers with owner
 * NULL (the program itself). */
struct torc__plugin;
torc_status torc__module_type_register_owned(struct torc__plugin *owner,
                                             const torc_module_type *type);
void torc__module_types_unregister_owner(struct torc__plugin *owner);

/* The steps the module searches took on this thread so far (module.c's
 * name comparisons, a sequential's checks of what to free): building or running
 * a model of n layers costs O(n) of them. Exported for the tests. */
TORC_API uint64_t torc__module_work(void);

/* ---- the module struct (module*.c only) ---- */

/* A parameter or buffer (persistent: part of the state dict). */
typedef struct torc__module_slot {
  char *name;
  torc_tensor *t;
  int persistent;
} torc__module_slot;

/* A child under its local name. */
typedef struct torc__module_kid {
  char *name;
  torc_module *m;
} torc__module_kid;

enum { KIND_PLAIN, KIND_SEQUENTIAL, KIND_LIST, KIND_DICT, KIND_ADD,
       KIND_CONCAT };

typedef struct torc__predict torc__predict;

struct torc_module {
  char *type;
  const torc_module_vtable *vt;
  void *state;
  torc_module *parent;
  char *name;          /* local name under the parent */
  char *path;          /* cached dotted path, valid when path_gen matches */
  uint64_t path_gen;
  torc__module_slot *params, *bufs;
  int n_params, n_bufs;
  torc__module_kid *kids;
  int n_kids, cap_kids;
  int *names_ix;       /* the index of the names above, or NULL */
  size_t names_slots;  /* its size, a power of two */
  int training;
  int lazy;
  int kind;
  int from;            /* add/concat nodes */
  int concat_dim;
  torc_device dev;
  torc_dtype dtype;
  const char *init_scheme;
  torc__predict *predict; /* torc_module_predict's plans (predict.c) */
};

/* m's vtable (the layer files tell their own types apart by it). */
const torc_module_vtable *torc__module_vtable(const torc_module *m);

/* Runs fn(ctx) on behalf of module m, as torc_module_forward runs m's
 * forward for the profiler and the op scopes (m's path in messages and
 * traces): a sequential's fused calls run as their first layer's. */
torc_tensor *torc__module_run_as(torc_module *m,
                                 torc_tensor *(*fn)(void *ctx), void *ctx);

/* Frees torc_module_predict's state of a module (predict.c). */
void torc__predict_free(torc__predict *p);

/* "linear 'features.3'", or "sequential (the root module)", for messages;
 * returns buf (module.c). */
const char *torc__module_who(const torc_module *m, char *buf, size_t size);

/* The steps counted by torc__module_work, on this thread (module.c). */
extern _Thread_local uint64_t torc__module_steps;

/* The summary recorder (torc_module_summary, module_print.c): while
 * torc__summary_on is set on a thread, the forward wrapper (module.c)
 * appends a row per module run, in call order. */
typedef struct torc__summary_row {
  const torc_module *m;
  int depth;
  int ndim;
  int64_t shape[TORC_MAX_DIMS];
  int done;
  int64_t out_bytes;
} torc__summary_row;

typedef struct torc__summary {
  torc__summary_row *rows;
  int n, cap;
  int oom;
} torc__summary;

extern _Thread_local torc__summary *torc__summary_on;

#endif /* TORC_MODULE_INTERNAL_H */
