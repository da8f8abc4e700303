/* tools/cli.h — the helpers the `torc` command files share (cli.c): the
 * short names of the exit statuses, the help flag, the answers for an
 * unknown or reserved command, and a list of device type names.
 */
#ifndef TORC_TOOLS_CLI_H
#define TORC_TOOLS_CLI_H

#include "commands.h"

/* The exit statuses of commands.h, as the command files write them. */
enum {
  EXIT_OK = TORC_TOOL_EXIT_OK,
  EXIT_RUNTIME = TORC_TOOL_EXIT_RUNTIME,
  EXIT_USAGE = TORC_TOOL_EXIT_USAGE
};

/* 1 for "-h" and "--help". */
int is_help_flag(const char *a);

/* The one-paragraph list of commands that follows an unknown command or
 * option. */
extern const char commands_line[];

/* 1 for a command name kept for a later version (none now); reserved()
 * says it is not available and returns EXIT_USAGE. */
int is_reserved(const char *cmd);
int reserved(const char *cmd);

/* The command `cmd` is likely a slip for ("train" for "trian"), or
 * NULL. */
const char *nearest_command(const char *cmd);

/* Says `cmd` is not a command, with the nearest one and the list;
 * returns EXIT_USAGE. */
int unknown_command(const char *cmd);

/* Device type names, each once, in the order added; names are borrowed.
 * Free `names` when done. */
typedef struct devlist {
  const char **names;
  int n, cap;
} devlist;

/* Adds `name` unless it is there already; exits with EXIT_RUNTIME when
 * out of memory. */
void devlist_add(devlist *l, const char *name);

#endif /* TORC_TOOLS_CLI_H */
