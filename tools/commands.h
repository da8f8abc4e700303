/* tools/commands.h — the `torc` subcommands, each in its own file, that
 * torc.c dispatches to, their help texts, and the exit statuses every
 * command shares. */
#ifndef TORC_TOOLS_COMMANDS_H
#define TORC_TOOLS_COMMANDS_H

#include "torc/error.h"

/* The exit statuses (docs/exit-status.md): 0 success; 1 a failure while
 * running (out of memory, an I/O error while writing, a NaN abort); 2 bad
 * input (usage, configuration, a bad or hostile file, a missing plugin, a
 * device mix-up in the configuration); 130 interrupted (SIGINT). */
enum {
  TORC_TOOL_EXIT_OK = 0,
  TORC_TOOL_EXIT_RUNTIME = 1,
  TORC_TOOL_EXIT_USAGE = 2,
  TORC_TOOL_EXIT_INTERRUPTED = 130
};

/* The exit status for a command that failed with `st`, the one place the
 * statuses are split into the two classes: TORC_ERR_OOM, _NULL (an
 * earlier failure), _AUTOGRAD and _INTERNAL are failures while running
 * (1); TORC_ERR_INTERRUPTED is 130; every other error — a bad argument,
 * file, setting, shape, dtype, device, plugin or permission — is bad input
 * (2). TORC_OK gives 0. A command that has started its work (a training
 * step taken) reports any failure after that as 1 itself. */
int torc_tool__exit_status(torc_status st);

/* `torc train` / `torc eval` / `torc bench`: argv[0] is the command
 * name. */
int torc_tool__cmd_train(int argc, char **argv);
int torc_tool__cmd_eval(int argc, char **argv);
int torc_tool__cmd_bench(int argc, char **argv);
extern const char torc_tool__usage_train[];
extern const char torc_tool__usage_eval[];
extern const char torc_tool__usage_bench[];

/* `torc memory FILE.ini` (memory_cmd.c). */
int torc_tool__cmd_memory(int argc, char **argv);
extern const char torc_tool__usage_memory[];

/* `torc onnx-test DIR...` (onnx_test_cmd.c). */
int torc_tool__cmd_onnx_test(int argc, char **argv);
extern const char torc_tool__usage_onnx_test[];

/* `torc export FILE.ini --checkpoint CKPT -o OUT.onnx` (export_cmd.c). */
int torc_tool__cmd_export(int argc, char **argv);
extern const char torc_tool__usage_export[];

/* `torc generate FILE.ini --prompt TEXT` (generate_cmd.c). */
int torc_tool__cmd_generate(int argc, char **argv);
extern const char torc_tool__usage_generate[];

/* `torc plugins` (plugins_cmd.c). */
int torc_tool__cmd_plugins(int argc, char **argv);
extern const char torc_tool__usage_plugins[];

/* `torc test-backend PLUGIN` (test_backend_cmd.c). */
int torc_tool__cmd_test_backend(int argc, char **argv);
extern const char torc_tool__usage_test_backend[];

/* `torc describe FILE.ini`, and the listings `torc layers`, `sources`,
 * `losses`, `optimizers`, `schedulers`, `transforms` (one function:
 * argv[0] tells which; torc_tool__is_listing says whether a command is
 * one) (describe_cmd.c). */
int torc_tool__cmd_describe(int argc, char **argv);
int torc_tool__cmd_layers(int argc, char **argv);
int torc_tool__is_listing(const char *cmd);
extern const char torc_tool__usage_describe[];
extern const char torc_tool__usage_layers[];
extern const char torc_tool__usage_sources[];
extern const char torc_tool__usage_losses[];
extern const char torc_tool__usage_optimizers[];
extern const char torc_tool__usage_schedulers[];
extern const char torc_tool__usage_transforms[];

/* `torc version` and `torc help [COMMAND | config]` (help_cmd.c); the
 * list of every command, for `torc help` and `torc --help` (torc.c). */
int torc_tool__cmd_version(int argc, char **argv);
int torc_tool__cmd_help(int argc, char **argv);
extern const char torc_tool__usage_version[];
extern const char torc_tool__usage_help[];
extern const char torc_tool__usage_main[];

#endif /* TORC_TOOLS_COMMANDS_H */
