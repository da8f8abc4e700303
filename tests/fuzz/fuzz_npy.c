/* tests/fuzz/fuzz_npy.c — libFuzzer harness of the data plugin's "npy"
 * source (plugins/data/npy.c), through the public data API as a training
 * run uses it: the input is split into an inputs .npy and a targets .npy
 * (a 4-byte little-endian length of the first, then both files), the
 * source is opened on them and every sample is read.
 */
#include "fuzz_common.h"

static char inputs_path[1100], targets_path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("data");
  fuzz_path(inputs_path, sizeof inputs_path, "inputs.npy");
  fuzz_path(targets_path, sizeof targets_path, "targets.npy");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *a, *b;
  size_t na, nb;
  if (!fuzz_split(data, size, &a, &na, &b, &nb))
    return 0;
  fuzz_write(inputs_path, a, na);
  fuzz_write(targets_path, b, nb);
  const char *keys[] = {"inputs", "targets"};
  const char *values[] = {inputs_path, targets_path};
  fuzz_read_dataset("npy", keys, values, 2);
  return 0;
}
