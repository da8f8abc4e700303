/* torc/state.h — state dicts and checkpoints.
 *
 * A state dict is an ordered map of names to tensors plus string metadata:
 * what model.state_dict() returns in PyTorch, what a safetensors file
 * holds, and what a checkpoint is made of. A checkpoint is a state dict
 * with conventions: the model under "model.", optimizer state under
 * "optimizer.", scheduler state under "scheduler.", and metadata for the
 * epoch, step, data-loader position, RNG states and whatever the user
 * adds — one safetensors file, written atomically (temporary file, fsync,
 * rename: a crash mid-write leaves the previous checkpoint intact), and
 * loadable onto any device (PyTorch's map_location).
 */
#ifndef TORC_STATE_H
#define TORC_STATE_H

#include "torc/module.h"

TORC_BEGIN_DECLS

/* An ordered map name -> tensor and key -> string. Opaque. */
typedef struct torc_state_dict torc_state_dict;

/* A new, empty state dict; NULL on OOM. */
TORC_API torc_state_dict *torc_state_dict_new(void);

/* Frees the dict, releasing its tensor references. NULL is ignored. */
TORC_API void torc_state_dict_free(torc_state_dict *sd);

/* Sets name -> t (taking a reference). Errors: TORC_ERR_NULL,
 * TORC_ERR_INVALID (empty name, "__metadata__", or a name already present:
 * a key collision is never resolved silently). */
TORC_API torc_status torc_state_dict_set(torc_state_dict *sd,
                                         const char *name, torc_tensor *t);

/* Number of tensors; name, tensor (borrowed) of entry i in insertion
 * order (NULL when out of range). */
TORC_API int torc_state_dict_count(const torc_state_dict *sd);
TORC_API const char *torc_state_dict_name(const torc_state_dict *sd, int i);
TORC_API torc_tensor *torc_state_dict_tensor(const torc_state_dict *sd,
                                             int i);

/* The tensor under `name` (borrowed), or NULL (no error recorded). */
TORC_API torc_tensor *torc_state_dict_get(const torc_state_dict *sd,
                                          const char *name);

/* Metadata: sets key -> value (copied; replaces an earlier value), reads
 * it back (NULL when absent), counts and lists keys in insertion order. */
TORC_API torc_status torc_state_dict_set_meta(torc_state_dict *sd,
                                              const char *key,
                                              const char *value);
TORC_API const char *torc_state_dict_meta(const torc_state_dict *sd,
                                          const char *key);
TORC_API int torc_state_dict_meta_count(const torc_state_dict *sd);
TORC_API const char *torc_state_dict_meta_key(const torc_state_dict *sd,
                                              int i);

/* Integer metadata (stored as decimal strings). get: TORC_ERR_INVALID
 * when absent or not an integer, naming the key and value. */
TORC_API torc_status torc_state_dict_set_i64(torc_state_dict *sd,
                                             const char *key, int64_t value);
TORC_API torc_status torc_state_dict_get_i64(const torc_state_dict *sd,
                                             const char *key, int64_t *out);

/* Adds m's parameters and persistent buffers under `prefix` (NULL or ""
 * for none; "model." for a checkpoint), as model.state_dict(): the
 * tensors themselves (references), not copies. Errors: a name collision
 * (TORC_ERR_INVALID) — nothing is added then. */
TORC_API torc_status torc_module_state_dict(const torc_module *m,
                                            const char *prefix,
                                            torc_state_dict *sd);

/* Writes the dict to a safetensors file, atomically (see
 * torc_safetensors_save). Tensors on any device are read back to the
 * host. Errors: those of torc_safetensors_save. */
TORC_API torc_status torc_state_dict_save(const torc_state_dict *sd,
                                          const char *path);

/* Reads a safetensors file (any, PyTorch's included) into a new state
 * dict with every tensor copied onto `dev` (the map_location). Errors:
 * those of torc_safetensors_open (truncated file, bad header, overlapping
 * offsets, unknown dtype, ...) and of the copies; nothing is returned
 * half-read. */
TORC_API torc_state_dict *torc_state_dict_load(const char *path,
                                               torc_device dev);

/* ------------------------------------------------------------------------
 * Loading into a module
 * ---------------------------------------------------------------------- */

/* Options for torc_module_load_state_dict. Zero-initialise: the zero
 * value is PyTorch's default, strict loading of every key. */
