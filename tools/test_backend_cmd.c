/* tools/test_backend_cmd.c — `torc test-backend PLUGIN`: loads ref and the
 * plugin, and runs the conformance suite (conformance.c) on every device
 * type the plugin registers, or pinned to it for cpu kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"
#include "conformance.h"

const char torc_tool__usage_test_backend[] =
    "usage: torc test-backend PLUGIN [--config FILE] [--verbose]\n"
    "\n"
    "Loads ref, then PLUGIN (a name searched on the plugin path, or a file),\n"
    "and runs the conformance suite on every device type other than cpu\n"
    "that PLUGIN registers: each op x dtype x input variant (contiguous,\n"
    "non-contiguous, broadcast, empty, size-1 dims) on the device and on\n"
    "the cpu (ref), outputs and gradients compared, and a gradcheck in f64\n"
    "on the device for each differentiable op. An op or dtype the device\n"
    "has no kernel for is skipped, with the reason.\n"
    "\n"
    "Options:\n"
    "  --config FILE  apply this INI file first (its plugins and [torc]\n"
    "                 section; see docs/config.md)\n"
    "  --verbose      one line per case (PASS, FAIL or SKIP); without it,\n"
    "                 failures and the summary only\n"
    "  -h, --help     print this help\n"
    "\n"
    "Exit status: 0 no failure, 1 a case failed or a failure while running,\n"
    "2 bad input: usage, the configuration, or a plugin that cannot be\n"
    "loaded.\n";

/* ---- torc test-backend ---- */

static int has_type(const devlist *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0)
      return 1;
  return 0;
}

static int plugin_loaded(const char *name) {
  for (int i = 0; i < torc_plugin_count(); i++) {
    torc_plugin_summary p;
    if (torc_plugin_get(i, &p) == TORC_OK && strcmp(p.name, name) == 0)
      return 1;
  }
  return 0;
}

int torc_tool__cmd_test_backend(int argc, char **argv) {
  const char *config = NULL, *plugin = NULL;
  int verbose = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (is_help_flag(a)) {
      fputs(torc_tool__usage_test_backend, stdout);
      return EXIT_OK;
    } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      verbose = 1;
    } else if (strcmp(a, "--config") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "torc test-backend: option '--config' needs a file "
                        "name\nusage: torc test-backend PLUGIN [--config "
                        "FILE] [--verbose]\n");
        return EXIT_USAGE;
      }
      config = argv[++i];
    } else if (strncmp(a, "--config=", 9) == 0) {
      config = a + 9;
    } else if (a[0] != '-' && plugin == NULL) {
      plugin = a;
    } else {
      fprintf(stderr,
              "torc test-backend: unknown %s '%s'\n"
              "usage: torc test-backend PLUGIN [--config FILE] [--verbose]\n",
              a[0] == '-' ? "option" : "argument", a);
      return EXIT_USAGE;
    }
  }
  if (plugin == NULL) {
    fprintf(stderr, "torc test-backend: name the plugin to test, e.g. `torc "
                    "test-backend sim`\n"
                    "usage: torc test-backend PLUGIN [--config FILE] "
                    "[--verbose]\n");
    return EXIT_USAGE;
  }
  if (config) {
    torc_config *cfg = torc_config_load(config);
    if (cfg == NULL) {
      fprintf(stderr, "torc test-backend: %s\n", torc_last_error());
      return EXIT_USAGE;
    }
    torc_status st = torc_config_apply(cfg);
    torc_config_free(cfg);
    if (st != TORC_OK) {
      fprintf(stderr, "torc test-backend: %s\n", torc_last_error());
      return torc_tool__exit_status(st);
    }
  }
  if (!plugin_loaded("ref") && torc_plugin_load("ref", NULL) != TORC_OK) {
    fprintf(stderr,
            "torc test-backend: the reference backend is needed as the "
            "oracle: %s\n",
            torc_last_error());
    return torc_tool__exit_status(torc_last_status());
  }
  /* The device types before and after PLUGIN: the new ones are its own. */
  devlist before = {0}, types = {0};
  for (int id = 0; id < TORC_MAX_DEVICE_TYPES; id++)
    if (torc_device_type_name(id))
      devlist_add(&before, torc_device_type_name(id));
  const char *pname = plugin;
  if (!plugin_loaded(plugin)) {
    if (torc_plugin_load(plugin, NULL) != TORC_OK) {
      fprintf(stderr, "torc test-backend: cannot load plugin '%s': %s\n",
              plugin, torc_last_error());
      free(before.names);
      return torc_tool__exit_status(torc_last_status());
    }
    torc_plugin_summary p;
    if (torc_plugin_get(torc_plugin_count() - 1, &p) == TORC_OK)
      pname = p.name;
  }
  for (int id = 0; id < TORC_MAX_DEVICE_TYPES; id++) {
    const char *name = torc_device_type_name(id);
    if (name && strcmp(name, "cpu") != 0 && !has_type(&before, name))
      devlist_add(&types, name);
  }
  /* A plugin loaded by the configuration: the types it has kernels for. */
  for (int i = 0; i < torc_kernel_count(); i++) {
    torc_kernel_summary k;
    if (torc_kernel_get(i, &k) == TORC_OK && strcmp(k.provider, pname) == 0 &&
        strcmp(k.device_type, "cpu") != 0 && torc_device_count(k.device_type) > 0)
      devlist_add(&types, k.device_type);
  }
  free(before.names);
  int failed = 0, rc = EXIT_OK;
  /* Kernels for the cpu itself (a faster backend over ref): certified by
   * running every case pinned to ref and pinned to the plugin. */
  int cpu_kernels = 0;
  for (int i = 0; i < torc_kernel_count() && !cpu_kernels; i++) {
    torc_kernel_summary k;
    cpu_kernels = torc_kernel_get(i, &k) == TORC_OK &&
                  strcmp(k.provider, pname) == 0 &&
                  strcmp(k.device_type, "cpu") == 0 &&
                  strcmp(pname, "ref") != 0;
  }
  if (types.n == 0 && !cpu_kernels) {
    fprintf(stderr,
            "torc test-backend: plugin '%s' registers no kernels, so there "
            "is nothing to compare with ref\n",
            pname);
    free(types.names);
    return EXIT_USAGE;
  }
  if (cpu_kernels) {
    torc_conformance_result res;
    if (torc_conformance_run_provider(pname, verbose, stdout, &res) != 0)
      rc = EXIT_RUNTIME;
    failed += res.failed;
  }
  for (int i = 0; i < types.n; i++) {
    torc_conformance_result res;
    if (torc_conformance_run(types.names[i], verbose, stdout, &res) != 0)
      rc = EXIT_RUNTIME;
    failed += res.failed;
  }
  free(types.names);
  return failed ? EXIT_RUNTIME : rc;
}
