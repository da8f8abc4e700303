/* core/config_apply.c — applying a configuration to the process: [torc]
 * (threads, seed, fallback), [plugins] and each [plugin.NAME] (loading
 * the plugin with its keys) or, with none, the standard set; the plugins
 * [data.*], [loss] and [optimizer] need; the device [device] names.
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

/* ---- applying ---- */

/* Rewrites the last error as "FILE:LINE: <it>" unless it already starts
 * with the file name; keeps its status. */
static torc_status prefix_error(const torc_config *cfg, int line,
                                torc_status st) {
  const char *msg = torc_last_error();
  size_t lp = strlen(cfg->path);
  if (strncmp(msg, cfg->path, lp) == 0 && msg[lp] == ':')
    return st;
  char loc[MSG_MAX / 2];
  return torc_set_error(st, "%s: %s", where(cfg, line, loc, sizeof loc), msg);
}

/* Loads the plugin of section occurrence i. */
static torc_status apply_plugin(const torc_config *cfg, int i,
                                const char *search_path, int allow_insecure) {
  const cfg_section *s = &cfg->s[i];
  const char *name = s->name + strlen("plugin.");
  const char *module = torc__config_value(cfg, i, "module");
  char loc[MSG_MAX / 2];
  if (module == NULL)
    return torc_set_error(TORC_ERR_CONFIG,
                          "%s: section [%s] has no "
                          "'module' key; add module = NAME (or --set %s."
                          "module=NAME)",
                          where(cfg, s->line, loc, sizeof loc), s->name,
                          s->name);
  int required = 1;
  int64_t priority = 0;
  torc_status st = torc__config_bool(cfg, i, "required", &required);
  if (st == TORC_OK)
    st = torc__config_int(cfg, i, "priority", &priority);
  if (st != TORC_OK)
    return st;

  const char **keys = torc__malloc(sizeof *keys * (size_t)(s->n + 1));
  const char **values = torc__malloc(sizeof *values * (size_t)(s->n + 1));
  int *lines = torc__malloc(sizeof *lines * (size_t)(s->n + 1));
  if (keys == NULL || values == NULL || lines == NULL) {
    torc__free(keys);
    torc__free(values);
    torc__free(lines);
    return torc_set_error(TORC_ERR_OOM, "out of memory loading [%s]", s->name);
  }
  int n = 0;
  for (int k = 0; k < s->n; k++) {
    const cfg_entry *e = &s->e[k];
    if (strcmp(e->key, "module") == 0 || strcmp(e->key, "required") == 0 ||
        strcmp(e->key, "priority") == 0)
      continue;
    keys[n] = e->key;
    values[n] = entry_value(e);
    lines[n] = e->line;
    n++;
  }
  torc_plugin_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.name = name;
  opts.search_path = search_path;
  opts.priority = (int)priority;
  opts.allow_insecure = allow_insecure;
  opts.keys = keys;
  opts.values = values;
  opts.n_keys = n;
  /* Sections added by --set have no line: the loader gets no file then. */
  opts.file = s->line > 0 ? cfg->path : NULL;
  opts.line = s->line;
  opts.key_lines = lines;
  st = torc_plugin_load(module, &opts);
  torc__free(keys);
  torc__free(values);
  torc__free(lines);
  if (st == TORC_OK)
    return TORC_OK;
  if (!required) {
    torc_logf(TORC_LOG_WARN,
              "%s: [%s] has required = no and was not "
              "loaded; going on without it: %s",
              where(cfg, s->line, loc, sizeof loc), s->name, torc_last_error());
    torc_clear_error(); /* handled: must not look like a pending failure */
    return TORC_OK;
  }
  return prefix_error(cfg, s->line, st);
}

/* The standard set loaded when a file has no [plugin.NAME] section: the
 * reference kernels as the base, the fast cpu backends, and the data,
 * losses and optimizers. */
static const char *const standard_set[] = {"ref",    "cpu",    "onednn",
                                           "data",   "losses", "optim"};

