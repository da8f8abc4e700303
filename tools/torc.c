/* tools/torc.c — the `torc` command: main, the list of commands, and the
 * dispatch of a command name to the file that runs it (commands.h:
 * plugins_cmd.c, test_backend_cmd.c, describe_cmd.c, help_cmd.c,
 * train_cmd.c, memory_cmd.c, onnx_test_cmd.c, export_cmd.c).
 * Exit status (docs/exit-status.md, one table for every command, applied
 * by torc_tool__exit_status): 0 ok, 1 a failure while running, 2 bad
 * input, 130 interrupted.
 */
#include <stdio.h>
#include <string.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

/* ---- usage ---- */

const char torc_tool__usage_main[] =
    "usage: torc <command> [options]\n"
    "\n"
    "Commands:\n"
    "  plugins [--config FILE]  list plugins, devices, and which provider\n"
    "                           serves each op on each device type\n"
    "  test-backend PLUGIN [--config FILE] [--verbose]\n"
    "                           run the conformance suite on the device\n"
    "                           types PLUGIN registers, against cpu (ref)\n"
    "  describe FILE.ini        build the model of FILE.ini and print it\n"
    "                           and its summary table (shapes, parameters)\n"
    "  layers                   list the module types and their keys\n"
    "  sources                  list the data sources and their keys\n"
    "  losses, optimizers, schedulers, transforms\n"
    "                           list those types and their keys\n"
    "  version                  print the torc version and plugin ABI\n"
    "  help [COMMAND]           print this help, or a command's\n"
    "  train FILE.ini [--set S.K=V] [--resume [CKPT]]\n"
    "                           train the model of FILE.ini\n"
    "  eval FILE.ini --checkpoint PATH\n"
    "                           evaluate it on [data.test]\n"
    "  bench FILE.ini [--steps N] [--roofline]\n"
    "                           time its training steps, per op and layer\n"
    "                           (--roofline: FLOPs, GFLOP/s, % of peak)\n"
    "  memory FILE.ini [--steps N] [--device D]\n"
    "                           the device memory its training steps take\n"
    "  onnx-test [--strict] DIR...\n"
    "                           run ONNX backend test cases with torc\n"
    "  export FILE.ini --checkpoint CKPT -o OUT.onnx [--opset N]\n"
    "                           write the model with those weights as ONNX\n"
    "  generate FILE.ini [--prompt TEXT] [--tokens N]\n"
    "                           continue TEXT with its language model\n"
    "\n"
    "Options:\n"
    "  -h, --help               print this help (`torc COMMAND --help`: the\n"
    "                           command's)\n"
    "  --version                same as `torc version`\n"
    "\n"
    "Exit status (every command): 0 success; 1 a failure while running\n"
    "(out of memory, an I/O error while writing, a NaN loss); 2 bad input\n"
    "(usage, the configuration, a bad or hostile file, a missing plugin, a\n"
    "device mix-up); 130 interrupted (Ctrl-C).\n";

/* ---- dispatch and main ---- */

static int run(int argc, char **argv) {
  if (argc < 2) {
    fputs(torc_tool__usage_main, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (is_help_flag(cmd)) {
    fputs(torc_tool__usage_main, stdout);
    return EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0)
    return torc_tool__cmd_version(1, argv + 1);
  if (cmd[0] == '-') {
    fprintf(stderr, "torc: unknown option '%s'\n%s", cmd, commands_line);
    return EXIT_USAGE;
  }
  if (strcmp(cmd, "plugins") == 0)
    return torc_tool__cmd_plugins(argc - 1, argv + 1);
  if (strcmp(cmd, "version") == 0)
    return torc_tool__cmd_version(argc - 1, argv + 1);
  if (strcmp(cmd, "help") == 0)
    return torc_tool__cmd_help(argc - 1, argv + 1);
  if (strcmp(cmd, "test-backend") == 0)
    return torc_tool__cmd_test_backend(argc - 1, argv + 1);
  if (strcmp(cmd, "describe") == 0)
    return torc_tool__cmd_describe(argc - 1, argv + 1);
  if (torc_tool__is_listing(cmd))
    return torc_tool__cmd_layers(argc - 1, argv + 1);
  if (strcmp(cmd, "train") == 0)
    return torc_tool__cmd_train(argc - 1, argv + 1);
  if (strcmp(cmd, "eval") == 0)
    return torc_tool__cmd_eval(argc - 1, argv + 1);
  if (strcmp(cmd, "bench") == 0)
    return torc_tool__cmd_bench(argc - 1, argv + 1);
  if (strcmp(cmd, "memory") == 0)
    return torc_tool__cmd_memory(argc - 1, argv + 1);
  if (strcmp(cmd, "onnx-test") == 0)
    return torc_tool__cmd_onnx_test(argc - 1, argv + 1);
  if (strcmp(cmd, "export") == 0)
    return torc_tool__cmd_export(argc - 1, argv + 1);
  if (strcmp(cmd, "generate") == 0)
    return torc_tool__cmd_generate(argc - 1, argv + 1);
  if (is_reserved(cmd))
    return reserved(cmd);
  return unknown_command(cmd);
}

int main(int argc, char **argv) {
  int rc = run(argc, argv);
  torc_shutdown();
  /* Output that could not be written (a full disk, a closed pipe) is a
   * failure, not a silent success. */
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "torc: writing to standard output failed\n");
    if (rc == EXIT_OK)
      rc = EXIT_RUNTIME;
  }
  return rc;
}
