/* tests/fuzz/fuzz_text.c — libFuzzer harness of the data plugin's "text"
 * source (plugins/data/text.c), through the public data API: byte 0 picks
 * the options (bit 0: level byte instead of char; bits 1-2: split all,
 * train or test; bit 3: target next; bit 4: unk = yes; bit 5: the input
 * begins with a vocabulary file, up to its first NUL byte; bit 6:
 * encoding = onehot), byte 1 the
 * window (context 1 + bits 0-4, stride 1 + bits 5-7), the rest is the
 * text. The source is opened on it and every window is read.
 */
#include "fuzz_common.h"

#include <string.h>

static char text_path[1100], vocab_path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("data");
  fuzz_path(text_path, sizeof text_path, "corpus.txt");
  fuzz_path(vocab_path, sizeof vocab_path, "corpus.vocab");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  static const char *const splits[] = {"all", "train", "test", "all"};
  int flags = data[0], win = data[1];
  data += 2;
  size -= 2;
  const char *keys[9] = {"path", "level", "split", "target", "context",
                         "stride"};
  char context[8], stride[8];
  snprintf(context, sizeof context, "%d", 1 + (win & 31));
  snprintf(stride, sizeof stride, "%d", 1 + (win >> 5));
  const char *values[9] = {text_path, flags & 1 ? "byte" : "char",
                           splits[(flags >> 1) & 3],
                           flags & 8 ? "next" : "sequence", context, stride};
  int n = 6;
  if (flags & 16) {
    keys[n] = "unk";
    values[n++] = "yes";
  }
  if (flags & 64) {
    keys[n] = "encoding";
    values[n++] = "onehot";
  }
  if (flags & 32) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t vlen = nul ? (size_t)(nul - data) : size;
    fuzz_write(vocab_path, data, vlen);
    data += nul ? vlen + 1 : vlen;
    size -= nul ? vlen + 1 : vlen;
    keys[n] = "vocab";
    values[n++] = vocab_path;
  }
  fuzz_write(text_path, data, size);
  fuzz_read_dataset("text", keys, values, n);
  return 0;
}
