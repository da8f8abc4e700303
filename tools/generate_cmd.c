/* tools/generate_cmd.c — `torc generate FILE.ini [--checkpoint CKPT]
 * [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--seed S]`:
 * text from the language model of FILE.ini (torc_generate_text).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

const char torc_tool__usage_generate[] =
    "usage: torc generate FILE.ini [--checkpoint CKPT] [--prompt TEXT]\n"
    "                     [--tokens N] [--temperature T] [--top-k K]\n"
    "                     [--seed S] [--set S.K=V ...]\n"
    "\n"
    "Continues TEXT with the language model of FILE.ini (a model of token\n"
    "ids trained on a text source) and the weights of CKPT (a torc\n"
    "checkpoint or a plain state dict, loaded strictly; without\n"
    "--checkpoint, the run's newest checkpoint or final weights, as torc\n"
    "eval takes them), printing the prompt and each token as it is drawn.\n"
    "The vocabulary is [data.test]'s text source's (else [data.train]'s).\n"
    "Attention keeps its keys and values, recurrent layers their states,\n"
    "so each new token costs one position; the last line, on stderr, says\n"
    "how many tokens came in how long.\n"
    "\n"
    "  --checkpoint CKPT  the weights\n"
    "  --prompt TEXT      the text to continue (default: a newline)\n"
    "  --tokens N         how many tokens to add, 1..1000000 (default 200)\n"
    "  --temperature T    divides the logits; 0 = always the likeliest\n"
    "                     token (default 0.8)\n"
    "  --top-k K          draw among the K likeliest tokens; 0 = all\n"
    "                     (default 0)\n"
    "  --seed S           the sampler's seed (default 0): the same seed,\n"
    "                     weights and prompt give the same text\n"
    "  --set S.K=V        override key K of section S (repeatable)\n"
    "\n"
    "Exit status: 0 done; 1 a failure while running (out of memory); 2 bad\n"
    "input (usage, the configuration, no or a bad checkpoint, a prompt\n"
    "char outside the vocabulary).\n";

static int usage_error(const char *msg, const char *arg) {
  fprintf(stderr,
          "torc generate: %s%s%s\n(torc generate --help for the options)\n",
          msg, arg ? " " : "", arg ? arg : "");
  return EXIT_USAGE;
}

/* A number in [lo, hi] from s, or -1 (with the message) when it is not. */
static int number(const char *opt, const char *s, double lo, double hi,
                  double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !(v >= lo && v <= hi)) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s takes a number from %g to %g, not", opt, lo,
             hi);
    usage_error(msg, s);
    return -1;
  }
  *out = v;
  return 0;
}

int torc_tool__cmd_generate(int argc, char **argv) {
  const char *file = NULL;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  int n_sets = 0, rc = -1;
  if (sets == NULL)
    return EXIT_RUNTIME;
  torc_text_generate_options o = {.tokens = 200, .temperature = 0.8};
  for (int i = 1; i < argc && rc < 0; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    double d;
    if (is_help_flag(a)) {
      fputs(torc_tool__usage_generate, stdout);
      rc = EXIT_OK;
    } else if (strcmp(a, "--checkpoint") == 0 && v) {
      o.checkpoint = argv[++i];
    } else if (strcmp(a, "--prompt") == 0 && v) {
      o.prompt = argv[++i];
    } else if (strcmp(a, "--tokens") == 0 && v) {
      if (number(a, argv[++i], 1, 1000000, &d))
        rc = EXIT_USAGE;
      o.tokens = (int64_t)d;
    } else if (strcmp(a, "--temperature") == 0 && v) {
      if (number(a, argv[++i], 0, 1000, &d))
        rc = EXIT_USAGE;
      o.temperature = d;
    } else if (strcmp(a, "--top-k") == 0 && v) {
      if (number(a, argv[++i], 0, 1e9, &d))
        rc = EXIT_USAGE;
      o.top_k = (int64_t)d;
    } else if (strcmp(a, "--seed") == 0 && v) {
      if (number(a, argv[++i], 0, 9007199254740992.0, &d))
        rc = EXIT_USAGE;
      o.seed = (uint64_t)d;
    } else if (strcmp(a, "--set") == 0 && v) {
      sets[n_sets++] = argv[++i];
    } else if (a[0] == '-') {
      rc = usage_error("unknown option (or missing value)", a);
    } else if (file == NULL) {
      file = a;
    } else {
      rc = usage_error("unexpected argument", a);
    }
  }
  if (rc < 0 && file == NULL)
    rc = usage_error("which file? usage: torc generate FILE.ini "
                     "[--prompt TEXT]", NULL);
  torc_config *cfg = NULL;
  if (rc < 0) {
    cfg = torc_config_load(file);
    torc_status st = cfg ? TORC_OK : torc_last_status();
    for (int i = 0; st == TORC_OK && i < n_sets; i++)
      st = torc_config_set(cfg, sets[i]);
    if (st == TORC_OK)
      st = torc_config_apply(cfg);
    if (st != TORC_OK) {
      fprintf(stderr, "torc generate: %s\n", torc_last_error());
      rc = torc_tool__exit_status(st);
    }
  }
  free(sets);
  if (rc >= 0) {
    torc_config_free(cfg);
    return rc;
  }
  torc_status st = torc_generate_text(cfg, &o, stdout, stderr);
  torc_config_free(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "torc generate: %s\n", torc_last_error());
    return torc_tool__exit_status(st);
  }
  return EXIT_OK;
}
