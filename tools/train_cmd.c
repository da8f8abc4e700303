/* tools/train_cmd.c — `torc train`, `torc eval` and `torc bench`: argument
 * parsing, the configuration (with --set overrides), the last line of
 * output the docs fix, and the status-to-exit-status table every command
 * shares. The work is torc_train / torc_evaluate / torc_bench.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "torc/torc.h"

const char torc_tool__usage_train[] =
    "usage: torc train FILE.ini [--set SECTION.KEY=VALUE ...] [--resume "
    "[CHECKPOINT] | --overwrite]\n"
    "\n"
    "Trains the model of FILE.ini (see `torc help config`): a start-up\n"
    "header (the plugins and the ops each serves, the device, the parameter\n"
    "count, the data sizes, the outputs), a progress bar on a terminal, log\n"
    "lines otherwise; one summary line per epoch. The run folder ([train]\n"
    "dir, default runs/<FILE>/ beside FILE.ini) gets config.ini,\n"
    "metrics.csv, curves.svg, the checkpoints and final.safetensors; a\n"
    "folder holding an earlier run is refused unless --overwrite or\n"
    "--resume says what to do. The last line: done: epochs=N test_loss=L\n"
    "test_accuracy=A seconds=S.\n"
    "\n"
    "  --set S.K=V        override key K of section S (repeatable)\n"
    "  --resume [PATH]    go on from the newest checkpoint in [checkpoint]\n"
    "                     dir, or from PATH (a finished run: status 2,\n"
    "                     raise [train] epochs to go on)\n"
    "  --overwrite        replace the earlier run in the run folder\n"
    "  --progress bar|lines  force the progress style\n"
    "  --nproc N          train in N processes on this machine, started\n"
    "                     through mpirun (data-parallel: [data.train]\n"
    "                     batch_size is split among them; see `torc help\n"
    "                     config`, [dist]); under mpirun -np N, leave it out\n"
    "\n"
    "Ctrl-C writes a checkpoint at the end of the current step and exits\n"
    "130. Exit status: 0 done; 1 a failure once training has started (out\n"
    "of memory, a NaN loss, a checkpoint that cannot be written); 2 bad\n"
    "input found before the first step (usage, the configuration, a bad or\n"
    "hostile file or checkpoint, a missing plugin, a device mix-up); 130\n"
    "interrupted.\n";

const char torc_tool__usage_eval[] =
    "usage: torc eval FILE.ini [--checkpoint PATH] [--set S.K=V ...] "
    "[--predict N]\n"
    "\n"
    "Evaluates the model of FILE.ini on [data.test] with the weights of\n"
    "PATH (a torc checkpoint or a plain safetensors state dict, loaded\n"
    "strictly), or of the run's newest checkpoint (the one --resume takes)\n"
    "without --checkpoint. For classification: the confusion matrix and the\n"
    "per-class precision, recall and F1 (as scikit-learn's\n"
    "classification_report), classes named by [data.test] class_names.\n"
    "--predict N shows the first N test samples: true class, predicted\n"
    "class and its probability, mistakes marked (the outputs for\n"
    "regression). The last line: eval: loss=L accuracy=A samples=N.\n"
    "\n"
    "Exit status: 0 success, 1 a failure while running (out of memory),\n"
    "2 bad input (usage, the configuration, no checkpoint, a bad\n"
    "checkpoint or data file, a missing plugin).\n";

int torc_tool__exit_status(torc_status st) {
  switch (st) {
  case TORC_OK:
    return TORC_TOOL_EXIT_OK;
  case TORC_ERR_INTERRUPTED:
    return TORC_TOOL_EXIT_INTERRUPTED;
  case TORC_ERR_OOM:
  case TORC_ERR_NULL:
  case TORC_ERR_AUTOGRAD:
  case TORC_ERR_INTERNAL:
  case TORC_ERR_DIST:
    return TORC_TOOL_EXIT_RUNTIME;
  case TORC_ERR_INVALID:
  case TORC_ERR_SHAPE:
  case TORC_ERR_DTYPE:
  case TORC_ERR_DEVICE:
  case TORC_ERR_NO_KERNEL:
  case TORC_ERR_RANGE:
  case TORC_ERR_IO:
  case TORC_ERR_CONFIG:
  case TORC_ERR_PLUGIN:
  case TORC_ERR_ABI:
  case TORC_ERR_PERMISSION:
  case TORC_ERR_UNSUPPORTED:
    return TORC_TOOL_EXIT_USAGE;
  }
  return TORC_TOOL_EXIT_RUNTIME; /* a status this build does not know */
}

