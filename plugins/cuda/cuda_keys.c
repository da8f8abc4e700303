/* plugins/cuda/cuda_keys.c — the keys of [plugin.cuda] with their docs and
 * defaults, and their parsing: each a yes/no switch, checked at load so a
 * typo fails before any work rather than when the first kernel runs.
 */
#include <string.h>

#include "cuda_internal.h"

torc_cuda_settings torc_cuda__settings;

const torc_plugin_key torc_cuda__keys[] = {
    {"tf32",
     "yes or no: let f32 matmul and convolution use TF32 tensor cores "
     "(about 10 bits of mantissa in the products: faster, less exact, as "
     "PyTorch's allow_tf32)",
     "no"},
    {"benchmark",
     "yes or no: let cuDNN time its algorithms for each new shape and keep "
     "the fastest (as torch.backends.cudnn.benchmark)",
     "no"},
    {"deterministic",
     "yes or no: use only algorithms whose results are the same from run "
     "to run (no atomics-ordered sums; may be slower); [torc] "
     "deterministic = yes implies it",
     "no"},
    {NULL, NULL, NULL}};

/* yes/no (and true/false, on/off, 1/0, as the core's booleans). */
static int parse_bool(const torc_host *host, const char *key, const char *v,
                      int *out) {
  static const char *const yes[] = {"yes", "true", "on", "1"};
  static const char *const no[] = {"no", "false", "off", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
    if (strcmp(v, yes[i]) == 0) {
      *out = 1;
      return TORC_OK;
    }
    if (strcmp(v, no[i]) == 0) {
      *out = 0;
      return TORC_OK;
    }
  }
  return host->set_error(TORC_ERR_CONFIG,
                         "[plugin.cuda] %s = %s: expected yes or no "
                         "(also true/false, on/off, 1/0)",
                         key, v);
}

int torc_cuda__read_keys(const torc_host *host, torc_plugin *self) {
  struct {
    const char *key;
    int *dst;
  } keys[] = {{"tf32", &torc_cuda__settings.tf32},
              {"benchmark", &torc_cuda__settings.benchmark},
              {"deterministic", &torc_cuda__settings.deterministic}};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    const char *v =
        host->config_get ? host->config_get(self, keys[i].key) : NULL;
    *keys[i].dst = 0;
    if (v == NULL)
      continue;
    int st = parse_bool(host, keys[i].key, v, keys[i].dst);
    if (st != TORC_OK)
      return st;
  }
  return TORC_OK;
}
