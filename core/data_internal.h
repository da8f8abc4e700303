/* core/data_internal.h — what the data files (data.c, transform.c,
 * loader.c, data_config.c) and plugin.c share beyond include/torc/data.h.
 * Not installed. */
#ifndef TORC_DATA_INTERNAL_H
#define TORC_DATA_INTERNAL_H

#include "torc/data.h"

/* Data source types registered by a plugin (owner: the core's handle of
 * the plugin, as for module types), and their removal when it unloads or
 * its init fails; data.c. torc_data_source_register registers with owner
 * NULL (the program itself). */
struct torc__plugin;
torc_status torc__data_source_register_owned(struct torc__plugin *owner,
                                             const torc_data_source_type *type);
void torc__data_sources_unregister_owner(struct torc__plugin *owner);

/* 1 if `k` is a key [data.*] sections keep for the loader (source,
 * transform, batch_size, ...): a source cannot declare it; data.c. */
int torc__data_loader_key(const char *k);

/* The keys of the type a dataset was opened from (terminated by {NULL}),
 * for the config layer; data.c. */
const torc_data_source_type *torc__dataset_type(const torc_dataset *ds);

/* A dataset over `handle`, an open dataset of type t (not registered);
 * closing it calls t->close. */
torc_dataset *torc__dataset_wrap(const torc_data_source_type *t,
                                 void *handle, const char *describe);

/* Gives the loader ownership of its dataset and transform (from config:
 * freed by torc_loader_free); loader.c. */
void torc__loader_own(torc_loader *ld, torc_dataset *ds, torc_transform *t);

/* Untracked (never scope-owned) transform of a cpu sample; transform.c.
 * torc_transform_apply is this plus the scope. */
torc_tensor *torc__transform_run(const torc_transform *t,
                                 const torc_tensor *x, uint64_t seed,
                                 int64_t epoch, int64_t index);

/* t as a contiguous cpu tensor (t retained when it already is; otherwise a
 * strided copy on the host, no kernel needed), and the host address of a
 * cpu tensor's first element; transform.c. */
torc_tensor *torc__host_contiguous(const torc_tensor *t);
void *torc__host_data(const torc_tensor *t);

/* splitmix64: mixes (seed, epoch) into one Philox key; transform.c and
 * loader.c use it so the sample order and the augmentation randomness
 * derive from (seed, epoch[, index]) only. */
static inline uint64_t torc__splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Philox keys: one for the epoch's order, one for its augmentations, so
 * the two streams never overlap. */
static inline uint64_t torc__data_key(uint64_t seed, int64_t epoch,
                                      uint64_t stream) {
  return torc__splitmix64(torc__splitmix64(seed ^ (stream << 56)) ^
                          (uint64_t)epoch);
}

#endif /* TORC_DATA_INTERNAL_H */
