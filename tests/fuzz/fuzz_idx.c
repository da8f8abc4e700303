/* tests/fuzz/fuzz_idx.c — libFuzzer harness of the data plugin's "idx"
 * source (plugins/data/idx.c), through the public data API: byte 0 holds
 * flags (bit 0: gzip the images file, bit 1: gzip the labels file, so the
 * fuzzer reaches the gzip path with a raw IDX it can mutate; a gzip stream
 * in the input itself is read as gzip too), then a 4-byte little-endian
 * length of the labels file, the labels file and the images file. The
 * source is opened on both (without its decoded-data cache) and every
 * sample is read.
 */
#include "fuzz_common.h"

#include <zlib.h>

static char images_path[1100], labels_path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_setup();
  fuzz_load_plugin("data");
  fuzz_path(images_path, sizeof images_path, "images-idx3-ubyte");
  fuzz_path(labels_path, sizeof labels_path, "labels-idx1-ubyte");
  return 0;
}

/* Writes n bytes to path, gzip-compressed when gz. */
static void write_maybe_gz(const char *path, const uint8_t *p, size_t n,
                           int gz) {
  if (!gz) {
    fuzz_write(path, p, n);
    return;
  }
  gzFile f = gzopen(path, "wb1");
  if (f == NULL || (n && gzwrite(f, p, (unsigned)n) != (int)n) ||
      gzclose(f) != Z_OK) {
    fprintf(stderr, "fuzz: cannot write %s\n", path);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  int flags = data[0];
  const uint8_t *labels, *images;
  size_t nl, ni;
  if (!fuzz_split(data + 1, size - 1, &labels, &nl, &images, &ni))
    return 0;
  write_maybe_gz(images_path, images, ni, flags & 1);
  write_maybe_gz(labels_path, labels, nl, flags & 2);
  const char *keys[] = {"images", "labels"};
  const char *values[] = {images_path, labels_path};
  fuzz_read_dataset("idx", keys, values, 2);
  return 0;
}
