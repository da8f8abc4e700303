/* core/data.c — the registry of data source types (owner-tracked like
 * module types: a plugin's sources go when it unloads) and datasets: key
 * validation with "did you mean", defaults, and the checked calls into a
 * source (range, outputs on the cpu, errors that say which source failed).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "data_internal.h"
#include "registry.h"
#include "internal.h"

struct torc_dataset {
  const torc_data_source_type *type;
  void *handle;
  int64_t length;
  char *describe;
};

/* ---- the registry ---- */

static torc__oreg source_reg =
    TORC__OREG_INIT("data source", "torc_data_source_register",
                    "the core or the program");

static int valid_name(const char *name) {
  if (name == NULL || name[0] == '\0' || strlen(name) > 64)
    return 0;
  for (const char *p = name; *p; p++)
    if (!(isalnum((unsigned char)*p) || *p == '_'))
      return 0;
  return 1;
}

/* The loader's keys are the schema's [data.*] rows (not "*"). */
extern const torc__config_row torc__data_rows[];
int torc__data_loader_key(const char *k) {
  for (const torc__config_row *r = torc__data_rows; r->section; r++)
    if (r->key && strcmp(r->key, "*") != 0 && strcmp(r->key, k) == 0)
      return 1;
  return 0;
}

static torc_status reg_add(struct torc__plugin *owner,
                           const torc_data_source_type *t) {
  if (t == NULL)
    return torc_set_error(TORC_ERR_NULL, "torc_data_source_register: the "
                                         "type is NULL");
  if (t->struct_size < offsetof(torc_data_source_type, describe))
    return torc_set_error(
        TORC_ERR_INVALID,
        "torc_data_source_register: a type has struct_size %zu, smaller "
        "than the oldest layout (%zu); set it to "
        "sizeof(torc_data_source_type)",
        t->struct_size, offsetof(torc_data_source_type, describe));
  if (t->name == NULL || t->open == NULL || t->length == NULL ||
      t->get == NULL || t->close == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "torc_data_source_register: source '%s' lacks "
                          "%s; name, open, length, get and close are "
                          "required",
                          t->name ? t->name : "(unnamed)",
                          t->name == NULL   ? "its name"
                          : t->open == NULL ? "open"
                          : t->length == NULL ? "length"
                          : t->get == NULL    ? "get"
                                              : "close");
  if (!valid_name(t->name))
    return torc_set_error(TORC_ERR_INVALID,
                          "torc_data_source_register: source name '%s' is "
                          "not valid; use letters, digits and '_'",
                          t->name);
  if (t->keys)
    for (const torc_data_key *k = t->keys; k->name; k++) {
      if (!valid_name(k->name))
        return torc_set_error(
            TORC_ERR_INVALID,
            "torc_data_source_register: source '%s' declares key '%s', "
            "which is not valid; use letters, digits and '_'",
            t->name, k->name);
      if (torc__data_loader_key(k->name))
        return torc_set_error(
            TORC_ERR_INVALID,
            "torc_data_source_register: source '%s' declares key '%s', "
            "which [data.*] sections keep for the loader (source, "
            "transform, batch_size, shuffle, drop_last, workers, prefetch, "
            "limit, pin_memory); rename it",
            t->name, k->name);
    }
  return torc__oreg_add(&source_reg, owner, t, t->name);
}

torc_status torc__data_source_register_owned(struct torc__plugin *owner,
                                             const torc_data_source_type *t) {
  return reg_add(owner, t);
}

torc_status torc_data_source_register(const torc_data_source_type *type) {
  return torc__data_source_register_owned(NULL, type);
}

void torc__data_sources_unregister_owner(struct torc__plugin *owner) {
  torc__oreg_remove_owner(&source_reg, owner);
}

const torc_data_source_type *torc_data_source_find(const char *name) {
  return torc__oreg_find(&source_reg, name);
}

int torc_data_source_count(void) { return torc__oreg_count(&source_reg); }

const torc_data_source_type *torc_data_source_at(int i) {
  return torc__oreg_at(&source_reg, i);
}

