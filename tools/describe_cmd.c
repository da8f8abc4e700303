/* tools/describe_cmd.c — `torc describe FILE.ini` (the model of a file,
 * built and summarised), and `torc layers` / `torc sources` (the module
 * types and data sources, with their keys).
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

const char torc_tool__usage_layers[] =
    "usage: torc layers [--config FILE]\n"
    "\n"
    "Lists every module type a [layer] section may name (type = ...), with\n"
    "its keys, defaults and accepted values. Without --config every plugin\n"
    "on the plugin path is loaded (their module types are listed too); with\n"
    "it, that file's plugins.\n";

const char torc_tool__usage_sources[] =
    "usage: torc sources [--config FILE]\n"
    "\n"
    "Lists every data source a [data.NAME] section may name (source = ...),\n"
    "with its keys, defaults and accepted values. Without --config every\n"
    "plugin on the plugin path is loaded; with it, that file's plugins.\n";

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
  torc_config_free(cfg);
  if (m == NULL) {
    fprintf(stderr, "torc describe: %s\n", torc_last_error());
    return torc_tool__exit_status(torc_last_status());
  }
  shape[0] = 1;
  torc_tensor *x = torc_zeros(shape, nd + 1, TORC_F32, TORC_CPU);
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

int torc_tool__cmd_layers(int argc, char **argv) {
  const char *config = NULL;
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(strcmp(argv[0], "sources") == 0 ? torc_tool__usage_sources
                                            : torc_tool__usage_layers,
            stdout);
      return EXIT_OK;
    } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else {
      fprintf(stderr, "torc %s: unexpected %s '%s'\nusage: torc %s "
                      "[--config FILE]\n",
              argv[0], argv[i][0] == '-' ? "option" : "argument", argv[i],
              argv[0]);
      return EXIT_USAGE;
    }
  }
  if (config) {
    int rc;
    torc_config *cfg = load_config(argv[0], config, &rc);
    if (cfg == NULL)
      return rc;
    torc_config_free(cfg);
  } else {
    torc_plugin_load_all(); /* what the plugin path offers; failures warn */
  }
  if (strcmp(argv[0], "sources") == 0) {
    for (int i = 0; i < torc_data_source_count(); i++) {
      const torc_data_source_type *t = torc_data_source_at(i);
      printf("%s\n    %s\n", t->name, t->description ? t->description : "");
      for (const torc_data_key *k = t->keys; k && k->name; k++)
        printf("    %-18s %s%s%s%s\n", k->name, k->help ? k->help : "",
               k->default_value ? " (default " : " (required",
               k->default_value ? k->default_value : "", ")");
    }
    return EXIT_OK;
  }
  for (int i = 0; i < torc_module_type_count(); i++) {
    const torc_module_type *t = torc_module_type_at(i);
    printf("%s\n    %s\n", t->name, t->description ? t->description : "");
    for (const torc_module_key *k = t->keys; k && k->name; k++)
      printf("    %-18s %s%s%s%s\n", k->name, k->help ? k->help : "",
             k->default_value ? " (default " : " (required",
             k->default_value ? k->default_value : "", ")");
  }
  return EXIT_OK;
}
