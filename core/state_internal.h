/* core/state_internal.h — what the state dict files (state.c,
 * state_load.c, checkpoint.c) share beyond torc/state.h. Not installed. */
#ifndef TORC_STATE_INTERNAL_H
#define TORC_STATE_INTERNAL_H

#include <string.h>

#include "torc/safetensors.h"
#include "torc/state.h"

struct torc_state_dict {
  int n, cap;
  char **names;
  torc_tensor **tensors; /* one reference each */
  int *slots;            /* open addressing over names: index or -1 */
  size_t n_slots;        /* a power of two, 2 * cap; 0 before the first set */
  int n_meta, meta_cap;
  char **meta_keys, **meta_values;
};

/* Index of `name` in sd, or -1 (state.c). */
int torc__sd_find(const torc_state_dict *sd, const char *name);

/* Adds every parameter and persistent buffer below m to out under pfx, in
 * PyTorch's state_dict order (state.c). */
torc_status torc__sd_walk(const torc_module *m, const char *pfx,
                          torc_state_dict *out);

/* a + b + c, malloc'ed (NULL on OOM; state.c). */
char *torc__sd_join3(const char *a, const char *b, const char *c);

/* Every tensor and metadata entry of an open file, tensors on dev
 * (state.c). */
torc_state_dict *torc__sd_read(const torc_safetensors *st, torc_device dev);

/* 1 if sd carries the checkpoint tag (state_load.c). */
int torc__sd_is_checkpoint(const torc_state_dict *sd);

/* Loads sd's "model." part (then opts->prefix within it) into m; `what`
 * names the caller in messages (state_load.c). */
torc_status torc__sd_load_model_part(torc_module *m, const torc_state_dict *sd,
                                     const torc_load_opts *opts,
                                     torc_load_report *report,
                                     const char *what);

/* 1 if s starts with p. */
static inline int starts_with(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

#endif /* TORC_STATE_INTERNAL_H */