/* Loads FILE with the --set overrides and applies it; NULL and *rc set on
 * error (2 for the file or a key; applying it maps its status). */
static torc_config *config_with_sets(const char *cmd, const char *file,
                                     char **sets, int n_sets, int *rc) {
  torc_config *cfg = torc_config_load(file);
  if (cfg == NULL) {
    fprintf(stderr, "torc %s: %s\n", cmd, torc_last_error());
    *rc = TORC_TOOL_EXIT_USAGE;
    return NULL;
  }
  for (int i = 0; i < n_sets; i++)
    if (torc_config_set(cfg, sets[i]) != TORC_OK) {
      fprintf(stderr, "torc %s: %s\n", cmd, torc_last_error());
      torc_config_free(cfg);
      *rc = TORC_TOOL_EXIT_USAGE;
      return NULL;
    }
  torc_status st = torc_config_apply(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "torc %s: %s\n", cmd, torc_last_error());
    torc_config_free(cfg);
    *rc = torc_tool__exit_status(st);
    return NULL;
  }
  return cfg;
}

static int usage_error(const char *cmd, const char *msg, const char *arg) {
  fprintf(stderr, "torc %s: %s%s%s\n(torc %s --help for the options)\n", cmd,
          msg, arg ? " " : "", arg ? arg : "", cmd);
  return TORC_TOOL_EXIT_USAGE;
}

/* "wrote DIR: FILE ..." for what the run folder holds after a run. */
static void print_wrote(const char *dir) {
  static const char *const files[] = {"config.ini", "metrics.csv",
                                      "curves.svg", "final.safetensors",
                                      "best.safetensors"};
  printf("wrote %s:", dir);
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char p[1100];
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    if (access(p, F_OK) == 0)
      printf(" %s", files[i]);
  }
  printf("\n");
}

/* torc train --nproc N: this command again under `mpirun -np N` (or
 * $TORC_MPIRUN), without --nproc; mpirun's status, with a rank killed by a
 * signal (mpirun's 128 + N) reported as a failure, status 1. */
static int run_nproc(int argc, char **argv, long nproc) {
  int r, w;
  if (torc_dist_env(&r, &w) != TORC_OK || w > 1) {
    fprintf(stderr, "torc train: --nproc %ld under a launcher that already "
                    "started %d ranks; leave --nproc out under mpirun\n",
            nproc, w);
    return TORC_TOOL_EXIT_USAGE;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "torc train: cannot find this program's path to start "
                    "its ranks (/proc/self/exe)\n");
    return TORC_TOOL_EXIT_RUNTIME;
  }
  self[n] = '\0';
  const char *mpirun = getenv("TORC_MPIRUN");
  if (mpirun == NULL || *mpirun == '\0')
    mpirun = "mpirun";
  char np[32];
  snprintf(np, sizeof np, "%ld", nproc);
  char **av = calloc((size_t)argc + 8, sizeof *av);
  if (av == NULL)
    return TORC_TOOL_EXIT_RUNTIME;
  int k = 0;
  av[k++] = (char *)mpirun;
  av[k++] = "-np";
  av[k++] = np;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (nproc > cpus) /* more ranks than cores: Open MPI asks to be told */
    av[k++] = "--oversubscribe";
  av[k++] = self;
  av[k++] = "train";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--nproc") == 0) {
      i++;
      continue;
    }
    av[k++] = argv[i];
  }
  /* Open MPI refuses root unless told; a one-machine run as root (a
   * container) is what --nproc is for. */
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execvp(mpirun, av);
    fprintf(stderr, "torc train: cannot run %s for --nproc (%s): apt-get "
                    "install openmpi-bin, or set TORC_MPIRUN\n",
            mpirun, strerror(errno));
    _exit(TORC_TOOL_EXIT_USAGE);
  }
  free(av);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) {
    fprintf(stderr, "torc train: cannot start %s: %s\n", mpirun,
            strerror(errno));
    return TORC_TOOL_EXIT_RUNTIME;
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code >= 128) {
    fprintf(stderr, "torc train: a rank of the %ld ended abnormally (status "
                    "%d; mpirun's message above names it) and the others "
                    "were stopped. The newest checkpoint is intact: go on "
                    "with torc train --resume (on any number of ranks)\n",
            nproc, code);
    return TORC_TOOL_EXIT_RUNTIME;
  }
  return code;
}

