/* tools/help_cmd.c — `torc help [COMMAND | config]` (the list of commands,
 * a command's help, or every section and key of an INI file) and `torc
 * version`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

const char torc_tool__usage_version[] =
    "usage: torc version\n"
    "\n"
    "Prints the torc library version and the plugin ABI version (a plugin\n"
    "loads when its ABI major equals this one).\n";

const char torc_tool__usage_help[] =
    "usage: torc help [COMMAND | config]\n"
    "\n"
    "Prints the list of commands, or the help of COMMAND.\n";

/* ---- torc version ---- */

int torc_tool__cmd_version(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (is_help_flag(argv[i])) {
      fputs(torc_tool__usage_version, stdout);
      return EXIT_OK;
    }
    fprintf(stderr, "torc version: unknown %s '%s'\nusage: torc version\n",
            argv[i][0] == '-' ? "option" : "argument", argv[i]);
    return EXIT_USAGE;
  }
  int abi_major, abi_minor;
  torc_abi_version(&abi_major, &abi_minor);
  printf("torc %s\nplugin ABI %d.%d\n", torc_version_string(), abi_major,
         abi_minor);
  return EXIT_OK;
}

/* ---- torc help ---- */

int torc_tool__cmd_help(int argc, char **argv) {
  if (argc < 2) {
    fputs(torc_tool__usage_main, stdout);
    return EXIT_OK;
  }
  if (argc > 2) {
    fprintf(stderr, "torc help: expected one command, got %d arguments\n"
                    "usage: torc help [COMMAND]\n",
            argc - 1);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "config") == 0) {
    char *h = torc_config_help();
    if (h == NULL) {
      fprintf(stderr, "torc help: %s\n", torc_last_error());
      return torc_tool__exit_status(torc_last_status());
    }
    printf("Sections and keys of a torc INI file (values are validated; an\n"
           "unknown section or key is an error with its line):\n\n%s", h);
    free(h);
    return EXIT_OK;
  }
  if (strcmp(cmd, "plugins") == 0)
    fputs(torc_tool__usage_plugins, stdout);
  else if (strcmp(cmd, "describe") == 0)
    fputs(torc_tool__usage_describe, stdout);
  else if (torc_tool__is_listing(cmd)) {
    char *args[] = {(char *)cmd, "--help", NULL};
    return torc_tool__cmd_layers(2, args);
  }
  else if (strcmp(cmd, "version") == 0)
    fputs(torc_tool__usage_version, stdout);
  else if (strcmp(cmd, "help") == 0)
    fputs(torc_tool__usage_help, stdout);
  else if (strcmp(cmd, "test-backend") == 0)
    fputs(torc_tool__usage_test_backend, stdout);
  else if (strcmp(cmd, "train") == 0)
    fputs(torc_tool__usage_train, stdout);
  else if (strcmp(cmd, "eval") == 0)
    fputs(torc_tool__usage_eval, stdout);
  else if (strcmp(cmd, "bench") == 0)
    fputs(torc_tool__usage_bench, stdout);
  else if (is_reserved(cmd))
    return reserved(cmd);
  else
    return unknown_command(cmd);
  return EXIT_OK;
}
