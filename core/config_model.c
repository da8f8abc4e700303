/* core/config_model.c — the model an INI file describes: [model] (the
 * sample shape, the init scheme) and one [layer] section per module, in
 * file order, each built through the module type registry, or [model]
 * onnx = FILE imported (torc_onnx_module_new); errors carry the file and
 * line of the layer and key at fault.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "module_internal.h"
#include "torc/autograd.h"
#include "torc/config.h"
#include "torc/onnx.h"

const torc__config_row torc__model_rows[] = {
    {"model", NULL, TORC__CFG_SECTION, NULL, NULL, 0,
     "the model: the shape of one sample, then its [layer] sections (or "
     "onnx = an ONNX file)"},
    {"model", "input", TORC__CFG_STRING, NULL,
     "the sizes of one sample, e.g. 1,28,28 (C,H,W) or 784",
     TORC__CFG_REQUIRED,
     "the shape of one sample, without the batch dim; lazy sizes "
     "(in_features, in_channels) are inferred from it"},
    {"model", "input_dtype", TORC__CFG_ENUM, "auto", "auto|f32|i64", 0,
     "the sample's dtype: i64 for token ids, f32 for features; auto: i64 "
     "when the first layer is an embedding, else f32"},
    {"model", "init", TORC__CFG_ENUM, "default",
     "default|kaiming_uniform|kaiming_normal|xavier_uniform|xavier_normal|"
     "orthogonal",
     0, "default: each layer's PyTorch init; or one scheme for every "
        "linear/conv weight (biases zeroed)"},
    {"model", "onnx", TORC__CFG_PATH, NULL, NULL, 0,
     "an ONNX file the model is imported from (its initializers are the "
     "weights), in place of [layer] sections"},
    {"layer", NULL, TORC__CFG_SECTION, NULL, NULL, TORC__CFG_REPEAT,
     "one module of the model, in order; state-dict keys are \"0.weight\", "
     "\"3.bias\", ... as in nn.Sequential"},
    {"layer", "type", TORC__CFG_STRING, NULL,
     "a module type (`torc layers` lists them)", TORC__CFG_REQUIRED,
     "the module type: linear, conv2d, relu, ... or a plugin's"},
    {"layer", "repeat", TORC__CFG_INT, "1", "1..4096", 0,
     "this many copies of the layer in a row, each with its own weights "
     "(a stack of transformer blocks)"},
    {"layer", "*", TORC__CFG_ANY, NULL, NULL, 0,
     "the type's keys (`torc layers` lists them)"},
    {NULL, NULL, TORC__CFG_SECTION, NULL, NULL, 0, NULL}};

/* The model of `[model] onnx = path` (path resolved): refused beside
 * [layer] sections and with an init scheme other than default. */
static torc_module *onnx_model(const torc_config *cfg, int mi,
                               const char *path) {
  for (int i = 0; i < torc_config_section_count(cfg); i++)
    if (strcmp(torc_config_section_name(cfg, i), "layer") == 0) {
      torc__config_error(cfg, i, NULL, TORC_ERR_CONFIG,
                         "[model] onnx = %s builds the model from the ONNX "
                         "file, and [layer] sections build another; remove "
                         "the [layer] sections to use the ONNX model, or "
                         "the onnx key to build the model from them",
                         torc_config_section_get(cfg, mi, "onnx"));
      return NULL;
    }
  const char *scheme = torc__config_value(cfg, mi, "init");
  if (scheme && strcmp(scheme, "default") != 0) {
    torc__config_error(cfg, mi, "init", TORC_ERR_CONFIG,
                       "init = %s would overwrite the weights of the ONNX "
                       "model (onnx = %s); remove init, or set it to default",
                       scheme, torc_config_section_get(cfg, mi, "onnx"));
    return NULL;
  }
  torc_module *m = NULL;
  if (torc_onnx_module_new(path, &m) != TORC_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    torc__config_error(cfg, mi, "onnx", torc__config_rewrap_status(), "%s",
                       msg);
    return NULL;
  }
  return m;
}

