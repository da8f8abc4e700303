/* tools/export_cmd.c — `torc export FILE.ini --checkpoint CKPT -o OUT`:
 * the model of FILE.ini with the checkpoint's weights, written as ONNX by
 * torc_onnx_export (docs/export.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torc/torc.h"

#include "cli.h"
#include "commands.h"

const char torc_tool__usage_export[] =
    "usage: torc export FILE.ini --checkpoint CKPT -o OUT.onnx [--opset N]\n"
    "                   [--batch dynamic|N] [--set S.K=V ...]\n"
    "\n"
    "Builds the model of FILE.ini, loads the weights of CKPT (a torc\n"
    "checkpoint or a plain safetensors state dict, strictly, as torc eval),\n"
    "traces its forward in eval mode on zeros of [model] input's shape and\n"
    "writes it as an ONNX model to OUT.onnx: parameters and buffers are\n"
    "initializers under their state-dict names. The file is written whole\n"
    "or not at all. The last line: wrote OUT.onnx: N initializers, opset K,\nbatch B.\n"
    "\n"
    "  --checkpoint CKPT  the weights to export\n"
    "  -o, --output OUT   the .onnx file to write\n"
    "  --opset N          the ONNX opset, 13 to 17 (default 17)\n"
    "  --batch dynamic|N  dynamic (default): the input's and output's dim 0\n"
    "                     is the symbolic \"batch\", so any batch size runs;\n"
    "                     N: a model for batch size N only\n"
    "  --set S.K=V        override key K of section S (repeatable)\n"
    "\n"
    "Exit status: 0 written; 1 a failure while running (out of memory);\n"
    "2 bad input (usage, the configuration, a bad checkpoint, a layer with\n"
    "no ONNX form, an output path that cannot be written).\n";

static int usage_error(const char *msg, const char *arg) {
  fprintf(stderr,
          "torc export: %s%s%s\n(torc export --help for the options)\n", msg,
          arg ? " " : "", arg ? arg : "");
  return EXIT_USAGE;
}

/* Loads the weights at ckpt into m: a checkpoint's model part, or a plain
 * state dict. */
static torc_status load_weights(torc_module *m, const char *ckpt) {
  torc_state_dict *sd = torc_state_dict_load(ckpt, TORC_CPU);
  if (sd == NULL)
    return torc_last_status();
  const char *fmt = torc_state_dict_meta(sd, "torc.format");
  torc_status st = fmt && strcmp(fmt, "checkpoint") == 0
                       ? torc_checkpoint_load_module(sd, m, NULL, NULL)
                       : torc_module_load_state_dict(m, sd, NULL, NULL);
  torc_state_dict_free(sd);
  return st;
}

typedef struct {
  const char *file, *ckpt, *out;
  char **sets;
  int n_sets;
  long opset, batch; /* batch 0: dynamic */
} export_args;

static int parse_args(int argc, char **argv, export_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end;
    if (is_help_flag(s)) {
      fputs(torc_tool__usage_export, stdout);
      return EXIT_OK;
    } else if (strcmp(s, "--checkpoint") == 0 && v) {
      a->ckpt = argv[++i];
    } else if ((strcmp(s, "-o") == 0 || strcmp(s, "--output") == 0) && v) {
      a->out = argv[++i];
    } else if (strcmp(s, "--set") == 0 && v) {
      a->sets[a->n_sets++] = argv[++i];
    } else if (strcmp(s, "--opset") == 0 && v) {
      a->opset = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || a->opset < TORC_ONNX_EXPORT_MIN_OPSET ||
          a->opset > TORC_ONNX_EXPORT_MAX_OPSET) {
        fprintf(stderr,
                "torc export: --opset %s: torc writes opsets %d to %d; "
                "choose one of those (default %d)\n",
                argv[i], TORC_ONNX_EXPORT_MIN_OPSET,
                TORC_ONNX_EXPORT_MAX_OPSET, TORC_ONNX_EXPORT_MAX_OPSET);
        return EXIT_USAGE;
      }
    } else if (strcmp(s, "--batch") == 0 && v) {
      if (strcmp(argv[++i], "dynamic") == 0) {
        a->batch = 0;
      } else {
        a->batch = strtol(argv[i], &end, 10);
        if (*end || end == argv[i] || a->batch < 1 || a->batch > 1000000)
          return usage_error("--batch takes dynamic or a batch size "
                             "(1..1000000), not", argv[i]);
      }
    } else if (s[0] == '-') {
      return usage_error("unknown option (or missing value)", s);
    } else if (a->file == NULL) {
      a->file = s;
    } else {
      return usage_error("unexpected argument", s);
    }
  }
  if (a->file == NULL)
    return usage_error("which file? usage: torc export FILE.ini "
                       "--checkpoint CKPT -o OUT.onnx", NULL);
  if (a->ckpt == NULL)
    return usage_error("which weights? add --checkpoint CKPT (a checkpoint "
                       "or a safetensors state dict of the model)", NULL);
  if (a->out == NULL)
    return usage_error("where to? add -o OUT.onnx", NULL);
  return -1;
}

int torc_tool__cmd_export(int argc, char **argv) {
  export_args a = {0};
  a.sets = calloc((size_t)argc + 1, sizeof *a.sets);
  if (a.sets == NULL)
    return EXIT_RUNTIME;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) {
    free(a.sets);
    return rc;
  }
  torc_status st = TORC_OK;
  torc_config *cfg = torc_config_load(a.file);
  if (cfg == NULL)
    st = torc_last_status();
  for (int i = 0; st == TORC_OK && i < a.n_sets; i++)
    st = torc_config_set(cfg, a.sets[i]);
  free(a.sets);
  if (st == TORC_OK)
    st = torc_config_apply(cfg);
  int64_t shape[TORC_MAX_DIMS + 1];
  int nd = 0;
  torc_module *m = NULL;
  if (st == TORC_OK &&
      (m = torc_module_from_config(cfg, shape + 1, &nd)) == NULL)
    st = torc_last_status();
  if (st == TORC_OK)
    st = load_weights(m, a.ckpt);
  torc_tensor *x = NULL;
  /* Traced at batch 2 when dynamic: at 1, a unit dim hides its layout. */
  shape[0] = a.batch ? a.batch : 2;
  if (st == TORC_OK &&
      (x = torc_zeros(shape, nd + 1, torc_model_input_dtype(cfg),
                       TORC_CPU)) == NULL)
    st = torc_last_status();
  torc_onnx_export_options o = {.opset = (int)a.opset,
                                .fixed_batch = a.batch != 0};
  if (st == TORC_OK)
    st = torc_onnx_export(m, (const torc_tensor *const *)&x, 1, &o, a.out);
  int inits = 0;
  if (st == TORC_OK) {
    /* The file read back, as a runtime will see it. */
    torc_onnx_model *om = torc_onnx_load(a.out);
    if (om == NULL)
      st = torc_last_status();
    else
      inits = torc_onnx_n_initializers(om);
    torc_onnx_free(om);
  }
  torc_release(x);
  torc_module_free(m);
  torc_config_free(cfg);
  if (st != TORC_OK) {
    fprintf(stderr, "torc export: %s\n", torc_last_error());
    return torc_tool__exit_status(st);
  }
  printf("wrote %s: %d initializers, opset %ld, batch ", a.out, inits,
         a.opset ? a.opset : (long)TORC_ONNX_EXPORT_MAX_OPSET);
  if (a.batch)
    printf("%ld\n", a.batch);
  else
    printf("dynamic\n");
  return EXIT_OK;
}
