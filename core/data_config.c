/* core/data_config.c — [data.NAME] sections: the loader keys (validated by
 * the schema), the source's own keys (validated by torc_dataset_open, with
 * its path keys resolved against the INI file's folder), errors given the
 * file and line of the key they name, and the validation split that
 * [data.train] valid_fraction carves from the training set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"
#include "internal.h"
#include "torc/config.h"
#include "torc/dist.h"
#include "torc/philox.h"

const torc__config_row torc__data_rows[] = {
    {"data.*", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "a dataset and its loader: [data.train], [data.test], [data.valid]"},
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
    {"data.*", "valid_fraction", TORC__CFG_FLOAT, "0", "0..0.9", 0,
     "[data.train] only: hold out this share of the training samples as "
     "the validation split (fixed by [torc] seed; instead of [data.valid])"},
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

/* ---- the validation split: a subset of the training set ---- */

/* The samples idx[0..n) of an open dataset, which the subset owns. */
typedef struct subset {
  torc_dataset *base;
  int64_t *idx, n;
} subset;

static int64_t subset_length(void *h) { return ((subset *)h)->n; }

static int subset_get(void *h, int64_t i, torc_tensor **input,
                      torc_tensor **target) {
  subset *s = h;
  return torc_dataset_get(s->base, s->idx[i], input, target);
}

static void subset_close(void *h) {
  subset *s = h;
  torc_dataset_close(s->base);
  torc__free(s->idx);
  torc__free(s);
}

static int64_t subset_classes(void *h) {
  return torc_dataset_num_classes(((subset *)h)->base);
}

static int subset_class_name(void *h, int64_t i, char *buf, size_t size) {
  return torc_dataset_class_name(((subset *)h)->base, i, buf, size);
}

static const torc_data_source_type subset_type = {
    .struct_size = sizeof(torc_data_source_type),
    .name = "subset",
    .description = "a subset of another dataset's samples",
    .length = subset_length,
    .get = subset_get,
    .close = subset_close,
    .num_classes = subset_classes,
    .class_name = subset_class_name};

/* Replaces *ds by its training part (valid 0) or validation part (valid
 * 1): of its first n samples (n = limit when limit > 0), a permutation
 * fixed by the seed alone puts round(fraction * n) in the validation
 * part, the rest in the training part, each in the dataset's order. The
 * same samples every run, whatever the epoch or the shuffle. */