/* The key of section i that the message names ("key 'k'"), or NULL. */
static const char *key_named(const torc_config *cfg, int i, const char *msg) {
  int n = torc_config_section_key_count(cfg, i);
  for (int j = 0; j < n; j++) {
    const char *k = torc_config_section_key(cfg, i, j);
    char pat[160];
    snprintf(pat, sizeof pat, "key '%s'", k);
    if (strstr(msg, pat))
      return k;
    /* PyTorch's name in the file, torc's in the type's message */
    const char *canon =
        torc__alias_key(torc_config_section_get(cfg, i, "type"), k);
    snprintf(pat, sizeof pat, "key '%s'", canon ? canon : "");
    if (canon && strstr(msg, pat))
      return k;
  }
  return NULL;
}

/* Appends the module [layer] section i describes to seq as layer number
 * `index`; the error names the section's line and the key at fault. */
static torc_status add_layer(const torc_config *cfg, int i, torc_module *seq,
                             int index) {
  const char *type = torc_config_section_get(cfg, i, "type");
  int nk = torc_config_section_key_count(cfg, i);
  const char **k = torc__calloc((size_t)nk + 1, sizeof *k);
  const char **v = torc__calloc((size_t)nk + 1, sizeof *v);
  int n = 0;
  for (int j = 0; k && v && j < nk; j++) {
    const char *key = torc_config_section_key(cfg, i, j);
    if (strcmp(key, "type") == 0 || strcmp(key, "repeat") == 0)
      continue;
    k[n] = key;
    v[n] = torc_config_section_get(cfg, i, key);
    n++;
  }
  torc_module *m = k && v ? torc_module_create(type, k, v, n) : NULL;
  if (k == NULL || v == NULL)
    torc_set_error(TORC_ERR_OOM, "out of memory building the model");
  torc__free(k);
  torc__free(v);
  if (m != NULL && torc_sequential_append(seq, m) == TORC_OK)
    return TORC_OK;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", torc_last_error());
  const char *key = key_named(cfg, i, msg);
  if (key == NULL && strstr(msg, "unknown module type"))
    key = "type";
  return torc__config_error(cfg, i, key, torc__config_rewrap_status(),
                            "layer %d (%s): %s", index, type, msg);
}

static int parse_shape(const char *s, int64_t *shape, int *ndim) {
  int n = 0;
  const char *p = s;
  while (*p) {
    while (*p == ' ' || *p == '\t')
      p++;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1 || n == TORC_MAX_DIMS - 1)
      return -1;
    shape[n++] = v;
    p = end;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == ',')
      p++;
    else if (*p)
      return -1;
  }
  *ndim = n;
  return n > 0 ? 0 : -1;
}

torc_dtype torc_model_input_dtype(const torc_config *cfg) {
  int mi = cfg ? torc__config_find(cfg, "model") : -1;
  const char *v = mi >= 0 ? torc__config_value(cfg, mi, "input_dtype") : NULL;
  if (v && strcmp(v, "i64") == 0)
    return TORC_I64;
  if (v && strcmp(v, "f32") == 0)
    return TORC_F32;
  for (int i = 0; cfg && i < torc_config_section_count(cfg); i++)
    if (strcmp(torc_config_section_name(cfg, i), "layer") == 0) {
      const char *t = torc_config_section_get(cfg, i, "type");
      return t && strcmp(t, "embedding") == 0 ? TORC_I64 : TORC_F32;
    }
  return TORC_F32;
}

