/* tests/fuzz/fuzz_csv.c — libFuzzer harness of the data plugin's "csv"
 * source (plugins/data/csv.c), through the public data API: byte 0 picks
 * the options (bit 0: no header line; bits 1-2: delimiter comma, tab,
 * semicolon or pipe; bit 3: regression; bit 4: label column 0 instead of
 * the last; bit 5: feature columns "0,1"), the rest is the CSV file. The
 * source is opened on it and every sample is read.
 */
#include "fuzz_common.h"

static char csv_path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("data");
  fuzz_path(csv_path, sizeof csv_path, "table.csv");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  static const char *const delims[] = {"comma", "tab", "semicolon", "pipe"};
  int flags = data[0];
  fuzz_write(csv_path, data + 1, size - 1);
  const char *keys[6] = {"path", "header", "delimiter", "task",
                         "label_column"};
  const char *values[6] = {csv_path, flags & 1 ? "no" : "yes",
                           delims[(flags >> 1) & 3],
                           flags & 8 ? "regression" : "classification",
                           flags & 16 ? "0" : "last"};
  int n = 5;
  if (flags & 32) {
    keys[n] = "feature_columns";
    values[n++] = "0,1";
  }
  fuzz_read_dataset("csv", keys, values, n);
  return 0;
}