typedef struct torc_load_opts {
  /* Missing and unexpected keys are reported but not errors (strict=False).
   * Shape and dtype mismatches stay errors, as in PyTorch. */
  int non_strict;
  /* Only keys starting with `prefix` are considered, with it removed
   * ("model." for a checkpoint); NULL = every key. */
  const char *prefix;
  /* Strip a leading "module." from every key (a state dict saved from
   * DataParallel / DistributedDataParallel). Without it such a file is
   * refused and the message says to set this. */
  int strip_module_prefix;
  /* Convert tensors whose floating dtype differs from the parameter's
   * (f64 -> f32, say) instead of reporting a mismatch. */
  int allow_dtype_cast;
} torc_load_opts;

/* What a load found. Every string is malloc'ed; clear with
 * torc_load_report_clear. */
typedef struct torc_load_report {
  int n_loaded;
  int n_missing;      /* in the module, not in the dict */
  char **missing;
  int n_unexpected;   /* in the dict, not in the module */
  char **unexpected;
  int n_mismatched;   /* "fc.weight: [10, 64] f32 in the file, [10, 128] f32 in the model" */
  char **mismatched;
} torc_load_report;

/* Frees the report's strings and zeroes it. NULL is ignored. */
TORC_API void torc_load_report_clear(torc_load_report *r);

/* Loads sd into m's parameters and persistent buffers (copied onto each
 * one's device and into its storage: parameters keep their identity),
 * as model.load_state_dict(sd). All-or-nothing: everything is checked,
 * and every tensor converted, before anything in the module changes.
 * Strict (the default): TORC_ERR_INVALID with one message listing every
 * missing key, every unexpected key and every shape/dtype mismatch (and
 * naming a "module." prefix when one explains them, with the option that
 * strips it). report (may be NULL) receives the lists either way. Modules
 * with lazy parameters not yet created are refused, naming them and the
 * fix (run one forward, e.g. torc_module_summary). */
TORC_API torc_status torc_module_load_state_dict(torc_module *m,
                                                 const torc_state_dict *sd,
                                                 const torc_load_opts *opts,
                                                 torc_load_report *report);

/* Saves m's state dict (no prefix) to a safetensors file, atomically. */
TORC_API torc_status torc_module_save(const torc_module *m, const char *path);

/* Loads a safetensors file into m: a plain state dict (PyTorch's
 * save_file(model.state_dict())) or a torc checkpoint (its "model."
 * part is used). opts and report as torc_module_load_state_dict. */
TORC_API torc_status torc_module_load(torc_module *m, const char *path,
                                      const torc_load_opts *opts,
                                      torc_load_report *report);

/* ------------------------------------------------------------------------
 * Checkpoints
 * ---------------------------------------------------------------------- */

/* A new checkpoint: an empty state dict tagged "torc.format" =
 * "checkpoint" (and the torc version), into which the caller puts the
 * model (torc_checkpoint_add_module), the optimizer and scheduler state,
 * the RNG state and counters. */
TORC_API torc_state_dict *torc_checkpoint_new(void);

/* Adds m's state dict under "model.". */
TORC_API torc_status torc_checkpoint_add_module(torc_state_dict *ck,
                                                const torc_module *m);

/* Records the state of generator `gen` (NULL = the default generator)
 * under the metadata keys "rng.NAME.seed" and "rng.NAME.offset". */
TORC_API torc_status torc_checkpoint_add_rng(torc_state_dict *ck,
                                             const char *name,
                                             const torc_generator *gen);

/* Restores generator `gen` (NULL = default) from "rng.NAME.*". Errors:
 * TORC_ERR_INVALID when the checkpoint has no such state. */
TORC_API torc_status torc_checkpoint_restore_rng(const torc_state_dict *ck,
                                                 const char *name,
                                                 torc_generator *gen);

/* Loads a checkpoint file onto `dev`, checking the "torc.format" tag
 * (a file without it is TORC_ERR_INVALID saying it is a plain state dict
 * and to use torc_module_load). */
TORC_API torc_state_dict *torc_checkpoint_load(const char *path,
                                               torc_device dev);

/* Loads the checkpoint's "model." part into m (strict unless opts says). */
TORC_API torc_status torc_checkpoint_load_module(const torc_state_dict *ck,
                                                 torc_module *m,
                                                 const torc_load_opts *opts,
                                                 torc_load_report *report);

TORC_END_DECLS

#endif /* TORC_STATE_H */
