/* core/data_config.c — [data.NAME] sections: the loader keys (validated by
 * the schema), the source's own keys (validated by torc_dataset_open, with
 * its path keys resolved against the INI file's folder), and errors given
 * the file and line of the key they name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "internal.h"
#include "torc/config.h"

const torc__config_row torc__data_rows[] = {
    {"data.*", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "a dataset and its loader: [data.train], [data.test]"},
    {"data.*", "source", TORC__CFG_STRING, NULL,
     "a data source: idx, csv, npy, image_folder, synthetic or a plugin's",
     TORC__CFG_REQUIRED,
     "the data source type; its own keys follow in the section"},
    {"data.*", "transform", TORC__CFG_STRING, NULL,
     "stages such as scale(0.0039), normalize(0.286, 0.353), "
     "random_crop(28, 4), random_hflip(0.5), center_crop(24), "
     "resize(32, 32), cast(f32)",
     0, "per-sample transforms, in order (none when absent)"},
    {"data.*", "batch_size", TORC__CFG_INT, "1", "1..", 0,
     "samples per batch"},
    {"data.*", "shuffle", TORC__CFG_BOOL, "no", NULL, 0,
     "a new permutation each epoch, from [torc] seed and the epoch"},
    {"data.*", "drop_last", TORC__CFG_BOOL, "no", NULL, 0,
     "drop a final batch smaller than batch_size"},
    {"data.*", "workers", TORC__CFG_INT, "0", "0..256", 0,
     "loader threads; 0 = load in the training thread (same batches "
     "either way)"},
    {"data.*", "prefetch", TORC__CFG_INT, "0", "0..4096", 0,
     "batches ready ahead; 0 = 2 per worker"},
    {"data.*", "limit", TORC__CFG_INT, "0", "0..", 0,
     "use only the first N samples (0 = all): a quick run on a subset"},
    {"data.*", "pin_memory", TORC__CFG_ENUM, "auto", "auto|yes|no", 0,
     "stage batches in pinned host memory (auto: when the device is not "
     "the host)"},
    {"data.*", "class_names", TORC__CFG_STRING, NULL,
     "comma-separated names, in label order: cat, dog, bird", 0,
     "the classes' names, for torc eval's predictions, confusion matrix "
     "and report (read from [data.test], else [data.train])"},
    {"data.*", "*", TORC__CFG_ANY, NULL, NULL, 0,
     "the source's own keys (images, labels, root, ...), checked by the "
     "source; relative paths resolve against the INI file's folder"},
    {NULL, NULL, TORC__CFG_SECTION, NULL, NULL, 0, NULL}};

/* The key of section i a message names ("key 'k'"), else the source key
 * whose value (a path) the message quotes, else NULL. */
static const char *key_named(const torc_config *cfg, int i, const char *msg,
                             char *const *values, const char *const *keys,
                             int n) {
  int nk = torc_config_section_key_count(cfg, i);
  for (int j = 0; j < nk; j++) {
    const char *k = torc_config_section_key(cfg, i, j);
    char pat[160];
    snprintf(pat, sizeof pat, "key '%s'", k);
    if (strstr(msg, pat))
      return k;
  }
  for (int j = 0; j < n; j++)
    if (values[j] && strlen(values[j]) >= 3 && strstr(msg, values[j]))
      return keys[j];
  return NULL;
}

static int is_path_key(const torc_data_source_type *t, const char *key) {
  if (t == NULL || t->keys == NULL)
    return 0;
  for (const torc_data_key *k = t->keys; k->name; k++)
    if (strcmp(k->name, key) == 0)
      return k->is_path;
  return 0;
}

/* value resolved against dir when relative (malloc'd). */
static char *resolve(const char *value, const char *dir) {
  if (dir == NULL || value[0] == '\0' || value[0] == '/')
    return torc__strdup(value);
  size_t ld = strlen(dir), lv = strlen(value);
  char *p = torc__malloc(ld + 1 + lv + 1);
  if (p == NULL)
    return NULL;
  memcpy(p, dir, ld);
  if (ld == 0 || dir[ld - 1] != '/')
    p[ld++] = '/';
  memcpy(p + ld, value, lv + 1);
  return p;
}

