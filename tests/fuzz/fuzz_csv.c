/* tests/fuzz/fuzz_csv.c — libFuzzer harness of the data plugin's "csv"
 * source (plugins/data/csv.c), through the public data API: byte 0 picks
 * the options (bit 0: no header line; bits 1-2: delimiter comma, tab,
 * semicolon or pipe; bit 3: regression; bit 4: label column 0 instead of
 * the last; bit 5: feature columns "0,1"; bit 6: the text column mode,
 * text_column 0 (1 with bit 4) and max_len 8; bit 7, with bit 6: level =
 * byte), the rest is the CSV file. In the text mode at char level bit 5
 * instead means that the input begins with a vocabulary file, up to its
 * first NUL byte (without it: unk = yes, padding_side = left). The source
 * is opened on it and every sample is read.
 */
#include "fuzz_common.h"

#include <string.h>

static char csv_path[1100], vocab_path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("data");
  fuzz_path(csv_path, sizeof csv_path, "table.csv");
  fuzz_path(vocab_path, sizeof vocab_path, "table.vocab");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  static const char *const delims[] = {"comma", "tab", "semicolon", "pipe"};
  int flags = data[0];
  data++;
  size--;
  const char *keys[10] = {"path", "header", "delimiter", "task",
                          "label_column"};
  const char *values[10] = {csv_path, flags & 1 ? "no" : "yes",
                            delims[(flags >> 1) & 3],
                            flags & 8 ? "regression" : "classification",
                            flags & 16 ? "0" : "last"};
  int n = 5;
  if (flags & 64) {
    keys[n] = "text_column";
    values[n++] = flags & 16 ? "1" : "0";
    keys[n] = "max_len";
    values[n++] = "8";
    if (flags & 128) {
      keys[n] = "level";
      values[n++] = "byte";
    } else if (flags & 32) {
      const uint8_t *nul = memchr(data, 0, size);
      size_t vlen = nul ? (size_t)(nul - data) : size;
      fuzz_write(vocab_path, data, vlen);
      data += nul ? vlen + 1 : vlen;
      size -= nul ? vlen + 1 : vlen;
      keys[n] = "vocab";
      values[n++] = vocab_path;
    } else {
      keys[n] = "unk";
      values[n++] = "yes";
      keys[n] = "padding_side";
      values[n++] = "left";
    }
  } else if (flags & 32) {
    keys[n] = "feature_columns";
    values[n++] = "0,1";
  }
  fuzz_write(csv_path, data, size);
  fuzz_read_dataset("csv", keys, values, n);
  return 0;
}
