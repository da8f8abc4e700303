/* tests/fuzz/fuzz_ini.c — libFuzzer harness of the INI reader
 * (core/config_read.c, through inih) and of the model builder on top of it
 * (core/config_model.c): the input is parsed as a configuration, the model
 * of its [model] and [layer] sections is built (one dry forward on the ref
 * backend) and described as `torc describe` does; a [data.*] transform
 * spec is parsed too. Nothing is trained, and no plugin the text names is
 * loaded (torc_config_apply is not called: a fuzzed file must never choose
 * what gets dlopen-ed).
 */
#include "fuzz_common.h"

#include <ctype.h>

/* Sizes a fuzzed file may ask for: any integer in a value above
 * FUZZ_INI_MAX_INT, or a sample ([model] input) of more than
 * FUZZ_INI_MAX_INPUT elements, or more than FUZZ_INI_MAX_LAYERS layers
 * makes the input skipped before the model is built. A 4096-channel
 * convolution is a legitimate model, just a slow one to run per input;
 * the parser and the builder's checks are what is fuzzed. */
#define FUZZ_INI_MAX_INT 256
#define FUZZ_INI_MAX_INPUT 4096
#define FUZZ_INI_MAX_LAYERS 24

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("ref");
  return 0;
}

/* Whether every run of digits in s is at most max (and, when prod is not
 * NULL, multiplies them into *prod, capped at max_prod + 1). */
static int small_numbers(const char *s, long long max, long long *prod,
                         long long max_prod) {
  for (const char *c = s; *c;) {
    if (!isdigit((unsigned char)*c)) {
      c++;
      continue;
    }
    long long v = 0;
    while (isdigit((unsigned char)*c)) {
      if (v <= max)
        v = v * 10 + (*c - '0');
      c++;
    }
    if (v > max)
      return 0;
    if (prod && *prod <= max_prod)
      *prod *= v;
  }
  return 1;
}

/* Whether the configuration only asks for a model small enough to build
 * per input (see FUZZ_INI_MAX_*). */
static int small_model(const torc_config *cfg) {
  int layers = 0;
  for (int i = 0; i < torc_config_section_count(cfg); i++) {
    const char *sec = torc_config_section_name(cfg, i);
    int is_model = sec && strcmp(sec, "model") == 0;
    if (sec && strcmp(sec, "layer") == 0)
      layers++;
    for (int j = 0; j < torc_config_section_key_count(cfg, i); j++) {
      const char *key = torc_config_section_key(cfg, i, j);
      const char *v = key ? torc_config_section_get(cfg, i, key) : NULL;
      if (v == NULL)
        continue;
      long long prod = 1;
      int is_input = is_model && strcmp(key, "input") == 0;
      if (!small_numbers(v, FUZZ_INI_MAX_INT, is_input ? &prod : NULL,
                         FUZZ_INI_MAX_INPUT))
        return 0;
      if (is_input && prod > FUZZ_INI_MAX_INPUT)
        return 0;
    }
  }
  return layers <= FUZZ_INI_MAX_LAYERS;
}

static void build_and_describe(const torc_config *cfg) {
  int64_t shape[TORC_MAX_DIMS + 1];
  int nd = 0;
  torc_module *m = torc_module_from_config(cfg, shape + 1, &nd);
  if (m == NULL) {
    torc_clear_error();
    return;
  }
  shape[0] = 1;
  torc_tensor *x = nd >= 0 && nd < TORC_MAX_DIMS
                       ? torc_zeros(shape, nd + 1, TORC_F32, TORC_CPU)
                       : NULL;
  free(torc_module_repr(m));
  if (x)
    free(torc_module_summary(m, x));
  torc_release(x);
  torc_module_free(m);
  torc_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  torc_config *cfg = torc_config_parse(text, "fuzz.ini");
  free(text);
  if (cfg == NULL) {
    torc_clear_error();
    return 0;
  }
  /* What the accessors return for every section and key. */
  for (int i = 0; i < torc_config_section_count(cfg); i++) {
    const char *sec = torc_config_section_name(cfg, i);
    for (int j = 0; j < torc_config_section_key_count(cfg, i); j++) {
      const char *key = torc_config_section_key(cfg, i, j);
      if (sec && key) {
        (void)torc_config_get(cfg, sec, key);
        (void)torc_config_line(cfg, sec, key);
      }
    }
    const char *spec = torc_config_section_get(cfg, i, "transform");
    if (sec && strncmp(sec, "data.", 5) == 0 && spec) {
      torc_transform_free(torc_transform_parse(spec));
      torc_clear_error();
    }
  }
  if (torc_config_set(cfg, "torc.seed=1") != TORC_OK)
    torc_clear_error();
  if (small_model(cfg))
    build_and_describe(cfg);
  torc_config_free(cfg);
  torc_clear_error();
  return 0;
}