int torc_tool__cmd_train(int argc, char **argv) {
  const char *file = NULL, *resume = NULL;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  int n_sets = 0, bar = isatty(STDOUT_FILENO), overwrite = 0;
  long nproc = 0;
  if (sets == NULL)
    return TORC_TOOL_EXIT_RUNTIME;
  int rc = -1;
  for (int i = 1; i < argc && rc < 0; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(torc_tool__usage_train, stdout);
      rc = TORC_TOOL_EXIT_OK;
    } else if (strcmp(a, "--set") == 0) {
      if (i + 1 >= argc)
        rc = usage_error("train", "--set needs SECTION.KEY=VALUE", NULL);
      else
        sets[n_sets++] = argv[++i];
    } else if (strncmp(a, "--set=", 6) == 0) {
      sets[n_sets++] = argv[i] + 6;
    } else if (strcmp(a, "--resume") == 0) {
      resume = "";
      if (i + 1 < argc && argv[i + 1][0] != '-' && file != NULL)
        resume = argv[++i];
    } else if (strcmp(a, "--overwrite") == 0) {
      overwrite = 1;
    } else if (strcmp(a, "--nproc") == 0 && i + 1 < argc) {
      char *end;
      nproc = strtol(argv[++i], &end, 10);
      if (*end || nproc < 1 || nproc > 4096)
        rc = usage_error("train", "--nproc takes a count of processes "
                         "(1..4096), not", argv[i]);
    } else if (strcmp(a, "--progress") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "bar") == 0)
        bar = 1;
      else if (strcmp(v, "lines") == 0)
        bar = 0;
      else
        rc = usage_error("train", "--progress takes bar or lines, not", v);
    } else if (a[0] == '-') {
      rc = usage_error("train", "unknown option", a);
    } else if (file == NULL) {
      file = a;
    } else {
      rc = usage_error("train", "unexpected argument", a);
    }
  }
  if (rc < 0 && file == NULL)
    rc = usage_error("train", "which file? usage: torc train FILE.ini", NULL);
  if (rc < 0 && overwrite && resume)
    rc = usage_error("train", "--overwrite and --resume exclude each other; "
                     "choose one", NULL);
  if (rc < 0 && nproc > 0) {
    free(sets);
    return run_nproc(argc, argv, nproc);
  }
  torc_config *cfg = NULL;
  if (rc < 0)
    cfg = config_with_sets("train", file, sets, n_sets, &rc);
  free(sets);
  if (cfg == NULL)
    return rc < 0 ? TORC_TOOL_EXIT_USAGE : rc;

  torc_train_opts o = {.resume = resume, .progress_bar = bar,
                       .handle_sigint = 1, .out = stdout};
  torc_train_result res;
  /* An earlier run's files are kept unless the command line says. */
  torc_train_callbacks keep = {.struct_size = sizeof keep,
                               .flags = overwrite ? 0u
                                                  : TORC_TRAIN_KEEP_EARLIER};
  torc_status st = torc_train_ex(cfg, &o, &keep, &res);
  /* Several processes: rank 0 prints the run's lines, the others only
   * their errors. */
  int quiet = torc_dist_rank() != 0;
  char dir[1024];
  if (st == TORC_OK && !quiet &&
      torc_train_run_dir(cfg, dir, sizeof dir) == TORC_OK)
    print_wrote(dir);
  torc_config_free(cfg);
  if (st == TORC_ERR_INTERRUPTED)
    return TORC_TOOL_EXIT_INTERRUPTED;
  if (st != TORC_OK) {
    if (torc_dist_world_size() > 1)
      fprintf(stderr, "torc train: rank %d: %s\n", torc_dist_rank(),
              torc_last_error());
    else
      fprintf(stderr, "torc train: %s\n", torc_last_error());
    /* Before the first step: the file, its data, plugins or a checkpoint,
     * as for every command. After it, a failure while running (a NaN
     * loss, a checkpoint that cannot be written). */
    int code = res.steps > 0 ? TORC_TOOL_EXIT_RUNTIME
                             : torc_tool__exit_status(st);
    /* A failure in training on one rank ends the others now, not at
     * their timeout (before training every rank knew, and the trainer
     * left the world). */
    if (torc_dist_world_size() > 1)
      torc_dist_finalize(1);
    return code;
  }
  torc_dist_finalize(0);
  if (quiet)
    return TORC_TOOL_EXIT_OK;
  /* The run's last line; no accuracy for regression, no test figures
   * without [data.test]. */
  printf("done: epochs=%lld", (long long)res.epochs);
  if (res.test_loss == res.test_loss)
    printf(" test_loss=%.4f", res.test_loss);
  if (res.test_accuracy == res.test_accuracy)
    printf(" test_accuracy=%.4f", res.test_accuracy);
  printf(" seconds=%.1f\n", res.seconds);
  return TORC_TOOL_EXIT_OK;
}