static torc_status split(torc_dataset **ds, double fraction, int64_t limit,
                         uint64_t seed, int valid) {
  int64_t n = torc_dataset_length(*ds);
  if (limit > 0 && limit < n)
    n = limit;
  int64_t nv = (int64_t)(fraction * (double)n + 0.5);
  if (nv < 1)
    nv = 1;
  if (n < 2)
    return torc_set_error(TORC_ERR_INVALID,
                          "valid_fraction: the training set has %lld "
                          "sample(s), too few to hold some out",
                          (long long)n);
  if (nv > n - 1)
    nv = n - 1;
  int64_t *perm = torc__malloc(sizeof(int64_t) * (size_t)n);
  char *in_valid = torc__calloc((size_t)n, 1);
  subset *s = torc__calloc(1, sizeof *s);
  int64_t want = valid ? nv : n - nv;
  if (s)
    s->idx = torc__malloc(sizeof(int64_t) * (size_t)want);
  if (perm == NULL || in_valid == NULL || s == NULL || s->idx == NULL) {
    torc__free(perm), torc__free(in_valid);
    if (s)
      torc__free(s->idx);
    torc__free(s);
    return torc_set_error(TORC_ERR_OOM, "out of memory splitting off the "
                                        "validation samples");
  }
  for (int64_t i = 0; i < n; i++)
    perm[i] = i;
  uint64_t key = torc__data_key(seed, -1, 2), draw = 0;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = torc_philox_randint(key, draw++, 0, i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int64_t i = 0; i < nv; i++)
    in_valid[perm[i]] = 1;
  for (int64_t i = 0; i < n; i++)
    if (in_valid[i] == valid)
      s->idx[s->n++] = i;
  torc__free(perm);
  torc__free(in_valid);
  s->base = *ds;
  char desc[600];
  snprintf(desc, sizeof desc, "%s: the %s part, %lld samples",
           torc_dataset_describe(*ds), valid ? "validation" : "training",
           (long long)s->n);
  torc_dataset *w = torc__dataset_wrap(&subset_type, s, desc);
  if (w == NULL) {
    s->base = NULL;
    torc__free(s->idx);
    torc__free(s);
    return torc_last_status();
  }
  *ds = w;
  return TORC_OK;
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
  /* valid_fraction: [data.train] gives its training part as "train" and
   * its validation part as "valid" (with [data.test]'s transform, the
   * evaluation pipeline, when there is a [data.test]). */
  int ti_train = torc__config_find(cfg, "data.train"), part = -1;
  double fraction = 0;
  for (int k = 0; k < torc_config_section_count(cfg); k++) {
    const char *sn = torc_config_section_name(cfg, k);
    if (strncmp(sn, "data.", 5) == 0 && k != ti_train &&
        torc_config_section_get(cfg, k, "valid_fraction") != NULL) {
      torc__config_error(cfg, k, "valid_fraction", TORC_ERR_CONFIG,
                         "valid_fraction holds out part of [data.train]; "
                         "set it there (or give [data.valid] its own "
                         "source)");
      return NULL;
    }
  }
  if (ti_train >= 0 &&
      torc__config_float(cfg, ti_train, "valid_fraction", &fraction))
    return NULL;
  if (fraction > 0 && strcmp(name, "valid") == 0) {
    if (i >= 0) {
      torc__config_error(cfg, ti_train, "valid_fraction", TORC_ERR_CONFIG,
                         "there is a [data.valid] section too; keep one "
                         "(valid_fraction holds out part of [data.train], "
                         "[data.valid] reads its own data)");
      return NULL;
    }
    i = ti_train;
    part = 1;
  } else if (fraction > 0 && strcmp(name, "train") == 0) {
    part = 0;
  }
  if (i < 0) {
    torc_set_error(TORC_ERR_CONFIG,
                   "%s: no [%s] section; add one with source = idx (or csv, "
                   "npy, image_folder, synthetic) and the source's files",
                   torc_config_path(cfg), section);
    return NULL;
  }
  torc_loader_opts o = {0};
  int64_t batch = 1, workers = 0, prefetch = 0, split_limit = 0;
  torc_status st;
  if ((st = torc__config_int(cfg, i, "batch_size", &batch)) ||
      (st = torc__config_bool(cfg, i, "shuffle", &o.shuffle)) ||
      (st = torc__config_bool(cfg, i, "drop_last", &o.drop_last)) ||
      (st = torc__config_int(cfg, i, "workers", &workers)) ||
      (st = torc__config_int(cfg, i, "prefetch", &prefetch)) ||
      (st = torc__config_int(cfg, i, "limit", &o.limit)))
    return NULL;
  if (part >= 0) { /* the split applies limit itself, then shuffle */
    split_limit = o.limit;
    o.limit = 0;
  }
  if (part == 1) /* validation: every sample once, in order */
    o.shuffle = 0, o.drop_last = 0;
  o.batch_size = batch;
  /* Several processes: batch_size is the global batch, and each rank
   * loads its share of every batch (every world-th sample, as PyTorch's
   * DistributedSampler), so N ranks step as one process would. */
  int world = torc_dist_world_size();
  if (world > 1 && strcmp(name, "train") == 0) {
    if (batch % world != 0) {
      torc__config_error(cfg, i, "batch_size", TORC_ERR_CONFIG,
                         "batch_size = %lld (the global batch) does not "
                         "divide among %d ranks; use a multiple of %d, "
                         "e.g. %lld",
                         (long long)batch, world, world,
                         (long long)((batch + world - 1) / world * world));
      return NULL;
    }
    o.batch_size = batch / world;
    o.world_size = world;
    o.rank = torc_dist_rank();
  }
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
  int tsec = i, test = torc__config_find(cfg, "data.test");
  if (part == 1 && test >= 0)
    tsec = test;
  const char *spec = torc_config_section_get(cfg, tsec, "transform");
  if (spec) {
    tf = torc_transform_parse(spec);
    if (tf == NULL) {
      torc__config_error(cfg, tsec, "transform",
                         torc__config_rewrap_status(), "%s",
                         torc_last_error());
      return NULL;
    }
  }
  o.transform = tf;
  torc_dataset *ds = open_dataset(cfg, i);
  if (ds == NULL) {
    torc_transform_free(tf);
    return NULL;
  }
  if (part >= 0 && split(&ds, fraction, split_limit, o.seed, part)) {
    torc__config_error(cfg, i, "valid_fraction", torc__config_rewrap_status(),
                       "%s", torc_last_error());
    torc_dataset_close(ds);
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