/* Loads plugin `name` of the standard set unless loaded: one that was not
 * built or installed is skipped (logged at INFO), one that is there but
 * fails to load is a warning, and the run goes on without it either way.
 * `why` says what asked for it, for the log. */
static void load_standard(const char *name, const char *search_path,
                          int insecure, const char *why) {
  if (torc__plugin_loaded(name))
    return;
  if (!torc__plugin_findable(name, search_path)) {
    /* ref is the base every other backend builds on: without it nothing
     * computes, which deserves more than a note. */
    torc_logf(strcmp(name, "ref") == 0 ? TORC_LOG_WARN : TORC_LOG_INFO,
              "plugin %s (%s) is not installed (no %s.so on the plugin "
              "path: [plugins] path, TORC_PLUGIN_PATH, the install "
              "folder); going on without it",
              name, why, name);
    return;
  }
  torc_plugin_opts o;
  memset(&o, 0, sizeof o);
  o.search_path = search_path;
  o.allow_insecure = insecure;
  if (torc_plugin_load(name, &o) != TORC_OK) {
    torc_logf(TORC_LOG_WARN, "plugin %s (%s) did not load; going on "
                             "without it: %s",
              name, why, torc_last_error());
    torc_clear_error(); /* handled: must not look like a pending failure */
    return;
  }
  torc_logf(TORC_LOG_INFO, "loaded plugin %s (%s)", name, why);
}

/* The plugins of real hardware kept out of the standard set because
 * loading them is costly (cuda: the CUDA runtime, cuBLAS, cuDNN): each is
 * loaded when [device] type names its device type (of the same name) and
 * no loaded plugin registers that type. Others (sim) load only from their
 * [plugin.NAME] section. */
static const char *const on_demand_devices[] = {"cuda"};

/* Loads the on-demand plugin [device] type names (cuda for `type =
 * cuda:1`), when it is on the path and not loaded. */
static void load_for_device(const torc_config *cfg, const char *search_path,
                            int insecure) {
  int d = torc__config_find(cfg, "device");
  const char *type = d >= 0 ? entry_value(entry_at(cfg, d, "type")) : NULL;
  if (type == NULL)
    return;
  char name[TORC_DEVICE_TYPE_MAX];
  size_t n = strcspn(type, ":");
  if (n == 0 || n >= sizeof name)
    return;
  memcpy(name, type, n);
  name[n] = '\0';
  int on_demand = 0;
  for (size_t k = 0; k < sizeof on_demand_devices / sizeof *on_demand_devices;
       k++)
    on_demand |= strcmp(name, on_demand_devices[k]) == 0;
  if (!on_demand || torc__devtype_find(name) >= 0 || torc__plugin_loaded(name) ||
      !torc__plugin_findable(name, search_path))
    return; /* torc_config_device names the registered types */
  char why[64 + TORC_DEVICE_TYPE_MAX];
  snprintf(why, sizeof why, "for [device] type = %s", name);
  load_standard(name, search_path, insecure, why);
}

/* 1 when cfg has a section named `name` or, with `prefix` set, one whose
 * name starts with it. */
static int has_section(const torc_config *cfg, const char *name, int prefix) {
  for (int i = 0; i < cfg->n; i++)
    if (prefix ? strncmp(cfg->s[i].name, name, strlen(name)) == 0
               : strcmp(cfg->s[i].name, name) == 0)
      return 1;
  return 0;
}

