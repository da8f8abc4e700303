/* tools/help_cmd.c — `torc help [COMMAND | config | ops]` (the list of
 * commands, a command's help, every section and key of an INI file, or
 * every op of the op table with its kernel contract) and `torc version`.
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
    "usage: torc help [COMMAND | config | ops]\n"
    "\n"
    "Prints the list of commands, or the help of COMMAND; `config`: every\n"
    "section and key of an INI file; `ops`: every op a backend may serve,\n"
    "with its kernel contract (from the op table, torc/ops.def).\n";

/* ---- the op table, for `torc help ops` ---- */

typedef struct op_row {
  const char *name, *kind, *rule, *io, *params, *ref, *backward, *doc;
} op_row;

#define REF(set, kernel) #set
#define NOREF "none"
#define BW(node, fn, saves) #node
#define OWNBW "recorded by the op"
#define NOBW "none"
#define TORC_OP(name, kind, rule, fn, io, params, ref, backward, test, doc)    \
  {#name, #kind, #rule, io, #params, ref, backward, doc},
static const op_row op_rows[] = {
#include "torc/ops.def"
};
#undef TORC_OP
#undef REF
#undef NOREF
#undef BW
#undef OWNBW
#undef NOBW

static void print_ops(void) {
  printf("Ops a backend registers kernels for (torc/ops.def; plugins name\n"
         "them by these strings). Per op: kind, dtype rule, kernel inputs ->\n"
         "outputs, params struct (torc/plugin.h), the reference kernel's\n"
         "dtypes, the autograd node; then what it computes.\n\n");
  for (size_t i = 0; i < sizeof op_rows / sizeof op_rows[0]; i++) {
    const op_row *r = &op_rows[i];
    printf("%-22s %-7s %-9s %-8s params %-20s ref %-8s backward %s\n"
           "    %s\n",
           r->name, r->kind, r->rule, r->io,
           strcmp(r->params, "void") ? r->params : "none", r->ref,
           r->backward, r->doc);
  }
}

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
  if (strcmp(cmd, "ops") == 0)
    print_ops();
  else if (strcmp(cmd, "plugins") == 0)
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
  else if (strcmp(cmd, "memory") == 0)
    fputs(torc_tool__usage_memory, stdout);
  else if (strcmp(cmd, "onnx-test") == 0)
    fputs(torc_tool__usage_onnx_test, stdout);
  else if (strcmp(cmd, "export") == 0)
    fputs(torc_tool__usage_export, stdout);
  else if (strcmp(cmd, "generate") == 0)
    fputs(torc_tool__usage_generate, stdout);
  else if (is_reserved(cmd))
    return reserved(cmd);
  else
    return unknown_command(cmd);
  return EXIT_OK;
}