/* ---- datasets ---- */

static int key_count(const torc_data_source_type *t) {
  int n = 0;
  while (t->keys && t->keys[n].name)
    n++;
  return n;
}

static void key_list(const torc_data_source_type *t, char *buf,
                     size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  int nk = key_count(t);
  for (int q = 0; q < nk && len + 2 < size; q++)
    len += (size_t)snprintf(buf + len, size - len, "%s%s", q ? ", " : "",
                            t->keys[q].name);
  if (nk == 0)
    snprintf(buf, size, "(none)");
}

/* The unknown-source error: the registered names and the nearest. */
static void unknown_source(const char *source) {
  int n = torc_data_source_count();
  const char **names = torc__malloc((size_t)(n + 1) * sizeof *names);
  char list[600] = "", hint[96] = "";
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    const torc_data_source_type *t = torc_data_source_at(i);
    const char *name = t ? t->name : "";
    if (names)
      names[i] = name;
    if (len + 2 < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                              i ? ", " : "", name);
  }
  if (names)
    torc__suggest(source, names, n, hint, sizeof hint);
  torc__free(names);
  torc_set_error(TORC_ERR_INVALID,
                 "unknown data source '%s'%s; the sources are: %s (idx, csv, "
                 "npy, image_folder and synthetic come with the data plugin: "
                 "load it with [plugin.data] module = data, or "
                 "torc_plugin_load(\"data\", NULL))",
                 source, hint, n ? list : "(none registered)");
}