torc_module *torc_module_from_config(const torc_config *cfg,
                                     int64_t *sample_shape, int *sample_ndim) {
  if (cfg == NULL) {
    torc__null_input("torc_module_from_config");
    return NULL;
  }
  int mi = torc__config_find(cfg, "model");
  if (mi < 0) {
    torc_set_error(TORC_ERR_CONFIG,
                   "%s: no [model] section; add [model] with input = the "
                   "shape of one sample (e.g. 1,28,28), then one [layer] "
                   "section per layer",
                   torc_config_path(cfg));
    return NULL;
  }
  int64_t shape[TORC_MAX_DIMS];
  int nd = 0;
  const char *in = torc__config_value(cfg, mi, "input");
  if (in == NULL || parse_shape(in, shape, &nd)) {
    torc__config_error(cfg, mi, "input", TORC_ERR_CONFIG,
                       "'%s' is not a shape; write the sizes of one sample "
                       "separated by commas, e.g. 1,28,28",
                       in ? in : "");
    return NULL;
  }
  const char *onnx = torc__config_value(cfg, mi, "onnx");
  torc_module *seq = onnx ? onnx_model(cfg, mi, onnx) : torc_sequential_new();
  if (seq == NULL)
    return NULL;
  int n_layers = 0, cap = 0, *where = NULL;
  for (int i = 0; !onnx && i < torc_config_section_count(cfg); i++) {
    if (strcmp(torc_config_section_name(cfg, i), "layer") != 0)
      continue;
    const char *rep = torc__config_value(cfg, i, "repeat");
    long long copies = rep ? strtoll(rep, NULL, 10) : 1;
    for (long long c = 0; c < copies; c++) {
      if (n_layers == cap) { /* doubling: n layers cost O(n) copies */
        cap = cap ? 2 * cap : 16;
        int *w = torc__realloc(where, (size_t)cap * sizeof *w);
        if (w == NULL) {
          torc_set_error(TORC_ERR_OOM, "out of memory building the model");
          goto fail;
        }
        where = w;
      }
      where[n_layers] = i;
      if (add_layer(cfg, i, seq, n_layers) != TORC_OK)
        goto fail;
      n_layers++;
    }
  }
  if (n_layers == 0 && !onnx) {
    torc__config_error(cfg, mi, NULL, TORC_ERR_CONFIG,
                       "the model has no layers; add a [layer] section with "
                       "type = ... for each, in order, or import a model "
                       "with [model] onnx = FILE.onnx");
    goto fail;
  }

  /* One forward on a zero batch of one: lazy sizes are inferred here, so a
   * size that does not fit is reported now, with its line. */
  int64_t bshape[TORC_MAX_DIMS];
  bshape[0] = 1;
  memcpy(bshape + 1, shape, (size_t)nd * sizeof *shape);
  torc_tensor *x =
      torc__empty(bshape, nd + 1, torc_model_input_dtype(cfg), TORC_CPU);
  torc_status st = x ? torc_zero_(x) : torc_last_status();
  char *sum = st == TORC_OK ? torc_module_summary(seq, x) : NULL;
  torc_release(x);
  if (sum == NULL) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", torc_last_error());
    /* A shape that does not fit, or a layer that cannot run at all here
     * (no kernel for an op: a backend plugin is missing). */
    torc_status why = torc_last_status();
    const char *what = why == TORC_ERR_NO_KERNEL || why == TORC_ERR_DEVICE ||
                               why == TORC_ERR_OOM || why == TORC_ERR_PLUGIN
                           ? "cannot run on"
                           : "does not fit";
    int layer = -1;
    const char *p = strstr(msg, "(in ");
    if (p && (p = strchr(p, '\'')) != NULL)
      layer = atoi(p + 1);
    torc_status code = torc__config_rewrap_status();
    if (layer >= 0 && layer < n_layers)
      torc__config_error(cfg, where[layer], NULL, code,
                         "layer %d (%s) %s a sample of shape [%s]: %s",
                         layer,
                         torc_config_section_get(cfg, where[layer], "type"),
                         what, in, msg);
    else
      torc__config_error(cfg, mi, "input", code,
                         "the model %s a sample of shape [%s]: %s",
                         strcmp(what, "does not fit") == 0 ? "does not run on"
                                                            : what,
                         in, msg);
    goto fail;
  }
  torc__free(sum);
  const char *scheme = torc__config_value(cfg, mi, "init");
  if (scheme && strcmp(scheme, "default") != 0 &&
      torc_module_init(seq, scheme, NULL) != TORC_OK) {
    torc__config_error(cfg, mi, "init", torc__config_rewrap_status(), "%s",
                       torc_last_error());
    goto fail;
  }
  torc__free(where);
  if (sample_shape)
    memcpy(sample_shape, shape, (size_t)nd * sizeof *shape);
  if (sample_ndim)
    *sample_ndim = nd;
  return seq;
fail:
  torc__free(where);
  torc_module_free(seq);
  return NULL;
}