/* Opens the section's dataset: NULL with a config error on failure. */
static torc_dataset *open_dataset(const torc_config *cfg, int i) {
  const char *source = torc_config_section_get(cfg, i, "source");
  const torc_data_source_type *type = torc_data_source_find(source);
  const char *dir = torc__config_dir(cfg);
  int nk = torc_config_section_key_count(cfg, i);
  const char **keys = torc__calloc((size_t)nk + 1, sizeof *keys);
  char **values = torc__calloc((size_t)nk + 1, sizeof *values);
  int n = 0;
  torc_dataset *ds = NULL;
  if (keys == NULL || values == NULL) {
    torc_set_error(TORC_ERR_OOM, "out of memory opening [%s]'s dataset",
                   torc_config_section_name(cfg, i));
    goto done;
  }
  for (int j = 0; j < nk; j++) {
    const char *k = torc_config_section_key(cfg, i, j);
    if (torc__data_loader_key(k))
      continue;
    const char *v = torc_config_section_get(cfg, i, k);
    keys[n] = k;
    values[n] = is_path_key(type, k) ? resolve(v, dir) : torc__strdup(v);
    if (values[n++] == NULL) {
      torc_set_error(TORC_ERR_OOM, "out of memory opening [%s]'s dataset",
                     torc_config_section_name(cfg, i));
      goto done;
    }
  }
  ds = torc_dataset_open(source, keys, (const char *const *)values, n);
  if (ds == NULL) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    const char *key = key_named(cfg, i, msg, values, keys, n);
    if (key == NULL && type == NULL)
      key = "source";
    torc__config_error(cfg, i, key, torc__config_rewrap_status(), "%s",
                       msg);
  }
done:
  for (int j = 0; j < n; j++)
    torc__free(values[j]);
  torc__free(keys);
  torc__free(values);
  return ds;
}

torc_loader *torc_loader_from_config(const torc_config *cfg, const char *name,
                                     torc_device device) {
  if (cfg == NULL || name == NULL) {
    torc_set_error(TORC_ERR_NULL, "torc_loader_from_config: the %s is NULL",
                   cfg == NULL ? "configuration" : "section name");
    return NULL;
  }
  char section[128];
  snprintf(section, sizeof section, "data.%s", name);
  int i = torc__config_find(cfg, section);
  if (i < 0) {
    torc_set_error(TORC_ERR_CONFIG,
                   "%s: no [%s] section; add one with source = idx (or csv, "
                   "npy, image_folder, synthetic) and the source's files",
                   torc_config_path(cfg), section);
    return NULL;
  }
  torc_loader_opts o = {0};
  int64_t batch = 1, workers = 0, prefetch = 0;
  torc_status st;
  if ((st = torc__config_int(cfg, i, "batch_size", &batch)) ||
      (st = torc__config_bool(cfg, i, "shuffle", &o.shuffle)) ||
      (st = torc__config_bool(cfg, i, "drop_last", &o.drop_last)) ||
      (st = torc__config_int(cfg, i, "workers", &workers)) ||
      (st = torc__config_int(cfg, i, "prefetch", &prefetch)) ||
      (st = torc__config_int(cfg, i, "limit", &o.limit)))
    return NULL;
  o.batch_size = batch;
  o.workers = (int)workers;
  o.prefetch = (int)prefetch;
  const char *pin = torc__config_value(cfg, i, "pin_memory");
  o.pin_memory = pin == NULL || strcmp(pin, "auto") == 0 ? 0
                 : strcmp(pin, "yes") == 0               ? 1
                                                         : -1;
  int ti = torc__config_find(cfg, "torc");
  if (ti >= 0 && torc__config_uint(cfg, ti, "seed", &o.seed) != TORC_OK)
    return NULL;
  o.device = device;

  torc_transform *tf = NULL;
  const char *spec = torc_config_section_get(cfg, i, "transform");
  if (spec) {
    tf = torc_transform_parse(spec);
    if (tf == NULL) {
      torc__config_error(cfg, i, "transform", torc__config_rewrap_status(),
                         "%s", torc_last_error());
      return NULL;
    }
  }
  o.transform = tf;
  torc_dataset *ds = open_dataset(cfg, i);
  if (ds == NULL) {
    torc_transform_free(tf);
    return NULL;
  }
  torc_loader *ld = torc_loader_new(ds, &o);
  if (ld == NULL) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    const char *key = NULL;
    static const char *const opts[] = {"batch_size", "workers", "prefetch"};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
      if (strstr(msg, opts[k]) &&
          torc_config_section_get(cfg, i, opts[k]) != NULL) {
        key = opts[k];
        break;
      }
    torc__config_error(cfg, i, key, torc__config_rewrap_status(), "%s",
                       msg);
    torc_dataset_close(ds);
    torc_transform_free(tf);
    return NULL;
  }
  torc__loader_own(ld, ds, tf);
  return ld;
}
