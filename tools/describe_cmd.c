/* tools/describe_cmd.c — `torc describe FILE.ini` (the model of a file,
 * built and summarised), and the listings of every registered type with
 * its keys and defaults, one generator for all: `torc layers`, `sources`,
 * `losses`, `optimizers`, `schedulers` and `transforms`.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

const char torc_tool__usage_describe[] =
    "usage: torc describe FILE.ini\n"
    "\n"
    "Loads the plugins FILE.ini names, builds its model from [model] and\n"
    "the [layer] sections, infers every lazy size from [model] input, and\n"
    "prints the module tree and a summary table: each layer's output shape\n"
    "and parameter count, the totals and the memory they take.\n"
    "\n"
    "Exit status: 0 success, 1 a failure while running (out of memory), 2\n"
    "bad input: usage, a bad file or setting, a missing plugin.\n";

#define LISTING_USAGE(cmd, what, where)                                        \
  "usage: torc " cmd " [--config FILE]\n"                                      \
  "\n"                                                                         \
  "Lists every " what " " where ", with its keys,\n"                           \
  "defaults and accepted values; PyTorch's name for a key, where it has\n"    \
  "another, is shown and accepted too. Without --config every plugin on\n"    \
  "the plugin path is loaded (their types are listed too); with it, that\n"  \
  "file's plugins.\n"

const char torc_tool__usage_layers[] = LISTING_USAGE(
    "layers", "module type", "a [layer] section may name (type = ...)");
const char torc_tool__usage_sources[] = LISTING_USAGE(
    "sources", "data source", "a [data.NAME] section may name (source = ...)");
const char torc_tool__usage_losses[] = LISTING_USAGE(
    "losses", "loss type", "[loss] may name (type = ...)");
const char torc_tool__usage_optimizers[] = LISTING_USAGE(
    "optimizers", "optimizer type", "[optimizer] may name (type = ...)");
const char torc_tool__usage_schedulers[] = LISTING_USAGE(
    "schedulers", "scheduler type", "[scheduler] may name (type = ...)");
const char torc_tool__usage_transforms[] =
    "usage: torc transforms [--config FILE]\n"
    "\n"
    "Lists every stage a [data.NAME] transform = ... pipeline may name,\n"
    "with its arguments (\"scale(0.0039), random_hflip(0.5)\").\n";

/* ---- torc describe, torc layers ---- */

/* Loads and applies a configuration; prints the error and returns the exit
 * status on failure, NULL cfg. */
static torc_config *load_config(const char *cmd, const char *path, int *rc) {
  torc_config *cfg = torc_config_load(path);
  if (cfg == NULL) {
    fprintf(stderr, "torc %s: %s\n", cmd, torc_last_error());
    *rc = EXIT_USAGE;
    return NULL;
  }
  torc_status st = torc_config_apply(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "torc %s: %s\n", cmd, torc_last_error());
    torc_config_free(cfg);
    *rc = torc_tool__exit_status(st);
    return NULL;
  }
  *rc = EXIT_OK;
  return cfg;
}

int torc_tool__cmd_describe(int argc, char **argv) {
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(torc_tool__usage_describe, stdout);
      return EXIT_OK;
    }
    if (argv[i][0] == '-' || file) {
      fprintf(stderr, "torc describe: unexpected %s '%s'\nusage: torc "
                      "describe FILE.ini\n",
              argv[i][0] == '-' ? "option" : "argument", argv[i]);
      return EXIT_USAGE;
    }
    file = argv[i];
  }
  if (file == NULL) {
    fprintf(stderr, "torc describe: which file? usage: torc describe "
                    "FILE.ini\n");
    return EXIT_USAGE;
  }
  int rc;
  torc_config *cfg = load_config("describe", file, &rc);
  if (cfg == NULL)
    return rc;
  int64_t shape[TORC_MAX_DIMS + 1];
  int nd = 0;
  torc_module *m = torc_module_from_config(cfg, shape + 1, &nd);
  torc_dtype in_dt = torc_model_input_dtype(cfg);
  torc_config_free(cfg);
  if (m == NULL) {
    fprintf(stderr, "torc describe: %s\n", torc_last_error());
    return torc_tool__exit_status(torc_last_status());
  }
  shape[0] = 1;
  torc_tensor *x = torc_zeros(shape, nd + 1, in_dt, TORC_CPU);
  char *r = torc_module_repr(m);
  char *s = x ? torc_module_summary(m, x) : NULL;
  if (r && s)
    printf("%s\n\n%s", r, s);
  else
    fprintf(stderr, "torc describe: %s\n", torc_last_error());
  rc = r && s ? EXIT_OK : torc_tool__exit_status(torc_last_status());
  free(r);
  free(s);
  torc_release(x);
  torc_module_free(m);
  return rc;
}

/* ---- the listings ---- */

