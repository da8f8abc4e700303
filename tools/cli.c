/* tools/cli.c — what the command files share: the help flag, the answers
 * for an unknown or reserved command, and a list of device type names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Command names kept for a later version (none at present). */
static const char *const reserved_commands[] = {NULL};

const char commands_line[] =
    "commands: train, eval, bench, plugins, describe, layers, sources,\n"
    "losses, optimizers, schedulers, transforms, version, help,\n"
    "test-backend, memory, onnx-test, export, generate; `torc --help` for\n"
    "details\n";

static const char *const command_names[] = {
    "train",  "eval",       "bench",      "plugins",    "describe",
    "layers", "sources",    "losses",     "optimizers", "schedulers",
    "transforms", "version", "help",      "test-backend", "memory",
    "onnx-test", "export", "generate", NULL};

int is_help_flag(const char *a) {
  return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

int is_reserved(const char *cmd) {
  for (int i = 0; reserved_commands[i]; i++)
    if (strcmp(cmd, reserved_commands[i]) == 0)
      return 1;
  return 0;
}

int reserved(const char *cmd) {
  fprintf(stderr, "torc %s: not available yet in this version (see README)\n",
          cmd);
  return EXIT_USAGE;
}

const char *nearest_command(const char *cmd) {
  const char *best = NULL;
  size_t bd = (size_t)-1;
  for (int i = 0; command_names[i]; i++) {
    size_t d = torc_edit_distance(cmd, command_names[i]);
    if (d < bd) {
      bd = d;
      best = command_names[i];
    }
  }
  /* near enough to be a slip: 1 edit in a short name, 2 in a longer */
  return bd <= (strlen(cmd) > 5 ? 2u : 1u) ? best : NULL;
}

int unknown_command(const char *cmd) {
  const char *near = nearest_command(cmd);
  if (near)
    fprintf(stderr, "torc: unknown command '%s'; did you mean '%s'?\n%s",
            cmd, near, commands_line);
  else
    fprintf(stderr, "torc: unknown command '%s'\n%s", cmd, commands_line);
  return EXIT_USAGE;
}

void devlist_add(devlist *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0)
      return;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    const char **p = realloc(l->names, sizeof *p * (size_t)l->cap);
    if (p == NULL) {
      fprintf(stderr, "torc: out of memory\n");
      exit(EXIT_RUNTIME);
    }
    l->names = p;
  }
  l->names[l->n++] = name;
}