int torc_tool__cmd_eval(int argc, char **argv) {
  const char *file = NULL, *ckpt = NULL;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  int n_sets = 0, predict = 0, rc = -1;
  if (sets == NULL)
    return TORC_TOOL_EXIT_RUNTIME;
  for (int i = 1; i < argc && rc < 0; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(torc_tool__usage_eval, stdout);
      rc = TORC_TOOL_EXIT_OK;
    } else if (strcmp(a, "--checkpoint") == 0 && i + 1 < argc) {
      ckpt = argv[++i];
    } else if (strcmp(a, "--set") == 0 && i + 1 < argc) {
      sets[n_sets++] = argv[++i];
    } else if (strcmp(a, "--predict") == 0 && i + 1 < argc) {
      char *end;
      long n = strtol(argv[++i], &end, 10);
      if (*end || n < 0 || n > 1000000)
        rc = usage_error("eval", "--predict takes a count (0..1000000), not",
                         argv[i]);
      predict = (int)n;
    } else if (a[0] == '-') {
      rc = usage_error("eval", "unknown option (or missing value)", a);
    } else if (file == NULL) {
      file = a;
    } else {
      rc = usage_error("eval", "unexpected argument", a);
    }
  }
  if (rc < 0 && file == NULL)
    rc = usage_error("eval", "which file? usage: torc eval FILE.ini "
                     "[--checkpoint PATH]", NULL);
  torc_config *cfg = NULL;
  if (rc < 0)
    cfg = config_with_sets("eval", file, sets, n_sets, &rc);
  free(sets);
  if (cfg == NULL)
    return rc < 0 ? TORC_TOOL_EXIT_USAGE : rc;
  torc_eval_result res;
  torc_status st = torc_evaluate(cfg, ckpt, predict, stdout, &res);
  torc_config_free(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "torc eval: %s\n", torc_last_error());
    return torc_tool__exit_status(st);
  }
  if (predict > 0 && res.confusion)
    putchar('\n'); /* the predictions, then the report */
  torc_eval_report(&res, stdout);
  free(res.confusion);
  free(res.class_names);
  if (res.accuracy == res.accuracy)
    printf("eval: loss=%.4f accuracy=%.4f samples=%lld\n", res.loss,
           res.accuracy, (long long)res.samples);
  else
    printf("eval: loss=%.4f samples=%lld\n", res.loss,
           (long long)res.samples);
  return TORC_TOOL_EXIT_OK;
}