torc_dataset *torc_dataset_open(const char *source, const char *const *keys,
                                const char *const *values, int n) {
  if (source == NULL || n < 0 || (n > 0 && (keys == NULL || values == NULL))) {
    torc_set_error(TORC_ERR_NULL, "torc_dataset_open: the source name (and "
                                  "the key and value arrays when n > 0) are "
                                  "required");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (keys[i] == NULL || values[i] == NULL) {
      torc_set_error(TORC_ERR_NULL, "torc_dataset_open: %s %d of source "
                                    "'%s' is NULL",
                     keys[i] == NULL ? "key" : "the value of key", i, source);
      return NULL;
    }
  const torc_data_source_type *t = torc_data_source_find(source);
  if (t == NULL) {
    unknown_source(source);
    return NULL;
  }
  int nk = key_count(t);
  const char **kk = torc__calloc((size_t)nk + 1, sizeof *kk);
  const char **vv = torc__calloc((size_t)nk + 1, sizeof *vv);
  const char **names = torc__calloc((size_t)nk + 1, sizeof *names);
  torc_dataset *ds = torc__calloc(1, sizeof *ds);
  if (kk == NULL || vv == NULL || names == NULL || ds == NULL) {
    torc__free(kk), torc__free(vv), torc__free(names), torc__free(ds);
    torc_set_error(TORC_ERR_OOM, "out of memory opening a '%s' dataset",
                   source);
    return NULL;
  }
  for (int j = 0; j < nk; j++)
    names[j] = t->keys[j].name;
  torc_status st = TORC_OK;
  for (int i = 0; i < n && st == TORC_OK; i++) {
    int j = 0;
    while (j < nk && strcmp(keys[i], names[j]) != 0)
      j++;
    if (j == nk) {
      char list[600], hint[96];
      key_list(t, list, sizeof list);
      /* Every [data.NAME] has the same rows: "data.NAME" stands for any. */
      const char *row = torc__section_key_for("data.NAME", keys[i]);
      int near = torc__key_alias(source, keys[i], names, nk, NULL);
      if (near >= 0)
        snprintf(hint, sizeof hint, " (did you mean '%s'?)", names[near]);
      else if (row)
        snprintf(hint, sizeof hint, " (did you mean the section's '%s'?)",
                 row);
      else
        torc__suggest(keys[i], names, nk, hint, sizeof hint);
      st = torc_set_error(TORC_ERR_INVALID,
                          "data source '%s': unknown key '%s'%s; its keys "
                          "are: %s",
                          source, keys[i], hint, list);
    } else if (vv[j]) {
      st = torc_set_error(TORC_ERR_INVALID,
                          "data source '%s': key '%s' is given twice ('%s' "
                          "and '%s'); keep one",
                          source, keys[i], vv[j], values[i]);
    } else {
      vv[j] = values[i];
    }
  }
  int m = 0;
  for (int j = 0; j < nk && st == TORC_OK; j++) {
    if (vv[j] == NULL)
      vv[j] = t->keys[j].default_value;
    if (vv[j] == NULL) {
      st = torc_set_error(TORC_ERR_INVALID,
                          "data source '%s': key '%s' is required (%s)",
                          source, names[j],
                          t->keys[j].help ? t->keys[j].help : "no default");
      break;
    }
    kk[m] = names[j];
    vv[m] = vv[j];
    m++;
  }
  if (st == TORC_OK) {
    torc_clear_error();
    void *h = NULL;
    torc__scope_suspend(1);
    void *user =
        TORC_HAS_SLOT(t, torc_data_source_type, user) ? t->user : NULL;
    int rc = t->open(kk, vv, m, user, &h);
    torc__scope_suspend(-1);
    if (rc != TORC_OK || h == NULL) {
      if (rc != TORC_OK && h != NULL)
        t->close(h);
      if (torc_last_status() == TORC_OK || rc == TORC_OK)
        torc_set_error(rc != TORC_OK ? (torc_status)rc : TORC_ERR_INTERNAL,
                       "data source '%s': open failed without saying why "
                       "(status %d)",
                       source, rc);
      st = torc_last_status();
    } else {
      ds->type = t;
      ds->handle = h;
      ds->length = t->length(h);
      if (ds->length < 0) {
        t->close(h);
        st = torc_set_error(TORC_ERR_INTERNAL,
                            "data source '%s' reported %lld samples; a "
                            "source's length must be >= 0",
                            source, (long long)ds->length);
      } else {
        /* Computed once here: describe may then be called from any
         * thread. */
        char buf[512] = "";
        if (!(TORC_HAS_SLOT(t, torc_data_source_type, describe) &&
              t->describe && t->describe(h, buf, sizeof buf) == TORC_OK &&
              buf[0]))
          snprintf(buf, sizeof buf, "%s, %lld samples", t->name,
                   (long long)ds->length);
        torc_clear_error();
        ds->describe = torc__strdup(buf);
      }
    }
  }
  torc__free(kk), torc__free(vv), torc__free(names);
  if (st != TORC_OK) {
    torc__free(ds);
    return NULL;
  }
  return ds;
}

/* A dataset over an open handle of type t (a view the core builds itself,
 * such as the validation split's subset): NULL with TORC_ERR_OOM. */
torc_dataset *torc__dataset_wrap(const torc_data_source_type *t,
                                 void *handle, const char *describe) {
  torc_dataset *ds = torc__calloc(1, sizeof *ds);
  if (ds == NULL || (ds->describe = torc__strdup(describe)) == NULL) {
    torc__free(ds);
    torc_set_error(TORC_ERR_OOM, "out of memory opening a '%s' dataset",
                   t->name);
    return NULL;
  }
  ds->type = t;
  ds->handle = handle;
  ds->length = t->length(handle);
  return ds;
}

void torc_dataset_close(torc_dataset *ds) {
  if (ds == NULL)
    return;
  ds->type->close(ds->handle);
  torc__free(ds->describe);
  torc__free(ds);
}

int64_t torc_dataset_length(const torc_dataset *ds) {
  return ds ? ds->length : -1;
}

const torc_data_source_type *torc__dataset_type(const torc_dataset *ds) {
  return ds ? ds->type : NULL;
}

/* A sample tensor must be a plain cpu tensor. */
static torc_status check_sample(const torc_dataset *ds, int64_t index,
                                const torc_tensor *t, const char *what) {
  if (t->storage->device.type != TORC_CPU.type) {
    return torc_set_error(TORC_ERR_DEVICE,
                          "data source '%s': sample %lld's %s is on %s; a "
                          "source returns cpu tensors (the loader moves "
                          "batches to the device)",
                          ds->type->name, (long long)index, what,
                          torc__devname(t->storage->device));
  }
  return TORC_OK;
}

torc_status torc_dataset_get(const torc_dataset *ds, int64_t index,
                             torc_tensor **input, torc_tensor **target) {
  if (input)
    *input = NULL;
  if (target)
    *target = NULL;
  if (ds == NULL || input == NULL || target == NULL)
    return torc_set_error(TORC_ERR_NULL,
                          "torc_dataset_get: %s is NULL; pass a dataset and "
                          "two output pointers",
                          ds == NULL ? "the dataset"
                          : input == NULL ? "the input pointer"
                                          : "the target pointer");
  if (index < 0 || index >= ds->length)
    return torc_set_error(TORC_ERR_RANGE,
                          "torc_dataset_get: index %lld is out of range; "
                          "the '%s' dataset has %lld samples (0..%lld)",
                          (long long)index, ds->type->name,
                          (long long)ds->length, (long long)ds->length - 1);
  torc_tensor *in = NULL, *tg = NULL;
  torc_clear_error();
  torc__scope_suspend(1);
  int rc = ds->type->get(ds->handle, index, &in, &tg);
  torc__scope_suspend(-1);
  torc_status st = (torc_status)rc;
  if (rc != TORC_OK) {
    if (torc_last_status() == TORC_OK)
      torc_set_error(st, "data source '%s': sample %lld failed without "
                         "saying why (status %d)",
                     ds->type->name, (long long)index, rc);
    st = torc_last_status();
  } else if (in == NULL || tg == NULL) {
    st = torc_set_error(TORC_ERR_INTERNAL,
                        "data source '%s': sample %lld came back without %s",
                        ds->type->name, (long long)index,
                        in == NULL ? "an input" : "a target");
  } else {
    st = check_sample(ds, index, in, "input");
    if (st == TORC_OK)
      st = check_sample(ds, index, tg, "target");
  }
  if (st != TORC_OK) {
    torc_release(in);
    torc_release(tg);
    return st;
  }
  *input = in;
  *target = tg;
  return TORC_OK;
}

const char *torc_dataset_describe(const torc_dataset *ds) {
  if (ds == NULL)
    return "";
  return ds->describe ? ds->describe : ds->type->name;
}

int64_t torc_dataset_num_classes(const torc_dataset *ds) {
  if (ds == NULL)
    return 0;
  const torc_data_source_type *t = ds->type;
  if (!TORC_HAS_SLOT(t, torc_data_source_type, num_classes) ||
      t->num_classes == NULL)
    return 0;
  int64_t n = t->num_classes(ds->handle);
  return n > 0 ? n : 0;
}

torc_status torc_dataset_class_name(const torc_dataset *ds, int64_t i,
                                    char *buf, size_t size) {
  if (ds == NULL || buf == NULL || size == 0)
    return torc_set_error(TORC_ERR_NULL,
                          "torc_dataset_class_name: %s",
                          ds == NULL ? "the dataset is NULL"
                                     : "pass a buffer of at least one byte");
  int64_t n = torc_dataset_num_classes(ds);
  if (i < 0 || (n > 0 && i >= n))
    return torc_set_error(TORC_ERR_RANGE,
                          "torc_dataset_class_name: class %lld is out of "
                          "range; the '%s' dataset has %lld classes",
                          (long long)i, ds->type->name, (long long)n);
  const torc_data_source_type *t = ds->type;
  if (n > 0 && TORC_HAS_SLOT(t, torc_data_source_type, class_name) &&
      t->class_name) {
    buf[0] = '\0';
    torc_clear_error();
    int rc = t->class_name(ds->handle, i, buf, size);
    if (rc != TORC_OK) {
      if (torc_last_status() == TORC_OK)
        torc_set_error((torc_status)rc,
                       "data source '%s': class %lld's name failed without "
                       "saying why",
                       t->name, (long long)i);
      return torc_last_status();
    }
    if (buf[0])
      return TORC_OK;
  }
  snprintf(buf, size, "%lld", (long long)i);
  return TORC_OK;
}
