/* tools/commands.h — the `torc` subcommands that live in their own files
 * (train_cmd.c), and the exit statuses every command shares. */
#ifndef TORC_TOOLS_COMMANDS_H
#define TORC_TOOLS_COMMANDS_H

enum {
  TORC_TOOL_EXIT_OK = 0,
  TORC_TOOL_EXIT_RUNTIME = 1,
  TORC_TOOL_EXIT_USAGE = 2
};

/* `torc train` / `torc eval` / `torc bench`: argv[0] is the command
 * name. */
int torc_tool__cmd_train(int argc, char **argv);
int torc_tool__cmd_eval(int argc, char **argv);
int torc_tool__cmd_bench(int argc, char **argv);
extern const char torc_tool__usage_train[];
extern const char torc_tool__usage_eval[];
extern const char torc_tool__usage_bench[];

#endif /* TORC_TOOLS_COMMANDS_H */