const char torc_tool__usage_bench[] =
    "usage: torc bench FILE.ini [--steps N] [--roofline] [--all-ops]\n"
    "                  [--set S.K=V ...]\n"
    "\n"
    "Times N training steps (default 50, after 5 of warm-up) of the model\n"
    "of FILE.ini on batches of [data.train] and prints the step time,\n"
    "samples/s and a profile: kernels by op with the plugin that served\n"
    "each and their share of the time,\n"
    "the time outside kernels, and forward/backward time per layer.\n"
    "\n"
    "  --steps N      time N steps (1..1000000)\n"
    "  --roofline     measure the machine's fp32 FMA peak first (on the\n"
    "                 run's threads, a fraction of a second) and print the\n"
    "                 profile as a roofline: per op and per layer the FLOPs\n"
    "                 per step (counted from each kernel call's shapes; -\n"
    "                 for an op with no formula), GFLOP/s and % of the\n"
    "                 peak, GB/s for the memory-bound ops, and the whole\n"
    "                 step's GFLOP/s against the peak\n"
    "  --all-ops      list every op in the profile (default: the 15\n"
    "                 costliest)\n"
    "  --set S.K=V    override key K of section S (repeatable)\n"
    "\n"
    "Exit status: 0 success, 1 a failure while running, 2 bad input.\n";

int torc_tool__cmd_bench(int argc, char **argv) {
  const char *file = NULL;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  int n_sets = 0, rc = -1;
  unsigned flags = 0;
  long steps = 50;
  if (sets == NULL)
    return TORC_TOOL_EXIT_RUNTIME;
  for (int i = 1; i < argc && rc < 0; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(torc_tool__usage_bench, stdout);
      rc = TORC_TOOL_EXIT_OK;
    } else if (strcmp(a, "--set") == 0 && i + 1 < argc) {
      sets[n_sets++] = argv[++i];
    } else if (strcmp(a, "--steps") == 0 && i + 1 < argc) {
      char *end;
      steps = strtol(argv[++i], &end, 10);
      if (*end || steps < 1 || steps > 1000000)
        rc = usage_error("bench", "--steps takes a count (1..1000000), not",
                         argv[i]);
    } else if (strcmp(a, "--roofline") == 0) {
      flags |= TORC_BENCH_ROOFLINE;
    } else if (strcmp(a, "--all-ops") == 0) {
      flags |= TORC_BENCH_ALL_OPS;
    } else if (a[0] == '-') {
      rc = usage_error("bench", "unknown option (or missing value)", a);
    } else if (file == NULL) {
      file = a;
    } else {
      rc = usage_error("bench", "unexpected argument", a);
    }
  }
  if (rc < 0 && file == NULL)
    rc = usage_error("bench", "which file? usage: torc bench FILE.ini", NULL);
  torc_config *cfg = NULL;
  if (rc < 0)
    cfg = config_with_sets("bench", file, sets, n_sets, &rc);
  free(sets);
  if (cfg == NULL)
    return rc < 0 ? TORC_TOOL_EXIT_USAGE : rc;
  torc_status st = torc_bench_ex(cfg, steps, flags, stdout);
  torc_config_free(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "torc bench: %s\n", torc_last_error());
    return torc_tool__exit_status(st);
  }
  return TORC_TOOL_EXIT_OK;
}