torc_status torc_config_apply(const torc_config *cfg) {
  if (cfg == NULL)
    return torc_set_error(TORC_ERR_INVALID, "torc_config_apply: cfg is NULL");
  torc__ensure_init();
  torc_status st = TORC_OK;
  int t = torc__config_find(cfg, "torc");
  if (t >= 0) {
    /* Only keys present: one left out keeps the library's setting. */
    if (entry_at(cfg, t, "threads")) {
      int64_t n;
      if ((st = torc__config_int(cfg, t, "threads", &n)) != TORC_OK)
        return st;
      if (n > INT_MAX)
        return torc__config_error(cfg, t, "threads", TORC_ERR_CONFIG,
                                  "%lld threads is more than the %d torc "
                                  "can use",
                                  (long long)n, INT_MAX);
      if ((st = torc_set_num_threads((int)n)) != TORC_OK)
        return prefix_error(cfg, torc__config_key_line(cfg, t, "threads"), st);
    }
    if (entry_at(cfg, t, "seed")) {
      uint64_t seed;
      if ((st = torc__config_uint(cfg, t, "seed", &seed)) != TORC_OK)
        return st;
      torc_manual_seed(seed);
    }
    if (entry_at(cfg, t, "deterministic")) {
      int det;
      if ((st = torc__config_bool(cfg, t, "deterministic", &det)) != TORC_OK)
        return st;
      torc_use_deterministic_algorithms(det);
    }
    const char *fb = entry_value(entry_at(cfg, t, "fallback"));
    if (fb)
      torc__set_fallback(strcmp(fb, "cpu") == 0);
  }
  int p = torc__config_find(cfg, "plugins");
  const char *search_path = p >= 0 ? torc__config_value(cfg, p, "path") : NULL;
  int insecure = 0;
  if (p >= 0 &&
      (st = torc__config_bool(cfg, p, "allow_insecure", &insecure)) != TORC_OK)
    return st;
  int explicit_plugins = 0;
  for (int i = 0; i < cfg->n; i++) {
    if (strncmp(cfg->s[i].name, "plugin.", 7) != 0)
      continue;
    explicit_plugins = 1;
    if ((st = apply_plugin(cfg, i, search_path, insecure)) != TORC_OK)
      return st;
  }
  /* No [plugin.NAME] section: the standard set, so a file that names no
   * plugin runs on the fast backends. With sections the backends are
   * exactly those listed; only a section that cannot work without its
   * plugin ([data.*], [loss], [optimizer]/[scheduler]) loads it when no
   * loaded plugin provides that kind. */
  if (!explicit_plugins) {
    for (size_t k = 0; k < sizeof standard_set / sizeof *standard_set; k++)
      load_standard(standard_set[k], search_path, insecure,
                    "the standard set: the file has no [plugin.NAME] "
                    "section");
    load_for_device(cfg, search_path, insecure);
    return TORC_OK;
  }
  load_for_device(cfg, search_path, insecure);
  if (has_section(cfg, "data.", 1) &&
      !torc__plugin_provides_any(TORC_PROVIDES_DATA))
    load_standard("data", search_path, insecure, "for the [data.*] sections");
  if (has_section(cfg, "loss", 0) &&
      !torc__plugin_provides_any(TORC_PROVIDES_LOSS))
    load_standard("losses", search_path, insecure, "for [loss]");
  if ((has_section(cfg, "optimizer", 0) || has_section(cfg, "scheduler", 0)) &&
      !torc__plugin_provides_any(TORC_PROVIDES_OPTIM))
    load_standard("optim", search_path, insecure, "for [optimizer]");
  return TORC_OK;
}

torc_status torc_config_device(const torc_config *cfg, torc_device *out) {
  if (cfg == NULL || out == NULL)
    return torc_set_error(TORC_ERR_INVALID, "torc_config_device: %s is NULL",
                          cfg == NULL ? "cfg" : "out");
  torc__ensure_init();
  int d = torc__config_find(cfg, "device");
  const char *type = d >= 0 ? entry_value(entry_at(cfg, d, "type")) : NULL;
  if (type == NULL) {
    *out = TORC_CPU;
    return TORC_OK;
  }
  torc_device dev;
  torc_status st = torc_device_parse(type, &dev);
  if (st != TORC_OK) {
    char loc[MSG_MAX / 2];
    return torc_set_error(
        st, "%s: key 'type' in [device]: %s",
        where(cfg, torc__config_key_line(cfg, d, "type"), loc, sizeof loc),
        torc_last_error());
  }
  *out = dev;
  return TORC_OK;
}
