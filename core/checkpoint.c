/* core/checkpoint.c — checkpoints: a state dict tagged "checkpoint"
 * holding the model under "model.", RNG states and counters as metadata,
 * read back with the model part loaded into a module.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "state_internal.h"
#include "torc/safetensors.h"

/* ------------------------------------------------------------------------
 * Checkpoints
 * ---------------------------------------------------------------------- */

torc_state_dict *torc_checkpoint_new(void) {
  torc_state_dict *ck = torc_state_dict_new();
  if (ck &&
      (torc_state_dict_set_meta(ck, "torc.format", "checkpoint") ||
       torc_state_dict_set_meta(ck, "torc.version", torc_version_string()))) {
    torc_state_dict_free(ck);
    return NULL;
  }
  return ck;
}

torc_status torc_checkpoint_add_module(torc_state_dict *ck,
                                       const torc_module *m) {
  return torc_module_state_dict(m, "model.", ck);
}

/* Checks an RNG state name. */
static torc_status rng_name_ok(const char *fn, const torc_state_dict *ck,
                               const char *name) {
  if (ck == NULL || name == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the %s is NULL", fn,
                          ck ? "name" : "checkpoint");
  if (name[0] == '\0' || strchr(name, '.'))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the RNG state name '%s' must be non-empty and "
                          "without '.' (e.g. \"default\", \"loader\")",
                          fn, name);
  return TORC_OK;
}

torc_status torc_checkpoint_add_rng(torc_state_dict *ck, const char *name,
                                    const torc_generator *gen) {
  const char *fn = "torc_checkpoint_add_rng";
  torc_status s = rng_name_ok(fn, ck, name);
  if (s)
    return s;
  uint64_t seed = 0, offset = 0;
  torc_generator_get_state(gen, &seed, &offset);
  char key[256], val[32];
  snprintf(key, sizeof key, "rng.%s.seed", name);
  snprintf(val, sizeof val, "%" PRIu64, seed);
  s = torc_state_dict_set_meta(ck, key, val);
  snprintf(key, sizeof key, "rng.%s.offset", name);
  snprintf(val, sizeof val, "%" PRIu64, offset);
  return s ? s : torc_state_dict_set_meta(ck, key, val);
}

/* Parses metadata `key` as a u64 into *out; 0 when absent or malformed. */
static int meta_u64(const torc_state_dict *ck, const char *key, uint64_t *out,
                    const char **raw) {
  const char *v = torc_state_dict_meta(ck, key);
  *raw = v;
  if (v == NULL || v[0] < '0' || v[0] > '9')
    return 0;
  char *end = NULL;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end != '\0' || errno == ERANGE)
    return 0;
  *out = (uint64_t)x;
  return 1;
}

torc_status torc_checkpoint_restore_rng(const torc_state_dict *ck,
                                        const char *name, torc_generator *gen) {
  const char *fn = "torc_checkpoint_restore_rng";
  torc_status s = rng_name_ok(fn, ck, name);
  if (s)
    return s;
  char ks[256], ko[256];
  snprintf(ks, sizeof ks, "rng.%s.seed", name);
  snprintf(ko, sizeof ko, "rng.%s.offset", name);
  uint64_t seed = 0, offset = 0;
  const char *rs = NULL, *ro = NULL;
  int have_s = meta_u64(ck, ks, &seed, &rs);
  int have_o = meta_u64(ck, ko, &offset, &ro);
  if (rs == NULL || ro == NULL) {
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int i = 0; i < ck->n_meta && len + 8 < sizeof list; i++) {
      const char *k = ck->meta_keys[i];
      size_t kl = strlen(k);
      if (starts_with(k, "rng.") && kl > 9 && strcmp(k + kl - 5, ".seed") == 0)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s'%.*s'",
                                len ? ", " : "", (int)(kl - 9), k + 4);
    }
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the checkpoint has no RNG state '%s' (no "
                          "metadata %s); it has %s; record it with "
                          "torc_checkpoint_add_rng before saving",
                          fn, name, rs ? ko : ks, len ? list : "none");
  }
  if (!have_s || !have_o)
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: metadata '%s' is \"%s\", not an unsigned "
                          "decimal integer; the checkpoint is corrupt",
                          fn, have_s ? ko : ks, have_s ? ro : rs);
  torc_generator_set_state(gen, seed, offset);
  return TORC_OK;
}

torc_state_dict *torc_checkpoint_load(const char *path, torc_device dev) {
  if (path == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_checkpoint_load: the path is NULL");
    return NULL;
  }
  torc_safetensors *st = torc_safetensors_open(path);
  if (st == NULL)
    return NULL;
  const char *f = torc_safetensors_metadata(st, "torc.format");
  if (f == NULL || strcmp(f, "checkpoint") != 0) {
    if (f == NULL)
      torc_set_error(TORC_ERR_INVALID,
                     "torc_checkpoint_load: %s is a plain state dict (its "
                     "metadata has no \"torc.format\": \"checkpoint\"); load "
                     "it into a module with torc_module_load, or read it "
                     "with torc_state_dict_load",
                     path);
    else
      torc_set_error(TORC_ERR_INVALID,
                     "torc_checkpoint_load: %s has \"torc.format\" = \"%s\"; "
                     "a checkpoint has \"checkpoint\" (read the file with "
                     "torc_state_dict_load)",
                     path, f);
    torc_safetensors_close(st);
    return NULL;
  }
  torc_state_dict *ck = torc__sd_read(st, dev);
  torc_safetensors_close(st);
  return ck;
}

torc_status torc_checkpoint_load_module(const torc_state_dict *ck,
                                        torc_module *m,
                                        const torc_load_opts *opts,
                                        torc_load_report *report) {
  const char *fn = "torc_checkpoint_load_module";
  if (report)
    memset(report, 0, sizeof *report);
  if (ck == NULL)
    return torc_set_error(TORC_ERR_NULL, "%s: the checkpoint is NULL", fn);
  if (!torc__sd_is_checkpoint(ck))
    return torc_set_error(TORC_ERR_INVALID,
                          "%s: the state dict is not a checkpoint (no "
                          "\"torc.format\": \"checkpoint\" metadata); load "
                          "it with torc_module_load_state_dict",
                          fn);
  return torc__sd_load_model_part(m, ck, opts, report, fn);
}