/* One key: name (and PyTorch's name for it), help, default. */
static void print_key(const char *scope, const char *name, const char *help,
                      const char *def) {
  const char *alias = torc_config_key_alias(scope, name);
  char shown[96];
  if (alias)
    snprintf(shown, sizeof shown, "%s (or %s)", name, alias);
  else
    snprintf(shown, sizeof shown, "%s", name);
  printf("    %-22s %s%s%s%s\n", shown, help ? help : "",
         def ? " (default " : " (required", def ? def : "", ")");
}

/* One type: its name, its description, then its keys. */
static void print_type(const char *name, const char *desc,
                       const torc_module_key *keys) {
  printf("%s\n    %s\n", name, desc ? desc : "");
  for (const torc_module_key *k = keys; k && k->name; k++)
    print_key(name, k->name, k->help, k->default_value);
}

static const char *const listings[] = {"layers", "sources", "losses",
                                       "optimizers", "schedulers",
                                       "transforms", NULL};

int torc_tool__is_listing(const char *cmd) {
  for (int i = 0; listings[i]; i++)
    if (strcmp(cmd, listings[i]) == 0)
      return 1;
  return 0;
}

static const char *listing_usage(const char *cmd) {
  if (strcmp(cmd, "sources") == 0)
    return torc_tool__usage_sources;
  if (strcmp(cmd, "losses") == 0)
    return torc_tool__usage_losses;
  if (strcmp(cmd, "optimizers") == 0)
    return torc_tool__usage_optimizers;
  if (strcmp(cmd, "schedulers") == 0)
    return torc_tool__usage_schedulers;
  if (strcmp(cmd, "transforms") == 0)
    return torc_tool__usage_transforms;
  return torc_tool__usage_layers;
}

int torc_tool__cmd_layers(int argc, char **argv) {
  const char *config = NULL, *cmd = argv[0];
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(listing_usage(cmd), stdout);
      return EXIT_OK;
    } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else {
      fprintf(stderr, "torc %s: unexpected %s '%s'\nusage: torc %s "
                      "[--config FILE]\n",
              cmd, argv[i][0] == '-' ? "option" : "argument", argv[i], cmd);
      return EXIT_USAGE;
    }
  }
  if (config) {
    int rc;
    torc_config *cfg = load_config(cmd, config, &rc);
    if (cfg == NULL)
      return rc;
    torc_config_free(cfg);
  } else {
    torc_plugin_load_all(); /* what the plugin path offers; failures warn */
  }
  int n = 0;
  if (strcmp(cmd, "sources") == 0) {
    n = torc_data_source_count();
    for (int i = 0; i < n; i++) {
      const torc_data_source_type *t = torc_data_source_at(i);
      printf("%s\n    %s\n", t->name, t->description ? t->description : "");
      for (const torc_data_key *k = t->keys; k && k->name; k++)
        print_key(t->name, k->name, k->help, k->default_value);
    }
  } else if (strcmp(cmd, "losses") == 0) {
    n = torc_loss_type_count();
    for (int i = 0; i < n; i++) {
      const torc_loss_type *t = torc_loss_type_at(i);
      print_type(t->name, t->description, t->keys);
    }
  } else if (strcmp(cmd, "optimizers") == 0) {
    n = torc_optimizer_type_count();
    for (int i = 0; i < n; i++) {
      const torc_optimizer_type *t = torc_optimizer_type_at(i);
      print_type(t->name, t->description, t->keys);
    }
  } else if (strcmp(cmd, "schedulers") == 0) {
    n = torc_scheduler_type_count();
    for (int i = 0; i < n; i++) {
      const torc_scheduler_type *t = torc_scheduler_type_at(i);
      print_type(t->name, t->description, t->keys);
    }
    if (n > 0) {
      printf("(every type)\n    keys the core adds to each scheduler "
             "type\n");
      print_key(NULL, "warmup",
                "steps of linear warm-up before the schedule starts (0 = "
                "none)",
                "0");
      print_key(NULL, "warmup_start_factor",
                "the warm-up starts at this fraction of each group's lr (0 "
                "< f <= 1)",
                "0.1");
    }
  } else if (strcmp(cmd, "transforms") == 0) {
    n = torc_transform_stage_count();
    for (int i = 0; i < n; i++)
      printf("%s\n    %s\n", torc_transform_stage_name(i),
             torc_transform_stage_usage(i));
  } else {
    n = torc_module_type_count();
    for (int i = 0; i < n; i++) {
      const torc_module_type *t = torc_module_type_at(i);
      print_type(t->name, t->description, t->keys);
    }
  }
  if (n == 0) {
    const char *plugin = strcmp(cmd, "losses") == 0    ? "losses"
                         : strcmp(cmd, "sources") == 0 ? "data"
                                                       : "optim";
    fprintf(stderr, "torc %s: none registered; load the plugin that "
                    "provides them ([plugin.%s] module = %s)\n",
            cmd, plugin, plugin);
  }
  return EXIT_OK;
}
